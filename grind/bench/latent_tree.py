"""``python -m grind.bench.latent_tree``: E-step throughput of the latent-annotation tree kernel.

Data: the training split (wsj_0001 .. wsj_0159) of the Penn Treebank sample
under nltk_ptb_sample/treebank/combined of $GRIND_SHARED_DATA,
/work/shared/data or ../shared/data (beside the repository), prepared as
:func:`grind.formats.treebank.prepare` prepares it (binarised, rare words to
signatures); when none is there, a synthetic treebank of random trees (said
so in the output), so that the benchmark always prints something.

Grammar: the treebank PCFG split into H subtypes per symbol
(:func:`grind.grammars.latent.split_grammar`, seed 1) for H = 2, 8, 16;
``--h`` (or $GRIND_LATENT_BENCH_H, e.g. ``2,8``) chooses them: building the
H = 16 grammar (about 6.5M rules on the PTB sample) takes about a minute.

Timed on one core, in trees a second: one inside-outside E-step over every
tree (:class:`grind.kernels.latent_tree.TreeParser`, best of ``--reps``), and
the reference: the same E-step written in numpy (one einsum per node and
direction, scaled like the kernel) on the first ``--ref-trees`` trees,
measured in the same run; the ratio is kernel / numpy.  The reference's log Z
and counts on those trees are compared with the kernel's (largest relative
difference).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core (effective when imported first)

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from grind.formats.treebank import prepare  # noqa: E402
from grind.formats.trees import read_trees  # noqa: E402
from grind.grammars.latent import BINARY, LEXICAL, split_grammar, treebank_grammar  # noqa: E402
from grind.kernels import _latent_tree  # noqa: E402, F401  (unbuilt: ImportError, and `make bench` skips this)
from grind.kernels.latent_tree import TreeParser  # noqa: E402

PTB = Path("nltk_ptb_sample") / "treebank" / "combined"
TRAIN = range(1, 160)                    # wsj_0001 .. wsj_0159
TARGET_H, TARGET = 8, 2000               # trees/s


def ptb_dir() -> Path | None:
    repo = Path(__file__).resolve().parents[2]
    for root in (os.environ.get("GRIND_SHARED_DATA"), "/work/shared/data", repo.parent / "shared" / "data"):
        if root and (Path(root) / PTB / "wsj_0001.mrg").is_file():
            return Path(root) / PTB
    return None


def ptb_train(where: Path) -> list:
    return [t for i in TRAIN if (where / f"wsj_{i:04d}.mrg").is_file()
            for t in read_trees(str(where / f"wsj_{i:04d}.mrg"))]


PHRASES = ("S", "NP", "VP", "PP", "ADJP", "SBAR")
TAGS = ("DT", "NN", "NNS", "VBD", "IN", "JJ", "PRP", "RB", "CC", "CD")


def synthetic_trees(n: int, rng) -> list:
    """``n`` random raw trees: 3..40 words (Zipfian over 3,000), phrases of 1-4 children."""
    def grow(words):
        if len(words) == 1:
            return (TAGS[int(rng.integers(len(TAGS)))], words[0])
        k = int(min(len(words), rng.integers(1, 5)))
        if k == 1:
            k = 2
        cuts = np.sort(rng.choice(np.arange(1, len(words)), size=k - 1, replace=False))
        parts = np.split(np.array(words, dtype=object), cuts)
        return (PHRASES[int(rng.integers(len(PHRASES)))], *(grow(list(p)) for p in parts))

    return [grow([f"w{int(x)}" for x in np.minimum(rng.zipf(1.3, size=int(rng.integers(3, 41))), 3000)])
            for _ in range(n)]


def block_shape(latent, j) -> tuple:
    """The shape of base rule j's block: (H_A,), (H_A, H_B) or (H_A, H_B, H_C)."""
    ns, k = latent.nsub, latent.kind[j]
    return ((int(ns[latent.parent[j]]),) + ((int(ns[latent.left[j]]),) if k != LEXICAL else ())
            + ((int(ns[latent.right[j]]),) if k == BINARY else ()))


