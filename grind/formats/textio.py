"""Reading and writing text: ``-`` is stdin/stdout, ``.gz``/``.xz``/``.bz2``
are transparent, output files are written atomically (through symlinks; FIFOs
and devices directly, see :func:`open_out`), and every output starts with a header.

The header records the grind version, the command line (or, called from
Python, the API call) and the seed, so any file says which command and options made it.
"""
from __future__ import annotations

import contextlib
import errno
import gzip
import itertools
import io
import lzma
import os
import shutil
import signal
import stat
import sys
import tempfile

from grind import __version__
from grind.errors import InputError

_run_info: dict = {"argv": None, "seed": None, "call": None, "notes": {}}


def set_run_info(argv=None, seed=None, call=None) -> None:
    """Record what is running, for the headers of files written later: the
    command line ``argv`` (the CLI), or ``call``, a Python call such as
    ``grind.fit(algo='vb')`` (the API; it replaces a recorded command line,
    as ``argv`` replaces a recorded call); and the seed."""
    if argv is not None:
        _run_info["argv"], _run_info["call"] = list(argv), None
        _run_info["notes"] = {}
    if call is not None:
        _run_info["argv"], _run_info["call"] = None, str(call)
        _run_info["notes"] = {}
    _run_info["seed"] = seed


def add_run_note(key: str, value: str) -> None:
    """A ``# key: value`` line for the header of every file the running command (or call) writes from now
    on: something it did to an input that its outputs depend on (a grammar renormalised on reading)."""
    _run_info["notes"][key] = value


def header_lines(**extra) -> list[str]:
    """``# grind VERSION``, ``# command: ...`` (or ``# call: ...`` when grind
    was called from Python, see :func:`set_run_info`), ``# seed: ...`` and
    ``# key: value`` lines."""
    if _run_info["argv"] is None and _run_info["call"] is not None:
        return _header(f"# call: {_run_info['call']}", _run_info["seed"], extra)
    if _run_info["argv"] is None:             # written from Python, by no grind command or call
        script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "an interactive session"
        return _header(f"# call: the grind library, from Python ({_quote(script)})", _run_info["seed"], extra)
    argv = _run_info["argv"]
    return _header("# command: " + " ".join(["grind"] + [_quote(a) for a in argv[1:]]), _run_info["seed"], extra)


def clear_run_info() -> None:
    """Forget the recorded command or call (a Python call that has returned: files written later are not its)."""
    _run_info.update(argv=None, seed=None, call=None, notes={})


def call_header_lines(call: str, seed, **extra) -> list[str]:
    """:func:`header_lines` for what the Python call ``call`` made with ``seed`` (not the last call recorded)."""
    return _header(f"# call: {call}", seed, extra)


def _header(run: str, seed, extra: dict) -> list[str]:
    lines = [f"# grind {__version__}", run, f"# seed: {seed}"]
    extra = {**extra, **{k: v for k, v in _run_info["notes"].items() if k not in extra}}
    lines += [f"# {k}: {one_line(str(v))}" for k, v in extra.items() if v is not None]
    return [ln + "\n" for ln in lines]


def one_line(v: str) -> str:
    """A header value on one line: a line break in it (a file name with a newline) written as ``\\n``."""
    return v.replace("\r", "\\r").replace("\n", "\\n") if "\n" in v or "\r" in v else v


def _quote(a: str) -> str:
    return a if a and all(c.isalnum() or c in "-_./=:,+@%" for c in a) else repr(a)


#: Within one CLI command (:func:`guard_stdin`): whether standard input has been opened already.
_stdin_guard: dict | None = None


def guard_stdin() -> None:
    """From here on (the CLI calls this as each command starts), a second input given as ``-`` is an
    InputError instead of reading an exhausted stream as an empty file."""
    global _stdin_guard
    _stdin_guard = {"used": False}


def stdin_bytes():
    """``sys.stdin.buffer``, once per guarded command (:func:`guard_stdin`)."""
    if _stdin_guard is not None:
        if _stdin_guard["used"]:
            raise InputError("'-' (standard input) is given for two inputs of this command, but it can be read "
                             "only once: give all but one of them as files")
        _stdin_guard["used"] = True
    return sys.stdin.buffer


def open_binary(path: str):
    """A byte stream for ``path`` (``-`` = stdin; ``.gz``/``.xz``/``.bz2`` decompressed)."""
    if path == "-":
        return stdin_bytes()
    try:
        if path.endswith(".gz"):
            return gzip.open(path, "rb")
        if path.endswith(".xz"):
            return lzma.open(path, "rb")
        if path.endswith(".bz2"):
            import bz2
            return bz2.open(path, "rb")
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def is_stream(path: str) -> bool:
    """Standard input (``-``) or anything but a regular file (a pipe, a process substitution
    ``<(...)``, a device): it can be read only once."""
    return path == "-" or (os.path.exists(path) and not os.path.isfile(path))


