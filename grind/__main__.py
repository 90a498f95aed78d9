"""The ``grind`` console script and ``python -m grind``.

A Ctrl-C while the command line is still being imported (its first tenth of a second) exits 130 with
"grind: interrupted", as it does once the command runs, instead of Python's KeyboardInterrupt traceback.
"""
import signal
import sys


def main():
    def early(signum, frame):
        sys.stderr.write("grind: interrupted\n")
        raise SystemExit(130)
    old = signal.signal(signal.SIGINT, early)
    try:
        from grind.cli import main as cli_main
    except MemoryError:                       # (grind.cli reports its own; this is Python's import machinery)
        sys.stderr.write("grind: error: out of memory\n")
        raise SystemExit(1) from None
    finally:
        signal.signal(signal.SIGINT, old)
    cli_main()


if __name__ == "__main__":
    main()
