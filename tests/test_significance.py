"""The paired approximate randomization test and grind eval --significance."""
import itertools

import numpy as np
import pytest

from conftest import grind
from grind.eval.significance import approximate_randomization, f_score, ratio
from test_eval_baselines import GOLD, UD, conll, rows_of


def exact_p(a, b, score):
    """The exact two-sided permutation p: every one of the 2^n swap assignments (observed included)."""
    obs = abs(score(a.sum(0)[None])[0] - score(b.sum(0)[None])[0])
    hits = 0
    for swap in itertools.product((0, 1), repeat=len(a)):
        m = np.array(swap, dtype=bool)[:, None]
        aa, bb = np.where(m, b, a).sum(0), np.where(m, a, b).sum(0)
        hits += abs(score(aa[None])[0] - score(bb[None])[0]) >= obs - 1e-12
    return hits / 2 ** len(a)


# seven items of (correct, predicted, gold) boundary counts: F is not a sum over items
A = np.array([[2, 3, 3], [1, 1, 2], [0, 2, 1], [3, 3, 3], [1, 2, 2], [2, 2, 3], [0, 1, 1]], float)
B = np.array([[1, 2, 3], [1, 2, 2], [0, 0, 1], [2, 4, 3], [0, 1, 2], [1, 3, 3], [1, 1, 1]], float)


@pytest.mark.parametrize("measure", [f_score(0, 1, 2), ratio(0, 2)])
def test_sampled_p_matches_the_exact_permutation_p(measure):
    want = exact_p(A, B, measure)
    assert 0.05 < want < 0.95                                 # a case where the sampling can be wrong
    fa, fb, p = approximate_randomization(A, B, measure, np.random.default_rng(3), samples=40_000)
    assert fa == pytest.approx(measure(A.sum(0)[None])[0]) and fb == pytest.approx(measure(B.sum(0)[None])[0])
    assert p == pytest.approx(want, abs=0.01)


def test_identical_systems_p_one_and_clear_difference_p_minimal():
    rng = np.random.default_rng(0)
    assert approximate_randomization(A, A, f_score(0, 1, 2), rng, 500)[2] == 1.0
    right = np.array([[1, 1]] * 40, float)                    # (correct, words): always right
    wrong = np.array([[0, 1]] * 40, float)
    fa, fb, p = approximate_randomization(right, wrong, ratio(0, 1), rng, 999)
    assert (fa, fb) == (1.0, 0.0) and p == pytest.approx(1 / 1000)   # 2^-40: no sample reaches it


def test_p_is_two_sided_when_the_first_system_is_worse():
    # the observed difference is |0 - 1| = 1 with A the worse system; a sample reaches it only when all
    # 40 items are swapped or none is (2^-39): with 999 samples none does, p = (0 + 1) / 1000
    right = np.array([[1, 1]] * 40, float)
    wrong = np.array([[0, 1]] * 40, float)
    fa, fb, p = approximate_randomization(wrong, right, ratio(0, 1), np.random.default_rng(0), 999)
    assert (fa, fb) == (0.0, 1.0) and p == pytest.approx(1 / 1000)


def test_undefined_score_gives_undefined_p():
    empty = A.copy()
    empty[:, 1:3] = 0                                # no boundary predicted or in the gold: F undefined
    fa, fb, p = approximate_randomization(empty, B, f_score(0, 1, 2), np.random.default_rng(0), 10)
    assert np.isnan(fa) and np.isnan(p)
    none_predicted = A.copy()
    none_predicted[:, 0:2] = 0                       # nothing predicted: P undefined, but F = 2H/(2H+I+D) = 0
    fa, fb, p = approximate_randomization(none_predicted, B, f_score(0, 1, 2), np.random.default_rng(0), 10)
    assert fa == 0 and not np.isnan(p)


SEG_GOLD = "ab dik ova t\nkot e\npes\nne kot e\n"
SEG_PRED = "ab dikova t\nkot e\np e s\nne kote\n"


def test_eval_segmentation_significance_rows(tmp_path):
    g, p, q = tmp_path / "g.txt", tmp_path / "p.txt", tmp_path / "q.txt"
    g.write_text(SEG_GOLD)
    p.write_text(SEG_PRED)
    q.write_text(SEG_GOLD)                                    # a perfect system
    out = grind("eval", "--segmentation", "--significance", "--samples", "200", g, p, q).stdout
    assert "# significance: paired approximate randomization test" in out and "every word type" in out
    assert "# seed: 1" in out                                 # the default seed, said in the header
    table = out.split("# significance:")[1].splitlines()[1:]
    assert table[0] == "system\tagainst\tmeasure\tscore\tagainst_score\tdifference\tp"
    rows = {tuple(r.split("\t")[:3]): r.split("\t")[3:] for r in table[1:]}
    # p against q, q against the two baselines, p against the two baselines; 3 measures each
    assert len(rows) == 5 * 3
    assert rows[(str(p), str(q), "exact")][:3] == ["0.2500", "1.0000", "-0.7500"]
    # one-morph predicts no boundary: its boundary F is 0 (not undefined), so the test has a p
    assert rows[(str(q), "baseline-one-morph", "boundary_F")][:2] == ["1.0000", "0.0000"]
    assert rows[(str(q), "baseline-one-morph", "boundary_F")][-1] != "nan"
    assert float(rows[(str(q), "baseline-chars", "exact")][-1]) <= 1.0
    again = grind("eval", "--segmentation", "--significance", "--samples", "200", g, p, q).stdout
    assert again.split("# significance:")[1] == out.split("# significance:")[1]   # reproducible
    other = grind("eval", "--segmentation", "--significance", "--samples", "200", "--seed", "7", g, p, q).stdout
    assert "# seed: 7" in other


