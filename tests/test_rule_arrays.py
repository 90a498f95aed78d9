"""Issue 15 (a Fisher-sized words-alone DMV within 4 GB): grammars and counts held
as rule arrays end to end.  Each array path is checked against the tuple path it
replaces: lazy ``Grammar.rules`` against the eager tuples, the chunked writer and
fingerprint against ``rule_lines`` / ``fingerprint_keys`` (byte for byte, odd
symbols and weights included), the array-built DMV against the rule-by-rule
builder, the array DMV classifier against ``DMVIndex`` (index and errors), count
sums and alignment against the key-matching path, the streamed reader against the
whole-file one, and the E-step's running sum against the sum of all shards.  The
memory test builds, writes, reads, indexes, parses, counts, writes and sums a
lexicalized DMV of ~400k rules in a fresh interpreter and bounds the peak bytes a
rule of each step (tracemalloc).
"""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

from grind.errors import InputError
from grind.formats import rules as R
from grind.formats.counts import Counts, read_counts, write_counts
from grind.formats.rules import RuleTable, fingerprint_keys, rule_key, rule_lines, table_lines
from grind.grammars import dmv as D
from grind.grammars.grammar import Grammar, read_grammar
from grind.infer.training import ShardedEstep

sys.path.insert(0, os.path.dirname(__file__))
import grammars as random_grammars  # noqa: E402  (tests/grammars.py)

ODD = ["S", "A", "-->x", "->", "#h", "日本", "č", "a'b", "L'_", "Y_", "x y", "", "$", "_l", "A_r"]


def odd_grammar(rng, n=60, max_k=3) -> Grammar:
    """Rules over odd symbols (spaces, empty strings, arrows, non-ASCII), arities 0..max_k."""
    rules, seen = [], set()
    while len(rules) < n:
        lhs = str(rng.choice(ODD[:6]))
        rhs = tuple(str(x) for x in rng.choice(ODD, size=int(rng.integers(0, max_k + 1))))
        if rule_key(lhs, rhs) not in seen:
            seen.add(rule_key(lhs, rhs))
            rules.append((lhs, rhs))
    return Grammar(rules, np.ones(len(rules)), rules[0][0])


WEIGHTS = [0.0, 1.0, 0.5, 1e-320, 5e-324, 1e300, 1 / 3, 2.0 ** 60, 123456789.0, 1e-5, 1e16, 0.1 + 0.2]


def weights_for(rng, n):
    return np.where(rng.random(n) < 0.5, rng.choice(WEIGHTS, size=n), rng.exponential(size=n))


def sample_grammars():
    rng = np.random.default_rng(7)
    out = [random_grammars.make(f, s) for f in ("cnf", "nary", "mixed") for s in range(3)]
    out += [odd_grammar(rng) for _ in range(4)]
    sents = [list(rng.choice(["w1", "x_l", "Y_a", "L0_b", "日", "a'"], size=int(rng.integers(1, 6))))
             for _ in range(40)]
    out += [D.dmv_grammar(sents, lexicalized=True), D.dmv_grammar([], vocabulary=["NN", "VB", "x_r"])]
    return out


@pytest.mark.parametrize("chunk", [1, 3, 1 << 16])
def test_array_writer_and_fingerprint_are_the_tuple_ones(chunk):
    rng = np.random.default_rng(1)
    for g in sample_grammars():
        rules = list(g.rules)
        t = RuleTable.of_rules(rules)
        w = weights_for(rng, len(rules))
        for pc in (None, weights_for(rng, len(rules))):
            assert "".join(table_lines(t, w, pc, chunk=chunk)) == "".join(rule_lines(rules, w, pc))
        assert [k for part in t.key_chunks(chunk) for k in part] == [rule_key(*r) for r in rules]
        assert g.fingerprint() == fingerprint_keys(rule_key(*r) for r in rules)


