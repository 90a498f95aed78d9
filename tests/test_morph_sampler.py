"""The Hastings sampler on morphology (template) grammars, with and without
batched proposals (``--proposal-batch``, see :mod:`grind.infer.hastings`):
the stationary distribution is the exact collapsed posterior, and the planted
segmentation is recovered at a small alpha."""
from __future__ import annotations

import itertools
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest

import oracle
from grind.eval.segmentation import baseline_rows, score
from grind.grammars.morph import builtin_templates, morph_grammar, parse_templates, segmentation
from grind.grammars.planted import planted_inventory, planted_words
from grind.infer.hastings import Hastings
from grind.infer.training import ShardedEstep
from grind.kernels.segment import SegmentParser

WORDS = [list("ab"), list("abc"), list("ba")]
TEMPLATES = parse_templates([(1, "Word --> Stem | Stem Suf")])


def make(g, words, alpha, sweeps, seed, batch, temp_start=1.0, anneal=None):
    rng = np.random.default_rng(seed)
    cfg = SimpleNamespace(iterations=sweeps, tolerance=0.0, temp_start=temp_start, anneal_sweeps=anneal,
                          proposal_batch=batch)
    prior = np.full(len(g), float(alpha))
    return Hastings(g, ShardedEstep(SegmentParser(g, words)), prior, g.weights, cfg, rng)


def derivations(g, word):
    """Every derivation of ``word`` as (key, rule counts), in the kernel's row format."""
    index = {rule: r for r, rule in enumerate(g.rules)}
    n, out = len(word), []
    for r, (lhs, slots) in enumerate(g.rules):
        if lhs != g.start:
            continue
        k = len(slots)
        for cuts in itertools.combinations(range(1, n), k - 1):
            ends = (0, *cuts, n)
            rows = [(r, 0, n)]
            for m, s in enumerate(slots):
                rr = index.get((s, tuple(word[ends[m]:ends[m + 1]])))
                if rr is None:
                    break
                rows.append((rr, ends[m], ends[m + 1]))
            else:
                key = tuple(rows)
                out.append((key, np.bincount([x[0] for x in rows], minlength=len(g))))
    return out


def exact_posterior(g, words, alpha):
    """{joint key: P(t | w, alpha)} by enumeration, P ∝ prod_A B(f_A + alpha_A) / B(alpha_A) (JGG Eq. 3)."""
    def log_beta(a):
        return math.fsum(math.lgamma(x) for x in a) - math.lgamma(math.fsum(a))
    lhs_sets = [np.flatnonzero(g.lhs == A) for A in set(g.lhs.tolist())]
    logp = {}
    for combo in itertools.product(*[derivations(g, w) for w in words]):
        f = sum(c for _, c in combo)
        logp[tuple(k for k, _ in combo)] = math.fsum(log_beta(f[rs] + alpha) - log_beta(np.full(len(rs), alpha))
                                                     for rs in lhs_sets)
    m = max(logp.values())
    z = math.fsum(math.exp(v - m) for v in logp.values())
    return {k: math.exp(v - m) / z for k, v in logp.items()}


def run_chain(g, words, alpha, batch, sweeps=7000, burn=200, thin=2, seed=0):
    algo = make(g, words, alpha, sweeps, seed, batch)
    keys = []
    while (st := algo.step()) is not None:
        if st.step > burn and (st.step - burn) % thin == 0:
            keys.append(tuple(tuple(map(tuple, d.tolist())) for d in algo.trees))
    return keys


def tv(keys, post):
    n = len(keys)
    emp = {}
    for k in keys:
        emp[k] = emp.get(k, 0) + 1
    return 0.5 * sum(abs(emp.get(k, 0) / n - p) for k, p in post.items()) + \
        0.5 * sum(c / n for k, c in emp.items() if k not in post)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2])
def test_batched_and_single_proposals_reach_the_exact_posterior(batch):
    g = morph_grammar(WORDS, TEMPLATES)
    alpha = 0.2
    post = exact_posterior(g, WORDS, alpha)
    assert len(post) == 2 * 3 * 2
    keys = run_chain(g, WORDS, alpha, batch)
    p, cells, outside = oracle.chisquare_gof(keys, post)
    assert outside == 0
    assert cells >= 6 and p > 1e-3, (p, cells)
    assert tv(keys, post) < 0.03
    # negative control: the same samples are far from the posterior under another alpha
    wrong = exact_posterior(g, WORDS, 5.0)
    assert oracle.chisquare_gof(keys, wrong)[0] < 1e-3 and tv(keys, wrong) > 0.05


def test_batch_one_is_the_per_sentence_sampler():
    """--proposal-batch 1 takes the per-sentence path: same trees as a run without the option."""
    g = morph_grammar(WORDS, TEMPLATES)
    a = make(g, WORDS, 0.3, 30, 5, 1)
    rng = np.random.default_rng(5)
    cfg = SimpleNamespace(iterations=30, tolerance=0.0, temp_start=1.0, anneal_sweeps=None)
    b = Hastings(g, ShardedEstep(SegmentParser(g, WORDS)), np.full(len(g), 0.3), g.weights, cfg, rng)
    sa = [s.objective for s in iter(a.step, None)]
    sb = [s.objective for s in iter(b.step, None)]
    assert sa == sb
    for x, y in zip(a.trees, b.trees):
        np.testing.assert_array_equal(x, y)


def test_batched_counts_stay_the_counts_of_the_trees():
    g = morph_grammar(WORDS * 3, TEMPLATES)
    algo = make(g, WORDS * 3, 0.1, 20, 1, 4, temp_start=3.0)
    while algo.step() is not None:
        f = np.bincount(np.concatenate([d[:, 0] for d in algo.trees]), minlength=len(g))
        np.testing.assert_array_equal(algo.counts, f)


def test_planted_segmentation_is_recovered_at_small_alpha():
    t0 = time.perf_counter()
    rng = np.random.default_rng(11)
    pre, stems, suf = planted_inventory(rng, n_prefixes=4, n_stems=25, n_suffixes=6)
    gold = {}
    for word, morphs in planted_words(600, rng, pre, stems, suf):
        gold.setdefault(word, tuple(segmentation(word, morphs)))
    words = [list(w) for w in gold]
    g = morph_grammar(words, builtin_templates("czech"))
    algo = make(g, words, 1e-3, 60, 3, 32, temp_start=5.0, anneal=45)
    while algo.step() is not None:
        pass
    pred = {w: tuple((int(i), int(j)) for _, i, j in d[1:]) for w, d in zip(gold, algo.trees)}
    row, base = score(gold, pred), baseline_rows(gold)
    assert row["morph_F"] > base["one-morph"]["morph_F"] + 0.05, (row["morph_F"], base["one-morph"]["morph_F"])
    assert row["morph_F"] > base["chars"]["morph_F"] + 0.05, (row["morph_F"], base["chars"]["morph_F"])
    assert time.perf_counter() - t0 < 30
