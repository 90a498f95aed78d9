"""The segmentation kernel: exact forward-backward for morphology (template) grammars.

A *template grammar* (Johnson, Griffiths & Goldwater 2007) has a start symbol
(``Word``) whose rules are templates ``Word --> S1 .. Sk`` over *slot*
nonterminals, and slots whose rules are all lexical, ``Stem --> a b d``; a
"sentence" is a word whose tokens are its characters.  A derivation is a
template and a cut of the word into k non-empty pieces, one lexical rule per
piece, so the chart is positions x (template, slot index) instead of CKY's
spans x symbols:

    alpha_t,0(0) = 1,   alpha_t,m(j) = sum_{i<j} alpha_t,m-1(i) L_{s_m}(i, j),
    Z = sum_t w_t alpha_t,k_t(n),

with ``L_s(i, j)`` the weight of slot s's lexical rule for ``w[i:j]`` (0 if
none), and beta the mirror-image backward pass.  The lexical rule id of every
(word, slot, span) is looked up once at construction (substring content ->
rule, a dict), so a pass costs a gather plus O(n^2) per (template, slot).

Scaling: per word and slot, ``L_s`` is divided by its maximum over the word's
spans and the logs of those maxima are added back per template; every alpha
and beta row is divided by its largest entry, whose log is carried along the
row's chain.  So a word whose derivations all weigh far less than the smallest
double keeps its log Z, counts and posteriors.  In the compiled kernel, a word
where a value still leaves the double range inside a row (an entry below
DBL_MIN times its row's largest), or whose posteriors need a factor above
e^600, is redone wholly in log space.  The numpy fallback forms such a
word's posteriors in log space but has no log-space second pass (it can lose
paths of the first kind; the tests check the compiled kernel there, against
log-space enumeration).

Two implementations compute the same quantities: the compiled one
(csrc/segment.pyx, one nogil loop over the words of a call, used when built)
and a numpy one vectorised over batches of equal-length words (the fallback,
and the cross-check in tests/test_segment_kernel.py); ``span_posteriors``
always uses the numpy one.

One word at a time (collapsed VB): :meth:`SegmentParser.local_rules` gives
the rules a word's E-step reads (every template, and each slot's lexical rule
for each of the word's substrings) and :meth:`SegmentParser.sparse_counts`
its nonzero expected counts and log Z from those weights only (compiled
``WordKernel``: no pass over the grammar's rules, a per-rule count scratch of
9 bytes a rule kept between calls), so CVB's per-word update costs the word's
chart instead of O(#rules) (:mod:`grind.infer.cvb`, local-theta path).

Derivations follow the CKY kernel's format exactly: ``(template, 0, n)`` then
``(lexical rule, i, j)`` per slot, left to right (CKY's binarisation
intermediates emit no rows).
"""
from __future__ import annotations

import numpy as np

from grind.errors import InputError, NumericalError, raise_if_out_of_memory
from grind.kernels.contract import ChartParser

try:
    from grind.kernels import _segment
except ImportError as e:              # pragma: no cover - unbuilt: the numpy path
    raise_if_out_of_memory(e, "grind.kernels._segment")
    _segment = None

_NO_RULES, _NO_VALUES = np.zeros(0, np.int64), np.zeros(0)

#: Words per vectorised batch (memory: batch * slots * (n+1)^2 doubles a few times).
BATCH = 2048


