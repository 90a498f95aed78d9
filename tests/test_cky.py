"""The general CKY kernel (grind.kernels.cky) on its own terms: long sentences against a
log-space reference, counts as the gradient of log Z, dense == sparse, and the
error paths (unary cycles, unknown words, zero weights)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import oracle
from grind.errors import InputError
from grind.grammars.grammar import Grammar

cky = pytest.importorskip("grind.kernels.cky")
CKYParser = cky.CKYParser


def G(rules, weights=None, start="S"):
    rules = [(lhs, tuple(rhs.split())) for lhs, rhs in rules]
    w = np.ones(len(rules)) if weights is None else np.asarray(weights, dtype=np.float64)
    return Grammar(rules, w, start)


def _lse(x, axis=None):
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else out.item()


def ref_logz(grammar, weights, sent):
    """Plain log-space CKY (logsumexp everywhere) for binary, unary (applied in the
    order given by ``unary_order``) and one-token lexical rules."""
    nts = grammar.nonterminals
    ix = {a: i for i, a in enumerate(nts)}
    N, n = len(nts), len(sent)
    with np.errstate(divide="ignore"):
        lw = np.log(np.asarray(weights, dtype=np.float64))
    W = np.full((N, N, N), -np.inf)
    unary, lex = [], {}
    for r, (lhs, rhs) in enumerate(grammar.rules):
        if len(rhs) == 2:
            W[ix[lhs], ix[rhs[0]], ix[rhs[1]]] = lw[r]
        elif grammar.is_nonterminal(rhs[0]):
            unary.append((ix[lhs], ix[rhs[0]], lw[r]))
        else:
            lex.setdefault(rhs[0], []).append((ix[lhs], lw[r]))
    unary.sort(key=lambda u: -u[1])       # the test grammars' unary rules point to later symbols
    chart = np.full((n + 1, n + 1, N), -np.inf)
    for width in range(1, n + 1):
        for i in range(n - width + 1):
            j = i + width
            v = np.full(N, -np.inf)
            if width == 1:
                for a, l in lex.get(sent[i], ()):
                    v[a] = np.logaddexp(v[a], l)
            else:
                left, right = chart[i, i + 1:j], chart[i + 1:j, j]              # K x N each
                M = _lse(left[:, :, None] + right[:, None, :], axis=0)          # N x N
                v = _lse(W + M[None], axis=(1, 2))
            for a, b, l in unary:
                v[a] = np.logaddexp(v[a], l + v[b])
            chart[i, j] = v
    return chart[0, n, ix[grammar.start]]


def long_grammar():
    rules = [("S", "S A"), ("S", "A B"), ("A", "A B"), ("A", "B C"), ("B", "C C"), ("C", "A C"),
             ("B", "S C"), ("S", "A"), ("A", "C"), ("A", "a"), ("B", "b"), ("C", "a"), ("C", "c"),
             ("B", "a")]
    rng = np.random.default_rng(3)
    return G(rules, rng.uniform(0.2, 1.0, size=len(rules)))


@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_long_sentence_logz_matches_logspace_reference(path):
    g = long_grammar()
    rng = np.random.default_rng(0)
    sent = [["a", "b", "c"][i] for i in rng.integers(3, size=120)]
    w = g.weights * 1e-2             # pushes Z far below the smallest float64
    parser = CKYParser(g, [sent], path=path)
    counts, logz = parser.inside_outside(w)
    ref = ref_logz(g, w, sent)
    assert np.isfinite(ref) and ref < -800          # exp(ref) == 0.0 in float64
    assert np.isfinite(logz[0])
    assert logz[0] == pytest.approx(ref, rel=1e-12)
    assert np.all(np.isfinite(counts)) and counts.sum() > 0
    derivs, lp = parser.viterbi(w)
    assert derivs[0] is not None and lp[0] <= logz[0] + 1e-9
    assert np.log(w[derivs[0][:, 0]]).sum() == pytest.approx(lp[0], rel=1e-12)


def rich_grammar(seed, zero_frac=0.0):
    """Binary, acyclic unary chains, n-ary rules mixing terminals and nonterminals,
    lexical rules of 1-3 tokens."""
    rng = np.random.default_rng(seed)
    nts, ts = ["S", "A", "B", "C"], ["a", "b", "c"]
    rules = set()
    for x in nts:
        for t in ts:
            if rng.random() < 0.6:
                rules.add((x, t))
        for y in nts:
            for z in nts:
                if rng.random() < 0.3:
                    rules.add((x, f"{y} {z}"))
    rules |= {("S", "A"), ("A", "B"), ("B", "C"), ("S", "C"), ("C", "c"), ("S", "S S")}
    rules |= {("A", "B c C"), ("S", "a B C A"), ("B", "b C"), ("C", "A a")}
    rules |= {("A", "a b"), ("C", "b c a"), ("B", "c c")}
    rules = sorted(rules)
    w = np.exp(rng.uniform(np.log(0.05), np.log(2.0), size=len(rules)))
    if zero_frac:
        w[rng.random(len(w)) < zero_frac] = 0.0
    return G(rules, w)


def sentences(g, seed, n=6, lo=2, hi=7):
    rng = np.random.default_rng(seed)
    ts = g.terminals
    return [[ts[k] for k in rng.integers(len(ts), size=int(rng.integers(lo, hi + 1)))] for _ in range(n)]


@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_counts_are_gradient_of_logz(path):
    g = rich_grammar(1)
    sents = sentences(g, 2)
    parser = CKYParser(g, sents, path=path)
    assert not parser.failures
    w = g.weights.copy()
    counts, logz = parser.inside_outside(w)
    assert np.all(np.isfinite(logz))
    eps = 1e-5
    grad = np.empty(len(g))
    for r in range(len(g)):
        up, down = w.copy(), w.copy()
        up[r] *= math.exp(eps)
        down[r] *= math.exp(-eps)
        grad[r] = (parser.inside_outside(up)[1].sum() - parser.inside_outside(down)[1].sum()) / (2 * eps)
    np.testing.assert_allclose(counts, grad, rtol=1e-6, atol=1e-7)
    # each rule kind is exercised
    kinds = {len(rhs) > 2 for _, rhs in g.rules} | {g.is_nonterminal(rhs[0]) and len(rhs) == 1
                                                     for _, rhs in g.rules}
    assert kinds == {True, False} and counts.max() > 0.1


@pytest.mark.parametrize("seed", [0, 4])
def test_dense_and_sparse_paths_agree(seed):
    g = rich_grammar(seed, zero_frac=0.1 if seed else 0.0)
    sents = sentences(g, seed + 10, n=12, lo=1, hi=12)
    dense, sparse = CKYParser(g, sents, path="dense"), CKYParser(g, sents, path="sparse")
    assert dense.path == "dense" and sparse.path == "sparse"
    for w in (g.weights, g.weights * np.random.default_rng(seed).uniform(0.1, 1.0, size=len(g))):
        cd, zd = dense.inside_outside(w)
        cs, zs = sparse.inside_outside(w)
        np.testing.assert_allclose(zd, zs, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cd, cs, rtol=1e-10, atol=1e-12)
        dd, ld = dense.viterbi(w)
        ds, ls = sparse.viterbi(w)
        np.testing.assert_allclose(ld, ls, rtol=1e-12, atol=1e-12)
        for a, b, lp in zip(dd, ds, ld):
            assert (a is None) == (b is None) == (lp == -np.inf)
            if a is not None:       # ties (equal rule multisets) may break either way
                for d in (a, b):
                    assert d[0, 0] in [r for r, (lhs, _) in enumerate(g.rules) if lhs == "S"]
                    assert np.log(w[d[:, 0]]).sum() == pytest.approx(lp, rel=1e-12, abs=1e-12)
    assert np.isfinite(zd).sum() >= 3


def test_sample_reproducible_and_well_formed():
    g = rich_grammar(2)
    sents = sentences(g, 5, n=20)
    parser = CKYParser(g, sents)
    a = parser.sample(g.weights, np.random.default_rng(7))
    b = parser.sample(g.weights, np.random.default_rng(7))
    _, logz = parser.inside_outside(g.weights)
    for s, (x, y) in enumerate(zip(a, b)):
        if logz[s] == -np.inf:
            assert x is None and y is None
            continue
        np.testing.assert_array_equal(x, y)
        assert x.dtype == np.int64 and x.ndim == 2 and x.shape[1] == 3
        assert tuple(x[0, 1:]) == (0, len(sents[s])) and g.rules[x[0, 0]][0] == g.start
        assert np.all((0 <= x[:, 0]) & (x[:, 0] < len(g)))
        assert np.all((0 <= x[:, 1]) & (x[:, 1] < x[:, 2]) & (x[:, 2] <= len(sents[s])))
    assert any(x is not None for x in a)


def test_sample_seed_of_a_sentence_does_not_depend_on_failures_before_it():
    """The i-th requested sentence gets the i-th seed drawn, whether or not those before it parse."""
    g = G([("S", "S S"), ("S", "a")], [0.5, 0.5])
    many = ["a"] * 8                                 # 429 derivations
    parser = CKYParser(g, [["a", "xyz"], many, many])
    assert set(parser.failures) == {0}
    oracle.assert_seed_follows_the_request(parser, g.weights)


def test_unary_cycle_is_an_input_error_naming_it():
    with pytest.raises(InputError, match=r"unary cycle.*(A --> B --> C --> A|B --> C --> A --> B|C --> A --> B --> C)"):
        CKYParser(G([("S", "A"), ("A", "B"), ("B", "C"), ("C", "A"), ("A", "a")]), [["a"]])
    with pytest.raises(InputError, match=r"unary cycle.*A --> A"):
        CKYParser(G([("S", "A B"), ("A", "A"), ("A", "a"), ("B", "b")]), [["a", "b"]])


@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_unknown_word_is_a_failure_with_no_counts(path):
    g = G([("S", "A B"), ("A", "a"), ("B", "b"), ("A", "A A")], [1.0, 0.5, 2.0, 0.25])
    good = [["a", "b"], ["a", "a", "b"]]
    parser = CKYParser(g, [good[0], ["a", "xyz", "b"], good[1]], path=path)
    assert set(parser.failures) == {1}
    assert "unknown word 'xyz'" in parser.failures[1]
    counts, logz = parser.inside_outside(g.weights)
    ref_counts, ref_logz = CKYParser(g, good, path=path).inside_outside(g.weights)
    assert logz[1] == -np.inf
    np.testing.assert_allclose(logz[[0, 2]], ref_logz, rtol=1e-14)
    np.testing.assert_allclose(counts, ref_counts, rtol=1e-14)
    d, lp = parser.viterbi(g.weights)
    assert d[1] is None and lp[1] == -np.inf and d[0] is not None
    assert parser.sample(g.weights, np.random.default_rng(0))[1] is None
    # a known terminal that no lexical rule can cover here (only in "A --> x y")
    g2 = G([("S", "A B"), ("A", "a"), ("B", "b"), ("A", "x y")])
    p2 = CKYParser(g2, [["x", "b"], ["x", "y", "b"], []], path=path)
    assert set(p2.failures) == {0, 2} and "'x' at position 1" in p2.failures[0]
    assert np.isfinite(p2.inside_outside(g2.weights)[1][1])


@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_zero_weights(path):
    # "a c": only derivation uses B --> c of weight 0; "a b": A --> a has weight 0 in w2
    g = G([("S", "A B"), ("A", "a"), ("B", "b"), ("B", "c"), ("S", "S S")], [1.0, 0.5, 2.0, 0.0, 0.3])
    sents = [["a", "b"], ["a", "c"], ["a", "b", "a", "b"], ["a", "c", "a", "b"]]
    parser = CKYParser(g, sents, path=path)
    assert not parser.failures
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        counts, logz = parser.inside_outside(g.weights)
        assert np.isfinite(logz[0]) and np.isfinite(logz[2])
        assert logz[1] == -np.inf and logz[3] == -np.inf
        assert np.all(np.isfinite(counts)) and counts[3] == 0.0
        np.testing.assert_allclose(counts, [1 + 2, 1 + 2, 1 + 2, 0, 1], rtol=1e-12)
        w2 = g.weights.copy()
        w2[1] = 0.0
        c2, z2 = parser.inside_outside(w2)
        assert np.all(z2 == -np.inf) and not c2.any()
        d, lp = parser.viterbi(w2)
        assert all(x is None for x in d) and np.all(lp == -np.inf)
        assert all(x is None for x in parser.sample(w2, np.random.default_rng(0)))
        d, lp = parser.viterbi(g.weights)
        assert d[1] is None and d[0] is not None
        assert lp[0] == pytest.approx(math.log(1.0 * 0.5 * 2.0))


def test_multi_token_lexical_and_nary_rows_are_original_rules():
    g = G([("S", "NP VP"), ("NP", "the big dog"), ("VP", "barks loudly"), ("VP", "V ADV ."),
           ("V", "barks"), ("ADV", "loudly"), ("S", "NP barks ADV")], [1, 1, 0.5, 0.2, 1, 1, 0.1])
    sent = ["the", "big", "dog", "barks", "loudly", "."]
    parser = CKYParser(g, [sent, sent[:5]])
    d, lp = parser.viterbi(g.weights)
    assert d[0].tolist() == [[0, 0, 6], [1, 0, 3], [3, 3, 6], [4, 3, 4], [5, 4, 5]]
    assert lp[0] == pytest.approx(math.log(0.2))
    counts, logz = parser.inside_outside(g.weights)
    # "the big dog barks loudly": S --> NP VP (0.5) or S --> NP barks ADV (0.1)
    assert logz[1] == pytest.approx(math.log(0.6))
    np.testing.assert_allclose(counts, [1 + 5 / 6, 2, 5 / 6, 1, 1, 1 + 1 / 6, 1 / 6], rtol=1e-12)


def test_idx_and_path_choice():
    g = rich_grammar(3)
    sents = sentences(g, 8, n=5)
    parser = CKYParser(g, sents)
    assert parser.path in ("dense", "sparse")
    c_all, z_all = parser.inside_outside(g.weights)
    c_sub, z_sub = parser.inside_outside(g.weights, idx=[3, 1])
    np.testing.assert_allclose(z_sub, z_all[[3, 1]], rtol=1e-14)
    c_sum = sum(parser.inside_outside(g.weights, idx=[i])[0] for i in range(len(sents)))
    np.testing.assert_allclose(c_all, c_sum, rtol=1e-12)
    c0, z0 = parser.inside_outside(g.weights, idx=[])
    assert z0.shape == (0,) and not c0.any()
    with pytest.raises(ValueError):
        CKYParser(g, sents, path="fast")


def test_layered_dense_blocks_agree_with_sparse():
    """Preterminals apart from phrasal symbols: the dense path splits W into blocks by
    child width (1 token or more), including a preterminal that also covers two tokens."""
    rng = np.random.default_rng(11)
    xs, pts = [f"X{i}" for i in range(5)], [f"P{i}" for i in range(5)]
    rules = [("ROOT", x) for x in xs] + [(x, f"{a} {b}") for x in xs for a in xs + pts for b in xs + pts
                                          if rng.random() < 0.7]
    rules += [(p, f"w{k}") for p in pts for k in range(4) if rng.random() < 0.8] + [("P1", "w0 w1")]
    rules += [("X2", "X0"), ("X1", "P0 w3 X2")]
    g = G(rules, rng.uniform(0.1, 1.0, size=len(rules)), start="ROOT")
    sents = [[f"w{k}" for k in rng.integers(4, size=int(n))] for n in rng.integers(1, 14, size=25)]
    dense, sparse = CKYParser(g, sents, path="dense"), CKYParser(g, sents, path="sparse")
    assert dense._c.block_of == [0, 1, 2, 3]
    cd, zd = dense.inside_outside(g.weights)
    cs, zs = sparse.inside_outside(g.weights)
    assert np.isfinite(zd).sum() > 15
    np.testing.assert_allclose(zd, zs, rtol=1e-12)
    np.testing.assert_allclose(cd, cs, rtol=1e-10, atol=1e-12)
    _, ld = dense.viterbi(g.weights)
    _, ls = sparse.viterbi(g.weights)
    np.testing.assert_allclose(ld, ls, rtol=1e-12)


def _dense_cnf(n, rng, n_words=6):
    """The bench's dense grammar shape: ROOT --> X_i, X_i --> A B over X u PT, PT_j --> w_k."""
    xs, pts = [f"X{i}" for i in range(n)], [f"P{i}" for i in range(n)]
    rules = [("ROOT", x) for x in xs] + [(x, f"{a} {b}") for x in xs for a in xs + pts for b in xs + pts]
    rules += [(p, f"w{k}") for p in pts for k in range(n_words)]
    return G(rules, rng.uniform(0.05, 1.0, size=len(rules)), start="ROOT")


