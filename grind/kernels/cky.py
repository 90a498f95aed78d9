"""The general CKY chart parser: any PCFG, compiled once for the C kernel.

A grammar is rewritten into internal rules over integer symbols:

* ``A --> B C`` (binary over nonterminals) stays; ``A --> X1 .. Xk`` with k > 2
  becomes ``A --> X1 @1``, ``@1 --> X2 @2``, ..., ``@ --> X(k-1) Xk`` with
  fresh intermediates ``@`` unique to the rule and weight 1, so that
  E[f_{A -> X1..Xk}] is the expected count of its top rule;
* a terminal ``t`` among nonterminals (``A --> B t``) becomes a wrapper symbol
  ``<t>`` with the lexical rule ``<t> --> t`` of weight 1;
* ``A --> B`` (unary) rules are applied per span after the binary and
  lexical ones, child before parent (a topological order; a cycle is an
  :class:`~grind.errors.InputError`);
* ``A --> t1 .. tk`` (all terminals, any k >= 1) are matched against every
  sentence once, here, giving (start, end, rule) triples.

Two kernels compute the same quantities (see csrc/cky.pyx for the math): a
dense one built on BLAS GEMMs over all spans of a width, for grammars whose
binary rules fill most (left, right) child pairs, and a sparse one looping
over rules indexed by their left child.  ``path="auto"`` picks by density.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from grind.errors import InputError, NumericalError, raise_if_out_of_memory
from grind.grammars.grammar import post_order
from grind.kernels.contract import SUBNORMAL, ChartParser, flushed

try:
    from grind.kernels import _cky
except ImportError as e:              # pragma: no cover - unbuilt checkout
    raise_if_out_of_memory(e, "grind.kernels._cky")
    _cky = None
    _IMPORT_ERROR = e

PATHS = ("auto", "dense", "sparse")


class CKYParser(ChartParser):
    """A grammar compiled for a corpus of tokenised sentences.

    ``path``: ``"dense"`` (BLAS over all spans of a width), ``"sparse"`` (rules
    indexed by left child) or ``"auto"``: dense when the binary rules fill at
    least ``dense_threshold`` of the entries of the dense kernel's W (the
    attribute ``density``; the chosen kernel is the attribute ``path``).
    ``chunk_mb``: chart memory per batch of sentences (default 2 dense, 8
    sparse); ``gemm_kb``: size of the batched GEMM operands.  Both only tune
    speed.  ``failures`` maps a sentence index to why it can never parse
    (empty, unknown word, a word no lexical rule covers; positions 1-based).

    Math (csrc/cky.pyx): inside
    beta_ij(A) = sum_{A->t_i..t_j-1} w + sum_{A->BC} w sum_k beta_ik(B) beta_kj(C)
    + sum_{A->B} w beta_ij(B); outside alpha as its adjoint; log Z =
    log beta_0n(start); E[f_r] = w_r d log Z / d w_r = sum over the
    positions of r of alpha(parent) w_r prod beta(children) / Z.
    """

    def __init__(self, grammar, sentences, path: str = "auto", chunk_mb: float | None = None,
                 dense_threshold: float = 0.06, gemm_kb: float = 1024):
        if _cky is None:
            raise ImportError(f"grind.kernels._cky is not built ({_IMPORT_ERROR}); run "
                              "`GRIND_KERNELS=cky python setup.py build_ext --inplace`")
        if path not in PATHS:
            raise ValueError(f"path must be one of {PATHS}, got {path!r}")
        self.grammar = grammar
        self.sentences = [list(s) for s in sentences]
        self.failures = {}
        comp = _Compiled(grammar)
        comp.gemm_doubles = int(gemm_kb * 128)
        self._c = comp
        self.density = comp.density
        self.path = comp.choose_path(path, dense_threshold)
        if chunk_mb is None:
            chunk_mb = 2.0 if self.path == "dense" else 8.0
        self._budget = max(1, int(chunk_mb * 2**20 / 8))
        corpus = self._match(comp)
        self._kernel = _cky.Kernel(comp.arrays(self.path == "dense"), corpus)

    # -- the ChartParser contract ------------------------------------------

    def inside_outside(self, weights, idx=None):
        """Expected rule counts and log Z (see :class:`grind.kernels.contract.ChartParser`)."""
        idx = self._idx(idx)
        ok, run = self._runnable(idx)
        ws = self._weights(weights, log=False)
        cb, cu, cl, G, lz = self._kernel.inside_outside(ws, run, self._budget)
        c = self._c
        if self.path == "dense" and c.dpos.size:
            cb = np.bincount(c.drule, weights=ws[3][c.dpos] * G[c.dpos], minlength=len(c.bins))
        counts = c.original_counts(cb, cu, cl)
        logz = np.full(len(idx), -np.inf)
        logz[ok] = lz
        return counts, logz

    def viterbi(self, weights, idx=None):
        """Best derivation of each sentence and its log weight (None / -inf if none)."""
        idx = self._idx(idx)
        ok, run = self._runnable(idx)
        rows, off, n_rows, score = self._kernel.viterbi(self._weights(weights, log=True), run,
                                                        self._caps[run])
        logp = np.full(len(idx), -np.inf)
        logp[ok] = score
        return self._derivations(len(idx), ok, rows, off, n_rows), logp

    def sample(self, weights, rng, idx=None):
        """One derivation per sentence from P(t | s, w); one seed per requested sentence
        is drawn from ``rng`` in order, so results are reproducible given ``rng``."""
        idx = self._idx(idx)
        seeds = rng.integers(2**63, size=len(idx), dtype=np.int64).astype(np.uint64)
        ok, run = self._runnable(idx)
        rows, off, n_rows, _ = self._kernel.sample(self._weights(weights, log=False), run,
                                                   self._caps[run], seeds[ok], self._budget)
        return self._derivations(len(idx), ok, rows, off, n_rows)

    #: the kernel's Hastings sweep draws one proposal a sentence (--proposal-batch 1); batches of
    #: proposals take grind.infer.hastings' Python path
    hastings_batch = False

    def tree_capacity(self) -> np.ndarray:
        """The most derivation rows a tree of each sentence can have (unary chains included)."""
        return self._caps.copy()

    def hastings_sweep(self, counts, alpha, lhs_at, order, batch, inv, rows, row_off, seed, lens=None):
        """One collapsed Metropolis-Hastings sweep (--proposal-batch 1) in one nogil call (the
        sampler and its math: :mod:`grind.infer.hastings`); returns the number of accepted
        proposals.  As :meth:`grind.kernels.dmv.DMVParser.hastings_sweep`, except that a tree's
        rows vary in number: sentence s's tree is ``lens[s]`` rows (updated in place) from row
        ``row_off[s]``, with room for :meth:`tree_capacity` rows.  The proposal weights are set
        in the kernel's own arrays, only for the rules whose left-hand side's counts changed."""
        if batch != 1:
            raise ValueError("the CKY kernel's Hastings sweep draws one proposal a sentence (batch 1)")
        if not (isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.flags.c_contiguous):
            raise ValueError("rows must be a C-contiguous int64 array (it is updated in place)")
        if not (isinstance(lens, np.ndarray) and lens.dtype == np.int64 and lens.flags.c_contiguous):
            raise ValueError("lens must be a C-contiguous int64 array (it is updated in place)")
        R = len(self.grammar)
        if len(lhs_at) != R or (R and (np.min(lhs_at) < R or np.max(lhs_at) >= len(counts))):
            raise ValueError(f"lhs_at must map the {R} rules into {R}..{len(counts) - 1}")
        order = np.ascontiguousarray(order, dtype=np.int64)
        bad = [int(s) for s in order[:100] if int(s) in self.failures]
        if bad:
            raise ValueError(f"sentence {bad[0]} cannot be parsed: {self.failures[bad[0]]}")
        weights, slots, lhs_ptr, lhs_rules = self._hastings_arrays()
        acc, failed = self._kernel.hastings(weights, counts, np.ascontiguousarray(alpha, dtype=np.float64),
                                            np.ascontiguousarray(lhs_at, dtype=np.int64), lhs_ptr, lhs_rules,
                                            slots, order, float(inv), rows.reshape(-1),
                                            np.ascontiguousarray(row_off, dtype=np.int64), lens, self._caps,
                                            int(seed), self._budget)
        if failed >= 0:
            raise NumericalError(f"CKY kernel: non-finite inside probability for sentence {failed}")
        return acc

    def _hastings_arrays(self):
        """The sweep's weight arrays (the kernel's layout) and where each rule's weight lives in
        them; the rules of each left-hand side.  Made once."""
        if getattr(self, "_hastings", None) is None:
            c, R = self._c, len(self.grammar)
            dense = self.path == "dense"

            def slot(orig):
                out = np.full(R, -1, dtype=np.int64)
                keep = orig >= 0
                out[orig[keep]] = np.flatnonzero(keep)
                return out
            W = np.full(R, -1, dtype=np.int64)
            if dense:
                top = c.orig[0][c.drule]
                W[top[top >= 0]] = c.dpos[top >= 0]
            bins = c.bins[:, :3]
            binl = np.empty(len(bins), dtype=np.int64)
            binl[np.lexsort((bins[:, 2], bins[:, 1]))] = np.arange(len(bins))
            slots = {"bin": slot(c.orig[0]), "un": slot(c.orig[1]), "lex": slot(c.orig[2]), "W": W,
                     "binl": binl if len(binl) else np.zeros(1, dtype=np.int64)}
            lhs = np.asarray(self.grammar.lhs, dtype=np.int64)
            nA = len(self.grammar.nonterminals)
            lhs_ptr = np.concatenate([[0], np.cumsum(np.bincount(lhs, minlength=nA))]).astype(np.int64)
            lhs_rules = np.argsort(lhs, kind="stable").astype(np.int64)
            self._hastings = (c.kernel_weights(np.ones(R), dense, False), slots, lhs_ptr, lhs_rules)
        return self._hastings

    def work_per_sentence(self, length: int) -> int:
        """Multiply-adds of one inside-outside pass over a sentence of ``length``
        tokens (every span non-empty).  Dense: per span and block, 4 K nl nr
        (M twice, two pushes) + 3 R nl nr (W M, W^T alpha, counts); sparse:
        4 per binary rule and split (inside; outside: two pushes and the count)."""
        splits = (length + 1) * length * (length - 1) // 6
        c = self._c
        if self.path != "dense":
            return 4 * len(c.bins) * splits
        R, total = c.r1 - c.r0, 0
        for w in range(2, length + 1):
            for b, ((ll, lh), (rl, rh)) in enumerate(c.ranges):
                ks = sum(_class_splits(cl, w) for cl in range(4) if c.block_of[cl] == b)
                if ks and (lh - ll) * (rh - rl):
                    total += (length - w + 1) * (lh - ll) * (rh - rl) * (4 * ks + 3 * R)
        return total

    # -- internals -----------------------------------------------------------

    def _runnable(self, idx):
        if idx.size and (idx.min() < 0 or idx.max() >= len(self.sentences)):
            raise IndexError(f"sentence index out of range 0..{len(self.sentences) - 1}")
        failed = np.zeros(len(self.sentences), dtype=bool)
        failed[np.fromiter(self.failures, dtype=np.int64, count=len(self.failures))] = True
        ok = ~failed[idx]
        return ok, np.ascontiguousarray(idx[ok], dtype=np.int64)

    def _weights(self, weights, log: bool):
        w = flushed(self._weight_vector(weights), "CKY", SUBNORMAL)
        return self._c.kernel_weights(w, self.path == "dense", log)

    def _derivations(self, n, ok, rows, off, n_rows):
        out = [None] * n
        for q, pos in enumerate(np.flatnonzero(ok)):
            if n_rows[q] >= 0:
                out[pos] = rows[off[q]:off[q] + n_rows[q]].copy()
        return out

    def _match(self, comp):
        """Lexical matches of every sentence: per start position, (end, lexical rule)."""
        terms = set(self.grammar.terminals)
        lengths = sorted(comp.lex_index_lengths)
        length, pos_off, mptr, m_end, m_rule = [], [], [], [], []
        for s, sent in enumerate(self.sentences):
            n = len(sent)
            length.append(n)
            pos_off.append(len(mptr))
            reason = _unknown(sent, terms)
            reach = 0                       # end of the furthest match so far
            for p in range(n):
                mptr.append(len(m_end))
                if reason:
                    continue
                for k in lengths:
                    if p + k > n:
                        break
                    ids = comp.lex_index.get(tuple(sent[p:p + k]))
                    if ids:
                        m_end.extend([p + k] * len(ids))
                        m_rule.extend(ids)
                        reach = max(reach, p + k)
                if reach <= p:
                    reason = f"no lexical rule covers word {sent[p]!r} at position {p + 1}"
            mptr.append(len(m_end))
            if reason:
                self.failures[s] = reason
        self._caps = np.array([(2 * n - 1) * (comp.max_chain + 1) + 1 for n in length],
                              dtype=np.int64)
        return {"length": np.array(length, dtype=np.intc), "pos_off": np.array(pos_off, dtype=np.int64),
                "mptr": np.array(mptr, dtype=np.intc), "m_end": np.array(m_end, dtype=np.intc),
                "m_rule": np.array(m_rule, dtype=np.intc)}


def _unknown(sent, terms):
    if not sent:
        return "empty sentence"
    for p, t in enumerate(sent):
        if t not in terms:
            return f"unknown word {t!r} at position {p + 1}"
    return None


class _Compiled:
    """Internal rules over ordered symbols and the dense block layout."""

    def __init__(self, grammar):
        self.grammar = grammar
        names, bins, uns, lexs = _internal_rules(grammar)
        uns = uns[_unary_order(names, uns)]
        classes = _classes(len(names), bins, uns, (lexs[0], _lengths(lexs[1])))
        order = _symbol_order(*classes)
        pos = np.empty(len(names), dtype=np.int64)
        pos[order] = np.arange(len(names))
        self.names = [names[o] for o in order]
        self.S = len(names)
        self.start = int(pos[grammar.nonterminals.index(grammar.start)])
        # rows (lhs, left, right, rule), (parent, child, rule); rule -1: an internal rule
        self.bins, self.uns = bins.copy(), uns.copy()
        self.bins[:, :3] = pos[bins[:, :3]]
        self.uns[:, :2] = pos[uns[:, :2]]
        lex_lhs, lex_toks, lex_rule = lexs
        self.lex_lhs, self.lex_toks, self.lex_rule = pos[lex_lhs], lex_toks, lex_rule
        self.lex_index = {}
        for l, toks in enumerate(lex_toks):
            self.lex_index.setdefault(toks, []).append(l)
        self.lex_index_lengths = {len(t) for t in self.lex_index}
        self.max_chain = _longest_chain(self.S, self.uns)
        self.ph, self.w1, self.ch, binlhs = (c[order] for c in classes)   # _classes of the renumbered rules
        at = np.flatnonzero(binlhs)
        self.r0, self.r1 = (int(at.min()), int(at.max()) + 1) if at.size else (0, 0)
        self._dense_layout()
        self.orig = [self.bins[:, 3].copy(), self.uns[:, 2].copy(), self.lex_rule.copy()]

    def _dense_layout(self):
        """Blocks of W: children over one token come from W1C, over several from PHC."""
        phc = _range(self.ph & self.ch)
        w1c = _range(self.w1 & self.ch)
        allc = _range((self.ph | self.w1) & self.ch)
        P, n1, Sc = phc[1] - phc[0], w1c[1] - w1c[0], allc[1] - allc[0]
        if P * P + 2 * P * n1 < Sc * Sc:
            ranges = [(w1c, w1c), (w1c, phc), (phc, w1c), (phc, phc)]
            block_of = [0, 1, 2, 3]
        else:
            ranges = [(allc, allc)] + [((0, 0), (0, 0))] * 3
            block_of = [0, 0, 0, 0]
        R = self.r1 - self.r0
        sizes = [(l[1] - l[0]) * (r[1] - r[0]) if R else 0 for l, r in ranges]
        block_of = [b if sizes[b] else -1 for b in block_of]
        self.ranges, self.block_of = ranges, block_of
        self.coff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        wcols = int(self.coff[-1])
        self.wsize = R * wcols
        a, b, c = (np.ascontiguousarray(x) for x in self.bins[:, :3].T)
        dpos, drule = [], []
        for k, ((ll, lh), (rl, rh)) in enumerate(ranges):
            at: np.ndarray | list = []
            if sizes[k]:
                inl, inr = np.zeros(self.S, dtype=bool), np.zeros(self.S, dtype=bool)
                inl[ll:lh], inr[rl:rh] = True, True
                at = np.flatnonzero(inl[b] & inr[c])
            dpos.append((a[at] - self.r0) * wcols + self.coff[k] + (b[at] - ll) * (rh - rl) + (c[at] - rl))
            drule.append(at)
        self.dpos = np.concatenate(dpos).astype(np.int64)
        self.drule = np.concatenate(drule).astype(np.int64)
        self.density = len(self.dpos) / max(1, self.wsize)

    def choose_path(self, path, threshold):
        if not len(self.bins) or not self.dpos.size:
            return "sparse"
        if path == "auto":
            return "dense" if self.density >= threshold else "sparse"
        return path

    def arrays(self, dense: bool) -> dict:
        bins = self.bins[:, :3].astype(np.intc)
        uns = self.uns[:, :2].astype(np.intc)
        left_rule = np.lexsort((bins[:, 2], bins[:, 1]))
        lhs_rule = np.argsort(bins[:, 0], kind="stable")
        unp_rule = np.argsort(uns[:, 0], kind="stable")
        return {
            "S": self.S, "start": self.start, "r0": self.r0, "r1": self.r1, "dense": int(dense),
            "gemm_doubles": self.gemm_doubles, "max_lex": max(self.lex_index_lengths, default=1),
            "bin_lhs": bins[:, 0], "bin_left": bins[:, 1], "bin_right": bins[:, 2],
            "left_ptr": _ptr(bins[:, 1], self.S), "left_rule": left_rule,
            "left_lhs": bins[left_rule, 0], "left_right": bins[left_rule, 2],
            "lhs_ptr": _ptr(bins[:, 0], self.S), "lhs_rule": lhs_rule,
            "un_parent": uns[:, 0], "un_child": uns[:, 1],
            "unp_ptr": _ptr(uns[:, 0], self.S), "unp_rule": unp_rule,
            "lex_lhs": self.lex_lhs.astype(np.intc),
            "bin_orig": self.orig[0], "un_orig": self.orig[1], "lex_orig": self.orig[2],
            "rid": self._rule_ids() if dense else np.full(1, -1, dtype=np.intc), "block_of": self.block_of,
            "left_range": [l for l, _ in self.ranges], "right_range": [r for _, r in self.ranges],
            "coff": [int(x) for x in self.coff],
        }

    def _rule_ids(self) -> np.ndarray:
        """Binary rule of each cell of the dense weight matrix W, -1 for none
        (built only for the dense path: W has R * wcols cells)."""
        rid = np.full(max(1, self.wsize), -1, dtype=np.intc)
        rid[self.dpos] = self.drule
        return rid

    def kernel_weights(self, w, dense: bool, log: bool) -> list:
        """[bin, un, lex, W, log bin, log un, log lex, log W] for the kernel."""
        parts = []
        for orig in self.orig:
            x = np.ones(max(1, len(orig)))
            x[:len(orig)][orig >= 0] = w[orig[orig >= 0]]
            parts.append(x)
        W = np.zeros(max(1, self.wsize) if dense else 1)
        if dense:
            W[self.dpos] = parts[0][self.drule]
        parts.append(W)
        if log:
            with np.errstate(divide="ignore"):
                parts += [np.log(x) for x in parts]
        else:
            parts += parts
        return parts

    def original_counts(self, cb, cu, cl) -> np.ndarray:
        counts = np.zeros(len(self.grammar))
        for orig, c in zip(self.orig, (cb, cu, cl)):
            keep = orig >= 0
            counts[orig[keep]] = c[:len(orig)][keep]
        return counts


def _internal_rules(grammar):
    """Binary, unary and lexical rules over symbol ids: the grammar's nonterminals,
    then binarisation intermediates and terminal wrappers as they are created
    (in rule order).  Returns ``names``, ``bins`` (rows lhs, left, right, rule;
    rule -1 for the inner rules of a binarised one), ``uns`` (rows parent,
    child, rule) and ``lexs`` = (lhs ids, token tuples, rules; rule -1 for a
    wrapper's ``<t> --> t``), all in the order a rule-by-rule pass makes them.

    Rules over nonterminals only with one or two children, and rules over
    terminals only, are converted as arrays; the rest (a terminal among
    nonterminals, or more than two children) rule by rule, in order."""
    t = grammar.table()
    R = len(t)
    names = list(grammar.nonterminals)
    nt = {a: i for i, a in enumerate(names)}
    sym_nt = np.fromiter((nt.get(x, -1) for x in t.symbols), dtype=np.int64, count=len(t.symbols))
    kid = sym_nt[t.rhs]                                  # nonterminal id of each child, -1: a terminal
    k = np.diff(t.rhs_off)
    of_rule = np.repeat(np.arange(R), k)
    n_nt = np.bincount(of_rule, weights=kid >= 0, minlength=R).astype(np.int64)
    lhs = np.asarray(grammar.lhs, dtype=np.int64)
    lexical = n_nt == 0
    binary = (n_nt == 2) & (k == 2)
    unary = (n_nt == 1) & (k == 1)
    other = ~(lexical | binary | unary)
    # the rules with their own pass: wrappers and intermediates, in rule order
    o_bins: dict[int, list] = {}
    o_lexs: dict[int, list] = {}
    wrap: dict[str, int] = {}
    for r in np.flatnonzero(other).tolist():
        lhs_name, rhs = grammar.rules[r]
        made, rows = [], []
        kids = []
        for x in rhs:
            if x in nt:
                kids.append(nt[x])
            else:
                if x not in wrap:
                    wrap[x] = len(names)
                    names.append(f"<{x}>")
                    made.append((wrap[x], (x,), -1))
                kids.append(wrap[x])
        a, orig = int(lhs[r]), r
        for p, x in enumerate(kids[:-2]):
            names.append(f"{lhs_name}@{r}.{p + 1}")
            rows.append((a, x, len(names) - 1, orig))
            a, orig = len(names) - 1, -1
        rows.append((a, kids[-2], kids[-1], orig))
        o_bins[r], o_lexs[r] = rows, made
    # binary and lexical rules in rule order, the rows of the others in their place
    rb, rl, ru = np.flatnonzero(binary), np.flatnonzero(lexical), np.flatnonzero(unary)
    first = t.rhs_off[rb]
    bins = np.column_stack([lhs[rb], kid[first], kid[first + 1], rb]).astype(np.int64).reshape(-1, 4)
    uns = np.column_stack([lhs[ru], kid[t.rhs_off[ru]], ru]).astype(np.int64).reshape(-1, 3)
    rules = grammar.rules
    lex_lhs, lex_rule = lhs[rl], rl.astype(np.int64)
    lex_toks = [tuple(rules[r][1]) for r in rl.tolist()]
    if o_bins:
        nb, nl = binary.astype(np.int64), lexical.astype(np.int64)
        for r in o_bins:
            nb[r], nl[r] = len(o_bins[r]), len(o_lexs[r])
        b_at, l_at = np.cumsum(nb) - nb, np.cumsum(nl) - nl
        mine = np.zeros(int(nb.sum()), dtype=bool)
        mine[b_at[rb]] = True
        out = np.empty((len(mine), 4), dtype=np.int64)
        out[mine] = bins
        out[~mine] = [row for r in o_bins for row in o_bins[r]]
        bins = out
        mine = np.zeros(int(nl.sum()), dtype=bool)
        mine[l_at[rl]] = True
        made = [x for r in o_lexs for x in o_lexs[r]]
        lhs_all, rule_all = np.empty(len(mine), dtype=np.int64), np.empty(len(mine), dtype=np.int64)
        lhs_all[mine], rule_all[mine] = lex_lhs, lex_rule
        if made:
            lhs_all[~mine] = [a for a, _, _ in made]
            rule_all[~mine] = [o for _, _, o in made]
        toks_all: list = [None] * len(mine)
        it_mine, it_made = iter(lex_toks), iter(made)
        for q, m in enumerate(mine.tolist()):
            toks_all[q] = next(it_mine) if m else next(it_made)[1]
        lex_lhs, lex_rule, lex_toks = lhs_all, rule_all, toks_all
    return names, bins, uns, (lex_lhs, lex_toks, lex_rule)


def _unary_order(names, uns):
    """Unary rule indices, children before parents; InputError naming a cycle."""
    kids = defaultdict(list)
    for a, b in uns[:, :2].tolist():
        kids[a].append(b)
    post, cyc = post_order(kids)
    if cyc:
        raise InputError("unary cycle: " + " --> ".join(names[x] for x in cyc))
    rank = {x: i for i, x in enumerate(post)}
    child = uns[:, 1].tolist()
    return np.array(sorted(range(len(uns)), key=lambda u: rank[child[u]]), dtype=np.int64)


def _classes(S, bins, uns, lexs):
    """Per symbol: may be non-zero over several tokens (ph) / one token (w1), is a child of
    a binary rule (ch), is the left-hand side of one (bl).  ``uns`` in topological order;
    ``lexs`` = (lhs, number of tokens) of the lexical rules."""
    ph, w1, ch, bl = (np.zeros(S, bool) for _ in range(4))
    ph[bins[:, 0]] = bl[bins[:, 0]] = True
    ch[bins[:, 1]] = ch[bins[:, 2]] = True
    lex_lhs, lex_len = lexs
    w1[lex_lhs[lex_len == 1]] = True
    ph[lex_lhs[lex_len != 1]] = True
    for a, b in uns[:, :2].tolist():
        ph[a] |= ph[b]
        w1[a] |= w1[b]
    return ph, w1, ch, bl


def _lengths(toks) -> np.ndarray:
    return np.fromiter(map(len, toks), dtype=np.int64, count=len(toks))


def _symbol_order(ph, w1, ch, bl):
    """Symbols (given their :func:`_classes`) ordered so the dense kernel's row and
    child ranges are contiguous: phrase-only non-children, phrase-and-word
    non-children, phrase-only children, phrase-and-word children, word-only
    children, word-only non-children, dead."""
    g = np.where(~ch, np.where(~w1, 0, np.where(ph, 1, 5)), np.where(~w1, 2, np.where(ph, 3, 4)))
    g[~(ph | w1)] = 6
    sub = np.where(g == 0, bl, ~bl).astype(np.int64)
    sub[g == 6] = 0
    return np.lexsort((np.arange(len(g)), sub, g))


def _longest_chain(S, uns):
    """Most unary rules on one path (uns in topological order)."""
    depth = np.zeros(S, dtype=np.int64)
    for a, b in uns[:, :2].tolist():
        depth[a] = max(depth[a], depth[b] + 1)
    return int(depth.max()) if S else 0


def _range(mask):
    at = np.flatnonzero(mask)
    return (int(at.min()), int(at.max()) + 1) if at.size else (0, 0)


def _ptr(keys, S):
    return np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=S))]).astype(np.intc)


def _class_splits(cl: int, w: int) -> int:
    """Splits of a width-w span whose child widths fall in class cl
    ((left > 1) * 2 + (right > 1))."""
    return [int(w == 2), int(w >= 3), int(w >= 3), max(0, w - 3)][cl]
