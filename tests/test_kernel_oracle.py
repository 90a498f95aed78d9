"""The CKY kernel against brute-force enumeration (tests/oracle.py).

For random tiny grammars of every kind the kernel must handle (CNF, unary
chains, n-ary rules mixing terminals and nonterminals, multi-token lexical
rules, zero weights) and both kernel paths ("dense", "sparse"):

* log Z equals the log of the sum of the weights of all derivations;
* expected counts equal sum_t P(t | w) f(t);
* the Viterbi derivation is a derivation of maximal weight (and *the*
  derivation when the maximum is unique), with the right log probability;
* sampled derivations follow the exact posterior (chi-square goodness of fit,
  with controls showing the test accepts exact samples and rejects wrong ones);
* a batch call equals the sum of single-sentence calls, ``idx`` selects
  sentences, and unparseable sentences get -inf / None.

The oracle checks itself on hand-computed examples first.
"""
from __future__ import annotations

import functools
import inspect
import math

import numpy as np
import pytest

import grammars
import oracle
from grind.kernels.cky import CKYParser  # the compiled kernel must be built: no skip
from grind.grammars.grammar import Grammar



PATHS = ["dense", "sparse"]
FAMILIES = list(grammars.FAMILIES)
SEEDS = range(5)
SAMPLE_SEEDS = (0, 2)
N_SAMPLES = 4000
P_MIN = 1e-4
LOGZ_RTOL, LOGZ_ATOL = 1e-10, 1e-12
COUNT_ATOL = 1e-10


# ---------------------------------------------------------------------------
# the oracle on hand-computed examples
# ---------------------------------------------------------------------------

def G(rules, weights, start="S"):
    return Grammar([(lhs, tuple(rhs.split())) for lhs, rhs in rules], weights, start)


def keys(grammar, weights, tokens, **kw):
    return {oracle.derivation_key(d): w
            for d, w in oracle.enumerate_derivations(grammar, weights, tokens, **kw)}


def test_oracle_binary_hand():
    # S --> A A (2), A --> a (3): "a a" has one derivation of weight 2 * 3 * 3
    g = G([("S", "A A"), ("A", "a")], [2.0, 3.0])
    got = keys(g, g.weights, ["a", "a"])
    assert got == {((0, 0, 2), (1, 0, 1), (1, 1, 2)): 18.0}
    assert oracle.exact_logz(g, g.weights, ["a", "a"]) == pytest.approx(math.log(18.0), rel=1e-15)
    np.testing.assert_allclose(oracle.exact_counts(g, g.weights, ["a", "a"]), [1.0, 2.0])
    assert oracle.exact_logz(g, g.weights, ["a"]) == -math.inf
    assert oracle.exact_logz(g, g.weights, ["a", "b"]) == -math.inf


def test_oracle_ambiguous_hand():
    # S --> S S (p), S --> a (q): "a a a" has 2 trees of weight p^2 q^3
    p, q = 0.3, 0.7
    g = G([("S", "S S"), ("S", "a")], [p, q])
    got = keys(g, g.weights, ["a"] * 3)
    left = ((0, 0, 3), (0, 0, 2), (1, 0, 1), (1, 1, 2), (1, 2, 3))
    right = ((0, 0, 3), (1, 0, 1), (0, 1, 3), (1, 1, 2), (1, 2, 3))
    assert set(got) == {left, right}
    z = 2 * p**2 * q**3
    assert oracle.exact_logz(g, g.weights, ["a"] * 3) == pytest.approx(math.log(z), rel=1e-14)
    np.testing.assert_allclose(oracle.exact_counts(g, g.weights, ["a"] * 3), [2.0, 3.0], atol=1e-15)
    post = oracle.exact_posterior(g, g.weights, ["a"] * 3)
    assert post == pytest.approx({left: 0.5, right: 0.5})
    # Catalan numbers: 5 trees over 4 tokens, 14 over 5
    assert len(keys(g, g.weights, ["a"] * 4)) == 5 == oracle.count_derivations(g, ["a"] * 4)
    assert len(keys(g, g.weights, ["a"] * 5)) == 14 == oracle.count_derivations(g, ["a"] * 5)


