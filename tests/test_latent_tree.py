"""The latent-annotation tree kernel (grind/kernels/latent_tree.py) on tiny
hand-written treebanks (no shared data):

* against brute force: every subtype assignment of small trees listed, their
  weights summed (log Z), averaged (counts) and maximised (Viterbi);
* against the CKY kernel on a grammar whose symbols are the tree's nodes
  (``N<n>@a``), so that its only derivations are the subtype assignments;
* the sampler against the exact posterior (chi-square), seeds reproduce;
* no underflow on a 120-word tree at H = 16 (against a log-space reference);
* failures, zero-weight trees, H = 1 (the treebank PCFG), threads.
"""
from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import oracle
from grind.errors import NumericalError
from grind.formats.treebank import prepare
from grind.formats.trees import derivation_tree, leaves, parse_trees
from grind.grammars.grammar import Grammar
from grind.grammars.latent import LatentGrammar, base_rules_of, escape_word, labels_of, split_grammar, \
    split_name, treebank_grammar
from grind.infer.training import ShardedEstep
from grind.kernels.cky import CKYParser
from grind.bench.latent_tree import block_shape, numpy_estep
from grind.kernels.latent_tree import TreeParser

RAW = """
(S (NP (DT the) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))))
(S (NP (PRP she)) (VP (VBD ran)) (. .))
(S (VP (VB run)))
(S (NP (NNP John)) (VP (VBD saw) (NP (PRP her)) (PP (IN with) (NP (DT the) (NN dog)))))
"""
RTOL = 1e-11


def treebank():
    trees, _, _ = prepare(list(parse_trees(RAW)), rare=0)
    return trees


def random_weights(g, seed, zero_frac=0.0):
    """Unnormalised positive weights (gamma), some set to 0."""
    rng = np.random.default_rng(seed)
    w = rng.gamma(0.7, 1.0, len(g)) + 1e-3
    w[rng.random(len(g)) < zero_frac] = 0.0
    return w


def pruned(g, seed, frac=0.15):
    """``g`` without a random ``frac`` of its non-root rules, in shuffled order:
    a grammar whose blocks have missing entries and whose rule order is not
    the block order (the gather/scatter path)."""
    rng = np.random.default_rng(seed)
    first = {}
    for r, (lhs, _) in enumerate(g.rules):
        first.setdefault(lhs, r)                  # every symbol keeps a rule (stays a nonterminal)
    keep = [r for r, (lhs, _) in enumerate(g.rules) if first[lhs] == r or lhs == g.start or rng.random() >= frac]
    keep = [int(r) for r in rng.permutation(keep)]
    return Grammar([g.rules[r] for r in keep], g.weights[keep], g.start)


def grammars(h, seed=0, prune=False):
    trees = treebank()
    g = split_grammar(treebank_grammar(trees), h, np.random.default_rng(seed))
    return (pruned(g, seed) if prune else g), trees


# ---------------------------------------------------------------------------
# brute force, independent of LatentGrammar and of the kernel
# ---------------------------------------------------------------------------

def nodes_preorder(tree):
    """[(label, kids (child node ids), word or None, start, end)] in pre-order."""
    out = []

    def walk(t, start):
        me = len(out)
        out.append(None)
        kids, pos = [], start
        if len(t) == 2 and isinstance(t[1], str):
            out[me] = (t[0], [], t[1], start, start + 1)
            return start + 1
        for k in t[1:]:
            kids.append(len(out))
            pos = walk(k, pos)
        out[me] = (t[0], kids, None, start, pos)
        return pos

    walk(tree, 0)
    return out


def assignments(g, tree):
    """Every subtype assignment of ``tree``'s nodes: (rows in pre-order, weight
    under ``g.weights``); an assignment using a rule ``g`` lacks has weight 0
    (and rows with rule -1)."""
    nsub: dict[str, int] = {}
    for a in g.nonterminals:
        b, k = split_name(a)
        nsub[b] = max(nsub.get(b, 0), 1 if k is None else k + 1)
    labels = set(nsub)
    index = {r: i for i, r in enumerate(g.rules)}
    nodes = nodes_preorder(tree)

    def name(label, k):
        return label if nsub[label] == 1 else f"{label}@{k}"

    out = []
    for subs in itertools.product(*[range(nsub[lab]) for lab, *_ in nodes]):
        rows, wt = [], 1.0
        for (lab, kids, word, i, j), a in zip(nodes, subs):
            rhs = (escape_word(word, labels),) if word is not None else \
                tuple(name(nodes[k][0], subs[k]) for k in kids)
            r = index.get((name(lab, a), rhs), -1)
            rows.append((r, i, j))
            wt *= g.weights[r] if r >= 0 else 0.0
        out.append((np.array(rows, dtype=np.int64), wt))
    return out


