"""Manners: -q / -v / -vv and --log-file, messages through Python's logging from the library, grind train
--config FILE (TOML), and the checks of how training options combine, worded for the command line and for
grind.fit from one declaration."""
import re
import logging

import pytest

import grind
from conftest import grind as run_grind
from grind import log

GRAMMAR = "1 S --> NP VP\n1 NP --> D N\n1 NP --> N\n1 VP --> V NP\n1 VP --> V\n1 D --> the\n1 N --> dog\n" \
          "1 N --> cat\n1 V --> saw\n1 V --> barks\n"
CORPUS = "the dog saw the cat\ncat barks\nthe cat saw dog\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "g.txt").write_text(GRAMMAR)
    (tmp_path / "c.txt").write_text(CORPUS)
    return tmp_path


@pytest.mark.slow
def test_verbosity_levels_and_the_log_file(files):
    d = files
    args = ["train", "--iterations", "2", "g.txt", "c.txt", "-o", "out.txt"]
    quiet = run_grind("-q", *args, cwd=d).stderr
    normal = run_grind(*args, cwd=d).stderr
    debug = run_grind("-v", *args, cwd=d).stderr
    stamped = run_grind("-vv", "--log-file", "run.log", *args, cwd=d).stderr
    assert "grind: step" not in quiet and "grind: warning: g.txt: the weights are not probabilities" in quiet
    assert "grind: step    1" in normal and "configuration" not in normal
    assert "grind: em configuration: iterations=2, tolerance=1e-06" in debug
    assert all(line[:9].count(":") == 2 and line[8:16] == " grind: " for line in stamped.splitlines()), stamped
    logged = (d / "run.log").read_text()
    assert "grind: INFO: step    1" in logged and "grind: DEBUG: em configuration" in logged
    r = run_grind("-q", "-v", *args, cwd=d, check=False)
    assert r.returncode == 2 and "-q/--quiet and -v/--verbose are alternatives" in r.stderr


def test_library_messages_go_through_logging(files, caplog):
    """A notebook silences grind's progress lines with the 'grind' logger's level, or hands them to its own
    handlers (grind.log.to_application); the warnings stay warnings."""
    sents = [s.split() for s in CORPUS.splitlines()]
    g = grind.read_grammar(files / "g.txt")
    try:
        log.to_application()
        with caplog.at_level(logging.INFO, logger="grind"):
            grind.fit(g, sents, "em", iterations=1)
        records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "grind"]
        assert ("INFO", "training em on 3 sentences, 10 rules") in records
        assert any(lv == "WARNING" and "not probabilities" in m for lv, m in records)
        caplog.clear()
        logging.getLogger("grind").setLevel(logging.WARNING)
        grind.fit(g, sents, "em", iterations=1)
        assert {r.levelname for r in caplog.records if r.name == "grind"} == {"WARNING"}
    finally:
        log.to_application(False)
        logging.getLogger("grind").setLevel(logging.INFO)
    assert log.HANDLER in log.LOGGER.handlers and not log.LOGGER.propagate


@pytest.mark.slow
def test_train_config_file(files):
    d = files
    (d / "run.toml").write_text('algo = "vb"\nalpha = 0.5\niterations = 2\n"max-length" = 5\n')
    out = run_grind("train", "--config", "run.toml", "--iterations", "1", "g.txt", "c.txt", cwd=d).stdout
    head = [ln for ln in out.splitlines() if ln.startswith("#")]
    assert "# algorithm: vb" in head and "# alpha: 0.5" in head and "# steps: 1" in head     # the command line wins
    assert '# config: run.toml (algo = "vb", alpha = 0.5, max-length = 5)' in head
    same = run_grind("train", "--algo", "vb", "--alpha", "0.5", "--iterations", "1", "--max-length", "5",
                     "g.txt", "c.txt", cwd=d).stdout
    body = lambda t: [ln for ln in t.splitlines() if not ln.startswith("#")]   # noqa: E731
    assert body(out) == body(same)
    (d / "bad.toml").write_text('algo = "vb"\nalfa = 0.5\n')
    r = run_grind("train", "--config", "bad.toml", "g.txt", "c.txt", cwd=d, check=False)
    assert r.returncode == 2 and "bad.toml: no option 'alfa' in grind train" in r.stderr
    (d / "ln.toml").write_text('algo = "ln"\nalpha = 0.5\n')       # the file's options are checked as given
    r = run_grind("train", "--config", "ln.toml", "g.txt", "c.txt", cwd=d, check=False)
    assert r.returncode == 2 and "--algo ln does not read --alpha" in r.stderr
    (d / "range.toml").write_text("iterations = 0\n")
    r = run_grind("train", "--config", "range.toml", "g.txt", "c.txt", cwd=d, check=False)
    assert r.returncode == 2 and "--iterations" in r.stderr and "Traceback" not in r.stderr
    (d / "broken.toml").write_text("iterations = \n")
    r = run_grind("train", "--config", "broken.toml", "g.txt", "c.txt", cwd=d, check=False)
    assert r.returncode == 1 and "--config broken.toml: not TOML" in r.stderr


@pytest.mark.parametrize("cli,api,cli_msg,api_msg,exc", [
    (["--tie-warmup", "2"], dict(tie_warmup=2), "--tie-warmup is for --algo ln", "tie_warmup is for algo='ln'",
     ValueError),
    (["--epochs", "2"], dict(epochs=2), "--epochs is an option of --algo stochastic, not of --algo em",
     "epochs= is an option of algo stochastic, not of algo='em'", TypeError),
    (["--early-stop"], dict(early_stop=True), "--early-stop needs --eval-every N (or --eval-at) --dev FILE",
     "early_stop needs eval_every (or eval_at) dev", ValueError),
    (["--constraints", "RA"], dict(constraints="RA"), "--constraints is for --algo mixture",
     "constraints is for algo='mixture'", ValueError),
])
def test_one_check_worded_for_the_command_line_and_for_python(files, cli, api, cli_msg, api_msg, exc):
    d = files
    r = run_grind("train", *cli, "g.txt", "c.txt", cwd=d, check=False)
    assert r.returncode == 2 and cli_msg in r.stderr, r.stderr
    with pytest.raises((exc, ValueError, TypeError), match=re.escape(api_msg)):
        grind.fit(str(d / "g.txt"), [["the", "dog", "barks"]], "em", iterations=1, **api)


def test_fit_takes_every_train_option_the_table_gives_python():
    """grind.fit's keywords are the table's: every option declared for Python is accepted by name."""
    from grind.infer.options import OPTIONS, api_names
    names = api_names()
    for o in OPTIONS:
        if o.where in ("both", "api"):
            assert names[o.name] == o.name
            if o.alias:
                assert names[o.alias] == o.name
        else:
            assert o.name not in names
