"""Constrained DMV parsers (Cohen & Smith 2009) against brute-force enumeration,
the mixture C-step polytope, and a few Mixture iterations."""
from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest

from grind.infer.constraints import (
    constrained_parser,
    intersect,
    is_noun,
    is_verb,
    parse_mixture_spec,
    parse_spec,
    satisfies,
)
from grind.grammars.dmv import dmv_grammar, dmv_params, tree_logprob_eq4
from grind.kernels.dmv import DMVParser
from grind.errors import InputError
from grind.infer.mixture import Mixture, c_step
from grind.infer.training import ShardedEstep

TAGS = ["NN", "VB", "DT", "NOUN", "VERB", "MD", "JJ"]
SPECS = ["RA", "AR", "LC", "VAR", "NS", "SD", "SD2", "RA+VAR+SD", "NS+SD2", "VAR+NS", "LC+VAR"]


# ---------------------------------------------------------------- oracle

def is_projective_tree(heads):
    n = len(heads)
    if sum(h == 0 for h in heads) != 1:
        return False
    for i in range(n):
        j, steps = i, 0
        while heads[j] != 0:
            j, steps = heads[j] - 1, steps + 1
            if steps > n:
                return False

    def dominates(h, x):                       # h is an ancestor-or-self of x (0-based)
        while x != h and heads[x] != 0:
            x = heads[x] - 1
        return x == h

    for d, h in enumerate(heads):
        if h:
            for k in range(min(h - 1, d) + 1, max(h - 1, d)):
                if not dominates(h - 1, k):
                    return False
    return True


_TREES = {}


def all_trees(n):
    if n not in _TREES:
        _TREES[n] = [h for h in itertools.product(range(n + 1), repeat=n) if is_projective_tree(h)]
    return _TREES[n]


def logsumexp(xs):
    xs = [x for x in xs if x > -math.inf]
    if not xs:
        return -math.inf
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def corpus(seed, lengths=(1, 2, 3, 4, 5, 5, 5)):
    rng = np.random.default_rng(seed)
    sents = [list(rng.choice(TAGS, size=n)) for n in lengths]
    sents.append(["DT", "NN", "NN", "NOUN", "VB", "NN", "NN"][:5])   # noun runs and a verb
    g = dmv_grammar(sents)
    w = np.exp(rng.uniform(np.log(0.05), np.log(3.0), size=len(g)))
    return g, g.normalize(w), sents


# ---------------------------------------------------------------- masks

def test_mask_definitions():
    toks = ["DT", "NN", "NNS", "VBZ", "NOUN", "PROPN"]
    n = len(toks)
    assert satisfies(parse_spec("LC"), toks, [2, 3, 4, 5, 6, 0])
    assert satisfies(parse_spec("AR"), toks, [6, 6, 6, 6, 6, 0])
    assert not satisfies(parse_spec("RA"), toks, [0, 1, 2, 3, 4, 5])
    assert satisfies(parse_spec("RA"), toks, [3, 3, 4, 6, 6, 0])
    assert satisfies(parse_spec("VAR"), toks, [4, 4, 4, 0, 4, 4])
    assert not satisfies(parse_spec("VAR"), toks, [0, 1, 2, 3, 4, 5])
    assert satisfies(parse_spec("VAR"), ["DT", "NN"], [2, 0])          # no verb: any root
    arc, root = parse_spec("NS")(toks, n)
    assert arc[:, 1].tolist() == [False, False, True, False, False, False]   # NN -> NNS
    assert arc[5, 4] and arc[:, 4].sum() == 1 and not root[1] and not root[4] and root[5]
    assert arc[:, 2].sum() == n - 1 and arc[:, 3].sum() == n - 1         # run ends unconstrained
    arc, _ = parse_spec("SD")(toks, n)
    assert arc[0, 4] and not arc[0, 5] and not arc[0, 0]
    assert is_verb("MD") and is_verb("AUX") and is_verb("VBD") and not is_verb("NN")
    assert is_noun("NNPS") and is_noun("PROPN") and not is_noun("VB")
    assert [name for name, _ in parse_mixture_spec("RA+VAR+SD, lc")] == ["RA+VAR+SD", "lc"]
    with pytest.raises(InputError):
        parse_spec("RA+XX")
    with pytest.raises(InputError):
        parse_spec("RA++SD")


def test_intersection_is_and():
    toks = ["NN", "VB", "NN", "NN", "DT"]
    combo = parse_spec("RA+VAR+SD2")
    parts = [parse_spec(s) for s in ("RA", "VAR", "SD2")]
    for t in all_trees(5):
        assert satisfies(combo, toks, t) == all(satisfies(m, toks, t) for m in parts)
    assert satisfies(intersect(), toks, all_trees(5)[0])