def test_oracle_unary_nary_multilex_hand():
    # S --> A (u), A --> B (v), B --> a (x), S --> a (t), S --> A b A (n),
    # S --> a b a (m), A --> a (y), S --> b B (k)
    u, v, x, t, n, m, y, k = 2.0, 0.5, 3.0, 0.25, 1.5, 0.125, 4.0, 0.75
    g = G([("S", "A"), ("A", "B"), ("B", "a"), ("S", "a"), ("S", "A b A"),
           ("S", "a b a"), ("A", "a"), ("S", "b B")], [u, v, x, t, n, m, y, k])
    w = g.weights
    # "a": S>a, S>A>a, S>A>B>a
    got = keys(g, w, ["a"])
    assert got == pytest.approx({((3, 0, 1),): t,
                                 ((0, 0, 1), (6, 0, 1)): u * y,
                                 ((0, 0, 1), (1, 0, 1), (2, 0, 1)): u * v * x})
    # "a b a": S>a b a, and S>A b A with each A either A>a or A>B>a
    got = keys(g, w, ["a", "b", "a"])
    a_ = y + v * x
    assert len(got) == 5
    assert math.fsum(got.values()) == pytest.approx(m + n * a_ * a_, rel=1e-14)
    assert got[((5, 0, 3),)] == m
    assert got[((4, 0, 3), (1, 0, 1), (2, 0, 1), (6, 2, 3))] == pytest.approx(n * v * x * y)
    c = oracle.exact_counts(g, w, ["a", "b", "a"])
    z = m + n * a_ * a_
    assert c[4] == pytest.approx(n * a_ * a_ / z)
    assert c[6] == pytest.approx(2 * n * y * a_ / z)
    assert c[1] == pytest.approx(2 * n * v * x * a_ / z) and c[1] == pytest.approx(c[2])
    # "b a": S>b B only (a terminal inside a binary rule)
    assert keys(g, w, ["b", "a"]) == {((7, 0, 2), (2, 1, 2)): k * x}
    # viterbi of "a": the largest of t, u*y, u*v*x
    d, lp, uniq = oracle.exact_viterbi(g, w, ["a"])
    assert uniq and oracle.derivation_key(d) == ((0, 0, 1), (6, 0, 1)) and lp == math.log(u * y)


def test_oracle_zero_weights_hand():
    g = G([("S", "A A"), ("A", "a"), ("A", "b")], [1.0, 0.0, 2.0])
    assert keys(g, g.weights, ["a", "b"]) == {((0, 0, 2), (1, 0, 1), (2, 1, 2)): 0.0}
    assert oracle.exact_logz(g, g.weights, ["a", "b"]) == -math.inf
    assert oracle.exact_posterior(g, g.weights, ["a", "b"]) == {}
    assert oracle.exact_viterbi(g, g.weights, ["a", "b"])[0] is None
    assert not oracle.exact_counts(g, g.weights, ["a", "b"]).any()


def test_oracle_unary_cycle_bounded():
    # S --> S (c), S --> a (v): derivations of "a" with <= N nodes sum to v (1 + c + ... + c^(N-1))
    c, v = 0.5, 0.75
    g = G([("S", "S"), ("S", "a")], [c, v])
    with pytest.raises(ValueError):
        oracle.exact_logz(g, g.weights, ["a"])
    for n in (1, 2, 5):
        got = keys(g, g.weights, ["a"], max_nodes=n)
        assert len(got) == n
        assert all(len(kk) <= n for kk in got)
        assert math.fsum(got.values()) == pytest.approx(v * (1 - c**n) / (1 - c), rel=1e-14)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_oracle_self_consistent(family):
    # every listed derivation is well-formed (checked node by node), none is
    # listed twice, the number matches an independent count, and the weight is
    # the product of the rule weights
    for seed in range(3):
        g = grammars.make(family, seed)
        rng = np.random.default_rng(seed)
        for sent in grammars.random_sentences(g, rng, 4) + grammars.sampled_sentences(g, rng, 3):
            ds = list(oracle.enumerate_derivations(g, g.weights, sent))
            ks = [oracle.derivation_key(d) for d, _ in ds]
            assert len(set(ks)) == len(ks) == oracle.count_derivations(g, sent)
            for d, w in ds:
                assert d.dtype == np.int64 and d.shape[1] == 3
                assert oracle.is_derivation_of(g, sent, d)
                assert w == pytest.approx(oracle.derivation_weight(d, g.weights), rel=1e-14)
            # a generous node bound lists the same derivations
            assert set(ks) == {oracle.derivation_key(d) for d, _ in
                               oracle.enumerate_derivations(g, g.weights, sent, max_nodes=200)}


