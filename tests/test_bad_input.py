"""Bad inputs, bad option values and odd output paths (issue 11).

Every case runs one grind command and asserts the error contract of the README:
exit status 1 (bad input / runtime error) or 2 (usage error), stderr exactly one
line ``grind: error: ...`` (or click's ``Usage: / Try / Error:`` shape), no
traceback, the file (and line) or the option named; no partial or clobbered
output (an existing ``-o`` file keeps its content, a missing one stays missing,
no ``.grind-*`` temporary file is left).  A few cases must *succeed* (a BOM, a
symlink to a file, a FIFO, /dev/null as output).

Cases run in-process (``grind.cli.main``), so an uncaught exception is a test
failure with its traceback; the few that need a real process (a full disk as
stdout, a closed pipe, signals) run ``python -m grind.cli`` like tests/test_cli.py.
"""
from __future__ import annotations

import gzip
import io
import lzma
import os
import select
import signal
import stat
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import grind.cli

ROOT = os.geteuid() == 0 if hasattr(os, "geteuid") else False

# ----------------------------------------------------------------------------- harness


def run(args, stdin: bytes | None = None):
    """Run ``grind ARGS`` in-process; returns (exit status, stdout, stderr).

    An exception other than SystemExit propagates (the test fails with its
    traceback: grind must never show one)."""
    sin = io.TextIOWrapper(io.BytesIO(stdin or b""), encoding="utf-8")
    sout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    serr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    old = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = sin, sout, serr
    code = 0
    try:
        grind.cli.main([str(a) for a in args])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = old
    return code, sout.buffer.getvalue().decode("utf-8", "replace"), serr.buffer.getvalue().decode("utf-8", "replace")


def error_line(code, out, err, codes=(1,)):
    """Check the one-line error shape; return the message line."""
    assert "Traceback" not in err, err
    assert code in codes, f"exit status {code}, expected {codes}; stderr:\n{err}"
    # progress lines ('grind: training ...', 'grind: step ...': what -q silences) are not messages;
    # warnings are, and count against the one line
    lines = [ln for ln in err.splitlines()
             if not (ln.startswith("grind: ") and not ln.startswith(("grind: error:", "grind: warning:")))]
    if lines and lines[0].startswith("Usage:"):
        assert lines[-1].startswith("Error: "), f"click usage shape without 'Error:' line:\n{err}"
        middle = [ln for ln in lines[1:-1] if ln.strip()]
        assert len(middle) <= 1 and all(ln.startswith("Try ") for ln in middle), f"multi-line usage error:\n{err}"
        msg = lines[-1]
    else:
        assert len(lines) == 1, f"stderr is not exactly one line:\n{err}"
        msg = lines[0]
        assert msg.startswith("grind: error:") or msg.startswith("Error:"), f"not an error line: {msg!r}"
    assert not out, f"partial output on stdout:\n{out[:500]}"
    return msg


def names(msg, must):
    """Every entry of ``must`` (a string, or a tuple of alternatives) occurs in ``msg``."""
    for m in must:
        alts = m if isinstance(m, tuple) else (m,)
        assert any(a in msg for a in alts), f"error message should name {' or '.join(map(repr, alts))}: {msg!r}"


def temps(*dirs):
    return [p for d in dirs if Path(d).is_dir() for p in Path(d).iterdir() if p.name.startswith(".grind-")]


# ----------------------------------------------------------------------------- data

PCFG = """\
# weights: probabilities
1 S --> NP VP
0.5 NP --> D N
0.5 NP --> N
0.5 VP --> V NP
0.5 VP --> V
0.5 D --> the
0.5 D --> a
0.25 N --> dog
0.25 N --> cat
0.5 N --> dogs
0.5 V --> saw
0.5 V --> barks
"""
RULES = [ln for ln in PCFG.splitlines() if not ln.startswith("#")]   # rule k is on line k + 2 of PCFG
CORPUS = "the dog saw a cat\ndogs barks\na cat saw dogs\nthe cat barks\ndogs saw the dog\n"
CONLLU = """\
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVB\t_\t0\troot\t_\t_

1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsaw\tsee\tVERB\tVB\t_\t0\troot\t_\t_
4\tdogs\tdog\tNOUN\tNN\t_\t3\tobj\t_\t_

"""
CONLL_ROWS = CONLLU.splitlines()           # line k of the file is CONLL_ROWS[k - 1]
FAMILIES = "DT noun\nNN noun\nVB verb\n"
XPOS = ["--column", "XPOS"]


def pcfg_with(line: int, text: str | None) -> str:
    """PCFG with file line ``line`` replaced by ``text`` (None: removed)."""
    lines = PCFG.splitlines()
    if text is None:
        del lines[line - 1]
    else:
        lines[line - 1] = text
    return "\n".join(lines) + "\n"


def conll_with(line: int, text: str) -> str:
    lines = list(CONLL_ROWS)
    lines[line - 1] = text
    return "\n".join(lines) + "\n"


def row(line: int, col: int, value: str) -> str:
    cols = CONLL_ROWS[line - 1].split("\t")
    cols[col] = value
    return "\t".join(cols)


def subst(must, path):
    """``must`` with {F} replaced by ``path`` (tuples of alternatives too)."""
    return tuple(tuple(a.replace("{F}", path) for a in m) if isinstance(m, tuple) else m.replace("{F}", path)
                 for m in must)


