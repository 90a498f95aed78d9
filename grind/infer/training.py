"""What every training run shares: the Dirichlet prior, the sharded E-step,
the minibatches, the trace, held-out evaluation, checkpoints.

An algorithm (:class:`grind.infer.base.Algorithm`) is a class with explicit
state (numpy arrays and scalars) and an ``update()`` (``update(batch)``) that
does one iteration / sweep / minibatch and returns a :class:`Step`.  The
driver :func:`train` does everything else: it runs the algorithm's
``step()`` template (which stops the run by the shared rule and hands
minibatch algorithms their next :class:`Minibatches` batch), the trace,
held-out evaluation and early stopping, checkpoints and resume, so a resumed
run (state + random generator restored from a checkpoint) ends bit-identical
to an uninterrupted one.
"""
from __future__ import annotations

import collections
import hashlib
import io
import itertools
import json
import os
import time
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from grind import log
from grind.errors import check_terminated, InputError, NumericalError
from grind.formats.corpus import iter_corpus
from grind.grammars.grammar import read_grammar, rule_key
from grind.formats.textio import header_lines, is_special, open_out

#: E-step shard size: counts are summed shard by shard in corpus order, so the
#: result is the same whatever the number of worker threads.
SHARD = 256
SPARSE_RULES = 1 << 16      # grammars this large reduce the E-step's shards sparsely


@dataclass
class Step:
    """One line of the trace."""

    step: int
    objective: float
    sentences: int            # sentences parsed so far (cumulative)
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def alpha_per_lhs(alpha) -> tuple[float, list[tuple[str, float]]] | None:
    """``'1e-20,Stem=1e-15'`` -> ``(1e-20, [('Stem', 1e-15)])``: a value for
    every rule, then values for the rules of named left-hand sides (later
    names win); None when ``alpha`` is not of that form."""
    base, *rest = str(alpha).split(",")
    if not rest:
        return None
    try:
        pairs = [(lhs, float(v)) for lhs, v in (p.rsplit("=", 1) for p in rest)]
        return float(base), pairs
    except ValueError:
        return None


def prior_vector(grammar, alpha: str | float) -> np.ndarray:
    """Per-rule Dirichlet hyperparameters: a number (symmetric); a number and
    per-LHS numbers, ``1e-20,Stem=1e-15`` (every Stem rule 1e-15, every other
    rule 1e-20: :func:`alpha_per_lhs`); or a grammar file whose weights (or
    pseudo-count column) are the pseudo-counts."""
    per_lhs = None if os.path.exists(str(alpha)) else alpha_per_lhs(alpha)
    if per_lhs is not None:
        a = np.full(len(grammar), per_lhs[0])
        ids = {x: i for i, x in enumerate(grammar.nonterminals)}
        for lhs, v in per_lhs[1]:
            if lhs not in ids:
                raise InputError(f"--alpha {alpha}: no rule has the left-hand side {lhs!r}")
            a[grammar.lhs == ids[lhs]] = v
    else:
        try:
            a = float(alpha)
        except (TypeError, ValueError):
            if isinstance(alpha, bool) or not isinstance(alpha, (str, os.PathLike)):
                raise InputError(f"alpha {alpha!r}: a number, 'NUMBER,LHS=NUMBER,...' or the path of a file of "
                                 "per-rule pseudo-counts") from None
            if not os.path.exists(str(alpha)):
                raise InputError(f"--alpha {alpha}: neither a number, nor NUMBER,LHS=NUMBER,..., nor an existing "
                                 "file of pseudo-counts") from None
            a = _prior_file(grammar, os.fspath(alpha))
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), (len(grammar),)).copy()
    bad = np.flatnonzero(~(np.isfinite(a) & (a > 0)))
    if len(bad):
        where = (f"--alpha {alpha}: rule {grammar.keys()[int(bad[0])]} has {float(a[bad[0]])!r}"
                 + (f" ({len(bad) - 1} more rules too)" if len(bad) > 1 else ""))
        raise InputError(f"{where}: Dirichlet hyperparameters must be finite and positive")
    over = np.flatnonzero(np.isinf(grammar.lhs_sums(a)))
    if len(over):
        raise InputError(f"--alpha {alpha}: the pseudo-counts of the rules of {grammar.nonterminals[int(over[0])]!r} "
                         f"sum to more than the largest float ({np.finfo(np.float64).max:.4g}): give smaller values")
    return a


def _prior_file(grammar, path: str) -> np.ndarray:
    """Pseudo-counts of ``grammar``'s rules from a grammar file (matched by rule key)."""
    pg = read_grammar(path)
    vals = pg.pseudocounts if pg.pseudocounts is not None else pg.weights
    out = np.full(len(grammar), np.nan)
    for k, v in zip(pg.keys(), vals):
        if k in grammar.index:
            out[grammar.index[k]] = v
    missing = np.flatnonzero(np.isnan(out))
    if missing.size:
        raise InputError(f"{path}: no pseudo-count for rule {rule_key(*grammar.rules[missing[0]])}")
    return out


