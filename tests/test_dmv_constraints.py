"""Structural constraints of a DMV grammar (grind.grammars.dmv_constraints): the rules they forbid are
left out; the kernel, every algorithm, the harmonic initialiser, the sharded path and grind parse then
never use a forbidden arc.  Brute force: every projective tree of short sentences."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from conftest import grind
from grind.errors import InputError
from grind.grammars.dmv import (SLOT, backoff_weights, dmv_grammar, dmv_index, dmv_problem, harmonic_counts,
                                heads_derivation, relaxed_grammar)
from grind.grammars.dmv_constraints import DMVConstraints, constraints_of_options, read_constraint_file
from grind.grammars.grammar import Grammar
from grind.kernels.dmv import DMVParser

TAGS = ["ADP", "DET", "NOUN", "VERB", "ADJ"]
LEAVES = constraints_of_options(set(TAGS), leaf_tags="udfunc", root_tags="VERB,NOUN", forbid="ADJ>NOUN")
CORPUS = [["DET", "NOUN", "VERB"], ["NOUN", "VERB", "ADP", "DET", "NOUN"], ["ADJ", "NOUN"], ["VERB"],
          ["DET", "ADJ", "NOUN", "VERB", "NOUN"], ["ADP", "NOUN", "VERB", "ADJ"], ["NOUN", "ADJ", "VERB"]]


def projective_trees(n):
    """Every projective dependency tree of n words (heads 1-based, 0 = root), one root."""
    out = []
    for heads in itertools.product(range(n + 1), repeat=n):
        if sum(h == 0 for h in heads) != 1:
            continue
        ok = True
        for i in range(n):                  # acyclic
            j, steps = i, 0
            while heads[j] and steps <= n:
                j, steps = heads[j] - 1, steps + 1
            ok &= heads[j] == 0
        if not ok:
            continue
        for d, h in enumerate(heads):       # projective: every word between an arc's ends is under its head
            for k in range(min(h - 1, d) + 1, max(h - 1, d)) if h else ():
                x = k
                while x != h - 1 and heads[x]:
                    x = heads[x] - 1
                ok &= x == h - 1
        if ok:
            out.append(heads)
    return out


def allowed(c, tags, heads):
    """Does the tree satisfy the constraints (checked from their definition, not from the grammar)?"""
    for d, h in enumerate(heads):
        if h == 0 and not c.root_allowed(tags[d]):
            return False
        if h and not c.arc_allowed(tags[h - 1], tags[d], d > h - 1):
            return False
    return True


def tree_weights(g, w, tags):
    """{heads: weight} of every tree the grammar has rules for (a missing rule: no such tree)."""
    out = {}
    for heads in projective_trees(len(tags)):
        try:
            d = heads_derivation(g, tags, heads)
        except KeyError:
            continue
        out[heads] = float(np.prod(w[d[:, 0]]))
    return out


def random_weights(g, seed):
    return g.normalize(np.random.default_rng(seed).random(len(g)) + 0.05)


def test_left_out_rules_are_exactly_what_the_constraints_forbid():
    g = dmv_grammar([], vocabulary=TAGS, constraints=LEAVES)
    full = dmv_grammar([], vocabulary=TAGS)
    assert dmv_problem(g) is None and len(g) < len(full)
    keys = set(g.keys())
    for k in full.keys():
        lhs, rhs = k.split(" --> ")
        if lhs.startswith(("L'_", "R'_")):                 # choose rules: only allowed arcs
            h, right = lhs[3:], lhs[0] == "R"
            d = rhs.split()[1 if right else 0][2:]
            assert (k in keys) == LEAVES.arc_allowed(h, d, right), k
        elif lhs == "S":
            assert (k in keys) == (rhs[2:] in ("VERB", "NOUN")), k
        elif lhs.split("_", 1)[1] in ("ADP", "DET"):       # a leaf: Y and its two lone STOPs
            assert (k in keys) == (lhs.startswith(("Y_", "L0_", "R0_")) and "'" not in rhs), k
        else:
            assert k in keys, k
    assert np.allclose(g.lhs_sums(g.weights), 1.0)
    ix = dmv_index(g)
    assert (ix.type_rules[ix.type_id["DET"], [SLOT["nostopL0"], SLOT["stopL1"], SLOT["nostopR1"]]] == -1).all()


def test_tag_sets_and_files(tmp_path):
    v1 = constraints_of_options({"ADP", "CONJ", "NOUN", "VERB"}, leaf_tags="udfunc")
    assert v1.leaf == {"ADP", "CONJ"}
    assert constraints_of_options({"ADP", "CCONJ", "NOUN"}, leaf_tags="udfunc-v2").leaf == {"ADP", "CCONJ"}
    with pytest.raises(InputError, match="'DTT' is not a tag"):
        constraints_of_options(set(TAGS), leaf_tags="DTT")
    with pytest.raises(InputError, match="HEAD>DEP"):
        constraints_of_options(set(TAGS), forbid="NOUN-ADJ")
    f = tmp_path / "c.txt"
    f.write_text("# mine\nleaf udfunc\nroot VERB\nforbid NOUN ADJ left\nforbid * VERB\n")
    c = read_constraint_file(str(f), set(TAGS))
    assert c.leaf == {"ADP", "DET"} and c.roots == {"VERB"}
    assert not c.arc_allowed("NOUN", "ADJ", False) and c.arc_allowed("NOUN", "ADJ", True)
    assert not c.arc_allowed("NOUN", "VERB", True)
    f.write_text("leaf ADP\nroots VERB\n")
    with pytest.raises(InputError, match=r"c\.txt:2: expected"):
        read_constraint_file(str(f), set(TAGS))
    f.write_text("root VERB\n")
    with pytest.raises(InputError, match="no tag to be the root"):     # --root-tags and the file's: both must allow
        constraints_of_options(set(TAGS), root_tags="NOUN", path=str(f))
    with pytest.raises(InputError, match="every tag a leaf"):
        constraints_of_options({"ADP", "DET"}, leaf_tags="udfunc")


@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_against_brute_force(seed):
    """log Z, expected counts, Viterbi and samples of the constrained grammar are those of its allowed
    trees, and the trees it has rules for are exactly the ones the constraints allow."""
    g = dmv_grammar([], vocabulary=TAGS, constraints=LEAVES)
    w = random_weights(g, seed)
    sents = [s for s in CORPUS if len(s) <= 5]
    parser = DMVParser(g, sents)
    counts, logz = parser.inside_outside(w)
    want = np.zeros(len(g))
    for k, tags in enumerate(sents):
        trees = tree_weights(g, w, tags)
        assert set(trees) == {h for h in projective_trees(len(tags)) if allowed(LEAVES, tags, h)}
        z = sum(trees.values())
        assert logz[k] == pytest.approx(math.log(z), rel=1e-10)
        for heads, p in trees.items():
            want += p / z * np.bincount(heads_derivation(g, tags, heads)[:, 0], minlength=len(g))
        best, _ = parser.viterbi_heads(w, [k])
        assert tuple(best[0]) == max(trees, key=trees.get)
    np.testing.assert_allclose(counts, want, rtol=1e-9, atol=1e-12)
    _, sampled, _ = parser.sample_trees(w, np.random.default_rng(seed))
    for tags, heads in zip(sents, sampled):
        assert allowed(LEAVES, tags, tuple(int(x) for x in heads))


def test_a_sentence_without_an_allowed_tree_is_unparseable():
    g = dmv_grammar([], vocabulary=TAGS, constraints=LEAVES)
    _, logz = DMVParser(g, [["DET", "ADP"], ["ADJ"]]).inside_outside(g.weights)
    assert np.isneginf(logz).all()                  # two leaves; an ADJ may not be the root


def test_harmonic_counts_go_to_allowed_heads_only():
    """km-global: each word's head weights (root and arcs) sum to 1 over the heads it may have; a leaf
    side does not bound the global first-kid probability."""
    c = DMVConstraints(leaf=frozenset({"DET"}))
    g = dmv_grammar([], vocabulary=["DET", "NOUN"], constraints=c)
    counts = harmonic_counts(g, [["DET", "NOUN"]], "km-global", smoothing=0.0)
    k = dict(zip(g.keys(), counts))
    assert k["S --> Y_NOUN"] == pytest.approx(1.0)           # NOUN's only allowed head is the root
    assert k["S --> Y_DET"] == pytest.approx(0.5)
    assert k["L'_NOUN --> Y_DET L_NOUN"] == pytest.approx(0.5)
    assert k["R0_NOUN --> R'_NOUN"] == 0.0                    # no word right of NOUN: no first kid there
    assert k["L0_NOUN --> L'_NOUN"] > 0.0                     # f > 0: the leaf DET's sides do not bound it
    full = harmonic_counts(dmv_grammar([], vocabulary=["DET", "NOUN"]), [["DET", "NOUN"]], "km-global")
    plain = dict(zip(dmv_grammar([], vocabulary=["DET", "NOUN"]).keys(), full))
    assert plain["S --> Y_NOUN"] == pytest.approx(0.5 + 0.1)    # unconstrained: as before (smoothing 0.1)
    ind = dict(zip(g.keys(), harmonic_counts(g, [["DET", "NOUN"]], "independent")))
    assert ind["L'_NOUN --> Y_DET L_NOUN"] == pytest.approx(1.0)   # DET's arcs: all to NOUN


ALGOS = [("em", {}), ("vb", {"alpha": 0.5}), ("cvb", {"alpha": 0.5}), ("gibbs", {}), ("hastings", {}),
         ("ln", {}), ("ln", {"tie": "N", "families": "upos"}), ("mixture", {"mix_base": "em"}),
         ("mixture", {"mix_base": "vb", "alpha": 0.5}), ("stochastic", {"batch": 3})]


@pytest.mark.parametrize("algo,opts", ALGOS, ids=[f"{a}-{'-'.join(map(str, o.values()))}" for a, o in ALGOS])
def test_every_algorithm_trains_a_constrained_grammar(algo, opts):
    """Every algorithm runs on a grammar with one-outcome multinomials and missing rules, its objective
    stays finite, and the trained grammar's trees keep to the constraints."""
    import grind as api
    g = dmv_grammar([], vocabulary=TAGS, constraints=LEAVES)
    g = g.with_weights(g.normalize(harmonic_counts(g, CORPUS)), meta={"weights": "probabilities"})
    its = {} if algo == "stochastic" else {"iterations": 3}
    r = api.fit(g, CORPUS * 2, algo, seed=1, **its, **opts)
    assert all(math.isfinite(s.objective) for s in r.trace)
    theta = r.grammar.probabilities()
    assert np.all(np.isfinite(theta)) and r.grammar.same_rules_as(g)
    parser = DMVParser(g, CORPUS)
    heads, _ = parser.viterbi_heads(theta)
    for tags, h in zip(CORPUS, heads):
        assert h is not None and allowed(LEAVES, tags, tuple(int(x) for x in h))


