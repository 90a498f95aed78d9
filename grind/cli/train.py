"""``grind train`` and what only it uses (the --algo table, option checks)."""
from __future__ import annotations

import os

import click
import numpy as np

from grind import log
from grind.formats.corpus import peek_format, read_corpus
from grind.errors import InputError
from grind.grammars.grammar import PSEUDO_COUNTS
from grind.formats.textio import STDERR, is_stream, output_group, same_file, stream_name
from grind.infer import NAMES, RANDOM_ALGOS
from grind.cli.common import (corpus_options, output_option, seed_option, start_option, kernel_option, OutputPath,
                              FiniteFloatRange, AlphaType, _given, make_rng, write_grammar, read_probabilities, load,
                              known_failures, report_failures, load_trees, left_out,
                              TREES_TEXT, check_tree_options)

#: --algo choices; the classes are :data:`grind.infer.registry.ALGORITHMS` (imported when one runs).
ALGORITHMS = NAMES
#: Algorithms whose minibatches come from the corpus file as a stream (grind.infer.training.StreamBatches).
STREAMING = ("streaming",)
#: Algorithms that draw minibatches from a corpus indexed on disk (grind.infer.corpus_index), never
#: holding it: its tokens spooled to a temporary file, a minibatch's parser at a time.  Not with
#: --cluster (the workers build the whole corpus's parser), nor with IN_MEMORY_ENV set.
ON_DISK = ("stochastic",)
#: Set (to anything non-empty), stochastic VB loads the corpus and its parser whole, as before the
#: index on disk (the same results; kept for tests and measurements).
IN_MEMORY_ENV = "GRIND_STOCHASTIC_IN_MEMORY"


@click.command()
@click.option("--algo", type=click.Choice(list(ALGORITHMS)), default="em", show_default=True,
              help="Inference algorithm.")
@click.option("--iterations", type=click.IntRange(1), default=None,
              help="Iterations (batch algorithms, sweeps of the samplers and of cvb); for ln a cap "
                   "[default: the algorithm's: 50; ln: 1000, with --tolerance 1e-5: run to convergence; "
                   "mixture: 20].")
@click.option("--epochs", type=click.IntRange(1), default=1, show_default=True,
              help="Passes over the corpus (stochastic).")
@click.option("--batch", type=click.IntRange(1), default=1000, show_default=True,
              help="Minibatch size (streaming, stochastic).")
@click.option("--first-batch", type=click.IntRange(1), default=None,
              help="Size of the first minibatch (streaming; default --batch).")
@click.option("--batch-iterations", type=click.IntRange(1), default=5, show_default=True,
              help="VB iterations per minibatch (streaming, stochastic).")
@click.option("--tau", type=FiniteFloatRange(0), default=1.0, show_default=True,
              help="Step size delay: eta_t = (tau + t)^-kappa (stochastic).")
@click.option("--kappa", type=FiniteFloatRange(0.5, 1.0), default=0.7, show_default=True,
              help="Step size decay (stochastic).")
@click.option("--update", type=click.Choice(["hoffman", "pate-johnson"]), default="hoffman", show_default=True,
              help="Stochastic VB update: Hoffman et al. (prior inside the step) or Pate & Johnson (prior outside).")
@click.option("--cvb-init", type=click.Choice(["grammar", "random"]), default="grammar", show_default=True,
              help="cvb: per-sentence counts start from an E-step under the init grammar, or under randomly "
                   "perturbed weights.")
@click.option("--temp-start", type=FiniteFloatRange(1.0), default=1.0, show_default=True,
              help="Annealing: initial temperature, lowered linearly to 1 (hastings, gibbs).  gibbs anneals the "
                   "joint of trees and theta (theta ~ Dir(f/T + alpha), trees under theta^(1/T)); hastings the "
                   "collapsed posterior, P(t | alpha)^(1/T).")
@click.option("--constraints", "mix_constraints", default="RA+VAR+SD", show_default=True,
              help="mixture: prior-knowledge components, '+' intersects, ',' separates components: "
                   "RA RightAttach, AR AllRight, LC LeftChain, VAR VerbAsRoot, NS NounSequence, SD ShortDep (<= 4).")
@click.option("--base", "mix_base", type=click.Choice(["ln", "vb", "em"]), default="ln", show_default=True,
              help="mixture: the model the components are added to: ln = logistic-normal mean-field variational "
                   "EM (the paper's; takes the ln options --cov, --families, --model, --ln-cycles), vb = Dirichlet "
                   "mean-field VB (--alpha), em = MAP-EM point estimate (--alpha).")
