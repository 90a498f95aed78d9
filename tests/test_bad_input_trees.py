"""Bad PTB trees, grammar-unsafe corpus tokens and ``#`` header lines of plain corpora.

Errors follow the contract of tests/test_bad_input.py: exit status 1, stderr one
``grind: error: ...`` line naming the file and line, no traceback, nothing on stdout.
"""
from __future__ import annotations

import pytest

from conftest import grind

TREE_COMMANDS = [
    ["make-grammar", "cnf", "-n", "1", "-p", "1", "--column", "XPOS"],
    ["make-grammar", "cnf", "-n", "1", "-p", "1", "--column", "FORM"],
    ["make-grammar", "treebank"],
]


def error(r) -> str:
    """The one error line of a failed run."""
    assert r.returncode == 1, f"exit status {r.returncode}; stderr:\n{r.stderr}"
    assert "Traceback" not in r.stderr and not r.stdout
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("grind: error: "), r.stderr
    return lines[0]


@pytest.mark.parametrize("command", TREE_COMMANDS)
@pytest.mark.parametrize("tree, empty, line", [("(S (NP (DT The) (NN)) (VP (VBZ barks)))", "(NN)", 4),
                                               ("(S)", "(S)", 4), ("(S (NP (DT The)\n (JJ)))", "(JJ)", 5)])
def test_empty_constituent_is_an_error(tmp_path, command, tree, empty, line):
    """A label with no children, named at the line of its bracket; ``( )``, an empty tree, is not one."""
    f = tmp_path / "ep.mrg"
    f.write_text(f"# header\n(S (NP (DT A) (NN cat)))\n( )\n{tree}\n")
    msg = error(grind(*command, f, check=False))
    assert f"{f}:{line}: empty constituent '{empty}'" in msg


def test_empty_constituent_named_on_its_own_line_in_labeled_eval(tmp_path):
    f = tmp_path / "ep.mrg"
    f.write_text("(S (NP (DT A) (NN cat)))\n(S\n  (NP (DT The)\n    (NN))\n  (VP (VBZ barks)))\n")
    assert f"{f}:4: empty constituent '(NN)'" in error(grind("eval", "--labeled", f, f, check=False))


@pytest.mark.parametrize("tree, word, beside", [("(S (NP (DT The) dog) (VP (VBZ barks)))", "dog", "constituents"),
                                                ("(S (NP The dog) (VP (VBZ barks)))", "The", "other words")])
def test_word_not_under_a_preterminal_in_a_ptb_corpus(tmp_path, tree, word, beside):
    f = tmp_path / "mx.mrg"
    f.write_text(f"(S\n  (NP (DT A) (NN cat)))\n{tree}\n")
    msg = error(grind("make-grammar", "cnf", "-n", "1", "-p", "1", "--column", "FORM", f, check=False))
    assert f"{f}:3: word '{word}' is not under a preterminal" in msg and f"beside {beside}" in msg


def test_ptb_sentences_carry_their_line(tmp_path):
    """A PTB sentence's line is its tree's first line (was 0), so messages can name it."""
    from grind.formats.corpus import CorpusSpec, read_corpus
    f = tmp_path / "t.mrg"
    f.write_text("# header\n(S (NP (DT A) (NN cat)))\n(S\n  (VP (VBZ barks)))\n(S (NN x)) (S (NN y))\n")
    assert [s.line for s in read_corpus(str(f), CorpusSpec(column="FORM"))] == [2, 3, 5, 5]


@pytest.mark.slow
def test_labeled_eval_still_reads_predictions_with_bare_words(tmp_path):
    """``grind parse`` writes a word beside constituents for a rule such as S --> NP barks:
    a prediction, not bad input (so read_trees must not reject it)."""
    g, c = tmp_path / "g.txt", tmp_path / "c.txt"
    g.write_text("1 S --> NP barks\n1 NP --> DT dog\n1 DT --> The\n")
    c.write_text("The dog barks\n")
    pred = tmp_path / "p.mrg"
    pred.write_text(grind("parse", g, c).stdout)
    assert "(S (NP (DT The) dog) barks)" in pred.read_text()
    gold = tmp_path / "gold.mrg"
    gold.write_text("(S (NP (DT The) (NN dog)) (VBZ barks))\n")
    assert "all_correct_tags\t1" in grind("eval", "--labeled", gold, pred).stdout
    r = grind("eval", "--labeled", pred, pred, check=False)          # as GOLD, a prediction: swapped? (issue 38)
    assert r.returncode == 1 and "did you swap GOLD and PREDICTED?" in r.stderr
    bare = tmp_path / "bare.mrg"                                      # its header lost: the untagged words are an error
    bare.write_text("".join(ln for ln in pred.read_text().splitlines(True) if not ln.startswith("#")))
    r = grind("eval", "--labeled", bare, pred, check=False)
    assert r.returncode == 1 and "gold tree 1 (gold line " in r.stderr
    assert "): word 'dog' is not under a preterminal" in r.stderr


