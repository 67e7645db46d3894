"""Column domains for any CSV, released with DP (``schema=private``) and paid from the budget.

The generator may only use domains that are public or paid for. :mod:`rdpgan.data.loading`
hands this module the training rows' cells (text) and a :class:`~rdpgan.config.SchemaConfig`;
it returns a :class:`SchemaRelease`: the schema, and the releases that produced it (composed
into the run's ledger by the synthesizer). A declared schema (free) and one read off the rows
(``unsafe_infer``, marked NOT end-to-end private) are built in :mod:`rdpgan.data.loading` and
carried in the same record.

``private`` spends ``epsilon_fraction`` of the budget, split evenly over its queries (every row
touches every column, so the queries compose sequentially):

- a continuous column's bounds are two quantiles, each chosen by the exponential mechanism
  (McSherry & Talwar 2007) from a public grid of round numbers, utility -|#{x <= c} - q n|
  (sensitivity 1), with a prior centred on the column's DP median (a third query). A grid,
  not the intervals between data points, because a grid needs no public outer range: the
  interval version puts most of its mass on huge empty intervals unless the outer range is
  tight, which is exactly what we do not know;
- a categorical column's levels come only from a public candidate list, each kept when its
  Laplace-noised count (one row changes one count by one: L1 sensitivity 1) clears
  ``3 / epsilon``; values outside the kept levels are read as missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.schema import Categorical, Schema
from rdpgan.data.target import (
    class_key,
    one_vs_rest,
    one_vs_rest_classes,
    released_classes_only,
)
from rdpgan.errors import UserInputError
from rdpgan.privacy.ledger import Release, basic_epsilon
from rdpgan.privacy.mechanisms.exponential import exponential_mechanism
from rdpgan.privacy.mechanisms.laplace import laplace_noise
from rdpgan.privacy.mechanisms.stability import stable_keys

# 0 and ±{1, 1.5, 2, 3, 5, 7} × 10^k for k = -3..9: round bounds from probabilities to money.
ROUND_GRID = np.unique(
    np.concatenate(
        [
            [0.0],
            *(
                [s * m * 10.0**k for m in (1, 1.5, 2, 3, 5, 7) for k in range(-3, 10)]
                for s in (-1, 1)
            ),
        ]
    )
)
SIGNED_LOG_GRID = np.sign(ROUND_GRID) * np.log1p(np.abs(ROUND_GRID))


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

    @classmethod
    def cost(cls, releases: list[Release]) -> SchemaRelease:
        """What a schema spent, before there is a schema (to put it on record first)."""
        return cls(Schema([]), releases)

    @property
    def epsilon(self) -> float:
        return basic_epsilon(r.to_dict() for r in self.releases)

    @property
    def delta(self) -> float:
        return sum(r.delta for r in self.releases if r.kind == "approximate")

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
            line += f"; epsilon {self.epsilon:.3g} of {epsilon:g}, delta {self.delta:.2g}"
        return line


def round_quantile_scores(
    values: np.ndarray, q: float, near: float | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """(utility, log prior) of every grid value: what :func:`dp_round_quantile` draws from.

    Utility of a grid value: minus the distance between the number of values at or below it and
    q·n; adding or removing one row moves that by at most max(q, 1 - q) <= 1 (sensitivity 1).
    Every grid value beyond the data's extremes has the same utility, and without a prior the
    many of them would outvote the few near an outer quantile. ``near`` (an already released
    value, e.g. the DP median: post-processing) sets a prior that divides a candidate's weight
    by e for each e-fold of distance from it on a signed-log scale, so ties go to the tightest.
    """
    values = np.sort(values[~np.isnan(values)])
    below = np.searchsorted(values, ROUND_GRID, side="right")
    utilities = -np.abs(below - q * len(values))
    prior = None
    if near is not None:
        centre = np.sign(near) * np.log1p(abs(near))
        prior = -np.abs(SIGNED_LOG_GRID - centre)
    return utilities, prior


def dp_round_quantile(
    values: np.ndarray,
    q: float,
    epsilon: float,
    rng: np.random.Generator,
    near: float | None = None,
) -> float:
    """A grid value near the q-quantile of ``values`` (NaNs ignored), epsilon-DP."""
    utilities, prior = round_quantile_scores(values, q, near)
    return float(ROUND_GRID[exponential_mechanism(utilities, epsilon, 1.0, rng, prior)])


def candidate_counts(series: pd.Series, candidates: list[Any]) -> np.ndarray:
    """How many rows hold each candidate level: one row adds one to one count at most (L1
    sensitivity 1); values that are no candidate are not counted."""
    reader = Categorical(series.name, tuple(candidates), missing=True, unlisted_as_missing=True)
    counts = np.bincount(reader.encode(series), minlength=len(candidates) + 1)
    return counts[: len(candidates)].astype(float)  # the last code is 'missing/other'


def _grid_step(value: float, direction: int) -> float:
    """The grid value ``direction`` steps from ``value`` (a grid value), stopping at the ends."""
    index = int(np.searchsorted(ROUND_GRID, value)) + direction
    return float(ROUND_GRID[min(max(index, 0), len(ROUND_GRID) - 1)])


# A column's value profile: each row lands in exactly one of these cells.
PROFILE_CELLS = ("missing", "text", "zero", "integer", "fraction")
# Decisions read off a column's noisy profile (post-processing of one Laplace histogram).
EMPTY_SHARE = 0.02  # fewer values than this share of the rows: the column is dropped
NUMERIC_SHARE = 0.9  # at least this share of the values parse as numbers: numeric
FRACTION_SHARE = 0.1  # fewer fractions than this share of the numbers: integer
POINT_MASS_SHARE = 0.1  # at least this share of the numbers are 0: 0 gets a code of its own
# Of a column's epsilon, the profile takes this share; the bounds (3 quantiles) or the levels
# take the rest. A target is categorical by definition: it needs no profile.
PROFILE_SHARE = 0.25


@dataclass(frozen=True)
class Budget:
    """What each column's releases may spend: the schema's share split evenly over columns
    (every row touches every column, so the columns compose sequentially)."""

    epsilon: float
    delta: float


def value_profile(series: pd.Series) -> np.ndarray:
    """Rows per :data:`PROFILE_CELLS` cell. Each row counts in exactly one cell, so adding or
    removing one row changes one count by one: L1 sensitivity 1."""
    numbers = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    missing = series.isna().to_numpy()
    number = ~np.isnan(numbers)
    zero = number & (numbers == 0)
    with np.errstate(invalid="ignore"):
        fraction = number & np.isfinite(numbers) & (numbers != np.round(numbers))
    cells = [missing, ~missing & ~number, zero, number & ~zero & ~fraction, fraction]
    return np.array([cell.sum() for cell in cells], dtype=float)


@dataclass(frozen=True)
class Profile:
    """A column's noisy :func:`value_profile` and what it implies."""

    missing: float
    text: float
    zero: float
    integer: float
    fraction: float

    @property
    def numbers(self) -> float:
        return self.zero + self.integer + self.fraction

    @property
    def empty(self) -> bool:
        present = self.numbers + self.text
        return bool(present <= EMPTY_SHARE * max(present + self.missing, 1.0))

    @property
    def kind(self) -> str:
        return (
            "continuous"
            if self.numbers >= NUMERIC_SHARE * (self.numbers + self.text)
            else ("categorical")
        )

    @property
    def is_integer(self) -> bool:
        return bool(self.fraction < FRACTION_SHARE * self.numbers)

    @property
    def zero_mass(self) -> bool:
        return bool(self.zero >= POINT_MASS_SHARE * self.numbers)