class ShardedEstep:
    """``parser.inside_outside`` over fixed shards, summed in shard order.

    ``jobs`` threads run shards at once (the kernels release the GIL); the sum
    order does not depend on ``jobs``, so neither does the result.
    """

    def __init__(self, parser, jobs: int = 1, shard: int = SHARD, on_first=None):
        self.parser, self.jobs, self.shard = parser, max(1, jobs), shard
        #: Called once with the log Z of the first E-step over the whole corpus (to name its failures).
        self.on_first = on_first

    def __call__(self, weights, idx=None):
        shards = self.shards(idx)
        one = self.shard_counts
        if self.jobs == 1 or len(shards) == 1:
            out = self.reduce(one(weights, s) for s in shards)
        else:
            with ThreadPoolExecutor(self.jobs) as ex:
                out = self.reduce(_in_order(ex, lambda s: one(weights, s), shards, 2 * self.jobs))
        if self.on_first is not None and idx is None:
            hook, self.on_first = self.on_first, None
            hook(out[1])
        return out

    def shard_counts(self, weights, idx) -> tuple:
        return shard_counts(self.parser, weights, idx)

    #: The shards run in other processes (:class:`grind.infer.dask_backend.DaskEstep`).
    remote = False

    def map_shards(self, fn, payload, idx=None, size=None) -> list:
        """``fn(parser, shard, payload)`` for every shard (of ``size`` sentences, default
        ``shard``), in shard order (an algorithm's own E-step work a shard, e.g. logistic-normal
        model I's; remote on a cluster)."""
        return [fn(self.parser, s, payload) for s in self.shards(idx, size)]

    def shards(self, idx=None, size=None) -> list:
        """The sentence indices ``idx`` (all if None) cut into shards of ``size`` (default
        ``shard``), in corpus order."""
        idx = self.parser._idx(idx)
        size = size or self.shard
        return [idx[i:i + size] for i in range(0, len(idx), size)] or [idx]

    def reduce(self, parts) -> tuple:
        """``(counts, logz)`` of the shards' ``(counts, logz)`` in shard order (so
        the sum does not depend on who computed which shard, or when).
        ``parts`` may be an iterator: each shard's count vector is added as it
        comes and dropped, so a pass holds two vectors over the rules, not one
        a shard."""
        counts = np.zeros(len(self.parser.grammar))
        logzs = []
        for part in parts:
            if len(part) == 3:          # (rules, values, logz): the shard's other counts are 0
                counts[part[0]] += part[1]
            else:
                counts += part[0]
            logzs.append(part[-1])
            del part                    # (not alive while the next shard is computed)
        logz = np.concatenate(logzs)
        if np.isnan(logz).any() or not np.all(np.isfinite(counts)):
            raise NumericalError("the E-step produced NaN: the weights are invalid")
        return counts, logz


def shard_counts(parser, weights, idx) -> tuple:
    """One shard's ``(counts, logz)``, or ``(rules, values, logz)`` when the
    grammar has at least SPARSE_RULES rules and the kernel lists the few rules
    a shard touches (a dense vector a shard is a pass over all the rules: 2,600
    passes an E-step at Fisher size); :meth:`ShardedEstep.reduce` takes either,
    with the same sums."""
    if getattr(parser, "sparse_counts_pay", False) and len(parser.grammar) >= SPARSE_RULES:
        return parser.inside_outside_sparse(weights, idx)
    return parser.inside_outside(weights, idx)


def _in_order(ex, fn, items, window: int):
    """``fn(item)`` for each of ``items`` run on the executor ``ex``, yielded
    in the order of ``items``, at most ``window`` submitted and not yet yielded."""
    pending: collections.deque = collections.deque()
    it = iter(items)
    for item in itertools.islice(it, window):
        pending.append(ex.submit(fn, item))
    while pending:
        result = pending.popleft().result()
        for item in itertools.islice(it, 1):
            pending.append(ex.submit(fn, item))
        yield result


# ----------------------------------------------------------------------------- minibatches

class Minibatches:
    """The minibatches of a minibatch algorithm, one per step.

    :meth:`grind.infer.base.Algorithm.step` draws ``next()`` and hands it to
    the algorithm's ``update(batch)``; ``next()`` is None at the end (the
    run is then finished).  The position is part of the algorithm's state
    (:meth:`get_state` / :meth:`set_state`, merged into the algorithm's), so
    a resumed run draws the same minibatches as an uninterrupted one.
    """

    def next(self):  # pragma: no cover - the contract
        raise NotImplementedError

    def exhausted(self) -> bool:
        """Known to be at the end before drawing (a stream only knows when read)."""
        return False

    def get_state(self) -> dict:  # pragma: no cover
        raise NotImplementedError

    def set_state(self, s: dict) -> None:  # pragma: no cover
        raise NotImplementedError


