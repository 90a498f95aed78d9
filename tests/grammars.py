"""Random tiny grammars (and sentences) for brute-force checks of chart kernels.

Every generator takes a seeded ``numpy.random.Generator`` and returns a
:class:`grind.grammars.grammar.Grammar` with unnormalised positive weights spread over
about two orders of magnitude (the contract does not require normalised
weights).  Nonterminals are ``S`` (start), ``A``, ``B``, ...; terminals are
``a``, ``b``, ``c``, ...  Grammars are small enough that :mod:`tests.oracle`
enumerates every derivation of sentences of up to ~6 tokens quickly.

Families:

``cnf``        binary ``A --> B C`` and lexical ``A --> a`` rules only.
``unary``      CNF plus acyclic unary rules ``A --> B`` (only from an earlier to
               a later nonterminal, so chains of length > 1 but no cycle).
``nary``       CNF plus rules with 3-4 right-hand symbols mixing terminals and
               nonterminals (``A --> B c D``) and binary rules with one
               terminal (``A --> b C``).
``multilex``   CNF plus lexical rules rewriting to 2-3 tokens (``A --> a b``).
``zeros``      a ``mixed`` grammar with about a quarter of its weights set to 0.
``mixed``      all of the above together.
"""
from __future__ import annotations

import numpy as np

from grind.grammars.grammar import Grammar

try:
    from . import oracle
except ImportError:          # tests/ is not a package: pytest put it on sys.path
    import oracle

NT_NAMES = ["S", "A", "B", "C", "D", "E"]
T_NAMES = ["a", "b", "c", "d"]


def _weights(rng, n):
    return np.exp(rng.uniform(np.log(0.05), np.log(3.0), size=n))


class _Builder:
    def __init__(self, rng, n_nt, n_t):
        self.rng = rng
        self.nts = NT_NAMES[:n_nt]
        self.ts = T_NAMES[:n_t]
        self.rules = []
        self.seen = set()

    def add(self, lhs, rhs):
        rhs = tuple(rhs)
        if (lhs, rhs) not in self.seen:
            self.seen.add((lhs, rhs))
            self.rules.append((lhs, rhs))

    def cnf(self, p_bin, p_lex):
        rng = self.rng
        for a in self.nts:
            # every nonterminal gets at least one lexical rule so that most
            # strings parse; the start symbol always has a binary rule
            lex = [t for t in self.ts if rng.random() < p_lex] or [self.ts[rng.integers(len(self.ts))]]
            for t in lex:
                self.add(a, (t,))
            bins = [(b, c) for b in self.nts for c in self.nts if rng.random() < p_bin]
            if a == self.nts[0] and not bins:
                bins = [(self.nts[rng.integers(len(self.nts))], self.nts[rng.integers(len(self.nts))])]
            for b, c in bins:
                self.add(a, (b, c))

    def unary(self, p_un):
        # acyclic: only A_i --> A_j with i < j; force one chain of length 2 when possible
        nts = self.nts
        for i, a in enumerate(nts):
            for b in nts[i + 1:]:
                if self.rng.random() < p_un:
                    self.add(a, (b,))
        if len(nts) >= 3:
            self.add(nts[0], (nts[1],))
            self.add(nts[1], (nts[2],))

    def nary(self, n_rules, p_nt=0.6):
        rng = self.rng
        for _ in range(n_rules):
            a = self.nts[rng.integers(len(self.nts))]
            k = int(rng.integers(3, 5))
            rhs = [self.nts[rng.integers(len(self.nts))] if rng.random() < p_nt
                   else self.ts[rng.integers(len(self.ts))] for _ in range(k)]
            self.add(a, rhs)

    def mixed_binary(self, n_rules):
        # two-symbol rules with one terminal: A --> b C, A --> C b
        rng = self.rng
        for _ in range(n_rules):
            a = self.nts[rng.integers(len(self.nts))]
            nt = self.nts[rng.integers(len(self.nts))]
            t = self.ts[rng.integers(len(self.ts))]
            self.add(a, (t, nt) if rng.random() < 0.5 else (nt, t))

    def multilex(self, n_rules):
        rng = self.rng
        for _ in range(n_rules):
            a = self.nts[rng.integers(len(self.nts))]
            k = int(rng.integers(2, 4))
            self.add(a, [self.ts[rng.integers(len(self.ts))] for _ in range(k)])

    def grammar(self, zero_frac=0.0):
        w = _weights(self.rng, len(self.rules))
        if zero_frac:
            z = self.rng.random(len(w)) < zero_frac
            if z.all():
                z[0] = False
            w[z] = 0.0
        return Grammar(self.rules, w, self.nts[0])


