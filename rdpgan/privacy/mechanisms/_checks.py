"""Parameter checks shared by the mechanisms: fail loudly before any noise is drawn.

A mechanism run with epsilon <= 0, a NaN scale or an empty output range would silently release
something that is not private (or not defined), so every public function validates first.
"""

from __future__ import annotations

import math


def positive(name: str, value: float) -> float:
    """``value`` as a float, or ValueError unless it is finite and > 0."""
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def probability(name: str, value: float) -> float:
    """``value`` as a float, or ValueError unless 0 < value < 1."""
    value = float(value)
    if not 0 < value < 1:  # also rejects NaN
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return value


def interval(
    lower: float, upper: float, names: tuple[str, str] = ("lower", "upper")
) -> tuple[float, float]:
    """``(lower, upper)`` as floats, or ValueError unless both are finite and lower < upper."""
    lower, upper = float(lower), float(upper)
    if not (math.isfinite(lower) and math.isfinite(upper)):
        raise ValueError(f"{names[0]} and {names[1]} must be finite, got {lower!r}, {upper!r}")
    if lower >= upper:
        raise ValueError(f"need {names[0]} < {names[1]}, got {lower!r} >= {upper!r}")
    return lower, upper
