"""Labeled bracket evaluation, EVALB COLLINS.prm conventions (grind.eval.labeled).

Every expected number is worked out by hand in the comments: brackets are
written LABEL(start,end) over the words left after -NONE- and punctuation
are deleted; preterminals are not brackets.
"""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from conftest import grind
from grind.cli.main import cli
from grind.errors import InputError
from grind.eval.labeled import REPORT_KEYS, base_label, evaluate_labeled, evaluate_labeled_files
from grind.formats.trees import parse_trees


def trees(*texts):
    return [t for text in texts for t in parse_trees(text)]


def score(gold, pred, cutoff=40):
    return evaluate_labeled(trees(*gold), trees(*pred), cutoff=cutoff)


@pytest.mark.parametrize("label, base", [
    ("NP-SBJ-1", "NP"), ("NP=2", "NP"), ("S-TPC=3", "S"), ("NP-SBJ", "NP"), ("PRP$", "PRP$"),
    ("-NONE-", "-NONE-"), ("-LRB-", "-LRB-"), ("-RRB-", "-RRB-"), ("NP", "NP"), ("", ""),
])
def test_base_label(label, base):
    assert base_label(label) == base


def test_function_tags_and_indices_stripped():
    gold = ["(S (NP-SBJ-1 (DT the) (NN dog)) (VP=2 (VBZ barks)))"]
    # gold S(0,3) NP(1..) -> NP(0,2) VP(2,3); predicted the same with bare labels: 3 of 3.
    res = score(gold, ["(S (NP (DT the) (NN dog)) (VP (VBZ barks)))"])["all"]
    assert (res["gold_brackets"], res["predicted_brackets"], res["matched_brackets"]) == (3, 3, 3)
    assert res["labeled_f1"] == pytest.approx(100.0)
    # A different label on the NP span: 2 of 3 matched, P = R = F1 = 66.67.
    res = score(gold, ["(S (NX (DT the) (NN dog)) (VP (VBZ barks)))"])["all"]
    assert res["matched_brackets"] == 2
    assert res["labeled_f1"] == pytest.approx(200 / 3)


def test_trace_deleted_with_its_empty_parent():
    # gold after deletion: (S (VP (VBD left) (ADVP (RB early)))): S(0,2) VP(0,2) ADVP(1,2) = 3 brackets;
    # the NP-SBJ holding only the trace is gone (not a zero-width bracket).
    gold = ["(S (NP-SBJ (-NONE- *-1)) (VP (VBD left) (ADVP (RB early)) (NP (-NONE- *T*-2))))"]
    pred = ["(S (VP (VBD left) (ADVP (RB early))))"]
    res = score(gold, pred, cutoff=2)
    assert res["all"]["gold_brackets"] == 3
    assert res["all"]["matched_brackets"] == 3 and res["all"]["exact_match"] == pytest.approx(100.0)
    # Length 2 (traces do not count): within cutoff 2.
    assert res["<=2"]["sentences"] == 1
    # Traces in the predicted tree are deleted too.
    res = score(gold, ["(S (NP (-NONE- *)) (VP (VBD left) (ADVP (RB early))))"], cutoff=2)
    assert res["all"]["predicted_brackets"] == 3 and res["all"]["matched_brackets"] == 3


def test_punctuation_ignored_in_spans_but_counted_for_length():
    # Words John , slept . -> after deleting , and . : John(0) slept(1).
    # gold: S(0,2) NP(0,1) VP(1,2).  The prediction puts the comma inside VP and a
    # period alone in a PRN: VP is still (1,2), PRN is empty once . is deleted (not counted).
    gold = ["(S (NP (NNP John)) (, ,) (VP (VBD slept)) (. .))"]
    pred = ["(S (NP (NNP John)) (VP (, ,) (VBD slept)) (PRN (. .)))"]
    res = score(gold, pred, cutoff=3)
    assert res["all"]["gold_brackets"] == 3 and res["all"]["predicted_brackets"] == 3
    assert res["all"]["matched_brackets"] == 3
    # Length 4 (punctuation counts): not within 3, within 4.
    assert res["<=3"]["sentences"] == 0
    assert score(gold, pred, cutoff=4)["<=4"]["sentences"] == 1
    # Punctuation is excluded from tagging: 2 words.
    assert res["all"]["words"] == 2