@click.option("--mix-schedule", type=click.Choice(["I", "II", "III", "annealed", "fixed-0.85", "fixed-0.95"],
                                                  case_sensitive=False), default="I", show_default=True,
              help="mixture: the polytope of coefficients: I = annealed (the mean-field coefficient is at most "
                   "--mix-start, the cap rising 1% a step to --mix-end), II = mean-field fixed at 0.85, "
                   "III = fixed at 0.95; the C-step splits the rest among the --constraints components.")
@click.option("--mix-start", type=FiniteFloatRange(0, 1), default=0.85, show_default=True,
              help="mixture, schedule I: the cap on the mean-field coefficient at step 0 ...")
@click.option("--mix-end", type=FiniteFloatRange(0, 1), default=0.95, show_default=True,
              help="mixture, schedule I: ... rising by 0.01 a step up to this.")
@click.option("--mix-coef", default=None, callback=lambda ctx, p, v: _number_list(v, "--mix-coef"),
              help="mixture: fixed coefficients instead of a schedule (no C-step), mean-field first, e.g. 0.85,0.15.")
@click.option("--model", type=click.Choice(["1", "2"]), default="1", show_default=True,
              help="ln: model I (theta drawn per sentence) or II (drawn once).")
@click.option("--cov", "ln_cov", type=click.Choice(["identity", "families"]), default="identity", show_default=True,
              help="ln: initial covariance: identity, or 0.5 between rules whose symbols share a tag family.")
@click.option("--families", default="upos", show_default=True,
              help="ln: tag-family mapping for --cov families and --tie V|N|VN|A: upos, ptb "
                   "(grind/data/families-*.txt, every tag in a family), or a file of 'TAG FAMILY' lines.")
@click.option("--ln-cycles", type=click.IntRange(1), default=5, show_default=True,
              help="ln: E-step cycles (mu, sigma^2, zeta, inside-outside) per iteration.")
@click.option("--ln-warm", is_flag=True,
              help="ln: start each E-step from the previous one's variational parameters (the bound then never "
                   "decreases within one prior structure: --tie's warm-up switch may lower it; model I keeps two "
                   "floats per sentence and expert coordinate; model II reuses the previous iteration's last "
                   "parse as the first, so --model 2 --ln-cycles 1 --ln-warm parses the corpus once an "
                   "iteration).")
@click.option("--ln-mstep", type=click.Choice(["plain", "newton"]), default="plain", show_default=True,
              help="ln: M-step for mu: plain = Algorithm 3 (mean of the posterior means, the paper's); newton = a "
                   "diagonal Newton-scaled step to the same fixed points, accepted only if the bound for this "
                   "iteration's expected counts is at least the plain step's (faster convergence).")
@click.option("--ln-params", type=OutputPath(), default=None,
              help="ln: also write the learned mu and Sigma (plain text) here.")
@click.option("--ln-init", default=None,
              help="ln: start from the mu, Sigma and expert structure of this --ln-params file "
                   "(instead of the grammar's weights and --cov / --tie).")
@click.option("--tie", default=None,
              help="ln: shared logistic normal (Cohen & Smith 2010 §3.3): V (TieV), N (TieN), VN (TieV&N), A (TieA) "
                   "tie the DMV multinomials of heads in one tag family (--families, --tie-what); or a structure "
                   "file (see grind make-structure).")
@click.option("--tie-what", type=click.Choice(["choose+stop", "choose"]), default="choose+stop", show_default=True,
              help="ln --tie V|N|VN|A: tie the choose and the stop multinomials of a family's heads, or the "
                   "choose multinomials only.")
@click.option("--tie-warmup", type=click.IntRange(0), default=None,
              help="ln --tie: the first N iterations train the untied logistic normal, then the tied structure "
                   "takes over from its means (0: tied from the start).  [default: 5 with --tie; ours, the "
                   "papers' number was not found]")
@click.option("--joint", nargs=2, default=None, metavar="GRAMMAR2 CORPUS2",
              help="ln: bilingual tying (§5.4): train a second language's grammar on its corpus jointly, "
                   "--tie experts spanning both languages through the tag families.")
@click.option("--joint-output", type=OutputPath(), default=None,
              help="ln --joint: where the second language's grammar goes.")
@click.option("--anneal-sweeps", type=click.IntRange(1), default=None,
              help="Sweeps over which the temperature falls to 1 (default: all --iterations).")
@click.option("--proposal-batch", type=click.IntRange(1), default=1, show_default=True,
              help="hastings: draw the proposals of this many sentences in one kernel call from the grammar of "
                   "the other sentences' trees (1: one call per sentence; exact either way, but a batch that is "
                   "a large share of the corpus proposes from little data and can mix far more slowly).")
