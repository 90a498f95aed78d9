"""``grind parse``, ``baseline`` and ``loglik``."""
from __future__ import annotations

import click
import numpy as np

from grind import log
from grind.errors import InputError
from grind.formats.corpus import read_corpus
from grind.formats.textio import header_lines, open_out
from grind.cli.common import (corpus_options, output_option, seed_option, start_option, kernel_option, make_rng, load,
                              left_out, report_failures, write_dependencies, _given, FiniteFloatRange,
                              is_treebank_grammar, OneChoiceCommand, max_unparsed_option, check_unparsed,
                              grammar_spec, write_conll, NO_DERIVATION)
from grind.cli.options import GroupedCommand, option
from grind.infer.backoff import back_off


PARSE_REFERENCE = """A PCFG writes one bracketed tree a line; a sentence without a parse is reported on stderr, counted
in the header ('# unparsed: N') and written as (NOPARSE w1 ... wn), one the corpus options leave out as
(LEFTOUT w1 ... wn) (grind eval, given the same options, sets those aside), so line k is sentence k.

A DMV grammar writes CoNLL with HEAD and DEPREL (root/dep) filled, the gold's other arcs cleared (DEPS, also
of empty nodes; CoNLL-X PHEAD, PDEPREL) and every other line and column of a CoNLL-U/CoNLL-X input passed
through (comments, original IDs, multiword tokens, empty nodes); tokens --punct removed get HEAD = the root
word and DEPREL punct (not predicted: the header's '# removed_tokens:' line says so; a Malt-TAB or PTB input
has no rows to pass through, so only its kept tokens are written, numbered 1..n).  Every input sentence is
written, in order, the header lines being comments of the first one (valid CoNLL-U: the CoNLL 2018 evaluator
reads it).  A sentence without a parse (e.g. a tag the grammar lacks) gets filler heads (attach-right, DEPREL
'_') after the comment '# grind_unparsed = REASON', is named on stderr and counted in the header
('# unparsed: N'); grind eval scores its words 0.  One the length limits (or --types) leave out gets filler
heads after '# grind_left_out = REASON'.  More than --max-unparsed of the sentences without a parse is an
error.  --mbr: arc posteriors from inside-outside, then the best projective tree over them (Eisner).

Back-off (DMV, on unless --no-backoff; not with --committee or --average): a sentence with no tree of positive
probability (a tag the training data lacked gets root and attach probability 0 from EM) is parsed again with
every rule's probability p taken as (1 - 1e-6) p + 1e-6 / |rules of its left-hand side|; one that still has
none (the grammar's structural constraints allow no tree of it) with the constraints relaxed: the
unconstrained DMV over the grammar's tags, the left-out rules at the floor.  Such a sentence is parsed, not
unparsed: both are named on stderr and counted in the header ('# backoff:', '# constraints_relaxed:').  With
--no-backoff it is unparsed, and counts toward --max-unparsed.

--segment (a morphology grammar of make-grammar morph; its start symbol is the templates' first LHS, Word
for the built-in sets): every sentence of CORPUS is one word, its tokens its characters with --chars (one
word a line; without it, a line's whitespace tokens, joined without spaces for the word); one segmented word
is written a line (--seg-format).  --viterbi: the morphs are the spans of the Viterbi derivation's lexical
rules (rules whose right-hand side is all terminals).  --mbr: a boundary after character i iff its
posterior P(boundary after i) > 0.5, which maximises the expected number of correct boundary decisions
(posteriors from the kernel's boundary_posteriors); --boundary-threshold T moves that cut-off; --expected-f
instead cuts where P >= the one threshold that maximises the corpus's expected boundary F,
2 sum_cut P / (cuts + sum P).  --mbr --average G2 --average G3: the posteriors (arcs, boundaries) averaged
over GRAMMAR, G2 and G3 before decoding (the header's '# averaged_over:' line counts them).  A word without
a parse is written 'word<TAB>_' in both formats, named on stderr and counted in the header
('# unparsed: N'); grind eval --segmentation scores it with no correct morph and no boundary.

Examples (`C="--column UPOS --punct ud"`, the options the grammars were trained with):

    grind parse $C g.txt test.conllu > test.trees
    grind parse --mbr $C dmv.txt test.conllu > test.parsed.conllu
    for s in 1 2 3; do grind parse --committee ln.params --seed $s $C ln.txt test.conllu > m$s.conllu; done
    grind eval $C test.conllu m1.conllu m2.conllu m3.conllu     # mean and spread
    grind parse --chars --segment --mbr --average h2.txt --average h3.txt h1.txt dev.txt > dev.seg   # 3 chains
"""

DECODER, SEGMENT, TREEBANK = "Decoder", "Segmentation (--segment)", "Treebank grammars"


