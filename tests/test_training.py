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


@pytest.fixture(scope="module")
def dmv(tmp_path_factory):
    from conftest import sample_dmv
    return sample_dmv(tmp_path_factory.mktemp("dmv"), C)


def body(text):
    return [ln for ln in text.splitlines() if not ln.startswith("#")]


@pytest.mark.parametrize("algo", ["vb", "cvb", "gibbs", "mixture"])
def test_resumed_cli_run_is_bit_identical(dmv, algo):
    d, train = dmv
    args = ["train", "--algo", algo, "--alpha", "0.1", "--seed", "3", *C]
    full = grind(*args, "--iterations", "4", d / "g1.txt", train).stdout
    ck = d / f"{algo}.npz"
    grind(*args, "--iterations", "2", "--checkpoint", ck, d / "g1.txt", train)
    resumed = grind(*args, "--iterations", "4", "--checkpoint", ck, "--resume", d / "g1.txt", train)
    assert body(resumed.stdout) == body(full) and "resumed from" in resumed.stderr
    kind = "probabilities" if algo == "mixture" else "Dirichlet pseudo-counts (posterior)"
    assert f"# weights: {kind}" in full


def test_eval_every_puts_heldout_figures_in_the_trace(dmv):
    d, train = dmv
    from conftest import SAMPLE
    dev = str(SAMPLE / "en_ewt-ud-dev-sample.conllu.gz")
    tr = d / "trace.tsv"
    grind("train", "--algo", "vb", "--iterations", "4", "--eval-every", "2", "--dev", dev, "--trace", tr,
          *C, d / "g1.txt", train)
    rows = [ln.split("\t") for ln in body(tr.read_text())]
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
    """A stand-in algorithm whose state is one array."""

    name, output = "counter", "probabilities"

    def __init__(self):
        self.x = np.zeros(1)

    def step(self):
        from grind.infer.training import Step
        if self.x[0] >= 10:
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
