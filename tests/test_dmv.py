"""The split-head DMV: grammar scheme, Eq. 4, and the DMV kernel against
brute-force enumeration of projective trees (and the CKY kernel when built)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from grind.grammars.dmv import (derivation_heads, dmv_grammar, dmv_index, dmv_params, harmonic_counts,
                       heads_derivation, is_dmv_grammar, split_heads, tree_logprob_eq4)
from grind.kernels.dmv import DMVParser
from grind.kernels.eisner import eisner
from grind.errors import NumericalError
from grind.grammars.grammar import Grammar
from grind.kernels.select import make_parser

TAGS = ["a", "b", "c"]


# ---------------------------------------------------------------- oracles

def is_projective(heads):
    """Single root, acyclic, and every word between a head and its dependent
    descends from the head."""
    n = len(heads)
    if sum(h == 0 for h in heads) != 1:
        return False
    for i in range(n):                      # acyclic: walking up reaches the root
        j, steps = i, 0
        while heads[j] != 0:
            j, steps = heads[j] - 1, steps + 1
            if steps > n:
                return False
    for d, h in enumerate(heads):
        if h == 0:
            continue
        for k in range(min(h - 1, d) + 1, max(h - 1, d)):
            j = k
            while j != h - 1 and heads[j] != 0:
                j = heads[j] - 1
            if j != h - 1:
                return False
    return True


def all_trees(n):
    return [h for h in itertools.product(range(n + 1), repeat=n) if is_projective(h)]


def tree_logweight(g, w, sent, heads):
    """log of the product of the rule weights in the tree's derivation."""
    with np.errstate(divide="ignore"):
        return float(np.log(w)[heads_derivation(g, sent, heads)[:, 0]].sum())


def enumerate_sentence(g, w, sent):
    """(trees, log weights, derivation count vectors) of every projective tree."""
    trees = all_trees(len(sent))
    derivs = [heads_derivation(g, sent, t) for t in trees]
    lw = np.array([tree_logweight(g, w, sent, t) for t in trees])
    f = np.array([np.bincount(d[:, 0], minlength=len(g)) for d in derivs], dtype=float)
    return trees, lw, f


def check_derivation(g, tokens, rows):
    """rows is a well-formed PCFG derivation of ``tokens`` from S: pre-order,
    children's spans tile the parent's, terminals match."""
    pos = [0]

    def node(sym, a, b):
        r, s, e = rows[pos[0]]
        pos[0] += 1
        lhs, rhs = g.rules[r]
        assert (lhs, s, e) == (sym, a, b)
        k = a
        for x in rhs:
            if g.is_nonterminal(x):
                e2 = rows[pos[0]][2]
                node(x, k, e2)
                k = e2
            else:
                assert tokens[k] == x
                k += 1
        assert k == b

    node("S", 0, len(tokens))
    assert pos[0] == len(rows)


def random_weights(g, rng, normalized=True):
    w = np.exp(rng.uniform(np.log(0.05), np.log(3.0), size=len(g)))
    return g.normalize(w) if normalized else w


def case(seed, lengths=(1, 2, 3, 4, 5), normalized=True, lexicalized=False):
    rng = np.random.default_rng(seed)
    sents = [list(rng.choice(TAGS, size=n)) for n in lengths]
    g = dmv_grammar(sents, lexicalized=lexicalized)
    return g, random_weights(g, rng, normalized), sents


# ---------------------------------------------------------------- grammar

def test_grammar_scheme_and_meta():
    g = dmv_grammar([["a", "b"], ["b"]])
    assert g.start == "S" and g.meta["model"] == "dmv" and is_dmv_grammar(g)
    assert len(g) == 2 * 10 + 2 * 2 * 2
    np.testing.assert_allclose(g.lhs_totals(g.weights), 1.0)
    assert g.index["L'_a --> Y_b L_a"] >= 0 and g.index["R'_b --> R_b Y_a"] >= 0
    bad = Grammar(g.rules + [("L_a", ("b_l",))], np.ones(len(g) + 1), "S")
    assert not is_dmv_grammar(bad)
    assert not is_dmv_grammar(Grammar([("S", ("a",))], np.ones(1), "S"))
    assert split_heads(["a", "b_x"]) == ["a_l", "a_r", "b_x_l", "b_x_r"]


def test_lexicalized_only_cooccurring_choose_rules():
    g = dmv_grammar([["the", "dog", "barks"], ["dog"]], lexicalized=True)
    choose = {k for k in g.keys() if "'_" in k.split(" --> ")[0]}
    assert choose == {"L'_dog --> Y_the L_dog", "L'_barks --> Y_the L_barks",
                      "L'_barks --> Y_dog L_barks", "R'_the --> R_the Y_dog",
                      "R'_the --> R_the Y_barks", "R'_dog --> R_dog Y_barks"}