def brute(g, tree):
    """(log Z, counts, best rows, best log weight)."""
    asg = assignments(g, tree)
    p = np.array([w for _, w in asg])
    z = p.sum()
    counts = np.zeros(len(g))
    for (rows, _), pw in zip(asg, p):
        if pw > 0:
            counts += pw / z * np.bincount(rows[:, 0], minlength=len(g))
    b = int(np.argmax(p))
    return np.log(z), counts, asg[b][0], np.log(p[b])


def test_brute_force_helper_on_a_hand_computed_tree():
    # (ROOT (A w)) at H=2: Z = sum_a W(ROOT -> A@a) W(A@a -> w)
    g = Grammar([("ROOT", ("A@0",)), ("ROOT", ("A@1",)), ("A@0", ("w",)), ("A@1", ("w",))],
                [0.5, 2.0, 3.0, 0.25], "ROOT")
    logz, counts, best, logp = brute(g, ("ROOT", ("A", "w")))
    assert np.isclose(logz, np.log(0.5 * 3 + 2 * 0.25))
    np.testing.assert_allclose(counts, [1.5 / 2, 0.5 / 2, 1.5 / 2, 0.5 / 2])
    assert best.tolist() == [[0, 0, 1], [2, 0, 1]] and np.isclose(logp, np.log(1.5))


@pytest.mark.parametrize("prune", [False, True], ids=["blocks", "pruned-shuffled"])
@pytest.mark.parametrize("h", [2, 3])
def test_against_brute_force(h, prune):
    g, trees = grammars(h, seed=h, prune=prune)
    g = g.with_weights(random_weights(g, 10 + h))
    small = [s for s, t in enumerate(trees) if len(nodes_preorder(t)) <= (14 if h == 2 else 10)]
    assert len(small) >= 2
    parser = TreeParser(g, trees)
    assert parser._identity is (not prune)
    counts, logz = parser.inside_outside(g.weights, small)
    derivs, logp = parser.viterbi(g.weights, small)
    total = np.zeros(len(g))
    for q, s in enumerate(small):
        if s in parser.failures:        # a pruned grammar may lack a rule of the tree
            assert "no rule" in parser.failures[s] and logz[q] == -np.inf and derivs[q] is None
            continue
        bz, bc, brows, blogp = brute(g, trees[s])
        np.testing.assert_allclose(logz[q], bz, rtol=RTOL)
        np.testing.assert_allclose(logp[q], blogp, rtol=RTOL)
        np.testing.assert_array_equal(derivs[q], brows)
        total += bc
        one, _ = parser.inside_outside(g.weights, [s])
        np.testing.assert_allclose(one, bc, rtol=RTOL, atol=1e-13)
    np.testing.assert_allclose(counts, total, rtol=RTOL, atol=1e-13)
    assert np.isfinite(logz[[s not in parser.failures for s in small]]).all()


def test_viterbi_derivation_is_the_tree():
    g, trees = grammars(2, seed=3)
    parser = TreeParser(g, trees)
    derivs, _ = parser.viterbi(random_weights(g, 4))

    def strip(t):
        return t if isinstance(t, str) else (split_name(t[0])[0], *(strip(k) for k in t[1:]))

    for s, d in enumerate(derivs):
        assert d[0, 1:].tolist() == [0, len(parser.sentences[s])]
        assert strip(derivation_tree(g, d, parser.sentences[s])) == trees[s]


# ---------------------------------------------------------------------------
# against the CKY kernel on one tree's node grammar
# ---------------------------------------------------------------------------

