"""The Gibbs and collapsed Metropolis-Hastings samplers (Johnson, Griffiths &
Goldwater 2007) against the exact posterior over joint tree assignments.

For a corpus of 2-3 short sentences every joint assignment (t_1, .., t_m) is
enumerated with tests/oracle.py and weighted by JGG Eq. 3,

    P(t_1..t_m | w, alpha)  ∝  prod_A B(f_A(t) + alpha_A) / B(alpha_A),

computed here independently of grind (math.lgamma, one LHS at a time).  The
samplers' joint assignments after each (thinned) sweep must fit it by a
chi-square test, and must not fit the posterior under another alpha.
"""
import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest

import oracle
from conftest import grind
from grind import log
from grind.grammars.dmv import dmv_grammar, split_heads
from grind.infer.gibbs import Gibbs, collapsed_logprob, sample_log_dirichlet
from grind.grammars.grammar import Grammar
from grind.infer.hastings import Hastings
from grind.grammars.cnf import cnf_grammar
from grind.kernels.select import make_parser
from grind.infer.training import ShardedEstep, train

P_MIN = 1e-3
CNF_RULES = [("S", ("S", "X")), ("S", ("X", "S")), ("S", ("X", "X")), ("S", ("a",)),
             ("X", ("S", "X")), ("X", ("a",)), ("X", ("b",))]
CASES = {
    # 2 * 8 * 3 = 48 joint assignments
    "cnf": (Grammar(CNF_RULES, np.ones(len(CNF_RULES)), "S"), [["a", "b"], ["a", "a", "b"], ["a", "a"]]),
    # DMV: 2 * 7 = 14 joint assignments (one derivation per projective tree)
    "dmv": (dmv_grammar([["x", "y"], ["y", "x", "x"]]), [["x", "y"], ["y", "x", "x"]]),
}


# ----------------------------------------------------------------------------- the exact posterior

def log_eq3(g, f, alpha, power=1.0, scale=1.0):
    """power * sum_A [log B(scale f_A + alpha_A) - log B(alpha_A)], B the multivariate beta."""
    def log_beta(a):
        return math.fsum(math.lgamma(x) for x in a) - math.lgamma(math.fsum(a))
    out = 0.0
    for A in set(g.lhs.tolist()):
        rs = np.flatnonzero(g.lhs == A)
        out += log_beta([scale * f[r] + alpha[r] for r in rs]) - log_beta([alpha[r] for r in rs])
    return power * out


def exact_joint(g, sents, alpha, power=1.0, scale=1.0):
    """{(key_1, .., key_m): P} over every joint assignment of derivations."""
    split = [split_heads(s) for s in sents] if g.meta.get("model") == "dmv" else sents
    per = [[(oracle.derivation_key(d), np.bincount(d[:, 0], minlength=len(g)))
            for d, _ in oracle.enumerate_derivations(g, np.ones(len(g)), s)] for s in split]
    logp = {tuple(k for k, _ in combo): log_eq3(g, sum(c for _, c in combo), alpha, power, scale)
            for combo in itertools.product(*per)}
    m = max(logp.values())
    z = math.fsum(math.exp(v - m) for v in logp.values())
    return {k: math.exp(v - m) / z for k, v in logp.items()}


# ----------------------------------------------------------------------------- running a chain

def make(cls, g, sents, alpha, sweeps, seed=0, temp_start=1.0, anneal=None, **cfg_extra):
    rng = np.random.default_rng(seed)
    cfg = SimpleNamespace(iterations=sweeps, tolerance=0.0, temp_start=temp_start, anneal_sweeps=anneal, **cfg_extra)
    prior = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (len(g),)).copy()
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    return cls(g, ShardedEstep(make_parser(g, sents)), prior, theta0, cfg, rng), rng


