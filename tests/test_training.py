"""What every training run shares: the prior, held-out evaluation in the trace, checkpoints."""
import numpy as np
import pytest

from conftest import grind
from grind.errors import InputError
from grind.grammars.grammar import Grammar
from grind.infer.training import prior_vector

C = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]


def test_prior_from_a_grammar_file_is_aligned_by_rule_key(tmp_path):
    g = Grammar([("S", ("a",)), ("S", ("b",)), ("S", ("S", "S"))], np.ones(3), "S")
    p = tmp_path / "prior.txt"
    p.write_text("0.5 S --> S S\n2 S --> b\n0.25 S --> a\n")
    np.testing.assert_array_equal(prior_vector(g, str(p)), [0.25, 2.0, 0.5])
    np.testing.assert_array_equal(prior_vector(g, "0.1"), [0.1] * 3)
    p.write_text("0.5 S --> S S\n2 S --> b\n")
    with pytest.raises(InputError, match="no pseudo-count for rule S --> a"):
        prior_vector(g, str(p))
    with pytest.raises(InputError, match="finite and positive"):
        prior_vector(g, "0")


def test_prior_per_lhs_and_the_file_named_like_it(tmp_path, monkeypatch):
    g = Grammar([("S", ("A", "B")), ("A", ("a",)), ("A", ("a", "b")), ("B", ("b",)), ("S=x", ("a",))],
                np.ones(5), "S")
    np.testing.assert_array_equal(prior_vector(g, "1e-20,A=1e-15"), [1e-20, 1e-15, 1e-15, 1e-20, 1e-20])
    np.testing.assert_array_equal(prior_vector(g, "2,A=3,B=4,A=5,S=x=6"), [2, 5, 5, 4, 6])   # later names win
    with pytest.raises(InputError, match=r"--alpha 1,C=2: no rule has the left-hand side 'C'"):
        prior_vector(g, "1,C=2")
    with pytest.raises(InputError, match="finite and positive"):
        prior_vector(g, "1,A=0")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "1,A=2").write_text("7 S --> A B\n7 A --> a\n7 A --> a b\n7 B --> b\n7 S=x --> a\n")
    np.testing.assert_array_equal(prior_vector(g, "1,A=2"), [7] * 5)     # an existing file is a file


@pytest.mark.slow
def test_alpha_option_checks_every_value(tmp_path):
    g = tmp_path / "g.txt"
    g.write_text("1 S --> a\n")
    for bad, msg in (("1,S=-1", "must be a finite number > 0"), ("1,S", "neither a number, nor NUMBER,LHS=NUMBER"),
                     ("nan,S=1", "must be a finite number > 0")):
        r = grind("train", "--algo", "vb", "--alpha", bad, g, g, check=False)
        assert r.returncode == 2 and msg in r.stderr, (bad, r.stderr)
    r = grind("mstep", "--alpha", "-1", g, check=False)
    assert r.returncode == 2 and "must be a finite number >= 0" in r.stderr       # mstep's plain 0: no prior
    r = grind("mstep", "--alpha", "0,S=0.5", g, check=False)
    assert r.returncode == 2 and "must be a finite number > 0" in r.stderr        # per-LHS values: all > 0
    (tmp_path / "a.txt").write_text("0 S --> a\n")                     # a file: its rule named (was not)
    (tmp_path / "c.txt").write_text("a\n")
    r = grind("train", "--algo", "vb", "--alpha", tmp_path / "a.txt", g, tmp_path / "c.txt", check=False)
    assert r.returncode == 1 and f"--alpha {tmp_path / 'a.txt'}: rule S --> a has 0.0" in r.stderr


@pytest.fixture(scope="module")
def dmv(tmp_path_factory):
    from conftest import sample_dmv
    return sample_dmv(tmp_path_factory.mktemp("dmv"), C)


def body(text):
    return [ln for ln in text.splitlines() if not ln.startswith("#")]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["vb", "cvb", "gibbs", "mixture"])
def test_resumed_cli_run_is_bit_identical(dmv, algo):
    d, train = dmv
    args = ["train", "--algo", algo, *([] if algo == "mixture" else ["--alpha", "0.1"]), "--seed", "3", *C]
    full = grind(*args, "--iterations", "4", d / "g1.txt", train).stdout
    ck = d / f"{algo}.npz"
    grind(*args, "--iterations", "2", "--checkpoint", ck, d / "g1.txt", train)
    resumed = grind(*args, "--iterations", "4", "--checkpoint", ck, "--resume", d / "g1.txt", train)
    assert body(resumed.stdout) == body(full) and "resumed from" in resumed.stderr
    kind = "probabilities" if algo == "mixture" else "Dirichlet pseudo-counts (posterior)"
    assert f"# weights: {kind}" in full