def test_cutoff_40_counts_punctuation_not_traces():
    # 40 words + 1 comma = 41 > 40: only in "all".
    words = [("NN", f"w{i}") for i in range(40)]
    long_gold = ("S", ("NP", *words[:20]), (",", ","), ("VP", *words[20:]))
    res = evaluate_labeled([long_gold], [long_gold])
    assert res["all"]["sentences"] == 1 and res["<=40"]["sentences"] == 0
    # 40 words + 1 trace = 40 words: in both.
    traced = ("S", ("NP", *words[:20]), ("NP", ("-NONE-", "*")), ("VP", *words[20:]))
    res = evaluate_labeled([traced], [("S", ("NP", *words[:20]), ("VP", *words[20:]))])
    assert res["<=40"]["sentences"] == 1
    assert res["<=40"]["labeled_f1"] == pytest.approx(100.0)


def test_advp_equals_prt():
    gold = ["(S (VP (VB give) (PRT (RP up))))"]          # S(0,2) VP(0,2) PRT(1,2)
    res = score(gold, ["(S (VP (VB give) (ADVP (RP up))))"])["all"]
    assert res["matched_brackets"] == 3
    res = score(gold, ["(S (VP (VB give) (NP (RP up))))"])["all"]
    assert res["matched_brackets"] == 2


@pytest.mark.parametrize("root", ["ROOT", "TOP", ""])
def test_root_bracket_not_counted(root):
    # gold read from ( (S ...) ): S(0,2) NP(0,1) VP(1,2) = 3 brackets, S counted.
    gold = trees("( (S (NP (PRP I)) (VP (VBD ran))) )")
    s = trees("(S (NP (PRP I)) (VP (VBD ran)))")[0]
    res = evaluate_labeled(gold, [(root, s)])["all"]
    assert res["gold_brackets"] == 3
    assert res["predicted_brackets"] == 3 and res["matched_brackets"] == 3
    # A non-root label on top is a bracket: 4 predicted, 3 matched, P = 75.
    res = evaluate_labeled(gold, [("X", s)])["all"]
    assert res["predicted_brackets"] == 4 and res["labeled_precision"] == pytest.approx(75.0)


def test_top_bracket_not_counted_anywhere():
    """COLLINS.prm's DELETE_LABEL TOP: a TOP node inside the tree is no bracket either."""
    gold = trees("( (S (NP (DT a) (NN b)) (VP (VBD c))) )")                  # S NP VP
    pred = trees("(S (TOP (NP (DT a) (NN b))) (VP (VBD c)))")
    res = evaluate_labeled(gold, pred)["all"]
    assert res["predicted_brackets"] == 3 and res["matched_brackets"] == 3 and res["exact_match"] == 100


def test_root_with_several_children():
    # ("", NP, VP): the empty root dropped, its children's brackets count: NP(0,1) VP(1,2).
    gold = trees("(S (NP (PRP I)) (VP (VBD ran)))")
    pred = [("", ("NP", ("PRP", "I")), ("VP", ("VBD", "ran")))]
    res = evaluate_labeled(gold, pred)["all"]
    assert res["predicted_brackets"] == 2 and res["matched_brackets"] == 2
    # precision 100, recall 2/3 = 66.67, F1 = 2*100*66.67/166.67 = 80.
    assert res["labeled_f1"] == pytest.approx(80.0)


def test_duplicate_brackets_are_a_multiset():
    # gold: S(0,2) twice, NP(0,1), VP(1,2) = 4; predicted: S(0,2) NP VP = 3, all matched.
    gold = ["(S (S (NP (PRP I)) (VP (VBD ran))))"]
    pred = ["(S (NP (PRP I)) (VP (VBD ran)))"]
    res = score(gold, pred)["all"]
    assert (res["gold_brackets"], res["predicted_brackets"], res["matched_brackets"]) == (4, 3, 3)
    # P = 100, R = 75, F1 = 2*100*75/175 = 85.714...
    assert res["labeled_recall"] == pytest.approx(75.0)
    assert res["labeled_f1"] == pytest.approx(600 / 7)
    assert res["exact_match"] == 0.0
    # The other way round: only one of the two predicted S(0,2) is matched.
    res = score(pred, gold)["all"]
    assert res["matched_brackets"] == 3 and res["labeled_precision"] == pytest.approx(75.0)
    # Both duplicated: 4 of 4, an exact match.
    res = score(gold, gold)["all"]
    assert res["matched_brackets"] == 4 and res["exact_match"] == pytest.approx(100.0)