def node_grammar(g, tree):
    """A grammar over symbols ``N<n>@a`` (node n of ``tree`` in pre-order,
    subtype a; the root is ``g.start``) with the weights of ``g``: its
    derivations of the tree's words are the subtype assignments.  Returns it
    and the rule of ``g`` of each of its rules."""
    nsub: dict[str, int] = {}
    for a in g.nonterminals:
        b, k = split_name(a)
        nsub[b] = max(nsub.get(b, 0), 1 if k is None else k + 1)
    index = {r: i for i, r in enumerate(g.rules)}
    nodes = nodes_preorder(tree)

    def name(label, k):
        return label if nsub[label] == 1 else f"{label}@{k}"

    def node(n, k):
        return g.start if n == 0 else f"N{n}@{k}"

    rules, weights, origin = [], [], []
    for n, (lab, kids, word, _, _) in enumerate(nodes):
        for a in range(nsub[lab]):
            if word is not None:
                combos = [((escape_word(word, set(nsub)),), (word,))]
            else:
                combos = [(tuple(name(nodes[k][0], b) for k, b in zip(kids, bs)),
                           tuple(node(k, b) for k, b in zip(kids, bs)))
                          for bs in itertools.product(*[range(nsub[nodes[k][0]]) for k in kids])]
            for rhs, new_rhs in combos:
                r = index.get((name(lab, a), rhs))
                if r is not None:
                    rules.append((node(n, a), new_rhs))
                    weights.append(g.weights[r])
                    origin.append(r)
    return Grammar(rules, weights, g.start), np.array(origin, dtype=np.int64)


@pytest.mark.parametrize("h", [2, 3])
def test_against_cky_on_the_node_grammar(h):
    g, trees = grammars(h, seed=5 + h, prune=(h == 3))
    g = g.with_weights(random_weights(g, 20 + h))
    parser = TreeParser(g, trees)
    checked = 0
    for s, tree in enumerate(trees):
        if s in parser.failures:
            continue
        ng, origin = node_grammar(g, tree)
        cky = CKYParser(ng, [leaves(tree)])
        cc, cz = cky.inside_outside(ng.weights)
        counts, logz = parser.inside_outside(g.weights, [s])
        np.testing.assert_allclose(logz, cz, rtol=1e-10)
        np.testing.assert_allclose(counts, np.bincount(origin, weights=cc, minlength=len(g)),
                                   rtol=1e-10, atol=1e-12)
        (cd,), clogp = cky.viterbi(ng.weights)
        (d,), logp = parser.viterbi(g.weights, [s])
        np.testing.assert_allclose(logp, clogp, rtol=1e-10)
        np.testing.assert_array_equal(d, np.column_stack([origin[cd[:, 0]], cd[:, 1:]]))
        checked += 1
    assert checked >= 3


# ---------------------------------------------------------------------------
# the sampler
# ---------------------------------------------------------------------------

def test_sampler_follows_the_posterior():
    g, trees = grammars(2, seed=7)
    g = g.with_weights(random_weights(g, 8))
    s = 0                                          # the dog saw a cat: 10 nodes, 512 assignments
    parser = TreeParser(g, trees)
    asg = assignments(g, trees[s])
    p = np.array([w for _, w in asg])
    posterior = {oracle.derivation_key(rows): w / p.sum() for rows, w in asg if w > 0}
    n = 6000
    draws = parser.sample(g.weights, np.random.default_rng(11), idx=np.full(n, s))
    keys = [oracle.derivation_key(d) for d in draws]
    pval, cells, outside = oracle.chisquare_gof(keys, posterior)
    assert outside == 0 and cells > 20 and pval > 1e-3, (pval, cells)
    # the test can fail: the same draws against the posterior of other weights
    g2 = g.with_weights(random_weights(g, 9))
    p2 = np.array([w for _, w in assignments(g2, trees[s])])
    other = {oracle.derivation_key(rows): w / p2.sum() for (rows, _), w in zip(asg, p2) if w > 0}
    assert oracle.chisquare_gof(keys, other)[0] < 1e-6


def test_sampler_seeds_reproduce():
    g, trees = grammars(3, seed=1)
    parser = TreeParser(g, trees)
    a = parser.sample(g.weights, np.random.default_rng(5))
    b = parser.sample(g.weights, np.random.default_rng(5))
    c = parser.sample(g.weights, np.random.default_rng(6))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    for s, d in enumerate(a):              # a sample is an assignment of the tree
        assert (d[:, 0] >= 0).all() and len(d) == parser.n_nodes[s]
        assert derivation_tree(g, d, parser.sentences[s])[0] == g.start


def test_sampler_seed_of_a_tree_does_not_depend_on_failures_before_it():
    """The i-th requested tree gets the i-th seed drawn, whether or not those before it fail."""
    g, trees = grammars(2, seed=1)
    top = ("S", ("NP", ("PRP", "she")), ("VP", ("VBD", "ran")))               # root is not ROOT
    parser = TreeParser(g, [top, trees[0], trees[0]])
    assert set(parser.failures) == {0}
    oracle.assert_seed_follows_the_request(parser, g.weights)