def template_problem(grammar) -> str | None:
    """Why ``grammar`` is not a template (morphology) grammar, or None when it is:
    every rule of the start symbol has a non-empty right-hand side of slot
    nonterminals (not the start symbol), and every other rule is lexical
    (all terminals)."""
    cached = getattr(grammar, "_template_problem", None)
    source = grammar.rules_source
    if cached is not None and cached[0] is source:
        return cached[1]
    why, n_templates = None, 0
    start = grammar.start
    nts = set(grammar.nonterminals)
    for lhs, rhs in grammar.iter_rules():          # a DMV grammar fails at its second rule
        if lhs == start:
            n_templates += 1
            if not rhs or not nts.issuperset(rhs):
                why = f"the start symbol's rule {lhs} --> {' '.join(rhs)} is not a template over slot nonterminals"
            elif start in rhs:
                why = f"the template {lhs} --> {' '.join(rhs)} uses the start symbol as a slot"
        elif not nts.isdisjoint(rhs):
            why = f"{lhs} --> {' '.join(rhs)} is neither a template ({start} --> slots) nor a lexical slot rule"
        if why:
            break
    if why is None and not n_templates:
        why = f"no template rule {start} --> slots"
    try:
        grammar._template_problem = (source, why)  # type: ignore[attr-defined]  # a cache
    except AttributeError:                                # pragma: no cover
        pass
    return why


