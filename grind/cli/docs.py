"""The reference pages and man pages of every command, made from the click commands.

``python -m grind.cli.docs [DIR]`` (``make docs``) writes DIR/reference/COMMAND.md and DIR/man/grind-COMMAND.1
(``--man``: only the man pages, ``make man``).  A page holds what ``--help`` shows and what left it: the text after
the description's ``\\f``, the command's ``reference`` text, every option's ``doc``, its type, range, choices
and default.  ``tests/test_docs.py`` fails when a committed page is not what this writes.
"""
from __future__ import annotations

import inspect
import os
import re
import sys

import click

from grind import __version__

#: The pages' folders under the docs directory.
REFERENCE, MAN = "reference", "man"


# ----------------------------------------------------------------------------- the commands

def commands(cmd=None, path=("grind",)):
    """(path, command) of ``grind`` and of every command under it, in order."""
    return [(p, c) for p, c, _ in contexts(cmd, path)]


def contexts(cmd=None, path=("grind",), parent=None):
    """(path, command, click context) of ``grind`` and of every command under it: each context a child of
    its group's, as when the command runs (so ``-h`` is a help option, as the group's settings say)."""
    if cmd is None:
        from grind.cli.main import cli
        cmd = cli
    ctx = click.Context(cmd, info_name=path[-1], parent=parent, **(cmd.context_settings if parent is None else {}))
    yield path, cmd, ctx
    if isinstance(cmd, click.Group):            # (list / get: the grind group imports its commands when asked)
        for name in sorted(cmd.list_commands(ctx)):
            yield from contexts(cmd.get_command(ctx, name), path + (name,), ctx)


def page_name(path) -> str:
    """``("grind", "make-grammar", "dmv")`` -> ``make-grammar-dmv`` (``grind`` for the group itself)."""
    return "-".join(path[1:]) or "grind"


def man_name(path) -> str:
    return "-".join(path)


def blocks(text: str) -> list[tuple[str, str]]:
    """``text`` (a click help text) as [(kind, text)]: ``prose`` paragraphs (lines joined) and ``verbatim``
    ones (click's ``\\b`` paragraphs, and paragraphs indented by four spaces: dedented)."""
    out = []
    for para in re.split(r"\n\s*\n", inspect.cleandoc(text).strip()):
        lines = para.split("\n")
        if lines[0].strip() == "\b":
            out.append(("verbatim", inspect.cleandoc("\n".join(lines[1:]))))
        elif all(ln.startswith("    ") or not ln.strip() for ln in lines):
            out.append(("verbatim", inspect.cleandoc("\n".join(lines))))
        else:
            out.append(("prose", " ".join(ln.strip() for ln in lines)))
    return [b for b in out if b[1]]


def texts(cmd) -> tuple[str, str]:
    """(the description --help shows, the rest: text after ``\\f`` and the command's ``reference``)."""
    full = inspect.cleandoc(cmd.help or "")
    short, _, rest = full.partition("\f")
    extra = getattr(cmd, "reference", "") or ""
    return short.strip(), "\n\n".join(t for t in (inspect.cleandoc(rest).strip(), inspect.cleandoc(extra).strip()) if t)


def usage(ctx, cmd) -> str:
    pieces = cmd.collect_usage_pieces(ctx)
    return f"{ctx.command_path} {' '.join(pieces)}"


def _metavar(p, ctx) -> str:
    try:
        return p.make_metavar(ctx)
    except TypeError:                   # click < 8.2: make_metavar()
        return p.make_metavar()


def option_facts(p, ctx) -> dict:
    """What the pages say of option ``p``: names, value, help, doc, type / range / choices, default, heading."""
    names = ", ".join(p.opts) + (" / " + ", ".join(p.secondary_opts) if p.secondary_opts else "")
    meta = p.metavar_text() if hasattr(p, "metavar_text") else ("" if p.is_flag or p.count else _metavar(p, ctx))
    kind = []
    if isinstance(p.type, click.Choice):
        kind.append("one of " + ", ".join(map(str, p.type.choices)))
    elif isinstance(p.type, (click.IntRange, click.FloatRange)):
        kind.append(("integer " if isinstance(p.type, click.IntRange) else "number ") + p.type._describe_range())
    if p.multiple:
        kind.append("repeatable")
    default = p.default_text() if hasattr(p, "default_text") else None
    if default is None and p.show_default and not p.is_flag and p.default is not None:
        default = str(p.default)
    if p.required:
        kind.append("required")
    return dict(names=names, meta=meta, help=p.help or "", doc=getattr(p, "doc", "") or "", kind=kind,
                default=default, group=getattr(p, "group", None) or "Options")


