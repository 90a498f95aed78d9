"""grind from Python: the documented API, re-exported as ``grind.fit`` etc.

Every function here runs the code the command line runs (the same corpus
reader, chart kernels, algorithm classes, training driver and sharded
E-step), so ``grind.fit(g, corpus, "vb", alpha=0.1, seed=1)`` gives exactly
the weights ``grind train --algo vb --alpha 0.1 --seed 1`` writes.

A grammar argument is a :class:`~grind.grammars.grammar.Grammar` or a path;
a corpus argument is a list of token lists, a list of
:class:`~grind.formats.corpus.Sentence` (from :func:`read_corpus`) or a path
(read with the default options: one sentence a line; for a treebank call
:func:`read_corpus` with its ``column`` first).

Files written after a call (``Grammar.write``) record the call in their
header (``# call: grind.fit(...)``) instead of a command line.

    >>> import grind
    >>> g = grind.read_grammar("dmv1.txt")                       # doctest: +SKIP
    >>> train = grind.read_corpus("train.conllu", column="UPOS", punct="ud", max_length=10)  # doctest: +SKIP
    >>> result = grind.fit(g, train, "vb", alpha=0.1, iterations=20, seed=1)                # doctest: +SKIP
    >>> heads = grind.parse(result.grammar, train)                                           # doctest: +SKIP
    >>> grind.evaluate(train, heads)["directed"]                                             # doctest: +SKIP
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from grind import log
from grind.errors import InputError
from grind.formats.corpus import Corpus, CorpusSpec, Sentence, left_out
from grind.formats.corpus import read_corpus as _read_corpus
from grind.formats.counts import Counts
from grind.formats.rules import PSEUDO_COUNTS
from grind.formats.textio import clear_run_info, set_run_info
from grind.grammars.grammar import Grammar, as_probabilities, read_grammar as _read_grammar
from grind.infer import RANDOM_ALGOS
from grind.infer.registry import ALGORITHMS, CONFIG_OF, unread_options

__all__ = ["read_grammar", "read_corpus", "fit", "FitResult", "parse", "evaluate", "estep", "Counts", "Grammar",
           "Sentence", "ALGORITHMS"]

# ----------------------------------------------------------------------------- reading

def read_grammar(path, start: str | None = None) -> Grammar:
    """The grammar of a rule file (``weight LHS --> RHS ...``; ``.gz``/``.xz``/``.bz2`` read transparently)."""
    return _read_grammar(os.fspath(path), start)


def read_corpus(path, column: str | None = None, punct: str = "none", max_length: int | None = None,
                min_length: int = 1, format: str = "auto", chars: bool = False, types: bool = False) -> list[Sentence]:
    """The sentences of a corpus file, read as ``grind --format --column --punct
    --max-length --min-length --chars --types`` reads it: a list of
    :class:`~grind.formats.corpus.Sentence` (``.tokens``; ``.heads`` the gold
    heads of a treebank; with ``chars``, one word a line as its NFC characters, for morphology grammars)."""
    if max_length is not None and min_length > max_length:
        raise InputError(f"min_length {min_length} is above max_length {max_length}")
    return _read_corpus(os.fspath(path), CorpusSpec(format, column, punct, max_length, min_length, chars, types))


def _grammar(grammar) -> Grammar:
    return grammar if isinstance(grammar, Grammar) else read_grammar(grammar)


def _sentences(corpus) -> list[Sentence]:
    """``corpus`` (path, Sentences or token lists) as a list of Sentence."""
    if isinstance(corpus, (str, os.PathLike)):
        try:
            return read_corpus(corpus)
        except InputError as e:
            if "needs an explicit --column" not in str(e):
                raise
            raise InputError(f"{e}: in Python, read it with grind.read_corpus(path, column=..., punct=..., "
                             "max_length=...) and pass the sentences") from None
    if isinstance(corpus, (str, bytes, dict)) or not hasattr(corpus, "__iter__"):
        raise TypeError("a corpus is a path, a list of Sentences or a list of token lists, not "
                        f"{type(corpus).__name__}")
    out = []
    for i, s in enumerate(corpus, 1):
        if isinstance(s, Sentence):
            out.append(s)
            continue
        if isinstance(s, (str, bytes)) or not isinstance(s, (list, tuple)) or not all(isinstance(t, str) for t in s):
            raise TypeError(f"sentence {i} of the corpus is {s!r}: a sentence is a list of token strings "
                            "(e.g. 'a b'.split())")
        out.append(Sentence(list(s), i, i))
    return out


def _warn_failures(what: str, parser, n: int, bad=None, fate: str = "are left out") -> None:
    """On stderr, as the command line does: the sentences without a parse (``bad``, 0-based; default the
    ones the parser already knows it cannot parse), the first ten by number, then how many and ``fate``."""
    fails = getattr(parser, "failures", {}) or {}
    bad = sorted(fails) if bad is None else list(bad)
    if not bad:
        return
    def why(i):
        return fails.get(i, "no derivation has positive probability")
    for i in bad[:10]:
        log.warn(f"{what}: sentence {i + 1} has no parse: {why(i)}")
    if len(bad) > 10:
        log.warn(f"{what}: ... and {len(bad) - 10} more")
    log.warn(f"{what}: {len(bad)} of {n} sentences have no parse and {fate} (sentence {bad[0] + 1}: {why(bad[0])})")


def _probabilities(grammar, normalise: bool, what: str) -> Grammar:
    """``grammar``, checked to hold rule probabilities; with ``normalise``
    (fit, as grind train) weights that are not are normalised per LHS with a warning."""
    return as_probabilities(grammar, grammar.meta.get("path", "the grammar"), what, normalise)


def _parser(grammar, sents, kernel="auto"):
    from grind.kernels.select import make_parser
    return make_parser(grammar, [s.tokens for s in sents], kernel)


# ----------------------------------------------------------------------------- the call in headers

def _show(v) -> str:
    if isinstance(v, Grammar):
        return f"<grammar of {len(v)} rules>"
    if isinstance(v, (list, tuple)) and v and not isinstance(v[0], (int, float, str)):
        return f"<{len(v)} sentences>"
    if isinstance(v, os.PathLike):
        return repr(os.fspath(v))
    return repr(v)


def _call(name: str, **kw) -> str:
    return f"grind.{name}({', '.join(f'{k}={_show(v)}' for k, v in kw.items() if v is not None)})"


def _record(name: str, run_seed, **kw) -> str:
    """Record ``grind.NAME(key=value, ...)`` (and the seed) for the headers of files written next; the call."""
    call = _call(name, **kw)
    set_run_info(call=call, seed=run_seed)
    return call


def _check_args(seed, kernel, **ints) -> None:
    """The arguments the command line's option types would have refused."""
    import numbers
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise ValueError(f"seed must be a non-negative integer or None, not {seed!r}")
    from grind.kernels.select import KERNELS
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {', '.join(KERNELS)}, not {kernel!r}")
    for name, v in ints.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
            raise ValueError(f"{name} must be an integer, not {v!r}")


