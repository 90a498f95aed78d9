"""grind eval's baselines and overlaps, unparsed sentences, and the DMV tag set (grind issue 10)."""
import re

import pytest

from conftest import grind
from grind.formats.corpus import CorpusSpec, read_corpus
from grind.eval.dependencies import baseline_rows, evaluate, near_baseline_notes, score_sentence
from grind.errors import InputError


def conll(sents):
    """CoNLL-U text of [(tags, heads)]; heads None = HEAD '_' everywhere."""
    out = []
    for tags, heads in sents:
        for i, t in enumerate(tags, 1):
            h = "_" if heads is None else str(heads[i - 1])
            out.append(f"{i}\tw{i}\tw{i}\t{t}\t{t}\t_\t{h}\t_\t_\t_")
        out.append("")
    return "\n".join(out) + "\n"


# Gold trees (heads 1-based, 0 = root); S2 ends in a PUNCT token (head 2) that --punct ud removes.
GOLD = [(["A", "B", "C"], [2, 0, 2]),
        (["A", "B", "C", "D", "PUNCT"], [2, 0, 4, 2, 2]),
        (["A", "B"], [2, 0])]
# Predictions by hand; S3 unparsed (HEAD '_').
PRED = [(["A", "B", "C"], [0, 1, 2]),
        (["A", "B", "C", "D", "PUNCT"], [2, 0, 2, 3, 2]),
        (["A", "B"], None)]
# Worked out (punctuation removed: 3 + 4 + 2 = 9 words, all sentences <= 10):
#   S1 pred [0,1,2] vs gold [2,0,2]: directed w3 = 1; undirected + w2 (1->2 reversed) = 2.
#      attach-right [2,3,0]: same heads 0; attach-left [0,1,2]: same heads 3.
#   S2 pred [2,0,2,3] vs gold [2,0,4,2]: directed w1 w2 = 2; undirected + w4 (4->3 reversed) = 3.
#      attach-right [2,3,4,0]: same w1 = 1; attach-left [0,1,2,3]: same w3 w4 = 2.
#   S3 unparsed: 2 words, 0 correct, not in the overlap denominators.
#   directed 3/9 = .3333, undirected 5/9 = .5556, unparsed 1,
#   overlap_right 1/7 = .1429, overlap_left 5/7 = .7143.
# Baselines on the gold trees:
#   attach-right: S1 [2,3,0] dir 1 (w1) undir 2 (+w2: gold 3->2); S2 [2,3,4,0] dir 2 undir 2;
#      S3 [2,0] dir 2 undir 2  ->  directed 5/9 = .5556, undirected 6/9 = .6667.
#   attach-left:  S1 [0,1,2] dir 1 undir 2; S2 [0,1,2,3] dir 0 undir 2 (w2, w4 reversed);
#      S3 [0,1] dir 0 undir 1  ->  directed 1/9 = .1111, undirected 5/9 = .5556.
#   Overlap of a baseline with itself is 1; right vs left: no word (no 1-word sentence) -> 0.
UD = ("--column", "UPOS", "--punct", "ud")


@pytest.fixture
def files(tmp_path):
    g, p = tmp_path / "gold.conllu", tmp_path / "pred.conllu"
    g.write_text(conll(GOLD))
    p.write_text(conll(PRED))
    return tmp_path, str(g), str(p)


def rows_of(report):
    """{first column: [fields]} of the TSV rows (not '#' or header lines)."""
    out = {}
    for ln in report.splitlines():
        if ln and not ln.startswith("#") and not ln.startswith("subset\t"):
            f = ln.split("\t")
            out.setdefault(f[0], f[1:])
    return out