def test_noparse_scores_zero_predicted_brackets():
    gold = ["(S (NP (PRP I)) (VP (VBD ran)))", "(S (NP (PRP You)) (VP (VBD sat)) (. .))", "(S (VP (VB Go)))"]
    pred = ["(S (NP (PRP I)) (VP (VBD ran)))", "(NOPARSE You sat .)", "(NOPARSE Go)"]
    res = score(gold, pred)["all"]
    # gold 3 + 3 + 2 = 8 brackets; predicted 3 (the NOPARSE trees none), 3 matched.
    assert res["noparse"] == 2
    assert (res["gold_brackets"], res["predicted_brackets"], res["matched_brackets"]) == (8, 3, 3)
    # P = 100, R = 37.5, F1 = 2*100*37.5/137.5 = 54.5454...
    assert res["labeled_precision"] == pytest.approx(100.0)
    assert res["labeled_f1"] == pytest.approx(600 / 11)
    # Only sentence 1 is exact: 33.33; tags: 2 of 5 words (I ran | You sat | Go; '.' excluded).
    assert res["exact_match"] == pytest.approx(100 / 3)
    assert (res["words"], res["correct_tags"]) == (5, 2)


def test_noparse_is_never_an_exact_match():
    # gold (TOP (UH Hi)) has no bracket (root dropped, preterminal not a bracket), nor has
    # NOPARSE: equal (empty) multisets, yet an unparsed sentence is not an exact match.
    res = score(["(TOP (UH Hi))", "(TOP (UH Bye))"], ["(NOPARSE Hi)", "(TOP (UH Bye))"])["all"]
    assert res["gold_brackets"] == 0 and res["noparse"] == 1
    assert res["exact_match"] == pytest.approx(50.0)


def test_yield_mismatch_is_an_input_error():
    gold = ["(S (NP (PRP I)) (VP (VBD ran)))", "(S (NP (PRP You)) (VP (VBD sat)))"]
    pred = ["(S (NP (PRP I)) (VP (VBD ran)))", "(S (NP (PRP You)) (VP (VBD stood)))"]
    with pytest.raises(InputError, match=r"tree 2: .*'You sat' vs 'You stood'"):
        score(gold, pred)
    with pytest.raises(InputError, match="tree 1: "):
        score(gold[:1], ["(NOPARSE I walked)"])


def test_tree_count_mismatch_is_an_input_error():
    gold = ["(S (NP (PRP I)) (VP (VBD ran)))", "(S (NP (PRP You)) (VP (VBD sat)))"]
    with pytest.raises(InputError, match="2 gold trees but 1 predicted"):
        score(gold, gold[:1])


def test_exact_match_needs_equal_labels():
    gold = ["(S (NP (PRP I)) (VP (VBD ran)))", "(S (NP (PRP You)) (VP (VBD sat)))"]
    # Sentence 1 equal; sentence 2 has the same spans but one label differs: 50% exact.
    pred = ["(S (NP (PRP I)) (VP (VBD ran)))", "(S (NP (PRP You)) (ADJP (VBD sat)))"]
    res = score(gold, pred)["all"]
    assert res["exact_match"] == pytest.approx(50.0)
    assert res["matched_brackets"] == 5


def test_tagging_accuracy():
    # Words the dog barks . : '.' is gold punctuation, excluded -> 3 words.
    # dog VB != NN wrong; NN-3 (a latent annotation) has base NN; the predicted ',' on '.' is not scored.
    gold = ["(S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .))"]
    res = score(gold, ["(S (NP (DT the) (VB dog)) (VP (VBZ barks)) (, .))"])["all"]
    assert (res["words"], res["correct_tags"]) == (3, 2)
    assert res["tagging_accuracy"] == pytest.approx(200 / 3)
    res = score(gold, ["(S (NP (DT-1 the) (NN-3 dog)) (VP (VBZ barks)) (. .))"])["all"]
    assert res["tagging_accuracy"] == pytest.approx(100.0)


