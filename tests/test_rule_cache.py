"""Reading grammars fast (issue 15: a 40-nonterminal grammar read and prepared in
<= 0.3 s): the array-based rule reader agrees with the line-by-line one on every
file it accepts and leaves every malformed file to it (same errors, file:line);
the binary cache of large grammar files (``$GRIND_CACHE_DIR/rules/SHA256.cache``)
gives the grammar the file gives, and an entry that is stale or damaged is
ignored and rebuilt; the CKY compile made of arrays equals the rule-by-rule one.
"""
from __future__ import annotations

import gzip
import io
import os
import sys
from collections import defaultdict

import numpy as np
import pytest

from grind.errors import InputError
from grind.formats import rules as R
from grind.formats.rules import read_rule_file
from grind.grammars.cnf import cnf_grammar
from grind.grammars.grammar import Grammar, read_grammar
from grind.kernels import cky

sys.path.insert(0, os.path.dirname(__file__))
import grammars as random_grammars  # noqa: E402  (tests/grammars.py)

DEFAULT = "[weight [pseudocount]]"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of its own, and every file big enough to be cached."""
    d = tmp_path / "cache"
    monkeypatch.setenv("GRIND_CACHE_DIR", str(d))
    monkeypatch.setattr(R, "CACHE_MIN_BYTES", 0)
    return d


def entries(cache_dir) -> list:
    d = cache_dir / "rules"
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".cache")) if d.exists() else []


def slow(data: bytes, layout: str = DEFAULT):
    """The line-by-line reader's (rules, weights, pseudo-counts, meta) of a file's bytes."""
    return R._read_rules_slowly(R._byte_lines(data, "f.txt"), "f.txt", layout)


def fast(data: bytes, layout: str = DEFAULT):
    text = data.decode("utf-8")
    p = R._parse_fast(text[1:] if text.startswith("\ufeff") else text, "f.txt", layout)
    return None if p is None else (p.rules(), p.weights, p.pseudo_list(), p.meta)


def same_read(a, b) -> None:
    (ra, wa, pa, ma), (rb, wb, pb, mb) = a, b
    assert ra == rb and all(type(r[1]) is tuple for r in ra)
    assert wa.dtype == wb.dtype == np.float64 and wa.tobytes() == wb.tobytes()
    assert pa == pb and list(ma.items()) == list(mb.items())


# ---------------------------------------------------------------- the fast reader

SYMBOLS = ["S", "NP", "VP", "X0", "-LRB-", "#", "$", "@x", "a", "b", "word", "č", "日本", "--", "->", "=>"]
NUMBERS = ["1", "0", "0.5", "1e-3", "2.5E+2", "0.0125", "3.", ".25", "1e-320", "  4"]


def random_file(rng, ascii_only: bool, count_layout: bool = False) -> bytes:
    syms = [s for s in SYMBOLS if s.isascii()] if ascii_only else SYMBOLS
    space = [" ", "\t", "  ", " \t "] + ([] if ascii_only else ["\u00a0", "\u2003"])
    lines, seen = [], set()
    if rng.random() < 0.3:
        lines.append("# weights: probabilities")
    n = 1 if count_layout else int(rng.integers(0, 3))    # numbers before the LHS: one layout a file
    for _ in range(int(rng.integers(1, 40))):
        u = rng.random()
        if u < 0.1:
            lines.append(rng.choice(["", "   ", "\t", "# start: S", "#no colon", "  # a --> b", "# k: v: w"]))
            continue
        lhs = str(rng.choice(syms))
        rhs = tuple(str(x) for x in rng.choice(syms, size=int(rng.integers(1, 4))))
        nums = [str(rng.choice(NUMBERS)).strip() for _ in range(n)]
        toks = nums + [lhs, "-->", *rhs]
        if (lhs, rhs) in seen or toks[0].startswith("#"):
            continue                                    # a repeat, or a comment rather than a rule
        seen.add((lhs, rhs))
        sep = lambda: str(rng.choice(space))           # noqa: E731
        line = sep() * int(rng.integers(0, 2)) + sep().join(toks) + sep() * int(rng.integers(0, 2))
        lines.append(line)
    if not seen:
        lines.append(" ".join(["1"] * n + ["S --> a"]))
    end = str(rng.choice(["\n", "\r\n"]))
    text = end.join(lines) + (end if rng.random() < 0.8 else "")
    return (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + text.encode("utf-8")


@pytest.mark.parametrize("ascii_only", [True, False])
def test_fast_reader_agrees_with_the_line_reader(ascii_only):
    rng = np.random.default_rng(1 + ascii_only)
    for _ in range(300):
        data = random_file(rng, ascii_only)
        got = fast(data)
        assert got is not None, data                     # well-formed: the fast path takes it
        same_read(got, slow(data))
        same_read(read_rule_file_bytes(data), slow(data))
    for _ in range(50):
        data = random_file(rng, ascii_only, count_layout=True)
        same_read(fast(data, "count"), slow(data, "count"))


def read_rule_file_bytes(data: bytes):
    p = R._parse(data, "f.txt", DEFAULT)
    return p.rules(), p.weights, p.pseudo_list(), p.meta


MALFORMED = [
    "S --> a\nS -> b\n",                  # no arrow
    "S --> a\nS --> b --> c\n",           # two arrows
    "--> a\n",                            # no left-hand side
    "1 2 3 S --> a\n",                    # three numbers
    "S --> a\nx S --> b\n",               # not a number
    "S --> a\n0x1 S --> b\n",
    "S --> a\n7_0 S --> b\n",             # Python's float reads it as 70: not a number here
    "S --> a\n1 S -->\n",                 # empty right-hand side
    "S --> a\n0.5 S --> a\n",             # duplicate
    "S --> a b\nS --> b\n\n# c\n2 S --> a   b\n",
    "-1 S --> a\n",
    "nan S --> a\n",
    "1 inf S --> a\n",
    "1e999 S --> a\n",
    "# nothing\n",
    "",
    "\n\n   \n",
    "S --> a\n# x --> y\nA -->\n",
    "0.5 S --> a\nS --> b\n",             # a line that lost its weight
    "S --> a\n0.5 2 S --> b\n",           # a line with a weight and pseudo-count among lines with none
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_files_get_the_line_readers_error(tmp_path, text):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(InputError) as ref:
        R._read_rules_slowly(R.read_lines(str(p)), str(p), DEFAULT)
    for read in (lambda: read_rule_file(str(p)), lambda: read_grammar(str(p))):
        with pytest.raises(InputError) as e:
            read()
        assert str(e.value) == str(ref.value)
        assert str(p) in str(e.value)


def test_count_layout_needs_one_number(tmp_path):
    p = tmp_path / "c.txt"
    p.write_text("1 S --> a\nS --> b\n")
    with pytest.raises(InputError, match=r"c.txt:2: expected 'count LHS --> RHS...'"):
        read_rule_file(str(p), layout="count")


def test_bad_bytes_and_bad_compression_are_reported_as_before(tmp_path, cache):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"S --> a\nS --> b\nS --> \xff\n")
    with pytest.raises(InputError, match=r"bad.txt:3: not valid UTF-8"):
        read_grammar(str(p))
    z = tmp_path / "bad.txt.gz"
    z.write_bytes(gzip.compress("".join(f"S --> w{i}\n" for i in range(100)).encode())[:-12])
    with pytest.raises(InputError, match=r"bad.txt.gz: cannot read"):
        read_grammar(str(z))
    assert entries(cache) == []


def test_grammar_still_checks_its_rules():
    with pytest.raises(InputError, match=r"duplicate rule S --> a$"):
        Grammar([("S", ("a",)), ("S", ("b",)), ("S", ("a",))], np.ones(3), "S")
    with pytest.raises(InputError, match=r"duplicate rule S --> a b"):      # same key, different tuples
        Grammar([("S", ("a b",)), ("S", ("a", "b"))], np.ones(2), "S")
    with pytest.raises(InputError, match="start symbol 'T'"):
        Grammar([("S", ("a",))], np.ones(1), "T")
    g = Grammar([("S", ["a", "b"]), ("S", ("a",))], np.ones(2), "S")        # a list right-hand side
    assert g.index == {"S --> a b": 0, "S --> a": 1} and g.terminals == ["a", "b"]


# ---------------------------------------------------------------- the cache

def write_cnf(path, n=6, pseudo=False, extra_meta=True):
    g = cnf_grammar(["a", "b", "c", "č"], n, n)
    w = g.normalize(np.random.default_rng(n).random(len(g)) + 0.1)
    lines = ["# grind test", "# weights: probabilities", "# start: ROOT"] if extra_meta else []
    for i, ((lhs, rhs), x) in enumerate(zip(g.rules, w)):
        pc = f" {i % 7 * 0.5}" if pseudo else ""
        lines.append(f"{R.format_weight(x)}{pc} {lhs} --> {' '.join(rhs)}")
        if i == len(g.rules) // 2:
            lines.append("# seed: 3")
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if str(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return g


def same_grammar(a: Grammar, b: Grammar) -> None:
    assert a.rules == b.rules and a.start == b.start and a.meta == b.meta
    assert a.weights.tobytes() == b.weights.tobytes()
    assert (a.pseudocounts is None) == (b.pseudocounts is None)
    if a.pseudocounts is not None:
        assert a.pseudocounts.tobytes() == b.pseudocounts.tobytes()
    assert a.nonterminals == b.nonterminals and a.terminals == b.terminals
    assert a.lhs.dtype == b.lhs.dtype and np.array_equal(a.lhs, b.lhs)
    assert a.index == b.index


def reference_grammar(path) -> Grammar:
    """The grammar as read before: the line reader and Grammar's own checks."""
    rules, weights, pseudos, meta = R._read_rules_slowly(R.read_lines(str(path)), str(path), DEFAULT)
    pc = None
    if any(p is not None for p in pseudos):
        pc = np.array([p if p is not None else 0.0 for p in pseudos], dtype=np.float64)
    return Grammar(rules, weights, meta.get("start") or rules[0][0], pc, meta)


