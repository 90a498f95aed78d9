"""Grammar, count, corpus and tree formats: round-trips and clear errors."""
import gzip

import numpy as np
import pytest

from grind.formats.corpus import CorpusSpec, read_corpus
from grind.formats.counts import Counts, read_counts, write_counts
from grind.errors import InputError
from grind.grammars.grammar import format_weight, read_grammar, rule_lines
from grind.formats.trees import format_tree, leaves, parse_trees, prune, spans

CONLLU = """# sent_id = 1
# text = I don't know.
1	I	I	PRON	PRP	_	4	nsubj	_	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	_	4	aux	_	_
3	n't	not	PART	RB	_	4	advmod	_	_
4	know	know	VERB	VB	_	0	root	_	_
4.1	knew	know	VERB	VBD	_	_	_	4:conj	_
5	.	.	PUNCT	.	_	4	punct	_	_

1	Yes	yes	INTJ	UH	_	0	root	_	_
2	,	,	PUNCT	,	_	1	punct	_	_
3	sir	sir	NOUN	NN	_	1	vocative	_	_

"""


def test_grammar_roundtrip_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.random(3) * 1e-7
    rules = [("S", ("NP", "VP")), ("NP", ("dogs",)), ("VP", ("bark", "loudly", "now"))]
    p = tmp_path / "g.txt"
    p.write_text("# weights: probabilities\n" + "".join(rule_lines(rules, w)))
    g = read_grammar(str(p))
    assert g.rules == rules and g.start == "S"
    assert np.array_equal(g.weights, w)  # bit-exact
    assert g.terminals == ["bark", "dogs", "loudly", "now"]
    assert g.meta["weights"] == "probabilities"


def test_grammar_default_weight_pseudocount_and_gzip(tmp_path):
    p = tmp_path / "g.txt.gz"
    with gzip.open(p, "wt") as f:
        f.write("S --> a\n0.5 2.5 S --> S S\n")
    g = read_grammar(str(p))
    assert list(g.weights) == [1.0, 0.5] and list(g.pseudocounts) == [0.0, 2.5]


@pytest.mark.parametrize("text,msg", [
    ("S --> a\nS -> b\n", ":2: no '-->'"),
    ("S --> a\nx S --> b\n", ":2: weight 'x' is not a number"),
    ("S --> a\n1 S -->\n", ":2: rule S --> has an empty right-hand side"),
    ("S --> a\n0.5 S --> a\n", ":2: duplicate rule S --> a (first at line 1)"),
    ("-1 S --> a\n", ":1: weight -1 must be finite"),
    ("nan S --> a\n", ":1: weight nan must be finite"),
    ("# nothing\n", "no rules"),
])
def test_malformed_grammar_names_file_and_line(tmp_path, text, msg):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        read_grammar(str(p))
    assert str(p) in str(e.value) and msg in str(e.value)


def test_non_utf8_names_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"S --> a\nS --> \xff\n")
    with pytest.raises(InputError, match=r"bad.txt:2: not valid UTF-8"):
        read_grammar(str(p))


def test_unknown_start_symbol(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("S --> a\n")
    with pytest.raises(InputError, match="start symbol 'T'"):
        read_grammar(str(p), start="T")


def test_format_weight_shortest_exact():
    for v in [0.1, 1 / 3, 1e-300, 5e-324, 1.0, 123456789.0]:
        assert float(format_weight(v)) == v
    assert format_weight(1.0) == "1"


def test_counts_sum_and_roundtrip(tmp_path):
    a = Counts([("S", ("a",)), ("S", ("S", "S"))], np.array([1.5, 2.0]),
               {"sentences": 2, "parsed": 2, "words": 5, "loglik": -3.25})
    b = Counts([("S", ("S", "S")), ("S", ("b",))], np.array([1.0, 0.25]),
               {"sentences": 1, "parsed": 1, "words": 2, "loglik": -1.0})
    c = a + b
    assert c.rules == [("S", ("a",)), ("S", ("S", "S")), ("S", ("b",))]
    assert list(c.values) == [1.5, 3.0, 0.25]
    assert c.stats == {"sentences": 3, "parsed": 3, "words": 7, "loglik": -4.25}
    p = tmp_path / "c.txt"
    write_counts(str(p), c)
    r = read_counts(str(p))
    assert r.rules == c.rules and np.array_equal(r.values, c.values) and r.stats == c.stats


def test_conllu_reader_skips_mwt_empty_nodes_and_comments(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_text(CONLLU)
    s = read_corpus(str(p), CorpusSpec(column="UPOS"))
    assert [x.tokens for x in s] == [["PRON", "AUX", "PART", "VERB", "PUNCT"], ["INTJ", "PUNCT", "NOUN"]]
    assert s[0].heads == [4, 4, 4, 0, 4] and s[0].comments[0] == "# sent_id = 1"
    forms = read_corpus(str(p), CorpusSpec(column="LFORM"))
    assert forms[1].tokens == ["yes", ",", "sir"]


def test_punctuation_removed_before_length_filter(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_text(CONLLU)
    s = read_corpus(str(p), CorpusSpec(column="XPOS", punct="ud", max_length=2))
    assert [x.tokens for x in s] == [["UH", "NN"]]
    assert s[0].heads == [0, 1] and s[0].number == 2


def test_punct_heads_reattached_to_grandparent(tmp_path):
    # "a , b": b's head is the comma, whose head is a -> b attaches to a.
    p = tmp_path / "x.dp"
    p.write_text("a\tDT\t0\n,\t,\t1\nb\tNN\t2\n\n")
    s = read_corpus(str(p), CorpusSpec(column="XPOS", punct="ptb"))
    assert s[0].tokens == ["DT", "NN"] and s[0].heads == [0, 1]


def test_treebank_needs_explicit_column(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_text(CONLLU)
    with pytest.raises(InputError, match="explicit --column"):
        read_corpus(str(p))


def test_bad_conll_line_named(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_text("1\ta\tb\n")
    with pytest.raises(InputError, match=r"x.conllu:1: expected 10 tab-separated"):
        read_corpus(str(p), CorpusSpec(format="conllu", column="FORM"))


def test_empty_corpus_is_an_error(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("\n\n")
    with pytest.raises(InputError, match="no sentences"):
        read_corpus(str(p))


def test_ptb_trees_parse_prune_and_spans():
    text = "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD barked) (-NONE- *T*-1)) (. .)) )\n(X a)"
    t1, t2 = parse_trees(text)
    assert t1[0] == "S" and t2 == ("X", "a")
    p = prune(t1, lambda tag: tag in {"-NONE-", "."})
    assert format_tree(p) == "(S (NP-SBJ (DT The) (NN dog)) (VP (VBD barked)))"
    assert leaves(p) == ["The", "dog", "barked"]
    assert list(spans(p)) == [("S", 0, 3), ("NP-SBJ", 0, 2), ("DT", 0, 1), ("NN", 1, 2),
                              ("VP", 2, 3), ("VBD", 2, 3)]


def test_unbalanced_tree_is_an_error():
    with pytest.raises(InputError, match="unbalanced"):
        list(parse_trees("(S (A a)"))


def test_head_cycle_is_an_error_not_a_hang(tmp_path):
    p = tmp_path / "x.dp"
    p.write_text("a\tDT\t2\n,\t,\t3\nb\t,\t2\n\n")
    with pytest.raises(InputError, match=r"x.dp:1: the HEAD column of this sentence has a cycle"):
        read_corpus(str(p), CorpusSpec(column="XPOS", punct="ptb"))