# ---------------------------------------------------------------------------
# the chi-square test itself: accepts exact samples, rejects wrong ones
# ---------------------------------------------------------------------------

def _control_case():
    # a sentence with a spread-out posterior over a few dozen derivations
    g = grammars.make("mixed", 0)
    rng = np.random.default_rng(0)
    for sent in grammars.random_sentences(g, rng, 30, min_len=3, max_len=5, max_derivations=400):
        post = oracle.exact_posterior(g, g.weights, sent)
        if 20 <= len(post) and max(post.values()) < 0.5:
            return g, sent, post
    raise AssertionError("no control sentence")


def _draw(post_items, probs, n, rng):
    ks = [k for k, _ in post_items]
    return [ks[i] for i in rng.choice(len(ks), size=n, p=probs)]


def test_chisquare_accepts_exact_samples():
    _, _, post = _control_case()
    items = list(post.items())
    p = np.array([v for _, v in items])
    p /= p.sum()
    for seed in range(5):
        pv, cells, outside = oracle.chisquare_gof(_draw(items, p, N_SAMPLES, np.random.default_rng(seed)), post)
        assert outside == 0 and cells >= 5
        assert pv > P_MIN, (seed, pv)


@pytest.mark.parametrize("kind", ["tempered", "swap", "drop_one", "outside"])
def test_chisquare_rejects_wrong_samples(kind):
    """Negative control: samples from a wrong distribution fail the test."""
    g, sent, post = _control_case()
    items = sorted(post.items(), key=lambda kv: kv[1], reverse=True)
    p = np.array([v for _, v in items])
    p /= p.sum()
    rng = np.random.default_rng(123)
    if kind == "tempered":            # P^0.5: what a sampler using sqrt weights would give
        q = np.sqrt(p)
    elif kind == "swap":              # two derivations' probabilities exchanged
        q = p.copy()
        q[[0, 2]] = q[[2, 0]]
        assert abs(p[0] - p[2]) > 0.1
    elif kind == "drop_one":          # one derivation never sampled
        q = p.copy()
        q[2] = 0.0
    else:                             # a derivation of zero posterior appears
        q = p
    q = q / q.sum()
    sample = _draw(items, q, N_SAMPLES, rng)
    if kind == "outside":
        sample[0] = ((0, 0, len(sent)),) * 2
    pv, _, _ = oracle.chisquare_gof(sample, post)
    assert pv < P_MIN, (kind, pv)


# ---------------------------------------------------------------------------
# the kernel against the oracle
# ---------------------------------------------------------------------------

@functools.cache
def case(family, seed):
    """(grammar, sentences, weight vectors) for one random case."""
    g = grammars.make(family, seed)
    rng = np.random.default_rng([seed, 7])
    sents = grammars.random_sentences(g, rng, 6, max_len=6)
    for s in grammars.sampled_sentences(g, rng, 4, max_len=6):
        if s not in sents:
            sents.append(s)
    # a second weight vector on the same parser: fresh random, some zeros,
    # sub-normalised (as VB passes)
    w2 = np.exp(rng.uniform(np.log(0.02), np.log(1.0), size=len(g)))
    w2[rng.random(len(g)) < 0.15] = 0.0
    return g, sents, (g.weights, w2)


@functools.cache
def exact(family, seed, wi):
    g, sents, ws = case(family, seed)
    w = ws[wi]
    return ([oracle.exact_logz(g, w, s) for s in sents],
            [oracle.exact_counts(g, w, s) for s in sents],
            [oracle.exact_viterbi(g, w, s) for s in sents])


