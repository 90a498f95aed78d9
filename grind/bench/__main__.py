"""``python -m grind.bench [NAME ...]``: the kernel benchmarks (all of them, or the NAMEd ones), one after the
other; each is also ``python -m grind.bench.NAME`` with its own options (``--help``)."""
import importlib
import sys

BENCHES = ("cky", "dmv", "hastings_dmv", "cvb", "streaming", "ln", "morph", "latent_tree", "latent_parse",
           "grammar_load", "scaling", "startup")


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
    results = {}
    for name in argv or BENCHES:
        try:
            mod = importlib.import_module(f"grind.bench.{name}")
        except ImportError as e:
            print(f"(skipping {name} benchmark: {e})", file=sys.stderr)
            continue
        results[name] = mod.main([])         # each with its defaults: the arguments here name benchmarks
    goals(results)


def goals(results) -> None:
    """Issue 40's three ratios, as measured above in this run."""
    lines = []
    if (r := results.get("ln")) is not None:
        from grind.bench.ln import GOAL
        x = r["goal_ratio"]
        each = "; ".join(f"{name} {v:,.0f}x" for name, v in r.get("ratios", {}).items())
        lines.append(f"- LN model I iteration / EM iteration: {x:,.0f}x at worst (goal <= {GOAL}: {_met(x <= GOAL)})"
                     + (f": {each}" if each else ""))
    if (r := results.get("cky")) is not None and r.get("hastings"):
        from grind.bench.cky import HASTINGS_GOAL
        x = max(h / e for *_, e, h in r["hastings"])
        lines.append(f"- PCFG Hastings sweep / E-step, worst cell: {x:.2f}x (goal <= {HASTINGS_GOAL:g}: "
                     f"{_met(x <= HASTINGS_GOAL)})")
    if (r := results.get("startup")) is not None:
        from grind.bench.startup import GOAL as SGOAL
        w, c = r["startup"]
        lines.append(f"- start-up, grind estep minus python -c pass: {c:.3f} s CPU, {w:.3f} s wall "
                     f"(goal <= {SGOAL:g} s CPU: {_met(c <= SGOAL)})")
    if lines:
        print("\n### Issue 40's goals, measured in this run\n")
        print("\n".join(lines))


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


if __name__ == "__main__":
    main()