def test_written_files_and_read_grammars_are_the_same(tmp_path):
    rng = np.random.default_rng(2)
    for k, g in enumerate(sample_grammars()):
        if "" in {s for r in g.rules for s in (r[0], *r[1])} or any(" " in s for r in g.rules for s in r[1]):
            continue                                   # such symbols do not survive a file
        w = weights_for(rng, len(g))
        pc = weights_for(rng, len(g)) if k % 2 else None
        eager = Grammar(list(g.rules), w, g.start, pc, dict(g.meta))
        a, b = tmp_path / f"a{k}.txt", tmp_path / f"b{k}.txt"
        eager.write(str(a))
        lazy = read_grammar(str(a))
        assert lazy.has_table() and lazy._rules is None          # nothing made per rule yet
        lazy.write(str(b))
        assert a.read_bytes().split(b"\n", 2)[2] == b.read_bytes().split(b"\n", 2)[2]   # below the command line
        assert lazy._rules is None
        assert lazy.fingerprint() == eager.fingerprint() and len(lazy) == len(eager)
        for attr in ("nonterminals", "terminals", "start"):
            assert getattr(lazy, attr) == getattr(eager, attr), attr
        assert np.array_equal(lazy.lhs, eager.lhs) and lazy.weights.tobytes() == eager.weights.tobytes()
        assert lazy.rules == eager.rules and all(type(r[1]) is tuple for r in lazy.rules)   # made on demand
        assert lazy.index == eager.index and lazy.keys() == eager.keys()


def test_rules_assigned_replace_the_table_and_its_caches():
    g = D.dmv_grammar([["a", "b"], ["b", "a", "c"]], lexicalized=True)
    assert g.has_table() and g._rules is None
    ix = D.dmv_index(g)
    assert D.dmv_index(g) is ix and g._rules is None
    fp = g.fingerprint()
    g2 = g.with_weights(g.weights * 2)
    assert D.dmv_index(g2) is ix and g2.fingerprint() == fp and g2._rules is None
    g.rules = list(g.rules)[:-1]                         # a new rule list: new source, no table
    assert not g.has_table() and g.fingerprint() != fp
    ix2 = D.dmv_index(g)                                 # not the old index: made again for the new rules
    assert ix2 is not ix and len(ix2.kind) == len(ix.kind) - 1


def reference_dmv(sentences, lexicalized, vocabulary=None):
    """The rule list the rule-by-rule builder made (head_rules, then choose rules in key order)."""
    types = sorted({t for s in sentences for t in s}) if vocabulary is None else list(dict.fromkeys(vocabulary))
    own = [list(D.head_rules(h)) for h in types]
    rules = [rs[0] for rs in own] + [r for rs in own for r in rs[1:]]
    tid = {t: i for i, t in enumerate(types)}
    keys = set()
    for s in sentences:
        ids = [tid.get(t, -1) for t in s]
        for i in range(len(ids)):
            for j in range(i + 1, len(ids)):
                a, b = ids[i], ids[j]
                if a >= 0 and b >= 0:
                    keys.add((b, a, 0))
                    keys.add((a, b, 1))
    if not lexicalized:
        keys = {(h, d, r) for h in range(len(types)) for d in range(len(types)) for r in (0, 1)}
    rules += [D.choose_rule(types[h], types[d], bool(r)) for h, d, r in sorted(keys)]
    return rules


@pytest.mark.parametrize("chunk", [1, 5, 1 << 21])
def test_array_built_dmv_is_the_rule_by_rule_one(monkeypatch, chunk):
    real = D._choose_arrays
    monkeypatch.setattr(D, "_choose_arrays", lambda s, t, lex: real(s, t, lex, chunk=chunk))
    rng = np.random.default_rng(3)
    # names like the DMV's own symbols, none of which coincide ('Y_a' with 'a_l' would: refused, test_dmv)
    words = ["a", "b", "x_l", "Y_b", "a_l", "L0_b", "R'_c", "日本", "S"]
    sents = [list(rng.choice(words, size=int(rng.integers(1, 9)))) for _ in range(120)]
    for lex, vocab in ((True, None), (True, words[::-1] + ["unused"]), (False, None), (False, words[:4])):
        g = D.dmv_grammar(sents, lexicalized=lex, vocabulary=vocab)
        ref = reference_dmv(sents, lex, vocab)
        assert g.rules == ref
        eager = Grammar(ref, np.ones(len(ref)), "S")
        assert g.weights.tobytes() == eager.normalize(eager.weights).tobytes()
        assert g.nonterminals == eager.nonterminals and g.terminals == eager.terminals


def same_index(a, b):
    assert a.types == b.types
    for attr in ("kind", "head", "dep", "type_rules", "_keys", "_krule"):
        assert np.array_equal(getattr(a, attr), getattr(b, attr)), attr


