"""``make bench`` for the general CKY kernel: inside-outside E-step throughput.

Dense cells: a CNF grammar with nonterminals X0..X{N-1}, preterminals
PT0..PT{N-1} and 100 words (ROOT --> X_i, X_i --> A B for all A, B in X u PT,
PT_j --> w_k; random positive weights normalised per left-hand side) on
sentences of exactly L uniformly drawn words (all parseable: the grammar is
dense), N, L in {10, 20, 40}.  Sparse cells: 200 nonterminals S_i with about
20 random binary rules S_i --> S_j S_k each and every word (so every symbol is
non-zero over every span and the multiply-add count below is the work done).
One core (OPENBLAS_NUM_THREADS=1), float64.

Columns: sentences/s; multiply-adds per sentence the kernel performs (counted
from its loop structure); multiply-adds/s; their fraction of this machine's
single-thread double-precision matrix-multiply rate (numpy, 2000 x 2000,
measured in the same run); and the limit sentences/s = that rate / the
multiply-adds per sentence.

Collapsed Metropolis-Hastings on the same cells (``--hastings``, default on): one
sweep (--proposal-batch 1, T = 1, alpha 0.1; the CKY kernel's sweep,
``CKYParser.hastings_sweep``) over the first sentences of the cell against an
E-step of the same sentences, both best of 3 after a warm-up, under the glibc
malloc settings of the command line (grind.heap.fix_mmap_threshold); goal: a
sweep <= 2x the E-step on every cell.
"""
from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402

from grind.kernels.cky import CKYParser  # noqa: E402
from grind.grammars.grammar import Grammar  # noqa: E402

N_WORDS = 100
TARGET_S = 0.8          # seconds per timed E-step (the best of REPS is reported)
REPS = 3


def matmul_rate(n: int = 2000, reps: int = 5) -> float:
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
    """ROOT --> S_i; S_i --> S_j S_k (about ``per_nt`` random pairs each); S_i --> w (all w)."""
    nts = [f"S{i}" for i in range(n)]
    rules = [("ROOT", (a,)) for a in nts]
    for a in nts:
        pairs = {(int(b), int(c)) for b, c in rng.integers(n, size=(per_nt, 2))}
        rules += [(a, (nts[b], nts[c])) for b, c in sorted(pairs)]
        rules += [(a, (f"w{k}",)) for k in range(N_WORDS)]
    return _normalised(rules, "ROOT", rng)


def _normalised(rules, start, rng) -> Grammar:
    g = Grammar(rules, rng.uniform(0.1, 1.0, size=len(rules)), start)
    return g.with_weights(g.normalize(g.weights))


def corpus(grammar: Grammar, length: int, n: int, rng) -> list:
    words = sorted({t for t in grammar.terminals})
    return [[words[i] for i in rng.integers(len(words), size=length)] for _ in range(n)]


def run_cell(grammar, length, rng, path="auto"):
    """Throughput of inside_outside over a batch of sentences of one length."""
    probe = CKYParser(grammar, corpus(grammar, length, 8, rng), path=path)
    macs = probe.work_per_sentence(length)
    probe.inside_outside(grammar.weights)
    t = _timed(lambda: probe.inside_outside(grammar.weights))
    n = int(np.clip(TARGET_S / max(t / 8, 1e-6), 8, 5000))
    parser = CKYParser(grammar, corpus(grammar, length, n, rng), path=path)
    counts, logz = parser.inside_outside(grammar.weights)
    assert np.all(np.isfinite(logz)) and np.all(np.isfinite(counts))
    dt = min(_timed(lambda: parser.inside_outside(grammar.weights)) for _ in range(REPS))
    return {"path": parser.path, "n": n, "sps": n / dt, "macs": macs}


HASTINGS_GOAL = 2.0     # a Hastings sweep <= this many E-steps of the same sentences


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