def test_hand_computed_accuracies_overlaps_and_baselines(files):
    _, g, p = files
    r = grind("eval", *UD, g, p)
    rows = rows_of(r.stdout)
    assert "subset\tsentences\twords\tdirected\tundirected\tunparsed\toverlap_right\toverlap_left" in r.stdout
    for s in ("<=10", "<=20", "all"):
        assert rows[s] == ["3", "9", "0.3333", "0.5556", "1", "0.1429", "0.7143"]
        assert rows[f"attach-right:{s}"] == ["3", "9", "0.5556", "0.6667", "0", "1.0000", "0.0000"]
        assert rows[f"attach-left:{s}"] == ["3", "9", "0.1111", "0.5556", "0", "0.0000", "1.0000"]
    assert "# note:" not in r.stdout                       # .3333 is > 1 point from .5556 and .1111
    assert "# unparsed:" in r.stdout and "# overlap_right / overlap_left:" in r.stdout
    assert "1 of 3 predicted sentences are unparsed" in r.stderr
    # punctuation kept: S2 has 5 words; attach-right [2,3,4,5,0] still gets w1 w3 (5/10),
    # attach-left [0,1,2,3,4] none of S2 (1/10)
    rows = rows_of(grind("eval", "--column", "UPOS", g, p).stdout)
    assert rows["all"][:2] == ["3", "10"]
    assert rows["attach-right:all"][2] == "0.5000" and rows["attach-left:all"][2] == "0.1000"


def test_no_baselines_is_an_off_switch(files):
    _, g, p = files
    out = grind("eval", *UD, "--no-baselines", g, p).stdout
    assert "attach-" not in out and "overlap" not in out
    assert rows_of(out)["all"] == ["3", "9", "0.3333", "0.5556", "1"]


def test_note_when_within_one_point_and_spread_of_several_files(files):
    d, g, p = files
    right = d / "right.conllu"          # the attach-right trees of the gold sentences
    right.write_text(conll([(t, [i + 2 if i + 1 < len(t) else 0 for i in range(len(t))]) for t, _ in GOLD]))
    # written with PUNCT kept: S2 [2,3,4,5,0]; --punct ud re-attaches w4 (head 5, removed) to 5's
    # head 0, so the scored trees are exactly attach-right's: directed 5/9 on every subset.
    out = grind("eval", *UD, g, str(right), p).stdout
    assert out.count("# predicted:") == 2 and out.count("attach-right:all") == 1
    assert re.findall(r"# note: .*", out) == [f"# note: {s} directed 0.5556 is within 1 point of attach-right 0.5556"
                                              for s in ("<=10", "<=20", "all")]
    assert rows_of(out)["all"][5:] == ["1.0000", "0.0000"]
    # two files without a header: not runs of one configuration (issue 38), averaged only on request
    assert "# 2 runs: mean" not in out and "# configurations: 2 among the 2 PREDICTED files" in out
    assert "# 2 runs: mean and sample standard deviation" in grind("eval", "--aggregate", *UD, g, str(right), p).stdout


def test_near_baseline_notes_boundary():
    base = {"right": [{"subset": "all", "directed": 0.3377}], "left": [{"subset": "all", "directed": 0.1}]}
    assert near_baseline_notes([{"subset": "all", "directed": 0.3370}], base) == [
        "# note: all directed 0.3370 is within 1 point of attach-right 0.3377\n"]
    assert near_baseline_notes([{"subset": "all", "directed": 0.3177}], base) == []
    assert len(near_baseline_notes([{"subset": "all", "directed": 0.3277}], base)) == 1   # exactly 1 point


def test_unparsed_sentence_scores_zero_not_a_baseline(files):
    _, g, p = files
    spec = CorpusSpec(column="UPOS", punct="ud")
    gold, pred = read_corpus(g, spec), read_corpus(p, spec)
    assert pred[2].heads is None
    rows = evaluate(gold, pred)
    assert rows[-1]["directed"] == pytest.approx(3 / 9) and rows[-1]["unparsed"] == 1
    assert baseline_rows(gold)["right"][-1]["directed"] == pytest.approx(5 / 9)
    with pytest.raises(InputError, match="gold sentence 3 .* has no HEAD"):
        evaluate(pred, pred)


def test_undirected_credit_never_reads_a_root_arc_as_a_reversed_one():
    # gold [2,0,1], pred [0,1,2]: w1 pred root (gold 2): no credit -- pred head 0 is no word, so
    # gold[0 - 1] (the last word's head, 1 = w1) must not count as "w1 -> 0 reversed";
    # w2 pred 1, gold w1's head is 2: reversed, undirected; w3 pred 2, gold w2 is the root: none.
    assert score_sentence([2, 0, 1], [0, 1, 2]) == (0, 1)


