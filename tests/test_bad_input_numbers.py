"""Numbers out of range stop with a message and write nothing; options that would do nothing are refused."""
import numpy as np
import pytest

from conftest import grind
from grind.errors import NumericalError
from grind.grammars.grammar import read_grammar

from test_bad_input_outputs import files  # noqa: F401  (the fixture: g.txt and c.txt in tmp_path)


@pytest.fixture
def gc(files):  # noqa: F811
    return files, files / "g.txt", files / "c.txt"


def tiny_dmv(tmp_path):
    """A tag corpus t.txt and its DMV grammar with the harmonic initialisation: (t.txt, d1.txt)."""
    t, d0, d1 = tmp_path / "t.txt", tmp_path / "d0.txt", tmp_path / "d1.txt"
    t.write_text("DET NOUN VERB\nNOUN VERB\n")
    grind("make-grammar", "dmv", "-o", d0, t)
    grind("init", "--harmonic", "--corpus", t, "-o", d1, d0)
    return t, d1


@pytest.mark.parametrize("bad", [np.nan, np.inf, -0.5])
def test_a_grammar_with_a_bad_weight_is_never_written(gc, bad):
    d, g, _ = gc
    gr = read_grammar(str(g))
    w = gr.weights.copy()
    w[3] = bad
    out = d / "out.txt"
    with pytest.raises(NumericalError, match=r"the weight of rule 'A --> b' is"):
        gr.write(out, w)
    assert not out.exists()


def test_subnormal_alpha_stops_the_run_instead_of_writing_a_nan_objective(gc):
    d, g, c = gc
    out = d / "v.txt"
    r = grind("train", "--algo", "vb", "--alpha", "1e-320", "--iterations", "2", "-o", out, g, c, check=False)
    assert r.returncode == 1 and "vb: the objective of step 1 is nan: stopped" in r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def test_jitter_is_bounded(gc):
    _, g, _ = gc
    r = grind("init", "--random", "--jitter", "800", g, check=False)
    assert r.returncode == 2 and "--jitter" in r.stderr
    w = read_grammar_text(grind("init", "--random", "--jitter", "20", "--seed", "1", g).stdout)
    assert np.all(np.isfinite(w)) and np.all(w >= 0)


def read_grammar_text(text):
    return np.array([float(ln.split()[0]) for ln in text.splitlines() if ln and not ln.startswith("#")])


def test_init_options_that_would_do_nothing_are_refused(gc):
    _, g, c = gc
    r = grind("init", "--jitter", "2", g, check=False)
    assert r.returncode == 2 and "--jitter is for --random" in r.stderr
    r = grind("init", "--corpus", c, g, check=False)
    assert r.returncode == 2 and "--corpus is for --harmonic" in r.stderr


def test_loglik_with_no_parsed_sentence_is_undefined_not_probability_one(gc):
    d, g, _ = gc
    (d / "y.txt").write_text("a a a\n")                       # S --> A B needs exactly two words
    r = grind("loglik", "--summary", g, d / "y.txt", check=False)         # (issue 38) nothing parsed: an error
    assert r.returncode == 1 and "--max-unparsed" in r.stderr and not r.stdout
    r = grind("loglik", "--summary", "--max-unparsed", "1", g, d / "y.txt")
    assert "# parsed: 0\n" in r.stdout and "# logprob: nan\n" in r.stdout and "# perplexity: nan\n" in r.stdout
    assert "no sentence has a parse" in r.stderr


@pytest.mark.slow
def test_parse_refuses_the_cky_kernel_for_a_dmv_grammar(tmp_path):
    t = tmp_path / "t.txt"
    t.write_text("DET NOUN VERB\nNOUN VERB\n")
    d = tmp_path / "d.txt"
    grind("make-grammar", "dmv", "-o", d, t)
    for dec in ("--viterbi", "--mbr"):
        r = grind("parse", "--kernel", "cky", dec, d, t, check=False)
        assert r.returncode == 2 and "this is a DMV grammar" in r.stderr and "Traceback" not in r.stderr
    assert grind("loglik", "--kernel", "cky", "--summary", d, t).returncode == 0    # the cross-check still runs


