"""The compiled logistic-normal E-step (grind.infer.ln_estep, csrc/ln.pyx) against the numpy one
(LogisticNormal.e_step, its solves run to a tight tolerance): the same q(eta), log Z, bound and
M-step sums per sentence, on DMV and CNF grammars, plain and tied structures, random priors; the
per-sentence local parses of the chart kernels against their whole-grammar parses; the kernel's exp
and its mu~ block solve against exact Newton."""
from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

from grind.grammars.dmv import dmv_grammar
from grind.infer import ln, ln_estep
from grind.kernels.contract import ChartParser
from grind.kernels.dmv import DMVParser
from grind.infer.training import ShardedEstep
from test_ln import make, randomise

FAM = {"a": "x", "b": "x", "c": "y"}


def tight(monkeypatch):
    """The numpy E-step's solves to a gradient of 1e-13 (its default stops at 1e-9)."""
    om, osg = ln.optimise_mu, ln.optimise_sigma
    monkeypatch.setattr(ln, "optimise_mu", functools.partial(om, gtol=1e-13))
    monkeypatch.setattr(ln, "optimise_sigma", lambda *a, **k: osg(*a, tol=1e-14))


@pytest.mark.parametrize("kind,tied,cycles", [("dmv", False, 5), ("cnf", False, 3), ("dmv", True, 5),
                                              ("dmv", True, 1)])
