"""Help pages a person reads: every command's --help is at most 100 lines at 80 columns, one section per
heading, and ends by pointing to its reference page."""
import click
import pytest
from click.testing import CliRunner

from grind.cli.main import cli


def commands(group=cli, path=("grind",)):
    """(path, command) of the group and of every command under it."""
    yield path, group
    for name, cmd in getattr(group, "commands", {}).items():
        yield from commands(cmd, path + (name,))


PAGES = list(commands())
IDS = [" ".join(p) for p, _ in PAGES]


def help_text(path) -> str:
    r = CliRunner().invoke(cli, [*path[1:], "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("path,cmd", PAGES, ids=IDS)
def test_help_is_at_most_100_lines(path, cmd):
    text = help_text(path)
    lines = text.splitlines()
    assert len(lines) <= 100, f"{' '.join(path)} --help: {len(lines)} lines"


@pytest.mark.parametrize("path,cmd", PAGES, ids=IDS)
def test_help_points_to_the_reference_page(path, cmd):
    name = "-".join(path[1:]) or "grind"
    assert f"docs/reference/{name}.md" in help_text(path)


@pytest.mark.parametrize("path,cmd", PAGES, ids=IDS)
def test_every_option_has_one_line_of_help(path, cmd):
    """Each option has a short help line: no long explanation (those are the reference page's, the option's
    ``doc``); the shared options have their headings."""
    for p in cmd.params:
        if isinstance(p, click.Option) and p.name != "help":
            if p.name in ("fmt", "column", "punct", "output", "seed", "kernel", "start") and path[1] != "show":
                assert getattr(p, "group", None), f"{' '.join(path)} {p.opts[0]}: no heading"
            assert p.help and len(p.help) <= 60, f"{' '.join(path)} {p.opts[0]}: help of {len(p.help or '')} chars"


def test_train_help_groups_the_options_by_algorithm():
    text = help_text(("grind", "train"))
    for heading in ("Algorithm:", "Corpus:", "ln (logistic normal):", "mixture (posterior constraints):",
                    "stochastic and streaming:", "Output:", "Run control:"):
        assert f"\n{heading}\n" in text, heading
    ln = text.split("ln (logistic normal):")[1].split("\n\n")[0]
    assert "--tie-warmup" in ln and "--epochs" not in ln
