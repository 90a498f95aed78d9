"""``grind split``: a corpus cut into shards of about equal parsing cost, for sharded training."""
from __future__ import annotations

import contextlib
import hashlib
import heapq
import os

import click

from grind.cli.options import GroupedCommand, option

from grind import log
from grind.errors import InputError
from grind.formats import shards
from grind.formats.corpus import Block, CorpusSpec, check_corpus, corpus_blocks, detect_format, iter_blocks
from grind.formats.textio import header_lines, is_stream, open_out, output_group, output_problem, read_lines
from grind.cli.common import corpus_options

#: Compression suffixes that stay on a shard's name (and make grind write it compressed).
COMPRESSED = (".gz", ".xz", ".bz2")
#: The extension of shards of a corpus read from stdin, by format.
FORMAT_EXT = {"text": ".txt", "conllu": ".conllu", "conllx": ".conllx", "malt": ".dp", "ptb": ".mrg",
              "sigmorphon": ".tsv"}


def split_name(path: str) -> tuple[str, str]:
    """``(stem, extension)`` of a corpus file: the extension is the last
    suffix, with the one before it when the last is .gz/.xz/.bz2
    (``d/train.conllu.gz`` -> ``('d/train', '.conllu.gz')``)."""
    stem, ext = os.path.splitext(path)
    if ext in COMPRESSED:
        stem, inner = os.path.splitext(stem)
        ext = inner + ext
    return stem, ext


def shard_paths(prefix: str, ext: str, k: int) -> list[str]:
    """``PREFIX.1EXT`` .. ``PREFIX.kEXT``."""
    return [f"{prefix}.{i}{ext}" for i in range(1, k + 1)]


def block_costs(blocks, spec: CorpusSpec) -> tuple[list[int], list[int], list[int]]:
    """``(cost, kept, group)`` per block: the sum of len^3 over the block's
    sentences that ``spec`` keeps (0 for sentences its length filters or
    ``--types`` leave out), how many it keeps, and the block's group: with
    ``--types`` every block holding a kept type goes with the block of its
    first occurrence (so each shard read with --types keeps exactly the
    sentences the whole corpus keeps); otherwise each block is its own group.
    ``blocks``: any iterable of :class:`Block`, read once."""
    parent: list[int] = []

    def find(b):
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        return b

    first: dict[tuple, int] = {}
    costs: list[int] = []
    kept: list[int] = []
    for b, block in enumerate(blocks):
        parent.append(b)
        costs.append(0)
        kept.append(0)
        for s in block.sentences:
            n = len(s.tokens)
            if not (spec.min_length <= n and (spec.max_length is None or n <= spec.max_length)):
                continue            # (so are its duplicates: they have its length)
            if spec.types:
                key = tuple(s.tokens)
                if key in first:
                    a, c = find(first[key]), find(b)
                    if a != c:
                        parent[max(a, c)] = min(a, c)
                    continue
                first[key] = b
            costs[b] += n ** 3
            kept[b] += 1
    return costs, kept, [find(b) for b in range(len(costs))]


def balance(costs: list[int], groups: list[int], k: int) -> list[int]:
    """The shard (0-based) of each block.

    Groups of blocks (see :func:`block_costs`) of positive cost go in order of
    decreasing cost (ties: the group's first block in the file first), each
    to the shard with the least cost so far (ties: the lowest shard index);
    blocks of cost 0 (only sentences the corpus options leave out) then go
    one by one in file order to the shard with the fewest blocks (ties: the
    lowest index), so the files stay alike in size."""
    members: dict[int, list[int]] = {}
    for b, g in enumerate(groups):
        members.setdefault(g, []).append(b)
    total = {g: sum(costs[b] for b in bs) for g, bs in members.items()}
    order = sorted((g for g in members if total[g] > 0), key=lambda g: (-total[g], g))
    shard = [-1] * len(costs)
    heap = [(0, i) for i in range(k)]
    count = [0] * k
    for g in order:
        load, i = heapq.heappop(heap)
        for b in members[g]:
            shard[b] = i
        count[i] += len(members[g])
        heapq.heappush(heap, (load + total[g], i))
    for b in range(len(costs)):
        if shard[b] < 0:
            i = min(range(k), key=lambda j: (count[j], j))
            shard[b] = i
            count[i] += 1
    return shard


@click.command(cls=GroupedCommand)
@option("-n", "--shards", "k", type=click.IntRange(1), required=True, metavar="K", help="Number of shards.")
@option("-o", "--output", "prefix", default=None, metavar="PREFIX", group="Output",
        help="Shards go to PREFIX.1EXT .. PREFIX.KEXT.",
        doc="Shards go to PREFIX.1EXT .. PREFIX.nEXT, EXT the corpus file's extension "
            "[default: the corpus file's name without its extension, in the current directory].")
