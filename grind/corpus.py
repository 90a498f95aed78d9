"""Corpora: plain text (one sentence a line), CoNLL-U, CoNLL-X and Malt-TAB.

For treebanks the token column is an explicit choice (``FORM``, ``LFORM`` =
lower-cased FORM, ``UPOS``, ``XPOS``); WSJ work uses the fine PTB tag (XPOS),
UD work UPOS.  Punctuation removal happens before the length filter (the WSJ10
convention of Klein & Manning 2004).  CoNLL-U comment lines, multiword-token
ranges (``3-4``) and empty nodes (``5.1``) are skipped.

When punctuation is removed, a gold head that pointed at a removed token is
moved up to that token's own head (repeatedly), so the remaining tokens still
form a tree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import InputError
from .textio import read_lines

#: PTB punctuation tags (Klein & Manning 2004; CoNLL-X eval.pl); `#` and `$` are
#: added by ``--punct ptb+`` as some setups do.
PTB_PUNCT = frozenset(["``", "''", ",", ".", ":", "-LRB-", "-RRB-"])
PTB_PUNCT_PLUS = PTB_PUNCT | {"#", "$"}

COLUMNS = ("FORM", "LFORM", "UPOS", "XPOS")
FORMATS = ("auto", "text", "conllu", "conllx", "malt", "ptb")
PUNCT_RULES = ("none", "ud", "ptb", "ptb+")


@dataclass
class Sentence:
    """One sentence: the tokens grind models, and what a treebank says of them.

    ``rows`` are the kept token rows (CoNLL columns, for writing parses back);
    ``heads`` the gold heads (1-based, 0 = root) after punctuation removal;
    ``number`` the sentence's 1-based position in the file, ``line`` its first line.
    """

    tokens: list[str]
    number: int
    line: int
    heads: list[int] | None = None
    rows: list[list[str]] | None = None
    comments: list[str] = field(default_factory=list)

    def __len__(self):
        return len(self.tokens)


@dataclass
class CorpusSpec:
    """How to read a corpus file (the command-line corpus options)."""

    format: str = "auto"
    column: str | None = None
    punct: str = "none"
    max_length: int | None = None
    min_length: int = 1

    def describe(self) -> str:
        col = self.column or "tokens"
        lim = f"{self.min_length}..{self.max_length if self.max_length else 'inf'}"
        return f"format={self.format} column={col} punct-removed={self.punct} length={lim} (after punctuation removal)"


def detect_format(path: str, first_line: str | None) -> str:
    for ext, fmt in ((".conllu", "conllu"), (".conllx", "conllx"), (".conll", "conllx"), (".dp", "malt"),
                     (".mrg", "ptb")):
        if path.endswith(ext) or path.endswith(ext + ".gz") or path.endswith(ext + ".xz"):
            return fmt
    if first_line is not None:
        if first_line.lstrip().startswith("("):
            return "ptb"
        ncol = len(first_line.rstrip("\n").split("\t"))
        if ncol == 10:
            return "conllu"
        if ncol in (3, 4):
            return "malt"
    return "text"


def read_corpus(path: str, spec: CorpusSpec | None = None) -> list[Sentence]:
    """All sentences of ``path`` that pass ``spec``'s filters (see module doc)."""
    spec = spec or CorpusSpec()
    lines = list(read_lines(path))
    fmt = spec.format
    if fmt == "auto":
        first = next((ln for _, ln in lines if ln.strip() and not ln.startswith("#")), None)
        fmt = detect_format(path, first)
    name = "<stdin>" if path == "-" else path
    if fmt == "text":
        if spec.column:
            raise InputError(f"{name}: --column {spec.column} needs a CoNLL or Malt-TAB file, "
                             "but this is plain text (one sentence a line)")
        if spec.punct != "none":
            raise InputError(f"{name}: punctuation removal needs tags: use a CoNLL or Malt-TAB file")
        sents = _read_text(lines)
    elif fmt == "ptb":
        sents = _read_ptb(lines, name, spec)
    else:
        sents = _read_treebank(lines, name, fmt, spec)
    sents = [s for s in sents if spec.min_length <= len(s) and
             (spec.max_length is None or len(s) <= spec.max_length)]
    if not sents:
        raise InputError(f"{name}: no sentences ({spec.describe()})")
    return sents


def _read_text(lines) -> list[Sentence]:
    out, header = [], True
    for lineno, line in lines:
        if header and line.startswith("#"):
            continue
        header = False
        toks = line.split()
        if toks:
            out.append(Sentence(toks, len(out) + 1, lineno))
    return out


def _read_ptb(lines, name, spec) -> list[Sentence]:
    """Bracketed trees: FORM = word, XPOS = preterminal tag; -NONE- traces dropped."""
    from .trees import TRACE_TAGS, parse_trees, preterminals
    column = spec.column or _default_column_error(name)
    text = "".join(ln for _, ln in lines if not ln.startswith("#"))
    out = []
    for number, tree in enumerate(parse_trees(text, name), 1):
        rows = [[str(i), w, "_", "_", t, "_", "_", "_", "_", "_", 0] for i, (t, w) in
                enumerate([p for p in preterminals(tree) if p[0] not in TRACE_TAGS], 1)]
        if rows:
            out.append(_make_sentence(rows, number, 0, [], column, spec.punct, name))
    return out


