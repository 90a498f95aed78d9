"""The split-head DMV kernel behind the :class:`~grind.kernels.contract.ChartParser` contract.

For a grammar of the scheme in :mod:`grind.grammars.dmv`, Eisner's split-head dynamic
program (Eisner 1996; Eisner & Satta 1999; Johnson 2007) computes exactly the
inside/outside quantities of CKY on the 2n split tokens, in O(n^3) per
sentence.  With A(h,d) = choose(d|h,dir) Y(d) and s/n the STOP/¬STOP weights::

    CL_v(h,a) = nL_v(h) sum_{d=a}^{h-1} CL_0(d,a) I(h,d)      (CL_v(h,h) = sL_v(h))
    CR_v(h,b) = nR_v(h) sum_{d=h+1}^{b} I(h,d) CR_0(d,b)      (CR_v(h,h) = sR_v(h))
    I(h,d<h)  = A(h,d) sum_m CR_0(d,m) CL_1(h,m+1)             (L'_h --> Y_d L_h)
    I(h,d>h)  = A(h,d) sum_m CR_1(h,m) CL_0(d,m+1)             (R'_h --> R_h Y_d)
    Z         = sum_r root(r) Y(r) CL_0(r,0) CR_0(r,n-1)

and E[f_r] = sum over the items built with rule r of inside * outside / Z
(outside = dZ/d item, by reverse-mode differentiation of these sums).
The whole corpus runs in one nogil call (csrc/dmv.pyx), and so does a whole
sweep of the collapsed Metropolis-Hastings sampler
(:meth:`DMVParser.hastings_sweep`, used by :mod:`grind.infer.hastings`).  One
sentence at a time (collapsed VB): :meth:`DMVParser.local_rules` gives the
rules a sentence's parses can read and :meth:`DMVParser.sparse_counts` its
nonzero expected counts and log Z from those weights only, counted into a
buffer indexed by the sentence's own rules (``Corpus.local`` / ``Corpus.sparse``),
so CVB's per-sentence update costs O(n^3), not O(#rules)
(:mod:`grind.infer.cvb`, local-theta path).  Derivations are
those the CKY kernel returns on the split sentence: rows ``(rule, start,
end)`` in pre-order over split positions 0..2n.
"""
from __future__ import annotations

import threading

import numpy as np

from grind.kernels import _dmv
from grind.grammars.dmv import (CHOOSE_L, SLOT, DMVIndex, dmv_index, is_dmv_grammar, release_dmv_index,  # noqa: F401 (re-export)
                                split_token)
from grind.kernels.eisner import eisner
from grind.errors import NumericalError
from grind.kernels.contract import FLUSH, ChartParser, LocalRules, flushed, say_flush  # noqa: F401 (FLUSH re-exported)

__all__ = ["DMVParser", "is_dmv_grammar"]
_CHUNK = 1 << 16          # stored rule-table entries built at once (bounds the temporaries)
_LOOKUP_MAX = 1 << 17     # arc rules looked up in the kernel when the dense table is this small (<= 256 types)


