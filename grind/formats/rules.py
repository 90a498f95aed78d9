"""The rule-file format shared by grammars and count files (Mark Johnson's): one rule a line,

    [weight [pseudocount]] LHS --> RHS1 RHS2 ...

with ``# key: value`` header lines.  A rule's key (``LHS --> RHS ...``) is the
same in every file grind writes, so count files of shards add up by key.
"""
from __future__ import annotations

import contextlib
import gc
import gzip
import hashlib
import io
import lzma
import json
import math
import os
import stat
import tempfile
import time
import zlib
from dataclasses import dataclass
from itertools import chain

import numpy as np

from grind.errors import InputError, NumericalError
from grind.formats.textio import is_stream, open_binary, quote_line, read_lines, stdin_bytes

ARROW = "-->"


def check_rule_count(name, meta: dict, n_read: int, hint: str) -> None:
    """The ``# rules: N`` header line of a file grind wrote (a grammar, counts) against the ``n_read``
    rules read: a file cut short (an interrupted copy, ``head``) is an error (``hint`` says what to do),
    not a smaller grammar or count set.  A file without the line is not checked."""
    if "rules" not in meta:
        return
    try:
        n = int(meta["rules"])
    except ValueError:
        raise InputError(f"{name}: header '# rules: {meta['rules']}' is not a whole number") from None
    if n != n_read:
        raise InputError(f"{name}: the header says {n} rules but the file has {n_read} ({hint})")


def unholdable(token: str) -> bool:
    """A token no rule line can hold as a symbol: empty, with whitespace in it, or the arrow."""
    return not token or token == ARROW or any(c.isspace() for c in token)
#: The ``# weights:`` header of count files (grind estep / sum).
COUNTS_HEADER = "expected rule counts"
#: How a grammar file's ``# weights:`` header names Dirichlet pseudo-counts.
PSEUDO_COUNTS = "Dirichlet pseudo-counts"


def rule_key(lhs: str, rhs: tuple[str, ...]) -> str:
    return f"{lhs} {ARROW} {' '.join(rhs)}"


