"""RESULTS.md of data-recipes/words-alone from its cells (make results): the learning curves' points at one pass
and at the end, the paper's claims point by point, the scale run, and make fisher's table when it was made."""
import math
import os
import statistics

import tables as t

ALGO_NAMES = {"vb": "batch VB", "streaming": "streaming VB", "stochastic": "stochastic VB", "cvb": "collapsed VB"}
ORDER = ["vb", "streaming", "stochastic", "cvb"]


def run_name(s, algo):
    """A run's settings as the Makefile names its cells (ALGO_NAME there)."""
    return {"vb": f"vb-tol{s['TOL']}-cap{s['VB_CAP']}",
            "streaming": f"streaming-first{s['FIRST']}-b1-k1",
            "stochastic": f"stochastic-b{s['SVB_BATCH']}-e{s['EPOCHS']}-kappa{s['KAPPA']}-tau{s['TAU']}-k1",
            "cvb": f"cvb-tol{s['TOL']}-cap{s['CVB_CAP']}"}[algo]


def traces(s, d, algos):
    """(algo, init) -> the trace paths of the shuffles, in directory D under OUT."""
    return {(a, i): [s.path(d, f"a{s['ALPHA']}", f"{run_name(s, a)}-ev{s['PER_DECADE']}-{i}-s{x}.tsv")
                     for x in s.words("SHUFFLES")]
            for a in algos for i in s.words("INITS")}


def evaluations(path):
    """(sentences, directed, log probability) of the evaluated steps of a trace."""
    out = [(float(r["sentences"]), float(r["dev_directed"]), float(r["dev_logprob"])) for r in t.tsv(path)
           if r.get("dev_logprob")]
    if not out:
        raise SystemExit(f"results: {path}: no held-out evaluation in the trace")
    return out


def at_or_before(evals, x):
    """The last evaluation at or before x sentences (None if none)."""
    best = None
    for e in evals:
        if e[0] <= x:
            best = e
    return best


def ms(values, scale=100.0, digits=1):
    """mean ± sd over the runs (sample sd), scaled."""
    return t.mean_sd(list(values), digits, scale).replace("±", " ± ")


def peak_mib(path):
    """The peak resident memory peak.py wrote beside a trace (MiB), None if none."""
    try:
        with open(path[:-len(".tsv")] + ".rss") as f:
            return int(f.read().strip()) / 2 ** 20
    except (OSError, ValueError):
        return None


def name(k):
    return f"{ALGO_NAMES.get(k[0], k[0])} ({k[1]})"


class Curves:
    """The runs of one directory: evals[(algo, init)] = each shuffle's evaluations."""

    def __init__(self, paths):
        self.paths = paths
        self.evals = {k: [evaluations(p) for p in ps] for k, ps in paths.items()}
        self.keys = sorted(self.evals, key=lambda k: (ORDER.index(k[0]), k[1]))
        # one pass over the training text: batch or collapsed VB's first step, else streaming VB's end
        self.one_pass = next((self.evals[k][0][0][0] for k in self.keys if k[0] in ("vb", "cvb")), None) or next(
            (self.evals[k][0][-1][0] for k in self.keys if k[0] == "streaming"), math.nan)

    def points(self, k, pick):
        return [p for p in (pick(ev) for ev in self.evals[k]) if p is not None]

    def mean(self, k, pick, i):
        pts = self.points(k, pick)
        return statistics.mean(p[i] for p in pts) if pts else math.nan


def main(argv):
    s = t.Settings(argv)
    d = f"len{s['MIN_LEN']}-{s['MAX_LEN']}"
    base = t.DepEval(s.path(d, "baselines.tsv"))
    right, left = base.baseline("right", "all"), base.baseline("left", "all")
    grid = Curves(traces(s, d, s.words("ALGOS")))
    scale = Curves(traces(s, "scale-" + d, s.words("SCALE_ALGOS")))
    first = int(s["FIRST"])
    made = [p for c in (grid, scale) for ps in c.paths.values() for p in ps] + [base.path]
    sections = [curves_section(s, grid, right, left), claims_section(s, grid, right, first),
                scale_section(s, grid, scale)]
    fisher = s.path(f"fisher-{s['FISHER']}.md")
    if os.path.exists(fisher):
        sections.append(fisher_section(s, fisher))
    return t.document(s, sections, made)