@click.option("--tolerance", type=FiniteFloatRange(0), default=None,
              help="Stop when the objective's relative gain is below this.  ln: stop when the variational "
                   "bound's relative change |B_t - B_t-1| / |B_t-1| is at most this [ln default: 1e-5]; the "
                   "trace's 'stopped' column says whether the run converged or reached --iterations.  Not for "
                   "gibbs, hastings (they run their sweeps), streaming, stochastic (their passes).  [default: the "
                   "algorithm's: 1e-06; ln: 1e-05]")
@click.option("--alpha", type=AlphaType(), default="1.0", show_default=True,
              help="Dirichlet hyperparameter: a number (symmetric); a number and per-LHS numbers, 1e-20,Stem=1e-15 "
                   "(the rules of LHS Stem 1e-15, every other rule 1e-20); or a grammar file of per-rule "
                   "pseudo-counts. EM: MAP estimate (1 = maximum likelihood).")
@click.option("--universal-rules", "universal_rules", is_flag=False, flag_value="ud", default=None,
              metavar="[ud|naseem|FILE]",
              help="em, vb, cvb on a DMV: posterior regularization toward these head>dependent rules (no value: ud, "
                   "Naseem et al. 2010's adapted to UD content heads; naseem: theirs; FILE: 'HEAD DEP' lines).")
@click.option("--rule-fraction", type=FiniteFloatRange(0, 1), default=None,
              help="With --universal-rules: the share of arcs that must follow them in expectation [default: 0.8].")
@click.option("--trace", "trace_path", type=OutputPath(), default=None, help="Also write the trace as TSV here.")
@click.option("--dev", "dev_path", default=None,
              help="Held-out corpus for --eval-every (read with the same corpus options).")
@click.option("--eval-every", type=click.IntRange(0), default=0, show_default=True,
              help="Every N steps: held-out log probability / perplexity under the posterior mean (and accuracy "
                   "for treebanks).")
@click.option("--early-stop", is_flag=True,
              help="With --eval-every: stop when the held-out log probability decreases, keeping the previous "
                   "parameters (Cohen & Smith 2010, Algorithm 1).")
@click.option("--patience", type=click.IntRange(1), default=1, show_default=True,
              help="With --early-stop: stop when the held-out log probability has stayed below its best for this "
                   "many evaluations in a row, keeping the best state (1 = Algorithm 1: the first decrease).")
@click.option("--checkpoint", "ckpt", type=OutputPath(regular=True), default=None,
              help="Checkpoint file (.npz; a regular file, not - or a FIFO or device), written atomically, "
                   "through a symlink to its target.")
@click.option("--checkpoint-every", type=click.IntRange(0), default=0, show_default=True,
              help="Write --checkpoint every N steps too (0: only when the run ends, so an interrupted run "
                   "leaves none to resume from).")
@click.option("--resume", is_flag=True, help="Continue from --checkpoint; ends bit-identical to an uninterrupted run.")
@click.option("--jobs", type=click.IntRange(1), default=1, show_default=True,
              help="Threads for the E-step (results do not depend on it).")
@click.option("--cluster", default=None, metavar="local:N|tcp://HOST:PORT",
              help="Run the E-step's shards (256 sentences each) as tasks on a Dask cluster, summed here in "
                   "shard order: the grammar is the single-process one bit for bit, whatever the number of "
                   "workers.  local:N starts N single-threaded worker processes on this machine for the run; "
                   "tcp://HOST:PORT connects to a running Dask scheduler.  On SLURM / PBS: start one with "
                   "dask-jobqueue in a Python session that stays open, cluster = SLURMCluster(cores=1, "
                   "processes=1, memory='4GB', walltime='04:00:00', python='/path/to/.venv/bin/python') (or "
                   "PBSCluster(...)), cluster.scale(jobs=16), and pass cluster.scheduler_address here.  For em, vb, "
                   "stochastic, ln (--model 1: cold starts, plain M-step; each shard's posteriors are fitted and "
                   "summed on its worker), mixture (each worker runs the constrained components too) and "
                   "--trees; needs pip install 'grind[dask]' here and the same grind "
                   "on the workers.")
@click.option("--trees", "on_trees", is_flag=True,
              help="CORPUS (and --dev) are PTB bracketed trees: train a latent-annotation grammar (grind make-grammar "
                   "treebank --subtypes H) on the gold trees with the subtypes hidden (em, vb, cvb, gibbs); --dev "
                   "with --eval-every N reports the held-out trees' log probability and the labeled F1 of parsing "
                   "them every N steps.")
