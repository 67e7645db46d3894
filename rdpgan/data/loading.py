"""Tables in: cells read as text → a per-row split → a schema → rows conformed cell by cell.

The one path every run, resume, evaluation and benchmark takes from a CSV file to the rows the
generator trains on and the rows held out:

1. :func:`~rdpgan.data.datasets.read_cells`: every cell as the file spells it;
2. :func:`~rdpgan.data.split.split`: each row trains or is held out by a hash of its own cells;
3. :func:`resolve_schema`: the column domains, declared (public, free), released with DP from
   the training rows (:mod:`rdpgan.privacy.private_schema`, paid), or read off them (unsafe);
4. :func:`conform_rows`: each cell parsed against its column's kind on its own, and each row
   kept, relabelled or refused by its own target.

So the training rows of a table with one more row are the training rows of the table plus at
most that row, whatever the row holds: no step couples one row to another before the
mechanisms run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.datasets import read_cells
from rdpgan.data.schema import Categorical, Schema, parsed_numbers
from rdpgan.data.schema_file import declared_release, dropped_by_file
from rdpgan.data.split import split
from rdpgan.data.target import (
    check_target,
    class_key,
    classes_released,
    matching_class,
    one_vs_rest,
    one_vs_rest_classes,
    released_classes_only,
)
from rdpgan.errors import UserInputError
from rdpgan.privacy.ledger import Release
from rdpgan.privacy.private_schema import SchemaBudget, SchemaRelease, private_schema
from rdpgan.privacy.schema.kinds import CONDITION_CLASSES

SOURCES = ("declared", "private", "unsafe_infer")
KINDS = ("continuous", "categorical")
UNSAFE_NOTE = (
    "NOT END-TO-END PRIVATE: schema=unsafe_infer read the bounds and levels of every column "
    "off the private rows (min/max and distinct values leak outliers and rare categories)"
)


@dataclass(frozen=True)
class Table:
    """What a script needs to know of a registered table besides its rows."""

    schema: Schema
    target: str
    positive_label: Any


def load_tables(
    dataset: DatasetConfig,
    config: SchemaConfig,
    root: str | None,
    budget: SchemaBudget | None,
    rng: np.random.Generator | None,
    released: Schema | None = None,
    pay: Callable[[list[Release]], None] | None = None,
    expected: Schema | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, SchemaRelease]:
    """(train rows, held-out rows, schema release) for a run, each conformed.

    The schema is built from the training rows alone (a declared one from none), so held-out
    rows never influence what the generator may produce. ``budget`` is the run's epsilon,
    delta and accountant, of which a private schema spends its fractions; ``released`` a
    private schema the run already paid for (resume, evaluation: nothing new is drawn).
    ``pay`` sees a private schema's costs before its noise (see
    :func:`~rdpgan.privacy.private_schema.private_schema`).
    ``expected``: the schema a run was trained with (resume, evaluation, report); any other
    is refused before a row is read with it.
    """
    cells = read_cells(dataset, root)
    raw_train, raw_test = split(cells, dataset.test_size, dataset.split_seed)
    release = resolve_schema(raw_train, dataset, config, budget, rng, released, pay)
    dataset = conditioned(dataset, release)
    if expected is not None and release.schema.to_specs() != expected.to_specs():
        raise UserInputError(
            "the run's schema is not the one it was trained with (was its schema.yaml or "
            "schema.file edited?); restore it first"
        )
    train = conform_rows(raw_train, release, dataset, config)
    check_target(train, release.schema, dataset.target)
    return train, conform_rows(raw_test, release, dataset, config), release


def conditioned(dataset: DatasetConfig, release: SchemaRelease) -> DatasetConfig:
    """``dataset`` with the target its schema chose where it named none: the run is then one
    that named it (and its positive class)."""
    if dataset.target is not None or release.target is None:
        return dataset
    return replace(dataset, target=release.target, positive_label=release.positive)


def load_split(
    config: DatasetConfig, root: str | None = None
) -> tuple[Table, pd.DataFrame, pd.DataFrame]:
    """A registered table with its declared schema, split as every run splits it."""
    train, test, release = load_tables(config, SchemaConfig(), root, None, None)
    positive = config.positive_label if release.positive is None else release.positive
    return Table(release.schema, config.target, positive), train, test


def conform_rows(
    cells: pd.DataFrame, release: SchemaRelease, dataset: DatasetConfig, config: SchemaConfig
) -> pd.DataFrame:
    """Rows as ``release``'s schema reads them: each cell parsed on its own, each row relabelled
    one-vs-rest, or left out when its class was not released, by its own target alone."""
    schema, target = release.schema, dataset.target
    released = classes_released(schema, target)
    frame = _without_dropped(cells, config, target)
    if not released and frame[target].isna().any():
        raise UserInputError(f"target column {target!r} has missing values")
    if release.one_vs_rest is not None:
        frame = one_vs_rest(frame, target, release.one_vs_rest)
    if released:
        frame = released_classes_only(frame, target, list(schema[target].levels))
    if config.source == "declared":
        return schema.conform(frame)  # names any column missing or extra
    # A schema not declared by the user cannot promise the values are numbers, and refusing
    # would reveal that one is not: text in a numeric column reads as missing.
    frame = frame[schema.names].copy()
    for column in schema.columns:
        if not isinstance(column, Categorical):
            frame[column.name] = column.parse(frame[column.name])
    return schema.conform(frame)


def resolve_schema(
    cells: pd.DataFrame,
    dataset: DatasetConfig,
    config: SchemaConfig,
    budget: SchemaBudget | None,
    rng: np.random.Generator | None,
    released: Schema | None = None,
    pay: Callable[[list[Release]], None] | None = None,
) -> SchemaRelease:
    """The schema's release, from the training rows' cells only (see :func:`load_tables`).
    A private schema is drawn with ``rng``, the run's DP noise."""
    if config.source not in SOURCES:
        raise UserInputError(f"schema.source must be one of {', '.join(SOURCES)}")
    if dataset.target is None and dataset.positive_label is not None:
        raise UserInputError("dataset.positive_label names a class of dataset.target: name both")
    unknown = [name for name in config.drop if name not in cells.columns]
    if unknown:
        raise UserInputError(f"schema.drop names {unknown[0]!r}, which is not a column")
    if dataset.target in config.drop:
        raise UserInputError("schema.drop cannot drop the target")
    frame = _without_dropped(cells, config, dataset.target)
    _check_types(frame, config)
    if config.source == "private":
        if released is not None:
            return _recorded_release(released, dataset, frame)
        if rng is None or budget is None:
            raise ValueError("a private schema needs its budget and noise generator")
        release = private_schema(frame, dataset, config, budget, rng, pay)[1]
        _name_positive(release, dataset.target or release.target, dataset.positive_label)
        return release
    declared = declared_release(dataset, config) if config.source == "declared" else None
    chosen = dataset.target is None
    if chosen:
        if declared is None:
            raise UserInputError("schema=unsafe_infer needs the target: dataset.target=COLUMN")
        dataset = declared_condition(dataset, declared)
    target = target_column(frame, dataset, declared.schema if declared else None)
    if declared is None:
        release = inferred_schema(frame, config, dataset.target, list(target.levels))
    else:  # (with the cost and notes a reused released schema carries)
        columns = [c if c.name != target.name else target for c in declared.schema.columns]
        release = replace(declared, schema=Schema(columns), target=target.name if chosen else None)
    _name_positive(release, dataset.target, dataset.positive_label)
    return release


