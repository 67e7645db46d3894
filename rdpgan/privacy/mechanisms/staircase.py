"""The staircase mechanism (Geng & Viswanath 2016) and its bounded, local-DP variant.

Geng & Viswanath, "The Optimal Noise-Adding Mechanism in Differential Privacy" (IEEE Trans.
Inf. Theory 62(2), 2016) show that among all epsilon-DP noise-adding mechanisms for a query of
sensitivity Delta the optimal noise is a staircase: a symmetric, piecewise-constant density

    f(x) = a(gamma)                  for |x| in [0, gamma Delta)
           e^-eps a(gamma)           for |x| in [gamma Delta, Delta)
           e^(-k eps) f(|x| - k Delta)  for |x| in [k Delta, (k + 1) Delta),
    a(gamma) = (1 - e^-eps) / (2 Delta (gamma + (1 - gamma) e^-eps)),

whose level drops by e^-eps once per Delta, so shifting the input by at most Delta changes the
density by at most e^eps. gamma* = 1 / (1 + e^(eps/2)) minimises E|noise| (other costs, e.g.
E[noise^2], have other optimal gammas). For large eps the staircase's E|noise| is of order
Delta e^(-eps/2) against Laplace's Delta / eps.

**Bounded staircase** (bounded local DP: each input t lies in a public [l, u], so Delta = u - l):
the staircase noise at a reduced eps_hat is truncated to [l - t, u - t] and renormalised, so the
output t + noise is in [l, u]. As for the bounded Laplace mechanism, the normaliser
C(t) = P(l - t <= noise <= u - t) depends on t, and the privacy loss is bounded by eps_hat (the
staircase's own density ratio) plus ln(max_t C(t) / min_t C(t)). With b = e^-eps_hat, only the
first step pair lies inside [-Delta, Delta]; C is concave in t, smallest at t = l or u and
largest at the midpoint, so (in units of a Delta)

    C_min = gamma + (1 - gamma) b,
    C_max = 2 gamma + (1 - 2 gamma) b   if gamma < 1/2,   1   if gamma >= 1/2,

and eps_hat solves eps_hat + ln(C_max / C_min) = eps, a quadratic in b (see
:func:`bounded_staircase_epsilon_hat`). For 0 < gamma < 1 the bound is attained, so eps_hat
is the exact calibration, not just a sufficient one: for gamma < 1/2 by t = l against the
midpoint with outputs just above l; for gamma >= 1/2 (where C is maximal on the whole plateau
t in [l + (1 - gamma) Delta, l + gamma Delta]) by t = u against t' -> l + (1 - gamma) Delta with
outputs just below u. At gamma = 0 or 1 the truncated staircase is flat on [l, u]: the output
is uniform, private but useless.
"""

from __future__ import annotations

import math

import numpy as np

from rdpgan.privacy.mechanisms import _checks


def _gamma(gamma: float) -> float:
    gamma = float(gamma)
    if not 0 <= gamma <= 1:  # also rejects NaN
        raise ValueError(f"gamma must be in [0, 1], got {gamma!r}")
    return gamma


def optimal_staircase_gamma(epsilon: float) -> float:
    """gamma* = 1 / (1 + e^(eps/2)), the gamma minimising E|noise| (Geng & Viswanath 2016)."""
    epsilon = _checks.positive("epsilon", epsilon)
    return 1.0 / (1.0 + math.exp(min(epsilon / 2.0, 700.0)))


def _params(epsilon: float, sensitivity: float, gamma: float) -> tuple[float, float, float]:
    epsilon = _checks.positive("epsilon", epsilon)
    sensitivity = _checks.positive("sensitivity", sensitivity)
    gamma = _gamma(gamma)
    return epsilon, sensitivity, gamma


def _first_step_mass(r: np.ndarray, epsilon: float, sensitivity: float, gamma: float) -> np.ndarray:
    """F0(r) = integral of f over [0, r] for 0 <= r <= Delta (the first step pair)."""
    b = math.exp(-epsilon)
    a = -math.expm1(-epsilon) / (2.0 * sensitivity * (gamma + (1.0 - gamma) * b))
    g = gamma * sensitivity
    return a * np.minimum(r, g) + a * b * np.maximum(r - g, 0.0)


def staircase_density(
    x: np.ndarray, epsilon: float, sensitivity: float, gamma: float
) -> np.ndarray:
    """The staircase noise density f(x) (computed in log space, so far tails underflow to 0)."""
    epsilon, sensitivity, gamma = _params(epsilon, sensitivity, gamma)
    b = math.exp(-epsilon)
    log_a = math.log(-math.expm1(-epsilon)) - math.log(
        2.0 * sensitivity * (gamma + (1.0 - gamma) * b)
    )
    z = np.abs(np.asarray(x, dtype=float))
    k = np.floor(z / sensitivity)
    level = k + (z - k * sensitivity >= gamma * sensitivity)
    return np.exp(log_a - epsilon * level)


