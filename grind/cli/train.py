"""``grind train``: its options come from the option table (:mod:`grind.infer.options`), its run from
:class:`grind.run.TrainingRun` (which ``grind.fit`` runs too); what only the command line has is here:
checkpoints, a Dask cluster, the output files."""
from __future__ import annotations

import click

from grind import log
from grind.errors import InputError
from grind.formats.textio import STDERR, is_stream, output_group, same_file, stream_name
from grind.infer import RANDOM_ALGOS
from grind.infer.options import GROUPS, NAMES, OPTIONS, OptionError
import numpy as np

from grind.cli.common import (corpus_options, output_option, make_rng, write_grammar, _given, check_unparsed,
                              grammar_spec, is_treebank_grammar)
from grind.cli.options import config_header, grouped, table_options
from grind.run import CLI, STREAMING, TrainingRun, check_trees, configure
# (ON_DISK, IN_MEMORY_ENV: grind.run)

#: --algo choices; the classes are :data:`grind.infer.registry.ALGORITHMS` (imported when one runs).
ALGORITHMS = NAMES
#: The table's options grind train has, in help order (the corpus options and -o come from grind.cli.common).
TRAIN_OPTIONS = [o.name for o in OPTIONS if o.where in ("both", "cli")]

DESCRIPTION = """Train GRAMMAR's weights on CORPUS; write the trained grammar.

    ALGO: em (EM, MAP-EM), vb (mean-field VB), cvb (collapsed VB), streaming and
    stochastic (VB over minibatches), gibbs and hastings (samplers), mixture
    (posterior constraints, DMV), ln (logistic-normal priors).

    \b
    Example (with the corpus options g1.txt was made with):
      grind train --algo vb --alpha 0.1 --column UPOS g1.txt c.conllu > g.txt
"""

_CLI_ONLY = ", ".join(o.long for o in OPTIONS if o.where == "cli")
_API_ONLY = ", ".join(o.name for o in OPTIONS if o.where == "api")
REFERENCE = f"""From Python, grind.fit(grammar, corpus, algo, ...) takes these options as keywords, underscored
(--tie-what: tie_what; --cov: cov or ln_cov; --dev: dev, a corpus), with the same defaults and checks, but for
those only the command line has ({_CLI_ONLY}; -o: it returns the trained grammar; the corpus options: read
the corpus with grind.read_corpus); it also takes {_API_ONLY}.

All but em, ln and mixture over em or ln write the posterior Dirichlet pseudo-counts (grind parse and
loglik use their mean).  The per-step objective (log-likelihood + log prior, variational bound, or collapsed
log probability) goes to stderr, and with --trace to a TSV file.

Examples (`C="--column UPOS --punct ud"`, the corpus options `g1.txt` was made with):

    grind train --algo em --iterations 30 $C g1.txt train.conllu > g.txt
    grind train --algo vb --alpha 0.1 --dev dev.conllu --eval-every 5 $C g1.txt train.conllu > post.txt
    grind train --algo vb --alpha 0.1 --cluster local:8 $C g1.txt train.conllu > post.txt
"""


def usage_error(e: OptionError) -> click.ClickException:
    """An :class:`OptionError` as click's usage error (exit status 2), naming the option of a bad value."""
    if e.param:
        from grind.infer.options import OPTION
        return click.BadParameter(str(e), param_hint=f"'{OPTION[e.param].long}'")
    return click.UsageError(str(e))


