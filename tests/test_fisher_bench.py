"""Issue 15 (bounded memory): the planted-DMV corpus generator, the Fisher-sized
bench, the chunked rule-file reader and the array-built lexicalized DMV."""
from __future__ import annotations

import collections
import importlib.util

import numpy as np
import pytest

from grind.formats import rules as R
from grind.formats.corpus import read_corpus, CorpusSpec
from grind.grammars.dmv import DMVIndex, dmv_grammar, dmv_index
from grind.grammars.grammar import Grammar
from grind.grammars.planted import PlantedDMV, write_planted_corpus


def body(path) -> str:
    return "".join(ln for ln in open(path) if not ln.startswith("# command") and not ln.startswith("# seed"))


def test_generator_is_deterministic(tmp_path):
    a, b, c = tmp_path / "a.conllu", tmp_path / "b.conllu", tmp_path / "c.conllu"
    write_planted_corpus(str(a), 300, 500, seed=3, text_path=str(tmp_path / "a.txt"))
    write_planted_corpus(str(b), 300, 500, seed=3)
    write_planted_corpus(str(c), 300, 500, seed=4)
    assert body(a) == body(b) and body(a) != body(c)
    gold = read_corpus(str(a), CorpusSpec(column="FORM"))
    text = read_corpus(str(tmp_path / "a.txt"))
    assert len(gold) == 300 and [s.tokens for s in gold] == [s.tokens for s in text]


def is_projective(heads) -> bool:
    arcs = [(min(i, h), max(i, h)) for i, h in enumerate(heads, 1) if h]
    return not any(a < c < b < d for a, b in arcs for c, d in arcs)


def test_trees_are_single_rooted_acyclic_projective():
    m = PlantedDMV(2000, rng=5)
    for words, heads, cls in m.sentences(2000, 6):
        n = len(words)
        assert len(heads) == len(cls) == n and (heads == 0).sum() == 1
        assert ((heads >= 0) & (heads <= n)).all() and (heads != np.arange(1, n + 1)).all()
        for i in range(1, n + 1):                    # every word reaches the root
            h, steps = heads[i - 1], 0
            while h:
                h, steps = heads[h - 1], steps + 1
                assert steps <= n
        assert is_projective(heads.tolist())
        assert (m.word_class[words] == cls).all()


@pytest.mark.slow
def test_zipf_and_length_statistics():
    m = PlantedDMV(20_000, rng=1)
    lengths, freq = [], collections.Counter()
    for words, _, _ in m.sentences(20_000, 2):
        lengths.append(len(words))
        freq.update(words.tolist())
    lengths = np.array(lengths)
    assert 7.0 <= lengths.mean() <= 8.0                      # conversational: mean ~7.5 words
    assert np.median(lengths) <= 6 and (lengths <= 2).mean() >= 0.12    # mostly short
    assert lengths.max() >= 40 and lengths.max() <= m.max_length        # a long tail
    f = np.array(sorted(freq.values(), reverse=True))[:300]
    slope = np.polyfit(np.log(np.arange(1, len(f) + 1)), np.log(f), 1)[0]
    assert -1.15 <= slope <= -0.85                            # Zipf, exponent 1
    # the most frequent word ids are the Zipf ranks
    assert [w for w, _ in freq.most_common(3)] == [0, 1, 2]


@pytest.mark.slow
def test_size_dynamic_program_matches_brute_force():
    """Y[c, m] (probability that a class-c subtree has m words) against sampling without conditioning."""
    m = PlantedDMV(50, n_classes=3, rng=2, max_length=30)
    rng = np.random.default_rng(0)
    sizes = collections.Counter()

    def size(c, cap=10):                                      # unconditioned head-outward sampling
        total = 1                                             # (stopped once past cap words)
        for s in (0, 1):
            v = 0
            while total <= cap and rng.random() >= m.stop[c, s, v]:
                total += size(int(rng.choice(3, p=m.choose[c, s])), cap - total)
                v = 1
        return total

    n = 20_000
    for _ in range(n):
        sizes[size(0)] += 1
    for k in (1, 2, 3):
        assert abs(sizes[k] / n - m.Y[0, k]) < 0.015


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_chunked_rule_reader_is_the_fast_reader(tmp_path, chunk):
    sents = [["a", "b", "c"], ["b", "d"], ["a", "c", "d", "b"]]
    g = dmv_grammar(sents, lexicalized=True)
    p = tmp_path / "g.txt"
    g.write(str(p), weights=np.linspace(0.1, 1, len(g)))
    data = p.read_bytes() + b"# late: header\n\n"
    whole = R._parse_fast(data.decode(), "g.txt", "[weight [pseudocount]]")
    got = R._parse_chunks(data, "g.txt", "[weight [pseudocount]]", chunk=chunk)
    assert got.rules() == whole.rules() and got.weights.tobytes() == whole.weights.tobytes()
    assert got.meta == whole.meta and got.meta["late"] == "header"
    dup = data + data.splitlines(keepends=True)[-3]                 # a repeated rule across pieces
    assert R._parse_chunks(dup, "g.txt", "[weight [pseudocount]]", chunk=chunk) is None


def test_lexicalized_dmv_index_is_the_classified_one():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)] + ["x_l", "y_r"]
    sents = [list(rng.choice(words, size=int(rng.integers(1, 8)))) for _ in range(200)]
    for vocab in (None, words[::-1]):
        g = dmv_grammar(sents, lexicalized=True, vocabulary=vocab)
        ref = DMVIndex(Grammar(list(g.rules), g.weights, "S"))
        ix = dmv_index(g)                                     # classified as arrays from the rule table
        assert ix.types == ref.types
        for a in ("kind", "head", "dep", "type_rules", "_keys", "_krule"):
            assert np.array_equal(getattr(ix, a), getattr(ref, a)), a
        ys = {r[1][1] for r in g.rules if r[0].startswith("R'_")}
        assert len(ys) <= 32                                  # one Y_d string per type, shared by rules
        assert len({id(r[1][1]) for r in g.rules if r[0].startswith("R'_")}) == len(ys)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("grind.kernels._dmv") is None, reason="DMV kernel not built")
def test_tiny_bench_run_prints_the_table(tmp_path, capsys):
    from grind.bench import fisher
    bench = fisher.main(["--sentences", "300", "--types", "300", "--eval", "50", "--batch", "100",
                         "--workdir", str(tmp_path / "w")])
    out = capsys.readouterr().out
    assert "| method | step | wall s | peak RSS MiB |" in out
    for method in ("streaming", "stochastic", "cvb", "sharded"):
        assert f"| {method} |" in out
    assert all(r.rss > 0 for r in bench.runs)
    scored = [r for r in bench.runs if r.accuracy is not None]
    assert len(scored) == 4 and all(0 <= r.accuracy <= 1 for r in scored)


@pytest.mark.skipif(importlib.util.find_spec("grind.kernels._dmv") is None, reason="DMV kernel not built")
def test_bench_streams_one_sentence_minibatches_after_a_first_batch(tmp_path, capsys):
    from grind.bench import fisher
    bench = fisher.main(["--sentences", "200", "--types", "200", "--eval", "0", "--batch", "1", "--first-batch", "150",
                         "--methods", "streaming", "--workdir", str(tmp_path / "w")])
    assert "| streaming | one pass |" in capsys.readouterr().out
    (run,) = [r for r in bench.runs if r.method == "streaming"]
    assert run.note == "first minibatch 150, then batch 1, 1 VB iteration" and run.rss > 0