@pytest.mark.slow
def test_mstep_map_without_grammar_refuses_a_used_lhs_with_no_rule_left(tmp_path):
    g, x = tmp_path / "gx.txt", tmp_path / "x.txt"
    g.write_text("1 S --> A\n0.5 A --> x\n0.5 A --> B\n1 B --> x\n")
    x.write_text("x\n")
    c = tmp_path / "c.txt"
    grind("estep", "-o", c, g, x)                             # E[A --> x] = E[A --> B] = 0.5 < 1 - 0.1
    out = tmp_path / "z.txt"
    r = grind("mstep", "--alpha", "0.1", "-o", out, c, check=False)
    assert r.returncode == 1 and "every rule of 'A' (and 1 more) has E[f] + alpha - 1 <= 0" in r.stderr
    assert not out.exists()
    kept = grind("mstep", "--alpha", "0.1", "--grammar", g, c).stdout     # train's rule: the previous theta
    assert "0.5 A --> x" in kept and "1 S --> A" in kept
    assert "1 S --> A" in grind("mstep", "--alpha", "1", c).stdout


@pytest.mark.slow
def test_dev_set_with_no_parsable_sentence_stops_instead_of_scoring_log_probability_zero(tmp_path):
    tr, dev = tmp_path / "t.txt", tmp_path / "dev.txt"
    tr.write_text("DET NOUN VERB\nNOUN VERB\n")
    g = tmp_path / "d.txt"
    grind("make-grammar", "dmv", "-o", g, tr)
    dev.write_text("FOO BAR\n")                               # tags the grammar lacks
    r = grind("train", "--iterations", "2", "--dev", dev, "--eval-every", "1", "--early-stop", g, tr, check=False)
    assert r.returncode == 1 and "dev_logprob 0" not in r.stderr
    assert "none of the 1 held-out (--dev) sentences has a parse" in r.stderr


@pytest.mark.parametrize("args, msg", [
    (["--algo", "em", "--epochs", "3"], "--epochs is an option of --algo stochastic, not of --algo em"),
    (["--algo", "vb", "--temp-start", "2"], "--temp-start is an option of --algo gibbs, hastings, not of --algo vb"),
    (["--algo", "em", "--dev", "{c}"], "--dev FILE is evaluated every --eval-every N steps"),
])
def test_train_options_another_algorithm_reads_are_refused(gc, args, msg):
    _, g, c = gc
    r = grind("train", *[a.format(c=c) for a in args], g, c, check=False)
    assert r.returncode == 2 and msg in r.stderr


@pytest.mark.slow
def test_mix_coef_nan_is_refused_up_front(tmp_path):
    t = tmp_path / "t.txt"
    t.write_text("DET NOUN VERB\nNOUN VERB\n")
    d = tmp_path / "d.txt"
    grind("make-grammar", "dmv", "-o", d, t)
    r = grind("train", "--algo", "mixture", "--base", "em", "--mix-coef", "nan,nan", d, t, check=False)
    assert r.returncode == 2 and "--mix-coef" in r.stderr and "NaN" not in r.stderr


@pytest.mark.slow
def test_resume_from_a_checkpoint_past_the_end_says_no_step_ran(gc):
    d, g0, c = gc
    ck, g = d / "ck.npz", d / "g1.txt"
    grind("init", "--random", "--seed", "1", "-o", g, g0)     # not at a fixed point of EM
    grind("train", "--iterations", "4", "--tolerance", "0", "--checkpoint", ck, "-o", d / "a.txt", g, c)
    r = grind("train", "--iterations", "1", "--tolerance", "0", "--checkpoint", ck, "--resume", "-o", d / "b.txt",
              g, c)
    assert "the checkpoint is at step 4, where this run ends" in r.stderr
    assert (d / "a.txt").read_text().split("# seed")[1] == (d / "b.txt").read_text().split("# seed")[1]
    r = grind("train", "--iterations", "5", "--tolerance", "0", "--checkpoint", ck, "--resume", "-o", d / "b.txt",
              g, c)
    assert "no step run" not in r.stderr