@corpus_options
@kernel_option
@seed_option
@start_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def train(grammar, corpus, spec, algo, on_trees, iterations, tolerance, alpha, trace_path, dev_path, eval_every,
          early_stop, patience, ckpt, checkpoint_every, resume, jobs, cluster, kernel, seed, start, output, **opts):
    """Train GRAMMAR's weights on CORPUS; write the trained grammar.

    \b
    em          inside-outside EM / MAP-EM (--alpha); writes probabilities.
    vb          batch mean-field VB (Kurihara & Sato 2006).
    cvb         collapsed VB (Wang & Blunsom 2013).
    streaming   streaming VB over minibatches of a stream (Broderick et al. 2013).
    stochastic  stochastic VB, step (tau + t)^-kappa (Hoffman et al. 2010).
    gibbs       Gibbs sampler for (t, theta) (Johnson, Griffiths & Goldwater 2007).
    hastings    collapsed Metropolis-Hastings sampler, annealed from --temp-start.
    mixture     DMV only: posterior-mixture constraints (Cohen & Smith 2009):
                the --base model (default ln) with its posterior over trees
                a mixture of the unconstrained one and --constraints
                components, coefficients by --mix-schedule (C-step);
                20 iterations unless --iterations is given.
    ln          logistic-normal prior, variational EM (Cohen & Smith 2010),
                model I or II (--model), --cov identity|families; shared
                logistic normal with --tie V|N|VN|A|FILE (--tie-what,
                after --tie-warmup untied iterations), two languages with
                --joint; writes softmax of the mean (and mu, Sigma with
                --ln-params).  Runs to convergence: until the bound's
                relative change is <= --tolerance (default 1e-5 for ln),
                at most --iterations (default 1000 for ln).
    All but em, ln and mixture over em or ln write the posterior Dirichlet pseudo-counts (grind parse and
    loglik use their mean).  The per-step objective (log-likelihood + log
    prior, variational bound, or collapsed log probability) goes to stderr,
    and with --trace to a TSV file.

    \b
    Examples (C="--column UPOS --punct ud", the options g1.txt was made with):
      grind train --algo em --iterations 30 $C g1.txt train.conllu > g.txt
      grind train --algo vb --alpha 0.1 --dev dev.conllu --eval-every 5 $C g1.txt train.conllu > post.txt
      grind train --algo vb --alpha 0.1 --cluster local:8 $C g1.txt train.conllu > post.txt
    """
    from grind.infer.training import (ShardedEstep, heldout, is_checkpoint, prior_vector, train as run_training,
                                      write_trace)
    # a resumed run's generator state comes from the checkpoint: nothing to draw
    rng = make_rng(seed, random=algo in RANDOM_ALGOS and not resume)
    if resume and not ckpt:
        raise click.UsageError("--resume needs --checkpoint FILE")
    if checkpoint_every and not ckpt:
        raise click.UsageError("--checkpoint-every needs --checkpoint FILE")
    if ckpt and ckpt.endswith((".gz", ".xz", ".bz2")):
        raise click.UsageError(f"--checkpoint {ckpt}: a checkpoint is an .npz archive (compressed already), "
                               "not a .gz / .xz / .bz2 file: give a name without that suffix")
    _check_distinct_outputs(**{"-o/--output": output, "--trace": trace_path, "--checkpoint": ckpt,
                               "--ln-params": opts.get("ln_params"), "--joint-output": opts.get("joint_output")})
    if resume:
        try:
            open(ckpt, "rb").close()
        except OSError as e:
            raise InputError(f"--checkpoint {ckpt}: cannot read (needed by --resume): {e.strerror}") from None
    elif ckpt and is_checkpoint(ckpt):
        raise click.UsageError(f"--checkpoint {ckpt} holds a run's saved state already, which this run would "
                               "overwrite: give --resume to continue it, or remove it (or give another path) to "
                               "start afresh")
    if eval_every and not dev_path:
        raise click.UsageError("--eval-every needs --dev FILE")
    if dev_path and not eval_every:
        raise click.UsageError("--dev FILE is evaluated every --eval-every N steps: give --eval-every")
    if early_stop and not eval_every:
        raise click.UsageError("--early-stop needs --eval-every N --dev FILE")
    if patience > 1 and not early_stop:
        raise click.UsageError("--patience needs --early-stop")
    params = click.get_current_context().params
    from grind.infer.registry import CONFIG_OF
    cfg = CONFIG_OF[algo].from_options(dict(params, spec=spec))   # None: the algorithm's default
    _check_ln_options(algo, opts, dev_path)
    _check_mixture_options(algo, cfg)
    _check_algorithm_options(algo, CONFIG_OF)
    _check_unread_options(algo, cfg)
    if cluster is not None:
        _check_cluster_options(cluster, algo, cfg, jobs)
    _check_rule_options(algo, opts)
    joint = index = sents = None
    failed0 = 0
    if on_trees:
        check_tree_options(algo, spec, opts)
        g, sents, parser = load_trees(grammar, corpus, start, "grind train", normalise=True)
        failed0 = report_failures(sents, parser, known_failures(parser, len(sents)), "trees")
        estep, n = ShardedEstep(parser, jobs), len(sents)
    elif opts.get("joint"):
        g, sents, parser, joint = load_joint(grammar, corpus, opts["joint"], spec, start, kernel)
        failed0 = report_failures(sents, parser, known_failures(parser, len(sents)))
        estep, n = ShardedEstep(parser, jobs), len(sents)
    elif algo in STREAMING:
        if is_stream(corpus):
            raise click.UsageError("--algo streaming reads CORPUS twice (its fingerprint for the header and "
                                   "checkpoints, then the training pass) and never holds it: give a file, not "
                                   "standard input or a pipe")
        g, estep, n = read_probabilities(grammar, start, "grind train", True), None, "a stream of"
    elif algo in ON_DISK and cluster is None and not os.environ.get(IN_MEMORY_ENV):
        g = read_probabilities(grammar, start, "grind train", True)
        index = click.get_current_context().with_resource(index_on_disk(g, grammar, corpus, spec, kernel))
        failed0 = index.report()
        from grind.infer.corpus_index import FileEstep
        estep, n = FileEstep(index, jobs), index.n
    else:
        g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind train", normalise=True,
                                tokens_only=True)
        if algo in ON_DISK:              # stochastic VB: its pool and N leave out what no weights can parse
            from grind.infer.corpus_index import mark_underivable
            mark_underivable(parser, g)
        failed0 = report_failures(sents, parser, known_failures(parser, len(sents)))
        estep, n = ShardedEstep(parser, jobs, on_first=lambda z: _name_zero_parses(sents, parser, z, g)), len(sents)
    universal = None
    if opts.get("universal_rules"):
        estep, universal = regularized_estep(g, estep, opts["universal_rules"], opts.get("rule_fraction"))
    prior = prior_vector(g, alpha)
    read_as = getattr(sents, "format", None) or getattr(index, "format", None) or peek_format(corpus, spec)
    corpus_text = TREES_TEXT if on_trees else spec.describe(read_as)
    log.info(f"training {algo} on {n} {'trees' if on_trees else 'sentences'} ({corpus_text}), {len(g)} rules")
    from grind.infer.training import check_checkpoint, fingerprint_sentences, run_meta
    flags = {p.name: max(p.opts, key=len) for p in click.get_current_context().command.params if p.opts}
    from grind.formats.corpus import iter_corpus
    if index is not None:
        corpus_fp = index.fingerprint
    else:
        corpus_fp = fingerprint_sentences(s.tokens for s in (iter_corpus(corpus, spec) if algo in STREAMING else sents))
    # the annealing length of gibbs / hastings is --iterations' value, as resolved by the config
    meta = run_meta(dict(params, iterations=cfg.iterations), flags, grammar=g, theta0=g.probabilities(), prior=prior,
                    corpus_fp=corpus_fp, algo=algo, spec_text=corpus_text)
    if resume:
        check_checkpoint(ckpt, meta)     # a changed option stops the run before any work
    if cluster is not None:
        estep = cluster_estep(cluster, parser, parser_recipe(g, sents, parser, kernel, on_trees, joint))
        if universal is not None:
            estep, _ = regularized_estep(g, estep, opts["universal_rules"], opts.get("rule_fraction"))
    algorithm = make_algorithm(algo, g, estep, prior, g.probabilities(), cfg, rng)
    if algo == "ln" or (algo == "mixture" and getattr(cfg, "mix_base", None) == "ln"):
        from grind.cli.threads import keep_freed_blocks
        keep_freed_blocks()
    eval_fn = None
    if dev_path and on_trees:
        eval_fn = tree_dev_evaluation(g, parser, dev_path)
    elif dev_path:
        dev_sents = read_corpus(dev_path, spec)
        from grind.kernels.select import make_parser
        dev = make_parser(g, [s.tokens for s in dev_sents], kernel)
        eval_fn = lambda a: heldout(dev, a.mean(), dev_sents)  # noqa: E731
    trace = run_training(algorithm, rng, eval_fn=eval_fn, eval_every=eval_every, checkpoint=ckpt,
                         checkpoint_every=checkpoint_every, resume=resume, meta=meta,
                         on_step=lambda s: log.info(format_step(s)), early_stop=early_stop,
                         patience=patience)
    kind = "probabilities" if algorithm.output == "probabilities" else f"{PSEUDO_COUNTS} (posterior)"
    from grind.infer.training import run_summary
    last = trace[-1] if trace else None
    summary = run_summary(trace)
    from grind.infer.registry import unread_options
    info = dict(algorithm=algo, alpha=None if "alpha" in unread_options(algo, cfg) else alpha,
                steps=summary["steps"], objective=summary["objective"], corpus=corpus_text,
                left_out=left_out(sents if sents is not None else index if index is not None else
                                  getattr(algorithm.batches, "read", lambda: None)(), "not trained on"),
                stopped=summary.get("stopped"))
    from grind.infer.training import unparsed_note
    note = unparsed_note(algo, algorithm, trace, n, failed0, "trees" if on_trees else "sentences")
    if note:
        info["unparsed"] = note
    if universal is not None:
        info.update(universal)
        if last is not None and "rule_share" in last.extra:
            info["rule_share"] = (f"{last.extra['rule_share']:.6f} of the arcs under the projected posterior of the "
                                  f"last step (lambda {last.extra['pr_lambda']:.6g}; "
                                  f"{last.extra['rule_share_p']:.6f} before the projection)")
    from grind.grammars.dmv_constraints import header_constraints
    info.update(header_constraints(g))
    unseen = _unseen_tags(g, sents)
    if unseen:
        info["unseen_tags"] = unseen
    if on_trees:
        from grind.grammars.latent import treebank_meta
        info.update(treebank_meta(g))
    if hasattr(algorithm, "st"):
        info["structure"] = algorithm.st.describe()
    if algo == "mixture":
        info["mixture"] = algorithm.describe()
    if hasattr(algorithm, "mstep"):
        info["ln_mstep"] = algorithm.mstep
    from grind.infer.training import unfinished_annealing
    t_end = unfinished_annealing(trace)
    if t_end:                         # a tempered state, not a posterior one: said in the header and on stderr
        info["temperature"] = f"{t_end:.6g} (the annealing had not reached 1)"
        log.warn(f"the run ended at step {last.step} at temperature {t_end:.4g}, before the annealing (over "
                 "--anneal-sweeps, else --iterations) reached 1: the written state is a tempered one; continue with "
                 "--checkpoint FILE --resume and more --iterations to finish it")
    with output_group():              # every output file replaced, or none
        if joint is not None:
            (g1, g2), parser = joint
            w1, w2 = parser.split_weights(algorithm.weights())
            write_grammar(output, g1, w1, kind, language=1, **info)
            write_grammar(opts["joint_output"], g2, w2, kind, language=2, **info)
        else:
            write_grammar(output, g, algorithm.weights(), kind, **info)
        if trace_path:
            write_trace(trace_path, trace)
        if opts.get("ln_params"):
            algorithm.save(opts["ln_params"])


