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
from grind.formats.corpus import CorpusSpec, Sentence
from grind.formats.corpus import read_corpus as _read_corpus
from grind.formats.counts import Counts
from grind.formats.textio import clear_run_info, set_run_info
from grind.grammars.grammar import Grammar, as_probabilities, read_grammar as _read_grammar
from grind.infer import RANDOM_ALGOS
from grind.infer.options import OPTIONS, api_names, check_values
from grind.infer.registry import ALGORITHMS
from grind.run import sentences as _sentences, warn_failures as _warn_failures

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
    """The arguments the command line's option types would have refused (``grind.fit``'s other options:
    :func:`grind.infer.options.check_values`)."""
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
FLAG_NAMES = {o.alias: o.name for o in OPTIONS if o.alias and o.config}
#: Options the run reads that are not keywords of :func:`fit` (they are its parameters) or are for the
#: command line only.
_PARAMETERS = ("algo", "alpha", "iterations", "seed", "jobs", "kernel", "dev_path", "eval_every", "early_stop",
               "patience")


def _values(algo: str, options: dict) -> tuple[dict, dict]:
    """``fit``'s ``**options`` by option name (an alias, ``cov``, names ``ln_cov``), and the names as given:
    an unknown keyword, or one option given twice, is a TypeError."""
    known = api_names()
    values: dict = {}
    as_given: dict = {}
    unknown = []
    for key, v in options.items():
        name = known.get(key)
        if name is None or name in _PARAMETERS:
            unknown.append(key)
            continue
        if name in as_given:
            raise TypeError(f"grind.fit: {as_given[name]} and {key} name the same option")
        values[name], as_given[name] = v, key
    if unknown:
        names = sorted(k for k, n in known.items() if n == k and n not in _PARAMETERS)
        raise TypeError(f"unknown option(s) for grind.fit(algo={algo!r}): {', '.join(sorted(unknown))} "
                        f"(its options: {', '.join(names)})")
    return values, as_given