#: The first bytes of compressed data: (magic, what).
COMPRESSED_MAGIC = ((b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"), (b"BZh", "bzip2"))


def read_lines(path: str):
    """Yield (line number, line) of a UTF-8 text file; bad bytes name file and line."""
    name = "<stdin>" if path == "-" else path
    f = open_binary(path)
    lineno = 0
    boms: list[int] = []
    try:
        for lineno, raw in enumerate(f, 1):
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]                      # a UTF-8 byte-order mark: the file's, or one of files joined
                if lineno > 1:
                    boms.append(lineno)
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                packed = next((kind for magic, kind in COMPRESSED_MAGIC if raw.startswith(magic)), None)
                if lineno == 1 and packed:
                    raise InputError(f"{name}: {packed}-compressed data, not text: give the file by a name ending "
                                     f"in its suffix (grind decompresses .gz, .xz, .bz2), or decompress it into "
                                     "the pipe") from None
                raise InputError(f"{name}:{lineno}: not valid UTF-8 ({e.reason})") from None
    except (OSError, EOFError, lzma.LZMAError) as e:  # also corrupt .gz/.xz/.bz2 data
        raise InputError(f"{name}: cannot read: {e}") from None
    finally:
        if path != "-":
            f.close()
        if boms and (name, len(boms)) not in _BOMS_SAID:      # once a file (several readers may pass over it)
            _BOMS_SAID.add((name, len(boms)))
            from grind import log
            log.info(f"{name}: a byte-order mark (U+FEFF) began line(s) {shown(boms)} (files joined?): removed, as "
                     "at the start of a file")


#: (file, how many) of the byte-order marks inside files said already.
_BOMS_SAID: set = set()



def two_columns(path: str, name: str, expected: str):
    """Yield (line number, first field, second field) of each line of PATH with two whitespace-separated
    fields; blank lines and lines starting with ``#`` are skipped; any other line is an InputError naming
    NAME, the line and what was EXPECTED."""
    for lineno, line in read_lines(path):
        s = line.split()
        if not s or s[0].startswith("#"):
            continue
        if len(s) != 2:
            raise InputError(f"{name}:{lineno}: expected {expected}, got {line.strip()!r}")
        yield lineno, s[0], s[1]

def header_keys(lines) -> dict[str, str]:
    """The ``# key: value`` lines among ``lines`` as a dict (the first value of a key; other lines ignored)."""
    out: dict[str, str] = {}
    for line in lines:
        key, sep, value = line[2:].rstrip("\r\n").partition(": ")
        if line.startswith("# ") and sep:
            out.setdefault(key, value)
    return out


def read_header(path: str) -> dict:
    """The ``# key: value`` lines at the top of the file ``path`` (a header grind wrote) as a dict;
    empty for standard input or a pipe, which cannot be read twice."""
    if is_stream(path):
        return {}
    lines = read_lines(path)
    try:
        return header_keys(itertools.takewhile(lambda line: line.startswith("# "), (ln for _, ln in lines)))
    finally:
        lines.close()


def shown(items, limit: int = 10) -> str:
    """The first ``limit`` items for a message, comma-separated, `` ...`` when there are more."""
    items = list(items)
    return ", ".join(map(str, items[:limit])) + (" ..." if len(items) > limit else "")


def quote_line(s: str, limit: int = 80) -> str:
    """``repr`` of a line for an error message, cut to ``limit`` characters
    (``'first 80…' (N characters)``) so a huge line is never quoted in full."""
    s = s.strip()
    if len(s) <= limit:
        return repr(s)
    return f"{s[:limit]!r}… ({len(s)} characters)"


class StdoutClosed(Exception):
    """stdout's reader has gone (``grind ... | head``): not an error, the
    command line exits 0 quietly.  Not an OSError, so click does not turn it
    into exit status 1."""


def output_problem(path: str, regular: bool = False) -> str | None:
    """Why grind could not write ``path``, or None: the one upfront check of an
    output path, run before any work (so a long run does not fail at its end).

    Checked: an empty name; a directory; a missing directory (also the target
    directory of a dangling symlink); a file or device that is not writable; a
    directory where no file can be created (probed by creating and deleting a
    temporary file: os.access alone misses read-only file systems and ACLs).
    With ``regular`` (a file written more than once, or read back later by
    name: a checkpoint, shards) ``-``, a FIFO, a device or a socket is refused too."""
    if path == "":
        return "empty file name"
    if regular and (path == "-" or is_special(path)):
        return f"{'standard output' if path == '-' else 'a FIFO, device or socket'}, not a regular file"
    if path == "-":
        return None
    if is_special(path):
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):      # open() cannot write a socket: it would fail at the end
                return "a socket, which a file cannot be written to"
        except OSError:
            pass
        return None if os.access(path, os.W_OK) else "permission denied"
    if path.endswith(("/", os.sep, "/.", "/..")) or path in (".", ".."):
        return "names a directory"
    real = os.path.realpath(path)
    if os.path.isdir(real):
        return "is a directory"
    if os.path.islink(real):
        return "symlink loop"
    d = os.path.dirname(real)
    if not os.path.isdir(d):
        via = f" (the symlink's target {real})" if os.path.islink(path) else ""
        return f"no such directory: {d}{via}"
    too_long = _name_too_long(d, real)
    if too_long:
        return too_long
    if os.path.exists(real) and not os.access(real, os.W_OK):
        return "permission denied (file not writable)"
    try:                              # an unnamed probe where possible: nothing to leave behind
        os.close(os.open(d, os.O_TMPFILE | os.O_WRONLY, 0o600))
        return None
    except (AttributeError, OSError) as e:
        if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC):
            return f"cannot create files in {d}: {e.strerror or e}"
    with _signals_held():
        try:
            fd, probe = tempfile.mkstemp(prefix=".grind-", dir=d)
        except OSError as e:
            return f"cannot create files in {d}: {e.strerror or e}"
        os.close(fd)
        os.unlink(probe)
    return None