def fingerprint_keys(keys) -> str:
    """16 hex digits of the SHA-256 of rule keys in order, each followed by a newline."""
    h = hashlib.sha256()
    for k in keys:
        h.update(k.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()[:16]


def parse_rule_line(line: str, where: str, layout: str = "[weight [pseudocount]]"):
    """``[weight [pseudocount]] LHS --> RHS...`` -> (weight, pseudocount, lhs, rhs).
    ``layout`` names the numbers allowed before the LHS (``"count"``: exactly one)."""
    toks = line.split()
    try:
        p = toks.index(ARROW)
    except ValueError:
        raise InputError(f"{where}: no '{ARROW}' in rule line: {quote_line(line)}") from None
    if p == 0:
        raise InputError(f"{where}: rule has no left-hand side: {quote_line(line)}")
    nums, lhs, rhs = toks[: p - 1], toks[p - 1], tuple(toks[p + 1:])
    if len(nums) > (1 if layout == "count" else 2) or (layout == "count" and not nums):
        raise InputError(f"{where}: expected '{layout} LHS --> RHS...', got {quote_line(line)}")
    if not rhs:
        raise InputError(f"{where}: rule {lhs} {ARROW} has an empty right-hand side")
    if ARROW in rhs:
        raise InputError(f"{where}: more than one '{ARROW}' in {quote_line(line)}")
    vals = []
    for s in nums:
        try:
            if "_" in s or not s.isascii():     # Python's float reads '1_0' as 10 and Arabic-Indic digits
                raise ValueError(s)
            v = float(s)
        except ValueError:
            raise InputError(f"{where}: weight {quote_line(s)} is not a number") from None
        if not math.isfinite(v) or v < 0:
            raise InputError(f"{where}: weight {s} must be finite and non-negative")
        vals.append(v)
    weight = vals[0] if vals else 1.0
    pseudo = vals[1] if len(vals) > 1 else None
    return weight, pseudo, lhs, rhs


def _numbers(k: int) -> str:
    return {0: "no number", 1: "one number (a weight)", 2: "two numbers (weight, pseudo-count)"}.get(k, f"{k} numbers")


def parse_header_meta(line: str, meta: dict) -> None:
    """Record a ``# key: value`` header line in ``meta``."""
    body = line.lstrip("#").strip()
    if ":" in body:
        k, v = body.split(":", 1)
        k = k.strip()
        if k and " " not in k:
            meta.setdefault(k, v.strip())


def read_rule_file(path: str, layout: str = "[weight [pseudocount]]"):
    """(rules, weights, pseudocounts, meta) of a rule file; errors name file:line.
    ``layout="count"``: one number a line (count files).  ``pseudocounts`` has
    one entry a rule, None where the line gives none."""
    p = _parse_file(path, layout)
    return p.rules(), p.weights, p.pseudo_list(), p.meta


def _read_rules_slowly(lines, path: str, layout: str):
    """The line-by-line reader: the reference :func:`_parse_fast` must agree
    with, and what finds and reports the first bad line (file:line)."""
    rules, weights, pseudos = [], [], []
    meta: dict[str, str] = {}
    lines_of: dict[str, int] = {}
    first = None                        # (line, how many numbers) of the first rule line
    for lineno, line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            parse_header_meta(s, meta)
            continue
        where = f"{'<stdin>' if path == '-' else path}:{lineno}"
        w, pc, lhs, rhs = parse_rule_line(s, where, layout)
        k = s.split().index(ARROW) - 1
        if first is None:
            first = (lineno, k)
        elif k != first[1]:
            raise InputError(f"{where}: {_numbers(k)} before the rule, but line {first[0]} has {_numbers(first[1])} "
                             f"(a lost or extra weight?  Every rule line of a file has the same layout, "
                             f"'{layout} LHS --> RHS...'): {quote_line(s)}")
        key = rule_key(lhs, rhs)
        if key in lines_of:
            raise InputError(f"{where}: duplicate rule {key} (first at line {lines_of[key]})")
        lines_of[key] = lineno
        rules.append((lhs, rhs))
        weights.append(w)
        pseudos.append(pc)
    if not rules:
        raise InputError(f"{'<stdin>' if path == '-' else path}: no rules")
    return rules, np.array(weights, dtype=np.float64), pseudos, meta


# --------------------------------------------------------------------------
# Rules as arrays over a symbol table, a fast reader, and a cache


@dataclass
class RuleTable:
    """Rules as integer arrays over a table of distinct symbols: rule r is
    ``symbols[lhs[r]] --> symbols[rhs[rhs_off[r]]] ... symbols[rhs[rhs_off[r+1]-1]]``."""

    symbols: list[str]
    lhs: np.ndarray           # int32, one a rule
    rhs_off: np.ndarray       # int64, one a rule + 1
    rhs: np.ndarray           # int32

    def __len__(self) -> int:
        return len(self.lhs)

    @classmethod
    def of_rules(cls, rules) -> RuleTable:
        """The table of a list of ``(lhs, rhs tuple)`` rules."""
        rhs_toks = list(chain.from_iterable(rhs for _, rhs in rules))
        lhs = [a for a, _ in rules]
        off = np.zeros(len(rules) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, (rhs for _, rhs in rules)), dtype=np.int64, count=len(rules)), out=off[1:])
        return cls._of_tokens(lhs, rhs_toks, off)

    @classmethod
    def _of_tokens(cls, lhs: list, rhs_toks: list, rhs_off: np.ndarray) -> RuleTable:
        sid = {s: i for i, s in enumerate(dict.fromkeys(chain(lhs, rhs_toks)))}
        return cls(list(sid), np.fromiter(map(sid.__getitem__, lhs), dtype=np.int32, count=len(lhs)), rhs_off,
                   np.fromiter(map(sid.__getitem__, rhs_toks), dtype=np.int32, count=len(rhs_toks)))

    def rules(self) -> list[tuple[str, tuple[str, ...]]]:
        """``[(lhs, rhs tuple), ...]``: the symbols' strings shared, and equal
        right-hand sides one tuple (made once per distinct right-hand side)."""
        get = self.symbols.__getitem__
        k = np.diff(self.rhs_off)
        rhs = np.empty(len(self.lhs), dtype=object)
        for kk in np.flatnonzero(np.bincount(k)).tolist():    # the distinct right-hand sides of each length
            rows = np.flatnonzero(k == kk)
            cols = self.rhs[self.rhs_off[rows][:, None] + np.arange(kk)]
            uniq, inv = _unique_rows(cols, len(self.symbols)) if kk else (np.zeros((1, 0), np.int64), rows * 0)
            made = zip(*(map(get, c) for c in uniq.T.tolist())) if kk else [()]
            rhs[rows] = np.fromiter(made, dtype=object, count=len(uniq))[inv]
        sym = np.fromiter(self.symbols, dtype=object, count=len(self.symbols))
        with _no_gc():
            return list(zip(sym[self.lhs].tolist(), rhs.tolist()))

    def duplicate(self) -> bool:
        """Whether two rules are the same (same symbols: the tables's symbols are distinct).
        Rules of one arity whose ids fit one int64 key are compared by sorting
        the keys (8 bytes a rule besides the sort's copy), others row by row."""
        k = np.diff(self.rhs_off)
        S = max(len(self.symbols), 2)
        for kk in np.unique(k).tolist():
            rows = np.flatnonzero(k == kk)
            if (kk + 1) * math.log2(S) <= 62:
                key = self.lhs[rows].astype(np.int64)
                start = self.rhs_off[rows]
                for j in range(kk):
                    key *= S
                    key += self.rhs[start + j]
                del start
                key.sort()
                if len(key) > 1 and bool(np.any(key[1:] == key[:-1])):
                    return True
                continue
            cols = np.column_stack([self.lhs[rows], self.rhs[self.rhs_off[rows][:, None] + np.arange(kk)]])
            if len(_unique_rows(cols, len(self.symbols))[0]) != len(rows):
                return True
        return False

    def slice(self, lo: int, hi: int) -> RuleTable:
        """Rules ``lo`` .. ``hi - 1`` over the same symbols."""
        off = self.rhs_off[lo:hi + 1]
        return RuleTable(self.symbols, self.lhs[lo:hi], off - off[0], self.rhs[off[0]:off[-1]])

    def take(self, rows) -> RuleTable:
        """The rules ``rows`` (indices, in that order) over the same symbols."""
        rows = np.asarray(rows, dtype=np.int64)
        k = np.diff(self.rhs_off)[rows]
        off = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(k, out=off[1:])
        at = np.repeat(self.rhs_off[rows] - off[:-1], k) + np.arange(int(off[-1]), dtype=np.int64)
        return RuleTable(self.symbols, self.lhs[rows], off, self.rhs[at])

    def same(self, other: RuleTable) -> bool:
        """Whether ``other`` holds the same rules in the same order (its symbol
        table may list the symbols in another order: two files of the same
        rules read in different pieces do)."""
        if self is other:
            return True
        if len(self) != len(other) or len(self.rhs) != len(other.rhs) \
                or not np.array_equal(self.rhs_off, other.rhs_off):
            return False
        if self.symbols == other.symbols:
            return bool(np.array_equal(self.lhs, other.lhs) and np.array_equal(self.rhs, other.rhs))
        pos = {x: i for i, x in enumerate(self.symbols)}
        remap = np.fromiter((pos.get(x, -1) for x in other.symbols), dtype=np.int32, count=len(other.symbols))
        return bool(np.array_equal(remap[other.lhs], self.lhs) and np.array_equal(remap[other.rhs], self.rhs))

    def keys(self, lo: int = 0, hi: int | None = None, _parts=None) -> list[str]:
        """The keys (``LHS --> RHS ...``, as :func:`rule_key` makes them) of
        rules ``lo`` .. ``hi - 1``, built with numpy string concatenation per
        arity (no tuples)."""
        hi = len(self) if hi is None else hi
        sym, arrow, spaced = _parts if _parts is not None else self._key_parts()
        off = self.rhs_off[lo:hi + 1]
        k = np.diff(off)
        out = np.empty(hi - lo, dtype=object)
        for kk in np.unique(k).tolist():
            rows = np.flatnonzero(k == kk)
            start = off[rows]
            s = arrow[self.lhs[lo + rows]]
            for j in range(kk):
                s = s + (sym if j == 0 else spaced)[self.rhs[start + j]]
            out[rows] = s
        return out.tolist()

    def _key_parts(self):
        """Object arrays over the symbols: ``s``, ``s + " --> "`` and ``" " + s``."""
        sym = np.fromiter(self.symbols, dtype=object, count=len(self.symbols))
        return sym, sym + f" {ARROW} ", " " + sym

    def key_chunks(self, chunk: int | None = None):
        """The rule keys in order, as lists of at most ``chunk`` keys."""
        chunk = KEY_CHUNK if chunk is None else chunk
        parts = self._key_parts()
        for lo in range(0, len(self), chunk):
            yield self.keys(lo, min(lo + chunk, len(self)), parts)

    def check(self) -> None:
        """ValueError unless the arrays describe rules over the symbols."""
        R, S = len(self.lhs), len(self.symbols)
        off = self.rhs_off
        if (self.lhs.dtype != np.int32 or self.rhs.dtype != np.int32 or off.dtype != np.int64
                or self.lhs.ndim != 1 or self.rhs.ndim != 1 or off.shape != (R + 1,)):
            raise ValueError("rule table: bad array shapes or types")
        if off[0] != 0 or off[-1] != len(self.rhs) or np.any(np.diff(off) < 0):
            raise ValueError("rule table: bad right-hand side offsets")
        for ids in (self.lhs, self.rhs):
            if ids.size and (ids.min() < 0 or ids.max() >= S):
                raise ValueError("rule table: symbol id out of range")
        if len(set(self.symbols)) != S:
            raise ValueError("rule table: symbols repeat")