class SegmentParser(ChartParser):
    """A template grammar compiled for a corpus of words (lists of characters).

    ``failures`` maps a word to why it can never parse: empty, an unknown
    character, or no template can cover it with the grammar's substrings.

    ``native``: use the compiled kernel (csrc/segment.pyx, one nogil call per
    batch) when True, the vectorised numpy one when False, the compiled one if
    built when None.  Both compute the same quantities; sampling draws differ.
    """

    def __init__(self, grammar, sentences, batch: int = BATCH, native: bool | None = None):
        if native and _segment is None:
            raise ImportError("grind.kernels._segment is not built; run "
                              "`GRIND_KERNELS=segment python setup.py build_ext --inplace`")
        self.native = _segment is not None if native is None else bool(native)
        why = template_problem(grammar)
        if why is not None:
            raise InputError(f"the segmentation kernel needs a template grammar: {why}")
        self.grammar = grammar
        self.sentences = [list(s) for s in sentences]
        self.failures = {}
        self._batch = max(1, int(batch))
        start = grammar.start
        slots, slot_id, templates = [], {}, []
        for r, (lhs, rhs) in enumerate(grammar.rules):
            if lhs == start:
                for x in rhs:
                    if x not in slot_id:
                        slot_id[x] = len(slots)
                        slots.append(x)
                templates.append((r, np.array([slot_id[x] for x in rhs], dtype=np.int64)))
        for lhs, _ in grammar.rules:          # slots no template uses (their counts stay 0)
            if lhs != start and lhs not in slot_id:
                slot_id[lhs] = len(slots)
                slots.append(lhs)
        self.slots, self.templates = slots, templates
        self.template_rules = np.array([r for r, _ in templates], dtype=np.int64)
        S = len(slots)
        # substrings are keyed by strings of one character per token (fast to slice and hash)
        code = {t: chr(c if c < 0xD800 else c + 0x800) for c, t in enumerate(grammar.terminals)}
        lex: dict[str, int] = {}                 # substring -> row of lex_table
        table: list[list[int]] = []
        for r, (lhs, rhs) in enumerate(grammar.rules):
            if lhs != start:
                rhs = "".join([code[t] for t in rhs])
                k = lex.get(rhs)
                if k is None:
                    k = lex[rhs] = len(table)
                    table.append([-1] * S)
                table[k][slot_id[lhs]] = r
        table.append([-1] * S)                   # row K: no such substring
        #: (K+1, S): the lexical rule of substring k under slot s, -1 for none
        self.lex_table = np.array(table, dtype=np.int32).reshape(len(table), S)
        self.max_lex = max((len(t) for t in lex), default=0)
        none = len(table) - 1
        terms = set(grammar.terminals)
        # per word: its length and row in its length group; per length n: the
        # group's word ids and kid[B, n+1, n+1], the substring of every span
        self._group = np.full(len(self.sentences), -1, dtype=np.int64)
        self._row = np.full(len(self.sentences), -1, dtype=np.int64)
        by_len: dict[int, list[int]] = {}
        for s, w in enumerate(self.sentences):
            if not w:
                self.failures[s] = "empty sentence"
                continue
            bad = next((p for p, t in enumerate(w) if t not in terms), None)
            if bad is not None:
                self.failures[s] = f"unknown word {w[bad]!r} at position {bad + 1}"
                continue
            by_len.setdefault(len(w), []).append(s)
        self._kid = {}
        get = lex.get
        for n, words in by_len.items():
            m, n1 = min(n, self.max_lex), n + 1
            flat = [none] * (len(words) * n1 * n1)
            for b, s in enumerate(words):
                w = "".join([code[t] for t in self.sentences[s]])
                off = b * n1 * n1
                for i in range(n):
                    row = off + i * n1
                    for j in range(i + 1, min(n, i + m) + 1):
                        k = get(w[i:j])
                        if k is not None:
                            flat[row + j] = k
            self._kid[n] = np.array(flat, dtype=np.int32).reshape(len(words), n1, n1)
            self._group[words] = n
            self._row[words] = np.arange(len(words))
        self._static = self._native_arrays(by_len) if self.native else None
        self._one = None                         # the one-word kernel (sparse_counts), built on first use
        # structural failures: no derivation even with every weight 1
        ones = np.ones(len(grammar))
        for pos, fw in self._passes(ones, self._idx(None), backward=False):
            for s in pos[~np.isfinite(fw.logz)]:
                self.failures[int(s)] = "no template covers the word with the grammar's substrings"

    # -- the ChartParser contract ------------------------------------------

    def inside_outside(self, weights, idx=None):
        """Expected rule counts and log Z (see :class:`grind.kernels.contract.ChartParser`)."""
        w = self._weights(weights)
        idx = self._idx(idx)
        if self.native:
            return self._native_io(w, idx)
        counts = np.zeros(len(self.grammar) + 1)
        logz = np.full(len(idx), -np.inf)
        for pos, fw in self._passes(w, idx, backward=True):
            logz[pos] = fw.logz
            if not np.isfinite(fw.logz).any():
                continue
            M = fw.lex_marginals()
            rid = self.lex_table[fw.kid].transpose(0, 3, 1, 2)
            keep = M > 0
            counts[:-1] += np.bincount(rid[keep], weights=M[keep], minlength=len(counts) - 1)
            np.add.at(counts, self.template_rules, fw.post.sum(0))
        return counts[:-1], logz

    def viterbi(self, weights, idx=None):
        """Best derivation of each word and its log weight (None / -inf if none)."""
        w = self._weights(weights)
        idx = self._idx(idx)
        if self.native:
            return self._native_decode(w, idx, None)
        out = [None] * len(idx)
        logp = np.full(len(idx), -np.inf)
        for pos, fw in self._passes(w, idx, backward=False, semiring="max"):
            best_t = np.argmax(fw.logt, axis=1)
            lp = fw.logt[np.arange(len(pos)), best_t]
            logp[pos] = lp
            for b in np.flatnonzero(np.isfinite(lp)):
                t = best_t[b]
                out[pos[b]] = fw.backtrace(b, t)
        return out, logp

    def sample(self, weights, rng, idx=None):
        """One derivation per word drawn exactly from P(t | w, weights)."""
        w = self._weights(weights)
        idx = self._idx(idx)
        seeds = rng.integers(2**63, size=len(idx), dtype=np.int64)     # one stream per word
        if self.native:
            return self._native_decode(w, idx, seeds)[0]
        out = [None] * len(idx)
        draws = 1 + max(len(slots) for _, slots in self.templates)
        for pos, fw in self._passes(w, idx, backward=False):
            # each word's uniforms come from its own seed: the draw does not depend on the batching
            U = np.array([np.random.default_rng(int(seeds[b])).random(draws) for b in pos])
            ok = np.isfinite(fw.logz)
            u = U[:, 0]
            cum = np.cumsum(fw.post, axis=1)
            t_of = np.minimum((cum < (u * cum[:, -1])[:, None]).sum(1), len(self.templates) - 1)
            for t, (_, slots) in enumerate(self.templates):
                bs = np.flatnonzero(ok & (t_of == t))
                if not bs.size:
                    continue
                k = len(slots)
                ends = np.zeros((bs.size, k + 1), dtype=np.int64)
                ends[:, k] = fw.n
                j = ends[:, k]
                for m in range(k, 0, -1):
                    p = fw.alpha[t][m - 1][bs] * fw.L[bs, slots[m - 1], :, j]     # (nb, n+1) over i
                    c = np.cumsum(p, axis=1)
                    r = U[bs, 1 + k - m] * c[:, -1]
                    i = np.minimum((c <= r[:, None]).sum(1), fw.n)
                    # guard against landing on a zero cell through rounding
                    i = np.where(p[np.arange(bs.size), i] > 0, i, np.argmax(p > 0, axis=1))
                    ends[:, m - 1] = i
                    j = i
                for q, b in enumerate(bs):
                    out[pos[b]] = fw.rows(b, t, ends[q])
        return out

    def boundary_posteriors(self, weights, idx=None) -> list:
        """Per word of ``idx``: P(a morph boundary after character i), i = 1..n-1
        (an array of n-1; all zeros for an unparseable word)."""
        w = self._weights(weights)
        idx = self._idx(idx)
        if self.native:
            lens = np.array([len(self.sentences[s]) for s in idx], dtype=np.int64)
            P = self._native_io(w, idx, bounds=True)
            return [P[q, 1:max(1, n)].copy() for q, n in enumerate(lens)]
        out = [None] * len(idx)
        for q, s in enumerate(idx):
            out[q] = np.zeros(max(0, len(self.sentences[s]) - 1))
        for pos, fw in self._passes(w, idx, backward=True):
            P = fw.boundaries()
            for b, q in enumerate(pos):
                out[q] = P[b, 1:fw.n].copy()
        return out

    def span_posteriors(self, weights, idx=None) -> list:
        """Per word of ``idx``: an (n+1, n+1) matrix, entry [i, j] = P(w[i:j] is a morph)."""
        w = self._weights(weights)
        idx = self._idx(idx)
        out = [None] * len(idx)
        for q, s in enumerate(idx):
            n = len(self.sentences[s])
            out[q] = np.zeros((n + 1, n + 1))
        for pos, fw in self._passes(w, idx, backward=True):
            M = fw.lex_marginals().sum(1)
            for b, q in enumerate(pos):
                out[q] = M[b]
        return out

    # -- one word at a time (collapsed VB) --------------------------------------

    def local_rules(self, i: int) -> np.ndarray:
        """The rules word ``i``'s E-step reads, sorted (int64): every template
        rule, and for every span of at most ``max_lex`` characters and every
        slot, the slot's lexical rule for that substring when it has one
        (including the ones that only set the kernel's scaling).  Its counts
        and log Z depend on these weights only, so collapsed VB needs theta
        only there.  Empty for a failure."""
        if i in self.failures:
            return _NO_RULES
        if self.native:
            k = self._word_kernel().local(self._sentence(i), self._loc_buf)
            return self._loc_buf[:k].copy()
        n = int(self._group[i])
        pos = np.arange(n + 1)
        width = pos[None, :] - pos[:, None]                     # [i, j] = j - i
        lex = self.lex_table[self._kid[n][self._row[i]][(width > 0) & (width <= self.max_lex)]].ravel()
        return np.unique(np.concatenate([self.template_rules, lex[lex >= 0]]))

    def sparse_counts(self, weights, i: int):
        """Word ``i``'s expected counts as ``(rule indices, values)`` (the
        nonzero ones, sorted) and its log Z: what :meth:`inside_outside` gives
        for ``idx=[i]``, computed (compiled kernel) from the weights of
        :meth:`local_rules` only -- the only ones read and checked -- in time
        proportional to the word's chart, not to the grammar.  Not for
        concurrent calls (shared work buffers)."""
        if i in self.failures:
            return _NO_RULES, _NO_VALUES, -np.inf
        if not self.native:
            counts, logz = self.inside_outside(weights, [i])
            rules = np.flatnonzero(counts)
            return rules, counts[rules], float(logz[0])
        w = self._weight_vector(weights, check=False)            # the kernel checks the local ones
        kern = self._word_kernel()
        k, z = kern.counts(w, self._sentence(i), self._rule_buf, self._val_buf)
        if k < 0:
            raise NumericalError("rule weights must be finite and non-negative")
        return self._rule_buf[:k].copy(), self._val_buf[:k].copy(), z

    def _word_kernel(self):
        kern = self._one
        if kern is None:
            kern = self._one = _segment.WordKernel(self._static, len(self.grammar))
            self._loc_buf = np.empty(max(1, kern.capacity), dtype=np.int64)
            self._rule_buf = np.empty(max(1, kern.capacity), dtype=np.int64)
            self._val_buf = np.empty(max(1, kern.capacity))
        return kern

    # -- internals -----------------------------------------------------------

    def _weights(self, weights):
        return self._weight_vector(weights)

    def _native_arrays(self, by_len) -> dict:
        """The corpus for the compiled kernel: every word's span table, flat."""
        koff = np.zeros(len(self.sentences), dtype=np.int64)
        length = np.zeros(len(self.sentences), dtype=np.intc)
        parts, at = [np.zeros(1, dtype=np.intc)], 1
        for n, words in by_len.items():
            kid = self._kid[n]
            koff[words] = at + np.arange(len(words)) * (n + 1) ** 2
            length[words] = n
            parts.append(kid.ravel().astype(np.intc))
            at += kid.size
        slots = [sl for _, sl in self.templates]
        return {"S": len(self.slots), "T": len(self.templates), "maxlex": max(1, self.max_lex),
                "nmax": max(by_len, default=1), "table": np.ascontiguousarray(self.lex_table.ravel(), dtype=np.intc),
                "trule": self.template_rules.astype(np.intc),
                "toff": np.concatenate([[0], np.cumsum([len(x) for x in slots])]).astype(np.intc),
                "tslot": np.concatenate(slots).astype(np.intc), "kid": np.concatenate(parts),
                "koff": koff, "length": length}

    def _native_gram(self, w):
        g = dict(self._static)
        g["w"] = np.ascontiguousarray(w)          # the kernel takes the template logs itself
        return g

    def _runnable(self, idx):
        if idx.size and (idx.min() < 0 or idx.max() >= len(self.sentences)):
            raise IndexError(f"sentence index out of range 0..{len(self.sentences) - 1}")
        ok = self._group[idx] >= 0
        return ok, np.ascontiguousarray(idx[ok], dtype=np.intc)

    def _native_io(self, w, idx, bounds: bool = False):
        ok, run = self._runnable(idx)
        g = self._native_gram(w)
        counts = np.zeros(len(self.grammar))
        lz = np.empty(len(run))
        B = np.zeros((len(run), g["nmax"] + 1) if bounds else (0, 1))
        _segment.inside_outside(g, run, counts, lz, B, not bounds)
        if bounds:
            out = np.zeros((len(idx), g["nmax"] + 1))
            out[ok] = B
            return out
        logz = np.full(len(idx), -np.inf)
        logz[ok] = lz
        return counts, logz

    def _native_decode(self, w, idx, seeds):
        ok, run = self._runnable(idx)
        g = self._native_gram(w)
        kmax = max(len(sl) for _, sl in self.templates) + 1
        rows = np.empty((len(run) * kmax, 3), dtype=np.int64)
        n_rows = np.empty(len(run), dtype=np.int64)
        score = np.empty(len(run))
        sd = np.zeros(len(run), dtype=np.uint64) if seeds is None else seeds[ok].astype(np.uint64)
        _segment.decode(g, run, sd, seeds is None, rows, n_rows, score)
        out = [None] * len(idx)
        logp = np.full(len(idx), -np.inf)
        logp[ok] = score
        for q, pos in enumerate(np.flatnonzero(ok)):
            if n_rows[q] >= 0:
                out[pos] = rows[q * kmax:q * kmax + n_rows[q]].copy()
        return out, logp

    def _passes(self, w, idx, backward: bool, semiring: str = "sum"):
        """(positions in idx, _Pass) per batch of equal-length parseable words of idx."""
        if idx.size and (idx.min() < 0 or idx.max() >= len(self.sentences)):
            raise IndexError(f"sentence index out of range 0..{len(self.sentences) - 1}")
        grp = self._group[idx]
        wlex = np.append(w, 0.0)[self.lex_table]     # (K+1, S); rule -1 -> weight 0
        for n in np.unique(grp):
            if n < 0:
                continue
            pos = np.flatnonzero(grp == n)
            kid = self._kid[int(n)]
            rows = self._row[idx[pos]]
            for c in range(0, len(pos), self._batch):
                p, r = pos[c:c + self._batch], rows[c:c + self._batch]
                yield p, _Pass(self, w, wlex, kid[r], int(n), backward, semiring)


