"""Logistic-normal and shared logistic-normal variational EM (Cohen & Smith
2010): the E-step raises the bound, its block updates are the maximisers of
the bound, the M-step matches numerical maximisation, Sigma -> 0 recovers
softmax of the mean, the bound is finite on DMV and CNF grammars, and the
parameter files round-trip.  "tied" runs use a shared-expert structure (TieA
with families {a, b} and {c}: experts across multinomials)."""
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.optimize import minimize

from conftest import remote_shards
from grind.infer import ln
from grind.grammars.dmv import dmv_grammar
from grind.errors import InputError, NumericalError
from grind.grammars.cnf import cnf_grammar
from grind.kernels.select import make_parser
from grind.infer.training import ShardedEstep, train

FAM = {"a": "x", "b": "x", "c": "y"}


def corpus(rng, vocab, n, lo=2, hi=5):
    return [list(rng.choice(vocab, size=rng.integers(lo, hi + 1))) for _ in range(n)]


def make(kind, n=6, seed=0, model=1, tied=False, **cfg):
    rng = np.random.default_rng(seed)
    vocab = ["a", "b", "c"]
    sents = corpus(rng, vocab, n)
    g = dmv_grammar(sents) if kind == "dmv" else cnf_grammar(vocab, 2, 2)
    est = ShardedEstep(make_parser(g, sents))
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    if tied:
        cfg.update(tie="A", families=FAM)
    c = SimpleNamespace(iterations=3, tolerance=0, model=model, **cfg)
    return g, est, ln.LogisticNormal(g, est, None, theta0, c), rng


def randomise(a, rng, scale=0.5):
    """Random means and positive-definite covariances for every expert (identity in padding)."""
    a.mu = [np.where(gr.mask, rng.standard_normal(gr.mask.shape), 0.0) for gr in a.st.groups]
    a.Sigma = []
    for gr in a.st.groups:
        S = np.broadcast_to(np.eye(gr.L), (gr.E, gr.L, gr.L)).copy()
        for e in range(gr.E):
            d = int(gr.mask[e].sum())
            A = rng.standard_normal((d, d)) * scale
            S[e, :d, :d] = A @ A.T + 0.5 * np.eye(d)
        a.Sigma.append(S)


CASES = [("dmv", "newton", False), ("cnf", "newton", False), ("dmv", "lbfgs", False),
         ("dmv", "newton", True), ("dmv", "lbfgs", True)]


def test_tied_structure_has_shared_experts():
    a = make("dmv", tied=True)[2]
    shared = [(n, ks) for n, ks in a.st.experts if len(ks) > 1]
    assert sorted(n for n, _ in shared) == ["tie:x:left", "tie:x:right", "tie:x:stop:left:0", "tie:x:stop:left:1",
                                            "tie:x:stop:right:0", "tie:x:stop:right:1"]
    for gr in a.st.groups:              # one dimension a group, disjoint multinomials
        assert len({int(m.sum()) for m in gr.mask}) == 1
        ks = [k for j in gr.members for k in a.st.experts[j][1]]
        assert len(ks) == len(set(ks))
    assert sorted(a.pk.lhs[k] for k in dict(shared)["tie:x:left"]) == ["L'_a", "L'_b"]


@pytest.mark.parametrize("kind,optimizer,tied", CASES)
def test_estep_increases_the_per_sentence_bound(kind, optimizer, tied):
    _, est, a, rng = make(kind, ln_optimizer=optimizer, tied=tied)
    randomise(a, rng)
    idx = np.arange(len(est.parser.sentences))
    trace = []
    *_, final = a.e_step(a._io_sentences(idx), len(idx), a._prior_terms(), cycles=6, trace=trace)
    b = np.array(trace)                                  # (cycles + 1, sentences)
    assert np.all(np.isfinite(b))
    assert np.all(np.diff(b, axis=0) >= -1e-7 * np.abs(b[:-1])), b
    assert np.all(b[-1] > b[0] + 1e-6)
    np.testing.assert_array_equal(final, b[-1])


@pytest.mark.parametrize("kind,method,tied,partial", [("cnf", "newton", False, False), ("cnf", "lbfgs", False, False),
                                                      ("dmv", "newton", True, False), ("dmv", "lbfgs", True, False),
                                                      ("dmv", "newton", True, True)])
