"""Click options made from declarations, and help pages grouped under headings.

:func:`table_option` turns an :class:`grind.infer.options.Opt` (the one
declaration of a training option) into a click option; :class:`GroupedOption`
carries its heading and its long explanation (``doc``, for the reference
pages, :mod:`grind.cli.docs`); :class:`GroupedCommand` writes ``--help`` with
one section per heading and one line per option where it fits, and points to
the command's reference page.  The click parameter types every command uses
for numbers, files it writes and Dirichlet hyperparameters live here too.
"""
from __future__ import annotations

import math

import click

from grind.errors import InputError
from grind.formats.textio import output_problem
from grind.infer.options import GROUPS, OPTION, Opt

#: Where the reference pages are (docs/reference/COMMAND.md, man grind-COMMAND).
REFERENCE = "docs/reference"
#: The headings of options many commands share, listed after a command's own headings, in this order.
SHARED_GROUPS = ("Corpus", "Grammar and kernel", "Held-out evaluation", "Output", "Run control")


# ----------------------------------------------------------------------------- parameter types

class OutputPath(click.ParamType):
    """A file grind writes, checked when click converts the option, before the
    command runs: ``''`` is a usage error (exit 2); a missing directory, a
    directory, a file or directory that is not writable, or a dangling symlink
    into a missing directory is a one-line error naming option and path (exit 1).
    Every option that names a file grind writes has this type; the writing is
    :func:`grind.formats.textio.open_out`'s (symlinks written through, FIFOs and devices
    directly, compression by suffix).  ``regular=True``: a file written more than
    once or read back by name (``train --checkpoint``) must be a regular file:
    ``-``, a FIFO, a device or a socket is an error too."""
    name = "file"

    def __init__(self, regular: bool = False):
        self.regular = regular

    def convert(self, value, param, ctx):
        problem = output_problem(value, self.regular)
        if problem == "empty file name":
            self.fail("empty file name", param, ctx)
        if problem:
            opt = "/".join(param.opts) if param else "output"
            raise InputError(f"{opt} {value}: cannot write: {problem}")
        return value


class FiniteFloatRange(click.FloatRange):
    """A click.FloatRange that also refuses nan and inf (which FloatRange lets through)."""

    def convert(self, value, param, ctx):
        v = super().convert(value, param, ctx)
        if not math.isfinite(v):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return v


class AlphaType(click.ParamType):
    """--alpha: a finite number > 0 (>= 0 with ``zero_ok``; kept as written), a number and per-LHS numbers
    (``1e-20,Stem=1e-15``), or an existing file of per-rule pseudo-counts."""

    name = "NUMBER|NUMBER,LHS=NUMBER...|FILE"

    def __init__(self, zero_ok: bool = False):
        self.zero_ok = zero_ok

    def convert(self, value, param, ctx):
        import os
        from grind.infer.training import alpha_per_lhs
        if os.path.exists(str(value)) or (value == "-" and not self.zero_ok):
            return value
        per_lhs = alpha_per_lhs(value)
        try:
            values = [float(value)] if per_lhs is None else [per_lhs[0], *(v for _, v in per_lhs[1])]
        except (TypeError, ValueError):
            self.fail(f"{value!r} is neither a number, nor NUMBER,LHS=NUMBER,..., nor an existing file of "
                      f"pseudo-counts", param, ctx)
        zero_ok = self.zero_ok and per_lhs is None        # mstep's 0 (no prior) is one number, not per LHS
        bound = ">= 0" if zero_ok else "> 0"
        for v in values:
            if not (math.isfinite(v) and (v >= 0 if zero_ok else v > 0)):
                self.fail(f"{value!r}: a Dirichlet hyperparameter must be a finite number {bound}", param, ctx)
        return value


class NumberList(click.ParamType):
    """Comma-separated numbers, kept as written (``--mix-coef 0.85,0.15``)."""

    name = "numbers"

    def convert(self, value, param, ctx):
        try:
            [float(x) for x in str(value).split(",")]
        except ValueError:
            self.fail(f"not a comma-separated list of numbers: {value!r}", param, ctx)
        return value


# ----------------------------------------------------------------------------- grouped options and help