def sections(cmd, ctx) -> list[tuple[str, list]]:
    """The options under their headings, as ``--help`` lists them."""
    if hasattr(cmd, "sections"):
        return [(title, [option_facts(p, ctx) for p in params]) for title, params in cmd.sections(ctx)]
    params = [p for p in cmd.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    return [("Options", [option_facts(p, ctx) for p in params])]


def page_data(path, cmd, ctx) -> dict:
    short, long = texts(cmd)
    subs = [(name, cmd.get_command(ctx, name).get_short_help_str(80))
            for name in sorted(cmd.list_commands(ctx))] if isinstance(cmd, click.Group) else []
    return dict(path=path, name=page_name(path), usage=usage(ctx, cmd), short=short, long=long,
                sections=sections(cmd, ctx), args=[p.human_readable_name for p in cmd.params
                                                   if isinstance(p, click.Argument)],
                subcommands=subs, epilog=inspect.cleandoc(cmd.epilog or ""),
                summary=cmd.get_short_help_str(200))


# ----------------------------------------------------------------------------- Markdown

def md_escape(text: str) -> str:
    """Prose for Markdown: ``<`` (not an HTML tag), ``*`` and ``_`` (not emphasis) escaped."""
    return text.replace("\\", "\\\\").replace("<", "&lt;").replace("*", "\\*").replace("_", "\\_")


def md_blocks(text: str) -> list[str]:
    out = []
    for kind, body in blocks(text):
        out.append(f"```text\n{body}\n```" if kind == "verbatim" else md_escape(body))
    return out


def markdown(d: dict) -> str:
    title = " ".join(d["path"])
    out = [f"# {title}", "", "<!-- Generated by `make docs` (grind/cli/docs.py) from the click commands: "
                             "edit the code, not this page. -->", "", "```text", d["usage"], "```", ""]
    for b in md_blocks(d["short"]) + md_blocks(d["long"]):
        out += [b, ""]
    if d["subcommands"]:
        out += ["## Commands", "", "| command | what it does |", "|---|---|"]
        for name, text in d["subcommands"]:
            link = page_name(d["path"] + (name,))
            out.append(f"| [`{name}`]({link}.md) | {md_escape(text)} |")
        out.append("")
    if d["args"]:
        out += ["Arguments: " + ", ".join(f"`{a}`" for a in d["args"]) + " (a file or `-` for standard input "
                "where it names a file).", ""]
    out += ["## Options", ""]
    for title, opts in d["sections"]:
        out += [f"### {title}", ""]
        for o in opts:
            head = f"`{o['names']}{' ' + o['meta'] if o['meta'] else ''}`"
            facts = o["kind"] + ([f"default: {o['default']}"] if o["default"] is not None else [])
            line = f"- {head}" + (f" ({md_escape('; '.join(facts))})" if facts else "")
            doc = blocks(o["doc"]) if o["doc"] and o["doc"] != o["help"] else []
            prose = " ".join([o["help"]] + [b for k, b in doc if k == "prose"]).strip()
            out.append(f"{line}: {md_escape(prose)}" if prose else line)
            for kind, body in doc:
                if kind == "verbatim":
                    out += ["", "  ```text"] + ["  " + ln for ln in body.split("\n")] + ["  ```", ""]
        out.append("")
    if d["epilog"]:
        out += ["## Example", ""] + md_blocks(d["epilog"]) + [""]
    out += ["## See also", "", f"`grind {d['name']} --help` (the short form), the man page "
            f"`docs/man/{'grind' if d['name'] == 'grind' else 'grind-' + d['name']}.1`, "
            "[the file formats](formats.md), [all commands](README.md).", ""]
    return "\n".join(out)


def index(pages: list[dict]) -> str:
    out = ["# grind reference", "", "<!-- Generated by `make docs` (grind/cli/docs.py): edit the code, not this page. "
           "-->", "", "One page per command, made from the command itself: every option with its type, range, "
           "default and the longer explanation `--help` leaves out.  Man pages of the same text are in "
           "`docs/man/` (`man -l docs/man/grind-train.1`).", "", "| command | what it does |", "|---|---|"]
    for d in pages:
        out.append(f"| [`{' '.join(d['path'])}`]({d['name']}.md) | {md_escape(d['summary'])} |")
    out += ["", "File formats (grammars, counts, traces, segmentations, checkpoints, header lines): "
            "[formats.md](formats.md).", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- roff

def roff_escape(text: str) -> str:
    """Text for roff: backslashes and hyphens escaped, non-ASCII characters as ``\\[uXXXX]``, a line that
    starts with a dot or quote kept as text."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = "".join(c if ord(c) < 128 else f"\\[u{ord(c):04X}]" for c in text)
    return "\n".join("\\&" + ln if ln.startswith((".", "'")) else ln for ln in text.split("\n"))


def roff_blocks(text: str) -> list[str]:
    out = []
    for kind, body in blocks(text):
        if kind == "verbatim":
            out += [".PP", ".RS 4", ".nf", roff_escape(body), ".fi", ".RE"]
        else:
            out += [".PP", roff_escape(body)]
    return out


def man(d: dict) -> str:
    name = man_name(d["path"])
    out = [f'.TH "{name.upper()}" "1" "" "grind {__version__}" "grind manual"',
           ".\\\" Generated by make man (grind/cli/docs.py) from the click commands: edit the code, not this file.",
           ".SH NAME", f"{name} \\- {roff_escape(d['summary'])}", ".SH SYNOPSIS", ".nf",
           roff_escape(d["usage"]), ".fi", ".SH DESCRIPTION"]
    out += roff_blocks(d["short"]) + roff_blocks(d["long"])
    if d["subcommands"]:
        out += [".SH COMMANDS"]
        for sub, text in d["subcommands"]:
            out += [".TP", f"\\fB{roff_escape(sub)}\\fR", roff_escape(text)]
    out.append(".SH OPTIONS")
    for title, opts in d["sections"]:
        out.append(f'.SS "{roff_escape(title)}"')
        for o in opts:
            head = f"\\fB{roff_escape(o['names'])}\\fR" + (f" \\fI{roff_escape(o['meta'])}\\fR" if o["meta"] else "")
            facts = o["kind"] + ([f"default: {o['default']}"] if o["default"] is not None else [])
            doc = blocks(o["doc"]) if o["doc"] and o["doc"] != o["help"] else []
            prose = " ".join([o["help"]] + [b for k, b in doc if k == "prose"]).strip()
            out += [".TP", head, roff_escape(prose + (f" ({'; '.join(facts)})" if facts else ""))]
            for kind, body in doc:
                if kind == "verbatim":
                    out += [".RS", ".nf", roff_escape(body), ".fi", ".RE"]
    if d["epilog"]:
        out.append(".SH EXAMPLE")
        out += roff_blocks(d["epilog"])
    out += [".SH SEE ALSO", roff_escape(f"docs/reference/{d['name']}.md, docs/reference/formats.md"
                                        + (", grind(1)" if d["name"] != "grind" else ""))]
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- writing

def pages() -> list[dict]:
    return [page_data(path, cmd, ctx) for path, cmd, ctx in contexts()]


def generated(man_only: bool = False) -> dict[str, str]:
    """{relative path: text} of every page this writes."""
    out = {}
    ds = pages()
    for d in ds:
        out[f"{MAN}/{man_name(d['path'])}.1"] = man(d)
        if not man_only:
            out[f"{REFERENCE}/{d['name']}.md"] = markdown(d)
    if not man_only:
        out[f"{REFERENCE}/README.md"] = index(ds)
    return out


def write(root: str, man_only: bool = False) -> list[str]:
    written = []
    for rel, text in generated(man_only).items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        written.append(path)
    return written


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    man_only = "--man" in argv
    rest = [a for a in argv if a != "--man"]
    root = rest[0] if rest else "docs"
    for path in write(root, man_only):
        print(path)


if __name__ == "__main__":
    main()