@pytest.mark.slow
def test_resume_warns_only_when_no_step_runs(dmv):
    """A resumed run that saves a checkpoint at its last step ran steps: no 'no step run' warning then."""
    d, train = dmv
    ck = d / "every1.npz"
    args = ["train", "--algo", "vb", "--alpha", "0.1", "--tolerance", "0", *C, "--checkpoint", ck,
            "--checkpoint-every", "1"]
    grind(*args, "--iterations", "2", d / "g1.txt", train)
    r = grind(*args, "--iterations", "4", "--resume", d / "g1.txt", train)
    assert "resumed from" in r.stderr and "no step run" not in r.stderr
    r = grind(*args, "--iterations", "4", "--resume", d / "g1.txt", train)
    assert "no step run" in r.stderr


def dev_trace(dmv, iterations, *evaluation):
    """The rows of the trace of VB on the sample with --dev (the dev sample) and ``evaluation`` options."""
    from conftest import SAMPLE
    d, train = dmv
    tr = d / "trace.tsv"
    grind("train", "--algo", "vb", "--iterations", str(iterations), *evaluation, "--dev",
          str(SAMPLE / "en_ewt-ud-dev-sample.conllu.gz"), "--trace", tr, *C, d / "g1.txt", train)
    return [ln.split("\t") for ln in body(tr.read_text())]


def test_eval_every_puts_heldout_figures_in_the_trace(dmv):
    rows = dev_trace(dmv, 4, "--eval-every", "2")
    head = rows[0]
    for k in ("objective", "sentences", "seconds", "dev_logprob", "dev_perplexity", "dev_directed"):
        assert k in head
    col = head.index("dev_directed")
    assert [r[col] != "" for r in rows[1:]] == [False, True, False, True]
    assert 0 < float(rows[2][col]) < 1


def test_resume_needs_checkpoint_and_eval_needs_dev(dmv):
    d, train = dmv
    r = grind("train", "--resume", *C, d / "g1.txt", train, check=False)
    assert r.returncode == 2 and "--resume needs --checkpoint" in r.stderr
    r = grind("train", "--eval-every", "2", *C, d / "g1.txt", train, check=False)
    assert r.returncode == 2 and "--eval-every needs --dev" in r.stderr


class Counter:
    """A stand-in algorithm of ``steps`` steps whose state is one array."""

    name, output = "counter", "probabilities"

    def __init__(self, steps=10):
        self.x, self.steps = np.zeros(1), steps

    def step(self):
        from grind.infer.training import Step
        if self.x[0] >= self.steps:
            return None
        self.x = self.x + 1
        return Step(int(self.x[0]), 0.0, 0)

    def get_state(self):
        return {"x": self.x}

    def set_state(self, s):
        self.x = np.array(s["x"])


def test_early_stop_keeps_the_state_before_the_heldout_decrease():
    from grind.infer.training import train
    dev = {1: -5.0, 2: -4.0, 3: -3.0, 4: -3.5, 5: -1.0}
    algo = Counter()
    trace = train(algo, np.random.default_rng(0), eval_every=1, early_stop=True,
                  eval_fn=lambda a: {"dev_logprob": dev[int(a.x[0])]})
    assert [s.step for s in trace] == [1, 2, 3, 4] and "stopped" in trace[-1].extra
    assert algo.x[0] == 3
    assert len(train(Counter(), np.random.default_rng(0))) == 10   # no early stop by default


#: Held-out log probability after step k: falls at 4, 6, 8-10; step 7 ties the best (step 5's).
PATIENT_DEV = {1: -5.0, 2: -4.0, 3: -3.0, 4: -3.5, 5: -1.0, 6: -2.0, 7: -1.0, 8: -1.5, 9: -1.2, 10: -1.1}


