"""How finely the numeric columns are coded: no finer than the per-class marginals' noise allows.

G learns each numeric column's codes (its bins, or one code per integer value) class by class
from the per-class marginals (:func:`rdpgan.measure.marginals`). Where their noise is large
against a code's rows (a small table at a small ε), fine codes hold noise: acs12 at ε = 1
(1,300 rows, noise std 18 per count) coded age and hours a week with 100 codes per class,
and scored 0.32 and 0.17 1-way TVD on them. There, fewer codes per column carry more of the
rows than of the noise (round 45 of results/tuning_fidelity.csv).

Planned from public quantities only (the schema, the budget, the released row count), after
the label counts and before the densities and the marginals are drawn: post-processing of the
label counts' release. The sensitivities of the later releases do not depend on the codes.
"""

from __future__ import annotations

import math

from rdpgan import adaptive, measure
from rdpgan.data.discretize import configured_grid_limit
from rdpgan.data.schema import Continuous, Schema
from rdpgan.fitted import FittedModel

# A numeric column gets at most rows / (RESOLUTION_NOISE × the noise std of a count summed
# over the classes) codes: on average, each code's rows at least this many stds of the noise
# on their count (round 45 of results/tuning_fidelity.csv).
RESOLUTION_NOISE = 1.5
# Halving the bins stops at the pair marginals' bins, which coarsen G's codes (a coarser
# column would leave pair cells that no code fills).
MIN_BINS = measure.PAIR_BINS


def numeric_resolution(
    configured_bins: int, rows: float, classes: int, noise_std: float
) -> tuple[int, int]:
    """(Bins per wide numeric column, most values of an integer column coded one each): the
    configured bins halved (not below :data:`MIN_BINS`) while they exceed the codes the noise
    affords, and integer columns with more values than it affords cut into bins too. Never
    finer than configured."""
    grid_limit = configured_grid_limit(configured_bins)
    if noise_std <= 0:
        return configured_bins, grid_limit
    affordable = rows / (RESOLUTION_NOISE * noise_std * math.sqrt(classes))
    bins = configured_bins
    while bins > affordable and bins // 2 >= MIN_BINS:
        bins //= 2
    return bins, max(bins, min(grid_limit, math.floor(affordable)))


def planned_resolution(model: FittedModel, features: Schema, classes: int) -> tuple[int, int]:
    """:func:`numeric_resolution` at the noise the per-class tables will be released with
    (none without a marginal loss or privacy: the configured resolution)."""
    assert model.ledger is not None
    noise = 0.0
    if model.model_config.marginal_weight > 0 and len(features.columns):
        # The densities are released between this plan and the marginals wherever a numeric
        # column may be cut into bins; their cost does not depend on how many are.
        numeric = any(isinstance(column, Continuous) for column in features.columns)
        epsilon = density_epsilon(model)
        pending = measure.planned_density_release(model.ledger, epsilon) if numeric else []
        planned = adaptive.planned_marginals(model, features, pending)
        noise = measure.largest_noise(planned[:1])  # (the per-class tables come first)
    return numeric_resolution(model.model_config.numeric_bins, model.released_rows, classes, noise)


def density_epsilon(model: FittedModel) -> float:
    """What the numeric densities' release costs on its own: ``privacy.numeric_density_fraction``
    of what the Gaussian releases may spend. The plan above counts it and the fit releases it
    (:func:`rdpgan.fitting._release_densities`), both from here, so the two cannot differ."""
    assert model.ledger is not None
    return model.privacy.numeric_density_fraction * model.ledger.gaussian_budget()