@pytest.mark.parametrize("name,pseudo", [("g.txt", False), ("g.txt", True), ("g.txt.gz", True)])
def test_cached_and_uncached_reads_give_the_same_grammar(tmp_path, cache, monkeypatch, name, pseudo):
    path = tmp_path / name
    write_cnf(path, pseudo=pseudo)
    first = read_grammar(str(path))                      # parses, writes the entry
    assert len(entries(cache)) == 1
    stamp = os.stat(cache / "rules" / entries(cache)[0]).st_mtime_ns
    cached = read_grammar(str(path))                     # from the entry
    assert os.stat(cache / "rules" / entries(cache)[0]).st_mtime_ns >= stamp
    monkeypatch.setenv("GRIND_CACHE_DIR", "off")
    uncached = read_grammar(str(path))
    ref = reference_grammar(path)
    for g in (first, cached, uncached):
        same_grammar(g, ref)
    assert (ref.pseudocounts is not None) == pseudo and ref.meta["seed"] == "3"
    # the same numbers from the kernel
    sents = [["a", "b"], ["c", "a", "č"], ["b"]]
    c1, z1 = cky.CKYParser(cached, sents).inside_outside(cached.weights)
    c2, z2 = cky.CKYParser(ref, sents).inside_outside(ref.weights)
    assert c1.tobytes() == c2.tobytes() and z1.tobytes() == z2.tobytes()