@click.command(cls=OneChoiceCommand, reference=PARSE_REFERENCE)
@corpus_options
@option("--viterbi", "decoder", flag_value="viterbi", default=True, group=DECODER, help="Most probable tree (default).",
        doc="The most probable tree; of a treebank grammar, the best latent derivation, subtypes projected away.")
@option("--mbr", "decoder", flag_value="mbr", group=DECODER, help="Minimum Bayes risk (DMV, --segment).",
        doc="DMV: the projective tree maximising the expected number of correct attachments; with "
            "--segment: a boundary after every character whose boundary posterior is > 0.5 (by more "
            "than 1e-9: closer is a tie, not cut).")
@option("--committee", "ln_path", default=None, metavar="FILE", group=DECODER,
        help="DMV: one committee member of this --ln-params.",
        doc="DMV only: one committee member: every sentence decoded with its own grammar drawn from the "
            "logistic-normal prior in this file (train --algo ln --ln-params); vary --seed for members.")
@option("--average", "average", multiple=True, metavar="GRAMMAR", group=DECODER,
        help="--mbr over these grammars' posteriors too.",
        doc="With --mbr (repeatable): decode with the posteriors (DMV arcs; --segment boundaries) averaged "
            "with equal weights over GRAMMAR and these grammars of the same rules -- a committee of, say, "
            "the runs of several seeds.  A sentence any of them cannot parse is unparsed.")
@option("--backoff/--no-backoff", default=True, show_default=True, group=DECODER,
        help="DMV: parse a sentence with no tree by floored weights.",
        doc="DMV: parse a sentence with no tree of positive probability with every rule's probability floored "
            "(and, if the grammar's constraints allow none, with them relaxed); said on stderr and counted in "
            "the header.  With --no-backoff such a sentence is unparsed (and counts toward --max-unparsed).")
@option("--segment", is_flag=True, group=SEGMENT, help="Morphology: write segmented words.",
        doc="Morphology grammars: write one segmented word a line (each line of CORPUS is a word whose "
            "tokens are its characters) instead of trees.")
@option("--seg-format", type=click.Choice(["plain", "sigmorphon"]), default="plain", show_default=True,
        metavar="FORMAT", group=SEGMENT, help="plain or sigmorphon.",
        doc="With --segment: plain 'ab dik ova t' or sigmorphon 'abdikovat<TAB>ab @@dik @@ova @@t'.")
@option("--boundary-threshold", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.5,
        show_default=True, metavar="P", group=SEGMENT, help="--mbr: cut where a posterior exceeds P.",
        doc="With --segment --mbr: a boundary where its posterior exceeds this (0.5 maximises the expected "
            "number of correct boundary decisions; lower trades precision for recall).")
@option("--expected-f", is_flag=True, group=SEGMENT, help="--mbr: the threshold of best expected F.",
        doc="With --segment --mbr: one threshold for the whole corpus, the one maximising the expected "
            "boundary F-score under the posteriors (F is a corpus-level score; 0.5 maximises the expected "
            "number of correct decisions instead); the threshold and its expected F go to the header.")
@option("--max-rule-sum", "decoder", flag_value="max-rule-sum", group=TREEBANK, help="Max-rule-sum tree (default).",
        doc="Treebank grammars (default for them): the tree maximising the summed posteriors of its anchored "
            "rules, subtypes summed out (Petrov & Klein 2007); --viterbi: the best latent derivation, "
            "subtypes projected away.")
@option("--max-rule-product", "decoder", flag_value="max-rule-product", group=TREEBANK,
        help="Max-rule-product tree.",
        doc="Treebank grammars: the tree maximising the product of its anchored rules' posteriors.")
@option("--prune/--no-prune", default=True, show_default=True, group=TREEBANK, help="Coarse-to-fine pruning.",
        doc="Treebank grammars: coarse-to-fine pruning with the grammar's projection onto the unsplit "
            "symbols (chart items of coarse posterior below --prune-threshold are skipped).")
@option("--prune-threshold", type=FiniteFloatRange(0, 1), default=1e-4, show_default=True, metavar="P",
        group=TREEBANK, help="Prune items of coarse posterior below P.",
        doc="Treebank grammars: posterior below which a (span, symbol) item is pruned.")
