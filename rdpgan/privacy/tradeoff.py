"""The guarantee of a run as a trade-off curve (f-DP, Dong, Roth & Su 2019).

For any membership test on the training rows, type II error beta and type I error alpha satisfy
beta >= f(alpha). An (epsilon, delta)-DP guarantee gives
f(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)); a mechanism that is
(epsilon(delta), delta)-DP for every delta (its privacy profile, which every accountant here
computes) satisfies all of them at once, so its curve is their pointwise maximum. On ROC axes
(false positive rate, true positive rate) the same bound reads TPR <= 1 - f(FPR), which is how
the report draws it against empirical attacks.

mu-GDP has the closed form G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu); for DP-SGD mu comes from
the central limit theorem (Bu et al. 2020), an approximation rather than a bound, and it is
drawn only as such.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import norm

from rdpgan.privacy import accountants
from rdpgan.privacy.ledger import BASIC_KINDS, accountant_delta, basic_epsilon, gaussian_history

# Privacy profile sampled at these deltas: from far below any sensible delta up to 1/2.
PROFILE_DELTAS = np.logspace(-12, np.log10(0.5), 40)


def privacy_profile(ledger: dict[str, Any]) -> list[tuple[float, float]]:
    """(epsilon, delta) pairs the run satisfies, from its own accountant (``privacy.json``).

    Pure and approximate releases add their epsilon at every delta (basic composition), and
    the approximate ones their delta too, so a profile delta at or below theirs is left out. A
    delta the accountant cannot evaluate is left out as well: fewer pairs only loosen the curve.
    """
    history, basic = gaussian_history(ledger), basic_epsilon(ledger["mechanisms"])
    profile = []
    for delta in PROFILE_DELTAS:
        left = accountant_delta(float(delta), ledger["mechanisms"])
        if left <= 0:
            continue
        try:
            eps = accountants.epsilon(ledger["accountant"], history, left, ledger.get("order"))
        except ValueError:  # e.g. PRV's grid outgrows its cap at tiny delta: skip that point
            continue
        profile.append((eps + basic, float(delta)))
    return profile


def tradeoff(alpha: np.ndarray, profile: Sequence[tuple[float, float]]) -> np.ndarray:
    """The lowest type II error any test can reach at type I error ``alpha``."""
    alpha = np.asarray(alpha, dtype=float)
    best = np.zeros_like(alpha)
    for eps, delta in profile:
        if not np.isfinite(eps):
            continue
        bound = np.maximum(1 - delta - np.exp(eps) * alpha, np.exp(-eps) * (1 - delta - alpha))
        best = np.maximum(best, bound)
    return np.clip(best, 0.0, 1.0)


def gdp_tradeoff(alpha: np.ndarray, mu: float) -> np.ndarray:
    """G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)."""
    return norm.cdf(norm.ppf(1.0 - np.asarray(alpha, dtype=float)) - mu)


def clt_mu(ledger: dict[str, Any]) -> float | None:
    """mu of the Gaussian releases by the CLT, or None when pure or approximate releases are
    composed too (they have no finite-mu GDP form that composes this way)."""
    if any(m["kind"] in BASIC_KINDS for m in ledger["mechanisms"]):
        return None
    return accountants.gdp_mu(gaussian_history(ledger))