def test_block_updates_maximise_the_bound(kind, method, tied, partial):
    """optimise_mu / optimise_sigma (one group, the others fixed) and
    closed_zeta are the argmax of the fixed-q(y) bound, checked against a
    generic optimiser on the bound itself.  ``partial``: the data touch only
    one multinomial of each shared expert (the reduced solve of optimise_mu)."""
    _, _, a, rng = make(kind, tied=tied)
    st, pk = a.st, a.pk
    mask = pk.mask[None]
    randomise(a, rng)
    prior = a._prior_terms()
    F = np.where(mask, rng.uniform(0, 3, (1, pk.K, pk.D)), 0.0)
    F[0, 0] = 0.0                                        # one unused multinomial
    if partial:
        for _, ks in a.st.experts:
            if len(ks) > 1:
                F[0, ks[0]] = 0.0
    muts = [np.where(gr.mask, rng.standard_normal((1, gr.E, gr.L)), 0.0) for gr in st.groups]
    s2s = [np.where(gr.mask, rng.uniform(0.2, 2, (1, gr.E, gr.L)), 1.0) for gr in st.groups]
    zeta = ln.closed_zeta(pk.mask, st.combine(muts), st.combine(s2s, 2)) * 1.7

    def obj(m, s, z):
        return float(ln.fixed_count_objective(st, F, m, s, z, prior)[0])

    def replace(xs, gi, x):
        return [x if i == gi else y for i, y in enumerate(xs)]

    for gi, gr in enumerate(st.groups):
        gm = gr.mask[None]
        m, v = st.combine(muts), st.combine(s2s, 2)
        aa, bb = ln.group_coefficients(st, gi, F, m, v, zeta, muts[gi])
        m1 = ln.optimise_mu(gr.mask, aa, bb, gr.w, muts[gi], prior[gi][0], prior[gi][1], method=method,
                            Sigma=a.Sigma[gi])
        # (minimize calls the lambdas before the loop moves on: the late binding is harmless)
        ref = minimize(lambda x: -obj(replace(muts, gi, np.where(gm, x.reshape(m1.shape), 0.0)), s2s, zeta),  # noqa: B023
                       muts[gi].ravel(), method="BFGS", options={"gtol": 1e-9})
        muts = replace(muts, gi, m1)
        assert obj(muts, s2s, zeta) >= -ref.fun - 1e-7
        np.testing.assert_allclose(m1[gm], ref.x.reshape(m1.shape)[gm], atol=1e-4)

        beta = ln.sigma_coefficients(st, gi, F, st.combine(muts), v, zeta, s2s[gi])
        v1 = ln.optimise_sigma(gr.mask, beta, gr.w ** 2, np.diagonal(prior[gi][1], axis1=-2, axis2=-1), s2s[gi])
        assert np.all(v1[gm] > 0)
        ref = minimize(lambda x: -obj(muts, replace(s2s, gi, np.where(gm, np.exp(x.reshape(v1.shape)), 1.0)), zeta),  # noqa: B023
                       np.log(s2s[gi]).ravel(), method="BFGS", options={"gtol": 1e-9})
        s2s = replace(s2s, gi, v1)
        assert obj(muts, s2s, zeta) >= -ref.fun - 1e-7
        np.testing.assert_allclose(np.log(v1[gm]), ref.x.reshape(v1.shape)[gm], atol=1e-4)

    z1 = ln.closed_zeta(pk.mask, st.combine(muts), st.combine(s2s, 2))
    for f in (0.5, 0.9, 1.1, 2.0):
        assert obj(muts, s2s, z1) >= obj(muts, s2s, z1 * f)


def test_combine_gives_the_moments_of_the_averaged_experts():
    """eta~_k = (1/|J_k|) sum_j eta_{j,I_{j,k}} under q: Monte Carlo mean and
    variance match Structure.combine (Definition 1 with independent experts)."""
    a = make("dmv", tied=True)[2]
    st, rng = a.st, np.random.default_rng(5)
    muts = [np.where(gr.mask, rng.standard_normal(gr.mask.shape), 0.0) for gr in st.groups]
    s2s = [np.where(gr.mask, rng.uniform(0.2, 2, gr.mask.shape), 1.0) for gr in st.groups]
    S = 40000
    draws = [m + np.sqrt(v) * rng.standard_normal((S,) + m.shape) for m, v in zip(muts, s2s)]
    eta = st.combine(draws)                                  # (S, K, D)
    mask = a.pk.mask
    m, v = st.combine(muts), st.combine(s2s, 2)
    se = np.sqrt(v[mask] / S)
    assert np.all(np.abs(eta.mean(0)[mask] - m[mask]) < 5 * se)
    np.testing.assert_allclose(eta.var(0)[mask], v[mask], rtol=0.05)
    # and a tied multinomial averages two experts: its variance halves
    tied = st.n_cover == 2
    assert tied.sum() == 12                 # heads a, b: L'_, R'_, L0_, L_, R0_, R_ each


@pytest.mark.parametrize("mstep", ["plain", "newton"])
def test_model1_mstep_averages_over_the_parsed_sentences_only(mstep):
    """Model I: one step on a corpus plus a sentence with no parse ("a zz": zz is not a head
    type of the grammar) gives the same mu and Sigma as on the corpus alone; the M-step
    averages over the M = 6 parsed sentences, not all 7."""
    rng = np.random.default_rng(0)
    sents = corpus(rng, ["a", "b", "c"], 6)
    g = dmv_grammar(sents)
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))

    def one_step(data):
        c = SimpleNamespace(iterations=1, tolerance=0, model=1, ln_mstep=mstep)
        a = ln.LogisticNormal(g, ShardedEstep(make_parser(g, data)), None, theta0, c)
        st = a.step()
        return a, st

    a, st = one_step(sents)
    b, st_b = one_step(sents + [["a", "zz"]])
    assert st.extra["parsed"] == st_b.extra["parsed"] == 6
    assert st_b.objective == st.objective
    for x, y in zip(b.mu + b.Sigma, a.mu + a.Sigma):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)


