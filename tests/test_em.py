"""EM: the objective never decreases; MAP-EM's M-step is the stated formula."""
import numpy as np
import pytest

from grind.infer import em
from grind.grammars.grammar import Grammar
from grind.grammars.cnf import cnf_grammar
from grind.kernels.select import make_parser


def random_corpus(rng, vocab, n, lo=2, hi=7):
    return [list(rng.choice(vocab, size=rng.integers(lo, hi + 1))) for _ in range(n)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("alpha", [1.0, 1.5])
def test_em_objective_never_decreases(seed, alpha):
    rng = np.random.default_rng(seed)
    vocab = ["a", "b", "c", "d"]
    g = cnf_grammar(vocab, 3, 2)
    theta = g.normalize(np.exp(rng.standard_normal(len(g))))
    parser = make_parser(g, random_corpus(rng, vocab, 12))
    _, steps = em.run(parser, g, theta, iterations=15, tolerance=0, alpha=alpha)
    obj = np.array([s.objective for s in steps])
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[:-1])), obj
    assert obj[-1] > obj[0] + 1e-3  # it actually learns something


def test_map_estimate_formula():
    g = Grammar([("S", ("a",)), ("S", ("b",)), ("S", ("c",)), ("T", ("a",))],
                np.full(4, 0.5), "S")
    theta = em.map_estimate(g, np.array([3.0, 0.2, 1.0, 0.0]), alpha=0.5, previous=[0.1, 0.2, 0.7, 1.0])
    # max(0, c - 0.5): 2.5, 0, 0.5 -> normalised; T unused keeps its previous weight
    np.testing.assert_allclose(theta, [2.5 / 3, 0.0, 0.5 / 3, 1.0])


def test_nan_counts_stop_the_run():
    g = Grammar([("S", ("a",))], [1.0], "S")
    with pytest.raises(em.NumericalError):
        em.map_estimate(g, np.array([np.nan]))


def test_infinite_objective_stops_the_run():
    """alpha = 1e308: the log prior (alpha - 1) log theta(S --> a) = 1e308 * log 0.1 overflows to
    -inf at the first step, and the run stops there with a NumericalError saying so."""
    g = Grammar([("S", ("a",)), ("S", ("b",))], np.ones(2), "S")
    parser = make_parser(g, [["a"], ["b"]])
    with pytest.raises(em.NumericalError, match="objective of step 1 is -inf"), np.errstate(over="ignore"):
        em.run(parser, g, np.array([0.1, 0.9]), iterations=1, tolerance=0, alpha=1e308)


def test_lhs_unused_by_every_sentence_keeps_its_weights():
    """DMV over x, y, z trained on "x y" alone: every LHS of head z, and L_x, L'_x (x has no
    left dependent: it is the first word), R_y, R'_y (y is the last) have expected count 0;
    EM keeps their initial weights, and every LHS's weights still sum to 1."""
    from grind.grammars.dmv import dmv_grammar
    g = dmv_grammar([["x", "y"], ["z", "x"]])
    theta0 = g.normalize(np.exp(np.random.default_rng(0).standard_normal(len(g))))
    parser = make_parser(g, [["x", "y"]])
    theta, _ = em.run(parser, g, theta0, iterations=1, tolerance=0, alpha=1.0)
    unused = {"L_x", "L'_x", "R_y", "R'_y"} | {A for A in g.nonterminals if A.endswith("_z")}
    keep = np.array([g.nonterminals[A] in unused for A in g.lhs])
    # L_x, R_y: 2 rules each; L'_x, R'_y: 3 each; Y_z: 1, L0_z, L_z, R0_z, R_z: 2 each, L'_z, R'_z: 3 each
    assert keep.sum() == 2 * 2 + 2 * 3 + 1 + 4 * 2 + 2 * 3
    np.testing.assert_array_equal(theta[keep], theta0[keep])
    assert not np.allclose(theta[~keep], theta0[~keep])
    np.testing.assert_allclose(g.lhs_totals(theta), 1.0, rtol=1e-12)


def test_em_stops_once_the_relative_change_is_within_the_tolerance():
    rng = np.random.default_rng(1)
    vocab = ["a", "b"]
    g = cnf_grammar(vocab, 2, 2)
    theta = g.normalize(np.exp(rng.standard_normal(len(g))))
    parser = make_parser(g, random_corpus(rng, vocab, 4))
    tol = 1e-5
    _, steps = em.run(parser, g, theta, iterations=1000, tolerance=tol, alpha=1.0)
    obj = np.array([s.objective for s in steps])
    rel = np.abs(np.diff(obj)) / np.abs(obj[:-1])
    assert 2 < len(steps) < 1000
    assert rel[-1] <= tol and np.all(rel[:-1] > tol), rel


def test_tolerance_zero_stops_at_an_exact_fixed_point():
    """--tolerance 0 means "until the objective stops changing"; a mutation of the rule to '<' ran every
    iteration and no test failed (mutation audit).  S -> a | b from (0.5, 0.5) on [a], [b] is a fixed point."""
    g = Grammar([("S", ("a",)), ("S", ("b",))], np.array([0.5, 0.5]), "S")
    _, steps = em.run(make_parser(g, [["a"], ["b"]]), g, g.weights, iterations=10, tolerance=0, alpha=1.0)
    assert len(steps) == 2 and steps[-1].extra["stopped"].startswith("converged at iteration 2: relative change "
                                                                    "of the objective 0 <= tolerance 0")
    # an objective of 0 (one certain tree) that stays 0 has not changed: it said "relative change inf"
    one = Grammar([("S", ("a",))], np.array([1.0]), "S")
    _, steps = em.run(make_parser(one, [["a"]]), one, one.weights, iterations=10, tolerance=0, alpha=1.0)
    assert steps[-1].objective == 0
    assert "relative change of the objective 0 <= tolerance 0" in steps[-1].extra["stopped"]