def dp_profile(series: pd.Series, epsilon: float, rng: np.random.Generator) -> Profile:
    """:func:`value_profile` with Laplace noise: epsilon-DP."""
    return Profile(*map(float, laplace_noise(value_profile(series), 1.0, epsilon, rng)))


def dp_levels(
    series: pd.Series, config: SchemaConfig, budget: Budget, rng: np.random.Generator
) -> list[Any]:
    """A categorical column's released levels: from its public candidates (Laplace counts over
    a threshold, pure epsilon) or, without candidates, a stability-based histogram of the
    values it holds ((epsilon, delta): the levels need no list). At most ``max_levels`` of
    them, the most frequent by noisy count (post-processing)."""
    name = series.name
    if name in config.candidates:
        candidates = list(config.candidates[name])
        noisy = laplace_noise(candidate_counts(series, candidates), 1.0, budget.epsilon, rng)
        found = {c: n for c, n in zip(candidates, noisy, strict=True) if n >= 3.0 / budget.epsilon}
    else:
        counts = series.dropna().astype(str).value_counts().to_dict()
        found = stable_keys(counts, budget.epsilon, budget.delta, rng)
    frequent = sorted(found, key=lambda level: -found[level])[: config.max_levels]
    return sorted(frequent, key=str)


def dp_bounds(
    values: np.ndarray, quantiles: tuple[float, float], epsilon: float, rng: np.random.Generator
) -> tuple[float, float]:
    """Round bounds around the ``quantiles`` of ``values``, with ``epsilon`` per quantile (three:
    the median, then the two picks near it). One grid step outward (a factor of 2 to 2.5) keeps
    most of the tail beyond the quantiles instead of clipping it (post-processing)."""
    median = dp_round_quantile(values, 0.5, epsilon, rng)
    picks = sorted(dp_round_quantile(values, q, epsilon, rng, median) for q in quantiles)
    return _grid_step(picks[0], -1), _grid_step(picks[1], +1)