@pytest.mark.slow
def test_train_names_sentences_without_a_parse_under_the_initial_weights(tmp_path):
    c = tmp_path / "u.txt"
    c.write_text("DET NOUN\nVERB\n")                          # a one-word sentence: no binary CNF tree
    g0, g1 = tmp_path / "g0.txt", tmp_path / "g1.txt"
    grind("make-grammar", "cnf", "-n", "1", "-p", "2", "-o", g0, c)
    grind("init", "--random", "--seed", "1", "-o", g1, g0)
    for algo in ("em", "vb"):
        r = grind("train", "--algo", algo, "--iterations", "2", "-o", tmp_path / "out.txt", g1, c)
        assert "sentence 2 (line 2) has no parse" in r.stderr and "1 of 2 sentences have no parse" in r.stderr
        assert r.stderr.count("sentence 2 (line 2) has no parse") == 1        # named once, not every step
        if algo == "em":   # not "parsed again once its rules get positive weight": it never can be
            assert "the grammar has no derivation of it under any weights" in r.stderr, r.stderr


@pytest.mark.slow
def test_train_names_sentences_of_probability_zero_under_the_initial_weights(tmp_path):
    c, g = tmp_path / "c.txt", tmp_path / "g.txt"
    c.write_text("a b\na c\n")
    g.write_text("1 S --> A B\n1 A --> a\n1 B --> b\n0 B --> c\n")    # 'a c' parses, with probability 0
    for algo in ("em", "vb", "cvb"):
        r = grind("train", "--algo", algo, "--iterations", "2", "-o", tmp_path / "out.txt", g, c)
        assert r.stderr.count("under the initial weights") == 1, (algo, r.stderr)
        assert "sentence 2 (line 2)" in r.stderr, (algo, r.stderr)
        assert "under any weights" not in r.stderr                      # 'a c' parses once B --> c is > 0


def test_api_checks_what_the_command_line_checks(tmp_path):
    import grind
    from grind.errors import InputError
    from grind.infer.stochastic import StochasticConfig
    t, d1 = tiny_dmv(tmp_path)
    sents = grind.read_corpus(str(t))
    for bad in (dict(batch=0), dict(tau=-5), dict(kappa=3), dict(kappa=-0.5), dict(iterations=-1)):
        with pytest.raises(InputError, match=next(iter(bad))):
            grind.fit(str(d1), sents, "stochastic", **bad)
    with pytest.raises(InputError, match="kappa"):
        StochasticConfig(kappa=float("nan"))
    with pytest.raises(InputError, match="punct 'UD' is not one of"):
        grind.read_corpus(str(t), punct="UD")
    g = grind.read_grammar(str(d1))
    with pytest.raises(InputError, match="weights must be finite and non-negative"):
        grind.parse(g.with_weights(-g.weights), sents, decoder="mbr")


def test_api_evaluate_reads_paths_with_the_corpus_options_and_checks_heads(tmp_path):
    import grind
    from grind.errors import InputError
    from test_eval_baselines import GOLD, conll
    g = tmp_path / "gold.conllu"
    g.write_text(conll(GOLD))
    res = grind.evaluate(str(g), str(g), column="UPOS", punct="ud")
    assert res["directed"] == 1.0
    gold = grind.read_corpus(str(g), column="UPOS", punct="ud")
    with pytest.raises(InputError, match="integers 0..3"):
        grind.evaluate(gold[:1], [[99, 0, 2]])


def test_two_outputs_on_stdout_are_refused(gc):
    _, g, c = gc
    r = grind("train", "--iterations", "1", "--trace", "-", g, c, check=False)
    assert r.returncode == 2 and "name the same file: standard output" in r.stderr


def test_api_reads_character_corpora_and_one_average_grammar(tmp_path):
    import grind
    w = tmp_path / "w.txt"
    w.write_text("abc\nabd\n")
    from conftest import grind as run
    g = tmp_path / "m.txt"
    run("make-grammar", "morph", "--chars", "-o", g, w)
    words = grind.read_corpus(str(w), chars=True)
    assert [s.tokens for s in words] == [["a", "b", "c"], ["a", "b", "d"]]
    trees = grind.parse(str(g), words)
    assert all(t is not None and t[0] == "Word" for t in trees)
    t, d1 = tiny_dmv(tmp_path)
    sents = grind.read_corpus(str(t))
    assert grind.parse(str(d1), sents, decoder="mbr", average=str(d1)) == grind.parse(str(d1), sents, decoder="mbr")


