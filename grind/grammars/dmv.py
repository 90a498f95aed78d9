"""The Dependency Model with Valence (Klein & Manning 2004) as a split-head PCFG.

Every DMV multinomial is exactly the rule set of one left-hand side of this
grammar (Johnson 2007; Headden et al. 2009 Fig. 1; Pate & Johnson 2016
Fig. 1), so any PCFG algorithm trains it and any PCFG kernel parses it::

    S      --> Y_h          root(h)
    Y_h    --> L0_h R0_h    1
    L0_h   --> h_l          STOP  | h, left,  valence 0 (no left dependent)
    L0_h   --> L'_h         ¬STOP | h, left,  valence 0
    L_h    --> h_l          STOP  | h, left,  valence 1
    L_h    --> L'_h         ¬STOP | h, left,  valence 1
    L'_h   --> Y_d L_h      choose(d | h, left)
    R0_h   --> h_r  / R'_h  STOP / ¬STOP | h, right, valence 0
    R_h    --> h_r  / R'_h  STOP / ¬STOP | h, right, valence 1
    R'_h   --> R_h Y_d      choose(d | h, right)

A sentence ``w_1 .. w_n`` is parsed by a general PCFG parser as the 2n
*split* tokens ``w_1_l w_1_r .. w_n_l w_n_r`` (:func:`split_heads`).  Read
top-down, this grammar generates the farthest dependent first, but a head
with k > 0 dependents on one side still makes exactly one ¬STOP at valence 0,
k-1 at valence 1 and one STOP at valence 1 (k = 0: one STOP at valence 0), so
the probability of a tree is exactly Cohen & Smith (2010) Eq. 4
(:func:`tree_logprob_eq4`).

Symbols are parsed by prefix (``Y_``, ``L0_``, ``L_``, ``L'_``, ``R0_``,
``R_``, ``R'_``) and split tokens by their last ``_l``/``_r`` suffix, so head
types containing underscores work.
"""
from __future__ import annotations

import math

import numpy as np

from grind.errors import InputError
from grind.formats.rules import RuleTable
from grind.grammars.grammar import Grammar

START = "S"
LEFT, RIGHT = "left", "right"
# Per-head rule slots (columns of DMVIndex.type_rules).  The kernel's stop
# table uses slots 2..9 in this order.
SLOTS = ("root", "Y", "stopL0", "nostopL0", "stopL1", "nostopL1",
         "stopR0", "nostopR0", "stopR1", "nostopR1")
SLOT = {s: i for i, s in enumerate(SLOTS)}
CHOOSE_L, CHOOSE_R = 10, 11          # rule kinds of the choose rules
#: Rules classified, mapped or keyed at once when the index is made from arrays (bounds the temporaries).
_INDEX_CHUNK = 1 << 20


def parse_symbol(s: str):
    """``"L'_NN"`` -> ``("L'_", "NN")``; ``None`` when no DMV prefix fits."""
    if len(s) > 2 and s[0] in "LRY":
        if s[1] == "_":
            return s[:2], s[2:]
        if len(s) > 3 and s[0] != "Y" and s[1] in "'0" and s[2] == "_":
            return s[:3], s[3:]
    return None


def split_token(t: str):
    """``"NN_l"`` -> ``("NN", "l")`` (last suffix); ``None`` if not split."""
    if len(t) > 2 and t[-2] == "_" and t[-1] in "lr":
        return t[:-2], t[-1]
    return None


def split_heads(tokens) -> list[str]:
    """``[h1, h2]`` -> ``[h1_l, h1_r, h2_l, h2_r]``: the PCFG terminals of a sentence."""
    return [x for t in tokens for x in (t + "_l", t + "_r")]


def head_rules(h: str):
    """The 10 non-choose rules of head type ``h`` in SLOTS order (root first)."""
    yield START, ("Y_" + h,)
    yield "Y_" + h, ("L0_" + h, "R0_" + h)
    for side, t in (("L", h + "_l"), ("R", h + "_r")):
        for v in ("0", ""):
            yield f"{side}{v}_{h}", (t,)
            yield f"{side}{v}_{h}", (f"{side}'_{h}",)


def choose_rule(h: str, d: str, right: bool):
    return ("R'_" + h, ("R_" + h, "Y_" + d)) if right else ("L'_" + h, ("Y_" + d, "L_" + h))


def classify_rule(grammar: Grammar, lhs: str, rhs: tuple):
    """``(kind, h, d)`` of a rule of the DMV scheme (kind: a SLOTS index or
    CHOOSE_L / CHOOSE_R; d is None except for choose rules); ``None`` if the
    rule does not fit the scheme."""
    if len(lhs) > 3 and lhs[1] == "'" and lhs[2] == "_" and len(rhs) == 2:
        return _classify_choose(lhs[0], lhs[3:], rhs)       # the most common case
    if lhs == START:
        p = parse_symbol(rhs[0]) if len(rhs) == 1 else None
        return (SLOT["root"], p[1], None) if p and p[0] == "Y_" else None
    p = parse_symbol(lhs)
    if p is None or len(rhs) > 2 or "'" in p[0]:
        return None
    pre, h = p
    if pre == "Y_":
        return (SLOT["Y"], h, None) if rhs == ("L0_" + h, "R0_" + h) else None
    side, val = pre[0], ("0" if pre[1] == "0" else "1")
    if len(rhs) != 1:
        return None
    if rhs[0] == f"{h}_{side.lower()}" and not grammar.is_nonterminal(rhs[0]):
        return SLOT[f"stop{side}{val}"], h, None
    if rhs[0] == f"{side}'_{h}":
        return SLOT[f"nostop{side}{val}"], h, None
    return None


def _classify_choose(side, h, rhs):
    """``L'_h --> Y_d L_h`` / ``R'_h --> R_h Y_d`` -> (kind, h, d)."""
    if side == "L" and rhs[1] == "L_" + h:
        y, kind = rhs[0], CHOOSE_L
    elif side == "R" and rhs[0] == "R_" + h:
        y, kind = rhs[1], CHOOSE_R
    else:
        return None
    return (kind, h, y[2:]) if len(y) > 2 and y[0] == "Y" and y[1] == "_" else None


