"""The second fault suite: what a batch job meets besides bad input -- shards changed after the split,
signals and failures in the middle of a multi-file commit, numbers near the float limit, trees deeper
than Python's recursion limit, a corpus replaced between two passes.  Each case: a non-zero exit with a
message that says what happened, or the right result; never exit 0 with a wrong or partial one.
(Memory: test_faults_memory.py; full disks: test_faults_outputs.py; Dask workers lost: test_dask_backend.py.)"""
import gzip

import pytest

from conftest import grind
from test_bad_input_outputs import one_line_error

#: A and B differ (grind train refuses a symmetric start, whose two nonterminals EM never tells apart).
GRAMMAR = "0.5 S --> A B\n0.5 S --> B A\n0.75 A --> a\n0.25 A --> b\n0.25 B --> a\n0.75 B --> b\n"


# ----------------------------------------------------------------------------- shard integrity

@pytest.fixture
def text_shards(tmp_path):
    """A text corpus (one sentence of 7 words among 2-word ones) cut into two shards, read with --max-length 5."""
    (tmp_path / "g.txt").write_text(GRAMMAR)
    lines = ["a b", "b a", "a a b b a b a", "b b", "a b", "b a", "a a"]
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n")
    grind("split", "-n", "2", "--max-length", "5", "-o", tmp_path / "s", tmp_path / "c.txt")
    return tmp_path


def estep(d, shard):
    return grind("estep", "--max-length", "5", d / "g.txt", shard, check=False)


def test_an_intact_shard_is_counted(text_shards):
    for i in (1, 2):
        assert estep(text_shards, text_shards / f"s.{i}.txt").returncode == 0


@pytest.mark.parametrize("change", ["cut a sentence", "cut a long sentence", "edit a word", "add a line"])
def test_a_shard_cut_or_edited_after_the_split_is_refused(text_shards, change):
    shard = next(text_shards / f"s.{i}.txt" for i in (1, 2)
                 if "a a b b a b a" in (text_shards / f"s.{i}.txt").read_text())
    head, _, body = shard.read_text().partition("\n\n")
    rows = body.splitlines()
    if change == "cut a sentence":
        rows = rows[:-1] if rows[-1] != "a a b b a b a" else rows[:-2] + rows[-1:]
    elif change == "cut a long sentence":      # left out by --max-length 5: the sentence count stays
        rows.remove("a a b b a b a")
    elif change == "edit a word":
        rows[0] = rows[0].replace("a", "b", 1)
    else:
        rows.append("b b")
    shard.write_text(head + "\n\n" + "\n".join(rows) + "\n")
    one_line_error(estep(text_shards, shard), shard, "grind split")


def test_a_shard_of_an_older_grind_without_its_hash_is_checked_by_its_blocks(text_shards):
    shard = next(text_shards / f"s.{i}.txt" for i in (1, 2)
                 if "a a b b a b a" in (text_shards / f"s.{i}.txt").read_text())
    text = "".join(ln for ln in shard.read_text().splitlines(True) if not ln.startswith("# shard-sha256:"))
    shard.write_text(text)
    assert estep(text_shards, shard).returncode == 0
    shard.write_text(text.replace("a a b b a b a\n", ""))
    one_line_error(estep(text_shards, shard), shard, "'# blocks:'")