def left_chain(n):
    """Heads of the attach-left tree: w1 the root, every other word's head its left neighbour."""
    return list(range(n))


def right_chain(n):
    """Heads of the attach-right tree: every word's head its right neighbour, the last word the root."""
    return [i + 2 for i in range(n - 1)] + [0]


# Gold: attach-left trees of lengths 10, 11, 20 and 21 (one on each side of both limits).
# Predicted: all 10 right | attach-right, none right | the first 10 right, words 11-19 headed by their
# right neighbour and w20 by w10 (a tree; 10 right) | all 21 right.
LIMITS_GOLD = [(["A"] * n, left_chain(n)) for n in (10, 11, 20, 21)]
LIMITS_PRED = [(["A"] * 10, left_chain(10)), (["A"] * 11, right_chain(11)),
               (["A"] * 20, left_chain(10) + [i + 2 for i in range(10, 19)] + [10]),
               (["A"] * 21, left_chain(21))]


@pytest.fixture
def limit_files(tmp_path):
    g, p = tmp_path / "gold.conllu", tmp_path / "pred.conllu"
    g.write_text(conll(LIMITS_GOLD))
    p.write_text(conll(LIMITS_PRED))
    return str(g), str(p)


def test_length_limits_are_inclusive(limit_files):
    # <=10: the 10-word sentence, 10/10; <=20: lengths 10, 11, 20 = 41 words, (10 + 0 + 10)/41 = .4878;
    # all: 62 words, (10 + 0 + 10 + 21)/62 = 41/62 = .6613.
    rows = rows_of(grind("eval", "--column", "UPOS", *limit_files).stdout)
    assert rows["<=10"][:3] == ["1", "10", "1.0000"]
    assert rows["<=20"][:3] == ["3", "41", "0.4878"]
    assert rows["all"][:3] == ["4", "62", "0.6613"]


def test_significance_subsets_use_the_same_inclusive_limits(limit_files):
    # The tested scores are the table's: 1.0, .4878, .6613 (above); attach-right gets no word of a
    # left chain right (each head is on the other side, the roots differ): 0 on every subset.
    out = grind("eval", "--column", "UPOS", "--significance", "--samples", "20", *limit_files).stdout
    table = out.split("# significance:")[1].splitlines()[2:]
    sig = {tuple(r.split("\t")[:3]): r.split("\t")[3:] for r in table}
    pred, rows = limit_files[1], rows_of(out)
    for sub, want in (("<=10", "1.0000"), ("<=20", "0.4878"), ("all", "0.6613")):
        assert sig[(pred, "attach-right", f"directed:{sub}")][:2] == [want, "0.0000"]
        assert rows[sub][2] == want


def test_significance_keeps_unparsed_words_in_the_denominator(files):
    # PRED's S3 is unparsed: its 2 words count with 0 correct, as in the table: 3/9 = .3333
    # (not 3/7 = .4286); attach-right 5/9 = .5556 (test_hand_computed_accuracies_overlaps_and_baselines).
    _, g, p = files
    out = grind("eval", *UD, "--significance", "--samples", "20", g, p).stdout
    table = out.split("# significance:")[1].splitlines()[2:]
    sig = {tuple(r.split("\t")[:3]): r.split("\t")[3:] for r in table}
    assert sig[(p, "attach-right", "directed:all")][:2] == ["0.3333", "0.5556"]
    assert rows_of(out)["all"][2] == "0.3333"


def test_head_column_partly_blank_is_an_error(tmp_path):
    f = tmp_path / "x.conllu"
    f.write_text(conll([(["A", "B"], [2, 0])]).replace("\t0\t", "\t_\t"))
    with pytest.raises(InputError, match=r"x.conllu:2: HEAD is '_' here but a number elsewhere"):
        read_corpus(str(f), CorpusSpec(column="UPOS"))


# ----------------------------------------------------------------------------- parse: unparsed sentences