class DMVIndex:
    """Rule indices of a DMV grammar by head type.

    ``types``: head types (those with a ``Y_h`` rule); ``type_rules[t, q]``:
    the rule of slot q (:data:`SLOTS`) of type t, -1 if absent;
    :meth:`arc_rules` looks up choose rules; ``kind[r]``, ``head[r]``,
    ``dep[r]``: each rule's kind and type ids (-1 where none).
    Raises :class:`InputError` when some rule does not fit the scheme.
    """

    def __init__(self, grammar: Grammar, cls=None):
        if grammar.start != START:
            raise InputError(f"not a DMV grammar: start symbol is {grammar.start!r}, not {START!r}")
        if cls is None:
            cls = [classify_rule(grammar, lhs, rhs) for lhs, rhs in grammar.rules]
        for c, r in zip(cls, grammar.rules):
            if c is None:
                raise InputError(f"not a DMV grammar: rule {r[0]} --> {' '.join(r[1])}")
        self.types = sorted({h for k, h, _ in cls if k == SLOT["Y"]})
        self.type_id = tid = {h: i for i, h in enumerate(self.types)}
        missing = sorted({x for _, h, d in cls for x in (h, d) if x is not None and x not in tid})
        if missing:
            raise InputError(f"not a DMV grammar: no rule Y_{missing[0]} --> L0_{missing[0]} R0_{missing[0]}")
        self._fill(cls)

    def _fill(self, cls):
        tid = self.type_id
        self._fill_arrays(np.array([k for k, _, _ in cls], dtype=np.int8),
                          np.array([tid[h] for _, h, _ in cls], dtype=np.int32),
                          np.array([tid[d] if d is not None else -1 for _, _, d in cls], dtype=np.int32))

    @classmethod
    def of_arrays(cls, types, kind, head, dep) -> DMVIndex:
        """The index of rules already classified: ``types`` (sorted head
        types), per rule its ``kind`` and ``head`` / ``dep`` type ids (-1 where none)."""
        ix = cls.__new__(cls)
        ix.types = list(types)
        ix.type_id = {h: i for i, h in enumerate(ix.types)}
        ix._fill_arrays(np.asarray(kind, dtype=np.int8), np.asarray(head, dtype=np.int32),
                        np.asarray(dep, dtype=np.int32))
        return ix

    def _fill_arrays(self, kind, head, dep):
        """Store ``kind`` (int8), ``head`` and ``dep`` (int32: 9 bytes a rule)
        and the lookup tables made from them: the choose rules' keys ``(h * T
        + d) * 2 + right``, sorted (int64), and the rule of each key -- not
        stored when the choose rules are one run of rules in key order, as
        ``make-grammar dmv`` writes them (``_kfirst + position``).  Made
        :data:`_INDEX_CHUNK` rules at a time: 8-12 bytes a choose rule and
        small temporaries."""
        T, R, C = len(self.types), len(kind), _INDEX_CHUNK
        self.kind, self.head, self.dep = kind, head, dep
        self.type_rules = np.full((T, len(SLOTS)), -1, dtype=np.int32)
        n_ch, first, last = 0, -1, -1
        for lo in range(0, R, C):
            k = kind[lo:lo + C]
            single = np.flatnonzero(k < CHOOSE_L)
            self.type_rules[head[lo + single], k[single]] = lo + single
            rows = np.flatnonzero(k >= CHOOSE_L)
            if len(rows):
                n_ch += len(rows)
                first = lo + int(rows[0]) if first < 0 else first
                last = lo + int(rows[-1])
        run = n_ch == 0 or last - first + 1 == n_ch          # the choose rules are rules first .. last
        keys = np.empty(n_ch, dtype=np.int64)               # made in place: (h * T + d) * 2 + right
        ch = None if run else np.empty(n_ch, dtype=np.int32)
        at = 0
        for lo in range(0, R, C):
            rows = np.flatnonzero(kind[lo:lo + C] >= CHOOSE_L)
            rows += lo
            key = keys[at:at + len(rows)]
            key[:] = head[rows]
            key *= T
            key += dep[rows]
            key *= 2
            key += kind[rows] == CHOOSE_R
            if ch is not None:
                ch[at:at + len(rows)] = rows
            at += len(rows)
        ordered = all(bool(np.all(keys[lo + 1:hi + 1] >= keys[lo:hi]))
                      for lo, hi in ((lo, min(lo + C, n_ch - 1)) for lo in range(0, max(n_ch - 1, 0), C)))
        if not ordered:                          # a grammar built in key order is sorted
            if ch is None:
                ch = np.arange(first, last + 1, dtype=np.int32)
            order = np.argsort(keys, kind="stable")
            keys, ch = keys[order], ch[order]
        self._keys, self._krule, self._kfirst = keys, ch, first
        self._dense = None
        if 2 * T * T <= 1 << 24:
            self._dense = np.full(2 * T * T, -1, dtype=np.int32)
            self._dense[self._keys] = self._rule_at(np.arange(len(self._keys)))

    def _rule_at(self, pos) -> np.ndarray:
        """The choose rule of the sorted keys at positions ``pos`` (int32)."""
        if self._krule is not None:
            return self._krule[pos]
        return (np.asarray(pos, dtype=np.int64) + self._kfirst).astype(np.int32)

    def _key(self, h, d, right):
        T = len(self.types)
        return (np.asarray(h, np.int64) * T + np.asarray(d, np.int64)) * 2 + np.asarray(right, np.int64)

    def arc_rules(self, h, d, right) -> np.ndarray:
        """Rule index of choose(d | h, dir) for arrays of type ids, -1 where absent."""
        key = self._key(h, d, right)
        if self._dense is not None:
            return self._dense[key]
        if len(self._keys) == 0:
            return np.full(key.shape, -1, dtype=np.int32)
        pos = np.minimum(np.searchsorted(self._keys, key), len(self._keys) - 1)
        return np.where(self._keys[pos] == key, self._rule_at(pos), -1).astype(np.int32)


def dmv_index(grammar: Grammar) -> DMVIndex:
    """The (cached) :class:`DMVIndex` of ``grammar``; InputError if it is not a
    DMV grammar.  Classified from the grammar's rule table
    (:func:`classify_table`), not rule by rule."""
    ix = getattr(grammar, "_dmv_index", None)
    if ix is None or ix[0] is not grammar.rules_source:
        ix = (grammar.rules_source, index_of_table(grammar))
        grammar._dmv_index = ix  # type: ignore[attr-defined]  # a cache on the grammar object
    return ix[1]


def release_dmv_index(grammar: Grammar) -> None:
    """Drop the :class:`DMVIndex` cached on ``grammar`` (:func:`dmv_index` makes it again when asked)."""
    grammar.__dict__.pop("_dmv_index", None)


#: Prefix codes of :func:`symbol_parts` (0: no DMV prefix).
_PREFIXES = ("", "Y_", "L0_", "L_", "L'_", "R0_", "R_", "R'_")
_Y, _L0, _L, _LP, _R0, _R, _RP = range(1, 8)


