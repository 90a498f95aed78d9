"""``python -m grind.bench [NAME ...]``: the kernel benchmarks (all of them, or the NAMEd ones), one after the
other; each is also ``python -m grind.bench.NAME`` with its own options (``--help``)."""
import importlib
import sys

BENCHES = ("cky", "dmv", "hastings_dmv", "cvb", "streaming", "ln", "morph", "latent_tree", "latent_parse",
           "grammar_load", "scaling")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        print(f"usage: python -m grind.bench [NAME ...]\n\n{__doc__}\nNAMEs: {' '.join(BENCHES)}")
        return
    unknown = [a for a in argv if a not in BENCHES]
    if unknown:
        print(f"python -m grind.bench: unknown benchmark {unknown[0]!r} (one of: {' '.join(BENCHES)})",
              file=sys.stderr)
        sys.exit(2)
    for name in argv or BENCHES:
        try:
            mod = importlib.import_module(f"grind.bench.{name}")
        except ImportError as e:
            print(f"(skipping {name} benchmark: {e})", file=sys.stderr)
            continue
        mod.main([])                 # each with its defaults: the arguments here name benchmarks


if __name__ == "__main__":
    main()