def truncated(data: bytes, kind: str) -> bytes:
    z = gzip.compress(data, mtime=0) if kind == "gz" else lzma.compress(data)
    return z[: len(z) // 2]


def utf16(text: str) -> bytes:
    return text.encode("utf-16")


@pytest.fixture(scope="module")
def B(tmp_path_factory):
    """Valid inputs every case may read (never written by a case)."""
    d = tmp_path_factory.mktemp("base")
    (d / "gp.txt").write_text(PCFG)
    (d / "g2.txt").write_text(PCFG.replace("NP", "NX"))
    (d / "c.txt").write_text(CORPUS)
    (d / "c2.txt").write_text(CORPUS + "a dog barks\n")
    (d / "t.conllu").write_text(CONLLU)
    (d / "fam.txt").write_text(FAMILIES)
    (d / "tags.txt").write_text("DT NN\nVB JJ\n")
    steps = [
        ["estep", "-o", d / "counts.txt", d / "gp.txt", d / "c.txt"],
        ["estep", "-o", d / "counts2.txt", d / "g2.txt", d / "c.txt"],
        ["make-grammar", "dmv", *XPOS, "-o", d / "dmv.txt", d / "t.conllu"],
        ["init", "--harmonic", "--corpus", d / "t.conllu", *XPOS, "-o", d / "dmv1.txt", d / "dmv.txt"],
        ["train", "--algo", "ln", "--iterations", "2", *XPOS, "--ln-params", d / "ln.params",
         "-o", d / "ln.txt", d / "dmv1.txt", d / "t.conllu"],
        ["make-structure", "--tie", "A", "--families", d / "fam.txt", "-o", d / "struct.txt", d / "dmv.txt"],
        ["train", "--iterations", "2", "--checkpoint", d / "ck.npz", "-o", d / "em.txt", d / "gp.txt", d / "c.txt"],
    ]
    for a in steps:
        a = ["-q", *a]
        code, out, err = run(a)
        assert code == 0, f"building test data: grind {' '.join(map(str, a))}: {err}"
    return d


# ----------------------------------------------------------------------------- cases


@dataclass
class Case:
    id: str
    args: list                      # "{B}" = base data directory, "{T}" = the case's directory
    files: dict = field(default_factory=dict)   # name in {T} -> bytes | str | "DIR"
    codes: tuple = (1,)
    must: tuple = ()                # substrings (or tuples of alternatives) the error names
    output: bool = True             # add "-o {T}/out.txt" (existing or not, by case)
    stdin: bytes | None = None
    check: object = None            # success case: callable(T, out, err)


CASES: list[Case] = []


def case(*a, **kw):
    CASES.append(Case(*a, **kw))


# --- grammars: each malformed grammar x each command that reads a grammar

BAD_GRAMMARS = {
    # name: (content, must-name (with {F} = the file's path))
    "empty": ("", ("{F}",)),
    "only-comments": ("# weights: probabilities\n# nothing else\n", ("{F}",)),
    "no-arrow": (pcfg_with(4, "0.5 NP D N"), ("{F}:4",)),
    "two-arrows": (pcfg_with(4, "0.5 NP --> D --> N"), ("{F}:4",)),
    "empty-rhs": (pcfg_with(4, "0.5 NP -->"), ("{F}:4",)),
    "no-lhs": (pcfg_with(4, "--> D N"), ("{F}:4",)),
    "negative-weight": (pcfg_with(4, "-0.5 NP --> D N"), ("{F}:4",)),
    "nan-weight": (pcfg_with(4, "nan NP --> D N"), ("{F}:4",)),
    "inf-weight": (pcfg_with(4, "inf NP --> D N"), ("{F}:4",)),
    "word-weight": (pcfg_with(4, "half NP --> D N"), ("{F}:4",)),
    "three-numbers": (pcfg_with(4, "0.5 0.5 0.5 NP --> D N"), ("{F}:4",)),
    "pseudocount-not-number": (pcfg_with(4, "0.5 x NP --> D N"), ("{F}:4",)),
    "negative-pseudocount": (pcfg_with(4, "0.5 -1 NP --> D N"), ("{F}:4",)),
    "duplicate-rule": (pcfg_with(5, "0.5 NP --> D N"), ("{F}:5",)),
    "invalid-utf8": (PCFG.encode().replace(b"0.5 NP --> N", b"0.5 NP --> \xffN"), ("{F}:4",)),
    "utf16": (utf16(PCFG), ("{F}",)),
    "truncated-mid-line": (PCFG + "0.5 V --", ("{F}:14",)),
    # a file grind wrote, cut short at a line end ('head', an interrupted copy): its '# rules:' line says so
    "truncated-rules-count": ("# rules: 11\n" + PCFG.rsplit("0.5 V -->", 2)[0], ("{F}", "11 rules", "has 10")),
    "rules-count-not-number": ("# rules: many\n" + PCFG, ("{F}", "many")),
    "start-header-unknown": ("# start: Z\n" + PCFG, ("{F}", "Z")),
    "weights-header-unknown": (PCFG.replace("# weights: probabilities", "# weights: banana"), ("{F}", "banana")),
    "corpus-as-grammar": (CORPUS, ("{F}:1",)),
    "conllu-as-grammar": (CONLLU, ("{F}:1",)),
    "truncated-gz": (truncated(PCFG.encode(), "gz"), ("{F}",)),
    "truncated-xz": (truncated(PCFG.encode(), "xz"), ("{F}",)),
    "not-gzip": (b"\x1f\x8bthis is not a gzip stream\n", ("{F}",)),
    "missing": (None, ("{F}",)),
    "directory": ("DIR", ("{F}",)),
}
GRAMMAR_COMMANDS = {
    "init": lambda g: ["init", g],
    "loglik": lambda g: ["loglik", g, "{B}/c.txt"],
    "parse": lambda g: ["parse", g, "{B}/c.txt"],
    "estep": lambda g: ["estep", g, "{B}/c.txt"],
    "train": lambda g: ["train", "--iterations", "1", g, "{B}/c.txt"],
    "from-file": lambda g: ["make-grammar", "from-file", g],
    "mstep": lambda g: ["mstep", "--grammar", g, "{B}/counts.txt"],
}


def grammar_name(kind):
    return {"truncated-gz": "g.txt.gz", "not-gzip": "g.txt.gz", "truncated-xz": "g.txt.xz",
            "missing": "nosuch.txt"}.get(kind, "g.txt")


for kind, (content, must) in BAD_GRAMMARS.items():
    name = grammar_name(kind)
    files = {} if content is None else {name: content}
    m = subst(must, "{T}/" + name)
    for cmd, make in GRAMMAR_COMMANDS.items():
        if kind == "weights-header-unknown" and cmd in ("init", "from-file", "mstep"):
            continue    # these do not use the weights
        case(f"grammar-{kind}-{cmd}", make("{T}/" + name), files, must=m)
    if kind in ("empty", "no-arrow", "negative-weight", "nan-weight", "invalid-utf8", "corpus-as-grammar", "directory"):
        # the same reader behind --alpha FILE (per-rule pseudo-counts)
        case(f"grammar-{kind}-train-alpha-file", ["train", "--iterations", "1", "--alpha", "{T}/" + name,
                                                   "{B}/gp.txt", "{B}/c.txt"], files, must=m)

# grammar from stdin: the message names <stdin> (or -) and the line
case("grammar-stdin-no-arrow-estep", ["estep", "-", "{B}/c.txt"], stdin=pcfg_with(4, "0.5 NP D N").encode(),
     must=(("<stdin>:4", "-:4"),))
case("grammar-stdin-invalid-utf8-init", ["init", "-"], stdin=PCFG.encode().replace(b"NP --> D N", b"NP --> D \xfe"),
     must=(("<stdin>:3", "-:3"),))

# weights that are not probabilities, with no header saying what they are: loglik/parse refuse
UNNORM_HIGH = "".join("1 " + ln.split(" ", 1)[1] + "\n" for ln in RULES)
UNNORM_LOW = PCFG.replace("# weights: probabilities\n", "").replace("0.25 N --> dog", "0.05 N --> dog")
for what, text in (("above-1", UNNORM_HIGH), ("below-1", UNNORM_LOW)):
    for cmd in ("loglik", "parse"):
        case(f"grammar-not-normalised-{what}-{cmd}", [cmd, "{T}/g.txt", "{B}/c.txt"], {"g.txt": text},
             must=("{T}/g.txt",))
# a count file as the grammar of parse / loglik
for cmd in ("parse", "loglik"):
    case(f"counts-as-grammar-{cmd}", [cmd, "{B}/counts.txt", "{B}/c.txt"], must=("{B}/counts.txt",))
# a unary cycle
CYCLE = PCFG + "0.5 X --> Y\n1 Y --> X\n0.5 X --> dog\n"
CYCLE = CYCLE.replace("0.5 V --> barks", "0.25 V --> barks\n0.25 V --> X")
for cmd, make in (("from-file", GRAMMAR_COMMANDS["from-file"]), ("estep", GRAMMAR_COMMANDS["estep"]),
                  ("loglik", GRAMMAR_COMMANDS["loglik"])):
    case(f"grammar-unary-cycle-{cmd}", make("{T}/g.txt"), {"g.txt": CYCLE}, must=("{T}/g.txt", "cycle"))


def bom_grammar_check(T, out, err):
    text = (T / "out.txt").read_text(encoding="utf-8")
    rules = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert "\ufeff" not in text and rules[0].endswith(" S --> NP VP"), rules[:2]


case("grammar-bom-init", ["init", "{T}/g.txt"], {"g.txt": "\ufeff" + PCFG}, check=bom_grammar_check)
case("grammar-bom-no-header-from-file", ["make-grammar", "from-file", "{T}/g.txt"],
     {"g.txt": "\ufeff" + "\n".join(RULES) + "\n"}, check=bom_grammar_check)

# --- count files: each malformed count file x sum / mstep

COUNTS = "# weights: expected rule counts\n# sentences: 5\n" + "".join(
    "1 " + ln.split(" ", 1)[1] + "\n" for ln in RULES)          # rule k on line k + 3


def counts_with(line: int, text: str) -> str:
    lines = COUNTS.splitlines()
    lines[line - 1] = text
    return "\n".join(lines) + "\n"


BAD_COUNTS = {
    "empty": ("", ("{F}",)),
    "only-comments": ("# weights: expected rule counts\n# sentences: 5\n", ("{F}",)),
    "loglik-nan": (counts_with(2, "# loglik: nan"), ("{F}", "loglik")),
    "sentences-not-number": (counts_with(2, "# sentences: five"), ("{F}", "sentences")),
    "negative-count": (counts_with(5, "-2 NP --> N"), ("{F}:5",)),
    "nan-count": (counts_with(5, "nan NP --> N"), ("{F}:5",)),
    "inf-count": (counts_with(5, "inf NP --> N"), ("{F}:5",)),
    "two-numbers": (counts_with(5, "2 3 NP --> N"), ("{F}:5",)),
    "duplicate-rule": (counts_with(5, "1 NP --> D N"), ("{F}:5",)),
    "no-arrow": (counts_with(5, "1 NP N"), ("{F}:5",)),
    "invalid-utf8": (COUNTS.encode().replace(b"1 NP --> N\n", b"1 NP --> N\xc3\n"), ("{F}:5",)),
    "truncated-mid-line": (COUNTS + "1 NP --", ("{F}:15",)),
    "grammar-as-counts": (PCFG, ("{F}",)),
    "corpus-as-counts": (CORPUS, ("{F}:1",)),
    "truncated-gz": (truncated(b"# weights: expected rule counts\n" + b"1 S --> NP VP\n" * 200, "gz"), ("{F}",)),
    "missing": (None, ("{F}",)),
}
for kind, (content, must) in BAD_COUNTS.items():
    name = {"truncated-gz": "k.txt.gz", "missing": "nosuch.txt"}.get(kind, "k.txt")
    files = {} if content is None else {name: content}
    m = subst(must, "{T}/" + name)
    case(f"counts-{kind}-sum", ["sum", "{B}/counts.txt", "{T}/" + name], files, must=m)
    case(f"counts-{kind}-mstep", ["mstep", "--grammar", "{B}/gp.txt", "{T}/" + name], files, must=m)
case("counts-of-two-grammars-sum", ["sum", "{B}/counts.txt", "{B}/counts2.txt"], must=("{B}/counts2.txt",))
case("counts-of-other-grammar-mstep", ["mstep", "--grammar", "{B}/gp.txt", "{B}/counts2.txt"],
     must=("{B}/counts2.txt",))


def bom_counts_check(T, out, err):
    text = (T / "out.txt").read_text(encoding="utf-8")
    assert "\ufeff" not in text and "# sentences: 5" in text, text[:400]


case("counts-bom-sum", ["sum", "{T}/k.txt"], {"k.txt": "COPY:counts.txt:BOM"}, check=bom_counts_check)

# --- plain-text corpora x commands that read one

BAD_TEXT = {
    # name: (file name, content, extra options, must, codes)
    "empty": ("c.txt", "", [], ("{F}",), (1,)),
    "only-comments": ("c.txt", "# a comment\n# another\n", [], ("{F}",), (1,)),
    "blank-lines-only": ("c.txt", "\n\n  \n", [], ("{F}",), (1,)),
    "invalid-utf8": ("c.txt", b"the dog barks\ndogs barks\na \xe9 cat barks\n", [], ("{F}:3",), (1,)),
    "utf16": ("c.txt", utf16(CORPUS), [], ("{F}",), (1,)),
    "truncated-gz": ("c.txt.gz", truncated(CORPUS.encode() * 50, "gz"), [], ("{F}",), (1,)),
    "truncated-xz": ("c.txt.xz", truncated(CORPUS.encode() * 50, "xz"), [], ("{F}",), (1,)),
    "not-gzip": ("c.txt.gz", CORPUS, [], ("{F}",), (1,)),
    "grammar-as-corpus": ("c.txt", PCFG, [], ("{F}",), (1,)),
    "tabs-format-auto": ("c.txt", "the\tdog\tbarks\ndogs barks\n", [], ("{F}", ("{F}:1", "first line")), (1,)),
    "format-conllu-given": ("c.txt", CORPUS, ["--format", "conllu", "--column", "XPOS"], ("{F}:1",), (1,)),
    "column-on-text": ("c.txt", CORPUS, ["--column", "UPOS"], ("--column",), (1, 2)),
    "punct-on-text": ("c.txt", CORPUS, ["--punct", "ud"], ("--punct",), (1, 2)),
    "all-filtered-by-length": ("c.txt", CORPUS, ["--max-length", "1"], ("{F}",), (1,)),
    "missing": ("nosuch.txt", None, [], ("{F}",), (1,)),
    "directory": ("c.txt", "DIR", [], ("{F}",), (1,)),
}
TEXT_COMMANDS = {
    "estep": lambda c, o: ["estep", *o, "{B}/gp.txt", c],
    "parse": lambda c, o: ["parse", *o, "{B}/gp.txt", c],
    "train": lambda c, o: ["train", "--iterations", "1", *o, "{B}/gp.txt", c],
    "make-cnf": lambda c, o: ["make-grammar", "cnf", "-n", "2", *o, c],
}
for kind, (name, content, opts, must, codes) in BAD_TEXT.items():
    files = {} if content is None else {name: content}
    m = subst(must, "{T}/" + name)
    for cmd, make in TEXT_COMMANDS.items():
        case(f"text-{kind}-{cmd}", make("{T}/" + name, opts), files, codes=codes, must=m)
case("text-stdin-invalid-utf8-estep", ["estep", "{B}/gp.txt", "-"], stdin=b"the dog barks\nthe \xff\n",
     must=(("<stdin>:2", "-:2"),))


def bom_text_check(T, out, err):
    rows = [ln.split("\t") for ln in (T / "out.txt").read_text(encoding="utf-8").splitlines()
            if ln and not ln.startswith("#")]
    assert rows[0][1] == "the", rows[0]


case("text-bom-baseline", ["baseline", "--attach", "right", "{T}/c.txt"], {"c.txt": "\ufeff" + CORPUS},
     check=bom_text_check)
case("text-bom-estep", ["estep", "{B}/gp.txt", "{T}/c.txt"], {"c.txt": "\ufeff" + CORPUS},
     check=lambda T, o, e: "unknown word" not in e and "# parsed: 5" in (T / "out.txt").read_text())

# --- treebanks (CoNLL-U, CoNLL-X, Malt-TAB, PTB) x commands that read one

TWO_SENTS = CONLLU.split("\n\n")[1]
BAD_TREEBANKS = {
    # name: (file name, content, extra options, must, codes)
    "id-gap": ("t.conllu", conll_with(3, row(3, 0, "4")), [], ("{F}:3",), (1,)),
    "id-repeat": ("t.conllu", conll_with(3, row(3, 0, "2")), [], ("{F}:3",), (1,)),
    "id-not-number": ("t.conllu", conll_with(2, row(2, 0, "x")), [], ("{F}:2",), (1,)),
    "id-zero": ("t.conllu", conll_with(1, row(1, 0, "0")), [], ("{F}:1",), (1,)),
    "head-out-of-range": ("t.conllu", conll_with(2, row(2, 6, "7")), [], ("{F}:2",), (1,)),
    "head-negative": ("t.conllu", conll_with(2, row(2, 6, "-1")), [], ("{F}:2",), (1,)),
    "head-not-number": ("t.conllu", conll_with(2, row(2, 6, "x")), [], ("{F}:2",), (1,)),
    "head-partly-blank": ("t.conllu", conll_with(2, row(2, 6, "_")), [], ("{F}:2",), (1,)),
    "head-cycle": ("t.conllu", conll_with(3, row(3, 6, "2")), [], (("{F}:1", "{F}:2", "{F}:3"),), (1,)),
    "head-self-loop": ("t.conllu", conll_with(1, row(1, 6, "1")), [], ("{F}:1",), (1,)),
    "nine-columns": ("t.conllu", conll_with(2, "\t".join(CONLL_ROWS[1].split("\t")[:9])), [], ("{F}:2",), (1,)),
    "truncated-mid-line": ("t.conllu", CONLLU.rstrip("\n") + "\n5\tdog", [], ("{F}:9",), (1,)),
    "invalid-utf8": ("t.conllu", conll_with(6, row(6, 1, "c\udcffat")).encode("utf-8", "surrogateescape"),
                     [], ("{F}:6",), (1,)),
    "utf16": ("t.conllu", utf16(CONLLU), [], ("{F}",), (1,)),
    "empty": ("t.conllu", "", [], ("{F}",), (1,)),
    "only-comments": ("t.conllu", "# sent_id = 1\n# text = nothing\n", [], ("{F}",), (1,)),
    "truncated-gz": ("t.conllu.gz", truncated(CONLLU.encode() * 20, "gz"), [], ("{F}",), (1,)),
    "no-column": ("t.conllu", CONLLU, ["--column", None], ("--column",), (1, 2)),
    "conllx-eight-columns": ("t.conllx", conll_with(5, "\t".join(CONLL_ROWS[4].split("\t")[:8])), [],
                             ("{F}:5",), (1,)),
    "malt-five-columns": ("t.malt", "The\tDT\t2\tdet\n dog\tNN\t3\tnsubj\textra\nbarks\tVB\t0\troot\n",
                          ["--format", "malt"], ("{F}:2",), (1,)),
    "malt-head-not-number": ("t.malt", "The\tDT\t2\nbarks\tVB\troot\n", ["--format", "malt"], ("{F}:2",), (1,)),
    "ptb-unbalanced": ("t.mrg", "(S (NP (DT The) (NN dog)) (VP (VB barks))\n", [], ("{F}",), (1,)),
    "ptb-not-a-tree": ("t.mrg", "The dog barks\n", [], ("{F}",), (1,)),
    "ptb-extra-close": ("t.mrg", "(S (NP (DT The) (NN dog)) (VP (VB barks))))\n(S (VB barks))\n", [],
                        ("{F}",), (1,)),
    "text-as-treebank": ("t.conllu", CORPUS, [], ("{F}:1",), (1,)),
}
TREEBANK_COMMANDS = {
    "estep": lambda c, o: ["estep", *o, "{B}/dmv1.txt", c],
    "train": lambda c, o: ["train", "--iterations", "1", *o, "{B}/dmv1.txt", c],
    "make-dmv": lambda c, o: ["make-grammar", "dmv", *o, c],
    "baseline": lambda c, o: ["baseline", "--attach", "left", *o, c],
    "eval-gold": lambda c, o: ["eval", *o, c, "{B}/t.conllu"],
    "harmonic": lambda c, o: ["init", "--harmonic", "--corpus", c, *o, "{B}/dmv.txt"],
}


def treebank_opts(opts):
    if opts == ["--column", None]:
        return []
    return XPOS + opts


for kind, (name, content, opts, must, codes) in BAD_TREEBANKS.items():
    files = {name: content}
    m = subst(must, "{T}/" + name)
    for cmd, make in TREEBANK_COMMANDS.items():
        case(f"treebank-{kind}-{cmd}", make("{T}/" + name, treebank_opts(opts)), files, codes=codes, must=m)
for kind in ("head-out-of-range", "nine-columns", "invalid-utf8", "empty"):
    name, content, opts, must, codes = BAD_TREEBANKS[kind]
    case(f"treebank-{kind}-eval-predicted", ["eval", *treebank_opts(opts), "{B}/t.conllu", "{T}/" + name],
         {name: content}, codes=codes, must=subst(must, "{T}/" + name))


def bom_conllu_check(T, out, err):
    rows = [ln.split("\t") for ln in (T / "out.txt").read_text(encoding="utf-8").splitlines()
            if ln and not ln.startswith("#")]
    assert rows[0][:2] == ["1", "The"], rows[0]


case("treebank-bom-baseline", ["baseline", "--attach", "right", *XPOS, "{T}/t.conllu"],
     {"t.conllu": "\ufeff" + CONLLU}, check=bom_conllu_check)

# --- tag files (make-grammar dmv --tags)

DMV_TAGS = lambda p: ["make-grammar", "dmv", *XPOS, "--tags", p, "{B}/t.conllu"]  # noqa: E731
for kind, name, content, must in (
        ("empty", "tags.txt", "", ("{F}",)),
        ("only-comments", "tags.txt", "# tags\n# none\n", ("{F}",)),
        ("invalid-utf8", "tags.txt", b"DT NN\nJJ \xff\n", ("{F}:2",)),
        ("utf16", "tags.txt", utf16("DT NN\nJJ\n"), ("{F}",)),
        ("truncated-gz", "tags.txt.gz", truncated(b"DT NN JJ\n" * 100, "gz"), ("{F}",)),
        ("missing", "nosuch.txt", None, ("{F}",)),
        ("directory", "tags.txt", "DIR", ("{F}",))):
    case(f"tags-{kind}", DMV_TAGS("{T}/" + name), {} if content is None else {name: content},
         must=subst(must, "{T}/" + name))


def bom_tags_check(T, out, err):
    text = (T / "out.txt").read_text(encoding="utf-8")
    assert "\ufeff" not in text and "Y_JJ --> L0_JJ R0_JJ" in text


case("tags-bom", DMV_TAGS("{T}/tags.txt"), {"tags.txt": "\ufeffJJ DT\n"}, check=bom_tags_check)

# --- structure files (train --algo ln --tie FILE)

LN_TRAIN = ["train", "--algo", "ln", "--iterations", "1", "--tie-warmup", "0", *XPOS]
for kind, content, must in (
        ("empty", "", ("{F}",)),
        ("only-comments", "# a structure\n# nothing\n", ("{F}",)),
        ("bad-line", "own yes\nexpert\n", ("{F}:2",)),
        ("own-maybe", "own maybe\n", ("{F}:1",)),
        ("unknown-lhs", "own yes\nexpert e1 L'_DT NOPE\n", ("{F}:2", "NOPE")),
        ("duplicate-expert", "own yes\nexpert e1 L'_DT L'_NN\nexpert e1 L'_VB L'_NN\n", ("{F}:3",)),
        ("truncated-mid-line", "own yes\nexpert e1 L'_DT L'_NN\nexp", ("{F}:3",)),
        ("invalid-utf8", b"own yes\nexpert e\xff L'_DT L'_NN\n", ("{F}:2",)),
        ("utf16", utf16("own yes\nexpert e1 L'_DT L'_NN\n"), ("{F}",)),
        ("grammar-as-structure", PCFG, ("{F}:2",)),
        ("missing", None, ("{F}",)),
        ("directory", "DIR", ("{F}",))):
    name = "nosuch.txt" if content is None else "s.txt"
    case(f"structure-{kind}", [*LN_TRAIN, "--tie", "{T}/" + name, "{B}/dmv1.txt", "{B}/t.conllu"],
         {} if content is None else {name: content}, must=subst(must, "{T}/" + name))
case("structure-bom", [*LN_TRAIN, "--tie", "{T}/s.txt", "{B}/dmv1.txt", "{B}/t.conllu"],
     {"s.txt": "COPY:struct.txt:BOM"}, check=lambda T, o, e: (T / "out.txt").read_text().startswith("# grind"))
case("families-missing-train", ["train", "--algo", "ln", "--iterations", "1", "--cov", "families", "--families",
                                "{T}/nosuch.txt", *XPOS, "{B}/dmv1.txt", "{B}/t.conllu"], must=("{T}/nosuch.txt",))
case("families-bad-line-train", ["train", "--algo", "ln", "--iterations", "1", "--cov", "families", "--families",
                                 "{T}/f.txt", *XPOS, "{B}/dmv1.txt", "{B}/t.conllu"], {"f.txt": "DT det\nNN\n"},
     must=("{T}/f.txt:2",))
case("families-missing-make-structure", ["make-structure", "--tie", "A", "--families", "{T}/nosuch.txt",
                                         "{B}/dmv.txt"], must=("{T}/nosuch.txt",))
case("families-invalid-utf8-make-structure", ["make-structure", "--tie", "A", "--families", "{T}/f.txt",
                                              "{B}/dmv.txt"], {"f.txt": b"DT det\nNN n\xffoun\n"},
     must=("{T}/f.txt:2",))
case("make-structure-pcfg", ["make-structure", "--tie", "A", "{B}/gp.txt"], codes=(1, 2), must=("{B}/gp.txt",))
case("make-structure-bad-grammar", ["make-structure", "--tie", "V", "{T}/g.txt"], {"g.txt": pcfg_with(4, "NP D N")},
     must=("{T}/g.txt:4",))
case("make-structure-three-grammars", ["make-structure", "--tie", "V", "{B}/dmv.txt", "{B}/dmv.txt",
                                       "{B}/dmv.txt"], codes=(2,), must=(("grammar", "GRAMMARS"),))

# --- logistic-normal parameter files x (train --ln-init, parse --committee)

LN_TEXT_FIX = "COPY:ln.params"
BAD_LN = {
    # name: (content (or an edit of the real file), must)
    "empty": ("", ("{F}",)),
    "only-comments": ("# model: logistic-normal prior\n", ("{F}",)),
    "line-before-header": ("mu 0 S --> Y_DT\n", ("{F}:1",)),
    # edits of the real file: line 6 '# multinomial L'_DT', 7-9 its mu lines, 10-12 its cov rows
    "mu-not-number": (("EDIT", 7, "mu x L'_DT --> Y_DT L_DT"), ("{F}:7",)),
    "mu-nan": (("EDIT", 7, "mu nan L'_DT --> Y_DT L_DT"), ("{F}:7",)),
    "mu-wrong-rule": (("EDIT", 7, "mu 0 L'_DT --> Y_DT"), ("{F}",)),
    "cov-inf": (("EDIT", 10, "cov inf 0 0"), ("{F}:10",)),
    "cov-short-row": (("EDIT", 11, "cov 0 1"), ("{F}:11",)),
    "cov-not-symmetric": (("EDIT", 10, "cov 1 0.5 0"), ("{F}",)),
    "cov-not-positive-definite": (("EDIT", 10, "cov -1 0 0"), ("{F}",)),
    "truncated-mid-line": (("TRUNCATE", 11, "cov 0 1"), ("{F}:11",)),
    "unknown-multinomial": (("APPEND", "# multinomial Q\nmu 0 Q --> Y_DT\ncov 1\n"), ("{F}", "Q")),
    "invalid-utf8": (b"# multinomial S\nmu 0 S --> Y_\xffDT\n", ("{F}:2",)),
    "grammar-as-params": (PCFG, ("{F}:2",)),
    "missing": (None, ("{F}",)),
}
for kind, (content, must) in BAD_LN.items():
    name = "nosuch.params" if content is None else "p.params"
    files = {} if content is None else {name: content if not isinstance(content, tuple) else ("LN",) + content}
    m = subst(must, "{T}/" + name)
    case(f"ln-params-{kind}-ln-init", ["train", "--algo", "ln", "--iterations", "1", *XPOS, "--ln-init",
                                       "{T}/" + name, "{B}/dmv1.txt", "{B}/t.conllu"], files, must=m)
    case(f"ln-params-{kind}-committee", ["parse", "--committee", "{T}/" + name, "--seed", "1", *XPOS,
                                         "{B}/dmv1.txt", "{B}/t.conllu"], files, must=m)

# --- checkpoints (train --checkpoint FILE --resume)

RESUME = ["train", "--iterations", "3", "--checkpoint", "{T}/ck.npz", "--resume"]
for kind, content, extra, must, codes in (
        ("missing", None, [], ("{T}/ck.npz",), (1,)),
        ("empty", "", [], ("{T}/ck.npz",), (1,)),
        ("text-file", PCFG, [], ("{T}/ck.npz",), (1,)),
        ("random-bytes", bytes(range(256)) * 4, [], ("{T}/ck.npz",), (1,)),
        ("truncated", "COPY:ck.npz:HALF", [], ("{T}/ck.npz",), (1,)),
        ("npz-without-header", "NPZ:plain", [], ("{T}/ck.npz",), (1,)),
        ("npz-bad-header", "NPZ:badheader", [], ("{T}/ck.npz",), (1,)),
        ("directory", "DIR", [], ("{T}/ck.npz",), (1,)),
        ("other-algorithm", "COPY:ck.npz", ["--algo", "vb"], ("{T}/ck.npz", ("algorithm", "--algo")), (1,)),
        ("changed-alpha", "COPY:ck.npz", ["--alpha", "2"], ("alpha",), (1, 2)),
        ("changed-corpus", "COPY:ck.npz", ["CORPUS2"], ("{T}/ck.npz",), (1,)),
        ("other-grammar", "COPY:ck.npz", ["GRAMMAR2"], ("{T}/ck.npz",), (1,))):
    a = [x for x in extra if x not in ("CORPUS2", "GRAMMAR2")]
    g = "{B}/g2.txt" if "GRAMMAR2" in extra else "{B}/gp.txt"
    c = "{B}/c2.txt" if "CORPUS2" in extra else "{B}/c.txt"
    files = {} if content is None else ({"ck.npz": content})
    case(f"resume-{kind}", [*RESUME, *a, g, c], files, codes=codes, must=must)
case("resume-without-checkpoint", ["train", "--iterations", "3", "--resume", "{B}/gp.txt", "{B}/c.txt"],
     codes=(2,), must=("--resume",))

# --- options at their edges

TR = ["train", "--iterations", "1"]
GC = ["{B}/gp.txt", "{B}/c.txt"]
DMV = [*XPOS, "{B}/dmv1.txt", "{B}/t.conllu"]
OPTION_CASES = [
    ("seed-negative-train", [*TR, "--seed", "-1", *GC], (2,), ("--seed",)),
    ("seed-negative-init", ["init", "--random", "--seed", "-1", "{B}/gp.txt"], (2,), ("--seed",)),
    ("seed-not-number", ["init", "--random", "--seed", "abc", "{B}/gp.txt"], (2,), ("--seed",)),
    ("max-length-0", ["estep", "--max-length", "0", *GC], (2,), ("--max-length",)),
    ("min-length-0", ["estep", "--min-length", "0", *GC], (2,), ("--min-length",)),
    ("min-length-above-max-length", ["estep", "--min-length", "5", "--max-length", "3", *GC], (2,),
     (("--min-length", "--max-length"),)),
    ("iterations-0", ["train", "--iterations", "0", *GC], (2,), ("--iterations",)),
    # alternatives sharing one option (click would let the last one win silently)
    ("viterbi-and-mbr", ["parse", "--viterbi", "--mbr", *DMV], (2,), ("--viterbi", "--mbr")),
    ("mbr-and-max-rule-sum", ["parse", "--mbr", "--max-rule-sum", *DMV], (2,), ("--mbr", "--max-rule-sum")),
    ("random-and-harmonic", ["init", "--random", "--harmonic", "{B}/gp.txt"], (2,), ("--random", "--harmonic")),
    ("iterations-not-number", ["train", "--iterations", "zero", *GC], (2,), ("--iterations",)),
    ("alpha-0-train", [*TR, "--alpha", "0", *GC], (2,), ("--alpha",)),
    ("alpha-negative-train", [*TR, "--alpha", "-1", *GC], (2,), ("--alpha",)),
    ("alpha-nan-train", [*TR, "--alpha", "nan", *GC], (2,), ("--alpha",)),
    ("alpha-inf-train", [*TR, "--alpha", "inf", *GC], (2,), ("--alpha",)),
    ("alpha-word-train", [*TR, "--alpha", "abc", *GC], (1, 2), ("--alpha", "abc")),
    ("alpha-missing-file-train", [*TR, "--alpha", "{T}/missing-file.txt", *GC], (1, 2), ("missing-file.txt",)),
    ("alpha-negative-vb", ["train", "--algo", "vb", "--iterations", "1", "--alpha", "-0.5", *GC], (2,), ("--alpha",)),
    ("alpha-negative-mstep", ["mstep", "--alpha", "-1", "{B}/counts.txt"], (2,), ("--alpha",)),
    ("alpha-nan-mstep", ["mstep", "--alpha", "nan", "{B}/counts.txt"], (2,), ("--alpha",)),
    ("alpha-inf-mstep", ["mstep", "--alpha", "inf", "{B}/counts.txt"], (2,), ("--alpha",)),
    ("alpha-word-mstep", ["mstep", "--alpha", "abc", "{B}/counts.txt"], (2,), ("--alpha",)),
    ("mix-coef-not-number", ["train", "--algo", "mixture", "--base", "em", "--iterations", "1",
                             "--mix-coef", "0.3,abc", *DMV], (2,), ("--mix-coef",)),
    ("mix-coef-not-summing-to-1", ["train", "--algo", "mixture", "--base", "em", "--iterations", "1",
                                   "--mix-coef", "0.5,0.6", *DMV], (2,), ("--mix-coef",)),
    ("mix-coef-negative", ["train", "--algo", "mixture", "--base", "em", "--iterations", "1",
                           "--mix-coef", "1.5,-0.5", *DMV], (2,), ("--mix-coef",)),
    ("mix-coef-wrong-count", ["train", "--algo", "mixture", "--base", "em", "--iterations", "1",
                              "--mix-coef", "0.5,0.25,0.25", *DMV], (2,), ("--mix-coef",)),
    ("mix-coef-without-mixture", [*TR, "--mix-coef", "0.5,0.5", *GC], (2,), ("--mix-coef",)),
    ("mix-start-above-1", ["train", "--algo", "mixture", "--mix-start", "1.5", *DMV], (2,), ("--mix-start",)),
    ("mix-start-above-mix-end", ["train", "--algo", "mixture", "--base", "em", "--mix-start", "0.9",
                                 "--mix-end", "0.8", *DMV], (2,), ("--mix-start",)),
    ("mixture-on-pcfg", ["train", "--algo", "mixture", "--base", "em", "--iterations", "1", *GC], (1, 2),
     (("{B}/gp.txt", "--algo"),)),
    ("mix-constraints-unknown", ["train", "--algo", "mixture", "--base", "em", "--iterations", "1",
                                 "--constraints", "RA+XYZ", *DMV], (2,), ("--constraints",)),
    ("kappa-0.2", ["train", "--algo", "stochastic", "--kappa", "0.2", *GC], (2,), ("--kappa",)),
    ("tau-negative", ["train", "--algo", "stochastic", "--tau", "-1", *GC], (2,), ("--tau",)),
    ("batch-0", ["train", "--algo", "stochastic", "--batch", "0", *GC], (2,), ("--batch",)),
    ("first-batch-0", ["train", "--algo", "streaming", "--first-batch", "0", *GC], (2,), ("--first-batch",)),
    ("batch-iterations-0", ["train", "--algo", "streaming", "--batch-iterations", "0", *GC], (2,),
     ("--batch-iterations",)),
    ("epochs-0", ["train", "--algo", "stochastic", "--epochs", "0", *GC], (2,), ("--epochs",)),
    ("jobs-0", [*TR, "--jobs", "0", *GC], (2,), ("--jobs",)),
    ("tolerance-negative", [*TR, "--tolerance", "-1", *GC], (2,), ("--tolerance",)),
    ("tolerance-nan", [*TR, "--tolerance", "nan", *GC], (2,), ("--tolerance",)),
    ("temp-start-below-1", ["train", "--algo", "hastings", "--temp-start", "0.5", *GC], (2,), ("--temp-start",)),
    ("anneal-sweeps-0", ["train", "--algo", "gibbs", "--anneal-sweeps", "0", *GC], (2,), ("--anneal-sweeps",)),
    ("checkpoint-every-negative", [*TR, "--checkpoint-every", "-1", *GC], (2,), ("--checkpoint-every",)),
    ("ln-cycles-0", ["train", "--algo", "ln", "--ln-cycles", "0", *DMV], (2,), ("--ln-cycles",)),
    ("tie-warmup-negative", ["train", "--algo", "ln", "--tie", "V", "--tie-warmup", "-1", *DMV], (2,),
     ("--tie-warmup",)),
    ("tie-neither-name-nor-file", ["train", "--algo", "ln", "--iterations", "1", "--tie", "Q", *DMV], (1, 2),
     (("--tie", "Q"),)),
    ("tie-without-ln", [*TR, "--tie", "V", *GC], (2,), ("--tie",)),
    ("ln-params-without-ln", [*TR, "--ln-params", "{T}/p.params", *GC], (2,), ("--ln-params",)),
    ("ln-model-3", ["train", "--algo", "ln", "--model", "3", *DMV], (2,), ("--model",)),
    ("joint-without-joint-output", ["train", "--algo", "ln", "--joint", "{B}/dmv1.txt", "{B}/t.conllu", *DMV],
     (2,), ("--joint",)),
    ("eval-every-without-dev", [*TR, "--eval-every", "5", *GC], (2,), ("--eval-every",)),
    ("early-stop-without-eval-every", [*TR, "--early-stop", *GC], (2,), ("--early-stop",)),
    ("dev-missing-file", [*TR, "--dev", "{T}/nosuch.txt", "--eval-every", "1", *GC], (1,), ("{T}/nosuch.txt",)),
    ("dev-invalid-utf8", [*TR, "--dev", "{T}/d.txt", "--eval-every", "1", *GC], (1,), ("{T}/d.txt:2",)),
    ("algo-unknown", ["train", "--algo", "sgd", *GC], (2,), ("--algo",)),
    ("kernel-dmv-on-cnf-parse", ["parse", "--kernel", "dmv", *GC], (1, 2), ("--kernel",)),
    ("kernel-dmv-on-cnf-train", [*TR, "--kernel", "dmv", *GC], (1, 2), ("--kernel",)),
    ("kernel-unknown", ["parse", "--kernel", "fast", *GC], (2,), ("--kernel",)),
    ("mbr-on-pcfg", ["parse", "--mbr", *GC], (2,), ("--mbr",)),
    ("committee-on-pcfg", ["parse", "--committee", "{B}/ln.params", *GC], (2,), ("--committee",)),
    ("committee-missing-file", ["parse", "--committee", "{T}/nosuch.params", "--seed", "1", *DMV], (1,),
     ("{T}/nosuch.params",)),
    ("start-unknown-estep", ["estep", "--start", "NOPE", *GC], (1, 2), ("NOPE",)),
    ("start-unknown-init", ["init", "--start", "NOPE", "{B}/gp.txt"], (1, 2), ("NOPE",)),
    ("column-unknown", ["estep", "--column", "LEMMA", *GC], (2,), ("--column",)),
    ("format-unknown", ["estep", "--format", "json", *GC], (2,), ("--format",)),
    ("harmonic-on-pcfg", ["init", "--harmonic", "--corpus", "{B}/c.txt", "{B}/gp.txt"], (2,), ("--harmonic",)),
    ("harmonic-without-corpus", ["init", "--harmonic", "{B}/dmv.txt"], (2,), ("--corpus",)),
    ("variant-without-harmonic", ["init", "--variant", "independent", "{B}/dmv.txt"], (2,), ("--variant",)),
    ("jitter-negative", ["init", "--random", "--jitter", "-1", "{B}/gp.txt"], (2,), ("--jitter",)),
    ("jitter-nan", ["init", "--random", "--jitter", "nan", "{B}/gp.txt"], (2,), ("--jitter",)),
    ("cnf-nonterminals-0", ["make-grammar", "cnf", "-n", "0", "{B}/c.txt"], (2,), (("-n", "--nonterminals"),)),
    ("cnf-preterminals-negative", ["make-grammar", "cnf", "-n", "2", "-p", "-1", "{B}/c.txt"], (2,),
     (("-p", "--preterminals"),)),
    ("cnf-without-n", ["make-grammar", "cnf", "{B}/c.txt"], (2,), (("-n", "--nonterminals"),)),
    ("lexicalized-with-tags", ["make-grammar", "dmv", "--lexicalized", *XPOS, "--tags", "{B}/tags.txt",
                               "{B}/t.conllu"], (2,), ("--tags",)),
    ("words-from-unlexicalized", ["make-grammar", "dmv", *XPOS, "--words-from", "{B}/t.conllu", "{B}/t.conllu"], (2,),
     ("--words-from",)),
    ("tie-what-unknown", ["make-structure", "--tie", "V", "--tie-what", "stop", "{B}/dmv.txt"], (2,),
     ("--tie-what",)),
    ("tie-unknown-make-structure", ["make-structure", "--tie", "Z", "{B}/dmv.txt"], (2,), ("--tie",)),
    ("eval-gold-stdin-without-format", ["eval", "-", "{B}/t.conllu"], (2,), ("--format",)),
    ("eval-without-predicted", ["eval", "{B}/t.conllu"], (2,), (("PREDICTED", "predicted"),)),
    ("eval-pcfg-trees-vs-conllu", ["eval", *XPOS, "{B}/t.conllu", "{T}/p.mrg"], (1,), ("{T}/p.mrg",)),
    ("sum-without-files", ["sum"], (2,), (("COUNTS", "counts"),)),
    ("attach-unknown", ["baseline", "--attach", "up", *XPOS, "{B}/t.conllu"], (2,), ("--attach",)),
    ("unknown-option", ["estep", "--fast", *GC], (2,), ("--fast",)),
    ("unknown-command", ["estimate", *GC], (2,), ("estimate",)),
]
OPTION_FILES = {"dev-invalid-utf8": {"d.txt": b"the dog barks\nthe \xff\n"},
                "eval-pcfg-trees-vs-conllu": {"p.mrg": "(S (NP (D the) (N dog)) (VP (V barks)))\n"}}
for name, args, codes, must in OPTION_CASES:
    case(f"option-{name}", args, OPTION_FILES.get(name, {}), codes=codes, must=must)

# --- output paths: -o (init, train), --trace, --checkpoint, --ln-params

OUT_TARGETS = {
    "o-init": (lambda p: ["init", "-o", p, "{B}/gp.txt"], ("-o", "--output")),
    "o-train": (lambda p: [*TR, "-o", p, *GC], ("-o", "--output")),
    "trace": (lambda p: [*TR, "--trace", p, "-o", "{T}/out.txt", *GC], ("--trace",)),
    "checkpoint": (lambda p: [*TR, "--checkpoint", p, "-o", "{T}/out.txt", *GC], ("--checkpoint",)),
    "ln-params": (lambda p: ["train", "--algo", "ln", "--iterations", "1", "--ln-params", p, "-o", "{T}/out.txt",
                             *DMV], ("--ln-params",)),
}
OUT_KINDS = ["missing-directory", "directory", "empty-string", "read-only-directory", "symlink-to-file",
             "dangling-symlink", "fifo", "dev-null", "dev-full", "trailing-slash"]
OUT_PATH = {"missing-directory": "{T}/nodir/x.out", "directory": "{T}/adir", "empty-string": "",
            "read-only-directory": "{RO}/x.out", "symlink-to-file": "{T}/link.out",
            "dangling-symlink": "{T}/dangling.out", "fifo": "{T}/fifo.out", "dev-null": "{T}/null",
            "dev-full": "{T}/full", "trailing-slash": "{T}/x.out/"}
for tgt, (make, opt) in OUT_TARGETS.items():
    for kind in OUT_KINDS:
        p = OUT_PATH[kind]
        must = (opt,) if kind == "empty-string" else ("x.out",) if kind == "read-only-directory" else \
            (p.replace("{T}/", "").split("/")[0],)
        codes = (1, 2) if kind == "empty-string" else (1,)
        succeed = kind in ("symlink-to-file", "fifo", "dev-null")
        if tgt == "checkpoint" and kind in ("fifo", "dev-null"):    # read back by --resume: a regular file
            succeed, must = False, ("--checkpoint", "not a regular file")
        case(f"output-{tgt}-{kind}", make(p), {"OUTKIND": kind}, codes=codes, must=must, output=False,
             check=("OUTPUT", kind, tgt) if succeed else None)


# ----------------------------------------------------------------------------- the test

def materialise(c: Case, B: Path, T: Path):
    """Write the case's files into T; return the path the FIFO reader (if any) must read."""
    fifo = None
    for name, content in c.files.items():
        p = T / name
        if name == "OUTKIND":
            fifo = make_output_kind(content, T)
            continue
        if isinstance(content, tuple) and content[0] == "LN":
            lines = (B / "ln.params").read_text().splitlines(keepends=True)
            assert lines[5].startswith("# multinomial L'_DT"), lines[:6]
            if content[1] == "EDIT":
                lines[content[2] - 1] = content[3] + "\n"
            elif content[1] == "TRUNCATE":
                lines = lines[: content[2] - 1] + [content[3]]
            else:
                lines.append(content[2])
            p.write_text("".join(lines))
        elif content == "DIR":
            p.mkdir()
        elif isinstance(content, str) and content.startswith("COPY:"):
            _, src, *how = content.split(":")
            data = (B / src).read_bytes()
            if how == ["BOM"]:
                data = "\ufeff".encode() + data
            elif how == ["HALF"]:
                data = data[: len(data) // 2]
            p.write_bytes(data)
        elif isinstance(content, str) and content.startswith("NPZ:"):
            if content == "NPZ:plain":
                np.savez(p.with_suffix(""), x=np.zeros(3))
            else:
                np.savez(p.with_suffix(""), __header__=np.array("{not json"))
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return fifo


def device(path: Path, minor: int, real: str):
    """A character device like /dev/null (minor 3) or /dev/full (7) at ``path``: as
    root a private node (so grind can never replace the system's), else a symlink."""
    if ROOT:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    else:
        os.symlink(real, path)


def _unwritable(d) -> bool:
    """True when even root cannot create a file in directory ``d`` (e.g. sysfs)."""
    probe = os.path.join(d, ".grind-bad-input-probe")
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600))
    except OSError:
        return os.path.isdir(d)
    os.unlink(probe)
    return False