def symbol_parts(symbols: list[str]):
    """Per symbol: its :func:`parse_symbol` prefix code (index into
    ``_PREFIXES``, 0 = none) and head-string id (-1 = none); per symbol its
    split suffix (0 none, 1 ``_l``, 2 ``_r``, as :func:`split_token`) and the
    id of the head string before it (-1 if that string is no symbol's head);
    and the head strings."""
    code = np.zeros(len(symbols), dtype=np.int8)
    hid = np.full(len(symbols), -1, dtype=np.int32)
    heads: dict[str, int] = {}
    pre_id = {p: i for i, p in enumerate(_PREFIXES)}
    for i, x in enumerate(symbols):
        p = parse_symbol(x)
        if p is not None:
            code[i] = pre_id[p[0]]
            hid[i] = heads.setdefault(p[1], len(heads))
    sfx = np.zeros(len(symbols), dtype=np.int8)
    sfx_hid = np.full(len(symbols), -1, dtype=np.int32)
    for i, x in enumerate(symbols):
        t = split_token(x)
        if t is not None:
            sfx[i] = 1 if t[1] == "l" else 2
            sfx_hid[i] = heads.get(t[0], -1)
    return code, hid, sfx, sfx_hid, list(heads)


def classify_table(table, is_nonterminal_sym=None, chunk: int | None = None):
    """:func:`classify_rule` of every rule of a :class:`RuleTable` at once, as
    arrays: ``(kind, h, d, heads)``, kind -1 where a rule does not fit the
    scheme, ``h`` / ``d`` ids into the list of head strings ``heads`` (-1
    where none).  ``is_nonterminal_sym``: per symbol whether it is some
    rule's left-hand side (default: from the table).  Rules go ``chunk`` at
    a time (default :data:`_INDEX_CHUNK`; the temporaries stay small; the
    result is 9 bytes a rule)."""
    chunk = _INDEX_CHUNK if chunk is None else chunk
    parts = symbol_parts(table.symbols)
    if is_nonterminal_sym is None:
        is_nonterminal_sym = np.zeros(len(table.symbols), dtype=bool)
        is_nonterminal_sym[table.lhs] = True
    R = len(table)
    kind = np.full(R, -1, dtype=np.int8)
    h = np.full(R, -1, dtype=np.int32)
    d = np.full(R, -1, dtype=np.int32)
    start = table.symbols.index(START) if START in table.symbols else -1
    for lo in range(0, R, chunk):
        hi = min(lo + chunk, R)
        _classify_rows(table, lo, hi, parts, is_nonterminal_sym, start, kind[lo:hi], h[lo:hi], d[lo:hi])
    return kind, h, d, parts[4]


def _classify_rows(table, lo, hi, parts, is_nt, start, kind, h, d):
    """:func:`classify_table` of rules ``lo`` .. ``hi - 1`` into the views ``kind``, ``h``, ``d``."""
    code, hid, sfx, sfx_hid, _ = parts
    off = table.rhs_off[lo:hi + 1]
    k = np.diff(off)
    a = table.lhs[lo:hi]
    has2 = k == 2
    last = max(len(table.rhs) - 1, 0)
    r0 = np.where(k >= 1, table.rhs[np.minimum(off[:-1], last)], 0) if len(table.rhs) else np.zeros(hi - lo, np.int32)
    r1 = np.where(has2, table.rhs[np.minimum(off[:-1] + 1, last)], 0) if len(table.rhs) else r0
    ca, c0, c1 = code[a], code[r0], code[r1]
    ha, h0, h1 = hid[a], hid[r0], hid[r1]
    # choose: L'_h --> Y_d L_h, R'_h --> R_h Y_d
    m = has2 & (ca == _LP) & (c1 == _L) & (h1 == ha) & (c0 == _Y)
    kind[m], h[m], d[m] = CHOOSE_L, ha[m], h0[m]
    m = has2 & (ca == _RP) & (c0 == _R) & (h0 == ha) & (c1 == _Y)
    kind[m], h[m], d[m] = CHOOSE_R, ha[m], h1[m]
    # root: S --> Y_h
    m = (a == start) & (k == 1) & (c0 == _Y)
    kind[m], h[m] = SLOT["root"], h0[m]
    # Y_h --> L0_h R0_h
    m = has2 & (ca == _Y) & (c0 == _L0) & (h0 == ha) & (c1 == _R0) & (h1 == ha)
    kind[m], h[m] = SLOT["Y"], ha[m]
    # STOP / not STOP: L0_h, L_h, R0_h, R_h --> h_l / h_r | L'_h / R'_h
    one = k == 1
    for pre, side, name in ((_L0, 1, "L0"), (_L, 1, "L1"), (_R0, 2, "R0"), (_R, 2, "R1")):
        at = one & (ca == pre)
        stop = at & (sfx[r0] == side) & (sfx_hid[r0] == ha) & ~is_nt[r0]
        kind[stop], h[stop] = SLOT["stop" + name], ha[stop]
        nostop = at & ~stop & (c0 == (_LP if side == 1 else _RP)) & (h0 == ha)
        kind[nostop], h[nostop] = SLOT["nostop" + name], ha[nostop]


def index_of_table(grammar: Grammar) -> DMVIndex:
    """The :class:`DMVIndex` of ``grammar`` from its rule table
    (:func:`classify_table`): the index, and the errors, that
    ``DMVIndex(grammar)`` gives, without a tuple per rule."""
    if grammar.start != START:
        raise InputError(f"not a DMV grammar: start symbol is {grammar.start!r}, not {START!r}")
    t = grammar.table()
    kind, h, d, heads = classify_table(t)
    bad = np.flatnonzero(kind < 0)
    if len(bad):
        lo = int(bad[0])
        lhs, rhs = t.slice(lo, lo + 1).rules()[0]
        raise InputError(f"not a DMV grammar: rule {lhs} --> {' '.join(rhs)}")
    is_type = np.zeros(len(heads) + 1, dtype=bool)
    is_type[h[kind == SLOT["Y"]]] = True
    used = np.zeros(len(heads) + 1, dtype=bool)
    used[h] = True
    used[d] = True                          # -1 lands on the extra last entry
    used[-1] = is_type[-1] = False
    missing = sorted(heads[i] for i in np.flatnonzero(used & ~is_type).tolist())
    if missing:
        raise InputError(f"not a DMV grammar: no rule Y_{missing[0]} --> L0_{missing[0]} R0_{missing[0]}")
    ids = np.flatnonzero(is_type[:-1])
    names = [heads[i] for i in ids.tolist()]
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.full(len(heads) + 1, -1, dtype=np.int32)
    rank[ids[order]] = np.arange(len(order))
    for lo in range(0, len(h), _INDEX_CHUNK):     # head strings -> type ranks in place (-1 stays -1)
        for v in (h, d):
            v[lo:lo + _INDEX_CHUNK] = rank[v[lo:lo + _INDEX_CHUNK]]
    return DMVIndex.of_arrays([names[i] for i in order], kind, h, d)


