"""Dependency trees re-headed so that function words head their phrases.

Universal Dependencies annotates *content heads*: an adposition, a
subordinator, an auxiliary or a copula depends on the content word it goes
with (``case``, ``mark``, ``aux``, ``cop``).  The treebanks the DMV papers
evaluate on were converted from phrase structure with head rules that make
many of these function words heads instead (Collins' rules for the Penn
Treebank; the Penn2Malt rules for the Chinese Treebank, where a
preposition heads its PP, a localizer its LCP, DEC/DEG their clause or
phrase, a modal or copula the VP).  :func:`function_heads` moves a UD tree
to that convention, so grind can score a model on the same kind of tree
the papers scored on; the conversion follows the function-head
transformation of Kohita, Noji & Matsumoto (2017, "Multilingual
back-and-forth conversion between content and function head for easy
dependency parsing", EACL), stated here in full.

The rule.  A word f is a *function word* of its head c when f's relation
is one of the chosen labels (``case`` also matches its subtypes such as
``case:dec``; a label with a colon matches only itself) and f is not the
root.  Let F(c) = [f1, ..., fk] be c's function words ordered outermost
first (by decreasing distance from c; at equal distance the left one is
outer).  Then

* f1 takes c's place: it attaches where c's phrase attached (c's head, or
  the word before it in its own head's chain when c is itself a function
  word), and each f(i+1) attaches to fi;
* c attaches to fk, the innermost;
* every other dependent of c stays on c, and a function word's own
  dependents stay on it.

When a function word has function words of its own, its phrase is
re-headed first and the top of that phrase takes its place (recursively).
Labels rotate along the chain: f1 (the phrase's new head) takes c's
relation, each f(i+1) takes fi's and c takes fk's, so the labels of a
sentence are the same multiset as before (grind scores heads only).

The result is again a tree with one root (a test checks it on random
trees); it may be non-projective where the content-head tree was not.
"""
from __future__ import annotations

#: The default function-word relations: UD's adpositions / case markers,
#: subordinators, auxiliaries (UD v1's ``auxpass`` as well) and copulas.
DEFAULT_RELATIONS = ("case", "mark", "aux", "auxpass", "cop")


def is_function_relation(rel: str, labels) -> bool:
    """True when ``rel`` is one of ``labels``: a label without a colon also
    matches its subtypes (``case`` matches ``case:dec``)."""
    return rel in labels or rel.partition(":")[0] in labels


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
            slot[w] = h
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