@pytest.mark.slow
def test_tie_over_a_joint_grammar_needs_a_dmv_in_every_language(tmp_path):
    t, d1 = tiny_dmv(tmp_path)
    c0, c1 = tmp_path / "c0.txt", tmp_path / "c1.txt"
    grind("make-grammar", "cnf", "-n", "1", "-p", "1", "-o", c0, t)
    grind("init", "-o", c1, c0)
    r = grind("make-structure", "--tie", "V", d1, c1, check=False)
    assert r.returncode == 1 and "the joint grammar's '2' is not one" in r.stderr
    assert "tie:verb" in grind("make-structure", "--tie", "V", d1, d1).stdout


@pytest.mark.parametrize("algo", ["em", "vb", "cvb", "gibbs", "hastings"])
def test_every_algorithm_stops_when_no_sentence_parses(tmp_path, algo):
    """vb and cvb wrote a grammar with '# objective: 0.0' over no sentence."""
    (tmp_path / "g.txt").write_text("0.5 S --> S S\n0.25 S --> a\n0.25 S --> b\n")
    (tmp_path / "c.txt").write_text("c d\nc\n")
    r = grind("train", "--algo", algo, "--iterations", "3", "--seed", "1", tmp_path / "g.txt", tmp_path / "c.txt",
              check=False)
    assert r.returncode == 1 and "2 of 2 sentences have no parse" in r.stderr and not r.stdout   # --max-unparsed
    r = grind("train", "--algo", algo, "--iterations", "3", "--seed", "1", "--max-unparsed", "1", tmp_path / "g.txt",
              tmp_path / "c.txt", check=False)
    assert r.returncode == 1 and "no sentence has a parse of positive probability" in r.stderr and not r.stdout


@pytest.mark.slow
def test_map_em_says_when_training_sentences_stop_parsing(tmp_path):
    """MAP-EM with alpha < 1 zeroes rules; sentences that needed them drop out of the objective, which can fall."""
    from conftest import sample_dmv
    C = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
    d, train = sample_dmv(tmp_path, C)
    r = grind("train", "--algo", "em", "--alpha", "0.3", "--iterations", "3", *C, d / "g1.txt", train)
    assert "em step 2: 2 more sentence(s) have no parse of positive probability (667 of 669 parsed)" in r.stderr
    # a run stopped after step 1 and resumed says it too (the count of parsed sentences is in the checkpoint)
    ck = tmp_path / "ck.npz"
    grind("train", "--algo", "em", "--alpha", "0.3", "--iterations", "1", "--checkpoint", ck, *C, d / "g1.txt", train)
    r = grind("train", "--algo", "em", "--alpha", "0.3", "--iterations", "3", "--checkpoint", ck, "--resume", *C,
              d / "g1.txt", train)
    assert "em step 2: 2 more sentence(s) have no parse of positive probability (667 of 669 parsed)" in r.stderr


@pytest.mark.parametrize("weight", ["1_0", "\u0661", "1e1_0"])
def test_weights_are_ascii_numbers(tmp_path, weight):
    """Python's float reads '1_0' as 10 and Arabic-Indic digits as digits: a grammar weight is neither
    (helper audit), on the line reader's path and on the fast one alike."""
    from grind.errors import InputError
    small = tmp_path / "g.txt"
    small.write_text(f"{weight} S --> a\n1 S --> b\n", encoding="utf-8")
    r = grind("make-grammar", "from-file", small, check=False)
    assert r.returncode == 1 and f"g.txt:1: weight '{weight}' is not a number" in r.stderr, r.stderr
    big = tmp_path / "big.txt"                                   # large enough for the fast reader
    big.write_text("".join(f"1 S --> w{i}\n" for i in range(5000)) + f"{weight} S --> z\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"big.txt:5001: weight .* is not a number"):
        read_grammar(str(big))
