"""The output layer (grind.formats.textio.open_out and the OutputPath option type):
symlinks written through, FIFOs and devices written in place, compression by
suffix, atomic replacement, upfront checks of every output path, and
one-line errors (full disk, closed pipes, SIGTERM)."""
import bz2
import gzip
import lzma
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import SAMPLE, grind
from grind import cli
from grind.cli import main
from grind.errors import InputError
from grind.formats.textio import StdoutClosed, header_lines, open_out, output_problem, read_lines

TRAIN = str(SAMPLE / "en_ewt-ud-train-sample.conllu.gz")
SHORT = ["--column", "UPOS", "--punct", "ud", "--max-length", "10"]


def run(capsys, *args):
    """grind ARGS in-process: (exit status, stdout, stderr)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def temps(d):
    return [p.name for p in Path(d).iterdir() if p.name.startswith(".grind-")]


def write(path, text="hello\n", **kw):
    with open_out(str(path), **kw) as f:
        f.write(text)


@pytest.fixture(scope="module")
def dmv(tmp_path_factory):
    """g1.txt: a harmonic DMV grammar over the shipped sample (short sentences)."""
    d = tmp_path_factory.mktemp("dmv")
    grind("make-grammar", "dmv", *SHORT, "-o", d / "g0.txt", TRAIN)
    grind("init", "--harmonic", "--corpus", TRAIN, *SHORT, "-o", d / "g1.txt", d / "g0.txt")
    return d / "g1.txt"


# ----------------------------------------------------------------------------- mode and header

def test_a_new_file_gets_the_mode_the_umask_allows(tmp_path):
    old = os.umask(0o027)
    try:
        write(tmp_path / "new.txt")
        write(tmp_path / "new.txt.gz")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "new.txt.gz").stat().st_mode) == 0o640


def test_the_command_line_in_headers_quotes_arguments_with_spaces(monkeypatch):
    from grind.formats import textio
    monkeypatch.setattr(textio, "_run_info", dict(textio._run_info))     # restored after the test
    textio.set_run_info(argv=["grind", "train", "-o", "my file.txt", "--alpha", "0.5", "g.txt"], seed=3)
    lines = textio.header_lines(model="pcfg")
    assert lines[1] == "# command: grind train -o 'my file.txt' --alpha 0.5 g.txt\n"
    assert lines[2:] == ["# seed: 3\n", "# model: pcfg\n"]


# ----------------------------------------------------------------------------- where the bytes go

@pytest.mark.slow
def test_a_conll_output_read_again_does_not_carry_its_header_along(tmp_path, dmv):
    """parse and baseline wrote their header right above the first sentence, so the next command read it as
    that sentence's comments and wrote it again under its own (a stale '# decoder:' line; CLI audit)."""
    grind("parse", *SHORT, "-o", tmp_path / "p.conllu", dmv, TRAIN)
    grind("baseline", "--attach", "right", *SHORT, "-o", tmp_path / "b.conllu", tmp_path / "p.conllu")
    grind("parse", *SHORT, "-o", tmp_path / "p2.conllu", dmv, tmp_path / "b.conllu")
    for name in ("p.conllu", "b.conllu", "p2.conllu"):
        text = (tmp_path / name).read_text()
        assert text.count("# grind ") == 1 and text.count("# command:") == 1, name


@pytest.mark.parametrize("how", ["relative", "absolute", "other-dir"])
def test_symlink_stays_a_link_and_its_target_is_written(tmp_path, how):
    other = tmp_path / "other" if how == "other-dir" else tmp_path
    other.mkdir(exist_ok=True)
    target = other / "target.txt"
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "link.txt"
    link.symlink_to({"relative": "target.txt", "absolute": str(target), "other-dir": "other/target.txt"}[how])
    write(link, "new\n")
    assert link.is_symlink() and target.read_text() == "new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600          # a replaced file keeps its mode
    assert temps(tmp_path) == temps(other) == []


