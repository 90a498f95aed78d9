"""``python -m grind.bench.scaling``: E-step time against sentence length, grammar size and corpus size.

One E-step = ``inside_outside`` over a corpus of random sentences (expected
counts of every rule + log Z of every sentence), on one core, float64: after
a warm-up call, ``--reps`` rounds over all the points of a scan, the best of
each point kept.  The time fitted is this process's CPU time (the same as
wall-clock time on an idle core, and far less inflated by other jobs on a
shared machine; ``--tsv`` has both).  Scans:

* CKY kernel (:class:`grind.kernels.cky.CKYParser`) on the dense random CNF
  grammars of :mod:`grind.bench.cky` (N nonterminals, N preterminals, 100
  words, every binary rule present, so every span holds every symbol):
  time a sentence against sentence length L (N = 10) and against N (L = 10),
  on both kernel paths (``dense``: BLAS over all spans of a width;
  ``sparse``: rule by rule), and E-step time against the number of
  sentences (N = 10, L = 10, dense path);
* DMV kernel (:class:`grind.kernels.dmv.DMVParser`, 35 tags, random weights
  as in :mod:`grind.bench.dmv`): time a sentence against L, and E-step time
  against the number of sentences (L = 10).

Every sentence of a point has exactly the point's length; the number of
sentences of a per-sentence point is chosen so that one E-step takes about
``--target`` seconds.  The exponent b of time ~ x^b is fitted by least
squares of log(time) on log(x) over the upper half of each range (x >=
sqrt(x_min * x_max)): at the small sizes per-call and per-sentence overhead
dominate.  "work b" is the same fit of the multiply-adds the CKY kernel
counts for itself (``CKYParser.work_per_sentence``) over the same points.

``--tsv FILE`` writes every point, ``--plot FILE`` a log-log PNG (one panel
per variable, the fitted lines solid over their fitted range, dotted below) when matplotlib is
installed (``pip install 'grind[plot]'``); otherwise the plot is skipped
with a message.  ``--quick``: three points a scan and short timings (tests).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core (effective when imported first)

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

N_TAGS = 35
CKY_N, CKY_L = 10, 10          # nonterminals of the length / corpus scans, length of the N / corpus scans
DMV_L = 10                     # sentence length of the DMV corpus scan

#: the lengths and numbers of nonterminals of the CKY scans
GRID = (5, 6, 8, 10, 12, 16, 20, 24, 28, 32, 40)

#: kernel, path, variable, full range, quick range, expected exponent, what is held fixed
SCANS = (
    ("CKY", "dense", "length", GRID, (5, 10, 20), 3, f"N = {CKY_N}"),
    ("CKY", "sparse", "length", GRID, (5, 10, 20), 3, f"N = {CKY_N}"),
    ("CKY", "dense", "nonterminals", GRID, (5, 10, 20), 3, f"L = {CKY_L}"),
    ("CKY", "sparse", "nonterminals", GRID, (5, 10, 20), 3, f"L = {CKY_L}"),
    ("CKY", "dense", "sentences", (250, 500, 1000, 2000, 4000, 8000), (50, 100, 200), 1,
     f"N = {CKY_N}, L = {CKY_L}"),
    ("DMV", "", "length", (5, 6, 8, 10, 12, 16, 20, 24, 28, 32, 40, 48, 60), (5, 10, 20), 3, f"{N_TAGS} tags"),
    ("DMV", "", "sentences", (1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000), (250, 500, 1000), 1,
     f"{N_TAGS} tags, L = {DMV_L}"),
)

UNITS = {"length": "s / sentence", "nonterminals": "s / sentence", "sentences": "s / E-step"}


# -- fitting ------------------------------------------------------------------

def fit_power(x, y) -> tuple[float, float, float]:
    """Least-squares fit of log y = a + b log x: ``(a, b, R²)`` (R² of the log-log fit).
    Needs at least two distinct positive x and positive y."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if (x.shape != y.shape or x.ndim != 1 or len(np.unique(x)) < 2 or not np.all((x > 0) & (y > 0))
            or not np.all(np.isfinite(x) & np.isfinite(y))):
        raise ValueError("fit_power needs at least two distinct positive x and positive finite y of the same length")
    lx, ly = np.log(x), np.log(y)
    A = np.column_stack([np.ones_like(lx), lx])
    (a, b), *_ = np.linalg.lstsq(A, ly, rcond=None)
    ss_res = float(np.sum((ly - (a + b * lx)) ** 2))
    ss_tot = float(np.sum((ly - ly.mean()) ** 2))
    return float(a), float(b), 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