# ----------------------------------------------------------------------------- training

@dataclass
class FitResult:
    """What :func:`fit` returns.

    ``grammar``: the trained grammar (its weights are what ``grind train``
    writes: probabilities, or posterior Dirichlet pseudo-counts, as its
    ``meta["weights"]`` says; ``grammar.probabilities()`` is the mean either
    way).  ``trace``: one :class:`grind.infer.training.Step` per iteration.
    ``algorithm`` and ``options``: what ran (the full configuration).
    """

    grammar: Grammar
    trace: list
    algorithm: str
    options: dict = field(default_factory=dict)

    @property
    def weights(self) -> np.ndarray:
        return self.grammar.weights


#: ``grind train``'s long option names underscored -> the config field each sets, where the two differ
#: (tests/test_api.py checks this against the command line).
FLAG_NAMES = {"cov": "ln_cov", "constraints": "mix_constraints", "base": "mix_base"}


def _config(algo: str, options: dict):
    """The typed configuration (:data:`grind.infer.registry.CONFIG_OF`) of
    ``algo`` from ``grind train``'s option names (underscored); an option left
    out or None takes the algorithm's default, as on the command line."""
    if algo not in CONFIG_OF:
        raise ValueError(f"unknown algorithm {algo!r}: one of {', '.join(CONFIG_OF)}")
    cls = CONFIG_OF[algo]
    aliases = FLAG_NAMES
    for flag in [k for k in options if k not in cls.names() and aliases.get(k) in cls.names()]:
        if aliases[flag] in options:
            raise TypeError(f"grind.fit: {flag} and {aliases[flag]} name the same option")
        options[aliases[flag]] = options.pop(flag)
    unknown = sorted(set(options) - set(cls.names()))
    if unknown:
        raise TypeError(f"unknown option(s) for grind.fit(algo={algo!r}): {', '.join(unknown)} "
                        f"(its options: {', '.join(cls.names())})")
    return cls.from_options(options)