# ---------------------------------------------------------------- parsers vs enumeration

@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", [0, 1])
def test_masked_parser_matches_enumeration(spec, seed):
    g, w, sents = corpus(seed)
    mask = parse_spec(spec)
    p = constrained_parser(g, sents, spec)
    params = dmv_params(g, w)
    _counts, logz = p.inside_outside(w)
    vh, vscore = p.viterbi_heads(w)
    rng = np.random.default_rng(seed)
    sampled = [p.sample_trees(w, rng)[1] for _ in range(20)]
    post = p.arc_posteriors(w)
    for k, s in enumerate(sents):
        trees = all_trees(len(s))
        lp = {t: tree_logprob_eq4(params, s, t) for t in trees}
        sat = [t for t in trees if satisfies(mask, s, t)]
        ref = logsumexp([lp[t] for t in sat])
        if not sat:
            assert logz[k] == -math.inf and vh[k] is None and post[k] is None
            continue
        assert logz[k] == pytest.approx(ref, abs=1e-9), (s, spec)
        best = max(lp[t] for t in sat)
        assert satisfies(mask, s, vh[k]) and vscore[k] == pytest.approx(best, abs=1e-9)
        assert lp[tuple(int(x) for x in vh[k])] == pytest.approx(best, abs=1e-9)
        for hs in sampled:
            assert tuple(int(x) for x in hs[k]) in set(sat)
        # arc posteriors: zero mass on forbidden arcs / roots, each column sums to 1
        arc, root = mask(s, len(s))
        P = post[k]
        assert np.allclose(P.sum(axis=0), 1.0)
        assert np.all(P[0][~root] < 1e-12) and np.all(P[1:][~arc] < 1e-12)


def test_counts_match_unconstrained_when_mask_is_all():
    g, w, sents = corpus(3)
    a = DMVParser(g, sents).inside_outside(w)
    b = constrained_parser(g, sents, intersect()).inside_outside(w)
    assert np.allclose(a[0], b[0]) and np.allclose(a[1], b[1])


def test_per_sentence_masks_and_failures():
    g, w, sents = corpus(4)
    sents = sents + [["ZZ"], []]                        # unknown word, empty sentence
    masks = [parse_spec("LC") if k % 2 else None for k in range(len(sents))]
    p = constrained_parser(g, sents, masks)
    u = DMVParser(g, sents)
    _, lz = p.inside_outside(w)
    _, lu = u.inside_outside(w)
    assert set(p.failures) == set(u.failures) == {len(sents) - 2, len(sents) - 1}
    for k in range(len(sents) - 2):
        if k % 2 == 0:
            assert lz[k] == pytest.approx(lu[k])
        else:
            n = len(sents[k])
            t = [i + 2 for i in range(n - 1)] + [0]
            assert lz[k] == pytest.approx(tree_logprob_eq4(dmv_params(g, w), sents[k], t))
    assert lz[-1] == -np.inf and lz[-2] == -np.inf
    with pytest.raises(ValueError):
        constrained_parser(g, sents, masks[:-1])


def test_split_input_is_accepted():
    g, w, sents = corpus(5)
    split = [[x for t in s for x in (t + "_l", t + "_r")] for s in sents]
    a = constrained_parser(g, sents, "RA+SD").inside_outside(w)[1]
    b = constrained_parser(g, split, "RA+SD").inside_outside(w)[1]
    assert np.allclose(a, b)


# ---------------------------------------------------------------- C-step

def test_c_step_segment_and_lp():
    b = c_step([-10.0, -12.0], 0.0, 0.6)
    assert np.allclose(b, [0.6, 0.4])
    b = c_step([-10.0, -12.0], 0.7, 1.0)
    assert np.allclose(b, [1.0, 0.0])
    b = c_step([-12.0, -10.0], 0.3, 0.8)                 # (never happens for real: L_0 >= L_k)
    assert np.allclose(b, [0.3, 0.7])
    rng = np.random.default_rng(0)
    for _ in range(50):
        L = np.sort(rng.normal(size=4))[::-1] * 10
        rng.shuffle(L[1:])
        lo, hi = sorted(rng.uniform(0, 1, 2))
        mn = rng.uniform(0, (1 - hi) / 3) if rng.uniform() < 0.5 else 0.0
        b = c_step(L, lo, hi, mn)
        assert abs(b.sum() - 1) < 1e-9 and np.all(b >= -1e-12)
        assert lo - 1e-9 <= b[0] <= hi + 1e-9 and np.all(b[1:] >= mn - 1e-9)
        # brute force over a grid of the polytope
        best = -np.inf
        for b0 in np.linspace(lo, hi, 11):
            rest = 1 - b0 - 3 * mn
            if rest < -1e-12:
                continue
            for j in range(3):
                x = np.full(4, mn)
                x[0] = b0
                x[1 + j] += rest
                best = max(best, float(x @ L))
        assert float(b @ L) >= best - 1e-7
    with pytest.raises(InputError):
        c_step([0.0, -1.0, -2.0], 0.9, 1.0, 0.2)


