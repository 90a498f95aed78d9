"""The latent-annotation parser (grind/kernels/latent_parse.py): log Z against
the CKY kernel and against brute-force enumeration of every latent derivation
(trees and subtype assignments, tests/oracle.py), the decoders against
brute force over base-label trees, the projection, pruning and its retry,
scaling on long sentences, unknown tokens and label-level unary cycles.

Tiny hand-written treebanks, H = 1, 2, 3 (split_grammar's 1% noise breaks ties).
"""
from __future__ import annotations

import math
import threading
from collections import defaultdict

import numpy as np
import pytest

import oracle
from grind.errors import InputError
from grind.grammars.grammar import Grammar
from grind.formats.treebank import debinarise, prepare
from grind.formats.trees import leaves, parse_trees
from grind.grammars.latent import LatentGrammar, split_grammar, split_name, treebank_grammar
from grind.kernels.cky import CKYParser
from grind.kernels.latent_parse import LatentParser, project

#: PP attachment, NP -> NN / PRP, and ROOT -> S -> VP -> VBD (three unaries over one word).
ACYCLIC = """
(S (NP (PRP she)) (VP (VBD saw) (NP (NN fish))))
(S (NP (PRP she)) (VP (VP (VBD saw) (NP (NN fish))) (PP (IN with) (NP (NN forks)))))
(S (NP (PRP she)) (VP (VBD saw) (NP (NP (NN fish)) (PP (IN with) (NP (NN forks))))))
(S (NP (NN fish)) (VP (VBD swim) (PP (IN with) (NP (PRP she)))))
(S (VP (VBD saw)))
(S (NP (NN fish)) (VP (VBD swim)))
"""
#: ... plus VP -> S: a label-level unary cycle S -> VP -> S.
CYCLIC = ACYCLIC + "(S (NP (PRP she)) (VP (S (VP (VBD swim)))))\n"

SENTS = [["she", "saw", "fish"], ["she", "saw", "fish", "with", "forks"], ["saw"], ["fish", "swim"],
         ["she", "swim", "with", "fish"], ["fish", "saw", "she", "with", "forks"]]
METHODS = ["max-rule-sum", "max-rule-product", "viterbi"]


def grammar(text, h, seed=0):
    trees, _, _ = prepare(list(parse_trees(text)), rare=0)
    return split_grammar(treebank_grammar(trees), h, np.random.default_rng(seed))


# -- brute force ---------------------------------------------------------------

def brute(g, sent, U, weights=None):
    """Every latent derivation of ``sent`` with at most U unary rules per span,
    listed by a plain top-down recursion over (latent symbol, span, layer), and
    projected onto base labels.  Returns (Z, {base tree: probability}, {base
    tree: its anchored rules}, {anchored rule: posterior}, (best derivation's
    tree, its log weight)).

    Anchored rules are ("B", A, B, C, i, k, j, layer), ("U", A, B, i, j, layer),
    ("L", A, i, layer): the top node over a span is at layer U and each unary
    child one layer lower (the parser's unary layers)."""
    weights = g.weights if weights is None else weights
    nts = set(g.nonterminals)
    by_lhs = defaultdict(list)
    for r, (lhs, rhs) in enumerate(g.rules):
        if weights[r] > 0:
            by_lhs[lhs].append((r, rhs))
    memo = {}

    def derive(sym, i, j, layer):
        """[(base tree, anchored rules, weight)] of latent symbol sym over (i, j), top node at layer."""
        key = (sym, i, j, layer)
        if key in memo:
            return memo[key]
        A = split_name(sym)[0]
        out = []
        for r, rhs in by_lhs[sym]:
            w = float(weights[r])
            if rhs[0] not in nts:
                if j == i + 1 and rhs[0] == sent[i]:
                    out.append(((A, sent[i]), (("L", A, i, layer),), w))
            elif len(rhs) == 1:
                if layer > 0:
                    for t, ev, wc in derive(rhs[0], i, j, layer - 1):
                        out.append(((A, t), ev + (("U", A, t[0], i, j, layer),), w * wc))
            else:
                for k in range(i + 1, j):
                    for lt, le, lw in derive(rhs[0], i, k, U):
                        for rt, re_, rw in derive(rhs[1], k, j, U):
                            out.append(((A, lt, rt), le + re_ + (("B", A, lt[0], rt[0], i, k, j, layer),),
                                        w * lw * rw))
        memo[key] = out
        return out

    listed = derive(g.start, 0, len(sent), U)
    z = math.fsum(w for _, _, w in listed)
    trees, events_of, post = defaultdict(float), {}, defaultdict(float)
    best = (None, -math.inf)
    for tree, ev, w in listed:
        ev = tuple(sorted(ev))
        trees[tree] += w / z
        assert events_of.setdefault(tree, ev) == ev
        for e in ev:
            post[e] += w / z
        if math.log(w) > best[1]:
            best = (tree, math.log(w))
    return z, dict(trees), events_of, dict(post), best


