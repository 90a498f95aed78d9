"""``grind make-grammar`` (cnf, dmv, morph, from-file), ``make-structure`` and ``init``."""
from __future__ import annotations

import click
import numpy as np

from grind import log
from grind.formats.corpus import read_corpus, read_corpus_tokens
from grind.formats.textio import shown
from grind.errors import InputError
from grind.formats.rules import ARROW, unholdable
from grind.grammars.grammar import read_grammar
from grind.grammars.latent import treebank_meta
from grind.grammars.morph import TEMPLATE_SETS
from grind.cli.common import (corpus_options, output_option, seed_option, start_option, FiniteFloatRange, _given,
                              make_rng, write_grammar, OneChoiceCommand, left_out, grammar_spec)
from grind.cli.options import GroupedCommand, GroupedGroup, option, table_option

G = "Grammar"
C = "Structural constraints (unlexicalized)"


@click.group("make-grammar", cls=GroupedGroup)
def make_grammar():
    """Write a grammar to train: a fully connected CNF grammar, the DMV, a morphology grammar, the
    (latent-annotation) treebank PCFG of PTB trees, or a checked copy of a file.

    \b
    Examples:
      grind make-grammar cnf -n 10 -p 10 --column UPOS --punct ud train.conllu > g0.txt
      grind make-grammar dmv --column UPOS --punct ud --max-length 10 train.conllu > dmv0.txt
      grind make-grammar morph --chars --types words.txt > morph0.txt
      grind make-grammar treebank --subtypes 2 train.mrg > latent0.txt
    """


def check_symbols(sents, corpus) -> None:
    """An InputError naming the sentence of the first token a grammar rule cannot hold as a symbol (empty,
    with whitespace -- UD allows a FORM such as '34 470' -- or '-->')."""
    name = "<stdin>" if corpus == "-" else corpus
    for s in sents:
        for i, t in enumerate(s.tokens):
            if unholdable(t):
                raise InputError(f"{name}: sentence {s.number} (line {s.line}), token {i + 1}: {t!r} cannot be a "
                                 f"grammar symbol (the rule format, symbols separated by whitespace, cannot hold an "
                                 f"empty token, one with whitespace in it or '{ARROW}'): use another --column")


@make_grammar.command("cnf")
@corpus_options
@option("-n", "--nonterminals", type=click.IntRange(1), required=True, metavar="N", group=G,
        help="Number of nonterminals X0...")
@option("-p", "--preterminals", type=click.IntRange(0), default=0, show_default=True, metavar="P", group=G,
        help="Number of preterminals PT0...", doc="Number of preterminals PT0... (0: the X rewrite to words directly).")
@option("--start-symbol", default="ROOT", show_default=True, metavar="NAME", group=G, help="Name of the start symbol.")
@option("--max-rules", type=click.IntRange(1), default=5_000_000, show_default=True, metavar="N", group=G,
        help="Refuse a grammar of more rules.",
        doc="Refuse to build a grammar of more rules than this: n + n (n + p)^2 + (p or n) |V| for n "
            "nonterminals, p preterminals, |V| words (counted before building).")
@output_option
@click.argument("corpus")
def make_cnf(corpus, spec, nonterminals, preterminals, start_symbol, max_rules, output):
    """Fully connected CNF grammar over the vocabulary of CORPUS.

    \b
    Example:
      grind make-grammar cnf -n 10 -p 10 --column UPOS --punct ud train.conllu > g0.txt
    \f
    \b
    ROOT --> X_i;  X_i --> A B  for all A, B in X (and PT);
    X_i --> w (no preterminals) or PT_j --> w (with preterminals).
    All weights are 1: run 'grind init --random --seed 1' to turn them into
    probabilities (uniform ones are a symmetric start, which training cannot leave).
    """
    from grind.grammars.cnf import cnf_grammar
    sents = read_corpus(corpus, spec)
    check_symbols(sents, corpus)
    vocab = sorted({t for s in sents for t in s.tokens})
    n, p = nonterminals, preterminals
    n_rules = n + n * (n + p) ** 2 + (p or n) * len(vocab)
    if n_rules > max_rules:
        raise InputError(f"{corpus}: a CNF grammar of {n} nonterminals, {p} preterminals and {len(vocab):,} words has "
                         f"{n_rules:,} rules, above the limit of {max_rules:,}: use fewer symbols, or lift the limit "
                         f"with --max-rules {n_rules}")
    g = cnf_grammar(vocab, nonterminals, preterminals, start_symbol)
    write_grammar(output, g, g.weights, "unnormalised (all 1)", corpus=spec.describe(sents.format))