def test_streaming_vb_trains_a_constrained_grammar(tmp_path):
    import grind as api
    g = dmv_grammar([], vocabulary=TAGS, constraints=LEAVES)
    (tmp_path / "c.txt").write_text("\n".join(" ".join(s) for s in CORPUS * 3) + "\n")
    r = api.fit(g, tmp_path / "c.txt", "streaming", alpha=0.5, batch=5)
    assert all(math.isfinite(s.objective) for s in r.trace) and r.grammar.same_rules_as(g)


def test_sharded_path_on_a_constrained_grammar(tmp_path):
    """estep | sum | mstep on two shards gives grind train's EM step; the header line is carried."""
    g = dmv_grammar([], vocabulary=TAGS, constraints=LEAVES)
    (tmp_path / "a.txt").write_text("\n".join(" ".join(s) for s in CORPUS[:4]) + "\n")
    (tmp_path / "b.txt").write_text("\n".join(" ".join(s) for s in CORPUS[4:]) + "\n")
    (tmp_path / "all.txt").write_text("\n".join(" ".join(s) for s in CORPUS) + "\n")
    g.write(tmp_path / "g.txt", constraints="test")
    for part in "ab":
        grind("estep", "-o", tmp_path / f"c{part}.txt", tmp_path / "g.txt", tmp_path / f"{part}.txt")
    grind("sum", "-o", tmp_path / "c.txt", tmp_path / "ca.txt", tmp_path / "cb.txt")
    grind("mstep", "--grammar", tmp_path / "g.txt", "-o", tmp_path / "m.txt", tmp_path / "c.txt")
    grind("train", "--iterations", "1", "-o", tmp_path / "t.txt", tmp_path / "g.txt", tmp_path / "all.txt")
    m, t = Grammar.read(tmp_path / "m.txt"), Grammar.read(tmp_path / "t.txt")
    np.testing.assert_allclose(m.weights, t.weights, rtol=1e-12)
    assert m.meta["constraints"] == t.meta["constraints"] == "test"


