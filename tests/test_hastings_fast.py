"""The collapsed Metropolis-Hastings sampler's DMV kernel sweep
(``DMVParser.hastings_sweep``, csrc/dmv.pyx ``Corpus.hastings``; the math in
:mod:`grind.infer.hastings`).

* Its chain's stationary distribution over the joint tree assignments of a
  tiny corpus is the exact collapsed posterior (JGG Eq. 3, computed here by
  enumeration, independently of grind), with per-sentence proposals
  (batch 1) and batched ones, at T = 1 and at a fixed T = 2 (P^(1/T));
  negative controls: the same samples reject the posterior under another
  alpha, or at the other temperature.
* The kernel path is really taken (the parser's sampler is never called),
  and it has the same transition kernel as the Python path
  (``Hastings.fast = False``, the reference): the same distribution of the
  state after a few sweeps, over many independent chains on a corpus too
  large to enumerate (two-sample tests, with a negative control showing the
  tests can tell two alphas apart).
* Same seed => the same chain; counts stay those of the trees; switching
  paths mid-run, stored (masked) rule tables and masks are handled.
"""
from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import chi2_contingency

import oracle
from grind.grammars.dmv import derivation_heads, dmv_grammar, split_heads
from grind.infer.hastings import Hastings
from grind.infer.training import ShardedEstep
from grind.kernels.dmv import DMVParser

P_MIN = 1e-3
SENTS = [["x", "y"], ["y", "x", "x"], ["x", "x"]]        # 2 * 7 * 2 = 28 joint assignments


def make(sents, alpha, sweeps, seed=0, batch=1, temp_start=1.0, anneal=None, masks=None, fast=True):
    g = dmv_grammar(sents)
    rng = np.random.default_rng(seed)
    cfg = SimpleNamespace(iterations=sweeps, tolerance=0.0, temp_start=temp_start, anneal_sweeps=anneal,
                          proposal_batch=batch)
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    algo = Hastings(g, ShardedEstep(DMVParser(g, sents, masks)), np.full(len(g), float(alpha)), theta0, cfg, rng)
    algo.fast = fast
    return algo


def exact_posterior(g, sents, alpha, power=1.0, tokens=split_heads):
    """{joint key: P} with P ∝ (prod_A B(f_A(t) + alpha_A) / B(alpha_A))^power over
    every joint assignment of derivations of ``tokens(s)`` (enumerated by tests/oracle.py)."""
    def log_beta(a):
        return math.fsum(math.lgamma(x) for x in a) - math.lgamma(math.fsum(a))
    lhs_sets = [np.flatnonzero(g.lhs == A) for A in set(g.lhs.tolist())]
    per = [[(oracle.derivation_key(d), np.bincount(d[:, 0], minlength=len(g)))
            for d, _ in oracle.enumerate_derivations(g, np.ones(len(g)), tokens(s))] for s in sents]
    logp = {}
    for combo in itertools.product(*per):
        f = sum(c for _, c in combo)
        logp[tuple(k for k, _ in combo)] = power * math.fsum(
            log_beta(f[rs] + alpha) - log_beta(np.full(len(rs), alpha)) for rs in lhs_sets)
    m = max(logp.values())
    z = math.fsum(math.exp(v - m) for v in logp.values())
    return {k: math.exp(v - m) / z for k, v in logp.items()}


def run(algo, burn=100, thin=8, fixed_t=None, stat=None):
    """Statistics (default: the joint assignment) after every ``thin``-th sweep past ``burn``."""
    if fixed_t is not None:
        algo.temperature = lambda k: fixed_t
    stat = stat or (lambda a: tuple(oracle.derivation_key(d) for d in a.trees))
    out = []
    while (st := algo.step()) is not None:
        if st.step > burn and (st.step - burn) % thin == 0:
            out.append(stat(algo))
    return out


def no_python_sampler(algo, monkeypatch):
    """Make the parser's own sampler fail, so that only the kernel sweep can run."""
    def refuse(*a, **k):
        raise AssertionError("the kernel path called parser.sample")
    monkeypatch.setattr(algo.parser, "sample", refuse)
    monkeypatch.setattr(algo.parser, "sample_trees", refuse)


# ----------------------------------------------------------------------------- stationary distribution

@pytest.mark.parametrize("batch", [1, 2, 3])
def test_kernel_chain_matches_exact_posterior(batch, monkeypatch):
    alpha = 0.5
    algo = make(SENTS, alpha, 16100, seed=batch, batch=batch)
    no_python_sampler(algo, monkeypatch)
    keys = run(algo)
    post = exact_posterior(algo.g, SENTS, alpha)
    assert len(post) == 28
    p, cells, outside = oracle.chisquare_gof(keys, post)
    assert outside == 0, "a sampled tree is not a derivation of its sentence"
    assert cells >= 10 and p > P_MIN, (p, cells)
    # negative control: the same samples reject the posterior under another alpha
    assert oracle.chisquare_gof(keys, exact_posterior(algo.g, SENTS, 5.0))[0] < P_MIN