def broken_variants(g):
    """DMV grammars with one thing wrong (or odd but right), as rule lists."""
    rules = list(g.rules)
    yield rules                                                   # as it is
    yield rules[::-1]                                             # another order (start given)
    yield [r for r in rules if r != ("Y_b", ("L0_b", "R0_b"))]    # a type without its Y rule
    yield rules + [("L'_a", ("Y_zz", "L_a"))]                     # a dependent with no type
    yield rules + [("X'_a", ("Y_b", "L_a"))]
    yield rules + [("L'_a", ("Y_b", "L_a", "c"))]
    yield rules + [("L'_a", ("Y_b",))]
    yield rules + [("L0_a", ("b_l",))]                            # STOP to another type's terminal
    yield rules + [("R_a", ("L'_a",))]
    yield rules + [("S", ("L0_a",))]
    yield rules + [("S", ("Y_a", "Y_b"))]
    yield rules + [("Y_a", ("L0_a", "R0_b"))]
    yield rules + [("L0_a", ("a_l", "a_r"))]
    yield rules + [("a_l", ("q",))]                               # the terminal is a nonterminal now
    yield [r for r in rules if r[0] != "S"] + [("S", ("Y_a",))]
    yield rules + [("Y'_a", ("Y_b", "L_a"))]


def test_array_classifier_is_dmvindex():
    g = D.dmv_grammar([["a", "b"], ["b", "a_l", "c"], ["c"]], lexicalized=True)
    n = 0
    for rules in broken_variants(g):
        for start in ("S", "Y_a"):
            try:
                gg = Grammar(rules, np.ones(len(rules)), start)
            except InputError:
                continue
            try:
                ref = D.DMVIndex(gg)
            except InputError as e:
                with pytest.raises(InputError) as got:
                    D.index_of_table(gg)
                assert str(got.value) == str(e)
                n += 1
                continue
            same_index(D.index_of_table(gg), ref)
            assert D.dmv_problem(gg) == D.dmv_problem(Grammar(list(rules), np.ones(len(rules)), start))
    assert n >= 10                                                # most variants are errors


def test_classifier_on_a_planted_lexicalized_grammar():
    from grind.grammars.planted import PlantedDMV
    m = PlantedDMV(400, rng=1)
    sents = [[f"w{x}" for x in words] for words, _, _ in m.sentences(800, 2)]
    g = D.dmv_grammar(sents, lexicalized=True)
    same_index(D.dmv_index(g), D.DMVIndex(Grammar(list(g.rules), g.weights, "S")))


def count_files(tmp_path, monkeypatch):
    """Two count files of one grammar, read in pieces small enough that their symbol tables differ."""
    g = D.dmv_grammar([["a", "b", "c"], ["c", "b"], ["b", "a", "a", "d"]], lexicalized=True)
    rng = np.random.default_rng(4)
    paths = []
    for k in range(2):
        p = str(tmp_path / f"c{k}.txt")
        write_counts(p, Counts.of(g, weights_for(rng, len(g)), {"sentences": 1 + k, "loglik": -1.5},
                                  {"estep": "probabilities"}))
        paths.append(p)
    monkeypatch.setattr(R, "CHUNK_BYTES", 300)
    return g, paths


def test_count_sums_and_alignment_are_the_key_matching_ones(tmp_path, monkeypatch):
    g, (p0, p1) = count_files(tmp_path, monkeypatch)
    a, b = read_counts(p0), read_counts(p1)
    assert a.has_table() and a._rules is None
    monkeypatch.setattr(R, "CHUNK_BYTES", 1 << 20)
    b_whole = read_counts(p1)
    assert b.table().symbols != b_whole.table().symbols      # other pieces, another symbol order
    assert a.same_rules(b) and a.same_rules(g) and b.same_rules(b_whole)
    fast = a + b
    slow = Counts(list(a.rules), a.values, a.stats, a.meta) + Counts(list(reversed(b.rules)), b.values[::-1],
                                                                   b.stats, b.meta)
    assert fast.rules == slow.rules and fast.values.tobytes() == slow.values.tobytes()
    assert fast.stats == slow.stats and fast.meta == slow.meta
    assert fast.aligned(g).tobytes() == Counts(list(fast.rules), fast.values).aligned(g).tobytes()
    other = Grammar(list(reversed(g.rules)), np.ones(len(g)), "S")
    assert not fast.same_rules(other)
    assert fast.aligned(other).tobytes() == fast.values[::-1].tobytes()
    out = tmp_path / "sum.txt"
    write_counts(str(out), fast)
    ref = tmp_path / "ref.txt"
    write_counts(str(ref), slow)
    assert out.read_bytes() == ref.read_bytes()


