"""``make bench`` for the general CKY kernel: inside-outside E-step throughput.

Dense cells: a CNF grammar with nonterminals X0..X{N-1}, preterminals
PT0..PT{N-1} and 100 words (ROOT --> X_i, X_i --> A B for all A, B in X u PT,
PT_j --> w_k; random positive weights normalised per left-hand side) on
sentences of exactly L uniformly drawn words (all parseable: the grammar is
dense), N, L in {10, 20, 40}.  Sparse cell: 200 nonterminals with about 20
binary rules each.  One core (OPENBLAS_NUM_THREADS=1), float64.

Columns: sentences/s; multiply-adds per sentence the kernel performs (counted
from its loop structure); multiply-adds/s; their fraction of this machine's
single-thread double-precision matrix-multiply rate (numpy, 2000 x 2000,
measured in the same run); and the limit sentences/s = that rate / the
multiply-adds per sentence.
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import time  # noqa: E402

import numpy as np  # noqa: E402

from grind.cky import CKYParser  # noqa: E402
from grind.grammar import Grammar  # noqa: E402

N_WORDS = 100
TARGET_S = 1.5          # seconds of kernel time per cell (after a warm-up call)


def matmul_rate(n: int = 2000, reps: int = 3) -> float:
    """Single-thread float64 GEMM multiply-adds per second (best of ``reps``)."""
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n)), rng.random((n, n))
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(reps))
    return n**3 / best


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def dense_grammar(n: int, rng) -> Grammar:
    xs = [f"X{i}" for i in range(n)]
    pts = [f"PT{i}" for i in range(n)]
    kids = xs + pts
    rules = [("ROOT", (x,)) for x in xs]
    rules += [(x, (a, b)) for x in xs for a in kids for b in kids]
    rules += [(p, (f"w{k}",)) for p in pts for k in range(N_WORDS)]
    return _normalised(rules, "ROOT", rng)


def sparse_grammar(n: int, per_nt: int, rng) -> Grammar:
    """ROOT --> S_i; S_i --> S_j S_k (about ``per_nt`` random pairs each); S_i --> w."""
    nts = [f"S{i}" for i in range(n)]
    rules = [("ROOT", (a,)) for a in nts]
    for a in nts:
        pairs = {(int(b), int(c)) for b, c in rng.integers(n, size=(per_nt, 2))}
        rules += [(a, (nts[b], nts[c])) for b, c in sorted(pairs)]
        words = sorted(set(rng.integers(N_WORDS, size=10).tolist()))
        rules += [(a, (f"w{k}",)) for k in words]
    return _normalised(rules, "ROOT", rng)


def _normalised(rules, start, rng) -> Grammar:
    g = Grammar(rules, rng.uniform(0.1, 1.0, size=len(rules)), start)
    return g.with_weights(g.normalize(g.weights))


def corpus(grammar: Grammar, length: int, n: int, rng) -> list:
    words = sorted({t for t in grammar.terminals})
    return [[words[i] for i in rng.integers(len(words), size=length)] for _ in range(n)]


def run_cell(grammar, length, rate, rng, path="auto"):
    """Throughput of inside_outside over a batch of sentences of one length."""
    probe = CKYParser(grammar, corpus(grammar, length, 4, rng), path=path)
    macs = probe.work_per_sentence(length)
    t = _timed(lambda: probe.inside_outside(grammar.weights))
    n = int(np.clip(TARGET_S / max(t / 4, 1e-6), 8, 5000))
    parser = CKYParser(grammar, corpus(grammar, length, n, rng), path=path)
    parser.inside_outside(grammar.weights, idx=np.arange(min(n, 16)))
    counts, logz = None, None

    def step():
        nonlocal counts, logz
        counts, logz = parser.inside_outside(grammar.weights)

    dt = _timed(step)
    assert np.all(np.isfinite(logz)) and np.all(np.isfinite(counts))
    sps = n / dt
    return {"path": parser.path, "n": n, "sps": sps, "macs": macs, "rate": sps * macs,
            "frac": sps * macs / rate, "limit": rate / macs}


def main(argv=None) -> None:
    rng = np.random.default_rng(12345)
    rate = matmul_rate()
    rows = []
    for n in (10, 20, 40):
        g = dense_grammar(n, rng)
        for length in (10, 20, 40):
            rows.append((f"dense N={n}", length, run_cell(g, length, rate, rng)))
    g = sparse_grammar(200, 20, rng)
    for length in (10, 20):
        rows.append(("sparse 200 NT x 20", length, run_cell(g, length, rate, rng)))
    print(f"CKY inside-outside E-step, 1 thread, float64; numpy matmul rate "
          f"{rate / 1e9:.2f} G multiply-adds/s\n")
    print("| grammar | L | path | sentences | sent/s | MACs/sent | GMAC/s | % of matmul | limit sent/s |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, length, r in rows:
        print(f"| {name} | {length} | {r['path']} | {r['n']} | {r['sps']:.1f} | {r['macs'] / 1e6:.2f}M "
              f"| {r['rate'] / 1e9:.2f} | {100 * r['frac']:.1f}% | {r['limit']:.0f} |")


if __name__ == "__main__":
    main()