def _name_too_long(d: str, real: str) -> str | None:
    """Why the file system of directory ``d`` cannot hold a file named ``real`` (its name or its
    whole path longer than the system's limit), or None.  (Creating an unnamed probe file does not
    test the name: the rename at the end of the run would fail.)"""
    def limit(what, default):
        try:
            return os.pathconf(d, what) or default
        except (OSError, ValueError, AttributeError):
            return default
    name, name_max = len(os.fsencode(os.path.basename(real))), limit("PC_NAME_MAX", 255)
    if name > name_max:
        return f"the file name is too long for its file system ({name} bytes, at most {name_max})"
    whole, path_max = len(os.fsencode(real)), limit("PC_PATH_MAX", 4096)
    if whole >= path_max:
        return f"the path is too long ({whole} bytes, under {path_max} needed)"
    return None


#: :func:`stream_name` of the standard error stream.
STDERR = "<stderr>"
_STREAMS = {"/dev/stdout": "-", "/dev/fd/1": "-", "/proc/self/fd/1": "-",
            "/dev/stderr": STDERR, "/dev/fd/2": STDERR, "/proc/self/fd/2": STDERR}


def _open_special(path: str):
    """A FIFO or device opened for writing; a FIFO nobody reads yet is said on stderr before the open blocks."""
    import errno
    import stat as st
    if st.S_ISFIFO(os.stat(path).st_mode):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            from grind import log
            log.info(f"{path}: a FIFO that no process reads yet: waiting for a reader to write the output")
        else:
            os.set_blocking(fd, True)                 # the reader is there: keep this end, never close-and-reopen
            return os.fdopen(fd, "wb")
    return open(path, "wb")


def stream_name(path: str) -> str:
    """``-`` for a name of the standard output (``/dev/stdout``, ``/dev/fd/1``), :data:`STDERR` for one of the
    standard error, else ``path``: written as the stream itself (appending to what the shell redirected it to),
    never by opening the name again, which would truncate or replace a redirected file."""
    return _STREAMS.get(path, path)


def same_file(a: str, b: str) -> bool:
    """True when output paths ``a`` and ``b`` name the same regular (or new) file."""
    if "-" in (a, b) or not a or not b:
        return False
    return not is_special(a) and os.path.realpath(a) == os.path.realpath(b)


