"""The bounded Laplace mechanism (Holohan, Antonatos, Braghin, Mac Aonghusa 2018).

"The Bounded Laplace Mechanism in Differential Privacy". Clamping Laplace output to a public
range [l, u] piles mass on the bounds; instead the output density is Lap(t, b) *truncated* to
[l, u] and renormalised:

    p(x | t) = exp(-|x - t| / b) / (2 b C_t(b))   for x in [l, u],
    C_t(b) = 1 - (exp(-(t - l) / b) + exp(-(u - t) / b)) / 2   (Lap(t, b)'s mass in [l, u]).

The normaliser depends on the true value t, which leaks: the worst-case (over outputs) privacy
loss between inputs t, t' (both in [l, u], |t - t'| <= Delta) is
|t - t'| / b + ln(C_t'(b) / C_t(b)), so b = Delta / epsilon is not enough in general. The
paper's calibration (its delta = 0 case) takes the smallest b with

    Delta / b + ln DeltaC(b) <= epsilon,   DeltaC(b) = C_{l+Delta}(b) / C_l(b),

and this is exact: ln C_t is concave, and 1/b + d ln C_s / ds > 0 on [l, u], so the worst pair is
t = l, t' = l + Delta with an output at x = l (checked numerically in the tests). In particular
for bounded *local* DP (Delta = u - l) DeltaC = C_u / C_l = 1 and b = Delta / epsilon exactly.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from rdpgan.privacy.mechanisms import _checks


def bounded_laplace_mass(
    t: float | np.ndarray, scale: float, lower: float, upper: float
) -> np.ndarray:
    """C_t(b): the mass of Lap(t, b) inside [l, u] (the truncation's normaliser)."""
    scale = _checks.positive("scale", scale)
    lower, upper = _checks.interval(lower, upper)
    t = np.asarray(t, dtype=float)
    return 1.0 - 0.5 * (np.exp(-(t - lower) / scale) + np.exp(-(upper - t) / scale))


def _effective_sensitivity(sensitivity: float, lower: float, upper: float) -> float:
    # Inputs live in [l, u], so no two of them are further apart than u - l.
    return min(_checks.positive("sensitivity", sensitivity), upper - lower)


def bounded_laplace_epsilon(scale: float, sensitivity: float, lower: float, upper: float) -> float:
    """The exact privacy loss of the bounded Laplace mechanism with scale b.

    Delta / b + ln(C_{l+Delta}(b) / C_l(b)), computed with expm1 so it stays accurate when
    b is much larger than u - l (where every C_t(b) is tiny).
    """
    scale = _checks.positive("scale", scale)
    lower, upper = _checks.interval(lower, upper)
    delta = _effective_sensitivity(sensitivity, lower, upper)
    width = upper - lower
    # 2 C_{l+Delta} = (1 - e^{-Delta/b}) + (1 - e^{-(D-Delta)/b}); 2 C_l = 1 - e^{-D/b}.
    numerator = -math.expm1(-delta / scale) - math.expm1(-(width - delta) / scale)
    denominator = -math.expm1(-width / scale)
    return delta / scale + math.log(numerator / denominator)


def bounded_laplace_scale(sensitivity: float, epsilon: float, lower: float, upper: float) -> float:
    """The smallest scale b with :func:`bounded_laplace_epsilon` <= epsilon (Holohan et al.).

    The loss falls from Delta/b + ln 2 (b -> 0, Delta < u - l) to 0 (b -> inf), and
    ln DeltaC(b) >= 0, so the root lies above Delta / epsilon; it is bracketed by doubling,
    found by Brent's method and nudged up so the condition holds in floating point.
    """
    epsilon = _checks.positive("epsilon", epsilon)
    lower, upper = _checks.interval(lower, upper)
    delta = _effective_sensitivity(sensitivity, lower, upper)

    def excess(scale: float) -> float:
        return bounded_laplace_epsilon(scale, delta, lower, upper) - epsilon

    lo = delta / epsilon
    if excess(lo) <= 0:  # Delta = u - l: the normaliser ratio is exactly 1
        return lo
    hi = 2.0 * lo
    while excess(hi) > 0:
        lo, hi = hi, 2.0 * hi
    scale = brentq(excess, lo, hi, xtol=1e-14 * hi, rtol=1e-14)
    while excess(scale) > 0:
        scale *= 1.0 + 1e-12
    return scale


def bounded_laplace_density(
    x: np.ndarray, t: float, scale: float, lower: float, upper: float
) -> np.ndarray:
    """p(x | t): Lap(t, b) truncated to [l, u] and renormalised (0 outside [l, u])."""
    lower, upper = _checks.interval(lower, upper)
    x = np.asarray(x, dtype=float)
    mass = bounded_laplace_mass(t, scale, lower, upper)
    inside = (x >= lower) & (x <= upper)
    return np.where(inside, np.exp(-np.abs(x - t) / scale) / (2.0 * scale * mass), 0.0)


def bounded_laplace_cdf(
    x: np.ndarray, t: float, scale: float, lower: float, upper: float
) -> np.ndarray:
    """CDF of the bounded Laplace output given input t (for goodness-of-fit tests)."""
    scale = _checks.positive("scale", scale)
    lower, upper = _checks.interval(lower, upper)
    z = (np.clip(np.asarray(x, dtype=float), lower, upper) - t) / scale
    lap_cdf = np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1 - 0.5 * np.exp(-np.maximum(z, 0)))
    below = 0.5 * math.exp((lower - t) / scale)  # Lap(t, b) CDF at l (t >= l)
    return (lap_cdf - below) / bounded_laplace_mass(t, scale, lower, upper)


def bounded_laplace(
    value: float | np.ndarray,
    sensitivity: float,
    epsilon: float,
    lower: float,
    upper: float,
    rng: np.random.Generator,
) -> float | np.ndarray:
    """An epsilon-DP release of ``value`` (each element in [l, u]) that stays in [l, u].

    ``sensitivity`` is how far the value can move between neighbours; for local DP on a value
    known only to lie in [l, u], pass u - l. Sampled by inverse CDF of the truncated Laplace,
    each tail computed from its own side so neither loses precision.
    """
    lower, upper = _checks.interval(lower, upper)
    scale = bounded_laplace_scale(sensitivity, epsilon, lower, upper)
    t = np.asarray(value, dtype=float)
    if np.any(np.isnan(t)) or np.any(t < lower) or np.any(t > upper):
        raise ValueError(f"every value must lie in [lower, upper] = [{lower}, {upper}]")
    v = rng.random(size=t.shape)
    below = 0.5 * np.exp((lower - t) / scale)  # Lap(0, 1) mass below (l - t) / b
    above = 0.5 * np.exp((t - upper) / scale)  # and above (u - t) / b
    mass = 1.0 - below - above
    lower_tail = below + v * mass  # the CDF value of the draw
    upper_tail = above + (1.0 - v) * mass  # one minus it, computed without cancellation
    with np.errstate(divide="ignore"):
        z = np.where(
            lower_tail < 0.5,
            np.log(2.0 * np.maximum(lower_tail, 1e-300)),
            -np.log(2.0 * np.maximum(upper_tail, 1e-300)),
        )
    out = np.clip(t + scale * z, lower, upper)
    return float(out) if out.ndim == 0 else out