def cnf(rng, n_nt=3, n_t=2):
    b = _Builder(rng, n_nt, n_t)
    b.cnf(p_bin=0.25, p_lex=0.6)
    return b.grammar()


def unary(rng, n_nt=4, n_t=2):
    b = _Builder(rng, n_nt, n_t)
    b.cnf(p_bin=0.12, p_lex=0.5)
    b.unary(p_un=0.4)
    return b.grammar()


def nary(rng, n_nt=3, n_t=3):
    b = _Builder(rng, n_nt, n_t)
    b.cnf(p_bin=0.2, p_lex=0.5)
    b.nary(n_rules=4)
    b.mixed_binary(n_rules=2)
    return b.grammar()


def multilex(rng, n_nt=3, n_t=2):
    b = _Builder(rng, n_nt, n_t)
    b.cnf(p_bin=0.2, p_lex=0.6)
    b.multilex(n_rules=4)
    return b.grammar()


def mixed(rng, n_nt=4, n_t=3, zero_frac=0.0):
    b = _Builder(rng, n_nt, n_t)
    b.cnf(p_bin=0.1, p_lex=0.5)
    b.unary(p_un=0.3)
    b.nary(n_rules=3)
    b.mixed_binary(n_rules=1)
    b.multilex(n_rules=3)
    return b.grammar(zero_frac)


def zeros(rng, n_nt=4, n_t=3):
    return mixed(rng, n_nt, n_t, zero_frac=0.25)


FAMILIES = {"cnf": cnf, "unary": unary, "nary": nary, "multilex": multilex,
            "zeros": zeros, "mixed": mixed}


def make(family: str, seed: int) -> Grammar:
    """The grammar of ``family`` for ``seed`` (deterministic)."""
    return FAMILIES[family](np.random.default_rng([seed, sorted(FAMILIES).index(family)]))


def random_sentences(grammar, rng, n, min_len=1, max_len=6, max_derivations=3000,
                     min_derivations=1, tries=3000):
    """Up to ``n`` distinct random token strings over ``grammar.terminals``, with
    lengths cycling over [min_len, max_len], that have at most
    ``max_derivations`` derivations in all and at least ``min_derivations`` of
    positive weight."""
    out, seen = [], set()
    ts = grammar.terminals
    for t in range(tries):
        if len(out) >= n:
            break
        length = min_len + (t % (max_len - min_len + 1))
        sent = tuple(ts[i] for i in rng.integers(len(ts), size=length))
        if sent in seen:
            continue
        seen.add(sent)
        if oracle.count_derivations(grammar, sent) > max_derivations:
            continue
        ds = oracle.all_derivations(grammar, grammar.weights, sent)
        if sum(1 for _, w in ds if w > 0) >= min_derivations:
            out.append(list(sent))
    return out


def sampled_sentences(grammar, rng, n, max_len=6, max_derivations=3000, tries=500):
    """Up to ``n`` distinct sentences generated top-down from ``grammar`` (rules
    of a LHS drawn uniformly, so that every rule kind shows up), at most
    ``max_len`` tokens and ``max_derivations`` derivations each."""
    by_lhs = {}
    for lhs, rhs in grammar.rules:
        by_lhs.setdefault(lhs, []).append(rhs)

    def gen(sym, depth, out):
        if len(out) > max_len or depth > 12:
            raise OverflowError
        rhs = by_lhs[sym][rng.integers(len(by_lhs[sym]))]
        for s in rhs:
            if grammar.is_nonterminal(s):
                gen(s, depth + 1, out)
            else:
                out.append(s)
                if len(out) > max_len:
                    raise OverflowError

    res, seen = [], set()
    for _ in range(tries):
        if len(res) >= n:
            break
        toks = []
        try:
            gen(grammar.start, 0, toks)
        except OverflowError:
            continue
        t = tuple(toks)
        if t in seen or oracle.count_derivations(grammar, t) > max_derivations:
            continue
        seen.add(t)
        res.append(list(t))
    return res
