"""Reading a column's cells: what :mod:`rdpgan.privacy.private_schema` counts per row (its value
profile, the power-of-two band of its number, its values or candidates), and the
:class:`Profile` its noisy counts are read as (post-processing)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rdpgan.data.dates import FORMATS, dates_as_days, format_index
from rdpgan.data.schema import Categorical, parsed_numbers

# A column's value profile: each row lands in exactly one of these cells (then one per date
# format of :data:`rdpgan.data.dates.FORMATS`: a date is not text).
PROFILE_CELLS = ("missing", "text", "zero", "integer", "fraction")
# Power-of-two bands 2^e <= |x| < 2^(e+1), e in [LOWEST_BAND, HIGHEST_BAND] (beyond: the end
# band), negative numbers first: 1e-6 to 1e19 either side of 0.
LOWEST_BAND, HIGHEST_BAND = -20, 63
BANDS = HIGHEST_BAND - LOWEST_BAND + 1
# Decisions read off a column's noisy counts (post-processing).
EMPTY_SHARE = 0.02  # fewer values than this share of the rows: no numeric range is read
NUMERIC_SHARE = 0.9  # at least this share of the values parse as numbers: numeric
# A column is integer where its fractions are fewer than FRACTION_SHARE of its numbers, or
# within FRACTION_NOISE stds of the noise on their count but under NOISY_FRACTION_SHARE. 1% keeps
# the decimals of a column that is mostly whole: at 10%, weather's precipitation (93% dry hours,
# 6.7% in hundredths of an inch) was integer, its rain rounded to 0 or 1 inch, and a test's Ct
# value (94% at 45, the rest in hundredths) lost its decimals. 4 stds keep a column of whole
# numbers integer whatever the noise (a fraction count of 0 passes them once in ~30,000
# columns); 10% (the rule before) caps them, so a noisy release rounds no more than it did.
FRACTION_SHARE = 0.01
FRACTION_NOISE = 4.0
NOISY_FRACTION_SHARE = 0.1
# Text and dates count toward a column's kind only beyond this many noise stds of their cells.
KIND_NOISE = 2.0
POINT_MASS_SHARE = 0.1  # at least this share of the numbers are 0: 0 gets a code of its own


def value_profile(series: pd.Series) -> np.ndarray:
    """Rows per :data:`PROFILE_CELLS` cell, then per date format. Each row counts in exactly
    one cell."""
    numbers = parsed_numbers(series)
    missing = series.isna().to_numpy()
    number = ~np.isnan(numbers)
    formats = np.full(len(series), -1)
    words = ~number & ~missing
    formats[words] = format_index(series[words])
    zero = number & (numbers == 0)
    with np.errstate(invalid="ignore"):
        fraction = number & np.isfinite(numbers) & (numbers != np.round(numbers))
    text = ~missing & ~number & (formats < 0)
    cells = [missing, text, zero, number & ~zero & ~fraction, fraction]
    dated = np.bincount(formats[formats >= 0], minlength=len(FORMATS))
    return np.array([*(cell.sum() for cell in cells), *dated], dtype=float)


def cell_numbers(series: pd.Series) -> np.ndarray:
    """Each cell as a number: itself, or the days since 1970 of a date; NaN for the rest."""
    numbers = parsed_numbers(series)
    other = np.isnan(numbers) & series.notna().to_numpy()
    if other.any():
        numbers[other] = dates_as_days(series[other])
    return numbers


def magnitude_bands(series: pd.Series) -> np.ndarray:
    """Rows per signed power-of-two band (:data:`BANDS` negative ones, then as many positive):
    each finite nonzero number (a date: its days since 1970) counts in exactly one, anything
    else in none."""
    numbers = cell_numbers(series)
    numbers = numbers[np.isfinite(numbers) & (numbers != 0)]
    exponents = np.clip(np.floor(np.log2(np.abs(numbers))), LOWEST_BAND, HIGHEST_BAND)
    offsets = (exponents - LOWEST_BAND).astype(np.int64)
    cells = np.where(numbers < 0, BANDS - 1 - offsets, BANDS + offsets)
    return np.bincount(cells, minlength=2 * BANDS).astype(float)


def band_edges(cell: int) -> tuple[float, float]:
    """The numbers band ``cell`` of :func:`magnitude_bands` covers (the end bands reach on)."""
    if cell >= BANDS:
        exponent = cell - BANDS + LOWEST_BAND
        return 2.0**exponent, 2.0 ** (exponent + 1)
    exponent = BANDS - 1 - cell + LOWEST_BAND
    return -(2.0 ** (exponent + 1)), -(2.0**exponent)


def candidate_counts(series: pd.Series, candidates: list[Any]) -> np.ndarray:
    """How many rows hold each candidate level: one row adds one to one count at most; values
    that are no candidate are not counted."""
    reader = Categorical(series.name, tuple(candidates), missing=True, unlisted_as_missing=True)
    counts = np.bincount(reader.encode(series), minlength=len(candidates) + 1)
    return counts[: len(candidates)].astype(float)  # the last code is 'missing/other'


def value_counts(series: pd.Series) -> dict[str, int]:
    """Rows per value the column holds, as text (what partition selection draws from)."""
    return {str(k): int(v) for k, v in series.dropna().astype(str).value_counts().items()}


@dataclass(frozen=True)
class Profile:
    """A column's noisy :func:`value_profile` and what it implies."""

    missing: float
    text: float
    zero: float
    integer: float
    fraction: float
    dates: tuple[float, ...] = ()  # per format of rdpgan.data.dates.FORMATS
    noise: float = 0.0  # each cell's noise std

    @classmethod
    def of(cls, counts: np.ndarray, noise: float) -> Profile:
        cells = [float(c) for c in counts]
        head, dates = cells[: len(PROFILE_CELLS)], tuple(cells[len(PROFILE_CELLS) :])
        return cls(*head, dates=dates, noise=noise)

    def beyond_noise(self, count: float) -> float:
        """What of a noisy count its noise cannot explain (:data:`KIND_NOISE` stds)."""
        return max(count - KIND_NOISE * self.noise, 0.0)

    @property
    def kind_present(self) -> float:
        """The values a kind is decided among: the numbers, and the text and the most frequent
        date format as far as they stand out of the noise (so that the noise of the text and
        of the seven date cells does not make a column of numbers look like text)."""
        best_date = max(self.dates, default=0.0)
        return self.numbers + self.beyond_noise(self.text) + self.beyond_noise(best_date)

    @property
    def numbers(self) -> float:
        return self.zero + self.integer + self.fraction

    @property
    def numbers_noise(self) -> float:
        """The noise std of :attr:`numbers`, a sum of three cells."""
        return math.sqrt(3.0) * self.noise

    @property
    def present(self) -> float:
        return self.numbers + self.text + sum(self.dates)

    @property
    def total(self) -> float:
        return self.present + self.missing

    @property
    def empty(self) -> bool:
        return bool(self.present <= EMPTY_SHARE * max(self.total, 1.0))

    @property
    def date_format(self) -> str | None:
        """The format of a column of dates (:data:`NUMERIC_SHARE` of its values parse with
        one), or None."""
        best_date = max(self.dates, default=0.0)
        if best_date <= 0 or best_date < NUMERIC_SHARE * self.kind_present:
            return None
        return FORMATS[int(np.argmax(self.dates))]

    @property
    def zero_code(self) -> bool:
        """Whether 0 gets a code of its own (a column of numbers, not dates, often 0)."""
        return self.zero_mass and self.date_format is None

    @property
    def is_integer(self) -> bool:
        within_noise = min(FRACTION_NOISE * self.noise, NOISY_FRACTION_SHARE * self.numbers)
        return bool(self.fraction < max(FRACTION_SHARE * self.numbers, within_noise))

    @property
    def zero_mass(self) -> bool:
        return bool(self.zero >= POINT_MASS_SHARE * self.numbers)


def is_number(value: str) -> bool:
    """Whether a released value is a finite number, as :func:`value_profile` reads one."""
    number = pd.to_numeric(pd.Series([value], dtype=object), errors="coerce").iloc[0]
    return bool(np.isfinite(number))