def chain(cls, case, alpha, sweeps, thin=5, burn=100, seed=0, fixed_t=None, **kw):
    """Joint assignments after every ``thin``-th sweep past ``burn`` (thinned so that
    the chi-square test, which assumes independent draws, is not fooled by
    autocorrelation)."""
    g, sents = CASES[case]
    algo, _ = make(cls, g, sents, alpha, sweeps, seed, **kw)
    if fixed_t is not None:
        algo.temperature = lambda k: fixed_t
    keys = []
    while (st := algo.step()) is not None:
        if st.step > burn and (st.step - burn) % thin == 0:
            keys.append(tuple(oracle.derivation_key(d) for d in algo.trees))
    return keys, algo


def fit(keys, post):
    p, cells, outside = oracle.chisquare_gof(keys, post)
    assert outside == 0, "a sampled tree is not a derivation of its sentence"
    return p, cells


# ----------------------------------------------------------------------------- stationary distributions

@pytest.mark.slow
@pytest.mark.parametrize("case", ["cnf", "dmv"])
@pytest.mark.parametrize("cls", [Gibbs, Hastings])
def test_sampler_matches_exact_posterior(cls, case):
    alpha = 0.5
    keys, _ = chain(cls, case, alpha, 10000)
    g, sents = CASES[case]
    p, cells = fit(keys, exact_joint(g, sents, np.full(len(g), alpha)))
    assert cells >= 8 and p > P_MIN, (p, cells)
    # negative control: the same samples reject the posterior under another alpha
    p_wrong, _ = fit(keys, exact_joint(g, sents, np.full(len(g), 5.0)))
    assert p_wrong < P_MIN, p_wrong


@pytest.mark.slow
@pytest.mark.parametrize("case", ["cnf", "dmv"])
def test_hastings_after_annealing_matches_exact_posterior(case):
    """T from 3 down to 1 over the first 500 sweeps, then T = 1 samples counted."""
    alpha = 0.5
    keys, algo = chain(Hastings, case, alpha, 8500, burn=500, temp_start=3.0, anneal=500)
    assert algo.temperature(1) == 3.0 and algo.temperature(500) == 1.0 == algo.temperature(501)
    g, sents = CASES[case]
    p, _ = fit(keys, exact_joint(g, sents, np.full(len(g), alpha)))
    assert p > P_MIN, p


@pytest.mark.slow
@pytest.mark.parametrize("cls, batch", [(Gibbs, None), (Hastings, None), (Hastings, 2)])
def test_tempered_targets(cls, batch):
    """At a fixed T = 2: Hastings samples P(t | alpha)^(1/T); Gibbs the tree
    marginal of P(theta | alpha) P(t, w | theta)^(1/T), prod_A B(f_A/T + alpha_A).  Hastings with
    batched proposals too (a mutation dropping 1/T from its acceptance passed every test: audit)."""
    alpha, T = 0.5, 2.0
    keys, _ = chain(cls, "cnf", alpha, 8000, fixed_t=T, **({"proposal_batch": batch} if batch else {}))
    g, sents = CASES["cnf"]
    prior = np.full(len(g), alpha)
    right = exact_joint(g, sents, prior, power=1 / T) if cls is Hastings else \
        exact_joint(g, sents, prior, scale=1 / T)
    p, _ = fit(keys, right)
    assert p > P_MIN, p
    assert fit(keys, exact_joint(g, sents, prior))[0] < P_MIN      # not the T = 1 posterior


# ----------------------------------------------------------------------------- numerics and bookkeeping

@pytest.mark.parametrize("kind", ["cnf", "dmv"])
@pytest.mark.parametrize("cls", [Gibbs, Hastings])
def test_tiny_alpha_stays_finite(cls, kind):
    rng = np.random.default_rng(1)
    sents = [list(rng.choice(["a", "b", "c"], size=rng.integers(2, 7))) for _ in range(20)]
    g = cnf_grammar(["a", "b", "c"], 3, 2) if kind == "cnf" else dmv_grammar(sents)
    algo, _ = make(cls, g, sents, 1e-5, 40, temp_start=3.0)
    trace = train(algo, np.random.default_rng(2))
    obj = np.array([s.objective for s in trace])
    assert len(trace) == 40 and np.all(np.isfinite(obj))
    assert np.all(np.isfinite(algo.weights())) and np.all(np.isfinite(algo.mean()))
    np.testing.assert_allclose(np.bincount(g.lhs, weights=algo.mean()), 1.0)
    if cls is Hastings:
        acc = [s.extra["acceptance"] for s in trace]
        assert all(0.0 <= a <= 1.0 for a in acc)
    assert trace[-1].extra["temperature"] == 1.0


