"""RESULTS.md of data-recipes/bayes from its cells (make results)."""
import statistics

import tables as t

RANDOM = {"cvb", "gibbs", "hastings", "stochastic"}
SINGLE = {"streaming": "1pass", "stochastic": "5epochs"}
LABEL = {"vb": "VB", "cvb": "CVB", "gibbs": "Gibbs", "hastings": "Hastings",
         "streaming": "streaming VB (minibatches of 500, 5 VB iterations each)",
         "stochastic": "stochastic VB (minibatches of 500, τ = 1, κ = 0.7)"}


def label(algo, alpha):
    if algo == "em":
        return "EM (maximum likelihood)" if float(alpha) == 1 else "MAP-EM"
    return LABEL[algo]


def runs(s, init, algo, alpha):
    budget = SINGLE.get(algo, f"p{s['PASSES']}")
    seeds = s.words("SEEDS") if algo in RANDOM else [None]
    return [s.path(init, f"{algo}-a{alpha}-{budget}" + (f"-s{x}" if x else "")) for x in seeds]


def budget(s, algo, prefixes):
    if algo in SINGLE:
        return {"streaming": "1 pass", "stochastic": "5 epochs"}[algo]
    ran = sorted({int(t.tsv(p + ".tsv")[-1]["step"]) for p in prefixes})   # what the traces say ran
    if ran == [int(s["PASSES"])]:
        return f"{s['PASSES']} passes"
    return f"{'-'.join(map(str, (ran[0], ran[-1]) if len(ran) > 1 else ran))} passes (of {s['PASSES']})"


def main(argv):
    s = t.Settings(argv)
    inits, heads, algos = s.words("INITS"), s.words("HEADS"), s.words("ALGOS")
    alphas = sorted(s.words("ALPHAS"), key=float, reverse=True)
    groups = [(i, a, x) for i in inits for single in (False, True) for x in alphas for a in algos
              if (a in SINGLE) == single]
    evals, sections = [], []
    whole = [g for g in groups if g[1] in ("em", "vb")]   # their traces count every training sentence
    ntrain = f": {int(t.tsv(runs(s, *whole[0])[0] + '.tsv')[0]['sentences']):,} sentences" if whole else ""
    for h in heads:
        rows, base = [], None
        for k, (init, algo, alpha) in enumerate(groups):
            prefixes = runs(s, init, algo, alpha)
            evs = [t.DepEval(p + f".viterbi.{h}.eval") for p in prefixes]
            evals += [e.path for e in evs]
            base = base or evs[0]
            if k and algo in SINGLE and groups[k - 1][1] not in SINGLE:
                rows.append(["*single-pass algorithms, at their own budgets:*"] + [""] * (7 + (len(inits) > 1)))
            acc = {k2: [e.score(k2) for e in evs] for k2 in t.SUBSETS}
            over = {k2: [float(e.runs[0][1][k2]["overlap_right"]) for e in evs] for k2 in ("<=10", "all")}
            secs = statistics.mean(float(t.tsv(p + ".tsv")[-1]["seconds"]) for p in prefixes)
            notes = [t.near_note(b, [k2 for k2 in t.SUBSETS if t.near(statistics.mean(acc[k2]), base.baseline(b, k2))])
                     for b in ("right", "left")]
            notes = [n for n in notes if n]
            unparsed = sorted({e.unparsed() for e in evs})
            if unparsed != [0]:
                notes.append(f"{'/'.join(map(str, unparsed))} test sentences without a parse (scored 0)")
            rows.append(([init] if len(inits) > 1 else []) + [
                label(algo, alpha), alpha, budget(s, algo, prefixes), str(len(evs)),
                " / ".join(t.mean_sd(acc[k2]) for k2 in t.SUBSETS),
                " / ".join(t.mean_sd(over[k2]) for k2 in ("<=10", "all")), t.seconds_text(secs), "; ".join(notes)])
        pad = [""] if len(inits) > 1 else []
        baselines = [pad + ["**attach-right** (baseline)", "—", "—", "—",
                            "**" + " / ".join(t.pct(base.baseline("right", k)) for k in t.SUBSETS) + "**",
                            "100 / 100", "—", ""],
                     pad + ["attach-left (baseline)", "—", "—", "—",
                            " / ".join(t.pct(base.baseline("left", k)) for k in t.SUBSETS),
                            " / ".join(t.pct(float(base.baselines[f"attach-left:{k}"]["overlap_right"]))
                                       for k in ("<=10", "all")), "—", ""]]
        head = (["init"] if len(inits) > 1 else []) + [
            "algorithm", "α", "budget", "runs", "directed ≤10 / ≤20 / all", "overlap with attach-right ≤10 / all",
            "seconds", "note"]
        gold = {"content": "UD's content heads (the gold as released)",
                "function": "function heads (the test set re-headed by `grind function-heads`)"}[h]
        body = t.table(head, baselines + rows, "l" * (len(head) - 5) + "lrrrl") + (
            f"\n\nScored against {gold}. The DMV on UD English-EWT train ≤ 10 words (UPOS, punctuation removed "
            f"before the length filter{ntrain}), initialiser "
            f"{' / '.join(inits)}; budget {s['PASSES']} passes for every algorithm (EM / VB iterations, CVB, Gibbs "
            "and Hastings sweeps; Hastings annealed from T = 5 to 1); Viterbi under the posterior mean; directed "
            "accuracy (%) on test ≤ 10 / ≤ 20 / all words (punctuation removed before scoring, heads re-attached, "
            f"root arc counted). Random algorithms ran with seeds {', '.join(s.words('SEEDS'))}: mean±sample sd; EM, "
            "VB and streaming VB are deterministic (one run). Overlap = the share of predicted arcs identical to "
            "attach-right's (the same parses under either gold). Seconds: training wall time from the trace, one "
            "core of a shared machine (indicative only).")
        title = {"content": "Every algorithm at an equal budget",
                 "function": "Every algorithm at an equal budget, against function heads"}[h]
        sections.append(t.section(title, s.command(), body))
    return t.document(s, sections, evals)
