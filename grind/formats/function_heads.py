"""Dependency trees re-headed so that function words head their phrases.

Universal Dependencies annotates *content heads*: an adposition, a
subordinator, an auxiliary or a copula depends on the content word it goes
with (``case``, ``mark``, ``aux``, ``cop``).  The treebanks the DMV papers
evaluate on were converted from phrase structure with head rules that make
these function words heads instead (Collins' rules for the Penn Treebank;
the Penn2Malt rules for the Chinese Treebank, where a preposition heads its
PP, a modal or copula its VP, and the subject attaches to the head of the
VP).  :func:`function_heads` moves a UD tree to that convention, so grind can
score a model on the kind of tree the papers scored on.  It is adapted from
the function-head transformation of Kohita, Noji & Matsumoto (2017,
"Multilingual back-and-forth conversion between content and function head
for easy dependency parsing", EACL), which promotes adpositions and
subordinators only, at most one a side, and keeps labels; here auxiliaries
and copulas are promoted too (as Penn-style head rules do), every function
word of a head is chained, dependents a function word separates from their
head move to it, and labels rotate.  The rule in full:

A word f is a *function word* of its head c when f is not the root and its
relation is one of the chosen labels (exactly; ``NAME:*`` also matches the
subtypes of NAME).  Let F(c) = [f1, ..., fk] be c's function words ordered
outermost first (by decreasing distance from c; at equal distance the left
one is outer).  Then

* f1 takes c's place: it attaches where c's phrase attached, and each
  f(i+1) attaches to fi; c attaches to fk, the innermost;
* where c's phrase attached: c's head; or, when c is itself a function
  word of h, the word before c in h's chain, and where h's phrase
  attached when c is the outermost;
* a dependent d of c that is no function word stays on c unless one of
  c's function words lies between d and c; then d attaches to the
  outermost of those (to the top of its phrase, when it has function
  words of its own): the subject of "she will run" attaches to "will",
  the objects and modifiers after "will" stay on "run";
* a function word's own dependents stay on it.

When a function word has function words of its own, its phrase is
re-headed first and the top of that phrase takes its place (recursively).
Labels rotate along the chain: f1 (the phrase's new head) takes c's
relation, each f(i+1) takes fi's and c takes fk's, so a sentence keeps the
same multiset of labels (grind scores heads only).

The result is a tree with one root whenever the input is; a projective
tree stays projective unless a function word has function words of its own
(both checked by tests on random trees).
"""
from __future__ import annotations

#: The default function-word relations: UD's adpositions / case markers,
#: subordinators, auxiliaries (passive ones under UD v1's and v2's names)
#: and copulas -- the universal labels only: subtypes name language-specific
#: constructions (UD Chinese r1.4's ``case:aspect`` marks aspect particles,
#: ``case:suff`` word-internal suffixes) and are added by name when wanted.
DEFAULT_RELATIONS = ("case", "mark", "aux", "auxpass", "aux:pass", "cop")


def is_function_relation(rel: str, labels) -> bool:
    """True when ``rel`` is one of ``labels``, or a subtype of a label
    written ``NAME:*`` (``case:*`` matches ``case`` and ``case:dec``)."""
    return rel in labels or f"{rel.partition(':')[0]}:*" in labels


def function_heads(heads: list[int], rels: list[str], labels=DEFAULT_RELATIONS) -> tuple[list[int], list[str]]:
    """``(heads, rels)`` re-headed as the module doc says.

    ``heads``: 1-based head of each word (0 = root); ``rels``: each word's
    relation.  Returns new lists; the input is not changed."""
    n = len(heads)
    labels = set(labels)
    fun = [heads[i] != 0 and is_function_relation(rels[i], labels) for i in range(n)]
    chains: list[list[int]] = [[] for _ in range(n + 1)]       # chains[c]: c's function words, outer first
    for i in range(n):
        if fun[i]:
            chains[heads[i]].append(i + 1)
    for c in range(1, n + 1):
        chains[c].sort(key=lambda f: (-abs(f - c), f))

    def top(w: int) -> int:
        while chains[w]:
            w = chains[w][0]
        return w

    order = _outside_in(heads, n)
    slot: list[int] = [0] * (n + 1)                   # where the phrase of word w attaches
    for w in order:
        h = heads[w - 1]
        if fun[w - 1]:
            k = chains[h].index(w)
            slot[w] = chains[h][k - 1] if k else slot[h]
        else:
            between = [f for f in chains[h] if min(w, h) < f < max(w, h)] if h else []
            slot[w] = top(between[0]) if between else h
    new_heads, new_rels = list(heads), list(rels)
    for w in range(1, n + 1):
        if chains[w]:
            new_heads[w - 1] = chains[w][-1]
    for w in range(1, n + 1):
        new_heads[top(w) - 1] = slot[w]
    for w in reversed(order):                          # inner phrases first: an outer phrase's label wins
        chain = chains[w]
        if chain:
            new_rels[w - 1] = rels[chain[-1] - 1]
            for above, f in zip([w] + chain, chain):
                new_rels[top(f) - 1] = rels[above - 1]
    return new_heads, new_rels


def _outside_in(heads: list[int], n: int) -> list[int]:
    """The words in an order where every word comes after its head."""
    children: list[list[int]] = [[] for _ in range(n + 1)]
    for i, h in enumerate(heads, 1):
        children[h].append(i)
    order, stack = [], list(children[0])
    while stack:
        w = stack.pop()
        order.append(w)
        stack.extend(children[w])
    if len(order) != n:
        raise ValueError("the heads are not a tree (a cycle, or no root)")
    return order
