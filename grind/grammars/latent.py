"""Treebank PCFGs and their latent-annotation refinements (Matsuzaki et al.
2005; Petrov et al. 2006; Wang & Blunsom 2013, §4.3).

A *latent symbol* is written ``X@k``: subtype k of the treebank symbol X
(the *base* symbol).  A symbol without an ``@k`` suffix is unsplit (one
subtype): the root, and every symbol of the plain treebank PCFG.  Every
rule of a latent grammar refines one *base rule* over base symbols:

* binary   ``A@a --> B@b C@c``  (base rule A --> B C),
* unary    ``A@a --> B@b``      (base rule A --> B),
* lexical  ``A@a --> w``        (base rule A --> w, A a part-of-speech tag).

:func:`treebank_grammar` estimates the relative-frequency PCFG of prepared
trees (:func:`grind.formats.treebank.prepare`): P(A --> beta) =
count(A --> beta) / count(A).  :func:`split_grammar` splits every
nonterminal but the root into H subtypes, each base rule into all its
refinements, with probability

    P(A@a --> B@b C@c) = P(A --> B C) / (H_B H_C) * (1 + u),   u ~ U(-0.01, 0.01)

renormalised per left-hand side (the 1% noise that breaks the symmetry, as
Petrov et al. and Wang & Blunsom initialise); with H = 1 it is the treebank
PCFG itself.

:class:`LatentGrammar` compiles a grammar (split or not) for the kernels:
each base rule r owns a dense block of ``H_A * H_B * H_C`` (binary),
``H_A * H_B`` (unary) or ``H_A`` (lexical) entries of one float64 buffer,
subtypes in C order (a major), and ``rule_of_entry`` maps each entry to the
grammar's rule index (-1 where the grammar lacks that refinement; its
weight is 0).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from grind.errors import InputError
from grind.formats.rules import ARROW
from grind.formats.treebank import ROOT
from grind.formats.trees import subtrees
from grind.grammars.grammar import Grammar

#: Kinds of base rules.
LEXICAL, UNARY, BINARY = 0, 1, 2


def split_name(sym: str) -> tuple[str, int | None]:
    """``("NP", 3)`` for ``NP@3``; ``(sym, None)`` for an unsplit symbol
    (``@NP`` -- an intermediate symbol of binarisation -- is unsplit)."""
    i = sym.rfind("@")
    if i > 0 and sym[i + 1:].isdigit():
        return sym[:i], int(sym[i + 1:])
    return sym, None


def sub_name(base: str, k: int, h: int) -> str:
    return base if h == 1 else f"{base}@{k}"


#: The escape of a word spelled like a symbol (``,`` is both a tag and a word).
ESCAPE = "\\"


def escape_word(word: str, labels) -> str:
    """A word as a grammar terminal: behind :data:`ESCAPE` when it is spelled
    like one of the base symbols ``labels`` or a subtype of one (``NN@1``),
    like the rule arrow ``-->``, or starts with the escape, since in the rule
    format a symbol that has rules is a nonterminal and an arrow splits a rule."""
    base, at, k = word.rpartition("@")
    symbol_like = word in labels or word == ARROW or (bool(at) and k.isdigit() and base in labels)
    return ESCAPE + word if symbol_like or word.startswith(ESCAPE) else word


def unescape_word(terminal: str) -> str:
    return terminal[len(ESCAPE):] if terminal.startswith(ESCAPE) else terminal


#: Header keys a treebank grammar carries to every grammar trained from it.
TREEBANK_META = ("model", "subtypes", "markov", "rare", "preparation")


def treebank_meta(grammar: Grammar) -> dict:
    """The treebank header lines of ``grammar`` (empty unless ``# model: treebank``)."""
    if grammar.meta.get("model") != "treebank":
        return {}
    return {k: grammar.meta[k] for k in TREEBANK_META if k in grammar.meta}


def labels_of(trees) -> set[str]:
    """Every node label of the trees."""
    return {n[0] for t in trees for n in subtrees(t)}


def base_rules_of(trees, labels) -> Counter:
    """Counts of the base rules ``(lhs, rhs)`` used by prepared trees, words
    escaped against ``labels`` (:func:`escape_word`)."""
    c: Counter = Counter()
    for t in trees:
        for n in subtrees(t):
            c[(n[0], tuple(escape_word(k, labels) if isinstance(k, str) else k[0] for k in n[1:]))] += 1
    return c


def treebank_grammar(trees) -> Grammar:
    """The relative-frequency PCFG of prepared trees, rules sorted by LHS
    (ROOT first) then by right-hand side."""
    counts = base_rules_of(trees, labels_of(trees))
    rules = sorted(counts, key=lambda r: (r[0] != ROOT, r[0], r[1]))
    w = np.array([counts[r] for r in rules], dtype=np.float64)
    g = Grammar(rules, w, ROOT)
    return g.with_weights(g.normalize(w), meta={"weights": "probabilities (relative frequencies)"})


def split_size(g: Grammar, h: int) -> int:
    """How many rules :func:`split_grammar` makes of ``g`` with ``h`` subtypes (a Python int: no overflow)."""
    nts = set(g.nonterminals)
    total = 0
    for lhs, rhs in g.iter_rules():
        total += (1 if lhs == g.start else h) * h ** sum(s in nts for s in rhs)
    return total


def split_grammar(g: Grammar, h: int, rng: np.random.Generator, noise: float = 0.01) -> Grammar:
    """Every nonterminal of the treebank PCFG ``g`` but its start symbol split
    into ``h`` subtypes (module docstring)."""
    if h == 1:
        return g
    nts = set(g.nonterminals)
    nsub = {a: (1 if a == g.start else h) for a in nts}
    rules, weights = [], []
    for (lhs, rhs), p in zip(g.rules, g.probabilities()):
        kids = [s for s in rhs if s in nts]
        if len(kids) != len(rhs) and kids:
            raise InputError(f"rule {lhs} --> {' '.join(rhs)} mixes words and symbols: not a treebank grammar")
        shape = [nsub[lhs]] + [nsub[s] for s in rhs if s in nts]
        share = p / int(np.prod(shape[1:]))
        for idx in np.ndindex(*shape):
            new_rhs = tuple(sub_name(s, k, nsub[s]) for s, k in zip(rhs, idx[1:])) if kids else rhs
            rules.append((sub_name(lhs, idx[0], nsub[lhs]), new_rhs))
            weights.append(share)
    w = np.array(weights) * (1.0 + rng.uniform(-noise, noise, len(weights)))
    out = Grammar(rules, w, g.start)
    return out.with_weights(out.normalize(w), meta={"weights": "probabilities"})


class LatentGrammar:
    """A grammar over latent symbols compiled into base rules and dense
    subtype blocks (module docstring).

    Attributes: ``bases`` (base symbol names; ``base_id``), ``nsub`` (int64,
    subtypes per base symbol), ``words`` (terminals; ``word_id``),
    ``kind``/``parent``/``left``/``right`` (int64 per base rule: kind, base
    ids of A, B, C -- ``left`` is the word id for a lexical rule, ``right``
    -1 unless binary), ``offset``/``size`` (int64 per base rule: its block),
    ``rule_of_entry`` (int64 per buffer entry), ``index`` (dict
    ``(kind, A, B, C)`` -> base rule id), ``root`` (base id of the start
    symbol, which must be unsplit).
    """

    def __init__(self, grammar: Grammar):
        self.grammar = grammar
        nts = grammar._nts
        subs: dict[str, set[int]] = {}
        sym_base, sym_sub = {}, {}
        for a in grammar.nonterminals:
            b, k = split_name(a)
            sym_base[a], sym_sub[a] = b, (0 if k is None else k)
            subs.setdefault(b, set()).add(sym_sub[a])
        self.bases = sorted(subs)
        self.base_id = {b: i for i, b in enumerate(self.bases)}
        for b, ks in subs.items():
            if ks != set(range(len(ks))):
                raise InputError(f"the subtypes of {b} are not numbered 0..{len(ks) - 1}: {sorted(ks)[:8]}")
            if len(ks) > 1 and b in nts:
                raise InputError(f"{b} is both a split symbol and an unsplit one")
        self.nsub = np.array([len(subs[b]) for b in self.bases], dtype=np.int64)
        self.words = sorted(grammar.terminals)
        self.word_id = {w: i for i, w in enumerate(self.words)}
        root_base, root_sub = split_name(grammar.start)
        if root_sub is not None or self.nsub[self.base_id[root_base]] != 1:
            raise InputError(f"the start symbol {grammar.start} must not be split")
        self.root = self.base_id[root_base]
        bid, wid = self.base_id, self.word_id
        sym = {a: (bid[sym_base[a]], sym_sub[a]) for a in grammar.nonterminals}
        index: dict[tuple[int, int, int, int], int] = {}
        kind: list[int] = []
        parent: list[int] = []
        left: list[int] = []
        right: list[int] = []
        n = len(grammar.rules)
        rj = np.empty(n, dtype=np.int64)
        sa, sb, sc = (np.zeros(n, dtype=np.int64) for _ in range(3))
        for r, (lhs, rhs) in enumerate(grammar.rules):
            a, sa[r] = sym[lhs]
            x = sym.get(rhs[0])
            if len(rhs) == 1 and x is None:
                key = (LEXICAL, a, wid[rhs[0]], -1)
            elif len(rhs) == 1 and x is not None:
                key = (UNARY, a, x[0], -1)
                sb[r] = x[1]
            elif len(rhs) == 2 and x is not None and rhs[1] in sym:
                y = sym[rhs[1]]
                key = (BINARY, a, x[0], y[0])
                sb[r], sc[r] = x[1], y[1]
            else:
                raise InputError(f"rule {lhs} --> {' '.join(rhs)}: a treebank grammar has binary rules over "
                                 "symbols, unary rules and one-word lexical rules only")
            j = index.get(key)
            if j is None:
                j = index[key] = len(kind)
                kind.append(key[0])
                parent.append(key[1])
                left.append(key[2])
                right.append(key[3])
            rj[r] = j
        self.index = index
        self.kind = np.array(kind, dtype=np.int64)
        self.parent = np.array(parent, dtype=np.int64)
        self.left = np.array(left, dtype=np.int64)
        self.right = np.array(right, dtype=np.int64)
        ns = self.nsub
        nb = np.where(self.kind != LEXICAL, ns[np.where(self.kind != LEXICAL, self.left, 0)], 1)
        nc = np.where(self.kind == BINARY, ns[np.where(self.kind == BINARY, self.right, 0)], 1)
        self.size = (ns[self.parent] * nb * nc).astype(np.int64)
        self.offset = np.zeros(len(self.size), dtype=np.int64)
        np.cumsum(self.size[:-1], out=self.offset[1:])
        self.rule_of_entry = np.full(int(self.size.sum()), -1, dtype=np.int64)
        flat = self.offset[rj] + (sa * nb[rj] + sb) * nc[rj] + sc
        self.rule_of_entry[flat] = np.arange(n, dtype=np.int64)
        self.n_entries = len(self.rule_of_entry)

    def longest_unary_chain(self) -> tuple[int, bool]:
        """``(depth, cyclic)``: the most unary base rules A --> B --> ... in a row (0 without unary
        rules), and whether the base-level unary rules form a cycle (S --> VP --> S: treebank grammars
        of real trees do); with a cycle, depth is the longest chain once the edges that close a cycle
        (met again on the search path) are left out."""
        kids: dict[int, list[int]] = {}
        for k, a, b in zip(self.kind.tolist(), self.parent.tolist(), self.left.tolist()):
            if k == UNARY:
                kids.setdefault(a, []).append(b)
        depth: dict[int, int] = {}
        cyclic = False

        def walk(node, path):           # the base symbols are few: recursion depth is bounded by them
            nonlocal cyclic
            best = 0
            for c in kids.get(node, ()):
                if c in path:
                    cyclic = True
                    continue
                best = max(best, 1 + (depth[c] if c in depth else walk(c, path | {c})))
            depth[node] = best
            return best

        for top in sorted(kids):
            if top not in depth:
                walk(top, {top})
        return max(depth.values(), default=0), cyclic

    def terminal(self, word: str) -> str:
        """The grammar terminal of a word (:func:`escape_word`)."""
        return escape_word(word, self.base_id)

    def known_words(self) -> set[str]:
        """The words (and signatures) the grammar has lexical rules for, unescaped."""
        return {unescape_word(t) for t in self.words}

    def _shape(self, j):
        ns = self.nsub
        if self.kind[j] == BINARY:
            return (ns[self.parent[j]], ns[self.left[j]], ns[self.right[j]])
        if self.kind[j] == UNARY:
            return (ns[self.parent[j]], ns[self.left[j]])
        return (ns[self.parent[j]],)

    def gather(self, weights) -> np.ndarray:
        """The buffer of block entries: ``weights[rule_of_entry]``, 0 where -1."""
        w = np.asarray(weights, dtype=np.float64)
        out = np.zeros(self.n_entries, dtype=np.float64)
        ok = self.rule_of_entry >= 0
        out[ok] = w[self.rule_of_entry[ok]]
        return out

    def scatter(self, buffer) -> np.ndarray:
        """Per-rule sums of a buffer of block entries (the inverse map of :meth:`gather`)."""
        ok = self.rule_of_entry >= 0
        return np.bincount(self.rule_of_entry[ok], weights=np.asarray(buffer)[ok], minlength=len(self.grammar))

    def encode(self, tree):
        """A prepared tree as post-order node arrays ``(rule, left_child,
        right_child)`` (int64; child node indices, -1 where absent; the root
        last), or ``(None, reason)`` when the grammar lacks a rule of it."""
        rule, lkid, rkid = [], [], []

        def add(t, key, ch):
            j = self.index.get(key)
            if j is None:
                kid_names = " ".join(k if isinstance(k, str) else k[0] for k in t[1:])
                raise KeyError(f"the grammar has no rule {t[0]} --> {kid_names}")
            rule.append(j)
            lkid.append(ch[0])
            rkid.append(ch[1])
            return len(rule) - 1

        def walk(tree):                  # post-order with a stack: a tree may be deeper than Python's limit
            stack, done = [(tree, False)], []    # done: the node indices of finished children
            while stack:
                t, back = stack.pop()
                kids = t[1:]
                a = self.base_id.get(t[0])
                if a is None:
                    raise KeyError(f"unknown symbol {t[0]}")
                if back and len(kids) == 1:
                    done.append(add(t, (UNARY, a, self.base_id[kids[0][0]], -1), (done.pop(), -1)))
                elif back:
                    c2, c1 = done.pop(), done.pop()
                    done.append(add(t, (BINARY, a, self.base_id[kids[0][0]], self.base_id[kids[1][0]]), (c1, c2)))
                elif len(kids) == 1 and isinstance(kids[0], str):
                    w = self.word_id.get(self.terminal(kids[0]))
                    done.append(add(t, (LEXICAL, a, -2 if w is None else w, -1), (-1, -1)))
                elif len(kids) == 1 or (len(kids) == 2 and not isinstance(kids[0], str)
                                        and not isinstance(kids[1], str)):
                    stack.append((t, True))
                    stack.extend((k, False) for k in reversed(kids))
                else:
                    raise KeyError(f"{t[0]} has {len(kids)} children: the tree is not binarised")

        try:
            walk(tree)
        except KeyError as e:
            return None, e.args[0]
        return (np.array(rule, dtype=np.int64), np.array(lkid, dtype=np.int64), np.array(rkid, dtype=np.int64)), None
