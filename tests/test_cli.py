"""The command line: a pipeline through stdin/stdout, headers, help, and clear errors."""
import subprocess
import sys

import numpy as np
import pytest

from conftest import grind
from grind.formats.counts import read_counts

GRAMMAR = """\
1 S --> NP VP
1 NP --> D N
1 NP --> N
1 VP --> V NP
1 VP --> V
1 D --> the
1 D --> a
1 N --> dog
1 N --> cat
1 N --> dogs
1 V --> saw
1 V --> barks
"""
CORPUS = "the dog saw a cat\ndogs barks\na cat saw dogs\nthe cat barks\ndogs saw the dog\n"
SUBCOMMANDS = ["make-grammar", "make-grammar cnf", "make-grammar dmv", "make-grammar from-file", "init",
               "split", "estep", "sum", "baseline",
               "mstep", "train", "parse", "eval", "loglik"]


@pytest.fixture
def files(tmp_path):
    g = tmp_path / "g.txt"
    g.write_text(GRAMMAR)
    c = tmp_path / "c.txt"
    c.write_text(CORPUS)
    return tmp_path, str(g), str(c)


@pytest.mark.slow
def test_pipeline_through_stdin_and_stdout(files):
    d, g, c = files
    g1 = grind("init", "--random", "--seed", "3", g).stdout
    counts = grind("estep", "-", c, stdin=g1).stdout
    g2 = grind("mstep", "-", stdin=counts).stdout
    trained = grind("train", "--iterations", "5", "-", c, stdin=g1).stdout
    trees = grind("parse", "-", c, stdin=trained).stdout
    assert [t for t in trees.splitlines() if not t.startswith("#")][1] == "(S (NP (N dogs)) (VP (V barks)))"
    ll = grind("loglik", "-", c, stdin=trained).stdout
    assert "# perplexity:" in ll
    for out in (g1, counts, g2, trained, trees, ll):
        assert out.startswith("# grind ") and "# command: grind " in out and "# seed:" in out


@pytest.mark.slow
def test_one_em_step_by_hand_equals_train(files):
    d, g, c = files
    (d / "g1.txt").write_text(grind("init", "--random", "--seed", "5", g).stdout)
    counts = grind("estep", d / "g1.txt", c).stdout
    by_hand = grind("mstep", "--grammar", d / "g1.txt", "-", stdin=counts).stdout
    trained = grind("train", "--iterations", "1", d / "g1.txt", c).stdout
    def strip(t):
        return [ln for ln in t.splitlines() if not ln.startswith("#")]

    assert strip(by_hand) == strip(trained)


@pytest.mark.slow
def test_estep_on_shards_plus_sum_equals_whole(files):
    d, g, c = files
    lines = CORPUS.splitlines(keepends=True)
    (d / "a.txt").write_text("".join(lines[:2]))
    (d / "b.txt").write_text("".join(lines[2:]))
    (d / "g1.txt").write_text(grind("init", "--random", "--seed", "7", g).stdout)
    whole = grind("estep", "-o", d / "whole.txt", d / "g1.txt", c)
    grind("estep", "-o", d / "ca.txt", d / "g1.txt", d / "a.txt")
    grind("estep", "-o", d / "cb.txt", d / "g1.txt", d / "b.txt")
    grind("sum", "-o", d / "sum.txt", d / "ca.txt", d / "cb.txt")
    w, s = read_counts(str(d / "whole.txt")), read_counts(str(d / "sum.txt"))
    assert w.rules == s.rules
    np.testing.assert_allclose(s.values, w.values, rtol=1e-12)
    assert s.stats["sentences"] == w.stats["sentences"] == 5
    assert s.stats["loglik"] == pytest.approx(w.stats["loglik"], rel=1e-12)
    assert whole.returncode == 0


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_every_subcommand_explains_itself_with_an_example(cmd):
    out = grind(*cmd.split(), "--help").stdout
    assert "Example" in out or "example" in out.lower()


def test_top_level_help_has_pipeline_example():
    out = grind("--help").stdout
    assert "grind make-grammar cnf" in out and "grind train" in out


@pytest.mark.parametrize("grammar,corpus,msg", [
    ("1 S --> a\n1 S -> b\n", "a\n", "g.txt:2: no '-->'"),
    ("1 S --> a\n", "\n", "no sentences"),
])
def test_bad_input_is_one_line_error_exit_1(tmp_path, grammar, corpus, msg):
    (tmp_path / "g.txt").write_text(grammar)
    (tmp_path / "c.txt").write_text(corpus)
    r = grind("estep", tmp_path / "g.txt", tmp_path / "c.txt", check=False)
    assert r.returncode == 1
    assert msg in r.stderr and "Traceback" not in r.stderr