class GroupedOption(click.Option):
    """A click option with a heading (``group``) for ``--help``, a longer explanation (``doc``) for the
    reference page, and a default shown as text (``shown_default``: per-algorithm defaults).  Its help line
    is its help and default; the range its type checks is for the reference page."""

    def __init__(self, *args, group: str | None = None, doc: str = "", shown_default: str | None = None, **kw):
        super().__init__(*args, **kw)
        self.group, self.doc, self.shown_default = group, doc, shown_default

    def metavar_text(self) -> str:
        """The option's value as help shows it: its metavar, ``[a|b]`` for a choice, or the type's name."""
        if self.is_flag or self.count:
            return ""
        if self.metavar:
            return self.metavar
        if isinstance(self.type, click.Choice):
            return "[" + "|".join(map(str, self.type.choices)) + "]"
        return self.type.name.upper()

    def default_text(self) -> str | None:
        """The default as help shows it, or None."""
        if self.shown_default is not None:
            return self.shown_default
        if self.is_bool_flag and self.secondary_opts and self.show_default:
            return (self.opts if self.default else self.secondary_opts)[0].lstrip("-")
        if not self.show_default or self.is_flag:
            return None
        if isinstance(self.show_default, str):
            return self.show_default
        return None if self.default is None else str(self.default)

    def range_text(self) -> str | None:
        if isinstance(self.type, (click.IntRange, click.FloatRange)):
            return self.type._describe_range()
        return None

    def get_help_record(self, ctx):
        if self.hidden:
            return None
        names = ", ".join(self.opts) + ("/" + ", ".join(self.secondary_opts) if self.secondary_opts else "")
        meta = self.metavar_text()
        text = self.help or ""
        default = self.default_text()
        if default is not None:
            text = f"{text}  [default: {default}]"
        if self.required:
            text = f"{text}  [required]"
        return (f"{names} {meta}" if meta else names), text


class GroupedCommand(click.Command):
    """A command whose ``--help`` lists its options under their headings (in ``order``; by default the
    command's own headings as first met, then :data:`SHARED_GROUPS`) and ends with a pointer to its
    reference page.
    ``reference``: extra text for the reference page only (options' long explanations are their ``doc``)."""

    def __init__(self, *args, order: tuple = (), reference: str = "", **kw):
        super().__init__(*args, **kw)
        self.order, self.reference = tuple(order), reference

    def sections(self, ctx) -> list[tuple[str, list]]:
        """[(heading, [param, ...])] in help order: the options without a heading first ("Options"), then
        the headings in ``order``, then the others as first met; --help ends the last section."""
        groups: dict[str, list] = {}
        help_option = self.get_help_option(ctx)
        for p in self.get_params(ctx):
            if isinstance(p, click.Option) and not p.hidden and p is not help_option:
                groups.setdefault(getattr(p, "group", None) or "Options", []).append(p)
        order = self.order or tuple(k for k in groups if k not in SHARED_GROUPS) + SHARED_GROUPS
        keys = ["Options"] + [k for k in order if k in groups] + [k for k in groups if k not in order]
        out = [(k, groups[k]) for k in dict.fromkeys(keys) if k in groups]
        if help_option is not None:
            out = out or [("Options", [])]
            out[-1] = (out[-1][0], out[-1][1] + [help_option])
        return out

    def format_options(self, ctx, formatter):
        sections = [(title, [r for r in (p.get_help_record(ctx) for p in params) if r is not None])
                    for title, params in self.sections(ctx)]
        firsts = [len(first) for _, rows in sections for first, _ in rows]
        width = min(max(firsts, default=0), FIRST_COLUMN)
        for title, rows in sections:
            if rows:
                with formatter.section(title):
                    write_rows(formatter, rows, width)

    def format_epilog(self, ctx, formatter):
        super().format_epilog(ctx, formatter)
        pointer(ctx, formatter)


#: The widest option column of a help page; a longer option has its help on the next line.
FIRST_COLUMN = 24


def write_rows(formatter, rows, width: int) -> None:
    """Option rows with one first-column ``width`` on the whole page (click's ``write_dl`` sizes each
    section on its own): the help beside its option, wrapped to the page, or below an option too long."""
    import textwrap
    indent = formatter.current_indent
    text_width = max(formatter.width - indent - width - 2, 20)
    for first, second in rows:
        formatter.write(" " * indent + first)
        if not second:
            formatter.write("\n")
            continue
        if len(first) <= width:
            formatter.write(" " * (width - len(first) + 2))
        else:
            formatter.write("\n" + " " * (indent + width + 2))
        lines = textwrap.wrap(second, text_width, break_on_hyphens=False, break_long_words=False) or [""]
        formatter.write(lines[0] + "\n")
        for line in lines[1:]:
            formatter.write(" " * (indent + width + 2) + line + "\n")


def page_name(path: str) -> str:
    """The reference page of a command path: ``grind make-grammar dmv`` -> ``make-grammar-dmv``."""
    return "-".join(path.split()[1:]) or "grind"


def pointer(ctx, formatter) -> None:
    """The help's last line: where the command's reference page and man page are."""
    name = page_name(ctx.command_path)
    man = "grind" if name == "grind" else f"grind-{name}"
    formatter.write_paragraph()
    formatter.write_text(f"Reference: {REFERENCE}/{name}.md (man page: docs/man/{man}.1).")


class GroupedGroup(click.Group):
    """A group of commands whose help also points to its reference page; its commands are
    :class:`GroupedCommand`."""

    command_class = GroupedCommand

    def format_epilog(self, ctx, formatter):
        super().format_epilog(ctx, formatter)
        pointer(ctx, formatter)