def test_make_grammar_options_and_parse_never_uses_a_forbidden_arc(tmp_path, ewt_train):
    c = ("--column", "UPOS", "--punct", "ud")
    g0 = tmp_path / "g0.txt"
    grind("make-grammar", "dmv", *c, "--leaf-tags", "udfunc", "--root-tags", "VERB,NOUN,PROPN,ADJ,PRON",
          "--forbid", "NOUN>VERB", "-o", g0, ewt_train)
    head = g0.read_text()
    assert "# constraints: leaf tags ADP AUX CCONJ DET PART SCONJ; root tags ADJ NOUN PRON PROPN VERB; " \
           "forbidden arcs NOUN>VERB" in head
    grind("init", "--harmonic", "--corpus", ewt_train, *c, "--max-length", "10", "-o", tmp_path / "g1.txt", g0)
    grind("train", "--iterations", "5", *c, "--max-length", "10", "-o", tmp_path / "g2.txt", tmp_path / "g1.txt",
          ewt_train)
    g2 = Grammar.read(tmp_path / "g2.txt")
    assert g2.meta["constraints"] == Grammar.read(g0).meta["constraints"]
    out = grind("parse", *c, tmp_path / "g2.txt", ewt_train).stdout
    leaves = {"ADP", "AUX", "CCONJ", "DET", "PART", "SCONJ"}
    roots = {"VERB", "NOUN", "PROPN", "ADJ", "PRON"}
    relaxed = next((int(x.split()[2]) for x in out.splitlines() if x.startswith("# constraints_relaxed:")), 0)
    broken = 0
    for block in out.split("\n\n"):
        rows = [r.split("\t") for r in block.splitlines() if r and r[0].isdigit() and "\t" in r]
        rows = [r for r in rows if r[0].isdigit() and r[3] != "PUNCT"]
        tag = {r[0]: r[3] for r in rows}
        bad = any((r[6] == "0" and r[3] not in roots) or (r[6] != "0" and (tag[r[6]] in leaves or
                  (tag[r[6]], r[3]) == ("NOUN", "VERB"))) for r in rows)
        broken += bad
    assert broken == relaxed           # a forbidden arc only in a sentence with no tree without one
    with pytest.raises(AssertionError, match="for the unlexicalized DMV"):
        grind("make-grammar", "dmv", "--lexicalized", *c, "--leaf-tags", "DET", ewt_train)


