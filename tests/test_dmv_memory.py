"""The DMV parser's memory is bounded per sentence (issue 15: <= 1 KB a sentence at
peak, measured on 50,000 sentences), and its compact rule tables give the results
of the tables it stored before, bit for bit.

The memory is measured in a fresh interpreter that has already loaded the grammar
and the sentences and built a parser for a few of them (imports, the grammar's
index), so only the parser's own state and the temporaries of building it count:
the growth of the peak resident set (``/proc/self/clear_refs`` resets the peak on
Linux; freed heap is returned first) and, everywhere, the peak of the allocations
``tracemalloc`` sees (Python objects and numpy arrays, deterministic).  Two
corpora of 1-15 words: over 40 tags (the kernel looks the arc rules up) and over
300 (every sentence stores its arc rules, as with a large vocabulary).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from grind.grammars.dmv import dmv_grammar, split_heads
from grind.infer.constraints import constrained_parser
from grind.kernels import dmv as dmv_kernel
from grind.kernels.dmv import DMVParser
from grind.kernels.select import make_parser

N_SENT = 50_000
LIMIT = 1024                # bytes a sentence, at peak (issue 15)

_MEASURE = textwrap.dedent("""
    import ctypes, gc, json, sys, tracemalloc
    import numpy as np
    from grind.grammars.dmv import dmv_grammar
    from grind.kernels.dmv import DMVParser

    kind, N = sys.argv[1], int(sys.argv[2])
    rng = np.random.default_rng(0)
    # 40 tags: the kernel looks arc rules up; 300 tags: too many for that, every
    # sentence stores its n*n + n arc and root rules (as large vocabularies do)
    vocab = [f"T{i}" for i in range(40 if kind == "tags" else 300)]
    sents = [[vocab[i] for i in rng.integers(0, len(vocab), size=int(rng.integers(1, 16)))] for _ in range(N)]
    g = dmv_grammar(sents, vocabulary=vocab)
    w = g.weights.copy()
    build = lambda: DMVParser(g, sents)
    small = DMVParser(g, sents[:20])     # warm up: imports, the grammar's DMV index, the kernel
    small.inside_outside(w)
    del small

    def rss(key):
        with open("/proc/self/status") as f:
            return next(int(x.split()[1]) * 1024 for x in f if x.startswith(key))

    def reset_peak():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def settle():                        # return freed heap to the system, so RSS growth is growth
        gc.collect()
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass

    out = {}
    settle()
    if reset_peak():
        base = rss("VmRSS:")
        parser = build()
        out["rss_build"] = (rss("VmHWM:") - base) / N
        out["rss_kept"] = (rss("VmRSS:") - base) / N
        reset_peak()
        parser.inside_outside(w)
        out["rss_estep"] = (rss("VmHWM:") - base) / N
        del parser
        settle()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    parser = build()
    kept, peak = tracemalloc.get_traced_memory()
    out["traced_build"] = (peak - base) / N
    out["traced_kept"] = (kept - base) / N
    tracemalloc.reset_peak()
    parser.inside_outside(w)
    out["traced_estep"] = (tracemalloc.get_traced_memory()[1] - base) / N
    print(json.dumps(out))
""")


def measure(kind: str, n: int = N_SENT) -> dict:
    """Bytes a sentence: peaks while building the parser and during one
    inside_outside (growth over the loaded interpreter), and what stays."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-c", _MEASURE, kind, str(n)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tags", "stored"])
def test_dmv_parser_state_is_at_most_1kb_a_sentence_at_peak(kind):
    got = measure(kind)
    print(kind, {k: round(v) for k, v in got.items()})
    for key in ("rss_build", "rss_estep", "traced_build", "traced_estep"):
        if key in got:                   # the RSS figures need Linux's /proc
            assert got[key] <= LIMIT, f"{kind}: {key} = {got[key]:.0f} bytes a sentence > {LIMIT}: {got}"
    if kind == "tags":                   # no per-pair table at all: ~80 bytes a sentence (the parser
        assert got["traced_kept"] <= 400, got   # shares the caller's token lists; it copied them: ~200)
    else:                                # a test that cannot fail is a defect: the measure sees
        assert got["traced_kept"] >= 4 * 90.7, got   # the stored tables (mean n^2 + n = 90.7 int32s)


# ---------------------------------------------------------------- same results

