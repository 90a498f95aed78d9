"""Grammar, count, corpus and tree formats: round-trips and clear errors."""
import gzip

import numpy as np
import pytest

from grind.formats.corpus import CorpusSpec, read_corpus
from grind.formats.counts import Counts, read_counts, write_counts
from grind.errors import InputError
from grind.grammars.grammar import Grammar, format_weight, read_grammar, rule_lines
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
        f.write("S --> a\nS --> S S\n")
    g = read_grammar(str(p))
    assert list(g.weights) == [1.0, 1.0] and g.pseudocounts is None
    with gzip.open(p, "wt") as f:
        f.write("0.25 1 S --> a\n0.5 2.5 S --> S S\n")
    g = read_grammar(str(p))
    assert list(g.weights) == [0.25, 0.5] and list(g.pseudocounts) == [1.0, 2.5]


@pytest.mark.parametrize("text,msg", [
    ("S --> a\nS -> b\n", ":2: no '-->'"),
    ("S --> a\nx S --> b\n", ":2: weight 'x' is not a number"),
    ("S --> a\n1 S -->\n", ":2: rule S --> has an empty right-hand side"),
    ("0.5 S --> a\n0.5 S --> a\n", ":2: duplicate rule S --> a (first at line 1)"),
    ("-1 S --> a\n", ":1: weight -1 must be finite"),
    ("nan S --> a\n", ":1: weight nan must be finite"),
    ("# nothing\n", "no rules"),
    # one layout a file: a line that lost its weight (or its LHS: the weight would be read as one) is not weight 1
    ("0.5 S --> a\nS --> b\n", ":2: no number before the rule, but line 1 has one number (a weight)"),
    ("0.5 S --> a\n0.5 --> b\n", ":2: no number before the rule, but line 1 has one number"),
    ("S --> a\n0.5 2 S --> b\n", ":2: two numbers (weight, pseudo-count) before the rule, but line 1 has no number"),
    ("0.5 2 S --> a\n0.5 S --> b\n", ":2: one number (a weight) before the rule, but line 1 has two"),
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


def test_left_out_sentences_add_up_and_a_shard_without_any_writes_no_line(tmp_path):
    """'# left_out:' (sentences read but not counted) is written only when not 0 and adds up
    with a file that has none."""
    st = {"sentences": 2, "parsed": 2, "words": 5, "loglik": -3.25}
    a = Counts([("S", ("a",))], np.array([1.0]), dict(st, left_out=3))
    b = Counts([("S", ("a",))], np.array([2.0]), dict(st, repeats=2))
    for path, c in (("ab.txt", a + b), ("ba.txt", b + a), ("b.txt", b)):
        write_counts(str(tmp_path / path), c)
    for path in ("ab.txt", "ba.txt"):
        got = read_counts(str(tmp_path / path)).stats
        assert got["left_out"] == 3 and got["repeats"] == 2
    assert "# left_out:" not in (tmp_path / "b.txt").read_text() and "# repeats: 2" in (tmp_path / "b.txt").read_text()
    text = (tmp_path / "ab.txt").read_text().replace("# left_out: 3", "# left_out: -1")
    (tmp_path / "bad.txt").write_text(text)
    with pytest.raises(InputError, match="left_out: -1' must be a finite non-negative number"):
        read_counts(str(tmp_path / "bad.txt"))


def test_counts_with_no_sentence_parsed_are_read(tmp_path):
    # '# parsed: 0' and '# words: 0' are valid statistics (no sentence of the shard parsed)
    p = tmp_path / "c.txt"
    write_counts(str(p), Counts([("S", ("a",))], np.array([0.0]), {"sentences": 2, "parsed": 0, "words": 0}))
    assert read_counts(str(p)).stats == {"sentences": 2, "parsed": 0, "words": 0}


def test_aligned_refuses_a_counted_rule_the_grammar_lacks():
    c = Counts([("S", ("a",)), ("S", ("b",))], np.array([1.0, 2.0]))
    both = Grammar([("S", ("b",)), ("S", ("a",))], np.ones(2), "S")
    assert list(c.aligned(both)) == [2.0, 1.0]                       # in the grammar's order
    with pytest.raises(InputError, match="counted rule S --> b is not in the grammar"):
        c.aligned(Grammar([("S", ("a",))], np.ones(1), "S"))


def test_conllu_reader_skips_mwt_empty_nodes_and_comments(tmp_path):
    p = tmp_path / "x.conllu"
    p.write_text(CONLLU)
    s = read_corpus(str(p), CorpusSpec(column="UPOS"))
    assert [x.tokens for x in s] == [["PRON", "AUX", "PART", "VERB", "PUNCT"], ["INTJ", "PUNCT", "NOUN"]]
    assert s[0].heads == [4, 4, 4, 0, 4] and s[0].comments[0] == "# sent_id = 1"
    forms = read_corpus(str(p), CorpusSpec(column="LFORM"))
    assert forms[1].tokens == ["yes", ",", "sir"]


@pytest.mark.slow
def test_the_format_auto_detects_is_said_on_stderr_and_in_the_header(tmp_path):
    from conftest import grind
    from grind.formats.corpus import peek_format
    f = tmp_path / "c.txt"                           # a CoNLL-U file under a name that says nothing
    f.write_text(CONLLU)
    spec = CorpusSpec(column="UPOS")
    c = read_corpus(str(f), spec)
    assert c.format == "conllu" == peek_format(str(f), spec)
    assert peek_format("-", spec) is None and peek_format(str(f), CorpusSpec(format="conllx")) == "conllx"
    assert spec.describe(c.format).startswith("format=conllu (auto-detected) column=UPOS")
    assert CorpusSpec(format="conllu").describe("conllu").startswith("format=conllu column=")
    g = tmp_path / "g.txt"
    grind("make-grammar", "dmv", "--column", "UPOS", "-o", g, f)
    r = grind("parse", "--column", "UPOS", g, "-", stdin=CONLLU)
    assert "<stdin>: read as conllu (--format auto, from its first line" in r.stderr
    assert "# corpus: format=conllu (auto-detected) column=UPOS" in r.stdout
    assert "# corpus: format=conllu (auto-detected) column=UPOS" in g.read_text()
    assert "# corpus: format=conllu (auto-detected)" in grind("make-grammar", "dmv", "--column", "UPOS", "-",
                                                             stdin=CONLLU).stdout
    r = grind("parse", "--format", "conllu", "--column", "UPOS", g, f)
    assert "read as" not in r.stderr and "# corpus: format=conllu column=UPOS" in r.stdout
    named = tmp_path / "c.conllu"
    named.write_text(CONLLU)
    r = grind("parse", "--column", "UPOS", g, named)
    assert "read as" not in r.stderr and "# corpus: format=conllu (auto-detected)" in r.stdout


@pytest.mark.parametrize("name,text,spec,msg", [
    # a later line that would be read as something else than the first line says
    ("c.txt", "the dog barks\n1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n", {},
     r"c.txt:2: a TAB in a file read as plain text \(its first line has none\)"),
    ("c.conllu", "1\ta\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tb\tb\t_\tNN\t_\t0\troot\t_\t_\n", {"column": "UPOS"},
     r"c.conllu:2: column UPOS is empty \('_'\) on this token"),
    ("c.conllu", "1\ta\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tb\tb\tNOUN\tNN\t_\t\u0660\troot\t_\t_\n",
     {"column": "UPOS"}, r"c.conllu:2: HEAD '\u0660' is not a number \(digits 0-9\)"),
    ("w.tsv", "abc\nabd\tab @@d\n", {"chars": True}, r"w.tsv:2: a segmentation column, which line 1 does not have"),
])
def test_a_later_line_of_another_layout_is_an_error(tmp_path, name, text, spec, msg):
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=msg):
        read_corpus(str(f), CorpusSpec(**spec))


def test_tabs_in_plain_text_when_the_format_is_given(tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("the dog\na cat\tsleeps\n")
    sents = read_corpus(str(f), CorpusSpec(format="text"))
    assert [s.tokens for s in sents] == [["the", "dog"], ["a", "cat", "sleeps"]]


def test_bracket_eval_errors_name_both_files(tmp_path):
    from conftest import grind
    (tmp_path / "g.mrg").write_text("(S (NP a) (VP b))\n(S (NP c) (VP d))\n")
    (tmp_path / "p.mrg").write_text("(S (NP a) (VP b))\n(S (NP c) (VP e))\n")
    r = grind("eval", "--column", "FORM", tmp_path / "g.mrg", tmp_path / "p.mrg", check=False)
    assert r.returncode == 1 and f"{tmp_path / 'g.mrg'} vs {tmp_path / 'p.mrg'}: tree 2" in r.stderr


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


def conllx_rows(rows):
    """CoNLL-X text of one sentence: (FORM, CPOSTAG, POSTAG, HEAD) rows."""
    return "".join(f"{i}\t{w}\t_\t{c}\t{t}\t_\t{h}\t_\t_\t_\n" for i, (w, c, t, h) in enumerate(rows, 1)) + "\n"


def test_ptb_brackets_are_punctuation(tmp_path):
    # ( costs ): the brackets (XPOS -LRB- / -RRB-, heads 'costs') are removed under --punct ptb
    p = tmp_path / "x.conllx"
    p.write_text(conllx_rows([("(", "-LRB-", "-LRB-", 2), ("costs", "VBZ", "VBZ", 0), (")", "-RRB-", "-RRB-", 2)]))
    s = read_corpus(str(p), CorpusSpec(column="XPOS", punct="ptb"))
    assert s[0].tokens == ["VBZ"] and s[0].heads == [0]


def test_ptb_plus_also_removes_dollar_and_hash(tmp_path):
    # costs $ 5 #: $ (head costs) and # (head $) are punctuation under ptb+ only; 5's head $ is removed,
    # so 5 moves up to $'s head, costs
    p = tmp_path / "x.conllx"
    p.write_text(conllx_rows([("costs", "VBZ", "VBZ", 0), ("$", "$", "$", 1), ("5", "CD", "CD", 2),
                              ("#", "#", "#", 2)]))
    s = read_corpus(str(p), CorpusSpec(column="FORM", punct="ptb"))
    assert s[0].tokens == ["costs", "$", "5", "#"] and s[0].heads == [0, 1, 2, 2]
    s = read_corpus(str(p), CorpusSpec(column="FORM", punct="ptb+"))
    assert s[0].tokens == ["costs", "5"] and s[0].heads == [0, 1]


def test_ptb_punct_from_the_fourth_column_when_the_fifth_is_blank(tmp_path):
    # tags only in CPOSTAG (POSTAG '_'): the PTB punctuation is read there.  costs $ 5 , with ','
    # (head costs) removed under ptb, '$' too under ptb+ (5 then moves up to costs)
    p = tmp_path / "x.conllx"
    p.write_text(conllx_rows([("costs", "VBZ", "_", 0), ("$", "$", "_", 1), ("5", "CD", "_", 2), (",", ",", "_", 1)]))
    s = read_corpus(str(p), CorpusSpec(column="FORM", punct="ptb"))
    assert s[0].tokens == ["costs", "$", "5"] and s[0].heads == [0, 1, 2]
    s = read_corpus(str(p), CorpusSpec(column="UPOS", punct="ptb+"))
    assert s[0].tokens == ["VBZ", "CD"] and s[0].heads == [0, 1]


def test_head_reattached_through_a_chain_of_punctuation(tmp_path):
    # go ( " now: now's head is '(' (removed), whose head is '"' (removed), whose head is go:
    # now moves up twice, to go -> tokens VERB ADV, heads [0, 1]
    p = tmp_path / "x.conllu"
    p.write_text("1\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
                 "2\t(\t(\tPUNCT\t-LRB-\t_\t3\tpunct\t_\t_\n"
                 "3\t\"\t\"\tPUNCT\t``\t_\t1\tpunct\t_\t_\n"
                 "4\tnow\tnow\tADV\tRB\t_\t2\tadvmod\t_\t_\n\n")
    s = read_corpus(str(p), CorpusSpec(column="UPOS", punct="ud"))
    assert s[0].tokens == ["VERB", "ADV"] and s[0].heads == [0, 1]


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
    with pytest.raises(InputError, match=r"x.dp:2: the heads of tokens 2, 3 form a cycle"):
        read_corpus(str(p), CorpusSpec(column="XPOS", punct="ptb"))
    p.write_text("a\tDT\t0\nb\tNN\t1\nc\tNN\t3\n\n")          # a token its own head: named by its line
    with pytest.raises(InputError, match=r"x.dp:3: token 3's HEAD is itself"):
        read_corpus(str(p), CorpusSpec(column="XPOS"))


def test_malt_sentences_run_together_are_warned_about(tmp_path, capsys):
    f = tmp_path / "m.dp"
    f.write_text("The\tDT\t2\ndog\tNN\t0\n\nA\tDT\t2\ncat\tNN\t0\nBirds\tNNS\t2\nsing\tVBP\t0\n")
    sents = read_corpus(str(f), CorpusSpec(column="XPOS"))
    assert len(sents) == 2
    assert "1 sentence(s) with more than one root (HEAD 0), at line(s) 4: is a blank line missing" in \
        capsys.readouterr().err


def test_bracket_eval_with_no_predicted_bracket_says_why_it_is_nan(tmp_path):
    from conftest import grind
    (tmp_path / "g.mrg").write_text("(S (NP a) (VP b))\n")
    (tmp_path / "p.mrg").write_text("(NOPARSE a b)\n")
    r = grind("eval", "--max-unparsed", "1", "--column", "FORM", tmp_path / "g.mrg", tmp_path / "p.mrg")
    assert "corpus_f1\tnan" in r.stdout and "no predicted bracket to score (1 of 1 trees NOPARSE)" in r.stderr


def test_bracket_eval_of_several_files_names_each_and_gives_the_spread(tmp_path):
    from conftest import grind
    (tmp_path / "g.mrg").write_text("(S (NP (D a) (N b)) (VP (V c) (N d)))\n")
    (tmp_path / "p.mrg").write_text("(S (NP (D a) (N b)) (VP (V c) (N d)))\n")      # F1 1
    (tmp_path / "q.mrg").write_text("(S (D a) (X (N b) (Y (V c) (N d))))\n")        # (1,4) (2,4) vs (0,2) (2,4): 1/2
    one = grind("eval", "--column", "FORM", tmp_path / "g.mrg", tmp_path / "p.mrg").stdout
    assert "# predicted:" not in one and "mean and sample standard deviation" not in one
    out = grind("eval", "--column", "FORM", tmp_path / "g.mrg", tmp_path / "p.mrg", tmp_path / "q.mrg").stdout
    assert f"# predicted: {tmp_path / 'p.mrg'}\n" in out and f"# predicted: {tmp_path / 'q.mrg'}\n" in out
    assert "# configurations: 2 among the 2" in out and "mean and sample" not in out    # no headers: unlike runs
    out = grind("eval", "--aggregate", "--column", "FORM", tmp_path / "g.mrg", tmp_path / "p.mrg",
                tmp_path / "q.mrg").stdout
    assert "# 2 predicted files: mean and sample standard deviation" in out
    assert "corpus_f1\t0.7500\t0.3536\n" in out and "exact_match\t0.5000\t0.7071\n" in out
    assert "gold read as format=ptb (auto-detected)" in out


def test_blank_lines_between_text_sentences_are_counted_on_stderr(tmp_path, capsys):
    """They were skipped without a word, so sentence numbers no longer matched line numbers (CLI audit)."""
    p = tmp_path / "d.txt"
    p.write_text("the dog runs\n\na cat sleeps\nthe cat\n")
    sents = read_corpus(str(p))
    assert [s.line for s in sents] == [1, 3, 4] and [s.number for s in sents] == [1, 2, 3]
    assert "1 blank line(s) between sentences skipped" in capsys.readouterr().err


def test_conll_block_without_a_word_row_is_counted(tmp_path):
    """A block holding only an empty node (or multiword ranges) was dropped with no word (helper audit)."""
    from conftest import grind
    row = "{}\tw\tw\tNOUN\t_\t_\t{}\t_\t_\t_\n"
    f = tmp_path / "c.conllu"
    f.write_text(row.format(1, 0) + row.format(2, 1) + "\n# only an empty node\n" + row.format("1.1", "_")
                 + "\n" + row.format(1, 0) + "\n")
    grind("make-grammar", "dmv", "--column", "UPOS", "-o", tmp_path / "g.txt", f)
    r = grind("parse", "--column", "UPOS", tmp_path / "g.txt", f)
    assert "skipped 1 sentence(s) without a word row (only empty nodes or multiword ranges), at line(s) 4" in r.stderr
    assert "# left_out: 1 CoNLL sentences without a word row" in r.stdout


def test_conll_sentence_with_several_roots_is_warned(tmp_path):
    from conftest import grind
    f = tmp_path / "r.conllu"
    f.write_text("1\ta\ta\tNOUN\t_\t_\t0\t_\t_\t_\n2\tb\tb\tVERB\t_\t_\t0\t_\t_\t_\n\n")
    r = grind("eval", "--column", "UPOS", f, f)
    assert "1 sentence(s) with more than one root (HEAD 0), at line(s) 1: UD has one" in r.stderr


def test_bracket_eval_prints_the_branching_baselines_and_the_overlap_with_them(tmp_path):
    """By hand.  Gold spans {(0,2),(2,4)} and {(0,3)}; prediction {(1,4),(2,4)} and {(0,2),(0,3)}:
    2 of 4 predicted / 3 gold match (F1 4/7), sentence F1 (1/2 + 2/3) / 2.  Right-branching over 4
    words: {(1,4),(2,4)} (1 of 4 match: F1 2/7); left-branching {(0,2),(0,3)} (2 of 4: F1 4/7,
    equal to the prediction's: a note).  The prediction's spans: 2 of 4 in each baseline tree."""
    from conftest import grind
    (tmp_path / "g.mrg").write_text("(S (NP (DT The) (NN dog)) (VP (VBD ran) (ADVP (RB away))))\n"
                                    "(S (NP (DT A) (JJ big) (NN cat)) (VP (VBD sat)))\n")
    (tmp_path / "p.mrg").write_text("(S (DT The) (X (NN dog) (X (VBD ran) (RB away))))\n"
                                    "(S (X (X (DT A) (JJ big)) (NN cat)) (VBD sat))\n")
    out = grind("eval", "--column", "FORM", tmp_path / "g.mrg", tmp_path / "p.mrg").stdout
    assert "corpus_f1\t0.5714\n" in out and "sentence_mean_f1\t0.5833\n" in out
    assert "overlap_right-branching\t0.5000\n" in out and "overlap_left-branching\t0.5000\n" in out
    rows = dict(ln.split("\t") for ln in out.splitlines() if ln and not ln.startswith("#"))     # KEY<TAB>value
    assert [rows[f"right-branching:{k}"] for k in ("corpus_precision", "corpus_recall", "corpus_f1",
                                                   "sentence_mean_f1", "exact_match")] == \
        ["0.2500", "0.3333", "0.2857", "0.2500", "0.0000"]
    assert [rows[f"left-branching:{k}"] for k in ("corpus_precision", "corpus_recall", "corpus_f1",
                                                  "sentence_mean_f1", "exact_match")] == \
        ["0.5000", "0.6667", "0.5714", "0.5833", "0.0000"]
    assert "# note: corpus_f1 0.5714 is within 1 point of left-branching 0.5714" in out
    assert "right-branching 0.2857" not in out
    bare = grind("eval", "--no-baselines", "--column", "FORM", tmp_path / "g.mrg", tmp_path / "p.mrg").stdout
    assert "overlap_" not in bare and "# baselines" not in bare and "corpus_f1\t0.5714\n" in bare


def test_grammar_header_counts_its_rules_and_a_hand_edit_without_the_line_reads(tmp_path):
    """A grind grammar cut short was read as a smaller grammar (its LHSs without rules became terminals)."""
    from grind.grammars.grammar import read_grammar
    from grind.grammars.cnf import cnf_grammar
    g = cnf_grammar(["a", "b"], 2, 1)
    g.write(tmp_path / "g.txt")
    text = (tmp_path / "g.txt").read_text()
    assert f"# rules: {len(g)}\n" in text and len(read_grammar(str(tmp_path / "g.txt"))) == len(g)
    lines = text.splitlines(True)
    (tmp_path / "cut.txt").write_text("".join(lines[:-3]))
    with pytest.raises(InputError, match=f"says {len(g)} rules but the file has {len(g) - 3}"):
        read_grammar(str(tmp_path / "cut.txt"))
    (tmp_path / "edited.txt").write_text("".join(ln for ln in lines[:-3] if not ln.startswith("# rules:")))
    assert len(read_grammar(str(tmp_path / "edited.txt"))) == len(g) - 3


@pytest.mark.slow
def test_parse_output_writes_back_no_gold_arc(tmp_path):
    """Empty nodes kept their gold DEPS and CoNLL-X kept its gold PDEPREL in grind parse's output (eval audit)."""
    from conftest import grind
    f = tmp_path / "c.conllu"
    f.write_text(CONLLU.replace("4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_",
                                "4\tknow\tknow\tVERB\tVB\t_\t0\troot\t0:root\tSpaceAfter=No"))
    x = tmp_path / "c.conllx"                  # CoNLL-X: PHEAD and PDEPREL in columns 9 and 10
    x.write_text("".join("\t".join(ln.split("\t")[:8] + ["4", "nsubj"]) + "\n" if "\t" in ln else ln
                         for ln in CONLLU.splitlines(True) if not ln.startswith("#") and "-" not in ln.split("\t")[0]
                         and "." not in ln.split("\t")[0]))
    g = tmp_path / "g.txt"
    grind("make-grammar", "dmv", "--column", "UPOS", "-o", g, f)
    rows = [ln.split("\t") for ln in grind("parse", "--column", "UPOS", g, f).stdout.splitlines() if "\t" in ln]
    assert [r[8] for r in rows if "-" not in r[0]] == ["_"] * 9               # DEPS, of empty nodes too
    assert rows[4][9] == "SpaceAfter=No"                                       # MISC passed through
    rows = [ln.split("\t") for ln in grind("parse", "--format", "conllx", "--column", "UPOS", g, x).stdout.splitlines()
            if "\t" in ln]
    assert {(r[8], r[9]) for r in rows} == {("_", "_")}


def test_a_punctuation_root_removed_leaves_several_roots_and_says_so(tmp_path, capsys):
    """The reader warned of gold with several roots, but not of those --punct ud makes (eval audit)."""
    p = tmp_path / "pr.conllu"
    p.write_text("1\tyes\tyes\tINTJ\tUH\t_\t2\tdiscourse\t_\t_\n2\t-\t-\tPUNCT\t:\t_\t0\troot\t_\t_\n"
                 "3\tno\tno\tINTJ\tUH\t_\t2\tdiscourse\t_\t_\n\n")
    assert read_corpus(str(p), CorpusSpec(column="UPOS", punct="ud"))[0].heads == [0, 0]
    err = capsys.readouterr().err
    assert "1 sentence(s) whose root is punctuation, at line(s) 1: --punct ud removes it" in err
    assert read_corpus(str(p), CorpusSpec(column="UPOS"))[0].heads == [2, 0, 2]
    assert "root is punctuation" not in capsys.readouterr().err
