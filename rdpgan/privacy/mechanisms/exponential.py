"""The exponential mechanism (McSherry & Talwar 2007) and a DP quantile built on it (Smith 2011).

The exponential mechanism picks candidate r with probability proportional to
exp(epsilon u(D, r) / (2 Delta_u)); when every utility moves by at most Delta_u between
neighbouring datasets, both the numerator and the normaliser move by at most e^(epsilon/2), so
the choice is epsilon-DP. Probabilities are formed in log space (log-sum-exp), so utilities of
any magnitude, and candidates with zero base measure, are handled without overflow.

:func:`dp_quantile` is the continuous version of Smith 2011 ("Privacy-preserving statistical
estimation with optimal convergence rates", STOC), as used e.g. to release a column's bounds:
the output density at y is proportional to exp(-epsilon |rank(y) - q n| / 2) on public bounds
[lo, hi], where rank(y) is the number of (clipped) values below y. Adding or removing one value
moves rank(y) by at most 1 and q n by q, so |rank(y) - q n| has sensitivity max(q, 1 - q) <= 1
and the release is epsilon-DP. Sampling it exactly: the density is constant between consecutive
order statistics, so pick such an interval with probability proportional to
length * exp(epsilon u / 2), then a uniform point inside it.
"""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from rdpgan.privacy.mechanisms import _checks


def exponential_mechanism_probabilities(
    utilities: np.ndarray,
    epsilon: float,
    sensitivity: float,
    log_base_measure: np.ndarray | None = None,
) -> np.ndarray:
    """P(candidate i) proportional to base_i exp(epsilon u_i / (2 sensitivity)).

    ``log_base_measure`` (default 0, i.e. uniform) must not depend on the data unless its
    change between neighbours is accounted for by the caller; -inf excludes a candidate.
    """
    epsilon = _checks.positive("epsilon", epsilon)
    sensitivity = _checks.positive("sensitivity", sensitivity)
    utilities = np.asarray(utilities, dtype=float)
    if utilities.ndim != 1 or utilities.size == 0:
        raise ValueError("utilities must be a non-empty 1-D array")
    if not np.all(np.isfinite(utilities)):
        raise ValueError("utilities must be finite")
    logits = epsilon * utilities / (2.0 * sensitivity)
    if log_base_measure is not None:
        log_base_measure = np.asarray(log_base_measure, dtype=float)
        if log_base_measure.shape != utilities.shape:
            raise ValueError("log_base_measure must have the same shape as utilities")
        if np.any(np.isnan(log_base_measure)) or np.any(log_base_measure == np.inf):
            raise ValueError("log_base_measure must be finite or -inf")
        logits = logits + log_base_measure
    total = logsumexp(logits)
    if not np.isfinite(total):
        raise ValueError("every candidate has zero base measure")
    return np.exp(logits - total)


def exponential_mechanism(
    utilities: np.ndarray,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    log_base_measure: np.ndarray | None = None,
) -> int:
    """Index of the chosen candidate (see :func:`exponential_mechanism_probabilities`)."""
    probs = exponential_mechanism_probabilities(utilities, epsilon, sensitivity, log_base_measure)
    return _sample_index(probs, rng)


def _sample_index(probs: np.ndarray, rng: np.random.Generator) -> int:
    # Inverse CDF on the cumulative probabilities; searchsorted 'right' never picks a
    # zero-probability candidate (its cumulative value equals its predecessor's).
    cumulative = np.cumsum(probs)
    index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    if index >= probs.size:  # u * total rounded up to total: take the last possible candidate
        index = int(np.flatnonzero(probs)[-1])
    return index


def quantile_intervals(
    values: np.ndarray, q: float, lo: float, hi: float, epsilon: float
) -> tuple[np.ndarray, np.ndarray]:
    """The candidate intervals of :func:`dp_quantile` and their selection probabilities.

    Returns ``(edges, probs)``: interval i is [edges[i], edges[i + 1]] and contains the points
    with exactly i clipped values below them; probs[i] is proportional to
    (edges[i + 1] - edges[i]) exp(-epsilon |i - q n| / 2). Ties give zero-length intervals,
    which get probability 0.
    """
    q = float(q)
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in [0, 1], got {q!r}")
    lo, hi = _checks.interval(lo, hi, names=("lo", "hi"))
    epsilon = _checks.positive("epsilon", epsilon)
    values = np.asarray(values, dtype=float).ravel()
    if np.any(np.isnan(values)):
        raise ValueError("values must not contain NaN")
    clipped = np.sort(np.clip(values, lo, hi))
    edges = np.concatenate(([lo], clipped, [hi]))
    n = clipped.size
    utilities = -np.abs(np.arange(n + 1) - q * n)
    with np.errstate(divide="ignore"):
        log_lengths = np.log(np.diff(edges))
    probs = exponential_mechanism_probabilities(utilities, epsilon, 1.0, log_lengths)
    return edges, probs


def dp_quantile(
    values: np.ndarray, q: float, lo: float, hi: float, epsilon: float, rng: np.random.Generator
) -> float:
    """An epsilon-DP estimate of the q-quantile of ``values`` within public bounds [lo, hi].

    Values outside [lo, hi] are clipped (the bounds must not come from the data); any n >= 0
    works (n = 0 gives a uniform draw on [lo, hi]). The result always lies in [lo, hi].
    A tie is a zero-length interval, so mass cannot concentrate on it: with heavy ties the
    output spreads over the gaps around the tied value (e.g. all values equal and q = 1/2 gives
    a uniform draw on [lo, hi]); that is the price of a continuous output, not a bug.
    """
    edges, probs = quantile_intervals(values, q, lo, hi, epsilon)
    index = _sample_index(probs, rng)
    left, right = edges[index], edges[index + 1]
    return float(min(max(left + rng.random() * (right - left), lo), hi))
