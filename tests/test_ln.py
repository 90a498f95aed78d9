"""Logistic-normal variational EM (Cohen & Smith 2010): the E-step raises the
bound, its coordinate updates are the maximisers of the bound, the M-step
matches numerical maximisation, Sigma -> 0 recovers softmax(mu), the bound
is finite on DMV and CNF grammars, and the parameter files round-trip."""
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import minimize

from grind import ln
from grind.dmv import dmv_grammar
from grind.errors import InputError
from grind.make_grammar import cnf_grammar
from grind.parser import make_parser
from grind.training import ShardedEstep, train


def corpus(rng, vocab, n, lo=2, hi=5):
    return [list(rng.choice(vocab, size=rng.integers(lo, hi + 1))) for _ in range(n)]


def make(kind, n=6, seed=0, model=1, **cfg):
    rng = np.random.default_rng(seed)
    vocab = ["a", "b", "c"]
    sents = corpus(rng, vocab, n)
    g = dmv_grammar(sents) if kind == "dmv" else cnf_grammar(vocab, 2, 2)
    est = ShardedEstep(make_parser(g, sents))
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    c = SimpleNamespace(iterations=3, tolerance=0, model=model, **cfg)
    return g, est, ln.LogisticNormal(g, est, None, theta0, c), rng


def random_sigma(pk, rng, scale=0.5):
    """A random positive-definite covariance per multinomial (identity in padding)."""
    S = np.broadcast_to(np.eye(pk.D), (pk.K, pk.D, pk.D)).copy()
    for k in range(pk.K):
        d = pk.sizes[k]
        A = rng.standard_normal((d, d)) * scale
        S[k, :d, :d] = A @ A.T + 0.5 * np.eye(d)
    return S


@pytest.mark.parametrize("kind,optimizer", [("dmv", "newton"), ("cnf", "newton"), ("dmv", "lbfgs")])
def test_estep_increases_the_per_sentence_bound(kind, optimizer):
    _, est, a, rng = make(kind, ln_optimizer=optimizer)
    a.Sigma = random_sigma(a.pk, rng)
    a.mu = np.where(a.pk.mask, rng.standard_normal(a.mu.shape), 0.0)
    P, logdet = a._prior_terms()
    idx = np.arange(len(est.parser.sentences))
    trace = []
    *_, final = a.e_step(a._io_sentences(idx), len(idx), P, logdet, cycles=6, trace=trace)
    b = np.array(trace)                                  # (cycles + 1, sentences)
    assert np.all(np.isfinite(b))
    assert np.all(np.diff(b, axis=0) >= -1e-7 * np.abs(b[:-1])), b
    assert np.all(b[-1] > b[0] + 1e-6)
    np.testing.assert_array_equal(final, b[-1])


@pytest.mark.parametrize("method", ["newton", "lbfgs"])
def test_coordinate_updates_maximise_the_bound(method):
    """optimise_mu / optimise_sigma / closed_zeta are the argmax of the
    fixed-q(y) bound (checked against a generic optimiser on the bound itself)."""
    _, _, a, rng = make("cnf")
    pk = a.pk
    mask = pk.mask[None]
    a.Sigma = random_sigma(pk, rng)
    a.mu = np.where(pk.mask, rng.standard_normal(a.mu.shape), 0.0)
    P, logdet = a._prior_terms()
    F = np.where(mask, rng.uniform(0, 3, (1, pk.K, pk.D)), 0.0)
    F[0, 0] = 0.0                                        # one unused multinomial
    mut = np.where(mask, rng.standard_normal((1, pk.K, pk.D)), 0.0)
    s2 = np.where(mask, rng.uniform(0.2, 2, (1, pk.K, pk.D)), 1.0)
    zeta = ln.closed_zeta(mask, mut, s2) * 1.7

    def obj(m, s, z):
        return float(ln.fixed_count_objective(mask, F, m, s, z, a.mu, P, logdet)[0])

    m1 = ln.optimise_mu(mask, F, mut, s2, zeta, a.mu, P, method=method)
    ref = minimize(lambda x: -obj(np.where(mask, x.reshape(mut.shape), 0.0), s2, zeta),
                   mut.ravel(), method="BFGS", options={"gtol": 1e-9})
    assert obj(m1, s2, zeta) >= -ref.fun - 1e-7
    np.testing.assert_allclose(m1[mask], ref.x.reshape(mut.shape)[mask], atol=1e-4)

    v1 = ln.optimise_sigma(mask, F, m1, s2, zeta, P)
    assert np.all(v1[mask] > 0)
    ref = minimize(lambda x: -obj(m1, np.where(mask, np.exp(x.reshape(s2.shape)), 1.0), zeta),
                   np.log(s2).ravel(), method="BFGS", options={"gtol": 1e-9})
    assert obj(m1, v1, zeta) >= -ref.fun - 1e-7
    np.testing.assert_allclose(np.log(v1[mask]), ref.x.reshape(s2.shape)[mask], atol=1e-4)

    z1 = ln.closed_zeta(mask, m1, v1)
    for f in (0.5, 0.9, 1.1, 2.0):
        assert obj(m1, v1, z1) >= obj(m1, v1, z1 * f)
    assert obj(m1, v1, z1) > obj(mut, s2, zeta)


