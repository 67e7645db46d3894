"""Dataset registry: where a table lives, how it is read, and its stratified 80/20 split.

The registry itself is the Hydra group ``configs/dataset/`` (one YAML per data set, with its
declared schema); this module turns one such :class:`DatasetConfig` into a conformed DataFrame.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from rdpgan.config import DatasetConfig
from rdpgan.data.schema import Categorical, Schema
from rdpgan.errors import UserInputError, first_line

DATA_ENV = "RDPGAN_DATA_DIR"
DOWNLOAD_HINT = "python scripts/download_data.py"


def data_root(configured: str | None = None) -> Path:
    """The one place that decides the data root: config, else $RDPGAN_DATA_DIR, else ./data."""
    return Path(configured or os.environ.get(DATA_ENV) or "data").expanduser()


@dataclass(frozen=True)
class Table:
    """A loaded table with what the trainer needs to know about it."""

    frame: pd.DataFrame
    schema: Schema
    target: str
    positive_label: object


def check_target(frame: pd.DataFrame, schema: Schema, target: str, rows: bool = True) -> None:
    """The target must be a declared categorical column, never missing, with at least two
    classes present in the rows (``rows=False`` skips that count: under a private schema the
    classes are released, and a refusal must not depend on how many the rows hold)."""
    column = schema[target]
    if not isinstance(column, Categorical):
        raise UserInputError(f"target {target!r} must be a categorical column in the schema")
    if frame[target].isna().any():
        raise UserInputError(f"target {target!r} has missing values")
    if rows and frame[target].nunique() < 2:
        raise UserInputError(f"target {target!r} has a single class; nothing to condition on")


def classes_released(schema: Schema, target: str) -> bool:
    """Whether the target's classes are released values (a paid schema, or the schema.yaml of
    a run that paid for one): its other values read as missing, and no refusal after the
    release may count the rows or their classes."""
    return getattr(schema[target], "unlisted_as_missing", False)


def table_path(config: DatasetConfig, root: str | None = None) -> Path:
    """``dataset.path`` as given, else ``dataset.file`` under the data root."""
    return Path(config.path) if config.path else data_root(root) / config.file


SEPARATORS = (",", ";", "\t", "|")


def separator(path: Path, config: DatasetConfig) -> str:
    """``dataset.sep``, or (when it is null) the candidate the header line holds most of: a
    header is column names, public; the rows are never looked at for this."""
    if config.sep is not None:
        return config.sep
    if not config.header:
        return ","
    with path.open(encoding="utf-8-sig", errors="replace") as file:
        header = file.readline()
    return max(SEPARATORS, key=header.count)


def read_frame(
    config: DatasetConfig, root: str | None = None, as_text: bool = False
) -> pd.DataFrame:
    """The raw rows of the file ``config`` names, with its target column checked present.

    ``as_text`` keeps every cell as the file spells it (without surrounding spaces; an empty
    cell is missing), for schemas that decide kinds themselves. A UTF-8 byte-order mark and
    Windows line endings are read as any spreadsheet writes them.
    """
    path = table_path(config, root)
    if not path.is_file():
        where = "" if config.path else f" (data root {data_root(root)}; set data.root= or "
        hint = "" if config.path else f"${DATA_ENV}, or fetch the data with `{DOWNLOAD_HINT}`)"
        raise UserInputError(f"data file {path} not found{where}{hint}")
    sep = separator(path, config)
    try:
        frame = pd.read_csv(
            path,
            header=0 if config.header else None,
            names=list(config.column_names) if config.column_names else None,
            sep=sep,
            na_values=list(config.na_values),
            keep_default_na=True,
            skipinitialspace=config.skipinitialspace,
            skip_blank_lines=True,
            encoding="utf-8-sig",
            dtype=str if as_text else None,
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserInputError(f"cannot read {path}: {first_line(exc)}") from exc
    if frame.empty:
        raise UserInputError(f"{path} has no data rows")
    if frame.shape[1] == 1:
        raise UserInputError(
            f"{path} reads as a single column with separator {sep!r}; "
            "is the file separated by something else (set dataset.sep)?"
        )
    if config.target not in frame.columns:
        raise UserInputError(f"target column {config.target!r} is not in {path}")
    if as_text:
        frame = frame.apply(lambda column: column.str.strip()).replace("", np.nan)
    return frame


def read_table(config: DatasetConfig, root: str | None = None) -> Table:
    """Read the file named by ``config`` and conform it to its declared schema."""
    if not config.columns:
        raise UserInputError(f"dataset {config.name!r} declares no schema columns")
    schema = Schema.from_specs(config.columns)
    frame = schema.conform(read_frame(config, root))
    check_target(frame, schema, config.target)
    return Table(frame, schema, config.target, config.positive_label)


def split(
    frame: pd.DataFrame, target: str, test_size: float, seed: int, stratify: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train/test split (stratified by ``target`` unless told not to); only the train part is
    ever shown to the generator."""
    if not 0.0 < test_size < 1.0:
        raise UserInputError(f"test_size must be in (0, 1), got {test_size}")
    try:
        train, test = train_test_split(
            frame,
            test_size=test_size,
            random_state=seed,
            stratify=frame[target] if stratify else None,
        )
    except ValueError as exc:
        raise UserInputError(f"cannot split {target!r} stratified: {exc}") from exc
    return train.reset_index(drop=True), test.reset_index(drop=True)


def load_split(
    config: DatasetConfig, root: str | None = None
) -> tuple[Table, pd.DataFrame, pd.DataFrame]:
    """Read a registered table and make its fixed train/test split (the one every run uses)."""
    table = read_table(config, root)
    train, test = split(table.frame, table.target, config.test_size, config.split_seed)
    return table, train, test