@seed_option
@kernel_option
@start_option
@max_unparsed_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def parse(grammar, corpus, spec, decoder, ln_path, average, backoff, segment, seg_format, boundary_threshold,
          expected_f, prune, prune_threshold, seed, kernel, start, max_unparsed, output):
    """Decode CORPUS with GRAMMAR: bracketed trees; CoNLL for a DMV grammar;
    segmented words with --segment.

    \b
    Examples (C="--column UPOS --punct ud", as the grammars were trained):
      grind parse $C g.txt test.conllu > test.trees
      grind parse --mbr $C dmv.txt test.conllu > test.parsed.conllu
    """
    rng = make_rng(seed, random=ln_path is not None)        # committee members are drawn; the rest is not random
    if segment and ln_path:
        raise click.UsageError("--committee decoding is for DMV grammars, not with --segment")
    if not segment and _given("seg_format"):
        raise click.UsageError("--seg-format needs --segment")
    if _given("boundary_threshold") and not (segment and decoder == "mbr"):
        raise click.UsageError("--boundary-threshold needs --segment --mbr")
    if expected_f and not (segment and decoder == "mbr"):
        raise click.UsageError("--expected-f needs --segment --mbr")
    if expected_f and _given("boundary_threshold"):
        raise click.UsageError("--expected-f chooses the boundary threshold itself: not with --boundary-threshold")
    if average and (decoder != "mbr" or ln_path):
        raise click.UsageError("--average needs --mbr (and is not for --committee)")
    if is_treebank_grammar(grammar):
        if segment or ln_path or decoder == "mbr":
            raise click.UsageError("a treebank grammar decodes with --max-rule-sum (default), --max-rule-product "
                                   "or --viterbi")
        _write_treebank_parses(output, grammar, corpus, spec, start,
                               decoder if _given("decoder") else "max-rule-sum", prune, prune_threshold, max_unparsed)
        return
    if decoder in ("max-rule-sum", "max-rule-product") or _given("prune") or _given("prune_threshold"):
        raise click.UsageError("--max-rule-sum, --max-rule-product and the pruning options are for treebank "
                               "grammars (grind make-grammar treebank)")
    spec = grammar_spec(grammar, corpus, spec)
    g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind parse", keep_outside=True)
    if kernel == "cky":
        from grind.grammars.dmv import dmv_problem
        if dmv_problem(g) is None:
            raise click.UsageError("this is a DMV grammar: grind parse writes its dependency trees with the DMV "
                                   "kernel; --kernel cky (the split-head cross-check) is for estep, loglik and "
                                   "train: leave it out here")
    thetas = np.stack([g.probabilities()] + [_member(path, g, grammar) for path in average])
    averaged = {"averaged_over": f"{len(thetas)} grammars (posteriors averaged, equal weights)"} if average else {}
    averaged["grammar_made_by"] = made_by(g)          # which configuration this is (grind eval reads it)
    if segment:
        _write_segmentations(output, g, sents, parser, decoder, seg_format, spec,
                             "expected-f" if expected_f else boundary_threshold, thetas, averaged, max_unparsed)
        return
    from grind.kernels.dmv import DMVParser
    if isinstance(parser, DMVParser):
        theta = g.probabilities()
        if ln_path:
            from grind.infer.committee import PriorSampler, committee_heads
            heads = committee_heads(parser, PriorSampler(g, ln_path), rng, decoder)
        else:
            fallback = []
            heads = parser.mbr_heads(thetas, fallback=fallback) if decoder == "mbr" else parser.viterbi_heads(theta)[0]
            for i in fallback[:10]:
                log.warn(f"sentence {sents[i].number} (line {sents[i].line}): its arc posteriors leave "
                         "floating-point range under this grammar; its Viterbi tree is written instead")
            if fallback:
                log.warn(f"{len(fallback)} of {len(sents)} sentences decoded with Viterbi instead of MBR")
        backed = {}
        if backoff and not ln_path and not average:
            heads, backed = back_off(g, parser, sents, theta, heads, decoder)
        write_dependencies(output, sents, parser, heads, decoder, spec, None if ln_path else theta,
                           _member_failure(parser, thetas, [grammar, *average]) if average else None, max_unparsed,
                           **({"mbr_fallback_to_viterbi": len(fallback)} if decoder == "mbr" and not ln_path else {}),
                           **averaged, **backed)
        return
    if average:
        raise click.UsageError("--average is for DMV grammars and --segment")
    if ln_path:
        raise click.UsageError("--committee decoding is for DMV grammars")
    if decoder == "mbr":
        raise click.UsageError("--mbr decoding is for DMV grammars; use --viterbi for a PCFG")
    from grind.formats.trees import derivation_tree, format_tree
    derivs, logp = parser.viterbi(g.probabilities())
    report_failures(sents, parser, logp, fate="are written as (NOPARSE w1 ... wn)", limit=max_unparsed)
    unparsed = sum(d is None for d in derivs)          # written as (NOPARSE w1 ... wn)
    escaped = _escaped_words(sents)
    lines, failed = _tree_lines(sents, lambda k, s: format_tree(("NOPARSE", *s.tokens) if derivs[k] is None
                                                                else derivation_tree(g, derivs[k], s.tokens)))
    lines, written = _with_left_out(sents, lines)
    what = "written as (LEFTOUT w1 ... wn)" if written else "not written"
    with open_out(output) as f:
        f.writelines(header_lines(decoder="viterbi", corpus=spec.describe(sents.format),
                                  left_out=left_out(sents, what), unparsed=unparsed, failed=failed,
                                  escaped_words=escaped, grammar_made_by=made_by(g)))
        f.writelines(lines)