@pytest.mark.slow
def test_parse_writes_unparsed_sentences_marked_with_filler_heads(tmp_path):
    train, test = tmp_path / "train.conllu", tmp_path / "test.conllu"
    train.write_text(conll([(["A", "B"], [2, 0]), (["B", "A", "B"], [0, 1, 2])]))
    test.write_text(conll([(["A", "B"], [2, 0]), (["A", "ZZ", "B"], [2, 0, 2]), (["B"], [0])]))
    c = ("--column", "XPOS")
    g = tmp_path / "g.txt"
    grind("make-grammar", "dmv", *c, "--max-length", "2", "-o", g, train)
    r = grind("parse", *c, g, test)
    assert "# unparsed: 1" in r.stdout
    assert "sentence 2 (line 4) has no parse: unknown word 'ZZ' at position 2" in r.stderr
    block = r.stdout.split("\n\n")[1].splitlines()                  # after sentence 1's (the header its comments)
    assert block[0] == "# grind_unparsed = unknown word 'ZZ' at position 2: the grammar has no head type (tag) 'ZZ'; " \
        "make the grammar with make-grammar dmv --tags-from CORPUS (or --tags FILE) to cover it"
    # filler heads (attach-right), so that the file is valid CoNLL-U (issue 38); eval reads the mark
    assert [ln.split("\t")[6:8] for ln in block[1:]] == [["2", "_"], ["3", "_"], ["0", "_"]]
    assert [ln.split("\t")[3] for ln in block[1:]] == ["A", "ZZ", "B"]           # other columns passed through
    for cmd in (("loglik",), ("train", "--iterations", "1")):        # named the same way at train/loglik time
        err = grind(*cmd, *c, g, test).stderr
        assert "sentence 2 (line 4) has no parse: unknown word 'ZZ' at position 2" in err
    out = tmp_path / "p.conllu"
    out.write_text(r.stdout)
    rows = rows_of(grind("eval", *c, test, out).stdout)
    assert rows["all"][:2] == ["3", "6"] and rows["all"][4] == "1"


# ----------------------------------------------------------------------------- make-grammar dmv: the tag set

def types_of(grammar_text):
    return sorted(re.findall(r"^\S+ S --> Y_(\S+)$", grammar_text, re.M))


def test_upos_tag_set_is_the_17_tags(tmp_path):
    c = tmp_path / "c.conllu"
    c.write_text(conll([(["NOUN", "VERB"], [2, 0]), (["NOUN", "VERB", "PUNCT"], [2, 0, 2]), (["ZZZ"], [0])]))
    r = grind("make-grammar", "dmv", "--column", "UPOS", "--punct", "ud", "--max-length", "2", c)
    assert len(types_of(r.stdout)) == 17 and "PUNCT" not in types_of(r.stdout) and "ZZZ" in types_of(r.stdout)
    assert "# tagset: UPOS without PUNCT (--punct ud) (17 tags; also ZZZ)" in r.stdout
    assert "not UPOS tags (of UD v2 or v1), added to the tag set: ZZZ" in r.stderr
    r = grind("make-grammar", "dmv", "--column", "UPOS", c)
    assert "PUNCT" in types_of(r.stdout) and len(types_of(r.stdout)) == 18


def test_xpos_tag_set_ignores_length_filter_and_adds_tag_files(tmp_path):
    c, dev, tags = tmp_path / "c.conllu", tmp_path / "dev.conllu", tmp_path / "tags.txt"
    c.write_text(conll([(["NN", "VB"], [2, 0]), (["NN", "VB", "JJ"], [2, 0, 2])]))
    dev.write_text(conll([(["RB", "VB"], [2, 0])]))
    tags.write_text("# comment line\nFW\n#\tSYM\n\n")
    x = ("--column", "XPOS", "--max-length", "2")
    assert types_of(grind("make-grammar", "dmv", *x, c).stdout) == ["JJ", "NN", "VB"]
    r = grind("make-grammar", "dmv", *x, "--tags", tags, "--tags-from", dev, c)
    assert types_of(r.stdout) == ["#", "FW", "JJ", "NN", "RB", "SYM", "VB"]
    assert re.search(r"# tagset: XPOS of .*c.conllu \(all lengths\) \+ .*dev.conllu \(--tags-from\) "
                     r"\+ .*tags.txt \(--tags\) \(7 tags\)", r.stdout)
    assert grind("make-grammar", "dmv", "--lexicalized", *x, "--tags", tags, c, check=False).returncode == 2