def index_on_disk(g, grammar_path, corpus, spec, kernel):
    """The :func:`grind.infer.stochastic.index_corpus` of ``corpus`` (one pass;
    its tokens spooled to a temporary file, said on stderr); an error of the
    grammar's names its file, as :func:`grind.cli.common.load` does."""
    from grind.infer.stochastic import index_corpus
    name = "<stdin>" if grammar_path == "-" else grammar_path
    index = index_corpus(g, corpus, spec, kernel, where=name)
    what = {"-": "standard input"}.get(corpus, corpus)
    log.info(f"{what}: the tokens of its {index.n} sentences are spooled to a temporary file "
             f"({index.spool.nbytes / 2**20:.1f} MiB, deleted at the end); each minibatch is read back from it "
             "and parsed alone")
    return index


#: Algorithms whose E-step --universal-rules projects (collapsed VB: once a sweep, see grind.infer.posterior_reg).
RULE_ALGOS = ("em", "vb", "cvb")


def _check_rule_options(algo, opts):
    """--universal-rules with em, vb or cvb; --rule-fraction only with it."""
    if opts.get("universal_rules") and algo not in RULE_ALGOS:
        raise click.UsageError(f"--universal-rules projects the E-step of {', '.join(RULE_ALGOS)}, not of "
                               f"--algo {algo}")
    if opts.get("rule_fraction") is not None and not opts.get("universal_rules"):
        raise click.UsageError("--rule-fraction is the share of arcs --universal-rules asks for: give "
                               "--universal-rules")