# ---------------------------------------------------------------- Mixture

def mixture_setup(seed=0, **kw):
    rng = np.random.default_rng(seed)
    sents = [list(rng.choice(["NN", "VB", "DT", "JJ"], size=n)) for n in rng.integers(2, 8, 30)]
    g = dmv_grammar(sents)
    kw.setdefault("mix_base", "em")          # these tests pin the MAP-EM base (the default is ln)
    cfg = SimpleNamespace(iterations=8, tolerance=0.0, **kw)
    estep = ShardedEstep(DMVParser(g, sents))
    return g, estep, Mixture(g, estep, np.ones(len(g)), g.probabilities(), cfg, rng)


def test_mixture_runs_and_respects_annealed_polytope():
    g, _estep, m = mixture_setup(mix_constraints="RA+VAR+SD", mix_start=0.5, mix_rate=0.1, mix_end=0.75)
    steps = []
    while (st := m.step()) is not None:
        steps.append(st)
    assert len(steps) == 8
    for t, st in enumerate(steps):
        b0 = st.extra["beta_meanfield"]
        assert b0 == pytest.approx(min(0.75, 0.5 + 0.1 * t))          # L_0 >= L_1: b0 = hi
        assert b0 + st.extra["beta_RA+VAR+SD"] == pytest.approx(1.0)
        assert np.isfinite(st.objective) and st.objective <= st.extra["loglik"] + 1e-9
    # with beta fixed (annealing over), the objective does not decrease
    objs = [s.objective for s in steps[3:]]
    assert all(b >= a - 1e-8 for a, b in zip(objs, objs[1:]))
    theta = m.weights()
    assert np.allclose(g.lhs_totals(theta), 1.0)
    # state round trip
    s = m.get_state()
    _, _, m2 = mixture_setup(mix_constraints="RA+VAR+SD")
    m2.set_state(s)
    assert np.array_equal(m2.theta, m.theta) and np.array_equal(m2.beta, m.beta)


def test_mixture_fixed_coefficients_and_several_components():
    _, _, m = mixture_setup(mix_constraints="RA,LC+VAR", mix_coef="0.6,0.3,0.1")
    objs = [m.step().objective for _ in range(5)]
    assert np.allclose(m.beta, [0.6, 0.3, 0.1])
    assert all(b >= a - 1e-8 for a, b in zip(objs, objs[1:]))         # fixed beta: monotone
    _g, _estep, m = mixture_setup(mix_constraints="RA,LC,SD", mix_start=0.5, mix_min=0.1)
    st = m.step()
    b = [st.extra[f"beta_{k}"] for k in ("meanfield", "RA", "LC", "SD")]
    assert b[0] == pytest.approx(0.5) and sum(b) == pytest.approx(1.0) and min(b[1:]) >= 0.1 - 1e-9


def test_mixture_with_weight_one_on_meanfield_is_em():
    from grind.infer.em import EM
    g, estep, m = mixture_setup(mix_constraints="RA", mix_coef=[1.0, 0.0])
    em = EM(g, estep, np.ones(len(g)), g.probabilities(), SimpleNamespace(iterations=5, tolerance=0.0))
    for _ in range(5):
        a, b = m.step(), em.step()
        assert a.objective == pytest.approx(b.objective)
    assert np.allclose(m.theta, em.theta)


def test_mixture_unsatisfiable_sentences_fall_back():
    sents = [["DT", "VB", "NN"], ["VB", "NN"]]      # RA+VAR: last word must be the root and a verb
    g = dmv_grammar(sents)
    estep = ShardedEstep(DMVParser(g, sents))
    m = Mixture(g, estep, np.ones(len(g)), g.probabilities(),
                SimpleNamespace(iterations=2, tolerance=0.0, mix_constraints="RA+VAR", mix_base="em"))
    parts = m.component_estep(g.weights)
    c0, z0 = parts[0]
    c1, z1 = parts[1]
    assert z1[0] == pytest.approx(z0[0]) and z1[1] == pytest.approx(z0[1])
    assert np.allclose(c1, c0)
    assert m.step() is not None
