"""The ``grind`` click group, its entry point :func:`main` (one-line errors,
signals, broken pipes, exit status) and the registration of every command."""
from __future__ import annotations

import functools
import importlib
import sys

import click

from grind import __version__, log
from grind.errors import (GrindError, Interrupted, Terminated, import_out_of_memory, out_of_memory_message,
                          termination)
from grind.formats.textio import StdoutClosed, guard_stdin, set_run_info
from grind.cli.options import GroupedGroup, OutputPath

EPILOG_PIPELINE = """\b
A whole pipeline on a CoNLL-U file (UPOS tags, punctuation removed, 2..10 words: a
CNF grammar with preterminals has no derivation of a one-word sentence):
  C="--column UPOS --punct ud --min-length 2 --max-length 10"
  grind make-grammar cnf $C --nonterminals 10 --preterminals 10 train.conllu > g0.txt
  grind init --random --seed 1 g0.txt > g1.txt
  grind train --algo em $C g1.txt train.conllu > g.txt
  grind parse $C g.txt test.conllu > test.trees
  grind loglik $C g.txt test.conllu | tail -3
"""


# ----------------------------------------------------------------------------- the group

def _version(ctx, value) -> None:
    """``grind --version``: the version, where each compiled kernel was built
    (file and build time) and the Python / numpy it runs with."""
    if not value or ctx.resilient_parsing:
        return
    import datetime
    import importlib
    import os
    import platform

    import numpy
    lines = [f"grind {__version__}"]
    for name in ("_cky", "_dmv"):
        try:
            mod = importlib.import_module(f"grind.kernels.{name}")
            built = datetime.datetime.fromtimestamp(os.path.getmtime(mod.__file__)).strftime("%Y-%m-%d %H:%M")
            lines.append(f"kernel grind.kernels.{name}: {mod.__file__} (built {built})")
        except ImportError as e:
            lines.append(f"kernel grind.kernels.{name}: not built ({e})")
    lines.append(f"python {platform.python_version()}, numpy {numpy.__version__}, click {click.__version__}")
    click.echo("\n".join(lines))
    ctx.exit()


#: Every command: name -> (module of grind.cli, attribute), in the order of ``grind --help``.  A command's
#: module is imported when the command runs (or is listed), so that a command pays only for its own imports.
COMMANDS = {"make-grammar": ("grammar_cmds", "make_grammar"), "make-structure": ("grammar_cmds", "make_structure"),
            "init": ("grammar_cmds", "init"), "split": ("split_cmd", "split"), "estep": ("count_cmds", "estep"),
            "sum": ("count_cmds", "sum_"), "mstep": ("count_cmds", "mstep"), "train": ("train", "train"),
            "parse": ("decode_cmds", "parse"), "baseline": ("decode_cmds", "baseline"),
            "function-heads": ("convert_cmd", "function_heads_cmd"), "convert": ("convert_cmd", "convert"),
            "loglik": ("decode_cmds", "loglik"),
            "eval": ("eval_cmd", "eval_"), "plot": ("plot_cmds", "plot"), "show": ("plot_cmds", "show")}