def regularized_estep(g, estep, rules, fraction):
    """:func:`grind.infer.posterior_reg.regularize`, said on stderr."""
    from grind.infer.posterior_reg import regularize
    estep, head = regularize(g, estep, rules, fraction)
    log.info(f"universal rules {head['universal_rules']}; {head['rule_fraction']}")
    return estep, head


def _unseen_tags(g, sents) -> str | None:
    """The header line naming a DMV grammar's head types that no training sentence has (said on stderr):
    point estimates give their root and attach rules probability 0, so grind parse backs off for them."""
    from grind.grammars.dmv import dmv_index, is_dmv_grammar
    if sents is None or not is_dmv_grammar(g) or g.meta.get("lexicalized") == "true":
        return None
    seen = {t for s in sents for t in s.tokens}
    unseen = [t for t in dmv_index(g).types if t not in seen]
    if not unseen:
        return None
    note = (f"{len(unseen)} of the grammar's {len(dmv_index(g).types)} tags are in no training sentence "
            f"({' '.join(unseen)}): their root and attach rules learn nothing (0 under em); grind parse backs off "
            "for a sentence that has one")
    log.info(note)
    return note


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


def tree_dev_evaluation(g, train_parser, dev_path):
    """The --dev evaluation of a --trees run: the held-out gold trees' log
    probability (subtypes summed out) under the posterior mean, and labeled
    F1 (EVALB conventions) of max-rule-sum parses of their sentences."""
    from grind.cli.common import read_prepared_trees
    from grind.eval.labeled import evaluate_labeled
    from grind.formats.trees import TRACE_TAGS, leaves, map_leaves, prune
    from grind.formats.treebank import debinarise
    from grind.infer.training import heldout
    from grind.kernels.latent_parse import LatentParser
    from grind.kernels.latent_tree import TreeParser
    latent = train_parser.latent
    prepared, items, _, raw = read_prepared_trees(dev_path, latent)
    dev = TreeParser(g, prepared, latent=latent)
    gold = [raw[it.number - 1] for it in items]
    words = [leaves(prune(t, TRACE_TAGS.__contains__)) for t in gold]
    sents = [[latent.terminal(w) for w in it.tokens] for it in items]

    def evaluate(a):
        theta = a.mean()
        out = heldout(dev, theta)
        results = LatentParser(g, weights=theta, latent=latent).parse(sents)
        pred = [("NOPARSE", *ws) if r.tree is None else map_leaves(debinarise(r.tree), _feed(ws))
                for r, ws in zip(results, words)]
        out["dev_f1"] = evaluate_labeled(gold, pred)["all"]["labeled_f1"]
        return out

    return evaluate