@grouped(help=DESCRIPTION, order=tuple(GROUPS.values()), reference=REFERENCE)
@table_options(TRAIN_OPTIONS)
@corpus_options
@output_option
@click.argument("grammar")
@click.argument("corpus")
def train(grammar, corpus, spec, output, **values):
    from grind.infer.training import check_checkpoint, is_checkpoint, run_meta, write_trace
    algo, ckpt, resume, cluster = values["algo"], values["ckpt"], values["resume"], values["cluster"]
    # a resumed run's generator state comes from the checkpoint: nothing to draw
    rng = make_rng(values["seed"], random=algo in RANDOM_ALGOS and not resume)
    if resume and not ckpt:
        raise click.UsageError("--resume needs --checkpoint FILE")
    if values["checkpoint_every"] and not ckpt:
        raise click.UsageError("--checkpoint-every needs --checkpoint FILE")
    if ckpt and ckpt.endswith((".gz", ".xz", ".bz2")):
        raise click.UsageError(f"--checkpoint {ckpt}: a checkpoint is an .npz archive (compressed already), "
                               "not a .gz / .xz / .bz2 file: give a name without that suffix")
    _check_distinct_outputs(**{"-o/--output": output, "--trace": values["trace_path"], "--checkpoint": ckpt,
                               "--ln-params": values["ln_params"], "--joint-output": values["joint_output"]})
    if resume:
        try:
            open(ckpt, "rb").close()
        except OSError as e:
            raise InputError(f"--checkpoint {ckpt}: cannot read (needed by --resume): {e.strerror}") from None
    elif ckpt and is_checkpoint(ckpt):
        raise click.UsageError(f"--checkpoint {ckpt} holds a run's saved state already, which this run would "
                               "overwrite: give --resume to continue it, or remove it (or give another path) to "
                               "start afresh")
    ctx = click.get_current_context()
    params = dict(ctx.params, spec=spec)
    if values["on_trees"] and values["tolerance"] is None:
        # a split grammar starts next to a symmetric point, where the objective barely moves for the first
        # steps (a relative change of 1e-6 at step 3): run the budget of --iterations, as the paper does
        params["tolerance"] = 0.0
        log.info("--trees: the run takes all its --iterations (no --tolerance given: the objective of a split "
                 "grammar barely moves while its subtypes are still nearly alike)")
    try:
        cfg = configure(algo, params, _given, CLI.namer)   # None: the algorithm's default
        if cluster is not None:
            _check_cluster_options(cluster, algo, cfg, cfg.jobs)
        if values["on_trees"]:
            check_trees(algo, spec, values, CLI.namer)
    except OptionError as e:
        raise usage_error(e) from None
    if not values["on_trees"] and is_treebank_grammar(grammar):
        raise click.UsageError("a treebank grammar ('# model: treebank') trains on gold trees with its subtypes "
                               "hidden: give --trees (and the PTB trees as CORPUS)")
    if not values["on_trees"]:
        spec = grammar_spec(grammar, corpus, spec)
    if algo in STREAMING and not values["on_trees"] and not values["joint"] and is_stream(corpus):
        raise click.UsageError("--algo streaming reads CORPUS twice (its fingerprint for the header and "
                               "checkpoints, then the training pass) and never holds it: give a file, not "
                               "standard input or a pipe")
    log.debug(f"{algo} configuration: " + ", ".join(f"{k}={v!r}" for k, v in vars(cfg).items()
                                                   if k not in ("corpus", "spec")))
    run = ctx.with_resource(TrainingRun(grammar, corpus, algo, cfg, values, CLI, spec=spec, start=values["start"]))
    g = run.g
    _check_symmetric_start(g, grammar, algo, cfg, values["on_trees"])
    log.info(run.describe())
    from grind.infer.training import fingerprint_sentences
    from grind.formats.corpus import iter_corpus
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params if p.opts}
    if run.index is not None:
        corpus_fp = run.index.fingerprint
    else:
        corpus_fp = fingerprint_sentences(s.tokens for s in (iter_corpus(corpus, spec) if algo in STREAMING
                                                             else run.sents))
    # the annealing length of gibbs / hastings is --iterations' value, as resolved by the config
    meta = run_meta(dict(ctx.params, iterations=cfg.iterations), flags, grammar=g, theta0=g.probabilities(),
                    prior=run.prior, corpus_fp=corpus_fp, algo=algo, spec_text=run.corpus_text)
    if resume:
        check_checkpoint(ckpt, meta)     # a changed option stops the run before any work
    if cluster is not None:
        run.estep = run.regularized(cluster_estep(cluster, run.parser, parser_recipe(
            g, run.sents, run.parser, cfg.kernel, values["on_trees"], run.joint)))
    run.build(rng)
    if algo in STREAMING:                # its training pass must read what the fingerprint's pass read
        run.algorithm.batches.check_against(corpus_fp)
    if algo == "ln" or (algo == "mixture" and cfg.mix_base == "ln"):
        from grind.cli.threads import keep_freed_blocks
        keep_freed_blocks()
    step_log = StepLog()
    trace = run.train(rng, on_step=step_log, checkpoint=ckpt, checkpoint_every=values["checkpoint_every"],
                      resume=resume, meta=meta)
    step_log.close(trace[-1] if trace else None)
    _check_last_step(trace, run.algorithm, run.n, values["max_unparsed"])
    info = run.header()
    info["config"] = config_header(ctx)
    algorithm = run.algorithm
    with output_group():              # every output file replaced, or none
        if run.joint is not None:
            (g1, g2), parser = run.joint
            w1, w2 = parser.split_weights(algorithm.weights())
            write_grammar(output, g1, w1, run.kind(), language=1, **info)
            write_grammar(values["joint_output"], g2, w2, run.kind(), language=2, **info)
        else:
            write_grammar(output, g, algorithm.weights(), run.kind(), **info)
        if values["trace_path"]:
            write_trace(values["trace_path"], trace)
        if values["ln_params"]:
            algorithm.save(values["ln_params"])