def test_punctuation_is_what_the_gold_tags_say():
    # '.' is gold-tagged '.', so it is deleted from both trees though the prediction tags it NN and
    # puts it inside VP: gold and predicted are both S(0,3) NP(0,2) VP(2,3), 3 of 3 matched; tags
    # scored on the 3 other words, all right.  (Masking by the predicted tags would keep '.': gold
    # S(0,4) NP(0,2) VP(2,3) against S(0,4) NP(0,2) VP(2,4).)
    gold = ["(S (NP (DT the) (NN dog)) (VP (VBZ runs)) (. .))"]
    res = score(gold, ["(S (NP (DT the) (NN dog)) (VP (VBZ runs) (NN .)))"])["all"]
    assert (res["gold_brackets"], res["predicted_brackets"], res["matched_brackets"]) == (3, 3, 3)
    assert res["labeled_precision"] == pytest.approx(100.0) and res["exact_match"] == pytest.approx(100.0)
    assert (res["words"], res["correct_tags"]) == (3, 3)


def test_report_text(tmp_path):
    g, p = tmp_path / "gold.mrg", tmp_path / "pred.trees"
    g.write_text("( (S (S (NP (PRP I)) (VP (VBD ran)))) )\n")
    p.write_text("(ROOT (S (NP (PRP I)) (VP (VBD ran))))\n")
    text = evaluate_labeled_files(str(g), str(p))
    lines = text.splitlines()
    assert lines[0].startswith("# convention: labeled brackets, EVALB COLLINS.prm")
    table = dict(ln.split("\t") for ln in lines[1:])
    assert list(table) == [f"{b}_{k}" for b in ("all", "le40") for k in REPORT_KEYS]
    # As in test_duplicate_brackets_are_a_multiset: P 100, R 75, F1 85.71.
    assert table["all_labeled_precision"] == "100.00"
    assert table["all_labeled_recall"] == "75.00"
    assert table["all_labeled_f1"] == "85.71"
    assert table["le40_labeled_f1"] == "85.71"
    assert table["all_sentences"] == "1" and table["all_noparse"] == "0"
    assert table["all_exact_match"] == "0.00" and table["all_tagging_accuracy"] == "100.00"


