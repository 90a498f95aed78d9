"""Collapsed VB on morphology grammars through the segmentation kernel's one-word
hooks (grind/kernels/segment.py: ``SegmentParser.local_rules`` /
``sparse_counts``, csrc/segment.pyx ``WordKernel``): the same counts as
``inside_outside``, only the local rules read, and CVB's local-theta path giving
the same sweeps as the per-LHS refresh over the dense kernel."""
from __future__ import annotations

import numpy as np
import pytest

from grind.grammars.morph import builtin_templates, morph_grammar
from grind.grammars.planted import planted_inventory, planted_words
from grind.infer.cvb import CVB, DenseOnly
from grind.infer.training import ShardedEstep
from grind.kernels.segment import SegmentParser
from oracle import check_sparse_counts_local

NATIVE = [True, False]          # the compiled kernel (must be built: no skip) and the numpy fallback



def planted(seed=0, n=300):
    """A czech-template grammar over the distinct words of a planted corpus,
    plus one word with a character outside the grammar (a failure)."""
    rng = np.random.default_rng(seed)
    pre, stems, suf = planted_inventory(rng, n_prefixes=4, n_stems=20, n_suffixes=6)
    words = [list(w) for w in sorted({w for w, _ in planted_words(n, rng, pre, stems, suf)})]
    g = morph_grammar(words, builtin_templates("czech"))
    return g, words + [list("ab#")]


@pytest.fixture(scope="module")
def corpus():
    return planted()


def random_weights(g, seed):
    return g.weights * np.exp(np.random.default_rng(seed).standard_normal(len(g)))


@pytest.mark.parametrize("native", NATIVE)
def test_sparse_counts_equal_inside_outside(corpus, native):
    g, words = corpus
    p = SegmentParser(g, words, native=native)
    w = random_weights(g, 1)
    assert p.failures and len(p.failures) < len(words)
    for i in range(len(words)):
        rules, vals, z = p.sparse_counts(w, i)
        dense, lz = p.inside_outside(w, [i])
        assert z == lz[0]
        assert np.all(np.diff(rules) > 0) and np.all(vals != 0)
        full = np.zeros(len(g))
        full[rules] = vals
        if native:                                  # the same loops: bit-identical
            np.testing.assert_array_equal(full, dense)
        else:
            np.testing.assert_allclose(full, dense, rtol=1e-12, atol=0)
            assert set(rules) == set(np.flatnonzero(dense))


def test_local_rules_agree_between_kernels(corpus):
    g, words = corpus
    pn, pp = SegmentParser(g, words, native=True), SegmentParser(g, words, native=False)
    for i in range(len(words)):
        loc = pn.local_rules(i)
        np.testing.assert_array_equal(loc, pp.local_rules(i))
        assert loc.dtype == np.int64 and np.all(np.diff(loc) > 0)
    assert len(pn.local_rules(len(words) - 1)) == 0           # the failure reads nothing


def missing(p, w, i, local):
    """Rules with a nonzero expected count for word i (dense kernel) that ``local`` lacks."""
    dense, _ = p.inside_outside(w, [i])
    return np.setdiff1d(np.flatnonzero(dense), local)


def reads_only(p, w, i, local, seed):
    """Whether word i's counts and log Z are bit-identical when every weight
    outside ``local`` is replaced (by random values, some zero, some huge)."""
    rng = np.random.default_rng(seed)
    other = rng.gamma(0.5, 1.0, size=len(w)) * np.where(rng.random(len(w)) < 0.2, 1e6, 1.0)
    other[rng.random(len(w)) < 0.2] = 0.0
    other[local] = w[local]
    a, za = p.inside_outside(w, [i])
    b, zb = p.inside_outside(other, [i])
    return bool(np.array_equal(a, b) and za[0] == zb[0])


@pytest.mark.slow
@pytest.mark.parametrize("native", NATIVE)
def test_local_rules_cover_every_rule_read(corpus, native):
    """local_rules(i) holds every rule with a nonzero count, and the word's
    result depends on no other weight; both checks catch a dropped rule."""
    g, words = corpus
    p = SegmentParser(g, words, native=native)
    w = random_weights(g, 2)
    caught = 0
    for i in range(len(words)):
        loc = p.local_rules(i)
        assert not len(missing(p, w, i, loc))
        assert reads_only(p, w, i, loc, seed=i)
        if i in p.failures:
            continue
        # the checks are not vacuous: drop one rule that has a count and both must notice
        used = np.flatnonzero(p.inside_outside(w, [i])[0])
        short = loc[loc != used[i % len(used)]]
        assert len(missing(p, w, i, short)) == 1
        assert not reads_only(p, w, i, short, seed=i)
        caught += 1
    assert caught > 50


def test_sparse_counts_reads_and_checks_only_local_weights(corpus):
    g, words = corpus
    p = SegmentParser(g, words)
    w = random_weights(g, 3)
    i = 5
    loc, rules, vals, z = check_sparse_counts_local(p, w, i, len(words))
    with pytest.raises(ValueError):
        p.sparse_counts(w[:-1], i)
    r3, v3, z3 = p.sparse_counts(w, len(words) - 1)            # the failure
    assert len(r3) == len(v3) == 0 and z3 == -np.inf
    zero = w.copy()
    zero[g.rules.index(("Word", ("Stem",)))] = 0.0            # a zero template weight is allowed
    rules, vals, z = p.sparse_counts(zero, i)
    dense, lz = p.inside_outside(zero, [i])
    full = np.zeros(len(g))
    full[rules] = vals
    np.testing.assert_array_equal(full, dense)
    assert z == lz[0]


@pytest.mark.parametrize("init", ["grammar", "random"])
@pytest.mark.parametrize("full_refresh", [10, None])
def test_cvb_sweeps_match_the_dense_per_lhs_path(corpus, init, full_refresh):
    """full_refresh=10: the grammar is above it, so CVB takes the local-theta path
    (theta only on local_rules, from kept LHS totals); None: the default, above
    this grammar's size, so theta is renormalised in full but the counts come
    from sparse_counts.  Either way the same sweeps as the old dense path."""
    g, words = corpus
    prior = np.full(len(g), 0.05)
    runs = []
    for parser in (SegmentParser(g, words), DenseOnly(SegmentParser(g, words))):
        dense = isinstance(parser, DenseOnly)
        cls = CVB if full_refresh is None or dense else type("C", (CVB,), {"full_refresh_rules": full_refresh})
        if dense:                                  # the old path on a big grammar: per-LHS refresh
            cls = type("D", (CVB,), {"full_refresh_rules": 10})
        a = cls(g, ShardedEstep(parser, 1), prior, g.weights, {"iterations": 3, "cvb_init": init},
                np.random.default_rng(7))
        assert (a.lhs_tot is not None) == (not dense and full_refresh is not None)
        objs = [a.update().objective for _ in range(3)]
        runs.append((a.alpha_hat.copy(), objs))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-10, atol=0)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-10)
    assert runs[0][0].sum() > prior.sum() + len(words) - 1            # every parsed word's counts are in