def _corpus(rng, n_sent, tags, max_len=12):
    sents = [[tags[i] for i in rng.integers(0, len(tags), size=int(rng.integers(1, max_len + 1)))]
             for _ in range(n_sent)]
    sents[3] = []                                      # empty: a failure
    sents[4] = [tags[0], "UNKNOWN", tags[1]]           # unknown word: a failure
    sents[5] = split_heads([tags[1], tags[2], tags[0]])  # split tokens: unsplit
    return sents


def _same(a, b):
    """Bit-identical arrays, lists of arrays (None where none) and tuples of them."""
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif a is None or b is None:
        assert a is None and b is None
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _all_results(p, w):
    idx = np.arange(len(p.sentences))
    return [p.inside_outside(w), p.inside_outside(0.6 * w, idx=[7, 0, 7, 5]), p.viterbi(w),
            p.viterbi_heads(w), p.sample_trees(w, np.random.default_rng(3)), p.arc_posteriors(w, idx=idx[:50]),
            p.mbr_heads(w, idx=idx[:50])]


def test_looked_up_and_stored_rule_tables_give_identical_results(monkeypatch):
    """The kernel looks arc rules up per call for tag grammars; stored tables
    (masked sentences, large vocabularies) are the tables every sentence had
    before: both must give the same numbers bit for bit."""
    rng = np.random.default_rng(7)
    tags = [f"t{i}" for i in range(9)]
    sents = _corpus(rng, 400, tags)
    g = dmv_grammar([tags], vocabulary=tags)
    w = g.normalize(rng.random(len(g)) + 0.05)
    looked_up = DMVParser(g, sents)
    assert looked_up._core is not None and looked_up.failures.keys() == {3, 4}
    assert looked_up.sentences[5] == [tags[1], tags[2], tags[0]]
    monkeypatch.setattr(dmv_kernel, "_LOOKUP_MAX", 0)          # force stored tables for every sentence
    monkeypatch.setattr(dmv_kernel, "_CHUNK", 97)              # and many small build chunks
    stored = DMVParser(g, sents)
    _same(_all_results(looked_up, w), _all_results(stored, w))
    assert looked_up.failures == stored.failures
    for attr in ("lengths", "tok_off", "arc_off"):
        _same(getattr(looked_up, attr), getattr(stored, attr))
    # a mask that allows everything stores the sentence's tables: same results again
    everything = DMVParser(g, sents, masks=lambda toks, n: (np.ones((n, n), bool), np.ones(n, bool)))
    _same(_all_results(looked_up, w), _all_results(everything, w))


def test_masked_tables_built_in_chunks_match_one_chunk(monkeypatch):
    rng = np.random.default_rng(8)
    tags = [f"t{i}" for i in range(6)]
    sents = _corpus(rng, 300, tags)
    g = dmv_grammar([tags], vocabulary=tags)
    w = g.normalize(rng.random(len(g)) + 0.05)
    whole = constrained_parser(g, sents, "RA+VAR+SD")
    monkeypatch.setattr(dmv_kernel, "_CHUNK", 13)
    chunked = constrained_parser(g, sents, "RA+VAR+SD")
    _same(_all_results(whole, w), _all_results(chunked, w))
    monkeypatch.setattr(dmv_kernel, "_CHUNK", 1 << 16)
    with pytest.raises(ValueError, match="mask of sentence 0"):
        DMVParser(g, sents, masks=lambda toks, n: (np.ones((n + 1, n), bool), np.ones(n, bool)))


def test_dmv_kernel_matches_cky_on_a_fixed_corpus():
    """Against the CKY kernel on the split sentences (an independent computation)."""
    rng = np.random.default_rng(9)
    tags = [f"t{i}" for i in range(5)]
    sents = [[tags[i] for i in rng.integers(0, 5, size=int(rng.integers(1, 7)))] for _ in range(60)]
    g = dmv_grammar(sents)
    w = g.normalize(rng.random(len(g)) + 0.05)
    c1, z1 = DMVParser(g, sents).inside_outside(w)
    c2, z2 = make_parser(g, sents, kernel="cky").inside_outside(w)
    np.testing.assert_allclose(z1, z2, rtol=1e-11, atol=0)
    np.testing.assert_allclose(c1, c2, rtol=1e-9, atol=1e-11)
