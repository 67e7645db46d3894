"""Column domains for any CSV, released with DP (``schema=private``) and paid from the budget.

The generator may only use domains that are public or paid for. :mod:`rdpgan.data.loading`
hands this module the training rows' cells (text) and a :class:`~rdpgan.config.SchemaConfig`;
it returns a :class:`SchemaRelease`: the schema, and the releases that produced it (composed
into the run's ledger by the synthesizer). A declared schema (free) and one read off the rows
(``unsafe_infer``, marked NOT end-to-end private) are built in :mod:`rdpgan.data.loading` and
carried in the same record.

``private`` makes two Gaussian releases with one noise multiplier, calibrated so that both cost
``epsilon_fraction`` of the run's epsilon on their own; the run's accountant composes them with
everything after (so the noise grows with the square root of the columns, not with their
number):

1. **Counts** over every column at once (:mod:`rdpgan.privacy.schema.counts`): per feature
   column its value profile, its values (partition selection, or counts of
   ``schema.candidates``) and the power-of-two bands of its numbers; the target's values and
   missing cells. The threshold's tail is a delta of its own (``delta_fraction`` of delta),
   recorded as an approximate release.
2. **Bounds**, for the columns the counts say are numeric
   (:mod:`rdpgan.privacy.schema.bounds`): a hierarchical histogram of each one's values within
   the bands released in 1, read at the ``quantiles`` of the released density.

Every decision (kinds, levels, bounds, what is dropped) is post-processing of these two
(:mod:`rdpgan.privacy.schema.kinds`; a column's cells are read in
:mod:`rdpgan.privacy.schema.profiles`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.schema import Categorical, Schema
from rdpgan.data.target import one_vs_rest_classes, released_classes_only
from rdpgan.errors import UserInputError
from rdpgan.privacy import accountants
from rdpgan.privacy.ledger import Release
from rdpgan.privacy.mechanisms.partition import gaussian_threshold, tail_cost
from rdpgan.privacy.schema import bounds as schema_bounds
from rdpgan.privacy.schema import counts as schema_counts
from rdpgan.privacy.schema.bounds import band_range, numeric_bounds
from rdpgan.privacy.schema.counts import counts_sensitivity, noisy_counts, selected_columns
from rdpgan.privacy.schema.kinds import (
    code_present,
    column_kind,
    condition_column,
    levels_spec,
    missing_spelling,
    numeric_spec,
    private_target,
    spike,
)

SCHEMA_COUNTS = "schema"
SCHEMA_NEW_VALUES = "schema_new_values"
# The schema's share of epsilon when ``schema.epsilon_fraction`` is not set: what makes the
# counts' noise std COUNT_STD_GOAL rows (partition selection's threshold is then ~105 rows: a
# value held by 5% of a 2,000-row table clears it about half the time, and its column keeps
# an "(other)" level when it does not), within SHARE_RANGE. The noise std grows with the square
# root of the columns, so a wide table takes a larger share: up to half (Ames's 73 columns at
# epsilon 8 lose fewer levels to the threshold at 0.5 than at 0.3 (schema-only TVD on its
# validation rows, results/tuning_schema.csv: 0.045 against 0.074), and its training at
# epsilon 4 costs it less). The rows cannot steer it: they are private, and the schema is the
# run's first release, so no released row count exists yet to choose it from.
COUNT_STD_GOAL = 20.0
SHARE_RANGE = (0.05, 0.5)
# ...but below SMALL_EPSILON at most SMALL_EPSILON_SHARE: there the accountant's delta term
# dominates every release, and the run's later releases need the room (at epsilon 0.5, a
# 73-column table's pair marginals could not be certified after a schema share of 0.4).
SMALL_EPSILON, SMALL_EPSILON_SHARE = 1.0, 0.3


@dataclass
class SchemaRelease:
    """A schema and what it cost: the releases, opt-out notes, and the columns dropped (with
    why, in released facts only)."""

    schema: Schema
    releases: list[Release] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: dict[str, str] = field(default_factory=dict)
    # The class the target was collapsed to one-vs-rest around (None: not collapsed).
    one_vs_rest: Any = None
    # The target class scored as positive, as the schema spells it (None: the user's label).
    positive: Any = None
    # What its releases cost on their own (the run's accountant composes them with the rest).
    epsilon: float = 0.0
    delta: float = 0.0
    # Released by an earlier run and read back from its schema.yaml (nothing is drawn now).
    reused: bool = False
    # The accountant and Rényi order of the ledger it was released under: a run that reuses
    # it composes at that order (fixed before the release), where its accountant is the same.
    accountant: str | None = None
    order: float | None = None
    # The column a run that named no target conditions on
    # (:func:`~rdpgan.privacy.schema.kinds.condition_column`).
    target: str | None = None

    @classmethod
    def cost(cls, releases: list[Release]) -> SchemaRelease:
        """What a schema spent, before there is a schema (to put it on record first)."""
        return cls(Schema([]), releases)

    def summary(self, epsilon: float) -> str:
        """One line for the console; the details go to the run's ``schema.yaml``."""
        columns = self.schema.columns
        categorical = sum(isinstance(c, Categorical) for c in columns)
        line = (
            f"{categorical} categorical, {len(columns) - categorical} numeric, "
            f"{len(self.dropped)} dropped"
        )
        if self.dropped:
            line += f" ({'; '.join(f'{n}: {why}' for n, why in self.dropped.items())})"
        if self.releases:
            line += (
                f"; epsilon {self.epsilon:.3g} of {epsilon:g} on its own, delta {self.delta:.2g}"
            )
        return line