@make_grammar.command("dmv")
@corpus_options
@option("--lexicalized", is_flag=True, group=G, help="Words as heads (choose rules seen in a sentence).",
        doc="Words as heads: choose rules only for (head, dependent, direction) triples seen in a sentence.")
@option("--tags", "tags_path", default=None, metavar="FILE", group=G, help="Also cover the tags of this file.",
        doc="Unlexicalized: also cover the tags of this file (whitespace separated; lines starting "
            "'# ' are comments).")
@option("--tags-from", "tags_from", multiple=True, metavar="CORPUS", group=G,
        help="Also cover the tags of this corpus.",
        doc="Unlexicalized: also cover every tag of this corpus, read with the same --column/--punct "
            "and no length filter (repeatable: e.g. dev and test).")
@option("--words-from", "words_from", multiple=True, metavar="CORPUS", group=G,
        help="Lexicalized: also the words and pairs of this corpus.",
        doc="Lexicalized: also the words of this corpus and choose rules for the pairs that co-occur in its "
            "sentences, read with the same corpus options (repeatable: e.g. the test set, so that it parses).")
@option("--max-rules", type=click.IntRange(1), default=5_000_000, show_default=True, metavar="N", group=G,
        help="Refuse a grammar of more rules.",
        doc="Refuse to build an unlexicalized DMV of more rules than this (10 |V| + 2 |V|^2 for "
            "|V| head types; FORM over a corpus gives tens of millions).")
@option("--leaf-tags", default=None, metavar="TAGS", group=C, help="Tags that take no dependents (udfunc: UD's).",
        doc="Tags that take no dependents (commas or spaces): tags, or udfunc = UD function words ADP AUX "
            "CCONJ/CONJ DET PART SCONJ (udfunc-v1, udfunc-v2: one UD version's).")
@option("--root-tags", default=None, metavar="TAGS", group=C, help="Only these tags may be the root.",
        doc="Only these tags may be the root (commas or spaces).")
@option("--forbid", default=None, metavar="ARCS", group=C, help="Forbidden arcs HEAD>DEP (* any tag).",
        doc="Forbidden arcs HEAD>DEP (commas or spaces; * for any tag).")
@option("--constraint-file", default=None, metavar="FILE", group=C, help="Constraints from a file.",
        doc="File of constraints: lines 'leaf TAG ...', 'root TAG ...', 'forbid HEAD DEP [left|right]'.")
