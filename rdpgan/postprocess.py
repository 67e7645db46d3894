"""Raking: pick sampled rows so that their marginals match the released ones (free).

The generator's rows come close to the released marginals
(:func:`rdpgan.measure.release_marginals`) but not onto them; a GAN's marginals drift by a few
points, which is most of what a person sees when comparing tables. Given a pool of generated
rows, iterative proportional fitting finds weights under which every released table (each
column within each class, each chosen pair) is matched as far as the pool's codes allow, and
systematic resampling then draws the rows to keep with those weights, in code order so that
rounding does not add sampling noise of its own. Only released statistics and generated rows
are used, so this is post-processing: it costs no privacy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rdpgan.data.discretize import cell_index
from rdpgan.measure import Marginals

#: IPF sweeps over the columns; the weights settle within a few dozen on real tables.
RAKING_SWEEPS = 30
#: Share of each target spread evenly over the cells the pool reaches (see raking_weights).
RAKING_FLOOR = 1e-3


def raking_weights(
    codes: np.ndarray, targets: Sequence[np.ndarray], sweeps: int = RAKING_SWEEPS
) -> np.ndarray:
    """Weights (summing to 1) that make the weighted code distribution of each column of
    ``codes`` [rows, columns] equal ``targets[column]``, where the pool's codes allow."""
    weights = np.full(len(codes), 1.0 / max(len(codes), 1))
    for _ in range(sweeps):
        for column, target in enumerate(targets):
            current = np.bincount(codes[:, column], weights=weights, minlength=len(target))
            # Codes the pool never made cannot be reached; the rest share their mass. A floor
            # keeps every reachable cell alive: a cell the (noisy) target empties would
            # otherwise zero its rows for good, and no later column could bring them back.
            reachable = current > 0
            goal = np.where(reachable, target, 0.0)
            if goal.sum() <= 0:
                continue
            goal = (
                1 - RAKING_FLOOR
            ) * goal / goal.sum() + RAKING_FLOOR * reachable / reachable.sum()
            ratio = np.where(reachable, goal / np.where(reachable, current, 1), 0)
            weights = weights * ratio[codes[:, column]]
            weights /= weights.sum()
    return weights


def systematic_resample(weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` row indices drawn with probability ``weights``, with the least variance: row i is
    kept floor(n·w_i) or ceil(n·w_i) times, so the drawn table has the weighted marginals up to
    rounding."""
    positions = (rng.random() + np.arange(n)) / n
    cumulative = np.cumsum(weights)
    cumulative[-1] = 1.0
    return np.searchsorted(cumulative, positions, side="right")


def rake(
    codes: np.ndarray, targets: Sequence[np.ndarray], n: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices of ``n`` rows of the pool ``codes`` whose marginals match ``targets``.

    The pool is sorted by its codes first, so each code of the first column is one contiguous
    run (kept to within one row of its weight), each code of the second nearly so, and so on.
    """
    order = np.lexsort(codes.T[::-1]) if codes.shape[1] else np.arange(len(codes))
    return order[systematic_resample(raking_weights(codes, targets)[order], n, rng)]


def rake_rows(
    codes: np.ndarray,
    labels: np.ndarray,
    released: Marginals,
    label_probs: np.ndarray,
    n: int,
    rng: np.random.Generator,
    only: int | None = None,
) -> np.ndarray:
    """Indices of ``n`` rows of the pool (``codes`` [rows, feature columns], ``labels``), in
    random order, whose marginals match the released ones: each (class, column) table and
    each released pair's joint table; with ``only`` (a pool of one class), that class's
    column distributions."""
    shares = label_probs / label_probs.sum()
    columns, targets = [], []
    for column, table in enumerate(released.by_class):
        if only is None:
            columns.append(cell_index([labels, codes[:, column]], table.shape))
            targets.append((shares[:, None] * table).ravel())
        else:
            columns.append(codes[:, column])
            targets.append(table[only])
    if only is None:
        for (i, j), joint in zip(released.pairs, released.joint, strict=True):
            coarse = [released.maps[i][codes[:, i]], released.maps[j][codes[:, j]]]
            columns.append(cell_index(coarse, joint.shape))
            targets.append(joint.ravel())
        # Last in every sweep: the class shares are the released ones whatever came before.
        columns.append(labels)
        targets.append(shares)
    return rng.permutation(rake(np.stack(columns, axis=1), targets, n, rng))