def numeric_spec(
    series: pd.Series,
    profile: Profile,
    quantiles: tuple[float, float],
    epsilon: float,
    rng: np.random.Generator,
) -> ColumnSpec:
    """A numeric column's spec: integer-ness and a point mass at 0 from its profile, bounds by
    :func:`dp_bounds` (of the values other than 0 when 0 has a code of its own)."""
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    if profile.zero_mass:
        values = values[values != 0]
    lo, hi = dp_bounds(values, quantiles, epsilon, rng)
    if profile.zero_mass:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    transform = "log1p" if lo >= 0 and hi > 100 * max(lo, 1.0) else "none"
    return ColumnSpec(
        str(series.name),
        "continuous",
        lo,
        hi,
        integer=profile.is_integer,
        transform=transform,
        missing=True,
        point_masses=[0.0] if profile.zero_mass else [],
        unlisted_as_missing=True,
    )


def column_spec(
    series: pd.Series, config: SchemaConfig, budget: Budget, rng: np.random.Generator
) -> ColumnSpec | str:
    """One column's released spec, or why it is dropped (a reason made of released facts).

    Its kind comes from ``schema.types`` (public) or else from its noisy profile; values that
    cannot be read as that kind read as missing (every column may be missing).
    """
    name = str(series.name)
    profile = dp_profile(series, PROFILE_SHARE * budget.epsilon, rng)
    rest = Budget((1.0 - PROFILE_SHARE) * budget.epsilon, budget.delta)
    if profile.empty:
        return "(almost) all missing"
    declared = config.types.get(name, "categorical" if name in config.candidates else None)
    if (declared or profile.kind) == "continuous":
        return numeric_spec(series, profile, _quantiles(config), rest.epsilon / 3.0, rng)
    levels = dp_levels(series, config, rest, rng)
    if len(levels) < 2:
        return "fewer than two levels released"
    return ColumnSpec(name, "categorical", levels=levels, missing=True, unlisted_as_missing=True)


def _quantiles(config: SchemaConfig) -> tuple[float, float]:
    lo_q, hi_q = sorted(config.quantiles)
    if not 0.0 <= lo_q < hi_q <= 1.0:
        raise UserInputError("schema.quantiles must be two numbers in [0, 1]")
    return lo_q, hi_q