def _with_left_out(sents, lines):
    """The tree ``lines`` of the kept ``sents`` with a ``(LEFTOUT w1 ... wn)`` line for each sentence the corpus
    options left out, in the input's order, so that line k of a parse is sentence k of its corpus (a
    sentence with no token left, punctuation only, has no line: the header's ``# left_out:`` counts it);
    and how many LEFTOUT lines were written."""
    from grind.formats.trees import LEFTOUT, format_tree
    everything = getattr(sents, "everything", None)
    if everything is None or len(everything) == len(sents):
        return lines, 0
    index = {id(s): i for i, s in enumerate(sents)}
    out, written = [], 0
    for s in everything:
        i = index.get(id(s))
        if i is not None:
            out.append(lines[i])
        elif s.tokens:
            out.append(format_tree((LEFTOUT, *s.tokens)) + "\n")
            written += 1
    return out, written


def _tree_lines(sents, tree_text):
    """``tree_text(k, sentence)`` + newline for every sentence, in order; a sentence whose tree alone
    cannot be built or written (too deep for Python's recursion, or too large for memory) is written as
    (NOPARSE w1 ... wn) and reported, so that the others' trees are not lost.  Returns ``(lines,
    failed)``: ``failed`` the ``# failed:`` header value (None when every tree was written)."""
    from grind.formats.trees import format_tree
    lines, bad = [], []
    for k, s in enumerate(sents):
        try:
            lines.append(tree_text(k, s) + "\n")
        except (RecursionError, MemoryError) as e:
            bad.append(s)
            if len(bad) <= 10:
                log.warn(f"sentence {s.number} (line {s.line}): its tree could not be written "
                         f"({type(e).__name__}: {e}); written as (NOPARSE w1 ... wn)")
            lines.append(format_tree(("NOPARSE", *s.tokens)) + "\n")
    if not bad:
        return lines, None
    note = f"{len(bad)} of {len(sents)} sentences whose tree could not be written, written as (NOPARSE w1 ... wn)"
    log.warn(note)
    return lines, note


def made_by(g) -> str | None:
    """The command (or Python call) that wrote grammar ``g``, from its header: a parse's provenance."""
    return g.meta.get("command") or g.meta.get("call")


def _member_failure(parser, thetas, paths):
    """``explain(i)`` for --average: the first member grammar under which sentence ``i`` has no tree, and why
    (a sentence one member cannot parse has no averaged posteriors)."""
    def explain(i):
        for path, theta in zip(paths, thetas):
            _, z = parser.inside_outside(theta, idx=np.array([i], dtype=np.int64))
            if not np.isfinite(z[0]):
                return f"under {path}: {parser.explain(i, theta)}"
        return parser.explain(i, thetas[0])
    return explain


def _member(path, g, first_path):
    """The rule probabilities of an --average grammar, which must hold GRAMMAR's rules in GRAMMAR's order."""
    from grind.cli.common import read_probabilities
    other = read_probabilities(path, g.start, "grind parse --average")
    if other.start != g.start or not g.same_rules_as(other):
        raise InputError(f"{path}: --average needs the rules of {first_path} in the same order (and its start "
                         f"symbol); this grammar has others")
    return other.probabilities()


