"""How evaluation reports write a fraction: ``DIGITS`` decimals (4 by default; ``grind eval --digits``),
and when a score is "within a point" of a baseline's (:func:`near`, every report's ``# note:`` lines).

A table in percent to one decimal made from 4-decimal fractions is rounded twice (0.34348 -> 0.3435 ->
34.4, not 34.3): recipes that summarise ask for more digits."""
from __future__ import annotations

import math

DIGITS = 4
#: A score within this of a baseline's (1 point) gets a ``# note:`` line in every evaluation report.
NEAR = 0.01


def near(x, y, within: float = NEAR) -> bool:
    """|x - y| <= ``within`` (1e-12 of slack for decimal inputs); False when either is nan."""
    return not (math.isnan(x) or math.isnan(y)) and abs(x - y) <= within + 1e-12


def set_digits(n: int) -> None:
    global DIGITS
    DIGITS = int(n)


def frac(x) -> str:
    """``x`` with :data:`DIGITS` decimals."""
    return f"{x:.{DIGITS}f}"


def signed(x) -> str:
    """A difference, signed, with :data:`DIGITS` decimals."""
    return f"{x:+.{DIGITS}f}"