def _feed(words):
    """A leaf function giving ``words`` in order (the gold words back in place of signatures)."""
    it = iter(words)
    return lambda _: next(it)


def _number_list(value, option):
    """``value`` (comma-separated numbers) unchanged, or a usage error naming ``option``."""
    if value is not None:
        try:
            [float(x) for x in value.split(",")]
        except ValueError:
            raise click.BadParameter(f"not a comma-separated list of numbers: {value!r}",
                                     param_hint=f"'{option}'") from None
    return value


#: The train options that only --algo mixture reads.
MIXTURE_OPTIONS = ("mix_constraints", "mix_base", "mix_schedule", "mix_start", "mix_end", "mix_coef")


def _check_mixture_options(algo, cfg):
    """Mixture options given without --algo mixture, or --mix-coef with
    --mix-schedule, are usage errors (without --iterations, mixture runs the
    paper's :data:`grind.infer.mixture.MIX_ITERATIONS`: its config's default)."""
    given = [n for n in MIXTURE_OPTIONS if _given(n)]
    opt = {n: "--" + n.replace("_", "-") for n in MIXTURE_OPTIONS}
    opt.update(mix_constraints="--constraints", mix_base="--base")
    if algo != "mixture":
        if given:
            raise click.UsageError(f"{opt[given[0]]} is for --algo mixture")
        return
    if "mix_coef" in given and "mix_schedule" in given:
        raise click.UsageError("--mix-coef fixes the coefficients: leave out --mix-schedule")
    if cfg.mix_start > cfg.mix_end:
        raise click.UsageError(f"--mix-start {cfg.mix_start} is above --mix-end {cfg.mix_end}")
    from grind.infer.mixture import _fixed_coef, parse_mixture_spec
    try:
        k = len(parse_mixture_spec(cfg.mix_constraints))
    except InputError as e:
        raise click.BadParameter(str(e), param_hint="'--constraints'") from None
    try:
        _fixed_coef(cfg.mix_coef, k)
    except InputError as e:
        raise click.BadParameter(str(e).replace("mix_coef: ", ""), param_hint="'--mix-coef'") from None