def test_backoff_parses_sentences_with_tags_of_probability_zero(tmp_path):
    """A tag the training data lacked leaves no sentence unparsed: the floored weights parse it (counted
    in the header), with the trained grammar's trees unchanged for the others."""
    tags = ["NOUN", "VERB", "X"]
    g = dmv_grammar([], vocabulary=tags)
    w = random_weights(g, 3)
    for r, k in enumerate(g.keys()):
        if k in ("S --> Y_X",) or k.endswith(("Y_X L_NOUN", "Y_X L_VERB", "R_NOUN Y_X", "R_VERB Y_X")):
            w[r] = 0.0
    w = g.normalize(w)
    parser = DMVParser(g, [["NOUN", "X", "VERB"], ["NOUN", "VERB"]])
    heads, _ = parser.viterbi_heads(w)
    assert heads[0] is None and heads[1] is not None
    b = backoff_weights(g, w)
    assert np.allclose(g.lhs_sums(b), 1.0) and (b > 0).all()
    again, _ = parser.viterbi_heads(b)
    assert again[0] is not None and list(again[1]) == list(heads[1])
    c = DMVConstraints(leaf=frozenset({"X"}), roots=frozenset({"VERB"}))
    gc = dmv_grammar([], vocabulary=tags, constraints=c)
    full, wf = relaxed_grammar(gc, gc.weights)
    assert len(full) == len(g) and (wf > 0).all() and np.allclose(full.lhs_sums(wf), 1.0)
    gc.write(tmp_path / "g.txt")
    (tmp_path / "s.txt").write_text("NOUN X\nVERB NOUN\n")
    out = grind("parse", "--format", "text", tmp_path / "g.txt", tmp_path / "s.txt")
    assert "# unparsed: 0" in out.stdout and "# constraints_relaxed: 1 of 2" in out.stdout
    assert "structural constraints" in out.stderr
    off = grind("parse", "--no-backoff", "--format", "text", tmp_path / "g.txt", tmp_path / "s.txt")
    assert "# unparsed: 1" in off.stdout
    strict = ("--max-unparsed", "0", "--format", "text", tmp_path / "g.txt", tmp_path / "s.txt")
    assert "# unparsed: 0" in grind("parse", *strict).stdout        # a backed-off sentence is parsed ...
    off = grind("parse", "--no-backoff", *strict, check=False)       # ... without back-off it counts as unparsed
    assert off.returncode == 1 and "--max-unparsed" in off.stderr and not off.stdout


def test_grind_parse_backs_off_as_the_command_line_does(tmp_path):
    """grind.parse gives the sentence the command line backs off the command line's heads (backoff=False:
    None, as --no-backoff)."""
    from grind import api
    from grind.formats.corpus import CorpusSpec, read_corpus
    tags = ["NOUN", "VERB", "X"]
    gc = dmv_grammar([], vocabulary=tags, constraints=DMVConstraints(leaf=frozenset({"X"}),
                                                                     roots=frozenset({"VERB"})))
    gc.write(tmp_path / "g.txt")
    (tmp_path / "s.txt").write_text("NOUN X\nVERB NOUN\n")
    out = grind("parse", "--format", "text", tmp_path / "g.txt", tmp_path / "s.txt").stdout
    cli = [[int(row.split("\t")[6]) for row in block.splitlines() if not row.startswith("#")]
           for block in out.strip().split("\n\n")]
    assert len(cli) == 2
    sents = read_corpus(str(tmp_path / "s.txt"), CorpusSpec(format="text"))
    assert api.parse(str(tmp_path / "g.txt"), sents) == cli
    off = api.parse(str(tmp_path / "g.txt"), sents, backoff=False)
    assert off[0] is None and off[1] == cli[1]
