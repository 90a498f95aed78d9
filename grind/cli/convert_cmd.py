"""``grind function-heads``: a CoNLL treebank re-headed so that function words head their phrases;
``grind convert``: a grammar in the format other tools read."""
from __future__ import annotations

import collections

import click
import numpy as np

from grind.cli.options import GroupedCommand, option

from grind import log
from grind.errors import InputError
from grind.formats.corpus import CorpusSpec, block_format, conll_trees
from grind.formats.function_heads import DEFAULT_RELATIONS, function_heads, is_function_relation
from grind.formats.textio import header_lines, open_out, read_lines
from grind.cli.common import output_option, start_option


@click.command("function-heads", cls=GroupedCommand)
@option("--format", "fmt", type=click.Choice(["auto", "conllu", "conllx"]), default="auto", show_default=True,
        group="Corpus", help="Treebank format (auto: by extension).",
        doc="Treebank format (auto: by extension, else a CoNLL file).")
@option("--relations", default=",".join(DEFAULT_RELATIONS), metavar="LIST",
        help="Relations whose dependent is a function word.",
        doc="Comma-separated relations whose dependent is a function word, matched exactly; NAME:* also "
            f"matches NAME's subtypes (case:* matches case:dec).  Default: {','.join(DEFAULT_RELATIONS)}.")
@output_option
@click.argument("treebank")
def function_heads_cmd(treebank, fmt, relations, output):
    """Write TREEBANK (CoNLL-U or CoNLL-X) with function words as heads.

    \b
    Example:
      grind function-heads zh-ud-test.conllu > zh-test.fh.conllu
      grind eval --column UPOS --punct ud zh-test.fh.conllu parsed.conllu
    \f
    UD makes content words heads (an adposition depends on its noun, an
    auxiliary or copula on its predicate); the treebanks of the DMV papers
    (Penn Treebank, Chinese Treebank) were converted from phrase structure
    with head rules that make these function words heads.  Each word whose
    relation is in --relations (and is not the root) becomes the head of
    the word it depended on: several function words of one head chain up,
    the one farthest from it on top (the left one at equal distance); the
    top takes the phrase's old head and relation.  A dependent that a
    function word separates from its head moves to the outermost such
    function word (a subject to its auxiliary or copula); the others stay.
    Adapted from Kohita, Noji & Matsumoto (2017); the rule in full:
    ``pydoc grind.formats.function_heads``.

    \b
    Only HEAD and DEPREL of word lines change: IDs, the other columns
    (CoNLL-U DEPS and CoNLL-X PHEAD/PDEPREL included, which then no longer
    match HEAD), the comment lines of each sentence, multiword ranges and
    empty nodes are written as read (comment lines that belong to no
    sentence, such as a file header, are not); the header is written as
    comments of the first sentence.  A sentence without heads
    (HEAD '_') is written unchanged and counted in the header and on
    stderr.  Unsupervised training reads only the tokens, so what changes
    is the gold: score every model and baseline on the converted gold;
    grind eval's convention line then names the conversion.

    \b
    Example:
      grind function-heads zh-ud-test.conllu > zh-test.fh.conllu
      grind baseline --attach right --column UPOS --punct ud zh-test.fh.conllu > right.conllu
      grind eval --column UPOS --punct ud zh-test.fh.conllu right.conllu
    """
    labels = tuple(r.strip() for r in relations.split(",") if r.strip())
    if not labels:
        raise click.BadParameter("give at least one relation", param_hint="'--relations'")
    name = "<stdin>" if treebank == "-" else treebank
    lines = read_lines(treebank)
    head = []
    for pair in lines:
        head.append(pair)
        if pair[1].strip() and not pair[1].startswith("#"):
            break
        if pair[1].startswith("# conversion: function heads"):
            raise InputError(f"{name}:{pair[0]}: this treebank was already re-headed by grind function-heads "
                             f"({pair[1].split(':', 1)[1].strip()[:60]}...): convert the original instead")
    if fmt == "auto":
        fmt = block_format(treebank, CorpusSpec(), head)
        if fmt not in ("conllu", "conllx"):
            raise InputError(f"{name}: read as {fmt}, not CoNLL-U or CoNLL-X: function-heads needs a treebank "
                             "with HEAD and DEPREL columns (pass --format conllu if it is one)")
    lines = _chain(head, lines)
    blocks: list[str] = []
    sentences = no_tree = moved = forests = 0
    by_label: collections.Counter = collections.Counter()
    for comments, toks, heads in conll_trees(lines, name, fmt):
        words = [t for t in toks if t[0].isascii() and t[0].isdigit()]
        sentences += 1
        if heads is not None:
            rels = [t[7] for t in words]
            forests += sum(h == 0 for h in heads) > 1
            new_heads, new_rels = function_heads(heads, rels, labels)
            moved += sum(a != b for a, b in zip(heads, new_heads))
            by_label.update(r for h, r in zip(heads, rels) if h != 0 and is_function_relation(r, labels))
            for t, h, r in zip(words, new_heads, new_rels):
                t[6], t[7] = str(h), r
        else:
            no_tree += 1
        blocks.append("".join(c + "\n" for c in comments) + "".join("\t".join(t[:10]) + "\n" for t in toks) + "\n")
    if not sentences:
        raise InputError(f"{name}: no sentences")
    found = ", ".join(f"{k} {v}" for k, v in sorted(by_label.items(), key=lambda kv: (-kv[1], kv[0]))) or "none"
    if by_label:
        log.info(f"{name}: {sentences} sentences, {moved} words re-attached; function words by relation: {found}")
    else:
        log.warn(f"{name}: no word has a relation in --relations ({','.join(labels)}): the treebank is written "
                 "unchanged (are its labels UD's?)")
    if no_tree:
        log.warn(f"{name}: {no_tree} of {sentences} sentences have no heads (HEAD '_'): written unchanged")
    if forests:
        log.warn(f"{name}: {forests} of {sentences} sentences have more than one root (HEAD 0): each root's "
                 "phrase converted on its own")
    with open_out(output) as f:
        f.writelines(header_lines(
            conversion=f"function heads (adapted from Kohita, Noji & Matsumoto 2017; pydoc "
                       f"grind.formats.function_heads): relations {','.join(labels)} (exact; NAME:* = with subtypes)",
            treebank=f"{name} ({fmt})", sentences=sentences, words_reattached=moved,
            function_words=found, without_heads=f"{no_tree} (written unchanged)",
            several_roots=f"{forests} (sentences with more than one HEAD 0)"))
        f.writelines(blocks)             # the header is the first sentence's comments (valid CoNLL-U)


