"""Start-up: the command line imports a command's module only when it runs, and no optional or heavy
library it does not use -- SciPy (only the CKY kernel's dense path, VB's digamma, the logistic
normal's L-BFGS-B and the latent-annotation kernels need it), Dask, matplotlib."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("scipy", "dask", "distributed", "matplotlib")


def imported(code: str, cwd=None) -> set:
    """The top-level packages a fresh interpreter has imported after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=cwd)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", ["import grind.cli", "import grind.__main__", "import grind"])
def test_importing_the_command_line_imports_no_heavy_library(code):
    assert not imported(code) & set(HEAVY)


def test_help_and_a_dmv_estep_import_no_heavy_library(tmp_path):
    (tmp_path / "c.txt").write_text("NN VBD NN\nDT NN\n")
    run = ("from grind.cli import main\n"
           "try:\n"
           "    main({args!r})\n"
           "except SystemExit as e:\n"
           "    assert not e.code, e.code\n")
    make = ["make-grammar", "dmv", "-o", "g.txt", "c.txt"]
    assert not imported(run.format(args=make), cwd=tmp_path) & set(HEAVY)
    for args in (["--help"], ["estep", "--help"], ["estep", "-o", "n.txt", "g.txt", "c.txt"]):
        assert not imported(run.format(args=args), cwd=tmp_path) & set(HEAVY), args
    assert (tmp_path / "n.txt").read_text().count("-->") > 10


def test_a_command_imports_only_its_own_module():
    full = subprocess.run([sys.executable, "-c", "import sys\nfrom grind.cli.main import cli\n"
                           "assert cli.get_command(None, 'estep').name == 'estep'\n"
                           "print(' '.join(sorted(k for k in sys.modules if k.startswith('grind.cli.'))))"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert "grind.cli.count_cmds" in full
    assert not {"grind.cli.train", "grind.cli.decode_cmds", "grind.cli.plot_cmds"} & set(full), full
