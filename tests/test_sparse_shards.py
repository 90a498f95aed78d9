"""The E-step's sparse shard counts (``inside_outside_sparse``): the same numbers
as the dense ``inside_outside``, bit for bit, and the shard reduction the same
whichever form its shards come in."""
from __future__ import annotations

import numpy as np
import pytest

from grind.errors import NumericalError
from grind.grammars.dmv import CHOOSE_L, dmv_index
from grind.infer import training
from grind.infer.training import ShardedEstep
from grind.kernels.contract import ChartParser
from test_dmv_cvb import CASES, random_weights


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
def case(request):
    return request.param


def flushed_weights(g, seed):
    """Random weights, 5% of the choose rules below FLUSH (read as 0 by every path)."""
    w = random_weights(g, seed)
    choose = dmv_index(g).kind >= CHOOSE_L
    w[choose & (np.random.default_rng(seed + 7).random(len(g)) < 0.05)] = 1e-250
    return w


def test_sparse_counts_equal_dense_bit_for_bit(case):
    name, g, p = case
    rng = np.random.default_rng(5)
    for call in range(4):       # the scratch vector is reused: each call must start from zero
        w = flushed_weights(g, call)
        idx = np.sort(rng.choice(len(p.sentences), size=len(p.sentences) // (call + 1), replace=False))
        dense, lz = p.inside_outside(w, idx)
        rules, values, z = p.inside_outside_sparse(w, idx)
        np.testing.assert_array_equal(z, lz)
        assert len(np.unique(rules)) == len(rules)
        full = np.zeros(len(g))
        full[rules] = values
        np.testing.assert_array_equal(full, dense)
        assert np.flatnonzero(dense).size <= rules.size
        scratch, mark = p._scratch()
        assert not scratch.any() and not mark.any()


def test_sparse_counts_of_bad_weights_as_dense_and_scratch_left_clean():
    """NaN choose weights: whatever the dense path gives (here: no tree of
    positive weight), the sparse path gives too, and the next call starts clean."""
    name, g, p = CASES[2]
    w = random_weights(g, 1)
    w[dmv_index(g).kind >= CHOOSE_L] = np.nan
    dense, lz = p.inside_outside(w)
    rules, values, z = p.inside_outside_sparse(w)
    np.testing.assert_array_equal(z, lz)
    assert np.isneginf(z).sum() > len(z) // 2
    full = np.zeros(len(g))
    full[rules] = values
    np.testing.assert_array_equal(full, dense)
    scratch, mark = p._scratch()
    assert not scratch.any() and not mark.any()
    w[:] = np.nan                       # every weight: log Z NaN for some sentence
    with pytest.raises(NumericalError):
        p.inside_outside(w)
    with pytest.raises(NumericalError):
        p.inside_outside_sparse(w)
    assert not scratch.any() and not mark.any()
    w = random_weights(g, 2)
    rules, values, _ = p.inside_outside_sparse(w)
    full = np.zeros(len(g))
    full[rules] = values
    np.testing.assert_array_equal(full, p.inside_outside(w)[0])


@pytest.mark.parametrize("jobs", [1, 3])
def test_sharded_estep_sparse_reduction_equals_dense(monkeypatch, case, jobs):
    name, g, p = case
    w = flushed_weights(g, 4)
    dense = ShardedEstep(p, 1, shard=7)(w)
    monkeypatch.setattr(training, "SPARSE_RULES", 0)
    assert len(ShardedEstep(p, jobs, shard=7).shard_counts(w, np.arange(7))) == 3
    sparse = ShardedEstep(p, jobs, shard=7)(w)
    np.testing.assert_array_equal(sparse[0], dense[0])
    np.testing.assert_array_equal(sparse[1], dense[1])


def test_default_sparse_counts_of_the_contract():
    """A kernel without its own sparse path gets the dense counts' nonzero entries."""

    class Fixed(ChartParser):
        grammar = [0, 1, 2, 3]
        sentences = [["a"], ["b"]]
        failures: dict = {}

        def inside_outside(self, weights, idx=None):
            return np.array([0.0, 2.5, 0.0, 1.0]), np.array([-1.0, -2.0])

        def viterbi(self, weights, idx=None):
            raise NotImplementedError

        def sample(self, weights, rng, idx=None):
            raise NotImplementedError

    rules, values, z = Fixed().inside_outside_sparse(np.ones(4))
    assert rules.tolist() == [1, 3] and values.tolist() == [2.5, 1.0] and z.tolist() == [-1.0, -2.0]
    assert not Fixed.sparse_counts_pay


def test_dask_worker_task_returns_sparse_shards_reduced_to_the_same_counts(monkeypatch):
    """The task a Dask worker runs sends a large grammar's shard as (rules, values, logz)."""
    from grind.infer import dask_backend
    name, g, p = CASES[4]
    w = flushed_weights(g, 6)
    est = ShardedEstep(p, 1, shard=5)
    dense = est(w)
    monkeypatch.setattr(training, "SPARSE_RULES", 0)
    parts = [dask_backend.shard_estep(s, w, "test-sparse", lambda: p) for s in est.shards()]
    dask_backend.forget("test-sparse")
    assert all(len(part) == 3 for part in parts)
    counts, logz = est.reduce(parts)
    np.testing.assert_array_equal(counts, dense[0])
    np.testing.assert_array_equal(logz, dense[1])
