"""Column domains for any CSV: declared (free), released with DP (paid), or read off (unsafe).

The generator may only use domains that are public or paid for. This module turns a raw table
and a :class:`~rdpgan.config.SchemaConfig` into a :class:`SchemaRelease`: the schema, the pure
epsilon-DP releases that produced it (composed into the run's ledger by the synthesizer), and
the notes that mark a run NOT end-to-end private when the user opted out.

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
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from pandas.api.types import is_bool_dtype, is_integer_dtype, is_numeric_dtype

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.datasets import check_target, read_frame, split
from rdpgan.data.schema import Categorical, Schema
from rdpgan.errors import UserInputError
from rdpgan.privacy.ledger import Release, pure_epsilon
from rdpgan.privacy.mechanisms.exponential import exponential_mechanism
from rdpgan.privacy.mechanisms.laplace import laplace_noise

SOURCES = ("declared", "private", "unsafe_infer")
KINDS = ("continuous", "categorical")
UNSAFE_NOTE = (
    "NOT END-TO-END PRIVATE: schema=unsafe_infer read the bounds and levels of every column "
    "off the private rows (min/max and distinct values leak outliers and rare categories)"
)
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
    """A schema and what it cost: pure-DP releases, opt-out notes, and what was dropped."""

    schema: Schema
    releases: list[Release] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    # The class the target was collapsed to one-vs-rest around (None: not collapsed).
    one_vs_rest: Any = None

    @property
    def epsilon(self) -> float:
        return pure_epsilon(r.to_dict() for r in self.releases)


def one_vs_rest(frame: pd.DataFrame, target: str, positive: Any) -> pd.DataFrame:
    """The target as two classes: ``positive`` and ``not <positive>`` (a public relabelling)."""
    labels = frame[target]
    try:  # by value for numbers (1 = 1.0), as text otherwise
        matches = pd.to_numeric(labels, errors="coerce") == float(positive)
    except (TypeError, ValueError):
        matches = labels.astype(str) == str(positive)
    out = frame.copy()
    out[target] = np.where(matches, str(positive), f"not {positive}")
    out.loc[labels.isna(), target] = np.nan
    return out


def _check_types(frame: pd.DataFrame, config: SchemaConfig) -> None:
    for name, kind in config.types.items():
        if name not in frame.columns:
            raise UserInputError(f"schema.types names {name!r}, which is not a column")
        if kind not in KINDS:
            raise UserInputError(f"schema.types.{name} must be continuous or categorical")


def column_kinds(frame: pd.DataFrame, config: SchemaConfig, target: str) -> dict[str, str]:
    """Continuous for numeric dtypes, categorical otherwise; ``config.types`` overrides."""
    _check_types(frame, config)
    kinds = {}
    for name in frame.columns:
        series = frame[name]
        numeric = is_numeric_dtype(series) and not is_bool_dtype(series)
        kinds[name] = config.types.get(name, "continuous" if numeric else "categorical")
    kinds[target] = "categorical"
    return kinds


def declared_schema(dataset: DatasetConfig, config: SchemaConfig) -> Schema:
    """The dataset's declared columns, or the column list in ``config.file``."""
    if config.file is None:
        if not dataset.columns:
            raise UserInputError(
                f"dataset {dataset.name!r} declares no schema columns; give schema.file=FILE, "
                "or use schema=private (paid from epsilon) or schema=unsafe_infer"
            )
        return Schema.from_specs(dataset.columns)
    path = Path(config.file)
    if not path.is_file():
        raise UserInputError(f"schema file {path} not found")
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserInputError(f"schema file {path} is not valid YAML") from exc
    specs = loaded.get("columns") if isinstance(loaded, dict) else loaded
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise UserInputError(f"schema file {path} must hold a list of column specs")
    try:
        return Schema.from_specs(specs)
    except TypeError as exc:
        raise UserInputError(f"schema file {path}: {exc}") from exc


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


def _private_columns(
    frame: pd.DataFrame, config: SchemaConfig, target: str
) -> tuple[list[str], list[str], list[str]]:
    """(continuous columns, categorical columns, messages), decided by the configuration alone.

    Under ``private`` a column's kind must not depend on the rows (one stray text value would
    turn a numeric dtype into text and change the schema): a column is categorical when it has
    candidates (or ``schema.types`` says so and gives candidates), continuous otherwise, its
    non-numeric values then read as missing.
    """
    _check_types(frame, config)
    continuous, categorical, messages = [], [], []
    for name in frame.columns:
        if name == target:
            continue
        kind = config.types.get(name, "categorical" if name in config.candidates else None)
        if kind == "categorical":
            if name not in config.candidates:
                raise UserInputError(
                    f"schema.types.{name}=categorical needs schema.candidates.{name}=[...] "
                    "under schema=private"
                )
            categorical.append(name)
        else:
            continuous.append(name)
            if kind is None:
                messages.append(
                    f"column {name!r} is treated as continuous (no schema.candidates.{name}); "
                    "text values read as missing: give candidates or schema.drop it"
                )
    return continuous, categorical, messages