def declared_condition(dataset: DatasetConfig, release: SchemaRelease) -> DatasetConfig:
    """``dataset`` conditioned on a declared schema's column where it names no target: the
    one the run that released the schema chose (its file says), else the first categorical
    column of 2 to CONDITION_CLASSES levels that is never missing (public: the schema alone;
    a target's missing rows would be left out), else the first of them. Its positive class
    is the later of two, or the first level."""
    if release.target is not None:
        return replace(dataset, target=release.target, positive_label=release.positive)
    schema = release.schema
    usable = [
        c
        for c in schema.columns
        if isinstance(c, Categorical) and 2 <= len(c.levels) <= CONDITION_CLASSES
    ]
    if not usable:
        raise UserInputError(
            "the schema has no categorical column of 2-12 levels to condition on: name the "
            "column with dataset.target=COLUMN"
        )
    column = next((c for c in usable if not c.missing), usable[0])
    levels = list(column.levels)
    positive = levels[-1] if len(levels) == 2 else levels[0]
    return replace(dataset, target=column.name, positive_label=positive)


def _without_dropped(cells: pd.DataFrame, config: SchemaConfig, target: str) -> pd.DataFrame:
    """The cells without the columns ``schema.drop`` and a declared schema file leave out."""
    return cells.drop(columns=list(config.drop) + dropped_by_file(config, cells, target))


def _name_positive(release: SchemaRelease, target: str, positive: Any) -> None:
    """The positive class as the schema spells it (a label 1 names the class read as "1"),
    and the class the target was collapsed around, when it was. Unnamed, a two-class target's
    positive is its later class in the schema's order (1 of 0/1, yes of no/yes), as a
    classifier library would take it: evaluation then has a class to score."""
    levels = list(release.schema[target].levels)
    if positive is not None and levels == one_vs_rest_classes(positive):
        release.one_vs_rest, release.positive = positive, str(positive)
    elif positive is None and len(levels) == 2:
        release.positive = levels[-1]
    elif positive is not None or release.target is None:  # (a chosen target has its own)
        release.positive = matching_class(levels, positive)


