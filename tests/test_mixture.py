"""Posterior-mixture constraints over a base model (Cohen & Smith 2009):
the mixture parser against its component parsers, beta_0 = 1 against the
bare base algorithms, the bound of Proposition 1 against the unconstrained
bound, fallback to q_0, the schedules and the CLI options."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import grind, remote_shards, sample_dmv
from grind.infer.constraints import constrained_parser
from grind.grammars.dmv import SLOT, dmv_grammar, dmv_index
from grind.kernels.dmv import DMVParser
from grind.infer.em import EM
from grind.errors import InputError
from grind.infer.ln import LogisticNormal, exact_psi
from grind.infer.mixture import FIXED_COEF, Mixture, MixtureParser, schedule_name
from grind.infer.training import ShardedEstep, train
from grind.infer.vb import VB

BASES = {"em": EM, "vb": VB, "ln": LogisticNormal}


def corpus(seed=0, n=24):
    rng = np.random.default_rng(seed)
    sents = [list(rng.choice(["NN", "VB", "DT", "JJ"], size=k)) for k in rng.integers(2, 7, n)]
    sents += [["DT", "NN", "NN", "NN", "VB"], ["NN", "NN", "NN"]]      # LC+NS: no tree at all
    return sents


def random_weights(g, rng):
    return g.normalize(rng.uniform(0.05, 1.0, len(g)))


def cfg(**kw):
    base = dict(iterations=4, tolerance=0.0, ln_cycles=2)
    base.update(kw)
    return SimpleNamespace(**base)


def make(sents, **kw):
    g = dmv_grammar(sents)
    estep = ShardedEstep(DMVParser(g, sents))
    return g, estep, Mixture(g, estep, np.full(len(g), 1.1), g.probabilities(), cfg(**kw), np.random.default_rng(0))


# ---------------------------------------------------------------- the mixture parser

def test_mixture_parser_is_the_beta_weighted_sum_of_its_components():
    rng = np.random.default_rng(1)
    sents = corpus()
    g = dmv_grammar(sents)
    base = DMVParser(g, sents)
    specs = ["RA+VAR+SD", "LC+NS"]
    comps = [constrained_parser(g, sents, s) for s in specs]
    beta = np.array([0.6, 0.3, 0.1])
    mp = MixtureParser(base, list(zip(specs, comps)), beta)
    for _ in range(3):
        w = random_weights(g, rng)
        c0, z0 = base.inside_outside(w)
        want_c, want_z = beta[0] * c0, beta[0] * z0
        miss = []
        for b, p in zip(beta[1:], comps):
            c, z = p.inside_outside(w)
            miss.append(~np.isfinite(z))
            for s in np.flatnonzero(~np.isfinite(z)):          # no tree in Y_k: q_k = q_0
                c = c + base.inside_outside(w, [s])[0]
                z[s] = z0[s]
            want_c, want_z = want_c + b * c, want_z + b * z
        got_c, got_z = mp.inside_outside(w)
        assert np.allclose(got_c, want_c, rtol=1e-12, atol=1e-12)
        assert np.allclose(got_z, want_z, rtol=1e-12, atol=1e-12)
        assert np.array_equal(mp.fallback, np.array(miss)) and mp.fallback[1, -2:].all()
        # the LN calling pattern, one sentence at a time, records the same log Z_k
        rec = mp.logz_k.copy()
        per = [mp.inside_outside(w, [s]) for s in range(len(sents))]
        assert np.allclose(sum(c for c, _ in per), got_c, rtol=1e-12, atol=1e-12)
        assert np.allclose(np.concatenate([z for _, z in per]), got_z, rtol=1e-12, atol=1e-12)
        assert np.array_equal(mp.logz_k, rec)
        L, fb = mp.latest()
        assert np.allclose(L, rec.sum(axis=1)) and list(fb) == [int(x.sum()) for x in miss]
        # Proposition 1 per sentence: never above the unconstrained log Z
        assert np.all(got_z <= z0 + 1e-12)


def test_mixture_parser_delegates_decoding_and_the_rest():
    sents = corpus()
    g = dmv_grammar(sents)
    base = DMVParser(g, sents)
    mp = MixtureParser(base, [("RA", constrained_parser(g, sents, "RA"))], [0.5, 0.5])
    w = g.probabilities()
    assert mp.sentences is base.sentences and mp.failures is base.failures
    assert np.array_equal(mp.arc_off, base.arc_off)
    for a, b in zip(mp.viterbi_heads(w)[0], base.viterbi_heads(w)[0]):
        assert np.array_equal(a, b)
    assert np.array_equal(mp._idx(None), base._idx(None))



def test_mixture_parser_reads_the_base_rules_and_parses_with_them_alone():
    """A constrained copy's trees are the base's: the mixture reads each sentence's base rules, and
    its counts and log Z with every other rule at weight 0 are those with all rules."""
    sents = corpus(seed=4, n=8)
    g = dmv_grammar(sents)
    base = DMVParser(g, sents)
    mp = MixtureParser(base, [("RA", constrained_parser(g, sents, "RA+VAR"))], [0.6, 0.4])
    idx = np.arange(len(sents))
    got, want = mp.local_tables(idx), base.local_tables(idx)
    assert np.array_equal(got.off, want.off) and np.array_equal(got.rules, want.rules) and got.tables is None
    w = np.exp(np.random.default_rng(1).standard_normal(len(g)))
    counts, logz = mp.inside_outside_local(got, w[got.rules])
    for k in range(len(sents)):
        c, z = mp.inside_outside(w, [k])
        lo, hi = got.off[k], got.off[k + 1]
        np.testing.assert_allclose(counts[lo:hi], c[got.rules[lo:hi]], rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(logz[k], z[0], rtol=1e-13)
        assert not np.delete(c, got.rules[lo:hi]).any()

# ---------------------------------------------------------------- beta_0 = 1 is the base

@pytest.mark.parametrize("name", ["em", "vb", "ln"])
def test_weight_one_on_meanfield_is_bit_identical_to_the_base(name):
    sents = corpus(seed=2, n=12)
    g, estep, m = make(sents, mix_base=name, mix_constraints="RA+VAR,SD2", mix_coef=[1.0, 0.0, 0.0])
    ref = BASES[name](g, ShardedEstep(DMVParser(g, sents)), np.full(len(g), 1.1), g.probabilities(), cfg(),
                      np.random.default_rng(0))
    if name == "ln":        # every sentence computed, as through the mixture parser (no duplicate_keys)
        ref.dedup = False
    for _ in range(4):
        a, b = m.step(), ref.step()
        assert a.objective == b.objective
        assert np.array_equal(m.weights(), ref.weights())
    assert a.extra["beta_meanfield"] == 1.0 and a.extra["bound"] == a.objective


# ---------------------------------------------------------------- Proposition 1

@pytest.mark.parametrize("name", ["em", "vb"])
def test_bound_never_exceeds_the_unconstrained_bound_under_the_same_weights(name):
    sents = corpus(seed=3)
    g, estep, m = make(sents, mix_base=name, mix_constraints="RA+VAR+SD", mix_schedule="II")
    ref = BASES[name](g, estep, np.full(len(g), 1.1), g.probabilities(), cfg(), np.random.default_rng(0))
    for _ in range(3):
        m.base.set_state(ref.get_state())              # the same parameters ...
        a, b = m.step(), ref.step()                    # ... the same weights in both E-steps
        assert np.isfinite(a.objective) and a.objective <= b.objective + 1e-9
        assert a.extra["beta_meanfield"] == FIXED_COEF["II"]
        # the bound is sum_k beta_k L_k + (the base's prior / KL term)
        assert a.objective - b.objective == pytest.approx(
            sum(a.extra[f"beta_{k}"] * a.extra[f"L_{k}"] for k in m.names) - a.extra["L_meanfield"], abs=1e-8)


def test_ln_bound_is_proposition_1_under_each_sentences_weights():
    sents = corpus(seed=4)
    g, estep, m = make(sents, mix_base="ln", mix_constraints="RA+VAR+SD,NS", mix_coef="0.7,0.2,0.1")
    ln = m.base
    prior = ln._prior_terms()
    idx = np.arange(len(sents))
    muts, s2s, zeta, _F, logz, bound = ln.e_step(ln._io_sentences(idx), len(idx), prior)
    psi = exact_psi(ln.pk, ln.st.combine(muts), ln.st.combine(s2s, 2), zeta)
    # the recorded log Z_k are those under each sentence's own weights exp(psi~_s)
    for s in idx:
        w = ln.pk.pack(np.exp(np.where(ln.pk.mask, psi[s], -np.inf)))
        z = [p.inside_outside(w, [s])[1][0] for p in [m.parser.base] + [q for _, q in m.parser.components]]
        z = [z[0] if not np.isfinite(v) else v for v in z]
        assert np.allclose(m.parser.logz_k[:, s], z, rtol=1e-12)
    mix = m.beta @ m.parser.logz_k
    assert np.allclose(logz, mix)
    z0 = np.array([m.parser.base.inside_outside(ln.pk.pack(np.exp(np.where(ln.pk.mask, psi[s], -np.inf))), [s])[1][0]
                   for s in idx])
    unconstrained = ln._bound(muts, s2s, z0, prior)
    assert np.all(bound <= unconstrained + 1e-9) and np.any(bound < unconstrained - 1e-6)


# ---------------------------------------------------------------- fallback to q_0

@pytest.mark.parametrize("name", ["em", "vb", "ln"])
def test_constraint_with_no_tree_falls_back_and_the_bound_stays_finite(name):
    sents = corpus(seed=5)
    g, estep, m = make(sents, mix_base=name, mix_constraints="LC+NS")
    trace = train(m, np.random.default_rng(0))
    assert len(trace) == 4
    for st in trace:
        assert np.isfinite(st.objective) and st.extra["fallback_LC+NS"] >= 2
        assert st.extra["parsed"] == len(sents)
        assert st.extra["L_LC+NS"] <= st.extra["L_meanfield"]


def test_weights_that_forbid_every_constrained_tree_fall_back():
    # no head may take a left dependent (not-STOP left at valence 0 weighs 0):
    # RA (every parent right of its child) then has no tree of positive weight
    sents = [["DT", "NN", "VB"], ["NN", "VB"], ["VB", "DT", "NN"]]
    g = dmv_grammar(sents)
    ix = dmv_index(g)
    theta = g.probabilities().copy()
    theta[ix.type_rules[:, SLOT["nostopL0"]]] = 0.0
    theta[ix.type_rules[:, SLOT["stopL0"]]] = 1.0
    estep = ShardedEstep(DMVParser(g, sents))
    m = Mixture(g, estep, np.ones(len(g)), theta, cfg(mix_base="em", mix_constraints="RA"))
    assert not np.isfinite(constrained_parser(g, sents, "RA").inside_outside(theta)[1]).any()
    st = m.step()
    assert np.isfinite(st.objective) and st.extra["fallback_RA"] == 3
    assert st.extra["L_RA"] == st.extra["L_meanfield"]


# ---------------------------------------------------------------- schedules and the C-step

def test_schedules():
    assert [schedule_name(s) for s in ("I", "annealed", "ii", "Fixed-0.85", "III", "fixed-0.95", None)] == \
        ["I", "I", "II", "II", "III", "III", "I"]
    with pytest.raises(InputError):
        schedule_name("IV")
    sents = corpus(seed=6)
    _, _, m = make(sents, mix_base="em", mix_constraints="RA", iterations=15)
    b0 = [train(m, np.random.default_rng(0))[t].extra["beta_meanfield"] for t in (0,)]
    assert b0 == [pytest.approx(0.85)]
    _, _, m = make(sents, mix_base="em", mix_constraints="RA", iterations=15)
    got = [st.extra["beta_meanfield"] for st in train(m, np.random.default_rng(0))]
    assert got == pytest.approx([min(0.95, 0.85 + 0.01 * t) for t in range(15)])
    # III: fixed 0.95; with two components the C-step gives the rest to the larger L_k
    _, _, m = make(sents, mix_base="em", mix_constraints="RA,SD2", mix_schedule="III")
    trace = train(m, np.random.default_rng(0))
    for prev, st in zip(trace, trace[1:]):
        assert st.extra["beta_meanfield"] == pytest.approx(0.95)
        best = "RA" if prev.extra["L_RA"] >= prev.extra["L_SD2"] else "SD2"
        assert st.extra[f"beta_{best}"] == pytest.approx(0.05)
    with pytest.raises(InputError):
        make(sents, mix_base="em", mix_start=0.9, mix_end=0.8)
    with pytest.raises(InputError):
        make(sents, mix_base="bogus")


def test_schedule_i_runs_on_while_the_cap_rises_whatever_the_tolerance():
    """Schedule I, cap 0.85 + 0.01 t up to 0.95 (reached at t = 10).  With tolerance 1 the EM
    base calls itself converged from its second step on, but while the cap moves (steps 1..10
    change it) the run is not converged; step 11 is the first after which it stays, so the run
    ends there: 11 steps of the 20 allowed, the last at the full cap 0.95."""
    sents = corpus(seed=6)
    _, _, m = make(sents, mix_base="em", mix_constraints="RA", mix_schedule="I", iterations=20, tolerance=1.0)
    trace = train(m, np.random.default_rng(0))
    assert len(trace) == 11
    assert [st.extra["beta_meanfield"] for st in trace] == pytest.approx([0.85 + 0.01 * t for t in range(11)])
    assert trace[-1].extra["beta_meanfield"] == pytest.approx(0.95)


def test_trace_says_converged_only_where_the_run_stops():
    """An LN base that calls itself converged while the schedule-I cap still
    rises runs on, and its trace row does not say 'converged'."""
    sents = corpus(seed=6, n=8)
    _, _, m = make(sents, mix_base="ln", mix_constraints="RA", mix_schedule="I", iterations=20, tolerance=1.0,
                   ln_cycles=1)
    trace = train(m, np.random.default_rng(0))
    assert len(trace) == 11
    assert [("stopped" in st.extra) for st in trace] == [False] * 10 + [True]


def test_state_round_trip_with_ln_base():
    sents = corpus(seed=7, n=10)
    _, _, m = make(sents, mix_base="ln", mix_constraints="RA+VAR+SD")
    m.step()
    m.step()
    s = m.get_state()
    _, _, m2 = make(sents, mix_base="ln", mix_constraints="RA+VAR+SD")
    m2.set_state(s)
    a, b = m.step(), m2.step()
    assert a.objective == b.objective and np.array_equal(m.weights(), m2.weights())
    assert np.array_equal(m.beta, m2.beta) and m.it == m2.it == 3


def test_ln_model2_does_not_reuse_a_parse_made_under_other_coefficients(monkeypatch):
    """LN model II with one warm cycle reuses the last parse when q(eta) has not
    moved; under a mixture that parse is also a function of beta, which the
    C-step moves between iterations: the run must equal one that never reuses."""
    sents = corpus(seed=7, n=10)

    def run(reuse):
        _, _, m = make(sents, mix_base="ln", mix_constraints="RA+VAR+SD", model=2, ln_warm=True, ln_cycles=1)
        if not reuse:
            monkeypatch.setattr(m.base, "_reusable", lambda init: None)
        return [s.objective for s in train(m, np.random.default_rng(0))], m

    (b1, m1), (b0, m0) = run(True), run(False)
    assert b1 == b0
    np.testing.assert_array_equal(m1.weights(), m0.weights())


@pytest.mark.parametrize("base, extra", [("em", {}), ("vb", {}), ("ln", dict(model=1)), ("ln", dict(model=2))],
                         ids=["em", "vb", "ln-model-1", "ln-model-2"])
def test_mixture_on_remote_shards_is_the_single_process_run_bit_for_bit(monkeypatch, base, extra):
    """What ``--cluster`` runs: every shard on a worker's own mixture parser, its log Z_k and
    fall-backs brought back for the C-step.  Two constrained components (the C-step's linear
    program), sentences that fall back, 4 shards of 8 (ln model I's compiled E-step: 3 of 12): the
    trace (bound, beta, L_k, fall-backs) and the grammar equal the single-process run's bit for bit."""
    from grind.infer import ln
    monkeypatch.setattr(ln, "SHARD", 8)
    monkeypatch.setattr(ln, "COMPILED_SHARD", 12)
    sents = corpus(seed=5, n=28)
    g = dmv_grammar(sents)
    kw = dict(mix_base=base, mix_constraints="RA+VAR+SD,LC+NS", mix_start=0.6, mix_rate=0.1, **extra)
    runs = []
    for est in (ShardedEstep(DMVParser(g, sents), shard=8), remote_shards(lambda: DMVParser(g, sents), 8)):
        m = Mixture(g, est, np.full(len(g), 1.1), g.probabilities(), cfg(**kw), np.random.default_rng(0))
        runs.append((m, [m.step() for _ in range(4)], est))
    (a, sa, _), (b, sb, remote) = runs
    assert remote.calls >= 4 and len(remote.shards()) == 4
    assert [s.objective for s in sa] == [s.objective for s in sb]
    assert [s.extra for s in sa] == [s.extra for s in sb]
    assert sa[-1].extra["fallback_LC+NS"] > 0 and sa[-1].extra["beta_meanfield"] < 1
    assert len({s.extra["beta_meanfield"] for s in sa}) == 4          # the C-step moved beta every step
    assert a.weights().tobytes() == b.weights().tobytes()
    assert a.parser.logz_k.tobytes() == b.parser.logz_k.tobytes()


# ---------------------------------------------------------------- CLI

C = ["--column", "UPOS", "--punct", "ud", "--max-length", "8"]


@pytest.fixture(scope="module")
def dmv(tmp_path_factory):
    return sample_dmv(tmp_path_factory.mktemp("mix"), C)


def rows(path):
    lines = [ln.split("\t") for ln in path.read_text().splitlines() if not ln.startswith("#")]
    return [dict(zip(lines[0], r)) for r in lines[1:]]


@pytest.mark.slow
def test_cli_mixture_defaults_and_columns(dmv):
    d, train_ = dmv
    tr = d / "em.tsv"
    r = grind("train", "--algo", "mixture", "--base", "em", "--constraints", "RA+VAR", "--trace", tr, *C,
              d / "g1.txt", train_)
    t = rows(tr)
    assert len(t) == 20 and "# steps: 20" in r.stdout                    # the paper's 20 iterations
    assert float(t[0]["beta_meanfield"]) == pytest.approx(0.85)
    assert float(t[-1]["beta_meanfield"]) == pytest.approx(0.95)
    for k in ("L_meanfield", "L_RA+VAR", "fallback_RA+VAR", "bound", "beta_RA+VAR"):
        assert k in t[0]
    # the header says the base, components and schedule even when they are defaults (the trace alone did)
    assert ("# mixture: base em; components RA+VAR; schedule I (cap on the mean-field coefficient from 0.85 by "
            "0.01 a step to 0.95); last step's beta meanfield=0.95 RA+VAR=0.05") in r.stdout
    tr = d / "ln.tsv"
    r = grind("train", "--algo", "mixture", "--mix-schedule", "fixed-0.85", "--iterations", "2", "--cov", "families",
              "--trace", tr, *C, d / "g1.txt", train_)
    t = rows(tr)
    assert len(t) == 2 and all(float(x["beta_meanfield"]) == 0.85 for x in t)
    assert "# weights: probabilities" in r.stdout and "structure" in r.stdout
    assert "# mixture: base ln; components RA+VAR+SD; schedule II (mean-field coefficient 0.85)" in r.stdout


@pytest.mark.slow
def test_cli_mixture_usage_errors(dmv):
    d, train_ = dmv
    for args, msg in [(["--algo", "em", "--base", "vb"], "--base is for --algo mixture"),
                      (["--algo", "vb", "--mix-schedule", "II"], "--mix-schedule is for --algo mixture"),
                      (["--algo", "mixture", "--mix-coef", "0.9,0.1", "--mix-schedule", "II"],
                       "leave out --mix-schedule"),
                      (["--algo", "mixture", "--mix-start", "0.9", "--mix-end", "0.5"], "--mix-start 0.9 is above"),
                      (["--algo", "mixture", "--base", "em", "--mix-coef", "0.9"], "need 2 non-negative numbers")]:
        r = grind("train", *args, *C, d / "g1.txt", train_, check=False)
        assert r.returncode != 0 and msg in r.stderr and "Traceback" not in r.stderr


def test_c_step_tie_keeps_the_mean_field_coefficient_at_its_cap():
    """L_0 = L_1 (a sentence set where the constraint loses nothing): beta_0 = hi, as the docstring says
    (a mutation to '>' gave beta_0 = 0 and passed every test: audit)."""
    from grind.infer.mixture import c_step
    np.testing.assert_allclose(c_step([-3.0, -3.0], 0.0, 0.9), [0.9, 0.1])
    np.testing.assert_allclose(c_step([-3.0, -2.0], 0.0, 0.9), [0.0, 1.0])