def objective(events, post, method):
    if method == "max-rule-sum":
        return math.fsum(post[e] for e in events)
    return math.fsum(math.log(post[e]) for e in events)


# -- log Z -----------------------------------------------------------------------

@pytest.mark.parametrize("h", [1, 2, 3])
def test_logz_matches_cky_on_an_acyclic_grammar(h):
    g = grammar(ACYCLIC, h, seed=h)
    _, cky = CKYParser(g, SENTS).inside_outside(g.weights)
    mine = LatentParser(g).logz(SENTS)
    assert np.isfinite(cky).sum() >= 4
    np.testing.assert_allclose(mine, cky, rtol=1e-12, atol=1e-12)
    # unnormalised weights too (the coarse-to-fine path uses the same kernel)
    w = g.weights * np.random.default_rng(h).uniform(0.5, 2.0, len(g))
    _, cky2 = CKYParser(g, SENTS).inside_outside(w)
    np.testing.assert_allclose(LatentParser(g, weights=w).logz(SENTS), cky2, rtol=1e-12, atol=1e-12)


def test_unary_layers_bound_the_chain():
    """"saw" alone needs ROOT -> S -> VP -> VBD: three unaries over one span."""
    g = grammar(ACYCLIC, 2)
    _, cky = CKYParser(g, [["saw"]]).inside_outside(g.weights)
    assert np.isfinite(cky[0])
    assert LatentParser(g, max_unary=3).logz([["saw"]])[0] == pytest.approx(cky[0], abs=1e-12)
    assert LatentParser(g, max_unary=2).logz([["saw"]])[0] == -np.inf
    res = LatentParser(g, max_unary=2).parse([["saw"]])[0]
    assert res.tree is None and res.reason == "no parse"
    assert LatentParser(g).max_unary == 3                 # by default the grammar's longest chain: exact
    assert LatentParser(g).logz([["saw"]])[0] == pytest.approx(cky[0], abs=1e-12)


def test_default_unary_depth_follows_the_grammar(tmp_path):
    """A tree with four unaries in a row (ROOT S VP NP NN) parses; with a unary cycle the default is at least 3."""
    from conftest import grind
    tb = tmp_path / "u.mrg"
    tb.write_text("(ROOT (S (VP (NP (NN dog)))))\n")
    g = tmp_path / "g.txt"
    grind("make-grammar", "treebank", "--rare", "0", "-o", g, tb)
    assert "(ROOT (S (VP (NP (NN dog)))))" in grind("parse", g, tb).stdout
    cyc = LatentParser(grammar(CYCLIC, 2, seed=3))
    assert cyc.latent.longest_unary_chain()[1] and cyc.max_unary >= 3


