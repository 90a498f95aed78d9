"""Penn Treebank bracketed trees, one per line (or spread over lines, as in .mrg).

A tree is a nested tuple ``(label, child, ...)`` whose leaves are token strings.
"""
from __future__ import annotations

import re

from grind.errors import InputError
from grind.formats.textio import read_lines

_TOKEN = re.compile(r"\(|\)|[^\s()]+")

#: PTB preterminals removed before bracket evaluation (traces, and punctuation with --remove-punct).
TRACE_TAGS = frozenset(["-NONE-"])


def parse_trees(text: str, where: str = "<trees>", starts: list | None = None, first_line: int = 1):
    """Yield every tree of a text holding one or more bracketed trees (and
    append each tree's first character offset to ``starts`` when given).
    Errors name ``where`` and a line, counted from ``first_line``; a bracket
    with a label but no children, ``(NN)``, is one (``( )`` is an empty tree)."""
    stack: list[list] = []
    opens: list[int] = []
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "(":
            stack.append([])
            opens.append(m.start())
        elif tok == ")":
            if not stack:
                raise InputError(f"{where}:{_line(text, m.start(), first_line)}: unbalanced ')' "
                                 "(no tree is open)")
            node, start = stack.pop(), opens.pop()
            if len(node) == 1 and isinstance(node[0], str):
                raise InputError(f"{where}:{_line(text, start, first_line)}: empty constituent "
                                 f"'({node[0]})' (no word or constituent under it)")
            label = node[0] if node and isinstance(node[0], str) else ""
            children = node[1:] if label else node
            tree = (label, *children)
            if stack and not label:
                # only the outermost bracket of a tree may be unlabelled (the PTB's "( (S ...) )"): one
                # inside a tree is a missing ')' before it and an extra one after (two trees read as one)
                raise InputError(f"{where}:{_line(text, start, first_line)}: a bracket without a label "
                                 "inside a tree (a missing ')' on an earlier line?)")
            if stack:
                stack[-1].append(tree)
            else:
                if starts is not None:
                    starts.append(start)
                yield _strip_empty_root(tree)
        else:
            if not stack:
                raise InputError(f"{where}:{_line(text, m.start(), first_line)}: token {tok!r} outside "
                                 "brackets")
            stack[-1].append(tok)
    if stack:
        raise InputError(f"{where}:{_line(text, opens[0], first_line)}: unbalanced '(': the tree starting "
                         "here is never closed")


def _line(text: str, pos: int, first: int = 1) -> int:
    return text.count("\n", 0, pos) + first


def _strip_empty_root(tree):
    """``( (S ...) )`` -> ``(S ...)``: the PTB's unlabelled outer bracket."""
    while tree[0] == "" and len(tree) == 2 and isinstance(tree[1], tuple):
        tree = tree[1]
    return tree


def read_trees(path: str, lines: list | None = None) -> list:
    """All trees of a file; ``#`` header lines are skipped.  ``lines``: gets
    the 1-based line number of each tree's first bracket appended."""
    name = "<stdin>" if path == "-" else path
    text = "".join("\n" if line.startswith("#") else line for _, line in read_lines(path))
    if lines is None:
        return list(parse_trees(text, name))
    starts: list[int] = []
    trees = list(parse_trees(text, name, starts))
    breaks = [i for i, ch in enumerate(text) if ch == "\n"]
    import bisect
    lines.extend(bisect.bisect_left(breaks, s) + 1 for s in starts)
    return trees


def ptb_word(word: str) -> str:
    """A word as a bracketed tree can hold it: '(' and ')' written -LRB- and -RRB- (the PTB's
    escapes; a raw bracket would end the tree where the word is)."""
    return word.replace("(", "-LRB-").replace(")", "-RRB-") if "(" in word or ")" in word else word


def format_tree(tree) -> str:
    """The tree in brackets, its words through :func:`ptb_word`."""
    if isinstance(tree, str):
        return ptb_word(tree)
    return "(" + " ".join([tree[0]] + [format_tree(c) for c in tree[1:]]) + ")"


def leaves(tree) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    return [w for c in tree[1:] for w in leaves(c)]


def preterminals(tree, where: str = "<trees>") -> list[tuple[str, str]]:
    """(tag, word) of each leaf whose parent has only that leaf as child.  A
    word anywhere else (beside constituents or other words in a phrase) is an
    InputError naming ``where``."""
    if len(tree) == 2 and isinstance(tree[1], str):
        return [(tree[0], tree[1])]
    word = next((c for c in tree[1:] if isinstance(c, str)), None)
    if word is not None:
        beside = "constituents" if any(isinstance(c, tuple) for c in tree[1:]) else "other words"
        raise InputError(f"{where}: word {word!r} is not under a preterminal (TAG word): it stands beside {beside} "
                         f"in {format_tree(tree)[:80]!r}")
    return [p for c in tree[1:] for p in preterminals(c, where)]


def prune(tree, drop_tag):
    """The tree without preterminals whose tag satisfies ``drop_tag`` and without
    constituents left empty; None if nothing is left."""
    if isinstance(tree, str):
        return tree
    if len(tree) == 2 and isinstance(tree[1], str):
        return None if drop_tag(tree[0]) else tree
    kids = [k for k in (prune(c, drop_tag) for c in tree[1:]) if k is not None]
    return (tree[0], *kids) if kids else None


def spans(tree, start: int = 0):
    """Yield (label, start, end) of every constituent (leaves excluded), pre-order."""
    if isinstance(tree, str):
        return
    n = len(leaves(tree))
    yield tree[0], start, start + n
    pos = start
    for c in tree[1:]:
        if isinstance(c, str):
            pos += 1
        else:
            yield from spans(c, pos)
            pos += len(leaves(c))


def derivation_tree(grammar, derivation, tokens):
    """The tree of a derivation (rows (rule, start, end) in pre-order, see grind.kernels.contract)."""
    rows = iter(derivation.tolist())

    def build():
        r, i, j = next(rows)
        lhs, rhs = grammar.rules[r]
        kids, pos = [], i
        for sym in rhs:
            if grammar.is_nonterminal(sym):
                kid = build()
                kids.append(kid)
                pos += len(leaves(kid))
            else:
                kids.append(tokens[pos])
                pos += 1
        return (lhs, *kids)

    return build()


def tags_as_leaves(tree):
    """Every preterminal (TAG word) becomes (TAG TAG): for grammars induced over tags."""
    if isinstance(tree, str):
        return tree
    if len(tree) == 2 and isinstance(tree[1], str):
        return (tree[0], tree[0])
    return (tree[0], *(tags_as_leaves(c) for c in tree[1:]))


def map_leaves(tree, f):
    if isinstance(tree, str):
        return f(tree)
    return (tree[0], *(map_leaves(c, f) for c in tree[1:]))
