"""RESULTS.md of data-recipes/latent from its cells (make results); see tables.document for the sections it keeps."""
import os
import statistics

import tables as t

NAME = {"em": "EM", "vb": "VB", "cvb": "CVB", "gibbs": "Gibbs"}


def main(argv):
    s = t.Settings(argv)
    hs, algos, seeds = s.words("HS"), s.words("ALGOS"), s.words("SEEDS")
    tag = f"a{s['ALPHA']}-i{s['ITER']}"
    test_rows, curve_rows, made = [], [], []
    for h in hs:
        for a in (["pcfg"] if h == "1" else algos):
            prefixes = [s.path("h1", "pcfg")] if h == "1" else [s.path(f"h{h}", f"{a}-{tag}-s{x}") for x in seeds]
            f1 = [float(t.keyvalues(p + ".dev.eval")["all_labeled_f1"]) for p in prefixes]
            made += [p + ".dev.eval" for p in prefixes]
            label = "**treebank PCFG** (relative frequencies; the baseline)" if h == "1" else NAME[a]
            dev = f"{statistics.mean(f1):.1f}" + (f" ± {statistics.stdev(f1):.1f} ({len(f1)})" if len(f1) > 1 else "")
            best = s.path("h1", "pcfg") if h == "1" else s.path(f"h{h}", f"{a}-{tag}")
            e = t.keyvalues(best + ".test.eval")
            made.append(best + ".test.eval")
            run = prefixes[0] if h == "1" else s.path(open(best + ".best", encoding="utf-8").read().strip())
            train_s = "—" if h == "1" else f"{t.seconds(t.cell_log(s.out, os.path.relpath(run, s.out) + '.txt')):.0f}"
            parse_s = t.seconds(t.cell_log(s.out, os.path.relpath(best, s.out) + ".test.trees"))
            f = {k: f"{float(v):.1f}" for k, v in e.items() if k.startswith(("all_", "le40_"))}
            test_rows.append([h, label, dev, f"{f['all_labeled_precision']} / {f['all_labeled_recall']} / "
                              f"**{f['all_labeled_f1']}** / {f['all_exact_match']}",
                              f"{f['le40_labeled_f1']} / {f['le40_exact_match']}", os.path.basename(run), train_s,
                              f"{float(e['all_sentences']) / parse_s:.1f}" if parse_s == parse_s else "—"])
            if h != "1":
                traces = [t.tsv(p + ".tsv") for p in prefixes]
                steps = [r["step"] for r in traces[0] if r.get("dev_f1", "") not in ("", "nan")]
                curve_rows.append((h, a, {st: statistics.mean(float(next(r["dev_f1"] for r in tr if r["step"] == st))
                                                              for tr in traces) for st in steps}))
    body = t.table(["H", "method", "dev F1, mean ± sd (seeds)", "test P / R / **F1** / exact (dev-best seed)",
                    "test F1 / exact, ≤ 40 words", "dev-best run", "train s", "test sentences/s"], test_rows,
                   "llrrrlrr") + (
        "\n\nWang & Blunsom (2013) §4.3 on the NLTK PTB sample: `grind make-grammar treebank --subtypes H --seed S` "
        "(function tags and `-NONE-` removed, `X → X` collapsed, right-factored binarisation with horizontal "
        "Markovisation 0, training words seen once → signatures; every symbol but ROOT split into H subtypes, 1% "
        f"noise) on train (wsj_0001–0159), trained on the gold trees with subtypes hidden (`grind train --trees`, α = "
        f"{s['ALPHA']} on every rule for VB and CVB, {s['ITER']} iterations / sweeps, `--tolerance 0`); dev "
        "(wsj_0160–0179) decoded by max-rule-sum with coarse-to-fine pruning (threshold "
        f"{s['PRUNE']}); the seed with the best dev F1 decoded on test (wsj_0180–0199). `grind eval --labeled` (EVALB "
        "COLLINS.prm conventions), %. Seconds: wall time from the cells' logs on a shared machine (indicative only).")
    sections = [t.section("Latent-annotation treebank PCFGs: dev and test", s.command(), body)]
    if curve_rows:
        steps = sorted({st for _, _, c in curve_rows for st in c}, key=int)
        rows = [[h, NAME[a]] + [f"{c[st]:.1f}" if st in c else "—" for st in steps] for h, a, c in curve_rows]
        body = t.table(["H", "method"] + steps, rows, "ll" + "r" * len(steps)) + (
            f"\n\nDev F1 (%, mean of the seeds) during training, from the traces (`--eval-every {s['EVAL']}`).")
        sections.append(t.section("Learning curves: dev F1 during training", s.command(), body))
    return t.document(s, sections, made)
