"""``python -m grind.bench.ln``: logistic-normal variational EM iteration time on a DMV.

A DMV over the Penn Treebank tags of the shipped family file (all 45 PTB
tags in 15 families), random sentences of 2-10 tags, from the uniform
grammar.  One iteration each of: EM (one batched E-step: the reference), LN
model I with the identity covariance (one expert per multinomial; 5 E-step
cycles, and 1), and the
shared logistic normal TieA with family covariance (experts over all heads
of a family), with the E-step's reduced solves (only the coordinates a
sentence's data touch) and without them (the full expert every time; timed
on the first ``--full-sentences`` sentences only, it is slow, and scaled to
the corpus).  5 E-step cycles a sentence, one core.

Model II (theta drawn once for the corpus: one variational posterior, so the
E-step is one batched parse a cycle and one q(eta) update), at the corpus
size above and at ``--large`` sentences: EM, LN-II with the paper's 5 cycles
started at the prior, and LN-II with one cycle and warm starts, whose first
parse is the previous iteration's last (reused, :meth:`LogisticNormal._reusable`),
so an iteration is one parse and one q(eta) update.  These rows time the
steady state: the median of iterations 2-4 of one run (EM's too).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core (effective when imported first)

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402

from grind.infer import ln  # noqa: E402
from grind.grammars.dmv import dmv_grammar  # noqa: E402
from grind.kernels.dmv import DMVParser  # noqa: E402
from grind.infer.em import EM  # noqa: E402
from grind.infer.training import ShardedEstep  # noqa: E402


def corpus(rng, n_sent, tags, lo=2, hi=10):
    tags = np.array(tags)
    lens = rng.integers(lo, hi + 1, size=n_sent)
    flat = tags[rng.integers(0, len(tags), size=lens.sum())]
    return [s.tolist() for s in np.split(flat, np.cumsum(lens)[:-1])]


def timed(make):
    algo = make()
    t = time.perf_counter()
    algo.step()
    return time.perf_counter() - t, algo


def measure(n_sent, seed, full_sentences=100):
    fam = ln.read_families("ptb")
    rng = np.random.default_rng(seed)
    sents = corpus(rng, n_sent, sorted(fam))
    g = dmv_grammar(sents)
    est = ShardedEstep(DMVParser(g, sents))
    cfg = dict(iterations=1, tolerance=0.0, families=fam)
    rows = []
    t, _ = timed(lambda: EM(g, est, np.ones(len(g)), g.weights, SimpleNamespace(**cfg), rng))
    rows.append(("EM (reference)", None, t))
    t, a = timed(lambda: ln.LogisticNormal(g, est, None, g.weights, SimpleNamespace(**cfg), rng))
    rows.append(("LN-I identity", len(a.st.experts), t))
    t, _ = timed(lambda: ln.LogisticNormal(g, est, None, g.weights, SimpleNamespace(**cfg, ln_cycles=1), rng))
    rows.append(("LN-I identity, 1 cycle", len(a.st.experts), t))
    tie = dict(cfg, tie="A", ln_cov="families")
    t, a = timed(lambda: ln.LogisticNormal(g, est, None, g.weights, SimpleNamespace(**tie), rng))
    rows.append(("SLN TieA, reduced solves", len(a.st.experts), t))
    k = min(n_sent, full_sentences)
    full = ln.LogisticNormal(g, ShardedEstep(DMVParser(g, sents[:k])), None, g.weights, SimpleNamespace(**tie), rng)
    t = _full_solves(full) * n_sent / k
    rows.append((f"SLN TieA, full-expert solves (first {k:,} sentences, scaled)", len(full.st.experts), t))
    return dict(n=n_sent, rules=len(g), tags=len(fam), rows=rows,
                largest=max(gr.L for gr in a.st.groups))


def _full_solves(algo):
    """One iteration with optimise_mu told nothing of Sigma (every block solved whole)."""
    orig = ln.optimise_mu

    def whole(*args, Sigma=None, cache=None, **kw):
        return orig(*args, **kw)
    ln.optimise_mu = whole
    try:
        t = time.perf_counter()
        algo.step()
        return time.perf_counter() - t
    finally:
        ln.optimise_mu = orig


def steady(algo, first=1, last=4) -> float:
    """Median time of iterations ``first``+1 .. ``last`` of one run."""
    ts = []
    for i in range(last):
        t = time.perf_counter()
        algo.step()
        if i >= first:
            ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def measure_model2(n_sent, seed):
    """The Model II rows at ``n_sent`` sentences (module docstring)."""
    fam = ln.read_families("ptb")
    rng = np.random.default_rng(seed)
    sents = corpus(rng, n_sent, sorted(fam))
    g = dmv_grammar(sents)
    est = ShardedEstep(DMVParser(g, sents))
    cfg = dict(iterations=10, tolerance=0.0, families=fam, model=2)
    rows = [("EM (reference)", None, steady(EM(g, est, np.ones(len(g)), g.weights, SimpleNamespace(**cfg), rng)))]
    for name, extra in (("LN-II identity, 5 cycles from the prior", {}),
                        ("LN-II identity, 1 cycle, warm start (first parse reused)", dict(ln_cycles=1, ln_warm=True))):
        a = ln.LogisticNormal(g, est, None, g.weights, SimpleNamespace(**cfg, **extra), rng)
        rows.append((name, len(a.st.experts), steady(a)))
    return dict(n=n_sent, rules=len(g), rows=rows)


def table(r) -> str:
    ref = r["rows"][0][2]
    out = ["| algorithm | experts | s / iteration | sentences / s | × EM iteration |", "|---|---:|---:|---:|---:|"]
    for name, experts, t in r["rows"]:
        e = "—" if experts is None else f"{experts:,}"
        ratio = f"{t / ref:.2f}" if t / ref < 10 else f"{t / ref:,.0f}"
        out.append(f"| {name} | {e} | {t:.3f} | {r['n'] / t:,.0f} | {ratio} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.ln", description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full-sentences", type=int, default=100,
                    help="sentences the full-expert-solve row is timed on (scaled to --sentences)")
    ap.add_argument("--large", type=int, default=20_000,
                    help="the larger corpus of the Model II rows (0: only --sentences)")
    args = ap.parse_args(argv)
    from grind.cli.threads import freed_blocks_kept
    with freed_blocks_kept():               # as `grind train --algo ln` runs; the benchmarks after it as before
        return _run(args)


def _run(args):
    print("[ln bench] ...", file=sys.stderr, flush=True)
    r = measure(args.sentences, args.seed, args.full_sentences)
    print(f"### Logistic-normal variational EM: one iteration (one core)\n\nDMV over {r['tags']} PTB tags, "
          f"{r['n']:,} random sentences of 2-10 tags, {r['rules']:,} rules; largest expert "
          f"{r['largest']} coordinates; 5 E-step cycles a sentence.\n")
    print(table(r))
    r["model2"] = []
    for n in sorted({args.sentences, args.large} - {0}):
        m2 = measure_model2(n, args.seed)
        r["model2"].append(m2)
        print(f"\nModel II (theta drawn once for the corpus), {m2['n']:,} sentences, {m2['rules']:,} rules; "
              f"steady state (median of iterations 2-4):\n")
        print(table(m2))
    return r


if __name__ == "__main__":
    main()
