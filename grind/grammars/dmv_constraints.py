"""Structural constraints on DMV trees, declared when the grammar is made.

Three kinds (all over head types, i.e. tags):

* **leaf tags** take no dependents (Noji, Miyao & Johnson 2016's ``udfunc``:
  the UD function words ADP AUX CCONJ/CONJ DET PART SCONJ);
* **root tags**: only these may attach to the root (default: every tag);
* **forbidden arcs** ``HEAD > DEP`` (either may be ``*``, any tag), in both
  directions or one (``left``: DEP left of HEAD).

A constrained DMV is the DMV with the rules these forbid *left out of the
grammar*: choose(d | h, dir) for every forbidden arc (all of them for a leaf
head), root(h) for a tag that may not be the root, and, on a side where a head
has no choose rule left, its not-STOP rule and its two valence-1 rules (that
side's STOP at valence 0 is then a one-outcome multinomial of probability 1).
Every algorithm, initialiser and kernel sees only the rules that are there, so
a forbidden arc has no rule to be counted, sampled or parsed with: the
constraints are structural zeros by construction.  A sentence with no tree
that satisfies them has no parse under the grammar (training leaves it out and
says so; ``grind parse`` relaxes the constraints for it and says so).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from grind.errors import InputError
from grind.formats.textio import read_lines

#: Named tag sets for ``--leaf-tags`` (Noji, Miyao & Johnson 2016, ``-unheadPOS udfunc``): the UD function
#: words.  UD v1 calls the coordinating conjunction CONJ, v2 CCONJ; ``udfunc`` holds both.  A named set's
#: tags that the grammar lacks are skipped (a v2 grammar has no CONJ).
LEAF_SETS = {
    "udfunc": ("ADP", "AUX", "CCONJ", "CONJ", "DET", "PART", "SCONJ"),
    "udfunc-v1": ("ADP", "AUX", "CONJ", "DET", "PART", "SCONJ"),
    "udfunc-v2": ("ADP", "AUX", "CCONJ", "DET", "PART", "SCONJ"),
}
ANY = "*"
SIDES = ("left", "right")


@dataclass(frozen=True)
class DMVConstraints:
    """``leaf``: tags without dependents; ``roots``: the tags that may be the
    root (None: all); ``forbid``: ``(head, dep, side)`` triples, head / dep a
    tag or ``*``, side ``left`` / ``right`` / None (both); ``said``: how each
    part was given (for the header)."""

    leaf: frozenset = frozenset()
    roots: frozenset | None = None
    forbid: frozenset = frozenset()
    said: tuple = field(default=(), compare=False)

    def __bool__(self) -> bool:
        return bool(self.leaf or self.roots is not None or self.forbid)

    def arc_allowed(self, h: str, d: str, right: bool) -> bool:
        """May head ``h`` take ``d`` as a dependent on its right (``right``) or left side?"""
        if h in self.leaf:
            return False
        side = "right" if right else "left"
        return not any(fh in (h, ANY) and fd in (d, ANY) and fs in (side, None) for fh, fd, fs in self.forbid)

    def root_allowed(self, h: str) -> bool:
        return self.roots is None or h in self.roots

    def merged(self, other: DMVConstraints) -> DMVConstraints:
        """Both sets of constraints (leaf tags and forbidden arcs united; root tags: those both allow)."""
        if self.roots is None or other.roots is None:
            roots = self.roots if other.roots is None else other.roots
        else:
            roots = self.roots & other.roots
        return DMVConstraints(self.leaf | other.leaf, roots, self.forbid | other.forbid, self.said + other.said)

    def describe(self) -> str:
        """One line for the grammar header."""
        forbid = sorted(f"{h}>{d}" + (f" ({s})" if s else "") for h, d, s in self.forbid)
        parts = [f"leaf tags {' '.join(sorted(self.leaf)) or 'none'}",
                 f"root tags {'any' if self.roots is None else ' '.join(sorted(self.roots)) or 'none'}",
                 f"forbidden arcs {', '.join(forbid) or 'none'}"]
        return "; ".join(parts) + (f" (given as {', '.join(self.said)})" if self.said else "")


def parse_tags(text: str, tagset, option: str) -> frozenset:
    """Tags separated by commas or spaces, a :data:`LEAF_SETS` name standing for its tags (those the grammar
    has); a tag the grammar lacks is an InputError naming ``option``."""
    out: set[str] = set()
    for t in text.replace(",", " ").split():
        if t in LEAF_SETS:
            out.update(x for x in LEAF_SETS[t] if x in tagset)
        elif t in tagset:
            out.add(t)
        else:
            raise InputError(f"{option}: {t!r} is not a tag of the grammar ({' '.join(sorted(tagset))}) nor a "
                             f"named set ({', '.join(LEAF_SETS)})")
    return frozenset(out)


def parse_arcs(text: str, tagset, option: str = "--forbid") -> frozenset:
    """``HEAD>DEP,HEAD>DEP ...`` (``*`` for any tag) -> forbidden (head, dep, None) triples."""
    out = set()
    for item in text.replace(",", " ").split():
        h, sep, d = item.partition(">")
        if not sep or not h or not d:
            raise InputError(f"{option}: {item!r} is not HEAD>DEP (a tag or * on each side)")
        out.add((_tag(h, tagset, option), _tag(d, tagset, option), None))
    return frozenset(out)


def _tag(t: str, tagset, where: str) -> str:
    if t != ANY and t not in tagset:
        raise InputError(f"{where}: {t!r} is not a tag of the grammar ({' '.join(sorted(tagset))}) nor *")
    return t


def read_constraint_file(path: str, tagset) -> DMVConstraints:
    """A constraint file: one declaration a line, ``#`` comment lines::

        leaf TAG ...              (or a named set: udfunc, udfunc-v1, udfunc-v2)
        root TAG ...              (only these may be the root; several lines: their union)
        forbid HEAD DEP [left|right]   (HEAD or DEP may be *)
    """
    leaf: set[str] = set()
    roots: set[str] | None = None
    forbid = set()
    for lineno, line in read_lines(path):
        s = line.split()
        if not s or s[0].startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if s[0] == "leaf" and len(s) > 1:
            leaf |= parse_tags(" ".join(s[1:]), tagset, where)
        elif s[0] == "root" and len(s) > 1:
            roots = (roots or set()) | parse_tags(" ".join(s[1:]), tagset, where)
        elif s[0] == "forbid" and len(s) in (3, 4) and (len(s) == 3 or s[3] in SIDES):
            forbid.add((_tag(s[1], tagset, where), _tag(s[2], tagset, where), s[3] if len(s) == 4 else None))
        else:
            raise InputError(f"{where}: expected 'leaf TAG ...', 'root TAG ...' or 'forbid HEAD DEP [left|right]', "
                             f"got {line.strip()!r}")
    return DMVConstraints(frozenset(leaf), None if roots is None else frozenset(roots), frozenset(forbid),
                          (f"--constraint-file {path}",))


def constraints_of_options(tagset, leaf_tags=None, root_tags=None, forbid=None, path=None) -> DMVConstraints:
    """The constraints of ``make-grammar dmv``'s options over the grammar's tags ``tagset``."""
    said = []
    c = DMVConstraints()
    if leaf_tags:
        c = c.merged(DMVConstraints(leaf=parse_tags(leaf_tags, tagset, "--leaf-tags")))
        said.append(f"--leaf-tags {leaf_tags}")
    if root_tags:
        c = c.merged(DMVConstraints(roots=parse_tags(root_tags, tagset, "--root-tags")))
        said.append(f"--root-tags {root_tags}")
    if forbid:
        c = c.merged(DMVConstraints(forbid=parse_arcs(forbid, tagset)))
        said.append(f"--forbid {forbid}")
    if path:
        c = c.merged(read_constraint_file(path, tagset))
    c = DMVConstraints(c.leaf, c.roots, c.forbid, tuple(said) + c.said)
    if c.leaf >= frozenset(tagset):
        raise InputError("the constraints make every tag a leaf: no sentence of two or more words would have a tree")
    if c.roots is not None and not c.roots:
        raise InputError("the constraints allow no tag to be the root: every sentence would be unparseable")
    return c


def header_constraints(grammar) -> dict:
    """The ``# constraints:`` header line of a constrained DMV grammar (``{}`` for others), for the
    grammars made from it (init, train, mstep) to carry."""
    c = grammar.meta.get("constraints")
    return {"constraints": c} if c else {}