def _blocks(lines):
    """Yield (first line number, comment lines, token lines) per blank-line-separated block."""
    comments, rows, start = [], [], None
    for lineno, line in lines:
        s = line.rstrip("\r\n")
        if not s.strip():
            if rows:
                yield start, comments, rows
            comments, rows, start = [], [], None
            continue
        if start is None:
            start = lineno
        if s.startswith("#") and not rows:
            comments.append(s)
        else:
            rows.append((lineno, s))
    if rows:
        yield start, comments, rows


def _read_treebank(lines, name, fmt, spec) -> list[Sentence]:
    column = spec.column or _default_column_error(name)
    if column not in COLUMNS:
        raise InputError(f"--column must be one of {', '.join(COLUMNS)}")
    out = []
    for number, (start, comments, rows) in enumerate(_blocks(lines), 1):
        toks = [_parse_row(ln, s, name, fmt) for ln, s in rows]
        toks = [t for t in toks if t is not None]
        if not toks:
            continue
        out.append(_make_sentence(toks, number, start, comments, column, spec.punct, name))
    return out


def _default_column_error(name):
    raise InputError(f"{name}: a treebank needs an explicit --column (one of {', '.join(COLUMNS)})")


def _parse_row(lineno, s, name, fmt):
    """A token row as a 10-column CoNLL list, or None for a skipped (MWT/empty) row."""
    if fmt == "malt":
        cols = s.split("\t") if "\t" in s else s.split()
        if len(cols) not in (3, 4):
            raise InputError(f"{name}:{lineno}: Malt-TAB line needs 'word tag head [deprel]', got {s!r}")
        word, tag, head = cols[:3]
        rel = cols[3] if len(cols) == 4 else "_"
        return [None, word, "_", "_", tag, "_", head, rel, "_", "_", lineno]
    cols = s.split("\t")
    if len(cols) != 10:
        raise InputError(f"{name}:{lineno}: expected 10 tab-separated CoNLL columns, got {len(cols)}")
    if "-" in cols[0] or "." in cols[0]:
        return None
    return cols + [lineno]


def _make_sentence(toks, number, start, comments, column, punct, name) -> Sentence:
    if toks[0][0] is None:  # Malt-TAB: number the tokens
        for i, t in enumerate(toks, 1):
            t[0] = str(i)
    heads = _gold_heads(toks, name)
    keep = [not _is_punct(t, punct) for t in toks]
    new_id, kept = {}, 0
    for i, k in enumerate(keep, 1):
        if k:
            kept += 1
            new_id[i] = kept
    new_heads = None
    if heads is not None:
        new_heads = []
        for i, k in enumerate(keep, 1):
            if k:
                h = heads[i - 1]
                while h != 0 and not keep[h - 1]:
                    h = heads[h - 1]
                new_heads.append(0 if h == 0 else new_id[h])
    rows = [t[:10] for t, k in zip(toks, keep) if k]
    tokens = [_column(t, column, name) for t in rows]
    return Sentence(tokens, number, start, new_heads, rows, comments)


def _gold_heads(toks, name):
    heads = []
    for t in toks:
        h = t[6]
        if h == "_":
            return None
        try:
            v = int(h)
        except ValueError:
            raise InputError(f"{name}:{t[10]}: HEAD {h!r} is not a number") from None
        if not 0 <= v <= len(toks):
            raise InputError(f"{name}:{t[10]}: HEAD {v} is outside the sentence (1..{len(toks)})")
        heads.append(v)
    _check_tree(heads, name, toks[0][10])
    return heads


def _check_tree(heads, name, line):
    """Every token must reach the root (0) by following heads: no cycles."""
    n = len(heads)
    for i in range(1, n + 1):
        h, steps = heads[i - 1], 0
        while h != 0:
            h, steps = heads[h - 1], steps + 1
            if steps > n:
                raise InputError(f"{name}:{line}: the HEAD column of this sentence has a cycle "
                                 f"(through token {i}); is a blank line missing between sentences?")


def _column(row, column, name):
    if column == "FORM":
        return row[1]
    if column == "LFORM":
        return row[1].lower()
    v = row[3] if column == "UPOS" else row[4]
    if v == "_":
        raise InputError(f"{name}: column {column} is empty ('_'); choose another --column")
    return v


def _is_punct(row, punct):
    if punct == "none":
        return False
    if punct == "ud":
        return row[3] == "PUNCT"
    tags = PTB_PUNCT_PLUS if punct == "ptb+" else PTB_PUNCT
    return row[4] in tags or (row[4] == "_" and row[3] in tags)


def conll_block(sentence: Sentence, heads) -> str:
    """The sentence as a CoNLL block with HEAD set to ``heads`` (1-based, 0 = root).

    Kept rows pass through with IDs renumbered 1..n (punctuation removal drops
    rows); DEPREL becomes ``root``/``dep`` and DEPS ``_``.  A plain-text
    sentence gets FORM = token and ``_`` elsewhere.
    """
    rows = sentence.rows or [[str(i), t] + ["_"] * 8 for i, t in enumerate(sentence.tokens, 1)]
    out = [c + "\n" for c in sentence.comments]
    for i, (row, h) in enumerate(zip(rows, heads), 1):
        r = list(row)
        r[0], r[6], r[7], r[8] = str(i), str(int(h)), "root" if h == 0 else "dep", "_"
        out.append("\t".join(r) + "\n")
    return "".join(out) + "\n"
