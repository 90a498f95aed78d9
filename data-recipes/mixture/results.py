"""RESULTS.md of data-recipes/mixture from its cells (make results); see tables.document for the sections it keeps."""

import tables as t

COMPONENT = {"RA": "RightAttach", "AR": "AllRight", "LC": "LeftChain", "VAR": "VerbAsRoot", "NS": "NounSequence",
             "SD": "ShortDep"}
GOLD = {"content": "content heads", "function": "function heads", "ctb": "`zh-ctb` heads"}


def main(argv):
    s = t.Settings(argv)
    n, alpha, golds = s["ITERATIONS"], s["ALPHA"], s.words("GOLDS")
    bname = {"ln": "ln", "vb": f"vb-a{alpha}", "em": "em"}
    blabel = {"ln": "LN-I families", "vb": f"Dirichlet VB (α = {alpha})", "em": "MAP-EM (α = 1)"}
    rows_of = []                                  # (label, cell name)
    for b in s.words("BASES"):
        rows_of.append((f"*over {blabel[b]}:* {blabel[b]} alone, {n} iterations (the unconstrained base)",
                        f"base-{bname[b]}-i{n}"))
        rows_of += [(f"mixture {COMPONENT.get(k, k)}", f"mix-{k}-{bname[b]}-I-i{n}") for k in s.words("MIXTURES")]
    for x in s.words("EXTRA"):
        k, b, sched = x.split(":")
        rows_of.append((f"{k} over {blabel[b]}, schedule {sched}", f"mix-{k}-{bname[b]}-{sched}-i{n}"))
    made, rows, base = [], [], None
    for lab, cell in rows_of:
        evs = {g: t.DepEval(s.path(f"{cell}.mbr.{g}.eval")) for g in golds}
        made += [e.path for e in evs.values()]
        base = base or evs
        row = [lab]
        for ev in evs.values():
            marks = [t.pct(ev.score(k)) + ("†" if any(t.near(ev.score(k), ev.baseline(b, k)) for b in ("right", "left"))
                                           else "") for k in t.SUBSETS]
            row.append(" / ".join(marks) + (f" ({ev.unparsed()} unparsed, scored 0)" if ev.unparsed() else ""))
        first = next(iter(evs.values()))
        p = first.p_against("attach-right")
        row += [f"{100 * float(first.runs[0][1]['all']['overlap_right']):.0f}%", t.p_text(p)]
        rows.append(row)
    for i, b in enumerate(("right", "left")):
        rows.append([f"{'**attach-right**' if i == 0 else 'attach-left'} (baseline)"]
                    + [" / ".join(t.pct(ev.baseline(b, k)) for k in t.SUBSETS) for ev in base.values()]
                    + ["100%" if i == 0 else "—", "—"])
    body = t.table(["method"] + [f"{GOLD[g]} ≤10 / ≤20 / all" for g in golds]
                   + ["overlap with attach-right", f"p vs attach-right (all, {GOLD[golds[0]]})"], rows,
                   "l" + "r" * (len(golds) + 2)) + (
        f"\n\nCohen & Smith (2009)'s posterior mixtures on UD Chinese-GSD r1.4 (426 training sentences ≤ 10 words, "
        "UPOS, punctuation removed, harmonic initialiser): each component mixed into the posterior over trees of the "
        f"base model, schedule I (the cap on the mean-field coefficient rises from 0.85 by 1% a step to 0.95) unless "
        f"named, {n} iterations; MBR decoding; directed accuracy (%) against each gold (the same parses: the overlap "
        "does not depend on the gold); † within 1 point of a baseline; p: paired approximate randomization test "
        "(`grind eval --significance`, 10,000 samples, seed 1) of the directed accuracy on all test sentences "
        "against attach-right's.")
    return t.document(s, [t.section("Posterior mixtures on Chinese-GSD r1.4", s.command(), body)], made)