def test_local_rules_name_only_rules_of_the_grammar_when_blocks_have_missing_entries():
    g, trees = grammars(2, seed=2)
    full = TreeParser(g, trees).local_rules(0)
    drop = next(int(r) for r in full if g.rules[r][0] != g.start)
    keep = [r for r in range(len(g)) if r != drop]
    g2 = Grammar([g.rules[r] for r in keep], g.weights[keep], g.start)
    parser = TreeParser(g2, trees)
    assert not parser._identity and 0 not in parser.failures
    local = parser.local_rules(0)
    assert local.min() >= 0 and len(set(local.tolist())) == len(local) == len(full) - 1
    assert {g2.keys()[r] for r in local} == {g.keys()[r] for r in full} - {g.keys()[drop]}
    used = parser.sparse_counts(g2.weights, 0)[0]
    assert set(used.tolist()) <= set(local.tolist())


# ---------------------------------------------------------------------------
# no underflow
# ---------------------------------------------------------------------------

def right_branching(n):
    t = ("T", f"w{n - 1}")
    for i in range(n - 2, -1, -1):
        t = ("X", ("T", f"w{i}"), t)
    return ("ROOT", t)


def logspace_logz(lg, W, enc):
    """log Z of one encoded tree by log-sum-exp recursions in numpy."""
    rule, lk, rk = enc
    logw = np.log(W)
    lb = []
    for i, r in enumerate(rule):
        blk = logw[lg.offset[r]:lg.offset[r] + lg.size[r]].reshape(block_shape(lg, r))
        if lg.kind[r] == 0:
            v = blk
        elif lg.kind[r] == 1:
            v = np.logaddexp.reduce(blk + lb[lk[i]][None, :], axis=1)
        else:
            x = blk + lb[lk[i]][None, :, None] + lb[rk[i]][None, None, :]
            v = np.logaddexp.reduce(x.reshape(len(x), -1), axis=1)
        lb.append(v)
    return float(np.logaddexp.reduce(lb[-1]))


def test_no_underflow_on_a_long_tree_at_h16():
    tree = right_branching(120)
    g = split_grammar(treebank_grammar([tree]), 16, np.random.default_rng(0))
    w = np.random.default_rng(1).uniform(0.5, 1.5, len(g)) * 1e-3
    parser = TreeParser(g, [tree])
    counts, logz = parser.inside_outside(w)
    lg = parser.latent
    ref = logspace_logz(lg, lg.gather(w), lg.encode(tree)[0])
    assert ref < -800                                # exp(ref) is 0 in float64
    np.testing.assert_allclose(logz, [ref], rtol=1e-9)
    assert np.isfinite(counts).all() and np.isclose(counts.sum(), parser.n_nodes[0], rtol=1e-9)
    _, logp = parser.viterbi(w)
    assert np.isfinite(logp[0]) and ref - 2 * 240 * np.log(16) < logp[0] <= ref


# ---------------------------------------------------------------------------
# failures, zero weights, H = 1
# ---------------------------------------------------------------------------

def test_failures_and_zero_weight_trees():
    g, trees = grammars(2, seed=2)
    bad = ("ROOT", ("S", ("NP", ("NN", "dog")), ("VP", ("VBD", "ran"))))    # S --> NP VP ok, NP --> NN not
    top = ("S", ("NP", ("PRP", "she")), ("VP", ("VBD", "ran")))               # root is not ROOT
    corpus = trees + [bad, top]
    parser = TreeParser(g, corpus)
    assert set(parser.failures) == {len(trees), len(trees) + 1}
    assert "the grammar has no rule NP --> NN" in parser.failures[len(trees)]
    assert "not the start symbol" in parser.failures[len(trees) + 1]
    assert parser.sentences[len(trees)] == ["dog", "ran"]
    counts, logz = parser.inside_outside(g.weights)
    ref, ref_z = TreeParser(g, trees).inside_outside(g.weights)
    np.testing.assert_array_equal(counts, ref)
    np.testing.assert_array_equal(logz[:len(trees)], ref_z)
    assert np.isneginf(logz[len(trees):]).all()
    d, lp = parser.viterbi(g.weights)
    assert d[-1] is None and d[-2] is None and np.isneginf(lp[-2:]).all()
    assert parser.sample(g.weights, np.random.default_rng(0))[-1] is None

    # zero weight: every refinement of VP --> VB (only tree 2 uses it) set to 0
    w = g.weights.copy()
    w[[r for r, (lhs, rhs) in enumerate(g.rules) if lhs.startswith("VP@") and rhs[0].startswith("VB@")]] = 0.0
    counts, logz = parser.inside_outside(w)
    assert np.isneginf(logz[2]) and np.isfinite(np.delete(logz, [2, len(trees), len(trees) + 1])).all()
    assert not np.isnan(counts).any()
    others = [s for s in range(len(trees)) if s != 2]
    np.testing.assert_allclose(counts, parser.inside_outside(w, others)[0], rtol=0, atol=0)
    assert parser.viterbi(w, [2])[0][0] is None and parser.sample(w, np.random.default_rng(1), [2])[0] is None
    # the subtypes of a node may be partly zero: only a whole tree of zero weight is -inf
    w = g.weights.copy()
    w[[r for r, (lhs, _) in enumerate(g.rules) if lhs == "NP@1"]] = 0.0
    assert np.isfinite(parser.inside_outside(w, range(len(trees)))[1]).all()