def test_a_unary_cycle_makes_the_default_depth_at_least_3():
    """ROOT -> S -> VP (-> S closes the cycle): the longest chain is 2; at depth 3 "a" has
    ROOT -> S -> a (0.5) and ROOT -> S -> VP -> S -> a (0.125), and each further round of the
    cycle a quarter of the last: the default depth takes rounds until they weigh < 1e-13, or 30
    layers (the most), where Z = 0.5 / (1 - 0.25) = 2/3 is reached to ~6e-10 and a warning says so."""
    g = Grammar([("ROOT", ("S",)), ("S", ("a",)), ("S", ("VP",)), ("VP", ("S",)), ("VP", ("b",))],
                np.array([1.0, 0.5, 0.5, 0.5, 0.5]), "ROOT")
    p = LatentParser(g)
    assert p.latent.longest_unary_chain() == (2, True)
    assert p.max_unary == 30 and 1e-10 < p.unary_tail < 1e-9
    assert p.logz([["a"]])[0] == pytest.approx(math.log(2 / 3), abs=1e-9)
    assert LatentParser(g, max_unary=3).logz([["a"]])[0] == pytest.approx(math.log(0.625), abs=1e-12)
    assert brute(g, ["a"], 3)[0] == pytest.approx(0.625) and brute(g, ["a"], 2)[0] == pytest.approx(0.5)


@pytest.mark.parametrize("h", [1, 2, 3])
def test_logz_matches_brute_force(h):
    g = grammar(ACYCLIC, h, seed=10 + h)
    sents = SENTS[:4] if h < 3 else SENTS[:1] + SENTS[2:4]
    mine = LatentParser(g).logz(sents)
    for s, lz in zip(sents, mine):
        assert lz == pytest.approx(oracle.exact_logz(g, g.weights, s), abs=1e-11)     # every derivation
        assert lz == pytest.approx(math.log(brute(g, s, 3)[0]), abs=1e-11)


def test_cyclic_grammar_logz_matches_brute_force_per_max_unary():
    g = grammar(CYCLIC, 2, seed=3)
    with pytest.raises(InputError, match="unary cycle"):
        CKYParser(g, [["swim"]])                         # a unary cycle: the CKY kernel refuses it
    for U in (1, 2, 3, 4):
        lz = LatentParser(g, max_unary=U).logz([["fish", "swim"], ["she", "swim"]])
        for s, got in zip([["fish", "swim"], ["she", "swim"]], lz):
            z = brute(g, s, U)[0]
            assert got == pytest.approx(math.log(z), abs=1e-11), (U, s)
    z = LatentParser(g, max_unary=5).logz([["she", "swim"]])
    assert np.all(np.isfinite(z))


# -- decoding --------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("h", [1, 2, 3])
@pytest.mark.parametrize("cyclic", [False, True])
def test_decoders_match_brute_force(h, cyclic):
    g = grammar(CYCLIC if cyclic else ACYCLIC, h, seed=20 + h)
    sents = [SENTS[0], SENTS[3], SENTS[4], SENTS[2]] if h < 3 else [SENTS[0], SENTS[3], SENTS[2]]
    if h == 1:
        sents.append(SENTS[1])
    U = 3
    parser = LatentParser(g, prune=False, max_unary=U)
    results = {m: parser.parse(sents, m) for m in METHODS}
    for q, s in enumerate(sents):
        z, trees, events_of, post, (vtree, vlogw) = brute(g, s, U)
        for m in ("max-rule-sum", "max-rule-product"):
            scores = {t: objective(events_of[t], post, m) for t in trees}
            best = max(scores.values())
            res = results[m][q]
            assert res.reason is None and res.tree in trees, (m, s)
            assert res.score == pytest.approx(best, abs=1e-10), (m, s)
            assert scores[res.tree] == pytest.approx(best, abs=1e-10), (m, s)      # the tree has that score
            assert res.logz == pytest.approx(math.log(z), abs=1e-11)
        res = results["viterbi"][q]
        assert res.score == pytest.approx(vlogw, abs=1e-10)
        assert res.tree == vtree