def fit(grammar, corpus, algo: str = "em", *, alpha=None, iterations: int | None = None, seed: int | None = None,
        jobs: int = 1, kernel: str = "auto", dev=None, eval_every: int = 0, early_stop: bool = False,
        patience: int = 1, on_step=None, universal_rules: str | None = None, rule_fraction: float | None = None,
        **options) -> FitResult:
    """Train ``grammar``'s weights on ``corpus`` with algorithm ``algo``
    (``em``, ``vb``, ``cvb``, ``streaming``, ``stochastic``, ``gibbs``,
    ``hastings``, ``mixture``, ``ln``), as ``grind train --algo ALGO`` does.

    ``alpha``: Dirichlet hyperparameter (a number; a number and per-LHS
    numbers, ``"1e-20,Stem=1e-15"``; or a grammar file of per-rule
    pseudo-counts); None = 1.0 where the algorithm has a Dirichlet prior.
    An option ``algo`` does not read (``alpha`` for ``ln``, ``iterations``
    for ``stochastic``, ``tolerance`` for the samplers, ...) is a TypeError,
    as ``grind train`` refuses it.  ``iterations``: None = the algorithm's default
    (50; ``ln`` 1000 with tolerance 1e-5; ``mixture`` 20).  ``seed``: of the
    one random generator.  ``jobs``: E-step threads (results do not depend
    on it).  ``dev`` (a corpus), ``eval_every``, ``early_stop``, ``patience``: held-out
    evaluation as ``--dev/--eval-every/--early-stop/--patience``.  ``on_step(step)`` is
    called after every step.  ``options``: the other ``grind train``
    options, underscored (``tolerance``, ``batch``, ``kappa``, ``model``,
    ``tie``, ...).  ``streaming`` reads ``corpus`` as a stream and needs a path
    (``spec=CorpusSpec(...)`` gives its reading options); ``stochastic`` given a
    path indexes it on disk (:mod:`grind.infer.corpus_index`) and never holds it.
    ``universal_rules`` (``"ud"``, ``"naseem"`` or a file) and ``rule_fraction``:
    posterior regularization of em, vb or cvb, as ``--universal-rules --rule-fraction``.
    """
    from grind.infer.training import ShardedEstep, heldout, prior_vector, run_summary, train as run_training
    _check_args(seed, kernel, iterations=iterations, jobs=jobs, eval_every=eval_every, patience=patience,
                **{k: options[k] for k in ("batch", "epochs", "model") if k in options})
    if patience < 1 or eval_every < 0:
        raise ValueError(f"patience must be >= 1 and eval_every >= 0 (got {patience}, {eval_every})")
    shown = given = seed
    if seed is None and algo in RANDOM_ALGOS:          # as grind train: draw the seed and record it
        import secrets
        seed = secrets.randbits(32)
        shown = f"{seed} (drawn: no seed given)"
        log.info(f"grind.fit: no seed given: drew {seed}; seed={seed} repeats this run")
    call = _record("fit", shown, algo=algo, alpha=alpha, iterations=iterations, seed=given,
                   universal_rules=universal_rules, rule_fraction=rule_fraction, **options)
    rng = np.random.default_rng(seed)
    if options.get("joint"):
        raise ValueError("joint (bilingual) training is only on the command line (grind train --joint)")
    if eval_every and dev is None:
        raise ValueError("eval_every needs dev")
    if early_stop and not eval_every:
        raise ValueError("early_stop needs eval_every and dev")
    if patience > 1 and not early_stop:
        raise ValueError("patience needs early_stop")
    if algo == "streaming":
        if not isinstance(corpus, (str, os.PathLike)):
            raise ValueError("the streaming algorithm reads its corpus as a stream: give a path")
        options = dict(options, corpus=os.fspath(corpus), spec=options.get("spec") or CorpusSpec())
    cfg = _config(algo, dict(options, iterations=iterations, jobs=jobs, kernel=kernel))
    given = {"alpha": ("alpha", alpha), "iterations": ("iterations", iterations)}
    given.update({FLAG_NAMES.get(k, k): (k, v) for k, v in options.items()})    # by config name: as given
    for name, why in unread_options(algo, cfg, lambda n: f"{n}=").items():
        as_given, value = given.get(name, (name, None))
        if value is not None:
            raise TypeError(f"grind.fit(algo={algo!r}) does not read {as_given}=: {why}")
    if alpha is None:
        alpha = 1.0 if "alpha" not in unread_options(algo, cfg) else None
    g = _probabilities(_grammar(grammar), True, "grind.fit")
    index, failed0, sents = None, 0, None
    if algo == "streaming":
        estep, n = None, "a stream of"
    elif algo == "stochastic" and isinstance(corpus, (str, os.PathLike)):
        from grind.infer.corpus_index import FileEstep
        from grind.infer.stochastic import index_corpus
        index = index_corpus(g, os.fspath(corpus), CorpusSpec(), kernel)     # on disk, as grind train
        failed0 = index.report()
        estep, n = FileEstep(index, jobs), index.n
    else:
        sents = _sentences(corpus)
        parser = _parser(g, sents, kernel)
        if algo == "stochastic":          # as grind train: its pool and N leave out what no weights can parse
            from grind.infer.corpus_index import mark_underivable
            mark_underivable(parser, g)
        _warn_failures("grind.fit", parser, len(sents))
        failed0 = len(getattr(parser, "failures", {}) or {})
        estep, n = ShardedEstep(parser, jobs), len(sents)
    universal: dict = {}
    if rule_fraction is not None and universal_rules is None:
        raise TypeError("rule_fraction= is the share of arcs universal_rules= asks for: give universal_rules=")
    if universal_rules is not None:
        if algo not in ("em", "vb", "cvb"):
            raise TypeError(f"universal_rules= projects the E-step of em, vb, cvb, not of {algo!r}")
        from grind.infer.posterior_reg import regularize
        estep, universal = regularize(g, estep, universal_rules, rule_fraction)
    try:
        prior = prior_vector(g, 1.0 if alpha is None else alpha)
        log.info(f"training {algo} on {n} sentences, {len(g)} rules")
        algorithm = ALGORITHMS[algo](g, estep, prior, g.probabilities(), cfg, rng)
        eval_fn = None
        if dev is not None:
            dev_sents = _sentences(dev)
            dev_parser = _parser(g, dev_sents, kernel)
            eval_fn = lambda a: heldout(dev_parser, a.mean(), dev_sents)  # noqa: E731
        trace = run_training(algorithm, rng, eval_fn=eval_fn, eval_every=eval_every, on_step=on_step,
                             early_stop=early_stop, patience=patience)
    finally:
        if index is not None:
            index.close()             # the spool of the corpus's tokens
    kind = "probabilities" if algorithm.output == "probabilities" else f"{PSEUDO_COUNTS} (posterior)"
    meta = {k: v for k, v in g.meta.items() if k not in ("weights", "start")}
    summary = run_summary(trace)              # an early-stopped run: the kept state's steps and objective
    meta.update(weights=kind, algorithm=algo, steps=str(summary["steps"]), call=call, seed=str(shown))
    if alpha is not None:
        meta["alpha"] = str(alpha)
    if summary["objective"] is not None:
        meta["objective"] = summary["objective"]
    if summary.get("stopped"):
        meta["stopped"] = summary["stopped"]
    if hasattr(algorithm, "st"):                # as grind train's header: the LN structure, M-step, mixture
        meta["structure"] = algorithm.st.describe()
    if hasattr(algorithm, "mstep"):
        meta["ln_mstep"] = algorithm.mstep
    if algo == "mixture":
        meta["mixture"] = algorithm.describe()
    meta.update(universal)
    from grind.infer.training import unfinished_annealing, unparsed_note
    note = unparsed_note(algo, algorithm, trace, n, failed0)
    if note:
        meta["unparsed"] = note
    read = (corpus if isinstance(corpus, Corpus) else sents if isinstance(sents, Corpus) else
            index if index is not None else getattr(algorithm.batches, "read", lambda: None)())
    dropped = left_out(read, "not trained on") if read is not None else None
    if dropped:
        meta["left_out"] = dropped
    t_end = unfinished_annealing(trace)
    if t_end:                         # as grind train says it
        meta["temperature"] = f"{t_end:.6g} (the annealing had not reached 1)"
        log.warn(f"grind.fit: the run ended at step {trace[-1].step} at temperature {t_end:.4g}, before the "
                 "annealing (over anneal_sweeps, else iterations) reached 1: the grammar is a tempered state")
    trained = g.with_weights(algorithm.weights(), meta)
    clear_run_info()                    # the result's grammar carries the call; later files are not its
    return FitResult(trained, trace, algo, vars(cfg) | {"alpha": alpha, "seed": seed})


