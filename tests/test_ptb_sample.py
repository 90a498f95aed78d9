"""Unlabeled bracket evaluation (grind.eval.brackets): small hand-worked cases, and the
Penn Treebank sample in ../shared/data (those tests skipped when it is absent)."""
import pytest

from conftest import grind, shared_path
from grind.eval.brackets import evaluate, prepare_gold
from grind.formats.corpus import CorpusSpec, read_corpus
from grind.formats.trees import leaves, parse_trees, read_trees

WSJ10 = CorpusSpec(column="XPOS", punct="ptb", max_length=10)


@pytest.fixture(scope="module")
def mrg(tmp_path_factory):
    d = shared_path("nltk_ptb_sample", "treebank", "combined")
    out = tmp_path_factory.mktemp("ptb") / "wsj_0001-0040.mrg"
    out.write_text("".join((d / f"wsj_{i:04d}.mrg").read_text() for i in range(1, 41)))
    return out


def right_branching(tree):
    ws = leaves(tree)
    t = ("X", ws[-1])
    for w in reversed(ws[:-1]):
        t = ("X", w, t)
    return t


def test_one_word_sentences_are_skipped():
    # hi: length 1, not scored (it would be a trivially exact match with F1 1).  the dog runs:
    # gold spans NP(0,2) (S(0,3) whole, VP(2,3) width 1), predicted X(1,3): F1 0, not exact.
    gold = list(parse_trees("(X (NN hi)) (S (NP (DT the) (NN dog)) (VP (VBZ runs)))"))
    pred = list(parse_trees("(X (NN hi)) (S (DT the) (X (NN dog) (VBZ runs)))"))
    res = evaluate(gold, pred)
    assert (res["sentences"], res["scored"]) == (2, 1)
    assert (res["exact"], res["sentence_f1"], res["f1"]) == (0.0, 0.0, 0.0)


def test_exact_match_needs_equal_span_sets_not_a_superset():
    # gold {NP(0,2)}; predicted {X(0,3), NP(0,2)} contains it: P = 1/2, R = 1/1, F1 = 2/3, not exact
    gold = list(parse_trees("(S (NP (DT the) (NN dog)) (VBZ runs) (RB fast))"))
    pred = list(parse_trees("(S (X (NP (DT the) (NN dog)) (VBZ runs)) (RB fast))"))
    res = evaluate(gold, pred)
    assert res["exact"] == 0.0 and (res["precision"], res["recall"]) == (0.5, 1.0)
    assert res["f1"] == pytest.approx(2 / 3) and res["sentence_f1"] == pytest.approx(2 / 3)


def test_gold_against_itself_is_perfect_and_right_branching_is_not(mrg):
    gold = prepare_gold(read_trees(str(mrg)), WSJ10)
    assert len(gold) == len(read_corpus(str(mrg), WSJ10)) > 50
    perfect = evaluate(gold, gold)
    assert perfect["f1"] == perfect["sentence_f1"] == perfect["exact"] == 1.0
    rb = evaluate(gold, [right_branching(t) for t in gold])
    assert 0.2 < rb["f1"] < 0.9 and rb["exact"] < 0.5


@pytest.mark.slow
def test_pipeline_on_wsj10_sample(mrg, tmp_path):
    c = ["--column", "XPOS", "--punct", "ptb", "--max-length", "10"]
    g0 = grind("make-grammar", "cnf", *c, "-n", "4", "-p", "4", mrg).stdout
    g1 = grind("init", "--random", "--seed", "1", "-", stdin=g0).stdout
    g = grind("train", *c, "--iterations", "3", "-", mrg, stdin=g1).stdout
    (tmp_path / "g.txt").write_text(g)
    trees = grind("parse", *c, "-o", tmp_path / "p.trees", tmp_path / "g.txt", mrg)
    rep = grind("eval", *c, mrg, tmp_path / "p.trees").stdout
    assert "Kim et al. 2019" in rep and "punct-removed=ptb" in rep
    vals = dict(ln.split("\t") for ln in rep.splitlines() if not ln.startswith("#"))
    assert 0.0 <= float(vals["corpus_f1"]) <= 1.0 and int(vals["sentences"]) > 50
    assert trees.returncode == 0