def test_max_rule_sum_differs_from_viterbi_somewhere():
    """The brute force can tell the objectives apart on this grammar (so the
    decoder test above can fail for a decoder that mixes them up)."""
    g = grammar(ACYCLIC, 2, seed=7)
    s = SENTS[1]
    z, trees, events_of, post, (vtree, _) = brute(g, s, 3)
    sums = {t: objective(events_of[t], post, "max-rule-sum") for t in trees}
    assert len(trees) >= 2
    assert max(sums.values()) > min(sums.values()) + 0.01
    prods = {t: objective(events_of[t], post, "max-rule-product") for t in trees}
    assert max(prods.values()) > min(prods.values()) + 0.01


def test_viterbi_score_matches_cky_viterbi():
    g = grammar(ACYCLIC, 3, seed=5)
    _, logp = CKYParser(g, SENTS).viterbi(g.weights)
    got = [r.score for r in LatentParser(g, prune=False).parse(SENTS, "viterbi")]
    np.testing.assert_allclose(got, logp, rtol=0, atol=1e-11)


def test_trees_cover_the_tokens_and_debinarise():
    g = grammar(ACYCLIC, 2)
    sent = ["she", "saw", "fish", "with", "forks"]
    for m in METHODS:
        t = LatentParser(g).parse([sent], m)[0].tree
        assert t[0] == "ROOT" and leaves(t) == sent
        assert leaves(debinarise(t)) == sent


# -- projection --------------------------------------------------------------------

def test_projection_of_a_noiseless_split_is_the_treebank_grammar():
    trees, _, _ = prepare(list(parse_trees(ACYCLIC)), rare=0)
    g1 = treebank_grammar(trees)
    g3 = split_grammar(g1, 3, np.random.default_rng(0), noise=0.0)
    l1, l3 = LatentGrammar(g1), LatentGrammar(g3)
    coarse, _ = project(l3, l3.gather(g3.weights))
    want = l1.gather(g1.weights)                       # H = 1: one entry per base rule
    assert l1.bases == l3.bases and l1.words == l3.words
    for key, j in l3.index.items():
        assert coarse[j] == pytest.approx(want[l1.index[key]], rel=1e-12), key


def test_projection_counts_solve_the_expected_children_equations():
    g = grammar(CYCLIC, 3, seed=9)
    lg = LatentGrammar(g)
    coarse, c = project(lg, lg.gather(g.weights))
    # c = e_root + c M with M built rule by rule from the latent grammar
    soff = np.concatenate([[0], np.cumsum(lg.nsub)[:-1]])

    def slot(sym):
        b, k = split_name(sym)
        return soff[lg.base_id[b]] + (k or 0)

    T = int(lg.nsub.sum())
    M = np.zeros((T, T))
    nts = set(g.nonterminals)
    for (lhs, rhs), w in zip(g.rules, g.weights):
        for s in rhs:
            if s in nts:
                M[slot(lhs), slot(s)] += w
    e = np.zeros(T)
    e[slot(g.start)] = 1.0
    exact = np.linalg.solve((np.eye(T) - M).T, e)
    np.testing.assert_allclose(c, exact, rtol=1e-9)
    # P(A -> beta) = sum_a c(A@a) sum_sub W / sum_a c(A@a), rule by rule
    num, den = defaultdict(float), defaultdict(float)
    for (lhs, rhs), w in zip(g.rules, g.weights):
        key = (split_name(lhs)[0], tuple(split_name(s)[0] if s in nts else s for s in rhs))
        num[key] += c[slot(lhs)] * w
    for b in lg.bases:
        den[b] = c[soff[lg.base_id[b]]:soff[lg.base_id[b]] + lg.nsub[lg.base_id[b]]].sum()
    for key, v in num.items():
        kind_key = _index_key(lg, key)
        assert coarse[lg.index[kind_key]] == pytest.approx(v / den[key[0]], rel=1e-9), key
    # the coarse grammar is a proper PCFG here
    totals = np.bincount(lg.parent, weights=coarse, minlength=len(lg.bases))
    np.testing.assert_allclose(totals, 1.0, rtol=1e-9)