# ----------------------------------------------------------------------------- parsing, counts, evaluation

def parse(grammar, corpus, decoder: str = "viterbi", average=()) -> list:
    """Decode every sentence: for a DMV grammar its heads (1-based, 0 = root;
    ``decoder="mbr"``: minimum Bayes risk), for a PCFG its Viterbi tree as
    nested tuples ``(label, child, ...)``; ``None`` for a sentence without a parse.
    ``average`` (DMV, ``decoder="mbr"``): more grammars of the same rules whose arc
    posteriors are averaged with ``grammar``'s (as ``grind parse --mbr --average``)."""
    from grind.kernels.dmv import DMVParser
    if decoder not in ("viterbi", "mbr"):
        raise ValueError(f"decoder must be 'viterbi' or 'mbr', not {decoder!r}")
    if isinstance(average, (str, os.PathLike, Grammar)):
        average = [average]                     # one grammar, not a sequence of characters
    if average and decoder != "mbr":
        raise ValueError("average needs decoder='mbr'")
    g = _probabilities(_grammar(grammar), False, "grind.parse")
    sents = _sentences(corpus)
    parser = _parser(g, sents)
    theta = g.probabilities()
    members = [_probabilities(_grammar(m), False, "grind.parse") for m in average]
    for m in members:
        if not g.same_rules_as(m):
            raise InputError("grind.parse: every grammar of 'average' needs the rules of 'grammar' in the same order")
    if isinstance(parser, DMVParser):
        thetas = np.stack([theta] + [m.probabilities() for m in members])
        heads = parser.mbr_heads(thetas, fallback=[]) if decoder == "mbr" else parser.viterbi_heads(theta)[0]
        return _said_unparsed([None if h is None else [int(x) for x in h] for h in heads], sents, parser)
    if decoder == "mbr":
        raise ValueError("mbr decoding is for DMV grammars; use decoder='viterbi' for a PCFG")
    from grind.formats.trees import derivation_tree
    derivs, _ = parser.viterbi(theta)
    return _said_unparsed([None if d is None else derivation_tree(g, d, s.tokens) for s, d in zip(sents, derivs)],
                          sents, parser)