@pytest.mark.parametrize("fmt", ["conllu.gz", "mrg", "chars"])
def test_shards_of_every_format_pass_their_own_check(tmp_path, fmt, ewt_train):
    """The hash split writes is the one estep reads back: CoNLL-U (compressed), PTB trees, --chars word lists."""
    if fmt == "conllu.gz":
        corpus, opts = ewt_train, ["--column", "UPOS", "--punct", "ud", "--max-length", "8"]
        grind("make-grammar", "dmv", *opts, "-o", tmp_path / "g.txt", corpus)
    elif fmt == "mrg":
        (tmp_path / "c.mrg").write_text("(S (A a) (B b))\n( (S (A b)\n  (B a)))\n(S (A a) (B a))\n")
        corpus, opts = tmp_path / "c.mrg", ["--column", "FORM"]
        (tmp_path / "g.txt").write_text(GRAMMAR)
    else:
        (tmp_path / "w.txt").write_text("ab\nba\naab\n")
        corpus, opts = tmp_path / "w.txt", ["--chars"]
        grind("make-grammar", "morph", "--chars", "-o", tmp_path / "g.txt", corpus)
    grind("split", "-n", "2", *opts, "-o", tmp_path / "s", corpus)
    shards = sorted(p for p in tmp_path.iterdir() if p.name.startswith("s."))
    assert len(shards) == 2
    for s in shards:
        grind("estep", *opts, tmp_path / "g.txt", s)
        text = gzip.open(s, "rt").read() if s.name.endswith(".gz") else s.read_text()
        assert "# shard-sha256: " in text


# ----------------------------------------------------------------------------- multi-file commits

def temps(d):
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".grind-"))


def test_a_group_whose_later_rename_fails_puts_the_earlier_files_back(tmp_path):
    """train -o G --trace T --ln-params P replaces all or none: when the rename of a later file fails
    (here its name became a directory meanwhile), the files renamed before it are put back as they were
    (a new one removed), and nothing is left beside them."""
    from grind.errors import InputError
    from grind.formats.textio import open_out, output_group
    a, b, c = tmp_path / "a.txt", tmp_path / "b.txt", tmp_path / "c.txt"
    a.write_text("old a\n")
    c.write_text("old c\n")
    with pytest.raises(InputError, match=r"cannot write .*c\.txt: .*put back"):
        with output_group():
            for p in (a, b, c):
                with open_out(str(p)) as f:
                    f.write(f"new {p.name}\n")
            c.unlink()
            c.mkdir()
    assert a.read_text() == "old a\n" and not b.exists() and c.is_dir()
    assert temps(tmp_path) == []


def test_sighup_during_a_group_commit_is_held_until_every_file_is_in_place(tmp_path, monkeypatch):
    import os
    import signal

    from grind import cli
    from grind.formats import textio
    files = [tmp_path / f"{n}.txt" for n in "abc"]
    for p in files:
        p.write_text("old\n")
    real_replace = os.replace
    seen = []

    def replace_and_hang_up(src, dst):
        if not seen:
            os.kill(os.getpid(), signal.SIGHUP)       # the handler would run at the next bytecode
        seen.append(dst)
        return real_replace(src, dst)

    monkeypatch.setattr(textio.os, "replace", replace_and_hang_up)
    old = signal.signal(signal.SIGHUP, cli._terminate)
    try:
        with pytest.raises(cli.Terminated) as e:
            with textio.output_group():
                for p in files:
                    with textio.open_out(str(p)) as f:
                        f.write("new\n")
    finally:
        signal.signal(signal.SIGHUP, old)
    assert e.value.hangup
    assert [p.read_text() for p in files] == ["new\n"] * 3 and temps(tmp_path) == []


