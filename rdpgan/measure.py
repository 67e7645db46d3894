"""Measurements: private rows in, released (noisy) statistics out, each one in the ledger.

With DP-SGD (:mod:`rdpgan.privacy.dp_sgd`) and the private schema
(:mod:`rdpgan.privacy.private_schema`), the only place where private rows reach what the
generator learns from. Each function
records its release (mechanism, noise, declared sensitivity) in the run's ledger *before* it
draws the noise from the run's secret randomness, and returns only the noisy statistic or a
post-processing of it; ``tests/privacy/test_neighbouring.py`` checks each declared sensitivity
on neighbouring tables through these same functions.

- :func:`label_counts`: the label histogram (L2 sensitivity 1), which the generator samples its
  labels from; its noisy total stands in for the row count wherever one is needed.
- :func:`class_profiles`: each class's mean encoded row (:mod:`rdpgan.privacy.class_means`),
  which the generator's profile loss matches.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rdpgan.privacy import class_means
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.mechanisms.gaussian import noisy_histogram
from rdpgan.transform import Span

# One row changes one cell of the label histogram by one.
LABEL_COUNTS_SENSITIVITY = 1.0


def label_counts(
    labels: np.ndarray,
    n_classes: int,
    ledger: PrivacyLedger,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The label histogram plus N(0, sigma^2) per class (exact under ``privacy=none``)."""
    counts = np.bincount(labels, minlength=n_classes).astype(float)
    if not ledger.private:
        ledger.warn("label counts used exactly, without noise (privacy=none)")
        return counts
    details = {"sensitivity": LABEL_COUNTS_SENSITIVITY}
    ledger.record(Release("label_counts", "gaussian", noise_multiplier, 1.0, 1, details))
    return noisy_histogram(counts, noise_multiplier * LABEL_COUNTS_SENSITIVITY, rng)


def class_profiles(
    features: np.ndarray,
    labels: np.ndarray,
    released_counts: np.ndarray,
    spans: Sequence[Span],
    ledger: PrivacyLedger,
    fraction: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Each class's mean encoded row: noisy sums over the released (noisy) counts.

    sigma is calibrated so that this release on its own costs ``fraction`` of the budget; the
    ledger composes it with the rest, and DP-SGD is then calibrated to what is left.
    """
    n_classes = len(released_counts)
    if not ledger.private:
        ledger.warn("class profiles used exactly, without noise (privacy=none)")
        sums = class_means.class_sums(features, labels, n_classes)
        return class_means.profiles(sums, released_counts, spans)
    sigma = ledger.calibrate(1.0, 1, fraction * ledger.gaussian_budget(), alone=True)
    sensitivity = class_means.sensitivity(spans)
    details = {"sensitivity": sensitivity, "epsilon_fraction": fraction}
    ledger.record(Release("class_means", "gaussian", sigma, 1.0, 1, details))
    sums = class_means.noisy_class_sums(features, labels, n_classes, spans, sigma, rng)
    return class_means.profiles(sums, released_counts, spans, sigma * sensitivity)