def test_compiled_estep_is_the_numpy_estep(kind, tied, cycles, monkeypatch):
    tight(monkeypatch)
    g, est, a, rng = make(kind, n=9, tied=tied, ln_cov="families", families=FAM, seed=3)
    randomise(a, rng)
    idx = np.arange(len(est.parser.sentences))
    prior = a._prior_terms()
    trace_np = []
    muts, s2s, _, _, logz, bound = a.e_step(a._io_sentences(idx), len(idx), prior, cycles=cycles, trace=trace_np)
    pv = ln_estep.Prior(a.st, ln.effective_sigma(a.st, a.Sigma), prior)
    lay = ln_estep.Layout(a.parser, idx, a.st)
    trace = []
    sh, logz2, bound2 = ln_estep.run_shard(a.parser, lay, pv, cycles, trace=trace)
    np.testing.assert_allclose(logz2, logz, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(bound2, bound, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.array(trace), np.array(trace_np), rtol=1e-10, atol=1e-10)
    vm = [np.zeros_like(x) for x in muts]
    vs = [np.zeros_like(x) for x in s2s]
    ln_estep.to_dense(lay, sh, pv, vm, vs, 0)
    for gr, x, y, u, v in zip(a.st.groups, muts, vm, s2s, vs):
        np.testing.assert_allclose(y[:, gr.mask], x[:, gr.mask], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(v[:, gr.mask], u[:, gr.mask], rtol=1e-9, atol=1e-9)
    ok = np.isfinite(logz)
    sums, n_un, ys = ln_estep.shard_sums(lay, sh, ok, pv)
    S1, S2 = [a.copy() for a, _, _ in sums], [b.copy() for _, b, _ in sums]
    for s2, (_, _, d) in zip(S2, sums):
        i = np.arange(s2.shape[-1])
        s2[:, i, i] += d
    ln_estep.finish_sums(S1, S2, n_un, ys, pv)
    for (a, b, d), x, y in zip(ln._shard_sums(muts, s2s, ok), S1, S2):
        i = np.arange(b.shape[-1])
        b = b.copy()
        b[:, i, i] += d
        np.testing.assert_allclose(x, a, rtol=1e-9, atol=1e-8)
        np.testing.assert_allclose(y, b, rtol=1e-9, atol=1e-8)
    # the way back: a shard started from the dense q(eta) holds the same block values
    x0, s0 = ln_estep.from_dense(lay, vm, vs, 0)
    np.testing.assert_array_equal(x0, sh.x)
    np.testing.assert_array_equal(s0, sh.s2)


@pytest.mark.parametrize("tied", [False, True])
def test_compiled_estep_raises_the_bound_every_cycle(tied):
    _, est, a, rng = make("dmv", n=8, tied=tied, families=FAM, seed=5)
    randomise(a, rng)
    idx = np.arange(len(est.parser.sentences))
    pv = ln_estep.Prior(a.st, ln.effective_sigma(a.st, a.Sigma), a._prior_terms())
    trace = []
    ln_estep.run_shard(a.parser, ln_estep.Layout(a.parser, idx, a.st), pv, 6, trace=trace)
    b = np.array(trace)
    assert np.all(np.isfinite(b))
    assert np.all(np.diff(b, axis=0) >= -1e-9 * np.abs(b[:-1])), b
    assert np.all(b[-1] > b[0] + 1e-6)


@pytest.mark.parametrize("cov", ["identity", "families"])
def test_plain_rounds_are_the_general_rounds(cov):
    """A plain structure's rounds (Shard._update_plain: lane by lane, exps kept between rounds,
    m~ and v~ made only when read; the counts kept in the lane slots) make what the general rounds
    make, from the prior, from a warm start and after counts written into F, to rounding."""
    import copy
    _, est, a, rng = make("dmv", n=30, ln_cov=cov, families=FAM, seed=11)
    randomise(a, rng)
    idx = np.arange(len(est.parser.sentences))
    pv = ln_estep.Prior(a.st, ln.effective_sigma(a.st, a.Sigma), a._prior_terms())
    lay = ln_estep.Layout(a.parser, idx, a.st)
    assert lay.arrays.get("plain")
    gen = copy.copy(lay)                      # the same blocks and chunks, without the flag
    gen.arrays = {k: v for k, v in lay.arrays.items() if k not in ("plain", "_slots")}
    gen.shard = None
    runs = []
    for L in (lay, gen):
        trace = []
        sh, logz, b = ln_estep.run_shard(a.parser, L, pv, 4, trace=trace)
        lw = np.empty(sh.NL)
        sh.weights(lw)
        warm = ln_estep.new_shard(L, pv, (sh.x + 0.1, sh.s2 * 1.5))
        warm.F[:] = sh.F
        assert warm.update(2)[0] == 0
        got = [np.array(v) for v in (logz, b, trace, sh.x, sh.s2, sh.y, sh.m, sh.v, sh.zeta, lw, sh.kl(),
                                     warm.x, warm.s2, warm.m, warm.zeta, warm.data_term())]
        sh.F[:] *= 1.5                        # counts written through the view: the next round reads them
        assert sh.update(1)[0] == 0
        runs.append(got + [sh.x, sh.s2, np.array(sh.zeta)])
    for got, want in zip(*runs):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_step_uses_the_compiled_estep_for_model1_newton_only():
    assert make("dmv")[2].compiled
    assert not make("dmv", ln_optimizer="lbfgs")[2].compiled
    assert not make("dmv", model=2)[2].compiled


def test_local_parses_are_the_whole_grammar_parses():
    rng = np.random.default_rng(0)
    sents = [list(rng.choice(list("abcd"), size=rng.integers(1, 7))) for _ in range(20)] + [["a", "zz"]]
    g = dmv_grammar(sents[:-1])
    p = DMVParser(g, sents)
    idx = np.arange(len(sents))
    W = np.exp(rng.standard_normal((len(sents), len(g))))
    for local in (p.local_tables(idx), ChartParser.local_tables(p, idx)):
        off = local.off
        lw = np.concatenate([W[k, local.rules[off[k]:off[k + 1]]] for k in range(len(sents))])
        counts, logz = p.inside_outside_local(local, lw)
        for k in range(len(sents)):
            c, z = p.inside_outside(W[k], [k])
            r = local.rules[off[k]:off[k + 1]]
            assert np.array_equal(c[r], counts[off[k]:off[k + 1]]) and z[0] == logz[k]
            assert not c[np.setdiff1d(np.arange(len(g)), r)].any()
    assert logz[-1] == -np.inf and p.local_tables([len(sents) - 1]).rules.size == 0


def test_kernel_exp_is_exp():
    from grind.kernels import _ln
    x = np.concatenate([np.linspace(-750, 715, 20001), [-np.inf, np.inf, 0.0, -0.0, 1e-300, 709.78, -745.1]])
    got = _ln.kernel_exp(x)
    with np.errstate(over="ignore"):
        want = np.exp(x)
    fin = np.isfinite(want) & (want > 1e-300)
    np.testing.assert_allclose(got[fin], want[fin], rtol=4e-16)
    assert np.array_equal(got[~fin] == 0, want[~fin] == 0) and np.isinf(got[np.isinf(want)]).all()
    assert np.isnan(_ln.kernel_exp(np.array([np.nan])))[0]
    z = np.linspace(-1 / 64, 1 / 64, 4001)              # the polynomial the late sigma~^2 steps use
    np.testing.assert_allclose(_ln.kernel_exp(z, small=True), np.exp(z), rtol=3e-16)


def _exact_mu(a, b, w, Q, mu, x):
    """The maximiser of sum_i [a_i x_i - b_i exp(w_i x_i)] - 1/2 (x - mu)^T Q (x - mu) by exact Newton."""
    for _ in range(100):
        e = b * np.exp(w * x)
        g = a - w * e - Q @ (x - mu)
        if np.abs(g).max() < 1e-14:
            break
        x = x + np.linalg.solve(Q + np.diag(w * w * e), g)
    return x


@pytest.mark.parametrize("scale,woodbury", [(0.002, False), (3.0, True)], ids=["small-curvature", "large-curvature"])
def test_mu_block_solve_finds_the_maximiser(scale, woodbury):
    """The kernel's mu~ solve of a 20-coordinate block (the chord steps with the Woodbury set A of
    the coordinates whose curvature is a sizeable share of the prior's) reaches the maximiser and
    keeps y = Q (x - mu) exact, with A empty when the data's curvature is small and not when it
    is large; lanes started at the prior and away from it."""
    from grind.kernels import _ln
    rng = np.random.default_rng(7)
    n = 20
    R = rng.normal(size=(n, n))
    S = R @ R.T / n + 0.3 * np.eye(n)
    Q = np.linalg.inv(S)
    Q = (Q + Q.T) / 2
    mu = rng.normal(size=n)
    w = np.where(np.arange(n) % 3 == 0, 0.5, 1.0)
    a = np.where(rng.random((n, 8)) < 0.3, rng.integers(1, 4, size=(n, 8)), 0).astype(float) * scale
    b = scale * rng.uniform(0.2, 1.0, size=(n, 8))
    x = mu[:, None] + np.where(np.arange(8) < 4, 0.0, rng.normal(scale=0.5, size=(n, 8)))
    y = Q @ (x - mu[:, None])
    steps, m = _ln.mu_solve(a, b, w, S, Q, mu, x, y)
    assert steps > 0 and (m > 0) == woodbury, m
    for lane in range(8):
        want = _exact_mu(a[:, lane], b[:, lane], w, Q, mu, mu.copy())
        np.testing.assert_allclose(x[:, lane], want, rtol=0, atol=1e-10)
        np.testing.assert_allclose(y[:, lane], Q @ (x[:, lane] - mu), rtol=0, atol=1e-10)


def test_spd_inverse_is_the_inverse_and_log_determinant():
    from grind.kernels import _ln
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 6, 6))
    S = A @ A.transpose(0, 2, 1) + 0.1 * np.eye(6)
    Q, ld = _ln.spd_inverse(S)
    np.testing.assert_allclose(Q, np.linalg.inv(S), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ld, np.linalg.slogdet(S)[1], rtol=1e-12)
    assert np.array_equal(Q, np.swapaxes(Q, 1, 2))
    S[1] = -np.eye(6)                     # positive determinant, not positive definite
    assert _ln.spd_inverse(S) is None