def is_dmv_grammar(grammar: Grammar) -> bool:
    """True when ``grammar`` has the complete split-head DMV structure
    (:func:`dmv_problem` finds nothing wrong); symbol names alone do not make
    a DMV grammar."""
    return dmv_problem(grammar) is None


#: The slots every head type needs (Y_h and the STOP rules at valence 0), and per side the three rules that
#: come together with that side's choose rules (not-STOP at valence 0, both valence-1 rules).
_NEEDED = (SLOT["Y"], SLOT["stopL0"], SLOT["stopR0"])
_SIDE_SLOTS = {"L": (SLOT["nostopL0"], SLOT["stopL1"], SLOT["nostopL1"]),
               "R": (SLOT["nostopR0"], SLOT["stopR1"], SLOT["nostopR1"])}


def dmv_problem(grammar: Grammar) -> str | None:
    """Why ``grammar`` is not a complete split-head DMV grammar (the first
    offending or missing rule), or None when it is one: start symbol ``S``,
    every rule fits the scheme (:func:`classify_rule`), every choose rule's
    dependent is a head type, and every head type h has Y_h, STOP at valence 0
    on both sides and, on each side, either all three of not-STOP (valence 0)
    and the valence-1 STOP / not-STOP rules or none of them and no choose rule
    there (a constrained DMV: :mod:`grind.grammars.dmv_constraints`).  Root
    rules and choose rules may be any subsets (the lexicalized DMV has only
    some choose rules), as long as some type can be the root."""
    cached = getattr(grammar, "_dmv_problem", None)
    if cached is not None and cached[0] is grammar.rules_source:
        return cached[1]
    try:
        ix = dmv_index(grammar)
        why = None
        if not len(ix.types):
            why = "no rule Y_h --> L0_h R0_h"
        else:
            why = _missing_rule(ix)
    except InputError as e:
        why = str(e).removeprefix("not a DMV grammar: ")
    grammar._dmv_problem = (grammar.rules_source, why)  # type: ignore[attr-defined]  # a cache
    return why


def _missing_rule(ix: DMVIndex) -> str | None:
    """The first rule a head type of ``ix`` lacks (see :func:`dmv_problem`), or None."""
    tr = ix.type_rules
    has = tr >= 0
    if not has[:, SLOT["root"]].any():
        return "no root rule S --> Y_h"
    chose = np.zeros((len(ix.types), 2), dtype=bool)        # [type, side]: has a choose rule there
    ch = ix.kind >= CHOOSE_L
    chose[ix.head[ch], (ix.kind[ch] == CHOOSE_R).astype(np.int64)] = True
    need = np.zeros(has.shape, dtype=bool)
    need[:, list(_NEEDED)] = True
    for col, side in enumerate("LR"):
        slots = list(_SIDE_SLOTS[side])
        need[:, slots] |= (chose[:, col] | has[:, slots].any(axis=1))[:, None]
    if not need[:, [q for side in "LR" for q in _SIDE_SLOTS[side]]].any():
        need[0, list(_SIDE_SLOTS["L"])] = True      # no head takes a dependent: DMV names, a general grammar
    missing = np.argwhere(need & ~has)
    if not len(missing):
        return None
    t, q = missing[0]
    lhs, rhs = list(head_rules(ix.types[t]))[q]
    return f"head type {ix.types[t]} has no rule {lhs} --> {' '.join(rhs)}"


def dmv_size(n_types: int, lexicalized: bool = False, n_pairs: int | None = None) -> int:
    """Number of rules of :func:`dmv_grammar` over ``n_types`` head types: 10
    per type plus 2 |V|^2 choose rules (unlexicalized), or ``n_pairs``
    (h, d, direction) triples (lexicalized; at most 2 |V|^2)."""
    choose = 2 * n_types * n_types if not lexicalized else (n_pairs if n_pairs is not None else 2 * n_types ** 2)
    return 10 * n_types + choose


# --------------------------------------------------------------------------
# Building grammars


def dmv_grammar(sentences, lexicalized: bool = False, vocabulary=None, constraints=None) -> Grammar:
    """The split-head DMV grammar of head types with uniform probabilities.

    ``vocabulary``: the head types (default: every type of ``sentences``, sorted).
    Unlexicalized: a choose rule for every ordered pair of types and both
    directions.  Lexicalized (words, Pate & Johnson 2016): choose(d | h, left)
    only where d occurs left of h in some sentence (right: right of h), so a
    large vocabulary stays small.  Weights are uniform *normalised*
    probabilities: 1/|R_A| for each rule of LHS A (so the grammar is a proper
    DMV; EM's first E-step from it is the "uniform" initialiser).

    The rules are built as a :class:`RuleTable` (arrays over the 9 symbols of
    each type and ``S``), never as a tuple per rule: the rule order is the
    root rules of all types, then each type's other :func:`head_rules`, then
    the choose rules in (head, dependent, direction) order.  Its
    :class:`DMVIndex` is made from the table when first asked for (:func:`dmv_index`).

    ``constraints`` (a :class:`grind.grammars.dmv_constraints.DMVConstraints`)
    leaves out the rules it forbids (:func:`constrained_rows`).
    """
    sentences = [list(s) for s in sentences]
    types = sorted({t for s in sentences for t in s}) if vocabulary is None else list(dict.fromkeys(vocabulary))
    h, d, right = _choose_arrays(sentences, types, lexicalized)
    del sentences
    keep = None
    if constraints:
        keep, (h, d, right) = constrained_rows(types, h, d, right, constraints)
    table = _dmv_table(types, h, d, right)
    del h, d, right
    if keep is not None:
        table = table.take(keep)
    if table.duplicate():                   # only when symbols of different types coincide
        Grammar(table.rules(), np.ones(len(table)), START)      # raises the error naming the first repeat
    g = Grammar._from_table(table, None, np.ones(len(table)), START, meta={"model": "dmv"})
    g.weights = g.normalize(g.weights)
    return g