def test_mstep_matches_numerical_maximisation():
    """Algorithm 3's mu, Sigma maximise -sum_m KL(q_m || N(mu, Sigma)), the
    only part of the bound (Eq. 14) that depends on them."""
    _, _, a, rng = make("cnf")
    pk = a.pk
    k = int(np.argmax(pk.sizes == 3))                    # a multinomial with 3 rules
    d, M = 3, 5
    mut = np.zeros((M, pk.K, pk.D))
    s2 = np.ones((M, pk.K, pk.D))
    mut[:, k, :d] = rng.standard_normal((M, d))
    s2[:, k, :d] = rng.uniform(0.1, 1.0, (M, d))
    a._m_step(M, mut.sum(0), ln._second(pk, mut, s2).sum(0))
    mu_hat, S_hat = a.mu[k, :d], a.Sigma[k, :d, :d]

    mask = pk.mask[k:k + 1, :d]
    tri = np.tril_indices(d)

    def neg(x):
        mu, L = x[:d], np.zeros((d, d))
        L[tri] = x[d:]
        S = L @ L.T + 1e-12 * np.eye(d)
        kl = ln.kl_terms(mask, mut[:, k:k + 1, :d], s2[:, k:k + 1, :d], mu[None],
                         np.linalg.inv(S)[None], np.linalg.slogdet(S)[1])
        return float(kl.sum())

    x0 = np.concatenate([np.zeros(d), np.eye(d)[tri]])
    res = minimize(neg, x0, method="BFGS", options={"gtol": 1e-10})
    L = np.zeros((d, d))
    L[tri] = res.x[d:]
    np.testing.assert_allclose(mu_hat, res.x[:d], atol=1e-4)
    np.testing.assert_allclose(S_hat, L @ L.T, atol=1e-4)
    x_hat = np.concatenate([mu_hat, np.linalg.cholesky(S_hat)[tri]])
    assert neg(x_hat) <= res.fun + 1e-8
    # padding stays identity, mean zero
    assert np.all(a.mu[~pk.mask] == 0)
    np.testing.assert_array_equal(a.Sigma[k, d:, d:], np.eye(pk.D - d))


@pytest.mark.parametrize("kind", ["dmv", "cnf"])
def test_small_sigma_gives_softmax_counts(kind):
    _, est, a, rng = make(kind)
    pk, parser = a.pk, est.parser
    a.mu = np.where(pk.mask, rng.standard_normal(a.mu.shape), 0.0)
    ref, ref_logz = parser.inside_outside(ln.softmax_weights(pk, a.mu))
    idx = np.arange(len(parser.sentences))
    io = a._io_sentences(idx)
    # fixed mu~ = mu and tiny sigma~^2: psi~ -> log softmax(mu)
    mut = np.broadcast_to(a.mu, (len(idx), pk.K, pk.D))
    s2 = np.where(pk.mask, 1e-10, 1.0) + np.zeros_like(mut)
    F, logz = io(ln.psi_tilde(pk.mask, mut, s2, ln.closed_zeta(pk.mask, mut, s2)))
    np.testing.assert_allclose(pk.pack(F.sum(0)), ref, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(logz, ref_logz, rtol=1e-6)
    # the whole E-step with Sigma -> 0 pins q(eta) at mu
    a.Sigma = np.broadcast_to(np.eye(pk.D) * 1e-9, a.Sigma.shape).copy()
    P, logdet = a._prior_terms()
    mut, s2, _, F, logz, _ = a.e_step(io, len(idx), P, logdet, cycles=2)
    np.testing.assert_allclose(pk.pack(F.sum(0)), ref, rtol=1e-4, atol=1e-6)
    assert np.max(np.abs(mut - a.mu)[:, pk.mask]) < 1e-5


@pytest.mark.parametrize("model", [1, 2])
@pytest.mark.parametrize("kind", ["dmv", "cnf"])
def test_bound_is_finite_and_training_runs(kind, model):
    g, _, a, rng = make(kind, n=8, model=model)
    trace = train(a, rng)
    b = np.array([s.objective for s in trace])
    assert len(b) == 3 and np.all(np.isfinite(b))
    assert b[-1] > b[0]
    w = a.weights()
    assert np.all(w > 0) and np.allclose(np.bincount(g.lhs, weights=w), 1.0)
    assert np.all(np.linalg.eigvalsh(a.Sigma) > 0)
    st = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in a.get_state().items()}
    a2 = make(kind, n=8, model=model)[2]
    a2.set_state(st)
    np.testing.assert_array_equal(a2.weights(), w)