class StreamBatches(Minibatches):
    """A corpus file read as a stream (:func:`grind.formats.corpus.iter_corpus`
    with ``spec``), ``first`` sentences first, then ``size`` at a time (the
    last minibatch may be shorter), never the whole file at once.

    One sentence is read ahead, so the step that draws the last minibatch
    knows it is the last (:meth:`exhausted`; the trace's ``stopped`` cell).

    State: ``consumed``, the sentences handed out so far, and ``read_fp``, their
    fingerprint (:class:`SentenceFingerprint`); a restored source reopens the
    file, skips that many at its first draw and refuses a file whose skipped
    sentences have another fingerprint (the checkpoint was trained on others).
    With :meth:`check_against` (the fingerprint of a first pass over the
    file), the end of the stream refuses a pass that read other sentences (the
    file was replaced or changed between the passes).
    """

    def __init__(self, path, spec, size: int, first: int | None = None):
        self.path, self.spec = path, spec
        self.size, self.first = size, first or size
        self.consumed = 0
        self.read_fp = ""                 # the fingerprint of the sentences handed out ("": not recorded)
        self.expect: str | None = None    # the first pass's fingerprint of the whole file (check_against)
        self._fp = SentenceFingerprint()
        self._stream = None
        self._ahead: list = []
        self._end = False
        #: What the reader counted (sentences outside the length limits, ...), complete at the stream's end.
        self.stats: dict = {}

    def check_against(self, fingerprint: str) -> None:
        """At the stream's end, refuse a pass whose sentences' fingerprint is not ``fingerprint``
        (:meth:`SentenceFingerprint.text` of an earlier pass over the file: the header's and checkpoints')."""
        self.expect = fingerprint

    def read(self):
        """The stream's counts as :class:`grind.formats.corpus.Corpus` has them (``left_out``, ``wordless``,
        ...), once it has been read to its end; else None."""
        import types
        return types.SimpleNamespace(**self.stats) if "left_out" in self.stats else None

    def next(self):
        """The next minibatch (a list of :class:`grind.formats.corpus.Sentence`), None at the end."""
        if self._stream is None:
            self.stats = {}
            self._stream = iter_corpus(self.path, self.spec, self.stats)
            self._fp = SentenceFingerprint()
            for s in itertools.islice(self._stream, self.consumed):
                self._fp.add(s.tokens)
            if self.read_fp and self._fp.text() != self.read_fp:
                raise InputError(f"{self.path}: not the corpus the checkpoint was trained on: the {self.consumed} "
                                 f"sentences read before it were {self.read_fp}, the file's first ones are "
                                 f"{self._fp.text()} (changed or replaced since?): start a new run")
            self._ahead = []
        want = self.first if self.consumed == 0 else self.size
        sents = self._ahead + list(itertools.islice(self._stream, want - len(self._ahead)))
        self._ahead = list(itertools.islice(self._stream, 1))
        self._end = not self._ahead
        self.consumed += len(sents)
        for s in sents:
            self._fp.add(s.tokens)
        self.read_fp = self._fp.text()
        if self._end and self.expect is not None and self.read_fp != self.expect:
            raise InputError(f"{self.path}: the corpus changed while grind read it: the first pass (the fingerprint "
                             f"the header and checkpoints record) read {self.expect}, the training pass "
                             f"{self.read_fp}: nothing written (train again on a file that stays unchanged)")
        return sents or None

    def exhausted(self) -> bool:
        return self._end

    def get_state(self):
        return {"consumed": self.consumed, "read_fp": self.read_fp}

    def set_state(self, s):
        self.consumed = int(s["consumed"])
        self.read_fp = str(s.get("read_fp", ""))    # (a checkpoint of an older grind: not recorded)
        self._stream, self._ahead, self._end = None, [], False


class ShuffledBatches(Minibatches):
    """``epochs`` passes over the sentence indices ``pool``, each in a new
    order ``rng.permutation(pool)`` drawn at the epoch's start, cut into
    minibatches of ``size`` (the epoch's last may be shorter), each sorted.

    State: ``epoch`` (passes completed), ``pos`` (indices of this pass drawn)
    and ``order`` (this pass's permutation, of ``pool``'s dtype: int32 holds
    4 bytes a sentence); the generator is the run's.  The permutation does
    not depend on the dtype (numpy shuffles the buffer by position).
    """

    def __init__(self, pool, size: int, epochs: int, rng):
        self.pool, self.size, self.epochs, self.rng = pool, size, epochs, rng
        self.epoch, self.pos = 0, 0
        self.order = np.zeros(0, dtype=np.int64)

    def exhausted(self) -> bool:
        return self.epoch >= self.epochs

    def next(self):
        """The next minibatch (sorted sentence indices), None after the last epoch."""
        if self.exhausted():
            return None
        if self.pos == 0:
            self.order = self.rng.permutation(self.pool)
        b = np.sort(self.order[self.pos:self.pos + self.size])
        self.pos += len(b)
        if self.pos >= len(self.order):
            self.epoch, self.pos = self.epoch + 1, 0
        return b

    @property
    def batch_epoch(self) -> int:
        """The epoch (from 1) of the minibatch drawn last."""
        return self.epoch if self.pos == 0 else self.epoch + 1

    def get_state(self):
        return {"epoch": self.epoch, "pos": self.pos, "order": self.order}

    def set_state(self, s):
        self.epoch, self.pos = int(s["epoch"]), int(s["pos"])
        self.order = np.array(s["order"], dtype=getattr(self.pool, "dtype", np.int64))