@pytest.mark.parametrize("extra", [{}, dict(ln_warm=True, ln_mstep="newton"), dict(tie="A", ln_warm=True)],
                         ids=["cold", "warm-newton", "tied-warm"])
def test_identical_sentences_computed_once_give_the_same_run(extra, monkeypatch):
    """Model I's compiled E-step computes each distinct sentence once, its bound, M-step sums,
    parsed count and the Newton M-step's data weighted by its copies: the same bounds and
    grammar (to 1e-10) as computing every sentence; with the weights dropped they differ."""
    monkeypatch.setattr(ln, "SHARD", 8)              # several shards, some of copies only
    monkeypatch.setattr(ln, "COMPILED_SHARD", 8)
    rng = np.random.default_rng(5)
    sents = [list(s) for s in rng.choice(["a", "b", "c"], size=(30, 2))]      # 30 sentences, 9 distinct
    g = dmv_grammar(sents)
    est = ShardedEstep(DMVParser(g, sents))
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))

    def run(dedup, drop=False):
        a = ln.LogisticNormal(g, est, None, theta0, SimpleNamespace(iterations=4, tolerance=0, model=1,
                                                                     families=FAM, **extra))
        a.dedup = dedup
        if drop:
            units = a._units
            monkeypatch.setattr(a, "_units", lambda: (units()[0], None))
        steps = [a.step() for _ in range(4)]
        return a, [s.objective for s in steps], [s.extra["parsed"] for s in steps]

    a, bounds, parsed = run(True)
    assert len(a._units()[0]) == 9 and a._units()[1].sum() == 30
    b, bounds0, parsed0 = run(False)
    assert len(b._units()[0]) == 30
    np.testing.assert_allclose(bounds, bounds0, rtol=1e-10)
    np.testing.assert_allclose(a.weights(), b.weights(), rtol=1e-10, atol=1e-12)
    assert parsed == parsed0 == [30] * 4
    if a.warm:                                       # the kept state has every sentence's row
        for x, y in zip(a._vmu + a._vs2, b._vmu + b._vs2):
            np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-10)
    _, dropped, parsed1 = run(True, drop=True)
    assert parsed1 == [9] * 4 and abs(dropped[0] - bounds0[0]) > 1.0