def _as_list(x):
    return list(x)



@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_inside_outside(family, seed, path):
    g, sents, ws = case(family, seed)
    parser = CKYParser(g, sents, path=path)
    assert getattr(parser, "path", path) == path        # the path asked for really runs
    assert not parser.failures
    for wi, w in enumerate(ws):
        logz_x, counts_x, _ = exact(family, seed, wi)
        counts, logz = parser.inside_outside(w.copy())
        logz = np.asarray(logz, dtype=np.float64)
        assert logz.shape == (len(sents),)
        for s, sent in enumerate(sents):
            np.testing.assert_allclose(
                logz[s], logz_x[s], rtol=LOGZ_RTOL, atol=LOGZ_ATOL,
                err_msg=f"log Z: family={family} seed={seed} w{wi} sentence={sent}")
        counts = np.asarray(counts, dtype=np.float64)
        assert counts.shape == (len(g),)
        np.testing.assert_allclose(counts, np.sum(counts_x, axis=0), rtol=0, atol=COUNT_ATOL * len(sents),
                                   err_msg=f"corpus counts: family={family} seed={seed} w{wi}")
        # per sentence
        for s, sent in enumerate(sents):
            c1, z1 = parser.inside_outside(w, idx=[s])
            off = np.flatnonzero(~np.isclose(c1, counts_x[s], atol=1e-10, rtol=0))
            np.testing.assert_allclose(
                np.asarray(c1), counts_x[s], rtol=0, atol=COUNT_ATOL,
                err_msg=f"counts: family={family} seed={seed} w{wi} sentence={sent} "
                        f"rules={[g.keys()[r] for r in off]}")
            np.testing.assert_allclose(np.asarray(z1, dtype=np.float64), [logz_x[s]],
                                       rtol=LOGZ_RTOL, atol=LOGZ_ATOL)



@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_viterbi(family, seed, path):
    g, sents, ws = case(family, seed)
    parser = CKYParser(g, sents, path=path)
    for wi, w in enumerate(ws):
        _, _, vit_x = exact(family, seed, wi)
        derivs, logp = parser.viterbi(w.copy())
        derivs = _as_list(derivs)
        logp = np.asarray(logp, dtype=np.float64)
        assert len(derivs) == len(sents) and logp.shape == (len(sents),)
        for s, sent in enumerate(sents):
            d_x, lp_x, unique = vit_x[s]
            msg = f"viterbi: family={family} seed={seed} w{wi} sentence={sent}"
            if d_x is None:
                assert derivs[s] is None, msg
                assert logp[s] == -np.inf, msg
                continue
            d = derivs[s]
            assert d is not None, msg
            d = np.asarray(d)
            assert d.dtype == np.int64 and d.ndim == 2 and d.shape[1] == 3, msg
            assert oracle.is_derivation_of(g, sent, d), f"{msg}: not a derivation: {d.tolist()}"
            np.testing.assert_allclose(logp[s], lp_x, rtol=LOGZ_RTOL, atol=LOGZ_ATOL, err_msg=msg)
            np.testing.assert_allclose(math.log(oracle.derivation_weight(d, w)), lp_x,
                                       rtol=LOGZ_RTOL, atol=LOGZ_ATOL, err_msg=msg)
            if unique:
                assert oracle.derivation_key(d) == oracle.derivation_key(d_x), msg


def _sample_sentences(family, seed):
    """Up to 2 sentences of the case with between 3 and 300 derivations of positive weight."""
    g, sents, ws = case(family, seed)
    out = []
    for s in sorted(sents, key=len, reverse=True):
        post = oracle.exact_posterior(g, ws[0], s)
        if 3 <= len(post) <= 300:
            out.append((s, post))
        if len(out) == 2:
            break
    return out