def curves_section(s, g, right, left):
    n = len(s.words("SHUFFLES"))
    body = [f"Held-out set: the CHILDES test sentences of {s['MIN_LEN']}-{s['MAX_LEN']} words (punctuation "
            "removed, heads re-attached); directed accuracy (%) of Viterbi trees, the root arc counted as one arc, "
            "and log probability under the posterior mean, evaluated inside each run (`grind train --dev "
            f"--eval-at log:{s['PER_DECADE']}`).  Mean ± sd over {n} shuffles of the training text.  Sentences parsed "
            "as `grind train --trace` counts them: every sentence of each pass (batch and collapsed VB), the "
            "sentences read (streaming and stochastic VB).  Baselines on the same sentences: attach-right (each "
            f"word's head its right neighbour: the left-branching tree) **{t.pct(right)}**, attach-left "
            f"**{t.pct(left)}**.\n"]
    head = ["algorithm", "init", "sentences parsed", "directed %", "vs attach-right", "held-out log probability"]
    for title, pick in ((f"At one pass over the training text ({g.one_pass:,.0f} sentences parsed)",
                         lambda ev: at_or_before(ev, g.one_pass)), ("At the end of each run", lambda ev: ev[-1])):
        rows = []
        for k in g.keys:
            pts = g.points(k, pick)
            acc = [p[1] for p in pts]
            rows.append([ALGO_NAMES[k[0]], k[1], f"{statistics.mean(p[0] for p in pts):,.0f}", ms(acc),
                         f"{100 * (statistics.mean(acc) - right):+.1f}", ms((p[2] for p in pts), 1.0, 0)])
        body.append(f"**{title}**\n\n" + t.table(head, rows, "llrrrr") + "\n")
    png = os.path.relpath(s["FIG"], os.path.dirname(os.path.abspath(s["RESULTS"])))
    body.append(f"![Learning curves: held-out directed accuracy and log probability against sentences parsed]({png})")
    return t.section("Learning curves on UD English-CHILDES", s.command(), "\n".join(body))