def private_target(
    frame: pd.DataFrame,
    dataset: DatasetConfig,
    config: SchemaConfig,
    budget: Budget,
    rng: np.random.Generator,
) -> tuple[pd.DataFrame, list[Any], Any]:
    """(rows, released classes, positive class): the classes are empty when the target was
    collapsed to one-vs-rest around the positive class; the positive class is the released
    spelling of ``dataset.positive_label`` (matched by :func:`class_key`), if given.

    The classes are released like any categorical column's levels. Rows whose class was not
    released (or is missing) are left out, by a rule applied to each row alone; refusing
    instead would tell whether such a row exists.
    """
    target, positive = dataset.target, dataset.positive_label
    classes = dp_levels(frame[target], config, budget, rng)
    shown = ", ".join(repr(str(c)) for c in classes[:5]) or "none"
    if positive is not None:
        matches = [c for c in classes if class_key(c) == class_key(positive)]
        if not matches:
            raise UserInputError(
                f"dataset.positive_label={positive!r} is not among the target's released "
                f"classes ({shown})"
            )
        if len(matches) == len(classes):
            raise UserInputError(
                f"target {target!r} has no released class but {positive!r} ({shown}): "
                "nothing to tell it from"
            )
        if len(classes) > 2 or len(matches) > 1:
            frame = one_vs_rest(frame, target, positive)
            return frame[frame[target].notna()].reset_index(drop=True), [], positive
        positive = matches[0]
    if len(classes) > 2:
        raise UserInputError(
            f"target {target!r} has {len(classes)} released classes ({shown}); set "
            "dataset.positive_label=CLASS to model CLASS vs the rest"
        )
    if len(classes) < 2:
        raise UserInputError(
            f"target {target!r} has {len(classes)} released classes ({shown}): the column is "
            "empty, or too few rows hold a class for it to survive the noise"
        )
    return released_classes_only(frame, target, classes), classes, positive


def _check_private_settings(config: SchemaConfig) -> None:
    """Settings errors, found before any noise is drawn."""
    _quantiles(config)
    for name, candidates in config.candidates.items():
        if len({str(c) for c in candidates}) != len(candidates):
            # Two equal candidates would count the same rows twice (L1 sensitivity 2).
            raise UserInputError(f"schema.candidates.{name} lists a value twice")


def private_schema(
    frame: pd.DataFrame,
    dataset: DatasetConfig,
    config: SchemaConfig,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    pay: Callable[[Release], None] | None = None,
) -> tuple[pd.DataFrame, SchemaRelease]:
    """(rows, schema) with every column's kind, bounds and levels released, and the target's
    classes; (epsilon, delta) in total, split evenly over the columns (basic composition).

    The cost is fixed before any noise is drawn and handed to ``pay`` first (a run writes its
    ledger there): whatever happens after the first draw, a refusal computed from released
    values included, the spending is on record.
    """
    _check_private_settings(config)
    target = dataset.target
    features = [name for name in frame.columns if name != target]
    budget = Budget(epsilon / (len(features) + 1), delta / (len(features) + 1))
    release = Release(
        "schema",
        "approximate",
        epsilon=epsilon,
        delta=delta,
        details={
            "mechanisms": "laplace (value profiles, candidate counts), exponential (quantile "
            "bounds), stability-based histogram (levels without candidates)",
            "columns": len(features) + 1,
            "epsilon_per_column": budget.epsilon,
            "delta_per_column": budget.delta,
        },
    )
    if pay is not None:
        pay(release)
    frame, classes, positive = private_target(frame, dataset, config, budget, rng)
    specs: list[ColumnSpec] = []
    dropped: dict[str, str] = {}
    for name in features:
        spec = column_spec(frame[name], config, budget, rng)
        if isinstance(spec, str):
            dropped[name] = spec
        else:
            specs.append(spec)
    collapsed = not classes
    classes = one_vs_rest_classes(positive) if collapsed else classes
    # The target reads rows outside its classes as missing, so that a run declaring this
    # schema later leaves them out as this one did (rather than refuse, quoting one).
    specs.append(
        ColumnSpec(
            target, "categorical", levels=list(classes), missing=True, unlisted_as_missing=True
        )
    )
    ordered = [s for n in frame.columns for s in specs if s.name == n]
    schema = SchemaRelease(Schema.from_specs(ordered), [release], dropped=dropped)
    schema.one_vs_rest = positive if collapsed else None
    schema.positive = str(positive) if collapsed else positive
    return frame, schema
