"""A hierarchical histogram (a binary tree of counts over equal cells of the unit interval).

The query behind the numeric densities (:mod:`rdpgan.measure`) and the private schema's bounds
(:mod:`rdpgan.privacy.private_schema`): every level of the tree is one histogram, and one row
adds one count to one cell of each, so ``levels`` levels move by sqrt(levels) in L2 per column.
The noisy levels are turned into one distribution top down (:func:`tree_density`), so the noise
of the many fine cells does not add up along the range, as it would in one flat histogram.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# Levels of the hierarchical histogram of a wide numeric column: 2, 4, ..., 1,024 cells of its
# public unit interval (a cell is 1/1,024 of the range in the column's public transform).
DENSITY_LEVELS = 10
# A cell's count is split between its two halves by their noisy counts only where it is at
# least this many noise stds; below, evenly (the noise would decide the split).
DENSITY_SPLIT_NOISE = 3.0
# Above that floor, the densities keep 1 - DENSITY_SPLIT_SHRINK · var(d) / d² (at least 0) of
# a split's move from even, d the halves' noisy difference as released, before clipping (var(d)
# = 2 σ²): a split within the noise stays near even, a clear one is kept (round 44 of
# results/tuning_fidelity.csv).
DENSITY_SPLIT_SHRINK = 2.0


def level_counts(positions: np.ndarray, levels: int = DENSITY_LEVELS) -> list[np.ndarray]:
    """The private query of one column: for each level l = 1..``levels``, the counts of its
    values (positions in the unit interval [-1, 1]) in 2**l equal cells. One row adds one
    count to one cell of each level."""
    positions = np.asarray(positions, dtype=float)
    assert np.isfinite(positions).all(), "missing values have no position"
    unit = (np.clip(positions, -1.0, 1.0) + 1.0) / 2.0
    return [
        np.bincount(
            np.minimum((unit * 2**level).astype(np.int64), 2**level - 1), minlength=2**level
        ).astype(float)
        for level in range(1, levels + 1)
    ]


def tree_density(levels: Sequence[np.ndarray], noise_std: float) -> np.ndarray:
    """The finest level's distribution from noisy counts of every level (post-processing):
    top down, each cell's estimate is split between its halves in the ratio of their clipped
    noisy counts, moved toward even as far as that ratio lies within the noise
    (``DENSITY_SPLIT_SHRINK``), or evenly where the cell holds fewer than
    ``DENSITY_SPLIT_NOISE`` noise stds (PrivTree's rule: a split below the noise would follow
    the noise). Coarse levels fix where the mass is, so the noise of the 1,024 fine cells does
    not add up along the range."""
    return tree_split(levels, noise_std, shrink=True)[0]


def tree_split(
    levels: Sequence[np.ndarray], noise_std: float, shrink: bool = False, own: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(The finest level's distribution, and for each finest cell the level whose cell its
    mass was spread evenly from: ``len(levels)`` where every split down to it followed
    counts). A reader that must not place a bound by the noise needs to know which mass lies
    anywhere in a coarse cell. With ``shrink``, :func:`tree_density`'s; without (the private
    schema's bounds), a split above the floor follows the noisy ratio as it is. With ``own``,
    a cell is split only where its own noisy count clears the floor too, not only the mass
    handed down to it: of two halves near the floor, the one the noise pushes under it would
    otherwise hand all its mass to the other, level after level, into one fine cell."""
    estimate = np.array([max(float(levels[0].sum()), 0.0)])
    spread_from = np.array([len(levels)])
    parents = estimate
    for depth, noisy in enumerate(levels):
        pairs = np.asarray(noisy, dtype=float).reshape(-1, 2)
        halves = np.clip(pairs, 0.0, None)
        sums = halves.sum(axis=1, keepdims=True)
        split = np.where(sums > 0, halves / np.where(sums > 0, sums, 1.0), 0.5)
        if shrink:
            squared = (pairs[:, 0] - pairs[:, 1]) ** 2
            # Equal halves split evenly whatever is kept (no division by 0 there); a difference
            # far below the noise overflows the ratio to inf, which keeps nothing.
            with np.errstate(over="ignore"):
                ratio = np.divide(
                    DENSITY_SPLIT_SHRINK * 2.0 * noise_std**2,
                    squared,
                    out=np.zeros_like(squared),
                    where=squared > 0,
                )
            split = 0.5 + np.clip(1.0 - ratio, 0.0, 1.0)[:, None] * (split - 0.5)
        held = np.minimum(estimate, parents) if own else estimate
        even = (held < DENSITY_SPLIT_NOISE * noise_std) | (sums[:, 0] <= 0)
        parents = np.asarray(noisy, dtype=float)
        split[even] = 0.5
        spread_from = np.repeat(np.where(even, np.minimum(spread_from, depth), spread_from), 2)
        estimate = (estimate[:, None] * split).ravel()
    total = estimate.sum()
    if total <= 0:
        return np.full(len(estimate), 1.0 / len(estimate)), np.zeros(len(estimate), dtype=int)
    # A cell split evenly for want of counts in its halves may still have been split by counts
    # further down (a finer level's cell above the floor): spread only where it stayed even.
    for depth in range(len(levels)):
        blocks = estimate.reshape(-1, 2 ** (len(levels) - depth))
        marked = (spread_from == depth).reshape(blocks.shape)
        uneven = marked.all(axis=1) & ~np.isclose(blocks.min(axis=1), blocks.max(axis=1))
        spread_from[np.repeat(uneven, blocks.shape[1])] = depth + 1
    return estimate / total, spread_from