def test_sighup_to_a_training_run_leaves_the_previous_outputs(tmp_path, ewt_train):
    import signal
    import subprocess
    import sys
    import time
    opts = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]
    grind("make-grammar", "dmv", *opts, "-o", tmp_path / "g0.txt", ewt_train)
    for name in ("g.txt", "t.tsv"):
        (tmp_path / name).write_text("previous\n")
    cmd = [sys.executable, "-m", "grind.cli", "train", *opts, "--iterations", "1000000", "--tolerance", "0",
           "--trace", tmp_path / "t.tsv", "-o", tmp_path / "g.txt", tmp_path / "g0.txt", ewt_train]
    p = subprocess.Popen(list(map(str, cmd)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = p.stderr.readline()           # the corpus read (its length limit's count): the handlers are in place
    time.sleep(0.5)
    p.send_signal(signal.SIGHUP)
    _, err = p.communicate(timeout=60)
    err = first + err
    assert p.returncode == 129 and err.splitlines()[-1] == "grind: hung up (SIGHUP)" and "Traceback" not in err
    assert (tmp_path / "g.txt").read_text() == (tmp_path / "t.tsv").read_text() == "previous\n"
    assert temps(tmp_path) == []


@pytest.mark.parametrize("command", ["train", "split", "estep"])
def test_a_name_too_long_for_the_file_system_is_refused_before_any_work(tmp_path, command):
    (tmp_path / "g.txt").write_text(GRAMMAR)
    (tmp_path / "c.txt").write_text("a b\nb a\n")
    long = tmp_path / ("x" * 300)
    args = {"train": ["train", "--iterations", "1", "-o", long, tmp_path / "g.txt", tmp_path / "c.txt"],
            "split": ["split", "-n", "2", "-o", long, tmp_path / "c.txt"],
            "estep": ["estep", "-o", long, tmp_path / "g.txt", tmp_path / "c.txt"]}[command]
    r = grind(*args, check=False)
    assert r.returncode in (1, 2) and "too long for its file system" in r.stderr and "Traceback" not in r.stderr
    assert "step" not in r.stderr.replace("estep", "")             # refused before the first iteration


# ----------------------------------------------------------------------------- numbers near the float limit

@pytest.fixture
def counts(tmp_path):
    """g.txt, c.txt, k.txt (its counts) and huge.txt: the counts with every value 1e308."""
    import re
    (tmp_path / "g.txt").write_text(GRAMMAR)
    (tmp_path / "c.txt").write_text("a b\nb a\na b\n")
    grind("estep", "-o", tmp_path / "k.txt", tmp_path / "g.txt", tmp_path / "c.txt")
    text = (tmp_path / "k.txt").read_text()
    (tmp_path / "huge.txt").write_text(re.sub(r"(?m)^[0-9.e+-]+ ", "1e308 ", text))
    return tmp_path


def rules_of(text):
    return {ln.split(" ", 1)[1]: float(ln.split(" ", 1)[0]) for ln in text.splitlines() if ln and ln[0] != "#"}


def no_warning(r):
    assert "Warning" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_mstep_of_counts_near_the_float_limit_normalises_them(counts):
    r = grind("mstep", counts / "huge.txt")
    no_warning(r)
    assert set(rules_of(r.stdout).values()) == {0.5}


def test_train_from_unnormalised_weights_near_the_float_limit(counts):
    """The same run as from their probabilities (they normalised to 0)."""
    weights = ["1e308", "1e308", "1.5e308", "0.5e308", "0.5e308", "1.5e308"]
    rules = [ln.split(" ", 1)[1] for ln in GRAMMAR.splitlines()]
    (counts / "gu.txt").write_text("# weights: unnormalised\n" + "".join(f"{w} {r}\n" for w, r in zip(weights, rules)))
    (counts / "gp.txt").write_text("".join(f"{w} {r}\n" for w, r in zip([.5, .5, .75, .25, .25, .75], rules)))
    r = grind("train", "--algo", "em", "--iterations", "2", counts / "gu.txt", counts / "c.txt")
    no_warning(r)
    want = grind("train", "--algo", "em", "--iterations", "2", counts / "gp.txt", counts / "c.txt").stdout
    got = rules_of(r.stdout)
    assert got.keys() == rules_of(want).keys() and 0 not in got.values()
    assert all(abs(got[k] - v) < 1e-12 for k, v in rules_of(want).items())


def test_sum_beyond_the_float_range_is_refused_before_a_byte_is_written(counts):
    r = grind("sum", counts / "huge.txt", counts / "huge.txt", check=False)
    one_line_error(r, "S --> A B", "largest float", "nothing written")
    assert r.stdout == "" and "RuntimeWarning" not in r.stderr
    text = (counts / "k.txt").read_text()
    (counts / "kl.txt").write_text("".join("# loglik: -1e308\n" if ln.startswith("# loglik:") else ln
                                           for ln in text.splitlines(True)))
    r = grind("sum", counts / "kl.txt", counts / "kl.txt", check=False)
    one_line_error(r, "'# loglik:'", "float range")
    assert r.stdout == ""


def test_vb_says_overflow_for_pseudo_counts_whose_sum_overflows(counts):
    (counts / "vb.txt").write_text("# weights: Dirichlet pseudo-counts (posterior)\n"
                                   + GRAMMAR.replace("0.5 ", "1e308 "))
    r = grind("estep", "--algo", "vb", counts / "vb.txt", counts / "c.txt", check=False)
    assert "underflow" not in one_line_error(r, "largest float", "overflow")
    r = grind("train", "--algo", "vb", "--iterations", "1", counts / "vb.txt", counts / "c.txt")   # from their mean
    no_warning(r)
    r = grind("train", "--algo", "vb", "--alpha", "1e308", "--iterations", "1", counts / "g.txt", counts / "c.txt",
              check=False)
    one_line_error(r, "--alpha 1e308", "largest float")
    grind("estep", "--algo", "vb", "-o", counts / "kv.txt", counts / "g.txt", counts / "c.txt")
    grind("mstep", "--algo", "vb", "--grammar", counts / "g.txt", "-o", counts / "v1.txt", counts / "kv.txt")
    grind("estep", "--algo", "vb", "-o", counts / "kv1.txt", counts / "v1.txt", counts / "c.txt")
    import re
    (counts / "kv1.txt").write_text(re.sub(r"(?m)^[0-9.e+-]+ ", "1.7e308 ", (counts / "kv1.txt").read_text()))
    r = grind("mstep", "--algo", "vb", "--grammar", counts / "v1.txt", counts / "kv1.txt", check=False)
    one_line_error(r, "largest float", "overflow")


# ----------------------------------------------------------------------------- deep trees

def test_a_500_word_right_branching_parse_is_written_with_the_others(tmp_path):
    """grind parse failed as a whole ("nested too deeply for grind's recursive readers") for one such sentence."""
    (tmp_path / "g.txt").write_text("0.5 S --> A S\n0.5 S --> a\n1 A --> a\n")
    (tmp_path / "c.txt").write_text("a a\n" + " ".join(["a"] * 500) + "\na a a\n")
    r = grind("parse", "-o", tmp_path / "p.mrg", tmp_path / "g.txt", tmp_path / "c.txt")
    trees = [ln for ln in (tmp_path / "p.mrg").read_text().splitlines() if not ln.startswith("#")]
    assert len(trees) == 3 and trees[1].count("(A a)") == 499 and "Traceback" not in r.stderr
    (tmp_path / "gold.mrg").write_text("\n".join(trees) + "\n")        # and read back: scored against itself
    r = grind("eval", tmp_path / "gold.mrg", tmp_path / "p.mrg")
    assert "Traceback" not in r.stderr and "\nexact_match\t1.0000\n" in r.stdout, r.stdout


def test_deep_ptb_trees_are_read_and_written_without_recursion_limits(tmp_path):
    from grind.eval.labeled import bracket_multiset
    from grind.formats.treebank import binarise, clean, debinarise
    from grind.formats.trees import format_tree, leaves, parse_trees, preterminals, prune, spans, tags_as_leaves
    n = 3000
    text = "(S " * n + "(NN w)" + " (VB v))" * n
    (t,) = parse_trees(text)
    assert format_tree(t) == text
    assert len(leaves(t)) == n + 1 and len(preterminals(t)) == n + 1 and len(list(spans(t))) == 2 * n + 1
    assert prune(t, lambda tag: tag == "VB") is not None and tags_as_leaves(t)[0] == "S"
    c = clean(t)
    assert format_tree(debinarise(binarise(c))) == format_tree(c) and sum(bracket_multiset(t).values()) > 0


def test_a_deep_dependency_chain_has_a_derivation():
    from grind.grammars.dmv import dmv_grammar, heads_derivation
    n = 2000
    g = dmv_grammar(["X"])
    rows = heads_derivation(g, ["X"] * n, [0] + list(range(1, n)))      # word i+1 depends on word i
    assert rows.shape == (5 * n - 1, 3)


def test_one_tree_that_cannot_be_written_does_not_lose_the_others(tmp_path, monkeypatch, capsys):
    """A sentence whose tree alone fails (too deep, too big) is written as (NOPARSE ...), reported and counted."""
    from grind.cli import main
    from grind.formats import trees
    (tmp_path / "g.txt").write_text("0.5 S --> A S\n0.5 S --> a\n1 A --> a\n")
    (tmp_path / "c.txt").write_text("a a\n" + " ".join(["a"] * 50) + "\na a a\n")
    real = trees.format_tree

    def fails_when_long(t):
        if len(trees.leaves(t)) > 10 and t[0] != "NOPARSE":
            raise RecursionError("maximum recursion depth exceeded")
        return real(t)

    monkeypatch.setattr(trees, "format_tree", fails_when_long)
    main(["parse", "-o", str(tmp_path / "p.mrg"), str(tmp_path / "g.txt"), str(tmp_path / "c.txt")])    # exit 0
    text = (tmp_path / "p.mrg").read_text()
    trees_out = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert len(trees_out) == 3 and trees_out[1].startswith("(NOPARSE a a") and trees_out[2].startswith("(S (A a)")
    assert "# failed: 1 of 3 sentences" in text and "sentence 2 (line 2)" in capsys.readouterr().err


# ----------------------------------------------------------------------------- two passes over a file

STREAM = ["a b", "b a", "a b", "b a", "a a", "b b", "a b", "b a", "a b", "a a", "b a", "b b"]


def streaming(tmp_path, *extra):
    from grind.cli import main
    return main(["train", "--algo", "streaming", "--batch", "3", "--seed", "1", *map(str, extra),
                 "-o", str(tmp_path / "out.txt"), str(tmp_path / "g.txt"), str(tmp_path / "c.txt")])


def replaced_after_the_first_pass(monkeypatch, path, text):
    """The corpus file replaced by ``text`` right after train's first pass (its fingerprint) has read it."""
    from grind.infer import training
    real = training.fingerprint_sentences

    def then_replace(tokens):
        fp = real(tokens)
        path.write_text(text)
        return fp

    monkeypatch.setattr(training, "fingerprint_sentences", then_replace)


def test_streaming_refuses_a_corpus_replaced_between_its_two_passes(tmp_path, monkeypatch, capsys):
    (tmp_path / "g.txt").write_text(GRAMMAR)
    (tmp_path / "c.txt").write_text("\n".join(STREAM) + "\n")
    replaced_after_the_first_pass(monkeypatch, tmp_path / "c.txt", "\n".join(["b b"] + STREAM[1:]) + "\n")
    with pytest.raises(SystemExit) as e:
        streaming(tmp_path)
    err = capsys.readouterr().err
    assert e.value.code == 1 and "the corpus changed while grind read it" in err and "12 sentences" in err, err
    assert not (tmp_path / "out.txt").exists()


def test_streaming_resume_refuses_a_checkpoint_trained_on_other_sentences(tmp_path, monkeypatch, capsys):
    """The file replaced during a run and put back: its fingerprint is the checkpoint's again, but the
    checkpoint's state was trained on the other file's sentences."""
    (tmp_path / "g.txt").write_text(GRAMMAR)
    original = "\n".join(STREAM) + "\n"
    (tmp_path / "c.txt").write_text(original)
    ckpt = ["--checkpoint", tmp_path / "ck.npz", "--checkpoint-every", "1"]
    replaced_after_the_first_pass(monkeypatch, tmp_path / "c.txt", "\n".join(["b b"] + STREAM[1:]) + "\n")
    with pytest.raises(SystemExit):
        streaming(tmp_path, *ckpt)
    monkeypatch.undo()
    assert (tmp_path / "ck.npz").exists()
    (tmp_path / "c.txt").write_text(original)
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        streaming(tmp_path, *ckpt, "--resume")
    err = capsys.readouterr().err
    assert e.value.code == 1 and "not the corpus the checkpoint was trained on" in err, err
    # an unchanged file resumes (and finishes) as before
    (tmp_path / "ck.npz").unlink()
    streaming(tmp_path, *ckpt)
    streaming(tmp_path, *ckpt, "--resume")
    assert (tmp_path / "out.txt").exists()