@output_option
@click.argument("corpus")
def make_dmv(corpus, spec, lexicalized, tags_path, tags_from, words_from, max_rules, leaf_tags, root_tags, forbid,
             constraint_file, output):
    """The DMV (Klein & Manning 2004) as a split-head PCFG over a tag set.

    \b
    Examples:
      grind make-grammar dmv --column UPOS --punct ud --max-length 10 train.conllu > dmv0.txt
      grind make-grammar dmv --lexicalized --column LFORM --punct ud childes.conllu > lex0.txt
      grind make-grammar dmv --lexicalized --column LFORM --punct ud --words-from test.conllu train.conllu > lex.txt
      grind make-grammar dmv --column UPOS --punct ud --leaf-tags udfunc train.conllu > leaves0.txt
    \f
    \b
    S --> Y_h;  Y_h --> L0_h R0_h;  L0_h / L_h --> h_l (STOP) | L'_h (not STOP),
    valence 0 / 1;  L'_h --> Y_d L_h (choose d);  mirror rules R0_h, R_h, R'_h.
    Uniform probabilities; any PCFG tool can read it, grind uses its DMV kernel.

    \b
    The head types (unlexicalized) are a tag set, not the sample's tags, so
    held-out sentences parse:
      --column UPOS   the 17 UPOS tags (without PUNCT under --punct ud), plus
                      any other value CORPUS has (with a warning);
      other columns   every tag of CORPUS read without --max-length/--min-length
                      (a <= 10 grammar covers the whole training file);
      and in both cases the tags of --tags FILE and --tags-from CORPUS2.
    The header's '# tagset:' line says how it was made.  --lexicalized:
    the words of the (length-filtered) CORPUS, choose rules only for pairs
    seen in one sentence; --words-from adds another corpus's words and pairs
    (a test set's, so that it parses).

    \b
    Structural constraints (unlexicalized; the header's '# constraints:' line):
    the rules they forbid are left out of the grammar, so no algorithm, init
    or parse ever uses a forbidden arc: --leaf-tags (no dependents: no choose
    rules and a lone STOP on both sides), --root-tags (root rules only for
    these), --forbid HEAD>DEP and --constraint-file.  A sentence with no tree
    satisfying them is left out of training (said); grind parse relaxes the
    constraints for it (said and counted).

    \b
    Example:
      grind make-grammar dmv --column XPOS --punct ptb --max-length 10 --tags-from dev.conllu train.conllu > dmv0.txt
    """
    from grind.grammars.dmv import dmv_grammar, dmv_size
    constrained = {}
    if lexicalized:
        if tags_path or tags_from:
            raise click.UsageError("--tags / --tags-from are for the unlexicalized DMV")
        if leaf_tags or root_tags or forbid or constraint_file:
            raise click.UsageError("the structural constraints (--leaf-tags, --root-tags, --forbid, "
                                   "--constraint-file) are over tags: for the unlexicalized DMV")
        c = read_corpus_tokens(corpus, spec)
        check_symbols(c, corpus)
        sents, read_as = [s.tokens for s in c], c.format
        for other in words_from:
            more = read_corpus_tokens(other, spec)
            check_symbols(more, other)
            sents += [s.tokens for s in more]
        g = dmv_grammar(sents, lexicalized=True)
        also = f" and {len(words_from)} --words-from corpora" if words_from else ""
        tagset = (f"{spec.column or 'tokens'} of the length-filtered corpus{also} "
                  f"({len({t for s in sents for t in s})} types)")
    else:
        if words_from:
            raise click.UsageError("--words-from is for the lexicalized DMV (--lexicalized)")
        read: dict = {}
        vocab, tagset = dmv_tagset(corpus, spec, tags_path, tags_from, read)
        read_as = read.get("format")
        bad = [t for t in vocab if unholdable(t)]
        if bad:
            raise InputError(f"{corpus}: the {spec.column or 'token'} value {bad[0]!r} (of CORPUS, --tags or "
                             f"--tags-from) cannot be a grammar symbol (the rule format cannot hold an empty value, "
                             f"one with whitespace in it or '{ARROW}'): use another --column")
        n_rules = dmv_size(len(vocab))
        if n_rules > max_rules:
            raise InputError(f"{corpus}: an unlexicalized DMV over {len(vocab)} head types "
                             f"({spec.column or 'tokens'}) has {n_rules:,} rules (10 |V| + 2 |V|^2), above the "
                             f"limit of {max_rules:,}: use a tag column, or --lexicalized (choose rules only for "
                             f"pairs seen in a sentence), or lift the limit with --max-rules {n_rules}")
        from grind.grammars.dmv_constraints import constraints_of_options
        c = constraints_of_options(set(vocab), leaf_tags, root_tags, forbid, constraint_file)
        g = dmv_grammar([], vocabulary=vocab, constraints=c)
        if c:
            constrained = {"constraints": f"{c.describe()}; {n_rules - len(g)} of the DMV's {n_rules} rules left "
                                          "out"}
            log.info(f"constraints: {constrained['constraints']}")
    log.info(f"DMV over {tagset}: {len(g)} rules")
    write_grammar(output, g, g.weights, "probabilities (uniform)", model="dmv",
                  lexicalized=str(lexicalized).lower(), tagset=tagset, corpus=spec.describe(read_as), **constrained)


TEMPLATE_SET_NAMES = list(TEMPLATE_SETS)


@make_grammar.command("morph")
@corpus_options
@option("--templates", "templates_path", default=None, metavar="FILE", group=G,
        help="Template rules over slot names.",
        doc="File of template rules 'Word --> Pre Stem Suf' over slot names ('|' alternatives, '#' "
            "comments); the first LHS is the start symbol.")