class EvalPoints:
    """Held-out evaluation at numbers of sentences parsed (a trace's ``sentences`` column):
    a step is evaluated when it reaches or passes a point its predecessor had not reached.

    ``EvalPoints.parse("log:N")``: N points a decade, round(10^(j/N)) for j = 0, 1, ...
    (``log:4``: 1, 2, 3, 6, 10, 18, 32, 56, 100, ...); ``"1000,5000,20000"``: those;
    ``"log:4,10010"``: both.  Stateless (the previous step's count decides), so a resumed
    run evaluates where an uninterrupted one does."""

    def __init__(self, per_decade: int | None = None, points=()):
        self.per_decade, self.points = per_decade, sorted(set(int(p) for p in points))

    @classmethod
    def parse(cls, text: str) -> EvalPoints:
        """Comma-separated items, each ``log:N`` or a positive whole number; ValueError saying what is wrong."""
        per_decade, pts = None, []
        for item in str(text).split(","):
            t = item.strip()
            if t.startswith("log:"):
                try:
                    per_decade = int(t[4:])
                except ValueError:
                    per_decade = 0
                if per_decade < 1:
                    raise ValueError(f"{text!r}: log:N needs a whole number N >= 1 of points a decade")
                continue
            try:
                pts.append(int(t))
            except ValueError:
                raise ValueError(f"{text!r}: {t!r} is neither log:N nor a number of sentences") from None
            if pts[-1] < 1:
                raise ValueError(f"{text!r}: numbers of sentences must be >= 1")
        return cls(per_decade, pts)

    def between(self, lo: int, hi: int) -> list[int]:
        """The points p with lo < p <= hi, in order."""
        out = {p for p in self.points if lo < p <= hi}
        j = 0
        while self.per_decade is not None:
            p = int(round(10 ** (j / self.per_decade)))
            if p > hi:
                break
            if p > lo:
                out.add(p)
            j += 1
        return sorted(out)

    def due(self, before: int, now: int) -> bool:
        """A step from ``before`` to ``now`` sentences passes a point."""
        return bool(self.between(before, now))


def heldout(parser, theta, sents=None) -> dict:
    """Predictive log probability of held-out sentences under theta (the
    posterior mean for Bayesian runs), per-word perplexity, and directed
    accuracy of Viterbi trees when the sentences carry gold heads."""
    _, logz = parser.inside_outside(theta)
    ok = np.isfinite(logz)
    if not ok.any():
        raise NumericalError(f"none of the {len(ok)} held-out (--dev) sentences has a parse under the current "
                             "grammar: the held-out log probability is undefined (grind loglik names why)")
    words = sum(len(s) for s, k in zip(parser.sentences, ok) if k)
    out = {"dev_logprob": float(logz[ok].sum()), "dev_parsed": int(ok.sum()),
           "dev_perplexity": float(np.exp(-logz[ok].sum() / words)) if words else float("nan")}
    if sents is not None and all(s.heads is not None for s in sents) and hasattr(parser, "viterbi_heads"):
        heads, _ = parser.viterbi_heads(theta)
        right = sum(int(np.sum(np.asarray(h) == g.heads)) for h, g in zip(heads, sents) if h is not None)
        out["dev_directed"] = right / max(1, sum(len(s) for s in sents))
    return out


# ----------------------------------------------------------------------------- checkpoints

#: Prefix of the arrays of the held-out best state (--early-stop) in a checkpoint.
BEST_PREFIX = "best:"


def save_checkpoint(path, algo, rng, trace, meta, best=None):
    """State arrays, scalars, the generator's state and the trace in one .npz,
    written to a temporary file and renamed: an interrupted run keeps the last
    complete checkpoint.

    ``best`` is ``(dev log probability, state)`` of an --early-stop run at its
    best held-out evaluation so far (see :func:`train`), or None: the state's arrays
    go in as ``best:KEY``, the score and the scalars in the header's ``best``
    (absent without one, as in checkpoints of older grinds).
    """
    arrays, scalars = {}, {}
    for k, v in algo.get_state().items():
        (arrays if isinstance(v, np.ndarray) else scalars)[k] = v
    head = {"meta": meta, "scalars": scalars, "rng": rng.bit_generator.state,
            "trace": [[s.step, s.objective, s.sentences, s.seconds, s.extra] for s in trace],
            "made_by": [ln.rstrip("\n") for ln in header_lines()]}     # the grind version, command, seed
    if best is not None:
        best_scalars = {}
        for k, v in best[1].items():
            if isinstance(v, np.ndarray):
                arrays[BEST_PREFIX + k] = v
            else:
                best_scalars[k] = v
        head["best"] = {"dev_logprob": best[0], "scalars": best_scalars}
    header = json.dumps(head, default=_jsonable)
    with open_out(path, binary=True) as f:  # atomic; a symlink is written through
        if is_special(path):             # a device or FIFO: zipfile cannot seek in it
            buf = io.BytesIO()
            np.savez(buf, __header__=np.array(header), **arrays)
            f.write(buf.getvalue())
        else:
            np.savez(f, __header__=np.array(header), **arrays)