def fit(grammar, corpus, algo: str = "em", *, alpha=None, iterations: int | None = None, seed: int | None = None,
        jobs: int = 1, kernel: str = "auto", dev=None, eval_every: int = 0, early_stop: bool = False,
        patience: int = 1, on_step=None, **options) -> FitResult:
    """Train ``grammar``'s weights on ``corpus`` with algorithm ``algo``
    (``em``, ``vb``, ``cvb``, ``streaming``, ``stochastic``, ``gibbs``,
    ``hastings``, ``mixture``, ``ln``), as ``grind train --algo ALGO`` does:
    the run is :class:`grind.run.TrainingRun`'s, the options and their checks
    :mod:`grind.infer.options`' (``docs/reference/train.md`` lists them).

    ``alpha``: Dirichlet hyperparameter (a number; a number and per-LHS
    numbers, ``"1e-20,Stem=1e-15"``; or a grammar file of per-rule
    pseudo-counts); None = 1.0 where the algorithm has a Dirichlet prior.
    An option ``algo`` does not read (``alpha`` for ``ln``, ``iterations``
    for ``stochastic``, ``tolerance`` for the samplers, ...) is a TypeError,
    as ``grind train`` refuses it; options that do not go together are a
    ValueError.  ``iterations``: None = the algorithm's default
    (50; ``ln`` 1000 with tolerance 1e-5; ``mixture`` 20).  ``seed``: of the
    one random generator.  ``jobs``: E-step threads (results do not depend
    on it).  ``dev`` (a corpus), ``eval_every``, ``early_stop``, ``patience`` (and the option
    ``eval_at``): held-out evaluation as ``--dev/--eval-every/--early-stop/--patience`` (``--eval-at``).
    ``on_step(step)`` is called after every step.  ``options``: the other ``grind train``
    options, underscored (``tolerance``, ``batch``, ``kappa``, ``model``,
    ``tie``, ...).  ``streaming`` reads ``corpus`` as a stream and needs a path
    (``spec=CorpusSpec(...)`` gives its reading options); ``stochastic`` given a
    path indexes it on disk (:mod:`grind.infer.corpus_index`) and never holds it.
    Messages go through Python's ``logging`` (logger ``grind``).
    """
    from grind.run import PyNamer, Style, TrainingRun, configure
    _check_args(seed, kernel)
    if options.get("joint"):
        raise ValueError("joint (bilingual) training is only on the command line (grind train --joint)")
    values, as_given = _values(algo, options)
    check_values(dict(values, iterations=iterations, jobs=jobs, eval_every=eval_every, patience=patience))
    shown = given_seed = seed
    if seed is None and algo in RANDOM_ALGOS:          # as grind train: draw the seed and record it
        import secrets
        seed = secrets.randbits(32)
        shown = f"{seed} (drawn: no seed given)"
        log.info(f"grind.fit: no seed given: drew {seed}; seed={seed} repeats this run")
    call = _record("fit", shown, algo=algo, alpha=alpha, iterations=iterations, seed=given_seed, **options)
    rng = np.random.default_rng(seed)
    if algo == "streaming" and not isinstance(corpus, (str, os.PathLike)):
        raise ValueError("the streaming algorithm reads its corpus as a stream: give a path")
    values.update(algo=algo, alpha=alpha, iterations=iterations, seed=seed, jobs=jobs, kernel=kernel,
                  dev_path=dev, eval_every=eval_every, early_stop=early_stop, patience=patience)
    given = {k for k, v in values.items() if v is not None}
    namer = PyNamer(dict(as_given, dev_path="dev"))
    from grind.infer.options import OptionError
    try:
        cfg = configure(algo, values, given.__contains__, namer)
    except OptionError as e:
        raise (TypeError if e.unread else ValueError)(str(e)) from None
    style = Style("grind.fit", namer, False)
    with TrainingRun(grammar if isinstance(grammar, Grammar) else os.fspath(grammar), corpus, algo, cfg, values,
                     style, spec=values.get("spec")) as run:
        log.info(run.describe())
        trace = run.train(rng, on_step=on_step)
        info = run.header()
        weights = run.algorithm.weights()
        kind = run.kind()
    meta = {k: v for k, v in run.g.meta.items() if k not in ("weights", "start")}
    meta.update(weights=kind, algorithm=algo, steps=str(info["steps"]), call=call, seed=str(shown))
    if info["alpha"] is not None:
        meta["alpha"] = str(1.0 if alpha is None else alpha)
    for key in ("objective", "stopped", "structure", "ln_mstep", "mixture", "unparsed", "left_out", "temperature",
                "universal_rules", "rule_fraction", "rule_share", "constraints", "unseen_tags"):
        if info.get(key) is not None:
            meta[key] = info[key]
    trained = run.g.with_weights(weights, meta)
    clear_run_info()                    # the result's grammar carries the call; later files are not its
    return FitResult(trained, trace, algo, vars(cfg) | {"alpha": alpha if info["alpha"] is None else
                                                        (1.0 if alpha is None else alpha), "seed": seed})


# ----------------------------------------------------------------------------- parsing, counts, evaluation

def parse(grammar, corpus, decoder: str = "viterbi", average=(), backoff: bool = True) -> list:
    """Decode every sentence: for a DMV grammar its heads (1-based, 0 = root;
    ``decoder="mbr"``: minimum Bayes risk), for a PCFG its Viterbi tree as
    nested tuples ``(label, child, ...)``; ``None`` for a sentence without a parse.
    ``average`` (DMV, ``decoder="mbr"``): more grammars of the same rules whose arc
    posteriors are averaged with ``grammar``'s (as ``grind parse --mbr --average``).
    ``backoff`` (DMV, not with ``average``): a sentence with no tree of positive
    probability is parsed again with floored probabilities, then with the
    structural constraints relaxed, and said on stderr (as ``grind parse``;
    ``backoff=False``: it is None, as ``--no-backoff``)."""
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
        if backoff and not members:
            from grind.infer.backoff import back_off
            heads, _ = back_off(g, parser, sents, theta, heads, decoder)
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