def _treebank_input(grammar_path, corpus, spec, start, command):
    """A treebank grammar, its latent view, and the corpus's words as its terminals, as grind parse reads
    them: escaped, an unknown word replaced by its signature (backed off to a coarser one the grammar has).
    Returns ``(g, latent, sents, terminals, unknown)``: ``unknown`` counts ``replaced`` tokens, ``backoff``
    (a coarser signature) and ``unlexed`` (a signature the grammar has no rule for either), and names in
    ``failures`` (sentence index -> reason) the sentences such a token leaves without a parse."""
    import dataclasses

    from grind.cli.common import read_probabilities
    from grind.formats.treebank import signature, unknown_token
    from grind.formats.trees import ptb_word
    from grind.grammars.latent import LatentGrammar
    if spec.column not in (None, "FORM") or spec.punct != "none":
        raise click.UsageError("a treebank grammar reads every sentence's words as they are (--column FORM, no "
                               "--punct)")
    sents = read_corpus(corpus, dataclasses.replace(spec, column="FORM"))
    g = read_probabilities(grammar_path, start, command)
    latent = LatentGrammar(g)
    known = latent.known_words()
    unknown: dict = {"replaced": 0, "backoff": 0, "unlexed": 0, "failures": {}, "backed": {}}
    toks = []
    for k, s in enumerate(sents):
        row = []
        for i, w in enumerate(s.tokens):
            if w not in known and ptb_word(w) in known:          # '(' in text, -LRB- in the treebank
                w = ptb_word(w)
            if w not in known:
                sig = unknown_token(w, i == 0, known)
                unknown["replaced"] += 1
                if sig != signature(w, i == 0):
                    unknown["backoff"] += 1
                    unknown["backed"].setdefault(k, []).append(f"{w!r} as {sig}")
                if sig not in known:
                    unknown["unlexed"] += 1
                    unknown["failures"].setdefault(k, f"word {w!r} at position {i + 1} is unknown and the grammar "
                                                      f"has no rule for its signature {sig} nor a coarser one")
                w = sig
            row.append(latent.terminal(w))
        toks.append(row)
    return g, latent, sents, toks, unknown


def _unknown_words(unknown: dict, verb: str) -> str:
    """What :func:`_treebank_input` did with unknown words, for stderr and the ``# unknown_words:`` header."""
    out = f"{unknown['replaced']} word tokens the grammar lacks {verb} as their unknown-word signatures"
    if unknown["backoff"]:
        out += f" ({unknown['backoff']} backed off to a coarser signature the grammar has)"
    if unknown["unlexed"]:
        out += f"; {unknown['unlexed']} with no signature rule in the grammar (their sentences have no parse)"
    return out


def _treebank_logz(grammar_path, corpus, spec, start, kernel):
    """log Z of every sentence under a treebank grammar (exhaustive; words mapped as grind parse maps them)."""
    import types

    from grind.kernels.latent_parse import LatentParser
    if kernel != "auto":
        raise click.UsageError("a treebank grammar is scored by its own kernel: leave out --kernel")
    g, latent, sents, toks, unknown = _treebank_input(grammar_path, corpus, spec, start, "grind loglik")
    if unknown["replaced"]:
        log.info(_unknown_words(unknown, "scored"))
    logz = LatentParser(g, weights=g.probabilities(), latent=latent, prune=False).logz(toks)
    return g, sents, types.SimpleNamespace(failures=unknown["failures"]), logz


def _write_treebank_parses(output, grammar_path, corpus, spec, start, decoder, prune, threshold, limit=None):
    """Parse with a (latent) treebank grammar: unsplit, unbinarised PTB trees, the corpus's own words as leaves."""
    import dataclasses
    import time

    from grind.formats.trees import format_tree, map_leaves
    from grind.formats.treebank import debinarise
    from grind.kernels.latent_parse import LatentParser
    if spec.min_length > 1 or spec.max_length is not None:
        raise click.UsageError("a treebank grammar parses every sentence (no length limits), so that grind eval "
                               "--labeled can align the parses with the gold trees")
    g, latent, sents, toks, unknown = _treebank_input(grammar_path, corpus, spec, start, "grind parse")
    spec = dataclasses.replace(spec, column="FORM")
    if unknown["replaced"]:
        log.info(_unknown_words(unknown, "parsed"))
    parser = LatentParser(g, weights=g.probabilities(), latent=latent, prune=prune, threshold=threshold)
    t0 = time.perf_counter()
    results = parser.parse(toks, method=decoder)
    seconds = time.perf_counter() - t0
    unparsed = 0
    reasons = []
    escaped = _escaped_words(sents)

    def tree_text(k, s):
        nonlocal unparsed
        tree = results[k].tree
        if tree is None:
            unparsed += 1
            why = unknown["failures"].get(k) or results[k].reason or NO_DERIVATION
            if k in unknown["backed"]:
                why += f" (unknown words backed off to a coarser signature: {', '.join(unknown['backed'][k])})"
            if unparsed <= 10:
                log.warn(f"sentence {s.number} (line {s.line}) has no parse: {why}")
            reasons.append(why)
            return format_tree(("NOPARSE", *s.tokens))
        words = iter(s.tokens)
        return format_tree(map_leaves(debinarise(tree), lambda _, words=words: next(words)))

    lines, failed = _tree_lines(sents, tree_text)
    if unparsed:
        log.warn(f"{unparsed} of {len(sents)} sentences have no parse; written as (NOPARSE w1 ... wn)")
    if limit is not None:
        check_unparsed(unparsed, len(sents), limit, "sentences", reasons)

    st = getattr(parser, "stats", {}) or {}
    log.info(f"parsed {len(sents)} sentences in {seconds:.1f}s ({len(sents) / max(seconds, 1e-9):.1f} sentences/s)"
             + (f", {st.get('pruned_share', 0):.1%} of chart items pruned" if prune else ""))
    with open_out(output) as f:
        f.writelines(header_lines(decoder=decoder, corpus=spec.describe(sents.format), unparsed=unparsed,
                                  left_out=left_out(sents),
                                  unknown_words=_unknown_words(unknown, "parsed"),
                                  pruning=(f"coarse-to-fine, threshold {threshold}: {st.get('pruned_share', 0):.4f} of "
                                           f"chart items pruned, {st.get('retries', 0)} sentences re-parsed "
                                           "without pruning") if prune else "none (exhaustive)",
                                  output="unsplit symbols, unbinarised", failed=failed, escaped_words=escaped,
                                  grammar_made_by=made_by(g)))
        f.writelines(lines)


