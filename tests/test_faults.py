"""The second fault suite: what a batch job meets besides bad input -- shards changed after the split,
signals and failures in the middle of a multi-file commit, numbers near the float limit, trees deeper
than Python's recursion limit, a corpus replaced between two passes.  Each case: a non-zero exit with a
message that says what happened, or the right result; never exit 0 with a wrong or partial one.
(Memory: test_faults_memory.py; full disks: test_faults_outputs.py; Dask workers lost: test_dask_backend.py.)"""
import gzip

import pytest

from conftest import grind

GRAMMAR = "0.5 S --> A B\n0.5 S --> B A\n0.5 A --> a\n0.5 A --> b\n0.5 B --> a\n0.5 B --> b\n"


def one_line_error(r, *needles, code=1):
    assert r.returncode == code, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("grind: error:")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert str(n) in errors[0], (n, r.stderr)
    return errors[0]


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