def test_rule_table_sameness():
    t = RuleTable.of_rules([("S", ("a", "b")), ("S", ("b",)), ("A", ("S", "a"))])
    perm = RuleTable(t.symbols[::-1], (len(t.symbols) - 1 - t.lhs).astype(np.int32), t.rhs_off,
                     (len(t.symbols) - 1 - t.rhs).astype(np.int32))
    assert t.same(perm) and perm.rules() == t.rules()
    assert not t.same(RuleTable.of_rules([("S", ("a", "b")), ("S", ("b",)), ("A", ("a", "S"))]))
    assert not t.same(RuleTable.of_rules([("S", ("a", "b")), ("S", ("b",))]))
    assert not t.same(RuleTable.of_rules([("S", ("a", "c")), ("S", ("b",)), ("A", ("S", "a"))]))


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_streamed_reader_is_the_whole_file_reader(tmp_path, monkeypatch, suffix):
    rng = np.random.default_rng(5)
    g = random_grammars.make("mixed", 1)
    w, pc = weights_for(rng, len(g)), weights_for(rng, len(g))
    text = "# weights: x\n" + "".join(rule_lines(g.rules, w, pc)) + "# late: header\n# weights: y\n"
    data = b"\xef\xbb\xbf" + text.encode()
    p = tmp_path / f"g.txt{suffix}"
    p.write_bytes(gzip.compress(data) if suffix else data)
    ref = R._parse(data, str(p), "[weight [pseudocount]]")
    for chunk in (1, 17, 200, 1 << 20):
        monkeypatch.setattr(R, "CHUNK_BYTES", chunk)
        got = R._parse_file(str(p), "[weight [pseudocount]]")
        assert got.rules() == ref.rules() and got.weights.tobytes() == ref.weights.tobytes()
        assert got.pseudo.tobytes() == ref.pseudo.tobytes() and np.array_equal(got.given, ref.given)
        assert got.meta == ref.meta == {"weights": "x", "late": "header"}
    dup = tmp_path / "dup.txt"
    dup.write_bytes(data + text.splitlines(keepends=True)[3].encode())
    monkeypatch.setattr(R, "CHUNK_BYTES", 50)
    with pytest.raises(InputError, match=r"dup.txt:\d+: duplicate rule"):
        R._parse_file(str(dup), "[weight [pseudocount]]")


def test_duplicate_check_by_sorted_keys():
    rng = np.random.default_rng(6)
    for _ in range(200):
        rules = [(str(rng.choice(ODD[:4])), tuple(str(x) for x in rng.choice(ODD[:6], size=int(rng.integers(0, 3)))))
                 for _ in range(int(rng.integers(1, 12)))]
        t = RuleTable.of_rules(rules)
        assert t.duplicate() == (len(set(rules)) != len(rules))


class FakeParser:
    """inside_outside returns a large vector per shard; ``alive`` counts those not yet freed."""

    def __init__(self, n_rules, n_sent):
        self.grammar = np.zeros(n_rules)           # only len() is read
        self.sentences = list(range(n_sent))
        self.alive = self.most = 0

    def _idx(self, idx):
        return np.arange(len(self.sentences)) if idx is None else np.asarray(idx)

    def _freed(self):
        self.alive -= 1

    def inside_outside(self, w, idx):
        c = np.zeros(len(self.grammar))
        c[idx % len(c)] += np.sqrt(idx + 1.0) * w[0]
        self.alive += 1
        self.most = max(self.most, self.alive)
        weakref.finalize(c, self._freed)
        return c, -np.sqrt(idx + 2.0)


@pytest.mark.parametrize("jobs", [1, 3])
def test_estep_sums_shards_as_they_come(jobs):
    p = FakeParser(1000, 5000)
    est = ShardedEstep(p, jobs, shard=16)
    counts, logz = est(np.array([0.5]))
    parts = [p.inside_outside(np.array([0.5]), s) for s in est.shards()]
    ref_counts, ref_logz = np.zeros(1000), np.concatenate([z for _, z in parts])
    for c, _ in parts:
        ref_counts += c
    assert counts.tobytes() == ref_counts.tobytes() and logz.tobytes() == ref_logz.tobytes()
    p2 = FakeParser(1000, 5000)
    ShardedEstep(p2, jobs, shard=16)(np.array([0.5]))
    assert p2.most <= 2 * jobs + 2                      # not one vector per shard (313 shards)