def test_patience_waits_for_k_evaluations_below_the_best_and_keeps_the_best_state():
    from grind.infer.training import train
    dev = lambda a: {"dev_logprob": PATIENT_DEV[int(a.x[0])]}  # noqa: E731
    # a tie is not a decrease: step 7 becomes the best state (as with patience 1, Algorithm 1)
    for patience, steps, kept, stopped in [(1, 4, 3, True), (2, 9, 7, True), (3, 10, 7, True), (4, 10, 10, False)]:
        algo = Counter()
        trace = train(algo, np.random.default_rng(0), eval_every=1, early_stop=True, patience=patience, eval_fn=dev)
        assert [s.step for s in trace] == list(range(1, steps + 1)), patience
        assert algo.x[0] == kept, patience
        assert ("stopped" in trace[-1].extra) == stopped, patience
    assert "kept the state of step 7" in trace_stop(2)
    assert trace_stop(1) == "held-out log probability decreased; kept the previous state"


def trace_stop(patience):
    from grind.infer.training import train
    trace = train(Counter(), np.random.default_rng(0), eval_every=1, early_stop=True, patience=patience,
                  eval_fn=lambda a: {"dev_logprob": PATIENT_DEV[int(a.x[0])]})
    return trace[-1].extra["stopped"]


@pytest.mark.parametrize("kill", [4, 6, 7, 8, 9])
def test_patience_resumed_from_a_checkpoint_stops_where_the_whole_run_does(tmp_path, kill):
    """The count of evaluations below the best is read back from the trace: a run
    cut after step ``kill`` and resumed keeps the same best and stops at step 9 with step 7's state."""
    from grind.infer.training import train
    dev = lambda a: {"dev_logprob": PATIENT_DEV[int(a.x[0])]}  # noqa: E731

    class Cut(Counter):
        def step(self):
            if self.x[0] >= kill:
                return None
            return super().step()

    ck = tmp_path / "ck.npz"
    train(Cut(), np.random.default_rng(0), eval_every=1, early_stop=True, patience=2, eval_fn=dev,
          checkpoint=str(ck), checkpoint_every=1)
    algo = Counter()
    trace = train(algo, np.random.default_rng(0), eval_every=1, early_stop=True, patience=2, eval_fn=dev,
                  checkpoint=str(ck), resume=True)
    assert [s.step for s in trace] == list(range(1, 10)) and algo.x[0] == 7


def test_patience_needs_early_stop(dmv):
    d, train = dmv
    r = grind("train", "--patience", "2", *C, d / "g1.txt", train, check=False)
    assert r.returncode == 2 and "--patience needs --early-stop" in r.stderr


def test_a_swallowed_sigterm_still_stops_training():
    """A SIGTERM whose exception a finaliser swallowed only sets the flag: the
    driver must stop at the next step boundary anyway."""
    from grind.errors import Terminated, termination
    from grind.infer.training import Step, train

    class Forever:
        name, calls = "forever", 0

        def step(self):
            self.calls += 1
            if self.calls == 3:
                termination["requested"] = True      # as the handler does, its exception lost
            return Step(self.calls, 0.0, 0)

        def get_state(self):
            return {}

    algo = Forever()
    try:
        with pytest.raises(Terminated):
            train(algo, np.random.default_rng(0))
    finally:
        termination["requested"] = False
    assert algo.calls == 3


def test_heldout_perplexity_is_per_word_of_the_parsed_sentences():
    """S --> A B (0.4) | a (0.6), A --> a, B --> a (0.5) | b (0.5).  Dev: "a" (Z = 0.6),
    "a b" and "a a" (Z = 0.4 * 0.5 = 0.2 each), and "b a a", which has no derivation (S's
    only two-symbol rule ends in B, and nothing rewrites to three symbols).  log P = log
    0.6 + 2 log 0.2 over 3 parsed sentences of 5 words: perplexity (0.6 * 0.2^2)^(-1/5)
    (not per sentence, nor per word of all 8 words)."""
    import oracle
    from grind.infer.training import heldout
    from grind.kernels.select import make_parser
    g = Grammar([("S", ("A", "B")), ("S", ("a",)), ("A", ("a",)), ("B", ("a",)), ("B", ("b",))],
                np.array([0.4, 0.6, 1.0, 0.5, 0.5]), "S")
    dev = [["a"], ["a", "b"], ["a", "a"], ["b", "a", "a"]]
    exact = [oracle.exact_logz(g, g.weights, s) for s in dev]
    np.testing.assert_allclose(exact[:3], np.log([0.6, 0.2, 0.2]), rtol=1e-15)
    assert exact[3] == -np.inf
    out = heldout(make_parser(g, dev), g.weights)
    assert out["dev_parsed"] == 3
    assert out["dev_logprob"] == pytest.approx(np.log(0.6 * 0.2 * 0.2), rel=1e-12)
    assert out["dev_perplexity"] == pytest.approx((0.6 * 0.2 * 0.2) ** (-1 / 5), rel=1e-12)
    assert "dev_directed" not in out


