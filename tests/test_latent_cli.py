"""The latent-annotation treebank pipeline through the CLI: make-grammar
treebank, estep/sum/mstep --trees, train --trees (em, vb, cvb), parse,
eval --labeled; on a tiny hand-made treebank (no shared data)."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import grind, shared_path
from grind.formats.trees import read_trees
from grind.grammars.grammar import read_grammar

TRAIN = """
( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD saw) (NP (DT a) (NN cat))) (. .)) )
( (S (NP-SBJ (DT A) (NN cat)) (VP (VBD saw) (NP (DT the) (JJ big) (NN dog))) (. .)) )
( (S (NP-SBJ (PRP It)) (VP (VBD ran) (ADVP (RB away))) (. .)) )
( (S (NP-SBJ (DT The) (NN dog)) (VP (VBD ran) (PP (IN to) (NP (DT the) (NN cat)))) (. .)) )
( (S (NP-SBJ (DT The) (JJ big) (NN cat)) (VP (VBD saw) (NP (PRP it))) (. .)) )
( (S (NP-SBJ (-NONE- *)) (VP (VBD ran) (ADVP (RB away))) (. .)) )
"""
DEV = """
( (S (NP-SBJ (DT The) (NN cat)) (VP (VBD ran) (ADVP (RB away))) (. .)) )
( (S (NP-SBJ (DT A) (NN dog)) (VP (VBD saw) (NP (DT the) (NN zebra))) (. .)) )
"""


@pytest.fixture()
def tb(tmp_path):
    (tmp_path / "train.mrg").write_text(TRAIN)
    (tmp_path / "dev.mrg").write_text(DEV)
    grind("make-grammar", "treebank", "--rare", "0", "-o", tmp_path / "g1.txt", tmp_path / "train.mrg")
    grind("make-grammar", "treebank", "--rare", "0", "--subtypes", "2", "--seed", "3", "-o", tmp_path / "g2.txt",
          tmp_path / "train.mrg")
    return tmp_path


def trace_objectives(path):
    rows = [ln.rstrip("\n").split("\t") for ln in open(path) if not ln.startswith("#")]
    col = rows[0].index("objective")
    return [float(r[col]) for r in rows[1:]]


@pytest.mark.slow
def test_estep_shards_sum_and_mstep_equal_one_em_iteration(tb):
    text = TRAIN.strip().split("\n")
    (tb / "a.mrg").write_text("\n".join(text[:3]) + "\n")
    (tb / "b.mrg").write_text("\n".join(text[3:]) + "\n")
    for s in ("a", "b"):
        grind("estep", "--trees", "-o", tb / f"{s}.counts", tb / "g2.txt", tb / f"{s}.mrg")
    grind("sum", "-o", tb / "c.counts", tb / "a.counts", tb / "b.counts")
    grind("mstep", "--grammar", tb / "g2.txt", "-o", tb / "m.txt", tb / "c.counts")
    grind("train", "--trees", "--algo", "em", "--iterations", "1", "-o", tb / "t.txt", tb / "g2.txt", tb / "train.mrg")
    m, t = read_grammar(str(tb / "m.txt")), read_grammar(str(tb / "t.txt"))
    assert m.keys() == t.keys()
    np.testing.assert_allclose(m.weights, t.weights, rtol=1e-12, atol=1e-15)
    assert m.meta["model"] == "treebank" and t.meta["model"] == "treebank" and t.meta["subtypes"] == "2"


@pytest.mark.slow
def test_every_command_that_writes_a_grammar_keeps_the_treebank_header(tb):
    """init, make-grammar from-file and mstep without --grammar dropped '# model: treebank' and the rest, so
    parse read the grammar as a plain PCFG and every sentence came out NOPARSE (CLI audit)."""
    grind("make-grammar", "treebank", "--rare", "0", "--markov", "1", "-o", tb / "m1.txt", tb / "train.mrg")
    grind("init", "--random", "--seed", "2", "-o", tb / "i.txt", tb / "g2.txt")
    grind("make-grammar", "from-file", "-o", tb / "f.txt", tb / "m1.txt")
    grind("estep", "--trees", "-o", tb / "c.counts", tb / "m1.txt", tb / "train.mrg")
    grind("mstep", "-o", tb / "m.txt", tb / "c.counts")
    for name, markov in (("i.txt", "0"), ("f.txt", "1"), ("m.txt", "1")):
        g = read_grammar(str(tb / name))
        assert g.meta.get("model") == "treebank" and g.meta.get("markov") == markov, name
        out = grind("parse", tb / name, tb / "train.mrg").stdout
        assert "NOPARSE" not in out and out.count("(ROOT") == 6, name


@pytest.mark.parametrize("algo", ["em", "vb"])
def test_train_trees_objective_never_decreases(tb, algo):
    grind("train", "--trees", "--algo", algo, "--iterations", "15", "--tolerance", "0", "--trace", tb / "tr.tsv",
          "-o", tb / "t.txt", tb / "g2.txt", tb / "train.mrg")
    obj = trace_objectives(tb / "tr.tsv")
    assert len(obj) == 15
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(obj, obj[1:]))
    assert obj[-1] > obj[0]


def test_train_trees_cvb_and_dev_evaluation(tb):
    grind("train", "--trees", "--algo", "cvb", "--iterations", "3", "--seed", "1", "--dev", tb / "dev.mrg",
          "--eval-every", "1", "--trace", tb / "tr.tsv", "-o", tb / "t.txt", tb / "g2.txt", tb / "train.mrg")
    head = open(tb / "tr.tsv").read().split("\n")
    cols = [ln for ln in head if ln and not ln.startswith("#")][0].split("\t")
    assert "dev_f1" in cols and "dev_logprob" in cols


@pytest.mark.slow
def test_train_trees_option_errors(tb):
    r = grind("train", "--trees", "--algo", "ln", tb / "g2.txt", tb / "train.mrg", check=False)
    assert r.returncode == 2 and "--trees trains with" in r.stderr
    r = grind("train", "--trees", "--column", "XPOS", tb / "g2.txt", tb / "train.mrg", check=False)
    assert r.returncode == 2 and "corpus options do not apply" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("decoder", ["--max-rule-sum", "--viterbi", "--max-rule-product"])
def test_parse_writes_unsplit_unbinarised_trees_and_eval_scores_them(tb, decoder):
    grind("train", "--trees", "--algo", "em", "--iterations", "5", "-o", tb / "t.txt", tb / "g2.txt",
          tb / "train.mrg")
    grind("parse", decoder, "-o", tb / "p.trees", tb / "t.txt", tb / "dev.mrg")
    text = open(tb / "p.trees").read()
    assert "# unknown_words: 1 word tokens" in text                # 'zebra'
    trees = read_trees(str(tb / "p.trees"))
    assert len(trees) == 2 and trees[0][0] == "ROOT"
    assert "@" not in text.split("\n", 20)[-1] and "zebra" in text
    out = grind("eval", "--labeled", tb / "dev.mrg", tb / "p.trees").stdout
    f1 = float([ln.split("\t")[1] for ln in out.splitlines() if ln.startswith("all_labeled_f1")][0])
    assert 50 <= f1 <= 100


@pytest.mark.slow
def test_parse_pruning_off_equals_threshold_zero(tb):
    grind("parse", "--no-prune", "-o", tb / "a.trees", tb / "g2.txt", tb / "dev.mrg")
    grind("parse", "--prune-threshold", "0", "-o", tb / "b.trees", tb / "g2.txt", tb / "dev.mrg")
    body = [open(tb / f).read().split("\n# output:")[-1] for f in ("a.trees", "b.trees")]
    assert read_trees(str(tb / "a.trees")) == read_trees(str(tb / "b.trees")), body


def test_h1_grammar_parses_its_training_trees(tb):
    grind("parse", "-o", tb / "p.trees", tb / "g1.txt", tb / "train.mrg")
    out = grind("eval", "--labeled", tb / "train.mrg", tb / "p.trees").stdout
    assert "all_noparse\t0" in out


def test_train_trees_gibbs_runs(tb):
    grind("train", "--trees", "--algo", "gibbs", "--iterations", "3", "--seed", "2", "-o", tb / "t.txt",
          tb / "g2.txt", tb / "train.mrg")
    g = read_grammar(str(tb / "t.txt"))
    assert g.meta["model"] == "treebank" and g.weight_kind() == "pseudo-counts"


@pytest.mark.slow
def test_pruning_changes_dev_f1_by_less_than_0_3(tmp_path):
    """The issue's pruning check, on the PTB sample's dev split (wsj_0160-0179) with the H = 1 treebank
    PCFG of the training split (wsj_0001-0159)."""
    ptb = shared_path("nltk_ptb_sample", "treebank", "combined")
    for name, lo, hi in (("train", 1, 159), ("dev", 160, 179)):
        with open(tmp_path / f"{name}.mrg", "w") as f:
            for i in range(lo, hi + 1):
                f.write((ptb / f"wsj_{i:04d}.mrg").read_text() + "\n")
    grind("make-grammar", "treebank", "-o", tmp_path / "g1.txt", tmp_path / "train.mrg")
    f1 = {}
    for flag in ("--prune", "--no-prune"):
        grind("parse", flag, "-o", tmp_path / "p.trees", tmp_path / "g1.txt", tmp_path / "dev.mrg")
        out = grind("eval", "--labeled", tmp_path / "dev.mrg", tmp_path / "p.trees").stdout
        f1[flag] = float([ln.split("\t")[1] for ln in out.splitlines() if ln.startswith("all_labeled_f1")][0])
    assert abs(f1["--prune"] - f1["--no-prune"]) < 0.3, f1
    assert f1["--no-prune"] > 55, f1


@pytest.mark.slow
def test_train_trees_checkpoint_resume_and_jobs(tb):
    common = ["train", "--trees", "--algo", "vb", "--alpha", "0.5", "--tolerance", "0"]
    grind(*common, "--iterations", "6", "-o", tb / "full.txt", tb / "g2.txt", tb / "train.mrg")
    grind(*common, "--iterations", "6", "--jobs", "2", "-o", tb / "jobs.txt", tb / "g2.txt", tb / "train.mrg")
    grind(*common, "--iterations", "3", "--checkpoint", tb / "c.npz", "--checkpoint-every", "1", "-o",
          tb / "half.txt", tb / "g2.txt", tb / "train.mrg")
    grind(*common, "--iterations", "6", "--checkpoint", tb / "c.npz", "--resume", "-o", tb / "resumed.txt",
          tb / "g2.txt", tb / "train.mrg")
    full = read_grammar(str(tb / "full.txt")).weights
    assert np.array_equal(full, read_grammar(str(tb / "jobs.txt")).weights)
    assert np.array_equal(full, read_grammar(str(tb / "resumed.txt")).weights)


@pytest.mark.slow
def test_loglik_maps_words_as_parse_does_and_estep_needs_trees(tmp_path):
    tb, g, txt = tmp_path / "dot.mrg", tmp_path / "g.txt", tmp_path / "dot.txt"
    tb.write_text("(ROOT (S (NP (DT the) (NN dog)) (VP (VBZ barks)) (. .)))\n" * 2)
    grind("make-grammar", "treebank", "-o", g, tb)
    txt.write_text("the dog barks .\nthe cat barks .\n")
    out = grind("loglik", g, txt)
    rows = [ln.split("\t") for ln in out.stdout.splitlines() if ln[:1].isdigit()]
    assert rows[0] == ["1", "4", "0.0"]                        # '.' is the escaped terminal: one tree, p = 1
    assert rows[1][2] == "-inf" and "sentence 2 (line 2) has no parse" in out.stderr
    assert "(NOPARSE the cat barks .)" in grind("parse", g, txt).stdout     # the same verdict
    r = grind("estep", g, txt, check=False)
    assert r.returncode == 2 and "grind estep --trees" in r.stderr


@pytest.mark.slow
def test_split_size_is_counted_before_building(tmp_path):
    from grind.grammars.grammar import read_grammar
    from grind.grammars.latent import split_size
    tb, g1, g3 = tmp_path / "t.mrg", tmp_path / "g1.txt", tmp_path / "g3.txt"
    tb.write_text("(ROOT (S (NP (DT the) (NN dog)) (VP (VBZ barks) (ADVP (RB loudly)))))\n")
    grind("make-grammar", "treebank", "-o", g1, tb)
    grind("make-grammar", "treebank", "--subtypes", "3", "-o", g3, tb)
    assert split_size(read_grammar(str(g1)), 3) == len(read_grammar(str(g3)))
    r = grind("make-grammar", "treebank", "--subtypes", "10", "--max-rules", "100", tb, check=False)
    assert r.returncode == 1 and "over --max-rules 100" in r.stderr
    r = grind("make-grammar", "treebank", "--subtypes", str(10 ** 20), tb, check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr


def test_a_tree_deeper_than_the_recursion_limit_makes_a_grammar(tmp_path):
    """Trees are read and walked without recursion (it was "nested too deeply", exit 1)."""
    d = 1500
    deep = tmp_path / "deep.mrg"
    deep.write_text("(ROOT (S " + "(NP (DT the) " * d + "(NN dog)" + ")" * d + "))\n")
    r = grind("make-grammar", "treebank", deep, check=False)
    assert r.returncode == 0 and "NP --> DT NP" in r.stdout and "Traceback" not in r.stderr, r.stderr


def test_a_treebank_grammar_on_stdin_is_refused_not_parsed_as_a_plain_pcfg(tb):
    """The generic path would parse with split symbols, no unknown-word signatures and no word escapes."""
    text = (tb / "g2.txt").read_text()
    for cmd in (["parse", "--column", "FORM"], ["loglik", "--column", "FORM"]):
        r = grind(*cmd, "-", tb / "dev.mrg", stdin=text, check=False)
        assert r.returncode == 1 and "a treebank grammar ('# model: treebank') read from standard input" in r.stderr
        assert not r.stdout and "Traceback" not in r.stderr
    assert grind("parse", tb / "g2.txt", tb / "dev.mrg").returncode == 0          # as a file it is fine


@pytest.mark.slow
def test_trees_commands_refuse_a_file_without_trees(tb):
    """estep --trees wrote all-zero counts (exit 0) and train --trees blamed the grammar."""
    (tb / "empty.mrg").write_text("")
    (tb / "none.mrg").write_text("( (S (NP-SBJ (-NONE- *))) )\n")
    for f, why in (("empty.mrg", "no trees"), ("none.mrg", "no trees with words (every one holds only -NONE-)")):
        for cmd in (["estep", "--trees"], ["train", "--trees", "--algo", "em"]):
            r = grind(*cmd, tb / "g2.txt", tb / f, check=False)
            assert r.returncode == 1 and f"{f}: {why}" in r.stderr and not r.stdout, (cmd, r.stderr)


def test_parse_says_on_stderr_how_many_words_became_signatures(tb):
    r = grind("parse", tb / "g2.txt", tb / "dev.mrg")                      # 'zebra' is not in the grammar
    assert "# unknown_words: 1 word tokens the grammar lacks parsed as their unknown-word signatures" in r.stdout
    assert "1 word tokens the grammar lacks parsed as their unknown-word signatures" in r.stderr


@pytest.mark.slow
def test_parse_and_loglik_count_backoffs_and_name_a_word_whose_signature_has_no_rule(tmp_path):
    """Backoffs to a coarser signature were not counted; a word whose signature the grammar lacks was
    reported as 'no derivation' by loglik and by its signature alone by parse."""
    (tmp_path / "tr.mrg").write_text("( (S (NP (NN dog)) (VP (VBD barked))) )\n( (S (NP (NN cat)) (VP (VBD sat))) )\n"
                                     "( (S (NP (NN dog)) (VP (VBD sat))) )\n")
    (tmp_path / "te.mrg").write_text("( (S (NP (NN cat)) (VP (VBD zipped))) )\n( (S (NP (NN dog)) (VP (VBD sat))) )\n")
    grind("make-grammar", "treebank", "--rare", "0", "-o", tmp_path / "r0.txt", tmp_path / "tr.mrg")
    why = ("sentence 1 (line 1) has no parse: word 'zipped' at position 2 is unknown and the grammar has no rule "
           "for its signature <UNK-LC-ed> nor a coarser one")
    r = grind("parse", tmp_path / "r0.txt", tmp_path / "te.mrg")
    assert why in r.stderr and "(NOPARSE cat zipped)" in r.stdout
    assert ("# unknown_words: 1 word tokens the grammar lacks parsed as their unknown-word signatures; 1 with no "
            "signature rule in the grammar (their sentences have no parse)") in r.stdout
    r = grind("loglik", tmp_path / "r0.txt", tmp_path / "te.mrg")
    assert why in r.stderr and "# parsed: 1" in r.stdout and "column=FORM" in r.stdout
    grind("make-grammar", "treebank", "--rare", "1", "-o", tmp_path / "r1.txt", tmp_path / "tr.mrg")
    (tmp_path / "te2.mrg").write_text("( (S (NP (NN cat)) (VP (VBD zipping))) )\n")
    r = grind("parse", "--max-unparsed", "1", tmp_path / "r1.txt", tmp_path / "te2.mrg")   # <UNK-LC-ing> -> <UNK-LC>
    assert "(1 backed off to a coarser signature the grammar has)" in r.stdout.split("# output")[0]
    assert "# unparsed: 1" in r.stdout      # only NN has a <UNK-LC> rule; VBD's backoff is still no parse



def test_train_trees_counts_wordless_trees_in_the_header(tmp_path):
    f = tmp_path / "odd.mrg"
    f.write_text("( (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )\n( (S (-NONE- *)) )\n"
                 "( (S (NP (DT A) (NN cat)) (VP (VBZ sleeps)) (. .)) )\n")
    grind("make-grammar", "treebank", "--rare", "0", "--subtypes", "2", "--seed", "1", "-o", tmp_path / "g.txt", f)
    r = grind("train", "--trees", "--algo", "em", "--iterations", "1", "-o", tmp_path / "t.txt", tmp_path / "g.txt", f)
    assert "1 trees hold only -NONE- elements: skipped" in r.stderr
    head = (tmp_path / "t.txt").read_text()
    assert "# left_out: 1 trees without words, only -NONE- elements (not trained on)" in head


@pytest.mark.slow
def test_a_treebank_grammar_is_known_by_its_header_as_the_grammar_reader_reads_it(tmp_path):
    """A blank first line or '#model: treebank' sent it down the plain-PCFG path: latent symbols in
    the output, no signatures (helper audit)."""
    tb = tmp_path / "t.mrg"
    tb.write_text("(S (NP (DT the) (NN dog)) (VP (VBD barked) (NP (DT a) (NN cat))))\n"
                  "(S (NP (PRP it)) (VP (VBD ran)))\n")
    grind("make-grammar", "treebank", "--subtypes", "2", "--rare", "0", "--seed", "1", "-o", tmp_path / "g.txt", tb)
    (tmp_path / "s.txt").write_text("the dog barked\nit ran\n")
    text = (tmp_path / "g.txt").read_text()
    for variant in ("\n" + text, text.replace("# model: treebank", "#model: treebank")):
        (tmp_path / "v.txt").write_text(variant)
        out = grind("parse", tmp_path / "v.txt", tmp_path / "s.txt").stdout
        assert "(ROOT (S (NP (PRP it)) (VP (VBD ran))))" in out and "@" not in out.split("\n# ")[-1]
