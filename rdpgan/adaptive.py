"""Pairs measured after training where the generator is wrong (AIM-style, McKenna et al.
2022): candidate pairs not yet released are scored on how far the sampler's output is from
the rows, the worst chosen privately and measured, and sampling rakes toward them.

Their budget (``privacy.adaptive_fraction``) is reserved in the ledger before DP-SGD, which is
calibrated to what is left; they are drawn once per run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rdpgan import measure, sampler
from rdpgan.data.discretize import table_sizes
from rdpgan.data.schema import Schema
from rdpgan.fitted import FittedModel
from rdpgan.privacy.ledger import Release
from rdpgan.settings import budget_shares

# Of privacy.adaptive_fraction, the share for choosing the pairs (the rest measures them): AIM
# spends a tenth to a quarter on selection; a quarter here, as fewer rounds are run.
SELECTION_SHARE = 0.25
# Rows the sampler generates to compare with the private rows when choosing the pairs: their
# counts' sampling error (~1/sqrt(rows) of a cell) is below the released noise. At most
# GENERATED_ROWS, and GENERATED_PER_ROW per released row below that: a smaller table's own
# counts scatter more, and generated counts scaled to its size then err by half its own
# sampling error (Adult's 65,536 for 26k rows: 0.63 of it), at a fraction of the cost
# (cervical's 685 rows: 2,740 rows kept instead of 65,536; a non-private run there spent 2 s
# of its 7 s on them).
GENERATED_ROWS = 65_536
GENERATED_PER_ROW = 4
# At most this many generated rows raked per row kept, for the comparison: the pairs are chosen
# by how wrong the sampler is where it rakes, and a pool of 4 costs a fraction of a larger
# sampling pool (model.sample_pool). Whether choosing at sampling's own pool would choose
# better pairs was not measured; round 28 tuned sampling's pool with the choice at 4.
CHOICE_POOL = 4
# Pairs per column but one: fewer pairs, each measured with less noise.
PAIRS_PER_COLUMN = 0.5


def moves_to_marginals(
    model: FittedModel, features: Schema, pending: Sequence[Release] = ()
) -> bool:
    """Whether ``privacy.adaptive_fraction`` goes to the marginals (of the feature columns
    ``features``) instead, with the ``pending`` releases still to be recorded before them
    (a plan made before the numeric densities counts them too). Where sampling
    would not rake at the configured split, no pair is chosen after training, and on such
    tables (small ones, small epsilons) the marginals carry most of what G learns (round 30
    of results/tuning_adult.csv, 700 rows at epsilon 8: AUROC 0.644 -> 0.697, every TVD
    lower). Only where the larger share makes no released count noisier (it can, where it
    affords more pairs, whose release spreads its noise over more tables) and still
    leaves DP-SGD the share of epsilon the settings leave it (1 less every share), by the
    run's accountant (at a small epsilon the label counts' fixed noise takes much of it).
    Where the larger share makes the marginals precise enough to rake, sampling rakes toward
    them, with no pair chosen after training. Public: planned from the schema, the budget
    and the released row count, before anything is drawn."""
    assert model.ledger is not None
    privacy, ledger, rows = model.privacy, model.ledger, model.released_rows
    noise = measure.largest_noise(_planned(model, features, privacy.marginals_fraction))
    if sampler.pool_for_noise(model.model_config, noise, rows) > 1:
        return False
    if not ledger.private:
        return True  # (exact statistics: the shares buy nothing)
    moved = _planned(model, features, privacy.marginals_fraction + privacy.adaptive_fraction)
    if measure.largest_noise(moved) > noise:
        return False
    return ledger.epsilon_with([*pending, *moved], best_order=True) <= (
        budget_shares(privacy) * ledger.epsilon_target
    )


def marginals_fraction(
    model: FittedModel, features: Schema, pending: Sequence[Release] = ()
) -> float:
    """The share of epsilon the marginals of ``features`` are released with: the configured
    one, and the adaptive pairs' where :func:`moves_to_marginals`."""
    fraction = model.privacy.marginals_fraction
    if moves_to_marginals(model, features, pending):
        return fraction + model.privacy.adaptive_fraction
    return fraction


def planned_marginals(
    model: FittedModel, features: Schema, pending: Sequence[Release] = ()
) -> list[Release]:
    """The releases of the marginals of ``features`` as a fit will record them after the
    ``pending`` ones (public)."""
    return _planned(model, features, marginals_fraction(model, features, pending))


def _planned(model: FittedModel, features: Schema, fraction: float) -> list[Release]:
    """:func:`rdpgan.measure.planned_marginal_releases` at ``fraction``, as a fit releases."""
    assert model.ledger is not None
    return measure.planned_marginal_releases(
        table_sizes(features, measure.PAIR_BINS),
        model.released_rows,
        model.ledger,
        fraction,
        model.privacy.selection_fraction,
        model.privacy.marginals_fraction,
        sampler.TILT_NOISE_LIMIT,
    )