@option("--template-set", type=click.Choice(TEMPLATE_SET_NAMES), default="czech", show_default=True, metavar="NAME",
        group=G, help=f"Built-in templates: {', '.join(TEMPLATE_SET_NAMES)}.",
        doc="Built-in templates (unless --templates): sesotho = Johnson et al. 2007's five "
            "(Word --> V | V M | SM V M | SM T V M | SM T OM V M); czech = Word --> [Pre] Stem "
            "Suf{0..3}; czech-long = Word --> Pre{0..2} Stem Suf{0..5} (stacked prefixes, longer "
            "suffix chains).")
@option("--max-morph-length", type=click.IntRange(1), default=None, metavar="N", group=G,
        help="Longest substring a slot rewrites to.",
        doc="Longest substring (in characters) a slot may rewrite to (default: whole words).")
@option("--shared/--per-slot", default=True, show_default=True, group=G, help="Every slot every substring?",
        doc="Every slot gets every substring (shared, Johnson's), or only the substrings that fit "
            "its template positions (per-slot: a slot always first gets word-initial substrings, "
            "never first non-initial ones; likewise last / word-final).")
@option("--max-rules", type=click.IntRange(1), default=5_000_000, show_default=True, metavar="N", group=G,
        help="Refuse a grammar of more rules.",
        doc="Refuse to build a grammar of more rules than this (counted before building).")
@output_option
@click.argument("words")
def make_morph(words, spec, templates_path, template_set, max_morph_length, shared, max_rules, output):
    """Morphology PCFG (Johnson, Griffiths & Goldwater 2007) over the words of WORDS.

    \b
    Examples:
      grind make-grammar morph --chars --types words.txt > morph0.txt
      grind train --algo em --chars morph0.txt words.txt > morph1.txt
    \f
    \b
    A word is a sentence of characters (--chars is required).  Template rules
    Word --> SLOT ... ; every slot --> every distinct substring of the
    training words (e.g. Stem --> a b d), --per-slot: only those fitting the
    slot's position.  Uniform probabilities per LHS: train it directly.  A
    derivation's lexical spans are the segmentation.

    \b
    Example:
      grind make-grammar morph --chars --template-set sesotho --max-morph-length 8 ces.word.train.tsv > m0.txt
    """
    from grind.grammars.morph import (builtin_templates, describe_templates, morph_grammar, morph_size,
                                      read_templates, substrings)
    if not spec.chars:
        raise click.UsageError("make-grammar morph reads words as characters: pass --chars "
                               "(and the same to train/parse)")
    if templates_path and _given("template_set"):
        raise click.UsageError("--templates and --template-set exclude each other")
    templates = read_templates(templates_path) if templates_path else builtin_templates(template_set)
    sents = read_corpus(words, spec)
    ws = [s.tokens for s in sents]
    subs = substrings(ws, max_morph_length)
    n_rules = morph_size(templates, subs, templates[0][0], shared)
    log.info(f"{len(ws)} words, {len(subs):,} distinct substrings"
             f"{'' if max_morph_length is None else f' (at most {max_morph_length} characters)'}, "
             f"{n_rules:,} rules ({len(templates)} templates)")
    if n_rules > max_rules:
        raise InputError(f"{words}: a morphology grammar over {len(subs):,} substrings has {n_rules:,} rules, "
                         f"above the limit of {max_rules:,}: use --max-morph-length, --per-slot or fewer words, "
                         f"or lift the limit with --max-rules {n_rules}")
    try:
        g = morph_grammar(ws, templates, max_morph_length, shared, subs=subs)
    except InputError as e:
        if "template symbols" not in str(e) or templates_path:
            raise
        raise InputError(f"{words}: {e}: the built-in --template-set {template_set} names them; write its "
                         f"templates ({describe_templates(templates)}) to a file with other slot names and give "
                         "--templates FILE") from None
    what = f"--templates {templates_path}" if templates_path else f"--template-set {template_set}"
    write_grammar(output, g, g.weights, "probabilities (uniform)", model="morph",
                  templates=f"{what}: {describe_templates(templates)}", substrings=len(subs),
                  slots="shared" if shared else "per-slot", max_morph_length=max_morph_length,
                  corpus=spec.describe(sents.format), left_out=left_out(sents, "no substrings taken"))


