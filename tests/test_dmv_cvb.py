"""Collapsed VB on DMV grammars through the DMV kernel's one-sentence hooks
(grind/kernels/dmv.py: ``DMVParser.local_rules`` / ``sparse_counts``,
csrc/dmv.pyx ``Corpus.local`` / ``Corpus.sparse``): the same counts as
``inside_outside`` bit for bit (tag and lexicalized grammars, looked-up and
stored rule tables, masks), only the local rules read, and CVB's local-theta
path giving the same sweeps as the old dense path."""
from __future__ import annotations

import numpy as np
import pytest

from grind.errors import NumericalError
from grind.grammars.dmv import CHOOSE_L, dmv_grammar, dmv_index
from grind.infer.cvb import CVB, DenseOnly
from grind.infer.training import ShardedEstep
from grind.kernels.dmv import DMVParser
from oracle import check_sparse_counts_local



def corpus(seed, n, vocab, lo=1, hi=9):
    """Zipfian sentences over ``vocab`` word types, plus one unknown word (a failure)."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    words = np.array([f"w{k}" for k in range(vocab)])
    sents = [list(rng.choice(words, size=rng.integers(lo, hi + 1), p=p / p.sum())) for _ in range(n)]
    return sents


def band_mask(tokens, n):
    """Arcs of length at most 2; any word but the last may be the root."""
    pos = np.arange(n)
    root = np.ones(n, dtype=bool)
    root[n - 1] = n == 1
    return np.abs(pos[:, None] - pos[None, :]) <= 2, root


def no_tree(tokens, n):
    return np.zeros((n, n), dtype=bool), np.zeros(n, dtype=bool)


def cases():
    """(name, grammar, parser): tag grammar (arc rules looked up), lexicalized over
    few types (looked up) and over > 256 types (stored tables), and masked ones."""
    tags = corpus(0, 40, 6)
    small = corpus(1, 40, 12)
    big = corpus(2, 120, 400)
    out = []
    for name, sents, lex in (("tags", tags, False), ("lex-small", small, True), ("lex-big", big, True)):
        g = dmv_grammar(sents, lexicalized=lex)
        s = sents + [["w0", "zzz"]]
        out.append((name, g, DMVParser(g, s)))
        masks = [band_mask if k % 3 else None for k in range(len(s))]
        masks[5] = no_tree
        out.append((name + "-masked", g, DMVParser(g, s, masks=masks)))
    return out


CASES = cases()


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def case(request):
    return request.param


def random_weights(g, seed):
    return g.normalize(np.exp(np.random.default_rng(seed).standard_normal(len(g))))


def dense_of(g, rules, vals):
    full = np.zeros(len(g))
    full[rules] = vals
    return full


def test_sparse_counts_equal_inside_outside(case):
    name, g, p = case
    w = random_weights(g, 1)
    choose = dmv_index(g).kind >= CHOOSE_L
    w[choose & (np.random.default_rng(9).random(len(g)) < 0.05)] = 1e-250      # flushed to 0 by both
    order = np.random.default_rng(3).permutation(len(p.sentences))    # buffers grow and shrink, cache moves
    assert p.failures
    minus_inf = 0
    for i in order:
        rules, vals, z = p.sparse_counts(w, int(i))
        dense, lz = p.inside_outside(w, [i])
        assert z == lz[0]
        assert rules.dtype == np.int64 and np.all(np.diff(rules) > 0) and np.all(vals != 0)
        np.testing.assert_array_equal(dense_of(g, rules, vals), dense)   # the same loops: bit-identical
        minus_inf += z == -np.inf
    # the unknown word, the no-tree mask (and masked sentences whose few trees all need a flushed weight)
    assert 1 + name.endswith("masked") <= minus_inf < len(order) // 4


def missing(p, w, i, local):
    """Rules with a nonzero expected count for sentence i (dense kernel) that ``local`` lacks."""
    dense, _ = p.inside_outside(w, [i])
    return np.setdiff1d(np.flatnonzero(dense), local)


def reads_only(p, w, i, local, seed):
    """Whether sentence i's sparse counts and log Z are bit-identical when every
    weight outside ``local`` is replaced (random values, some zero, some huge,
    some NaN)."""
    rng = np.random.default_rng(seed)
    other = rng.gamma(0.5, 1.0, size=len(w)) * np.where(rng.random(len(w)) < 0.2, 1e6, 1.0)
    other[rng.random(len(w)) < 0.2] = 0.0
    other[rng.random(len(w)) < 0.1] = np.nan
    other[local] = w[local]
    ra, va, za = p.sparse_counts(w, i)
    try:
        rb, vb, zb = p.sparse_counts(other, i)
    except NumericalError:
        return False
    return bool(np.array_equal(ra, rb) and np.array_equal(va, vb) and za == zb)


def test_local_rules_cover_every_rule_read(case):
    """local_rules(i) holds every rule with a nonzero count, and the sentence's
    sparse counts depend on no other weight; both checks catch a dropped rule."""
    name, g, p = case
    w = random_weights(g, 2)
    caught = 0
    for i in range(len(p.sentences)):
        loc = p.local_rules(i)
        assert loc.dtype == np.int64 and np.all(np.diff(loc) > 0)
        assert not len(missing(p, w, i, loc))
        assert reads_only(p, w, i, loc, seed=i)
        used = np.flatnonzero(p.inside_outside(w, [i])[0])
        if not len(used):
            continue
        # the checks are not vacuous: drop one rule that has a count and both must notice
        short = loc[loc != used[i % len(used)]]
        assert len(missing(p, w, i, short)) == 1
        assert not reads_only(p, w, i, short, seed=i)
        caught += 1
    assert caught >= len(p.sentences) - 2            # all but the unknown word and the no-tree mask
    assert len(p.local_rules(len(p.sentences) - 1)) == 0             # the failure reads nothing


def test_local_rules_are_the_sentence_tables():
    """A sentence of n distinct words in a lexicalized grammar: 10 token rules a
    word (root, Y, 8 STOP/¬STOP) and n(n-1) choose rules, all distinct; a mask
    removes the forbidden arcs' and roots' rules."""
    sents = [["a", "b", "c", "d"], ["d", "c"]]
    g = dmv_grammar(sents, lexicalized=True)
    p = DMVParser(g, sents)
    assert len(p.local_rules(0)) == 10 * 4 + 4 * 3
    assert len(p.local_rules(1)) == 10 * 2 + 2
    pm = DMVParser(g, sents, masks=band_mask)
    assert len(pm.local_rules(0)) == 10 * 4 + 4 * 3 - 2 - 1            # arcs 0<->3 and root 3 forbidden
    assert set(pm.local_rules(0)) < set(p.local_rules(0))


def test_sparse_counts_checks_only_local_weights():
    _, g, p = CASES[4]                                                  # lex-big
    w = random_weights(g, 3)
    i = 7
    loc, rules, vals, z = check_sparse_counts_local(p, w, i, len(p.sentences))
    with pytest.raises(IndexError):
        p.local_rules(-1)
    with pytest.raises(ValueError):
        p.sparse_counts(w[:-1], i)
    r3, v3, z3 = p.sparse_counts(w, len(p.sentences) - 1)              # the failure
    assert len(r3) == len(v3) == 0 and z3 == -np.inf
    zero = w.copy()
    zero[loc] = 0.0                                                     # no tree: log Z = -inf, no counts
    r4, v4, z4 = p.sparse_counts(zero, i)
    assert len(r4) == 0 and z4 == -np.inf == p.inside_outside(zero, [i])[1][0]
    huge = w * 1e200                                                   # overflow: NaN as inside_outside
    with pytest.raises(NumericalError):
        p.inside_outside(huge, [i])
    with pytest.raises(NumericalError):
        p.sparse_counts(huge, i)


def lexicalized_cvb_case():
    sents = corpus(4, 150, 300)
    g = dmv_grammar(sents, lexicalized=True)
    return g, sents + [["w1", "zzz"]]


@pytest.mark.parametrize("init", ["grammar", "random"])
@pytest.mark.parametrize("masked", [False, True])
def test_cvb_sweeps_match_the_old_dense_path(init, masked):
    """The grammar is above ``full_refresh_rules`` (lowered to 1000 here), so
    CVB takes the local-theta path (theta only on local_rules, from kept LHS
    totals, counts from sparse_counts); the hooks hidden, it takes the old
    path (per-LHS refresh, dense inside-outside).  The same sweeps."""
    g, sents = lexicalized_cvb_case()
    assert len(g) > 1000
    masks = [band_mask if k % 2 else None for k in range(len(sents))] if masked else None
    prior = np.full(len(g), 0.1)
    cls = type("C", (CVB,), {"full_refresh_rules": 1000})
    runs = []
    for hooks in (True, False):
        p = DMVParser(g, sents, masks=masks)
        a = cls(g, ShardedEstep(p if hooks else DenseOnly(p), 1), prior, g.weights,
                {"iterations": 3, "cvb_init": init}, np.random.default_rng(7))
        assert (a.lhs_tot is not None) == hooks
        objs = [a.update().objective for _ in range(3)]
        runs.append((a.alpha_hat.copy(), objs))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-10, atol=0)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-10)
    assert runs[0][0].sum() > prior.sum() + 5 * (len(sents) - 1)      # every parsed sentence's counts are in


def test_cvb_on_a_tag_grammar_uses_sparse_counts_only():
    """A tag grammar below full_refresh_rules: theta renormalised in full, counts
    from sparse_counts; the same sweeps as the old path."""
    sents = corpus(5, 60, 8)
    g = dmv_grammar(sents)
    prior = np.full(len(g), 0.2)
    runs = []
    for hooks in (True, False):
        p = DMVParser(g, sents)
        a = CVB(g, ShardedEstep(p if hooks else DenseOnly(p), 1), prior, g.weights,
                {"iterations": 2}, np.random.default_rng(1))
        assert a.lhs_tot is None
        objs = [a.update().objective for _ in range(2)]
        runs.append((a.alpha_hat.copy(), objs))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]