def test_eval_dependencies_significance_against_attach_right(tmp_path):
    g, right = tmp_path / "gold.conllu", tmp_path / "right.conllu"
    g.write_text(conll(GOLD))
    right.write_text(conll([(t, [i + 2 if i + 1 < len(t) else 0 for i in range(len(t))]) for t, _ in GOLD]))
    out = grind("eval", *UD, "--significance", "--samples", "100", g, right).stdout
    assert "every sentence with probability 1/2" in out
    table = out.split("# significance:")[1].splitlines()[2:]
    rows = {tuple(r.split("\t")[:3]): r.split("\t")[3:] for r in table}
    # the prediction IS attach-right after punctuation removal: difference 0, p = 1
    assert rows[(str(right), "attach-right", "directed:all")] == ["0.5556", "0.5556", "+0.0000", "1"]
    assert rows[(str(right), "attach-left", "directed:<=10")][:3] == ["0.5556", "0.1111", "+0.4444"]
    assert rows_of(out)["all"][2] == "0.5556"
    # every sentence is <= 10 words: the three subsets are one set of sentences, tested once (one p)
    assert rows[(str(right), "attach-left", "directed:<=10")] == rows[(str(right), "attach-left", "directed:all")] \
        == rows[(str(right), "attach-left", "directed:<=20")]


# SEG_GOLD with pes unparsed and nekote cut ne|kote.  Counts per word type (correct/predicted/gold):
#   abdikovat  morphs ab,t of 3 / 4; boundaries {2,8} vs {2,5,8}: 2 / 2 / 3
#   kote       morphs 2 / 2 / 2 (exact); boundaries 1 / 1 / 1
#   pes        unparsed: morphs 0 / 0 / 1, no boundary
#   nekote     morphs ne of 2 / 3; boundaries {2} vs {2,5}: 1 / 1 / 2
# morph_F = 2 * 5 / (7 + 10) = .5882, boundary_F = 2 * 4 / (4 + 6) = .8000, exact = 1 / 4 words = .2500.
# baseline-chars: morphs t, e, e right of 9+4+3+6 = 22 / 10: F = 6 / 32 = .1875; every internal position
# a boundary: 6 of 18 / 6: F = 12 / 24 = .5000; exact 0.
SEG_PRED_UNPARSED = "ab dikova t\nkot e\npes\t_\nne kote\n"


def seg_significance(tmp_path, pred_text):
    g, p = tmp_path / "g.txt", tmp_path / "p.txt"
    g.write_text(SEG_GOLD)
    p.write_text(pred_text)
    out = grind("eval", "--segmentation", "--significance", "--samples", "20", g, p).stdout
    table = out.split("# significance:")[1].splitlines()[2:]
    rows = {ln.split("\t")[0]: ln.split("\t")[1:] for ln in out.split("# significance:")[0].splitlines()
            if ln and not ln.startswith("#") and not ln.startswith("system\t")}
    return str(p), rows, {tuple(r.split("\t")[:3]): r.split("\t")[3:] for r in table}


def test_segmentation_significance_f_scores_are_the_tables(tmp_path):
    p, rows, sig = seg_significance(tmp_path, SEG_PRED_UNPARSED)
    assert sig[(p, "baseline-chars", "morph_F")][:2] == ["0.5882", "0.1875"]
    assert sig[(p, "baseline-chars", "boundary_F")][:2] == ["0.8000", "0.5000"]
    assert (rows["predicted"][4], rows["predicted"][8]) == ("0.5882", "0.8000")      # morph_F, boundary_F


def test_segmentation_significance_exact_counts_unparsed_words(tmp_path):
    # exact = 1 / 4 words (pes, unparsed, counts as not exact), not 1 / 3 parsed ones
    p, rows, sig = seg_significance(tmp_path, SEG_PRED_UNPARSED)
    assert sig[(p, "baseline-chars", "exact")][:2] == ["0.2500", "0.0000"]
    assert rows["predicted"][:2] == ["4", "1"] and rows["predicted"][5] == "0.2500"


def test_significance_option_errors(tmp_path):
    g = tmp_path / "g.txt"
    g.write_text(SEG_GOLD)
    r = grind("eval", "--segmentation", "--samples", "10", g, g, check=False)
    assert r.returncode == 2 and "options of --significance" in r.stderr
    r = grind("eval", "--labeled", "--significance", g, g, check=False)
    assert r.returncode == 2 and "not --labeled" in r.stderr


def test_no_baselines_leaves_the_baseline_comparisons_out(tmp_path):
    g, right = tmp_path / "gold.conllu", tmp_path / "right.conllu"
    g.write_text(conll(GOLD))
    right.write_text(conll([(t, [i + 2 if i + 1 < len(t) else 0 for i in range(len(t))]) for t, _ in GOLD]))
    out = grind("eval", *UD, "--significance", "--no-baselines", "--samples", "50", g, right, right).stdout
    table = out.split("# significance:")[1].splitlines()[2:]
    assert len(table) == 3 and all("attach-" not in r for r in table)      # the two files, three subsets
