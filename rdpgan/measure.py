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
- :func:`marginals`: each feature's code distribution within each class (the 2-way marginals
  with the target, which also give every 1-way marginal), which the generator's marginal loss
  and the sampler's raking (:mod:`rdpgan.postprocess`) match.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.mechanisms.gaussian import noisy_histogram

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


def marginal_counts(
    codes: np.ndarray, labels: np.ndarray, code_sizes: Sequence[int], n_classes: int
) -> list[np.ndarray]:
    """The private query: for each feature column, its [class, code] count table."""
    return [
        np.bincount(labels * size + codes[:, i], minlength=n_classes * size)
        .reshape(n_classes, size)
        .astype(float)
        for i, size in enumerate(code_sizes)
    ]


def marginals(
    codes: np.ndarray,
    labels: np.ndarray,
    code_sizes: Sequence[int],
    n_classes: int,
    ledger: PrivacyLedger,
    fraction: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """Per feature column, [class, code]: the code distribution within each class.

    One row adds one count to one cell of each of the k tables, so the stacked tables move by
    sqrt(k) in L2: the Gaussian mechanism with sigma calibrated so that this release on its
    own costs ``fraction`` of the budget (the ledger composes it with the rest).
    """
    tables = marginal_counts(codes, labels, code_sizes, n_classes)
    if not ledger.private:
        ledger.warn("marginals used exactly, without noise (privacy=none)")
        return [conditional_distributions(t, 0.0) for t in tables]
    sigma = ledger.calibrate(1.0, 1, fraction * ledger.gaussian_budget(), alone=True)
    sensitivity = math.sqrt(len(tables))
    details = {"sensitivity": sensitivity, "epsilon_fraction": fraction, "tables": len(tables)}
    ledger.record(Release("marginals", "gaussian", sigma, 1.0, 1, details))
    flat = np.concatenate([t.ravel() for t in tables]) if tables else np.zeros(0)
    noisy = flat + rng.normal(0.0, sigma * sensitivity, size=flat.shape)
    splits = np.cumsum([t.size for t in tables])[:-1]
    return [
        conditional_distributions(part.reshape(t.shape), sigma * sensitivity)
        for part, t in zip(np.split(noisy, splits), tables, strict=True)
    ]


def conditional_distributions(counts: np.ndarray, noise_std: float) -> np.ndarray:
    """Valid per-class distributions from (noisy) [class, code] counts (post-processing).

    Negative counts are clipped to 0. Each class's distribution is shrunk toward the pooled one
    by max(0, 1 - v / d^2) per cell, where d is its deviation from the pooled distribution and
    v its noise variance (noise_std / class total)^2: a difference well above the noise (what
    tells the classes apart) is kept, one within the noise is dropped, so a rare class at a
    small epsilon falls back to the pooled distribution instead of teaching G noise.
    """
    counts = np.clip(counts, 0.0, None)
    totals = counts.sum(axis=1)
    pooled = counts.sum(axis=0) / max(totals.sum(), 1e-12)
    if totals.sum() <= 0:
        pooled = np.full(counts.shape[1], 1.0 / counts.shape[1])
    within = counts / np.clip(totals, 1e-12, None)[:, None]
    within = np.where(totals[:, None] > 0, within, pooled)
    deviation = within - pooled
    variance = (noise_std / np.clip(totals, 1.0, None))[:, None] ** 2
    shrink = np.clip(1.0 - variance / np.maximum(deviation**2, 1e-12), 0.0, 1.0)
    shrunk = np.clip(pooled + shrink * deviation, 0.0, None)
    return shrunk / shrunk.sum(axis=1, keepdims=True)
