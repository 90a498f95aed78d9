"""The data recipes (data-recipes/*.sh) parse, and those that resume refuse an OUTDIR made with other
settings (a finished run would otherwise be reported as this call's result: recipes audit)."""
import subprocess
from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parent.parent / "data-recipes"


@pytest.mark.parametrize("script", sorted(p.name for p in RECIPES.glob("*.sh")))
def test_recipe_parses(script):
    r = subprocess.run(["bash", "-n", str(RECIPES / script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def stamp(outdir, *settings):
    return subprocess.run(["bash", "-c", f'set -eEuo pipefail; trap "exit 9" ERR; source "{RECIPES}/settings.sh"; '
                           'settings_stamp "$@"', "recipe", str(outdir), *settings], capture_output=True, text=True)


def test_settings_stamp_refuses_other_settings(tmp_path):
    assert stamp(tmp_path, "EM_ITER=2", "LN_ITER=").returncode == 0
    assert (tmp_path / "settings").read_text() == "EM_ITER=2\nLN_ITER=\n"
    assert stamp(tmp_path, "EM_ITER=2", "LN_ITER=").returncode == 0            # the same settings: resumes
    r = stamp(tmp_path, "EM_ITER=3", "LN_ITER=")
    assert r.returncode == 2 and "made with: EM_ITER=2" in r.stderr and "now:       EM_ITER=3" in r.stderr
    assert (tmp_path / "settings").read_text() == "EM_ITER=2\nLN_ITER=\n"


def test_resuming_recipes_stamp_their_settings():
    for script in ("bayes-results.sh", "heads-results.sh", "latent-results.sh", "ln-results.sh"):
        assert "settings_stamp " in (RECIPES / script).read_text(), script
