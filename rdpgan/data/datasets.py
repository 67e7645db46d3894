"""Where a table lives and how its file is read: every cell as text.

The registry itself is the Hydra group ``configs/dataset/`` (one YAML per data set, with its
declared schema); :mod:`rdpgan.data.loading` turns the cells read here into conformed,
split rows.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rdpgan.config import DatasetConfig
from rdpgan.deferred import DeferredModule
from rdpgan.errors import UserInputError

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")

DATA_ENV = "RDPGAN_DATA_DIR"
DOWNLOAD_HINT = "python scripts/data/download_data.py"


def data_root(configured: str | None = None) -> Path:
    """The one place that decides the data root: config, else $RDPGAN_DATA_DIR, else ./data."""
    return Path(configured or os.environ.get(DATA_ENV) or "data").expanduser()


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


def frame_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """A DataFrame's cells as :func:`read_cells` reads a file's: each as text on its own
    (without surrounding spaces), a missing or empty one missing."""
    isna = pd.isna  # (read once: this runs per cell)

    def missing(value: object) -> bool:
        return value is None or (not isinstance(value, str) and bool(isna(value)))

    cells = frame.astype(object).map(lambda v: np.nan if missing(v) else str(v).strip())
    return cells.mask(cells == "")


def read_cells(config: DatasetConfig, root: str | None = None) -> pd.DataFrame:
    """The rows of the file ``config`` names, every cell as the file spells it (without
    surrounding spaces; an empty cell or a ``na_values`` token is missing), with its target
    column checked present.

    Cells stay text so that each is later parsed against its column's kind on its own: left to
    pandas, a column's type is inferred from all of its cells, and one row with a blank or a
    fraction would change how every other row of the column reads ("1" becomes "1.0"). A UTF-8
    byte-order mark and Windows line endings are read as any spreadsheet writes them. Errors
    name no line, byte or count: those come from the private rows.
    """
    path = table_path(config, root)
    if not path.is_file():
        where = "" if config.path else f" (data root {data_root(root)}; set data.root= or "
        hint = "" if config.path else f"${DATA_ENV}, or fetch the data with `{DOWNLOAD_HINT}`)"
        raise UserInputError(f"data file {path} not found{where}{hint}")
    sep = separator(path, config)
    try:
        with warnings.catch_warnings():
            # A first data line with more fields than the header is a ragged record like any
            # other: refused, not taken as a row index that would shift every other row.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = _read(path, config, sep)
    except pd.errors.EmptyDataError as exc:
        raise UserInputError(f"{path} is empty") from exc
    except (pd.errors.ParserError, pd.errors.ParserWarning) as exc:
        raise UserInputError(
            f"cannot read {path}: its rows do not all split into the same number of fields "
            f"as its header with separator {sep!r} (is a quote left open, or is the separator "
            "another one? set dataset.sep)"
        ) from exc
    except UnicodeDecodeError as exc:
        raise UserInputError(f"cannot read {path}: it is not UTF-8 text") from exc
    if frame.empty:
        raise UserInputError(f"{path} has no data rows")
    if frame.shape[1] == 1:
        raise UserInputError(
            f"{path} reads as a single column with separator {sep!r}; "
            "is the file separated by something else (set dataset.sep)?"
        )
    if config.target is not None and config.target not in frame.columns:
        raise UserInputError(f"target column {config.target!r} is not in {path}")
    return frame.apply(lambda column: column.str.strip()).replace("", np.nan)


def _read(path: Path, config: DatasetConfig, sep: str) -> pd.DataFrame:
    """Every cell as text; ``index_col=False``: no column is ever taken as the rows' index."""
    return pd.read_csv(
        path,
        header=0 if config.header else None,
        names=list(config.column_names) if config.column_names else None,
        index_col=False,
        sep=sep,
        # pandas' C parser takes one-character separators only (it would warn, and fall back).
        engine="python" if len(sep) > 1 else "c",
        na_values=list(config.na_values),
        keep_default_na=True,
        skipinitialspace=config.skipinitialspace,
        skip_blank_lines=True,
        encoding="utf-8-sig",
        dtype=str,
    )