@dataclass(frozen=True)
class SchemaBudget:
    """The run's budget and accountant: the schema spends ``schema.epsilon_fraction`` and
    ``schema.delta_fraction`` of them."""

    epsilon: float
    delta: float
    accountant: str = "rdp"

    @property
    def noise_accountant(self) -> str:
        """The accountant that sets the schema's noise: a run without privacy draws it all
        the same, calibrated by RDP (nothing is recorded)."""
        return self.accountant if self.accountant != "none" else "rdp"


def _quantiles(config: SchemaConfig) -> tuple[float, float] | None:
    """``schema.quantiles``, checked; None when the noise chooses them
    (:func:`~rdpgan.privacy.schema.bounds.tail_share`)."""
    if config.quantiles is None:
        return None
    lo_q, hi_q = sorted(config.quantiles)
    if not 0.0 <= lo_q < hi_q <= 1.0:
        raise UserInputError("schema.quantiles must be two numbers in [0, 1]")
    return lo_q, hi_q


def _check_private_settings(config: SchemaConfig) -> None:
    """Settings errors, found before any noise is drawn."""
    _quantiles(config)
    for name, candidates in config.candidates.items():
        if len({str(c) for c in candidates}) != len(candidates):
            # Two equal candidates would count the same rows twice (L1 sensitivity 2).
            raise UserInputError(f"schema.candidates.{name} lists a value twice")
        # What candidate_counts will build, built now: a list it refuses (empty, or equal by
        # value) is a settings error, found before anything is paid.
        Categorical(name, tuple(candidates), missing=True, unlisted_as_missing=True)
    for name in ("epsilon_fraction", "delta_fraction"):
        value = getattr(config, name)
        if value is not None and not 0.0 < value < 1.0:
            raise UserInputError(f"schema.{name} must be in (0, 1)")


def share_range(epsilon: float) -> tuple[float, float]:
    """The schema's share of ``epsilon`` when it is chosen (public: from epsilon alone)."""
    lowest, highest = SHARE_RANGE
    return lowest, highest if epsilon >= SMALL_EPSILON else min(highest, SMALL_EPSILON_SHARE)


def schema_noise(
    budget: SchemaBudget, config: SchemaConfig, features: int, selected: int, targeted: bool = True
) -> tuple[float, float]:
    """(noise multiplier of both releases, delta of the threshold's tail).

    The two Gaussian releases cost ``epsilon_fraction`` of epsilon on their own (with the
    tail's epsilon), at the delta the accountant is left once the tail has taken
    ``delta_fraction`` (no tail when no column is ``selected`` by partition selection: every
    one has candidates). Without ``epsilon_fraction``, the share is chosen from the number of
    ``features`` (see :data:`COUNT_STD_GOAL`). Without privacy the RDP accountant's calibration
    is used."""
    tail = config.delta_fraction * budget.delta if selected else 0.0
    tail_epsilon = tail_cost(tail)[0]

    def calibrated(share: float) -> float:
        target = share * budget.epsilon - tail_epsilon
        try:
            return accountants.calibrate_noise_multiplier(
                budget.noise_accountant, [], 1.0, 2, target, budget.delta - tail
            )
        except ValueError as exc:
            raise UserInputError(
                f"schema=private: {exc} (raise epsilon or schema.epsilon_fraction)"
            ) from exc

    if config.epsilon_fraction is not None:
        return calibrated(config.epsilon_fraction), tail
    goal = COUNT_STD_GOAL / counts_sensitivity(features, targeted)
    cost = accountants.epsilon(budget.noise_accountant, [(goal, 1.0, 2)], budget.delta - tail)
    share = (cost + tail_epsilon) / budget.epsilon
    lowest, highest = share_range(budget.epsilon)
    if share > highest:
        return calibrated(highest), tail
    if share < lowest:
        try:
            return calibrated(lowest), tail
        except UserInputError:  # too small a share to certify: the goal's own (smaller) cost
            return goal, tail
    return goal, tail