@pytest.mark.parametrize("batch", [1, 2])
def test_kernel_chain_tempered_target(batch):
    """At a fixed T = 2 the chain samples P(t | alpha)^(1/T), not P(t | alpha)."""
    alpha, T = 0.5, 2.0
    keys = run(make(SENTS, alpha, 16100, seed=10 + batch, batch=batch), fixed_t=T)
    g = dmv_grammar(SENTS)
    p, _, outside = oracle.chisquare_gof(keys, exact_posterior(g, SENTS, alpha, power=1 / T))
    assert outside == 0 and p > P_MIN, p
    assert oracle.chisquare_gof(keys, exact_posterior(g, SENTS, alpha))[0] < P_MIN


def test_annealed_kernel_chain_ends_at_the_posterior():
    """T from 3 down to 1 over the first 300 sweeps, then T = 1 samples counted."""
    alpha = 0.5
    algo = make(SENTS, alpha, 16300, seed=4, batch=2, temp_start=3.0, anneal=300)
    keys = run(algo, burn=300)
    p, _, outside = oracle.chisquare_gof(keys, exact_posterior(algo.g, SENTS, alpha))
    assert outside == 0 and p > P_MIN, p


# ----------------------------------------------------------------------------- against the Python path

def _left_arcs(algo):
    return sum(int(np.sum(derivation_heads(algo.g, d, len(s)) > np.arange(1, len(s) + 1)))
               for d, s in zip(algo.trees, algo.parser.sentences))


def _two_sample_p(a, b, min_count=10):
    """Chi-square test of homogeneity of two samples of hashable values (rare values pooled)."""
    ca, cb = {}, {}
    for x in a:
        ca[x] = ca.get(x, 0) + 1
    for x in b:
        cb[x] = cb.get(x, 0) + 1
    keys = sorted(set(ca) | set(cb), key=lambda k: -(ca.get(k, 0) + cb.get(k, 0)))
    rows, pool = [], [0, 0]
    for k in keys:
        if ca.get(k, 0) + cb.get(k, 0) >= min_count:
            rows.append([ca.get(k, 0), cb.get(k, 0)])
        else:
            pool[0] += ca.get(k, 0)
            pool[1] += cb.get(k, 0)
    if sum(pool):
        rows.append(pool)
    assert len(rows) >= 3
    return chi2_contingency(np.array(rows).T)[1]


SMALL = [["a", "b", "a"], ["b", "c", "a", "c"], ["c", "a"], ["a", "c", "b"]]      # 7 * 30 * 2 * 7 joint trees


def _after_sweeps(fast, alpha, batch, seeds, sweeps):
    """(tree of sentence 1, number of left arcs) after ``sweeps`` sweeps of
    independent chains, one a seed, each started from trees drawn under a random grammar."""
    g = dmv_grammar(SMALL)
    parser = DMVParser(g, SMALL)
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        cfg = SimpleNamespace(iterations=sweeps, tolerance=0.0, temp_start=1.0, anneal_sweeps=None,
                              proposal_batch=batch)
        theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
        algo = Hastings(g, parser, np.full(len(g), alpha), theta0, cfg, rng)
        algo.fast = fast
        for _ in range(sweeps):
            algo.update()
        assert (algo._flat is not None) == fast
        out.append((oracle.derivation_key(algo.trees[1]), _left_arcs(algo)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2])
def test_kernel_and_python_paths_make_the_same_chain(batch):
    """Both paths start from the same distribution of trees (the parser's
    sampler) and must have the same transition kernel, so the state after a
    few sweeps has the same distribution.  Compared over 600 independent chains
    each (independent samples: no autocorrelation to fool the test) on the
    tree of one sentence and on the corpus's number of left arcs; negative
    control: the same test tells the kernel path at another alpha apart."""
    chains, sweeps, alpha = 600, 4, 0.3
    fast = _after_sweeps(True, alpha, batch, range(chains), sweeps)
    ref = _after_sweeps(False, alpha, batch, range(chains, 2 * chains), sweeps)
    for k in range(2):
        assert _two_sample_p([x[k] for x in fast], [x[k] for x in ref]) > P_MIN
    other = _after_sweeps(True, 3.0, batch, range(2 * chains, 3 * chains), sweeps)
    assert _two_sample_p([x[0] for x in fast], [x[0] for x in other]) < P_MIN


# ----------------------------------------------------------------------------- reproducibility and bookkeeping