@make_grammar.command("treebank")
@option("--subtypes", type=click.IntRange(1), default=1, show_default=True, metavar="H", group=G,
        help="Latent subtypes of every symbol but the root.",
        doc="H: split every symbol but the root into H latent subtypes X@0 .. X@H-1 (1: the treebank PCFG).")
@option("--markov", "markov_h", type=click.IntRange(0), default=0, show_default=True, metavar="N", group=G,
        help="Horizontal Markovisation (siblings kept).",
        doc="Horizontal Markovisation of the right-factored binarisation: the intermediate symbol remembers "
            "this many siblings (0: plain @X, Petrov et al.'s X-bar style).")
@option("--rare", type=click.IntRange(0), default=1, show_default=True, metavar="N", group=G,
        help="Words seen <= N times -> signatures.",
        doc="Training words seen at most this many times are replaced by unknown-word signatures.")
@option("--noise", type=FiniteFloatRange(0, 0.5), default=0.01, show_default=True, metavar="X", group=G,
        help="Relative noise on the split rules.",
        doc="Relative random noise on the split rules' probabilities (breaks the symmetry; --seed).")
@option("--max-rules", type=click.IntRange(1), default=5_000_000, show_default=True, metavar="N", group=G,
        help="Refuse a grammar of more rules.",
        doc="Refuse to build a grammar of more rules than this (counted before building).")
@seed_option
@output_option
@click.argument("trees")
def make_treebank(trees, subtypes, markov_h, rare, noise, max_rules, seed, output):
    """Treebank PCFG of the PTB bracketed TREES, optionally split into latent subtypes.

    \b
    Examples:
      grind make-grammar treebank --subtypes 8 --seed 1 train.mrg > split8.txt
      grind train --trees --algo em split8.txt train.mrg > latent8.txt
    \f
    \b
    Trees are prepared as Petrov et al. (2006): function tags and indices
    stripped, -NONE- and the constituents it empties deleted, X --> X unary
    chains collapsed, a ROOT symbol on top, right-factored binarisation
    (intermediate symbols @X, --markov), rare words -> signatures such as
    <UNK-LC-ing> (--rare).  The rules are the relative-frequency PCFG; with
    --subtypes H every nonterminal but ROOT becomes X@0 .. X@H-1 and every
    rule all its refinements, with probability P(rule) / (H^k) * (1 + u),
    u ~ U(-noise, noise), renormalised (Wang & Blunsom 2013, §4.3).  Words
    spelled like a symbol (',' is a tag and a word) are written '\\,'.

    \b
    Example:
      grind make-grammar treebank train.mrg > pcfg.txt
    """
    from grind.formats.trees import read_trees
    from grind.formats.treebank import prepare
    from grind.grammars.latent import split_grammar, split_size, treebank_grammar
    name = "<stdin>" if trees == "-" else trees
    if subtypes == 1 and _given("noise"):
        raise click.UsageError("--noise randomises the split of --subtypes H > 1; the treebank PCFG (H = 1) has "
                               "no noise")
    lines: list[int] = []
    prepared, known, counter = prepare(read_trees(trees, lines), name, markov_h, rare=rare, lines=lines)
    if not prepared:
        raise InputError(f"{name}: no tree with a word (after deleting -NONE- elements)")
    g = treebank_grammar(prepared)
    base_rules = len(g)
    n_split = split_size(g, subtypes)
    if n_split > max_rules:
        raise InputError(f"{name}: {base_rules} treebank rules split into {subtypes} subtypes would be {n_split:,} "
                         f"rules, over --max-rules {max_rules:,}")
    g = split_grammar(g, subtypes, make_rng(seed, random=bool(noise) and subtypes > 1), noise)
    empty = f" ({counter['empty']} holding only -NONE- elements skipped)" if counter["empty"] else ""
    log.info(f"{name}: {len(prepared)} trees{empty}, "
             f"{len(known)} known words, {counter['replaced']} rare word tokens -> signatures; "
             f"{base_rules} treebank rules, {len(g)} rules with {subtypes} subtypes")
    write_grammar(output, g, g.weights, "probabilities" if subtypes > 1 else "probabilities (relative frequencies)",
                  model="treebank", subtypes=subtypes, markov=markov_h, rare=rare, trees=len(prepared),
                  empty_trees_skipped=counter["empty"], rare_tokens_replaced=counter["replaced"],
                  noise=noise if subtypes > 1 else None,
                  preparation="function tags stripped, -NONE- deleted, X-->X collapsed, ROOT added, right-factored "
                              f"binarisation (horizontal Markovisation {markov_h}, no parent annotation), words seen "
                              f"<= {rare} times -> signatures")


