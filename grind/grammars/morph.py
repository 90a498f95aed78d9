"""Morphology grammars (Johnson, Griffiths & Goldwater 2007): a word is a
"sentence" whose tokens are its characters, the start symbol ``Word``
rewrites by *template* rules to slot nonterminals, and every slot rewrites to
substrings of the training words by lexical rules with a token sequence
(``Stem --> a b d``).  A derivation's lexical spans are a segmentation.

Templates: lines ``Word --> Pre Stem Suf`` (alternatives with ``|``;
``#`` starts a comment).  Every RHS symbol that is no template's LHS is a
*slot* (a preterminal); templates may be nested (``Word --> Pre Base``,
``Base --> Stem Suf``).  Built-in sets (:data:`TEMPLATE_SETS`):

* ``sesotho``: Johnson et al.'s five, ``Word --> V | V M | SM V M | SM T V M |
  SM T OM V M`` (V verb stem, M mood, SM subject marker, T tense, OM object marker);
* ``czech`` (our choice for Czech, prefix / stem / up to three suffixes):
  ``Word --> Stem | Pre Stem | Stem Suf | Pre Stem Suf | Stem Suf Suf |
  Pre Stem Suf Suf | Stem Suf Suf Suf | Pre Stem Suf Suf Suf`` (one suffix slot
  reused, so suffix morphs are shared between positions);
* ``czech-long`` (Czech with stacked prefixes and longer suffix chains, as in
  ``ne-do-pis-ova-t`` or ``intelekt-ual-izová-v-a-n-ý``): ``Word --> Pre{0..2}
  Stem Suf{0..5}``, the 18 combinations as explicit rules.

Lexical rules: ``shared=True`` (default, Johnson's) gives every slot every
distinct substring (of at most ``max_morph_length`` characters) of the
training words.  ``shared=False`` (per slot) keeps only the substrings that
can stand at the slot's position, judged from the templates of the start
symbol: a slot first in every such template it occurs in gets only
word-initial substrings, one never first only substrings that occur
non-initially somewhere; likewise last / never last with word-final
substrings.  (A substring counts when one of its occurrences in one training
word meets all of the slot's conditions.)  For ``czech``: ``Pre`` gets the
word-initial substrings that are not whole words only, ``Suf`` those that
occur non-initially, ``Stem`` all.  Slots occurring in nested templates get
every substring.

Weights are uniform per LHS (probabilities), so the grammar trains directly.
Rules: templates + sum over slots of the substrings it gets (shared:
templates + slots x substrings; Johnson's 2,283 Sesotho words give 16,350
substrings and 5 + 5 x 16,350 = 81,755 rules).
"""
from __future__ import annotations

import numpy as np

from grind.errors import InputError
from grind.formats.rules import ARROW
from grind.formats.textio import quote_line, read_lines
from grind.grammars.grammar import Grammar, post_order

START = "Word"

TEMPLATE_SETS = {
    "sesotho": "Word --> V | V M | SM V M | SM T V M | SM T OM V M",
    "czech": ("Word --> Stem | Pre Stem | Stem Suf | Pre Stem Suf | Stem Suf Suf | Pre Stem Suf Suf "
              "| Stem Suf Suf Suf | Pre Stem Suf Suf Suf"),
    "czech-long": "Word --> " + " | ".join(" ".join(["Pre"] * p + ["Stem"] + ["Suf"] * k)
                                         for p in range(3) for k in range(6)),
}

# Occurrence kinds of a substring in a word: bit (initial, final).
_INIT, _FINAL = 1, 2


def parse_templates(lines, where="templates"):
    """Template rules ``[(lhs, (slot, ...)), ...]`` of ``(lineno, text)`` pairs
    (``|`` alternatives, ``#`` comments); errors name ``where:line``."""
    out, seen = [], {}
    for lineno, line in lines:
        s = line.split("#", 1)[0].strip()
        if not s:
            continue
        toks = s.split()
        if toks.count(ARROW) != 1 or toks.index(ARROW) != 1:
            raise InputError(f"{where}:{lineno}: expected 'LHS --> SLOT SLOT ... [| SLOT ...]', "
                             f"got {quote_line(line)}")
        lhs = toks[0]
        alt: list[str] = []
        for t in toks[2:] + ["|"]:
            if t != "|":
                alt.append(t)
                continue
            if not alt:
                raise InputError(f"{where}:{lineno}: empty alternative in {quote_line(line)}")
            key = (lhs, tuple(alt))
            if key in seen:
                raise InputError(f"{where}:{lineno}: duplicate template {lhs} {ARROW} {' '.join(alt)} "
                                 f"(first at line {seen[key]})")
            seen[key] = lineno
            out.append(key)
            alt = []
    if not out:
        raise InputError(f"{where}: no templates")
    return out


def read_templates(path):
    """Templates of a file (see :func:`parse_templates`)."""
    return parse_templates(read_lines(path), "<stdin>" if path == "-" else path)


def builtin_templates(name):
    if name not in TEMPLATE_SETS:
        raise InputError(f"unknown template set {name!r} (one of {', '.join(TEMPLATE_SETS)})")
    return parse_templates([(1, TEMPLATE_SETS[name])], f"template set {name}")


def describe_templates(templates) -> str:
    by: dict[str, list[str]] = {}
    for lhs, rhs in templates:
        by.setdefault(lhs, []).append(" ".join(rhs))
    return "; ".join(f"{lhs} {ARROW} {' | '.join(alts)}" for lhs, alts in by.items())


