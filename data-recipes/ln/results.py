"""RESULTS.md of data-recipes/ln from its cells (make results); see tables.document for the sections it keeps."""
import os

import tables as t

TB = {"ewt": "English-EWT", "pt": "Portuguese-Bosque", "tr": "Turkish-IMST", "zh": "Chinese-GSD r1.4"}
GOLD = {"content": "content heads (UD's)", "function": "function heads (grind function-heads)",
        "ctb": "the CTB's Penn2Malt heads (grind function-heads --relations case,case:dec,cop,aux,auxpass,aux:caus)"}
LABEL = {"mle": "MLE (EM)", "dirichlet": "Dirichlet VB", "ln-identity": "LN-I, identity Σ",
         "ln-families": "LN-I, families Σ", "ln-families-newton": "LN-I, families Σ, `--ln-mstep newton`",
         "sln-tiev": "SLN TieV", "sln-tien": "SLN TieN", "sln-tievn": "SLN TieV&N", "sln-tiea": "SLN TieA"}


def name(s, m, dev):
    if m == "mle":
        return f"mle-i{s['EM_ITER']}"
    if m == "dirichlet":
        return f"dirichlet-a{s['ALPHA']}-i{s['EM_ITER']}"
    tag = f"-i{s['LN_ITER'] or 'conv'}"
    return m + tag + (f"-p{s['PATIENCE']}" if dev and not m.endswith("-nostop") else "")


def label(s, m):
    base = LABEL.get(m, f"`{m}`")
    if m in ("mle", "dirichlet"):
        return base + (f" (α = {s['ALPHA']})" if m == "dirichlet" else "") + f", ≤ {s['EM_ITER']} iterations"
    return base + (f", ≤ {s['LN_ITER']} iterations" if s["LN_ITER"] else ", to convergence")


def cell(s, ev, prefix, cap):
    """'≤10 / ≤20 / all' with † where within a point of a baseline, and notes: an early stop, unparsed sentences."""
    marks = [t.pct(ev.score(k)) + ("†" if any(t.near(ev.score(k), ev.baseline(b, k)) for b in ("right", "left"))
                                   else "") for k in t.SUBSETS]
    notes = []
    steps = int(t.tsv(prefix + ".tsv")[-1]["step"])
    if cap and steps < int(cap):
        notes.append(f"stopped after {steps} iterations")
    if ev.unparsed():
        notes.append(f"{ev.unparsed()} test sentences without a parse, scored 0")
    return " / ".join(marks) + (f" ({'; '.join(notes)})" if notes else "")


def overlap(ev):
    return f"{100 * float(ev.runs[0][1]['all']['overlap_right']):.0f}%"


def baselines(ev):
    return [" / ".join(t.pct(ev.baseline(b, k)) for k in t.SUBSETS) for b in ("right", "left")]


def wide(s, rows_of, columns, title, made):
    """One row per method, a score and an overlap column per column key; baselines last."""
    head, rows, base = ["method"], [], {}
    for key, _ in columns:
        head += [key, "overlap"]
    for m, lab in rows_of:
        row = [lab]
        for key, get in columns:
            ev, prefix, cap = get(m)
            if ev is None:
                row += ["—", "—"]
                continue
            made.append(ev.path)
            base.setdefault(key, ev)
            row += [cell(s, ev, prefix, cap), overlap(ev)]
        rows.append(row)
    for i, b in enumerate(("**attach-right** (baseline)", "attach-left (baseline)")):
        rows.append([b] + [x for key, _ in columns for x in (baselines(base[key])[i] if key in base else "—",
                                                              "100%" if i == 0 else "—")])
    return t.table(head, rows, "l" + "rr" * len(columns))


