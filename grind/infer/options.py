"""The options of a training run, each declared once: ``grind train``'s
click options (:mod:`grind.cli.options`), ``grind.fit``'s keywords and the
algorithms' typed configurations (:mod:`grind.infer.config`) are all made
from :data:`OPTIONS`, and :func:`check_options` holds every check of how
they combine, worded for the command line or for Python by a :class:`Namer`.

An :class:`Opt` says an option's name (the config field, the ``grind.fit``
keyword and the click parameter), type, default (and the algorithms whose
default differs), range or choices, one line of help, its heading in
``grind train --help`` (:data:`GROUPS`), which algorithms read it, and where
it exists (the command line, Python, or both).  Its ``doc`` is the longer
explanation that goes to ``docs/reference/train.md``.  Adding an option is
adding an :class:`Opt` here (see CONTRIBUTING.md).

This module imports nothing heavy: the command line builds its help from it
without loading the algorithms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from grind.errors import GrindError, InputError

#: The algorithm names (``grind train --algo``), in the order of :data:`grind.infer.registry.ALGORITHMS`.
NAMES = ("em", "vb", "cvb", "streaming", "stochastic", "gibbs", "hastings", "mixture", "ln")
#: ``algos`` of an option every algorithm reads (:data:`UNREAD` says where one does not).
ALL = NAMES

# The defaults that differ per algorithm or that code elsewhere names (re-exported by the algorithm modules).
#: ``train --algo ln`` defaults: run to convergence of the bound (:meth:`grind.infer.ln.LogisticNormal._stop_reason`),
#: relative tolerance LN_TOLERANCE, at most LN_ITERATIONS iterations.  The papers train "until
#: convergence" without a threshold in the text we could search; both numbers are ours.
LN_TOLERANCE = 1e-5
LN_ITERATIONS = 1000
#: Default untied warm-up iterations of ``train --tie`` (ours: the papers' number was not found).
TIE_WARMUP = 5
#: ``ln_mstep``: Algorithm 3 (``plain``, the paper's) or the Newton-scaled mu step (``newton``).
LN_MSTEPS = ("plain", "newton")
#: --base name -> "module:Class" of the algorithm run over the mixture parser.
BASES = {"ln": "grind.infer.ln:LogisticNormal", "vb": "grind.infer.vb:VB", "em": "grind.infer.em:EM"}
DEFAULT_BASE = "ln"
#: Schedule names (case-insensitive) -> I, II, III.
SCHEDULES = {"I": "I", "ANNEALED": "I", "II": "II", "FIXED-0.85": "II", "III": "III", "FIXED-0.95": "III"}
#: Schedule I defaults: the cap on beta_0 rises from MIX_START by MIX_RATE a step to MIX_END.
MIX_START, MIX_END, MIX_RATE = 0.85, 0.95, 0.01
#: The paper's number of iterations (CTB10, Table 1).
MIX_ITERATIONS = 20
#: The default share of sentences without a parse above which a command fails (grind.run.check_unparsed).
MAX_UNPARSED = 0.5

LN = ("ln", "mixture")          # the ln options: mixture's base is ln by default
MINIBATCH = ("streaming", "stochastic")
SAMPLERS = ("gibbs", "hastings")
#: The algorithms whose E-step --universal-rules projects (collapsed VB: once a sweep, see
#: grind.infer.posterior_reg).
RULE_ALGOS = ("em", "vb", "cvb")
#: The default --rule-fraction (grind.infer.posterior_reg.DEFAULT_FRACTION).
RULE_FRACTION = 0.8


def schedule_name(s) -> str:
    """'I' | 'II' | 'III' from a schedule name (I/annealed, II/fixed-0.85, III/fixed-0.95)."""
    key = str(s or "I").strip().upper()
    if key not in SCHEDULES:
        raise InputError(f"unknown mixture schedule {s!r} (I|annealed, II|fixed-0.85, III|fixed-0.95)")
    return SCHEDULES[key]


#: The headings of ``grind train --help``, in order: key -> title.
GROUPS = {
    "algorithm": "Algorithm",
    "corpus": "Corpus",
    "model": "Grammar and kernel",
    "minibatch": "stochastic and streaming",
    "sampler": "cvb, gibbs and hastings",
    "ln": "ln (logistic normal)",
    "mixture": "mixture (posterior constraints)",
    "heldout": "Held-out evaluation",
    "output": "Output",
    "run": "Run control",
}


@dataclass(frozen=True)
class Opt:
    """One option.  ``name``: config field, ``grind.fit`` keyword and click parameter name; ``flag``: the long
    option when it is not ``--name`` with dashes (``grind.fit`` also takes it underscored); ``type``: int,
    float, str, bool or object; ``kind``: how the command line reads it where the type does not say
    (``alpha``, ``output`` / ``checkpoint`` files, ``numbers``: comma-separated, ``pair``: two values);
    ``defaults``: the algorithms whose default differs; ``default_with``: (option, value): the default when
    that option is given (``tie_warmup``: 5 with ``tie``); ``algos``: the algorithms that read it;
    ``config``: it is a field of their configuration (else the run reads it: ``alpha``, ``dev``, ...);
    ``where``: ``both``, ``cli``, ``api`` or ``internal`` (set by the run, given by nobody); ``bare``: the
    value of the option given without one (``--universal-rules`` alone: ``ud``)."""

    name: str
    type: type
    default: object
    help: str
    group: str
    algos: tuple = ALL
    range: tuple | None = None
    choices: tuple | None = None
    flag: str | None = None
    short: str | None = None
    metavar: str | None = None
    kind: str | None = None
    defaults: dict = field(default_factory=dict)
    default_with: tuple | None = None
    case_sensitive: bool = True
    config: bool = True
    where: str = "both"
    doc: str = ""
    bare: str | None = None

    @property
    def long(self) -> str:
        """The command line's long option, ``--tie-what``."""
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def alias(self) -> str | None:
        """The ``grind.fit`` keyword made from the flag when it is not the name (``cov`` for ``ln_cov``)."""
        a = self.long[2:].replace("-", "_")
        return a if a != self.name else None

    def default_for(self, algo: str | None):
        return self.defaults.get(algo, self.default) if algo else self.default

    def shown_default(self) -> str | None:
        """The default as ``--help`` shows it: per algorithm when it differs (None: nothing to show)."""
        if self.type is bool or (self.default is None and not self.defaults and not self.default_with):
            return None
        parts = [] if self.default is None else [_show(self.default)]
        parts += [f"{a}: {_show(v)}" for a, v in self.defaults.items()]
        if self.default_with:
            other = OPTION[self.default_with[0]]
            parts.append(f"{_show(self.default_with[1])} with {other.long}")
        return "; ".join(parts)

    def metadata(self) -> dict:
        """The config field's ``metadata``: help, and range / choices when declared."""
        meta: dict = {"help": self.help, "option": self}
        if self.range is not None:
            meta["range"] = self.range
        if self.choices is not None:
            meta["choices"] = self.choices
        return meta