def test_start_option_and_header(tmp_path, cache):
    path = tmp_path / "g.txt"
    write_cnf(path)
    assert read_grammar(str(path)).start == "ROOT"
    assert read_grammar(str(path), start="X1").start == "X1"
    with pytest.raises(InputError, match=r"g.txt: start symbol 'nope'"):
        read_grammar(str(path), start="nope")


def test_a_stale_or_damaged_entry_is_ignored_and_rebuilt(tmp_path, cache):
    path, other = tmp_path / "g.txt", tmp_path / "h.txt"
    write_cnf(path, n=5)
    write_cnf(other, n=4)
    ref = reference_grammar(path)
    read_grammar(str(path))
    read_grammar(str(other))
    [e_g] = [e for e in entries(cache) if R.hashlib.sha256(path.read_bytes()).hexdigest() in e]
    [e_h] = [e for e in entries(cache) if e != e_g]
    entry = cache / "rules" / e_g
    good = entry.read_bytes()
    damaged = {
        "garbage": b"not a cache at all",
        "truncated": good[: len(good) // 2],
        "empty": b"",
        "another file's entry": (cache / "rules" / e_h).read_bytes(),
        "an older format": good.replace(b'"format": 3', b'"format": 2', 1),
        "a flipped byte": good[:-5] + bytes([good[-5] ^ 1]) + good[-4:],
        "out-of-range ids": _with_array(good, "lhs", lambda a: a.astype(np.int32) + 1000),
        "bad weights": _with_array(good, "weights", lambda a: -a),
    }
    for why, blob in damaged.items():
        assert blob != good, why
        entry.write_bytes(blob)
        same_grammar(read_grammar(str(path)), ref)
        assert R._load_entry(str(entry), e_g.split(".")[0], path.stat().st_size) is not None, why   # rebuilt
    # an edited file is a new entry: never the old grammar
    write_cnf(path, n=3)
    same_grammar(read_grammar(str(path)), reference_grammar(path))
    assert len(entries(cache)) == 3


def _with_array(blob: bytes, name: str, change) -> bytes:
    info, arrays = R._unpack(blob)
    arrays = dict(arrays)
    arrays[name] = change(arrays[name].copy())
    return R._pack(info, arrays)


def test_no_cache_for_stdin_small_files_off_or_unwritable(tmp_path, cache, monkeypatch):
    path = tmp_path / "g.txt"
    write_cnf(path)
    ref = reference_grammar(path)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(path.read_bytes())))
    same_grammar(read_grammar("-"), ref)
    assert entries(cache) == []
    monkeypatch.setenv("GRIND_CACHE_DIR", "off")
    same_grammar(read_grammar(str(path)), ref)
    assert entries(cache) == []
    monkeypatch.setenv("GRIND_CACHE_DIR", str(cache))
    monkeypatch.setattr(R, "CACHE_MIN_BYTES", path.stat().st_size + 1)
    same_grammar(read_grammar(str(path)), ref)
    assert entries(cache) == []
    monkeypatch.setattr(R, "CACHE_MIN_BYTES", 0)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("GRIND_CACHE_DIR", str(blocked))
    same_grammar(read_grammar(str(path)), ref)