def _chain(head, rest):
    yield from head
    yield from rest


@click.command("convert", cls=GroupedCommand)
@option("--to", "target", type=click.Choice(["johnson"]), required=True, help="johnson: Mark Johnson's io, py-cfg.",
        doc="johnson: no header, 'weight LHS --> RHS ...' lines, start symbol's rules first, words only in "
            "unary rules (Mark Johnson's io, py-cfg).")
@start_option
@output_option
@click.argument("grammar")
def convert(grammar, target, start, output):
    """Write GRAMMAR in another tool's format.

    \b
    Example:
      grind convert --to johnson g.txt > g.io.txt
    \f
    --to johnson: what Mark Johnson's io and py-cfg read, which have no
    comment syntax: no header; one 'weight LHS --> RHS ...' line a rule,
    the weight its probability (a grammar of Dirichlet pseudo-counts: their
    posterior mean), written in full precision; the start symbol's rules
    first (those tools take the first rule's LHS as the start symbol); and,
    as io allows words only in unary rules, a word in a rule of several
    symbols moved under a new symbol of its own with one rule, 1 _w --> w
    (every tree's probability unchanged).  grind reads the file back (no
    header: probabilities, the first rule's LHS the start).
    """
    from grind.formats.rules import format_weight, rule_key
    from grind.formats.textio import open_out
    from grind.grammars.grammar import read_grammar
    g = read_grammar(grammar, start)
    weights = np.asarray(g.probabilities(), dtype=np.float64)
    name = "<stdin>" if grammar == "-" else grammar
    if g.weight_kind() == "pseudo-counts":
        log.info(f"{name} holds Dirichlet pseudo-counts: their posterior mean is written (io reads probabilities)")
    symbols = set(g.nonterminals) | set(g.terminals)
    lifted: dict[str, str] = {}

    def lift(word):
        if word not in lifted:
            new = "_" + word
            while new in symbols:
                new = "_" + new
            symbols.add(new)
            lifted[word] = new
        return lifted[word]
    first = [i for i, (lhs, _) in enumerate(g.rules) if lhs == g.start]
    if not first:
        raise InputError(f"{name}: the start symbol {g.start!r} has no rule: Johnson's format takes the first "
                         "rule's left-hand side as the start symbol (give --start)")
    order = first + [i for i, (lhs, _) in enumerate(g.rules) if lhs != g.start]
    lines = []
    for i in order:
        lhs, rhs = g.rules[i]
        if len(rhs) > 1:
            rhs = tuple(lift(x) if not g.is_nonterminal(x) else x for x in rhs)
        lines.append(f"{format_weight(weights[i])} {rule_key(lhs, rhs)}\n")
    lines += [f"1 {rule_key(new, (word,))}\n" for word, new in lifted.items()]
    if lifted:
        log.info(f"{len(lifted)} words that share a rule with other symbols moved under unary rules of their own "
                 f"(e.g. 1 {rule_key(*next((v, (k,)) for k, v in lifted.items()))}): io allows words only in "
                 "unary rules")
    with open_out(output) as f:
        f.writelines(lines)