def dmv_tagset(corpus, spec, tags_path, tags_from, stats=None):
    """The head types of an unlexicalized DMV and a one-line description (see make_dmv); ``stats``
    gets the format CORPUS was read as."""
    from grind.formats.corpus import UPOS_TAGS, UPOS_V1_ONLY, corpus_types, read_tags
    if spec.max_length is not None or spec.min_length > 1:
        log.info(f"the tag set is read from every sentence of {corpus}, whatever its length (--max-length and "
                 "--min-length are for the commands that read sentences: the '# corpus:' line says them for those)")
    seen = corpus_types(corpus, spec, stats)
    sources = [f"{corpus} (all lengths)"]
    for path in tags_from:
        seen |= corpus_types(path, spec)
        sources.append(f"{path} (--tags-from)")
    listed = set(read_tags(tags_path)) if tags_path else set()
    if tags_path:
        sources.append(f"{tags_path} (--tags)")
    if spec.column == "UPOS":
        base = {t for t in UPOS_TAGS if not (spec.punct == "ud" and t == "PUNCT")}
        other = sorted((seen | listed) - set(UPOS_TAGS))
        v1 = [t for t in other if t in UPOS_V1_ONLY]
        if v1:
            log.info("UD v1 tags (a v1 treebank?), added to the tag set: "
                     + ", ".join(f"{t} (v2 calls it {UPOS_V1_ONLY[t]})" for t in v1))
        other = [t for t in other if t not in UPOS_V1_ONLY]
        if other:
            log.warn(f"values that are not UPOS tags (of UD v2 or v1), added to the tag set: {' '.join(other)}")
        vocab = sorted(base | seen | listed)
        what = "UPOS" + (" without PUNCT (--punct ud)" if spec.punct == "ud" else "")
        extra = sorted(set(vocab) - base)
        desc = f"{what} ({len(vocab)} tags{'; also ' + ' '.join(extra) if extra else ''})"
        if listed:
            desc += f"; --tags {tags_path}"
        return vocab, desc
    vocab = sorted(seen | listed)
    col = spec.column or "tokens"
    return vocab, f"{col} of {' + '.join(sources)} ({len(vocab)} tags)"


@make_grammar.command("from-file")
@start_option
@output_option
@click.argument("grammar")
def make_from_file(grammar, start, output):
    """Check a grammar file and write it back with a grind header.

    \b
    Example:
      grind make-grammar from-file --start S my.grammar > g0.txt
    """
    g = read_grammar(grammar, start)
    cyc = g.unary_cycle()
    if cyc:
        name = "<stdin>" if grammar == "-" else grammar
        raise InputError(f"{name}: unary rules of positive weight form a cycle: {' --> '.join(cyc)} "
                         "(a chart parser cannot sum over unboundedly many derivations; remove a rule of it "
                         "or give it weight 0)")
    write_grammar(output, g, g.weights, g.meta.get("weights") or _weights_kind(g, grammar),
                  corpus=g.meta.get("corpus"), **treebank_meta(g))


def _weights_kind(g, path) -> str:
    """The ``# weights:`` line of a grammar file that has none, from its numbers: probabilities when every
    left-hand side's weights sum to 1 (within the digits they are printed with), else unnormalised -- so
    that grind's commands read what make-grammar from-file writes, or say what to do with it."""
    from grind.grammars.grammar import require_probabilities
    try:
        require_probabilities(g, path, "make-grammar from-file")
    except InputError:
        return "unnormalised (as read: not summing to 1 per left-hand side)"
    return "probabilities (as read)"


@click.command("make-structure", cls=GroupedCommand)
@option("--tie", required=True, type=click.Choice(["V", "N", "VN", "A"]), group="Structure",
        help="TieV, TieN, TieV&N or TieA.",
        doc="TieV, TieN (noun and proper_noun families), TieV&N, TieA (every family).")
@table_option("tie_what", group="Structure",
              doc="Tie the choose and the stop multinomials of a family's heads (experts tie:F:left|right and "
                  "tie:F:stop:left|right:0|1), or the choose multinomials only.")