#: ``train`` options that may differ on --resume: when to stop (--iterations,
#: --tolerance, --epochs), how to run (--jobs, --cluster: results do not depend on them)
#: and what else to write (-o, --trace, --checkpoint, --checkpoint-every,
#: --ln-params, --joint-output), and held-out evaluation (--dev, --eval-every)
#: unless --early-stop makes it decide the result; --config (its options are recorded by their own names).
#: Everything else is recorded.
RESUMABLE_OPTIONS = frozenset({"iterations", "tolerance", "epochs", "jobs", "cluster", "output", "trace_path", "ckpt",
                               "checkpoint_every", "resume", "ln_params", "joint_output", "dev_path",
                               "eval_every", "eval_at", "patience", "config"})

#: Version of the checkpoint's ``meta`` with every result-changing option.
META_VERSION = 2

#: What a damaged checkpoint raises while being read.
_CORRUPT = (zipfile.BadZipFile, KeyError, ValueError, EOFError, TypeError, IndexError, AttributeError,
            zlib.error)


def fingerprint_array(a) -> str:
    """16 hex digits of the SHA-256 of an array's float64 bytes, hashed from its
    memory (no copy as bytes: 8 bytes an element at a grammar's size)."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(a, dtype=np.float64)).cast("B")).hexdigest()[:16]


def fingerprint_file(path) -> str:
    """``sha256:`` and 16 hex digits of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256:" + h.hexdigest()[:16]


def fingerprint_sentences(token_lists) -> str:
    """``sha256:`` and 16 hex digits over the sentences' tokens (any iterable; read once)."""
    fp = SentenceFingerprint()
    for toks in token_lists:
        fp.add(toks)
    return fp.text()


class SentenceFingerprint:
    """:func:`fingerprint_sentences` a sentence at a time: :meth:`add` each, then :meth:`text`."""

    def __init__(self):
        self.h, self.n = hashlib.sha256(), 0

    def add(self, toks) -> None:
        self.h.update("\t".join(toks).encode("utf-8"))
        self.h.update(b"\n")
        self.n += 1

    def text(self) -> str:
        return f"{self.n} sentences, sha256:{self.h.hexdigest()[:16]}"


def _grammar_fingerprint(g) -> str:
    if hasattr(g, "fingerprint"):
        return g.fingerprint()
    return hashlib.sha256("".join(k + "\n" for k in g.keys()).encode("utf-8")).hexdigest()[:16]


def run_meta(params: dict, flags: dict, *, grammar, theta0, prior, corpus_fp: str, algo: str, spec_text: str):
    """The checkpoint ``meta`` of a ``grind train`` run: every option that can
    change the result, by its command-line name, files by content.

    ``params`` are the command's parameters (click's ``ctx.params``), ``flags``
    maps parameter names to option names; options in :data:`RESUMABLE_OPTIONS`
    are left out (with --early-stop, --dev, --eval-every, --eval-at and --patience are kept).  The
    grammar is recorded by its rule set, start symbol and initial weights, the
    corpus by its sentences, --alpha by its value or (a file) the per-rule
    pseudo-counts it gives; other options naming an existing file by content.
    """
    early = bool(params.get("early_stop"))
    opts = {}
    for name, value in params.items():
        if name in ("grammar", "corpus", "alpha", "start") or (name in RESUMABLE_OPTIONS and not (
                early and name in ("dev_path", "eval_every", "eval_at", "patience"))):
            continue
        if isinstance(value, (list, tuple)):
            value = [_file_or_value(v) for v in value]
        else:
            value = _file_or_value(value)
        opts[flags.get(name, name)] = value
    try:
        alpha = repr(float(params["alpha"]))
    except (TypeError, ValueError):
        what = "per-LHS values" if alpha_per_lhs(params["alpha"]) else "a file of pseudo-counts"
        alpha = f"{what} {fingerprint_array(prior)}"
    opts["--alpha"] = alpha
    if algo in ("gibbs", "hastings") and float(params.get("temp_start") or 1.0) > 1.0:
        # the annealing schedule spans --anneal-sweeps, else --iterations
        opts["annealing sweeps"] = params.get("anneal_sweeps") or params.get("iterations")
    opts["grammar rules"] = f"{len(grammar)} rules, {_grammar_fingerprint(grammar)}"
    opts["start symbol"] = grammar.start
    opts["initial weights"] = fingerprint_array(theta0)
    opts["corpus"] = corpus_fp
    meta = {"version": META_VERSION, "algorithm": algo, "rules": len(grammar),
            "corpus": f"{params.get('corpus')} {spec_text}", "options": opts}
    return json.loads(json.dumps(meta, default=_jsonable))      # as it comes back from a checkpoint


