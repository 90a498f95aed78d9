"""Planted morphology: words sampled from a known prefix / stem / suffix
inventory and template distribution, with their true segmentation, for
testing morphology grammars (:mod:`grind.grammars.morph`).

Everything is drawn from one ``numpy.random.Generator`` (or a seed), so the
same seed gives the same words."""
from __future__ import annotations

import contextlib

import numpy as np

from grind.errors import InputError

#: Default template distribution over roles (pre, stem, suf): P(template).
TEMPLATES = {("stem",): 0.2, ("pre", "stem"): 0.15, ("stem", "suf"): 0.4, ("pre", "stem", "suf"): 0.25}


def _rng(rng):
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def random_morphs(k, rng, alphabet="abcdefghijklmnoprstuvz", lengths=(1, 4), exclude=()):
    """``k`` distinct random strings over ``alphabet`` of ``lengths[0]..lengths[1]`` characters."""
    rng = _rng(rng)
    lo, hi = lengths
    out: list[str] = []
    seen = set(exclude)
    for _ in range(1000 * k):
        if len(out) == k:
            return out
        m = "".join(rng.choice(list(alphabet), size=int(rng.integers(lo, hi + 1))))
        if m not in seen:
            seen.add(m)
            out.append(m)
    raise InputError(f"cannot draw {k} distinct morphs of length {lo}..{hi} over {alphabet!r}")


def planted_inventory(rng, n_prefixes=5, n_stems=30, n_suffixes=8, alphabet="abcdefghijklmnoprstuvz"):
    """``(prefixes, stems, suffixes)``: random distinct morphs (prefixes and
    suffixes 1-2 characters, stems 3-5), all different from each other."""
    rng = _rng(rng)
    pre = random_morphs(n_prefixes, rng, alphabet, (1, 2))
    suf = random_morphs(n_suffixes, rng, alphabet, (1, 2), exclude=pre)
    stems = random_morphs(n_stems, rng, alphabet, (3, 5), exclude=pre + suf)
    return pre, stems, suf


def planted_words(n, rng, prefixes, stems, suffixes, templates=None, zipf=1.0):
    """``n`` words as ``[(word, [morph, ...]), ...]``: a template (a tuple of
    roles ``pre``/``stem``/``suf``) drawn from ``templates`` (role tuple ->
    probability; default :data:`TEMPLATES`), then each morph from its
    inventory with Zipfian probabilities (rank^-zipf; 0 = uniform).  Tokens,
    not types: a word may come out several times (dedupe for a type corpus)."""
    rng = _rng(rng)
    templates = dict(templates or TEMPLATES)
    inv = {"pre": list(prefixes), "stem": list(stems), "suf": list(suffixes)}
    for role, ms in inv.items():
        if not ms and any(role in t for t in templates):
            raise InputError(f"a template uses role {role!r} but its inventory is empty")
    bad = [r for t in templates for r in t if r not in inv]
    if bad:
        raise InputError(f"unknown role {bad[0]!r} (pre, stem or suf)")
    ts = list(templates)
    p = np.array([templates[t] for t in ts], dtype=float)
    p /= p.sum()

    def probs(k):
        q = np.arange(1, k + 1, dtype=float) ** -zipf
        return q / q.sum()

    role_p = {r: probs(len(ms)) for r, ms in inv.items() if ms}
    out = []
    for _ in range(n):
        t = ts[int(rng.choice(len(ts), p=p))]
        morphs = [inv[r][int(rng.choice(len(inv[r]), p=role_p[r]))] for r in t]
        out.append(("".join(morphs), morphs))
    return out


# --------------------------------------------------------------------------
# Planted DMV corpora: words with gold dependency trees