def test_h1_is_the_treebank_pcfg():
    trees = treebank()
    g = treebank_grammar(trees)
    assert split_grammar(g, 1, np.random.default_rng(0)) is g
    w = random_weights(g, 3)
    parser = TreeParser(g, trees)
    counts, logz = parser.inside_outside(w)
    labels = labels_of(trees)
    index = {r: i for i, r in enumerate(g.rules)}
    total = np.zeros(len(g))
    derivs, logp = parser.viterbi(w)
    for s, t in enumerate(trees):
        f = np.zeros(len(g))
        for rule, n in base_rules_of([t], labels).items():
            f[index[rule]] += n
        total += f
        assert np.isclose(logz[s], f @ np.log(w), rtol=1e-13)
        assert np.isclose(logp[s], logz[s], rtol=1e-13)
        np.testing.assert_array_equal(np.bincount(derivs[s][:, 0], minlength=len(g)), f)
        assert derivation_tree(g, derivs[s], parser.sentences[s]) == t
    np.testing.assert_allclose(counts, total, rtol=1e-13)


def test_bad_weights_and_indices():
    g, trees = grammars(2)
    parser = TreeParser(g, trees)
    with pytest.raises(NumericalError):
        parser.inside_outside(-g.weights)
    with pytest.raises(NumericalError):
        parser.viterbi(np.full(len(g), np.nan))
    with pytest.raises(ValueError):
        parser.inside_outside(g.weights[:-1])
    with pytest.raises(IndexError):
        parser.inside_outside(g.weights, [len(trees)])
    with pytest.raises(ValueError):
        TreeParser(g, trees, latent=LatentGrammar(treebank_grammar(trees)))
    c, z = parser.inside_outside(g.weights, [])
    assert not c.any() and z.shape == (0,)


# ---------------------------------------------------------------------------
# batches and threads
# ---------------------------------------------------------------------------

def test_batches_and_threads():
    g, base = grammars(3, seed=4)
    trees = base * 40
    parser = TreeParser(g, trees, latent=LatentGrammar(g))
    w = random_weights(g, 6)
    counts, logz = parser.inside_outside(w)
    single = [parser.inside_outside(w, [s]) for s in range(len(base))]
    np.testing.assert_allclose(counts, 40 * sum(c for c, _ in single), rtol=1e-12)
    np.testing.assert_array_equal(logz, np.tile([z[0] for _, z in single], 40))
    sharded = ShardedEstep(parser, jobs=2, shard=7)(w)
    np.testing.assert_allclose(sharded[0], counts, rtol=1e-12)
    np.testing.assert_array_equal(sharded[1], logz)
    # concurrent calls on one parser give exactly the serial results
    shards = [np.arange(i, len(trees), 5) for i in range(5)] * 4
    serial = [parser.inside_outside(w, s) for s in shards]
    with ThreadPoolExecutor(4) as ex:
        threaded = list(ex.map(lambda s: parser.inside_outside(w, s), shards))
    for (c1, z1), (c2, z2) in zip(serial, threaded):
        np.testing.assert_array_equal(c1, c2)
        np.testing.assert_array_equal(z1, z2)


def test_the_benchmarks_numpy_reference_agrees():
    g, trees = grammars(3, seed=9, prune=True)
    w = random_weights(g, 12, zero_frac=0.05)
    parser = TreeParser(g, trees)
    lg = parser.latent
    ok = [s for s in range(len(trees)) if s not in parser.failures]
    cnt, lz = numpy_estep(lg, w, [lg.encode(trees[s])[0] for s in ok])
    counts, logz = parser.inside_outside(w, ok)
    np.testing.assert_allclose(lz, logz, rtol=1e-12)
    np.testing.assert_allclose(lg.scatter(cnt), counts, rtol=1e-11, atol=1e-13)