def test_heldout_directed_accuracy_counts_the_words_of_unparsed_sentences_wrong():
    """DMV dev set with gold heads: "x y" (heads 0 1), "y" (0), and "x zz y" (zz is not a
    head type of the grammar: no parse).  The Viterbi trees (brute force over every
    derivation) get the 3 words of the parsed sentences right (x y: 0 1, weight 1.66e-4
    against 2.40e-5 for 2 0); the 3 unparsed words count wrong: 3 / 6, as grind eval counts."""
    import oracle
    from grind.formats.corpus import Sentence
    from grind.grammars.dmv import derivation_heads, dmv_grammar, split_heads
    from grind.infer.training import heldout
    from grind.kernels.dmv import DMVParser
    g = dmv_grammar([["x", "y"]])
    theta = g.normalize(np.exp(np.random.default_rng(2).standard_normal(len(g))))
    dev = [Sentence(["x", "y"], 1, 1, [0, 1]), Sentence(["y"], 2, 4, [0]), Sentence(["x", "zz", "y"], 3, 6, [0, 1, 1])]
    parser = DMVParser(g, [s.tokens for s in dev])
    assert list(parser.failures) == [2]
    right = 0
    for s in dev[:2]:
        d, _ = max(oracle.enumerate_derivations(g, theta, split_heads(s.tokens)), key=lambda dw: dw[1])
        right += int(np.sum(derivation_heads(g, d, len(s)) == s.heads))
    out = heldout(parser, theta, dev)
    assert out["dev_parsed"] == 2
    assert right == 3 and out["dev_directed"] == 3 / 6


@pytest.mark.parametrize("algo", ["em", "vb", "cvb", "gibbs", "hastings"])
def test_train_header_counts_sentences_left_out_and_without_a_parse(tmp_path, algo):
    """The grammar said nothing of training sentences the length limits dropped or that had no parse
    (a CNF grammar cannot parse a one-word sentence); only stderr did (CLI audit)."""
    (tmp_path / "g.txt").write_text("1 S --> A B\n1 S --> B A\n2 A --> a\n1 B --> b\n1 A --> b\n1 B --> a\n")
    (tmp_path / "c.txt").write_text("a b\nb\nb a\na b a b a b\n")
    out = grind("train", "--algo", algo, "--iterations", "2", "--seed", "1", "--max-length", "4",
                tmp_path / "g.txt", tmp_path / "c.txt").stdout
    assert "# left_out: 1 sentences outside the length limits 1..4 (not trained on)" in out
    if algo in ("gibbs", "hastings"):          # skipped from the start: not 'in the last step' (audit)
        assert "# unparsed: 1 of 3 sentences without a tree under the initial grammar (the sampler leaves " \
            "them out of the whole run)" in out
    else:
        assert "# unparsed: 1 of 3 sentences without a parse in the last step (left out of its counts)" in out


def test_streaming_header_counts_sentences_left_out_and_without_a_parse(tmp_path):
    """Streaming VB's grammar had neither line (1,432 left out, 407 unparsed on the EWT sample; audit)."""
    (tmp_path / "g.txt").write_text("1 S --> A B\n1 S --> B A\n2 A --> a\n1 B --> b\n1 A --> b\n1 B --> a\n")
    (tmp_path / "c.txt").write_text("a b\nb\nb a\na b a b a b\nb\n")
    out = grind("train", "--algo", "streaming", "--batch", "2", "--max-length", "4",
                tmp_path / "g.txt", tmp_path / "c.txt").stdout
    assert "# left_out: 1 sentences outside the length limits 1..4 (not trained on)" in out
    assert "# unparsed: 2 of 4 sentences without a parse in their minibatch (skipped)" in out


def header_of(text) -> dict:
    return {k.strip(): v.strip() for k, _, v in (ln[1:].partition(":") for ln in text.splitlines()
                                                  if ln.startswith("#"))}