def _recorded_release(
    released: Schema, dataset: DatasetConfig, frame: pd.DataFrame
) -> SchemaRelease:
    """A private schema this run already paid for, as it is (resume, evaluation)."""
    gone = [name for name in released.names if name not in frame.columns]
    if gone:
        raise UserInputError(f"the run's schema names column {gone[0]!r}, not in the data")
    release = SchemaRelease(released)
    _name_positive(release, dataset.target, dataset.positive_label)
    return release


def target_column(
    frame: pd.DataFrame, dataset: DatasetConfig, declared: Schema | None
) -> Categorical:
    """The target's public classes: declared, or read off the rows under ``unsafe_infer``.
    More than two are kept when ``dataset.positive_label`` names one of them (evaluation scores
    it against the rest); one it names that is no class makes the target that class vs the
    rest."""
    target, positive = dataset.target, dataset.positive_label
    column = declared[target] if declared is not None else None
    if column is not None and not isinstance(column, Categorical):
        raise UserInputError(f"target {target!r} must be a categorical column in the schema")
    if column is None:
        if frame[target].isna().any():
            raise UserInputError(f"target column {target!r} has missing values")
        column = Categorical(target, tuple(sorted(frame[target].unique().tolist(), key=str)))
    levels = list(column.levels)
    if column.unlisted_as_missing and levels == one_vs_rest_classes(levels[0]):
        if str(positive) != levels[0]:
            # Without it the rows' own classes would all read as missing but one spelled alike.
            raise UserInputError(
                f"target {target!r} was released as {levels[0]!r} vs the rest; set "
                f"dataset.positive_label={levels[0]}"
            )
        return column
    if len(levels) > 2 and positive is None:
        raise UserInputError(
            f"target {target!r} has {len(levels)} classes; set dataset.positive_label=CLASS "
            "to score CLASS against the rest"
        )
    named = positive is None or any(class_key(c) == class_key(positive) for c in levels)
    if len(levels) > 2 and not named:
        classes = tuple(one_vs_rest_classes(positive))
        return Categorical(target, classes, column.missing, column.unlisted_as_missing)
    return column


def _check_types(frame: pd.DataFrame, config: SchemaConfig) -> None:
    for name, kind in config.types.items():
        if name not in frame.columns:
            raise UserInputError(f"schema.types names {name!r}, which is not a column")
        if kind not in KINDS:
            raise UserInputError(f"schema.types.{name} must be continuous or categorical")


def column_kinds(frame: pd.DataFrame, config: SchemaConfig, target: str) -> dict[str, str]:
    """Continuous where every cell present reads as a number, categorical otherwise;
    ``config.types`` overrides (what ``unsafe_infer`` reads off the rows)."""
    _check_types(frame, config)
    kinds = {}
    for name in frame.columns:
        series = frame[name]
        text = series.notna().to_numpy() & np.isnan(parsed_numbers(series))
        numeric = bool(series.notna().any()) and not text.any()
        kinds[name] = config.types.get(name, "continuous" if numeric else "categorical")
    kinds[target] = "categorical"
    return kinds


def inferred_schema(
    frame: pd.DataFrame, config: SchemaConfig, target: str, target_levels: list[Any]
) -> SchemaRelease:
    """Bounds and levels read off the data: NOT private, and the release says so."""
    kinds = column_kinds(frame, config, target)
    specs: list[ColumnSpec] = []
    dropped: dict[str, str] = {}
    for name in frame.columns:
        series = frame[name]
        if name == target:
            specs.append(ColumnSpec(name, "categorical", levels=list(target_levels)))
        elif kinds[name] == "continuous":
            values = parsed_numbers(series)
            finite = values[np.isfinite(values)]  # +-inf are clipped to the bounds, as any value
            if finite.size == 0 or not finite.min() < finite.max():
                dropped[name] = "constant (or empty)"
                continue
            integer = bool((finite == np.round(finite)).all())
            specs.append(
                ColumnSpec(
                    name,
                    "continuous",
                    float(finite.min()),
                    float(finite.max()),
                    integer=integer,
                    missing=bool(np.isnan(values).any()),  # a blank, or text read as missing
                )
            )
        else:
            levels = sorted(series.dropna().unique().tolist(), key=str)
            if len(levels) > config.max_levels:
                dropped[name] = (
                    f"{len(levels)} distinct values (more than schema.max_levels="
                    f"{config.max_levels}; free text or an identifier?)"
                )
            elif len(levels) < 2:
                dropped[name] = "constant (or empty)"
            else:
                # Levels absent from the train split (e.g. in held-out rows) read as missing.
                specs.append(
                    ColumnSpec(
                        name, "categorical", levels=levels, missing=True, unlisted_as_missing=True
                    )
                )
    return SchemaRelease(Schema.from_specs(specs), [], [UNSAFE_NOTE], dropped)