def test_heads_with_underscores_roundtrip():
    """Head types with underscores, quotes and digits; the grammar is rebuilt
    from its rules so the scheme is recognised by parsing symbol names."""
    sent = ["N_l", "_", "x_r_", "L_", "'s", "0_"]
    g0 = dmv_grammar([sent])
    g = Grammar(list(g0.rules), g0.weights, "S")
    assert is_dmv_grammar(g) and dmv_index(g).types == dmv_index(g0).types
    w = random_weights(g, np.random.default_rng(1))
    for heads in all_trees(len(sent))[::37]:
        rows = heads_derivation(g, sent, heads)
        check_derivation(g, split_heads(sent), rows)
        assert list(derivation_heads(g, rows, len(sent))) == list(heads)
    p = DMVParser(g, [sent])
    ref = np.logaddexp.reduce([tree_logweight(g, w, sent, t) for t in all_trees(len(sent))])
    assert p.inside_outside(w)[1][0] == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_grammar_tree_probability_is_eq4(seed):
    """Product of rule weights of the split-head derivation == Cohen & Smith
    Eq. 4 computed head-outward, closest dependent first (pins down valence)."""
    g, w, sents = case(seed)
    params = dmv_params(g, w)
    params.pop("nostop")                                 # Eq. 4 uses 1 - STOP
    for sent in sents:
        for heads in all_trees(len(sent)):
            rows = heads_derivation(g, sent, heads)
            check_derivation(g, split_heads(sent), rows)
            assert list(derivation_heads(g, rows, len(sent))) == list(heads)
            assert tree_logweight(g, w, sent, heads) == pytest.approx(
                tree_logprob_eq4(params, sent, heads), rel=1e-12, abs=1e-12)


def test_eq4_valence_is_not_symmetric():
    """Negative control: swapping the valence-0/1 STOP parameters changes Eq. 4
    for a head with two dependents on one side."""
    g, w, _ = case(3)
    p = dmv_params(g, w)
    p.pop("nostop")
    sent, heads = ["a", "b", "c"], (0, 1, 1)
    swapped = dict(p, stop={(h, d, 1 - v): x for (h, d, v), x in p["stop"].items()})
    assert tree_logprob_eq4(p, sent, heads) != pytest.approx(tree_logprob_eq4(swapped, sent, heads))


# ---------------------------------------------------------------- kernel vs enumeration