@corpus_options
@click.argument("corpus")
def split(corpus, k, prefix, spec):
    """Cut CORPUS into K shards of about equal parsing cost (sharded training).

    \b
    Example:
      grind split --column UPOS --punct ud --max-length 10 -n 4 -o shards/train train.conllu
    \f
    Every block of the file goes to one shard unchanged and whole (a text
    line; a CoNLL-U/CoNLL-X/Malt-TAB sentence with its comment lines,
    multiword ranges and empty nodes; the lines holding whole PTB trees; a
    --chars word), and each shard keeps its blocks in the file's order.
    Shards are named PREFIX.1EXT .. PREFIX.KEXT with the corpus file's
    extension EXT (its last suffix, with the one before when that is .gz,
    .xz or .bz2: train.conllu.gz -> PREFIX.1.conllu.gz, written compressed),
    so grind reads them as it reads CORPUS: give every command that reads
    them the corpus options given here.

    \b
    Balance: a block costs the sum of len^3 over its sentences that the
    corpus options keep (the cubic cost of parsing them; len after
    punctuation removal, characters with --chars); sentences the length
    filters leave out cost 0 but are still copied.  Blocks in order of
    decreasing cost (ties: file order) go each to the shard with the least
    cost so far (ties: lowest index); then the blocks of cost 0, each to the
    shard with the fewest blocks.  With --types every occurrence of a kept
    sentence goes to the shard of its first occurrence, so the shards read
    with --types hold exactly the sentences of the whole corpus.  The
    result depends only on the file and the options.  Each shard's header
    (and stderr) gives its cost; file headers (comment lines before the
    first sentence) are not copied.

    \b
    Example:
      mkdir -p shards && grind split --column UPOS --punct ud --max-length 10 -n 4 -o shards/train train.conllu
      # shards/train.1.conllu .. shards/train.4.conllu; then per shard:
      grind estep --column UPOS --punct ud --max-length 10 g.txt shards/train.1.conllu > c1.txt
    """
    if corpus == "-":
        if prefix is None:
            raise click.UsageError("a corpus read from stdin needs -o PREFIX")
    if prefix == "-":
        raise click.BadParameter(f"{prefix!r}: shards are files named PREFIX.1EXT, PREFIX.2EXT, ...: give a PREFIX "
                                 "in a directory (e.g. shards/train), not standard output",
                                 param_hint="'-o' / '--output'")
    if prefix is not None and os.path.basename(prefix) in ("", ".", ".."):
        why = "the PREFIX is empty" if prefix == "" else f"{prefix!r} ends in a directory"
        raise click.BadParameter(f"{why}: shards are named PREFIX.1EXT .., give a PREFIX ending in a file name "
                                 "(e.g. shards/train)", param_hint="'-o' / '--output'")
    name = "<stdin>" if corpus == "-" else corpus
    stem, ext = split_name(corpus) if corpus != "-" else ("", "")
    if prefix is None:
        prefix = os.path.basename(stem)

    def check_paths(ext):
        paths = shard_paths(prefix, ext, k)
        for p in paths:
            problem = output_problem(p, regular=True)
            if corpus != "-" and _same_path(p, corpus):
                problem = f"it is the corpus {corpus} itself (give another -o PREFIX)"
            other = next((q for q in paths[:paths.index(p)] if _same_path(p, q)), None)
            if other is not None:
                problem = f"it is the file of shard {other} too (symbolic links?): one shard would overwrite the other"
            if problem:
                raise InputError(f"{p}: cannot write: {problem}")
        return paths
    # before the corpus is read (a stream's extension is its format's, known once read: checked again then)
    paths = check_paths(FORMAT_EXT.get(spec.format, ".txt") if is_stream(corpus) else ext)
    if is_stream(corpus):                    # stdin or a pipe: read once, held whole
        pairs = list(read_lines(corpus))
        fmt, held = corpus_blocks(corpus, spec, pairs)
        blocks = lambda: iter(held)  # noqa: E731
        paths = check_paths(FORMAT_EXT[fmt])  # stdin or a pipe (/dev/fd/63): the extension of its format
    else:                                    # a file is read again at each pass, never held whole
        fmt = check_corpus(corpus, spec)
        blocks = lambda: iter_blocks(corpus, spec, fmt, read_lines(corpus))  # noqa: E731
    source = hashlib.sha256()             # of the blocks' lines, taken in the cost pass (no pass of its own)

    def hashed(bs):
        for b in bs:
            source.update("\n".join(b.lines).encode("utf-8") + b"\n")
            yield b
    costs, kept, groups = block_costs(hashed(blocks()), spec)
    positive = len({g for g, c in zip(groups, costs) if c > 0})
    if positive < k:
        raise InputError(f"{name}: only {positive} sentences (or --types groups) pass the corpus options "
                         f"({spec.describe()}): at most {positive} shards, not {k}")
    shard = balance(costs, groups, k)
    members: list[list[int]] = [[] for _ in range(k)]
    for b, i in enumerate(shard):
        members[i].append(b)
    total = sum(costs)
    words = spec.chars and fmt in ("text", "sigmorphon")
    heads, digests = _shard_heads(blocks(), shard, k, fmt, words)
    for i, (path, lines) in enumerate(zip(paths, heads)):
        if words and lines[0].startswith("#"):
            raise InputError(f"{name}: word {lines[0].rstrip()!r} would begin shard {i + 1} and be read as a "
                             "header line there (a word list's leading '#' lines are its header)")
        if spec.format == "auto" and not (words and fmt == "sigmorphon"):
            _check_detected(path, fmt, lines, i + 1)
    with output_group(), contextlib.ExitStack() as stack:     # every shard replaced, or none
        files = [stack.enter_context(open_out(path)) for path in paths]
        for i, (f, bs) in enumerate(zip(files, members)):
            cost, n_kept = sum(costs[b] for b in bs), sum(kept[b] for b in bs)
            f.writelines(header_lines(
                shard=f"{i + 1} of {k}", format=fmt, blocks=len(bs), sentences=n_kept,
                cost=f"{cost} of {total} ({100.0 * cost / total:.2f}%; sum of len^3 over the kept sentences)",
                corpus=spec.describe(fmt), **{"corpus-sha256": source.hexdigest()[:16],
                                              shards.HASH_KEY: shards.hex_of(digests[i])}))
            if fmt == "text" and not words:
                f.write("\n")            # ends the header (a text sentence may begin with '#'); in CoNLL it is
                #                         the first sentence's comments (a comment-only block is not CoNLL-U)
        for b, block in enumerate(blocks()):
            files[shard[b]].writelines(_block_text(block, fmt, words))
    for i, (path, bs) in enumerate(zip(paths, members)):
        cost, n_kept = sum(costs[b] for b in bs), sum(kept[b] for b in bs)
        log.info(f"shard {i + 1}: {path}: {len(bs)} blocks, {n_kept} sentences, cost {cost} "
                 f"({100.0 * cost / total:.2f}%)")