def option(*decls, group: str | None = None, doc: str = "", **kw):
    """``click.option`` of a :class:`GroupedOption`: one-line ``help``, heading ``group``, longer ``doc``."""
    return click.option(*decls, cls=GroupedOption, group=group, doc=doc, **kw)


def grouped(f=None, **kw):
    """``@grouped(...)``: a :class:`GroupedCommand` (``click.command(cls=GroupedCommand, ...)``)."""
    kw.setdefault("cls", GroupedCommand)
    return click.command(**kw) if f is None else click.command(**kw)(f)


# ----------------------------------------------------------------------------- options from the table

def click_type(o: Opt):
    """The click parameter type of a table option."""
    if o.kind == "alpha":
        return AlphaType()
    if o.kind in ("output", "checkpoint"):
        return OutputPath(regular=o.kind == "checkpoint")
    if o.kind == "numbers":
        return NumberList()
    if o.choices is not None:
        return click.Choice([str(c) for c in o.choices], case_sensitive=o.case_sensitive)
    if o.type is int and o.range is not None:
        return click.IntRange(*o.range)
    if o.type is float:
        return FiniteFloatRange(*(o.range or (None, None)))
    if o.type is int:
        return int
    return str


def table_option(name: str, **override):
    """The click option (a decorator) of the table's option ``name``.  Its click default is the table's,
    or None (meaning the algorithm's) when algorithms differ or another option sets it; ``override``:
    click keywords to change (another heading for another command, say)."""
    o = OPTION[name]
    per_algo = bool(o.defaults or o.default_with)
    decls = ([o.short] if o.short else []) + [o.long] + ([o.name] if o.alias or o.long[2:] != o.name else [])
    kw = dict(cls=GroupedOption, help=o.help, group=GROUPS[o.group], doc=o.doc, metavar=o.metavar)
    if o.type is bool:
        kw.update(is_flag=True, default=False)
    else:
        kw.update(type=click_type(o), default=None if per_algo else o.default, show_default=not per_algo,
                  shown_default=o.shown_default() if per_algo else None)
        if o.kind == "pair":
            kw.update(nargs=2, type=str)
        if o.bare is not None:              # --universal-rules alone: ud
            kw.update(is_flag=False, flag_value=o.bare)
    if o.kind == "config":
        kw.update(type=click.Path(dir_okay=False), is_eager=True, expose_value=True, callback=read_config)
    kw.update(override)
    return click.option(*decls, **kw)


def read_config(ctx, param, path):
    """``--config FILE``: the TOML file's options become the command's defaults (``ctx.default_map``), so
    that options on the command line override them and click checks their values as it checks the command
    line's; an unknown name is a usage error naming it."""
    if path is None or ctx.resilient_parsing:
        return path
    try:
        import tomllib
    except ImportError:                 # Python < 3.11
        import tomli as tomllib
    try:
        with click.open_file(path, "rb") as f:
            table = tomllib.load(f)
    except OSError as e:
        raise InputError(f"--config {path}: cannot read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"--config {path}: not TOML: {e}") from None
    names = {}
    for p in ctx.command.params:
        if isinstance(p, click.Option) and p.name not in ("config", "help"):
            for opt in p.opts + p.secondary_opts:
                if opt.startswith("--"):
                    names[opt[2:]] = names[opt[2:].replace("-", "_")] = p
    unknown = [k for k in table if k not in names]
    if unknown:
        raise click.BadParameter(f"{path}: no option {', '.join(map(repr, unknown))} in {ctx.command_path} "
                                 "(keys are its long options' names)", ctx, param)
    defaults = {}
    for key, value in table.items():
        p = names[key]
        if p.is_bool_flag and p.secondary_opts and key in (o[2:] for o in p.secondary_opts):
            value = not value               # --no-baselines = false
        if isinstance(value, dict):
            raise click.BadParameter(f"{path}: {key} is a table, not a value", ctx, param)
        defaults[p.name] = value if isinstance(value, bool) else \
            [str(v) for v in value] if isinstance(value, list) else str(value)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta["config"] = (path, [(key, names[key].name, value) for key, value in table.items()])
    return path


def config_header(ctx) -> str | None:
    """The ``# config:`` header value: the file and the options it gave that the command line did not."""
    if "config" not in ctx.meta:
        return None
    import json
    from click.core import ParameterSource
    path, given = ctx.meta["config"]
    used = [f"{key} = {json.dumps(value)}" for key, name, value in given
            if ctx.get_parameter_source(name) == ParameterSource.DEFAULT_MAP]
    return f"{path} ({', '.join(used) if used else 'every option overridden on the command line'})"


def table_options(names):
    """A decorator adding the table options ``names`` in that order (the first is listed first)."""
    def decorate(f):
        for name in reversed(list(names)):
            f = table_option(name)(f)
        return f
    return decorate
