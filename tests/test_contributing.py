"""The worked examples of CONTRIBUTING.md run and their own asserts hold.

Each example is a fenced ```python block between ``<!-- example: NAME -->`` and
``<!-- /example -->``; it is executed as a script in a fresh namespace.
"""
from __future__ import annotations

import os
import re

import pytest

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "CONTRIBUTING.md")
BLOCK = re.compile(r"<!-- example: (\S+) -->\s*```python\n(.*?)```\s*<!-- /example -->", re.S)


def examples() -> dict[str, str]:
    with open(DOC, encoding="utf-8") as f:
        return dict(BLOCK.findall(f.read()))


def test_both_examples_are_there():
    assert set(examples()) == {"algorithm", "kernel"}


@pytest.mark.parametrize("name", ["algorithm", "kernel"])
def test_example_runs(name):
    code = examples()[name]
    exec(compile(code, f"CONTRIBUTING.md:{name}", "exec"), {"__name__": f"contributing_{name}"})