@pytest.mark.parametrize("form", ["-->", "New York", ""])
@pytest.mark.parametrize("column", ["FORM", "XPOS"])
def test_cnf_rejects_tokens_the_rule_format_cannot_hold(tmp_path, form, column):
    f = tmp_path / "c.conllu"
    f.write_text(f"1\tdog\t_\tNOUN\tNN\t_\t0\troot\t_\t_\n\n1\t{form}\t_\tSYM\t{form}\t_\t0\troot\t_\t_\n\n")
    msg = error(grind("make-grammar", "cnf", "-n", "1", "-p", "1", "--column", column, f, check=False))
    assert f"c.conllu: sentence 2 (line 3), token 1: {form!r} cannot be a grammar symbol" in msg


def test_text_header_lines_are_counted(tmp_path):
    f = tmp_path / "tags.txt"
    f.write_text("# CD NNS\n# JJ NN\nDT NN\n")
    r = grind("make-grammar", "cnf", "-n", "1", f)
    assert "the first 2 line(s) start with '#' and are read as a header" in r.stderr
    assert "--> CD" not in r.stdout and "--> DT" in r.stdout


def test_text_blank_line_ends_the_header(tmp_path):
    """The escape the header message names: a blank line before a first sentence that starts with '#'."""
    f = tmp_path / "tags.txt"
    f.write_text("\n# CD NNS\nDT NN\n")
    r = grind("make-grammar", "cnf", "-n", "1", f)
    assert "header" not in r.stderr and "X0 --> #" in r.stdout and "X0 --> CD" in r.stdout


def test_chars_header_lines_are_counted_and_a_hash_word_is_a_word(tmp_path):
    """'# ' (hash, space) starts a header line of a word list; '#hash' is a word, as in segmentation files
    (it was dropped as a header line: morphology audit)."""
    f = tmp_path / "words.txt"
    f.write_text("# a note\n# another\n#hash\nab\n")
    r = grind("make-grammar", "cnf", "-n", "1", "--chars", f)
    assert f"{f}: the first 2 line(s) start with '#' and are read as a header, not as words" in r.stderr
    assert "--> h" in r.stdout and "--> #" in r.stdout and "--> a" in r.stdout


def test_treebank_grammar_parses_plain_text_and_text_refuses_tag_columns(tmp_path):
    tb, g, plain = tmp_path / "tb.mrg", tmp_path / "tb.txt", tmp_path / "plain.txt"
    tb.write_text("(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ barks))))\n"
                  "(ROOT (S (NP (DT A) (NN cat)) (VP (VBZ sleeps))))\n")
    grind("make-grammar", "treebank", "-o", g, tb)
    plain.write_text("The dog barks\nA cat sleeps\n")
    out = grind("parse", g, plain).stdout
    assert "(ROOT (S (NP (DT The) (NN dog)) (VP (VBZ barks))))" in out
    r = grind("make-grammar", "cnf", "-n", "1", "--column", "UPOS", plain, check=False)
    assert r.returncode == 1 and "--column UPOS needs a CoNLL or Malt-TAB file" in r.stderr


def test_unlabeled_eval_gives_noparse_no_credit(tmp_path):
    g, p = tmp_path / "g.mrg", tmp_path / "p.mrg"
    g.write_text("(S (NP (PRP it)) (VP (VBZ runs)))\n(S (NP (DT the) (NN dog)) (VP (VBZ runs)))\n")
    p.write_text("(NOPARSE it runs)\n(S (NP (DT the) (NN dog)) (VP (VBZ runs)))\n")
    rows = dict(ln.split("\t") for ln in grind("eval", g, p).stdout.splitlines() if "\t" in ln)
    assert rows["noparse"] == "1" and rows["scored"] == "2"
    assert rows["exact_match"] == "0.5000" and rows["sentence_mean_f1"] == "0.5000"   # was 1.0 for both
    assert rows["corpus_precision"] == "1.0000" and rows["corpus_recall"] == "1.0000"
    p.write_text("(NOPARSE it runs)\n(NOPARSE the dog runs)\n")
    assert grind("eval", g, p, check=False).returncode == 1                      # every one NOPARSE (issue 38)
    rows = dict(ln.split("\t") for ln in grind("eval", "--max-unparsed", "1", g, p).stdout.splitlines() if "\t" in ln)
    assert rows["corpus_precision"] == "nan" and rows["corpus_recall"] == "0.0000" and rows["exact_match"] == "0.0000"
