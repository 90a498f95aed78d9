"""How evaluation reports write a fraction: ``DIGITS`` decimals (4 by default; ``grind eval --digits``).

A table in percent to one decimal made from 4-decimal fractions is rounded twice (0.34348 -> 0.3435 ->
34.4, not 34.3): recipes that summarise ask for more digits."""
from __future__ import annotations

DIGITS = 4


def set_digits(n: int) -> None:
    global DIGITS
    DIGITS = int(n)


def frac(x) -> str:
    """``x`` with :data:`DIGITS` decimals."""
    return f"{x:.{DIGITS}f}"


def signed(x) -> str:
    """A difference, signed, with :data:`DIGITS` decimals."""
    return f"{x:+.{DIGITS}f}"