def test_projection_of_an_unreachable_symbol_averages_its_subtypes():
    """X is on no tree from ROOT (expected count 0): its coarse rules are the plain mean over its subtypes."""
    rules = [("ROOT", ("S",)), ("S", ("a",)), ("X@0", ("a",)), ("X@1", ("a",)), ("X@0", ("X@1", "S")),
             ("X@1", ("X@0", "S"))]
    g = Grammar(rules, np.array([1.0, 1.0, 0.5, 1.0, 0.5, 0.0]), "ROOT")
    p = LatentParser(g)
    lg = p.latent
    x, s = lg.base_id["X"], lg.base_id["S"]
    assert p.coarse[lg.index[(0, x, lg.word_id["a"], -1)]] == pytest.approx(0.75, rel=1e-12)
    assert p.coarse[lg.index[(2, x, x, s)]] == pytest.approx(0.25, rel=1e-12)
    assert p.coarse[lg.index[(0, s, lg.word_id["a"], -1)]] == pytest.approx(1.0, rel=1e-12)


def _index_key(lg, key):
    lhs, rhs = key
    a = lg.base_id[lhs]
    if len(rhs) == 2:
        return (2, a, lg.base_id[rhs[0]], lg.base_id[rhs[1]])
    if rhs[0] in lg.base_id:
        return (1, a, lg.base_id[rhs[0]], -1)
    return (0, a, lg.word_id[rhs[0]], -1)


def test_coarse_logz_is_the_projected_grammar():
    """H = 1: the projection is the grammar itself, so coarse and fine log Z agree."""
    g = grammar(ACYCLIC, 1)
    p = LatentParser(g)
    np.testing.assert_allclose(p.logz(SENTS, grammar="coarse"), p.logz(SENTS), rtol=1e-13)
    g2 = grammar(ACYCLIC, 2)
    p2 = LatentParser(g2)
    assert not np.allclose(p2.logz(SENTS[:2], grammar="coarse"), p2.logz(SENTS[:2]), rtol=1e-9)


# -- pruning ---------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_threshold_zero_is_exhaustive(method):
    g = grammar(CYCLIC, 3, seed=1)
    exhaustive = LatentParser(g, prune=False).parse(SENTS, method)
    p = LatentParser(g, prune=True, threshold=0.0)
    pruned = p.parse(SENTS, method)
    assert pruned == exhaustive
    assert p.stats["pruned"] == 0 and p.stats["retries"] == 0 and p.stats["items"] > 0
    # a tiny threshold prunes only items of (almost) zero posterior: same trees
    tiny = LatentParser(g, threshold=1e-300).parse(SENTS, method)
    assert [r.tree for r in tiny] == [r.tree for r in exhaustive]
    np.testing.assert_allclose([r.score for r in tiny], [r.score for r in exhaustive], rtol=1e-12, atol=1e-12)


def test_pruning_removes_items_and_counts_them():
    g = grammar(ACYCLIC, 2, seed=4)
    p = LatentParser(g, threshold=0.4)
    res = p.parse(SENTS)
    st = p.stats
    assert st["sentences"] == len(SENTS) and 0 < st["pruned"] < st["items"]
    assert st["pruned_share"] == pytest.approx(st["pruned"] / st["items"])
    assert st["failures"] == sum(r.tree is None for r in res)
    # the pruned chart's log Z is at most the exhaustive one, and below it here
    full = LatentParser(g, prune=False).parse(SENTS)
    ok = [q for q, r in enumerate(full) if r.tree is not None]
    assert all(res[q].logz <= full[q].logz + 1e-12 for q in ok)
    assert any(res[q].logz < full[q].logz - 1e-6 for q in ok)