class LazyGroup(GroupedGroup):
    """The ``grind`` group (its help points to its reference page, :class:`grind.cli.options.GroupedGroup`);
    its commands (:data:`COMMANDS`) are imported when first asked for."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            module, attr = COMMANDS[cmd_name]
            cmd = getattr(importlib.import_module(f"grind.cli.{module}"), attr)
            _guard(cmd)
            self.add_command(cmd, cmd_name)
        return self.commands.get(cmd_name)


@click.group(cls=LazyGroup, epilog=EPILOG_PIPELINE, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=lambda c, p, v: _version(c, v),
              help="Show the version and the build, and exit.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or log messages (warnings still shown).")
@click.option("-v", "--verbose", count=True, help="More messages (-v: debug lines; -vv: with times).")
@click.option("--log-file", type=OutputPath(), default=None, metavar="FILE",
              help="Also write the messages to FILE, with times.")
def cli(quiet, verbose, log_file):
    """grind: unsupervised grammar induction with Bayesian probabilistic grammars.

    Grammars are plain text, one rule a line: 'weight LHS --> RHS ...'
    (Mark Johnson's format); count files use the same rule keys.
    \f
    Every FILE argument may be '-' (standard input or output).  Data goes to standard output (or -o),
    messages and progress bars to standard error (bars only on a terminal).  Exit status: 0 success, 1 an
    error of the input or the run, 2 a usage error, 130 interrupted (Ctrl-C), 143 terminated (SIGTERM),
    129 hung up (SIGHUP).

    Messages: -q keeps the warnings only, -v adds debug lines (a run's resolved options, the chart kernel),
    -vv puts the time before each line, --log-file FILE also writes them to FILE.  From Python (grind.fit,
    grind.parse, ...) the same messages go through the logging module, logger "grind", to standard error:
    logging.getLogger("grind").setLevel(logging.WARNING) silences the progress lines, grind.log.to_application()
    hands every message to the application's own logging handlers instead.

    Shell completion (bash; zsh and fish alike with zsh_source, fish_source): add to ~/.bashrc

        eval "$(_GRIND_COMPLETE=bash_source grind)"

    or, faster at shell start, write the script once and source it:

        _GRIND_COMPLETE=bash_source grind > ~/.grind-complete.bash
        echo '. ~/.grind-complete.bash' >> ~/.bashrc
    """
    if quiet and verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose are alternatives: give one")
    log.set_verbosity(verbose, quiet)
    if log_file:
        handler = log.log_file(log_file)
        ctx = click.get_current_context()
        ctx.call_on_close(lambda: (log.LOGGER.removeHandler(handler), handler.close()))
    guard_stdin()


# ----------------------------------------------------------------------------- the commands

def _guard(cmd) -> None:
    """Every command first checks that it writes none of the files it reads."""
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _guard(sub)
        return
    callback = cmd.callback
    if getattr(callback, "_grind_guarded", False):
        return

    @functools.wraps(callback)
    def checked(*args, **kwargs):
        from grind.cli.common import check_outputs_are_not_inputs
        check_outputs_are_not_inputs(click.get_current_context())
        return callback(*args, **kwargs)
    checked._grind_guarded = True          # type: ignore[attr-defined]
    cmd.callback = checked


# ----------------------------------------------------------------------------- entry point

def _terminate(signum, frame):
    """The SIGTERM and SIGHUP handler: record the request (checked between training
    steps) and raise :class:`grind.errors.Terminated` here and now."""
    import signal
    termination["requested"] = True
    termination["hangup"] = signum == getattr(signal, "SIGHUP", None)
    raise Terminated(termination["hangup"])


def _interrupt(signum, frame):
    """The SIGINT handler: :class:`grind.errors.Interrupted` (not KeyboardInterrupt, see there)."""
    raise Interrupted()


def main(argv=None):
    """Run the CLI: one-line errors, quiet broken pipes, exit status 0/1/2
    (130 on Ctrl-C, 143 on SIGTERM, 129 on SIGHUP)."""
    import signal
    import threading

    from grind.cli.threads import fix_mmap_threshold, limit_blas_threads
    limit_blas_threads()           # (done already when grind.cli was imported; for callers of main() alone)
    fix_mmap_threshold()
    argv = sys.argv[1:] if argv is None else list(argv)
    set_run_info(argv=["grind"] + argv)
    in_main = threading.current_thread() is threading.main_thread()
    termination.update(requested=False, hangup=False)
    old = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    hup = getattr(signal, "SIGHUP", None)                 # (not on Windows)
    old_hup = signal.signal(hup, _terminate) if in_main and hup is not None else None
    old_int = signal.signal(signal.SIGINT, _interrupt) if in_main else None
    try:
        cli.main(args=argv, prog_name="grind", standalone_mode=False)
    except click.exceptions.Abort:
        _exit(130, "grind: interrupted")
    except click.ClickException as e:
        e.show()
        _exit(e.exit_code)
    except GrindError as e:
        _exit(1, f"grind: error: {e}")
    except (BrokenPipeError, StdoutClosed):
        _exit(0)
    except (KeyboardInterrupt, Interrupted):
        _exit(130, "grind: interrupted")
    except Terminated as e:
        if e.hangup:
            _exit(129, "grind: hung up (SIGHUP)")
        _exit(143, "grind: terminated")
    except MemoryError as e:
        _exit(1, out_of_memory_message(e))
    except ImportError as e:
        if not import_out_of_memory(e):
            raise
        _exit(1, out_of_memory_message(e))
    except RecursionError:
        _exit(1, f"grind: error: the input is nested deeper than Python's recursion limit ({sys.getrecursionlimit()})")
    except OSError as e:  # e.g. writing --help to a full disk; reading is InputError already
        where = f"{e.filename}: " if e.filename else ""
        _exit(1, f"grind: error: {where}{e.strerror or e}")
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, old)
            signal.signal(signal.SIGINT, old_int)
            if hup is not None:
                signal.signal(hup, old_hup)
    _exit(0)


def _exit(status, message=None):
    """Flush stdout and exit; a stdout that cannot take the rest (closed pipe,
    full disk) is pointed at /dev/null so Python's own flush at exit stays quiet."""
    if message:
        sys.stderr.write(message + "\n")
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _drop_stdout()
    except OSError as e:
        _drop_stdout()
        if status == 0:
            sys.stderr.write(f"grind: error: cannot write <stdout>: {e.strerror or e}\n")
            status = 1
    if status:
        sys.exit(status)


def _drop_stdout():
    import os
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    main()