def test_non_utf8_corpus_names_line(files):
    d, g, c = files
    (d / "bad.txt").write_bytes(b"the dog\nthe \xfe cat\n")
    r = grind("estep", g, d / "bad.txt", check=False)
    assert r.returncode == 1 and "bad.txt:2: not valid UTF-8" in r.stderr and "Traceback" not in r.stderr


def test_missing_file_and_usage_errors(files):
    d, g, c = files
    r = grind("estep", g, d / "nope.txt", check=False)
    assert r.returncode == 1 and "nope.txt: cannot read" in r.stderr and "Traceback" not in r.stderr
    r = grind("train", "--iterations", "zero", g, c, check=False)
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.slow
def test_unparseable_sentence_is_reported_and_counted(files):
    d, g, c = files
    (d / "c2.txt").write_text(CORPUS + "the zebra barks\n")
    g = d / "g1.txt"                       # estep and parse need probabilities
    g.write_text(grind("init", files[1]).stdout)
    r = grind("estep", g, d / "c2.txt")
    assert "sentence 6 (line 6) has no parse: unknown word 'zebra'" in r.stderr
    assert "1 of 6 sentences have no parse" in r.stderr
    assert "# sentences: 6" in r.stdout and "# parsed: 5" in r.stdout
    trees = grind("parse", g, d / "c2.txt").stdout.splitlines()
    assert trees[-1] == "(NOPARSE the zebra barks)"


def test_failed_run_leaves_existing_output_intact(files):
    d, g, c = files
    out = d / "out.txt"
    out.write_text("precious\n")
    (d / "bad.txt").write_text("1 S --> a\n1 S ->\n")
    r = grind("init", "-o", out, d / "bad.txt", check=False)
    assert r.returncode == 1 and out.read_text() == "precious\n"
    assert not [p for p in d.iterdir() if p.name.startswith(".grind-")]


def test_closed_pipe_ends_quietly(files):
    d, g, c = files
    big = d / "big.txt"
    big.write_text(CORPUS * 400)
    g = d / "g1.txt"                       # parse needs probabilities
    g.write_text(grind("init", files[1]).stdout)
    cmd = f"{sys.executable} -m grind.cli parse {g} {big} | head -1"
    r = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd}"], capture_output=True, text=True)
    assert r.stdout.startswith("# grind")
    assert "Traceback" not in r.stderr and "Broken pipe" not in r.stderr


def test_seed_makes_init_reproducible(files):
    d, g, c = files
    a = grind("init", "--random", "--seed", "11", g).stdout
    b = grind("init", "--random", "--seed", "11", g).stdout
    other = grind("init", "--random", "--seed", "12", g).stdout
    assert a == b and a != other


@pytest.mark.slow
def test_progress_bar_only_on_a_terminal(files):
    """tqdm appears on stderr when it is a TTY, never in a pipe or log file."""
    import os
    import pty
    d, g, c = files
    r = grind("train", "--iterations", "3", g, c)
    assert "step/s" not in r.stderr and "it/s" not in r.stderr
    pid, fd = pty.fork()
    if pid == 0:  # child: stderr is the pty, given a size (a new pty is 0 x 0 and tqdm draws nothing)
        import fcntl
        import struct
        import termios
        fcntl.ioctl(2, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
        os.execvp(sys.executable, [sys.executable, "-m", "grind.cli", "train", "--iterations", "3",
                                   "-o", str(d / "out.txt"), g, c])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    assert (b"step/s" in out or b"s/step" in out) and (d / "out.txt").exists()


def test_a_message_while_a_progress_bar_is_drawn_starts_its_own_line(monkeypatch):
    """On a terminal the step lines were written after the bar's text on its line (output-layer audit)."""
    import io
    from grind import log

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setitem(log._state, "quiet", False)
    bar = log.bar(desc="em", unit="step")
    bar.update()
    log.info("step 1")
    bar.close()
    assert any(seg.startswith("grind: step 1\n") for seg in err.getvalue().split("\r")), repr(err.getvalue())
    assert log._state["bars"] == 0


@pytest.mark.slow
def test_options_that_would_do_nothing_are_refused_help_audit(tmp_path):
    """Accepted and ignored before: init's corpus options without --harmonic; --mix-start / --mix-end
    with a fixed schedule or --mix-coef (help audit)."""
    from conftest import grind
    g = tmp_path / "g.txt"
    g.write_text("1 S --> a\n")
    r = grind("init", "--column", "UPOS", g, check=False)
    assert r.returncode == 2 and "--column reads --corpus, which is for --harmonic" in r.stderr
    for extra, why in ((["--mix-schedule", "III", "--mix-start", "0.5"], "schedule III fixes"),
                       (["--mix-coef", "0.85,0.15", "--mix-end", "0.9"], "--mix-coef fixes")):
        r = grind("train", "--algo", "mixture", *extra, g, g, check=False)
        assert r.returncode == 2 and "does not read --mix-" in r.stderr and why in r.stderr, r.stderr
