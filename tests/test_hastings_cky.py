"""The collapsed Metropolis-Hastings sampler's CKY kernel sweep (``CKYParser.hastings_sweep``,
csrc/cky.pyx ``Kernel.hastings``; the math in :mod:`grind.infer.hastings`), on a grammar with
unary chains, an n-ary rule, a rule mixing a terminal with a nonterminal and a two-token lexical
rule (trees of one sentence have different numbers of nodes), on both kernel paths:

* its chain's stationary distribution over the joint tree assignments of a tiny corpus is the
  exact collapsed posterior (enumerated by tests/oracle.py), at T = 1 and at a fixed T = 2,
  with negative controls (another alpha, the other temperature);
* the kernel path is really taken (the parser's sampler is never called); counts stay those of
  the trees; switching to the Python path and back, and checkpoints, see the same trees;
* batched proposals (--proposal-batch > 1) take the Python path.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import oracle
from grind.grammars.grammar import Grammar
from grind.infer.hastings import Hastings
from grind.infer.training import ShardedEstep
from grind.kernels.cky import CKYParser
import test_hastings_fast as fast
from test_hastings_fast import P_MIN, run

RULES = [("S", ("A", "B")), ("S", ("B", "A")), ("S", ("A",)), ("S", ("A", "b", "A")), ("A", ("A", "A")),
         ("A", ("C",)), ("A", ("a",)), ("C", ("a",)), ("C", ("a", "b")), ("B", ("b",)), ("B", ("A", "B")),
         ("B", ("a", "B"))]
SENTS = [["a", "b"], ["a", "a"], ["b", "a"], ["a", "b", "a"]]


def no_python_sampler(algo, monkeypatch):
    """Make the parser's own sampler fail, so that only the kernel sweep can run."""
    def refuse(*a, **k):
        raise AssertionError("the kernel path called parser.sample")
    monkeypatch.setattr(algo.parser, "sample", refuse)


def grammar():
    return Grammar(RULES, np.ones(len(RULES)), "S")


def make(alpha, sweeps, seed=0, path="auto", batch=1, fast=True, sents=SENTS):
    g = grammar()
    rng = np.random.default_rng(seed)
    cfg = SimpleNamespace(iterations=sweeps, tolerance=0.0, temp_start=1.0, anneal_sweeps=None, proposal_batch=batch)
    theta0 = g.normalize(np.exp(rng.standard_normal(len(g))))
    algo = Hastings(g, ShardedEstep(CKYParser(g, sents, path=path)), np.full(len(g), float(alpha)), theta0, cfg,
                    rng)
    algo.fast = fast
    return algo


def exact_posterior(alpha, power=1.0):
    """The collapsed posterior of SENTS (test_hastings_fast.exact_posterior on the sentences as they are)."""
    return fast.exact_posterior(grammar(), SENTS, alpha, power, tokens=list)


@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_kernel_chain_matches_exact_posterior(path, monkeypatch):
    alpha = 0.5
    algo = make(alpha, 12100, seed=1, path=path)
    assert algo.parser.path == path
    no_python_sampler(algo, monkeypatch)
    keys = run(algo)
    post = exact_posterior(alpha)
    assert 20 <= len(post) <= 400
    sizes = {len(d) for s in SENTS[:1] for d, _ in oracle.enumerate_derivations(algo.g, np.ones(len(algo.g)), s)}
    assert len(sizes) > 1                                    # trees of one sentence differ in size
    p, cells, outside = oracle.chisquare_gof(keys, post)
    assert outside == 0, "a sampled tree is not a derivation of its sentence"
    assert cells >= 10 and p > P_MIN, (p, cells)
    assert oracle.chisquare_gof(keys, exact_posterior(5.0))[0] < P_MIN


def test_kernel_chain_tempered_target():
    alpha, T = 0.5, 2.0
    keys = run(make(alpha, 12100, seed=7), fixed_t=T)
    p, _, outside = oracle.chisquare_gof(keys, exact_posterior(alpha, power=1 / T))
    assert outside == 0 and p > P_MIN, p
    assert oracle.chisquare_gof(keys, exact_posterior(alpha))[0] < P_MIN


@pytest.mark.parametrize("path", ["dense", "sparse"])
def test_counts_stay_the_counts_of_the_trees_across_paths_and_checkpoints(path):
    rng = np.random.default_rng(4)
    sents = [list(rng.choice(["a", "b"], size=rng.integers(1, 7))) for _ in range(40)]
    algo = make(0.1, 16, seed=2, path=path, sents=sents)
    skipped = {k for k, d in enumerate(algo.trees) if d is None}      # no tree: skipped (reported) throughout
    assert 0 < len(skipped) < len(sents) // 2
    R = len(algo.g)
    accepted = []
    for k in range(16):
        algo.fast = k % 4 != 2
        st = algo.step()
        assert (algo._flat is not None) == algo.fast
        trees = [d for d in algo.trees if d is not None]
        assert {k for k, d in enumerate(algo.trees) if d is None} == skipped
        f = np.bincount(np.concatenate([d[:, 0] for d in trees]), minlength=R)
        np.testing.assert_array_equal(algo.counts, f)
        np.testing.assert_array_equal(algo.n[R:], np.bincount(algo.g.lhs, weights=f, minlength=len(algo.n) - R))
        for d, s in zip(algo.trees, sents):
            assert d is None or oracle.is_derivation_of(algo.g, s, d)
        state = algo.get_state()
        np.testing.assert_array_equal(state["tree_rows"], np.concatenate(trees))
        np.testing.assert_array_equal(state["tree_len"], [-1 if d is None else len(d) for d in algo.trees])
        accepted.append(st.extra["acceptance"])
    assert 0.0 < np.mean(accepted) < 1.0


def test_batched_proposals_take_the_python_path():
    algo = make(0.5, 2, batch=3)
    algo.step()
    assert algo._flat is None and algo.uses is not None