def claims_section(s, g, right, first):
    small = lambda ev: at_or_before(ev, g.one_pass)  # noqa: E731
    end = lambda ev: ev[-1]  # noqa: E731
    out, led = [], {}
    for what, pick in (("small", small), ("large", end)):
        acc = sorted(g.keys, key=lambda k: -g.mean(k, pick, 1))
        lp = sorted(g.keys, key=lambda k: -g.mean(k, pick, 2))
        led[what] = (acc[0], lp[0])
        when = f"small effort (one pass, {g.one_pass:,.0f} sentences parsed)" if what == "small" else \
            "large effort (each run's end)"
        out.append(f"- **Who leads at {when}.**  Directed accuracy: "
                   f"{', '.join(f'{name(k)} {100 * g.mean(k, pick, 1):.1f}' for k in acc)}.  Held-out log "
                   f"probability: {', '.join(f'{name(k)} {g.mean(k, pick, 2):.0f}' for k in lp)}.")
    mini = max((g.mean(k, end, 1) for k in g.keys if k[0] in ("streaming", "stochastic")), default=None)
    batch = max((g.mean(k, end, 1) for k in g.keys if k[0] == "vb"), default=None)
    if mini is not None and batch is not None:
        out.append(
            "  Paper (abstract; Switchboard + Fisher, 664k sentences): the minibatch algorithms (streaming and "
            "stochastic VB) end ahead of batch VB -- cheap inference over more data beats intensive inference over "
            f"less.  Here: {'the same' if mini > batch else 'not so'} -- the best minibatch runs end at "
            f"{100 * mini:.1f}, batch VB at {100 * batch:.1f} directed; at one pass {name(led['small'][0])} leads in "
            f"accuracy and {name(led['small'][1])} in held-out probability, at the end {name(led['large'][0])} and "
            f"{name(led['large'][1])}.  The paper's condition is missing: every algorithm here has the same "
            f"{g.one_pass:,.0f} sentences, so batch and collapsed VB pass over them again and again (to "
            "convergence) while streaming VB reads each once and stops; in the paper batch VB could afford only "
            "part of the data the minibatch algorithms read.  With equal data, intensive inference wins here.")
    lines, better, likelier = [], [], []
    for algo in ORDER:
        h, u = (algo, "harmonic"), (algo, "uniform")
        if h in g.evals and u in g.evals:
            dh, du, lh, lu = g.mean(h, end, 1), g.mean(u, end, 1), g.mean(h, end, 2), g.mean(u, end, 2)
            verdict = "within a point" if t.near(dh, du) else "harmonic better" if dh > du else "uniform better"
            better.append(dh > du and not t.near(dh, du))
            likelier.append(lh > lu)
            lines.append(f"{ALGO_NAMES[algo]} {100 * dh:.1f} vs {100 * du:.1f} ({verdict}; log probability "
                         f"{lh:.0f} vs {lu:.0f})")
    if lines:
        out.append("- **Does the harmonic initialiser help?**  Paper: the harmonic initialiser, essential on small "
                   "tag corpora (Klein & Manning 2004), is not superior to a uniform one when learning from words.  "
                   "Here, directed accuracy at the end, harmonic vs uniform: " + "; ".join(lines) + ".  "
                   + ("The same: harmonic is better by more than a point for none of the algorithms" if not any(better)
                      else f"Harmonic is better by more than a point for {sum(better)} of {len(better)} algorithms")
                   + f"; its held-out log probability is the higher for {sum(likelier)} of {len(likelier)}.")
    parts, drops = [], []
    for k in (k for k in g.keys if k[0] == "streaming"):
        at_first = [at_or_before(ev, first) for ev in g.evals[k]]
        after = [[e for e in ev if e[0] > first] for ev in g.evals[k]]
        if not all(at_first) or not all(after):
            continue
        lp0 = statistics.mean(p[2] for p in at_first)
        low = statistics.mean(min(e[2] for e in af) for af in after)
        drops.append(low < lp0)
        parts.append(f"{k[1]}: {lp0:.1f} after the first minibatch ({first:,} sentences), "
                     f"{statistics.mean(af[0][2] for af in after):.1f} at {after[0][0][0]:,.0f}, lowest after it "
                     f"{low:.1f}, {statistics.mean(af[-1][2] for af in after):.1f} at the end")
    if parts:
        out.append("- **Streaming VB's predictive probability after the first minibatch.**  Paper: streaming VB's "
                   "held-out probability drops once the one-sentence minibatches start.  Here (held-out log "
                   "probability, mean over shuffles): " + "; ".join(parts) + ".  "
                   + ("A drop, as in the paper." if all(drops) else
                      "No drop: it rises from the first one-sentence minibatch on." if not any(drops) else
                      "A drop for some initialisations only."))
    low = min(g.keys, key=lambda k: g.mean(k, end, 1))
    above = all(g.mean(k, end, 1) > right and not t.near(g.mean(k, end, 1), right) for k in g.keys)
    out.append(f"- **Left-branching baseline.**  Paper: about 29 directed.  Here attach-right (the left-branching "
               f"tree) {t.pct(right)}; every run ends {'more than a point above it' if above else 'NOT always above it'}"
               f" (the lowest, {name(low)}, by {100 * (g.mean(low, end, 1) - right):.1f}).")
    return t.section("The paper's claims, point by point", s.command(), "\n".join(out))