@table_option("families", group="Structure")
@output_option
@click.argument("grammars", nargs=-1, required=True)
def make_structure(tie, tie_what, families, output, grammars):
    """Write the shared-logistic-normal structure --tie builds for a DMV GRAMMAR
    (two grammars: the bilingual structure of train --joint, symbols prefixed
    1| and 2|), as an editable file for train --algo ln --tie FILE.

    \b
    Example:
      grind make-structure --tie V --families ptb dmv.txt > tiev.txt
    \f
    Per tied
    family F: experts tie:F:left and tie:F:right over the heads' choose
    multinomials (L'_h, R'_h) and, with --tie-what choose+stop (default),
    tie:F:stop:left:0 / left:1 / right:0 / right:1 over their stop
    multinomials (L0_h, L_h, R0_h, R_h).

    \b
    Format: 'expert NAME LHS1 LHS2 ...' (an expert over these multinomials,
    concatenated) and 'own yes|no' (every multinomial keeps its own expert).
    """
    from grind.infer.ln import Packing
    from grind.infer.sln import joint_grammar, make_structure as build, write_structure
    if len(grammars) > 2:
        raise click.UsageError("one grammar, or two for the bilingual structure")
    gs = [read_grammar(x) for x in grammars]
    g = gs[0] if len(gs) == 1 else joint_grammar(gs, ["1", "2"])
    try:
        st = build(g, Packing(g), tie, families, tie_what)
    except InputError as e:
        if not str(e).startswith("--tie"):
            raise
        raise InputError(f"{' + '.join(grammars)}: {e}") from None
    write_structure(output, st, tie=tie, tie_what=tie_what,
                    families=families)


INIT = "Initialiser"


@click.command(cls=OneChoiceCommand)
@option("--uniform", "mode", flag_value="uniform", default=True, group=INIT, help="Uniform per LHS (default).")
@option("--random", "mode", flag_value="random", group=INIT, help="Uniform times exp(jitter * N(0,1)) noise.")
@option("--harmonic", "mode", flag_value="harmonic", group=INIT, help="DMV: the harmonic initialiser (--corpus).",
        doc="DMV only: Klein & Manning's harmonic initialiser from --corpus.")
@option("--normalise", "mode", flag_value="normalise", group=INIT, help="GRAMMAR's weights, normalised per LHS.",
        doc="GRAMMAR's own weights divided by their left-hand side's sum (their ratios kept).")
@option("--variant", type=click.Choice(["km-global", "independent"]), default="km-global", show_default=True,
        metavar="NAME", group=INIT, help="--harmonic: km-global or independent.",
        doc="--harmonic: how stop counts are set: km-global = the authors' code (a global first-kid "
            "probability, +0.1 on every rule; the default: on the WSJ10 sample it trains LN and EM to "
            "higher accuracy, see README), independent = exact expected counts when candidate dependents "
            "attach independently (grind before issue 10).")
@option("--jitter", type=FiniteFloatRange(0, 20), default=1.0, show_default=True, metavar="X", group=INIT,
        help="Scale of --random's log-normal noise.",
        doc="Scale of the log-normal noise of --random (at most 20: weights exp(20 z) already span "
            "over 100 orders of magnitude).")
@option("--corpus", "corpus_path", default=None, metavar="FILE", group="Corpus",
        help="The training corpus (for --harmonic).")