def test_chain_of_symlinks_and_a_dangling_link_create_the_final_target(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("c.txt")                          # c.txt does not exist yet
    write(tmp_path / "a")
    assert (tmp_path / "a").is_symlink() and (tmp_path / "b").is_symlink()
    assert (tmp_path / "c.txt").read_text() == "hello\n"


def test_cli_output_through_a_symlink(tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "g.txt").symlink_to("sub/real.txt")
    code, _, err = run(capsys, "make-grammar", "dmv", *SHORT, "-o", tmp_path / "g.txt", TRAIN)
    assert code == 0, err
    assert (tmp_path / "g.txt").is_symlink()
    assert (tmp_path / "sub" / "real.txt").read_text().startswith("# grind ")


def test_fifo_is_written_directly(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    write(fifo, "through the fifo\n")
    reader.join(10)
    assert got == ["through the fifo\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and temps(tmp_path) == []


def test_fifo_whose_reader_left_is_a_write_error(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)

    def read_one_byte_and_leave():
        with open(fifo, "rb") as f:
            f.read(1)
    reader = threading.Thread(target=read_one_byte_and_leave)
    reader.start()
    with pytest.raises(InputError, match=r"cannot write .*fifo: Broken pipe"):
        write(fifo, "x" * 1_000_000)
    reader.join(10)


def test_a_socket_output_is_refused_before_the_work(tmp_path, capsys):
    """A socket passed the upfront check and the write failed after training (output-layer audit)."""
    import socket
    path, g = str(tmp_path / "sock"), tmp_path / "g.txt"
    assert run(capsys, "make-grammar", "dmv", *SHORT, "-o", g, TRAIN)[0] == 0
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(path)
        code, _, err = run(capsys, "train", "--iterations", "1", *SHORT, "-o", path, g, TRAIN)
    finally:
        s.close()
    assert code != 0 and "a socket" in err and "training" not in err
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_dev_null_is_written_not_replaced(capsys):
    write("/dev/null")
    code, _, err = run(capsys, "make-grammar", "dmv", *SHORT, "-o", "/dev/null", TRAIN)
    assert code == 0, err
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_dash_is_stdout(capsys):
    write("-", "to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"


@pytest.mark.parametrize("suffix,decompress", [(".gz", gzip.decompress), (".xz", lzma.decompress),
                                               (".bz2", bz2.decompress)])
def test_compression_by_suffix(tmp_path, suffix, decompress):
    p = tmp_path / ("out.txt" + suffix)
    write(p, "compressed\n")
    assert decompress(p.read_bytes()) == b"compressed\n"
    assert [ln for _, ln in read_lines(str(p))] == ["compressed\n"]


@pytest.mark.parametrize("suffix", [".gz", ".xz", ".bz2"])
def test_corrupt_compressed_input_is_a_one_line_error(tmp_path, suffix, capsys):
    p = tmp_path / ("bad.txt" + suffix)
    p.write_bytes(b"not compressed at all\n")
    with pytest.raises(InputError, match="bad.txt" + suffix.replace(".", r"\.") + ": cannot read"):
        list(read_lines(str(p)))
    good = tmp_path / ("trunc.txt" + suffix)
    write(good, "line\n" * 10000)
    good.write_bytes(good.read_bytes()[:-30])                   # truncated
    with pytest.raises(InputError, match="cannot read"):
        list(read_lines(str(good)))


def test_binary_mode_and_checkpoint_through_a_symlink(tmp_path, dmv, capsys):
    write(tmp_path / "b.bin", b"\x00\x01", binary=True)
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
    (tmp_path / "ck").mkdir()
    (tmp_path / "c.npz").symlink_to("ck/c.npz")
    code, _, err = run(capsys, "-q", "train", *SHORT, "--iterations", "2", "--checkpoint", tmp_path / "c.npz",
                       "--checkpoint-every", "1", "-o", tmp_path / "g.txt", dmv, TRAIN)
    assert code == 0, err
    assert (tmp_path / "c.npz").is_symlink()
    assert "__header__" in np.load(tmp_path / "ck" / "c.npz").files
    assert temps(tmp_path) == temps(tmp_path / "ck") == []


# ----------------------------------------------------------------------------- atomicity

def test_an_error_in_the_block_keeps_the_previous_content(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("previous\n")
    with pytest.raises(RuntimeError):
        with open_out(str(p)) as f:
            f.write("half")
            raise RuntimeError("boom")
    assert p.read_text() == "previous\n" and temps(tmp_path) == []


def test_a_failed_write_keeps_the_previous_content(tmp_path, monkeypatch):
    import errno
    p = tmp_path / "g.txt"
    p.write_text("previous\n")

    def full(*a):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(InputError, match=r"^cannot write .*g\.txt: No space left on device$"):
        write(p, "new\n")
    assert p.read_text() == "previous\n" and temps(tmp_path) == []


def test_sigterm_inside_the_block_removes_the_temporary_file(tmp_path):
    p = tmp_path / "g.txt"
    p.write_text("previous\n")
    old = signal.signal(signal.SIGTERM, cli._terminate)
    try:
        with pytest.raises(cli.Terminated):
            with open_out(str(p)) as f:
                f.write("half")
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(5)                                    # the handler raises before this ends
    finally:
        signal.signal(signal.SIGTERM, old)
    assert p.read_text() == "previous\n" and temps(tmp_path) == []


@pytest.mark.parametrize("other_thread", [False, True])
@pytest.mark.parametrize("stage", ["link", "replace"])
def test_sigterm_while_the_file_is_renamed_strands_no_temporary_file(tmp_path, monkeypatch, stage, other_thread):
    """SIGTERM arriving between naming the temporary file and renaming it
    (the window a CI run once hit: a ``.grind-*`` file left beside the
    output) is held until the rename is done: the output is whole (new
    content), nothing is left behind, and the run still ends as terminated.
    Also with another thread alive (a progress-bar monitor, a worker pool),
    to which the kernel may deliver the signal: a signal mask in the main
    thread alone did not hold it then."""
    import threading
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait, daemon=True)
    if other_thread:
        waiter.start()
    from grind.formats import textio
    p = tmp_path / "g.txt"
    p.write_text("previous\n")
    real_link, real_replace = textio._linkat_follow, os.replace

    def link_then_signal(src, dst):
        err = real_link(src, dst)
        if stage == "link":
            os.kill(os.getpid(), signal.SIGTERM)         # the handler would run at the next bytecode
        return err

    def replace_after_signal(src, dst):
        if stage == "replace":
            os.kill(os.getpid(), signal.SIGTERM)
        return real_replace(src, dst)

    monkeypatch.setattr(textio, "_linkat_follow", link_then_signal)
    monkeypatch.setattr(textio.os, "replace", replace_after_signal)
    old = signal.signal(signal.SIGTERM, cli._terminate)
    try:
        with pytest.raises(cli.Terminated):
            with open_out(str(p)) as f:
                f.write("new\n")
    finally:
        signal.signal(signal.SIGTERM, old)
        stop.set()
    assert p.read_text() == "new\n" and temps(tmp_path) == []


def test_sigterm_to_a_training_run(tmp_path, dmv):
    out = tmp_path / "out"
    out.mkdir()
    (out / "g.txt").write_text("previous\n")
    cmd = [sys.executable, "-m", "grind.cli", "train", "--column", "UPOS", "--punct", "ud", "--iterations", "1000",
           "--tolerance", "0", "--checkpoint", out / "c.npz", "--checkpoint-every", "1",
           "--trace", out / "t.tsv", "-o", out / "g.txt", dmv, TRAIN]
    p = subprocess.Popen(list(map(str, cmd)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.splitlines()[-1] == "grind: terminated" and "Traceback" not in err
    assert temps(out) == []
    assert (out / "g.txt").read_text() == "previous\n"


# ----------------------------------------------------------------------------- one-line errors

def test_dev_full_is_a_one_line_error():
    for args in (["-o", "/dev/full"], []):
        with open("/dev/full", "w") as full:
            r = subprocess.run([sys.executable, "-m", "grind.cli", "-q", "make-grammar", "dmv", *SHORT, *args, TRAIN],
                               stdout=full, stderr=subprocess.PIPE, text=True)
        assert r.returncode == 1
        assert r.stderr.splitlines() == [f"grind: error: cannot write {args[1] if args else '<stdout>'}: "
                                         "No space left on device"]
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_to_a_full_disk(flag):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "grind.cli", flag], stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["grind: error: No space left on device"]


def test_a_closed_pipe_is_not_an_error():
    """grind ... | head -1: 2.4 MB of CoNLL into a pipe closed after one line."""
    p = subprocess.Popen([sys.executable, "-m", "grind.cli", "-q", "baseline", "--attach", "left", "--column", "UPOS",
                          TRAIN], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().startswith(b"# grind ")
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and err == ""


def test_usage_errors_for_seed_and_mix_coef(capsys):
    code, _, err = run(capsys, "train", "--seed", "-1", "g", "c")
    assert code == 2 and "--seed" in err and "Traceback" not in err
    code, _, err = run(capsys, "train", "--algo", "mixture", "--mix-coef", "0.3,abc", "g", "c")
    assert code == 2 and "'--mix-coef': not a comma-separated list of numbers" in err


# ----------------------------------------------------------------------------- upfront checks

def _bad_paths(tmp):
    ro = tmp / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    (tmp / "dangling").symlink_to("nowhere/x.txt")
    (tmp / "adir").mkdir()
    return {"missing-dir": (tmp / "no" / "x.txt", "no such directory"),
            "directory": (tmp / "adir", "is a directory"),
            "read-only-dir": (ro / "x.txt", "cannot create files"),
            "dangling-link": (tmp / "dangling", "no such directory"),
            "not-creatable": (Path("/sys/grind-probe.txt"), "cannot create files")}


@pytest.mark.parametrize("option", ["-o", "--trace", "--checkpoint"])
@pytest.mark.parametrize("case", ["missing-dir", "directory", "read-only-dir", "dangling-link", "not-creatable"])
def test_train_checks_every_output_path_before_training(tmp_path, dmv, option, case, capsys):
    path, why = _bad_paths(tmp_path)[case]
    if output_problem(str(path)) is None:
        pytest.skip(f"{path} is writable here (root ignores file modes; /sys may be absent)")
    extra = ["-o", tmp_path / "g.txt"] if option != "-o" else []
    t0 = time.time()
    code, _, err = run(capsys, "train", *SHORT, option, path, *extra, dmv, TRAIN)
    assert time.time() - t0 < 5
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("grind: error: ") and option in err and str(path) in err and why in err
    assert "Traceback" not in err and "step " not in err and "training" not in err


@pytest.mark.parametrize("option", ["-o", "--trace", "--checkpoint", "--ln-params", "--joint-output"])
def test_an_empty_file_name_is_a_usage_error(tmp_path, dmv, option, capsys):
    code, _, err = run(capsys, "train", *SHORT, option, "", dmv, TRAIN)
    assert code == 2 and "empty file name" in err and option in err and "Traceback" not in err


def test_two_outputs_naming_one_file_is_a_usage_error(tmp_path, dmv, capsys):
    (tmp_path / "alias.txt").symlink_to("g.txt")
    code, _, err = run(capsys, "train", *SHORT, "-o", tmp_path / "g.txt", "--trace", tmp_path / "alias.txt",
                       dmv, TRAIN)
    assert code == 2 and "-o/--output and --trace name the same file" in err and "step " not in err
    code, _, err = run(capsys, "train", *SHORT, "-o", "/dev/null", "--trace", "/dev/null", "--iterations", "1",
                       dmv, TRAIN)
    assert code == 0, err                                        # a device is not "one file"


def test_resume_needs_a_readable_checkpoint(tmp_path, dmv, capsys):
    code, _, err = run(capsys, "train", *SHORT, "--checkpoint", tmp_path / "c.npz", "--resume", dmv, TRAIN)
    assert code == 1 and len(err.splitlines()) == 1
    assert "--checkpoint" in err and "--resume" in err and "step " not in err


def test_output_problem_accepts_the_usual_paths(tmp_path):
    assert output_problem("-") is None
    assert output_problem(str(tmp_path / "new.txt")) is None
    assert output_problem("/dev/null") is None
    assert output_problem("") == "empty file name"


def test_stdout_closed_is_not_an_os_error():
    assert not issubclass(StdoutClosed, OSError)


@pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "O_TMPFILE"), reason="Linux O_TMPFILE")
def test_unnamed_temp_file_is_linked_without_a_named_copy(tmp_path, monkeypatch):
    """On Linux the output is written to an unnamed O_TMPFILE and linked in
    place: no named temporary file exists until the rename (so SIGKILL leaves
    none).  Regression: os.link on /proc/self/fd fails (EXDEV) and the old code
    silently fell back to a named copy."""
    from grind.formats import textio

    def no_named_temp(*a, **k):
        raise AssertionError("a named temporary file was used")

    monkeypatch.setattr(textio.tempfile, "mkstemp", no_named_temp)
    out = tmp_path / "x.txt"
    with textio.open_out(str(out)) as f:
        f.write("hi\n")
    assert out.read_text() == "hi\n" and os.listdir(tmp_path) == ["x.txt"]


# ----------------------------------------------------------------------------- outputs that are inputs, streams by name

@pytest.fixture
def small(tmp_path):
    g = tmp_path / "g.txt"
    g.write_text("0.5 S --> S S\n0.25 S --> a\n0.25 S --> b\n")
    c = tmp_path / "c.txt"
    c.write_text("a b\nb a b\n")
    return tmp_path, g, c


@pytest.mark.parametrize("make", [
    lambda d, g, c: ["train", "--algo", "em", "--iterations", "1", g, c, "-o", c],
    lambda d, g, c: ["train", "--algo", "em", "--iterations", "1", g, c, "--trace", g],
    lambda d, g, c: ["parse", g, c, "-o", g],
    lambda d, g, c: ["loglik", g, c, "-o", c],
    lambda d, g, c: ["estep", g, c, "-o", g],
    lambda d, g, c: ["make-grammar", "cnf", "-n", "1", c, "-o", c],
    lambda d, g, c: ["init", "--harmonic", "--corpus", c, g, "-o", c],
])
def test_a_command_never_writes_a_file_it_reads(small, make):
    d, g, c = small
    before = {p: p.read_bytes() for p in (g, c)}
    r = grind(*make(d, g, c), check=False)
    assert r.returncode == 2 and "which this command reads: writing it would replace the input" in r.stderr
    assert {p: p.read_bytes() for p in (g, c)} == before


@pytest.mark.slow
def test_a_grammar_may_be_rewritten_in_place(small):
    d, g, c = small
    grind("make-grammar", "from-file", g, "-o", g)
    grind("init", "--random", "--seed", "1", g, "-o", g)
    grind("train", "--algo", "em", "--iterations", "1", g, c, "-o", g)
    assert g.read_text().splitlines()[1].startswith("# command: grind train")


def test_dev_stdout_is_the_stream_not_a_file_to_replace(small):
    d, g, c = small
    log = d / "log.txt"
    log.write_text("PREVIOUS\n")
    with open(log, "a") as f:
        subprocess.run([sys.executable, "-m", "grind.cli", "init", "--random", "--seed", "1", str(g), "-o",
                        "/dev/stdout"], stdout=f, check=True)
    text = log.read_text()
    assert text.startswith("PREVIOUS\n# grind ") and "S --> S S" in text
    r = grind("train", "--algo", "em", "--iterations", "1", g, c, "-o", "/dev/stdout", "--trace", "-", check=False)
    assert r.returncode == 2 and "name the same file: standard output" in r.stderr


def test_a_compressed_checkpoint_name_is_refused_before_the_work(small):
    d, g, c = small
    r = grind("train", "--algo", "gibbs", "--iterations", "2", "--checkpoint", d / "ck.npz.gz", g, c, check=False)
    assert r.returncode == 2 and "a checkpoint is an .npz archive" in r.stderr


def test_split_needs_a_prefix_of_files(small):
    d, g, c = small
    r = grind("split", "-n", "2", "-o", "-", c, check=False)
    assert r.returncode == 2 and "shards are files named PREFIX.1EXT" in r.stderr


@pytest.mark.slow
def test_a_random_run_without_seed_records_the_seed_it_drew(tmp_path):
    """A sampler run without --seed draws its seed and records it (header and stderr);
    --seed with that number repeats the run; a run without random choices records None."""
    import re
    from conftest import sample_dmv
    c = ["--column", "UPOS", "--punct", "ud", "--max-length", "5"]
    d, train = sample_dmv(tmp_path, c)
    args = ["train", "--algo", "gibbs", *c, "--alpha", "0.5", "--iterations", "2", d / "g1.txt", train]
    r = grind(*args, "-o", tmp_path / "a.txt")
    head = (tmp_path / "a.txt").read_text()
    m = re.search(r"^# seed: (\d+) \(drawn: no --seed given\)$", head, re.M)
    assert m and f"--seed {m.group(1)} repeats this run" in r.stderr
    grind(*args, "--seed", m.group(1), "-o", tmp_path / "b.txt")
    body = [ln for ln in (tmp_path / "a.txt").read_text().splitlines() if not ln.startswith("#")]
    assert body == [ln for ln in (tmp_path / "b.txt").read_text().splitlines() if not ln.startswith("#")]
    grind("train", "--algo", "em", *c, "--iterations", "1", "-o", tmp_path / "e.txt", d / "g1.txt", train)
    assert "# seed: None\n" in (tmp_path / "e.txt").read_text()


def test_a_header_value_with_a_line_break_stays_on_one_line():
    """A file name with a newline broke the header in two (the second half read as data; CLI audit)."""
    lines = header_lines(treebank="nl\nx.conllu (conllu)")
    assert "# treebank: nl\\nx.conllu (conllu)\n" in lines and all(ln.count("\n") == 1 for ln in lines)


def test_split_checks_its_shard_paths_before_reading_the_corpus(tmp_path, capsys):
    """split read (and, from stdin, used up) the whole corpus before refusing its shard paths (audit)."""
    code, _, err = run(capsys, "split", *SHORT, "-n", "2", "-o", tmp_path / "nodir" / "x", TRAIN)
    assert code == 1 and "no such directory" in err and "sentences kept" not in err