@pytest.mark.parametrize("model", [1, 2])
@pytest.mark.parametrize("kind", ["dmv", "cnf"])
def test_warm_start_bound_never_decreases(kind, model):
    """With warm starts, the M-step maximises the bound given q and the next
    E-step starts from q: variational EM's bound is monotone (Eq. 14)."""
    _, _, a, rng = make(kind, n=8, model=model, ln_warm=True, ln_cycles=3)
    a.iterations = 6
    b = np.array([s.objective for s in train(a, rng)])
    assert np.all(np.isfinite(b)) and len(b) == 6
    assert np.all(np.diff(b) >= -1e-7 * np.abs(b[:-1])), b
    st = a.get_state()
    assert st["var_mu"].shape[0] == (8 if model == 1 else 1)


def test_families_covariance_and_shipped_files():
    for name in ("upos", "ptb"):
        fam = ln.read_families(name)
        assert len(set(fam.values())) == 12
    rng = np.random.default_rng(0)
    sents = [["NOUN", "VERB", "PROPN", "NOUN"], ["ADJ", "NOUN", "VERB"], ["VERB", "AUX"]]
    g = dmv_grammar(sents)
    pk = ln.Packing(g)
    S = ln.initial_covariance(g, pk, "families", "upos")
    assert np.all(np.linalg.eigvalsh(S) > 0)
    key = {k: i for i, k in enumerate(g.keys())}
    k = g.lhs[key["R'_NOUN --> R_NOUN Y_VERB"]]
    rows = list(pk.rows[k])
    i, j = rows.index(key["R'_NOUN --> R_NOUN Y_VERB"]), rows.index(key["R'_NOUN --> R_NOUN Y_AUX"])
    n = rows.index(key["R'_NOUN --> R_NOUN Y_NOUN"])
    assert S[k, i, j] == 0.5 and S[k, i, n] == 0 and S[k, i, i] == 1
    root = g.lhs[key["S --> Y_VERB"]]
    rr = list(pk.rows[root])
    assert S[root, rr.index(key["S --> Y_VERB"]), rr.index(key["S --> Y_AUX"])] == 0.5
    with pytest.raises(InputError):
        ln.initial_covariance(g, pk, "families", None)
    del rng


def test_save_load_roundtrip(tmp_path):
    g, est, a, rng = make("dmv")
    a.mu = np.where(a.pk.mask, rng.standard_normal(a.mu.shape), 0.0)
    a.Sigma = random_sigma(a.pk, rng)
    p = tmp_path / "ln.txt"
    ln.save_ln(str(p), g, a.mu, a.Sigma)
    text = p.read_text()
    assert "# multinomial S\n" in text and "\nmu " in text and "\ncov " in text
    blocks = ln.load_ln(str(p))
    assert set(blocks) == set(g.nonterminals)
    mu, S = ln.pack_ln(g, blocks)
    np.testing.assert_array_equal(mu, a.mu)
    np.testing.assert_array_equal(S, a.Sigma)
    # as an initialiser
    c = SimpleNamespace(iterations=1, tolerance=0, ln_init=str(p))
    b = ln.LogisticNormal(g, est, None, g.weights, c)
    np.testing.assert_array_equal(b.Sigma, a.Sigma)


@pytest.mark.parametrize("warm", [False, True])
def test_checkpoint_resume_is_bit_identical(tmp_path, warm):
    ck = str(tmp_path / "ck.npz")
    _, _, a, rng = make("dmv", ln_warm=warm)
    a.iterations = 4
    full = train(a, rng)
    _, _, b, rng = make("dmv", ln_warm=warm)
    b.iterations = 2
    train(b, rng, checkpoint=ck, meta={"algorithm": "ln"})
    _, _, c, rng = make("dmv", ln_warm=warm)
    c.iterations = 4
    resumed = train(c, rng, checkpoint=ck, resume=True, meta={"algorithm": "ln"})
    assert [s.objective for s in resumed] == [s.objective for s in full]
    np.testing.assert_array_equal(c.mu, a.mu)
    np.testing.assert_array_equal(c.Sigma, a.Sigma)