def private_schema(
    frame: pd.DataFrame,
    config: SchemaConfig,
    target: str,
    target_levels: list[Any],
    epsilon: float,
    rng: np.random.Generator,
) -> SchemaRelease:
    """Bounds and levels released with ``epsilon`` in total (pure DP, basic composition)."""
    continuous, categorical, messages = _private_columns(frame, config, target)
    lo_q, hi_q = sorted(config.quantiles)
    if not 0.0 <= lo_q < hi_q <= 1.0:
        raise UserInputError("schema.quantiles must be two numbers in [0, 1]")
    queries = 3 * len(continuous) + len(categorical)  # median, lower, upper; one histogram
    if queries == 0:
        raise UserInputError("schema=private has no column it can release")
    per_query = epsilon / queries
    specs: list[ColumnSpec] = []
    for name in continuous:
        values = pd.to_numeric(frame[name], errors="coerce").to_numpy(dtype=float)
        # Post-processing: one grid step outward (a factor of 2 to 2.5) keeps most of the tail
        # beyond the quantiles instead of clipping it.
        median = dp_round_quantile(values, 0.5, per_query, rng)
        picks = sorted(dp_round_quantile(values, q, per_query, rng, median) for q in (lo_q, hi_q))
        lo, hi = _grid_step(picks[0], -1), _grid_step(picks[1], +1)
        transform = "log1p" if lo >= 0 and hi > 100 * max(lo, 1.0) else "none"
        specs.append(
            ColumnSpec(
                name,
                "continuous",
                lo,
                hi,
                transform=transform,
                missing=True,
            )
        )
    threshold = 3.0 / per_query
    for name in categorical:
        candidates = list(config.candidates[name])
        if len({str(c) for c in candidates}) != len(candidates):
            # Two equal candidates would count the same rows twice (L1 sensitivity 2).
            raise UserInputError(f"schema.candidates.{name} lists a value twice")
        noisy = laplace_noise(candidate_counts(frame[name], candidates), 1.0, per_query, rng)
        kept = [c for c, count in zip(candidates, noisy, strict=True) if count >= threshold]
        if len(kept) < 2:
            messages.append(f"dropped column {name!r}: fewer than two levels survived the noise")
            continue
        specs.append(
            ColumnSpec(name, "categorical", levels=kept, missing=True, unlisted_as_missing=True)
        )
    specs.append(ColumnSpec(target, "categorical", levels=list(target_levels)))
    releases = [
        Release(
            "schema",
            "pure",
            epsilon=epsilon,
            details={
                "mechanisms": "exponential (quantile bounds), laplace (candidate counts)",
                "queries": queries,
                "epsilon_per_query": per_query,
            },
        )
    ]
    ordered = [s for n in frame.columns for s in specs if s.name == n]
    return SchemaRelease(Schema.from_specs(ordered), releases, [], messages)


def inferred_schema(
    frame: pd.DataFrame, config: SchemaConfig, target: str, target_levels: list[Any]
) -> SchemaRelease:
    """Bounds and levels read off the data: NOT private, and the release says so."""
    kinds = column_kinds(frame, config, target)
    specs, messages = [], []
    for name in frame.columns:
        series = frame[name]
        missing = bool(series.isna().any())
        if name == target:
            specs.append(ColumnSpec(name, "categorical", levels=list(target_levels)))
        elif kinds[name] == "continuous":
            values = pd.to_numeric(series, errors="coerce")
            lo, hi = values.min(), values.max()
            if not lo < hi:
                messages.append(f"dropped column {name!r}: constant (or empty)")
                continue
            integer = is_integer_dtype(series)
            specs.append(ColumnSpec(name, "continuous", lo, hi, integer=integer, missing=missing))
        else:
            levels = sorted(series.dropna().unique().tolist(), key=str)
            if len(levels) > config.max_levels:
                messages.append(
                    f"dropped column {name!r}: {len(levels)} distinct values (more than "
                    f"schema.max_levels={config.max_levels}; free text or an identifier?)"
                )
            elif len(levels) < 2:
                messages.append(f"dropped column {name!r}: constant (or empty)")
            else:
                # Levels absent from the train split (e.g. in held-out rows) read as missing.
                specs.append(
                    ColumnSpec(
                        name, "categorical", levels=levels, missing=True, unlisted_as_missing=True
                    )
                )
    return SchemaRelease(Schema.from_specs(specs), [], [UNSAFE_NOTE], messages)