@pytest.mark.slow
def test_harmonic_init_on_unseen_tag_and_its_unparsed_sentences(tmp_path):
    c, test = tmp_path / "c.conllu", tmp_path / "t.conllu"
    c.write_text(conll([(["NN", "VB"], [2, 0]), (["NN", "VB", "NN"], [2, 0, 2])]))
    test.write_text(conll([(["NN", "VB"], [2, 0]), (["FW", "VB"], [2, 0])]))
    x = ("--column", "XPOS")
    g0, g1, g2 = (tmp_path / f"g{i}.txt" for i in range(3))
    grind("make-grammar", "dmv", *x, "--tags-from", test, "-o", g0, c)
    grind("init", "--harmonic", "--variant", "independent", "--corpus", c, *x, "-o", g1, g0)
    text = g1.read_text()
    fw = [ln for ln in text.splitlines() if re.search(r"(_FW\b|_FW_)", ln) and not ln.startswith("#")]
    assert fw and all(float(ln.split()[0]) == 0 for ln in fw)     # all-zero LHSs stay zero (normalize)
    grind("train", "--algo", "em", "--iterations", "2", *x, "-o", g2, g1, c)
    r = grind("parse", "--no-backoff", *x, g2, test)
    assert "# unparsed: 1" in r.stdout
    assert "sentence 2 (line 4) has no parse: 'FW' at position 1 has probability 0" in r.stderr
    r = grind("parse", *x, g2, test)                                 # backed off (issue 39): parsed, counted
    assert "# unparsed: 0" in r.stdout and "# backoff: 1 of 2 sentences had no tree" in r.stdout
    assert "tags of probability 0 under it: FW" in r.stdout
    assert "sentence 2 (line 4) has no tree under the grammar's weights ('FW' at position 1 has probability 0" \
        in r.stderr
    vb = tmp_path / "vb.txt"
    grind("train", "--algo", "vb", "--iterations", "2", *x, "-o", vb, g1, c)
    assert "# unparsed: 0" in grind("parse", *x, vb, test).stdout    # the posterior mean is positive
    smooth = tmp_path / "smooth.txt"                                  # the smoothed (default) initialiser
    grind("init", "--harmonic", "--corpus", c, *x, "-o", smooth, g0)
    assert all(float(ln.split()[0]) > 0 for ln in smooth.read_text().splitlines() if not ln.startswith("#"))


@pytest.mark.slow
@pytest.mark.parametrize("column", ["UPOS", "XPOS"])
def test_le10_grammar_parses_every_test_sentence_of_the_sample(tmp_path, ewt_train, ewt_test, column):
    """make-grammar on the <= 10 training sentences, harmonic init, 3 VB
    iterations: every test sentence (all lengths) parses.  VB's posterior
    mean, not EM: the harmonic initialiser gives 0 to every choose rule whose
    (head, dependent, direction) never co-occurs in a <= 10 training sentence
    and EM keeps those zeros (with UPOS one test sentence, NOUN X X X X X NUM,
    has no tree under EM); the posterior mean (count + alpha) is positive."""
    c = ("--column", column, "--punct", "ud")
    tags = ("--tags-from", ewt_test) if column == "XPOS" else ()   # -LRB- -RRB- are not in the train sample
    g0, g1, g2 = (tmp_path / f"g{i}.txt" for i in range(3))
    grind("make-grammar", "dmv", *c, "--max-length", "10", *tags, "-o", g0, ewt_train)
    grind("init", "--harmonic", "--corpus", ewt_train, *c, "--max-length", "10", "-o", g1, g0)
    grind("train", "--algo", "vb", "--iterations", "3", *c, "--max-length", "10", "-o", g2, g1, ewt_train)
    r = grind("parse", *c, g2, ewt_test)
    assert "# unparsed: 0" in r.stdout and "no parse" not in r.stderr
    pred = tmp_path / "p.conllu"
    pred.write_text(r.stdout)
    rows = rows_of(grind("eval", *c, ewt_test, pred).stdout)
    assert rows["all"][0] == "496" and rows["all"][4] == "0"