def _file_or_value(v):
    if isinstance(v, str) and v not in ("", "-") and os.path.isfile(v):
        return f"a file, {fingerprint_file(v)}"
    return v


def _read_checkpoint(path, arrays=True):
    """``(header, arrays)`` of a checkpoint, or InputError."""
    try:
        z = np.load(path, allow_pickle=False)
    except OSError as e:
        raise InputError(f"{path}: cannot read checkpoint: {e.strerror or e}") from None
    except _CORRUPT as e:
        why = "not an .npz archive" if "pickle" in str(e) else str(e)   # not numpy's advice to unpickle it
        raise InputError(f"{path}: not a grind checkpoint (truncated or corrupt): {why}") from None
    try:
        if not hasattr(z, "files"):
            raise ValueError("a .npy array, not an .npz archive")
        with z:
            header = json.loads(str(z["__header__"]))
            for k in ("meta", "scalars", "rng", "trace"):
                header[k]
            data = {k: z[k] for k in z.files if k != "__header__"} if arrays else {}
    except (*_CORRUPT, OSError) as e:
        raise InputError(f"{path}: not a grind checkpoint (truncated or corrupt): {type(e).__name__}: {e}") from None
    return header, data


def is_checkpoint(path) -> bool:
    """``path`` is a readable grind checkpoint (a run's saved state, which a fresh run must not overwrite)."""
    if not os.path.isfile(path):
        return False
    try:
        _read_checkpoint(path, arrays=False)
        return True
    except InputError:
        return False


def check_checkpoint(path, meta, saved=None):
    """InputError unless the checkpoint at ``path`` was made with ``meta``'s options.

    See :func:`load_checkpoint`; ``saved`` is the checkpoint's meta when already read.
    """
    if saved is None:
        saved = _read_checkpoint(path, arrays=False)[0]["meta"]
    if not isinstance(saved, dict):
        raise InputError(f"{path}: not a grind checkpoint (truncated or corrupt): no meta")
    mine, theirs = meta.get("options"), saved.get("options")
    if saved.get("algorithm") != meta.get("algorithm"):
        _differs(path, "--algo", saved.get("algorithm"), meta.get("algorithm"))
    if mine is not None and theirs is not None:
        for k in list(mine) + [k for k in theirs if k not in mine]:
            if mine.get(k, "(not recorded)") != theirs.get(k, "(not recorded)"):
                _differs(path, k, theirs.get(k, "(not recorded)"), mine.get(k, "(not recorded)"))
        return
    if mine is not None:
        log.warn(f"{path}: a checkpoint of an older grind: only the algorithm, rule count and corpus "
                 "can be checked, not --alpha, --seed or the other options; make sure they are the same")
    for k in ("rules", "corpus"):
        if saved.get(k) != meta.get(k):
            _differs(path, k, saved.get(k), meta.get(k))


#: What a recorded value that is not an option's means, for the refusal message.
_RECORDED = {"annealing sweeps": "annealing sweeps (--anneal-sweeps, else --iterations: to run longer than the "
                                 "annealing, resume with --anneal-sweeps set to the checkpoint's value)"}


def _differs(path, what, theirs, mine):
    def shown(v):
        return "the default" if v is None else repr(v)
    raise InputError(f"{path}: cannot resume: {_RECORDED.get(what, what)} was {shown(theirs)} for the checkpoint, "
                     f"this run has {shown(mine)} (start a new run, or resume with the checkpoint's value)")


def load_checkpoint(path, algo, rng, meta, with_best=False):
    """Restore ``algo``'s state, the generator and the trace from ``path``;
    returns the trace, or with ``with_best`` ``(trace, best)``: ``best`` is
    the ``(dev log probability, state)`` of an --early-stop run's best
    held-out evaluation as :func:`save_checkpoint` stored it, None when the
    checkpoint holds none (no evaluation yet, no --early-stop, an older grind).

    The checkpoint's meta must match ``meta`` (see :func:`run_meta`), else
    InputError naming the first differing option, the checkpoint's value and
    this run's.  May differ on resume (:data:`RESUMABLE_OPTIONS`):
    --iterations, --tolerance, --epochs (when to stop: a longer run is the
    point of resuming; note that a run that already stopped by --tolerance
    stays stopped), --jobs, --cluster, -o, --trace, --checkpoint, --checkpoint-every,
    --ln-params, --joint-output, and --dev / --eval-every without
    --early-stop.  Everything else must be the same: --algo, --alpha (value,
    or a prior file's pseudo-counts), --seed, --kernel, the corpus options
    and the corpus's sentences, the grammar's rules, start symbol and
    initial weights, every algorithm option (--batch, --tau, --kappa,
    --update, --temp-start, --model, --cov, --families, --tie..., --mix-...,
    files by content), the annealing length of annealed gibbs / hastings,
    and with --early-stop the --dev sentences and --eval-every.  An option
    added to ``grind train`` later is recorded unless added to the list.

    A checkpoint of an older grind (meta without the options) is accepted
    with a warning when its algorithm, rule count and corpus match: the run
    it belongs to would otherwise be lost.  A truncated or corrupt file is
    an InputError ``PATH: not a grind checkpoint (truncated or corrupt)``.
    """
    header, arrays = _read_checkpoint(path)
    check_checkpoint(path, meta or {}, header["meta"])
    state = dict(header["scalars"])
    state.update((k, v) for k, v in arrays.items() if not k.startswith(BEST_PREFIX))
    best = None
    try:
        steps = [Step(a, b, c, d, e) for a, b, c, d, e in header["trace"]]
        if header.get("best") is not None:
            best_state = dict(header["best"]["scalars"])
            best_state.update((k[len(BEST_PREFIX):], v) for k, v in arrays.items() if k.startswith(BEST_PREFIX))
            best = (float(header["best"]["dev_logprob"]), best_state)
        algo.set_state(state)
        rng.bit_generator.state = header["rng"]
    except (*_CORRUPT, RuntimeError) as e:
        raise InputError(f"{path}: not a grind checkpoint (truncated or corrupt): {type(e).__name__}: {e}") from None
    return (steps, best) if with_best else steps


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(type(v))


