"""Inconsistent count files for grind sum, grind split writing over its input or
to odd prefixes, and --checkpoint paths that are not regular files: each a
one-line error before any work, never a silent wrong answer or a hang."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import grind
from test_training import Counter

# A and B are not alike (a symmetric start is refused: issue 38)
GRAMMAR = "0.5 S --> A B\n0.5 S --> B A\n0.6 A --> a\n0.4 A --> b\n0.5 B --> a\n0.5 B --> b\n"
CORPUS = "a b\nb a\na b\nb a\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "g.txt").write_text(GRAMMAR)
    (tmp_path / "c.txt").write_text(CORPUS)
    return tmp_path


def grind_timed(*args, cwd=None):
    """grind ARGS in a subprocess that may not hang: killed (and the test failed) after 60 s."""
    return subprocess.run([sys.executable, "-m", "grind.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=60)


def one_line_error(r, *needles, code=1):
    assert r.returncode == code, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("grind: error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert str(n) in errors[0], (n, r.stderr)
    return errors[0]


# ----------------------------------------------------------------------------- grind sum

@pytest.mark.slow
def test_sum_refuses_counts_read_with_different_corpus_options(files):
    grind("estep", "--max-length", "5", "-o", files / "c1.txt", files / "g.txt", files / "c.txt")
    grind("estep", "--max-length", "20", "-o", files / "c2.txt", files / "g.txt", files / "c.txt")
    r = grind("sum", "-o", files / "sum.txt", files / "c1.txt", files / "c2.txt", check=False)
    one_line_error(r, files / "c1.txt", files / "c2.txt", "length=1..5", "length=1..20", "corpus options")
    assert not (files / "sum.txt").exists()


def test_sum_warns_when_a_file_is_given_twice(files):
    grind("estep", "-o", files / "c1.txt", files / "g.txt", files / "c.txt")
    (files / "link.txt").symlink_to(files / "c1.txt")
    r = grind("sum", "-o", files / "sum.txt", files / "c1.txt", files / "link.txt")
    assert f"{files / 'link.txt'} (argument 2) is the file of argument 1: its counts are added twice" in r.stderr


@pytest.mark.slow
def test_sum_of_split_shards_keeps_the_corpus_line(files):
    grind("split", "-n", "2", "--max-length", "5", "-o", files / "s", files / "c.txt")
    for i in (1, 2):
        grind("estep", "--max-length", "5", "-o", files / f"k{i}.txt", files / "g.txt", files / f"s.{i}.txt")
    out = grind("sum", files / "k1.txt", files / "k2.txt").stdout
    assert "# sentences: 4\n" in out and "# parsed: 4\n" in out and "# corpus: format=text (auto-detected)" in out


@pytest.mark.parametrize("missing_first", [False, True])
def test_sum_refuses_a_count_file_without_a_statistic_the_other_has(files, missing_first):
    grind("estep", "-o", files / "c1.txt", files / "g.txt", files / "c.txt")
    text = (files / "c1.txt").read_text()
    (files / "c2.txt").write_text("".join(ln for ln in text.splitlines(True) if not ln.startswith("# sentences:")))
    pair = [files / "c2.txt", files / "c1.txt"] if missing_first else [files / "c1.txt", files / "c2.txt"]
    r = grind("sum", "-o", files / "sum.txt", *pair, check=False)
    one_line_error(r, files / "c1.txt", files / "c2.txt", "# sentences: 4", "# sentences: (none)")
    assert not (files / "sum.txt").exists()


@pytest.mark.slow
def test_a_count_file_with_more_parsed_than_sentences_is_refused(files):
    grind("estep", "-o", files / "c1.txt", files / "g.txt", files / "c.txt")
    text = (files / "c1.txt").read_text()
    assert "# sentences: 4\n# parsed: 4\n" in text
    (files / "bad.txt").write_text(text.replace("# parsed: 4\n", "# parsed: 6\n"))
    r = grind("sum", files / "c1.txt", files / "bad.txt", check=False)
    one_line_error(r, files / "bad.txt", "parsed: 6", "sentences: 4")
    one_line_error(grind("mstep", files / "bad.txt", check=False), files / "bad.txt", "parsed: 6")


@pytest.mark.slow
def test_vb_mstep_of_counts_without_loglik_is_an_error(files):
    grind("-q", "estep", "--algo", "vb", "-o", files / "c0.txt", files / "g.txt", files / "c.txt")
    grind("-q", "mstep", "--algo", "vb", "--grammar", files / "g.txt", "-o", files / "g1.txt", files / "c0.txt")
    grind("-q", "estep", "--algo", "vb", "-o", files / "c1.txt", files / "g1.txt", files / "c.txt")
    text = (files / "c1.txt").read_text()
    (files / "c1n.txt").write_text("".join(ln for ln in text.splitlines(True) if not ln.startswith("# loglik:")))
    r = grind("mstep", "--algo", "vb", "--grammar", files / "g1.txt", files / "c1n.txt", check=False)
    one_line_error(r, files / "c1n.txt", "loglik")


def test_vb_estep_refuses_a_pseudo_count_of_0(files):
    (files / "pc.txt").write_text("# weights: Dirichlet pseudo-counts\n"
                                  "2 S --> A B\n0 S --> B A\n1 A --> a\n1 B --> b\n")
    (files / "ab.txt").write_text("a b\n")
    r = grind("estep", "--algo", "vb", "-o", files / "c0.txt", files / "pc.txt", files / "ab.txt", check=False)
    one_line_error(r, "pc.txt", "pseudo-counts must be positive", "S --> B A")
    assert not (files / "c0.txt").exists()


def test_vb_mstep_refuses_alpha_0(files):
    grind("-q", "estep", "--algo", "vb", "-o", files / "c0.txt", files / "g.txt", files / "c.txt")
    r = grind("mstep", "--algo", "vb", "--alpha", "0", "--grammar", files / "g.txt", "-o", files / "g1.txt",
              files / "c0.txt", check=False)
    assert r.returncode == 2 and "VB needs a positive Dirichlet hyperparameter" in r.stderr, r.stderr
    assert not (files / "g1.txt").exists()


# ----------------------------------------------------------------------------- grind split

SENTENCES = "a b\nb a\na b a\nb\n"


@pytest.mark.parametrize("via_link", [False, True])
def test_split_refuses_to_overwrite_its_input(tmp_path, via_link):
    (tmp_path / "s.1.txt").write_text(SENTENCES)
    prefix = "s"
    if via_link:
        (tmp_path / "l.1.txt").symlink_to("s.1.txt")
        prefix = "l"
    r = grind("split", "-n", "2", "-o", prefix, "s.1.txt", cwd=tmp_path, check=False)
    one_line_error(r, f"{prefix}.1.txt", "s.1.txt itself")
    assert (tmp_path / "s.1.txt").read_text() == SENTENCES
    assert not (tmp_path / f"{prefix}.2.txt").exists()


@pytest.mark.parametrize("prefix", ["", "sub/", "sub/."])
def test_split_refuses_an_empty_or_directory_prefix(tmp_path, prefix):
    (tmp_path / "sub").mkdir()
    (tmp_path / "c.txt").write_text(SENTENCES)
    r = grind("split", "-n", "2", "-o", prefix, "c.txt", cwd=tmp_path, check=False)
    assert r.returncode == 2 and "'-o' / '--output'" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["c.txt", "sub"]


def test_split_refuses_a_fifo_shard_and_writes_through_a_symlink(tmp_path):
    (tmp_path / "c.txt").write_text(SENTENCES)
    os.mkfifo(tmp_path / "f.2.txt")
    one_line_error(grind_timed("split", "-n", "2", "-o", "f", "c.txt", cwd=tmp_path), "f.2.txt", "FIFO")
    assert not (tmp_path / "f.1.txt").exists()
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "s.1.txt").symlink_to("../target.txt")
    grind("split", "-n", "2", "-o", "d/s", "c.txt", cwd=tmp_path)
    assert (tmp_path / "d" / "s.1.txt").is_symlink() and "# shard: 1 of 2" in (tmp_path / "target.txt").read_text()


# ----------------------------------------------------------------------------- train --checkpoint

@pytest.mark.parametrize("what", ["fifo", "-", "/dev/null"])
def test_checkpoint_that_is_not_a_regular_file_is_refused_before_work(files, what):
    ck = what
    if what == "fifo":
        ck = files / "ck"
        os.mkfifo(ck)
    r = grind_timed("train", "--iterations", "1", "--checkpoint", ck, "--checkpoint-every", "1", "-o",
                    files / "out.txt", files / "g.txt", files / "c.txt")
    one_line_error(r, f"--checkpoint {ck}", "not a regular file")
    assert "training" not in r.stderr and not (files / "out.txt").exists()


@pytest.mark.slow
def test_checkpoint_symlink_is_written_through_and_resumed_from(files):
    (files / "ck").symlink_to("real.npz")
    args = ["--checkpoint", files / "ck", "--checkpoint-every", "1", files / "g.txt", files / "c.txt"]
    grind("train", "--iterations", "2", *args)
    assert (files / "ck").is_symlink() and (files / "real.npz").stat().st_size > 0
    grind("train", "--iterations", "3", "--resume", *args)
    assert (files / "ck").is_symlink()


@pytest.mark.parametrize("every,saved", [(1, [1, 2, 3]), (2, [2, 3]), (0, [3])])
def test_checkpoint_is_written_once_per_step(tmp_path, monkeypatch, every, saved):
    from grind.infer import training
    got = []
    real = training.save_checkpoint

    def save(path, algo, rng, trace, *a):
        got.append(trace[-1].step)
        real(path, algo, rng, trace, *a)

    monkeypatch.setattr(training, "save_checkpoint", save)
    ck = str(tmp_path / "ck.npz")
    training.train(Counter(3), np.random.default_rng(0), checkpoint=ck, checkpoint_every=every)
    assert got == saved
    got.clear()
    algo = Counter(3)
    training.train(algo, np.random.default_rng(0), checkpoint=ck, checkpoint_every=every, resume=True)
    assert got == [] and algo.x[0] == 3


def test_split_refuses_two_shard_names_of_one_file(files):
    """Two shard names linked to one file: exit 0 and one shard's sentences lost (CLI audit)."""
    d = files / "sp"
    d.mkdir()
    (d / "s.1.txt").symlink_to("common")
    (d / "s.2.txt").symlink_to("common")
    r = grind("split", "-n", "2", "-o", d / "s", files / "c.txt", check=False)
    one_line_error(r, d / "s.2.txt", "it is the file of shard", d / "s.1.txt")
    assert not (d / "common").exists()
