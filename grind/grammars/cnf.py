"""Grammars to train from scratch."""
from __future__ import annotations

import numpy as np

from grind.errors import InputError
from grind.formats.rules import ARROW, unholdable
from grind.grammars.grammar import Grammar


def cnf_grammar(vocab, n_nonterminals: int, n_preterminals: int = 0, start: str = "ROOT") -> Grammar:
    """A fully connected CNF grammar (all weights 1).

    ROOT -> X_i;  X_i -> A B for all A, B in X ∪ PT;  and X_i -> w for every
    word w (no preterminals) or PT_j -> w (with preterminals).  A word that
    clashes with a symbol, or that the rule format cannot hold (``-->``, empty,
    with whitespace), is an InputError.
    """
    if not vocab:
        raise InputError("the corpus has no words")
    bad = [w for w in vocab if unholdable(w)]
    if bad:
        raise InputError(f"corpus token {bad[0]!r} cannot be a word of a grammar: the rule format "
                         f"(LHS {ARROW} RHS, symbols separated by whitespace) cannot hold '{ARROW}', "
                         "an empty token or one with whitespace in it")
    xs = [f"X{i}" for i in range(n_nonterminals)]
    pts = [f"PT{j}" for j in range(n_preterminals)]
    if unholdable(start):
        raise InputError(f"start symbol {start!r}: the rule format cannot hold it (empty, whitespace or '{ARROW}')")
    if start in xs or start in pts:
        raise InputError(f"start symbol {start!r} is one of the grammar's own symbols (X0..X{n_nonterminals - 1}"
                         f"{f', PT0..PT{n_preterminals - 1}' if pts else ''}): choose another name")
    clash = ({start} | set(xs) | set(pts)) & set(vocab)
    if clash:
        raise InputError(f"corpus words clash with grammar symbols: {', '.join(sorted(clash)[:5])}")
    kids = xs + pts
    rules: list[tuple[str, tuple[str, ...]]] = [(start, (x,)) for x in xs]
    rules += [(x, (a, b)) for x in xs for a in kids for b in kids]
    for p in (pts or xs):
        rules += [(p, (w,)) for w in vocab]
    return Grammar(rules, np.ones(len(rules)), start)
