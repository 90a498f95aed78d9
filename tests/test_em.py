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