def _name_zero_parses(sents, parser, logz, g) -> None:
    """After the first E-step: name the sentences with no parse of positive probability under the initial
    weights (those with a word the grammar lacks were named at loading), and among them those the grammar
    cannot derive under any weights (no parse under uniform rule probabilities either)."""
    z = np.array(logz, dtype=np.float64)
    z[list(parser.failures)] = 0.0
    bad = np.flatnonzero(~np.isfinite(z))
    if len(bad):
        from grind.infer.corpus_index import mark_underivable
        mark_underivable(parser, g, bad)
        log.warn("under the initial weights (left out of the first pass; a sentence whose rules all get positive "
                 "weight is parsed again):")
        report_failures(sents, parser, z)


def _check_algorithm_options(algo, configs):
    """An option of other algorithms' configs given with --algo ALGO would do nothing: a usage error."""
    ctx = click.get_current_context()
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params if isinstance(p, click.Option)}
    mine = set(configs[algo].names())
    for name in sorted({n for c in configs.values() for n in c.names()} - mine):
        if name in flags and _given(name):
            owners = ", ".join(a for a, c in configs.items() if name in c.names())
            raise click.UsageError(f"{flags[name]} is an option of --algo {owners}, not of --algo {algo}")


def _check_unread_options(algo, cfg):
    """An option that --algo ALGO does not read, given, would do nothing: a usage error."""
    from grind.infer.registry import unread_options
    flags = {p.name: max(p.opts, key=len) for p in click.get_current_context().command.params
             if isinstance(p, click.Option)}
    for name, why in unread_options(algo, cfg, lambda n: f"--{n.replace('_', '-')}").items():
        if name in flags and _given(name):
            raise click.UsageError(f"--algo {algo} does not read {flags[name]}: {why}")


def _check_ln_options(algo, opts, dev_path):
    """Options that only --algo ln understands, and what --joint needs (--tie
    without --tie-warmup: :meth:`grind.infer.ln.LNConfig.from_options` gives
    :data:`grind.infer.ln.TIE_WARMUP`)."""
    for name in ("tie", "joint", "joint_output", "ln_init", "tie_warmup", "ln_params"):
        if opts.get(name) and algo != "ln":
            raise click.UsageError(f"--{name.replace('_', '-')} is for --algo ln")
    if opts.get("ln_mstep", "plain") != "plain" and algo != "ln":
        raise click.UsageError("--ln-mstep is for --algo ln")
    if opts.get("ln_init") and opts.get("tie"):
        raise click.UsageError("--ln-init brings its own expert structure; leave out --tie")
    if opts.get("tie_warmup") is not None and not opts.get("tie"):
        raise click.UsageError("--tie-warmup needs --tie")
    if opts.get("joint_output") and not opts.get("joint"):
        raise click.UsageError("--joint-output is the second language's grammar of --joint GRAMMAR2 CORPUS2")
    if _given("tie_what") and not opts.get("tie"):
        raise click.UsageError("--tie-what needs --tie V|N|VN|A")
    if algo == "ln" and _given("families") and opts.get("ln_cov") != "families" and not opts.get("tie"):
        raise click.UsageError("--families is read by --cov families and --tie V|N|VN|A; give one of them")
    if opts.get("joint"):
        if not opts.get("joint_output"):
            raise click.UsageError("--joint needs --joint-output FILE for the second language's grammar")
        if dev_path:
            raise click.UsageError("--dev is not supported with --joint (evaluate each language's grammar after "
                                   "training)")


def load_joint(grammar, corpus, second, spec, start, kernel):
    """Two languages' grammars and corpora as one joint grammar (symbols
    prefixed ``1|`` and ``2|``) and a :class:`grind.infer.sln.JointParser`."""
    from grind.infer.sln import JointParser, joint_grammar
    g1, s1, p1 = load(grammar, corpus, spec, start, kernel, "grind train", normalise=True)
    g2, s2, p2 = load(second[0], second[1], spec, None, kernel, "grind train", normalise=True)
    g = joint_grammar([g1, g2], ["1", "2"])
    parser = JointParser(g, [p1, p2])
    return g, s1 + s2, parser, ((g1, g2), parser)


def make_algorithm(algo, g, estep, prior, theta0, cfg, rng):
    """An instance of the --algo class (:data:`grind.infer.registry.ALGORITHMS`)."""
    from grind.infer.registry import ALGORITHMS as classes
    return classes[algo](g, estep, prior, theta0, cfg, rng)


def format_step(s) -> str:
    extra = "  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.extra.items())
    return f"step {s.step:4d}  objective {s.objective:.6f}  sentences {s.sentences}  {s.seconds:.2f}s  {extra}"