def _check_distinct_outputs(**paths):
    """Two output options naming one file would overwrite each other: a usage error."""
    given = [(k, stream_name(v)) for k, v in paths.items() if v]
    for i, (k1, p1) in enumerate(given):
        for k2, p2 in given[i + 1:]:
            if same_file(p1, p2) or p1 == p2 and p1 in ("-", STDERR):
                raise click.UsageError(f"{k1} and {k2} name the same file: {'standard output' if p2 == '-' else p2}")


#: Algorithms whose E-step is the driver's ``estep`` over the whole corpus or a minibatch (--cluster runs it).
CLUSTER_ALGOS = ("em", "vb", "stochastic", "ln", "mixture")
#: Why the others cannot use --cluster.
NOT_ON_CLUSTER = {
    "cvb": "its E-step updates one sentence at a time",
    "gibbs": "it samples one sentence at a time",
    "hastings": "it samples one sentence at a time",
    "streaming": "it parses each minibatch of the stream in this process",
}


def _check_cluster_options(cluster, algo, cfg, jobs):
    """--cluster: a valid address, an algorithm whose E-step it can run, no --jobs; Dask installed
    (all before any data is read)."""
    from grind.infer.dask_backend import parse_cluster, require_dask
    try:
        parse_cluster(cluster)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--cluster'") from None
    if algo not in CLUSTER_ALGOS:
        why = NOT_ON_CLUSTER.get(algo, "its E-step is not a sum over shards")
        raise click.UsageError(f"--cluster runs the E-step of {', '.join(CLUSTER_ALGOS)}, not --algo {algo}: {why}")
    ln_base = algo == "ln" or (algo == "mixture" and cfg.mix_base == "ln")
    if ln_base and int(cfg.model) == 1 and (cfg.ln_warm or cfg.ln_mstep != "plain"):
        raise click.UsageError(f"--cluster runs {'mixture over ' if algo == 'mixture' else ''}ln --model 1 with cold "
                               "starts and the plain M-step: "
                               f"{'--ln-warm' if cfg.ln_warm else '--ln-mstep newton'} keeps every sentence's "
                               "posterior in this process")
    if jobs > 1:
        raise click.UsageError("--jobs sets this process's E-step threads; with --cluster the workers run the "
                               "E-step (leave out --jobs)")
    require_dask()


def parser_recipe(g, sents, parser, kernel, on_trees, joint):
    """A picklable callable that builds ``parser`` again on a Dask worker (the parsers do not pickle)."""
    import functools
    from grind.kernels.select import make_parser
    if on_trees:
        from grind.kernels.latent_tree import TreeParser
        return functools.partial(TreeParser, g, parser.trees, latent=parser.latent)
    if joint is not None:
        from grind.infer.dask_backend import build_joint
        (g1, g2), _ = joint
        n1 = len(parser.parsers[0].sentences)
        return functools.partial(build_joint, g, [
            functools.partial(make_parser, g1, [s.tokens for s in sents[:n1]], kernel),
            functools.partial(make_parser, g2, [s.tokens for s in sents[n1:]], kernel)])
    return functools.partial(make_parser, g, [s.tokens for s in sents], kernel)