class PlantedDMV:
    """A DMV over ``n_types`` words whose parameters are tied through
    ``n_classes`` hidden word classes, for corpora with a known answer.

    Class level: root(c), stop(c, side, valence) and choose(d | c, side) over
    classes (side 0 = left, 1 = right; valence 0 = no dependent on that side
    yet), drawn from ``rng``.  Word level: each word belongs to one class and
    a class emits its words with probability proportional to their global
    Zipf weight rank^-zipf.  That is a DMV over words (choose(w' | w, side) =
    choose(class(w') | class(w), side) P(w' | class(w')), root likewise), so
    its trees are projective and have one root.  Words are assigned to
    classes (most frequent first, each to the class furthest below its share)
    so that each class's total Zipf weight matches its expected token share:
    the words' marginal frequencies are Zipfian.

    Sentence lengths are drawn first (a discretised log-normal, mean about
    ``mean_length``, at most ``max_length`` words: short utterances with a
    long tail, as in conversational speech), then a tree is drawn from the
    class-level DMV *conditioned on* that length (exactly, by a dynamic
    program over subtree sizes), then the words.  Everything comes from one
    ``numpy.random.Generator`` (or a seed).
    """

    def __init__(self, n_types=40_000, n_classes=12, rng=None, zipf=1.0, mean_length=7.5, sigma=0.85,
                 max_length=100, choose_conc=0.3):
        if n_types < n_classes or n_classes < 1:
            raise InputError(f"a planted DMV needs at least one class and at least as many words as classes "
                             f"(got {n_types} words, {n_classes} classes)")
        if not 1 <= mean_length <= max_length:
            raise InputError(f"mean length {mean_length} is not in 1..{max_length}")
        self.rng = rng = _rng(rng)
        K, L = n_classes, max_length
        self.n_types, self.n_classes, self.max_length, self.zipf = n_types, K, L, zipf
        # log-normal lengths: mean exp(mu + sigma^2 / 2) = mean_length
        self.sigma, self.mu = sigma, float(np.log(mean_length) - sigma * sigma / 2)
        self.root = rng.dirichlet(np.full(K, 1.0))
        # stop(c, side, v): valence 0 stops less often than valence 1 (heads take few dependents)
        self.stop = np.empty((K, 2, 2))
        self.stop[:, :, 0] = rng.beta(2.0, 2.0, size=(K, 2))
        self.stop[:, :, 1] = rng.beta(4.0, 1.5, size=(K, 2))
        self.choose = rng.dirichlet(np.full(K, choose_conc), size=(K, 2))     # [c, side, d]
        self._dp()
        self._cum: dict = {}
        self._u: list[float] = []
        self.word_class, self.word_prob = self._assign_words(rng)

    # -- the size dynamic program ---------------------------------------------

    def _dp(self):
        """Y[c, m] = P(the subtree of a class-c head has m words), m = 1..L;
        S[c, side, v, a] = P(side's dependents from valence v hold a words), a = 0..L-1."""
        K, L = self.n_classes, self.max_length
        Y = np.zeros((K, L + 1))
        S = np.zeros((K, 2, 2, L))
        S[:, :, :, 0] = self.stop
        ns = 1.0 - self.stop
        for a in range(L):
            if a:
                # G[c, side, a'] = sum_d choose(d | c, side) Y[d, a'] for a' = 1..a
                G = np.einsum("csd,dk->csk", self.choose, Y[:, 1:a + 1])
                for v in (0, 1):
                    # sum_k G[c, s, k] S[c, s, 1, a - k], k = 1..a
                    S[:, :, v, a] = ns[:, :, v] * np.einsum("csk,csk->cs", G, S[:, :, 1, a - 1::-1][:, :, :a])
            m = a + 1
            Y[:, m] = np.einsum("ca,ca->c", S[:, 0, 0, :m], S[:, 1, 0, m - 1::-1])
        if not (Y[:, 1:] > 0).all():
            raise InputError("planted DMV: a subtree size has probability 0 (underflow); lower --max-length")
        self.Y, self.S = Y, S

    def _assign_words(self, rng):
        """``(word_class, word_prob)``: each word's class and P(word | its class)."""
        z = np.arange(1, self.n_types + 1, dtype=np.float64) ** -self.zipf
        z /= z.sum()
        share = self._class_shares(rng)
        mass = np.zeros(self.n_classes)
        cls = np.empty(self.n_types, dtype=np.int64)
        for w in range(self.n_types):              # most frequent first, to the class most below its share
            c = int(np.argmax(share - mass))
            cls[w] = c
            mass[c] += z[w]
        return cls, z / mass[cls]

    def _class_shares(self, rng, n=4000):
        """Each class's share of the tokens, estimated on ``n`` class-level sentences."""
        counts = np.zeros(self.n_classes)
        for length in self.lengths(n, rng):
            for c, _ in self._tree(int(length), rng):
                counts[c] += 1
        counts += 1.0
        return counts / counts.sum()

    # -- sampling ---------------------------------------------------------------

    def lengths(self, n, rng=None):
        """``n`` sentence lengths: round(exp(N(mu, sigma))), redrawn outside 1..max_length."""
        rng = _rng(rng if rng is not None else self.rng)
        out = np.zeros(0, dtype=np.int64)
        while len(out) < n:
            x = np.rint(np.exp(rng.normal(self.mu, self.sigma, size=n - len(out) + 16))).astype(np.int64)
            out = np.concatenate([out, x[(x >= 1) & (x <= self.max_length)]])
        return out[:n]

    def _uniform(self, rng):
        if not self._u:
            self._u = rng.random(1 << 14).tolist()
            self._u.reverse()
        return self._u.pop()

    def _draw(self, key, weights, rng):
        """An index drawn in proportion to ``weights()`` (cumulative sums cached under ``key``)."""
        import bisect
        cum = self._cum.get(key)
        if cum is None:
            w = weights()
            cum = np.cumsum(w / w.sum()).tolist()
            self._cum[key] = cum
        return min(bisect.bisect_right(cum, self._uniform(rng)), len(cum) - 1)

    def _side(self, c, s, a, rng):
        """The dependents on side s of a class-c head whose dependents there
        hold a words: ``[(class, subtree size), ...]``, closest first."""
        deps, v = [], 0
        while a:
            def w(c=c, s=s, a=a):
                k = np.arange(1, a + 1)
                return (self.choose[c, s][:, None] * self.Y[:, 1:a + 1] * self.S[c, s, 1, a - k][None, :]).ravel()
            d, k = divmod(self._draw(("side", c, s, v, a), w, rng), a)
            deps.append((d, k + 1))
            a -= k + 1
            v = 1
        return deps

    def _tree(self, n, rng):
        """A class-level tree of exactly n words: ``[(class, head), ...]`` in
        word order, head 1-based (0 = root)."""
        S = self.S
        classes: list[int] = []
        heads: list[int] = []

        def grow(c, m):
            a = self._draw(("split", c, m), lambda: S[c, 0, 0, :m] * S[c, 1, 0, m - 1::-1], rng)
            left, right = self._side(c, 0, a, rng), self._side(c, 1, m - 1 - a, rng)
            kids = [grow(d, k) for d, k in reversed(left)]
            me = len(classes)
            classes.append(c)
            heads.append(0)
            kids += [grow(d, k) for d, k in right]
            for kid in kids:
                heads[kid] = me + 1
            return me

        grow(self._draw(("root", n), lambda: self.root * self.Y[:, n], rng), n)
        return list(zip(classes, heads))

    def sentences(self, n, rng=None, chunk=4096):
        """``n`` sentences as ``(words, heads, classes)`` (word ids, 1-based
        heads with 0 = root, class ids; int64 arrays), generated a chunk at a time."""
        rng = _rng(rng if rng is not None else self.rng)
        self._u = []                     # uniforms come from this rng only
        cum = {}
        for c in range(self.n_classes):
            ws = np.flatnonzero(self.word_class == c)
            cum[c] = (ws, np.cumsum(self.word_prob[ws]))
        done = 0
        while done < n:
            lens = self.lengths(min(chunk, n - done), rng)
            trees = [self._tree(int(m), rng) for m in lens]
            cls = np.array([c for t in trees for c, _ in t], dtype=np.int64)
            words = np.empty(len(cls), dtype=np.int64)
            for c, (ws, cs) in cum.items():
                at = np.flatnonzero(cls == c)
                words[at] = ws[np.minimum(np.searchsorted(cs, rng.random(len(at)) * cs[-1], side="right"),
                                          len(ws) - 1)]
            off = 0
            for t in trees:
                m = len(t)
                yield words[off:off + m], np.array([h for _, h in t], dtype=np.int64), cls[off:off + m]
                off += m
            done += len(lens)

    def word(self, w: int) -> str:
        """The spelling of word id w (its Zipf rank, 0 = most frequent)."""
        return f"w{w}"


