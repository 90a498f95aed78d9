"""Text drawings of one parse (``grind show``): dependency arcs above the
words, or a constituency tree as an indented outline.  Pure functions from
trees to strings.

Dependency layout: every arc gets its own pair of columns under the words it
joins (so no two arcs share a vertical line) and a level above the words;
``▼`` marks the dependent's end, ``│`` the head's, ``┼`` where a
non-projective arc crosses another; the root word's arrow comes from
``root`` on the top line::

              root
     ┌──┐┌───┐│
     ▼  │▼   │▼
    The dog barks
"""
from __future__ import annotations

_GLYPH = {frozenset("LR"): "─", frozenset("UD"): "│", frozenset("DR"): "┌", frozenset("DL"): "┐",
          frozenset("UR"): "└", frozenset("UL"): "┘", frozenset("UDLR"): "┼", frozenset("DLR"): "┬",
          frozenset("ULR"): "┴", frozenset("UDR"): "├", frozenset("UDL"): "┤", frozenset("U"): "│",
          frozenset("D"): "│", frozenset("L"): "─", frozenset("R"): "─"}


def draw_dependencies(words: list[str], heads: list[int]) -> str:
    """Arcs of ``heads`` (1-based, 0 = root) drawn above ``words``; lines end in ``\\n``.
    Crossing (non-projective) arcs are drawn too."""
    n = len(words)
    if len(heads) != n:
        raise ValueError("one head per word")
    # endpoints per word: (key, arc id, is dependent end); key orders them so that
    # nested arcs do not cross: left-going closest first, the root, right-going farthest first
    ends: list[list[tuple]] = [[] for _ in range(n)]
    arcs: list[tuple] = []
    for d, h in enumerate(heads, 1):
        if h == 0:
            ends[d - 1].append(((1, 0), None, True))
            continue
        k = len(arcs)
        arcs.append((h, d))
        ends[d - 1].append(((0 if h < d else 2, -h), k, True))
        ends[h - 1].append(((0 if d < h else 2, -d), k, False))
    col = {}                      # (arc id, is dependent end) -> column; root -> column
    starts, x = [], 0
    root_cols: list[int] = []     # one per HEAD-0 word (a forest has several)
    for i, w in enumerate(words):
        es = sorted(ends[i], key=lambda e: e[0])
        width = max(len(w), len(es))
        starts.append(x)
        c0 = x + (width - len(es)) // 2
        for j, (_, k, dep) in enumerate(es):
            if k is None:
                root_cols.append(c0 + j)
            else:
                col[(k, dep)] = c0 + j
        x += width + 1
    total = x - 1
    # levels: shortest arcs first; above every arc they contain, beside no arc they overlap
    spans = sorted(((min(col[(k, True)], col[(k, False)]), max(col[(k, True)], col[(k, False)]), k)
                    for k in range(len(arcs))), key=lambda s: (s[1] - s[0], s[0]))
    level: dict[int, int] = {}
    placed: list[tuple[int, int, int]] = []
    for a, b, k in spans:
        lv = 1 + max((level[j] for a2, b2, j in placed if a <= a2 and b2 <= b), default=0)
        while any(level[j] == lv and not (b2 < a or b < a2) for a2, b2, j in placed):
            lv += 1
        level[k] = lv
        placed.append((a, b, k))
    top = max(level.values(), default=0)
    width = max([total] + [c + 4 for c in root_cols])
    # rows[0] = level top ... rows[-1] = level 1
    rows: list[list[set]] = [[set() for _ in range(width)] for _ in range(top)]
    for (a, b, k) in placed:
        r = top - level[k]
        rows[r][a] |= {"D", "R"}
        rows[r][b] |= {"D", "L"}
        for c in range(a + 1, b):
            rows[r][c] |= {"L", "R"}
        for c in (a, b):
            for r2 in range(r + 1, top):
                rows[r2][c] |= {"U", "D"}
    for rc in root_cols:
        for r in range(top):
            rows[r][rc] |= {"U", "D"}
    lines = []
    if root_cols:
        label, free = [" "] * width, 0
        for rc in root_cols:          # 'root' over each root where the previous label leaves room (▼ marks all)
            if rc >= free:
                label[rc:rc + 4], free = list("root"), rc + 5
        lines.append("".join(label))
    for row in rows:
        lines.append("".join(_GLYPH[frozenset(c)] if c else " " for c in row))
    arrows = [" "] * width
    for (_, dep), c in col.items():
        arrows[c] = "▼" if dep else "│"
    for rc in root_cols:
        arrows[rc] = "▼"
    lines.append("".join(arrows))
    text = [" "] * (total + 1)
    for s, w, es in zip(starts, words, ends):
        off = s + (max(len(w), len(es)) - len(w)) // 2
        text[off:off + len(w)] = list(w)
    lines.append("".join(text))
    return "".join(ln.rstrip() + "\n" for ln in lines)


def draw_unparsed(words: list[str]) -> str:
    """A sentence without a tree: its words and ``no parse``."""
    return "no parse\n" + " ".join(words) + "\n"


def draw_tree(tree, words: bool = True) -> str:
    """A bracketed tree (nested ``(label, child, ...)`` tuples, string leaves) as an
    indented outline, a preterminal and its word on one line (only the tag
    with ``words=False``)::

        S
        ├── NP
        │   ├── DT The
        │   └── NN dog
        └── VP
            └── VBZ barks
    """
    out = []

    def node_text(t):
        if isinstance(t, str):
            return t
        if len(t) == 2 and isinstance(t[1], str):
            return f"{t[0]} {t[1]}" if words else t[0]
        return t[0] or "·"

    def kids(t):
        return [] if isinstance(t, str) or (len(t) == 2 and isinstance(t[1], str)) else list(t[1:])

    out.append(node_text(tree))
    stack = [(c, "", i == len(kids(tree)) - 1) for i, c in reversed(list(enumerate(kids(tree))))]
    while stack:                          # (no recursion: a tree may be deeper than Python's limit)
        t, prefix, last = stack.pop()
        out.append(prefix + ("└── " if last else "├── ") + node_text(t))
        below = kids(t)
        inner = prefix + ("    " if last else "│   ")
        stack.extend((c, inner, i == len(below) - 1) for i, c in reversed(list(enumerate(below))))
    return "".join(ln + "\n" for ln in out)
