"""Dates and timestamps as numbers: days since 1970-01-01, read and written in the input's format.

A column of dates is a numeric column to the generator (bounds, bins, within-bin positions);
the format it is read and written in is public once released (the private schema counts the
rows each format parses, :mod:`rdpgan.privacy.private_schema`) or declared (``date_format``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from rdpgan.data.distinct import per_distinct
from rdpgan.deferred import DeferredModule

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")

# ISO 8601 and the spreadsheets' usual ones, in the order a cell is tried: a cell counts in the
# first format it parses with (03/04/2020 is a US date, 13/04/2020 a European one).
FORMATS = (
    "%Y-%m-%d",
    "%Y-%m-%dT%H:%M:%S",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%dT%H:%M:%SZ",
    "%m/%d/%Y",
    "%d/%m/%Y",
    "%d.%m.%Y",
)
# What every format above starts with: cells without it are not tried (fast on text columns).
DATE_SHAPE = r"\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}"
EPOCH = "1970-01-01"  # day 0


def has_time(date_format: str) -> bool:
    """Whether the format carries a time of day (else its numbers are whole days)."""
    return "%H" in date_format


def parse_dates(cells: pd.Series, date_format: str) -> np.ndarray:
    """Days since 1970-01-01 of each cell written in ``date_format`` (NaN for any other).

    Each distinct text is parsed once: a column repeats its dates, and refusing a cell that is
    no date in this format is slow (a million cells: 1.5-2 s, against 0.02-0.1 s). (Each
    cell's text first: a column of timestamps is written as one, and objects equal as values,
    a Timestamp and a datetime64, may be written apart.)"""

    def days(texts: pd.Series) -> np.ndarray:
        stamps = pd.to_datetime(texts, format=date_format, errors="coerce")
        since = (stamps - pd.Timestamp(EPOCH)) / pd.Timedelta(days=1)
        return since.to_numpy(dtype=float, na_value=np.nan)

    return per_distinct(cells.astype("string").str.strip(), days, np.nan)


def format_index(cells: pd.Series) -> np.ndarray:
    """Per cell, the index in :data:`FORMATS` of the first format it parses with (-1: none).

    Each distinct (stripped) text is parsed once: a column repeats its dates, and a schema
    reads a column several times."""
    return per_distinct(cells.astype("string").str.strip(), _first_formats, -1)


def _first_formats(texts: pd.Series) -> np.ndarray:
    """:func:`format_index` of distinct stripped texts (cells without the date shape are not
    tried: fast on text columns)."""
    index = np.full(len(texts), -1)
    shaped = texts.str.match(DATE_SHAPE).fillna(False).to_numpy(bool)
    for k, date_format in enumerate(FORMATS):
        free = (index < 0) & shaped
        if not free.any():
            break
        parsed = ~np.isnan(parse_dates(texts[free], date_format))
        index[np.flatnonzero(free)[parsed]] = k
    return index


def dates_as_days(cells: pd.Series) -> np.ndarray:
    """Each cell's days since 1970-01-01 in the first format it parses with (NaN: none)."""
    days = np.full(len(cells), np.nan)
    formats = format_index(cells)
    for k in np.unique(formats[formats >= 0]):
        rows = formats == k
        days[rows] = parse_dates(cells[rows], FORMATS[k])
    return days


def format_days(days: np.ndarray, date_format: str) -> pd.Series:
    """Days since 1970-01-01 written in ``date_format`` (missing stays missing)."""
    values = np.asarray(days, dtype=float)
    # Within what a timestamp holds (years 1678-2261): a bound past it is clipped to it.
    epoch, day = pd.Timestamp(EPOCH), pd.Timedelta(days=1)
    reach = (pd.Timestamp.max - epoch) / day - 1, (pd.Timestamp.min - epoch) / day + 1
    finite = np.clip(np.where(np.isnan(values), 0.0, values), reach[1], reach[0])
    stamps = epoch + pd.to_timedelta(finite, unit="D")
    text = pd.Series(stamps.round("s").strftime(date_format), dtype=object)
    return text.where(~np.isnan(values), None)