def test_log_dirichlet_draws():
    g = Grammar([("S", ("a",)), ("S", ("b",)), ("S", ("c",)), ("T", ("a",)), ("T", ("b",))], np.ones(5), "S")
    rng = np.random.default_rng(0)
    lt = sample_log_dirichlet(g, np.full(5, 1e-5), rng)
    assert np.all(np.isfinite(lt)) and not np.isnan(np.exp(lt)).any()
    np.testing.assert_allclose(np.bincount(g.lhs, weights=np.exp(lt)), 1.0)
    a = np.array([0.3, 2.0, 5.0, 0.05, 0.7])
    x = np.exp(np.array([sample_log_dirichlet(g, a, rng) for _ in range(20000)]))
    np.testing.assert_allclose(x.mean(axis=0), g.normalize(a), atol=0.01)


@pytest.mark.parametrize("cls", [Gibbs, Hastings])
def test_objective_is_eq3_of_the_trees(cls):
    g, sents = CASES["cnf"]
    algo, _ = make(cls, g, sents, 0.5, 5)
    while (st := algo.step()) is not None:
        f = sum(np.bincount(d[:, 0], minlength=len(g)) for d in algo.trees)
        assert st.objective == pytest.approx(log_eq3(g, f, np.full(len(g), 0.5)), rel=1e-12)
        assert collapsed_logprob(g, f, np.full(len(g), 0.5)) == st.objective
        np.testing.assert_array_equal(algo.weights(), 0.5 + f)


def test_hastings_proposal_is_posterior_mean_given_the_rest():
    """The incrementally maintained weight vector the kernel gets for sentence i
    is theta' = (f(t_-i) + alpha) normalised per LHS, raised to 1/T."""
    rng = np.random.default_rng(4)
    sents = [list(rng.choice(["a", "b", "c"], size=rng.integers(2, 7))) for _ in range(15)]
    g = dmv_grammar(sents)
    algo, _ = make(Hastings, g, sents, 0.3, 3, temp_start=2.0)
    inner, seen = algo.parser, []

    class Checking:
        def sample(self, weights, rng, idx):
            (i,) = idx
            f = sum(np.bincount(d[:, 0], minlength=len(g)) for k, d in enumerate(algo.trees) if k != i)
            want = g.normalize(f + 0.3) ** (1.0 / algo.temperature(algo.it + 1))
            np.testing.assert_allclose(weights, want, rtol=1e-12)
            seen.append(i)
            return inner.sample(weights, rng, idx)

    algo.parser = Checking()
    while algo.step() is not None:
        pass
    assert len(seen) == 3 * len(sents)


def test_hastings_batch_uses_rank_each_repeated_use_from_zero():
    """With --proposal-batch > 1 a tree is kept as (uses, ranks, signs): its rules (+1) then
    their LHS slots R + A (-1), sorted, and rank j = the number of equal uses before it, so
    the rising factorial sum_{j < f} log(c + j) starts at j = 0.  S --> S X (rule 0),
    S --> X X (2) and three X --> a (5) for "a a a": rules 0 2 5 5 5, LHS slots
    R + S = 7 twice and R + X = 8 three times (R = 7)."""
    g, _ = CASES["cnf"]
    sents = [["a", "a", "a"]]
    cfg = SimpleNamespace(iterations=1, tolerance=0.0, temp_start=1.0, anneal_sweeps=None, proposal_batch=2)
    algo = Hastings(g, ShardedEstep(make_parser(g, sents)), np.full(len(g), 0.5), g.normalize(np.ones(len(g))),
                    cfg, np.random.default_rng(0))
    d = np.array([[0, 0, 3], [2, 0, 2], [5, 0, 1], [5, 1, 2], [5, 2, 3]], dtype=np.int64)
    assert oracle.is_derivation_of(g, sents[0], d)
    uses, ranks, signs = algo._uses_batch(d)
    assert uses == [0, 2, 5, 5, 5, 7, 7, 8, 8, 8]
    assert ranks == [0, 0, 0, 1, 2, 0, 1, 0, 1, 2]
    assert signs == [1.0] * 5 + [-1.0] * 5
    t = algo._uses(d)                              # the batch-1 form: the uses with rank > 0 only
    assert t.rep.tolist() == [5, 5, 7, 8, 8] and t.rank.tolist() == [1, 2, 1, 1, 2]