@pytest.mark.slow
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("seed", SAMPLE_SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_sample_distribution(family, seed, path):
    g, _, ws = case(family, seed)
    chosen = _sample_sentences(family, seed)
    if not chosen:
        pytest.skip("no sentence with 3..300 derivations in this case")
    # one corpus with each chosen sentence repeated N_SAMPLES times, interleaved
    corpus = [s for _ in range(N_SAMPLES) for s, _ in chosen]
    parser = CKYParser(g, corpus, path=path)
    rng = np.random.default_rng([seed, 99])
    derivs = _as_list(parser.sample(ws[0].copy(), rng))
    assert len(derivs) == len(corpus)
    for c, (sent, post) in enumerate(chosen):
        ds = derivs[c::len(chosen)]
        assert all(d is not None for d in ds)
        sample = [oracle.derivation_key(d) for d in ds]
        bad = [k for k in set(sample) if k not in post]
        assert not bad, f"family={family} seed={seed} sentence={sent}: sampled non-derivations {bad[:3]}"
        pv, cells, _ = oracle.chisquare_gof(sample, post)
        assert pv > P_MIN, (f"family={family} seed={seed} sentence={sent}: chi-square p={pv:.3g} "
                            f"over {cells} cells, {len(post)} derivations")



@pytest.mark.parametrize("path", PATHS)
def test_sample_negative_control(path):
    """The kernel's samples under weights w are rejected against the posterior
    under different weights (shows the kernel-side test has power)."""
    g, sent, post = _control_case()
    w_wrong = g.weights.copy()
    # move mass between two rules of the same LHS used in the posterior
    used = sorted({r for k in post for r, _, _ in k})
    by_lhs = {}
    for r in used:
        by_lhs.setdefault(g.rules[r][0], []).append(r)
    r1, r2 = next(v for v in by_lhs.values() if len(v) >= 2)[:2]
    w_wrong[r1], w_wrong[r2] = w_wrong[r1] * 4, w_wrong[r2] / 4
    post_wrong = oracle.exact_posterior(g, w_wrong, sent)
    tv = 0.5 * sum(abs(post.get(k, 0) - post_wrong.get(k, 0)) for k in set(post) | set(post_wrong))
    assert tv > 0.05
    parser = CKYParser(g, [sent] * N_SAMPLES, path=path)
    sample = [oracle.derivation_key(d) for d in parser.sample(w_wrong, np.random.default_rng(5))]
    assert oracle.chisquare_gof(sample, post_wrong)[0] > P_MIN      # right reference: accepted
    assert oracle.chisquare_gof(sample, post)[0] < P_MIN            # wrong reference: rejected



@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("family", ["mixed", "zeros", "nary"])
def test_batch_equals_singles_and_idx(family, path):
    g, sents, ws = case(family, 1)
    parser = CKYParser(g, sents, path=path)
    w = ws[0]
    counts_all, logz_all = parser.inside_outside(w)
    singles = [CKYParser(g, [s], path=path).inside_outside(w) for s in sents]
    np.testing.assert_allclose(counts_all, np.sum([c for c, _ in singles], axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(logz_all, [z[0] for _, z in singles], rtol=1e-12, atol=1e-12)
    # idx selects (and orders) sentences
    idx = [len(sents) - 1, 0, 2]
    c_idx, z_idx = parser.inside_outside(w, idx=idx)
    np.testing.assert_allclose(z_idx, [logz_all[i] for i in idx], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(c_idx, np.sum([singles[i][0] for i in idx], axis=0), rtol=1e-12, atol=1e-12)
    c_np, z_np = parser.inside_outside(w, idx=np.array(idx, dtype=np.int64))
    np.testing.assert_allclose(c_np, c_idx, rtol=0, atol=0)
    d_idx, lp_idx = parser.viterbi(w, idx=idx)
    d_all, lp_all = parser.viterbi(w)
    assert len(_as_list(d_idx)) == len(idx)
    np.testing.assert_allclose(lp_idx, [lp_all[i] for i in idx], rtol=1e-12)
    for j, i in enumerate(idx):
        if d_all[i] is None:
            assert d_idx[j] is None
        else:
            assert oracle.derivation_key(d_idx[j]) == oracle.derivation_key(d_all[i])
    s_idx = _as_list(parser.sample(w, np.random.default_rng(0), idx=idx))
    assert len(s_idx) == len(idx)
    for j, i in enumerate(idx):
        if logz_all[i] == -np.inf:
            assert s_idx[j] is None
        else:
            assert s_idx[j] is not None and oracle.is_derivation_of(g, sents[i], s_idx[j])



@pytest.mark.parametrize("path", PATHS)
def test_unparseable_sentences(path):
    g = G([("S", "A B"), ("A", "a"), ("B", "b"), ("B", "c"), ("A", "A A")], [1.0, 0.5, 2.0, 0.0, 0.25])
    sents = [["a", "b"],          # parseable
             ["a", "zzz"],        # unknown word: failure known before weights
             ["b", "a"],          # known words, no derivation
             ["a", "c"],          # only derivations of weight zero
             ["a", "a", "b"]]     # parseable
    parser = CKYParser(g, sents, path=path)
    assert 1 in parser.failures
    assert 0 not in parser.failures and 4 not in parser.failures
    w = g.weights
    counts, logz = parser.inside_outside(w)
    exp_z = [oracle.exact_logz(g, w, s) for s in sents]
    assert exp_z[1] == exp_z[2] == exp_z[3] == -np.inf
    np.testing.assert_allclose(logz, exp_z, rtol=LOGZ_RTOL, atol=LOGZ_ATOL)
    np.testing.assert_allclose(counts, oracle.exact_counts(g, w, sents[0]) + oracle.exact_counts(g, w, sents[4]),
                               rtol=0, atol=COUNT_ATOL)
    assert np.all(np.isfinite(counts))
    derivs, lp = parser.viterbi(w)
    for s in (1, 2, 3):
        assert derivs[s] is None and lp[s] == -np.inf
    assert derivs[0] is not None and derivs[4] is not None
    samp = parser.sample(w, np.random.default_rng(1))
    for s in (1, 2, 3):
        assert samp[s] is None
    assert oracle.is_derivation_of(g, sents[4], samp[4])



@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("scale", [1e-8, 1e-3, 1e3])
def test_weight_scale(scale, path):
    """Unnormalised weights far from 1 (VB's sub-normalised weights can be tiny)."""
    g, sents, ws = case("mixed", 2)
    w = ws[0] * scale
    parser = CKYParser(g, sents, path=path)
    counts, logz = parser.inside_outside(w)
    np.testing.assert_allclose(logz, [oracle.exact_logz(g, w, s) for s in sents], rtol=LOGZ_RTOL, atol=1e-9)
    np.testing.assert_allclose(counts, np.sum([oracle.exact_counts(g, w, s) for s in sents], axis=0),
                               rtol=1e-9, atol=COUNT_ATOL * len(sents))
    _, lp = parser.viterbi(w)
    np.testing.assert_allclose(lp, [oracle.exact_viterbi(g, w, s)[1] for s in sents], rtol=LOGZ_RTOL, atol=1e-9)



@pytest.mark.parametrize("path", PATHS)
def test_small_chunks(path):
    """Sentences split over many kernel batches (implementation option
    ``chunk_mb``, skipped where the parser has none) give the same answers."""
    if "chunk_mb" not in inspect.signature(CKYParser).parameters:
        pytest.skip("CKYParser has no chunk_mb option")
    family, seed = "mixed", 0
    g, sents, ws = case(family, seed)
    parser = CKYParser(g, sents, path=path, chunk_mb=1e-6)
    for wi, w in enumerate(ws):
        logz_x, counts_x, vit_x = exact(family, seed, wi)
        counts, logz = parser.inside_outside(w)
        np.testing.assert_allclose(logz, logz_x, rtol=LOGZ_RTOL, atol=LOGZ_ATOL)
        np.testing.assert_allclose(counts, np.sum(counts_x, axis=0), rtol=0, atol=COUNT_ATOL * len(sents))
        _, lp = parser.viterbi(w)
        np.testing.assert_allclose(lp, [v[1] for v in vit_x], rtol=LOGZ_RTOL, atol=LOGZ_ATOL)
        for s, d in enumerate(parser.sample(w, np.random.default_rng(wi))):
            assert (d is None) == (logz_x[s] == -np.inf)
            if d is not None:
                assert oracle.is_derivation_of(g, sents[s], d)