@pytest.mark.parametrize("batch", [1, 4])
def test_same_seed_same_chain(batch):
    rng = np.random.default_rng(3)
    sents = [list(rng.choice(["a", "b", "c", "d"], size=rng.integers(2, 9))) for _ in range(40)]

    def chain(seed):
        algo = make(sents, 0.2, 6, seed=seed, batch=batch, temp_start=2.0)
        steps = list(iter(algo.step, None))
        return [(s.objective, s.extra) for s in steps], [d.copy() for d in algo.trees]

    (sa, ta), (sb, tb), (sc, tc) = chain(5), chain(5), chain(6)
    assert sa == sb
    for x, y in zip(ta, tb):
        np.testing.assert_array_equal(x, y)
    assert sa != sc and any(not np.array_equal(x, y) for x, y in zip(ta, tc))


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("batch", [1, 5])
def test_counts_stay_the_counts_of_the_trees(batch, fast):
    """On either path (kernel, or Python with ``fast = False``): the counts are the trees'
    after every sweep, and some proposals are rejected (acceptance strictly between 0 and 1)."""
    rng = np.random.default_rng(8)
    sents = [list(rng.choice(["a", "b", "c"], size=rng.integers(1, 8))) for _ in range(30)]
    algo = make(sents, 0.05, 12, seed=2, batch=batch, temp_start=4.0, fast=fast)
    R = len(algo.g)
    accepted = []
    while (st := algo.step()) is not None:
        f = np.bincount(np.concatenate([d[:, 0] for d in algo.trees]), minlength=R)
        np.testing.assert_array_equal(algo.counts, f)
        np.testing.assert_array_equal(algo.n[R:], np.bincount(algo.g.lhs, weights=f, minlength=len(algo.n) - R))
        for d, s in zip(algo.trees, sents):
            assert oracle.is_derivation_of(algo.g, split_heads(s), d)
        accepted.append(st.extra["acceptance"])
    assert (algo._flat is not None) == fast and 0.0 < np.mean(accepted) < 1.0


def test_switching_between_kernel_and_python_paths():
    rng = np.random.default_rng(9)
    sents = [list(rng.choice(["a", "b", "c"], size=rng.integers(2, 7))) for _ in range(15)]
    algo = make(sents, 0.3, 9, seed=1)
    R = len(algo.g)
    for k in range(9):
        algo.fast = k % 3 != 1
        algo.step()
        assert (algo._flat is not None) == algo.fast
        f = np.bincount(np.concatenate([d[:, 0] for d in algo.trees]), minlength=R)
        np.testing.assert_array_equal(algo.counts, f)
        state = algo.get_state()
        np.testing.assert_array_equal(state["tree_rows"], np.concatenate(algo.trees))


def test_stored_rule_tables_give_the_same_chain():
    """A mask that allows everything makes the parser store each sentence's rule
    table instead of looking it up: the kernel sweep must not notice."""
    rng = np.random.default_rng(2)
    sents = [list(rng.choice(["a", "b", "c"], size=rng.integers(2, 7))) for _ in range(20)]
    every = lambda toks, n: (~np.eye(n, dtype=bool), np.ones(n, dtype=bool))  # noqa: E731
    a, b = make(sents, 0.2, 5, seed=4, batch=3), make(sents, 0.2, 5, seed=4, batch=3, masks=every)
    assert [s.objective for s in iter(a.step, None)] == [s.objective for s in iter(b.step, None)]
    for x, y in zip(a.trees, b.trees):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("batch", [1, 2])
def test_masked_trees_follow_the_mask(batch):
    """Only the first word may be the root and only arcs h -> h+1 are allowed:
    every sentence has exactly one tree, the left-to-right chain."""
    sents = [["a", "b", "a"], ["b", "b"], ["a", "b", "b", "a"]]
    mask = lambda toks, n: (np.eye(n, k=1, dtype=bool), np.arange(n) == 0)  # noqa: E731
    algo = make(sents, 0.5, 5, seed=1, batch=batch, masks=mask)
    while algo.step() is not None:
        for d, s in zip(algo.trees, sents):
            np.testing.assert_array_equal(derivation_heads(algo.g, d, len(s)), np.arange(len(s)))


def test_sweep_rejects_bad_arrays():
    algo = make(SENTS, 0.5, 2)
    algo.step()
    rows, off, _ = algo._flat
    with pytest.raises(ValueError, match="C-contiguous"):
        algo.parser.hastings_sweep(algo.n, algo.a, algo.lhs_at, algo.ok, 1, 1.0, rows[:, :2], off, 0)
    with pytest.raises(ValueError, match="cannot have a tree"):
        algo.parser.hastings_sweep(algo.n, algo.a, algo.lhs_at, np.array([7]), 1, 1.0, rows, off, 0)


def test_bench_runs(capsys):
    from grind.bench import hastings_dmv
    r = hastings_dmv.main(["--sentences", "60", "--sub", "20", "--repeats", "1", "--proposal-batch", "8"])
    assert [n for _, n, _, _ in r["rows"]] == [60, 60, 60, 60, 20, 20]
    assert all(us > 0 for _, _, us, _ in r["rows"]) and all(0 <= acc <= 1 for *_, acc in r["rows"][1:])
    out = capsys.readouterr().out
    assert "| Hastings, kernel sweep, --proposal-batch 1, T = 1 (goal row) | 60 |" in out
    assert "Goal: a Hastings sweep" in out and "py-cfg is not available" in out