def test_mstep_matches_numerical_maximisation():
    """Algorithm 3's mu, Sigma maximise -sum_m KL(q_m || N(mu, Sigma)), the
    only part of the bound (Eq. 14) that depends on them (here an expert over
    two multinomials)."""
    _, _, a, rng = make("dmv", tied=True)
    gi = next(i for i, g in enumerate(a.st.groups) if len(a.st.experts[g.members[0]][1]) > 1)
    gr = a.st.groups[gi]
    d, M = int(gr.mask[0].sum()), 5
    muts = [np.zeros((M, g.E, g.L)) for g in a.st.groups]
    s2s = [np.ones((M, g.E, g.L)) for g in a.st.groups]
    muts[gi][:, 0, :d] = rng.standard_normal((M, d))
    s2s[gi][:, 0, :d] = rng.uniform(0.1, 1.0, (M, d))
    S1 = [np.zeros((g.E, g.L)) for g in a.st.groups]
    S2 = [np.zeros((g.E, g.L, g.L)) for g in a.st.groups]
    ln._accumulate(S1, S2, muts, s2s, np.ones(M, dtype=bool))
    a._m_step(M, S1, S2)
    mu_hat, S_hat = a.mu[gi][0, :d], a.Sigma[gi][0, :d, :d]

    mask = gr.mask[:1, :d]
    tri = np.tril_indices(d)

    def neg(x):
        mu, L = x[:d], np.zeros((d, d))
        L[tri] = x[d:]
        S = L @ L.T + 1e-12 * np.eye(d)
        kl = ln.kl_terms(mask, muts[gi][:, :1, :d], s2s[gi][:, :1, :d], mu[None],
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
    for g, mu, S in zip(a.st.groups, a.mu, a.Sigma):      # padding stays identity, mean zero
        assert np.all(mu[~g.mask] == 0)
        assert np.all(np.diagonal(S, axis1=-2, axis2=-1)[~g.mask] == 1)


@pytest.mark.parametrize("kind,tied", [("dmv", False), ("cnf", False), ("dmv", True)])
def test_small_sigma_gives_softmax_counts(kind, tied):
    _, est, a, rng = make(kind, tied=tied)
    pk, parser, st = a.pk, est.parser, a.st
    randomise(a, rng)
    m = a.natural_mean()
    ref, ref_logz = parser.inside_outside(ln.softmax_weights(pk, m))
    idx = np.arange(len(parser.sentences))
    io = a._io_sentences(idx)
    # fixed mu~ = mu and tiny sigma~^2: psi~ -> log softmax(m)
    mb = np.broadcast_to(m, (len(idx), pk.K, pk.D))
    v = np.where(pk.mask, 1e-10, 0.0) + np.zeros_like(mb)
    F, logz = io(ln.psi_tilde(pk.mask, mb, v, ln.closed_zeta(pk.mask, mb, v)))
    np.testing.assert_allclose(pk.pack(F.sum(0)), ref, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(logz, ref_logz, rtol=1e-6)
    # the whole E-step with Sigma -> 0 pins q(eta) at mu
    a.Sigma = [np.broadcast_to(np.eye(gr.L) * 1e-9, (gr.E, gr.L, gr.L)).copy() for gr in st.groups]
    muts, *_, F, logz, _ = a.e_step(io, len(idx), a._prior_terms(), cycles=2)
    np.testing.assert_allclose(pk.pack(F.sum(0)), ref, rtol=1e-4, atol=1e-6)
    for gr, mt, mu in zip(st.groups, muts, a.mu):
        assert np.max(np.abs(mt - mu)[:, gr.mask]) < 1e-5


@pytest.mark.parametrize("model", [1, 2])
@pytest.mark.parametrize("kind,tied", [("dmv", False), ("cnf", False), ("dmv", True)])
def test_bound_is_finite_and_training_runs(kind, tied, model):
    g, _, a, rng = make(kind, n=8, model=model, tied=tied)
    trace = train(a, rng)
    b = np.array([s.objective for s in trace])
    assert len(b) == 3 and np.all(np.isfinite(b))
    assert b[-1] > b[0]
    w = a.weights()
    assert np.all(w > 0) and np.allclose(np.bincount(g.lhs, weights=w), 1.0)
    for S in a.Sigma:
        assert np.all(np.linalg.eigvalsh(S) > 0)
    st = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in a.get_state().items()}
    a2 = make(kind, n=8, model=model, tied=tied)[2]
    a2.set_state(st)
    np.testing.assert_array_equal(a2.weights(), w)


@pytest.mark.parametrize("model", [1, 2])
@pytest.mark.parametrize("kind,tied", [("dmv", False), ("cnf", False), ("dmv", True)])
def test_warm_start_bound_never_decreases(kind, tied, model):
    """With warm starts, the M-step maximises the bound given q and the next
    E-step starts from q: variational EM's bound is monotone (Eq. 14)."""
    _, _, a, rng = make(kind, n=8, model=model, ln_warm=True, ln_cycles=3, tied=tied)
    a.iterations = 6
    b = np.array([s.objective for s in train(a, rng)])
    assert np.all(np.isfinite(b)) and len(b) == 6
    assert np.all(np.diff(b) >= -1e-7 * np.abs(b[:-1])), b
    st = a.get_state()
    assert st["var_mu_0"].shape[0] == (8 if model == 1 else 1)


@pytest.mark.parametrize("mstep", ["plain", "newton"])
def test_warm_start_does_not_depend_on_the_shard_size(mstep, monkeypatch):
    """Model I's E-step runs SHARD sentences at a time.  The first E-step of a
    warm run starts every sentence at the prior, as a cold run does -- not the
    shards after the first at the zero-filled buffer of the warm state -- so a
    warm run is the same whatever the shard size."""
    def run(shard, warm):
        monkeypatch.setattr(ln, "SHARD", shard)
        monkeypatch.setattr(ln, "COMPILED_SHARD", shard)
        _, _, a, rng = make("dmv", n=8, ln_warm=warm, ln_mstep=mstep)
        a.iterations = 4
        return np.array([s.objective for s in train(a, rng)]), a

    cold, _ = run(3, False)
    one, a1 = run(100, True)
    three, a3 = run(3, True)
    assert three[0] == cold[0]
    np.testing.assert_allclose(three, one, rtol=1e-10)
    for x, y in zip(a3.mu + a3._vmu + a3._vs2, a1.mu + a1._vmu + a1._vs2):
        np.testing.assert_allclose(x, y, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("cycles,mstep,tied", [(1, "plain", False), (3, "plain", True), (1, "newton", False)])
def test_model2_reuses_the_last_parse_only_when_it_is_the_next_first_parse(cycles, mstep, tied):
    """Model II, warm starts: an iteration's first parse is the previous one's
    last when q(eta) has not moved since, and is then reused.  The run is
    bit-identical to one that parses every time; the plain M-step saves a
    parse every iteration after the first, while the Newton M-step (which
    re-maximises q) and the switch to the tied structure (which remaps q) must
    parse again."""
    def run(reuse):
        extra = dict(tie_warmup=2) if tied else {}
        _, _, a, rng = make("dmv", n=8, model=2, ln_warm=True, ln_cycles=cycles, ln_mstep=mstep, tied=tied, **extra)
        a.iterations = 6
        if not reuse:
            a._reusable = lambda init: None
        inner, calls = a.estep, []

        def counted(w):
            calls.append(a.it)
            return inner(w)
        a.estep = counted
        trace = train(a, rng)
        return [s.objective for s in trace], a, np.bincount(calls, minlength=6)

    b1, a1, parses1 = run(True)
    b0, a0, parses0 = run(False)
    assert b1 == b0
    for x, y in zip(a1.mu + a1.Sigma + a1._vmu + a1._vs2, a0.mu + a0.Sigma + a0._vmu + a0._vs2):
        np.testing.assert_array_equal(x, y)
    assert np.all(parses0 == cycles + 1)
    if mstep == "plain":
        switch = {2} if tied else set()          # the switch before iteration 3 remaps q(eta)
        want = [cycles + 1 if i == 0 or i in switch else cycles for i in range(6)]
        assert parses1.tolist() == want
    else:
        assert parses1[0] == cycles + 1 and np.any(parses1[1:] == cycles + 1)


def test_families_covariance_and_shipped_files(tmp_path, capsys):
    for name in ("upos", "ptb"):
        fam = ln.read_families(name)
        assert len(set(fam.values())) == 15
    from grind.infer.sln import Structure, tie_structure
    sents = [["NOUN", "VERB", "PROPN", "NOUN"], ["ADJ", "NOUN", "VERB"], ["VERB", "AUX"]]
    g = dmv_grammar(sents)
    pk = ln.Packing(g)
    plain = Structure.plain(pk)
    S = ln.initial_covariance(g, plain, "families", "upos")
    for x in S:
        assert np.all(np.linalg.eigvalsh(x) > 0)
    key = {k: i for i, k in enumerate(g.keys())}
    c = lambda st, S, a, b, name=None: rule_cov(pk, st, S, key[a], key[b], name)   # noqa: E731
    assert c(plain, S, "R'_NOUN --> R_NOUN Y_VERB", "R'_NOUN --> R_NOUN Y_AUX") == 0.5
    assert c(plain, S, "R'_NOUN --> R_NOUN Y_VERB", "R'_NOUN --> R_NOUN Y_NOUN") == 0
    assert c(plain, S, "R'_NOUN --> R_NOUN Y_VERB", "R'_NOUN --> R_NOUN Y_VERB") == 1
    assert c(plain, S, "S --> Y_VERB", "S --> Y_AUX") == 0.5
    with pytest.raises(InputError):
        ln.initial_covariance(g, plain, "families", None)
    # a mapping for another tag set covered nothing and silently gave the identity; an empty file too
    with pytest.raises(InputError, match="none of the grammar's 5 tags"):
        ln.initial_covariance(g, plain, "families", "ptb")
    empty = tmp_path / "empty.fam"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="no 'TAG FAMILY' lines"):
        ln.read_families(str(empty))
    capsys.readouterr()
    ln.initial_covariance(g, plain, "families", {"NOUN": "n", "PROPN": "n", "VERB": "v"})
    assert "2 of the grammar's 5 tags have no family in the mapping (ADJ, AUX)" in capsys.readouterr().err
    # a shared expert over L'_VERB and L'_AUX: 0.5 also across its segments
    st = tie_structure(g, pk, "V", ln.read_families("upos"))
    S1 = ln.initial_covariance(g, st, "families", "upos")
    for x in S1:
        assert np.all(np.linalg.eigvalsh(x) > 0)
    assert c(st, S1, "L'_VERB --> Y_NOUN L_VERB", "L'_AUX --> Y_NOUN L_AUX", "tie:verb:left") == 0.5
    assert c(st, S1, "L'_VERB --> Y_NOUN L_VERB", "L'_AUX --> Y_VERB L_AUX", "tie:verb:left") == 0


def rule_cov(pk, st, Ss, r1, r2, name=None):
    """Sigma entry between rules r1, r2 in the expert (``name``, or the one covering both)."""
    flat = list(pk.rows.ravel())
    t1, t2 = flat.index(r1), flat.index(r2)
    for gr, S in zip(st.groups, Ss):
        for e, j in enumerate(gr.members):
            pos = list(gr.flat[e][gr.mask[e]])
            if t1 in pos and t2 in pos and (name is None or st.experts[j][0] == name):
                return S[e, pos.index(t1), pos.index(t2)]
    raise AssertionError("no expert covers both rules")


@pytest.mark.parametrize("tied", [False, True])
def test_save_load_roundtrip(tmp_path, tied):
    g, est, a, rng = make("dmv", tied=tied)
    randomise(a, rng)
    p = tmp_path / "ln.txt"
    a.save(str(p))
    text = p.read_text()
    assert "# multinomial S\n" in text and "\nmu " in text and "\ncov " in text
    assert ("# expert tie:x:left: L'_a L'_b\n" in text) == tied
    experts = ln.load_ln(str(p))
    assert {n for n, *_ in experts} == {n for n, _ in a.st.experts}
    st, mu, S = ln.pack_ln(g, experts)
    assert st.experts == a.st.experts
    for x, y in zip(mu + S, a.mu + a.Sigma):
        np.testing.assert_array_equal(x, y)
    # as an initialiser: the structure comes with the file
    c = SimpleNamespace(iterations=1, tolerance=0, ln_init=str(p))
    b = ln.LogisticNormal(g, est, None, g.weights, c)
    assert b.st.experts == a.st.experts
    np.testing.assert_array_equal(b.weights(), a.weights())


def test_load_errors_name_the_line(tmp_path):
    g, _, a, _ = make("dmv", tied=True)
    p = tmp_path / "ln.txt"
    a.save(str(p))
    lines = p.read_text().splitlines(keepends=True)
    i = next(i for i, l in enumerate(lines) if l.startswith("# expert"))
    bad = lines[:i + 1] + [lines[i + 1].replace("mu ", "mu x", 1)] + lines[i + 2:]
    p.write_text("".join(bad))
    with pytest.raises(InputError, match=rf"ln.txt:{i + 2}: not a number"):
        ln.load_ln(str(p))


@pytest.mark.parametrize("warm,tied,mstep", [(False, False, "plain"), (True, False, "plain"), (True, True, "plain"),
                                             (False, False, "newton"), (True, False, "newton"), (True, True, "newton")])
def test_checkpoint_resume_is_bit_identical(tmp_path, warm, tied, mstep):
    ck = str(tmp_path / "ck.npz")
    _, _, a, rng = make("dmv", ln_warm=warm, tied=tied, ln_mstep=mstep)
    a.iterations = 4
    full = train(a, rng)
    _, _, b, rng = make("dmv", ln_warm=warm, tied=tied, ln_mstep=mstep)
    b.iterations = 2
    train(b, rng, checkpoint=ck, meta={"algorithm": "ln"})
    _, _, c, rng = make("dmv", ln_warm=warm, tied=tied, ln_mstep=mstep)
    c.iterations = 4
    resumed = train(c, rng, checkpoint=ck, resume=True, meta={"algorithm": "ln"})
    assert [s.objective for s in resumed] == [s.objective for s in full]
    # the first run's "reached the cap of 2 iterations" is not left on the row the resumed run went on from
    assert [s.extra.get("stopped") for s in resumed] == [s.extra.get("stopped") for s in full]
    for x, y in zip(c.mu + c.Sigma, a.mu + a.Sigma):
        np.testing.assert_array_equal(x, y)


# ----------------------------------------------------------------------------- untied warm-up (--tie-warmup)

@pytest.mark.parametrize("model,warm,cov", [(1, False, "identity"), (1, True, "families"), (2, False, "identity")])
def test_warmup_switch_keeps_the_decoding_distribution(model, warm, cov):
    """At the switch every expert's segment gets the current mean m_k, so
    softmax(m_k) is unchanged; own experts keep their Sigma, shared experts
    start from --cov; warm variational parameters keep m~ and v~."""
    _, _, a, _ = make("dmv", model=model, tied=True, tie_warmup=2, ln_warm=warm, ln_cov=cov, families=FAM)
    assert a.st.is_plain and a._tied is not None and not a._tied.is_plain
    a.iterations = 5
    a.step()
    a.step()
    assert a.st.is_plain and not a.get_state()["switched"]
    plain, w0, m0 = a.st, a.weights(), a.natural_mean()
    S0 = {plain.experts[j][0]: S[e] for gr, S in zip(plain.groups, a.Sigma) for e, j in enumerate(gr.members)}
    if warm:
        vm0, vv0 = plain.combine(a._vmu), plain.combine(a._vs2, 2)
    a._maybe_switch()
    assert a.st is a._tied and a.get_state()["switched"]
    np.testing.assert_allclose(a.natural_mean(), m0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.weights(), w0, rtol=0, atol=1e-12)
    init = ln.initial_covariance(a.g, a.st, cov, FAM)
    for gi, gr in enumerate(a.st.groups):
        for e, j in enumerate(gr.members):
            name, ks = a.st.experts[j]
            want = S0[name] if len(ks) == 1 else init[gi][e]
            np.testing.assert_array_equal(a.Sigma[gi][e], want)
    if warm:
        np.testing.assert_allclose(a.st.combine(a._vmu), vm0, atol=1e-12)
        np.testing.assert_allclose(a.st.combine(a._vs2, 2), vv0, rtol=1e-12)
    s = a.step()                       # the tied structure trains on
    assert s.step == 3 and np.isfinite(s.objective)


def test_warmup_run_completes_with_a_finite_bound():
    _, _, a, rng = make("dmv", tied=True, tie_warmup=2)
    a.iterations = 5
    trace = train(a, rng)
    assert len(trace) == 5 and all(np.isfinite(s.objective) for s in trace)
    assert a.st is a._tied and sum(len(ks) > 1 for _, ks in a.st.experts) == 6
    # a plain run that converges within the warm-up switches at once instead of stopping
    _, _, b, rng = make("dmv", tied=True, tie_warmup=50)
    b.iterations, b.tolerance = 60, 0.03
    trace = train(b, rng)
    assert b.st is b._tied and len(trace) < 60


@pytest.mark.parametrize("stop,warm", [(1, False), (2, False), (3, False), (2, True), (3, True)])
def test_resume_across_the_warmup_switch_is_bit_identical(tmp_path, stop, warm):
    """Checkpoints before the switch (1), at it (2: still plain, the switch
    comes with step 3) and after it (3) all resume bit-identically."""
    ck = str(tmp_path / "ck.npz")
    _, _, a, rng = make("dmv", tied=True, tie_warmup=2, ln_warm=warm)
    a.iterations = 5
    full = train(a, rng)
    _, _, b, rng = make("dmv", tied=True, tie_warmup=2, ln_warm=warm)
    b.iterations = stop
    train(b, rng, checkpoint=ck, meta={"algorithm": "ln"})
    _, _, c, rng = make("dmv", tied=True, tie_warmup=2, ln_warm=warm)
    c.iterations = 5
    resumed = train(c, rng, checkpoint=ck, resume=True, meta={"algorithm": "ln"})
    assert [s.objective for s in resumed] == [s.objective for s in full]
    assert c.st is c._tied
    for x, y in zip(c.mu + c.Sigma, a.mu + a.Sigma):
        np.testing.assert_array_equal(x, y)
    # a run without the warm-up cannot take a checkpoint from after the switch
    if stop == 3:
        _, _, d, rng = make("dmv", tied=True)
        with pytest.raises(InputError, match="after the --tie-warmup switch"):
            train(d, rng, checkpoint=ck, resume=True, meta={"algorithm": "ln"})


def test_optimise_mu_does_not_depend_on_the_memory_layout_of_its_start():
    """Regression: an F-ordered starting point was returned unchanged (the result
    was written through a reshape of a non-C-contiguous copy)."""
    rng = np.random.default_rng(3)
    B, E, L = 4, 2, 3
    mask = np.ones((E, L), dtype=bool)
    a = rng.uniform(0, 3, (B, E, L))
    b = rng.uniform(0.1, 2, (B, E, L))
    w = np.ones((E, L))
    mu = np.zeros((E, L))
    P = np.broadcast_to(np.eye(L), (E, L, L)).copy()
    x_c = np.zeros((B, E, L))
    x_f = np.asfortranarray(x_c)
    got_c = ln.optimise_mu(mask, a, b, w, x_c, mu, P)
    got_f = ln.optimise_mu(mask, a, b, w, x_f, mu, P)
    assert not np.allclose(got_c, 0.0)
    np.testing.assert_array_equal(got_c, got_f)


# ----------------------------------------------------------------------------- size-1 multinomials, --ln-mstep newton

def test_size_one_multinomial_is_exact():
    """TOP --> ROOT added above a CNF grammar: a size-1 multinomial (theta = 1).  Its rule
    gets psi~ = 0 and q(eta) = prior, so the bound of every sentence is the grammar's
    without it, and its mu and Sigma never move."""
    from grind.grammars.grammar import Grammar
    rng = np.random.default_rng(4)
    vocab = ["a", "b", "c"]
    sents = corpus(rng, vocab, 6)
    g = cnf_grammar(vocab, 2, 2)
    g2 = Grammar(list(g.rules) + [("TOP", ("ROOT",))], np.ones(len(g) + 1), "TOP")
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    runs = []
    for gr_, th in ((g, theta0), (g2, np.append(theta0, 1.0))):
        c = SimpleNamespace(iterations=3, tolerance=0, ln_warm=True)
        runs.append(ln.LogisticNormal(gr_, ShardedEstep(make_parser(gr_, sents)), None, th, c))
    a, b = runs
    k = b.pk.lhs.index("TOP")
    gi, e = next((gi, e) for gi, gr in enumerate(b.st.groups) for e, j in enumerate(gr.members)
                 if b.st.experts[j][1] == (k,))
    mu0, S0 = b.mu[gi][e].copy(), b.Sigma[gi][e].copy()
    for _ in range(3):
        sa, sb = a.step(), b.step()
        np.testing.assert_allclose(sb.objective, sa.objective, rtol=1e-10)
        np.testing.assert_array_equal(b.mu[gi][e], mu0)
        np.testing.assert_array_equal(b.Sigma[gi][e], S0)
    np.testing.assert_allclose(b.weights()[:len(g)], a.weights(), rtol=1e-9)
    assert b.weights()[len(g)] == 1.0
    # per sentence, and the E-step's q(eta) of the size-1 coordinate is the prior
    ia = np.arange(len(sents))
    *_, fa = a.e_step(a._io_sentences(ia), len(ia), a._prior_terms())
    muts, s2s, *_, fb = b.e_step(b._io_sentences(ia), len(ia), b._prior_terms())
    np.testing.assert_allclose(fb, fa, rtol=1e-10)
    np.testing.assert_array_equal(muts[gi][:, e, 0], b.mu[gi][e, 0])
    np.testing.assert_allclose(s2s[gi][:, e, 0], b.Sigma[gi][e, 0, 0], rtol=1e-12)


def test_size_one_coordinates_in_a_shared_expert_stay_at_the_prior():
    """An expert over a size-1 multinomial and a larger one (structure file): the
    size-1 coordinate keeps its mean and variance, and its covariances are 0."""
    from grind.infer.sln import Structure
    g, est, a, rng = make("dmv")
    pk = a.pk
    y = next(k for k in range(pk.K) if pk.sizes[k] == 1)
    big = next(k for k in range(pk.K) if pk.sizes[k] > 2)
    a.st = Structure(pk, [(n, (k,)) for k, n in enumerate(pk.lhs)] + [("mix", (y, big))])
    a.mu = [np.where(gr.mask, 0.3, 0.0) for gr in a.st.groups]
    a.Sigma = ln.initial_covariance(g, a.st, "identity")
    gi = next(i for i, gr in enumerate(a.st.groups) if a.st.experts[gr.members[0]][0] == "mix")
    a.Sigma[gi][0, 0, 1:3] = a.Sigma[gi][0, 1:3, 0] = 0.3        # coupled at the start
    mu0 = a.mu[gi][0, 0]
    b0 = [a.step().objective for _ in range(3)]
    assert np.all(np.isfinite(b0))
    assert a.mu[gi][0, 0] == mu0 and a.Sigma[gi][0, 0, 0] == 1.0
    assert np.all(a.Sigma[gi][0, 0, 1:] == 0) and np.all(a.Sigma[gi][0, 1:, 0] == 0)


def _bounds(mstep, iterations, n=20, **cfg):
    _, _, a, rng = make("dmv", n=n, ln_mstep=mstep, **cfg)
    a.iterations = iterations
    return np.array([s.objective for s in train(a, rng)])


def test_newton_mstep_is_at_least_twice_as_fast():
    T = 20
    plain = _bounds("plain", T)
    newton = _bounds("newton", T // 2)
    assert newton[-1] >= plain[-1], (plain, newton)


@pytest.mark.parametrize("model", [1, 2])
@pytest.mark.parametrize("kind,tied", [("dmv", False), ("cnf", False), ("dmv", True)])
def test_newton_mstep_warm_bound_never_decreases(kind, tied, model):
    _, _, a, rng = make(kind, n=8, model=model, ln_warm=True, ln_mstep="newton", tied=tied)
    a.iterations = 15
    tr = train(a, rng)
    b = np.array([s.objective for s in tr])
    assert np.all(np.isfinite(b)) and len(b) == 15
    assert np.all(np.diff(b) >= -1e-7 * np.abs(b[:-1])), b
    assert any(s.extra["mstep_scale"] > 0 for s in tr)        # the Newton step is taken


def test_unknown_mstep_is_an_input_error():
    with pytest.raises(InputError, match="M-step"):
        make("dmv", ln_mstep="fast")


def test_optimise_mu_sets_blocks_without_data_to_mu_and_broadcasts():
    """A block with a = b = 0 (no data this cycle) maximises the prior term alone: x = mu
    exactly, wherever x0 starts (a warm start); a and b given per expert broadcast over
    the posteriors as if given whole."""
    rng = np.random.default_rng(3)
    B, E, L = 4, 2, 3
    mask = np.ones((E, L), dtype=bool)
    a, b = rng.uniform(0, 3, (E, L)), rng.uniform(0.1, 2, (E, L))
    a[1] = b[1] = 0
    w, mu = np.ones((E, L)), rng.standard_normal((E, L))
    A = rng.standard_normal((E, L, L))
    P = A @ np.swapaxes(A, 1, 2) + np.eye(L)
    x0 = rng.standard_normal((B, E, L))
    full = ln.optimise_mu(mask, np.broadcast_to(a, (B, E, L)), np.broadcast_to(b, (B, E, L)), w, x0, mu, P)
    np.testing.assert_array_equal(ln.optimise_mu(mask, a, b, w, x0, mu, P), full)
    np.testing.assert_array_equal(full[:, 1], np.broadcast_to(mu[1], (B, L)))
    assert not np.allclose(full[:, 0], mu[0])


def test_a_prior_beyond_the_linear_zeta_range_is_an_error_not_a_wrong_bound():
    """mu~ + sigma~^2/2 above 700 was clipped (a positive 'lower bound', +17,242 on a test run), and a
    multinomial whose coordinates all fell below -745 got zeta~ = 0 and its sentences silently left the
    bound (LN audit); softmax is shift-invariant, so the message says to recentre."""
    mask = np.array([[True, True, False], [True, True, True]])
    s2 = np.ones((2, 3))
    ok = ln.closed_zeta(mask, np.array([[650.0, 649.0, 0.0], [-700.0, -701.0, -702.0]]), s2)
    assert np.all(np.isfinite(ok)) and np.all(ok > 0)
    with pytest.raises(NumericalError, match=r"reaches 800.5 in 1 multinomial\(s\), above 700"):
        ln.closed_zeta(mask, np.array([[800.0, 0.0, 0.0], [0.0, 0.0, 0.0]]), s2)
    with pytest.raises(NumericalError, match=r"of 1 multinomial\(s\) is below -745"):
        ln.closed_zeta(mask, np.array([[0.0, 0.0, 0.0], [-800.0, -900.0, -760.0]]), s2)


@pytest.mark.parametrize("tied", [False, True], ids=["plain", "tied"])
def test_model1_on_remote_shards_is_the_single_process_run_bit_for_bit(monkeypatch, tied):
    """Model I through ``map_shards`` (what ``--cluster`` runs: the shards' posteriors summed
    where they ran, added in shard order) gives mu, Sigma and the bound of the local run,
    bit for bit, with shards of 6 sentences (the compiled E-step's, not the E-step's 4)."""
    monkeypatch.setattr(ln, "SHARD", 4)
    monkeypatch.setattr(ln, "COMPILED_SHARD", 6)
    rng = np.random.default_rng(3)
    sents = corpus(rng, ["a", "b", "c"], 11)
    g = dmv_grammar(sents)
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    extra = dict(tie="A", families=FAM, tie_warmup=1) if tied else {}
    runs = []
    for est in (ShardedEstep(make_parser(g, sents), shard=4), remote_shards(lambda: make_parser(g, sents), 4)):
        a = ln.LogisticNormal(g, est, None, theta0, SimpleNamespace(iterations=3, tolerance=0, model=1,
                                                                     ln_cycles=2, **extra))
        steps = [a.step() for _ in range(3)]
        runs.append((a, steps, est))
    (a, sa, _), (b, sb, remote) = runs
    assert b.remote and remote.calls == 3 and len(remote.shards()) == 3
    assert [s.objective for s in sa] == [s.objective for s in sb]
    assert [s.extra["parsed"] for s in sa] == [s.extra["parsed"] for s in sb] == [11] * 3
    for x, y in zip(a.mu + a.Sigma, b.mu + b.Sigma):
        assert x.tobytes() == y.tobytes()


@pytest.mark.parametrize("cfg", [dict(ln_warm=True), dict(ln_mstep="newton")])
def test_model1_on_remote_shards_refuses_per_sentence_state(cfg):
    rng = np.random.default_rng(0)
    sents = corpus(rng, ["a", "b", "c"], 4)
    g = dmv_grammar(sents)
    with pytest.raises(InputError, match="model I on a cluster needs cold starts and the plain M-step"):
        ln.LogisticNormal(g, remote_shards(lambda: make_parser(g, sents), 256), None, g.weights,
                          SimpleNamespace(iterations=1, tolerance=0, model=1, **cfg))


def test_a_grammar_too_wide_for_the_machine_is_refused_before_any_work(monkeypatch):
    """ln_bytes: Sigma and its inverse per expert, plus the Newton step's L x L matrix per
    (sentence, expert) of a shard; above the machine's memory an InputError that names the width
    (a morphology grammar's 6,752-wide Stem asked numpy for 261 GiB: 'out of memory')."""
    groups = [SimpleNamespace(E=3, L=10), SimpleNamespace(E=2, L=4)]
    st = SimpleNamespace(groups=groups)
    assert ln.ln_bytes(st, 5) == 8 * (2 * (300 + 32) + 5 * 300)
    assert ln.ln_bytes(st, 10_000) == 8 * (2 * 332 + ln.SHARD * 300)
    rng = np.random.default_rng(0)
    sents = corpus(rng, ["a", "b", "c"], 4)
    g = dmv_grammar(sents)
    cfg = SimpleNamespace(iterations=1, tolerance=0)
    ln.LogisticNormal(g, ShardedEstep(make_parser(g, sents)), None, g.weights, cfg)       # fits
    monkeypatch.setattr(ln, "physical_memory", lambda: 1000)
    with pytest.raises(InputError, match=r"--algo ln on this grammar needs about .* GiB .* widest multinomials "
                                         r"have \d+ rules.*train this one with vb"):
        ln.LogisticNormal(g, ShardedEstep(make_parser(g, sents)), None, g.weights, cfg)
