"""Penn Treebank bracketed trees, one per line (or spread over lines, as in .mrg).

A tree is a nested tuple ``(label, child, ...)`` whose leaves are token strings.
"""
from __future__ import annotations

import re

from grind.errors import InputError
from grind.formats.textio import read_lines

#: The label of a written sentence without a tree: grind parse found none (NOPARSE), or the corpus options
#: left the sentence out (LEFTOUT: written so that a parse has a line for every input sentence, in order).
NOPARSE, LEFTOUT = "NOPARSE", "LEFTOUT"

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


def subtrees(tree):
    """Every constituent of ``tree`` (not the words), in pre-order, without recursion: a tree
    may be deeper than Python's recursion limit (a 500-word right-branching parse)."""
    if isinstance(tree, str):
        return
    stack = [tree]
    while stack:
        t = stack.pop()
        yield t
        stack.extend(c for c in reversed(t[1:]) if not isinstance(c, str))


def events(tree):
    """A depth-first walk of ``tree`` without recursion, left to right: ``("open", node)``, then its
    children's events (``("word", w)`` for a word), then ``("close", node)``."""
    if isinstance(tree, str):
        yield "word", tree
        return
    yield "open", tree
    stack = [[tree, 1]]
    while stack:
        top = stack[-1]
        t, i = top
        if i < len(t):
            top[1] = i + 1
            c = t[i]
            if isinstance(c, str):
                yield "word", c
            else:
                stack.append([c, 1])
                yield "open", c
        else:
            stack.pop()
            yield "close", t


def fold(tree, leaf, node):
    """``tree`` folded bottom-up without recursion: a word becomes ``leaf(word)``, a constituent
    ``node(t, results)`` with ``results`` its children's, in order.  Words are met left to right
    (so ``leaf`` may count positions)."""
    done: list[list] = [[]]
    for kind, x in events(tree):
        if kind == "word":
            done[-1].append(leaf(x))
        elif kind == "open":
            done.append([])
        else:
            kids = done.pop()
            done[-1].append(node(x, kids))
    return done[0][0]


def format_tree(tree) -> str:
    """The tree in brackets, its words through :func:`ptb_word`."""
    return fold(tree, ptb_word, lambda t, kids: "(" + " ".join([t[0]] + kids) + ")")


def leaves(tree) -> list[str]:
    """The words of ``tree``, left to right."""
    out, stack = [], [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, str):
            out.append(t)
        else:
            stack.extend(reversed(t[1:]))
    return out


def preterminals(tree, where: str = "<trees>") -> list[tuple[str, str]]:
    """(tag, word) of each leaf whose parent has only that leaf as child.  A
    word anywhere else (beside constituents or other words in a phrase) is an
    InputError naming ``where``."""
    out = []
    for t in subtrees(tree):
        if len(t) == 2 and isinstance(t[1], str):
            out.append((t[0], t[1]))
            continue
        word = next((c for c in t[1:] if isinstance(c, str)), None)
        if word is not None:
            beside = "constituents" if any(isinstance(c, tuple) for c in t[1:]) else "other words"
            raise InputError(f"{where}: word {word!r} is not under a preterminal (TAG word): it stands beside "
                             f"{beside} in {format_tree(t)[:80]!r}")
    return out


def prune(tree, drop_tag):
    """The tree without preterminals whose tag satisfies ``drop_tag`` and without
    constituents left empty; None if nothing is left."""
    def node(t, kids):
        if len(t) == 2 and isinstance(t[1], str):
            return None if drop_tag(t[0]) else t
        kids = [k for k in kids if k is not None]
        return (t[0], *kids) if kids else None
    return fold(tree, lambda w: w, node)


def spans(tree, start: int = 0):
    """(label, start, end) of every constituent (leaves excluded), in pre-order (an iterator)."""
    out: list[list] = []
    opened: list[int] = []
    pos = start
    for kind, x in events(tree):
        if kind == "word":
            pos += 1
        elif kind == "open":
            opened.append(len(out))
            out.append([x[0], pos, pos])
        else:
            out[opened.pop()][2] = pos
    return iter([tuple(x) for x in out])


def derivation_tree(grammar, derivation, tokens):
    """The tree of a derivation (rows (rule, start, end) in pre-order, see grind.kernels.contract)."""
    rows = derivation.tolist()
    if not rows:
        raise ValueError("an empty derivation")
    k = 0

    def open_row():
        nonlocal k
        r, i, _ = rows[k]
        k += 1
        lhs, rhs = grammar.rules[r]
        return [lhs, list(rhs), 0, [], i]      # (lhs, rhs, next symbol, children, position)

    stack = [open_row()]
    while True:
        top = stack[-1]
        lhs, rhs, s, kids, pos = top
        if s < len(rhs):
            top[2] = s + 1
            if grammar.is_nonterminal(rhs[s]):
                stack.append(open_row())
            else:
                kids.append(tokens[pos])
                top[4] = pos + 1
            continue
        stack.pop()
        tree = (lhs, *kids)
        if not stack:
            return tree
        parent = stack[-1]
        parent[3].append(tree)
        parent[4] = pos


def tags_as_leaves(tree):
    """Every preterminal (TAG word) becomes (TAG TAG): for grammars induced over tags."""
    def node(t, kids):
        if len(t) == 2 and isinstance(t[1], str):
            return (t[0], t[0])
        return (t[0], *kids)
    return fold(tree, lambda w: w, node)


def map_leaves(tree, f):
    return fold(tree, f, lambda t, kids: (t[0], *kids))