def _escaped_words(sents) -> str | None:
    """How many words the trees write with -LRB- / -RRB- (:func:`grind.formats.trees.ptb_word`), said on
    stderr; the header's note (None: none)."""
    from grind.formats.trees import ptb_word
    n = sum(ptb_word(w) != w for s in sents for w in s.tokens)
    if not n:
        return None
    note = (f"{n} words with '(' or ')' written with -LRB- / -RRB- (the PTB's escapes; a treebank grammar also "
            "reads them so)")
    log.info(note)
    return note


def lexical_cuts(grammar, derivation) -> set[int]:
    """Token positions where a morph starts or ends in ``derivation``: the
    start and end of every lexical-rule node (a rule whose right-hand side is
    all terminals).  Tokens no lexical rule covers (a terminal beside
    nonterminals, ``A --> B t``) thus fall into morphs of their own
    consecutive run."""
    cuts = set()
    for r, a, b in derivation:
        if not any(grammar.is_nonterminal(x) for x in grammar.rules[r][1]):
            cuts.update((int(a), int(b)))
    return cuts


def mbr_inner(posteriors, n: int) -> np.ndarray:
    """The n - 1 internal-position posteriors of a word of ``n`` tokens, from
    those or from all n + 1 positions 0..n."""
    p = np.asarray(posteriors, dtype=np.float64).ravel()
    if len(p) == n + 1:
        p = p[1:n]
    if len(p) != max(n - 1, 0):
        raise ValueError(f"{len(p)} boundary posteriors for a word of {n} characters")
    return np.clip(p, 0.0, 1.0)                 # rounding can put a certain boundary at 1 + 7e-15


#: Posteriors within this of the --boundary-threshold are ties, and ties are not cut: the
#: kernel's posteriors carry rounding of ~1e-15 (even 1 + 7e-15), and a committee of an even
#: number of sharp grammars averages to the threshold 0.5 exactly at every position they split on.
MBR_TIE = 1e-9


def mbr_cuts(posteriors, n: int, threshold: float = 0.5, tie: float = 0.0) -> set[int] | None:
    """Boundaries of a word of ``n`` tokens from its boundary posteriors:
    after token i (0 < i < n) iff P(boundary after i) > ``threshold`` + ``tie`` -- each
    boundary decision is made separately, so at 0.5 this maximises the
    expected number of correct decisions.  ``posteriors`` has the n - 1 internal positions
    (entry i - 1 = after token i) or all n + 1 positions 0..n; None or a
    non-finite entry = unparsed (None returned)."""
    if posteriors is None:
        return None
    p = mbr_inner(posteriors, n)
    if not np.all(np.isfinite(p)):
        return None
    return {i + 1 for i in np.flatnonzero(p > threshold + tie)}


def expected_f_threshold(posteriors) -> tuple[float, float]:
    """The boundary threshold maximising the expected boundary F-score of a
    corpus, and that expected F.  With p_i the posteriors of all internal
    positions and S the positions cut, E[TP] = sum_S p_i and E[#gold
    boundaries] = sum_i p_i, so (ratio of expectations, as in Jansche 2005's
    expected F)

        E[F] ~ 2 sum_{i in S} p_i / (|S| + sum_i p_i),

    which for |S| = k is largest on the k largest p_i: the best k over all k,
    cut where p >= the k-th largest.  ``posteriors``: per word, the posteriors
    of its internal positions (words without a parse left out).  (1.0, nan)
    when no position has positive posterior: nothing is cut."""
    flat = np.sort(np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in posteriors] + [np.zeros(0)]))[::-1]
    total = float(flat.sum())
    if total <= 0:
        return 1.0, float("nan")
    ef = 2.0 * np.cumsum(flat) / (np.arange(1, len(flat) + 1) + total)
    k = int(np.argmax(ef))
    return float(flat[k]), float(ef[k])