def private_schema(
    frame: pd.DataFrame,
    dataset: DatasetConfig,
    config: SchemaConfig,
    budget: SchemaBudget,
    rng: np.random.Generator,
    pay: Callable[[list[Release]], None] | None = None,
) -> tuple[pd.DataFrame, SchemaRelease]:
    """(rows, schema) with every column's kind, bounds and levels released, and the target's
    classes: the two releases of the module docstring.

    The cost is fixed before any noise is drawn and handed to ``pay`` first (a run writes its
    ledger there): whatever happens after the first draw, a refusal computed from released
    values included, the spending is on record.
    """
    _check_private_settings(config)
    quantiles = _quantiles(config)
    target = dataset.target
    targeted = target is not None
    features = [name for name in frame.columns if name != target]
    selected = selected_columns([*features, *([target] if targeted else [])], config)
    sigma, tail = schema_noise(budget, config, len(features), selected, targeted)
    sensitivity = counts_sensitivity(len(features), targeted)
    std = sigma * sensitivity
    # Release 1's weights, read off their module now (scripts/tuning/tune_schema.py may set them).
    value_weight, target_weight = schema_counts.VALUE_WEIGHT, schema_counts.TARGET_WEIGHT
    unweighed = schema_counts.UNWEIGHED_HISTOGRAMS
    # In rows of a feature's values (a count is weighed by VALUE_WEIGHT before its noise).
    threshold = gaussian_threshold(std, tail, selected, value_weight) if selected else 0.0
    threshold /= value_weight
    releases = [
        Release(
            SCHEMA_COUNTS,
            "gaussian",
            sigma,
            1.0,
            2,
            {
                "mechanisms": "gaussian: value profiles, power-of-two bands, candidate counts "
                f"and partition selection over values, weighed by {value_weight:g} ("
                + (
                    f"the target's by {target_weight:g}; release 1, sensitivity sqrt("
                    f"{unweighed + value_weight**2:g} x features + "
                    f"{target_weight**2:g})"
                    if targeted
                    else "no target; release 1, sensitivity sqrt("
                    f"{unweighed + value_weight**2:g} x features)"
                )
                + "); hierarchical histograms of numeric columns within their bands (release "
                "2, sensitivity sqrt(levels x numeric columns))",
                "sensitivity": sensitivity,
                "columns": len(features) + int(targeted),
                "threshold": threshold,
            },
        ),
    ]
    if selected:
        tail_epsilon, tail_delta = tail_cost(tail)
        releases.append(
            Release(
                SCHEMA_NEW_VALUES,
                "approximate",
                epsilon=tail_epsilon,
                delta=tail_delta,
                details={"keys_per_row": selected},
            )
        )
    if pay is not None:
        pay(releases)
    counts = noisy_counts(frame, features, target, config, std, tail, selected, rng)
    if targeted:
        frame, classes, positive = private_target(frame, dataset, counts, std / target_weight)
    specs: dict[str, ColumnSpec] = {}
    dropped: dict[str, str] = {}
    ranges: dict[str, tuple[float, float]] = {}
    for name in features:
        profile, levels = counts.profiles[name], counts.levels[name]
        declared = config.types.get(name, "categorical" if name in config.candidates else None)
        kind = declared or column_kind(profile, levels, std / value_weight)
        # Zeros of a column of numbers (with a code of their own, 0 is inside anyway).
        numbers = profile.date_format is None and not profile.zero_code
        zeros = profile.zero if numbers else 0.0
        ranged = kind == "continuous" and not profile.empty
        banded = quantiles or (schema_bounds.TAIL_SHARE[0], 1.0 - schema_bounds.TAIL_SHARE[0])
        found = band_range(counts.bands[name], zeros, std, banded) if ranged else None
        if found is not None:
            ranges[name] = found
        else:  # categorical, a code, or numbers without a released range
            if kind == "codes":
                present, noise = code_present(profile, std / value_weight)
            else:
                present = counts.rows - profile.missing
                noise = (math.hypot(counts.rows_std(std), std), std / value_weight)
            spec = levels_spec(name, levels, present, profile.missing, noise, config)
            if isinstance(spec, str):
                dropped[name] = spec if kind != "continuous" else "no numeric range released"
            else:
                specs[name] = spec
    spikes = {
        name: value
        for name in ranges
        if (value := spike(counts.levels[name], counts.profiles[name])) is not None
    }
    bounds = numeric_bounds(frame, ranges, counts.profiles, quantiles, sigma, rng, spikes)
    for name, found in bounds.items():
        profile, levels = counts.profiles[name], counts.levels[name]
        specs[name] = numeric_spec(name, profile, found, missing_spelling(profile, levels), levels)
    if not targeted:
        noise = (counts.rows_std(std), std / value_weight)
        target, classes, positive = condition_column(counts, specs, noise)
        frame = released_classes_only(frame, target, classes)
    collapsed = not classes
    classes = one_vs_rest_classes(positive) if collapsed else classes
    # The target reads rows outside its classes as missing, so that a run declaring this
    # schema later leaves them out as this one did (rather than refuse, quoting one).
    specs[target] = ColumnSpec(
        target, "categorical", levels=list(classes), missing=True, unlisted_as_missing=True
    )
    ordered = [specs[n] for n in frame.columns if n in specs]
    schema = SchemaRelease(Schema.from_specs(ordered), releases, dropped=dropped)
    gaussian = accountants.epsilon(budget.noise_accountant, [(sigma, 1.0, 2)], budget.delta - tail)
    schema.epsilon = gaussian + sum(r.epsilon for r in releases if r.kind == "approximate")
    schema.delta = budget.delta  # on its own: the Gaussian draws at delta - tail, and the tail
    schema.one_vs_rest = positive if collapsed else None
    schema.positive = str(positive) if collapsed else positive
    schema.target = None if targeted else target
    return frame, schema