def _target_levels(
    frame: pd.DataFrame, dataset: DatasetConfig, config: SchemaConfig, declared: Schema | None
) -> tuple[pd.DataFrame, list[Any], bool]:
    """The target's public classes, collapsing to one-vs-rest (True) when there are more
    than two."""
    target, positive = dataset.target, dataset.positive_label
    if frame[target].isna().any():
        raise UserInputError(f"target column {target!r} has missing values")
    if declared is not None:
        column = declared[target]
        if not isinstance(column, Categorical):
            raise UserInputError(f"target {target!r} must be a categorical column in the schema")
        levels: list[Any] | None = list(column.levels)
    elif config.source == "private":
        levels = list(config.candidates[target]) if target in config.candidates else None
    else:  # unsafe_infer
        levels = sorted(frame[target].unique().tolist(), key=str)
    if levels is not None and len(levels) <= 2:
        return frame, levels, False
    if positive is None:
        raise UserInputError(
            f"target {target!r} has "
            + (f"{len(levels)} classes" if levels else "no public list of classes")
            + "; set dataset.positive_label=CLASS to model CLASS vs the rest"
            + ("" if levels else f" (or schema.candidates.{target}=[...])")
        )
    return one_vs_rest(frame, target, positive), [str(positive), f"not {positive}"], True


def resolve_schema(
    frame: pd.DataFrame,
    dataset: DatasetConfig,
    config: SchemaConfig,
    epsilon: float,
    rng: np.random.Generator | None,
    released: Schema | None = None,
) -> tuple[pd.DataFrame, SchemaRelease]:
    """The training rows (relabelled, restricted to the schema) and the schema's release.

    ``frame`` must be the training split only: nothing here may look at held-out rows.
    ``released`` is a private schema this run has already paid for: it is used as it is, so
    resuming or evaluating a run releases nothing new. Otherwise a private schema is drawn
    with ``rng``, the run's DP noise.
    """
    if config.source not in SOURCES:
        raise UserInputError(f"schema.source must be one of {', '.join(SOURCES)}")
    unknown = [name for name in config.drop if name not in frame.columns]
    if unknown:
        raise UserInputError(f"schema.drop names {unknown[0]!r}, which is not a column")
    if dataset.target in config.drop:
        raise UserInputError("schema.drop cannot drop the target")
    frame = frame.drop(columns=list(config.drop))
    declared = declared_schema(dataset, config) if config.source == "declared" else None
    frame, levels, collapsed = _target_levels(frame, dataset, config, declared)
    if declared is not None:
        if collapsed:
            declared = Schema(
                [
                    c if c.name != dataset.target else Categorical(c.name, tuple(levels))
                    for c in declared.columns
                ]
            )
        release = SchemaRelease(declared)
    elif config.source == "private" and released is not None:
        gone = [name for name in released.names if name not in frame.columns]
        if gone:
            raise UserInputError(f"the run's schema names column {gone[0]!r}, not in the data")
        release = SchemaRelease(released)
    elif config.source == "private":
        if rng is None:
            raise ValueError("a private schema needs its noise generator")
        if not 0.0 < config.epsilon_fraction < 1.0:
            raise UserInputError("schema.epsilon_fraction must be in (0, 1)")
        spend = config.epsilon_fraction * epsilon
        release = private_schema(frame, config, dataset.target, levels, spend, rng)
    else:
        release = inferred_schema(frame, config, dataset.target, levels)
    if collapsed:
        release.one_vs_rest = dataset.positive_label
    if declared is not None:  # Schema.conform names any column missing from or extra to it
        return frame, release
    return frame[release.schema.names], release


def load_tables(
    dataset: DatasetConfig,
    config: SchemaConfig,
    root: str | None,
    epsilon: float,
    rng: np.random.Generator | None,
    released: Schema | None = None,
    check_rows: Callable[[int], None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, SchemaRelease]:
    """(train rows, held-out test rows, schema release) for a run, each split conformed.

    A declared schema is applied before the split, exactly as :func:`load_split` does for the
    registered data sets (same rows in the same split); the others are built from the train
    split alone, so the held-out rows never influence what the generator may produce.
    ``check_rows`` sees the number of train rows before a schema is drawn from them.
    """
    frame = read_frame(dataset, root)
    if config.source == "declared":
        frame, release = resolve_schema(frame, dataset, config, epsilon, rng)
        frame = release.schema.conform(frame)
        check_target(frame, release.schema, dataset.target)
        train, test = split(frame, dataset.target, dataset.test_size, dataset.split_seed)
        return train, test, release
    raw_train, raw_test = split(frame, dataset.target, dataset.test_size, dataset.split_seed)
    if check_rows is not None:
        check_rows(len(raw_train))
    train, release = resolve_schema(raw_train, dataset, config, epsilon, rng, released)
    train = _conform_inferred(train, release.schema)
    check_target(train, release.schema, dataset.target)
    test = raw_test.drop(columns=list(config.drop))
    if release.one_vs_rest is not None:
        test = one_vs_rest(test, dataset.target, release.one_vs_rest)
    return train, _conform_inferred(test[release.schema.names], release.schema), release


def _conform_inferred(frame: pd.DataFrame, schema: Schema) -> pd.DataFrame:
    """Conform, reading text in a continuous column as missing (a schema not declared by the
    user cannot promise the values are numbers, and refusing would reveal that one is not)."""
    frame = frame.copy()
    for column in schema.columns:
        if not isinstance(column, Categorical):
            frame[column.name] = pd.to_numeric(frame[column.name], errors="coerce")
    return schema.conform(frame)