class _Pass:
    """Forward (and backward) over a batch of B words of length n."""

    def __init__(self, parser, w, wlex, kid, n, backward, semiring):
        self.parser, self.kid, self.n = parser, kid, n
        templates = parser.templates
        B, S = len(kid), wlex.shape[1]
        L = np.ascontiguousarray(wlex[kid].transpose(0, 3, 1, 2))   # (B, S, n+1, n+1)
        mx = L.reshape(B, S, -1).max(axis=2)                        # (B, S)
        with np.errstate(divide="ignore"):
            logmx = np.log(mx)
        L /= np.where(mx > 0, mx, 1.0)[:, :, None, None]
        self.L = L
        with np.errstate(divide="ignore"):
            logw = np.log(w[parser.template_rules])                 # (T,)
        T = len(templates)
        self.alpha, self.beta, self.bp = [], [], []
        self.aofs, self.bofs, self.base = [], [], np.empty((B, T))
        self.logt = np.empty((B, T))
        for t, (_, slots) in enumerate(templates):
            a = np.zeros((B, n + 1))
            a[:, 0] = 1.0
            off = np.zeros(B)
            al, offs, bps = [a], [off], []
            for s in slots:
                if semiring == "sum":
                    a = np.einsum("bi,bij->bj", a, L[:, s])
                else:
                    prod = a[:, :, None] * L[:, s]
                    bps.append(prod.argmax(axis=1))
                    a = prod.max(axis=1)
                a, off = _normalised(a, off)         # every row divided by its largest entry (csrc/segment.pyx)
                al.append(a)
                offs.append(off)
            self.alpha.append(al)
            self.aofs.append(offs)
            self.bp.append(bps)
            self.base[:, t] = logw[t] + logmx[:, slots].sum(1)
            with np.errstate(divide="ignore"):
                self.logt[:, t] = self.base[:, t] + off + np.log(a[:, n])
            if backward:
                b = np.zeros((B, n + 1))
                b[:, n] = 1.0
                off = np.zeros(B)
                be, offs = [b], [off]
                for s in slots[::-1]:
                    b, off = _normalised(np.einsum("bij,bj->bi", L[:, s], b), off)
                    be.append(b)
                    offs.append(off)
                self.beta.append(be[::-1])
                self.bofs.append(offs[::-1])
        lt = self.logt
        top = lt.max(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.logz = top + np.log(np.exp(lt - np.where(np.isfinite(top), top, 0.0)[:, None]).sum(1))
            ok = np.isfinite(self.logz)
            post = np.where(ok[:, None], np.exp(lt - np.where(ok, self.logz, 0.0)[:, None]), 0.0)
        self.post = post                                            # P(template t | word), (B, T)

    def _log_factor(self, t, m_alpha, m_beta):
        """(B,): log of what alpha row m_alpha x beta row m_beta of template t are multiplied by to give
        posteriors (-inf for a word the template does not derive)."""
        with np.errstate(invalid="ignore"):
            x = self.base[:, t] + self.aofs[t][m_alpha] + self.bofs[t][m_beta] - self.logz
        return np.where((self.post[:, t] > 0) & np.isfinite(x), x, -np.inf)

    def lex_marginals(self):
        """(B, S, n+1, n+1): P(slot s's rule spans [i, j)) summed over slot occurrences."""
        M = np.zeros_like(self.L)
        for t, (_, slots) in enumerate(self.parser.templates):
            if not self.post[:, t].any():
                continue
            al, be = self.alpha[t], self.beta[t]
            for m, s in enumerate(slots):
                M[:, s] += _product(self._log_factor(t, m, m + 1), al[m][:, :, None], self.L[:, s],
                                    be[m + 1][:, None, :])
        return M

    def boundaries(self):
        """(B, n+1): P(a slot ends at position i)."""
        P = np.zeros((self.L.shape[0], self.n + 1))
        for t, (_, slots) in enumerate(self.parser.templates):
            if not self.post[:, t].any():
                continue
            al, be = self.alpha[t], self.beta[t]
            for m in range(1, len(slots)):
                P += _product(self._log_factor(t, m, m), al[m], be[m])
        return P

    def backtrace(self, b, t):
        k = len(self.bp[t])
        ends = np.zeros(k + 1, dtype=np.int64)
        ends[k] = j = self.n
        for m in range(k, 0, -1):
            j = int(self.bp[t][m - 1][b, j])
            ends[m - 1] = j
        return self.rows(b, t, ends)

    def rows(self, b, t, ends):
        r, slots = self.parser.templates[t]
        d = np.empty((len(slots) + 1, 3), dtype=np.int64)
        d[0] = (r, 0, self.n)
        for m, s in enumerate(slots):
            i, j = int(ends[m]), int(ends[m + 1])
            d[m + 1] = (self.parser.lex_table[self.kid[b, i, j], s], i, j)
        return d


def _normalised(row, off):
    """``(row / its largest entry per word, off + log of that entry)``; a row of
    zeros stays zero with offset -inf (the word has no derivation through it)."""
    mx = row.max(axis=1)
    with np.errstate(divide="ignore"):
        return row / np.where(mx > 0, mx, 1.0)[:, None], off + np.log(mx)


#: Above this log factor a posterior is formed in log space (as csrc/segment.pyx's LINEAR_MAX).
LINEAR_MAX = 600.0


def _product(lf, *factors):
    """exp(lf) (per word, shape (B,)) times the product of ``factors`` (each (B, ...)), in log space for the
    words whose lf is above LINEAR_MAX, where the linear product of the row-normalised values could underflow."""
    shape = np.broadcast_shapes(*(f.shape for f in factors))
    lin = lf <= LINEAR_MAX
    ex = lf.reshape((-1,) + (1,) * (len(shape) - 1))
    out = np.zeros(shape)
    prod = factors[0]
    for f in factors[1:]:
        prod = prod * f
    keep = lin.reshape(ex.shape) & np.isfinite(ex)
    out[lin] = (prod * np.exp(np.where(keep, ex, -np.inf)))[lin]
    if not lin.all():
        with np.errstate(divide="ignore"):
            logs = sum(np.log(np.broadcast_to(f, shape)) for f in factors)
        big = ~lin
        out[big] = np.exp(logs + ex)[big]
    return out