def upper_half(x) -> np.ndarray:
    """The points fitted: x at least the geometric middle of the range, sqrt(x_min * x_max)."""
    x = np.asarray(x, dtype=float)
    return x >= math.sqrt(x.min() * x.max()) * (1 - 1e-12)


# -- timing -------------------------------------------------------------------

def _clocks(fn) -> tuple[float, float]:
    """(CPU, wall) seconds of one call of ``fn`` (CPU = this process's)."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.process_time() - c, time.perf_counter() - w


def time_rounds(points, reps: int) -> None:
    """Time every point's E-step (``point["estep"]``, a no-argument callable):
    one warm-up call each, then ``reps`` rounds over all the points, keeping each
    point's fastest CPU and wall time (``seconds``, ``wall``; per sentence when
    ``point["per"]`` is the number of sentences parsed, else per E-step).
    Interleaving the rounds spreads a burst of other work on the machine over
    several points instead of every repetition of one; CPU time (which such
    work inflates far less than wall-clock time) is the one fitted."""
    for p in points:
        p["estep"]()
        p["seconds"] = p["wall"] = math.inf
    for _ in range(reps):
        for p in points:
            cpu, wall = _clocks(p["estep"])
            p["seconds"] = min(p["seconds"], cpu / p["per"])
            p["wall"] = min(p["wall"], wall / p["per"])
    for p in points:
        del p["estep"], p["per"]


def _sized(make, weights, target, probe=4, cap=50_000):
    """(parser, sentences): a corpus whose E-step takes about ``target`` CPU
    seconds, sized by probes of ``probe``, 4 ``probe``, ... sentences until one
    takes a tenth of ``target``."""
    while True:
        p = make(probe)
        p.inside_outside(weights)
        t = _clocks(lambda p=p: p.inside_outside(weights))[0]
        if t >= target / 10 or probe >= cap:
            break
        probe *= 4
    n = int(np.clip(target / max(t / probe, 1e-9), 4, cap))
    return make(n), n


def _point(x, parser, weights, sentences, per_sentence, work):
    return dict(x=x, sentences=sentences, work=work, per=sentences if per_sentence else 1,
                estep=lambda: parser.inside_outside(weights))


def cky_points(path, variable, xs, target, rng) -> list[dict]:
    """The points of a CKY scan, ready for :func:`time_rounds`."""
    from grind.bench.cky import corpus, dense_grammar
    from grind.kernels.cky import CKYParser
    out = []
    if variable == "nonterminals":
        for n_nt in xs:
            g = dense_grammar(n_nt, rng)
            p, n = _sized(lambda k, g=g: CKYParser(g, corpus(g, CKY_L, k, rng), path=path), g.weights, target)
            out.append(_point(n_nt, p, g.weights, n, True, p.work_per_sentence(CKY_L)))
        return out
    g = dense_grammar(CKY_N, rng)
    if variable == "length":
        for length in xs:
            p, n = _sized(lambda k, length=length: CKYParser(g, corpus(g, length, k, rng), path=path), g.weights,
                          target)
            out.append(_point(length, p, g.weights, n, True, p.work_per_sentence(length)))
        return out
    sents = corpus(g, CKY_L, max(xs), rng)
    for n in xs:
        p = CKYParser(g, sents[:n], path=path)
        out.append(_point(n, p, g.weights, n, False, n * p.work_per_sentence(CKY_L)))
    return out


def dmv_points(variable, xs, target, rng) -> list[dict]:
    """The points of a DMV scan, ready for :func:`time_rounds`."""
    from grind.grammars.dmv import dmv_grammar
    from grind.kernels.dmv import DMVParser
    tags = np.array([f"T{i}" for i in range(N_TAGS)])
    g = dmv_grammar([tags.tolist()], vocabulary=tags.tolist())
    w = g.normalize(rng.gamma(1.0, size=len(g)))

    def sents(n, length):
        return tags[rng.integers(0, N_TAGS, size=(n, length))].tolist()

    if variable == "length":
        out = []
        for length in xs:
            p, n = _sized(lambda k, length=length: DMVParser(g, sents(k, length)), w, target, probe=64, cap=500_000)
            out.append(_point(length, p, w, n, True, None))
        return out
    corpus = sents(max(xs), DMV_L)
    return [_point(n, DMVParser(g, corpus[:n]), w, n, False, None) for n in xs]


def run(quick: bool = False, target: float = 0.1, reps: int = 5, seed: int = 0, log=None) -> list[dict]:
    """Every scan of :data:`SCANS`: its points and fit (dicts, see :func:`table`)."""
    rng = np.random.default_rng(seed)
    scans = []
    for kernel, path, variable, full_xs, quick_xs, expected, fixed in SCANS:
        xs = quick_xs if quick else full_xs
        if log:
            name = f"{kernel} {path}".strip()
            print(f"[scaling bench] {name} vs {variable} ({fixed}) ...", file=log, flush=True)
        if kernel == "CKY":
            pts = cky_points(path, variable, xs, target, rng)
        else:
            pts = dmv_points(variable, xs, target, rng)
        time_rounds(pts, reps)
        scans.append(fit_scan(kernel, path, variable, fixed, expected, pts))
    return scans


def fit_scan(kernel, path, variable, fixed, expected, pts) -> dict:
    """A scan's record: its points (dicts with x, seconds, work; each gets
    ``fitted``), the fit ``a``, ``b``, ``r2`` of seconds over the upper half of the
    range (:func:`upper_half`), and ``work_b``, the exponent of ``work`` over the
    same points (None when a point has no work count)."""
    x = np.array([p["x"] for p in pts], dtype=float)
    y = np.array([p["seconds"] for p in pts])
    mask = upper_half(x)
    a, b, r2 = fit_power(x[mask], y[mask])
    work_b = None
    if all(p["work"] for p in pts):
        work_b = fit_power(x[mask], [p["work"] for p, m in zip(pts, mask) if m])[1]
    for p, m in zip(pts, mask):
        p["fitted"] = bool(m)
    return dict(kernel=kernel, path=path, name=f"{kernel} {path}".strip(), variable=variable, fixed=fixed,
                expected=expected, points=pts, a=a, b=b, r2=r2, work_b=work_b, fit_from=float(x[mask].min()))


# -- output -------------------------------------------------------------------

def table(scans) -> str:
    head = ("| kernel | variable | fixed | range | fitted on | b (fitted) | b expected | work b | R² |\n"
            "|---|---|---|---|---|---:|---:|---:|---:|\n")
    lines = []
    for s in scans:
        xs = [p["x"] for p in s["points"]]
        fx = [p["x"] for p in s["points"] if p["fitted"]]
        work = f"{s['work_b']:.2f}" if s["work_b"] is not None else "—"
        lines.append(f"| {s['name']} | {s['variable']} | {s['fixed']} | {_fmt(min(xs))}–{_fmt(max(xs))} "
                     f"| {_fmt(min(fx))}–{_fmt(max(fx))} ({len(fx)} pts) | {s['b']:.2f} | {s['expected']} "
                     f"| {work} | {s['r2']:.4f} |")
    return head + "\n".join(lines)


def _fmt(x) -> str:
    return f"{int(x):,}"


EXPLANATION = """\
Fit: least squares of log(time) on log(x) over the upper half of each range (x >= sqrt(x_min * x_max));
the smaller sizes are dominated by per-call and per-sentence overhead. work b: the same fit of the
multiply-adds the CKY kernel counts for itself. DMV: Eisner's split-head algorithm combines two
half-constituents over every (start, split, end) triple with a constant number of states per word
(each word has one tag), so a sentence costs O(L^3) whatever the number of tags. CKY: every span (L^2)
times every split point (L) times every binary rule A -> B C (|N|^3 of them here) gives O(L^3 |N|^3),
which the sparse (rule-by-rule) path does. The dense path first sums the outer products beta(B) beta(C)
over the splits of a span (L^3 |N|^2), then multiplies by the rule matrix once a span (L^2 |N|^3):
between 2 and 3 in both at these sizes, and BLAS runs faster on the larger matrices of larger N.
Sentences are parsed independently: time is linear in their number."""


def write_tsv(path: str, scans) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("kernel\tpath\tvariable\tfixed\tx\tsentences\tcpu_seconds\twall_seconds\tunit\twork\tfitted\n")
        for s in scans:
            for p in s["points"]:
                work = "" if p["work"] is None else str(p["work"])
                f.write(f"{s['kernel']}\t{s['path']}\t{s['variable']}\t{s['fixed']}\t{p['x']}\t{p['sentences']}\t"
                        f"{p['seconds']:.6g}\t{p['wall']:.6g}\t{UNITS[s['variable']]}\t{work}\t{int(p['fitted'])}\n")


def scaling_figure(scans):
    """A matplotlib Figure (Agg canvas, no pyplot state): one log-log panel per
    variable, every scan of it as points, its fitted line (solid over the fitted
    range, dotted below it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, NullFormatter, StrMethodFormatter
    variables = list(dict.fromkeys(s["variable"] for s in scans))
    fig = Figure(figsize=(4.4 * len(variables), 3.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(variables), squeeze=False)[0]
    for ax, var in zip(axes, variables):
        ticks: set[float] = set()
        for i, s in enumerate(sc for sc in scans if sc["variable"] == var):
            color = {"CKY dense": "C0", "CKY sparse": "C1", "DMV": "C2"}.get(s["name"], f"C{i + 3}")
            x = np.array([p["x"] for p in s["points"]], dtype=float)
            y = np.array([p["seconds"] for p in s["points"]])
            ticks.update(x.tolist())
            ax.plot(x, y, "o", color=color, markersize=4, label=f"{s['name']} ({s['fixed']}): b = {s['b']:.2f}")
            xf = np.geomspace(s["fit_from"], x.max(), 20)
            ax.plot(xf, np.exp(s["a"]) * xf ** s["b"], "-", color=color, linewidth=1.2)
            if x.min() < s["fit_from"]:
                xb = np.geomspace(x.min(), s["fit_from"], 20)
                ax.plot(xb, np.exp(s["a"]) * xb ** s["b"], ":", color=color, linewidth=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        if var != "sentences":             # a label at 5, 10, 20, 40, 60; a tick at every point
            labelled = [t for t in sorted(ticks) if t in (5, 10, 20, 40, 60)] or sorted(ticks)
            ax.xaxis.set_major_locator(FixedLocator(labelled))
            ax.xaxis.set_minor_locator(FixedLocator(sorted(ticks)))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
        ax.set_xlabel({"length": "sentence length L", "nonterminals": "nonterminals N",
                       "sentences": "sentences in the corpus"}.get(var, var))
        ax.set_ylabel(f"CPU {UNITS.get(var, 'seconds')}")
        ax.set_title(f"E-step time vs {var}", fontsize="medium")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize="x-small")
    return fig


def write_plot(path: str, scans) -> bool:
    """Save :func:`scaling_figure` as a PNG; False (nothing written) without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    fig = scaling_figure(scans)
    with open(path, "wb") as f:
        fig.savefig(f, format="png", dpi=100, metadata={"Software": None})
    return True


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m grind.bench.scaling", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="three points a scan, short timings, one rep (tests)")
    ap.add_argument("--tsv", metavar="FILE", help="write every point as TSV")
    ap.add_argument("--plot", metavar="FILE", help="log-log PNG, one panel per variable (needs matplotlib)")
    ap.add_argument("--target", type=float, default=None, help="seconds an E-step of a per-sentence point "
                    "(default 0.1; 0.005 with --quick)")
    ap.add_argument("--reps", type=int, default=None, help="timed E-steps a point, best taken (default 5; 1 quick)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    target = args.target if args.target is not None else (0.005 if args.quick else 0.1)
    reps = args.reps if args.reps is not None else (1 if args.quick else 5)
    t0 = time.perf_counter()
    scans = run(args.quick, target, reps, args.seed, log=sys.stderr)
    elapsed = time.perf_counter() - t0
    print(f"### Scaling: E-step time against sentence length, grammar size and corpus size "
          f"(one core, CPU time, best of {reps}; {elapsed:.0f} s)\n")
    print(table(scans))
    print()
    print(EXPLANATION)
    if args.tsv:
        write_tsv(args.tsv, scans)
        print(f"\nPoints written to {args.tsv}.")
    plotted = None
    if args.plot:
        plotted = write_plot(args.plot, scans)
        print(f"\nPlot written to {args.plot}." if plotted else
              "\nPlot skipped: matplotlib is not installed (pip install 'grind[plot]').")
    return dict(scans=scans, seconds=elapsed, plotted=plotted)


if __name__ == "__main__":
    main()