@pytest.mark.parametrize("method", METHODS)
def test_a_threshold_that_prunes_every_parse_triggers_the_retry(method):
    g = grammar(ACYCLIC, 2, seed=6)
    full = LatentParser(g, prune=False).parse(SENTS, method)
    parseable = sum(r.tree is not None for r in full)
    p = LatentParser(g, threshold=1.5)                  # above every posterior: nothing is kept
    res = p.parse(SENTS, method)
    assert p.stats["retries"] == parseable and p.stats["pruned"] == p.stats["items"]
    assert [r.tree for r in res] == [r.tree for r in full]
    np.testing.assert_allclose([r.score for r in res], [r.score for r in full], rtol=1e-12)
    # an ambiguous sentence whose parses are all below the threshold
    p2 = LatentParser(g, threshold=0.9)
    s = ["she", "saw", "fish", "with", "forks"]
    _, trees, _, _, _ = brute(g, s, 3)
    assert len(trees) >= 2 and max(trees.values()) < 0.9
    r2 = p2.parse([s], method)[0]
    assert p2.stats["retries"] == 1 and r2.tree == LatentParser(g, prune=False).parse([s], method)[0].tree


# -- scaling, failures, threads ------------------------------------------------------

def chain_treebank():
    return "\n".join(["(X (A w0) (X (A w1) (A w2)))", "(X (A w3) (A w4))"])


def test_no_underflow_on_100_words_at_h16():
    """A right-branching grammar (X -> A X | A A, A -> w) has one base tree per
    sentence; log Z is a chain of matrix products, computed here in log space."""
    trees, _, _ = prepare(list(parse_trees(chain_treebank())), rare=0)
    g = split_grammar(treebank_grammar(trees), 16, np.random.default_rng(2))
    lg = LatentGrammar(g)
    w = g.weights * np.where([len(r) == 1 and r[0] not in lg.base_id for _, r in g.rules], 1e-5, 1.0)
    rng = np.random.default_rng(0)
    sent = [f"w{k}" for k in rng.integers(0, 5, size=100)]
    p = LatentParser(g, weights=w)
    got = p.logz([sent])[0]
    # reference: log beta over (i, n) for i = n-1 .. 0, in log space
    buf = lg.gather(w)

    def block(kind, *names):
        j = lg.index[(kind, *[lg.base_id[x] for x in names[:1]],
                      *([lg.word_id[names[1]], -1] if kind == 0 else [lg.base_id[x] for x in names[1:]] +
                        ([-1] if kind == 1 else [])))]
        return buf[lg.offset[j]:lg.offset[j] + lg.size[j]]

    H = 16
    log_a = [np.log(block(0, "A", t)) for t in sent]
    xaa = block(2, "X", "A", "A").reshape(H, H, H)
    xax = block(2, "X", "A", "X").reshape(H, H, H)
    n = len(sent)
    la, lb = log_a[n - 2], log_a[n - 1]
    mx = la.max() + lb.max()
    log_x = np.log(np.einsum("abc,b,c->a", xaa, np.exp(la - la.max()), np.exp(lb - lb.max()))) + mx
    for i in range(n - 3, -1, -1):
        la = log_a[i]
        v = np.einsum("abc,b,c->a", xax, np.exp(la - la.max()), np.exp(log_x - log_x.max()))
        log_x = np.log(v) + la.max() + log_x.max()
    root = block(1, "ROOT", "X").reshape(1, H)
    ref = float(np.log(root[0] @ np.exp(log_x - log_x.max())) + log_x.max())
    assert ref < -800                                    # exp(ref) is far below the smallest double
    assert got == pytest.approx(ref, rel=1e-10)
    for m in METHODS:
        r = p.parse([sent], m)[0]
        assert r.tree is not None and np.isfinite(r.score) and leaves(r.tree) == sent
    assert p.parse([sent], "max-rule-sum")[0].score == pytest.approx(2 * n, rel=1e-9)   # every rule has posterior 1