def _show(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


_ALGO_DOC = """\b
em          inside-outside EM / MAP-EM (--alpha); writes probabilities.
vb          batch mean-field VB (Kurihara & Sato 2006).
cvb         collapsed VB (Wang & Blunsom 2013).
streaming   streaming VB over minibatches of a stream (Broderick et al. 2013).
stochastic  stochastic VB, step (tau + t)^-kappa (Hoffman et al. 2010).
gibbs       Gibbs sampler for (t, theta) (Johnson, Griffiths & Goldwater 2007).
hastings    collapsed Metropolis-Hastings sampler, annealed from --temp-start.
mixture     DMV only: posterior-mixture constraints (Cohen & Smith 2009): the --base model (default ln) with its
            posterior over trees a mixture of the unconstrained one and --constraints components, coefficients by
            --mix-schedule (C-step); 20 iterations unless --iterations is given.
ln          logistic-normal prior, variational EM (Cohen & Smith 2010), model I or II (--model), --cov
            identity|families; shared logistic normal with --tie V|N|VN|A|FILE (--tie-what, after --tie-warmup
            untied iterations), two languages with --joint; writes softmax of the mean (and mu, Sigma with
            --ln-params).  Runs to convergence: until the bound's relative change is <= --tolerance (default
            1e-5 for ln), at most --iterations (default 1000 for ln).

All but em, ln and mixture over em or ln write the posterior Dirichlet pseudo-counts (grind parse and loglik
use their mean)."""

#: Every option of a training run, in the order of ``grind train --help``.
OPTIONS: tuple[Opt, ...] = (
    # --------------------------------------------------------------------- algorithm
    Opt("algo", str, "em", "Inference algorithm (listed above).", "algorithm", choices=NAMES, metavar="ALGO",
        config=False, doc=_ALGO_DOC),
    Opt("iterations", int, 50, "Iterations (sweeps; a cap for ln).", "algorithm",
        range=(1, None), metavar="N", defaults={"ln": LN_ITERATIONS, "mixture": MIX_ITERATIONS},
        doc="Iterations of the batch algorithms, sweeps of the samplers and of cvb; for ln a cap (it runs to "
            "convergence, see --tolerance).  Not for stochastic (--epochs) and streaming (one pass)."),
    Opt("tolerance", float, 1e-6, "Stop at this relative change.", "algorithm",
        range=(0, None), metavar="X", defaults={"ln": LN_TOLERANCE},
        doc="Stop when the objective's relative gain is below this.  ln: stop when the variational bound's "
            "relative change |B_t - B_t-1| / |B_t-1| is at most this; the trace's 'stopped' column says whether "
            "the run converged or reached --iterations.  mixture: never while the schedule still moves.  Not "
            "for gibbs, hastings (they run their sweeps), streaming, stochastic (their passes)."),
    Opt("alpha", str, "1.0", "Dirichlet hyperparameter(s).", "algorithm",
        kind="alpha", config=False, metavar="ALPHA",
        doc="Dirichlet hyperparameter: a number (symmetric); a number and per-LHS numbers, 1e-20,Stem=1e-15 (the "
            "rules of LHS Stem 1e-15, every other rule 1e-20); or a grammar file of per-rule pseudo-counts.  "
            "EM: MAP estimate (1 = maximum likelihood).  ln reads no Dirichlet (its prior is --cov's)."),
    Opt("universal_rules", str, None, "em, vb, cvb: regularize toward ud|naseem|FILE.", "algorithm",
        algos=RULE_ALGOS, config=False, metavar="RULES", bare="ud",
        doc="em, vb, cvb on a DMV: posterior regularization (Ganchev et al. 2010) toward universal head>dependent "
            "rules (Naseem et al. 2010): every E-step's posterior is projected onto those whose expected share of "
            "rule-following arcs is at least --rule-fraction.  No value: ud (Naseem et al.'s rules adapted to UD "
            "content heads, grind/data/universal-rules-ud.txt); naseem: theirs, over UPOS; FILE: 'HEAD DEP' "
            "lines (HEAD may be ROOT).  The rule set and the fraction go to the header, the dual (pr_lambda) and "
            "the rule share under the projected posterior (rule_share) and before it (rule_share_p) to the trace."),
    Opt("rule_fraction", float, RULE_FRACTION, "Least share of arcs on the rules.", "algorithm",
        algos=RULE_ALGOS, config=False, range=(0, 1), metavar="F",
        doc="With --universal-rules: the share of the corpus's arcs (one a word, the root's included) that must "
            "follow the rules in expectation under the projected posterior."),
    # --------------------------------------------------------------------- grammar and kernel
    Opt("kernel", str, "auto", "Kernel: auto, cky, dmv, segment.", "model",
        choices=("auto", "cky", "dmv", "segment"), metavar="KERNEL",
        doc="auto = the DMV kernel for DMV grammars, the segmentation kernel for morphology (template) grammars, "
            "CKY otherwise.  streaming builds its own parsers with it."),
    Opt("start", str, None, "Start symbol (default: the grammar's).", "model", config=False, where="cli",
        metavar="SYMBOL",
        doc="The start symbol; default: the grammar's '# start:' header, else the first rule's LHS."),
    Opt("on_trees", bool, False, "CORPUS is PTB trees: a latent-annotation PCFG.", "model",
        flag="--trees", config=False, where="cli",
        doc="CORPUS (and --dev) are PTB bracketed trees: train a latent-annotation grammar (grind make-grammar "
            "treebank --subtypes H) on the gold trees with the subtypes hidden (em, vb, cvb, gibbs); --dev with "
            "--eval-every N reports the held-out trees' log probability and the labeled F1 of parsing them "
            "every N steps."),
    # --------------------------------------------------------------------- minibatches
    Opt("epochs", int, 1, "stochastic: passes over the corpus.", "minibatch", algos=("stochastic",), range=(1, None),
        metavar="N"),
    Opt("batch", int, 1000, "Minibatch size.", "minibatch", algos=MINIBATCH, range=(1, None), metavar="N"),
    Opt("first_batch", int, None, "streaming: size of the first minibatch.", "minibatch",
        algos=("streaming",), range=(1, None), metavar="N"),
    Opt("batch_iterations", int, 5, "VB iterations per minibatch.", "minibatch", algos=MINIBATCH,
        range=(1, None), metavar="N"),
    Opt("tau", float, 1.0, "stochastic: step delay tau.", "minibatch", algos=("stochastic",),
        range=(0, None), metavar="X"),
    Opt("kappa", float, 0.7, "stochastic: step decay kappa.", "minibatch", algos=("stochastic",), range=(0.5, 1.0),
        metavar="X"),
    Opt("update", str, "hoffman", "Rule: hoffman or pate-johnson.", "minibatch",
        algos=("stochastic",), choices=("hoffman", "pate-johnson"), metavar="NAME",
        doc="Stochastic VB update: Hoffman et al. (prior inside the step) or Pate & Johnson (prior outside)."),
    Opt("corpus", str, None, "The corpus file, read as a stream.", "minibatch", algos=("streaming",),
        where="internal"),
    Opt("spec", object, None, "How to read the stream (a grind.formats.corpus.CorpusSpec).", "minibatch",
        algos=("streaming",), where="api"),
    # --------------------------------------------------------------------- cvb
    Opt("cvb_init", str, "grammar", "cvb: grammar or random start.", "sampler", algos=("cvb",),
        choices=("grammar", "random"), metavar="FROM",
        doc="cvb: per-sentence counts start from an E-step under the init grammar, or under randomly perturbed "
            "weights."),
    # --------------------------------------------------------------------- samplers
    Opt("temp_start", float, 1.0, "Samplers: initial temperature.", "sampler", algos=SAMPLERS,
        range=(1.0, None), metavar="T",
        doc="Annealing: initial temperature, lowered linearly to 1.  gibbs anneals the joint of trees and theta "
            "(theta ~ Dir(f/T + alpha), trees under theta^(1/T)); hastings the collapsed posterior, "
            "P(t | alpha)^(1/T)."),
    Opt("anneal_sweeps", int, None, "Sweeps to reach T = 1 (default: all).", "sampler", algos=SAMPLERS,
        range=(1, None), metavar="N",
        doc="Sweeps over which the temperature falls to 1 (default: all --iterations)."),
    Opt("proposal_batch", int, 1, "hastings: proposals per kernel call.", "sampler",
        algos=("hastings",), range=(1, None), metavar="N",
        doc="hastings: draw the proposals of this many sentences in one kernel call from the grammar of the "
            "other sentences' trees (1: one call per sentence; exact either way, but a batch that is a large "
            "share of the corpus proposes from little data and can mix far more slowly)."),
    # --------------------------------------------------------------------- ln
    Opt("model", int, 1, "Model 1 (theta per sentence) or 2.", "ln", algos=LN, choices=(1, 2)),
    Opt("ln_cov", str, "identity", "Covariance: identity|families.", "ln", algos=LN,
        flag="--cov", choices=("identity", "families"), metavar="NAME",
        doc="Initial covariance: identity, or 0.5 between rules whose symbols share a tag family."),
    Opt("families", str, "upos", "Tag families: upos, ptb, FILE.", "ln", algos=LN,
        metavar="NAME|FILE",
        doc="Tag-family mapping for --cov families and --tie V|N|VN|A: upos, ptb (grind/data/families-*.txt, every "
            "tag in a family), or a file of 'TAG FAMILY' lines."),
    Opt("ln_cycles", int, 5, "E-step cycles per iteration.", "ln", algos=LN,
        range=(1, None), metavar="N",
        doc="E-step cycles (mu, sigma^2, zeta, inside-outside) per iteration."),
    Opt("ln_optimizer", str, "newton", "The mu~ optimiser of the E-step.", "ln", algos=LN,
        choices=("newton", "lbfgs"), where="api"),
    Opt("ln_warm", bool, False, "Start each E-step from the previous one.", "ln", algos=LN,
        doc="Start each E-step from the previous one's variational parameters (the bound then never decreases "
            "within one prior structure: --tie's warm-up switch may lower it; model I keeps two floats per "
            "sentence and expert coordinate; model II reuses the previous iteration's last parse as the first, "
            "so --model 2 --ln-cycles 1 --ln-warm parses the corpus once an iteration)."),
    Opt("ln_mstep", str, "plain", "M-step for mu: plain or newton.", "ln", algos=LN,
        choices=LN_MSTEPS, metavar="NAME",
        doc="M-step for mu: plain = Algorithm 3 (mean of the posterior means, the paper's); newton = a diagonal "
            "Newton-scaled step to the same fixed points, accepted only if the bound for this iteration's "
            "expected counts is at least the plain step's (faster convergence)."),
    Opt("ln_init", str, None, "Start from a --ln-params file.", "ln", algos=LN,
        metavar="FILE",
        doc="Start from the mu, Sigma and expert structure of this --ln-params file (instead of the grammar's "
            "weights and --cov / --tie)."),
    Opt("ln_params", str, None, "Also write the learned mu and Sigma here.", "ln", algos=("ln",), kind="output",
        config=False, where="cli", metavar="FILE",
        doc="Also write the learned mu and Sigma (plain text) here (read back by --ln-init)."),
    Opt("tie", str, None, "Shared LN: V, N, VN, A or a structure FILE.", "ln", algos=LN,
        metavar="V|N|VN|A|FILE",
        doc="Shared logistic normal (Cohen & Smith 2010 §3.3): V (TieV), N (TieN), VN (TieV&N), A (TieA) tie the "
            "DMV multinomials of heads in one tag family (--families, --tie-what); or a structure file (see "
            "grind make-structure)."),
    Opt("tie_what", str, "choose+stop", "Tie choose+stop or choose.", "ln", algos=LN,
        choices=("choose+stop", "choose"), metavar="WHAT",
        doc="With --tie V|N|VN|A: tie the choose and the stop multinomials of a family's heads, or the choose "
            "multinomials only."),
    Opt("tie_warmup", int, None, "Untied iterations first.", "ln", algos=LN, range=(0, None),
        metavar="N", default_with=("tie", TIE_WARMUP),
        doc="With --tie: the first N iterations train the untied logistic normal, then the tied structure takes "
            "over from its means (0: tied from the start).  The default, 5, is ours: the papers' number was not "
            "found."),
    Opt("joint", tuple, None, "Train a second language jointly.", "ln", algos=("ln",), kind="pair",
        metavar="GRAMMAR2 CORPUS2", config=False, where="cli",
        doc="Bilingual tying (§5.4): train a second language's grammar on its corpus jointly, --tie experts "
            "spanning both languages through the tag families."),
    Opt("joint_output", str, None, "Where --joint's second grammar goes.", "ln", algos=("ln",), kind="output",
        config=False, where="cli", metavar="FILE"),
    # --------------------------------------------------------------------- mixture
    Opt("mix_constraints", str, "RA+VAR+SD", "Components, e.g. RA+SD,LC.", "mixture",
        algos=("mixture",), flag="--constraints", metavar="SPEC",
        doc="Prior-knowledge components, '+' intersects, ',' separates components: RA RightAttach, AR AllRight, "
            "LC LeftChain, VAR VerbAsRoot, NS NounSequence, SD ShortDep (<= 4)."),
    Opt("mix_base", str, DEFAULT_BASE, "The base model: ln, vb or em.", "mixture", algos=("mixture",),
        flag="--base", choices=tuple(BASES), metavar="NAME",
        doc="ln = logistic-normal mean-field variational EM (the paper's; takes the ln options --cov, --families, "
            "--model, --ln-cycles), vb = Dirichlet mean-field VB (--alpha), em = MAP-EM point estimate "
            "(--alpha)."),
    Opt("mix_schedule", str, "I", "Coefficients: I, II or III.", "mixture",
        algos=("mixture",), choices=("I", "II", "III", "annealed", "fixed-0.85", "fixed-0.95"),
        case_sensitive=False, metavar="I|II|III",
        doc="The polytope of coefficients: I (annealed) = the mean-field coefficient is at most --mix-start, the "
            "cap rising 1% a step to --mix-end; II (fixed-0.85) = mean-field fixed at 0.85; III (fixed-0.95) = "
            "fixed at 0.95; the C-step splits the rest among the --constraints components."),
    Opt("mix_start", float, MIX_START, "Schedule I: the cap at step 0.", "mixture", algos=("mixture",),
        range=(0, 1), metavar="X",
        doc="Schedule I: the cap on the mean-field coefficient at step 0 ..."),
    Opt("mix_end", float, MIX_END, "Schedule I: the cap at the end.", "mixture",
        algos=("mixture",), range=(0, 1), metavar="X",
        doc="Schedule I: ... rising by 0.01 a step up to this."),
    Opt("mix_rate", float, MIX_RATE, "Schedule I: the rise of the cap per step.", "mixture", algos=("mixture",),
        range=(0, 1), where="api"),
    Opt("mix_min", float, 0.0, "Least weight of each constrained component.", "mixture", algos=("mixture",),
        range=(0, 1), where="api"),
    Opt("mix_coef", object, None, "Fixed coefficients (no schedule).", "mixture",
        algos=("mixture",), kind="numbers", metavar="X,X,...",
        doc="Fixed coefficients instead of a schedule (no C-step), mean-field first, e.g. 0.85,0.15 (in Python a "
            "comma-separated string or a sequence)."),
    # --------------------------------------------------------------------- held-out evaluation
    Opt("dev_path", str, None, "Held-out corpus (same corpus options).", "heldout", flag="--dev",
        config=False, metavar="FILE",
        doc="Held-out corpus for --eval-every (read with the same corpus options).  In Python: a corpus "
            "(a path, Sentences or token lists)."),
    Opt("eval_every", int, 0, "Evaluate --dev every N steps.", "heldout", range=(0, None),
        config=False, metavar="N",
        doc="Every N steps: held-out log probability / perplexity under the posterior mean (and accuracy for "
            "treebanks)."),
    Opt("eval_at", str, None, "Evaluate --dev at these sentences parsed too.",
        "heldout", config=False, metavar="log:N|N,N,...",
        doc="Also evaluate --dev when the sentences parsed (the trace's sentences column) reach log:N (N points a "
            "decade: round(10^(j/N)), j = 0, 1, ...) and/or listed numbers (1000,5000), and at the end: a learning "
            "curve in one run (grind plot --x sentences --log-x)."),
    Opt("early_stop", bool, False, "Stop when --dev's log probability falls.", "heldout", config=False,
        doc="With --eval-every: stop when the held-out log probability decreases, keeping the previous parameters "
            "(Cohen & Smith 2010, Algorithm 1)."),
    Opt("patience", int, 1, "Evaluations below the best to stop.", "heldout",
        range=(1, None), config=False, metavar="N",
        doc="With --early-stop: stop when the held-out log probability has stayed below its best for this many "
            "evaluations in a row, keeping the best state (1 = Algorithm 1: the first decrease)."),
    # --------------------------------------------------------------------- output
    Opt("trace_path", str, None, "Also write the trace (TSV) here.", "output", flag="--trace", kind="output",
        config=False, where="cli", metavar="FILE",
        doc="The per-step objective (log-likelihood + log prior, variational bound, or collapsed log probability) "
            "goes to stderr, and with --trace to this TSV file."),
    Opt("ckpt", str, None, "Checkpoint file (.npz).", "output", flag="--checkpoint",
        kind="checkpoint", config=False, where="cli", metavar="FILE",
        doc="Checkpoint file (.npz; a regular file, not - or a FIFO or device), written atomically, through a "
            "symlink to its target."),
    Opt("checkpoint_every", int, 0, "Checkpoint every N steps too.", "output", range=(0, None),
        config=False, where="cli", metavar="N",
        doc="Write --checkpoint every N steps too (0: only when the run ends, so an interrupted run leaves none "
            "to resume from)."),
    Opt("resume", bool, False, "Continue from --checkpoint.", "output", config=False,
        where="cli", doc="Continue from --checkpoint; ends bit-identical to an uninterrupted run."),
    # --------------------------------------------------------------------- run control
    Opt("seed", int, None, "Seed of every random choice.", "run", range=(0, None), config=False,
        metavar="N", doc="Seed of the one random generator every random choice draws from."),
    Opt("jobs", int, 1, "E-step threads.", "run", range=(1, None),
        metavar="N", doc="Threads for the E-step (results do not depend on it)."),
    Opt("max_unparsed", float, MAX_UNPARSED, "Fail when more than this share has no parse.", "run",
        range=(0, 1), config=False, where="cli", metavar="X",
        doc="Fail (exit 1, no output) when more than this share of the sentences has no parse (1: never fail).  "
            "The same option on parse, loglik, estep, eval and train."),
    Opt("config", str, None, "Read options from a TOML file (see formats).", "run", config=False, where="cli",
        kind="config", metavar="FILE",
        doc="A TOML file of grind train options: long option names (eval-every or eval_every) and their values "
            "(true for a flag, a two-element list for joint).  Options on the command line override the file's; "
            "an unknown name is refused.  The output's header records the file and the options it gave "
            "('# config: FILE (alpha = 0.1, ...)').  See docs/reference/formats.md."),
    Opt("cluster", str, None, "E-step on Dask: local:N or tcp://HOST:PORT.", "run", config=False,
        where="cli", metavar="ADDRESS",
        doc="Run the E-step's shards (256 sentences each) as tasks on a Dask cluster, summed here in shard "
            "order: the grammar is the single-process one bit for bit, whatever the number of workers.  local:N "
            "starts N single-threaded worker processes on this machine for the run; tcp://HOST:PORT connects to a "
            "running Dask scheduler.  On SLURM / PBS: start one with dask-jobqueue in a Python session that stays "
            "open, cluster = SLURMCluster(cores=1, processes=1, memory='4GB', walltime='04:00:00', "
            "python='/path/to/.venv/bin/python') (or PBSCluster(...)), cluster.scale(jobs=16), and pass "
            "cluster.scheduler_address here.  For em, vb, stochastic, ln (--model 1: cold starts, plain M-step; "
            "each shard's posteriors are fitted and summed on its worker), mixture (each worker runs the "
            "constrained components too) and --trees; needs pip install 'grind[dask]' here and the same grind on "
            "the workers.  A lost worker's shards run again on the others; when none finishes for "
            "GRIND_DASK_PATIENCE seconds (default 60) after a loss, the run stops (resume it from its "
            "--checkpoint)."),
)

#: name -> :class:`Opt`.
OPTION = {o.name: o for o in OPTIONS}


def readers(algo: str) -> list[Opt]:
    """The configuration options ``algo`` reads (its config's fields, in table order)."""
    return [o for o in OPTIONS if o.config and algo in o.algos]


def given_by_user(o: Opt) -> bool:
    return o.where in ("both", "cli", "api")


def api_names() -> dict:
    """``grind.fit`` keyword -> option name: every option Python may give, by name and by its flag's alias."""
    out = {}
    for o in OPTIONS:
        if o.where in ("both", "api"):
            out[o.name] = o.name
            if o.alias:
                out[o.alias] = o.name
    return out


#: Options of every algorithm's that some do not read -> why (``{name}``: another option, named by the
#: :class:`Namer`): given, they would do nothing, so grind train and grind.fit refuse them.
_SWEEPS = "a sampler runs its {iterations} sweeps (no convergence test)"
_EPOCHS = "it runs {epochs} passes ({batch_iterations}: the VB iterations of each minibatch)"
_STREAM = "it reads the stream once ({batch_iterations}: the VB iterations of each minibatch)"
_NO_DIRICHLET = "the logistic normal's prior is its mean and covariance ({cov}), not a Dirichlet"
UNREAD = {
    "gibbs": {"tolerance": _SWEEPS},
    "hastings": {"tolerance": _SWEEPS},
    "stochastic": {"tolerance": _EPOCHS, "iterations": _EPOCHS},
    "streaming": {"tolerance": _STREAM, "iterations": _STREAM},
    "ln": {"alpha": _NO_DIRICHLET},
}


def unread_options(algo, cfg, flag=lambda name: name) -> dict:
    """{option name: why ``algo`` does not read it} (mixture: its base's, and schedule I's annealing when the
    schedule is fixed or ``mix_coef`` given); ``flag(name)`` names the other options a reason mentions
    (``--batch-iterations`` for the command line)."""
    names = {n: flag(n) for n in ("iterations", "epochs", "batch_iterations", "cov", "mix_coef")}
    if algo == "mixture":
        out = {}
        if cfg.mix_coef is not None or schedule_name(cfg.mix_schedule) != "I":     # schedule I's annealing only
            why = (f"{names['mix_coef']} fixes the coefficients" if cfg.mix_coef is not None else
                   f"schedule {schedule_name(cfg.mix_schedule)} fixes the mean-field coefficient")
            out.update({n: f"it sets schedule I's annealing, and {why}" for n in ("mix_start", "mix_end", "mix_rate")})
        if cfg.mix_base == "ln":
            out["alpha"] = "the mixture's base is ln: " + _NO_DIRICHLET.format(**names)
            return out
        out.update({o.name: f"it is an option of the logistic normal, and the mixture's base is {cfg.mix_base}"
                    for o in sorted(readers("ln"), key=lambda o: o.name) if o.algos != ALL})
        return out
    return {k: why.format(**names) for k, why in UNREAD.get(algo, {}).items()}


def fixed_coef(v, K):
    """``--mix-coef`` as an array of K + 1 coefficients (None: none given); an InputError unless they are
    non-negative numbers summing to 1."""
    import numpy as np
    if v is None:
        return None
    if isinstance(v, str):
        try:
            v = [float(x) for x in v.split(",")]
        except ValueError:
            raise InputError(f"mix_coef: not a list of numbers: {v!r}") from None
    b = np.asarray(v, dtype=np.float64)
    if b.shape != (K + 1,) or not np.all(np.isfinite(b)) or np.any(b < 0) or abs(b.sum() - 1.0) > 1e-9:
        raise InputError(f"mix_coef: need {K + 1} non-negative numbers summing to 1 (mean-field first)")
    return b


# ----------------------------------------------------------------------------- checks

def check_values(values: dict) -> None:
    """What click's option types check on the command line, for Python's keywords (``grind.fit``): a
    ValueError for an integer option's value that is not an integer, or a run option's value outside its
    range (a config's fields are checked by the config, :class:`grind.infer.config.TrainConfig`)."""
    import numbers
    for name, v in values.items():
        o = OPTION.get(name)
        if o is None or v is None or o.type is not int:
            continue
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise ValueError(f"{name} must be an integer, not {v!r}")
        if not o.config and o.range is not None:
            lo, hi = o.range
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                raise ValueError(f"{name} must be {'>= ' + str(lo) if hi is None else f'in [{lo}, {hi}]'}, not {v!r}")


class OptionError(GrindError):
    """Options that do not go together (a usage error on the command line, exit status 2; ValueError from
    ``grind.fit``, TypeError when ``unread``: an option the algorithm does not read).  ``param``: the
    option a malformed value belongs to (click's BadParameter names it)."""

    def __init__(self, message: str, unread: bool = False, param: str | None = None):
        super().__init__(message)
        self.unread, self.param = unread, param


class Namer:
    """How a message names an option: the command line's ``--eval-every`` (``arg``: ``--dev FILE``) and
    ``--algo ln``; :class:`PyNamer` the keywords of ``grind.fit``."""

    def opt(self, name: str) -> str:
        o = OPTION.get(name)
        return o.long if o else "--" + name.replace("_", "-")

    def arg(self, name: str, metavar: str | None = None) -> str:
        o = OPTION.get(name)
        return f"{self.opt(name)} {metavar or (o.metavar if o and o.metavar else 'FILE')}"

    def algo(self, algo: str) -> str:
        return f"--algo {algo}"

    def ref(self, name: str) -> str:
        """An option named inside a reason (:data:`UNREAD`)."""
        return self.opt(name)

    def unread(self, algo: str, name: str, why: str) -> str:
        return f"--algo {algo} does not read {self.opt(name)}: {why}"

    def other_algorithms(self, name: str, owners: list, algo: str) -> str:
        return f"{self.opt(name)} is an option of --algo {', '.join(owners)}, not of --algo {algo}"


class PyNamer(Namer):
    """``grind.fit``'s names: ``eval_every``, ``algo='ln'``; an option given by its alias keeps it."""

    def __init__(self, as_given: dict | None = None):
        self.as_given = as_given or {}

    def opt(self, name: str) -> str:
        return self.as_given.get(name, name)

    def arg(self, name: str, metavar: str | None = None) -> str:
        return self.opt(name)

    def algo(self, algo: str) -> str:
        return f"algo={algo!r}"

    def ref(self, name: str) -> str:
        return f"{name}="

    def unread(self, algo: str, name: str, why: str) -> str:
        return f"grind.fit(algo={algo!r}) does not read {self.opt(name)}=: {why}"

    def other_algorithms(self, name: str, owners: list, algo: str) -> str:
        return f"grind.fit: {self.opt(name)}= is an option of algo {', '.join(owners)}, not of algo={algo!r}"


def check_options(algo: str, values: dict, given, cfg, namer: Namer) -> None:
    """Every check of how a run's options combine, in the command line's order: the held-out evaluation's
    ("X needs Y"), the ln and mixture options, an option of another algorithm, an option ``algo`` does not
    read.  ``values``: option name -> value; ``given(name)``: the user gave it; ``cfg``: ``algo``'s
    configuration.  Raises :class:`OptionError` worded by ``namer``."""
    n = namer
    v = values.get
    if v("eval_at") is not None:
        from grind.infer.training import EvalPoints
        try:
            EvalPoints.parse(v("eval_at"))
        except ValueError as e:
            raise OptionError(str(e), param="eval_at") from None
    evaluated = v("eval_every") or v("eval_at") is not None
    if evaluated and not v("dev_path"):
        raise OptionError(f"{n.opt('eval_every' if v('eval_every') else 'eval_at')} needs {n.arg('dev_path')}")
    if v("dev_path") is not None and not evaluated:
        raise OptionError(f"{n.arg('dev_path')} is evaluated every {n.arg('eval_every')} steps or at "
                          f"{n.opt('eval_at')} points: give one")
    if v("early_stop") and not evaluated:
        raise OptionError(f"{n.opt('early_stop')} needs {n.arg('eval_every')} (or {n.opt('eval_at')}) "
                          f"{n.arg('dev_path')}")
    if (v("patience") or 1) > 1 and not v("early_stop"):
        raise OptionError(f"{n.opt('patience')} needs {n.opt('early_stop')}")
    if given("rule_fraction") and not v("universal_rules"):
        raise OptionError(f"{n.opt('rule_fraction')} is the share of arcs {n.opt('universal_rules')} asks for: give "
                          f"{n.opt('universal_rules')}")
    _check_ln(algo, v, given, n)
    _check_mixture(algo, cfg, given, n)
    mine = {o.name for o in OPTIONS if algo in o.algos}
    for o in OPTIONS:
        if o.name not in mine and o.where != "internal" and given(o.name):
            owners = [a for a in NAMES if a in o.algos]
            raise OptionError(n.other_algorithms(o.name, owners, algo))
    for name, why in unread_options(algo, cfg, n.ref).items():
        if given(name):
            raise OptionError(n.unread(algo, name, why), unread=True)


def _check_ln(algo, v, given, n) -> None:
    """Options that only --algo ln understands, and what --joint needs (--tie without --tie-warmup: the
    config's ``default_with`` gives :data:`TIE_WARMUP`)."""
    for name in ("tie", "joint", "joint_output", "ln_init", "tie_warmup", "ln_params"):
        if v(name) and algo != "ln":
            raise OptionError(f"{n.opt(name)} is for {n.algo('ln')}")
    if (v("ln_mstep") or "plain") != "plain" and algo != "ln":
        raise OptionError(f"{n.opt('ln_mstep')} is for {n.algo('ln')}")
    if v("ln_init") and v("tie"):
        raise OptionError(f"{n.opt('ln_init')} brings its own expert structure; leave out {n.opt('tie')}")
    if v("tie_warmup") is not None and not v("tie"):
        raise OptionError(f"{n.opt('tie_warmup')} needs {n.opt('tie')}")
    if v("joint_output") and not v("joint"):
        raise OptionError(f"{n.opt('joint_output')} is the second language's grammar of {n.arg('joint')}")
    if given("tie_what") and not v("tie"):
        raise OptionError(f"{n.opt('tie_what')} needs {n.arg('tie', 'V|N|VN|A')}")
    if algo == "ln" and given("families") and v("ln_cov") != "families" and not v("tie"):
        raise OptionError(f"{n.opt('families')} is read by {n.opt('ln_cov')} families and {n.arg('tie', 'V|N|VN|A')}"
                          "; give one of them")
    if v("joint"):
        if not v("joint_output"):
            raise OptionError(f"{n.opt('joint')} needs {n.arg('joint_output')} for the second language's grammar")
        if v("dev_path"):
            raise OptionError(f"{n.opt('dev_path')} is not supported with {n.opt('joint')} (evaluate each "
                              "language's grammar after training)")


#: The options only --algo mixture reads.
MIXTURE_OPTIONS = tuple(o.name for o in OPTIONS if o.algos == ("mixture",) and o.where != "internal")


def _check_mixture(algo, cfg, given, n) -> None:
    """Mixture options given without --algo mixture, or --mix-coef with --mix-schedule, are usage errors
    (without --iterations, mixture runs the paper's :data:`MIX_ITERATIONS`: its config's default)."""
    named = [name for name in MIXTURE_OPTIONS if given(name)]
    if algo != "mixture":
        if named:
            raise OptionError(f"{n.opt(named[0])} is for {n.algo('mixture')}")
        return
    if "mix_coef" in named and "mix_schedule" in named:
        raise OptionError(f"{n.opt('mix_coef')} fixes the coefficients: leave out {n.opt('mix_schedule')}")
    if cfg.mix_start > cfg.mix_end:
        raise OptionError(f"{n.opt('mix_start')} {cfg.mix_start} is above {n.opt('mix_end')} {cfg.mix_end}")
    from grind.infer.constraints import parse_mixture_spec
    try:
        k = len(parse_mixture_spec(cfg.mix_constraints))
    except InputError as e:
        raise OptionError(str(e), param="mix_constraints") from None
    try:
        fixed_coef(cfg.mix_coef, k)
    except InputError as e:
        raise OptionError(str(e).replace("mix_coef: ", ""), param="mix_coef") from None