def _unique_rows(m: np.ndarray, base: int):
    """Distinct rows of the id matrix ``m`` (ids < ``base``), in order, and each row's index among them."""
    m = np.asarray(m, dtype=np.int64)                  # 2-D
    if m.shape[1] * math.log2(max(base, 2)) <= 62:
        key = np.zeros(len(m), dtype=np.int64)
        for c in m.T:
            key = key * base + c
        if base ** m.shape[1] <= max(1 << 22, 4 * len(m)):      # few possible rows: count them
            seen = np.zeros(base ** m.shape[1], dtype=bool)
            seen[key] = True
            rank = np.cumsum(seen) - 1
            first = np.zeros(int(rank[-1]) + 1 if len(m) else 0, dtype=np.int64)
            first[rank[key[::-1]]] = np.arange(len(m) - 1, -1, -1)   # the first row with each key
            return m[first], rank[key]
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return m[first], inv.reshape(-1)
    uniq, inv = np.unique(m, axis=0, return_inverse=True)
    return uniq, inv.reshape(-1)


@contextlib.contextmanager
def _no_gc():
    """The cyclic garbage collector paused while many tuples are made: it
    would traverse the growing list of them again at every collection."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass
class ParsedRules:
    """A rule file read: the rules as a :class:`RuleTable`, their weights, the
    pseudo-counts (None if no line has one; 0 where a line has none) and the
    ``# key: value`` header."""

    table: RuleTable
    weights: np.ndarray
    pseudo: np.ndarray | None
    meta: dict
    given: np.ndarray | None = None      # which lines give a pseudo-count (when some do)
    made: list | None = None             # the rule tuples, when already made
    numbers: int = -1                    # numbers before the LHS on every line (-1: not recorded)

    def rules(self) -> list[tuple[str, tuple[str, ...]]]:
        if self.made is None:
            self.made = self.table.rules()
        return self.made

    def pseudo_list(self) -> list:
        """One entry a rule: its pseudo-count, None where its line gives none."""
        if self.pseudo is None or self.given is None:
            return [None] * len(self.weights)
        return [v if g else None for v, g in zip(self.pseudo.tolist(), self.given.tolist())]


def _read_bytes(path: str) -> bytes | None:
    """The bytes of ``path`` decompressed (``-`` = stdin), or None when the
    compressed data are bad (the line reader then reports it as before)."""
    if path == "-":
        return stdin_bytes().read()
    return _decompress(_raw_bytes(path), path)


def _raw_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None