def hastings_cell(grammar, length, rng, seconds=0.4, most=200):
    """(sentences, E-step s, Hastings sweep s) on sentences of one length: as many as one
    E-step covers in about ``seconds`` / 4 (at most ``most``), each the best of 3 after a
    warm-up, in CPU time (the ratio holds on a loaded machine)."""
    from grind.heap import fix_mmap_threshold
    from grind.infer.hastings import Hastings
    fix_mmap_threshold()                    # as the command line runs (grind train --algo hastings)
    probe = CKYParser(grammar, corpus(grammar, length, 4, rng))
    probe.inside_outside(grammar.weights)
    t = _timed(lambda: probe.inside_outside(grammar.weights)) / 4
    n = int(np.clip(seconds / 4 / max(t, 1e-6), 8, most))
    parser = CKYParser(grammar, corpus(grammar, length, n, rng))
    parser.inside_outside(grammar.weights)
    estep = min(_cpu(lambda: parser.inside_outside(grammar.weights)) for _ in range(3))
    cfg = SimpleNamespace(iterations=10, tolerance=0.0, temp_start=1.0, anneal_sweeps=None, proposal_batch=1)
    algo = Hastings(grammar, parser, np.full(len(grammar), 0.1), grammar.weights, cfg, np.random.default_rng(1))
    algo.update()
    assert algo._flat is not None, "the Hastings sweep did not run in the kernel"
    sweep = min(_cpu(algo.update) for _ in range(3))
    return n, estep, sweep


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m grind.bench.cky", description=__doc__.split("\n")[0])
    ap.add_argument("--no-hastings", dest="hastings", action="store_false",
                    help="leave out the Metropolis-Hastings sweep against the E-step")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(12345)
    rate = matmul_rate()
    rows, hrows = [], []
    for n in (10, 20, 40):
        g = dense_grammar(n, rng)
        for length in (10, 20, 40):
            rows.append((f"dense N={n}", length, run_cell(g, length, rng)))
            if args.hastings:
                hrows.append((f"dense N={n}", length, *hastings_cell(g, length, rng)))
    g = sparse_grammar(200, 20, rng)
    for length in (10, 20):
        rows.append(("sparse 200 NT x 20", length, run_cell(g, length, rng)))
        if args.hastings:
            hrows.append(("sparse 200 NT x 20", length, *hastings_cell(g, length, rng)))
    rate = max(rate, matmul_rate(reps=3))
    print(f"CKY inside-outside E-step, 1 thread, float64; numpy matmul rate "
          f"{rate / 1e9:.2f} G multiply-adds/s (best of 8)\n")
    print("| grammar | L | path | sentences | sent/s | MACs/sent | GMAC/s | % of matmul | limit sent/s |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, length, r in rows:
        achieved = r["sps"] * r["macs"]
        print(f"| {name} | {length} | {r['path']} | {r['n']} | {r['sps']:.1f} | {r['macs'] / 1e6:.2f}M "
              f"| {achieved / 1e9:.2f} | {100 * achieved / rate:.1f}% | {rate / r['macs']:.0f} |")
    if hrows:
        print("\nCollapsed Metropolis-Hastings (--proposal-batch 1, T = 1, alpha 0.1) against the E-step of the "
              "same sentences, best of 3, CPU time:\n")
        print("| grammar | L | sentences | E-step ms | Hastings sweep ms | sweep / E-step |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, length, n, e, h in hrows:
            print(f"| {name} | {length} | {n} | {1e3 * e:.2f} | {1e3 * h:.2f} | {h / e:.2f} |")
        worst = max(h / e for *_, e, h in hrows)
        ok = "met" if worst <= HASTINGS_GOAL else "NOT met"
        print(f"\nGoal: a Hastings sweep <= {HASTINGS_GOAL:g}x an E-step on every cell: {ok} (worst {worst:.2f}x)")
    return {"rows": rows, "hastings": hrows}


if __name__ == "__main__":
    main()