def test_default_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("GRIND_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert R.cache_dir() == os.path.join(str(tmp_path), "grind")
    monkeypatch.setenv("GRIND_CACHE_DIR", "0")
    assert R.cache_dir() is None


def test_only_the_most_recently_used_entries_are_kept(tmp_path, cache, monkeypatch):
    monkeypatch.setattr(R, "CACHE_KEEP", 3)
    paths = []
    for n in range(2, 7):
        paths.append(tmp_path / f"g{n}.txt")
        write_cnf(paths[-1], n=n)
        read_grammar(str(paths[-1]))
    assert len(entries(cache)) == 3
    same_grammar(read_grammar(str(paths[0])), reference_grammar(paths[0]))   # pruned: read again
    assert len(entries(cache)) == 3


# ---------------------------------------------------------------- the CKY compile

def rule_by_rule(grammar):
    """The compile's internal rules as they were made before: one rule at a time."""
    names = list(grammar.nonterminals)
    sym = {a: i for i, a in enumerate(names)}
    bins, uns, lexs, wrap = [], [], [], {}

    def wrapper(t):
        if t not in wrap:
            wrap[t] = len(names)
            names.append(f"<{t}>")
            lexs.append((wrap[t], (t,), -1))
        return wrap[t]

    for r, (lhs, rhs) in enumerate(grammar.rules):
        a = sym[lhs]
        if not any(grammar.is_nonterminal(x) for x in rhs):
            lexs.append((a, tuple(rhs), r))
            continue
        kids = [sym[x] if grammar.is_nonterminal(x) else wrapper(x) for x in rhs]
        if len(kids) == 1:
            uns.append((a, kids[0], r))
            continue
        orig = r
        for p, x in enumerate(kids[:-2]):
            names.append(f"{lhs}@{r}.{p + 1}")
            bins.append((a, x, len(names) - 1, orig))
            a, orig = len(names) - 1, -1
        bins.append((a, kids[-2], kids[-1], orig))
    return names, bins, uns, lexs


def compile_cases():
    out = [random_grammars.make(f, s) for f in sorted(random_grammars.FAMILIES) for s in range(8)]
    rules = [("S", ("A", "x", "B", "y")), ("A", ("a",)), ("S", ("A", "B")), ("B", ("x", "A")),
             ("A", ("a", "b", "c")), ("B", ("b",)), ("S", ("B",)), ("A", ("y", "B", "A")),
             ("B", ("A", "A", "A", "A", "A")), ("A", ("x",))]
    out.append(Grammar(rules, np.arange(1.0, len(rules) + 1), "S"))
    out.append(cnf_grammar(["a", "b"], 3, 2))
    return out


@pytest.mark.parametrize("k", range(len(compile_cases())))
def test_array_compile_equals_rule_by_rule(k):
    g = compile_cases()[k]
    names, bins, uns, (lex_lhs, lex_toks, lex_rule) = cky._internal_rules(g)
    names0, bins0, uns0, lexs0 = rule_by_rule(g)
    assert names == names0
    assert bins.tolist() == [list(b) for b in bins0]
    assert uns.tolist() == [list(u) for u in uns0]
    assert list(zip(lex_lhs.tolist(), lex_toks, lex_rule.tolist())) == lexs0
    c = cky._Compiled(g)
    index = defaultdict(list)
    for l, (_, toks, _) in enumerate(lexs0):
        index[toks].append(l)
    assert c.lex_index == dict(index)


@pytest.mark.slow
def test_grammar_load_bench_runs(capsys):
    from grind.bench import grammar_load
    r = grammar_load.main(["-n", "3", "--reps", "1"])
    assert r["rules"] == 3 + 3 * 6 * 6 + 3 * 17
    assert [name for name, _ in r["rows"]][:3] == ["first read (parsed, cache entry written)", "cached",
                                                  "no cache (GRIND_CACHE_DIR=off)"]
    assert all(row["wall"] > 0 and row["rules"] == r["rules"] for _, row in r["rows"])
    assert "| cached |" in capsys.readouterr().out