@corpus_options
@seed_option
@start_option
@output_option
@click.argument("grammar")
def init(grammar, mode, variant, jitter, corpus_path, spec, seed, start, output):
    """Initial rule probabilities for GRAMMAR's rules.

    \b
    Examples:
      grind init --random --seed 1 g0.txt > g1.txt
      grind init --harmonic --corpus train.conllu --column UPOS --punct ud dmv0.txt > dmv1.txt
    \f
    \b
    --uniform   1/|R_A| for every rule of each LHS A.
    --random    uniform times exp(jitter * z), z ~ N(0,1), renormalised.
    --normalise the file's weights w_r / sum_{R_A} w (unnormalised weights,
                counts or another tool's output made probabilities).
    --harmonic  (DMV) in an n-word sentence each word is the root with weight
                1/n and attaches to word j with weight proportional to
                1/|i-j| (Klein & Manning 2004; Cohen & Smith 2010 §5.1).
                Stop counts by --variant:
                km-global (default): the authors' code.  Attachments weigh
                (n-1)/n in all; every rule gets +0.1; one global first-kid
                probability f: per head type h and side D, with N tokens,
                N_D of them with a word on side D and E_D expected
                dependents, STOP(v0) = N + 0.1 - f N_D, not-STOP(v0) =
                STOP(v1) = 0.1 + f N_D, not-STOP(v1) = E_D + 0.1 - f N_D,
                f = 0.9 x the largest value keeping every count >= 0.
                independent: each candidate dependent attaches
                independently with its weight, so STOP(v0) = P(no
                dependent), not-STOP(v0) = STOP(v1) = 1 - P(no dependent),
                not-STOP(v1) = E[#dependents] - (1 - P(no dependent)).
                The counts are normalised per LHS.
    """
    if mode != "random" and _given("jitter"):
        raise click.UsageError("--jitter is for --random")
    if mode != "harmonic" and corpus_path is not None:
        raise click.UsageError("--corpus is for --harmonic")
    corpus_given = [n for n in ("fmt", "column", "punct", "max_length", "min_length", "chars", "types") if _given(n)]
    if mode != "harmonic" and corpus_given:
        flag = {"fmt": "--format"}.get(corpus_given[0], "--" + corpus_given[0].replace("_", "-"))
        raise click.UsageError(f"{flag} reads --corpus, which is for --harmonic")
    rng = make_rng(seed, random=mode == "random")
    g = read_grammar(grammar, start)
    w = np.ones(len(g))
    corpus = g.meta.get("corpus")          # the rules' corpus options, carried on (grammar_spec compares them)
    if mode == "random":
        w = w * np.exp(jitter * rng.standard_normal(len(g)))
    elif mode == "normalise":
        w = np.asarray(g.weights, dtype=np.float64)
    elif mode == "harmonic":
        if corpus_path:
            spec = grammar_spec(grammar, corpus_path, spec, g.meta, late=False)
        w, used, read = harmonic_weights(g, corpus_path, spec, variant)
        corpus = corpus or read
    elif _given("variant"):
        raise click.UsageError("--variant is for --harmonic")
    extra = {"harmonic_variant": variant, "harmonic_corpus": used} if mode == "harmonic" else {}
    from grind.grammars.dmv_constraints import header_constraints
    write_grammar(output, g, g.normalize(w), "probabilities", init=mode, **extra, corpus=corpus,
                  **treebank_meta(g), **header_constraints(g))


def harmonic_weights(g, corpus_path, spec, variant="km-global"):
    """Harmonic-initialiser counts of DMV grammar ``g`` from ``corpus_path``
    (:func:`grind.grammars.dmv.harmonic_counts`), what they were counted on and the corpus options read
    (for the header)."""
    from grind.grammars.dmv import dmv_index, harmonic_counts, is_dmv_grammar
    if not is_dmv_grammar(g):
        raise click.UsageError("--harmonic needs a DMV grammar (grind make-grammar dmv)")
    if not corpus_path:
        raise click.UsageError("--harmonic needs --corpus (the training corpus)")
    corpus = read_corpus(corpus_path, spec)
    sents = [s.tokens for s in corpus]
    ix = dmv_index(g)
    misfit = [(s, next(t for t in s.tokens if t not in ix.type_id)) for s in corpus
              if any(t not in ix.type_id for t in s.tokens)]
    if len(misfit) == len(sents):
        raise InputError(f"{corpus_path}: no sentence of the corpus fits the grammar's vocabulary")
    if misfit:
        log.warn(f"{corpus_path}: {len(misfit)} of {len(sents)} sentences have a {spec.column or 'token'} the grammar "
                 f"lacks and are left out of the harmonic counts: "
                 + shown(f"sentence {s.number} (line {s.line}) {t!r}" for s, t in misfit))
    dropped = left_out(corpus, "not counted")
    used = (f"{corpus_path} ({spec.describe(corpus.format)}): {len(sents) - len(misfit)} of the {len(sents)} "
            "sentences read" + (f" ({len(misfit)} with a {spec.column or 'token'} the grammar lacks left out)"
                                if misfit else "") + (f"; {dropped}" if dropped else ""))
    return harmonic_counts(g, sents, variant), used, spec.describe(corpus.format)
