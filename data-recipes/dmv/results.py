"""RESULTS.md of data-recipes/dmv from its cells (make results)."""

import tables as t


def pair(ev, subset, which=None):
    """directed / undirected (%) of the run, or of attach-WHICH."""
    if which:
        return f"{t.pct(ev.baseline(which, subset))} / {t.pct(ev.baseline(which, subset, 'undirected'))}"
    return f"{t.pct(ev.score(subset))} / {t.pct(ev.score(subset, 'undirected'))}"


def overlap(ev, subsets, which=None):
    row = ev.baselines if which else ev.runs[0][1]
    key = (lambda k: f"attach-{which}:{k}") if which else (lambda k: k)
    return " / ".join(f"{100 * float(row[key(k)]['overlap_right']):.0f}%" for k in subsets)


def main(argv):
    s = t.Settings(argv)
    em, cem = f"em-i{s['ITERATIONS']}", f"em-i{s['CHILDES_ITERATIONS']}"
    ewt = {d: t.DepEval(s.path("ewt", f"{em}.{d}.test.eval")) for d in ("viterbi", "mbr")}
    wsj = {d: t.DepEval(s.path("wsj10", f"{em}.{d}.sample.eval")) for d in ("viterbi", "mbr")}
    name = {"viterbi": "EM, Viterbi", "mbr": "EM, MBR"}
    first = ewt["viterbi"]
    rows = [[name[d], *(pair(ev, k) for k in t.SUBSETS), overlap(ev, ("<=10", "all"))] for d, ev in ewt.items()]
    rows.append(["**attach-right** (baseline)", *(pair(first, k, "right") for k in t.SUBSETS), "100%"])
    rows.append(["attach-left (baseline)", *(pair(first, k, "left") for k in t.SUBSETS),
                 overlap(first, ("<=10", "all"), "left")])
    n = {k: first.runs[0][1][k]["sentences"] for k in t.SUBSETS}
    ewt_body = t.table(["decoder", "test ≤ 10", "test ≤ 20", "test all", "overlap with attach-right (≤ 10 / all)"],
                       rows) + (
        f"\n\nDirected / undirected attachment accuracy (%). UD English-EWT: the DMV over UPOS (punctuation, UPOS "
        f"`PUNCT`, removed before the length filter) of the train sentences of ≤ 10 words, harmonic initialiser "
        f"(`km-global`), {s['ITERATIONS']} EM iterations; scored on test with punctuation removed (heads "
        f"re-attached), lengths after removal ({n['<=10']} / {n['<=20']} / {n['all']} test sentences); overlap = the "
        "share of predicted arcs equal to attach-right's.")
    wfirst = wsj["viterbi"]
    wrows = [[name[d], pair(ev, "all"), overlap(ev, ("all",))] for d, ev in wsj.items()]
    wrows.append(["**attach-right** (baseline)", pair(wfirst, "all", "right"), "100%"])
    wrows.append(["attach-left (baseline)", pair(wfirst, "all", "left"), overlap(wfirst, ("all",), "left")])
    wsj_body = t.table(["decoder", "WSJ10 sample", "overlap with attach-right"], wrows) + (
        f"\n\nKlein & Manning's protocol on the NLTK 10% Penn Treebank sample: its "
        f"{wfirst.runs[0][1]['all']['sentences']} sentences of ≤ 10 words after removing the PTB punctuation tags, "
        f"XPOS, trained and scored on the same sentences, {s['ITERATIONS']} EM iterations. Klein & Manning report "
        "43.2% directed on the full WSJ10 (7,422 sentences).")
    g = t.header(s.path("childes", "dmv0.txt"))
    tr = t.tsv(s.path("childes", f"{cem}.tsv"))
    secs = [float(r["seconds"]) for r in tr]
    steps = [b - a for a, b in zip([0.0] + secs, secs)]
    types = g.get("tagset", "").rsplit("(", 1)[-1].split()[0]
    ch_body = t.table(["sentences", "word types", "rules", "EM iteration (s)", f"{len(tr)} iterations (s)"],
                      [[f"{int(tr[0]['sentences']):,}", f"{int(types):,}", f"{int(g['rules']):,}",
                        f"{min(steps):.2f}–{max(steps):.2f}", f"{secs[-1]:.2f}"]], "rrrrr") + (
        "\n\nThe lexicalized DMV from words alone (lower-cased FORM) on UD English-CHILDES train, sentences of "
        "4–15 words after punctuation removal (choose rules only for co-occurring triples); seconds of one core "
        "from the trace (`grind train --trace`), indicative only: the machine may be shared.")
    return t.document(s, [
        t.section("DMV + EM + harmonic initialiser on UD English-EWT", s.command(), ewt_body),
        t.section("Klein & Manning's WSJ10 protocol on the PTB sample", s.command(), wsj_body),
        t.section("Lexicalized DMV on CHILDES words: time per EM iteration", s.command(), ch_body),
    ], [ev.path for ev in (*ewt.values(), *wsj.values())])