def _decompress(raw: bytes, path: str) -> bytes | None:
    """``raw`` decompressed by the suffix of ``path`` (as :func:`open_binary` reads it)."""
    if not path.endswith((".gz", ".xz", ".bz2")):
        return raw
    try:
        if path.endswith(".gz"):
            return gzip.GzipFile(fileobj=io.BytesIO(raw), mode="rb").read()
        if path.endswith(".xz"):
            return lzma.LZMAFile(io.BytesIO(raw), "rb").read()
        import bz2
        return bz2.BZ2File(io.BytesIO(raw), "rb").read()
    except (OSError, EOFError, ValueError, lzma.LZMAError):
        return None


def _byte_lines(data: bytes, path: str):
    """(line number, line) of ``data`` exactly as :func:`read_lines` yields a file's."""
    name = "<stdin>" if path == "-" else path
    for lineno, raw in enumerate(io.BytesIO(data), 1):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{name}:{lineno}: not valid UTF-8 ({e.reason})") from None


def _parse(data: bytes | None, path: str, layout: str) -> ParsedRules:
    """A rule file's content (``data``: its decompressed bytes; None: read it
    line by line, as corrupt compressed data are reported).  Well-formed files
    take the fast path; anything else is read line by line, which raises the
    error of the first bad line."""
    if data is not None:
        fast = _parse_chunks(data, path, layout)
        if fast is not None:
            return fast
    lines = read_lines(path) if data is None else _byte_lines(data, path)
    rules, weights, pseudos, meta = _read_rules_slowly(lines, path, layout)
    given = np.array([p is not None for p in pseudos], dtype=bool)
    pc = np.array([0.0 if p is None else p for p in pseudos], dtype=np.float64) if given.any() else None
    return ParsedRules(RuleTable.of_rules(rules), weights, pc, meta, given if given.any() else None, rules)


#: Bytes of a rule file parsed at once by the fast reader: its temporaries (a
#: string per token) are ~15 times the text, so a large file goes in pieces.
CHUNK_BYTES = 4 << 20


def _parse_chunks(data: bytes, path: str, layout: str, chunk: int | None = None) -> ParsedRules | None:
    """:func:`_parse_pieces` over pieces of ``data`` of about ``chunk`` bytes (cut after a newline)."""
    chunk = CHUNK_BYTES if chunk is None else chunk

    def pieces():
        lo = 0
        while lo < len(data):
            hi = data.find(b"\n", min(lo + chunk, len(data)) - 1) + 1 or len(data)
            yield data[lo:hi]
            lo = hi
    return _parse_pieces(pieces(), path, layout)


class _BadData(Exception):
    """Compressed data that do not decompress (the line reader reports them)."""


def _file_pieces(path: str, chunk: int):
    """The decompressed bytes of the file ``path`` (not stdin) in pieces of
    about ``chunk`` bytes, each cut after a newline (the last: the rest), read
    as a stream: the file is never held whole.  _BadData for corrupt
    compressed data."""
    f = open_binary(path)
    try:
        rest = b""
        while True:
            try:
                block = f.read(chunk)
            except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as e:
                raise _BadData(str(e)) from None
            if not block:
                break
            data = rest + block if rest else block
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield data[:cut]
        if rest:
            yield rest
    finally:
        f.close()


def _parse_file(path: str, layout: str) -> ParsedRules:
    """A rule file read as :func:`_parse` reads its bytes, but streamed in
    pieces (:func:`_file_pieces`, :func:`_parse_pieces`): only the piece being
    parsed and the arrays of the rules so far are in memory.  Anything the
    fast path does not take goes to the line reader, which names the problem.  Standard input or a pipe is
    read once, whole (the line reader then reads those bytes)."""
    if is_stream(path):
        return _parse(_read_bytes(path), path, layout)
    try:
        fast = _parse_pieces(_file_pieces(path, CHUNK_BYTES), path, layout)
    except _BadData:
        fast = None
    return fast if fast is not None else _parse(None, path, layout)


def _parse_pieces(pieces, path: str, layout: str) -> ParsedRules | None:
    """:func:`_parse_fast` over ``pieces`` of a file (bytes, each ending after
    a newline but the last), each piece's symbols mapped into one table as it
    is read (its own strings and tables then dropped); None (the line reader
    then reads the file and names the problem) if some piece is not
    well-formed UTF-8 rules, or two rules of the file are the same.  Header
    lines: the first value of a key counts, as in the line reader."""
    meta: dict[str, str] = {}
    sid: dict[str, int] = {}
    lhs: list[np.ndarray] = []
    rhs: list[np.ndarray] = []
    arity: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    pseudo: list[np.ndarray | None] = []
    given: list[np.ndarray | None] = []
    first, numbers = True, -1
    for data in pieces:
        if first and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        first = False
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        del data
        part = _parse_fast(text, path, layout, allow_empty=True)
        del text
        if part is None:
            return None
        for k, v in part.meta.items():
            meta.setdefault(k, v)
        if not len(part.weights):
            continue
        if numbers not in (-1, part.numbers):
            return None                          # pieces of two layouts: the line reader names the line
        numbers = part.numbers
        t = part.table
        remap = np.fromiter((sid.setdefault(x, len(sid)) for x in t.symbols), dtype=np.int32, count=len(t.symbols))
        lhs.append(remap[t.lhs])
        rhs.append(remap[t.rhs])
        arity.append(np.diff(t.rhs_off).astype(np.int32))
        weights.append(part.weights)
        pseudo.append(part.pseudo)
        given.append(part.given)
    if not lhs:
        raise InputError(f"{'<stdin>' if path == '-' else path}: no rules")
    n_parts = len(lhs)
    pc = gv = None
    if any(p is not None for p in pseudo):
        pc = np.concatenate([p if p is not None else np.zeros(len(w)) for p, w in zip(pseudo, weights)])
        gv = np.concatenate([g if g is not None else np.zeros(len(w), dtype=bool) for g, w in zip(given, weights)])
    del pseudo, given
    off = np.zeros(sum(map(len, lhs)) + 1, dtype=np.int64)
    np.cumsum(_concat(arity), out=off[1:])
    table = RuleTable(list(sid), _concat(lhs), off, _concat(rhs))
    if n_parts > 1 and table.duplicate():       # one piece: _parse_fast has checked it
        return None
    return ParsedRules(table, _concat(weights), pc, meta, gv)


