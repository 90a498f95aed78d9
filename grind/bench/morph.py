"""``python -m grind.bench.morph``: sampler / CVB / EM throughput on the Czech morphology grammar.

The grammar is ``morph_grammar`` (default ``czech`` templates, characters) of
the first column of the SIGMORPHON 2022 Czech training words
(/work/shared/data/sigmorphon2022_segmentation/ces.word.train.tsv, or
$GRIND_CES_TRAIN; falls back to data/morph/ces-train-sample.tsv).  Timed on
one core, in words a second:

* a Hastings sweep with --proposal-batch 1 (one kernel call per word; timed on
  the first --sub words of a sweep, the grammar being the full one) and with
  --proposal-batch N (a whole sweep over every word);
* a CVB sweep (alpha 1e-5) over every word, as ``grind train --algo cvb`` runs it: theta
  refreshed only on the rules each word reads and one-word counts from
  ``SegmentParser.local_rules`` / ``sparse_counts`` (the second sweep after
  the initial E-step; the first is timed too), and the same sweep by the old
  path -- theta renormalised per LHS of the changed rules, one dense
  inside-outside a word -- on the first --sub words (the grammar being the
  full one), the speed-up being the ratio of the two rates;
* one EM E-step (inside-outside over every word in one kernel call) -- the
  reference: py-cfg is not available here, so every rate is also given as a
  ratio to grind's own E-step measured in the same run.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core (effective when imported first)

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402

from grind.grammars.morph import builtin_templates, morph_grammar  # noqa: E402
from grind.infer.cvb import CVB, DenseOnly  # noqa: E402
from grind.infer.hastings import Hastings  # noqa: E402
from grind.infer.training import ShardedEstep  # noqa: E402
from grind.kernels.segment import SegmentParser  # noqa: E402

SHARED = "/work/shared/data/sigmorphon2022_segmentation/ces.word.train.tsv"
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "morph" / "ces-train-sample.tsv"


def read_words(path) -> list[list[str]]:
    seen, out = set(), []
    with open(path, encoding="utf-8") as f:
        for line in f:
            w = line.split("\t", 1)[0].strip()
            if w and w not in seen:
                seen.add(w)
                out.append(list(w))
    return out


def corpus_path():
    for p in (os.environ.get("GRIND_CES_TRAIN"), SHARED):
        if p and Path(p).is_file():
            return Path(p)
    print(f"[morph bench] {SHARED} not found; using {SAMPLE}", file=sys.stderr)
    return SAMPLE if SAMPLE.is_file() else None


def hastings(g, words, batch, seed, sub=None, temp=1.0):
    cfg = SimpleNamespace(iterations=10, tolerance=0.0, temp_start=temp, anneal_sweeps=None, proposal_batch=batch)
    rng = np.random.default_rng(seed)
    return Hastings(g, ShardedEstep(SegmentParser(g, words)), np.full(len(g), 1e-3), g.weights, cfg, rng)



def cvb(g, parser, seed, alpha=1e-5):
    return CVB(g, ShardedEstep(parser), np.full(len(g), alpha), g.weights,
               SimpleNamespace(iterations=2, tolerance=0.0), np.random.default_rng(seed))


def timed_sweep(algo):
    t = time.perf_counter()
    st = algo.step()
    return time.perf_counter() - t, st


def measure(words, batch, sub, seed):
    t = time.perf_counter()
    g = morph_grammar(words, builtin_templates("czech"))
    t_gram = time.perf_counter() - t
    parser = SegmentParser(g, words)
    res = {"words": len(words), "rules": len(g), "grammar_s": t_gram}
    t = time.perf_counter()
    parser.inside_outside(g.weights)
    res["em"] = len(words) / (time.perf_counter() - t)
    few = words[:sub]
    a1 = hastings(g, few, 1, seed)
    dt, st = timed_sweep(a1)
    res["h1"], res["h1_acc"] = len(few) / dt, st.extra["acceptance"]
    aN = hastings(g, words, batch, seed)
    rates, accs = [], []
    for _ in range(2):
        dt, st = timed_sweep(aN)
        rates.append(len(aN.ok) / dt)
        accs.append(st.extra["acceptance"])
    res["hN"], res["hN_acc"] = max(rates), accs[-1]
    t = time.perf_counter()
    c = cvb(g, parser, seed)
    res["cvb_init_s"], res["cvb_local"] = time.perf_counter() - t, c.lhs_tot is not None
    dts = [timed_sweep(c)[0] for _ in range(2)]
    res["cvb"], res["cvb_s"], res["cvb_first_s"] = len(c.parser.sentences) / dts[1], dts[1], dts[0]
    old = cvb(g, DenseOnly(SegmentParser(g, few)), seed)
    dt, _ = timed_sweep(old)
    res["cvb_old"] = len(few) / dt
    return res


def table(r, batch, sub) -> str:
    em = r["em"]
    rows = [(f"EM E-step (one inside-outside call, {r['words']:,} words) -- reference", em, "—"),
            (f"Hastings sweep, --proposal-batch 1 (first {sub:,} words)", r["h1"], f"{r['h1_acc']:.3f}"),
            (f"Hastings sweep, --proposal-batch {batch} (all words, best of 2)", r["hN"], f"{r['hN_acc']:.3f}"),
            ("CVB sweep, " + ("local theta" if r["cvb_local"] else "full theta refresh") +
             f" + one-word counts (all words; 2nd sweep {r['cvb_s']:.1f} s, 1st {r['cvb_first_s']:.1f} s, "
             f"init {r['cvb_init_s']:.1f} s)", r["cvb"], "—"),
            (f"CVB sweep, old path: per-LHS theta refresh + dense inside-outside (first {sub:,} words)",
             r["cvb_old"], "—")]
    head = (f"| Czech morph grammar, {r['rules']:,} rules, {r['words']:,} words | words/s | × EM E-step "
            "| acceptance |\n|---|---:|---:|---:|\n")
    return head + "\n".join(f"| {a} | {b:,.0f} | {b / em:.3f} | {c} |" for a, b, c in rows)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.morph", description=__doc__.split("\n")[0])
    ap.add_argument("--proposal-batch", type=int, default=1024)
    ap.add_argument("--sub", type=int, default=300, help="words timed for the one-call-per-word sweeps")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    path = corpus_path()
    if path is None:
        print("(skipping morph benchmark: no Czech training words found)", file=sys.stderr)
        return None
    words = read_words(path)
    print(f"[morph bench] {path} ...", file=sys.stderr, flush=True)
    r = measure(words, args.proposal_batch, min(args.sub, len(words)), args.seed)
    print("### Morphology: Hastings / CVB / EM throughput (one core)\n")
    print(table(r, args.proposal_batch, min(args.sub, len(words))))
    ok = "meets" if r["hN"] >= 20_000 else "MISSES"
    print(f"\nCVB: {r['cvb'] / r['cvb_old']:,.0f}x the old path's words/s "
          f"(a sweep over the {r['words']:,} words: {r['cvb_s']:.1f} s, old path ~{r['words'] / r['cvb_old']:,.0f} s).")
    print(f"\nTarget: a Hastings sweep >= 20,000 words/s: {ok} ({r['hN']:,.0f} with --proposal-batch "
          f"{args.proposal_batch}). py-cfg is not available; ratios are to grind's EM E-step in this run.")
    return r


if __name__ == "__main__":
    main()