def numpy_estep(latent, weights, encoded):
    """The E-step of the kernel in numpy (module docstring of grind.kernels.latent_tree),
    one einsum per node and direction: (block-entry counts, log Z per tree)."""
    W = latent.gather(weights)
    blocks = [W[o:o + s].reshape(block_shape(latent, j)) for j, (o, s) in enumerate(zip(latent.offset, latent.size))]
    cnt = [np.zeros(b.shape) for b in blocks]
    kind = latent.kind
    logz = []
    for rule, lk, rk in encoded:
        n = len(rule)
        beta, lb = [None] * n, np.zeros(n)
        zero = False
        for i in range(n):
            r, blk = rule[i], blocks[rule[i]]
            if kind[r] == LEXICAL:
                v, ls = blk.copy(), 0.0
            elif kind[r] == BINARY:
                v, ls = np.einsum("abc,b,c->a", blk, beta[lk[i]], beta[rk[i]]), lb[lk[i]] + lb[rk[i]]
            else:
                v, ls = np.einsum("ab,b->a", blk, beta[lk[i]]), lb[lk[i]]
            m = v.max()
            if not m > 0:
                zero = True
                break
            beta[i], lb[i] = v / m, ls + np.log(m)
        if zero:
            logz.append(-np.inf)
            continue
        lz = lb[-1] + np.log(beta[-1].sum())
        logz.append(lz)
        alpha, la = [None] * n, np.zeros(n)
        alpha[-1] = np.ones_like(beta[-1])
        for i in range(n - 1, -1, -1):
            r, blk, a = rule[i], blocks[rule[i]], alpha[i]
            if kind[r] == LEXICAL:
                cnt[r] += np.exp(la[i] - lz) * a * blk
            elif kind[r] == BINARY:
                l, q = lk[i], rk[i]
                cnt[r] += np.exp(la[i] + lb[l] + lb[q] - lz) * np.einsum("a,abc,b,c->abc", a, blk, beta[l], beta[q])
                for kid, other, v in ((l, q, np.einsum("a,abc,c->b", a, blk, beta[q])),
                                      (q, l, np.einsum("a,abc,b->c", a, blk, beta[l]))):
                    m = v.max()
                    alpha[kid], la[kid] = (v / m, la[i] + lb[other] + np.log(m)) if m > 0 else (v, -np.inf)
            else:
                l = lk[i]
                cnt[r] += np.exp(la[i] + lb[l] - lz) * np.einsum("a,ab,b->ab", a, blk, beta[l])
                v = np.einsum("a,ab->b", a, blk)
                m = v.max()
                alpha[l], la[l] = (v / m, la[i] + np.log(m)) if m > 0 else (v, -np.inf)
    return np.concatenate([c.ravel() for c in cnt]), np.array(logz)


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def measure(trees, h: int, ref_trees: int, reps: int, seed: int = 1) -> dict:
    """Kernel and numpy E-step throughput at H = h."""
    g1 = treebank_grammar(trees)
    t_split, g = _timed(lambda: split_grammar(g1, h, np.random.default_rng(seed)))
    t_build, parser = _timed(lambda: TreeParser(g, trees))
    w = g.weights
    parser.inside_outside(w)                                    # warm up
    dt = min(_timed(lambda: parser.inside_outside(w))[0] for _ in range(reps))
    ok = [s for s in range(len(trees)) if s not in parser.failures]
    sub = ok[:ref_trees]
    lg = parser.latent
    encoded = [lg.encode(trees[s])[0] for s in sub]
    t_ref, (ref_cnt, ref_z) = _timed(lambda: numpy_estep(lg, w, encoded))
    got_cnt = np.zeros(lg.n_entries)
    got_z = np.empty(len(sub))
    parser._kernel.inside_outside(parser._buffer(w), np.array(sub, dtype=np.int64), got_cnt, got_z)
    scale = max(1.0, float(np.abs(ref_cnt).max()))
    diff = max(float(np.max(np.abs(got_z - ref_z) / np.maximum(1.0, np.abs(ref_z)))),
               float(np.abs(got_cnt - ref_cnt).max()) / scale)
    return {"h": h, "rules": len(g), "entries": lg.n_entries, "trees": len(ok), "nodes": int(parser.n_nodes.sum()),
            "split_s": t_split, "build_s": t_build, "tps": len(ok) / dt, "ref_n": len(sub),
            "ref_tps": len(sub) / t_ref, "diff": diff}


def wanted_h(arg) -> list[int]:
    text = arg or os.environ.get("GRIND_LATENT_BENCH_H") or "2,8,16"
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.latent_tree", description=__doc__.split("\n")[0])
    ap.add_argument("--h", default=None, help="subtypes per symbol, comma-separated (default 2,8,16 or "
                    "$GRIND_LATENT_BENCH_H)")
    ap.add_argument("--ref-trees", type=int, default=150, help="trees the numpy reference is timed on")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--synthetic", type=int, default=0, metavar="N",
                    help="use N random trees instead of the PTB sample")
    args = ap.parse_args(argv)
    where = None if args.synthetic else ptb_dir()
    if where is None:
        n = args.synthetic or 3000
        if not args.synthetic:
            print(f"[latent bench] no {PTB} under $GRIND_SHARED_DATA, /work/shared/data or ../shared/data: "
                  f"using {n} synthetic random trees", file=sys.stderr)
        raw, source = synthetic_trees(n, np.random.default_rng(0)), f"{n} synthetic random trees"
    else:
        raw, source = ptb_train(where), f"PTB sample training split ({where}/wsj_0001-0159)"
    trees, _, _ = prepare(raw)
    rows = []
    for h in wanted_h(args.h):
        if h >= 16:
            print(f"[latent bench] H={h}: building the split grammar takes about a minute on the PTB sample "
                  "(skip with --h or GRIND_LATENT_BENCH_H=2,8)", file=sys.stderr, flush=True)
        rows.append(measure(trees, h, args.ref_trees, args.reps))
    print(f"### Latent-annotation tree kernel: E-step throughput (one core)\n\n{source}: "
          f"{len(trees):,} trees, {rows[0]['nodes'] if rows else 0:,} nodes\n")
    print("| H | rules | block entries | grammar build s | kernel trees/s | numpy einsum trees/s (trees) "
          "| × numpy | max rel diff |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['h']} | {r['rules']:,} | {r['entries']:,} | {r['split_s'] + r['build_s']:.1f} "
              f"| {r['tps']:,.0f} | {r['ref_tps']:,.1f} ({r['ref_n']}) | {r['tps'] / r['ref_tps']:,.0f} "
              f"| {r['diff']:.1e} |")
    at = [r for r in rows if r["h"] == TARGET_H]
    if at:
        ok = "meets" if at[0]["tps"] >= TARGET else "MISSES"
        print(f"\nTarget: >= {TARGET:,} trees/s at H={TARGET_H}: {ok} ({at[0]['tps']:,.0f}).")
    return {"source": source, "rows": rows}


if __name__ == "__main__":
    main()