def constrained_rows(types, h, d, right, constraints):
    """The rules of :func:`_dmv_table` that ``constraints`` allows: ``(rows,
    (h, d, right))``, the rows to keep of the table built from the allowed
    choose triples returned.  Left out: the choose rules of forbidden arcs
    (every one of a leaf head), the root rule of a tag that may not be the
    root, and on each side where a head keeps no choose rule its not-STOP rule
    and both valence-1 rules (that side's STOP at valence 0 stays, alone)."""
    T = len(types)
    ok = np.fromiter((constraints.arc_allowed(types[a], types[b], bool(r)) for a, b, r in zip(h, d, right)),
                     dtype=bool, count=len(h))
    h, d, right = h[ok], d[ok], right[ok]
    has = np.zeros((T, 2), dtype=bool)                  # [type, side]: a choose rule is left (0: left, 1: right)
    has[h, np.asarray(right, dtype=np.int64)] = True
    own = np.ones((T, len(SLOTS)), dtype=bool)          # [type, slot]
    own[:, SLOT["root"]] = [constraints.root_allowed(t) for t in types]
    for side, col in (("L", 0), ("R", 1)):
        for slot in (f"nostop{side}0", f"stop{side}1", f"nostop{side}1"):
            own[:, SLOT[slot]] = has[:, col]
    # table order: the T root rules, then per type its 9 other rules (SLOTS 1..9), then the choose rules
    rows = np.concatenate([np.flatnonzero(own[:, 0]), T + np.flatnonzero(own[:, 1:].ravel()),
                           10 * T + np.arange(len(h))])
    return rows, (h, d, right)


def _symbol_clash(names, types) -> None:
    """InputError naming two head types whose DMV symbols coincide (type ``B_l`` has the nonterminal
    ``Y_B_l``, type ``Y_B`` the terminal ``Y_B_l``): the grammar would join them, silently."""
    first: dict[str, int] = {}
    for k, x in enumerate(names):
        if x in first:
            def owner(i):
                return "the start symbol" if i == 0 else f"head type {types[(i - 1) // len(_TYPE_SYMBOLS)]!r}"
            raise InputError(f"the DMV symbol {x!r} belongs to both {owner(first[x])} and {owner(k)}: a head type "
                             f"whose name ends in _l / _r or starts with Y_, L_, R_, L0_, R0_, L'_, R'_ can clash "
                             "with another's symbols; rename the tags (or words)")
        first[x] = k


#: Per-type symbols of :func:`_dmv_table`, in this order after ``S``.
_TYPE_SYMBOLS = ("Y_{}", "L0_{}", "R0_{}", "L_{}", "R_{}", "L'_{}", "R'_{}", "{}_l", "{}_r")
#: The 9 non-root rules of a type (SLOTS 1..9), as positions in _TYPE_SYMBOLS: lhs, rhs...
_TYPE_RULES = ((0, 1, 2), (1, 7), (1, 5), (3, 7), (3, 5), (2, 8), (2, 6), (4, 8), (4, 6))


def _dmv_table(types, h, d, right) -> RuleTable:
    """The :class:`RuleTable` of :func:`dmv_grammar`'s rules: the root rules
    ``S --> Y_t``, the 9 other rules of each type t, then ``R'_h --> R_h Y_d``
    (right) / ``L'_h --> Y_d L_h`` (left) for the type-id arrays ``h``, ``d``,
    ``right``.  Symbols are strings; two types whose symbols coincide are an InputError (:func:`_symbol_clash`)."""
    T = len(types)
    names = [START] + [f.format(t) for t in types for f in _TYPE_SYMBOLS]
    sid: dict[str, int] = {}
    ids = np.fromiter((sid.setdefault(x, len(sid)) for x in names), dtype=np.int32, count=len(names))
    if len(sid) < len(names):
        _symbol_clash(names, types)
    del names
    sym = ids[1:].reshape(T, len(_TYPE_SYMBOLS))          # [type, position] -> symbol id
    lhs = [np.full(T, ids[0], np.int32)] + [sym[:, r[0]] for r in _TYPE_RULES]
    rhs = [sym[:, 0][:, None]] + [sym[:, list(r[1:])] for r in _TYPE_RULES]
    arity = [np.ones(T, np.int64)] + [np.full(T, len(r) - 1, np.int64) for r in _TYPE_RULES]
    # rule order: all root rules, then type by type its 9 rules
    lhs_own = np.stack(lhs[1:], axis=1).ravel()
    rhs_own = np.concatenate([np.pad(x, ((0, 0), (0, 2 - x.shape[1])), constant_values=-1) for x in rhs[1:]],
                             axis=1).reshape(-1)
    rhs_own = rhs_own[rhs_own >= 0]
    ar_own = np.stack(arity[1:], axis=1).ravel()
    R = len(h)
    own = 10 * T
    r = right == 1
    all_lhs = np.empty(own + R, dtype=np.int32)
    all_lhs[:own] = np.concatenate([lhs[0], lhs_own])
    all_lhs[own:] = np.where(r, sym[h, 6], sym[h, 5])
    n_own = T + len(rhs_own)
    all_rhs = np.empty(n_own + 2 * R, dtype=np.int32)
    all_rhs[:n_own] = np.concatenate([rhs[0].ravel(), rhs_own])
    all_rhs[n_own::2] = np.where(r, sym[h, 4], sym[d, 0])
    all_rhs[n_own + 1::2] = np.where(r, sym[d, 0], sym[h, 3])
    off = np.empty(own + R + 1, dtype=np.int64)
    off[0] = 0
    np.cumsum(np.concatenate([arity[0], ar_own]), out=off[1:own + 1])
    off[own + 1:] = off[own] + 2 * np.arange(1, R + 1, dtype=np.int64)
    return RuleTable(list(sid), all_lhs, off, all_rhs)