def _upper_tail(z: np.ndarray, epsilon: float, sensitivity: float, gamma: float) -> np.ndarray:
    """P(noise > z) for z >= 0: e^(-k eps) (1/2 - F0(z - k Delta)), k = floor(z / Delta)."""
    k = np.floor(z / sensitivity)
    r = np.clip(z - k * sensitivity, 0.0, sensitivity)
    half_minus = 0.5 - _first_step_mass(r, epsilon, sensitivity, gamma)
    return np.exp(-epsilon * k) * np.maximum(half_minus, 0.0)


def staircase_cdf(x: np.ndarray, epsilon: float, sensitivity: float, gamma: float) -> np.ndarray:
    """P(noise <= x) for the staircase density."""
    epsilon, sensitivity, gamma = _params(epsilon, sensitivity, gamma)
    x = np.asarray(x, dtype=float)
    tail = _upper_tail(np.abs(x), epsilon, sensitivity, gamma)
    return np.where(x >= 0, 1.0 - tail, tail)


def _tail_inverse(s: np.ndarray, epsilon: float, sensitivity: float, gamma: float) -> np.ndarray:
    """The z >= 0 with P(noise > z) = s, for s in (0, 1/2]."""
    b = math.exp(-epsilon)
    a = -math.expm1(-epsilon) / (2.0 * sensitivity * (gamma + (1.0 - gamma) * b))
    g = gamma * sensitivity
    s = np.clip(s, np.finfo(float).tiny, 0.5)
    # k = the step with e^(-(k+1) eps)/2 < s <= e^(-k eps)/2; the within-step mass F0 then
    # falls in [0, (1 - b)/2], clipped against rounding at the step edges.
    k = np.maximum(np.floor(-np.log(2.0 * s) / epsilon), 0.0)
    within = np.clip(0.5 - s * np.exp(epsilon * k), 0.0, 0.5 * (1.0 - b))
    r = np.where(within <= a * g, within / a, g + (within - a * g) / (a * b))
    return k * sensitivity + np.clip(r, 0.0, sensitivity)


def staircase_quantile(
    p: np.ndarray, epsilon: float, sensitivity: float, gamma: float
) -> np.ndarray:
    """The inverse of :func:`staircase_cdf` on (0, 1)."""
    epsilon, sensitivity, gamma = _params(epsilon, sensitivity, gamma)
    p = np.asarray(p, dtype=float)
    upper = _tail_inverse(1.0 - p, epsilon, sensitivity, gamma)
    lower = -_tail_inverse(p, epsilon, sensitivity, gamma)
    return np.where(p >= 0.5, upper, lower)


