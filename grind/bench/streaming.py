"""``python -m grind.bench.streaming``: streaming VB with one-sentence minibatches against batch VB, per sentence.

Pate & Johnson's (2016) streaming VB reads a first minibatch, then one
sentence a minibatch with one VB iteration each.  On a lexicalized DMV from
words (a Zipfian planted corpus shaped like UD English-CHILDES 4-15 by
default: about 16,000 sentences, 4,000 word types, 240,000 rules; or
``--conllu FILE`` read as LFORM with UD punctuation removed, 4-15 words),
this times in one process on one core:

* batch VB: ``--vb-iterations`` iterations over the corpus, per sentence parsed;
* streaming VB after its first minibatch: ``--stream`` one-sentence minibatches
  (reading the stream, building the sentence's parser, the update), per sentence;
* the same minibatches with the dense update (every rule's VB weight, the KL
  term over all of them: how streaming VB ran before the sparse update), on
  ``--dense`` of them.

It prints sentences/s and each streaming cost as a ratio to batch VB's
per-sentence cost (and the sparse update's speed-up over the dense one).
Target: >= 2,000 one-sentence minibatches a second on one core.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")          # one core (effective when imported first)

import argparse  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import numpy as np  # noqa: E402

import grind.infer.streaming as streaming_mod  # noqa: E402
from grind.formats.corpus import CorpusSpec, read_corpus  # noqa: E402
from grind.grammars.dmv import dmv_grammar  # noqa: E402
from grind.grammars.planted import write_planted_corpus  # noqa: E402
from grind.infer.streaming import StreamingVB  # noqa: E402
from grind.infer.training import ShardedEstep  # noqa: E402
from grind.infer.vb import VB  # noqa: E402
from grind.kernels.dmv import DMVParser  # noqa: E402

TARGET = 2000
CHILDES = CorpusSpec(column="LFORM", punct="ud", min_length=4, max_length=15)


def streaming_rate(g, path, spec, first, n, dense=False):
    """Seconds a sentence of ``n`` one-sentence minibatches after the first minibatch of ``first``."""
    share = streaming_mod.SPARSE_SHARE
    streaming_mod.SPARSE_SHARE = 0.0 if dense else share
    try:
        cfg = SimpleNamespace(corpus=path, spec=spec, batch=1, first_batch=first, batch_iterations=1,
                              kernel="auto", jobs=1)
        algo = StreamingVB(g, None, np.ones(len(g)), g.probabilities(), cfg)
        algo.step()
        t = time.process_time()
        done = 0
        while done < n and algo.step() is not None:
            done += 1
        return (time.process_time() - t) / max(done, 1), done
    finally:
        streaming_mod.SPARSE_SHARE = share


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m grind.bench.streaming", description=__doc__.split("\n")[0])
    ap.add_argument("--conllu", default=None, help="a CoNLL-U corpus (LFORM, UD punctuation removed, 4-15 words) "
                                                    "instead of the planted one, e.g. CHILDES train")
    ap.add_argument("--sentences", type=int, default=24_000, help="planted sentences written (before the 4-15 filter)")
    ap.add_argument("--types", type=int, default=4_000, help="planted word types")
    ap.add_argument("--first", type=int, default=10_000, help="streaming VB's first minibatch")
    ap.add_argument("--stream", type=int, default=3_000, help="one-sentence minibatches timed")
    ap.add_argument("--dense", type=int, default=30, help="of them, timed with the dense update")
    ap.add_argument("--vb-iterations", type=int, default=3)
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="grind-bench-streaming-")
    try:
        if a.conllu:
            path, spec, what = a.conllu, CHILDES, a.conllu
        else:
            path, spec = os.path.join(tmp, "planted.txt"), CorpusSpec(min_length=4, max_length=15)
            write_planted_corpus(os.path.join(tmp, "planted.conllu"), a.sentences, a.types, seed=1, text_path=path)
            what = f"planted DMV words ({a.types:,} types)"
        sents = [s.tokens for s in read_corpus(path, spec)]
        first = min(a.first, len(sents) // 2)
        g = dmv_grammar(sents, lexicalized=True)
        parser = DMVParser(g, sents)
        vb = VB(g, ShardedEstep(parser), np.ones(len(g)), g.probabilities(),
                SimpleNamespace(iterations=a.vb_iterations, tolerance=0.0))
        t = time.process_time()
        for _ in range(a.vb_iterations):
            vb.update()
        per_vb = (time.process_time() - t) / (a.vb_iterations * len(sents))
        per_sparse, n_sparse = streaming_rate(g, path, spec, first, a.stream)
        per_dense, n_dense = streaming_rate(g, path, spec, first, a.dense, dense=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"### Streaming VB, one-sentence minibatches, vs batch VB (one core, CPU time)\n\n"
          f"{what}: {len(sents):,} sentences of 4-15 words, lexicalized DMV of {len(g):,} rules; streaming VB after "
          f"a first minibatch of {first:,}, one VB iteration a minibatch.\n")
    print("| | sentences timed | sentences/s | cost per sentence / batch VB's |")
    print("|---|---:|---:|---:|")
    print(f"| batch VB ({a.vb_iterations} iterations) | {a.vb_iterations * len(sents):,} | {1 / per_vb:,.0f} | 1 |")
    print(f"| streaming VB, sparse update | {n_sparse:,} | {1 / per_sparse:,.0f} | {per_sparse / per_vb:,.1f} |")
    print(f"| streaming VB, dense update (before) | {n_dense:,} | {1 / per_dense:,.0f} | {per_dense / per_vb:,.1f} |")
    print(f"\nsparse update: {per_dense / per_sparse:,.0f}x the dense one; target >= {TARGET:,} sentences/s: "
          f"{'met' if 1 / per_sparse >= TARGET else 'NOT met'}")
    return {"vb": per_vb, "sparse": per_sparse, "dense": per_dense, "rules": len(g), "sentences": len(sents)}


if __name__ == "__main__":
    main()