class DMVParser(ChartParser):
    """A DMV grammar compiled for a corpus of head-type sentences.

    ``sentences``: lists of head types (POS tags or words), not split; a
    sentence given as split tokens ``x_l x_r ...`` is accepted too.  The
    parser keeps a sentence as its tokens' type ids (4 bytes a token): the
    kernel looks each sentence's rules up as it reaches it (10 a token from
    the grammar's per-type table, n^2 choose rules from its dense type x type
    table; -1 for an impossible arc), so its state does not grow with n^2.
    Sentences with a mask, and all sentences of a grammar with more than
    256 head types (a lexicalized DMV, whose type x type table would not
    stay in cache), store their n^2 arc rules and n root rules instead
    (int32, built in chunks).  Every call only gathers weights; the results
    are the same bit for bit either way.

    ``masks`` (optional) restricts every quantity (log Z, counts, posteriors,
    Viterbi, samples) to the trees a mask allows: one mask function for all
    sentences or a list with one per sentence (``None`` = unconstrained).  A
    mask is ``mask(tokens, n) -> (allowed_arc, allowed_root)``, bool arrays of
    shapes (n, n) (``[h, d]``: head h may take dependent d, 0-based) and (n,)
    (word i may be the root); the constraints themselves live in
    :mod:`grind.infer.constraints`.  Forbidden arcs get choose rule -1 in the
    arc table and forbidden roots root rule -1, so the kernel never builds
    them; a sentence with no allowed tree gets log Z = -inf.
    """

    def __init__(self, grammar, sentences, masks=None):
        self.grammar = grammar
        self._tls = threading.local()       # per-thread scratch of inside_outside_sparse
        self.sentences = [s if type(s) is list else list(s) for s in sentences]   # (never changed in place)
        if callable(masks) or masks is None:
            masks = [masks] * len(self.sentences)
        masks = list(masks)
        if len(masks) != len(self.sentences):
            raise ValueError(f"{len(masks)} masks for {len(self.sentences)} sentences")
        self.masks = masks
        self._index = ix = dmv_index(grammar)
        self.failures = {}
        types = self._types()
        bad = np.zeros(len(self.sentences), dtype=np.uint8)
        bad[list(self.failures)] = 1
        self.arc_off = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths ** 2, out=self.arc_off[1:])
        T = len(ix.types)
        dense = ix._dense if ix._dense is not None and ix._dense.size <= _LOOKUP_MAX else None
        stored = bad == 0
        if dense is not None:
            stored &= np.fromiter((m is not None for m in masks), dtype=bool, count=len(masks))
        tab_off, pool = self._tables(types, stored)
        self._core = _dmv.Corpus(self.tok_off, types, ix.type_rules.ravel(),
                                 np.zeros(0, np.int32) if dense is None else dense, T, tab_off, pool, bad)

    def duplicate_keys(self):
        """Per sentence (its tokens, its mask's identity): equal tokens under one mask function
        (or none) parse the same."""
        return [(tuple(s), id(m)) for s, m in zip(self.sentences, self.masks)]

    @property
    def index(self) -> DMVIndex:
        """The grammar's :class:`DMVIndex` (made again from the grammar after :meth:`release_index`)."""
        return self._index if self._index is not None else dmv_index(self.grammar)

    def release_index(self) -> None:
        """Let the grammar's :class:`DMVIndex` go (about 17 bytes a rule: per
        rule its kind and head / dependent types, the choose rules' sorted
        keys), here and in the grammar's cache: the kernel has what it needs
        (the per-type rules and the sentences' rule tables), and parsing and
        counting never read it.  Only :meth:`zero_types` (the explanation of
        a failure) does; it is then made again from the grammar."""
        self._index = None
        release_dmv_index(self.grammar)

    def _types(self):
        """Head type ids of all tokens (int32, -1 in sentences that fail), and
        ``lengths`` / ``tok_off``; unknown words and empty sentences go to
        ``failures``, split sentences are unsplit."""
        tid = self.index.type_id
        for _ in range(2):          # again, once, if some sentence was unsplit
            self.lengths = np.fromiter(map(len, self.sentences), dtype=np.int64, count=len(self.sentences))
            self.tok_off = np.zeros(len(self.lengths) + 1, dtype=np.int64)
            np.cumsum(self.lengths, out=self.tok_off[1:])
            types = np.fromiter((tid.get(t, -1) for s in self.sentences for t in s), dtype=np.int32,
                                count=int(self.tok_off[-1]))
            odd = np.flatnonzero(self.lengths == 0).tolist()
            unknown = np.flatnonzero(types < 0)
            if len(unknown):
                odd += np.unique(np.searchsorted(self.tok_off, unknown, side="right") - 1).tolist()
            before = [self.sentences[k] for k in odd]
            for k in odd:
                self._type_ids(k, self.sentences[k])
            if all(self.sentences[k] is b for k, b in zip(odd, before)):
                break
        for k in self.failures:
            types[self.tok_off[k]:self.tok_off[k + 1]] = -1
        return types

    def _tables(self, types, stored):
        """Stored rule tables (pool: n*n arc rules, then n root rules; -1 where
        none or forbidden by the sentence's mask) of the sentences ``stored``,
        built a chunk of sentences at a time; tab_off = -1 for the others."""
        n = self.lengths
        size = np.where(stored, n * n + n, 0)
        ends = np.cumsum(size)
        tab_off = np.where(stored, ends - size, -1)
        pool = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.int32)
        sel = np.flatnonzero(stored)
        if not len(sel):
            return tab_off, pool
        if len(sel) == 1:                   # one sentence (a streaming minibatch): the same tables, fewer steps
            self._table_of(int(sel[0]), types, pool[tab_off[sel[0]]:])
            return tab_off, pool
        cut = np.searchsorted(ends[sel], np.arange(_CHUNK, int(ends[-1]), _CHUNK), side="right")
        roots = self.index.type_rules[:, SLOT["root"]]
        for part in np.split(sel, np.unique(cut)):
            if not len(part):
                continue
            m, o, dst = n[part], self.tok_off[part], tab_off[part]
            # arcs h -> d of every sentence of the chunk
            sid = np.repeat(np.arange(len(part)), m * m)
            p = np.arange(len(sid)) - np.repeat(np.cumsum(m * m) - m * m, m * m)
            h, d = o[sid] + p // m[sid], o[sid] + p % m[sid]
            r = self.index.arc_rules(types[h], types[d], d > h)
            r[h == d] = -1
            pool[dst[sid] + p] = r
            # root rules
            sid = np.repeat(np.arange(len(part)), m)
            i = np.arange(len(sid)) - np.repeat(np.cumsum(m) - m, m)
            pool[dst[sid] + (m * m)[sid] + i] = roots[types[o[sid] + i]]
            for k in part.tolist():
                if self.masks[k] is not None:
                    self._mask(k, pool[tab_off[k]:tab_off[k] + n[k] * n[k] + n[k]])
        return tab_off, pool

    def _table_of(self, k, types, table):
        """Sentence k's arc rules (row-major h, d) and root rules into ``table``, as :meth:`_tables` makes them."""
        m, o = int(self.lengths[k]), int(self.tok_off[k])
        t = types[o:o + m]
        pos = np.arange(m)
        r = self.index.arc_rules(np.repeat(t, m), np.tile(t, m), (pos[None, :] > pos[:, None]).ravel())
        r[::m + 1] = -1
        table[:m * m] = r
        table[m * m:m * m + m] = self.index.type_rules[t, SLOT["root"]]
        if self.masks[k] is not None:
            self._mask(k, table[:m * m + m])

    def _mask(self, k, table):
        """Set the arc and root rules of sentence k that its mask forbids to -1 in ``table`` (n*n arcs, n roots)."""
        n = int(self.lengths[k])
        a, r = self.masks[k](self.sentences[k], n)
        a, r = np.asarray(a, dtype=bool), np.asarray(r, dtype=bool)
        if a.shape != (n, n) or r.shape != (n,):
            raise ValueError(f"mask of sentence {k}: shapes {a.shape}, {r.shape} for n = {n}")
        table[:n * n][~a.ravel()] = -1
        table[n * n:][~r] = -1

    def _type_ids(self, k, sent):
        tid = self.index.type_id
        if not sent:
            self.failures[k] = "empty sentence"
        elif any(t not in tid for t in sent):
            un = _unsplit(sent, tid)
            if un is not None:
                self.sentences[k] = sent = un
            else:
                pos, bad = next((p, t) for p, t in enumerate(sent, 1) if t not in tid)
                self.failures[k] = (f"unknown word {bad!r} at position {pos}: the grammar has no head "
                                    f"type (tag) {bad!r}; make the grammar with make-grammar dmv --tags-from "
                                    "CORPUS (or --tags FILE) to cover it")

    # -- the contract ---------------------------------------------------------

    def _idx(self, idx):
        idx = np.ascontiguousarray(super()._idx(idx), dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= len(self.sentences)):
            raise IndexError(f"sentence index out of range 0..{len(self.sentences) - 1}")
        return idx

    def _weights(self, weights):
        """The weights as the kernel takes them.  Weights below FLUSH are set to
        0: the kernel's power-of-two scaling cannot mix them with ordinary
        weights (it returned NaN), and a tree that needs one weighs less than
        FLUSH times one that does not.  A sentence all of whose trees need one
        gets log Z = -inf and is reported as unparseable."""
        return flushed(self._weight_vector(weights, check=False), "DMV")

    def _check(self, logz, idx):
        bad = np.isnan(logz)
        if bad.any():
            s = int(idx[np.flatnonzero(bad)[0]])
            raise NumericalError(f"DMV kernel: non-finite inside probability for sentence {s} "
                                 "(NaN/inf weights, or a sentence too long for scaled arithmetic)")

    def inside_outside(self, weights, idx=None):
        """Expected rule counts and log Z (see :meth:`ChartParser.inside_outside`)."""
        idx = self._idx(idx)
        counts = np.zeros(len(self.grammar), dtype=np.float64)
        logz = np.empty(len(idx), dtype=np.float64)
        self._core.inside_outside(self._weights(weights), idx, counts, logz)
        self._check(logz, idx)
        return counts, logz

    sparse_counts_pay = True

    def inside_outside_sparse(self, weights, idx=None):
        """:meth:`inside_outside` as ``(rules, values, logz)`` (see
        :meth:`ChartParser.inside_outside_sparse`), with no pass over all the
        rules: the kernel adds the counts to a scratch vector kept by this
        thread and lists the rules the sentences can read; their values are
        taken and the scratch set back to zero there.  Same additions in the
        same order as :meth:`inside_outside`: the same numbers, bit for bit.
        The kernel reads weights below FLUSH as 0, as :meth:`_weights` makes them (and says so)."""
        idx = self._idx(idx)
        w = self._weight_vector(weights, check=False)
        scratch, mark = self._scratch()
        n = self.lengths[idx]
        cap = int(min(len(self.grammar), int((10 * n + n * n).sum())))
        touched = np.empty(max(cap, 1), dtype=np.int64)
        logz = np.empty(len(idx), dtype=np.float64)
        rules = touched[:self._core.inside_outside(w, idx, scratch, logz, None, None, mark, touched)]
        values = scratch[rules]
        scratch[rules] = 0.0
        mark[rules] = 0
        read = w[rules]                       # only the rules read: no pass over all of them on this path
        tiny = (read > 0) & (read < FLUSH)
        if tiny.any():
            say_flush(tiny, "DMV")
        self._check(logz, idx)
        return rules, values, logz

    def _scratch(self):
        """This thread's (counts, mark) vectors over the rules, zero between calls."""
        tls = self._tls
        if getattr(tls, "scratch", None) is None:
            tls.scratch = np.zeros(len(self.grammar), dtype=np.float64)
            tls.mark = np.zeros(len(self.grammar), dtype=np.uint8)
        return tls.scratch, tls.mark

    # -- one sentence at a time (collapsed VB) -----------------------------------

    def local_rules(self, i: int) -> np.ndarray:
        """The rules sentence ``i``'s parses can read, sorted (int64): its tokens'
        10 rules each (root, Y, STOP/¬STOP) and the choose rules of its n*n
        arcs, less those its mask forbids.  Its counts and log Z depend on
        these weights only, so collapsed VB needs theta only there.  Empty for
        a failure."""
        return self._core.local(self._sentence(i))

    def sparse_counts(self, weights, i: int):
        """Sentence ``i``'s expected counts as ``(rule indices, values)`` (the
        nonzero ones, sorted) and its log Z: what :meth:`inside_outside` gives
        for ``idx=[i]``, bit for bit, computed from the weights of
        :meth:`local_rules` only -- the only ones read and checked (finite,
        non-negative; below FLUSH as 0) -- counted into a buffer indexed by
        the sentence's own rules: O(n^3) time, no pass over the grammar's
        rules.  Not for concurrent calls (shared work buffers)."""
        w = self._weight_vector(weights, check=False)            # the kernel checks the local ones
        q = self._sentence(i)
        status, rules, values, logz = self._core.sparse(w, q)
        if status == 2:
            raise NumericalError("rule weights must be finite and non-negative")
        if status == 1:
            self._check(np.array([logz]), [q])
        return rules, values, logz

    def local_tables(self, idx=None) -> LocalRules:
        """The rules each sentence of ``idx`` reads (:meth:`local_rules`), with its rule
        tables as indices into them (see :meth:`ChartParser.local_tables`)."""
        idx = self._idx(idx)
        off, rules, tab_off, tabs = self._core.local_tables(idx)
        return LocalRules(idx, off, rules, (tab_off, tabs))

    def inside_outside_local(self, local, weights):
        """Every sentence of ``local`` under its own weights for the rules it reads, in one
        nogil call (see :meth:`ChartParser.inside_outside_local`): bit-identical to
        :meth:`inside_outside` on that sentence with those weights."""
        if local.tables is None:                  # not made by this kernel (ChartParser.local_tables)
            return super().inside_outside_local(local, weights)
        w = np.ascontiguousarray(weights, dtype=np.float64)
        counts, logz = np.empty(len(local.rules)), np.empty(len(local.idx))
        tab_off, tabs = local.tables
        bad = self._core.inside_outside_local(local.idx, local.off, w, tab_off, tabs, counts, logz)
        if bad >= 0:
            raise NumericalError("rule weights must be finite and non-negative")
        tiny = (w > 0) & (w < FLUSH)
        if tiny.any():
            say_flush(tiny, "DMV")
        self._check(logz, local.idx)
        return counts, logz

    def arc_posteriors(self, weights, idx=None, failed=None):
        """``P(head of j = i | sentence)`` as (n+1, n) arrays (row 0 = root,
        row i = word i, 1-based); ``None`` where the sentence has no tree.
        A sentence whose chart leaves floating-point range raises
        NumericalError, or, given a list ``failed``, gets ``None`` and its
        position in ``idx`` appended to ``failed``."""
        idx = self._idx(idx)
        sizes = (self.lengths[idx] + 1) * self.lengths[idx]
        off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        post = np.zeros(max(int(off[-1]), 1), dtype=np.float64)
        logz = np.empty(len(idx), dtype=np.float64)
        self._core.inside_outside(self._weights(weights), idx, None, logz, post, off[:-1])
        if failed is None:
            self._check(logz, idx)
        else:
            failed.extend(np.flatnonzero(np.isnan(logz)).tolist())
        n = self.lengths[idx]
        return [post[off[k]:off[k + 1]].reshape(n[k] + 1, n[k]) if logz[k] > -np.inf else None
                for k in range(len(idx))]

    def _trees(self, weights, idx, seeds):
        idx = self._idx(idx)
        n = self.lengths[idx]
        row_off = np.concatenate([[0], np.cumsum(np.maximum(5 * n - 1, 0))]).astype(np.int64)
        head_off = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
        rows = np.zeros((max(int(row_off[-1]), 1), 3), dtype=np.int64)
        heads = np.zeros(max(int(head_off[-1]), 1), dtype=np.int32)
        score = np.empty(len(idx), dtype=np.float64)
        self._core.trees(self._weights(weights), idx, rows.reshape(-1), row_off[:-1], score,
                         heads, head_off[:-1], seeds)
        self._check(score, idx)
        ok = score > -np.inf
        derivs = [rows[row_off[k]:row_off[k + 1]] if ok[k] else None for k in range(len(idx))]
        hs = [heads[head_off[k]:head_off[k + 1]].astype(np.int64) if ok[k] else None
              for k in range(len(idx))]
        return derivs, hs, score

    def viterbi(self, weights, idx=None):
        """Best derivation of each sentence and its log weight (``None`` / -inf if none)."""
        derivs, _, score = self._trees(weights, idx, None)
        return derivs, score

    def viterbi_heads(self, weights, idx=None):
        """Heads (1-based, 0 = root) of each Viterbi tree, and its log weight."""
        _, hs, score = self._trees(weights, idx, None)
        return hs, score

    def sample(self, weights, rng, idx=None):
        """One derivation per sentence from P(t | w_s); the kernel's xoshiro256**
        generator is seeded per sentence from ``rng.integers(2**63)`` in order."""
        return self.sample_trees(weights, rng, idx)[0]

    def sample_trees(self, weights, rng, idx=None):
        """``(derivations, heads, logz)`` of one sampled tree per sentence."""
        k = len(self._idx(idx))
        seeds = rng.integers(2 ** 63, size=k, dtype=np.int64).astype(np.uint64)
        return self._trees(weights, idx, seeds)

    def tree_capacity(self) -> np.ndarray:
        """The rows of a tree of each sentence: 5n - 1 (every split-head DMV tree has as many)."""
        return 5 * np.asarray(self.lengths, dtype=np.int64) - 1

    def hastings_sweep(self, counts, alpha, lhs_at, order, batch, inv, rows, row_off, seed, lens=None):
        """One collapsed Metropolis-Hastings sweep in one nogil call (the
        sampler and its math: :mod:`grind.infer.hastings`); returns the number
        of accepted proposals.

        ``counts`` (int64, updated in place) and ``alpha`` (float64) are over
        the sampler's joint index space (rule r at r, its LHS at ``lhs_at[r]``);
        ``rows`` (int64 (M, 3), updated in place) holds the current tree of
        sentence s as its 5n-1 derivation rows from row ``row_off[s]``;
        ``order``: the sentences to update, in order, in batches of ``batch``;
        ``inv`` = 1/T; ``seed`` seeds the kernel's xoshiro256** stream (proposal
        trees and acceptance uniforms).  A sentence whose chart leaves
        floating-point range raises NumericalError (counts stay those of the
        trees; the trees before it in ``order`` are updated).  (``lens``: every
        tree's row count, :meth:`tree_capacity`; not read.)
        """
        if not (isinstance(rows, np.ndarray) and rows.dtype == np.int64 and rows.flags.c_contiguous):
            raise ValueError("rows must be a C-contiguous int64 array (it is updated in place)")
        R = len(self.grammar)
        if len(lhs_at) != R or (R and (np.min(lhs_at) < R or np.max(lhs_at) >= len(counts))):
            raise ValueError(f"lhs_at must map the {R} rules into {R}..{len(counts) - 1}")
        acc, failed = self._core.hastings(counts, np.ascontiguousarray(alpha, dtype=np.float64),
                                          np.ascontiguousarray(lhs_at, dtype=np.int64),
                                          np.ascontiguousarray(order, dtype=np.int64), int(batch), float(inv),
                                          rows.reshape(-1), np.ascontiguousarray(row_off, dtype=np.int64),
                                          int(seed))
        if failed >= 0:
            raise NumericalError(f"DMV kernel: non-finite inside probability for sentence {failed} "
                                 "(NaN/inf weights, or a sentence too long for scaled arithmetic)")
        return acc

    def zero_types(self, weights) -> set[str]:
        """Head types that can appear in no tree under ``weights``: their
        ``Y_h --> L0_h R0_h`` rule weighs 0, or they are not reachable: from
        the root by a root rule of positive weight, or as the dependent of a
        positive-weight choose rule of a reachable head (e.g. a tag no
        training sentence had, after EM from the harmonic initialiser: its
        root and attach rules are 0, though an unseen head's rules keep their
        initial weights)."""
        w = self._weights(weights)
        ix, T = self.index, len(self.index.types)
        tr = ix.type_rules
        y, root = tr[:, SLOT["Y"]], tr[:, SLOT["root"]]
        ok_y = (y >= 0) & (w[np.maximum(y, 0)] > 0)
        reach = (root >= 0) & (w[np.maximum(root, 0)] > 0) & ok_y
        ch = (ix.kind >= CHOOSE_L) & (w > 0)
        heads, deps = ix.head[ch], ix.dep[ch]
        while True:                             # reachable heads' dependents are reachable
            more = np.zeros(T, dtype=bool)
            more[deps[reach[heads]]] = True
            more &= ok_y & ~reach
            if not more.any():
                break
            reach |= more
        return {ix.types[t] for t in range(T) if not reach[t]}

    def explain(self, k, weights, zero=None) -> str:
        """Why sentence ``k`` has no parse, naming the first offending token."""
        if k in self.failures:
            return self.failures[k]
        zero = self.zero_types(weights) if zero is None else zero
        sent = self.sentences[k]
        for pos, t in enumerate(sent, 1):
            if t in zero:
                return f"{t!r} at position {pos} has probability 0 under this grammar (no training sentence had it?)"
        return self._explain_attachment(sent, self._weights(weights)) or (
            "no projective tree has positive probability: every word alone can attach and stop, so the zeros are in "
            "how they combine (stop rules limiting how many dependents a word takes, or directions)")

    def _explain_attachment(self, sent, w) -> str | None:
        """The first word of ``sent`` that no positive-weight rule lets into a
        tree here: it cannot stop on one side, or neither the root rule nor a
        choose rule from any other word of the sentence (on that word's side,
        whose non-stop rule for a first dependent there is positive) has
        positive weight."""
        ix = self.index
        tid = np.array([ix.type_id[t] for t in sent], dtype=np.int32)
        tr = ix.type_rules[tid]

        def pos(slot):
            r = tr[:, SLOT[slot]]
            return (r >= 0) & (w[np.maximum(r, 0)] > 0)
        go = {d: pos(f"nostop{d}0") for d in "LR"}      # taking a first dependent on that side
        for d in "LR":      # a head must end each side: stop with no dependent, or take one and stop after it
            can_stop = pos(f"stop{d}0") | (pos(f"nostop{d}0") & pos(f"stop{d}1"))
            if not can_stop.all():
                i = int(np.flatnonzero(~can_stop)[0])
                side = "left" if d == "L" else "right"
                return (f"{sent[i]!r} at position {i + 1} cannot stop taking {side} dependents under this grammar "
                        "(its stop rules on that side have probability 0)")
        n, root = len(sent), pos("root")
        if not root.any():
            tags = ", ".join(sorted(set(sent)))
            return (f"no word of it can be the root: the root rule of each of its tags ({tags}) has probability 0 "
                    "under this grammar")
        for i in range(n):
            if root[i]:
                continue
            heads = np.array([h for h in range(n) if h != i], dtype=np.int32)
            right = heads < i                   # head on the left: i is a right dependent
            r = ix.arc_rules(tid[heads], np.full(len(heads), tid[i], dtype=np.int32), right.astype(np.int8))
            ok = (r >= 0) & (w[np.maximum(r, 0)] > 0) & np.where(right, go["R"][heads], go["L"][heads])
            if not ok.any():
                others = ", ".join(sorted({sent[h] for h in heads})) or "no other word"
                return (f"{sent[i]!r} at position {i + 1} can attach to nothing in this sentence: the root rule and "
                        f"every rule making it a dependent of {others} have probability 0 under this grammar")
        return None

    def mbr_heads(self, weights, idx=None, fallback=None):
        """Minimum-Bayes-risk trees: the projective tree maximising the sum of
        arc posteriors (Eisner's algorithm over :meth:`arc_posteriors`).
        ``weights`` of shape (M, R): M grammars over these rules, whose arc
        posteriors are averaged with equal weights (a committee, e.g. the runs of
        several seeds); a sentence one of them gives no tree has none.
        Given a list ``fallback``: a sentence whose posteriors leave
        floating-point range (a long sentence whose best tree is below
        ~e^-700 relative to its parts) gets its Viterbi tree (computed in log
        space, under the first grammar) and its index is appended to ``fallback``;
        without it such a sentence raises NumericalError."""
        idx = self._idx(idx)
        W = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        failed: list | None = None if fallback is None else []
        total: list | None = None
        for w in W:
            posts = self.arc_posteriors(w, idx, failed)
            total = posts if total is None else [None if a is None or b is None else a + b
                                                 for a, b in zip(total, posts)]
        failed = None if failed is None else sorted(set(failed))
        heads = [None if p is None else eisner(p if len(W) == 1 else p / len(W)) for p in total]
        if failed:
            vit, _ = self.viterbi_heads(W[0], idx[failed])
            for k, h in zip(failed, vit):
                heads[k] = h
            fallback.extend(int(idx[k]) for k in failed)
        return heads


def _unsplit(sent, tid):
    """``[x_l, x_r, ...]`` -> ``[x, ...]`` when every pair is a known split head."""
    if len(sent) % 2:
        return None
    out = []
    for a, b in zip(sent[::2], sent[1::2]):
        sa, sb = split_token(a), split_token(b)
        if not (sa and sb and sa == (sb[0], "l") and sb[1] == "r" and sa[0] in tid):
            return None
        out.append(sa[0])
    return out