def _said_unparsed(out: list, sents, parser) -> list:
    """``out``, the sentences it has no parse for (None) named on stderr as the command line names them."""
    _warn_failures("grind.parse", parser, len(sents), [i for i, x in enumerate(out) if x is None], "are None")
    return out


def estep(grammar, corpus) -> Counts:
    """Expected rule counts of ``corpus`` under ``grammar`` with the corpus
    statistics (sentences, parsed, words, loglik), as ``grind estep``; counts
    of shards add up with :meth:`Counts.merge`."""
    from grind.infer.training import ShardedEstep, fingerprint_array
    _record("estep", None)
    g = _probabilities(_grammar(grammar), False, "grind.estep")
    sents = _sentences(corpus)
    counts, logz = ShardedEstep(_parser(g, sents))(g.probabilities())    # summed in grind estep's blocks
    logz = np.asarray(logz, dtype=np.float64)
    ok = np.isfinite(logz)
    if not ok.all():
        log.warn(f"grind.estep: {int((~ok).sum())} of {len(sents)} sentences have no parse and were left out")
    stats = {"sentences": len(sents), "parsed": int(ok.sum()),
             "words": int(sum(len(s) for s, k in zip(sents, ok) if k)), "loglik": float(logz[ok].sum())}
    meta = {"estep": "probabilities", "estep-weights": fingerprint_array(g.weights)}
    return Counts.of(g, np.asarray(counts, dtype=np.float64), stats, meta)


