"""What every training run shares: the Dirichlet prior, the sharded E-step,
the trace, held-out evaluation, checkpoints.

An algorithm is a class with explicit state (numpy arrays and scalars) and a
``step()`` that advances it by one iteration / minibatch / sweep and returns
a :class:`Step`, or ``None`` when it is done.  The driver :func:`train` does
everything else, so a resumed run (state + random generator restored from a
checkpoint) ends bit-identical to an uninterrupted one.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from . import log
from .errors import InputError, NumericalError
from .grammar import read_grammar, rule_key
from .textio import open_out

#: E-step shard size: counts are summed shard by shard in corpus order, so the
#: result is the same whatever the number of worker threads.
SHARD = 256


@dataclass
class Step:
    """One line of the trace."""

    step: int
    objective: float
    sentences: int            # sentences parsed so far (cumulative)
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def prior_vector(grammar, alpha: str | float) -> np.ndarray:
    """Per-rule Dirichlet hyperparameters: a number (symmetric) or a grammar
    file whose weights (or pseudo-count column) are the pseudo-counts."""
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        a = _prior_file(grammar, str(alpha))
    a = np.broadcast_to(np.asarray(a, dtype=np.float64), (len(grammar),)).copy()
    if not np.all(a > 0) or not np.all(np.isfinite(a)):
        raise InputError("Dirichlet hyperparameters must be finite and positive")
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

    def __init__(self, parser, jobs: int = 1, shard: int = SHARD):
        self.parser, self.jobs, self.shard = parser, max(1, jobs), shard

    def __call__(self, weights, idx=None):
        idx = self.parser._idx(idx)
        shards = [idx[i:i + self.shard] for i in range(0, len(idx), self.shard)] or [idx]
        if self.jobs == 1 or len(shards) == 1:
            parts = [self.parser.inside_outside(weights, s) for s in shards]
        else:
            with ThreadPoolExecutor(self.jobs) as ex:
                parts = list(ex.map(lambda s: self.parser.inside_outside(weights, s), shards))
        counts = np.zeros(len(self.parser.grammar))
        for c, _ in parts:
            counts += c
        logz = np.concatenate([z for _, z in parts])
        if np.isnan(logz).any() or not np.all(np.isfinite(counts)):
            raise NumericalError("the E-step produced NaN: the weights are invalid")
        return counts, logz


def heldout(parser, theta, sents=None) -> dict:
    """Predictive log probability of held-out sentences under theta (the
    posterior mean for Bayesian runs), per-word perplexity, and directed
    accuracy of Viterbi trees when the sentences carry gold heads."""
    _, logz = parser.inside_outside(theta)
    ok = np.isfinite(logz)
    words = sum(len(s) for s, k in zip(parser.sentences, ok) if k)
    out = {"dev_logprob": float(logz[ok].sum()), "dev_parsed": int(ok.sum()),
           "dev_perplexity": float(np.exp(-logz[ok].sum() / words)) if words else float("nan")}
    if sents is not None and all(s.heads is not None for s in sents) and hasattr(parser, "viterbi_heads"):
        heads, _ = parser.viterbi_heads(theta)
        right = sum(int(np.sum(np.asarray(h) == g.heads)) for h, g in zip(heads, sents) if h is not None)
        out["dev_directed"] = right / max(1, sum(len(s) for s in sents))
    return out


# ----------------------------------------------------------------------------- checkpoints

def save_checkpoint(path, algo, rng, trace, meta):
    """State arrays, scalars, the generator's state and the trace in one .npz,
    written to a temporary file and renamed: an interrupted run keeps the last
    complete checkpoint."""
    arrays, scalars = {}, {}
    for k, v in algo.get_state().items():
        (arrays if isinstance(v, np.ndarray) else scalars)[k] = v
    header = json.dumps({"meta": meta, "scalars": scalars, "rng": rng.bit_generator.state,
                         "trace": [[s.step, s.objective, s.sentences, s.seconds, s.extra] for s in trace]},
                        default=_jsonable)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".grind-ckpt-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, __header__=np.array(header), **arrays)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_checkpoint(path, algo, rng, meta):
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot read checkpoint: {e}") from None
    header = json.loads(str(z["__header__"]))
    for k in ("algorithm", "rules", "corpus"):
        if header["meta"].get(k) != meta.get(k):
            raise InputError(f"{path}: checkpoint was made with {k}={header['meta'].get(k)!r}, "
                             f"this run has {meta.get(k)!r}")
    state = dict(header["scalars"])
    state.update({k: z[k] for k in z.files if k != "__header__"})
    algo.set_state(state)
    rng.bit_generator.state = header["rng"]
    return [Step(a, b, c, d, e) for a, b, c, d, e in header["trace"]]


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(type(v))


# ----------------------------------------------------------------------------- the driver

def train(algo, rng, *, eval_fn=None, eval_every=0, checkpoint=None, checkpoint_every=0,
          resume=False, meta=None, on_step=None, early_stop=False):
    """Run ``algo`` to the end; returns the trace (list of Step).

    Every ``eval_every`` steps ``eval_fn(algo)`` adds held-out figures to the
    step; every ``checkpoint_every`` steps (and at the end) the state goes to
    ``checkpoint``.  Wall time in the trace excludes evaluation.  With
    ``early_stop``, the run ends when the held-out log probability decreases
    and the algorithm goes back to its state at the previous evaluation
    (Cohen & Smith 2010, Algorithm 1).
    """
    meta = meta or {}
    trace = load_checkpoint(checkpoint, algo, rng, meta) if resume else []
    if resume:
        log.info(f"resumed from {checkpoint} after step {trace[-1].step if trace else 0}")
    t0 = time.perf_counter() - (trace[-1].seconds if trace else 0.0)
    best = None                       # (dev log probability, state) at the last evaluation
    progress = log.bar(desc=getattr(algo, "name", "train"), unit="step")
    while True:
        st = algo.step()
        if st is None:
            break
        progress.update()
        progress.set_postfix_str(f"objective {st.objective:.6g}")
        st.seconds = time.perf_counter() - t0
        if eval_fn and eval_every and st.step % eval_every == 0:
            e0 = time.perf_counter()
            st.extra.update(eval_fn(algo))
            t0 += time.perf_counter() - e0
            if early_stop:
                dev = st.extra["dev_logprob"]
                if best is not None and dev < best[0]:
                    algo.set_state(best[1])
                    st.extra["stopped"] = "held-out log probability decreased; kept the previous state"
                    trace.append(st)
                    log.info(f"step {st.step}: held-out log probability fell ({dev:.4f} < {best[0]:.4f}); "
                             f"stopping with the state of step {st.step - eval_every}")
                    break
                best = (dev, _copy_state(algo.get_state()))
        trace.append(st)
        if on_step:
            on_step(st)
        if checkpoint and checkpoint_every and st.step % checkpoint_every == 0:
            save_checkpoint(checkpoint, algo, rng, trace, meta)
    progress.close()
    if checkpoint:
        save_checkpoint(checkpoint, algo, rng, trace, meta)
    return trace


def _copy_state(state: dict) -> dict:
    return {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in state.items()}


def write_trace(path, trace):
    """The trace as TSV: step, objective, sentences parsed, seconds, then extras."""
    from .textio import header_lines
    extra = sorted({k for s in trace for k in s.extra})
    with open_out(path) as f:
        f.writelines(header_lines())
        f.write("\t".join(["step", "objective", "sentences", "seconds"] + extra) + "\n")
        for s in trace:
            vals = [str(s.step), repr(s.objective), str(s.sentences), f"{s.seconds:.3f}"]
            f.write("\t".join(vals + [repr(s.extra[k]) if k in s.extra else "" for k in extra]) + "\n")