def cluster_estep(cluster, parser, build):
    """A :class:`grind.infer.dask_backend.DaskEstep` on the --cluster, the parser built and checked on every
    worker; the cluster (local:N) or the connection (tcp://) closes with the command."""
    from grind.infer.dask_backend import DaskEstep, dask_client
    ctx = click.get_current_context()
    client = ctx.with_resource(dask_client(cluster))
    estep = ctx.with_resource(DaskEstep(parser, build, client))
    workers = estep.check()
    log.info(f"E-step on {workers} Dask workers, in shards of {estep.shard} sentences ({len(estep.shards())} for the "
             "whole corpus)")
    return estep


#: Algorithms whose updates draw random numbers, so that nonterminals alike at the start can come apart.
SYMMETRY_BREAKING = ("gibbs", "hastings")


def _check_symmetric_start(g, path, algo, cfg, on_trees) -> None:
    """A start that a deterministic algorithm cannot leave (nonterminals alike in every rule and weight:
    :func:`grind.grammars.grammar.interchangeable`, e.g. a CNF grammar under grind init --uniform) is an
    InputError naming them and the start to take instead: it would stop at a symmetric point, exit 0."""
    from grind.grammars.grammar import interchangeable
    if algo in SYMMETRY_BREAKING or (algo == "cvb" and getattr(cfg, "cvb_init", "grammar") == "random"):
        return
    alike = interchangeable(g, g.probabilities())
    if not alike:
        return
    name = "<stdin>" if path == "-" else path
    first = alike[0]
    which = f"{', '.join(first[:4])}{' ...' if len(first) > 4 else ''} ({len(first)})"
    more = f" and {len(alike) - 1} more such group(s)" if len(alike) > 1 else ""
    fix = ("make the split grammar with noise: 'grind make-grammar treebank --subtypes H --noise 0.01 --seed 1 "
           "TREES'" if on_trees or g.meta.get("model") == "treebank" else
           f"start from 'grind init --random --seed 1 {name}' (or --algo gibbs, which samples)")
    raise InputError(f"{name}: a symmetric start: the nonterminals {which}{more} have the same rules and weights, so "
                     f"--algo {algo} keeps them identical whatever the data (they never take different roles): {fix}")


def _check_last_step(trace, algorithm, n, limit) -> None:
    """--max-unparsed on the run's last step (its ``parsed`` sentences; streaming VB: those its minibatches
    skipped): a model that lost its sentences is not written."""
    parsed = trace[-1].extra.get("parsed") if trace else None
    if isinstance(parsed, (int, np.integer)) and isinstance(n, int) and getattr(algorithm, "batches", None) is None:
        check_unparsed(n - int(parsed), n, limit, "sentences in the last step")
    elif getattr(algorithm, "consumed", 0):
        check_unparsed(int(getattr(algorithm, "unparsed", 0)), int(algorithm.consumed), limit, "sentences")


class StepLog:
    """The step lines on stderr: every one of the first :attr:`EVERY` steps, then those
    with held-out figures or a stop note and at most one a second (a streaming run of
    one-sentence minibatches makes hundreds of steps a second; --trace has them all)."""

    EVERY = 100

    def __init__(self):
        import time
        self.clock, self.last, self.n, self.hidden = time.monotonic, 0.0, 0, 0
        self.shown = None               # the last step shown, and whether with held-out figures

    def __call__(self, st):
        self.n += 1
        now = self.clock()
        dev = any(k.startswith("dev_") for k in st.extra)
        if self.n <= self.EVERY or now - self.last >= 1.0 or "stopped" in st.extra or dev:
            log.info(format_step(st))
            self.last, self.shown = now, (st, dev)
        else:
            self.hidden += 1

    def close(self, last=None):
        """The run's last step again when held-out figures were added to it after it was shown (--eval-at's
        evaluation at the end), and how many lines were not shown."""
        if last is not None and any(k.startswith("dev_") for k in last.extra) and self.shown != (last, True):
            log.info(format_step(last))
        if self.hidden:
            log.info(f"({self.hidden} of {self.n} step lines not shown: at most one a second after the first "
                     f"{self.EVERY}; --trace FILE has every step)")


def format_step(s) -> str:
    extra = "  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.extra.items())
    return f"step {s.step:4d}  objective {s.objective:.6f}  sentences {s.sentences}  {s.seconds:.2f}s  {extra}"