def reserve(model: FittedModel) -> None:
    """Reserve the pairs chosen after training (:func:`plan`) in the ledger, before DP-SGD."""
    assert model.ledger is not None
    rounds, selection, measured = plan(model)
    if rounds:
        measure.reserve_adaptive_pairs(rounds, model.ledger, selection, measured)


def plan(model: FittedModel) -> tuple[int, float, float]:
    """(pairs, epsilon of their choice, epsilon of their tables) chosen after training:
    ``privacy.adaptive_fraction`` of the budget (:data:`SELECTION_SHARE` of it for the
    choice), only where sampling rakes (their one use) and only if their tables would be as
    precise as raking asks. How many is public: the candidates not yet released, at most
    :data:`PAIRS_PER_COLUMN` per column but one. Decided once, before DP-SGD."""
    assert model.ledger is not None and model.transformer is not None
    share = model.privacy.adaptive_fraction * model.ledger.gaussian_budget()
    if model.marginals is None or not model.marginals.pairs or share <= 0:
        return 0, 0.0, 0.0
    noise, rows = model.marginal_noise, model.released_rows
    if sampler.raking_pool(model.model_config, model.marginals, noise, rows) == 1:
        return 0, 0.0, 0.0
    most = math.ceil(PAIRS_PER_COLUMN * (len(model.transformer.code_sizes) - 1))
    rounds = min(most, len(_open_pairs(model)))
    measured = share * (1 - SELECTION_SHARE)
    if rounds and model.ledger.private:
        if not measure.affordable(model.ledger, measured):
            return 0, 0.0, 0.0
        sigma = model.ledger.calibrate(1.0, 1, measured, alone=True)
        if sigma * math.sqrt(rounds) > sampler.RAKING_NOISE_LIMIT * model.released_rows:
            return 0, 0.0, 0.0  # raking toward tables this noisy would fit their noise
    return rounds, share * SELECTION_SHARE, measured


def _open_pairs(model: FittedModel) -> list[tuple[int, int]]:
    """Candidate pairs (public: schema, budget, released row count) not yet released."""
    assert model.marginals is not None and model.ledger is not None
    assert model.transformer is not None
    sizes = table_sizes(model.transformer.features, measure.PAIR_BINS)
    share = model.privacy.adaptive_fraction * (1 - SELECTION_SHARE)
    candidates = measure.pair_candidates(
        sizes, model.released_rows, model.ledger, share * model.ledger.epsilon_target
    )
    return [p for p in candidates if p not in set(model.marginals.pairs)]


def generated_rows(released_rows: int) -> int:
    """Rows generated to compare with a table of ``released_rows`` (public) rows."""
    return min(GENERATED_ROWS, GENERATED_PER_ROW * max(released_rows, 1))


def measure_where_wrong(
    model: FittedModel, features: np.ndarray, noise: np.random.Generator
) -> bool:
    """After training: release the reserved pairs (without privacy: the planned ones),
    chosen where the sampler's output (a post-processing of everything released) is
    furthest from the rows, and add them to the marginals sampling rakes toward. Once per
    run: a resumed run that drew them (or may have) does not draw again. Returns whether
    any were drawn."""
    assert model.ledger is not None and model.transformer is not None
    if model.marginals is None or model.adaptive_drawn:
        return False
    rounds = measure.reserved_rounds(model.ledger) if model.ledger.private else plan(model)[0]
    if not rounds:
        return False
    model.adaptive_drawn = True
    candidates = _open_pairs(model)
    sizes = table_sizes(model.transformer.features, measure.PAIR_BINS)
    maps = model.marginals.maps
    coarse = measure.coarsen(model.transformer.codes(features), maps)
    # (After training, with nothing else running: generated on up to two cores.)
    sampling = model.sampler  # (held: each access freezes the generator anew)
    pool = min(sampling.raking_pool(), CHOICE_POOL)
    rows = generated_rows(model.released_rows)
    generated = sampling.parts(rows, None, model.seed, sampler.spare_workers(), pool)[1]
    coarse_generated = measure.coarsen(generated, maps)
    scale = model.released_rows / len(coarse_generated)
    expected = [scale * c for c in measure.pair_counts(coarse_generated, candidates, sizes)]
    pairs, joint = measure.adaptive_pairs(
        coarse, sizes, candidates, expected, rounds, model.released_rows, model.ledger, noise
    )
    model.marginals.pairs.extend(pairs)
    model.marginals.joint.extend(joint)
    return bool(pairs)