def make_output_kind(kind, T: Path):
    if kind == "directory":
        (T / "adir").mkdir()
    elif kind == "read-only-directory":
        if ROOT:     # chmod 0o555 does not stop root: use a read-only file system instead
            if not _unwritable("/sys"):
                pytest.skip("running as root with no directory root cannot write to: no read-only case")
            return None
        (T / "ro").mkdir()
        (T / "ro").chmod(0o555)
    elif kind == "symlink-to-file":
        (T / "target.out").write_text("old target\n")
        os.symlink("target.out", T / "link.out")
    elif kind == "dangling-symlink":
        os.symlink("missing-dir/x.out", T / "dangling.out")
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no mkfifo on this platform")
        os.mkfifo(T / "fifo.out")
        return T / "fifo.out"
    elif kind == "dev-null":
        device(T / "null", 3, "/dev/null")
    elif kind == "dev-full":
        device(T / "full", 7, "/dev/full")
    return None


class FifoReader(threading.Thread):
    """Reads everything written to a FIFO without ever blocking the test."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.data, self.done = bytearray(), threading.Event()

    def run(self):
        while True:
            r, _, _ = select.select([self.fd], [], [], 0.05)
            if r:
                chunk = os.read(self.fd, 65536)
                if chunk:
                    self.data += chunk
                    continue
            if self.done.is_set() and not r:
                break
            if self.done.is_set() and r and not chunk:
                break

    def finish(self):
        self.done.set()
        self.join(5)
        os.close(self.fd)
        return bytes(self.data)


def fill(s: str, B, T) -> str:
    return s.replace("{B}", str(B)).replace("{T}", str(T)).replace("{RO}", "/sys" if ROOT else str(T / "ro"))


def check_output_success(kind, tgt, T, code, out, err, got):
    assert code == 0 and "Traceback" not in err, f"exit {code}:\n{err}"
    magic = b"PK" if tgt == "checkpoint" else b"# grind"
    if kind == "symlink-to-file":
        assert (T / "link.out").is_symlink(), "the symlink was replaced by a file"
        assert (T / "target.out").read_bytes().startswith(magic), "not written through the symlink"
    elif kind == "fifo":
        assert stat.S_ISFIFO(os.lstat(T / "fifo.out").st_mode), "the FIFO was replaced by a file"
        assert got.startswith(magic), f"nothing (or not the output) read from the FIFO: {got[:60]!r}"
    elif kind == "dev-null":
        assert stat.S_ISCHR(os.lstat(T / "null").st_mode) or (T / "null").is_symlink(), \
            "the device was replaced by a file"


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input(c: Case, B, tmp_path, monkeypatch):
    T = tmp_path
    monkeypatch.chdir(T)
    fifo = materialise(c, B, T)
    args = [fill(a, B, T) for a in c.args]
    out_path = T / "out.txt"
    before = None
    if c.output:
        if zlib.crc32(c.id.encode()) % 2:
            before = f"precious output of {c.id}\n"
            out_path.write_text(before)
        args += ["-o", str(out_path)]
    elif c.check is None and "-o" in args:
        main_out = Path(args[args.index("-o") + 1])
        if main_out == out_path:
            before = "precious\n"
            out_path.write_text(before)
    reader = FifoReader(fifo) if fifo is not None else None
    if reader:
        reader.start()
    try:
        code, out, err = run(args, c.stdin.encode() if isinstance(c.stdin, str) else c.stdin)
    finally:
        got = reader.finish() if reader else b""
        if (T / "ro").exists():
            (T / "ro").chmod(0o755)
    if isinstance(c.check, tuple):
        check_output_success(c.check[1], c.check[2], T, code, out, err, got)
    elif c.check is not None:
        assert code == 0 and "Traceback" not in err, f"exit {code}:\n{err}"
        c.check(T, out, err)
    else:
        msg = error_line(code, out, err, c.codes)
        names(msg, tuple(tuple(fill(a, B, T) for a in m) if isinstance(m, tuple) else fill(m, B, T)
                         for m in c.must))
        if args[0] == "train" and c.files.get("OUTKIND") != "dev-full":   # /dev/full fails only when written
            assert not any(ln.startswith("step ") or "grind: step " in ln for ln in err.splitlines()), \
                f"the error came after training steps, not before:\n{err}"
        if before is not None:
            assert out_path.read_text() == before, "existing output file was clobbered"
        elif c.output:
            assert not out_path.exists() and not out_path.is_symlink(), "output file created by a failed run"
        if c.files.get("ck.npz") == "COPY:ck.npz":
            assert (T / "ck.npz").read_bytes() == (B / "ck.npz").read_bytes(), \
                "checkpoint clobbered by a refused resume"
    if "OUTKIND" in c.files and c.files["OUTKIND"] == "dev-full" and ROOT:
        assert stat.S_ISCHR(os.lstat(T / "full").st_mode), "the device was replaced by a file"
    left = temps(T, *[p.parent for p in map(Path, args) if str(p).startswith(str(T)) and p.parent.is_dir()])
    assert not left, f"temporary files left: {left}"


def test_case_count():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 200


# ----------------------------------------------------------------------------- real processes

def grind_proc(*args, **kw):
    return subprocess.run([sys.executable, "-m", "grind.cli", *map(str, args)], capture_output=True, text=True, **kw)


def one_error_line(r, codes=(1,)):
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in codes, f"exit {r.returncode}:\n{r.stderr}"
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("grind: error:"), r.stderr
    return lines[0]


@pytest.fixture
def pfiles(tmp_path):
    (tmp_path / "g.txt").write_text(PCFG)
    (tmp_path / "c.txt").write_text(CORPUS)
    return tmp_path


def test_output_to_full_device(pfiles):
    """-o /dev/full (a private device node when root: grind must not replace the system's)."""
    full = pfiles / "full"
    device(full, 7, "/dev/full")
    r = grind_proc("estep", "-o", full, pfiles / "g.txt", pfiles / "c.txt")
    msg = one_error_line(r)
    assert "full" in msg and not r.stdout
    assert stat.S_ISCHR(os.stat(full).st_mode)
    assert not temps(pfiles)


def test_stdout_full_device(pfiles):
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "grind.cli", "init", str(pfiles / "g.txt")], stdout=full,
                           stderr=subprocess.PIPE, text=True)
    one_error_line(r)