def scale_section(s, g, sc):
    n_all = next((ev[0][0] if k[0] == "vb" else ev[-1][0] for k in sc.keys if k[0] in ("vb", "streaming")
                  for ev in sc.evals[k]), None)
    genres = s["EWT_GENRES"].replace(",", ", ")
    body = [
        "Every English child-directed or conversational UD text in `../shared/data`, read with the same options: "
        f"CHILDES train (the same shuffle first, so the first {g.one_pass:,.0f} sentences are the grid's), then, "
        "shuffled, the CHILDES dev split (child-directed speech; only the test split is evaluated) and the UD "
        f"English-EWT sentences of the genres {genres} from its three splits (emails, question answers, reviews, "
        "newsgroup posts: written conversation; EWT's weblog genre, edited monologue, is left out)"
        + (f"; {n_all:,.0f} sentences in all, {n_all / g.one_pass:.2f} times CHILDES train" if n_all else "")
        + ".  That is all the data there is here, not Fisher's 664k sentences (the next section has Fisher's size, "
        "for time and memory).  The grammar covers all their words and the test's, so it is larger than the "
        "grid's and its uniform start differs; its held-out log probabilities are lower throughout (the test words "
        "share their probability with more word types) and are compared within the scale run only, the directed "
        "accuracies across both.  Peak RSS: the largest of the runs (`peak.py`).\n"]
    rows = []
    for k in sc.keys:
        big = sc.points(k, lambda ev: ev[-1])
        small = g.points(k, lambda ev: ev[-1]) if k in g.evals else []
        rss = [m for m in (peak_mib(p) for p in sc.paths[k]) if m is not None]
        rows.append([ALGO_NAMES[k[0]], k[1], f"{statistics.mean(p[0] for p in big):,.0f}", ms(p[1] for p in small),
                     ms(p[1] for p in big), ms((p[2] for p in big), 1.0, 0),
                     f"{max(rss):,.0f}" if rss else "—"])
    body.append(t.table(["algorithm", "init", "sentences parsed", "directed % (CHILDES train only)",
                         "directed % (+ the rest)", "held-out log probability (+ the rest)", "peak RSS MiB"], rows,
                        "llrrrrr") + "\n")
    for k in (k for k in sc.keys if k[0] == "streaming"):
        at_pass = sc.points(k, lambda ev: at_or_before(ev, g.one_pass))
        end = sc.points(k, lambda ev: ev[-1])
        body.append(f"Streaming VB ({k[1]}), the curve's right end: directed {ms(p[1] for p in at_pass)} at "
                    f"{g.one_pass:,.0f} sentences, {ms(p[1] for p in end)} at "
                    f"{statistics.mean(p[0] for p in end):,.0f}; held-out log probability "
                    f"{ms((p[2] for p in at_pass), 1.0, 0)} -> {ms((p[2] for p in end), 1.0, 0)}.\n")
    png = os.path.relpath(s["SCALE_FIG"], os.path.dirname(os.path.abspath(s["RESULTS"])))
    body.append(f"![Streaming VB on CHILDES train alone and followed by the rest]({png})")
    return t.section("Scale run: more words than CHILDES train", s.command(), "\n".join(body))


def fisher_section(s, path):
    with open(path, encoding="utf-8") as f:
        table = f.read().strip()
    body = ("`python -m grind.bench.fisher` (`grind/bench/fisher.py`): a planted-DMV corpus of Fisher's shape "
            "(Zipfian words, conversational lengths), the lexicalized DMV from its words, streaming VB with a first "
            "minibatch then one-sentence minibatches, each step in its own process with its peak RSS.  It measures "
            "cost; its accuracy is on planted trees of training sentences, not a result.  Wall seconds depend on the "
            "machine and its load (README.md, Time); the 4 GB goal is each process's peak RSS.\n\n" + table)
    return t.section("Fisher-sized planted corpus: time and memory", s.command("fisher"), body)
