"""Segmentation files, the segmentation scorer (hand-worked), parse --segment and eval --segmentation."""
import math

import pytest

from conftest import grind
from grind.cli.decode_cmds import expected_f_threshold, mbr_cuts
from grind.errors import InputError
from grind.eval import segmentation as seg
from grind.formats.segmentations import (Segmentation, format_segmentation, morphs_from_cuts, parse_line,
                                         read_segmentations)

nan = float("nan")


def gold_pred(gold, pred):
    return ({w.replace(" ", ""): Segmentation(w, tuple(w.split(" "))).spans() for w in gold},
            {w.replace(" ", ""): Segmentation(w, tuple(w.split(" "))).spans() for w in pred})


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def check(row, **want):
    for k, v in want.items():
        assert same(row[k], v), (k, row[k], v)


# ----------------------------------------------------------------------------- the scorer, by hand

def test_spans_not_strings_repeated_substrings():
    # gold an an a = (0,2) (2,4) (4,5); the predicted morph 'a' is a gold morph string but at (0,1)
    g, p = gold_pred(["an an a"], ["a nana"])
    check(seg.score(g, p), morph_P=0, morph_R=0, morph_F=0, exact=0, boundary_P=0, boundary_R=0, boundary_F=0)


def test_hand_worked_two_words():
    g, p = gold_pred(["an an a", "dog"], ["an ana", "do g"])
    # morphs: only (0,2) of anana right: 1 of 4 predicted, 1 of 4 gold
    # boundaries: gold {2,4} + {}; predicted {2} + {2}: 1 right of 2 predicted, of 2 gold
    check(seg.score(g, p), words=2, unparsed=0, morph_P=0.25, morph_R=0.25, morph_F=0.25, exact=0,
          boundary_P=0.5, boundary_R=0.5, boundary_F=0.5, overlap_one=0, overlap_chars=0)


def test_baselines_by_hand():
    g, _ = gold_pred(["an an a", "dog"], [])
    base = seg.baseline_rows(g)
    # one-morph: anana (0,5) wrong, dog (0,3) right: P 1/2, R 1/4, F 1/3; no predicted boundary: P nan,
    # F = 2H / (2H + I + D) = 0 / 2 = 0 (conventions: F is defined whenever either side has a boundary)
    check(base["one-morph"], morph_P=0.5, morph_R=0.25, morph_F=1 / 3, exact=0.5,
          boundary_P=nan, boundary_R=0, boundary_F=0, overlap_one=1, overlap_chars=0)
    # chars: only (4,5) of anana right: P 1/8, R 1/4, F 1/6; boundaries {1,2,3,4} + {1,2} vs {2,4}: P 2/6, R 1
    check(base["chars"], morph_P=1 / 8, morph_R=0.25, morph_F=1 / 6, exact=0,
          boundary_P=1 / 3, boundary_R=1, boundary_F=0.5, overlap_one=0, overlap_chars=1)


def test_one_morph_words_have_no_boundaries():
    g, p = gold_pred(["dog", "cat"], ["dog", "cat"])
    check(seg.score(g, p), morph_P=1, morph_R=1, morph_F=1, exact=1,
          boundary_P=nan, boundary_R=nan, boundary_F=nan, overlap_one=1, overlap_chars=0)
    g, p = gold_pred(["dog", "cat"], ["do g", "cat"])
    check(seg.score(g, p), morph_P=1 / 3, morph_R=0.5, morph_F=0.4, exact=0.5,
          boundary_P=0, boundary_R=nan, boundary_F=0)
    # a word with no internal gold boundary and none predicted adds nothing to boundary P/R
    g, p = gold_pred(["an an a", "dog"], ["an an a", "dog"])
    g2, p2 = gold_pred(["an an a"], ["an an a"])
    assert seg.score(g, p)["counts"]["bp"] == seg.score(g2, p2)["counts"]["bp"] == 2