def _concat(parts: list) -> np.ndarray:
    """``np.concatenate(parts)``, emptying the list (the parts are freed as soon as copied)."""
    out = np.concatenate(parts)
    parts.clear()
    return out


#: The characters ``str.split()`` splits ASCII text at.
_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True


def _tokens(text: str):
    """``(tokens, per line: number of tokens, per line: a comment, per token:
    is the arrow)`` of ``text``'s lines (split at ``\n``), each line's tokens
    those of ``line.split()``.  ASCII text is split in one call and its
    lines found by array operations on the bytes."""
    if not text.isascii():
        lines = text.split("\n")
        toks = list(map(str.split, lines))
        ntok = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))
        flat = list(chain.from_iterable(toks))
        first = np.cumsum(ntok) - ntok
        comment = np.zeros(len(lines), dtype=bool)
        has = np.flatnonzero(ntok > 0)
        comment[has] = [flat[f].startswith("#") for f in first[has].tolist()]
        is_arrow = np.fromiter(map(ARROW.__eq__, flat), dtype=bool, count=len(flat))
        return flat, ntok, comment, is_arrow, lambda i: lines[i]
    b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    space = _ASCII_SPACE[b]
    edge = np.diff(space.astype(np.int8), prepend=np.int8(1), append=np.int8(1))
    starts = np.flatnonzero(edge == -1)          # space -> token
    ends = np.flatnonzero(edge == 1)             # token -> space (exclusive ends)
    newline = np.flatnonzero(b == 10)
    line_start = np.concatenate([[0], newline + 1])
    line_end = np.concatenate([newline, [len(b)]])
    tok_line = np.searchsorted(newline, starts)  # newlines before the token
    ntok = np.bincount(tok_line, minlength=len(line_start)).astype(np.int64)
    flat = text.split()
    if len(flat) != len(starts):                 # cannot be; be safe
        raise AssertionError("token count mismatch")
    first = np.cumsum(ntok) - ntok
    comment = np.zeros(len(line_start), dtype=bool)
    nonempty = ntok > 0
    comment[nonempty] = b[starts[first[nonempty]]] == ord("#")
    arrow = (ends - starts == 3) & (b[starts] == 45)
    cand = np.flatnonzero(arrow)
    arrow[cand] = (b[starts[cand] + 1] == 45) & (b[starts[cand] + 2] == 62)
    return flat, ntok, comment, arrow, lambda i: text[line_start[i]:line_end[i]]


def _parse_fast(text: str, path: str, layout: str, allow_empty: bool = False) -> ParsedRules | None:
    """Every line of ``text`` at once: tokens as ``str.split`` makes them,
    arrows, numbers and right-hand sides found by array operations.  None
    when some line is not a well-formed rule, comment or blank line (or two
    rules are the same): the line-by-line reader then names it."""
    flat, ntok, comment, arrow, line = _tokens(text)
    meta: dict[str, str] = {}
    for i in np.flatnonzero(comment).tolist():
        parse_header_meta(line(i).strip(), meta)
    is_rule = (ntok > 0) & ~comment
    rows = np.flatnonzero(is_rule)
    R = len(rows)
    if not R:
        if allow_empty:
            return ParsedRules(RuleTable([], np.zeros(0, np.int32), np.zeros(1, np.int64), np.zeros(0, np.int32)),
                               np.zeros(0), None, meta)
        raise InputError(f"{'<stdin>' if path == '-' else path}: no rules")
    n = ntok[rows]
    start = (np.cumsum(ntok) - ntok)[rows]       # first token of each rule line
    at = np.flatnonzero(arrow)
    line_of_arrow = np.searchsorted(np.cumsum(ntok), at, side="right")
    keep = ~comment[line_of_arrow]               # an arrow in a comment is no arrow
    at, line_of_arrow = at[keep], line_of_arrow[keep]
    if len(at) != R or not np.array_equal(line_of_arrow, rows):
        return None                              # a line without or with two arrows
    p = at - start                               # arrow position in its line
    nums = p - 1
    k = n - p - 1
    if np.any(p < 1) or np.any(k < 1) or np.any(nums > (1 if layout == "count" else 2)) or np.any(nums != nums[0]):
        return None                              # the line reader names the line (mixed layouts included)
    if layout == "count" and np.any(nums < 1):
        return None
    get = flat.__getitem__
    try:
        ws = list(map(get, start[nums >= 1].tolist()))
        ps = list(map(get, (start[nums == 2] + 1).tolist()))
        text = "".join(ws) + "".join(ps)
        if "_" in text or not text.isascii():
            return None                          # the line reader names the line ('1_0' is no number here)
        wv = list(map(float, ws))
        pv = list(map(float, ps))
    except ValueError:
        return None
    weights = np.ones(R, dtype=np.float64)
    weights[nums >= 1] = wv
    given = nums == 2
    pseudo = None
    if given.any():
        pseudo = np.zeros(R, dtype=np.float64)
        pseudo[given] = pv
    for v in (weights, pseudo):
        if v is not None and not (np.all(np.isfinite(v)) and np.all(v >= 0)):
            return None
    off = np.zeros(R + 1, dtype=np.int64)
    np.cumsum(k, out=off[1:])
    rhs_at = np.repeat(at + 1 - off[:-1], k) + np.arange(int(off[-1]))
    table = RuleTable._of_tokens(list(map(get, (at - 1).tolist())), list(map(get, rhs_at.tolist())), off)
    if table.duplicate():
        return None                              # the line reader names the first repeat
    return ParsedRules(table, weights, pseudo, meta, given if pseudo is not None else None, numbers=int(nums[0]))


