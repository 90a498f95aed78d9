"""``python -m grind.bench``: every kernel benchmark, one after the other."""
import importlib
import sys


def main():
    for name in ("cky", "dmv", "hastings_dmv", "cvb", "ln", "morph", "latent_tree", "latent_parse", "grammar_load",
                 "scaling"):
        try:
            mod = importlib.import_module(f"grind.bench.{name}")
        except ImportError as e:
            print(f"(skipping {name} benchmark: {e})", file=sys.stderr)
            continue
        mod.main()


if __name__ == "__main__":
    main()