def test_unparsed_word_scores_nothing():
    g, _ = gold_pred(["an an a", "dog"], [])
    p = {"anana": None, "dog": ((0, 3),)}
    check(seg.score(g, p), unparsed=1, morph_P=1, morph_R=0.25, morph_F=0.4, exact=0.5,
          boundary_P=nan, boundary_R=0, overlap_one=1, overlap_chars=0)


def test_word_types_and_matching():
    recs = [parse_line(s, "f:1", k) for k, s in enumerate(["dog", "an an a", "dog"], 1)]
    assert list(seg.word_types(recs, "f")) == ["dog", "anana"]
    with pytest.raises(InputError, match=r"f:2: word 'dog' is segmented differently on line 1"):
        seg.word_types([parse_line("dog", "f:1", 1), parse_line("do g", "f:2", 2)], "f")
    g = {"dog": ((0, 3),), "cat": ((0, 3),)}
    with pytest.raises(InputError, match=r"missing from P: 'cat'"):
        seg.check_same_words(g, {"dog": ((0, 3),)}, "G", "P")
    with pytest.raises(InputError, match=r"in P but not in G: 'cow'"):
        seg.check_same_words(g, {**g, "cow": ((0, 3),)}, "G", "P")


# ----------------------------------------------------------------------------- files