@pytest.mark.parametrize("algo, extra, why", [
    ("em", [], "converged at iteration "),
    ("cvb", ["--seed", "1"], "converged at iteration "),
    ("vb", ["--tolerance", "0", "--iterations", "3"], "reached the cap of 3 iterations before converging"),
    ("gibbs", ["--seed", "1", "--iterations", "2"], "reached the cap of 2 iterations"),
])
@pytest.mark.slow
def test_why_a_run_stopped_is_in_the_trace_and_the_header(dmv, algo, extra, why):
    """em, vb and cvb stopped by the default --tolerance before --iterations with nothing saying so
    (training audit: cvb --iterations 100 wrote '# steps: 38')."""
    d, train = dmv
    tr = d / f"stop-{algo}.tsv"
    out = grind("train", "--algo", algo, "--iterations", "1000", *C, *extra, "--trace", tr, d / "g1.txt", train).stdout
    h = header_of(out)
    assert h["stopped"].startswith(f"after step {h['steps']}: {why}"), h
    rows = [ln.split("\t") for ln in body(tr.read_text())]
    col = rows[0].index("stopped")
    assert why in rows[-1][col] and all(r[col] == "" for r in rows[1:-1])
    if why.startswith("converged"):
        assert int(h["steps"]) < 1000 and "<= tolerance 1e-06" in h["stopped"]


@pytest.mark.slow
def test_an_early_stopped_runs_header_is_of_the_state_it_keeps(dmv):
    """The header said '# steps: 13' and the objective of step 13 for the grammar of step 10 (audit)."""
    d, train = dmv
    from conftest import SAMPLE
    dev = str(SAMPLE / "en_ewt-ud-dev-sample.conllu.gz")
    tr = d / "es.tsv"
    out = grind("train", "--algo", "em", *C, "--iterations", "200", "--dev", dev, "--eval-every", "1",
                "--early-stop", "--patience", "3", "--trace", tr, d / "g1.txt", train).stdout
    h = header_of(out)
    rows = [ln.split("\t") for ln in body(tr.read_text())]
    kept = int(float(rows[-1][rows[0].index("kept_step")]))
    assert int(h["steps"]) == kept == len(rows) - 1 - 3
    assert float(h["objective"]) == float(rows[kept][rows[0].index("objective")])
    assert h["stopped"].startswith(f"after step {len(rows) - 1}: held-out log probability below its best")
    assert f"of step {kept}, the grammar written" in h["stopped"]
    again = grind("train", "--algo", "em", *C, "--iterations", str(kept), "--tolerance", "0", d / "g1.txt", train)
    assert body(again.stdout) == body(out)


@pytest.mark.parametrize("args, message", [
    (["--algo", "ln", "--alpha", "0.1"], "--algo ln does not read --alpha: the logistic normal's prior"),
    (["--algo", "gibbs", "--tolerance", "0"], "--algo gibbs does not read --tolerance: a sampler runs"),
    (["--algo", "hastings", "--tolerance", "1e-3"], "--algo hastings does not read --tolerance"),
    (["--algo", "stochastic", "--iterations", "3"], "--algo stochastic does not read --iterations: it runs --epochs"),
    (["--algo", "streaming", "--tolerance", "0"], "--algo streaming does not read --tolerance: it reads the stream"),
    (["--algo", "mixture", "--alpha", "2"], "--algo mixture does not read --alpha: the mixture's base is ln"),
    (["--algo", "mixture", "--base", "vb", "--cov", "families"],
     "--algo mixture does not read --cov: it is an option of the logistic normal, and the mixture's base is vb"),
])
def test_an_option_the_algorithm_does_not_read_is_a_usage_error(dmv, args, message):
    """--algo ln --alpha 0.1 and --alpha 5 gave one grammar and the header said '# alpha: 0.1' (audit)."""
    d, train = dmv
    r = grind("train", *args, *C, d / "g1.txt", train, check=False)
    assert r.returncode == 2 and message in r.stderr and not r.stdout, r.stderr


@pytest.mark.slow
def test_an_ln_grammar_header_names_no_dirichlet_alpha(dmv):
    d, train = dmv
    out = grind("train", "--algo", "ln", "--iterations", "1", *C, d / "g1.txt", train).stdout
    assert "# alpha:" not in out and "# algorithm: ln" in out