def unfinished_annealing(trace):
    """The temperature an annealed sampler's run (gibbs, hastings) ended at when the
    annealing had not reached 1 -- its last state is a tempered one, not a draw from the
    posterior -- else None.  Said by ``grind train`` and ``grind.fit`` alike."""
    t = trace[-1].extra.get("temperature", 1.0) if trace else 1.0
    return t if t > 1.0 else None


# ----------------------------------------------------------------------------- the driver

def train(algo, rng, *, eval_fn=None, eval_every=0, checkpoint=None, checkpoint_every=0,
          resume=False, meta=None, on_step=None, early_stop=False, patience=1, eval_at=None):
    """Run ``algo`` to the end; returns the trace (list of Step).

    Each step is ``algo.step()`` (:meth:`grind.infer.base.Algorithm.step`:
    the shared stopping rule, and for streaming / stochastic VB the next of
    the algorithm's :class:`Minibatches` handed to its ``update``); the run
    ends when it returns None.  Any object with ``step()`` returning a Step
    or None, ``get_state()`` and ``set_state()`` can be run.
    Every ``eval_every`` steps, and at the steps that reach the numbers of
    sentences of ``eval_at`` (an :class:`EvalPoints`; then also at the last
    step), ``eval_fn(algo)`` adds held-out figures to the step; every
    ``checkpoint_every`` steps (and at the end, unless that step's state is
    there already) the state goes to ``checkpoint``.  Wall time in
    the trace excludes evaluation.  With
    ``early_stop``, the run ends when the held-out log probability decreases
    and the algorithm goes back to its state at the previous evaluation
    (Cohen & Smith 2010, Algorithm 1); with ``patience`` K > 1, when it has
    stayed below its best for K evaluations in a row, going back to the state
    of the best evaluation (K = 1 is Algorithm 1).
    """
    meta = meta or {}
    best = None                       # (dev log probability, state) at the best evaluation so far
    trace = []
    if resume:
        trace, best = load_checkpoint(checkpoint, algo, rng, meta, with_best=True)
        if not early_stop:
            best = None
        log.info(f"resumed from {checkpoint} after step {trace[-1].step if trace else 0}")
    saved = len(trace) if resume else None      # the trace length of the checkpoint on disk
    resumed_at = len(trace)                      # steps a resumed run starts from
    t0 = time.perf_counter() - (trace[-1].seconds if trace else 0.0)
    progress = log.bar(desc=getattr(algo, "name", "train"), unit="step")
    try:
        # A run that early-stopped is over: its checkpoint holds the kept state, not
        # one to continue from.  The held-out best of an unfinished early-stop run is
        # in the checkpoint (with the state), so a resumed run stops where the
        # uninterrupted one does; a checkpoint of an older grind has none, and that
        # resume may stop later.
        while not (early_stop and trace and str(trace[-1].extra.get("stopped", "")).startswith("held-out")):
            check_terminated()              # a SIGTERM whose exception a finaliser swallowed
            st = algo.step()
            if st is None:
                break
            if len(trace) == resumed_at and trace:
                trace[-1].extra.pop("stopped", None)     # the checkpointed run's end ("reached the cap"): it goes on
            progress.update()
            progress.set_postfix_str(f"objective {st.objective:.6g}")
            st.seconds = time.perf_counter() - t0
            before = trace[-1].sentences if trace else 0
            if eval_fn and ((eval_every and st.step % eval_every == 0)
                            or (eval_at is not None and eval_at.due(before, st.sentences))):
                e0 = time.perf_counter()
                st.extra.update(eval_fn(algo))
                t0 += time.perf_counter() - e0
                if early_stop:
                    dev = st.extra["dev_logprob"]
                    if best is not None and dev < best[0] and 1 + _below_best(trace, best[0]) >= patience:
                        algo.set_state(best[1])
                        kept = _best_step(trace, best[0])
                        st.extra["kept_step"] = kept
                        st.extra["stopped"] = (
                            "held-out log probability decreased; kept the previous state" if patience == 1
                            else f"held-out log probability below its best for {patience} evaluations; "
                                 f"kept the state of step {kept}")
                        trace.append(st)
                        log.info(f"step {st.step}: held-out log probability fell ({dev:.4f} < {best[0]:.4f}); "
                                 f"stopping with the state of step {kept}")
                        break
                    if best is None or dev >= best[0]:
                        best = (dev, _copy_state(algo.get_state()))
            trace.append(st)
            if on_step:
                on_step(st)
            if checkpoint and checkpoint_every and st.step % checkpoint_every == 0:
                save_checkpoint(checkpoint, algo, rng, trace, meta, best)
                saved = len(trace)
    finally:
        progress.close()     # (a bar left open would keep log lines in tqdm.write mode)
    if resume and len(trace) == resumed_at:
        log.warn(f"--resume: the checkpoint is at step {trace[-1].step if trace else 0}, where this run ends or past "
                 "it (--iterations, convergence or early stop): no step run; the checkpoint's state, and its trace, "
                 "are the result")
    if eval_fn and eval_at is not None and trace and "dev_logprob" not in trace[-1].extra:
        trace[-1].extra.update(eval_fn(algo))        # the curve's last point: the state the run ends with
        saved = None
    if checkpoint and saved != len(trace):
        save_checkpoint(checkpoint, algo, rng, trace, meta, best)
    return trace