def slots_of(templates) -> list[str]:
    """The slots (RHS symbols that are no template's LHS), in first-seen order."""
    lhss = {lhs for lhs, _ in templates}
    return list(dict.fromkeys(x for _, rhs in templates for x in rhs if x not in lhss))


def check_templates(templates) -> None:
    """InputError unless the templates can derive a word: some symbol is a slot (no template's LHS, so it
    gets the substring rules), the start symbol reaches slots through finitely many rules, and no chain
    of one-symbol templates leads back to its start (a unary cycle, which no parser sums)."""
    start, lhss = templates[0][0], {lhs for lhs, _ in templates}
    if not slots_of(templates):
        raise InputError("no slot: every template symbol has template rules of its own, so none rewrites "
                         "to substrings")
    productive = set(slots_of(templates))
    grew = True
    while grew:
        grew = False
        for lhs, rhs in templates:
            if lhs not in productive and all(x in productive for x in rhs):
                productive.add(lhs)
                grew = True
    if start not in productive:
        raise InputError(f"{start} derives no word: each of its templates needs a symbol that never ends "
                         "in slots (recursion without a way out)")
    unary: dict[str, list[str]] = {}
    for lhs, rhs in templates:
        if len(rhs) == 1 and rhs[0] in lhss:
            unary.setdefault(lhs, []).append(rhs[0])
    cycle = post_order(unary)[1]
    if cycle:
        raise InputError(f"a cycle of one-symbol templates through {cycle[0]} ({f' {ARROW} '.join(cycle)})")


def substrings(words, max_morph_length=None) -> dict[tuple[str, ...], int]:
    """Distinct substrings (token tuples, at most ``max_morph_length`` long) of
    ``words`` in first-seen order, each with the bit set of its occurrence
    kinds: bit ``(a == 0) + 2 (b == n)`` set for an occurrence ``[a, b)``."""
    out: dict[tuple[str, ...], int] = {}
    for w in words:
        w = tuple(w)
        n = len(w)
        for a in range(n):
            top = n if max_morph_length is None else min(n, a + max_morph_length)
            for b in range(a + 1, top + 1):
                u = w[a:b]
                bit = 1 << ((_INIT if a == 0 else 0) | (_FINAL if b == n else 0))
                out[u] = out.get(u, 0) | bit
    return out


def slot_masks(templates, start=START, shared=True) -> dict[str, int]:
    """Per slot, the occurrence-kind bits (see :func:`substrings`) it accepts."""
    slots = slots_of(templates)
    if shared:
        return {x: 0b1111 for x in slots}
    top = [rhs for lhs, rhs in templates if lhs == start]
    masks = {}
    for x in slots:
        pos = [(i == 0, i == len(rhs) - 1) for rhs in top for i, y in enumerate(rhs) if y == x]
        nested = any(x in rhs for lhs, rhs in templates if lhs != start)
        mask = 0
        for kind in range(4):
            init, final = bool(kind & _INIT), bool(kind & _FINAL)
            ok = nested or not pos or (
                (init or not all(p[0] for p in pos)) and (not init or any(p[0] for p in pos))
                and (final or not all(p[1] for p in pos)) and (not final or any(p[1] for p in pos)))
            if ok:
                mask |= 1 << kind
        masks[x] = mask
    return masks


def morph_size(templates, subs, start=START, shared=True) -> int:
    """Number of rules :func:`morph_grammar` builds from ``subs`` (:func:`substrings`)."""
    masks = slot_masks(templates, start, shared)
    n = len(templates)
    for m in masks.values():
        n += len(subs) if m == 0b1111 else sum(1 for k in subs.values() if k & m)
    return n


def morph_grammar(words, templates, max_morph_length=None, shared=True, subs=None) -> Grammar:
    """The morphology PCFG of ``words`` (token sequences, e.g. lists of
    characters) under ``templates`` (``[(lhs, slots)]``; the first LHS is the
    start symbol) with uniform probabilities per LHS: see the module doc.
    ``subs``: the :func:`substrings` of ``words``, if already computed."""
    words = [tuple(w) for w in words]
    if not words:
        raise InputError("no words")
    start = templates[0][0]
    check_templates(templates)
    if subs is None:
        subs = substrings(words, max_morph_length)
    symbols = {lhs for lhs, _ in templates} | set(slots_of(templates))
    chars = {c for w in words for c in w}
    clash = sorted(symbols & chars)
    if clash:
        raise InputError(f"characters of the words are also template symbols: {', '.join(clash)} "
                         "(rename the slots)")
    rules: list[tuple[str, tuple[str, ...]]] = list(templates)
    for x, m in slot_masks(templates, start, shared).items():
        rules += [(x, u) for u, k in subs.items() if k & m]
    g = Grammar(rules, np.ones(len(rules)), start, meta={"model": "morph"})
    g.weights = g.normalize(g.weights)
    return g


def segmentation(word, morphs) -> list[tuple[int, int]]:
    """Spans ``[(a, b), ...]`` of ``morphs`` (strings) in ``word`` (a string or
    a sequence of characters); InputError when they do not concatenate to it."""
    if "".join(morphs) != "".join(word):
        raise InputError(f"morphs {' + '.join(morphs)} do not make up {''.join(word)!r}")
    spans, a = [], 0
    for m in morphs:
        spans.append((a, a + len(m)))
        a += len(m)
    return spans
