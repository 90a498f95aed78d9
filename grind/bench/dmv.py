"""``python -m grind.bench.dmv``: DMV E-step throughput on one core.

One E-step = ``inside_outside`` over every sentence of a random corpus
(expected counts of all rules + log Z per sentence), timed best-of-k after a
warm-up.  Settings: 35 tags at lengths 2-10 and 2-20, and a lexicalized
grammar (choose rules only for co-occurring word pairs) over a 20,000-word
vocabulary with Zipfian word frequencies.  The general CKY kernel
(``grind.kernels.cky.CKYParser``, on the same grammar with split sentences) is timed
on a subset in the same run (sized to take about --cky-seconds a call; when one
sentence alone takes longer, as on the lexicalized grammars, that one call's
rate); its column is skipped if it cannot be imported or cannot compile the
grammar.  Targets: >= 150,000 sentences/s at 2-10 and
>= 50,000 at 2-20 (the fastest existing tools: 10,000-14,500 and 2,000-6,600).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core (effective when imported first)

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from grind.grammars.dmv import dmv_grammar, split_heads  # noqa: E402
from grind.kernels.dmv import DMVParser  # noqa: E402

TARGETS = {10: 150_000, 20: 50_000}


def tag_corpus(rng, n_sent, max_len, n_tags=35):
    tags = np.array([f"T{i}" for i in range(n_tags)])
    lens = rng.integers(2, max_len + 1, size=n_sent)
    return _split(tags[rng.integers(0, n_tags, size=lens.sum())], lens), None


def zipf_corpus(rng, n_sent, max_len, vocab=20_000):
    words = np.array([f"w{i}" for i in range(vocab)])
    p = 1.0 / np.arange(1, vocab + 1)
    lens = rng.integers(2, max_len + 1, size=n_sent)
    return _split(words[rng.choice(vocab, size=lens.sum(), p=p / p.sum())], lens), words.tolist()


def _split(tokens, lens):
    return [s.tolist() for s in np.split(tokens, np.cumsum(lens)[:-1])]


def best_rate(parser, weights, n_sent, repeats):
    """Sentences/s of the best of ``repeats`` full E-steps (after one warm-up)."""
    parser.inside_outside(weights)
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        parser.inside_outside(weights)
        best = min(best, time.perf_counter() - t)
    return n_sent / best


def cky_rate(grammar, sents, weights, seconds):
    """CKY E-step sentences/s on a subset sized to take about ``seconds`` a call.

    A one-sentence call sizes the subset; when that call alone takes longer than
    ``seconds`` (the lexicalized grammars: seconds a sentence), its rate is the
    one reported, so the column stays within its time budget."""
    try:
        from grind.kernels.cky import CKYParser
    except ImportError as e:
        return None, f"not importable ({e})"
    try:
        probe = CKYParser(grammar, [split_heads(sents[0])])
        t = time.perf_counter()
        probe.inside_outside(weights)
        t = time.perf_counter() - t
        if t > seconds:
            return 1 / t, "1 sentence, one call: over the time budget"
        k = int(min(len(sents), max(1, seconds / t)))
        return (best_rate(CKYParser(grammar, [split_heads(s) for s in sents[:k]]), weights, k, 2),
                f"{k} sentence{'s' if k > 1 else ''}")
    except Exception as e:                    # noqa: BLE001 - report and go on
        return None, f"cannot compile the grammar: {type(e).__name__}"


def run_setting(label, make, max_len, n_sent, rng, lexicalized, cky_seconds):
    sents, vocab = make(rng, n_sent, max_len)
    t = time.perf_counter()
    g = dmv_grammar(sents, lexicalized=lexicalized, vocabulary=vocab)
    t_grammar = time.perf_counter() - t
    w = g.normalize(rng.gamma(1.0, size=len(g)))
    t = time.perf_counter()
    p = DMVParser(g, sents)
    t_parser = time.perf_counter() - t
    dmv = best_rate(p, w, len(sents), 5)
    cky, note = cky_rate(g, sents, w, cky_seconds)
    return dict(label=label, n=len(sents), rules=len(g), build=t_grammar + t_parser, dmv=dmv,
                target=TARGETS.get(max_len) if not lexicalized else None, cky=cky, note=note)


def table(rows) -> str:
    head = ("| setting | sentences | rules | build s | DMV E-step sent/s | target | "
            "CKY E-step sent/s | DMV / CKY |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
    lines = []
    for r in rows:
        if r["cky"]:
            cky = f"{r['cky']:,.0f}" if r["cky"] >= 100 else f"{r['cky']:.2g} ({r['note']})"
        else:
            cky = f"— ({r['note']})"
        ratio = f"{r['dmv'] / r['cky']:,.0f}x" if r["cky"] else "—"
        target = f">= {r['target']:,}" if r["target"] else "—"
        lines.append(f"| {r['label']} | {r['n']:,} | {r['rules']:,} | {r['build']:.1f} | "
                     f"{r['dmv']:,.0f} | {target} | {cky} | {ratio} |")
    return head + "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.dmv", description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=float, default=1.0, help="corpus size factor (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cky-seconds", type=float, default=3.0, help="time budget of each CKY run")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    sc = lambda k: max(100, int(k * args.scale))  # noqa: E731
    settings = [("35 tags, length 2-10", tag_corpus, 10, sc(100_000), False),
                ("35 tags, length 2-20", tag_corpus, 20, sc(50_000), False),
                ("lexicalized, 20k-word Zipf vocab, length 2-10", zipf_corpus, 10, sc(20_000), True),
                ("lexicalized, 20k-word Zipf vocab, length 2-20", zipf_corpus, 20, sc(20_000), True)]
    rows = []
    for label, make, max_len, n, lex in settings:
        print(f"[dmv bench] {label} ...", file=sys.stderr, flush=True)
        rows.append(run_setting(label, make, max_len, n, rng, lex, args.cky_seconds))
    print("### DMV kernel: E-step throughput (one core)\n")
    print(table(rows))
    print("\nE-step = expected counts of every rule + log Z of every sentence (best of 5). "
          "Fastest existing tools: 10,000-14,500 sent/s at 2-10, 2,000-6,600 at 2-20.")
    return rows


if __name__ == "__main__":
    main()