def write_planted_corpus(path, n_sentences, n_types=40_000, seed=1, text_path=None, **kw):
    """Write a :class:`PlantedDMV` corpus of ``n_sentences`` to ``path`` as
    CoNLL-U (FORM = word, XPOS = its class ``C<k>``, HEAD = the planted tree,
    DEPREL root/dep), streamed (nothing but a chunk is held in memory); with
    ``text_path`` also the words one sentence a line.  Deterministic given
    ``seed``.  Returns the :class:`PlantedDMV`."""
    from grind.formats.textio import header_lines, open_out
    rng = np.random.default_rng(seed)
    model = PlantedDMV(n_types, rng=rng, **kw)
    info = dict(corpus=f"planted DMV, {n_sentences} sentences, {n_types} word types, {model.n_classes} classes, "
                       f"seed {seed}", columns="FORM = word, XPOS = planted class, HEAD = planted tree")
    with contextlib.ExitStack() as stack:
        f = stack.enter_context(open_out(path))
        t = stack.enter_context(open_out(text_path)) if text_path else None
        f.writelines(header_lines(**info))
        if t is not None:
            t.writelines(header_lines(**info))
        for words, heads, cls in model.sentences(n_sentences, rng):
            names = [model.word(w) for w in words.tolist()]
            f.write("".join(f"{i}\t{w}\t_\t_\tC{c}\t_\t{h}\t{'root' if h == 0 else 'dep'}\t_\t_\n"
                            for i, (w, h, c) in enumerate(zip(names, heads.tolist(), cls.tolist()), 1)) + "\n")
            if t is not None:
                t.write(" ".join(names) + "\n")
    return model


