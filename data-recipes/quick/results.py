"""RESULTS.md of data-recipes/quick from its cells (make results)."""

import tables as t


def main(argv):
    s = t.Settings(argv)
    inits = [f"random-s{x}" for x in s.words("SEEDS")] if s["INIT"] == "random" else ["harmonic"]
    evals, rows, first = [], [], None
    for algo in s.words("ALGOS"):
        config = algo + (f"-a{s['ALPHA']}" if algo == "vb" else "") + f"-i{s['ITERATIONS']}"
        runs = [t.DepEval(s.path(f"{config}-{i}.eval")) for i in inits]
        evals += [r.path for r in runs]
        first = first or runs[0]
        acc = {k: [r.score(k) for r in runs] for k in t.SUBSETS}
        und = {k: [r.score(k, "undirected") for r in runs] for k in t.SUBSETS}
        over = [float(r.runs[0][1][k]["overlap_right"]) for r in runs for k in ("<=10",)]
        notes = [t.near_note(b, [k for k in t.SUBSETS if t.near(sum(acc[k]) / len(acc[k]), runs[0].baseline(b, k))])
                 for b in ("right", "left")]
        unparsed = sorted({r.unparsed() for r in runs})
        rows.append([{"em": "EM", "vb": "VB"}[algo], "—" if algo == "em" else s["ALPHA"], s["ITERATIONS"],
                     s["INIT"], str(len(runs)),
                     " / ".join(t.mean_sd(acc[k]) for k in t.SUBSETS),
                     " / ".join(t.mean_sd(und[k]) for k in t.SUBSETS),
                     t.mean_sd(over), "/".join(map(str, unparsed)), "; ".join(n for n in notes if n)])
    for b in ("right", "left"):
        rows.append([f"**attach-{b}** (baseline)", "—", "—", "—", "—",
                     " / ".join(t.pct(first.baseline(b, k)) for k in t.SUBSETS),
                     " / ".join(t.pct(first.baseline(b, k, "undirected")) for k in t.SUBSETS),
                     "100" if b == "right" else t.pct(float(first.baselines["attach-left:<=10"]["overlap_right"])),
                     "0", ""])
    n10 = first.runs[0][1]["<=10"]["sentences"]
    nall = first.runs[0][1]["all"]["sentences"]
    body = t.table(["algorithm", "α", "iterations", "init", "runs", "directed ≤10 / ≤20 / all",
                    "undirected ≤10 / ≤20 / all", "overlap with attach-right ≤10", "unparsed", "note"], rows,
                   "lllllrrrrl")
    body += (f"\n\nThe DMV over UPOS tags (punctuation removed) of the shipped EWT sample's train sentences of ≤ 10 "
             f"words; directed and undirected attachment accuracy (%) on its test sentences ({n10} of ≤ 10 words, "
             f"{nall} in all), Viterbi decoding; mean±sd over the runs (seeds). \"overlap\": the share of predicted "
             "arcs that are attach-right's. \"note\": a mean within 1 point of a baseline (a method that lands on "
             "a baseline is a finding, not a result).")
    return t.document(s, [t.section("DMV on the shipped EWT sample", s.command(), body)], evals)