def _write_segmentations(output, g, sents, parser, decoder, seg_format, spec, threshold=0.5, thetas=None,
                         header=None, limit=None):
    """grind parse --segment (see parse's help); ``thetas`` (M, R): --mbr averages
    the boundary posteriors of these M grammars (default: ``g``'s probabilities);
    ``threshold`` "expected-f": :func:`expected_f_threshold` over the parsed words."""
    from grind.formats.segmentations import format_segmentation, morphs_from_cuts
    if g.start != "Word" and g.meta.get("model") != "morph":
        log.warn(f"--segment: a grammar not made by make-grammar morph (no '# model: morph'), start symbol "
                 f"{g.start!r}: segmenting at its lexical rules' spans anyway")
    theta = g.probabilities()
    thetas = theta[None] if thetas is None else thetas
    if decoder == "mbr":
        if not hasattr(parser, "boundary_posteriors"):
            raise click.UsageError(f"--mbr with --segment needs boundary posteriors, which the "
                                   f"{type(parser).__name__} kernel does not provide; use --viterbi")
        idx = np.arange(len(sents))
        logz = np.zeros(len(sents))
        post: list | None = None
        for th in thetas:
            logz += np.asarray(parser.inside_outside(th)[1], dtype=np.float64)   # -inf if any member fails
            got = parser.boundary_posteriors(th, idx)
            post = got if post is None else [a + b for a, b in zip(post, got)]
        if len(thetas) > 1:
            post = [p / len(thetas) for p in post]
        if threshold == "expected-f":
            try:
                inner = [mbr_inner(p, len(s)) for p, s, z in zip(post, sents, logz) if np.isfinite(z)]
            except ValueError as e:
                raise RuntimeError(f"{type(parser).__name__}.boundary_posteriors: {e}") from None
            t, ef = expected_f_threshold(inner)
            threshold = np.nextafter(t, -np.inf)         # cut where p >= t
            header = dict(header or {}, boundary_threshold=(
                f"{t:.6g} (maximum expected boundary F over the corpus: expected F {ef:.4f})"))
            tie = 0.0
        else:
            tie = MBR_TIE
            try:
                ties = sum(int((np.abs(mbr_inner(p, len(s)) - threshold) <= tie).sum())
                           for p, s, z in zip(post, sents, logz) if np.isfinite(z))
            except ValueError as e:
                raise RuntimeError(f"{type(parser).__name__}.boundary_posteriors: {e}") from None
            if ties:
                log.info(f"{ties} boundary positions have a posterior within {tie:g} of the threshold "
                         f"{threshold:g} (ties): not cut")
            header = dict(header or {}, boundary_threshold=(
                f"{threshold:g} (a boundary where its posterior exceeds this by more than {tie:g}; "
                f"ties within {tie:g}, not cut: {ties})"))
        cuts = []
        for i, s in enumerate(sents):
            try:
                c = mbr_cuts(post[i], len(s), threshold, tie) if np.isfinite(logz[i]) else None
            except ValueError as e:
                raise RuntimeError(f"{type(parser).__name__}.boundary_posteriors: word {s.number}: {e}") from None
            cuts.append(c)
    else:
        derivs, logz = parser.viterbi(theta)
        cuts = [None if d is None else lexical_cuts(g, d) for d in derivs]
    logz = np.where([c is None for c in cuts], -np.inf, np.asarray(logz, dtype=np.float64))
    bad = np.flatnonzero(~np.isfinite(logz))
    for i in bad[:10]:
        s = sents[i]
        why = parser.failures.get(int(i), "no derivation has positive probability")
        log.warn(f"word {s.number} {''.join(s.tokens)!r} (line {s.line}) has no parse: {why}")
    if len(bad) > 10:
        log.warn(f"... and {len(bad) - 10} more")
    unparsed = len(bad)
    if unparsed:
        log.warn(f"{unparsed} of {len(sents)} words have no parse; written 'word<TAB>_' (grind eval "
                 "--segmentation: no correct morph, no boundary)")
    fix = ""
    if unparsed:
        whole = sum(1 for i in bad if len(sents[i].tokens) == 1 and len(sents[i].tokens[0]) > 1)
        if not spec.chars and whole * 2 > unparsed:
            fix = (f"{whole} of them are one token of several characters: without --chars a line's tokens are "
                   "its whitespace-separated strings, so a word list needs --chars (its characters the tokens)")
            log.warn(fix)
    if limit is not None:
        check_unparsed(unparsed, len(sents), limit, "words",
                       [parser.failures.get(int(i), NO_DERIVATION) for i in bad], fix)
    with open_out(output) as f:
        f.writelines(header_lines(decoder=decoder, segmentation=seg_format, corpus=spec.describe(sents.format),
                                  left_out=left_out(sents), unparsed=unparsed, **(header or {})))
        for s, c in zip(sents, cuts):
            word = "".join(s.tokens)
            f.write(format_segmentation(word, None if c is None else morphs_from_cuts(s.tokens, c), seg_format))


