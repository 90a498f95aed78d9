"""Grammars: a list of rules with one weight each (:class:`Grammar`), read from
the rule-file format of :mod:`grind.formats.rules`.

A symbol that is the left-hand side of some rule is a nonterminal; every other
symbol is a terminal.  The start symbol is the first rule's LHS unless given.
Weights are either rule probabilities or Dirichlet pseudo-counts; the file's
``# weights:`` header line says which.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from grind.errors import InputError
from grind.formats.rules import (ARROW, COUNTS_HEADER, PSEUDO_COUNTS, RuleSet, RuleTable, check_rule_count,  # noqa: F401
                                 fingerprint_keys, format_weight, read_rule_file, read_rules_cached, rule_key,
                                 rule_lines)

def post_order(kids: dict):
    """Depth-first over the graph ``kids`` (node -> list of children):
    ``(nodes, children before parents; None)``, or ``(partial order, [a, b, ..., a])``
    at the first cycle found."""
    state, post = {}, []
    for root in list(kids):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(kids.get(root, ())))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[node] = 2
                post.append(node)
            elif state.get(nxt) == 1:
                path = [n for n, _ in stack]
                return post, path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(kids.get(nxt, ()))))
    return post, None


#: Header keys :meth:`Grammar.write` does not copy from ``meta``: the file it was read from, and the lines
#: every header makes itself (version, command or call, seed; weights and start are written from the grammar).
_NOT_WRITTEN = ("path", "call", "command", "seed", "weights", "start")
#: What made a grammar's weights (its run: command or call, seed, algorithm, objective ...): not carried over
#: to other weights by :meth:`Grammar.with_weights`.
_RUN_KEYS = ("call", "seed", "command", "algorithm", "alpha", "steps", "objective", "estimate")


class Grammar(RuleSet):
    """A list of rules with one weight each (and optional pseudo-counts).

    ``weights[r]`` belongs to ``rules[r] = (lhs, rhs)``.  ``meta`` keeps the
    ``# key: value`` header lines of the file it was read from.  A grammar
    read from a file (or built as arrays) holds its rules as a
    :class:`RuleTable` and makes the ``rules`` tuples only when some caller
    reads them (:class:`grind.formats.rules.RuleSet`).
    """

    def __init__(self, rules: list[tuple[str, tuple[str, ...]]], weights, start: str,
                 pseudocounts: np.ndarray | None = None, meta: dict[str, str] | None = None):
        self._set_rules(rules, None)
        self.weights, self.start, self.pseudocounts = weights, start, pseudocounts
        self.meta = {} if meta is None else meta
        self._derive(None)

    def __repr__(self) -> str:
        return f"Grammar({len(self)} rules, start={self.start!r}, meta={self.meta!r})"

    def _derive(self, table):               # untyped, as __post_init__ was: the attributes stay Any
        """Check the rules and set what follows from them (``nonterminals``,
        ``terminals``, ``lhs``); from ``table`` (a :class:`RuleTable` of the
        rules, known to be distinct: a file read) when given, without a pass
        over the rules."""
        self.weights = np.asarray(self.weights, dtype=np.float64)
        if table is None:
            self._check_distinct()
            self.nonterminals = sorted({lhs for lhs, _ in self.rules})
            self._nts = nts = set(self.nonterminals)
            self.terminals = sorted({s for _, rhs in self.rules for s in rhs if s not in nts})
            lhs_id = {a: i for i, a in enumerate(self.nonterminals)}
            self.lhs = np.array([lhs_id[a] for a, _ in self.rules], dtype=np.int64)
        else:
            sym = table.symbols
            is_lhs = np.zeros(len(sym), dtype=bool)
            is_lhs[table.lhs] = True
            in_rhs = np.zeros(len(sym), dtype=bool)
            in_rhs[table.rhs] = True
            nt_ids = np.flatnonzero(is_lhs)
            names = [sym[i] for i in nt_ids.tolist()]
            order = sorted(range(len(names)), key=names.__getitem__)
            self.nonterminals = [names[i] for i in order]
            self._nts = set(self.nonterminals)
            self.terminals = sorted(sym[i] for i in np.flatnonzero(in_rhs & ~is_lhs).tolist())
            rank = np.full(len(sym), -1, dtype=np.int64)
            rank[nt_ids[order]] = np.arange(len(order))
            self.lhs = rank[table.lhs]
        if self.start not in self._nts:
            raise InputError(f"start symbol {self.start!r} is not the left-hand side of any rule")

    def _check_distinct(self) -> None:
        """InputError naming the first rule whose key (``LHS --> RHS``) an earlier rule has."""
        try:
            distinct = len(set(self.rules)) == len(self.rules)
        except TypeError:                   # a right-hand side given as a list
            distinct = False
        # distinct tuples have distinct keys unless a symbol holds a space or is empty
        if distinct and not any(" " in s or not s for s in {x for lhs, rhs in self.rules for x in (lhs, *rhs)}):
            return
        seen = set()
        for r in self.rules:
            k = rule_key(*r)
            if k in seen:
                raise InputError(f"duplicate rule {k}")
            seen.add(k)

    @classmethod
    def _from_table(cls, table: RuleTable, rules, weights, start: str, pseudocounts=None,
                    meta=None) -> Grammar:
        """A grammar of the distinct rules whose arrays are ``table`` (``rules``:
        their tuples if already made, else None: made when asked for)."""
        g = cls.__new__(cls)
        g._set_rules(rules, table)
        g._src = table
        g.weights, g.start = weights, start
        g.pseudocounts, g.meta = pseudocounts, dict(meta or {})
        g._derive(table)
        return g

    def _sharing(self, weights, pseudocounts, meta) -> Grammar:
        """The same rules with other weights, sharing what follows from the
        rules (no second pass over them)."""
        g = Grammar.__new__(Grammar)
        g._rules, g._rt, g._src = self._rules, self._rt, self._src
        g.start, g.pseudocounts, g.meta = self.start, pseudocounts, meta
        g.weights = np.asarray(weights, dtype=np.float64)
        g.nonterminals, g._nts, g.terminals, g.lhs = self.nonterminals, self._nts, self.terminals, self.lhs
        for cached in ("index", "_fp", "_dmv_index", "_dmv_problem", "_template_problem"):   # keyed by the rules
            if cached in self.__dict__:
                g.__dict__[cached] = self.__dict__[cached]
        return g

    @cached_property
    def index(self) -> dict[str, int]:
        """Rule key (``LHS --> RHS ...``) -> rule number (made on first use)."""
        return {k: i for i, k in enumerate(k for part in self.key_chunks() for k in part)}

    def __len__(self):
        return self.n_rules()

    def weight_kind(self) -> str:
        """What the weights are, from the ``# weights:`` header: ``pseudo-counts``,
        ``unnormalised``, ``counts`` or ``probabilities`` (also when there is no header),
        or ``unknown`` for a header that says none of these."""
        w = self.meta.get("weights", "")
        if not w or w.startswith("probabilities") or w.startswith(AS_READ):
            return "probabilities"
        if w.startswith(PSEUDO_COUNTS):
            return "pseudo-counts"
        if w.startswith("unnormalised") or w.startswith("unnormalized"):
            return "unnormalised"
        if w.startswith(COUNTS_HEADER):
            return "counts"
        return "unknown"

    def unnormalised_lhs(self, rtol: float = 1e-6):
        """``(lhs, sum)`` of the first LHS whose weights are not all 0 and do
        not sum to 1 (relative tolerance ``rtol``), or None."""
        tot = np.bincount(self.lhs, weights=self.weights, minlength=len(self.nonterminals))
        bad = np.flatnonzero((tot > 0) & (np.abs(tot - 1.0) > rtol))
        if not len(bad):
            return None
        first = min(bad, key=lambda a: int(np.flatnonzero(self.lhs == a)[0]))
        return self.nonterminals[first], float(tot[first])

    def unary_cycle(self, positive_only: bool = True):
        """A cycle of unary nonterminal rules ``A --> B`` (of positive weight when
        ``positive_only``) as the list of its symbols ``[A, B, ..., A]``, or None."""
        kids: dict[str, list[str]] = {}
        for (a, rhs), w in zip(self.rules, self.weights):
            if len(rhs) == 1 and rhs[0] in self._nts and (w > 0 or not positive_only):
                kids.setdefault(a, []).append(rhs[0])
        return post_order(kids)[1]

    def is_nonterminal(self, sym: str) -> bool:
        return sym in self._nts

    def probabilities(self) -> np.ndarray:
        """Rule probabilities: the weights, or for a file of Dirichlet
        pseudo-counts (``# weights: Dirichlet pseudo-counts ...``) their
        posterior mean alpha_r / sum_{R_A} alpha."""
        if self.meta.get("weights", "").startswith(PSEUDO_COUNTS):
            return self.normalize(self.weights)
        return self.weights

    @classmethod
    def read(cls, path, start: str | None = None) -> Grammar:
        """The grammar of a rule file (:func:`read_grammar`)."""
        import os
        return read_grammar(os.fspath(path), start)

    def write(self, path, weights=None, **header) -> None:
        """Write the rules with ``weights`` (default: this grammar's) to
        ``path`` (``-`` = stdout; ``.gz``/``.xz``/``.bz2`` compressed; written
        atomically), as grind's commands write grammars: a header (grind
        version, the command or API call -- the grammar's own when
        :func:`grind.fit` made it, else the last one --, the seed, ``# weights:``
        from ``meta``, ``# start:``, the other ``# key: value`` lines of ``meta``
        (e.g. ``# model: treebank``, a fit's algorithm and objective) and one for
        each of ``header``), then one ``weight [pseudo-count] LHS --> RHS ...`` line per rule."""
        import os

        from grind.formats.textio import call_header_lines, header_lines, open_out
        w = self.weights if weights is None else np.asarray(weights, dtype=np.float64)
        if len(w) != len(self):
            raise ValueError(f"{len(w)} weights for {len(self)} rules")
        meta = self.meta
        lines = {"weights": meta.get("weights"), "start": self.start,
                 **{k: v for k, v in meta.items() if k not in _NOT_WRITTEN}, "rules": len(self), **header}
        body = self.rule_text(w, self.pseudocounts)  # checked before a byte is written (stdout is not atomic)
        with open_out(os.fspath(path)) as f:         # made by grind.fit: its own call and seed, else the last
            f.writelines(call_header_lines(meta["call"], meta.get("seed"), **lines) if "call" in meta
                         else header_lines(**lines))
            f.writelines(body)

    def with_weights(self, weights, meta=None) -> Grammar:
        """The same rules with new weights (no pseudo-counts); without ``meta``, this grammar's, less
        what made its weights (:data:`_RUN_KEYS`: other weights were not made by that call or run)."""
        if meta is None:
            meta = {k: v for k, v in self.meta.items() if k not in _RUN_KEYS}
        return self._sharing(weights, None, dict(meta))

    def lhs_sums(self, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` over the rules of each LHS, per nonterminal."""
        return np.bincount(self.lhs, weights=values, minlength=len(self.nonterminals))

    def lhs_totals(self, values: np.ndarray) -> np.ndarray:
        """Sum of ``values`` over the rules of each rule's LHS, per rule."""
        return self.lhs_sums(values)[self.lhs]

    def normalize(self, values: np.ndarray, chunk: int = 1 << 20) -> np.ndarray:
        """theta_r = v_r / sum_{r' in R_A} v_r'.  A LHS whose values are all
        zero keeps zeros (it is unreachable or unused).  Values whose sum over
        a LHS exceeds the float range are divided by their largest first
        (v_r / m_A) / sum (v_r' / m_A): the same probabilities, not 0.  Made
        ``chunk`` rules at a time: one output vector, no temporaries over all
        the rules."""
        values = np.asarray(values, dtype=np.float64)
        tot = self.lhs_sums(values)
        scale = None
        big = np.isinf(tot)
        if big.any():                     # finite values whose sum overflows: scale those LHSs by their maximum
            m = np.zeros(len(tot))
            np.maximum.at(m, self.lhs, values)
            scale = np.where(big & np.isfinite(m), m, 1.0)
            tot = np.zeros(len(tot))
            for lo in range(0, len(values), chunk):
                a = self.lhs[lo:lo + chunk]
                tot += np.bincount(a, weights=values[lo:lo + chunk] / scale[a], minlength=len(tot))
        ok = tot > 0
        safe = np.where(ok, tot, 1.0)
        out = np.empty(len(values), dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            for lo in range(0, len(values), chunk):
                a = self.lhs[lo:lo + chunk]
                np.divide(values[lo:lo + chunk], safe[a], out=out[lo:lo + chunk])
                if scale is not None:
                    np.divide(values[lo:lo + chunk], scale[a], out=out[lo:lo + chunk])
                    out[lo:lo + chunk] /= safe[a]
                out[lo:lo + chunk][~ok[a]] = 0.0
        return out


#: The ``# weights:`` of a grammar written as read, its weights' kind unknown (make-grammar from-file before
#: issue 38): read as a file without the line (probabilities, checked as such).
AS_READ = "as read"
#: Weights printed with this many significant digits or more are full-precision numbers, and a file whose
#: weights all have fewer than FEW_DIGITS (0.5, 0.25, 0.3) may be exact numbers written by hand: in both the
#: sums are held to the 1e-6 tolerance, not to the rounding of the printed digits (:func:`printed_precision`).
FULL_PRECISION = 12
FEW_DIGITS = 4


def printed_precision(weights) -> int:
    """The most significant digits any of ``weights`` is printed with: the largest, over the weights, of the
    fewest digits that give the weight back (0.166667 has 6, 0.5 has 1, 1/3 printed in full 16 or 17)."""
    w = np.abs(np.asarray(weights, dtype=np.float64))
    w = w[(w > 0) & np.isfinite(w)]
    if not w.size:
        return 1
    exp = np.floor(np.log10(w))
    left = np.ones(w.size, dtype=bool)
    for k in range(1, 18):
        scale = 10.0 ** (k - 1 - exp[left])
        exact = np.abs(np.round(w[left] * scale) / scale - w[left]) <= 4e-16 * w[left]
        idx = np.flatnonzero(left)
        left[idx[exact]] = False
        if not left.any():
            return k
    return 17


def rounding_tolerance(grammar: Grammar, digits: int) -> np.ndarray:
    """Per LHS: how far from 1 the sum of its weights may be when each was rounded to ``digits``
    significant digits (half a unit in the last printed place, summed over the LHS's rules)."""
    w = np.asarray(grammar.weights, dtype=np.float64)
    with np.errstate(divide="ignore"):
        half_ulp = np.where(w > 0, 0.5 * 10.0 ** (np.floor(np.log10(np.where(w > 0, w, 1.0))) - digits + 1), 0.0)
    return grammar.lhs_sums(half_ulp) * (1 + 1e-9) + 1e-15


def require_probabilities(grammar: Grammar, path: str, command: str = "this command") -> str | None:
    """InputError unless ``grammar.probabilities()`` are rule probabilities: the
    weights sum to 1 for every LHS (within 1e-6, or within the rounding of the
    digits the file prints them with, :func:`printed_precision`, for weights
    printed to fewer than :data:`FULL_PRECISION` digits as other tools print
    them: six 0.166667 sum to 1.000002; an LHS of all-0 weights is unused and
    allowed), or the file holds Dirichlet pseudo-counts (their posterior mean
    is used).  A file whose header says its weights are unnormalised, or are
    counts, is refused even where they happen to sum to 1; the message's fix
    depends on what the weights are.  Returns a note when the sums are 1 only
    within the printed precision (the caller renormalises), else None."""
    name = "<stdin>" if path == "-" else path
    w = np.asarray(grammar.weights, dtype=np.float64)
    bad_w = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
    if len(bad_w):
        lhs, rhs = grammar.rules[int(bad_w[0])]
        raise InputError(f"{name}: the weight of rule {lhs} {ARROW} {' '.join(rhs)} is {float(w[bad_w[0]])!r}: "
                         "weights must be finite and non-negative")
    kind = grammar.weight_kind()
    if kind == "pseudo-counts":
        return None
    if kind == "unknown":
        raise InputError(f"{name}: its header says '# weights: {grammar.meta['weights']}', which is none of "
                         f"'probabilities', 'unnormalised', '{PSEUDO_COUNTS}' or '{COUNTS_HEADER}': say what the "
                         "weights are, or remove the line (weights are then read as probabilities)")
    if kind in ("unnormalised", "counts"):
        raise InputError(f"{name}: its header says '# weights: {grammar.meta['weights']}', but {command} "
                         f"needs rule probabilities: {_probabilities_fix(grammar, name, kind)}")
    note = None
    bad = grammar.unnormalised_lhs()
    if bad is not None:
        digits = printed_precision(w)
        tot = grammar.lhs_sums(w)
        off = np.abs(tot - 1.0)
        if FEW_DIGITS <= digits < FULL_PRECISION and np.all((tot == 0) | (off <= rounding_tolerance(grammar, digits))):
            n = int(np.count_nonzero((tot > 0) & (off > 1e-6)))
            note = (f"{name}'s weights are printed to {digits} significant digits and {n} left-hand side(s) sum "
                    f"to 1 only within their rounding (at most {float(off[tot > 0].max()):.3g} off): renormalised "
                    "per left-hand side")
        else:
            lhs, total = bad
            raise InputError(f"{name}: the weights of the rules of {lhs} sum to {total!r}, not 1, so they are not "
                             f"probabilities ({command} needs them): {_probabilities_fix(grammar, name, kind)}")
    dead = np.flatnonzero(grammar.lhs_sums(w) == 0)
    if len(dead):
        from grind import log
        more = f" and {len(dead) - 1} more" if len(dead) > 1 else ""
        log.warn(f"{name}: every rule of {grammar.nonterminals[int(dead[0])]!r}{more} has probability 0: such a "
                 "nonterminal derives nothing (a tree through it has probability 0), and training keeps its rules "
                 "at 0")
    return note


def _probabilities_fix(grammar: Grammar, name: str, kind: str) -> str:
    """What to do with weights that are not probabilities, by what they are: counts of grind estep ->
    grind mstep; weights equal within every left-hand side (a grammar to initialise) -> grind init;
    other weights -> grind init --normalise (their ratios kept), or the pseudo-count header."""
    if kind == "counts":
        return (f"it holds expected rule counts of grind estep, which grind mstep turns into a grammar: "
                f"'grind mstep --grammar GRAMMAR {name}', GRAMMAR the grammar grind estep made them with (without "
                "it, a left-hand side no sentence used has no probabilities)")
    w = np.asarray(grammar.weights, dtype=np.float64)
    lo = np.full(len(grammar.nonterminals), np.inf)
    hi = np.zeros(len(grammar.nonterminals))
    np.minimum.at(lo, grammar.lhs, w)
    np.maximum.at(hi, grammar.lhs, w)
    used = np.isfinite(lo)
    pseudo = (f"; if they are Dirichlet pseudo-counts, say so in its header: the line '# weights: {PSEUDO_COUNTS}' "
              "(in place of any other '# weights:' line)")
    if np.all(lo[used] == hi[used]):
        return (f"its weights are equal within every left-hand side (a grammar to initialise): "
                f"'grind init --random --seed 1 {name}' (or --uniform; --harmonic for a DMV grammar){pseudo}")
    return (f"'grind init --normalise {name}' divides each weight by its left-hand side's sum, keeping their "
            f"ratios{pseudo}")


def as_probabilities(grammar: Grammar, name: str, command: str = "this command",
                     normalise: bool = False) -> Grammar:
    """``grammar`` checked by :func:`require_probabilities`; with ``normalise``
    (training, which only needs a starting point) weights that are not
    probabilities are normalised per LHS instead, with a warning naming ``name``."""
    try:
        note = require_probabilities(grammar, name, command)
    except InputError:
        if not normalise or grammar.weight_kind() in ("counts", "unknown"):
            raise
        from grind import log
        log.warn(f"{'<stdin>' if name == '-' else name}: the weights are not probabilities (some left-hand "
                 "side's do not sum to 1); training starts from them normalised per left-hand side ('grind init' "
                 "chooses another start)")
        return grammar._sharing(grammar.normalize(grammar.weights), grammar.pseudocounts,
                                dict(grammar.meta, weights="probabilities (normalised by grind train)"))
    if note is None:
        return grammar
    from grind import log
    from grind.formats.textio import add_run_note
    log.info(note)
    add_run_note("renormalised", note)
    return grammar._sharing(grammar.normalize(grammar.weights), grammar.pseudocounts, grammar.meta)


def read_grammar(path: str, start: str | None = None) -> Grammar:
    """The grammar of a rule file (``-`` = stdin); a large file is read through
    the binary cache of :func:`grind.formats.rules.read_rules_cached`."""
    p = read_rules_cached(path)
    t = p.table
    check_rule_count(path, p.meta, len(t), "a truncated file? after editing rules by hand, correct or delete the "
                     "'# rules:' line")
    start = start or p.meta.get("start") or t.symbols[int(t.lhs[0])]
    try:
        return Grammar._from_table(t, p.made, p.weights, start, p.pseudo, p.meta)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None


def derives_one_word(grammar: Grammar) -> bool:
    """Whether the grammar's start symbol reaches a word through unary rules alone (so that some one-word
    sentence has a derivation; a CNF grammar's ROOT --> X, X --> A B derives none)."""
    unary = [(a, rhs[0]) for a, rhs in grammar.rules if len(rhs) == 1]
    reach = {a for a, b in unary if not grammar.is_nonterminal(b)}
    grown = True
    while grown:
        new = {a for a, b in unary if b in reach and a not in reach}
        reach |= new
        grown = bool(new)
    return grammar.start in reach


def _mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each entry (splitmix64's finaliser), wrapping on overflow."""
    x = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


def interchangeable(grammar: Grammar, weights) -> list[list[str]]:
    """Classes (two or more) of nonterminals that no deterministic training can tell apart from these
    ``weights``: after colour refinement (terminals and the start symbol fixed; a nonterminal's colour
    refined by the multiset of its rules -- weight and the colours of the right-hand side in order -- and of
    its occurrences in other rules, until the number of colours stops growing) they have one colour.  Such
    nonterminals have equal inside and outside scores on every span, so equal expected counts, so EM, VB and
    their kin keep them equal for ever: a symmetric start (a CNF grammar under ``grind init --uniform``)."""
    t = grammar.table()
    n_sym = len(t.symbols)
    is_nt = np.zeros(n_sym, dtype=bool)
    is_nt[np.unique(t.lhs)] = True
    colour = np.where(is_nt, np.uint64(1), _mix(np.arange(n_sym, dtype=np.uint64) + np.uint64(7)))
    start = t.symbols.index(grammar.start) if grammar.start in t.symbols else -1
    if start >= 0:
        colour[start] = np.uint64(2)
    w = np.asarray(weights, dtype=np.float64)
    wq = _mix(np.round(w, 12).view(np.uint64))                # weights equal to 12 decimals are alike
    lens = np.diff(t.rhs_off)
    rule_of_tok = np.repeat(np.arange(len(t.lhs)), lens)
    pos = (np.arange(len(t.rhs)) - np.repeat(t.rhs_off[:-1], lens)).astype(np.uint64)
    n_colours = len(np.unique(colour[is_nt]))
    with np.errstate(over="ignore"):
        for _ in range(n_sym):
            tok = _mix(colour[t.rhs] + _mix(pos + np.uint64(11)))
            sig = np.zeros(len(t.lhs), dtype=np.uint64)
            np.add.at(sig, rule_of_tok, tok)
            sig = _mix(sig + wq)
            out = np.zeros(n_sym, dtype=np.uint64)
            np.add.at(out, t.lhs, _mix(sig + np.uint64(3)))
            inn = np.zeros(n_sym, dtype=np.uint64)
            np.add.at(inn, t.rhs, _mix(sig[rule_of_tok] + _mix(colour[t.lhs[rule_of_tok]]) + _mix(pos + np.uint64(5))))
            new = np.where(is_nt, _mix(colour + _mix(out) + _mix(inn + np.uint64(13))), colour)
            if start >= 0:
                new[start] = _mix(new[start] + np.uint64(17))
            count = len(np.unique(new[is_nt]))
            colour = new
            if count == n_colours:
                break
            n_colours = count
    classes: dict[int, list[str]] = {}
    for i in np.flatnonzero(is_nt):
        classes.setdefault(int(colour[i]), []).append(t.symbols[i])
    return [c for c in classes.values() if len(c) > 1]
