"""Training latent treebank grammars on gold trees (grind.infer over
grind.kernels.latent_tree.TreeParser): the one-tree sparse count path of
collapsed VB, EM monotonicity and the split symmetry."""
from __future__ import annotations

import numpy as np
import pytest

from grind.formats.trees import parse_trees
from grind.formats.treebank import prepare
from grind.grammars.latent import LatentGrammar, split_grammar, treebank_grammar
from grind.infer.cvb import CVB, DenseOnly
from grind.infer.em import EM
from grind.infer.training import ShardedEstep
from grind.kernels.latent_tree import TreeParser

TEXT = """
( (S (NP (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)) )
( (S (NP (DT A) (NN cat)) (VP (VBD saw) (NP (DT the) (JJ big) (NN dog))) (. .)) )
( (S (NP (PRP It)) (VP (VBD ran) (ADVP (RB away))) (. .)) )
( (S (NP (DT The) (NN dog)) (VP (VBD ran) (PP (IN to) (NP (DT the) (NN cat)))) (. .)) )
"""



def setup(h=2, seed=0, shuffle=False):
    tb, _, _ = prepare(list(parse_trees(TEXT)), rare=0)
    g = split_grammar(treebank_grammar(tb), h, np.random.default_rng(seed))
    if shuffle:                       # rules not in block order: the gather/scatter path
        order = np.random.default_rng(1).permutation(len(g))
        g = type(g)([g.rules[i] for i in order], g.weights[order], g.start)
    return g, tb, TreeParser(g, tb, latent=LatentGrammar(g))


@pytest.mark.parametrize("shuffle", [False, True])
def test_sparse_counts_equal_inside_outside(shuffle):
    g, tb, p = setup(shuffle=shuffle)
    w = g.weights
    for i in range(len(tb)):
        rules, vals, z = p.sparse_counts(w, i)
        dense, lz = p.inside_outside(w, [i])
        assert z == lz[0]
        full = np.zeros(len(g))
        full[rules] = vals
        np.testing.assert_array_equal(full, dense)
        assert np.all(np.diff(rules) > 0)


def test_cvb_sparse_path_is_bit_identical_to_dense():
    g, tb, p = setup(h=3)
    prior = np.full(len(g), 0.5)
    runs = []
    for parser in (p, DenseOnly(p)):
        a = CVB(g, ShardedEstep(parser, 1), prior, g.weights, {"iterations": 3}, np.random.default_rng(7))
        objs = [a.update().objective for _ in range(3)]
        runs.append((a.alpha_hat.copy(), objs))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


def test_em_on_trees_never_decreases_and_breaks_symmetry():
    g, tb, p = setup(h=2, seed=3)
    a = EM(g, ShardedEstep(p, 1), np.ones(len(g)), g.weights, {"iterations": 30, "tolerance": 0.0},
           np.random.default_rng(0))
    objs = [a.update().objective for _ in range(30)]
    assert all(b >= x - 1e-9 * abs(x) for x, b in zip(objs, objs[1:]))
    # without noise the two subtypes stay identical: EM cannot break an exact symmetry
    g0 = split_grammar(treebank_grammar(tb), 2, np.random.default_rng(3), noise=0.0)
    p0 = TreeParser(g0, tb)
    b = EM(g0, ShardedEstep(p0, 1), np.ones(len(g0)), g0.weights, {"iterations": 5, "tolerance": 0.0},
           np.random.default_rng(0))
    for _ in range(5):
        b.update()
    w = dict(zip(g0.keys(), b.weights()))
    assert w["NP@0 --> DT@0 NN@0"] == pytest.approx(w["NP@1 --> DT@0 NN@0"], rel=1e-12)


def test_cvb_local_theta_path_matches_the_per_lhs_refresh():
    """Above full_refresh_rules CVB on trees computes theta only on the rules each tree reads, from
    LHS totals kept by the changes: the same sweeps as the per-LHS refresh up to rounding."""
    g, tb, p = setup(h=3)
    prior = np.full(len(g), 0.5)
    runs = []
    for local in (True, False):
        cls = type("C", (CVB,), {"full_refresh_rules": 10})
        parser = p if local else DenseOnly(p)
        a = cls(g, ShardedEstep(parser, 1), prior, g.weights, {"iterations": 3}, np.random.default_rng(7))
        assert (a.lhs_tot is not None) == local
        objs = [a.update().objective for _ in range(3)]
        runs.append((a.alpha_hat.copy(), objs))
        if local:
            state = a.get_state()
            b = cls(g, ShardedEstep(parser, 1), prior, g.weights, {"iterations": 4}, np.random.default_rng(7))
            b.set_state(state)
            np.testing.assert_array_equal(b.lhs_tot, a.lhs_tot)
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-10)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-10)