# --------------------------------------------------------------------------
# The cache of large rule files

#: Rule files of at least this many bytes are cached (smaller ones read in milliseconds).
CACHE_MIN_BYTES = 256 * 1024
#: Cache entries kept (the most recently used, up to CACHE_MAX_BYTES in all); older ones
#: are removed when one is added.
CACHE_KEEP = 16
CACHE_MAX_BYTES = 256 * 2**20
_CACHE_FORMAT = 3                   # 3: files of mixed line layouts are no longer read


def cache_dir() -> str | None:
    """Where rule-file caches live: ``$GRIND_CACHE_DIR`` (``off``, ``0`` or
    empty: no cache), else ``$XDG_CACHE_HOME/grind``, else ``~/.cache/grind``."""
    d = os.environ.get("GRIND_CACHE_DIR")
    if d is not None:
        return None if d.strip().lower() in ("", "0", "off", "no", "none") else d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "grind")


def read_rules_cached(path: str) -> ParsedRules:
    """A grammar file read as :func:`read_rule_file` reads it, through a binary
    cache: a regular file of at least :data:`CACHE_MIN_BYTES` is stored,
    parsed, as ``cache_dir()/rules/SHA256.cache`` (the SHA-256 of the file's
    bytes, so an edited file is a new entry), written atomically; an entry
    that does not load, check and match the file's hash is ignored and
    rewritten.  Never for stdin or pipes; without a writable cache directory
    the file is just read."""
    if is_stream(path):
        return _parse(_read_bytes(path), path, "[weight [pseudocount]]")
    before = _stat(path)
    entry = digest = None
    where = cache_dir()
    if where is not None and before is not None and before.st_size >= CACHE_MIN_BYTES \
            and stat.S_ISREG(before.st_mode):
        digest = _file_sha256(path)
        entry = os.path.join(where, "rules", f"{digest}.cache")
        hit = _load_entry(entry, digest, before.st_size)
        if hit is not None:
            return hit
    parsed = _parse_file(path, "[weight [pseudocount]]")
    after = _stat(path)
    if entry is not None and digest is not None and after is not None and before is not None \
            and (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns):
        _store_entry(entry, digest, before.st_size, parsed)
    return parsed


def _stat(path: str):
    try:
        return os.stat(path)
    except OSError:
        return None


def _file_sha256(path: str) -> str:
    """The SHA-256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(CHUNK_BYTES), b""):
                h.update(block)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    return h.hexdigest()


_MAGIC = b"grind-rules-cache\n"


def _pack(info: dict, arrays: dict) -> bytes:
    """The bytes :func:`_write_entry` writes."""
    f = io.BytesIO()
    _write_entry(f, info, arrays)
    return f.getvalue()


def _write_entry(f, info: dict, arrays: dict) -> None:
    """Write ``MAGIC``, the length of a JSON header (8 bytes, little-endian),
    the header (``info``, each array's dtype, shape and offset, the CRC-32 of
    the arrays' bytes), then the arrays, each padded to 8 bytes; the arrays
    go to ``f`` as they are (no copy of them all in one bytes object)."""
    specs, crc, at = {}, 0, 0
    arrays = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
    for name, a in arrays.items():
        specs[name] = [a.dtype.str, list(a.shape), at]
        pad = -a.nbytes % 8
        crc = zlib.crc32(b"\0" * pad, zlib.crc32(memoryview(a).cast("B"), crc))
        at += a.nbytes + pad
    head = json.dumps({"info": info, "arrays": specs, "crc32": crc}).encode("utf-8")
    head += b" " * (-(len(_MAGIC) + 8 + len(head)) % 8)
    f.write(_MAGIC + len(head).to_bytes(8, "little") + head)
    for a in arrays.values():
        f.write(memoryview(a).cast("B"))
        f.write(b"\0" * (-a.nbytes % 8))


def _unpack(blob: bytes):
    """(info, arrays) of :func:`_pack`'s bytes (:func:`_read_entry`)."""
    return _read_entry(io.BytesIO(blob))


def _read_entry(f):
    """(info, arrays) of what :func:`_write_entry` wrote, read from ``f`` array
    by array into arrays of their own (no copy of the whole entry); ValueError
    if they are not such bytes or the CRC-32 of everything after the header
    differs (or KeyError, TypeError: the caller takes any exception as a bad entry)."""
    if f.read(len(_MAGIC)) != _MAGIC:
        raise ValueError("not a rule cache")
    n = int.from_bytes(f.read(8), "little")
    head = json.loads(f.read(n).decode("utf-8"))
    crc, pos, arrays = 0, 0, {}
    for name, (dt, shape, at) in sorted(head["arrays"].items(), key=lambda kv: kv[1][2]):
        dtype = np.dtype(dt)
        if dtype.hasobject:
            raise ValueError("object array")
        if at < pos:
            raise ValueError("overlapping arrays")
        gap = f.read(at - pos)
        crc = zlib.crc32(gap, crc)
        a = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=dtype)
        got = f.readinto(memoryview(a).cast("B")) if a.nbytes else 0
        if len(gap) != at - pos or got != a.nbytes:
            raise ValueError("truncated")
        crc = zlib.crc32(memoryview(a).cast("B"), crc)
        arrays[name] = a.reshape(shape)
        pos = at + a.nbytes
    for block in iter(lambda: f.read(1 << 20), b""):
        crc = zlib.crc32(block, crc)
    if crc != head["crc32"]:
        raise ValueError("damaged")
    return head["info"], {name: arrays[name] for name in head["arrays"]}