@pytest.mark.slow
@pytest.mark.parametrize("n", [3, 5, 6, 7, 8, 9, 10, 11, 12, 13])
def test_small_dense_kernel_agrees_with_sparse_and_reference(n):
    """Up to 12 rule rows (GRIND_NARROW) the dense path does its products in C with
    full-width register rows (block widths n = 5..12 each have their own code; 3 and 13
    take the general tiles and, for 13, BLAS): it must match the sparse path and the
    log-space reference, including on long sentences far below the float64 range."""
    rng = np.random.default_rng(100 + n)
    g = _dense_cnf(n, rng)
    sents = [[f"w{k}" for k in rng.integers(6, size=int(m))] for m in rng.integers(2, 16, size=12)]
    sents.append([f"w{k}" for k in rng.integers(6, size=100)])
    w = g.weights * 1e-3                 # Z of the 100-token sentence underflows float64
    dense, sparse = CKYParser(g, sents, path="dense"), CKYParser(g, sents, path="sparse")
    assert dense._c.block_of == [0, 1, 2, 3] and dense._c.r1 - dense._c.r0 == n
    cd, zd = dense.inside_outside(w)
    cs, zs = sparse.inside_outside(w)
    assert np.all(np.isfinite(zd)) and zd[-1] < -800
    np.testing.assert_allclose(zd, zs, rtol=1e-12)
    np.testing.assert_allclose(cd, cs, rtol=1e-9, atol=1e-12)
    for s in (0, 1, len(sents) - 1):
        assert zd[s] == pytest.approx(ref_logz(g, w, sents[s]), rel=1e-12)
    # expected counts sum, per sentence, to its rule uses: L - 1 binary, L lexical, 1 unary
    assert cd.sum() == pytest.approx(sum(2 * len(s) for s in sents), rel=1e-10)
    # brute-force enumeration on sentences short enough for it
    for s in [["w0", "w3"], ["w1", "w2"]]:
        c, z = CKYParser(g, [s], path="dense").inside_outside(w)
        assert z[0] == pytest.approx(oracle.exact_logz(g, w, s), rel=1e-13)
        np.testing.assert_allclose(c, oracle.exact_counts(g, w, s), rtol=1e-11, atol=1e-13)