def test_unknown_token_and_empty_sentence_fail_with_a_reason():
    g = grammar(ACYCLIC, 2)
    p = LatentParser(g)
    res = p.parse([["she", "saw", "dogs"], [], ["she", "saw", "fish"]])
    assert res[0].tree is None and "'dogs'" in res[0].reason and "position 3" in res[0].reason
    assert res[1].tree is None and res[1].reason == "empty sentence"
    assert res[2].tree is not None and res[2].reason is None
    assert p.stats["failures"] == 2
    assert np.isneginf(p.logz([["dogs"]])[0])
    with pytest.raises(ValueError):
        p.parse([["she"]], method="max-rule")


def test_label_level_unary_cycles_parse():
    g = grammar(CYCLIC, 2, seed=8)
    sents = [["she", "swim"], ["fish", "swim"], ["swim"]]
    for U in (1, 3, 6):
        res = LatentParser(g, max_unary=U).parse(sents, "max-rule-product")
        assert all(r.tree is not None for r in res[:2])
    lz = [LatentParser(g, max_unary=U).logz(sents) for U in range(7)]
    assert np.all(np.isneginf(lz[0])) and np.isneginf(lz[2][2]) and np.all(np.isfinite(lz[3]))
    assert all(np.all(b >= a) for a, b in zip(lz, lz[1:]))           # more chains, more mass
    assert np.all(lz[3] > lz[1]) and np.all(lz[5] > lz[3])            # S -> VP -> S adds two layers
    assert lz[5][2] == pytest.approx(math.log(brute(g, ["swim"], 5)[0]), abs=1e-12)


def test_parallel_calls_agree():
    g = grammar(CYCLIC, 3, seed=2)
    p = LatentParser(g)
    want = p.parse(SENTS * 3)
    out = [None] * 4

    def work(k):
        out[k] = p.parse(SENTS * 3)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o == want for o in out)


@pytest.mark.slow
def test_bench_runs_on_the_synthetic_treebank(capsys):
    from grind.bench import latent_parse as bench
    r = bench.main(["--synthetic", "--sentences", "30", "--exhaustive-h8", "10"])
    assert [x["h"] for x in r["rows"]] == [1, 8] and r["sentences"] == 30
    for x in r["rows"]:
        assert x["pruned_sps"] > 0 and x["exhaustive_sps"] > 0 and x["f1_exhaustive"] > 50
        assert 0.0 <= x["pruned_share"] < 1.0
    assert r["rows"][1]["n_exhaustive"] == 10
    assert "| H=8 coarse-to-fine" in capsys.readouterr().out


CYCLIC_GRAMMAR = """# weights: probabilities
# start: ROOT
# model: treebank
# subtypes: 1
1 ROOT --> S
.6 S --> NP VP
.4 S --> VP
.45 VP --> V NP
.2 VP --> VP PP
.25 VP --> V
.1 VP --> S
.2 NP --> NP PP
.5 NP --> N
.3 NP --> D N
1 PP --> P NP
.6 N --> x
.4 N --> y
.3 V --> x
.7 V --> v
1 P --> p
1 D --> d
"""


def test_unary_cycles_get_the_layers_their_weight_needs(tmp_path):
    """S --> VP --> S (0.4 x 0.1 a round): over the one word x, by the closure,
    VP = 0.25 * 0.3 + 0.1 S and S = 0.4 VP, so Z = S = 0.03 / 0.96 = 0.03125.  The default layers
    reach it to ~1e-13 (3 layers, the old default, were 4% off); a grammar of real trees keeps its
    longest chain (the chains past it weigh < 1e-13)."""
    from grind.grammars.grammar import read_grammar
    (tmp_path / "g.txt").write_text(CYCLIC_GRAMMAR)
    g = read_grammar(str(tmp_path / "g.txt"))
    p = LatentParser(g, weights=g.probabilities())
    x = [p.latent.terminal("x")]
    assert p.max_unary > 3 and p.unary_tail <= 1e-13
    assert abs(p.logz([x])[0] - np.log(0.03125)) < 1e-12
    old = LatentParser(g, weights=g.probabilities(), max_unary=3)
    assert abs(old.logz([x])[0] - np.log(0.03125)) > 0.04