def _load_entry(entry: str, digest: str, size: int) -> ParsedRules | None:
    """The parsed file stored at ``entry``, or None if it is missing, unreadable or not this file's."""
    try:
        with open(entry, "rb") as f:
            info, z = _read_entry(f)
        if info.get("format") != _CACHE_FORMAT or info.get("sha256") != digest or info.get("size") != size:
            return None
        symbols = z["symbols"].tobytes().decode("utf-8").split("\n")
        arity = z["arity"]
        if arity.dtype.kind not in "iu" or z["lhs"].dtype.kind not in "iu" or z["rhs"].dtype.kind not in "iu":
            return None
        off = np.zeros(len(arity) + 1, dtype=np.int64)
        np.cumsum(arity, out=off[1:])
        del arity
        table = RuleTable(symbols, z.pop("lhs").astype(np.int32, copy=False), off,
                          z.pop("rhs").astype(np.int32, copy=False))
        weights = z["weights"].astype(np.float64, copy=False)
        pseudo = z["pseudo"].astype(np.float64, copy=False) if info["pseudo"] else None
        given = z["given"] if info["pseudo"] else None
        table.check()
        R = len(table)
        meta = info["meta"]
        if (len(symbols) != info["symbols"] or R != info["rules"] or z["weights"].dtype != np.float64
                or weights.shape != (R,) or not isinstance(meta, dict)
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())):
            return None
        for v in (weights, pseudo):
            if v is not None and (v.shape != (R,) or not (np.all(np.isfinite(v)) and np.all(v >= 0))):
                return None
        if given is not None and (given.dtype != bool or given.shape != (R,)):
            return None
    except Exception:                   # noqa: BLE001 - any damage means: read the file again
        return None
    with contextlib.suppress(OSError):
        os.utime(entry)                 # recently used: kept by the pruning
    return ParsedRules(table, weights, pseudo, meta, given)


def _store_entry(entry: str, digest: str, size: int, parsed: ParsedRules) -> None:
    """Write the cache entry atomically (a temporary file renamed); a cache that
    cannot be written is no error.  Then keep only the :data:`CACHE_KEEP`
    most recently used entries."""
    t = parsed.table
    if any("\n" in s for s in t.symbols):
        return
    info = {"format": _CACHE_FORMAT, "sha256": digest, "size": size, "rules": len(t),
            "symbols": len(t.symbols), "pseudo": parsed.pseudo is not None, "meta": parsed.meta}
    ids = np.uint8 if len(t.symbols) <= 1 << 8 else np.uint16 if len(t.symbols) <= 1 << 16 else np.int32
    arity = np.diff(t.rhs_off)
    arrays = {"symbols": np.frombuffer("\n".join(t.symbols).encode("utf-8"), dtype=np.uint8),
              "lhs": t.lhs.astype(ids), "rhs": t.rhs.astype(ids),
              "arity": arity.astype(np.uint8 if arity.max(initial=0) < 1 << 8 else np.int64),
              "weights": parsed.weights}
    if parsed.pseudo is not None and parsed.given is not None:
        arrays.update(pseudo=parsed.pseudo, given=parsed.given)
    folder = os.path.dirname(entry)
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".cache", dir=folder)
        with os.fdopen(fd, "wb") as f:
            _write_entry(f, info, arrays)
        os.replace(tmp, entry)
        tmp = None
        _prune(folder)
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _prune(folder: str) -> None:
    """Keep the most recently used entries, at most :data:`CACHE_KEEP` of them
    and :data:`CACHE_MAX_BYTES` in all (the newest always); remove temporary
    files a killed process left, after a day."""
    now = time.time()
    entries = []
    for e in os.scandir(folder):
        with contextlib.suppress(OSError):
            st = e.stat()
            if e.name.startswith(".tmp-"):
                if now - st.st_mtime > 86400:
                    os.unlink(e.path)
            elif e.name.endswith(".cache"):
                entries.append((st.st_mtime, st.st_size, e.path))
    total = 0
    for k, (_, size, path) in enumerate(sorted(entries, reverse=True)):
        total += size
        if k and (k >= CACHE_KEEP or total > CACHE_MAX_BYTES):
            with contextlib.suppress(OSError):
                os.unlink(path)


def format_weight(w: float) -> str:
    """Shortest text that reads back as exactly the same float64."""
    r = repr(float(w))
    return r[:-2] if r.endswith(".0") else r


def rule_lines(rules, weights, pseudocounts=None):
    """``weight [pseudo-count] LHS --> RHS ...`` lines of a list of ``(lhs, rhs)`` rules, one at a time."""
    for i, (lhs, rhs) in enumerate(rules):
        pc = "" if pseudocounts is None else " " + format_weight(pseudocounts[i])
        yield f"{format_weight(weights[i])}{pc} {rule_key(lhs, rhs)}\n"


#: Rules whose keys or lines are made at once from a :class:`RuleTable` (bounds the strings alive).
KEY_CHUNK = 1 << 16


