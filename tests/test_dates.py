"""Dates as numbers: which format a cell is read in, and back."""

from __future__ import annotations

import numpy as np
import pandas as pd

from rdpgan.data import dates
from rdpgan.data.dates import FORMATS, dates_as_days, format_days, format_index, parse_dates


def test_each_cell_is_read_in_the_first_format_it_parses_with():
    cells = pd.Series(
        ["2020-01-02", "2020-01-02T10:30:00", "03/04/2020", "13/04/2020", "1.2.2021", "yes", None]
    )
    index = format_index(cells)
    assert [FORMATS[k] if k >= 0 else None for k in index] == [
        "%Y-%m-%d",
        "%Y-%m-%dT%H:%M:%S",
        "%m/%d/%Y",  # ambiguous: the US reading comes first
        "%d/%m/%Y",  # no 13th month: the European one
        "%d.%m.%Y",
        None,
        None,
    ]
    days = dates_as_days(cells)
    assert days[0] == 18263 and days[1] == 18263 + 10.5 / 24 and np.isnan(days[5:]).all()


def test_each_distinct_text_is_parsed_once_and_read_as_its_cells_alone_are(monkeypatch):
    """A column repeats its dates (and a schema reads a column several times): each format is
    tried on the distinct stripped texts, not on every cell, with the same answer per cell."""
    rng = np.random.default_rng(0)
    texts = ["2020-01-02", " 2020-01-02 ", "03/04/2020", "13/04/2020", "1.2.2021", "no", None]
    picks = rng.integers(0, len(texts), 2000)
    cells = pd.Series([texts[i] for i in picks], dtype=object)
    alone = [format_index(pd.Series([text], dtype=object))[0] for text in texts]
    sizes: list[int] = []
    parse = dates.parse_dates

    def counted(part: pd.Series, date_format: str) -> np.ndarray:
        sizes.append(len(part))
        return parse(part, date_format)

    monkeypatch.setattr(dates, "parse_dates", counted)
    index = format_index(cells)
    assert index.tolist() == [alone[i] for i in picks]
    assert sizes and max(sizes) <= 4  # the four distinct date-shaped texts, once stripped


def test_each_distinct_cell_is_parsed_once_with_each_cells_own_days(monkeypatch):
    """parse_dates hands pandas each distinct cell once (refusing a non-date is slow), and
    each cell gets the days it gets alone: padded, missing, numbers and non-dates included."""
    cells = [
        " 2020-01-02",
        "2020-01-02 ",
        "2020-01-02",
        None,
        np.nan,
        "",
        "x",
        5,
        2.5,
        "2020-02-30",
    ]
    picks = np.random.default_rng(0).integers(0, len(cells), 3000)
    column = pd.Series([cells[i] for i in picks], dtype=object)
    for date_format in FORMATS:
        alone = [parse_dates(pd.Series([cell], dtype=object), date_format)[0] for cell in cells]
        lengths: list[int] = []
        to_datetime = pd.to_datetime

        def counted(text, *args, _seen=lengths, _parse=to_datetime, **kwargs):
            _seen.append(len(text))
            return _parse(text, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(pd, "to_datetime", counted)
            days = parse_dates(column, date_format)
        np.testing.assert_array_equal(days, [alone[i] for i in picks])
        assert lengths == [6]  # the distinct texts once stripped, the missing cells left out
        padded = [18263.0] * 3 if date_format == "%Y-%m-%d" else [np.nan] * 3
        np.testing.assert_array_equal(alone[:5], [*padded, np.nan, np.nan])  # (missing: NaN)


def test_timestamps_are_read_as_their_column_writes_them():
    """A column of timestamps (a DataFrame handed to fit) reads as pandas writes it as text:
    whole days as dates, and a time of day in the format that has one; a Timestamp and a
    datetime64 of the same instant, as objects, each as its own text."""
    days = pd.Series(pd.to_datetime(["2020-01-01", "2020-01-02", None]))
    np.testing.assert_array_equal(parse_dates(days, "%Y-%m-%d"), [18262.0, 18263.0, np.nan])
    assert np.isnan(parse_dates(days, "%Y-%m-%d %H:%M:%S")).all()
    timed = pd.Series([pd.Timestamp("2020-01-01 12:00"), pd.Timestamp("2020-01-02")])
    np.testing.assert_array_equal(parse_dates(timed, "%Y-%m-%d %H:%M:%S"), [18262.5, 18263.0])
    mixed = pd.Series(
        [
            pd.Timestamp("2020-01-01"),
            np.datetime64("2020-01-01T00:00:00"),
            np.datetime64("2020-01-01"),
        ],
        dtype=object,
    )  # equal instants, three texts: "2020-01-01 00:00:00", "2020-01-01T00:00:00", "2020-01-01"
    for date_format, at in (("%Y-%m-%d %H:%M:%S", 0), ("%Y-%m-%dT%H:%M:%S", 1), ("%Y-%m-%d", 2)):
        expected = [18262.0 if k == at else np.nan for k in range(3)]
        np.testing.assert_array_equal(parse_dates(mixed, date_format), expected)


def test_days_are_written_back_in_the_format_they_were_read_in():
    for date_format in FORMATS:
        days = np.array([18263.0, 18999.75 if "%H" in date_format else 18999.0, np.nan])
        text = format_days(days, date_format)
        assert text.iloc[2] is None
        again = parse_dates(text, date_format)
        np.testing.assert_allclose(again[:2], days[:2])
