"""The same input gives the same result however it is delivered: a file, standard input, or a pipe
(``/dev/stdin`` here stands for a process substitution ``<(...)``: a path that can be read once)."""
import gzip
import os
import subprocess
import sys

import pytest

from conftest import REPO, grind, sample_dmv

C = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
PIPE = "/dev/stdin"

pytestmark = pytest.mark.skipif(not os.path.exists(PIPE) or sys.platform == "win32", reason="no /dev/stdin")


@pytest.fixture(scope="module")
def dmv(tmp_path_factory):
    d, train = sample_dmv(tmp_path_factory.mktemp("pipes"), C)
    text = gzip.open(train, "rt", encoding="utf-8").read()
    (d / "train.conllu").write_text(text)
    return d, text


def body(text):
    return [ln for ln in text.splitlines() if not ln.startswith("# command")]


@pytest.mark.slow
@pytest.mark.parametrize("cmd", [["estep"], ["train", "--algo", "em", "--iterations", "2"],
                                 ["train", "--algo", "stochastic", "--batch", "50", "--epochs", "1", "--seed", "1"]])
def test_a_corpus_read_once_from_a_pipe_is_the_file(dmv, cmd):
    d, text = dmv
    from_file = grind(*cmd, *C, d / "g1.txt", d / "train.conllu").stdout
    from_pipe = grind(*cmd, *C, d / "g1.txt", PIPE, stdin=text).stdout
    assert body(from_pipe) == body(from_file)


@pytest.mark.slow
def test_a_grammar_from_a_pipe_parses_as_the_file(dmv):
    d, text = dmv
    g = (d / "g1.txt").read_text()
    test = d / "train.conllu"
    assert body(grind("parse", *C, PIPE, test, stdin=g).stdout) == body(grind("parse", *C, d / "g1.txt", test).stdout)


def test_split_of_a_pipe_names_shards_by_format(dmv, tmp_path):
    d, text = dmv
    grind("split", *C, "-n", "2", "-o", tmp_path / "s", PIPE, stdin=text)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.1.conllu", "s.2.conllu"]


@pytest.mark.slow
def test_what_cannot_read_a_pipe_twice_says_so(dmv):
    d, text = dmv
    r = grind("train", "--algo", "streaming", "--batch", "100", *C, d / "g1.txt", "-", stdin=text, check=False)
    assert r.returncode == 2 and "give a file, not standard input or a pipe" in r.stderr
    r = grind("eval", *C, PIPE, d / "train.conllu", stdin=text, check=False)
    assert r.returncode == 2 and "GOLD from stdin or a pipe needs an explicit --format" in r.stderr
    r = grind("eval", "--format", "conllu", *C, PIPE, d / "train.conllu", stdin=text)
    assert "directed" in r.stdout


@pytest.mark.slow
def test_standard_input_given_for_two_inputs_is_an_error(dmv):
    """The second reader of '-' read an exhausted stream: --families - after GRAMMAR - gave an empty
    mapping and an untied logistic normal with exit 0 (CLI audit)."""
    d, text = dmv
    g = (d / "g1.txt").read_text()
    for cmd, why in (
            (["make-structure", "--tie", "V", "--families", "-", "-"], "--families and GRAMMARS are both '-'"),
            (["train", "--algo", "ln", "--tie", "V", "--families", "-", *C, "-", d / "train.conllu"],
             "--families and GRAMMAR are both '-'"),
            # the grammar on stdin was read as the corpus first: "this looks like a grammar file"
            (["parse", *C, "-", "-"], "GRAMMAR and CORPUS are both '-'"),
            (["sum", "-", d / "g1.txt", "-"], "COUNTS is '-' 2 times"),
            (["init", "--harmonic", "--corpus", "-", "-"], "--corpus and GRAMMAR are both '-'")):
        r = grind(*cmd, stdin=g, check=False)
        assert r.returncode == 2 and why + ": standard input can be read only once" in r.stderr and not r.stdout, \
            (cmd, r.stderr)
    assert grind("parse", *C, d / "g1.txt", "-", stdin=text).stdout      # one reader of '-' is fine


def test_a_sigmorphon_tsv_on_stdin_is_detected_with_chars():
    tsv = (REPO / "data" / "morph" / "ces-dev-sample.tsv").read_text(encoding="utf-8")
    r = grind("make-grammar", "morph", "--chars", "--max-morph-length", "3", "-", stdin=tsv)
    assert "# corpus: format=sigmorphon (auto-detected)" in r.stdout


@pytest.mark.slow
def test_counts_of_an_auto_detected_and_a_named_format_add_up(dmv, tmp_path):
    d, text = dmv
    grind("split", *C, "-n", "2", "-o", tmp_path / "s", d / "train.conllu")
    c1, c2 = tmp_path / "c1.txt", tmp_path / "c2.txt"
    grind("estep", *C, "-o", c1, d / "g1.txt", tmp_path / "s.1.conllu")
    grind("estep", "--format", "conllu", *C, "-o", c2, d / "g1.txt", tmp_path / "s.2.conllu")
    whole = grind("estep", *C, d / "g1.txt", d / "train.conllu").stdout
    summed = grind("sum", c1, c2).stdout
    rows = lambda t: sorted(ln for ln in t.splitlines() if not ln.startswith("#"))   # noqa: E731
    assert len(rows(summed)) == len(rows(whole)) and "# corpus: format=conllu (auto-detected)" in summed


@pytest.mark.slow
def test_unparsed_sentences_are_reported_as_what_the_command_does_with_them(tmp_path):
    g = tmp_path / "g.txt"
    g.write_text("1 S --> a\n")
    c = tmp_path / "c.txt"
    c.write_text("a\nb\n")
    r = grind("parse", g, c)
    assert "1 of 2 sentences have no parse and are written as (NOPARSE w1 ... wn)" in r.stderr
    assert "(NOPARSE b)" in r.stdout
    r = grind("loglik", g, c)
    assert "1 of 2 sentences have no parse and are written with log probability -inf" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("pack", ["gzip", "xz", "bzip2"])
def test_compressed_data_under_a_plain_name_or_on_a_pipe_says_so(tmp_path, pack):
    """A gzip corpus piped into grind said 'not valid UTF-8'."""
    import bz2
    import lzma
    text = (REPO / "data" / "ewt" / "README.md").read_bytes()
    data = {"gzip": gzip.compress, "xz": lzma.compress, "bzip2": bz2.compress}[pack](text)
    (tmp_path / "corpus.txt").write_bytes(data)
    r = grind("split", "-n", "2", "-o", tmp_path / "s", tmp_path / "corpus.txt", check=False)
    assert r.returncode == 1 and f"{pack}-compressed data, not text" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "grind.cli", "split", "-n", "2", "-o", str(tmp_path / "s"), "-"],
                       input=data, capture_output=True)
    assert r.returncode == 1 and f"<stdin>: {pack}-compressed data".encode() in r.stderr