def table_lines(table: RuleTable, weights, pseudocounts=None, chunk: int | None = None):
    """The text :func:`rule_lines` writes for the rules of ``table``, byte for
    byte, as one string per ``chunk`` rules (never a string per rule of the
    whole table at once)."""
    chunk = KEY_CHUNK if chunk is None else chunk
    w = np.asarray(weights, dtype=np.float64)
    pc = None if pseudocounts is None else np.asarray(pseudocounts, dtype=np.float64)
    for lo, keys in zip(range(0, len(table), chunk), table.key_chunks(chunk)):
        ws = map(format_weight, w[lo:lo + chunk].tolist())
        if pc is None:
            yield "".join([f"{a} {k}\n" for a, k in zip(ws, keys)])
        else:
            ps = map(format_weight, pc[lo:lo + chunk].tolist())
            yield "".join([f"{a} {b} {k}\n" for a, b, k in zip(ws, ps, keys)])


class RuleSet:
    """Rules held as a list of ``(lhs, rhs tuple)`` pairs, as a :class:`RuleTable`,
    or both, each made from the other when first asked for: a grammar read
    from a file or built as arrays keeps only its table (about 20 bytes a
    rule, against 100+ for the tuples) until some caller reads ``rules``.

    ``rules_source`` is the object the rules were given as (the list or the
    table); caches of what follows from the rules are keyed by its identity,
    so making the tuples does not invalidate them, and assigning ``rules``
    does."""

    _rules: list | None
    _rt: RuleTable | None
    _src: object

    def _set_rules(self, rules, table: RuleTable | None) -> None:
        self._rules, self._rt = rules, table
        self._src = table if rules is None else rules

    @property
    def rules(self) -> list[tuple[str, tuple[str, ...]]]:
        """The rules as ``(lhs, rhs tuple)`` pairs (made from the table on first use)."""
        if self._rules is None:
            assert self._rt is not None
            self._rules = self._rt.rules()
        return self._rules

    @rules.setter
    def rules(self, rules) -> None:
        self._set_rules(rules, None)

    @property
    def rules_source(self) -> object:
        return self._src

    def has_table(self) -> bool:
        return self._rt is not None

    def table(self) -> RuleTable:
        """The rules as arrays over a symbol table (:class:`RuleTable`; made once)."""
        if self._rt is None:
            self._rt = RuleTable.of_rules(self._rules)
        return self._rt

    def n_rules(self) -> int:
        return len(self._rules) if self._rules is not None else len(self._rt)   # type: ignore[arg-type]

    def iter_rules(self):
        """The rules as ``(lhs, rhs tuple)`` pairs, made a chunk at a time from
        the table when the list was not made (for a scan that may stop early)."""
        if self._rules is not None or self._rt is None:
            yield from self.rules
            return
        t = self._rt
        for lo in range(0, len(t), KEY_CHUNK):
            yield from t.slice(lo, min(lo + KEY_CHUNK, len(t))).rules()

    def same_rules(self, other: RuleSet) -> bool:
        """Whether ``other`` certainly holds the same rules in the same order,
        known without making keys: the same list or table, or equal tables."""
        if self._src is other._src:
            return True
        return self._rt is not None and other._rt is not None and self._rt.same(other._rt)

    def same_rules_as(self, other: RuleSet) -> bool:
        """Whether ``other`` holds the same rules in the same order: :meth:`same_rules`'s
        quick check, else the rule fingerprints compared."""
        return self.same_rules(other) or self.fingerprint() == other.fingerprint()

    def key_chunks(self):
        """The rule keys in order, in lists of at most :data:`KEY_CHUNK`."""
        if self._rt is not None:
            yield from self._rt.key_chunks()
            return
        rules = self.rules
        for lo in range(0, len(rules), KEY_CHUNK):
            yield [rule_key(*r) for r in rules[lo:lo + KEY_CHUNK]]

    def keys(self) -> list[str]:
        return [k for part in self.key_chunks() for k in part]

    def key_at(self, i: int) -> str:
        """The key of rule ``i`` (for a message: no list of all the keys is made)."""
        return self._rt.keys(i, i + 1)[0] if self._rt is not None else rule_key(*self.rules[i])

    def fingerprint(self) -> str:
        """16 hex digits of the SHA-256 of the rule keys in order, each followed
        by a newline (:func:`fingerprint_keys`): two files with the same
        fingerprint have the same rules in the same order.  Made once."""
        got = self.__dict__.get("_fp")
        if got is None or got[0] is not self._src:
            h = hashlib.sha256()
            for part in self.key_chunks():
                h.update(("\n".join(part) + "\n").encode("utf-8"))
            got = self._fp = (self._src, h.hexdigest()[:16])
        return got[1]

    def rule_text(self, weights, pseudocounts=None):
        """The ``weight [pseudo-count] LHS --> RHS`` lines of the rules
        (:func:`rule_lines`), a chunk of lines a string when the rules are a table.
        A weight or pseudo-count that is NaN, infinite or negative is a NumericalError
        (grind never writes a grammar or count file it would refuse to read)."""
        for what, v in (("weight", weights), ("pseudo-count", pseudocounts)):
            if v is None:
                continue
            a = np.asarray(v, dtype=np.float64)
            bad = np.flatnonzero(~(np.isfinite(a) & (a >= 0)))
            if len(bad):
                i = int(bad[0])
                raise NumericalError(f"the {what} of rule '{self.key_at(i)}' is {float(a[i])!r}"
                                     f"{f' (and {len(bad) - 1} more are not finite and >= 0)' if len(bad) > 1 else ''}"
                                     ": nothing written")
        if self._rt is not None:
            return table_lines(self._rt, weights, pseudocounts)
        return rule_lines(self.rules, weights, pseudocounts)