def _same_path(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` name one file: the same file when both exist, else the same real path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _shard_heads(blocks, shard: list[int], k: int, fmt: str, words: bool) -> tuple[list[list[str]], list]:
    """Each shard's first lines as written (its blocks' lines up to and including its first content
    line: not blank, not a comment) and the hash of all it holds after its header
    (grind.formats.shards: the blank line ending the header, then its blocks as written)."""
    heads: list[list[str]] = [[] for _ in range(k)]
    done = [False] * k
    digests = [shards.content_hash() for _ in range(k)]
    if fmt == "text" and not words:                  # (the blank line that ends a text shard's header)
        for h in digests:
            h.update(b"\n")
    for b, block in enumerate(blocks):
        i = shard[b]
        text = _block_text(block, fmt, words)
        digests[i].update("".join(text).encode("utf-8"))
        if not done[i]:
            heads[i] += text
            done[i] = any(ln.strip() and not ln.startswith("#") for ln in heads[i])
    return heads, digests


def _block_text(block: Block, fmt: str, words: bool) -> list[str]:
    """A block's lines as written (CoNLL blocks followed by a blank line)."""
    out = [ln + "\n" for ln in block.lines]
    if fmt in ("conllu", "conllx", "malt") and not words:
        out.append("\n")
    return out


def _check_detected(path: str, fmt: str, lines: list[str], i: int) -> None:
    """The shard, read with --format auto, must be read as ``fmt``."""
    first = next((ln for ln in lines if ln.strip() and not ln.startswith("#")), "")
    try:
        got = detect_format(path, first)
    except InputError as e:
        got = f"nothing ({e})"
    if got != fmt:
        raise InputError(f"shard {i} ({path}) would be read as {got}, not {fmt}, with --format auto (its first "
                         f"line is {first.strip()[:60]!r}): pass --format {fmt} to grind split and to every "
                         "command that reads the shards")
