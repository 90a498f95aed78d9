"""Treebank preparation (grind.formats.treebank), treebank and split grammars
(grind.grammars.latent) and ``grind make-grammar treebank``."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import grind, shared_path
from grind.errors import InputError
from grind.formats.trees import leaves, parse_trees, read_trees
from grind.formats.treebank import (backoff_signatures, base_label, binarise, clean, debinarise, prepare,
                                    signature)
from grind.grammars.grammar import read_grammar
from grind.grammars.latent import LatentGrammar, split_grammar, split_name, treebank_grammar


TEXT = """
( (S (NP-SBJ-1 (DT The) (NN dog)) (VP (VBD saw) (NP (NP (-NONE- *T*-1))) (NP (DT a) (JJ big) (JJ red) (NN cat)))
   (. .)) )
( (S (NP-SBJ (PRP It)) (VP (VBD ran) (PRT (RP away)) (, ,) (ADVP=2 (RB fast))) (. .)) )
( (NP (-LRB- -LRB-) (NN dog) (-RRB- -RRB-)) )
"""


def trees():
    return list(parse_trees(TEXT))


def test_base_label():
    assert [base_label(x) for x in ("NP-SBJ-1", "ADVP=2", "-NONE-", "-LRB-", "PRP$", "S")] == \
        ["NP", "ADVP", "-NONE-", "-LRB-", "PRP$", "S"]


def test_clean_strips_tags_deletes_empty_and_adds_root():
    t = clean(trees()[0])
    assert t[0] == "ROOT" and t[1][0] == "S"
    assert t[1][1] == ("NP", ("DT", "The"), ("NN", "dog"))          # function tag and index gone
    vp = t[1][2]
    assert [k[0] for k in vp[1:]] == ["VBD", "NP"]                    # the empty NP (and NP over it) deleted
    assert "-NONE-" not in str(t)


def test_clean_collapses_same_label_unary_chain():
    t = clean(next(parse_trees("((S (NP (NP (NN x))) (VP (VB y))))")))
    assert t == ("ROOT", ("S", ("NP", ("NN", "x")), ("VP", ("VB", "y"))))


def test_clean_all_empty_is_none_and_words_among_constituents_are_an_error():
    assert clean(next(parse_trees("((S (NP (-NONE- *))))"))) is None
    with pytest.raises(InputError, match="words and constituents"):
        clean(("S", "word", ("NP", ("NN", "x"))), "f.mrg: tree 3")


@pytest.mark.parametrize("h", [0, 1, 2, None])
def test_binarise_is_binary_and_round_trips(h):
    for t in trees():
        c = clean(t)
        b = binarise(c, h)
        stack = [b]
        while stack:
            n = stack.pop()
            if isinstance(n, str):
                continue
            assert 1 <= len(n) - 1 <= 2
            stack.extend(n[1:])
        assert debinarise(b) == c
        assert leaves(b) == leaves(c)


def test_binarise_markovisation_names():
    c = ("NP", ("DT", "a"), ("JJ", "b"), ("JJ", "c"), ("NN", "d"))
    assert binarise(c, 0) == ("NP", ("DT", "a"), ("@NP", ("JJ", "b"), ("@NP", ("JJ", "c"), ("NN", "d"))))
    b1 = binarise(c, 1)
    assert b1[2][0] == "@NP|DT" and b1[2][2][0] == "@NP|JJ"
    bn = binarise(c, None)
    assert bn[2][2][0] == "@NP|DT_JJ"


def test_signatures_are_deterministic_and_classed():
    assert signature("walking", False) == "<UNK-LC-ing>"
    assert signature("Walking", True) == "<UNK-INITC-ing>"
    assert signature("Walking", False) == "<UNK-CAP-ing>"
    assert signature("IBM", False) == "<UNK-CAPS>"
    assert signature("1,234", False) == "<UNK-NUM>"
    assert signature("third-quarter", False) == "<UNK-LC-DASH-er>"
    assert signature("well-to-do", False) == "<UNK-LC-DASH>"
    assert signature("x86-based", False) == "<UNK-LC-NUM-DASH-ed>"
    assert signature("walking", False) == signature("walking", False)
    assert backoff_signatures("<UNK-LC-NUM-DASH-ed>") == ["<UNK-LC-NUM-DASH-ed>", "<UNK-LC-NUM-DASH>",
                                                         "<UNK-LC-NUM>", "<UNK-LC>", "<UNK>"]


def test_prepare_replaces_rare_words_and_known_words_map():
    tb, known, counter = prepare(trees() * 2, rare=1)
    assert "dog" in known and counter["replaced"] == 0          # every word seen twice
    tb, known, counter = prepare(trees(), rare=1)
    assert known == {"dog", "."}                                  # seen twice in three trees
    assert counter["replaced"] == sum(len(leaves(t)) for t in tb) - 4
    assert "<UNK-INITC>" in leaves(tb[0])
    test, _, c2 = prepare(trees(), known={"dog", "<UNK-LC>"})
    assert "<UNK-LC>" in leaves(test[0]) and c2["backoff"] > 0   # 'saw' -> <UNK-LC>, 'big' too


def test_treebank_grammar_relative_frequencies_and_escaping():
    tb, _, _ = prepare(trees(), rare=0)
    g = treebank_grammar(tb)
    assert g.start == "ROOT" and g.unnormalised_lhs() is None
    p = dict(zip(g.keys(), g.weights))
    assert p["ROOT --> S"] == pytest.approx(2 / 3) and p["ROOT --> NP"] == pytest.approx(1 / 3)
    assert p["-LRB- --> \\-LRB-"] == 1.0                           # the word spelled like its tag is escaped
    assert p[". --> \\."] == 1.0 and p[", --> \\,"] == 1.0
    assert g.is_nonterminal("-LRB-") and not g.is_nonterminal("\\-LRB-")
    L = LatentGrammar(g)
    assert L.encode(tb[2])[0] is not None and "-LRB-" in L.known_words()


@pytest.mark.slow
def test_words_spelled_like_the_arrow_or_a_subtype_are_escaped(tmp_path):
    """A word '-->' made a grammar file grind could not read back ('more than one -->'); a word spelled
    like a subtype (NN@1) would read as a nonterminal of the split grammar."""
    (tmp_path / "w.mrg").write_text("( (S (NP (SYM -->) (NN NN@1)) (VP (VBD ran))) )\n"
                                    "( (S (NP (NN NN@1)) (VP (VBD -->))) )\n")
    for h in ("1", "2"):
        g = tmp_path / f"g{h}.txt"
        grind("make-grammar", "treebank", "--subtypes", h, "--seed", "1", "-o", g, tmp_path / "w.mrg")
        rules = [ln for ln in g.read_text().splitlines() if not ln.startswith("#")]
        assert any(ln.endswith(" --> \\-->") for ln in rules) and any(ln.endswith(" --> \\NN@1") for ln in rules)
        out = grind("parse", g, tmp_path / "w.mrg").stdout
        assert "(SYM -->) (NN NN@1)" in out and "(VBD -->)" in out


def test_split_h1_is_the_treebank_pcfg_and_h2_refines_it():
    tb, _, _ = prepare(trees(), rare=0)
    g = treebank_grammar(tb)
    g1 = split_grammar(g, 1, np.random.default_rng(0))
    assert g1.keys() == g.keys() and np.array_equal(g1.weights, g.weights)
    g2 = split_grammar(g, 2, np.random.default_rng(0))
    assert g2.unnormalised_lhs() is None and g2.start == "ROOT"
    root = sum(1 for lhs, _ in g.rules if lhs == "ROOT")
    expected = sum(2 ** (1 + sum(g.is_nonterminal(s) for s in rhs)) for lhs, rhs in g.rules if lhs != "ROOT") \
        + 2 * root
    assert len(g2) == expected
    # summed over child subtypes, a subtype's rule keeps the base probability within the 1% noise
    L, p = LatentGrammar(g2), g2.weights
    base = dict(zip(g.keys(), g.weights))
    for j, (k, a, b, c) in enumerate(zip(L.kind, L.parent, L.left, L.right)):
        blk = L.gather(p)[L.offset[j]:L.offset[j] + L.size[j]].reshape(L.nsub[a], -1).sum(axis=1)
        lhs = L.bases[a]
        rhs = (L.words[b],) if k == 0 else tuple(L.bases[x] for x in ((b,) if k == 1 else (b, c)))
        assert np.allclose(blk, base[f"{lhs} --> {' '.join(rhs)}"], rtol=0.03)
    same = split_grammar(g, 2, np.random.default_rng(0))
    assert np.array_equal(same.weights, g2.weights)
    assert split_name("NP@3") == ("NP", 3) and split_name("@NP") == ("@NP", None) \
        and split_name("@NP@1") == ("@NP", 1)


def test_latent_gather_scatter_and_encode_failure():
    tb, _, _ = prepare(trees(), rare=0)
    g2 = split_grammar(treebank_grammar(tb), 2, np.random.default_rng(1))
    L = LatentGrammar(g2)
    w = np.arange(1, len(g2) + 1, dtype=float)
    assert np.array_equal(L.scatter(L.gather(w)), w)
    enc, why = L.encode(("ROOT", ("S", ("NN", "dog"), ("NN", "dog"))))
    assert enc is None and "no rule" in why


def test_make_grammar_treebank_cli(tmp_path):
    f = tmp_path / "t.mrg"
    f.write_text(TEXT + "( )\n")
    out = tmp_path / "g1.txt"
    grind("make-grammar", "treebank", "--rare", "0", "-o", out, f)
    g = read_grammar(str(out))
    assert g.meta["model"] == "treebank" and g.meta["subtypes"] == "1" and g.meta["empty_trees_skipped"] == "1"
    out2 = tmp_path / "g3.txt"
    grind("make-grammar", "treebank", "--subtypes", "3", "--seed", "4", "-o", out2, f)
    assert LatentGrammar(read_grammar(str(out2))).nsub.max() == 3


@pytest.mark.slow
def test_make_grammar_treebank_bad_input(tmp_path):
    f = tmp_path / "bad.mrg"
    f.write_text("( (S (NP (NN a))\n  (VP (VB b)) )\n")
    r = grind("make-grammar", "treebank", f, check=False)
    assert r.returncode == 1 and "bad.mrg:1: unbalanced '('" in r.stderr and "Traceback" not in r.stderr
    f.write_text("( (S (NP (NN a)) (VP (VB b)) )) )\n")
    r = grind("make-grammar", "treebank", f, check=False)
    assert r.returncode == 1 and ":1: unbalanced ')'" in r.stderr
    f.write_text("( (S (-NONE- *)) )\n")
    r = grind("make-grammar", "treebank", f, check=False)
    assert r.returncode == 1 and "no tree with a word" in r.stderr
    # a ')' missing on line 2 and an extra one on line 3 balance out: two trees must not be read as one
    f.write_text("( (S (NP (DT The) (NN dog)) (VP (VBZ barks))) )\n( (S (NP (DT A) (NN cat)) (VP (VBZ sleeps)) )\n"
                 "( (S (NP (DT A) (NN cow)) (VP (VBZ moos))) ))\n")
    for cmd in (["make-grammar", "treebank"], ["eval", "--labeled", f]):
        r = grind(*cmd, f, check=False)
        assert r.returncode == 1 and "bad.mrg:3: a bracket without a label inside a tree" in r.stderr, r.stderr


def test_every_training_tree_round_trips():
    ptb = shared_path("nltk_ptb_sample", "treebank", "combined")
    ts = [t for i in range(1, 160) for t in read_trees(str(ptb / f"wsj_{i:04d}.mrg"))]
    assert len(ts) == 3396
    for t in ts:
        c = clean(t)
        assert debinarise(binarise(c)) == c


def test_noise_without_subtypes_is_a_usage_error(tmp_path):
    (tmp_path / "t.mrg").write_text("( (S (NP (NN dog)) (VP (VBD ran))) )\n")
    r = grind("make-grammar", "treebank", "--noise", "0.1", tmp_path / "t.mrg", check=False)
    assert r.returncode == 2 and "--noise randomises the split of --subtypes H > 1" in r.stderr


def test_parse_writes_brackets_in_words_as_ptb_escapes(tmp_path):
    """Words with '(' or ')' (plain-text input) are written -LRB- / -RRB-, so the trees read back; a
    treebank grammar also reads '(' as the treebank's -LRB-; the header and stderr count them."""
    tb = tmp_path / "t.mrg"
    tb.write_text("( (S (NP (DT The) (NN dog)) (VP (VBZ barks) (PRN (-LRB- -LRB-) (NN yes) (-RRB- -RRB-))) (. .)) )\n"
                  "( (S (NP (DT A) (NN cat)) (VP (VBZ sleeps)) (. .)) )\n")
    grind("make-grammar", "treebank", "--rare", "0", "-o", tmp_path / "g.txt", tb)
    (tmp_path / "in.txt").write_text("The dog barks ( yes ) .\nThe f(x) cat sleeps .\n")
    r = grind("parse", "-o", tmp_path / "out.trees", tmp_path / "g.txt", tmp_path / "in.txt")
    trees = read_trees(str(tmp_path / "out.trees"))
    prn = ("PRN", ("-LRB-", "-LRB-"), ("NN", "yes"), ("-RRB-", "-RRB-"))
    assert trees[0] == ("ROOT", ("S", ("NP", ("DT", "The"), ("NN", "dog")), ("VP", ("VBZ", "barks"), prn), (".", ".")))
    assert trees[1] == ("NOPARSE", "The", "f-LRB-x-RRB-", "cat", "sleeps", ".")
    note = "3 words with '(' or ')' written with -LRB- / -RRB-"
    assert note in r.stderr and f"# escaped_words: {note}" in (tmp_path / "out.trees").read_text()


def test_top_wrapper_is_the_root():
    """'(TOP (S ...))' is prepared as '( (S ...))' is (eval --labeled reads TOP as the root too);
    a TOP below the top stays a label."""
    a = clean(parse_one("(TOP (S (NP (DT The) (NN dog)) (VP (VBZ barks))))"))
    b = clean(parse_one("( (S (NP (DT The) (NN dog)) (VP (VBZ barks))))"))
    assert a == b and a[0] == "ROOT" and a[1][0] == "S"
    assert clean(parse_one("( (S (TOP (NN x)) (VP (VBZ y))))"))[1][1][0] == "TOP"


def parse_one(text):
    return next(parse_trees(text))


def test_make_grammar_names_the_line_of_a_bad_tree(tmp_path):
    f = tmp_path / "bw.mrg"
    f.write_text("( (S (NP (NN x)) (VP (VB y))) )\n\n( (S (NP (NN a) b) (VP (VB c))) )\n")
    r = grind("make-grammar", "treebank", f, check=False)
    assert r.returncode == 1 and "bw.mrg:3: constituent 'NP' has words and constituents" in r.stderr, r.stderr
