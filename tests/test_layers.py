"""The package layout is the design: lower layers never import higher ones, and
no two modules import each other (directly or in a cycle), counting imports
inside functions too.

    errors, log  <  formats  <  grammars  <  kernels  <  infer  <  eval  <  cli, bench
"""
from __future__ import annotations

import ast
import os

import grind

ROOT = os.path.dirname(grind.__file__)
#: Rank of each top-level part of the package; a module may import its own rank or lower.
LAYERS = {"errors": 0, "log": 0, "heap": 0, "__init__": 0, "formats": 1, "grammars": 2, "kernels": 3, "infer": 4,
          "eval": 5, "api": 6, "run": 6, "cli": 7, "bench": 7, "__main__": 7}


def modules() -> dict[str, str]:
    """Dotted module name -> file, for every .py file of the package."""
    out = {}
    for root, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(root, f), os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(root, f)
    return out


def imports(name: str, path: str, known: set[str]) -> set[str]:
    """grind modules that module ``name`` imports anywhere in its body (``from
    pkg import sub`` counts as importing the submodule ``pkg.sub``)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    is_pkg = path.endswith("__init__.py")
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "grind"}
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                mod = ".".join(base[: len(base) - node.level + 1] + ([mod] if mod else []))
            if mod.split(".")[0] != "grind":
                continue
            subs = {f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in known}
            out |= subs or {mod}
            if subs and len(subs) < len(node.names):
                out.add(mod)
    return {m for m in out if m in known and m != name}


def layer(mod: str) -> int:
    parts = mod.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def graph():
    mods = modules()
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def test_every_module_has_a_layer():
    for m in modules():
        parts = m.split(".")
        assert len(parts) == 1 or parts[1] in LAYERS, f"{m}: not in a known layer (tests/test_layers.py LAYERS)"


def test_no_import_from_a_higher_layer():
    bad = [f"{m} ({layer(m)}) imports {d} ({layer(d)})" for m, deps in graph().items() for d in deps
           if layer(d) > layer(m)]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    g = graph()
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(g[m]):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_checker_sees_cycles_and_layers(tmp_path):
    """A test that cannot fail is a defect: the checker must see a planted cycle
    and a planted upward import."""
    (tmp_path / "a.py").write_text("from grind.formats import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from grind.formats.a import x\n")
    known = {"grind.formats.a", "grind.formats.b", "grind.infer.ln"}
    assert imports("grind.formats.a", str(tmp_path / "a.py"), known) == {"grind.formats.b"}
    assert imports("grind.formats.b", str(tmp_path / "b.py"), known) == {"grind.formats.a"}
    (tmp_path / "c.py").write_text("from grind.infer.ln import Packing\n")
    deps = imports("grind.formats.c", str(tmp_path / "c.py"), known | {"grind.formats.c"})
    assert any(layer(d) > layer("grind.formats.c") for d in deps)