def is_special(path: str) -> bool:
    """True for an existing FIFO, device or socket, symlinks followed
    (``/dev/stdout`` on a pipe): written in place, never replaced."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _compressor(path: str, raw):
    """``raw`` wrapped in the compressor that the suffix of ``path`` names (.gz, .xz, .bz2)."""
    if path.endswith(".gz"):
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
    if path.endswith(".xz"):
        return lzma.LZMAFile(raw, "wb")
    if path.endswith(".bz2"):
        import bz2
        return bz2.BZ2File(raw, "wb")
    return None


def _linkat_follow(src: str, dst: str) -> int:
    """``linkat(AT_FDCWD, src, AT_FDCWD, dst, AT_SYMLINK_FOLLOW)``: 0 or the errno.
    (``os.link`` calls plain ``link()``, which links the /proc/self/fd symlink
    itself and fails with EXDEV; following it names the unnamed file.)"""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        at_fdcwd, at_symlink_follow = -100, 0x400
        if libc.linkat(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), at_symlink_follow) == 0:
            return 0
        return ctypes.get_errno() or errno.EIO
    except (OSError, AttributeError):
        return errno.ENOSYS


#: The signals a commit holds back (SIGHUP: a closed terminal or ssh session; not on Windows).
HELD_SIGNALS = (signal.SIGTERM, signal.SIGINT) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


@contextlib.contextmanager
def _signals_held():
    """SIGTERM, SIGINT and SIGHUP held back (not lost) for the block: a rename and the
    bookkeeping of the temporary name happen together or not at all, so an
    interrupt never strands a ``.grind-*`` file.  Held signals reach their
    handlers when the block ends.

    Python runs signal handlers in the main thread, but the kernel may deliver
    a process-directed signal to any thread (a progress-bar monitor, a worker
    pool), so blocking it in this thread's mask is not enough: in the main
    thread the handlers are swapped for a recorder and the recorded signals
    re-raised afterwards; elsewhere (handlers cannot be set there) the mask."""
    held, pending = HELD_SIGNALS, []
    try:
        old = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in held}
    except ValueError:                                # not the main thread
        with _masked(held):
            yield
        return
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


@contextlib.contextmanager
def _masked(signals):
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    except (AttributeError, OSError, ValueError):    # no pthread_sigmask here
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _Temp:
    """A temporary file beside ``real`` that becomes ``real`` on :meth:`commit`.

    Where the system allows (Linux ``O_TMPFILE``) the file has no name until
    the commit links it, so even SIGKILL leaves nothing behind -- except between
    the commit's link and its rename (two system calls; SIGKILL cannot be held),
    when the finished file stays under its ``.grind-*`` name; elsewhere it is
    a ``.grind-*`` file that :meth:`discard` removes."""

    def __init__(self, real: str):
        self.real, self.dir, self.name = real, os.path.dirname(real), None
        self.mode = stat.S_IMODE(os.stat(real).st_mode) if os.path.exists(real) else None
        with _signals_held():
            try:
                self.fd = os.open(self.dir, os.O_TMPFILE | os.O_RDWR, 0o600)
            except (AttributeError, OSError):
                self.fd, self.name = tempfile.mkstemp(prefix=".grind-", dir=self.dir)

    def commit(self) -> None:
        """Give the file its mode and rename it over ``real`` (atomic on POSIX)."""
        with _signals_held():
            self.prepare()
            self._rename()

    def prepare(self) -> None:
        """Give the file its mode and a name (``.grind-*``) beside ``real``: ready for the rename."""
        if self.mode is None:
            mask = os.umask(0)
            os.umask(mask)
            self.mode = 0o666 & ~mask
        os.chmod(self.name or self.fd, self.mode)
        if self.name is None:
            self.name = self._link()

    def _rename(self) -> None:
        assert self.name is not None                     # prepare() named it
        os.replace(self.name, self.real)
        self.name = None
        self.close()

    def keep_old(self) -> str | None:
        """A second name (``.grind-old-*``, a hard link, else a copy) for the file ``real`` as it is
        now, so that a failed group can put it back; None when there is no such file."""
        if not os.path.isfile(self.real):
            return None
        for _ in range(100):
            name = os.path.join(self.dir, f".grind-old-{os.urandom(6).hex()}")
            try:
                os.link(self.real, name)
                return name
            except FileExistsError:
                continue
            except OSError:
                break
        fd, name = tempfile.mkstemp(prefix=".grind-old-", dir=self.dir)
        os.close(fd)
        try:
            shutil.copy2(self.real, name)
        except BaseException:
            os.unlink(name)
            raise
        return name

    def _link(self) -> str:
        """A name for the anonymous file (via /proc/self/fd; else a copy)."""
        for _ in range(100):
            name = os.path.join(self.dir, f".grind-{os.urandom(6).hex()}")
            err = _linkat_follow(f"/proc/self/fd/{self.fd}", name)
            if err == 0:
                return name
            if err != errno.EEXIST:
                break
        fd, name = tempfile.mkstemp(prefix=".grind-", dir=self.dir)
        with os.fdopen(fd, "wb") as dst, os.fdopen(os.dup(self.fd), "rb") as src:
            src.seek(0)
            shutil.copyfileobj(src, dst)
        assert self.mode is not None                     # commit() set it
        os.chmod(name, self.mode)
        return name

    def discard(self) -> None:
        with _signals_held():
            if self.name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.name)
                self.name = None
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None  # type: ignore[assignment]  # closed: no method but close() runs after this


#: Open :func:`output_group` blocks: lists of written files waiting for their rename.
_groups: list[list[_Temp]] = []


@contextlib.contextmanager
def output_group():
    """Files written with :func:`open_out` inside this block are renamed into
    place together when it ends without error, and none of them is if it
    fails: a command with several outputs (``train -o G --trace T
    --ln-params P``) replaces all or none.  (FIFOs, devices and ``-`` are
    written directly, as always.)"""
    pending: list[_Temp] = []
    _groups.append(pending)
    try:
        yield
        _groups.pop()
        with _signals_held():                        # an interrupt does not split the group
            _commit_all(pending)
    finally:
        if _groups and _groups[-1] is pending:
            _groups.pop()
        for t in pending:
            t.discard()


def _commit_all(pending: list[_Temp]) -> None:
    """Rename every file of ``pending`` into place, or (a rename failed) none: the files replaced
    before the failure are put back as they were (a new one removed); InputError naming the file
    that could not be written.  ``pending`` is emptied as files are committed."""
    done: list[tuple[_Temp, str | None]] = []          # (committed, its old file's second name)
    current = None
    try:
        for t in pending:
            current = t
            t.prepare()
        for t in list(pending):
            current = t
            old = t.keep_old()
            t._rename()
            done.append((t, old))
            pending.remove(t)
    except OSError as e:
        for t, old in reversed(done):
            with contextlib.suppress(OSError):
                if old is None:
                    os.unlink(t.real)
                else:
                    os.replace(old, t.real)
        raise InputError(f"cannot write {current.real if current else '?'}: {e.strerror or e}"
                         + (f" (nothing written: {len(done)} file(s) of the group put back as they were)"
                            if done else "")) from None
    finally:
        for _, old in done:
            if old is not None and os.path.exists(old):
                with contextlib.suppress(OSError):
                    os.unlink(old)


@contextlib.contextmanager
def open_out(path: str, binary: bool = False):
    """A stream (text, or bytes with ``binary=True``) for writing ``path``.

    * ``-`` is stdout, written directly.
    * A symlink is followed to its final target, and the target is written as
      below: the link stays a link.
    * A FIFO, character or block device (``/dev/null``, ``/dev/stdout``) is
      opened and written directly: no temporary file, never replaced.
    * A regular file (or a new one) is written to a temporary file beside it
      (unnamed where the system allows, else ``.grind-*``), renamed over it
      only when the block ends without error (or, inside :func:`output_group`,
      when the group does): a failed or interrupted run leaves the previous
      content intact, and nobody ever sees a half-written file.  A new file
      gets mode 0666 minus the umask; a replaced file keeps its mode.
    * ``.gz``, ``.xz`` and ``.bz2`` names are compressed (not ``-``).

    A failed write (disk full, I/O error, a FIFO's reader gone, ...) raises
    :class:`InputError` ``cannot write PATH: REASON``; a closed stdout pipe
    raises :class:`StdoutClosed`, which the command line exits 0 on quietly.
    """
    path = stream_name(os.fspath(path))
    if path in ("-", STDERR):
        std = sys.stdout if path == "-" else sys.stderr
        out = std.buffer if binary else std
        try:
            std.flush()
            yield out
            out.flush()
        except BrokenPipeError:
            raise StdoutClosed() from None
        except OSError as e:
            if e.filename is not None:
                raise
            raise InputError(f"cannot write <stdout>: {e.strerror or e}") from None
        return
    temp, in_body = None, False
    try:
        if is_special(path):
            raw = _open_special(path)
        else:
            temp = _Temp(os.path.realpath(path))
            raw = os.fdopen(os.dup(temp.fd), "wb")
        with raw:
            stream = _compressor(path, raw) or raw
            with stream:
                in_body = True
                if binary:
                    yield stream
                else:
                    with io.TextIOWrapper(stream, encoding="utf-8") as f:
                        yield f
                in_body = False
        if temp is not None:
            if _groups:
                _groups[-1].append(temp)
            else:
                temp.commit()
            temp = None
    except OSError as e:
        if in_body and e.filename is not None:
            raise  # not ours: the block failed on another file
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if temp is not None:
            temp.discard()
