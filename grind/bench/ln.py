"""``python -m grind.bench.ln``: logistic-normal variational EM iteration time on a DMV.

A DMV over the Penn Treebank tags of the shipped family file (all 45 PTB
tags in 15 families), random sentences of 2-10 tags, from the uniform
grammar.  One iteration each of: EM (one batched E-step: the reference), LN
model I with the identity covariance (one expert per multinomial), and the
shared logistic normal TieA with family covariance (experts over all heads
of a family), with the E-step's reduced solves (only the coordinates a
sentence's data touch) and without them (the full expert every time; timed
on the first ``--full-sentences`` sentences only, it is slow, and scaled to
the corpus).  5 E-step cycles a sentence, one core.
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


def table(r) -> str:
    ref = r["rows"][0][2]
    out = ["| algorithm | experts | s / iteration | sentences / s | × EM iteration |", "|---|---:|---:|---:|---:|"]
    for name, experts, t in r["rows"]:
        e = "—" if experts is None else f"{experts:,}"
        out.append(f"| {name} | {e} | {t:.3f} | {r['n'] / t:,.0f} | {t / ref:,.0f} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.ln", description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=1_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full-sentences", type=int, default=100,
                    help="sentences the full-expert-solve row is timed on (scaled to --sentences)")
    args = ap.parse_args(argv)
    print("[ln bench] ...", file=sys.stderr, flush=True)
    r = measure(args.sentences, args.seed, args.full_sentences)
    print(f"### Logistic-normal variational EM: one iteration (one core)\n\nDMV over {r['tags']} PTB tags, "
          f"{r['n']:,} random sentences of 2-10 tags, {r['rules']:,} rules; largest expert "
          f"{r['largest']} coordinates; 5 E-step cycles a sentence.\n")
    print(table(r))
    return r


if __name__ == "__main__":
    main()