@click.command(cls=GroupedCommand)
@corpus_options
@option("--attach", type=click.Choice(["left", "right"]), required=True,
        help="right: each head is the next word; left: the previous.",
        doc="right: each word's head is its right neighbour (last word = root); left: the mirror image.")
@output_option
@click.argument("corpus")
def baseline(corpus, spec, attach, output):
    """Write the attach-left or attach-right dependency trees of CORPUS (CoNLL).

    \b
    Example:
      grind baseline --attach right --column UPOS --punct ud test.conllu > right.conllu
      grind eval --column UPOS --punct ud test.conllu right.conllu
    """
    from grind.eval.dependencies import attach_heads
    sents = read_corpus(corpus, spec, keep_outside=True).kept()
    write_conll(output, sents, [attach_heads(len(s), attach) for s in sents], spec, baseline=f"attach-{attach}",
                corpus=spec.describe(sents.format))


@click.command(cls=GroupedCommand)
@corpus_options
@click.option("--summary", is_flag=True, help="Only the corpus totals, not one line per sentence.")
@kernel_option
@start_option
@max_unparsed_option
@output_option
@click.argument("grammar")
@click.argument("corpus")
def loglik(grammar, corpus, spec, summary, kernel, start, max_unparsed, output):
    """Log probability of each sentence of CORPUS, the total and per-word perplexity.

    Rows are 'sentence<TAB>words<TAB>logprob' (natural log; -inf = no parse);
    the totals follow as '# key: value' lines.  Perplexity = exp(-total / words)
    over the parsed sentences.

    \b
    Example:
      grind loglik --summary --column UPOS --punct ud g.txt dev.conllu
    """
    import dataclasses
    import math

    from grind.errors import NumericalError
    if is_treebank_grammar(grammar):
        g, sents, parser, logz = _treebank_logz(grammar, corpus, spec, start, kernel)
        spec = dataclasses.replace(spec, column="FORM")
    else:
        spec = grammar_spec(grammar, corpus, spec)
        g, sents, parser = load(grammar, corpus, spec, start, kernel, "grind loglik")
        _, logz = parser.inside_outside(g.probabilities())
    logz = np.asarray(logz, dtype=np.float64)
    odd = np.flatnonzero(np.isnan(logz) | (logz == np.inf))
    if len(odd):
        where = ", ".join(f"{sents[i].number} (line {sents[i].line}): {float(logz[i])!r}" for i in odd[:5])
        raise NumericalError(f"{corpus}: the log probability of {len(odd)} sentence(s) is not a number or "
                             f"+inf, a numerical failure of the chart kernel: sentence {where}"
                             f"{' ...' if len(odd) > 5 else ''}; try --kernel cky")
    failed = report_failures(sents, parser, logz, fate="are written with log probability -inf and left out of the "
                                                      "total and the perplexity", limit=max_unparsed)
    ok = np.isfinite(logz)
    words = sum(len(s) for s, k in zip(sents, ok) if k)
    total = float(logz[ok].sum()) if ok.any() else float("nan")
    if not ok.any():
        log.warn(f"{corpus}: no sentence has a parse: the total log probability and the perplexity are undefined "
                 "(written nan)")
    elif not math.isfinite(total):
        worst = np.argsort(logz[ok])[:3]
        idx = np.flatnonzero(ok)[worst]
        raise NumericalError(f"{corpus}: the total log probability of the {int(ok.sum())} parsed sentences "
                             "is not finite although each one is (the sum left floating-point range); "
                             "the lowest: " + ", ".join(f"sentence {sents[i].number} (line {sents[i].line}) "
                                                        f"{float(logz[i])!r}" for i in idx))
    with np.errstate(over="ignore"):
        ppl = float(np.exp(-total / words)) if words else float("nan")
    if words and math.isinf(ppl):
        log.warn(f"the perplexity exp({-total / words!r}) is above the floating-point range: written as inf "
                 f"(the log probability per word is {total / words!r})")
    with open_out(output) as f:
        f.writelines(header_lines(corpus=spec.describe(sents.format), left_out=left_out(sents, "not scored")))
        if not summary:
            f.write("sentence\twords\tlogprob\n")
            for s, lz in zip(sents, logz):
                f.write(f"{s.number}\t{len(s)}\t{float(lz)!r}\n")
        f.write(f"# sentences: {len(sents)}\n# parsed: {len(sents) - failed}\n# words: {words}\n")
        f.write(f"# logprob: {total!r}\n# perplexity: {ppl!r}\n")