def run_summary(trace) -> dict:
    """The output header's ``steps`` and ``objective`` (of the state kept: an early-stopped run's
    ``kept_step``, else the last step) and ``stopped`` (why the run ended, when its last step says)."""
    last = trace[-1] if trace else None
    kept = next((st for st in trace if last is not None and st.step == last.extra.get("kept_step")), last)
    out = {"steps": kept.step if kept else 0, "objective": repr(kept.objective) if kept else None}
    if last is not None and last.extra.get("stopped"):
        out["stopped"] = f"after step {last.step}: {last.extra['stopped']}"
        if kept is not last:
            out["stopped"] += f" (steps and objective: of step {kept.step}, the grammar written)"
    return out


def unparsed_note(algo: str, algorithm, trace, n, failed0: int = 0, what: str = "sentences") -> str | None:
    """The output header's ``unparsed`` line, or None when every sentence had a parse: the last step's
    ``parsed`` count of a batch algorithm (a sampler keeps out, for the whole run, the sentences without a
    tree under the initial grammar), ``failed0`` sentences known unparsed before training (a minibatch
    algorithm), or streaming VB's sentences skipped in their minibatch."""
    last = trace[-1] if trace else None
    parsed = last.extra.get("parsed") if last else None
    batches = getattr(algorithm, "batches", None)
    if isinstance(parsed, (int, np.integer)) and batches is None and isinstance(n, int) and parsed < n:
        if algo in ("gibbs", "hastings"):
            return (f"{n - parsed} of {n} {what} without a tree under the initial grammar (the sampler "
                    "leaves them out of the whole run)")
        return f"{n - parsed} of {n} {what} without a parse in the last step (left out of its counts)"
    if failed0:
        return f"{failed0} of {n} {what} without a parse under the initial grammar (left out)"
    if isinstance(batches, StreamBatches) and getattr(algorithm, "unparsed", 0):
        return f"{algorithm.unparsed} of {algorithm.consumed} sentences without a parse in their minibatch (skipped)"
    return None


def _below_best(trace, best: float) -> int:
    """How many of the trace's last held-out evaluations in a row are below ``best``."""
    n = 0
    for st in reversed(trace):
        if "dev_logprob" not in st.extra:
            continue
        if not st.extra["dev_logprob"] < best:
            break
        n += 1
    return n


def _best_step(trace, best: float) -> int:
    """The last step whose held-out log probability is ``best`` (the kept state's)."""
    return next((st.step for st in reversed(trace) if st.extra.get("dev_logprob") == best), 0)


def _copy_state(state: dict) -> dict:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in state.items()}


def write_trace(path, trace):
    """The trace as TSV: step, objective, sentences (cumulative: the parsed sentences of each sweep for cvb,
    gibbs and hastings; every sentence of each pass, parsed or not, for em, vb, ln and mixture; the
    sentences read for streaming and stochastic VB), seconds, then extras (``parsed``: of the step)."""
    extra = sorted({k for s in trace for k in s.extra})
    with open_out(path) as f:
        f.writelines(header_lines())
        f.write("\t".join(["step", "objective", "sentences", "seconds"] + extra) + "\n")
        for s in trace:
            vals = [str(s.step), repr(s.objective), str(s.sentences), f"{s.seconds:.3f}"]
            f.write("\t".join(vals + [repr(s.extra[k]) if k in s.extra else "" for k in extra]) + "\n")