@pytest.mark.slow
def test_a_nonterminal_whose_rules_are_all_0_is_warned(tmp_path):
    """A starting grammar with every rule of one LHS at 0 was accepted in silence (audit)."""
    (tmp_path / "g.txt").write_text("1 S --> A B\n0 S --> B A\n1 A --> a\n1 B --> b\n0 C --> a\n0 C --> b\n")
    (tmp_path / "c.txt").write_text("a b\n")
    r = grind("train", "--iterations", "1", tmp_path / "g.txt", tmp_path / "c.txt")
    assert "every rule of 'C' has probability 0: such a nonterminal derives nothing" in r.stderr
    r = grind("train", "--iterations", "1", tmp_path / "g.txt", tmp_path / "c.txt")
    (tmp_path / "g.txt").write_text("1 S --> A B\n0 S --> B A\n1 A --> a\n1 B --> b\n")
    assert "probability 0" not in grind("train", "--iterations", "1", tmp_path / "g.txt", tmp_path / "c.txt").stderr


def test_eval_points_log_and_list():
    from grind.infer.training import EvalPoints
    log4 = EvalPoints.parse("log:4")
    assert log4.between(0, 100) == [1, 2, 3, 6, 10, 18, 32, 56, 100]
    assert log4.between(10, 56) == [18, 32, 56] and not log4.due(57, 99) and log4.due(99, 100)
    assert EvalPoints.parse("log:1").between(0, 10 ** 6) == [1, 10, 100, 1000, 10 ** 4, 10 ** 5, 10 ** 6]
    assert EvalPoints.parse("500,20,1000").between(20, 1000) == [500, 1000]
    assert EvalPoints.parse("log:1,15,1000").between(1, 1000) == [10, 15, 100, 1000]
    for bad in ("log:0", "log:x", "log:", "10,-1", "ten"):
        with pytest.raises(ValueError):
            EvalPoints.parse(bad)


class Sentences(Counter):
    """A :class:`Counter` whose step k has parsed 7 k sentences."""

    def step(self):
        st = super().step()
        if st is not None:
            st.sentences = 7 * st.step
        return st


def test_eval_at_evaluates_where_the_sentences_pass_a_point_and_at_the_end(tmp_path):
    """A step is evaluated when its sentences reach a point its predecessor had not; the last
    step too (the curve's end); a resumed run evaluates the same steps."""
    from grind.infer.training import EvalPoints, train
    dev = lambda a: {"dev_logprob": -float(a.x[0])}  # noqa: E731
    pts = EvalPoints.parse("log:2")                    # 1, 3, 10, 32, 100
    trace = train(Sentences(steps=12), np.random.default_rng(0), eval_fn=dev, eval_at=pts)
    assert [s.step for s in trace if "dev_logprob" in s.extra] == [1, 2, 5, 12]
    assert trace[-1].extra["dev_logprob"] == -12.0
    assert [s.step for s in train(Sentences(steps=12), np.random.default_rng(0), eval_fn=dev, eval_every=4,
                                  eval_at=EvalPoints.parse("50"))
            if "dev_logprob" in s.extra] == [4, 8, 12]

    class Cut(Sentences):
        def step(self):
            return None if self.x[0] >= 6 else super().step()
    ck = str(tmp_path / "ck.npz")
    train(Cut(steps=12), np.random.default_rng(0), eval_fn=dev, eval_at=pts, checkpoint=ck, checkpoint_every=1)
    resumed = train(Sentences(steps=12), np.random.default_rng(0), eval_fn=dev, eval_at=pts, checkpoint=ck,
                    resume=True)
    assert [s.step for s in resumed if "dev_logprob" in s.extra] == [1, 2, 5, 6, 12]      # 6: the cut run's end


def test_eval_at_on_the_command_line(dmv):
    from conftest import SAMPLE
    d, train = dmv
    dev = str(SAMPLE / "en_ewt-ud-dev-sample.conllu.gz")
    rows = dev_trace(dmv, 5, "--eval-at", "log:1")
    col, n = rows[0].index("dev_directed"), int(rows[1][rows[0].index("sentences")])
    assert 100 < n < 1000                                  # steps pass 100 (step 1), 1000 (step 2 or 3), end
    evaluated = [int(r[0]) for r in rows[1:] if r[col] != ""]
    assert evaluated == [1, -(-1000 // n), 5]
    r = grind("train", "--eval-at", "log:4", *C, d / "g1.txt", train, check=False)
    assert r.returncode == 2 and "--eval-at needs --dev" in r.stderr
    r = grind("train", "--eval-at", "log:0", "--dev", dev, *C, d / "g1.txt", train, check=False)
    assert r.returncode == 2 and "log:N needs a whole number N >= 1" in r.stderr