def _choose_arrays(sentences, types, lexicalized, chunk: int = 1 << 21):
    """Arrays ``(h, d, right)`` of the sorted type-id triples that get a choose
    rule.  Lexicalized: the (head, dependent, direction) keys of every pair of
    words of a sentence, made length group by length group and made unique
    whenever about ``chunk`` (or as many as already kept) are pending, so the
    temporaries stay near the number of distinct pairs."""
    T = len(types)
    if not lexicalized:
        h, d, r = np.meshgrid(np.arange(T), np.arange(T), [0, 1], indexing="ij")
        return h.ravel(), d.ravel(), r.ravel()
    tid = {t: i for i, t in enumerate(types)}
    lengths = np.fromiter(map(len, sentences), dtype=np.int64, count=len(sentences))
    flat = np.fromiter((tid.get(t, -1) for s in sentences for t in s), dtype=np.int64, count=int(lengths.sum()))
    start = np.cumsum(lengths) - lengths
    kept = np.zeros(0, np.int64)
    pending: list[np.ndarray] = []
    n_pending = 0
    for n in np.unique(lengths).tolist():
        if n < 2:
            continue
        first = start[lengths == n]
        i, j = np.triu_indices(n, 1)                         # i < j
        step = max(1, chunk // len(i))
        for lo in range(0, len(first), step):
            ids = flat[first[lo:lo + step, None] + np.arange(n)]
            a, b = ids[:, i].ravel(), ids[:, j].ravel()
            ok = (a >= 0) & (b >= 0)
            a, b = a[ok], b[ok]
            pending.append((b * T + a) * 2)                  # head j, dep i left
            pending.append((a * T + b) * 2 + 1)              # head i, dep j right
            n_pending += 2 * len(a)
            if n_pending >= max(chunk, len(kept)):
                kept = np.unique(np.concatenate([kept, *pending]))
                pending, n_pending = [], 0
    keys = np.unique(np.concatenate([kept, *pending]))
    del kept, pending
    return (keys // 2 // T).astype(np.int32), (keys // 2 % T).astype(np.int32), (keys % 2).astype(np.int8)


# --------------------------------------------------------------------------
# Back-off for parsing what the weights cannot

#: The share of each left-hand side's probability :func:`backoff_weights` spreads over all its rules.
BACKOFF = 1e-6


def backoff_weights(grammar: Grammar, theta, eps: float = BACKOFF) -> np.ndarray:
    """theta_r' = (1 - eps) theta_r + eps / |R_A| for every rule r of LHS A
    (theta normalised per LHS first): every rule of the grammar gets positive
    probability, so a sentence whose every tree needs a rule of probability 0
    (a tag the training data lacked, whose root and attach rules EM set to 0)
    has trees, and the best of them uses as few such rules as it can.  A LHS
    whose weights are all 0 (reached only through such rules) gets 1 / |R_A|."""
    theta = np.asarray(theta, dtype=np.float64)
    size = np.bincount(grammar.lhs, minlength=len(grammar.nonterminals)).astype(np.float64)
    share = 1.0 / size[grammar.lhs]
    dead = grammar.lhs_totals(theta) <= 0
    return np.where(dead, share, (1.0 - eps) * grammar.normalize(theta) + eps * share)


def relaxed_grammar(grammar: Grammar, theta, eps: float = BACKOFF) -> tuple[Grammar, np.ndarray]:
    """The unconstrained DMV over ``grammar``'s head types (every rule of
    :func:`dmv_grammar`) and its :func:`backoff_weights` from ``theta``, the
    rules ``grammar`` lacks (left out by structural constraints) at
    probability 0 before the back-off: for a sentence with no tree that
    satisfies the constraints."""
    full = dmv_grammar([], vocabulary=dmv_index(grammar).types)
    w = np.zeros(len(full))
    own = grammar.normalize(np.asarray(theta, dtype=np.float64))
    at = full.index
    for k, x in zip(grammar.keys(), own):
        w[at[k]] = x
    return full, backoff_weights(full, w, eps)


# --------------------------------------------------------------------------
# Parameters, trees and derivations


def dmv_params(grammar: Grammar, weights=None) -> dict:
    """The DMV parameters of grammar weights, as :func:`tree_logprob_eq4` takes them.

    ``{"root": {h: p}, "stop": {(h, dir, v): p}, "nostop": {(h, dir, v): p},
    "choose": {(h, dir, d): p}}``, dir in ("left", "right"), v = valence
    (0: no dependent generated yet in that direction).
    """
    ix = dmv_index(grammar)
    w = grammar.weights if weights is None else np.asarray(weights, dtype=np.float64)
    out: dict[str, dict] = {"root": {}, "stop": {}, "nostop": {}, "choose": {}}
    for r, (k, h, d) in enumerate(zip(ix.kind, ix.head, ix.dep)):
        h = ix.types[h]
        if k >= CHOOSE_L:
            out["choose"][(h, RIGHT if k == CHOOSE_R else LEFT, ix.types[d])] = w[r]
        elif k == SLOT["root"]:
            out["root"][h] = w[r]
        elif k >= SLOT["stopL0"]:
            name = SLOTS[k]
            table = "nostop" if name.startswith("no") else "stop"
            out[table][(h, LEFT if "L" in name else RIGHT, int(name[-1]))] = w[r]
    return out


def tree_logprob_eq4(params: dict, tags, heads) -> float:
    """log p(tree) straight from Cohen & Smith (2010) Eq. 4 / Klein & Manning (2004).

    Head-outward generation, closest dependent first::

        p(x, y) = root(x_r) * prod_i prod_{dir} [ prod_{j in y_dir(i), closest first}
                  (1 - stop(x_i, dir, v_j)) choose(x_j | x_i, dir) ] stop(x_i, dir, v_end)

    where v = 0 until the first dependent in that direction has been
    generated and 1 afterwards.  ``heads``: 1-based, 0 = root.  ¬STOP is
    ``params["nostop"]`` when given, else 1 - STOP.  Independent of any grammar.
    """
    def log(x):
        return math.log(x) if x > 0 else -math.inf
    nostop = params.get("nostop")
    heads = [int(x) for x in heads]
    lp = sum(log(params["root"].get(tags[i], 0.0)) for i, h in enumerate(heads) if h == 0)
    for i, t in enumerate(tags):
        for dr, deps in ((LEFT, [j for j in range(i - 1, -1, -1) if heads[j] == i + 1]),
                         (RIGHT, [j for j in range(i + 1, len(tags)) if heads[j] == i + 1])):
            v = 0
            for j in deps:
                ns = nostop[(t, dr, v)] if nostop else 1.0 - params["stop"][(t, dr, v)]
                lp += log(ns) + log(params["choose"].get((t, dr, tags[j]), 0.0))
                v = 1
            lp += log(params["stop"][(t, dr, v)])
    return lp


def _subtree_spans(heads):
    n = len(heads)
    lo, hi = list(range(n)), list(range(n))
    for i in range(n):
        j = heads[i] - 1
        while j >= 0:
            lo[j], hi[j] = min(lo[j], i), max(hi[j], i)
            j = heads[j] - 1
    return lo, hi


def heads_derivation(grammar: Grammar, tokens, heads) -> np.ndarray:
    """The split-head derivation (rows ``(rule, start, end)`` in pre-order over
    the 2n split positions) of the dependency tree ``heads`` (1-based, 0 = root).

    Exactly 5n - 1 rows: per token its Y rule, its root or choose rule, one
    STOP per side, and one ¬STOP per dependent.  Raises KeyError when the
    grammar lacks a rule the tree needs.
    """
    g, heads = grammar, [int(x) for x in heads]
    lo, hi = _subtree_spans(heads)
    kids = [[j for j in range(len(heads)) if heads[j] == i + 1] for i in range(len(heads))]
    rows = []

    def row(lhs, rhs, a, b):
        rows.append((g.index[f"{lhs} --> {' '.join(rhs)}"], a, b))

    def emit(h):
        """Token h's subtree in pre-order: its rows, and (an int) each dependent whose subtree goes there."""
        t, out = tokens[h], []
        out.append(("Y_" + t, ("L0_" + t, "R0_" + t), 2 * lo[h], 2 * hi[h] + 2))
        start, lhs = 2 * lo[h], "L0_" + t
        for d in (j for j in kids[h] if j < h):
            out.append((lhs, ("L'_" + t,), start, 2 * h + 1))
            out.append((*choose_rule(t, tokens[d], False), start, 2 * h + 1))
            out.append(d)
            start, lhs = 2 * hi[d] + 2, "L_" + t
        out.append((lhs, (t + "_l",), start, 2 * h + 1))
        right = [j for j in kids[h] if j > h]
        end, lhs = 2 * hi[h] + 2, "R0_" + t
        for d in reversed(right):
            out.append((lhs, ("R'_" + t,), 2 * h + 1, end))
            out.append((*choose_rule(t, tokens[d], True), 2 * h + 1, end))
            end, lhs = 2 * lo[d], "R_" + t
        out.append((lhs, (t + "_r",), 2 * h + 1, end))
        return out + right

    root = heads.index(0)
    row(START, ("Y_" + tokens[root],), 0, 2 * len(heads))
    todo: list = [root]                  # a stack, not recursion: a chain of dependents may be 1000s deep
    while todo:
        x = todo.pop()
        if isinstance(x, int):
            todo.extend(reversed(emit(x)))
        else:
            row(*x)
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def derivation_heads(grammar: Grammar, derivation, n: int) -> np.ndarray:
    """Heads (1-based, 0 = root; CoNLL style) of a split-head derivation of an
    n-token sentence.  A ``Y_d`` row's head token d is read off the next row
    (the ``L0_d`` node ends at 2d+1); ``L'_h`` ends at 2h+1, ``R'_h`` starts at 2h+1."""
    ix = dmv_index(grammar)
    d = np.asarray(derivation, dtype=np.int64)
    kind = ix.kind[d[:, 0]]
    heads = np.full(n, -1, dtype=np.int64)
    is_y = kind == SLOT["Y"]
    ytok = {k: (d[k + 1, 2] - 1) // 2 for k in np.flatnonzero(is_y)}
    for k in np.flatnonzero(kind == SLOT["root"]):
        heads[ytok[k + 1]] = 0
    for k in np.flatnonzero(kind == CHOOSE_L):
        heads[ytok[k + 1]] = (d[k, 2] - 1) // 2 + 1
    for k in np.flatnonzero(kind == CHOOSE_R):
        y = k + 1 + np.flatnonzero(is_y[k + 1:] & (d[k + 1:, 2] == d[k, 2]))[0]
        heads[ytok[y]] = (d[k, 1] - 1) // 2 + 1
    return heads


# --------------------------------------------------------------------------
# Harmonic initialiser


#: ``grind init --harmonic --variant``: the stop-count rules of :func:`harmonic_counts`.
HARMONIC_VARIANTS = ("km-global", "independent")
#: The default variant: the authors'; on the WSJ10 sample LN-I families trains to 50.5 directed MBR
#: accuracy from it against 47.4 from "independent" (~120 iterations), EM 46.7 against 46.1 (issue 10).
HARMONIC_DEFAULT = "km-global"
#: Pseudo-count the km-global variant adds to every rule (the authors' code: 0.1).
HARMONIC_SMOOTHING = 0.1
#: km-global: the first-kid fraction is this share of the largest feasible one.
FIRST_KID_SHARE = 0.9


def harmonic_counts(grammar: Grammar, sentences, variant: str = HARMONIC_DEFAULT,
                    smoothing: float | None = None) -> np.ndarray:
    """Klein & Manning's harmonic initialiser as expected rule counts;
    normalise them with an M-step (``grammar.normalize``) for the initial grammar.

    Both variants share the attachment scheme of Klein & Manning (2004, §3)
    that Cohen & Smith (2010, §5.1) use: in an n-word sentence each word is the
    root with weight 1/n and word i attaches to word j != i with weight
    proportional to 1/|i-j|.  Y rules count 1 per token.  Sentences with a word
    the grammar lacks are skipped.  A constrained grammar
    (:mod:`grind.grammars.dmv_constraints`) gives each word's weight to the
    heads it may have only (root and arcs rescaled to their total under
    km-global, the arcs alone under independent; a sentence where a word may
    have none is skipped), and a side where a type takes no dependents does
    not bound km-global's first-kid probability.

    ``variant="km-global"`` (the default; the counts of the public ports of
    Klein & Manning's initialiser, as the authors' code computes them -- we
    re-derived it from those ports' behaviour, no code is copied):

    * root(h): 1/n per token;  choose(x_i | x_j, dir): a_ij = ((n-1)/n) *
      (1/|i-j|) / sum_{k != i} 1/|i-k|, so each word's head weights (root
      included) sum to 1.
    * Per type h and direction D, over the training tokens of h:
      N_h = number of tokens, N_hD = tokens with at least one word on side D
      (in a sentence of >= 2 words), E_hD = sum of a_ij over the words i on
      side D of each token j (expected number of dependents).
    * Every rule gets the pseudo-count s (``smoothing``, default 0.1), so every
      rule -- tags unseen in training included -- has positive weight.
    * Stop counts come from one *global* first-kid probability f: a token with
      a word on side D takes a first dependent with probability f, whatever its
      type.  Starting from "every token stops at once" (STOP(v0) = N_h + s,
      ¬STOP(v1) = E_hD + s), f moves f*N_hD events from STOP(v0) to ¬STOP(v0)
      and from ¬STOP(v1) (the first dependent is no longer a valence-1 ¬STOP)
      to STOP(v1)::

          STOP(v0) = N_h + s - f N_hD        ¬STOP(v0) = s + f N_hD
          STOP(v1) = s + f N_hD              ¬STOP(v1) = E_hD + s - f N_hD

      with f = 0.9 * min(1, min_{h,D: N_hD > 0} (E_hD + s) / N_hD,
      (N_h + s) / N_hD): 90% of the largest f that keeps every count >= 0.
      (The second ratio is >= 1; the bound comes from the type whose tokens
      expect the fewest dependents per token.)

    ``variant="independent"`` (grind's earlier rule; no smoothing by default):
    choose weights p_ij = (1/|i-j|) / sum_{k != i} 1/|i-k| (one attachment per
    word besides the root's 1/n); each potential dependent i of head j in
    direction D attaches independently with probability p_ij.  With
    P0 = prod_i (1 - p_ij) and E = sum_i p_ij the exact expected decision
    counts are STOP(v0) = P0, ¬STOP(v0) = 1 - P0, STOP(v1) = 1 - P0 (one final
    stop after >= 1 dependents) and ¬STOP(v1) = E - (1 - P0) >= 0, so each head
    makes exactly one STOP per direction and E ¬STOPs, as in every tree.
    ``smoothing`` (if given) is then added to every rule.
    """
    if variant not in HARMONIC_VARIANTS:
        raise InputError(f"unknown harmonic variant {variant!r} ({', '.join(HARMONIC_VARIANTS)})")
    if smoothing is None:
        smoothing = HARMONIC_SMOOTHING if variant == "km-global" else 0.0
    if smoothing < 0:
        raise InputError(f"harmonic smoothing must be >= 0, not {smoothing}")
    ix = dmv_index(grammar)
    counts = np.zeros(len(grammar), dtype=np.float64)
    T = len(ix.types)
    tokens, sides, kids = np.zeros(T), np.zeros((T, 2)), np.zeros((T, 2))   # N_h, N_hD, E_hD (D: L, R)
    for s in sentences:
        ids = np.array([ix.type_id.get(t, -1) for t in s], dtype=np.int64)
        if not len(ids) or (ids < 0).any():
            continue
        if variant == "independent":
            _harmonic_sentence(ix, ids, counts)
        else:
            _km_sentence(ix, ids, counts, tokens, sides, kids)
    counts += smoothing
    if variant == "km-global":
        _km_stops(ix, counts, tokens, sides, kids, smoothing)
    return counts


def _attachment(n):
    """p[i, j] = (1/|i-j|) / sum_{k != i} 1/|i-k| (dependent i, head j; 0 on the diagonal)."""
    if n == 1:
        return np.zeros((1, 1))
    dist = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :]).astype(float)
    np.fill_diagonal(dist, np.inf)
    p = 1.0 / dist
    return p / p.sum(axis=1, keepdims=True)


def _allowed(ix, ids):
    """``(root, arcs)`` a constrained grammar allows in the sentence of type ids ``ids``: root[i] (word i
    may be the root) and arcs[i, j] (dependent i, head j): the grammar has the rule."""
    n = len(ids)
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    arcs = np.zeros((n, n), dtype=bool)
    arcs[i, j] = ix.arc_rules(ids[j], ids[i], i > j) >= 0
    return ix.type_rules[ids, SLOT["root"]] >= 0, arcs


def _constrained(ix, ids, root, p, together):
    """The harmonic weights ``root`` (n) and ``p`` (n x n, dependent x head) with what the grammar forbids
    set to 0 and each word's allowed weights scaled up to its total: root and arcs ``together``
    (km-global: they sum to 1), or the arcs alone (independent).  Unchanged when nothing is forbidden
    here; None when some word can attach to nothing."""
    ok_root, ok_arc = _allowed(ix, ids)
    np.fill_diagonal(ok_arc, True)                      # (p is 0 there)
    if ok_root.all() and ok_arc.all():
        return root, p
    r, q = np.where(ok_root, root, 0.0), np.where(ok_arc, p, 0.0)
    if together:
        tot, left = root + p.sum(axis=1), r + q.sum(axis=1)
        if not (left > 0).all():
            return None
        f = tot / left
        return r * f, q * f[:, None]
    if not ((r > 0) | (q.sum(axis=1) > 0)).all():
        return None
    tot, left = p.sum(axis=1), q.sum(axis=1)
    return r, q * np.divide(tot, left, out=np.zeros_like(tot), where=left > 0)[:, None]


def _root_and_arcs(ix, ids, counts, root, p):
    n = len(ids)
    tr = ix.type_rules[ids]
    _add(counts, tr[:, SLOT["root"]], root)
    _add(counts, tr[:, SLOT["Y"]], np.ones(n))
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    _add(counts, ix.arc_rules(ids[j], ids[i], i > j), p[i, j])


def _km_sentence(ix, ids, counts, tokens, sides, kids):
    """Root, Y and choose counts of one sentence (km-global), and its tokens' N, N_D, E_D
    (N_D: tokens with an allowed dependent on side D).  Under structural constraints each word's
    weights go to the heads it may have (:func:`_constrained`); a sentence where some word may have
    none is skipped."""
    n = len(ids)
    w = _constrained(ix, ids, np.full(n, 1.0 / n), _attachment(n) * ((n - 1) / n), together=True)
    if w is None:
        return
    root, p = w
    _root_and_arcs(ix, ids, counts, root, p)
    np.add.at(tokens, ids, 1.0)
    if n == 1:
        return
    pos = np.arange(n)
    below = pos[:, None] > pos[None, :]                  # [i, j]: dependent i right of head j
    for d, mask in ((0, below.T), (1, below)):
        np.add.at(kids[:, d], ids, np.where(mask, p, 0.0).sum(axis=0))
        np.add.at(sides[:, d], ids, (mask & (p > 0)).any(axis=0).astype(float))


def _km_stops(ix, counts, tokens, sides, kids, s):
    """Add the global-first-kid stop counts (see :func:`harmonic_counts`) to ``counts`` (already smoothed).
    A side where a type takes no dependent in the grammar (a constrained DMV) does not bound f."""
    has_side = np.stack([ix.type_rules[:, SLOT["nostopL0"]] >= 0, ix.type_rules[:, SLOT["nostopR0"]] >= 0], axis=1)
    seen = (sides > 0) & has_side
    ratios = np.concatenate([((kids + s) / np.where(seen, sides, 1.0))[seen],
                             ((tokens[:, None] + s) / np.where(seen, sides, 1.0))[seen], [1.0]])
    f = FIRST_KID_SHARE * ratios.min()
    tr = ix.type_rules
    for d, side in enumerate("LR"):
        moved = f * sides[:, d]
        for name, val in ((f"stop{side}0", tokens - moved), (f"nostop{side}0", moved),
                          (f"stop{side}1", moved), (f"nostop{side}1", kids[:, d] - moved)):
            _add(counts, tr[:, SLOT[name]], val)


def _harmonic_sentence(ix, ids, counts):
    n = len(ids)
    tr = ix.type_rules[ids]
    w = _constrained(ix, ids, np.full(n, 1.0 / n), _attachment(n), together=False)
    if w is None:
        return
    root, p = w
    _root_and_arcs(ix, ids, counts, root, p)
    below = np.tril(np.ones((n, n), dtype=bool), -1)     # [i, j]: i > j (dep right of head)
    for side, mask in (("L", below.T), ("R", below)):
        pm = np.where(mask, p, 0.0)
        P0, E = np.prod(1.0 - pm, axis=0), pm.sum(axis=0)
        for name, val in (("stop%s0", P0), ("nostop%s0", 1 - P0),
                          ("stop%s1", 1 - P0), ("nostop%s1", np.maximum(E - (1 - P0), 0.0))):
            _add(counts, tr[:, SLOT[name % side]], val)


def _add(counts, rules, values):
    rules = np.asarray(rules)
    ok = rules >= 0
    np.add.at(counts, rules[ok], np.asarray(values, dtype=np.float64)[ok])