@pytest.mark.parametrize("cls", [Gibbs, Hastings])
def test_unparseable_sentences_are_skipped_and_reported_once(cls, monkeypatch):
    g, sents = CASES["cnf"]
    warnings = []
    monkeypatch.setattr(log, "warn", warnings.append)
    algo, _ = make(cls, g, sents + [["b"], ["b", "b", "b", "b", "a"]], 0.5, 3)
    while (st := algo.step()) is not None:
        assert algo.trees[3] is None and st.sentences == st.step * (len(sents) + 1)
    assert len(warnings) == 1 and "1 of 5" in warnings[0]


@pytest.mark.parametrize("cls", [Gibbs, Hastings])
def test_resume_is_bit_identical(cls, tmp_path):
    rng = np.random.default_rng(7)
    sents = [list(rng.choice(["a", "b", "c"], size=rng.integers(2, 7))) for _ in range(12)]
    g = dmv_grammar(sents)
    algo, r = make(cls, g, sents, 0.2, 8, seed=3, temp_start=3.0)
    full = train(algo, r)

    class Crash(Exception):
        pass

    def crash(st):
        if st.step == 5:
            raise Crash

    ckpt = tmp_path / "ck.npz"
    algo1, r1 = make(cls, g, sents, 0.2, 8, seed=3, temp_start=3.0)
    with pytest.raises(Crash):
        train(algo1, r1, checkpoint=ckpt, checkpoint_every=1, on_step=crash)
    algo2, r2 = make(cls, g, sents, 0.2, 8, seed=99, temp_start=3.0)   # state comes from the file
    resumed = train(algo2, r2, checkpoint=ckpt, resume=True)
    assert [s.objective for s in resumed] == [s.objective for s in full]
    assert [s.extra for s in resumed] == [s.extra for s in full]
    np.testing.assert_array_equal(algo2.weights(), algo.weights())
    for a, b in zip(algo2.trees, algo.trees):
        np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- the command line

@pytest.mark.slow
def test_cli_hastings_on_ewt_sample(ewt_train, tmp_path):
    c = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
    g0, g1 = tmp_path / "dmv0.txt", tmp_path / "dmv1.txt"
    g0.write_text(grind("make-grammar", "dmv", *c, ewt_train).stdout)
    g1.write_text(grind("init", "--harmonic", "--corpus", ewt_train, *c, g0).stdout)
    trace = tmp_path / "trace.tsv"
    r = grind("train", "--algo", "hastings", "--temp-start", "3", "--iterations", "2", "--seed", "1",
              "--trace", trace, *c, g1, ewt_train)
    assert "# weights: Dirichlet pseudo-counts (posterior)" in r.stdout
    rows = [ln.split("\t") for ln in trace.read_text().splitlines() if not ln.startswith("#")]
    head, body = rows[0], rows[1:]
    assert len(body) == 2 and "acceptance" in head and "temperature" in head
    acc = [float(b[head.index("acceptance")]) for b in body]
    assert all(0.0 <= a <= 1.0 for a in acc)
    assert [float(b[head.index("temperature")]) for b in body] == [3.0, 1.0]
    assert all(math.isfinite(float(b[head.index("objective")])) for b in body)


