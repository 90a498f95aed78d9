"""``python -m grind.bench.cvb``: collapsed VB memory and sweep time on a DMV.

A DMV over 35 tags, random sentences of 4-15 tags (every tag equally
likely), CVB from the uniform grammar with alpha = 1: the initial E-step
(one kernel call per sentence), then sweeps (remove, re-parse and add back
each sentence, see :mod:`grind.infer.cvb`) timed on one core.  Memory is what the
per-sentence expected counts take (the sparse float32 pool with its
capacity, plus 16 bytes of bookkeeping a sentence), projected linearly to
664,000 sentences, beside a dense float64 vector per sentence and the 60 GB
the Scala implementation needed for that corpus.  Target: <= 1 KB a
sentence (< 700 MB for 664k).
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

from grind.infer.cvb import CVB  # noqa: E402
from grind.grammars.dmv import dmv_grammar  # noqa: E402
from grind.kernels.dmv import DMVParser  # noqa: E402
from grind.infer.training import ShardedEstep  # noqa: E402

BIG = 664_000
SCALA_GB = 60.0


def corpus(rng, n_sent, n_tags=35, lo=4, hi=15):
    tags = np.array([f"T{i}" for i in range(n_tags)])
    lens = rng.integers(lo, hi + 1, size=n_sent)
    flat = tags[rng.integers(0, n_tags, size=lens.sum())]
    return [s.tolist() for s in np.split(flat, np.cumsum(lens)[:-1])]


def measure(n_sent, sweeps, seed):
    rng = np.random.default_rng(seed)
    sents = corpus(rng, n_sent)
    g = dmv_grammar(sents)
    parser = DMVParser(g, sents)
    t = time.perf_counter()
    parser.inside_outside(g.weights)
    t_batch = time.perf_counter() - t
    cfg = SimpleNamespace(iterations=sweeps, tolerance=0.0)
    t = time.perf_counter()
    algo = CVB(g, ShardedEstep(parser), np.ones(len(g)), g.weights, cfg, rng)
    t_init = time.perf_counter() - t
    times = []
    while True:
        t = time.perf_counter()
        if algo.step() is None:
            break
        times.append(time.perf_counter() - t)
    nnz = float(algo.pool.len.mean())
    return dict(n=n_sent, rules=len(g), nnz=nnz, bps=algo.bytes_per_sentence(), init=t_init,
                sweep=min(times), batch=t_batch, dense=8.0 * len(g))


def table(r) -> str:
    scale = BIG / r["n"]
    rows = [("stored counts a sentence (mean)", f"{r['nnz']:.1f}", "—"),
            ("bytes a sentence (sparse pool)", f"{r['bps']:,.0f}", f"{r['bps'] * BIG / 1e6:,.0f} MB"),
            ("bytes a sentence (dense float64)", f"{r['dense']:,.0f}", f"{r['dense'] * BIG / 1e9:,.1f} GB"),
            ("bytes a sentence (Scala, reported)", f"{SCALA_GB * 1e9 / BIG:,.0f}", f"{SCALA_GB:,.0f} GB"),
            ("initial E-step, s", f"{r['init']:.2f}", f"{r['init'] * scale:,.0f}"),
            ("CVB sweep, s (best)", f"{r['sweep']:.2f}", f"{r['sweep'] * scale:,.0f}"),
            ("CVB sweep, µs a sentence", f"{1e6 * r['sweep'] / r['n']:.0f}", "—"),
            ("batch E-step (one kernel call), s", f"{r['batch']:.2f}", f"{r['batch'] * scale:,.1f}")]
    head = (f"| DMV, 35 tags, length 4-15, {r['rules']:,} rules | {r['n']:,} sentences | "
            f"projected to {BIG:,} |\n|---|---:|---:|\n")
    return head + "\n".join(f"| {a} | {b} | {c} |" for a, b, c in rows)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.cvb", description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=20_000)
    ap.add_argument("--sweeps", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print("[cvb bench] ...", file=sys.stderr, flush=True)
    r = measure(args.sentences, args.sweeps, args.seed)
    print("### Collapsed VB: memory and sweep time (one core)\n")
    print(table(r))
    ok = "meets" if r["bps"] <= 1024 else "MISSES"
    print(f"\nTarget <= 1,024 bytes a sentence: {ok} ({r['bps']:,.0f}). "
          "A sweep = one kernel call per sentence plus the per-sentence bookkeeping.")
    return r


if __name__ == "__main__":
    main()