def main(argv):
    s = t.Settings(argv)
    parts, made, sections = s.words("PARTS"), [], []
    cap_ln = s["LN_ITER"] or None
    p_note = ("Directed accuracy (%) under MBR decoding on test ≤ 10 / ≤ 20 / all words (root arc counted, "
              "punctuation removed before scoring); † within 1 point of a baseline; overlap = the share of "
              "predicted arcs equal to attach-right's (all test sentences); one run each, seed 1.")

    def getter(tb, gold, dev=True):
        def get(m):
            prefix = s.path(tb, name(s, m, dev))
            path = prefix + (f".mbr.{gold}.eval" if gold else ".mbr.eval")
            cap = None if m in ("mle", "dirichlet") else cap_ln
            return (t.DepEval(path), prefix, cap) if os.path.exists(path) else (None, prefix, cap)
        return get

    methods = [(m, label(s, m)) for m in s.words("ORDER")]
    if "main" in parts:
        for g in s.words("GOLDS"):
            tbs = [tb for tb in s.words("TREEBANKS") if g != "ctb" or tb == "zh"]
            if not tbs:
                continue
            body = wide(s, methods, [(TB[tb], getter(tb, g)) for tb in tbs], "", made) + (
                f"\n\nScored against {GOLD[g]}. Cohen & Smith (2010, Table 1)'s protocol: the DMV over UPOS of "
                "train ≤ 10 words (punctuation removed), harmonic initialiser (`km-global`), the grammar over the "
                "whole tag set; LN / SLN with Algorithm 1's early stop on dev ≤ 10 "
                f"(`--patience {s['PATIENCE']}`); SLN ties choose and stop after 5 untied iterations. " + p_note)
            sections.append(t.section(f"Part main, against {GOLD[g].split(' (')[0]}", s.command(), body))
    if "wsj" in parts:
        body = wide(s, methods, [("WSJ10 sample", getter("wsj", None, False))], "", made) + (
            "\n\nKlein & Manning's WSJ10 protocol on the NLTK PTB sample: its 537 sentences of ≤ 10 words after PTB "
            "punctuation removal, XPOS, the PTB tag families, trained and scored on the same sentences (no dev, so no "
            "early stop; every subset is the same sentences). " + p_note)
        sections.append(t.section("Part wsj: the WSJ10 sample", s.command(), body))
    if "joint" in parts:
        jn = f"ewt-zh-tiea-i{s['JOINT_ITER'] or s['LN_ITER'] or 'conv'}"
        rows = []
        for lang in ("ewt", "zh"):
            ev = t.DepEval(s.path("joint", f"{jn}.{lang}.mbr.eval"))
            made.append(ev.path)
            rows.append([TB[lang], cell(s, ev, s.path("joint", jn), None), overlap(ev),
                         t.p_text(ev.p_against("attach-right")), *baselines(ev)])
        body = t.table(["language", "SLN TieA, bilingual: ≤10 / ≤20 / all", "overlap", "p vs attach-right (all)",
                        "attach-right", "attach-left"], rows, "lrrrrr") + (
            "\n\nSLN TieA trained on English-EWT and Chinese-GSD r1.4 together (§5.4: every family's expert shared "
            "across the two languages after the 5 untied iterations), each language its own DMV and harmonic "
            "initialiser, no dev early stop. " + p_note)
        sections.append(t.section("Part joint: the bilingual pair", s.command(), body))
    if "extra" in parts:
        rows = []
        ev = t.DepEval(s.path("zh", name(s, "ln2-families", True) + ".mbr.content.eval"))
        made.append(ev.path)
        rows.append(["LN model II, families Σ", cell(s, ev, s.path("zh", name(s, "ln2-families", True)), cap_ln),
                     overlap(ev)])
        com = s.path("zh", name(s, "ln-families", True) + ".committee.eval")
        made.append(com)
        mean = {r[0]: dict(zip(head, r)) for _, head, rows_ in t.blocks(com) if head[:2] == ["subset", "directed_mean"]
                for r in rows_}
        rows.append(["committee of 10 grammars drawn from the LN-I families prior (mean ± sd)",
                     " / ".join(f"{100 * float(mean[k]['directed_mean']):.1f}±{100 * float(mean[k]['directed_sd']):.1f}"
                                for k in t.SUBSETS), "—"])
        rows.append(["**attach-right** / attach-left (baselines)", " · ".join(baselines(ev)), "100% / —"])
        body = t.table(["Chinese-GSD r1.4", "≤10 / ≤20 / all", "overlap"], rows, "lrr") + (
            "\n\nLN model II (θ drawn once for the corpus) and committee decoding (`grind parse --committee`, seeds "
            "1–10, of the LN-I families run of part main). " + p_note)
        sections.append(t.section("Part extra: Chinese, LN model II and a committee", s.command(), body))
    for part, title, rows_of in (
            ("wsjsize", "Part wsjsize: the WSJ10 sample, nested training sets",
             [(f"every{k}", "every sentence" if k == "1" else f"every {k}{'nd' if k == '2' else 'rd' if k == '3' else 'th'} "
               "sentence") for k in s.words("WSJSIZE_STEPS")]),
            ("wsjplus", "Part wsjplus: the WSJ10 sample + EWT ≤ 10 with PTB tags", [(".", "the sample + EWT")])):
        if part not in parts:
            continue
        ms = ["mle", "ln-families-newton"] if part == "wsjsize" else s.words("WSJPLUS_METHODS")
        head, rows = ["trained on", "sentences"], []
        for m in ms:
            head += [label(s, m), "overlap"]
        for sub, lab in rows_of:
            d = s.path(part, sub)
            row = [lab, f"{int(t.tsv(os.path.join(d, name(s, ms[0], False) + '.tsv'))[0]['sentences']):,}"]
            for m in ms:
                ev = t.DepEval(os.path.join(d, name(s, m, False) + ".mbr.eval"))
                made.append(ev.path)
                row += [cell(s, ev, os.path.join(d, name(s, m, False)), None if m == "mle" else cap_ln), overlap(ev)]
            rows.append(row)
        rows.append(["attach-right / attach-left", "", " · ".join(baselines(ev)), ""] + [""] * (2 * len(ms) - 2))
        body = t.table(head, rows, "lr" + "rr" * len(ms)) + (
            "\n\nEach training set with its own grammar and harmonic initialiser; scored "
            + ("on the smallest set, which every model was trained on" if part == "wsjsize" else "on the WSJ10 sample")
            + " (MBR, directed accuracy %). " + p_note)
        sections.append(t.section(title, s.command(), body))
    return t.document(s, sections, made)