@pytest.mark.parametrize("seed,normalized", [(0, True), (1, False), (2, False), (3, True)])
def test_inside_outside_matches_enumeration(seed, normalized):
    g, w, sents = case(seed, normalized=normalized)
    p = DMVParser(g, sents)
    counts, logz = p.inside_outside(w)
    want = np.zeros(len(g))
    for k, sent in enumerate(sents):
        _, lw, f = enumerate_sentence(g, w, sent)
        lz = np.logaddexp.reduce(lw)
        assert logz[k] == pytest.approx(lz, rel=1e-12, abs=1e-12)
        want += np.exp(lw - lz) @ f
        c1, _ = p.inside_outside(w, [k])
        np.testing.assert_allclose(c1, np.exp(lw - lz) @ f, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(counts, want, rtol=1e-10, atol=1e-12)


def test_eq4_sum_is_partition_function():
    g, w, sents = case(4)
    params = dmv_params(g, w)
    p = DMVParser(g, sents)
    _, logz = p.inside_outside(w)
    for k, sent in enumerate(sents):
        tot = sum(math.exp(tree_logprob_eq4(params, sent, t)) for t in all_trees(len(sent)))
        assert math.log(tot) == pytest.approx(logz[k], rel=1e-12)


@pytest.mark.parametrize("seed", [5, 6])
def test_viterbi_and_posteriors_match_enumeration(seed):
    g, w, sents = case(seed, normalized=bool(seed % 2))
    p = DMVParser(g, sents)
    derivs, lp = p.viterbi(w)
    hs, _ = p.viterbi_heads(w)
    posts = p.arc_posteriors(w)
    for k, sent in enumerate(sents):
        trees, lw, _ = enumerate_sentence(g, w, sent)
        best = int(np.argmax(lw))
        assert tuple(hs[k]) == trees[best]
        assert lp[k] == pytest.approx(lw[best], rel=1e-12, abs=1e-12)
        np.testing.assert_array_equal(derivs[k], heads_derivation(g, sent, trees[best]))
        pr = np.exp(lw - np.logaddexp.reduce(lw))
        want = np.zeros((len(sent) + 1, len(sent)))
        for t, q in zip(trees, pr):
            want[list(t), range(len(sent))] += q
        np.testing.assert_allclose(posts[k], want, rtol=1e-10, atol=1e-13)


def test_sampling_chi_square_with_negative_control():
    g, w, _ = case(7)
    sent = ["a", "b", "c", "a"]
    p = DMVParser(g, [sent])
    N = 20000
    derivs, heads, _ = p.sample_trees(w, np.random.default_rng(11), np.zeros(N, dtype=np.int64))
    trees, lw, _ = enumerate_sentence(g, w, sent)
    pos = {t: i for i, t in enumerate(trees)}
    obs = np.bincount([pos[tuple(h)] for h in heads], minlength=len(trees))
    for d, h in zip(derivs[:200], heads[:200]):
        np.testing.assert_array_equal(d, heads_derivation(g, sent, h))
    pr = np.exp(lw - np.logaddexp.reduce(lw))
    assert stats.chisquare(obs, pr * N).pvalue > 1e-4
    other = random_weights(g, np.random.default_rng(99))           # negative control
    _, lw2, _ = enumerate_sentence(g, other, sent)
    pr2 = np.exp(lw2 - np.logaddexp.reduce(lw2))
    assert stats.chisquare(obs, pr2 * N).pvalue < 1e-6
    again = p.sample(w, np.random.default_rng(11), np.zeros(N, dtype=np.int64))
    assert all(np.array_equal(a, b) for a, b in zip(derivs, again))


def test_failures_zero_weight_and_split_input():
    g = dmv_grammar([["a", "b"], ["b"]])
    sents = [["a", "b"], ["a", "zzz"], [], ["a_l", "a_r", "b_l", "b_r"], ["b"]]
    p = make_parser(g, sents)
    assert isinstance(p, DMVParser)
    assert set(p.failures) == {1, 2}
    w = g.weights.copy()
    c, lz = p.inside_outside(w)
    assert np.isneginf(lz[[1, 2]]).all() and lz[3] == pytest.approx(lz[0])
    assert c[g.index["Y_a --> L0_a R0_a"]] == pytest.approx(2.0)
    w[g.index["S --> Y_b"]] = 0.0                                  # "b" cannot be the root
    c, lz = p.inside_outside(w, [4])
    assert np.isneginf(lz[0]) and not c.any()
    d, lp = p.viterbi(w, [4, 0])
    assert d[0] is None and np.isneginf(lp[0]) and d[1] is not None
    assert p.sample(w, np.random.default_rng(0), [4])[0] is None
    w[g.index["S --> Y_a"]] = np.nan
    with pytest.raises(NumericalError):
        p.inside_outside(w)


# ---------------------------------------------------------------- long sentences

def log_inside_reference(g, w, sent):
    """log Z of the same split-head recursions in log space (numpy logaddexp)."""
    ix, n = dmv_index(g), len(sent)
    with np.errstate(divide="ignore"):
        lw = np.log(np.append(w, 0.0))                 # index -1 -> log 0
    t = np.array([ix.type_id[x] for x in sent])
    tr = ix.type_rules[t]
    y = lw[tr[:, 1]]
    h, d = np.meshgrid(range(n), range(n), indexing="ij")
    A = lw[ix.arc_rules(t[h], t[d], d > h)] + y[None, :]
    st = lw[tr[:, 2:]]                                 # sL0 nL0 sL1 nL1 sR0 nR0 sR1 nR1
    NEG = -np.inf
    CL = np.full((2, n, n), NEG)
    CR = np.full((2, n, n), NEG)
    for v in (0, 1):
        CL[v][range(n), range(n)] = st[:, 2 * v]
        CR[v][range(n), range(n)] = st[:, 4 + 2 * v]
    I = np.full((n, n), NEG)
    lae = np.logaddexp.reduce
    for wd in range(1, n):
        for a in range(n - wd):
            b = a + wd
            m = np.arange(a, b)
            I[b, a] = A[b, a] + lae(CR[0][a, m] + CL[1][b, m + 1])
            I[a, b] = A[a, b] + lae(CR[1][a, m] + CL[0][b, m + 1])
        for a in range(n - wd):
            b = a + wd
            lp = lae(CL[0][np.arange(a, b), a] + I[b, a:b])
            rp = lae(I[a, a + 1:b + 1] + CR[0][np.arange(a + 1, b + 1), b])
            for v in (0, 1):
                CL[v][b, a] = st[b, 1 + 2 * v] + lp
                CR[v][a, b] = st[a, 5 + 2 * v] + rp
    return lae(lw[tr[:, 0]] + y + CL[0][:, 0] + CR[0][:, n - 1])


def test_100_token_sentences_do_not_underflow():
    rng = np.random.default_rng(8)
    tags = [f"T{i}" for i in range(35)]
    sents = [list(rng.choice(tags, size=100)) for _ in range(2)]
    g = dmv_grammar(sents)
    w = random_weights(g, rng)
    p = DMVParser(g, sents)
    c, lz = p.inside_outside(w)
    ref = [log_inside_reference(g, w, s) for s in sents]
    np.testing.assert_allclose(lz, ref, rtol=1e-10)
    assert np.isfinite(c).all()
    # scaling every weight by s scales each tree by s^(5n-1): log Z shifts
    # exactly, far outside the range of doubles (e^-7000, e^+6500)
    for s in (1e-6, 1e6):
        c2, lz2 = p.inside_outside(w * s)
        np.testing.assert_allclose(lz2, lz + 499 * math.log(s), rtol=1e-12)
        np.testing.assert_allclose(c2, c, rtol=1e-8, atol=1e-10)


def test_underflow_fallback_when_root_weight_misleads():
    """Root weights >> arc weights make the per-token bound loose by ~1e-6 a
    token: the kernel must re-centre its scaling on the Viterbi tree."""
    rng = np.random.default_rng(9)
    sent = list(rng.choice(TAGS, size=120))
    g = dmv_grammar([sent])
    w = random_weights(g, rng, normalized=False)
    ix = dmv_index(g)
    w[ix.kind >= 10] *= 1e-6
    p = DMVParser(g, [sent])
    c, lz = p.inside_outside(w)
    assert lz[0] == pytest.approx(log_inside_reference(g, w, sent), rel=1e-10)
    ys = [g.index[f"Y_{t} --> L0_{t} R0_{t}"] for t in TAGS]
    roots = [g.index[f"S --> Y_{t}"] for t in TAGS]
    assert c[ys].sum() == pytest.approx(120) and c[roots].sum() == pytest.approx(1.0)
    hs, lp = p.viterbi_heads(w)
    assert tree_logweight(g, w, sent, hs[0]) == pytest.approx(lp[0], rel=1e-12)


# ---------------------------------------------------------------- Eisner, harmonic

def test_eisner_finds_best_projective_tree():
    rng = np.random.default_rng(10)
    for n in (1, 2, 3, 4, 5, 5, 5):
        s = rng.normal(size=(n + 1, n))
        s[rng.random(s.shape) < 0.15] = -np.inf
        trees = all_trees(n)
        score = [sum(s[h, d] for d, h in enumerate(t)) for t in trees]
        if max(score) == -np.inf:
            continue
        got = tuple(eisner(s))
        assert got in trees and sum(s[h, d] for d, h in enumerate(got)) == pytest.approx(max(score))


def test_mbr_heads_maximise_expected_accuracy():
    g, w, sents = case(12, lengths=(4, 5))
    p = DMVParser(g, sents)
    for post, heads, sent in zip(p.arc_posteriors(w), p.mbr_heads(w), sents):
        acc = [post[list(t), range(len(sent))].sum() for t in all_trees(len(sent))]
        assert post[list(heads), range(len(sent))].sum() == pytest.approx(max(acc))


def test_mbr_heads_average_the_arc_posteriors_of_several_grammars():
    """weights (M, R): the tree maximising the summed *averaged* arc posteriors
    (checked against every projective tree); one grammar as a 1-row matrix is the plain MBR."""
    g, w1, sents = case(12, lengths=(4, 5))
    w2 = random_weights(g, np.random.default_rng(13), True)
    p = DMVParser(g, sents)
    avg = [(a + b + b) / 3 for a, b in zip(p.arc_posteriors(w1), p.arc_posteriors(w2))]
    got = p.mbr_heads(np.stack([w1, w2, w2]))
    assert any(list(h) != list(h1) for h, h1 in zip(got, p.mbr_heads(w1)))    # the case tells them apart
    for post, heads, sent in zip(avg, got, sents):
        acc = [post[list(t), range(len(sent))].sum() for t in all_trees(len(sent))]
        assert post[list(heads), range(len(sent))].sum() == pytest.approx(max(acc))
    for a, b in zip(p.mbr_heads(w1[None]), p.mbr_heads(w1)):
        np.testing.assert_array_equal(a, b)


def _without_dependent(g, w, tag):
    """``w`` with the root rule and every choose rule taking ``tag`` as a dependent set to 0."""
    v = w.copy()
    v[[r for r, (lhs, rhs) in enumerate(g.rules) if lhs != f"Y_{tag}" and f"Y_{tag}" in rhs]] = 0.0
    return v


def test_zero_types_names_a_tag_no_root_or_choose_rule_lets_in():
    sents = [["a", "b"], ["c", "b"]]
    g = dmv_grammar(sents)
    w = g.normalize(np.ones(len(g)))
    p = DMVParser(g, sents)
    assert not p.zero_types(w)
    v = _without_dependent(g, w, "c")
    assert int((v == 0).sum()) == 1 + 3 * 2          # S --> Y_c and a, b, c each taking c on either side
    assert p.zero_types(v) == {"c"}


def test_mbr_heads_of_a_committee_give_no_tree_to_a_sentence_one_member_cannot_parse():
    sents = [["a", "b"], ["c", "b"], ["b", "a", "b"]]
    g = dmv_grammar(sents)
    w1 = random_weights(g, np.random.default_rng(4))
    w2 = _without_dependent(g, w1, "c")
    p = DMVParser(g, sents)
    assert np.isneginf(p.inside_outside(w2, [1])[1][0]) and np.isfinite(p.inside_outside(w1)[1]).all()
    heads = p.mbr_heads(np.stack([w1, w2]))
    assert heads[1] is None
    assert heads[0] is not None and heads[2] is not None
    assert p.mbr_heads(np.stack([w2, w1]))[1] is None


def test_explain_names_the_word_that_cannot_attach_or_stop():
    """A sentence with no tree of positive probability although every tag can
    appear in some tree (so zero_types names none): the message names a word no
    rule lets in here (no positive root rule, no positive choose rule from the
    words of this sentence), a word that cannot stop on one side, or says the
    zeros are in how the words combine."""
    sents = [["a", "b"], ["b", "a"], ["a", "a"], ["c", "b"], ["b", "b"]]
    g = dmv_grammar(sents)
    k = g.index
    w = g.normalize(np.ones(len(g)))
    p = DMVParser(g, sents)

    def zero(*keys):
        v = w.copy()
        for key in keys:
            v[k[key]] = 0.0
        assert not p.zero_types(v)
        return v
    # b's only head is c: in "a b" nothing takes it
    v = zero("S --> Y_b", "L'_a --> Y_b L_a", "R'_a --> R_a Y_b", "L'_b --> Y_b L_b", "R'_b --> R_b Y_b")
    assert np.isneginf(p.inside_outside(v, [0])[1][0])
    assert p.explain(0, v).startswith("'b' at position 2 can attach to nothing in this sentence: the root rule "
                                      "and every rule making it a dependent of a have probability 0")
    # in "b a", a could only be b's right dependent, but b never takes a first right dependent
    v = zero("S --> Y_a", "L'_a --> Y_a L_a", "R'_a --> R_a Y_a", "R0_b --> R'_b")
    assert np.isneginf(p.inside_outside(v, [1])[1][0])
    assert p.explain(1, v).startswith("'a' at position 2 can attach to nothing")
    # a cannot end its left side: neither stop at valence 0 nor take one dependent and stop after it
    v = zero("L0_a --> a_l", "L0_a --> L'_a")
    assert np.isneginf(p.inside_outside(v, [2])[1][0])
    assert p.explain(2, v) == ("'a' at position 1 cannot stop taking left dependents under this grammar (its stop "
                               "rules on that side have probability 0)")
    # in "b b" each b alone may be the root, but no b takes the other
    v = zero("L'_b --> Y_b L_b", "R'_b --> R_b Y_b")
    assert np.isneginf(p.inside_outside(v, [4])[1][0]) and np.isfinite(p.inside_outside(v, [3])[1][0])
    assert p.explain(4, v).startswith("no projective tree has positive probability")


def test_harmonic_counts():
    sents = [["a", "b", "c"], ["c", "a"]]
    g = dmv_grammar(sents)
    c = harmonic_counts(g, sents, "independent")
    k = g.index
    assert c[k["S --> Y_a"]] == pytest.approx(1 / 3 + 1 / 2)
    assert c[k["Y_c --> L0_c R0_c"]] == pytest.approx(2)
    # word 0 ("a") of sentence 1 attaches to b with 2/3, to c with 1/3
    assert c[k["L'_b --> Y_a L_b"]] == pytest.approx(2 / 3)
    assert c[k["L'_c --> Y_a L_c"]] == pytest.approx(1 / 3)
    assert c[k["R'_c --> R_c Y_a"]] == pytest.approx(1.0)
    # every head makes exactly one STOP per direction; ¬STOPs = expected dependents
    for t in TAGS:
        ntok = sum(s.count(t) for s in sents)
        for side in "LR":
            stops = c[k[f"{side}0_{t} --> {t}_{side.lower()}"]] + c[k[f"{side}_{t} --> {t}_{side.lower()}"]]
            assert stops == pytest.approx(ntok)
    chooses = sum(c[r] for r, key in enumerate(g.keys()) if "'_" in key.split(" -->")[0])
    nostop = sum(c[r] for r, key in enumerate(g.keys()) if "--> L'_" in key or "--> R'_" in key)
    assert chooses == pytest.approx(3 + 2) and nostop == pytest.approx(chooses)
    assert (c >= 0).all()


# ---------------------------------------------------------------- against the CKY kernel

def test_dmv_kernel_equals_cky_kernel():
    cky = pytest.importorskip("grind.kernels.cky")
    rng = np.random.default_rng(13)
    tags = [f"t{i}" for i in range(12)]
    distinct = [list(rng.permutation(tags)[:n]) for n in (1, 2, 3, 5, 8, 12)]
    repeated = [list(rng.choice(TAGS, size=n)) for n in (4, 9, 12)]
    sents = distinct + repeated
    g = dmv_grammar(sents)
    w = random_weights(g, rng, normalized=False)
    p = DMVParser(g, sents)
    q = cky.CKYParser(g, [split_heads(s) for s in sents])
    c1, l1 = p.inside_outside(w)
    c2, l2 = q.inside_outside(w)
    np.testing.assert_allclose(l1, l2, rtol=1e-10)
    np.testing.assert_allclose(c1, c2, rtol=1e-8, atol=1e-10)
    d1, v1 = p.viterbi(w)
    d2, v2 = q.viterbi(w)
    np.testing.assert_allclose(v1, v2, rtol=1e-10)
    for k, (a, b) in enumerate(zip(d1, d2)):
        if k < len(distinct):                 # no two trees share a rule multiset
            np.testing.assert_array_equal(a, b)
        else:                                 # exact ties possible: same score, valid tree
            heads = derivation_heads(g, b, len(sents[k]))
            np.testing.assert_array_equal(heads_derivation(g, sents[k], heads), b)
            assert tree_logweight(g, w, sents[k], heads) == pytest.approx(v1[k], rel=1e-10)


def test_tiny_weights_do_not_give_nan():
    """Regression: a theta reached by EM on the EWT sample made the scaled kernel
    return NaN for this 3-word sentence (a choose weight of 2.3e-294)."""
    from grind.grammars.dmv import dmv_grammar
    from grind.kernels.dmv import DMVParser
    theta = {"S --> Y_PROPN": 0.29437958509193113, "S --> Y_X": 0.008968609865470848,
             "Y_PROPN --> L0_PROPN R0_PROPN": 1.0, "L0_PROPN --> PROPN_l": 0.5829462033130466,
             "L0_PROPN --> L'_PROPN": 0.41705379668695336, "L_PROPN --> PROPN_l": 0.8994864608066111,
             "L_PROPN --> L'_PROPN": 0.10051353919338897, "R0_PROPN --> PROPN_r": 0.9666766507988236,
             "R0_PROPN --> R'_PROPN": 0.03332334920117647, "R_PROPN --> PROPN_r": 0.9999927768364111,
             "R_PROPN --> R'_PROPN": 7.223163588925267e-06, "Y_X --> L0_X R0_X": 1.0,
             "L0_X --> X_l": 3.156481954277491e-45, "L0_X --> L'_X": 1.0, "L_X --> X_l": 1.0,
             "L_X --> L'_X": 1.2081152634056381e-231, "R0_X --> X_r": 1.0,
             "R0_X --> R'_X": 1.0131566329486931e-23, "R_X --> X_r": 1.0,
             "R_X --> R'_X": 1.4046706584885217e-217, "L'_PROPN --> Y_PROPN L_PROPN": 0.40374673560681584,
             "R'_PROPN --> R_PROPN Y_PROPN": 0.03012571872605069, "L'_PROPN --> Y_X L_PROPN": 0.0,
             "R'_PROPN --> R_PROPN Y_X": 0.0, "L'_X --> Y_PROPN L_X": 0.6, "R'_X --> R_X Y_PROPN": 0.0,
             "L'_X --> Y_X L_X": 0.3, "R'_X --> R_X Y_X": 2.3417431823835253e-294}
    g = dmv_grammar([["PROPN", "X", "X"]])
    w = np.array([theta[k] for k in g.keys()])
    counts, logz = DMVParser(g, [["PROPN", "X", "X"]]).inside_outside(w)
    assert np.isfinite(logz).all() and np.isfinite(counts).all()
    # The only tree: X2 root, X2 <- X1 <- PROPN (left dependents).
    expected = np.log(0.008968609865470848 * 0.3 * 0.6 * 0.5829462033130466 * 0.9666766507988236)
    assert logz[0] == pytest.approx(expected, rel=1e-9)


def _out_of_range_case():
    """A 54-word sentence under weights with many below 1e-120: its chart
    leaves floating-point range in the scaled DMV kernel (the best tree has
    log weight around -4000 while some of its parts are ordinary)."""
    from grind.grammars.dmv import dmv_grammar
    rng = np.random.default_rng(0)
    n = int(rng.integers(20, 60))
    sent = list(rng.choice(["a", "b", "c"], size=n))
    g = dmv_grammar([sent])
    w = np.exp(rng.standard_normal(len(g)))
    tiny = rng.random(len(g)) < 0.3
    w[tiny] = 10.0 ** rng.uniform(-199, -120, tiny.sum())
    return g, sent, g.normalize(w)


@pytest.mark.slow
def test_mbr_falls_back_to_viterbi_when_posteriors_leave_float_range(tmp_path):
    from conftest import grind as run
    from grind.kernels.dmv import DMVParser
    from grind.errors import NumericalError
    from grind.grammars.grammar import rule_lines
    from grind.kernels.select import make_parser
    g, sent, w = _out_of_range_case()
    p = DMVParser(g, [sent, sent[:3]])
    with pytest.raises(NumericalError):
        p.mbr_heads(w)
    fb = []
    heads = p.mbr_heads(w, fallback=fb)
    assert fb == [0]
    vit, score = p.viterbi_heads(w)
    np.testing.assert_array_equal(heads[0], vit[0])
    assert heads[1] is not None
    # the sentence does have trees: the general kernel's log Z and Viterbi score
    cky = make_parser(g, [sent], "cky")
    assert np.isfinite(cky.inside_outside(w)[1][0])
    assert cky.viterbi(w)[1][0] == pytest.approx(score[0], rel=1e-9)
    gp, cp = tmp_path / "g.txt", tmp_path / "c.txt"
    gp.write_text("".join(rule_lines(g.rules, w)))
    cp.write_text(" ".join(sent) + "\n" + " ".join(sent[:3]) + "\n")
    r = run("parse", "--mbr", gp, cp)
    assert "its Viterbi tree is written instead" in r.stderr and "# mbr_fallback_to_viterbi: 1" in r.stdout


def test_mbr_fallback_of_a_committee_is_the_first_grammars_viterbi_tree_named_by_sentence_index():
    g, sent, w = _out_of_range_case()
    p = DMVParser(g, [sent, sent[:3]])
    other = random_weights(g, np.random.default_rng(1))
    vit = p.viterbi_heads(w)[0][0]
    assert list(p.viterbi_heads(other)[0][0]) != list(vit)       # the case tells the grammars apart
    for W in (w, np.stack([w, other])):
        fb = []
        heads = p.mbr_heads(W, fallback=fb)
        assert fb == [0]
        np.testing.assert_array_equal(heads[0], vit)
    fb = []
    heads = p.mbr_heads(w, idx=[1, 0], fallback=fb)
    assert fb == [0]                           # the sentence's index, not its position in idx
    np.testing.assert_array_equal(heads[1], vit)
    assert heads[0] is not None and len(heads[0]) == 3


def test_weights_below_the_flush_level_are_said_once(capsys, monkeypatch):
    """The DMV kernel reads weights in (0, 1e-200) as 0: a run is told once (every path, every parser), not at
    every step."""
    from grind.kernels import contract, dmv as kernel
    monkeypatch.setattr(contract, "_flush_said", set())
    sents = [["a", "b"], ["b", "a", "b"]]
    g = dmv_grammar(sents)
    w = g.normalize(np.ones(len(g)))
    DMVParser(g, sents).inside_outside(w)
    assert capsys.readouterr().err == ""
    w[3] = kernel.FLUSH / 10
    parser = DMVParser(g, sents)
    parser.inside_outside_sparse(w)
    parser.inside_outside(w)
    DMVParser(g, sents).inside_outside(w)
    assert capsys.readouterr().err.count("the DMV kernel reads 1 rule weight(s) in (0, 1e-200) as 0") == 1


def test_both_kernels_read_subnormal_weights_as_0_and_agree(monkeypatch):
    """EM drove three DMV weights subnormal (9.44e-322) and --kernel cky, which the DMV kernel's warning
    recommended for them, stopped with 'the E-step produced NaN': its outside scores, stored relative to
    the inside ones, overflowed.  The CKY kernel reads subnormal weights as 0 (the DMV kernel: all below
    FLUSH), so the two agree on them."""
    from conftest import SAMPLE
    from grind.formats.corpus import CorpusSpec, read_corpus
    from grind.kernels import contract
    monkeypatch.setattr(contract, "_flush_said", set())
    sents = [s.tokens for s in read_corpus(str(SAMPLE / "en_ewt-ud-train-sample.conllu.gz"),
                                           CorpusSpec(column="UPOS", punct="ud", max_length=10))]
    g = dmv_grammar(sents)
    w = g.normalize(np.random.default_rng(3).uniform(0.2, 1.0, len(g)))
    for key in ("L'_AUX --> Y_ADJ L_AUX", "R'_NUM --> R_NUM Y_DET"):
        w[g.index[key]] = 1.9e-310
    c_cky, z_cky = make_parser(g, sents, "cky").inside_outside(w)
    c_dmv, z_dmv = make_parser(g, sents, "dmv").inside_outside(w)
    assert np.isfinite(c_cky).all() and np.isfinite(z_cky).all()
    np.testing.assert_allclose(c_cky, c_dmv, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(z_cky, z_dmv, rtol=1e-12)
    assert contract._flush_said == {"CKY", "DMV"}


def test_head_types_whose_symbols_coincide_are_refused():
    """Tags 'B_l' and 'Y_B': Y_B_l is the first's nonterminal and the second's left terminal; make-grammar
    dmv wrote a grammar that joined them (API audit)."""
    from grind.errors import InputError
    with pytest.raises(InputError, match="'Y_B_l' belongs to both head type 'B_l' and head type 'Y_B'"):
        dmv_grammar([["B_l", "Y_B"], ["Y_B", "B_l"]])
    assert len(dmv_grammar([["B", "C_x"]]))                  # other underscores are fine


def test_a_one_sentence_parser_has_the_corpus_parsers_tables():
    """A parser of one sentence (a streaming minibatch) builds its stored tables by a shorter
    path: the same log Z, counts and Viterbi trees as the corpus's parser, with and without a mask."""
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(300)]                 # > 256 types: every sentence's tables stored
    sents = [list(rng.choice(words, size=n)) for n in (1, 2, 5, 9)]
    g = dmv_grammar(sents + [[w] for w in words], lexicalized=True)
    w = random_weights(g, rng)

    def no_root_first(tokens, n):
        return np.ones((n, n), dtype=bool), np.arange(n) > 0 if n > 1 else np.ones(1, dtype=bool)
    for mask in (None, no_root_first):
        whole = DMVParser(g, sents, masks=mask)
        for i, s in enumerate(sents):
            one = DMVParser(g, [s], masks=mask)
            c1, z1 = one.inside_outside(w)
            c2, z2 = whole.inside_outside(w, [i])
            assert np.array_equal(c1, c2) and np.array_equal(z1, z2)
            assert np.array_equal(one.viterbi_heads(w)[0][0], whole.viterbi_heads(w, [i])[0][0])


def test_words_from_adds_another_corpus_words_and_pairs(tmp_path):
    """make-grammar dmv --lexicalized --words-from TEST: TEST's words and the (head, dependent,
    direction) pairs of its sentences get rules too (read with the same length filter), so TEST parses."""
    from conftest import grind
    from grind.grammars.grammar import read_grammar
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    train.write_text("the dog barks\ndog\n")
    test.write_text("a cat sleeps\nthe cat\nwhat a very long one\n")
    grind("make-grammar", "dmv", "--lexicalized", "--max-length", "3", "--words-from", test, "-o",
          tmp_path / "g.txt", train)
    g = read_grammar(str(tmp_path / "g.txt"))
    alone = dmv_grammar([["the", "dog", "barks"], ["dog"]], lexicalized=True)
    both = dmv_grammar([["the", "dog", "barks"], ["dog"], ["a", "cat", "sleeps"], ["the", "cat"]], lexicalized=True)
    assert set(g.keys()) == set(both.keys()) > set(alone.keys())
    assert "R'_the --> R_the Y_cat" in g.index and "Y_very" not in " ".join(g.keys())
    assert "--words-from corpora" in (tmp_path / "g.txt").read_text()