def sample_tree(grammar, rng, symbol=None, max_nodes=10_000):
    """A tree drawn top-down from ``grammar`` (a :class:`~grind.grammars.grammar.Grammar` of rule
    probabilities): from ``symbol`` (default: the start symbol) each nonterminal rewrites by a rule of its
    left-hand side chosen with the rule's probability.  Returns ``(label, child, ...)``, a word (terminal)
    as a string.  An InputError when the tree passes ``max_nodes`` nodes (a grammar whose derivations do not
    end)."""
    rng = _rng(rng)
    by_lhs: dict[str, tuple[list, np.ndarray]] = {}
    for r, (lhs, rhs) in enumerate(grammar.rules):
        by_lhs.setdefault(lhs, ([], []))[0].append(rhs)
        by_lhs[lhs][1].append(grammar.weights[r])
    cum = {a: (rhss, np.cumsum(np.asarray(w, dtype=float) / np.sum(w))) for a, (rhss, w) in by_lhs.items()}
    nodes = 0

    def grow(a):
        nonlocal nodes
        nodes += 1
        if nodes > max_nodes:
            raise InputError(f"a tree drawn from the grammar passed {max_nodes} nodes: do its derivations end?")
        rhss, c = cum[a]
        rhs = rhss[min(int(np.searchsorted(c, rng.random(), side="right")), len(rhss) - 1)]
        return (a,) + tuple(grow(s) if s in cum else s for s in rhs)

    return grow(symbol or grammar.start)


def unsplit(tree, mark="@"):
    """``tree`` with every label cut at ``mark`` (``NP@obj`` -> ``NP``): a planted tree as a treebank shows it,
    its subtypes hidden."""
    if isinstance(tree, str):
        return tree
    return (tree[0].split(mark, 1)[0],) + tuple(unsplit(c, mark) for c in tree[1:])


def planted_treebank(grammar, n, rng, mark="@"):
    """``n`` trees drawn from ``grammar`` (:func:`sample_tree`), their labels cut at ``mark``
    (:func:`unsplit`), as PTB bracketed lines: a treebank whose hidden subtypes are known."""
    from grind.formats.trees import format_tree
    rng = _rng(rng)
    return [format_tree(unsplit(sample_tree(grammar, rng), mark)) for _ in range(n)]
