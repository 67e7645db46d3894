"""Class profiles: the mean encoded row of each class, released by the Gaussian mechanism.

Why: a classifier trained on synthetic rows needs, above all, the features that tell the
classes apart. On a small table (a few dozen rows of the rare class) DP-SGD on the
discriminator passes that signal on too weakly, even without noise; a direct, paid-for
release of each class's mean row lets the generator match it (``model.moment_weight``).

Privacy: every encoded row has at most ``len(spans)`` squared norm (a one-hot block has norm 1,
a continuous value lies in [-1, 1]), so the stacked per-class sums change by at most
``sqrt(len(spans))`` in L2 when one row is added or removed (the row falls in one class only).
Adding N(0, (sigma * sensitivity)^2) to every sum is the Gaussian mechanism with noise multiplier
sigma: one step at sampling rate 1 in the run's accountant, like the label histogram.
Everything after the noise (division by the released counts, shrinkage, projection onto valid
profiles) is post-processing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rdpgan.transform import Span


def sensitivity(spans: Sequence[Span]) -> float:
    """L2 sensitivity of the per-class sums of encoded rows (add/remove one row)."""
    return math.sqrt(len(spans))


def class_sums(features: np.ndarray, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """[n_classes, width]: the sum of the encoded rows of each class (the private query)."""
    sums = np.zeros((n_classes, features.shape[1]))
    np.add.at(sums, labels, features)
    return sums


def noisy_class_sums(
    features: np.ndarray,
    labels: np.ndarray,
    n_classes: int,
    spans: Sequence[Span],
    noise_multiplier: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The Gaussian mechanism on :func:`class_sums`, noise scaled to :func:`sensitivity`."""
    if noise_multiplier <= 0:
        raise ValueError("noise_multiplier must be positive")
    sums = class_sums(features, labels, n_classes)
    return sums + rng.normal(0.0, noise_multiplier * sensitivity(spans), size=sums.shape)


def profiles(
    sums: np.ndarray, counts: np.ndarray, spans: Sequence[Span], noise_std: float = 0.0
) -> np.ndarray:
    """Valid class profiles from (noisy) class sums and (noisy) class counts.

    Each entry of a class's mean is shrunk toward the mean over all classes by
    max(0, 1 - v / d^2), where d is its deviation from that pooled mean and v its noise variance
    ``(noise_std / count)^2``: a deviation well above the noise (a feature that tells the
    classes apart) is kept, one within the noise is dropped, so a rare class at a small epsilon
    falls back to the pooled profile instead of teaching the generator noise. Then each one-hot
    block is clipped at 0 and renormalised, and each continuous value clipped to [-1, 1].
    """
    counts = np.clip(np.asarray(counts, dtype=float), 1.0, None)
    means = sums / counts[:, None]
    pooled = sums.sum(axis=0) / counts.sum()
    deviation = means - pooled
    variance = (noise_std / counts)[:, None] ** 2
    shrink = np.clip(1.0 - variance / np.maximum(deviation**2, 1e-12), 0.0, 1.0)
    means = pooled + shrink * deviation
    for span in spans:
        part = means[:, span.start : span.end]
        if span.activation == "tanh":
            means[:, span.start] = np.clip(part[:, 0], -1.0, 1.0)
            continue
        part = np.clip(part, 0.0, None)
        empty = part.sum(axis=1, keepdims=True) <= 0  # every level noised below 0: uniform
        part = np.where(empty, 1.0, part)
        means[:, span.start : span.end] = part / part.sum(axis=1, keepdims=True)
    return means