def staircase_noise(
    size: int | tuple[int, ...],
    epsilon: float,
    sensitivity: float,
    gamma: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Staircase noise drawn with Geng & Viswanath's sampling algorithm.

    X = S ((1 - B)(G + gamma U) + B (G + gamma + (1 - gamma) U)) Delta with S a uniform sign,
    G ~ Geometric, P(G = i) = (1 - b) b^i (which step), B ~ Bernoulli(P(B = 1) =
    (1 - gamma) b / (gamma + (1 - gamma) b)) (inner or outer part of the step) and
    U ~ Uniform[0, 1) (where in the part); b = e^-eps.
    """
    epsilon, sensitivity, gamma = _params(epsilon, sensitivity, gamma)
    b = math.exp(-epsilon)
    sign = np.where(rng.random(size) < 0.5, -1.0, 1.0)
    geometric = rng.geometric(-math.expm1(-epsilon), size=size) - 1.0  # support {0, 1, ...}
    outer = rng.random(size) < (1.0 - gamma) * b / (gamma + (1.0 - gamma) * b)
    uniform = rng.random(size)
    magnitude = np.where(
        outer, geometric + gamma + (1.0 - gamma) * uniform, geometric + gamma * uniform
    )
    return sign * magnitude * sensitivity


def staircase_mechanism(
    value: float | np.ndarray,
    sensitivity: float,
    epsilon: float,
    rng: np.random.Generator,
    gamma: float | None = None,
) -> float | np.ndarray:
    """``value`` plus staircase noise: epsilon-DP for a query of (L1) sensitivity ``sensitivity``.

    ``gamma`` defaults to :func:`optimal_staircase_gamma` (the E|noise|-optimal one).
    """
    if gamma is None:
        gamma = optimal_staircase_gamma(epsilon)
    arr = np.asarray(value, dtype=float)
    noisy = arr + staircase_noise(arr.shape, epsilon, sensitivity, gamma, rng)
    return float(noisy) if noisy.ndim == 0 else noisy


# --- bounded staircase (bounded local DP) --------------------------------------------------


def bounded_staircase_epsilon_hat(epsilon: float, gamma: float) -> float:
    """The staircase epsilon that makes the bounded staircase epsilon-LDP (for any l < u).

    Solves eps_hat + ln(C_max / C_min) = eps in b = e^-eps_hat, w = e^-eps:

    * gamma < 1/2:        (1 - gamma) b^2 + (gamma - (1 - 2 gamma) w) b - 2 gamma w = 0,
    * 1/2 <= gamma < 1:   (1 - gamma) b^2 + gamma b - w = 0,
    * gamma = 1:          C_max = C_min, so eps_hat = eps;

    (gamma = 0 is the gamma < 1/2 case with root b = w, i.e. eps_hat = eps.) The positive root
    A b^2 + B b - c w = 0 is taken as b = 2 c w / (B + sqrt(B^2 + 4 A c w)) when B > 0, with
    ln b = ln(2c / (B + ...)) - eps so a huge eps cannot underflow w; it does not depend on l
    and u (the truncation scales with Delta = u - l).
    """
    epsilon = _checks.positive("epsilon", epsilon)
    gamma = _gamma(gamma)
    if gamma in (0.0, 1.0):  # C_max = C_min: the truncated staircase is flat
        return epsilon
    w = math.exp(-epsilon)
    quad = 1.0 - gamma
    if gamma < 0.5:
        lin, coef = gamma - (1.0 - 2.0 * gamma) * w, 2.0 * gamma
    else:
        lin, coef = gamma, 1.0
    disc = math.sqrt(lin * lin + 4.0 * quad * coef * w)
    if lin > 0:
        return epsilon - math.log(2.0 * coef / (lin + disc))
    # B <= 0 only when gamma < 1/2 and w >= gamma / (1 - 2 gamma): w is not small here.
    return -math.log((disc - lin) / (2.0 * quad))


def _bounded_setup(
    epsilon: float, gamma: float, lower: float, upper: float
) -> tuple[float, float, float, float]:
    lower, upper = _checks.interval(lower, upper)
    eps_hat = bounded_staircase_epsilon_hat(epsilon, gamma)
    return eps_hat, float(gamma), lower, upper


def _check_inputs(t: np.ndarray, lower: float, upper: float) -> None:
    if np.any(np.isnan(t)) or np.any(t < lower) or np.any(t > upper):
        raise ValueError(f"every input must lie in [lower, upper] = [{lower}, {upper}]")


def bounded_staircase_density(
    y: np.ndarray, t: float, epsilon: float, gamma: float, lower: float, upper: float
) -> np.ndarray:
    """p(y | t) of the bounded staircase mechanism calibrated to epsilon-LDP on [l, u]."""
    eps_hat, gamma, lower, upper = _bounded_setup(epsilon, gamma, lower, upper)
    t_arr = np.asarray(t, dtype=float)
    _check_inputs(t_arr, lower, upper)
    width = upper - lower
    y = np.asarray(y, dtype=float)
    mass = staircase_cdf(upper - t_arr, eps_hat, width, gamma) - staircase_cdf(
        lower - t_arr, eps_hat, width, gamma
    )
    inside = (y >= lower) & (y <= upper)
    return np.where(inside, staircase_density(y - t_arr, eps_hat, width, gamma) / mass, 0.0)


def bounded_staircase_cdf(
    y: np.ndarray, t: float, epsilon: float, gamma: float, lower: float, upper: float
) -> np.ndarray:
    """P(output <= y | t) of the bounded staircase mechanism (for goodness-of-fit tests)."""
    eps_hat, gamma, lower, upper = _bounded_setup(epsilon, gamma, lower, upper)
    _check_inputs(np.asarray(t, dtype=float), lower, upper)
    width = upper - lower
    below = staircase_cdf(lower - t, eps_hat, width, gamma)
    mass = staircase_cdf(upper - t, eps_hat, width, gamma) - below
    y = np.clip(np.asarray(y, dtype=float), lower, upper)
    return (staircase_cdf(y - t, eps_hat, width, gamma) - below) / mass


def bounded_staircase(
    value: float | np.ndarray,
    epsilon: float,
    gamma: float,
    lower: float,
    upper: float,
    rng: np.random.Generator,
) -> float | np.ndarray:
    """An epsilon-LDP release of each ``value`` in [l, u], itself in [l, u].

    Inverse-CDF sampling of the staircase (at eps_hat, Delta = u - l) truncated to
    [l - t, u - t]; the lower and upper tails are each computed from their own side so neither
    cancels. Vectorised over ``value``.
    """
    eps_hat, gamma, lower, upper = _bounded_setup(epsilon, gamma, lower, upper)
    t = np.asarray(value, dtype=float)
    _check_inputs(t, lower, upper)
    width = upper - lower
    below = _upper_tail(t - lower, eps_hat, width, gamma)  # P(noise < l - t)
    above = _upper_tail(upper - t, eps_hat, width, gamma)  # P(noise > u - t)
    mass = 1.0 - below - above
    v = rng.random(size=t.shape)
    lower_tail = below + v * mass
    upper_tail = above + (1.0 - v) * mass
    noise = np.where(
        lower_tail < 0.5,
        -_tail_inverse(lower_tail, eps_hat, width, gamma),
        _tail_inverse(upper_tail, eps_hat, width, gamma),
    )
    out = np.clip(t + noise, lower, upper)
    return float(out) if out.ndim == 0 else out