@pytest.mark.parametrize("algo", ["gibbs", "hastings"])
def test_a_huge_start_temperature_anneals_to_one(tmp_path, algo):
    """1e16 + (1 - 1e16) is 0 in floating point: T must still end at 1, never 0 (was a ZeroDivisionError)."""
    from grind.infer.gibbs import temperature
    assert [temperature(k, 1e16, 3) for k in (1, 3, 4)] == [1e16, 1.0, 1.0]
    assert all(1.0 <= temperature(k, 1e300, 1000) < math.inf for k in range(1, 1001))
    (tmp_path / "g.txt").write_text("0.5 S --> S S\n0.25 S --> a\n0.25 S --> b\n")
    (tmp_path / "c.txt").write_text("a b a\n" * 5)
    r = grind("train", "--algo", algo, "--temp-start", "1e16", "--iterations", "3", "--seed", "1",
              tmp_path / "g.txt", tmp_path / "c.txt")
    assert "Traceback" not in r.stderr and "# steps: 3" in r.stdout


def test_the_collapsed_objective_keeps_its_digits_for_huge_alpha():
    """gammaln(a + c) - gammaln(a) lost every digit by a ~ 1e14 (the objective went to 0 at alpha 1e20)."""
    from scipy.special import gammaln
    from grind.infer.dirichlet import log_rising
    for a in (1e8 + 1, 1e14, 1e20, 1e300):
        for c in (0, 1, 7, 4000):
            exact = math.fsum(math.log(a + i) for i in range(c))
            assert abs(float(log_rising(a, c)) - exact) <= 1e-14 * max(1.0, abs(exact)), (a, c)
    a, c = np.array([0.5, 1e-3, 1e7, 2.0]), np.array([3.0, 0.0, 10.0, 5.0])
    assert np.array_equal(log_rising(a, c), gammaln(a + c) - gammaln(a))     # below 1e8: as before, to the bit


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["gibbs", "hastings"])
def test_cli_run_ended_before_the_annealing_says_so(tmp_path, algo):
    """No silent substitution: a run that stops while T > 1 writes a tempered state,
    and says so on stderr and in the grammar's header; a finished annealing does not."""
    from conftest import sample_dmv
    c = ["--column", "UPOS", "--punct", "ud", "--max-length", "6"]
    d, train_path = sample_dmv(tmp_path, c)
    common = ["train", "--algo", algo, *c, "--alpha", "0.5", "--seed", "1", "--temp-start", "10",
              "--anneal-sweeps", "5", d / "g1.txt", train_path]
    r = grind(*common, "--iterations", "2", "-o", tmp_path / "early.txt")
    assert "before the annealing" in r.stderr and "at temperature 7.75" in r.stderr     # 10 - 9 (2 - 1) / (5 - 1)
    assert "# temperature: 7.75 (the annealing had not reached 1)" in (tmp_path / "early.txt").read_text()
    r = grind(*common, "--iterations", "5", "-o", tmp_path / "done.txt")
    assert "annealing" not in r.stderr and "# temperature:" not in (tmp_path / "done.txt").read_text()


def test_a_dirichlet_draw_that_overflows_stops_with_alpha_named():
    """At the smallest normal alpha, log(U)/alpha can be -inf for every rule of a left-hand side: NaN went on
    to the kernel's generic 'weights must be finite' error (sampler audit); at 1e-307 it cannot happen."""
    from grind.errors import NumericalError
    from grind.grammars.grammar import Grammar
    from grind.infer.gibbs import sample_log_dirichlet
    g = Grammar([("S", ("a",)), ("S", ("b",))], np.ones(2), "S")
    rng = np.random.default_rng(0)                     # overflows 7 times in 20,000 draws at this seed
    with pytest.raises(NumericalError, match="alpha 2.2250738585072014e-308; use alpha >= 1e-307"):
        for _ in range(20000):
            sample_log_dirichlet(g, np.full(2, 2.2250738585072014e-308), rng)
    for _ in range(20000):
        assert np.isfinite(sample_log_dirichlet(g, np.full(2, 1e-307), rng)).sum() >= 1