_MEASURE = textwrap.dedent("""
    import json, os, sys, tracemalloc
    import numpy as np
    os.environ["GRIND_CACHE_DIR"] = "off"
    from grind.formats import rules as R
    R.CHUNK_BYTES = 1 << 18            # the reader's and writer's temporaries are a constant: keep them small
    R.KEY_CHUNK = 1 << 12
    from grind.formats.counts import Counts, read_counts, write_counts
    from grind.grammars.dmv import dmv_grammar, dmv_index
    from grind.grammars.grammar import read_grammar
    from grind.grammars.planted import PlantedDMV
    from grind.infer.training import ShardedEstep
    from grind.infer.vb import vb_estep
    from grind.kernels.dmv import DMVParser

    work = sys.argv[1]
    m = PlantedDMV(20000, rng=1)
    sents = [[f"w{x}" for x in words] for words, _, _ in m.sentences(5000, 3)]
    out = {}

    def peak(name, f):
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        r = f()
        cur, top = tracemalloc.get_traced_memory()
        out[name] = (top - base, cur - base)
        return r

    tracemalloc.start()
    g = peak("make", lambda: dmv_grammar(sents, lexicalized=True))
    R_ = len(g)
    peak("write grammar", lambda: g.write(os.path.join(work, "g.txt")))
    del g
    g = peak("read", lambda: read_grammar(os.path.join(work, "g.txt")))
    peak("index", lambda: dmv_index(g))
    p = peak("parser", lambda: DMVParser(g, sents[:2000]))
    res = peak("estep", lambda: vb_estep(ShardedEstep(p, 1), g, g.weights + 1.0))
    c = Counts.of(g, res[0], {"sentences": 2000}, {"estep": "vb"})
    peak("write counts", lambda: write_counts(os.path.join(work, "c.txt"), c))
    del c, res, p
    a = peak("read counts", lambda: read_counts(os.path.join(work, "c.txt")))
    b = read_counts(os.path.join(work, "c.txt"))
    s = peak("sum", lambda: a + b)
    peak("align", lambda: s.aligned(g))
    out["rules"] = R_
    out["tuples made"] = g._rules is not None or s._rules is not None
    print(json.dumps(out))
""")


@pytest.mark.slow
def test_lexicalized_dmv_bytes_per_rule_at_peak(tmp_path):
    """Each step of the words-alone path over ~400k rules: at most BOUND bytes a rule at peak
    above what was allocated before it (tracemalloc; the tuple path took 150-350), no
    rule tuples made, the grammar read kept in <= 60 bytes a rule, its DMV index in <= 30."""
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    got = json.loads(subprocess.run([sys.executable, "-c", _MEASURE, str(tmp_path)], check=True,
                                    capture_output=True, text=True, env=env).stdout)
    n = got.pop("rules")
    assert n > 300_000 and got.pop("tuples made") is False
    BOUND = 100
    per_rule = {k: (top / n, kept / n) for k, (top, kept) in got.items()}
    for step, (top, _kept) in per_rule.items():
        assert top <= BOUND, (step, per_rule)
    assert per_rule["read"][1] <= 60 and per_rule["index"][1] <= 30, per_rule


def test_chunked_vb_terms_are_the_whole_ones(monkeypatch):
    from scipy.special import digamma, gammaln

    from grind.infer import vb
    g = random_grammars.make("mixed", 2)
    rng = np.random.default_rng(8)
    a_hat, a = rng.exponential(size=len(g)) + 0.01, rng.exponential(size=len(g)) + 0.01
    ref_logw = digamma(a_hat) - digamma(g.lhs_totals(a_hat))
    nA = len(g.nonterminals)
    sa_hat, sa = np.bincount(g.lhs, weights=a_hat, minlength=nA), np.bincount(g.lhs, weights=a, minlength=nA)
    ref_kl = float((gammaln(sa_hat) - gammaln(sa)).sum()
                   + (gammaln(a) - gammaln(a_hat) + (a_hat - a) * (digamma(a_hat) - digamma(sa_hat[g.lhs]))).sum())
    for chunk in (1, 7, 1 << 20):
        monkeypatch.setattr(vb, "CHUNK", chunk)
        assert vb.vb_log_weights(g, a_hat).tobytes() == ref_logw.tobytes()
        assert vb.kl_dirichlet(g, a_hat, a) == ref_kl