def test_sentences_outside_the_length_limits_are_counted_not_dropped_silently(tmp_path):
    c = tmp_path / "c.conllu"
    long = (["NOUN"] * 12, [0] + [1] * 11)
    c.write_text(conll([(["NOUN", "VERB"], [2, 0]), long, (["PUNCT"], [0])]))
    out = tmp_path / "right.conllu"
    r = grind("baseline", "--attach", "right", *UD, "--max-length", "10", "-o", out, c)
    # what happened, in the limits given (issue 38: the punctuation-only one is no length limit's doing)
    assert ("1 sentences kept; left out: 1 outside the length limits 1..10 (after punctuation removal), 1 of "
            "punctuation only (no token left after --punct ud)") in r.stderr
    text = out.read_text()
    assert ("# left_out: 1 sentences outside the length limits 1..10 (written with filler heads, marked "
            "'# grind_left_out = REASON'); 1 sentences of punctuation only") in text
    marks = [ln for ln in text.splitlines() if ln.startswith("# grind_left_out = ")]
    assert text.count("\n\n") == 3 and len(marks) == 2                 # every input sentence, marked
    r = grind("baseline", "--attach", "right", *UD, c)          # the punctuation-only one has 0 words
    assert "2 sentences kept; left out: 1 of punctuation only (no token left after --punct ud)" in r.stderr
    assert "# left_out: 1 sentences of punctuation only" in r.stdout
    r = grind("baseline", "--attach", "right", "--column", "UPOS", c)
    assert "left out" not in r.stderr and "# left_out:" not in r.stdout


def test_a_punct_rule_the_file_cannot_match_is_an_error_and_ptb_names_the_punct_it_keeps(files, tmp_path):
    """--punct ud on Malt-TAB (no UPOS) and --punct ptb on a treebank without XPOS removed nothing, while the
    convention line said punctuation was removed (evaluation audit)."""
    d, g, _ = files
    (tmp_path / "t.dp").write_text("w1\tA\t2\nw2\tB\t0\n\n")
    r = grind("eval", "--column", "XPOS", "--punct", "ud", tmp_path / "t.dp", tmp_path / "t.dp", check=False)
    assert r.returncode == 1 and "Malt-TAB has no UPOS column: use --punct ptb" in r.stderr
    (tmp_path / "x.conllu").write_text("1\tw1\tw1\tA\t_\t_\t0\t_\t_\t_\n2\tw2\tw2\tPUNCT\t_\t_\t1\t_\t_\t_\n\n")
    r = grind("eval", "--column", "UPOS", "--punct", "ptb", tmp_path / "x.conllu", tmp_path / "x.conllu",
              check=False)
    assert r.returncode == 1 and "its XPOS column is '_' everywhere: use --punct ud" in r.stderr
    r = grind("eval", "--column", "UPOS", "--punct", "ptb", g, g)
    assert "--punct ptb kept 1 of the tokens whose UPOS is PUNCT (their XPOS PUNCT is not a PTB" in r.stderr


@pytest.mark.slow
def test_eval_refuses_a_parse_made_with_another_punct_rule(files, tmp_path):
    """Its punctuation tokens, attached to the root word as filler, were scored as predictions."""
    d, g, _ = files
    grind("make-grammar", "dmv", *UD, "-o", tmp_path / "dmv.txt", g)
    grind("parse", *UD, "-o", tmp_path / "p.conllu", tmp_path / "dmv.txt", g)
    r = grind("eval", "--column", "UPOS", g, tmp_path / "p.conllu", check=False)
    assert r.returncode == 1 and "was written with punct-removed=ud" in r.stderr and "--punct none" in r.stderr
    assert "directed" in grind("eval", *UD, g, tmp_path / "p.conllu").stdout
    grind("baseline", "--attach", "right", *UD, "-o", tmp_path / "b.conllu", g)       # a baseline file too
    r = grind("eval", "--column", "UPOS", g, tmp_path / "b.conllu", check=False)
    assert r.returncode == 1 and "was written with punct-removed=ud" in r.stderr
    # from standard input too, whose header cannot be read before the file is (helper audit: scored, exit 0)
    r = grind("eval", "--column", "UPOS", g, "-", stdin=(tmp_path / "p.conllu").read_text(), check=False)
    assert r.returncode == 1 and "-: " in r.stderr and "was written with punct-removed=ud" in r.stderr, r.stderr