def test_cli_labeled(tmp_path):
    g, p = tmp_path / "gold.mrg", tmp_path / "pred.trees"
    g.write_text("( (S (NP-SBJ (PRP I)) (VP (VBD ran) (PRT (RP away)))) )\n"
                 "( (S (NP-SBJ (PRP You)) (VP (VBD sat)) (. .)) )\n")
    # Sentence 1: S(0,3) NP(0,1) VP(1,3) PRT(2,3) vs S NP VP ADVP(2,3): 4 of 4.
    # Sentence 2: NOPARSE, 3 gold brackets missed.  P = 100, R = 4/7, F1 = 2*100*57.14/157.14 = 72.73.
    p.write_text("(S (NP (PRP I)) (VP (VBD ran) (ADVP (RP away))))\n(NOPARSE You sat .)\n")
    result = CliRunner().invoke(cli, ["eval", "--labeled", str(g), str(p)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"# predicted: {p}" in lines
    assert "all_labeled_f1\t72.73" in lines
    assert "all_noparse\t1" in lines
    assert lines.index(f"# predicted: {p}") + 1 == next(i for i, ln in enumerate(lines)
                                                        if ln.startswith("# convention:"))


@pytest.mark.parametrize("extra", [["--column", "XPOS"], ["--max-length", "10"], ["--punct", "ptb"]])
def test_cli_labeled_refuses_corpus_options(tmp_path, extra):
    g = tmp_path / "gold.mrg"
    g.write_text("( (S (NP (PRP I)) (VP (VBD ran))) )\n")
    result = CliRunner().invoke(cli, ["eval", "--labeled", *extra, str(g), str(g)])
    assert result.exit_code == 2
    assert "corpus options" in result.output


def test_cli_labeled_yield_mismatch_names_files(tmp_path):
    g, p = tmp_path / "gold.mrg", tmp_path / "pred.trees"
    g.write_text("( (S (NP (PRP I)) (VP (VBD ran))) )\n")
    p.write_text("(S (NP (PRP I)) (VP (VBD sat)))\n")
    result = CliRunner().invoke(cli, ["eval", "--labeled", str(g), str(p)])
    assert isinstance(result.exception, InputError)
    assert str(g) in str(result.exception) and "tree 1" in str(result.exception)


@pytest.mark.parametrize("how", [["--labeled"], ["--format", "ptb", "--column", "FORM"]], ids=["labeled", "unlabeled"])
def test_a_yield_mismatch_names_the_trees_lines(tmp_path, how):
    """Both files' lines (a header, a blank line, a tree without words before it in the prediction)."""
    g, p = tmp_path / "gold.mrg", tmp_path / "pred.trees"
    g.write_text("(S (NP (PRP I)) (VP (VBD ran)))\n\n(S (NP (PRP You))\n   (VP (VBD sat)))\n")
    p.write_text("# grind parse\n(S (NP (PRP I)) (VP (VBD ran)))\n(S (NP (PRP You)) (VP (VBD stood)))\n")
    r = grind("eval", *how, g, p, check=False)
    assert r.returncode == 1 and "tree 2 (gold line 3, predicted line 3): gold and predicted yields differ" in r.stderr


def test_an_empty_gold_tree_file_is_an_error_not_a_score_of_zero(tmp_path):
    """eval --labeled and unlabeled bracket eval printed all-zero scores with exit 0."""
    (tmp_path / "empty.mrg").write_text("")
    (tmp_path / "one.mrg").write_text("(S (NP (DT the) (NN dog)) (VP (VBZ barks)))\n")
    for extra in (["--labeled"], []):
        r = grind("eval", *extra, tmp_path / "empty.mrg", tmp_path / "one.mrg", check=False)
        assert r.returncode == 1 and "empty.mrg: no trees in GOLD: nothing to score" in r.stderr and not r.stdout


def test_a_tree_of_only_traces_is_skipped_by_parse_and_eval_and_counted(tmp_path):
    """A PTB tree holding only -NONE- elements was dropped by grind parse without a word, so the parse
    file had one tree fewer than the gold and grind eval --labeled refused the pair."""
    g = tmp_path / "gold.mrg"
    g.write_text("( (S (NP (DT the) (NN dog)) (VP (VBD barked))) )\n( (-NONE- *U*) )\n"
                 "( (S (NP (NN cat)) (VP (VBD sat))) )\n")
    grind("make-grammar", "treebank", "-o", tmp_path / "tb.txt", g)
    r = grind("parse", "-o", tmp_path / "p.mrg", tmp_path / "tb.txt", g)
    assert "skipped 1 tree(s) without words (only -NONE- elements), at line(s) 2" in r.stderr
    text = (tmp_path / "p.mrg").read_text()
    assert "# left_out: 1 trees without words, only -NONE- elements (not written)" in text
    assert sum(not ln.startswith("#") for ln in text.splitlines()) == 2
    r = grind("eval", "--labeled", g, tmp_path / "p.mrg")
    assert "skipped 1 gold and 0 predicted trees without words" in r.stderr
    assert "# skipped: 1 gold and 0 predicted trees without words (only -NONE- elements), not scored" in r.stdout
    assert "all_sentences\t2" in r.stdout.splitlines()
    res = score(["(S (NP (PRP I)) (VP (VBD ran)))", "(X (-NONE- *))"], ["(S (NP (PRP I)) (VP (VBD ran)))"])
    assert res["all"]["labeled_f1"] == 100.0 and res["wordless"] == (1, 0)


def test_a_sentence_with_no_gold_span_has_sentence_f1_one():
    """Two words: no span to find, a tree with none found is right (the check rested on the PTB sample)."""
    from grind.eval.brackets import score_spans
    assert score_spans([(2, set(), set())])["sentence_f1"] == 1.0
    assert score_spans([(2, set(), None)])["sentence_f1"] == 0.0            # no tree: no credit