def test_read_both_formats_header_and_unparsed(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("# grind 0.1.0\n# unparsed: 1\nab dik ova t\nxyz\t_\n# x\n")
    r = read_segmentations(str(f))
    assert [(x.word, x.morphs, x.line) for x in r] == [
        ("abdikovat", ("ab", "dik", "ova", "t"), 3), ("xyz", None, 4), ("#x", ("#", "x"), 5)]
    f.write_text("xyz\t_\nabdikovat\tab @@dik @@ova @@t\nabdikovat\tab @@dik @@ova @@t\t010\n")
    assert [(x.word, x.morphs, x.line) for x in read_segmentations(str(f))] == [
        ("xyz", None, 1), ("abdikovat", ("ab", "dik", "ova", "t"), 2), ("abdikovat", ("ab", "dik", "ova", "t"), 3)]
    assert r[0].spans() == ((0, 2), (2, 5), (5, 8), (8, 9))
    for fmt in ("plain", "sigmorphon"):
        line = format_segmentation("abdikovat", ("ab", "dik", "ova", "t"), fmt)
        assert parse_line(line.rstrip("\n"), "x", 3) == r[0]
    assert format_segmentation("abdikovat", ("ab", "dik", "ova", "t"), "sigmorphon") == \
        "abdikovat\tab @@dik @@ova @@t\n"
    assert format_segmentation("xyz", None) == "xyz\t_\n"
    assert morphs_from_cuts(list("anana"), {0, 2, 4, 5}) == ("an", "an", "a")


@pytest.mark.parametrize("text,err", [
    ("ab dik\n\nt\n", r"s.txt:2: empty line"),
    ("ab  dik\n", r"s.txt:1: an empty morph"),
    ("ab dik \n", r"s.txt:1: an empty morph"),
    ("abdik\tab @@\n", r"s.txt:1: an empty morph"),
    ("ok\nabdikovat\tab @@dik @@ova\n", r"s.txt:2: the morphs .* do not concatenate to the word 'abdikovat'"),
    ("abdik\tab dik\n", r"s.txt:1: morph 2 'dik' does not start with '@@'"),
    ("# only a header\n", r"s.txt: no segmented words"),
    # a SIGMORPHON line that lost its segmentation column is not a one-morph plain word
    ("abdik\tab @@dik\nabdikovat\n", r"s.txt:2: a plain line in a file whose line 1 is sigmorphon \(a missing"),
    ("x\t_\nab dik\nabdik\tab @@dik\n", r"s.txt:3: a sigmorphon line in a file whose line 2 is plain"),
])
def test_file_errors(tmp_path, text, err):
    f = tmp_path / "s.txt"
    f.write_text(text)
    with pytest.raises(InputError, match=err):
        read_segmentations(str(f))


# ----------------------------------------------------------------------------- parse --segment, eval

GRAMMAR = """\
0.7 Word --> A B
0.3 Word --> A
0.6 A --> a
0.4 A --> a b
0.45 B --> b
0.3 B --> c
0.25 B --> b c
"""
# Viterbi by hand: a b: a|b 0.7*0.6*0.45 = 0.189 > ab 0.3*0.4 = 0.12
#                  a b c: a|bc 0.7*0.6*0.25 = 0.105 > ab|c 0.7*0.4*0.3 = 0.084;  a: 0.3*0.6
CHARS = "a b\na b c\na\n"


@pytest.fixture
def morph(tmp_path):
    (tmp_path / "g.txt").write_text(GRAMMAR)
    (tmp_path / "c.txt").write_text(CHARS)
    return tmp_path


def body(out):
    return [ln for ln in out.splitlines() if not ln.startswith("#")]


@pytest.mark.parametrize("kernel", ["auto", "cky"])
def test_parse_segment_viterbi(morph, kernel):
    r = grind("parse", "--segment", "--kernel", kernel, morph / "g.txt", morph / "c.txt")
    assert body(r.stdout) == ["a b", "a bc", "a"]
    assert "# unparsed: 0" in r.stdout and "# decoder: viterbi" in r.stdout
    r = grind("parse", "--segment", "--seg-format", "sigmorphon", "--kernel", kernel, morph / "g.txt",
              morph / "c.txt")
    assert body(r.stdout) == ["ab\ta @@b", "abc\ta @@bc", "a\ta"]


@pytest.mark.slow
def test_parse_segment_unparsed_and_mbr(morph):
    (morph / "c2.txt").write_text(CHARS + "c\n")
    r = grind("parse", "--segment", morph / "g.txt", morph / "c2.txt")
    assert body(r.stdout) == ["a b", "a bc", "a", "c\t_"] and "# unparsed: 1" in r.stdout
    assert "word 4 'c' (line 4) has no parse" in r.stderr
    # P(boundary after a in abc) = 0.105 / 0.189 > 0.5, after b 0.084 / 0.189 < 0.5
    r = grind("parse", "--segment", "--mbr", morph / "g.txt", morph / "c2.txt")
    assert body(r.stdout) == ["a b", "a bc", "a", "c\t_"] and "# decoder: mbr" in r.stdout
    r = grind("parse", "--segment", "--mbr", "--kernel", "cky", morph / "g.txt", morph / "c.txt", check=False)
    assert r.returncode == 2 and "CKYParser" in r.stderr


def test_parse_segment_of_a_word_list_without_chars_says_to_give_chars(morph):
    """A word list without --chars: each word is one token, none parses; the warning says why."""
    (morph / "words.txt").write_text("ab\nabc\na\n")
    r = grind("parse", "--segment", morph / "g.txt", morph / "words.txt", check=False)    # most unparsed: an error
    assert r.returncode == 1 and "2 of 3 words have no parse" in r.stderr.splitlines()[-1]
    assert "2 of them are one token of several characters" in r.stderr and "needs --chars" in r.stderr.splitlines()[-1]
    r = grind("parse", "--segment", "--max-unparsed", "1", morph / "g.txt", morph / "words.txt")
    assert "# unparsed: 2" in r.stdout
    assert "2 of them are one token of several characters" in r.stderr and "needs --chars" in r.stderr
    r = grind("parse", "--segment", morph / "g.txt", morph / "c.txt")         # characters spaced out: no hint
    assert "--chars" not in r.stderr


@pytest.mark.slow
def test_parse_segment_boundary_threshold(morph):
    # abc: P(after a) = 0.105 / 0.189 = 0.556, P(after b) = 0.084 / 0.189 = 0.444;
    # ab: P(after a) = 0.189 / 0.309 = 0.612
    r = grind("parse", "--segment", "--mbr", "--boundary-threshold", "0.4", morph / "g.txt", morph / "c.txt")
    assert body(r.stdout) == ["a b", "a b c", "a"]
    r = grind("parse", "--segment", "--mbr", "--boundary-threshold", "0.6", morph / "g.txt", morph / "c.txt")
    assert body(r.stdout) == ["a b", "abc", "a"]
    r = grind("parse", "--segment", "--mbr", "--boundary-threshold", "0.65", morph / "g.txt", morph / "c.txt")
    assert body(r.stdout) == ["ab", "abc", "a"] and "--boundary-threshold 0.65" in r.stdout
    assert "# boundary_threshold: 0.65 (a boundary where its posterior exceeds this by more than 1e-09; ties " \
           "within 1e-09, not cut: 0)" in r.stdout
    r = grind("parse", "--segment", "--mbr", morph / "g.txt", morph / "c.txt")       # the default is said too
    assert "# boundary_threshold: 0.5 (a boundary where its posterior exceeds this by more than 1e-09" in r.stdout
    for bad in (["--segment"], ["--mbr"], ["--segment", "--mbr", "--boundary-threshold", "1"]):
        extra = [] if "--boundary-threshold" in bad else ["--boundary-threshold", "0.3"]
        r = grind("parse", *bad, *extra, morph / "g.txt", morph / "c.txt", check=False)
        assert r.returncode == 2, bad


GRAMMAR2 = GRAMMAR.replace("0.7 Word --> A B", "0.3 Word --> A B").replace("0.3 Word --> A\n", "0.7 Word --> A\n")


@pytest.mark.slow
def test_parse_segment_mbr_averages_several_grammars(morph):
    # ab: P(after a) = 0.612 under g, 0.081 / 0.361 = 0.224 under g2 (Word --> A B 0.3): mean 0.418;
    # with g twice and g2 once (0.612 * 2 + 0.224) / 3 = 0.483.  abc: 0.556 and 0.444 under both.
    (morph / "g2.txt").write_text(GRAMMAR2)
    g, g2, c = morph / "g.txt", morph / "g2.txt", morph / "c.txt"
    for first, other in ((g, g2), (g2, g)):
        r = grind("parse", "--segment", "--mbr", "--average", other, first, c)
        assert body(r.stdout) == ["ab", "a bc", "a"]
        assert "# averaged_over: 2 grammars" in r.stdout
    r = grind("parse", "--segment", "--mbr", "--boundary-threshold", "0.45", "--average", g2, g, c)
    assert body(r.stdout) == ["ab", "a bc", "a"]
    r = grind("parse", "--segment", "--mbr", "--boundary-threshold", "0.45", "--average", g, "--average", g2, g, c)
    assert body(r.stdout) == ["a b", "a bc", "a"]
    (morph / "c2.txt").write_text(CHARS + "c\n")
    r = grind("parse", "--segment", "--mbr", "--average", g2, g, morph / "c2.txt")
    assert body(r.stdout)[-1] == "c\t_" and "# unparsed: 1" in r.stdout
    (morph / "g3.txt").write_text(GRAMMAR + "0.0 B --> a\n")
    r = grind("parse", "--segment", "--average", g2, g, c, check=False)
    assert r.returncode == 2 and "--average needs --mbr" in r.stderr
    r = grind("parse", "--segment", "--mbr", "--average", morph / "g3.txt", g, c, check=False)
    assert r.returncode == 1 and "g3.txt: --average needs the rules of" in r.stderr and "Traceback" not in r.stderr


def test_mbr_ties_are_not_cut_and_posteriors_are_clipped():
    """A committee of an even number of sharp grammars averages to 0.5 exactly where they split,
    and the kernel's rounding puts such a tie at 0.5 +- 1e-15: the documented '> 0.5' must not
    depend on that noise.  A certain boundary rounded to 1 + 7e-15 counts as 1."""
    from grind.cli.decode_cmds import MBR_TIE, mbr_cuts, mbr_inner
    p = [0.5 + 4e-16, 0.5 - 4e-16, 0.5 + 2e-9, 1 + 7e-15]
    assert mbr_cuts(p, 5, 0.5, MBR_TIE) == {3, 4}
    assert mbr_cuts(p, 5, 0.5) == {1, 3, 4}                  # without the tolerance, the noise decided
    assert mbr_inner(p, 5).max() == 1.0


def test_expected_f_threshold_by_hand():
    # p = .9 .45 .4 .1, sum 1.85: k = 1..4 gives 2 * (.9, 1.35, 1.75, 1.85) / (k + 1.85) = .632 .701 .722 .632
    t, ef = expected_f_threshold([[0.9, 0.45], [], [0.4, 0.1]])
    assert t == 0.4 and ef == pytest.approx(3.5 / 4.85)
    t, ef = expected_f_threshold([[0.9, 0.6, 0.3, 0.2]])        # k = 2: 3.0 / 4 = .75 beats 3.6 / 5 = .72
    assert t == 0.6 and ef == pytest.approx(0.75)
    t, ef = expected_f_threshold([[0.0, 0.0], []])
    assert t == 1.0 and math.isnan(ef)


def test_parse_segment_expected_f(morph):
    # P(boundary): ab .612; abc .556 and .444 (sum 1.612): k = 3 gives 3.223 / 4.612 = .699 > k = 2's
    # 2.335 / 3.612 = .646 (exactly .698946 and .646374), so every position with P >= .444 is cut (0.5 would keep 'bc')
    r = grind("parse", "--segment", "--mbr", "--expected-f", morph / "g.txt", morph / "c.txt")
    assert body(r.stdout) == ["a b", "a b c", "a"]
    assert "# boundary_threshold: 0.444444 (maximum expected boundary F over the corpus: expected F 0.6989)" \
        in r.stdout
    for bad in (["--expected-f"], ["--mbr", "--expected-f", "--boundary-threshold", "0.3"]):
        r = grind("parse", "--segment", *bad, morph / "g.txt", morph / "c.txt", check=False)
        assert r.returncode == 2 and "--expected-f" in r.stderr, bad


def test_mbr_cuts():
    assert mbr_cuts([0.6, 0.5, 0.51], 4) == {1, 3}
    assert mbr_cuts([0.6, 0.5, 0.51], 4, threshold=0.505) == {1, 3} and mbr_cuts([0.6, 0.5, 0.51], 4, 0.1) == {1, 2, 3}
    assert mbr_cuts([1.0, 0.6, 0.2, 1.0], 3) == {1}          # all n + 1 positions
    assert mbr_cuts([], 1) == set() and mbr_cuts(None, 3) is None and mbr_cuts([nan, 1], 3) is None
    with pytest.raises(ValueError):
        mbr_cuts([0.1], 4)


@pytest.mark.slow
def test_eval_segmentation_end_to_end(morph):
    pred = morph / "p.txt"
    pred.write_text(grind("parse", "--segment", morph / "g.txt", morph / "c.txt").stdout)
    gold = morph / "gold.tsv"
    gold.write_text("ab\ta @@b\nabc\tab @@c\na\ta\nab\ta @@b\n")
    out = grind("eval", "--segmentation", gold, pred, pred).stdout
    lines = out.splitlines()
    assert f"# gold: {gold}: 4 lines, 3 word types (1 duplicate lines counted once)" in lines
    assert any(ln.startswith("# boundary_P") and "word-initial and word-final" in ln for ln in lines)
    rows = {ln.split("\t")[0]: ln.split("\t")[1:] for ln in lines if not ln.startswith("#")}
    # morphs: ab 2/2, abc (0,1)(1,3) vs (0,2)(2,3) 0, a 1: 3 of 5 and 5; boundaries {1},{1} vs {1},{2}
    assert rows["predicted"] == ["3", "0", "0.6000", "0.6000", "0.6000", "0.6667", "0.5000", "0.5000",
                                 "0.5000", "0.3333", "0.6667"]
    assert rows["baseline-one-morph"] == ["3", "0", "0.3333", "0.2000", "0.2500", "0.3333", "nan", "0.0000",
                                          "0.0000", "1.0000", "0.3333"]
    assert rows["baseline-chars"] == ["3", "0", "0.6667", "0.8000", "0.7273", "0.6667", "0.6667", "1.0000",
                                      "0.8000", "0.3333", "1.0000"]
    assert out.count("# predicted: ") == 2 and "# 2 predicted files: mean and sample standard deviation" in out
    assert "morph_F\t0.6000\t0.0000" in lines
    # a missing word, an extra word, corpus options
    pred.write_text("a b\na\n")
    r = grind("eval", "--segmentation", gold, pred, check=False)
    assert r.returncode == 1 and "missing from" in r.stderr and "'abc'" in r.stderr
    pred.write_text("a b\na bc\na\nx y\n")
    r = grind("eval", "--segmentation", gold, pred, check=False)
    assert r.returncode == 1 and "'xy'" in r.stderr and "not in" in r.stderr
    r = grind("eval", "--segmentation", "--max-length", "3", gold, pred, check=False)
    assert r.returncode == 2


def test_eval_note_near_baseline(tmp_path):
    gold = tmp_path / "g.txt"
    gold.write_text("an an a\ndog\n")
    pred = tmp_path / "p.txt"
    pred.write_text("an ana\ndog\n")
    out = grind("eval", "--segmentation", gold, pred).stdout
    assert "# note:" not in out
    pred.write_text("a n a n a\nd o g\n")
    out = grind("eval", "--segmentation", gold, pred).stdout
    assert "# note: morph_F 0.1667 is within 1 point of the chars baseline's 0.1667" in out


def test_eval_note_for_boundary_f_near_baseline(tmp_path):
    # test_hand_worked_two_words / test_baselines_by_hand: boundary_F .5 = the chars baseline's .5;
    # morph_F .25 is far from 1/3 and 1/6, one-morph's boundary_F is 0: exactly one note
    gold, pred = tmp_path / "g.txt", tmp_path / "p.txt"
    gold.write_text("an an a\ndog\n")
    pred.write_text("an ana\ndo g\n")
    out = grind("eval", "--segmentation", gold, pred).stdout
    assert [ln for ln in out.splitlines() if ln.startswith("# note:")] == [
        "# note: boundary_F 0.5000 is within 1 point of the chars baseline's 0.5000"]


def test_near_baseline_note_at_exactly_one_point():
    # .3377 - .3277 is 1 point (0.010000000000000009 in floating point): noted; .9 and nan are not
    row = {"morph_F": 0.3277, "boundary_F": nan}
    base = {"one-morph": {"morph_F": 0.3377, "boundary_F": nan}, "chars": {"morph_F": 0.9, "boundary_F": nan}}
    assert seg.near_baseline_notes(row, base) == [
        "# note: morph_F 0.3277 is within 1 point of the one-morph baseline's 0.3377\n"]


def test_eval_spread_is_the_sample_standard_deviation(tmp_path):
    # morph_F .25 (an ana / do g) and 1/6 (every character a morph): mean 5/24 = .2083,
    # sample sd |.25 - 1/6| / sqrt(2) = .0589 (the population sd would be .0417)
    gold, p1, p2 = tmp_path / "g.txt", tmp_path / "p1.txt", tmp_path / "p2.txt"
    gold.write_text("an an a\ndog\n")
    p1.write_text("an ana\ndo g\n")
    p2.write_text("a n a n a\nd o g\n")
    lines = grind("eval", "--segmentation", "--aggregate", gold, p1, p2).stdout.splitlines()   # no headers: asked
    assert "morph_F\t0.2083\t0.0589" in lines


def test_eval_reads_segmentations_nfc_normalised(tmp_path):
    nfd, nfc = tmp_path / "nfd.tsv", tmp_path / "nfc.txt"
    nfd.write_text("cafe\u0301s\tcafe\u0301 @@s\n", encoding="utf-8")
    nfc.write_text("caf\u00e9 s\n", encoding="utf-8")
    rows = [ln.split("\t") for ln in grind("eval", "--segmentation", nfd, nfc).stdout.splitlines()
            if ln.startswith("predicted")]
    assert rows[0][6] == "1.0000"                                   # exact: the same word, the same cut


def test_eval_skips_and_counts_multi_word_rows_as_train_and_parse_do(tmp_path):
    """A SIGMORPHON row with a space in its word (skipped with a warning by --chars readers, so absent
    from grind's predictions) made eval stop with "morph 2 'harp' does not start with '@@'"."""
    gold, pred = tmp_path / "gold.tsv", tmp_path / "pred.tsv"
    gold.write_text("mouth harpist\tmouth harp @@ist\t010\nabdikovat\tab @@dik @@ovat\t100\n", encoding="utf-8")
    pred.write_text("ab dik ovat\n", encoding="utf-8")
    r = grind("eval", "--segmentation", gold, pred)
    assert f"{gold}: skipped 1 row(s) whose word has whitespace in it" in r.stderr
    assert f"# skipped: {gold}: 1 multi-word row(s) (whitespace in the word), not scored" in r.stdout
    row = next(ln.split("\t") for ln in r.stdout.splitlines() if ln.startswith("predicted"))
    assert row[1] == "1" and row[6] == "1.0000"
    with pytest.raises(InputError, match="has whitespace in it"):
        read_segmentations(str(gold))


def test_a_word_hash_at_the_top_of_a_file_is_a_word_for_every_reader(tmp_path):
    """'#<TAB>#' first in a SIGMORPHON file was a header line to train/parse --chars but a word to eval, and a
    plain segmentation '#' was a header line to eval (decode audit)."""
    gold = tmp_path / "g.tsv"
    gold.write_text("#\t#\nab#\tab @@#\nba\tb @@a\n", encoding="utf-8")
    grind("make-grammar", "morph", "--chars", "-o", tmp_path / "m.txt", gold)
    seg = grind("parse", "--chars", "--segment", tmp_path / "m.txt", gold).stdout
    assert [ln for ln in seg.splitlines() if not ln.startswith("# ")][0] == "#"
    (tmp_path / "p.txt").write_text(seg, encoding="utf-8")
    out = grind("eval", "--segmentation", gold, tmp_path / "p.txt").stdout
    assert next(ln for ln in out.splitlines() if ln.startswith("predicted")).split("\t")[1] == "3"


def test_eval_counts_repeats_and_warns_of_a_gold_without_boundaries(tmp_path):
    gold = tmp_path / "g.tsv"
    gold.write_text("abdikovat\tab @@dik @@ova @@t\nabeced\tabeced\nabeced\tabeced\n")
    pred = tmp_path / "p.tsv"
    pred.write_text("abdikovat\tab @@dik @@ova @@t\nabeced\tabeced\nabeced\tabeced\n")
    r = grind("eval", "--segmentation", gold, pred)
    assert f"{pred}: 1 row(s) repeat a word listed before" in r.stderr and f"{gold}: 1 row(s) repeat" in r.stderr
    assert f"# repeats: {pred}: 1 row(s) repeat" in r.stdout and "no gold word has an internal boundary" not in r.stderr
    words = tmp_path / "w.txt"
    words.write_text("abdikovat\nabeced\n")
    r = grind("eval", "--segmentation", words, pred)
    assert "no gold word has an internal boundary" in r.stderr and "# warning: " in r.stdout


def test_multiword_rows_and_types_repeats_are_in_the_headers(tmp_path):
    f = tmp_path / "w.tsv"
    f.write_text("abdikovat\tab @@dik @@ova @@t\nstáti (se)\tstá @@t @@i (se)\nabeced\tabeced\nabeced\tabeced\n")
    grind("make-grammar", "morph", "--chars", "--types", "-o", tmp_path / "g.txt", f)
    assert "# left_out: 1 SIGMORPHON rows of more than one word (no substrings taken); 1 repeats dropped by --types" \
        in (tmp_path / "g.txt").read_text()
    r = grind("parse", "--chars", "--segment", tmp_path / "g.txt", f)
    assert "# left_out: 1 SIGMORPHON rows of more than one word (not written)" in r.stdout


def test_train_and_parse_do_not_check_the_gold_column_they_do_not_use(tmp_path):
    """A SIGMORPHON row with an empty segmentation stopped make-grammar/parse ('empty morph'), which
    never use the column; grind eval --segmentation still refuses it as gold."""
    f = tmp_path / "w.tsv"
    f.write_text("abdikovat\tab @@dik @@ova @@t\nabeced\t\n")
    grind("make-grammar", "morph", "--chars", "-o", tmp_path / "g.txt", f)
    out = grind("parse", "--chars", "--segment", tmp_path / "g.txt", f).stdout
    assert body(out) == ["abdikovat", "abeced"]
    r = grind("eval", "--segmentation", f, f, check=False)
    assert r.returncode == 1 and "w.tsv:2" in r.stderr and "empty morph" in r.stderr, r.stderr


def test_canonical_rows_are_counted_and_surface_only_scores_the_others(tmp_path):
    """SIGMORPHON's English / Mongolian gold is canonical: eval stopped at the first such row without a count
    and offered no way to score the surface rows the data's README recommends (morphology audit)."""
    gold, pred = tmp_path / "gold.tsv", tmp_path / "pred.tsv"
    gold.write_text("happiness\thappy @@ness\t010\nplayed\tplay @@ed\t100\nboardgamey\tboard game @@y\t010\n"
                    "subsidised\tsubside @@y @@ise @@ed\t110\nwalks\twalk @@s\t100\n", encoding="utf-8")
    pred.write_text("happi ness\nplay ed\nboard gamey\nsubsid ised\nwalks\n", encoding="utf-8")
    r = grind("eval", "--segmentation", gold, pred, check=False)
    assert r.returncode == 1 and f"{gold}:1: the morphs happy + ness" in r.stderr
    assert "3 of the 5 segmented rows" in r.stderr and "--surface-only" in r.stderr
    r = grind("eval", "--segmentation", "--surface-only", gold, pred)
    assert f"# skipped: {gold}: 3 of 5 row(s) not a surface segmentation of one word (--surface-only)" in r.stdout
    assert f"# skipped: {pred}: 3 word(s) whose gold row is not a surface segmentation" in r.stdout
    row = next(ln.split("\t") for ln in r.stdout.splitlines() if ln.startswith("predicted"))
    assert row[1] == "2" and row[6] == "0.5000"              # played and walks scored; 'play ed' exact
    r = grind("eval", "--surface-only", gold, pred, check=False)
    assert r.returncode == 2 and "--surface-only is an option of --segmentation" in r.stderr


def test_a_blank_line_in_a_sigmorphon_file_is_called_empty(tmp_path):
    """It said "no segmentation column ..., which line 1 has" (morphology audit)."""
    f = tmp_path / "w.tsv"
    f.write_text("abdikovat\tab @@dik @@ova @@t\n\nabeced\tabeced\n", encoding="utf-8")
    r = grind("make-grammar", "morph", "--chars", f, check=False)
    assert r.returncode == 1 and f"{f}:2: empty word (one word a line; a blank line is not a word)" in r.stderr


def test_a_morph_grammar_with_its_own_start_symbol_segments_without_a_warning(tmp_path):
    """make-grammar morph takes the templates' first LHS as the start; parse --segment warned it was not
    'Word' (help audit)."""
    t, w = tmp_path / "t.txt", tmp_path / "w.txt"
    t.write_text("W --> A B\nW --> B\n", encoding="utf-8")
    w.write_text("abc\nab\n", encoding="utf-8")
    grind("make-grammar", "morph", "--chars", "--templates", t, "-o", tmp_path / "g.txt", w)
    r = grind("parse", "--chars", "--segment", tmp_path / "g.txt", w)
    assert "start symbol" not in r.stderr and len([ln for ln in r.stdout.splitlines() if ln[:2] != "# "]) == 2