def evaluate(gold, predicted, baselines: bool = True, **corpus_options) -> dict:
    """Dependency accuracy of ``predicted`` (head lists as :func:`parse`
    returns, Sentences with heads, or a CoNLL path) against ``gold``
    (Sentences of a treebank, or a path), as ``grind eval`` scores it.  A path
    is read by :func:`read_corpus` with ``corpus_options`` (``column``,
    ``punct``, ``max_length``, ...: those the gold Sentences were read with).

    Returns ``{"directed": ..., "undirected": ...}`` over all sentences, and
    ``"rows"``: one dict per subset (``<=10``, ``<=20``, ``all``) with
    sentences, words, directed, undirected, unparsed and (with baselines)
    overlap_right / overlap_left; with ``baselines``, ``"baselines"``:
    ``{"right": rows, "left": rows}`` of the attach-right / attach-left trees.
    """
    from grind.eval.dependencies import baseline_rows, check_parse_punct, evaluate as evaluate_sentences, score_heads
    gold = read_corpus(gold, **corpus_options) if isinstance(gold, (str, os.PathLike)) else _sentences(gold)
    if isinstance(predicted, (str, os.PathLike)):
        # a parse written under another --punct has the removed tokens attached to the root as filler
        check_parse_punct(os.fspath(predicted), corpus_options.get("punct", "none"))
        predicted = read_corpus(predicted, **corpus_options)
    if predicted and all(p is None or isinstance(p, Sentence) for p in predicted) \
            and any(isinstance(p, Sentence) for p in predicted):
        rows = evaluate_sentences(gold, predicted, baselines)
    else:
        if len(gold) != len(predicted):
            raise InputError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
        for i, (s, h) in enumerate(zip(gold, predicted)):
            if s.heads is None:
                raise InputError(f"gold sentence {s.number} has no heads (read a treebank with read_corpus)")
            if h is not None and len(h) != len(s):
                raise InputError(f"sentence {i + 1}: {len(h)} predicted heads for {len(s)} gold tokens")
            if h is not None and not all(isinstance(x, (int, np.integer)) and 0 <= x <= len(s) for x in h):
                raise InputError(f"sentence {i + 1}: predicted heads must be integers 0..{len(s)} (0 = root): "
                                 f"{list(h)}")
        rows = score_heads(gold, predicted, baselines)
    out = {"directed": rows[-1]["directed"], "undirected": rows[-1]["undirected"], "rows": rows}
    if baselines:
        out["baselines"] = baseline_rows(gold)
    return out