@pytest.mark.slow
def test_eval_refuses_filler_rows_of_a_parse_that_lost_its_header(files, tmp_path):
    """grep -v '^#' (or a format conversion) dropped the '# corpus:' line, and the filler rows were scored."""
    d, g, _ = files
    grind("make-grammar", "dmv", *UD, "-o", tmp_path / "dmv.txt", g)
    for cmd in (["parse", *UD, tmp_path / "dmv.txt", g], ["baseline", "--attach", "right", *UD, g]):
        bare = tmp_path / "bare.conllu"
        bare.write_text("".join(ln for ln in grind(*cmd).stdout.splitlines(True) if not ln.startswith("#")))
        r = grind("eval", "--column", "UPOS", g, bare, check=False)
        assert r.returncode == 1 and "labels its arcs as grind parse does" in r.stderr, r.stderr
        assert "directed" in grind("eval", *UD, g, bare).stdout            # the rule it was made with
    assert "directed" in grind("eval", "--column", "UPOS", g, g).stdout     # gold labels: not grind's


def test_parse_of_malt_tab_says_its_removed_tokens_are_not_written(tmp_path):
    (tmp_path / "t.dp").write_text("w1\tDT\t2\nw2\tNN\t0\nw3\t.\t2\n\n")
    c = ("--column", "XPOS", "--punct", "ptb")
    grind("make-grammar", "dmv", *c, "-o", tmp_path / "g.txt", tmp_path / "t.dp")
    out = grind("parse", *c, tmp_path / "g.txt", tmp_path / "t.dp").stdout
    assert "# removed_tokens: not written (malt input: the kept tokens are written with IDs 1..n" in out
    assert len([ln for ln in out.splitlines() if ln and not ln.startswith("#")]) == 2


def test_unparsed_reason_names_the_averaged_member_and_a_zero_root_rule(tmp_path):
    """--mbr --average explained a sentence under the first grammar (which parses it): 'the zeros are in how
    they combine'; and a sentence whose every tag has a zero root rule was explained the same way (eval audit)."""
    c = tmp_path / "c.conllu"
    c.write_text(conll([(["NN", "VB"], [2, 0]), (["UH"], [0]), (["UH", "UH"], [0, 1])]))
    x = ("--column", "XPOS")
    g, z = tmp_path / "g.txt", tmp_path / "z.txt"
    grind("make-grammar", "dmv", *x, "-o", g, c)
    from grind.grammars.grammar import read_grammar
    gr = read_grammar(str(g))
    w = gr.weights.copy()
    w[gr.keys().index("S --> Y_UH")] = 0.0                      # UH can no longer be the root
    gr.with_weights(gr.normalize(w)).write(z)
    r = grind("parse", "--mbr", "--average", z, *x, "--max-unparsed", "1", g, c)
    assert "# unparsed: 2" in r.stdout
    why = f"under {z}: no word of it can be the root: the root rule of each of its tags (UH) has probability 0"
    assert f"sentence 2 (line 4) has no parse: {why}" in r.stderr
    assert f"sentence 3 (line 6) has no parse: {why}" in r.stderr


def test_digits_sets_the_decimals_of_every_fraction(files):
    """Recipes rounded eval's 4 decimals again to a percent with one decimal (34.348 -> 0.3435 -> 34.4)."""
    d, g, p = files
    out = grind("eval", "--digits", "6", *UD, g, p).stdout
    assert rows_of(out)["all"][2:4] == ["0.333333", "0.555556"]            # 3/9, 5/9 (worked out above)
    assert rows_of(out)["attach-right:all"][2] == "0.555556"
    assert rows_of(grind("eval", *UD, g, p).stdout)["all"][2] == "0.3333"