def test_help_to_full_device():
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "grind.cli", "--help"], stdout=full, stderr=subprocess.PIPE,
                           text=True)
    one_error_line(r)


@pytest.mark.parametrize("cmd", ["parse", "loglik"])
def test_closed_pipe_exits_0(pfiles, cmd):
    big = pfiles / "big.txt"
    big.write_text(CORPUS * 2000)
    line = f"{sys.executable} -m grind.cli {cmd} {pfiles / 'g.txt'} {big} | head -1"
    r = subprocess.run(["bash", "-c", f"set -o pipefail; {line}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# grind") and r.stderr == "", r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT], ids=["SIGTERM", "SIGKILL", "SIGINT"])
def test_signal_mid_run_leaves_outputs_whole(pfiles, sig):
    out = pfiles / "out.txt"
    out.write_text("precious\n")
    ck = pfiles / "ck.npz"
    p = subprocess.Popen([sys.executable, "-m", "grind.cli", "-q", "train", "--algo", "gibbs", "--iterations", "100000",
                          "--checkpoint", str(ck), "--checkpoint-every", "1", "-o", str(out),
                          str(pfiles / "g.txt"), str(pfiles / "c.txt")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not ck.exists() and time.time() - t0 < 20 and p.poll() is None:
        time.sleep(0.05)
    time.sleep(0.3)
    assert p.poll() is None, f"training ended early: {p.communicate()}"
    p.send_signal(sig)
    _, err = p.communicate(timeout=20)
    assert "Traceback" not in err, err
    assert p.returncode != 0
    if sig == signal.SIGINT:            # one line, no blank one before it (click's answer to KeyboardInterrupt)
        assert p.returncode == 130 and err == "grind: interrupted\n", repr(err)
    assert out.read_text() == "precious\n"
    with np.load(ck) as z:             # the last checkpoint is complete
        assert "__header__" in z.files
    left = temps(pfiles)
    if sig == signal.SIGKILL and left:
        # killed between naming a finished checkpoint and renaming it over ck.npz (two system calls; SIGKILL
        # cannot be held): that finished file may stay under its .grind-* name, nothing else
        assert len(left) == 1, left
        with np.load(left[0]) as z:
            assert "__header__" in z.files
    else:
        assert not left, left


def test_ctrl_c_while_the_command_line_is_imported_is_one_line():
    """A SIGINT in the first tenth of a second (grind.cli still importing) printed a 22-line traceback."""
    code = ("import builtins, os, signal, sys\n"
            "real = builtins.__import__\n"
            "def imp(name, *a, **k):\n"
            "    if name == 'grind.cli':\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = imp\n"
            "sys.argv = ['grind', '--version']\n"
            "from grind.__main__ import main\n"
            "main()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 130 and r.stderr == "grind: interrupted\n" and r.stdout == "", r.stderr
