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

1. **Counts** over every column at once. Per feature column, three histograms that one row adds
   one count to each: its value profile (missing / text / zero / integer / fraction), the
   values it holds (Gaussian partition selection, :mod:`~rdpgan.privacy.mechanisms.partition`:
   a value is released when its noisy count clears a threshold; with ``schema.candidates``,
   counts of the public candidates), and the signed power-of-two band of its number; its
   values weighed by :data:`VALUE_WEIGHT`. The target: its values and its missing cells,
   weighed by :data:`TARGET_WEIGHT` (a named ``positive_label`` is public and always a class).
   L2 sensitivity sqrt((2 + VALUE_WEIGHT²) × features + TARGET_WEIGHT²). The threshold's
   tail is a delta of its own (``delta_fraction`` of delta), recorded as an approximate
   release.
2. **Bounds**, for the columns the counts say are numeric: a hierarchical histogram
   (:mod:`~rdpgan.privacy.mechanisms.tree`) of each one's values within the bands released in
   1. Its bounds are the ``quantiles`` of the released density: their error is a cell of the
   released bands, whatever the column's span (a year comes back as a year, a latitude as a
   latitude). L2 sensitivity sqrt(levels × numeric columns).

Every decision (kinds, levels, bounds, what is dropped) is post-processing of these two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtri

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.dates import FORMATS, dates_as_days, format_index, has_time, parse_dates
from rdpgan.data.discretize import GRID_LIMIT
from rdpgan.data.schema import Categorical, Schema
from rdpgan.data.target import (
    class_key,
    one_vs_rest,
    one_vs_rest_classes,
    released_classes_only,
)
from rdpgan.errors import UserInputError
from rdpgan.privacy import accountants
from rdpgan.privacy.ledger import Release
from rdpgan.privacy.mechanisms.gaussian import noisy_tables
from rdpgan.privacy.mechanisms.partition import (
    gaussian_partitions,
    gaussian_threshold,
    tail_cost,
)
from rdpgan.privacy.mechanisms.tree import (
    DENSITY_LEVELS,
    level_counts,
    tree_split,
)

SCHEMA_COUNTS = "schema"
SCHEMA_NEW_VALUES = "schema_new_values"
# A column's value profile: each row lands in exactly one of these cells (then one per date
# format of :data:`rdpgan.data.dates.FORMATS`: a date is not text).
PROFILE_CELLS = ("missing", "text", "zero", "integer", "fraction")
# Power-of-two bands 2^e <= |x| < 2^(e+1), e in [LOWEST_BAND, HIGHEST_BAND] (beyond: the end
# band), negative numbers first: 1e-6 to 1e19 either side of 0.
LOWEST_BAND, HIGHEST_BAND = -20, 63
BANDS = HIGHEST_BAND - LOWEST_BAND + 1
# Histograms each feature column adds one count per row to in the first release besides its
# values (profile, band); its values add VALUE_WEIGHT, the target TARGET_WEIGHT to one of its
# cells (its value, or missing).
UNWEIGHED_HISTOGRAMS = 2
# The target's counts (its values, or candidates, and its missing cells: one row adds to one of
# them) are weighed by this much in the same Gaussian draw: its classes then carry 1/weight of
# the noise of the features' profiles, for a sensitivity of sqrt(... + weight^2) instead of
# sqrt(... + 1). The target first: a 6% class of a 2,000-row table clears the
# threshold, and a multi-class target keeps its classes.
TARGET_WEIGHT = 3.0
# A feature's value counts (released values or candidates) are weighed by this much too: its
# levels then carry 1/weight of the noise its profile and bands carry, for a sensitivity of
# sqrt((2 + weight^2) x features + TARGET_WEIGHT^2). A level's threshold matters more than a
# profile cell (read in sums of thousands of rows) or a band (read by its quantiles).
VALUE_WEIGHT = 1.5
# A multi-class target is kept as it is unless its released classes leave out more rows than
# this many stds of the noise (then one-vs-rest around the positive label keeps every row).
# Chosen from the noise alone, on no table: where every class was released, the estimate of
# the rows left out is noise, so it passes k stds with the Gaussian tail's probability, once in
# ~740 runs at 3 stds and once in ~31,600 at 4. (Draws on acs12's train split at a5b8ef4,
# results/zero_config.md, showed the 1 in ~740; they set nothing.) The price: a class truly
# left unreleased whose rows are between 3 and 4 stds is left out of training, not merged.
TARGET_NOISE = 4.0
# Decisions read off a column's noisy counts (post-processing).
EMPTY_SHARE = 0.02  # fewer values than this share of the rows: no numeric range is read
NUMERIC_SHARE = 0.9  # at least this share of the values parse as numbers: numeric
# ...or at least MOSTLY_NUMBERS of them, when released text values (at most MAX_TOKENS, e.g.
# "N", "NA", "-") leave the rest below 1 - NUMERIC_SHARE: numeric, those tokens missing.
MOSTLY_NUMBERS = 0.75
MAX_TOKENS = 3
# An integer column whose 2 to CODE_LEVELS released values hold CODE_COVERAGE of its numbers is
# a code (1 / 2, a month, a count of rooms): categorical over those values.
CODE_LEVELS = 12
CODE_COVERAGE = 0.95
# A categorical column whose released levels leave at least OTHER_SHARE of its values out gets
# a level OTHER for them (a two-valued flag whose rare value is below the threshold stays a
# column; a 50-level state keeps its rare states as one level rather than as missing), and
# OTHER_NOISE stds of the share left out (a difference of two noisy counts) besides, so that a
# constant column does not keep a level of noise. OTHER_SHARE is low: an OTHER few rows hold
# costs little, a column dropped for want of it costs the column.
OTHER_SHARE = 0.01
OTHER_NOISE = 1.0
OTHER = "(other)"
NO_VALUE_RELEASED = "no value released (unique per row, or too rare for the noise)"
FRACTION_SHARE = 0.1  # fewer fractions than this share of the numbers: integer
# Text and dates count toward a column's kind only beyond this many noise stds of their cells.
KIND_NOISE = 2.0
POINT_MASS_SHARE = 0.1  # at least this share of the numbers are 0: 0 gets a code of its own
# A numeric column whose released values (partition selection) hold at least this share of its
# numbers gets a code at each of them, up to MOST_POINT_MASSES (the most frequent): its
# synthetic values land exactly on them (TV16's lemprac, 34 decimals, a quarter of the rows on
# -0.619, came back as 36,125 distinct values). An integer column the generator encodes one
# code per value (GRID_LIMIT) is exact already.
POINT_MASS_COVER = 0.5
# A table without a named target conditions on a released categorical column of at most
# CONDITION_CLASSES values that hold CONDITION_COVER of its rows (:func:`condition_column`).
CONDITION_CLASSES = 12
CONDITION_COVER = 0.95
MOST_POINT_MASSES = 40
# A candidate (or a cell of the bounds' tree) counts where its noisy count clears this many
# noise stds (a public list needs no partition-selection threshold, only to stay above the
# noise).
NOISE_FLOOR = 3.0
# ...and a cell of the bounds' tree where it clears this many: a tail cell under the floor reads
# as empty and its rows go to its sibling, so a floor of 3 clipped up to a fifth of a small
# table's column (acs12's ages under 16); 2 keeps them, and what an empty cell's noise adds is
# kept within reach of the core (:func:`within_reach`). results/tuning_schema.csv, round "tails".
TREE_FLOOR = 2.0
# The share of a numeric column's values its bounds may leave out on each side when
# ``schema.quantiles`` is not set: the first (99.5% kept) where the rows and the noise allow, up
# to the second where one noise std of the bounds' tree is a larger share of the released rows
# (a quantile read finer than the noise would be placed by it).
TAIL_SHARE = (0.0025, 0.01)
# A band counts where its noisy count (or its sum with a neighbour's) clears the std times the
# normal quantile at which, of a column's 2 x BANDS empty bands (and pairs), one clears it by
# noise alone with probability SPURIOUS_BAND: 3 stds would let one of 168 empty bands through
# a fifth of the time, and a spurious band far out would stretch the bounds to it.
SPURIOUS_BAND = 1e-3
# ...and so does a band next to one that counts (in value order, 0 between the signs) whose
# noisy count clears NEAR_BAND_NOISE stds (as each band of a pair must): an empty band beside
# the data that clears it by noise only widens the range the bounds' tree reads, and the tree
# finds no values there; a band of real values the first floor missed keeps them unclipped.
NEAR_BAND_NOISE = 2.0
# The bounds are widened by this share of the span between the two quantiles, each side
# (within the released bands), so that a tail the tree cannot resolve is not all clipped onto
# one value.
BOUND_MARGIN = 0.02
# Mass the bounds' tree spread evenly over a cell wider than the released density's core (its
# REACH_CORE to 1 - REACH_CORE quantiles) is kept within reach of that core
# (:func:`within_reach`): such mass then lies within [min - (max - min), max + (max - min)] of
# the column when the core lies within the data. Mass the tree placed, and a spread cell that
# holds the median, are read as released.
REACH_CORE = 0.1
# A numeric column's bounds are found on a log scale where its bands span more than this ratio
# (all positive): a census income's 1st percentile is then not lost in one linear cell.
LOG_SPAN = 4.0
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
    # The column a run that named no target conditions on (:func:`condition_column`).
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


def value_profile(series: pd.Series) -> np.ndarray:
    """Rows per :data:`PROFILE_CELLS` cell, then per date format. Each row counts in exactly
    one cell."""
    numbers = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
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
    numbers = np.array(pd.to_numeric(series, errors="coerce"), dtype=float)
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
        return bool(self.fraction < FRACTION_SHARE * self.numbers)

    @property
    def zero_mass(self) -> bool:
        return bool(self.zero >= POINT_MASS_SHARE * self.numbers)


@dataclass
class Counts:
    """The first release: per feature column its noisy profile, bands and levels (released
    values or candidates, with noisy counts), and the target's released values."""

    profiles: dict[str, Profile]
    bands: dict[str, np.ndarray]
    levels: dict[str, dict[Any, float]]
    target_missing: float = 0.0

    @property
    def rows(self) -> float:
        """The rows, from every profile at once (each sums them): the median of their totals,
        far less noisy than any one."""
        totals = [p.total for p in self.profiles.values()]
        return float(np.median(totals)) if totals else 0.0

    def rows_std(self, std: float) -> float:
        """The noise std of :attr:`rows` when every count has noise ``std`` (a median's
        sqrt(pi / 2) of a mean's)."""
        if not self.profiles:
            return math.inf
        cells = len(PROFILE_CELLS) + len(FORMATS)
        return std * math.sqrt(cells * math.pi / 2 / len(self.profiles))


def noisy_counts(
    frame: pd.DataFrame,
    features: list[str],
    target: str | None,
    config: SchemaConfig,
    std: float,
    tail: float,
    keys: int,
    rng: np.random.Generator,
) -> Counts:
    """Release 1 (see the module docstring): one Gaussian draw over every dense count (profiles,
    bands, candidate counts, the target's missing cells) and partition selection over the
    values of the columns without candidates, the ``keys`` new keys one row may hold clearing
    their thresholds with probability ``tail`` in all. One row adds one count to each of 3
    histograms per feature and :data:`TARGET_WEIGHT` to one of the target's cells (when the
    run names one)."""
    dense: list[tuple[str, str, np.ndarray]] = []
    sparse: dict[tuple[str, str], float] = {}
    named = [*features, *([target] if target is not None else [])]
    for name in named:
        series = frame[name]
        weight = TARGET_WEIGHT if name == target else VALUE_WEIGHT
        if name == target:
            dense.append((name, "missing", np.array([weight * float(series.isna().sum())])))
        else:
            dense.append((name, "profile", value_profile(series)))
            dense.append((name, "bands", magnitude_bands(series)))
        if name in config.candidates:
            counts = weight * candidate_counts(series, config.candidates[name])
            dense.append((name, "candidates", counts))
        else:
            sparse.update({(name, v): weight * c for v, c in value_counts(series).items()})
    noisy = noisy_tables([counts for *_, counts in dense], std, rng) if dense else []
    kept = {}
    for weight, names in (
        (VALUE_WEIGHT, set(features)),
        (TARGET_WEIGHT, set(named[len(features) :])),
    ):
        part = {key: count for key, count in sparse.items() if key[0] in names}
        threshold = gaussian_threshold(std, tail, keys, weight) if keys else 0.0
        found = gaussian_partitions(part, std, threshold, rng) if part else {}
        kept.update({key: count / weight for key, count in found.items()})
    out = Counts({}, {}, {name: {} for name in named})
    for (name, part, _), values in zip(dense, noisy, strict=True):
        weight = TARGET_WEIGHT if name == target else VALUE_WEIGHT
        if part == "profile":
            out.profiles[name] = Profile.of(values, std)
        elif part == "bands":
            out.bands[name] = values
        elif part == "missing":
            out.target_missing = float(values[0]) / weight
        else:
            floor = NOISE_FLOOR * std
            candidates = config.candidates[name]
            out.levels[name] = {
                c: float(v) / weight for c, v in zip(candidates, values, strict=True) if v >= floor
            }
    for (name, value), count in kept.items():
        out.levels[name][value] = count
    return out


def selected_columns(names: list[str], config: SchemaConfig) -> int:
    """The columns whose values partition selection finds (no candidates): the keys one row
    alone may hold."""
    return sum(1 for name in names if name not in config.candidates)


def tail_share(rows: float, std: float) -> float:
    """The share of a column's values its bounds may leave out each side: one noise ``std`` of
    the released ``rows``, within :data:`TAIL_SHARE`. Post-processing."""
    low, high = TAIL_SHARE
    return float(np.clip(std / max(rows, 1.0), low, high))


def band_range(
    bands: np.ndarray, zeros: float, std: float, quantiles: tuple[float, float]
) -> tuple[float, float] | None:
    """The numbers from the band holding the lower quantile to the one holding the upper, of
    the bands' noisy counts and the noisy count of ``zeros`` between the negative and the
    positive bands (those below :data:`SPURIOUS_BAND`'s floor read as empty: a column whose
    zeros stand out reaches 0); None when no band clears it. Post-processing."""
    # Two tests per band, each at the quantile of SPURIOUS_BAND over all of them: the band
    # alone, and with its upper neighbour (noise sqrt(2) std: a column spread over two bands,
    # each below the floor alone, still counts).
    z = float(-ndtri(SPURIOUS_BAND / (2 * 2 * BANDS)))
    cells = np.insert(bands, BANDS, zeros)
    near_floor = cells >= NEAR_BAND_NOISE * std  # (a pair's band must clear this one alone)
    kept = cells >= z * std
    pairs = cells[:-1] + cells[1:] >= z * math.sqrt(2.0) * std
    kept[:-1] |= pairs & near_floor[:-1]
    kept[1:] |= pairs & near_floor[1:]
    while True:  # out from the bands that clear it, through neighbours above NEAR_BAND_NOISE
        beside = np.zeros_like(kept)
        beside[1:] |= kept[:-1]
        beside[:-1] |= kept[1:]
        near = beside & ~kept & near_floor
        if not near.any():
            break
        kept |= near
    counts = np.where(kept, cells, 0.0)
    if not (counts[:BANDS].any() or counts[BANDS + 1 :].any()):
        return None  # zeros alone are no range
    cumulative = np.cumsum(counts) / counts.sum()
    first = int(np.searchsorted(cumulative, quantiles[0], side="right"))
    last = int(np.searchsorted(cumulative, quantiles[1], side="left"))
    last = min(max(last, first), len(counts) - 1)

    def edges(cell: int) -> tuple[float, float]:
        return (0.0, 0.0) if cell == BANDS else band_edges(cell - (cell > BANDS))

    lo, hi = edges(first)[0], edges(last)[1]
    return (lo, hi) if lo < hi else None


def on_log_scale(lo: float, hi: float) -> bool:
    return lo > 0 and hi > LOG_SPAN * lo


def bound_positions(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Values (finite numbers) as positions in [-1, 1] of [lo, hi] (log scale where
    :func:`on_log_scale`), clipped: the tree's query."""
    if on_log_scale(lo, hi):
        unit = np.log(np.clip(values, lo, hi) / lo) / math.log(hi / lo)
    else:
        unit = (np.clip(values, lo, hi) - lo) / (hi - lo)
    return 2.0 * unit - 1.0


def position_value(position: float, lo: float, hi: float) -> float:
    """The inverse of :func:`bound_positions`."""
    unit = (position + 1.0) / 2.0
    if on_log_scale(lo, hi):
        return float(lo * (hi / lo) ** unit)
    return float(lo + unit * (hi - lo))


def numbers_of(series: pd.Series, profile: Profile) -> np.ndarray:
    """A column's finite numbers, its dates as days in their released format (without its
    zeros when 0 has a code of its own)."""
    if profile.date_format is not None:
        values = parse_dates(series, profile.date_format)
    else:
        values = cell_numbers(series)
    zero_mass = profile.zero_code
    values = values[np.isfinite(values)]
    return values[values != 0] if zero_mass else values


def spread_blocks(spread_from: np.ndarray) -> list[slice]:
    """The coarse cells :func:`~rdpgan.privacy.mechanisms.tree.tree_split` spread mass over
    evenly, as slices of the finest level."""
    cells = len(spread_from)
    assert cells >= 2 and cells & (cells - 1) == 0, "a tree's finest level has 2**levels cells"
    levels = cells.bit_length() - 1
    blocks = []
    for depth in np.unique(spread_from[spread_from < levels]):
        size = 2 ** (levels - depth)
        for block in np.unique(np.nonzero(spread_from == depth)[0] // size):
            blocks.append(slice(block * size, (block + 1) * size))
    return blocks


def quantile_cells(density: np.ndarray, quantiles: tuple[float, float]) -> tuple[int, int]:
    """The cells of two ``quantiles`` of ``density`` (the second no lower than the first)."""
    cumulative = np.cumsum(density)
    low = int(np.searchsorted(cumulative, quantiles[0], side="right"))
    return low, max(int(np.searchsorted(cumulative, quantiles[1], side="left")), low)


def within_reach(density: np.ndarray, spread_from: np.ndarray) -> np.ndarray:
    """``density`` with the mass the tree spread evenly over a cell wider than its core kept
    within reach of that core: the cells c - w to d + w, where c and d are the
    :data:`REACH_CORE` and 1 - REACH_CORE quantiles' cells (w cells apart) once such mass is put
    on its cell's edge nearest the median. Where in its cell such mass lies is not released (a
    latitude's few rows under 42 spread over [41.5, 42); 300 dates' last weeks spread over 16
    months): spread over the whole cell, a bound read in it is placed by the cell's width; all
    put on its inner edge, a tail the tree cannot resolve is clipped. A cell no wider than the
    core, or holding the median, keeps its spread: the tree placed its mass as finely as the
    core's own. Post-processing."""
    median = int(np.searchsorted(np.cumsum(density), 0.5))
    outer = [b for b in spread_blocks(spread_from) if not b.start <= median < b.stop]
    inner_edges = density.copy()
    for block in outer:
        inner_edges[block] = 0.0
    for block in outer:
        inner_edges[block.stop - 1 if block.stop <= median else block.start] += density[block].sum()
    low, high = quantile_cells(inner_edges, (REACH_CORE, 1.0 - REACH_CORE))
    width = high - low + 1
    first, last = max(low - width, 0), min(high + width, len(density) - 1)
    wide = [b for b in outer if b.stop - b.start > width]
    out = density.copy()
    for block in wide:
        out[block] = 0.0
    for block in wide:
        mass = density[block].sum()
        start, stop = max(block.start, first), min(block.stop, last + 1)
        if start < stop:
            out[start:stop] += mass / (stop - start)
        else:  # beyond reach: on its edge
            out[first if block.stop <= median else last] += mass
    return out


def density_bounds(
    density: np.ndarray, lo: float, hi: float, quantiles: tuple[float, float]
) -> tuple[float, float]:
    """The ``quantiles`` of a released density over equal cells of [lo, hi] (its cells' outer
    edges), widened by :data:`BOUND_MARGIN` of their span within [lo, hi]. Post-processing."""
    cells = len(density)
    first, last = quantile_cells(density, quantiles)
    low = position_value(2.0 * first / cells - 1.0, lo, hi)
    high = position_value(2.0 * min(last + 1, cells) / cells - 1.0, lo, hi)
    margin = BOUND_MARGIN * (high - low)
    return max(lo, low - margin), min(hi, high + margin)


def numeric_bounds(
    frame: pd.DataFrame,
    ranges: dict[str, tuple[float, float]],
    profiles: dict[str, Profile],
    quantiles: tuple[float, float] | None,
    noise_multiplier: float,
    rng: np.random.Generator,
) -> dict[str, tuple[float, float]]:
    """Release 2 (see the module docstring): each numeric column's hierarchical histogram within
    its released band range, one Gaussian draw for all (L2 sensitivity sqrt(levels × columns)),
    and the bounds read off it at ``quantiles`` (None: at :func:`tail_share` of its released
    rows), the mass it cannot place kept within reach (:func:`within_reach`)."""
    if not ranges:
        return {}
    tables = [
        table
        for name, (lo, hi) in ranges.items()
        for table in level_counts(
            bound_positions(numbers_of(frame[name], profiles[name]), lo, hi),
            DENSITY_LEVELS,
        )
    ]
    std = noise_multiplier * math.sqrt(DENSITY_LEVELS * len(ranges))
    noisy = noisy_tables(tables, std, rng)
    bounds = {}
    for k, (name, (lo, hi)) in enumerate(ranges.items()):
        # Cells below the noise floor read as empty: the clipped noise of empty cells would
        # otherwise leak mass, level after level, into ranges no value holds.
        levels = [
            np.where(level >= TREE_FLOOR * std, level, 0.0)
            for level in noisy[k * DENSITY_LEVELS : (k + 1) * DENSITY_LEVELS]
        ]
        tail = tail_share(float(levels[0].sum()), std)
        read_at = quantiles or (tail, 1.0 - tail)
        bounds[name] = density_bounds(
            within_reach(*tree_split(levels, std, own=True)), lo, hi, read_at
        )
    return bounds


def is_number(value: str) -> bool:
    """Whether a released value is a finite number, as :func:`value_profile` reads one."""
    number = pd.to_numeric(pd.Series([value], dtype=object), errors="coerce").iloc[0]
    return bool(np.isfinite(number))


def missing_tokens(levels: dict[Any, float]) -> dict[Any, float]:
    """The (at most :data:`MAX_TOKENS`) most frequent released values that are neither
    numbers nor dates."""
    words = [v for v in levels if not is_number(str(v))]
    dates = format_index(pd.Series(words, dtype=object)) >= 0
    text = sorted((v for v, d in zip(words, dates, strict=True) if not d), key=lambda v: -levels[v])
    return {v: levels[v] for v in text[:MAX_TOKENS]}


def column_kind(profile: Profile, levels: dict[Any, float]) -> str:
    """``continuous`` (dates too), ``codes`` or ``categorical``, from a column's released
    profile and values (post-processing; see :data:`NUMERIC_SHARE`, :data:`CODE_LEVELS`)."""
    if profile.date_format is not None:
        return "continuous"
    tokens = sum(missing_tokens(levels).values())
    present = profile.kind_present
    numeric = profile.numbers >= NUMERIC_SHARE * present or (
        profile.numbers >= MOSTLY_NUMBERS * present
        and profile.numbers >= NUMERIC_SHARE * (present - tokens)
    )
    if not numeric:
        return "categorical"
    numbers = [count for value, count in levels.items() if is_number(str(value))]
    codes = (
        profile.is_integer
        and 2 <= len(numbers) <= CODE_LEVELS
        and sum(numbers) >= CODE_COVERAGE * profile.numbers
    )
    return "codes" if codes else "continuous"


def missing_spelling(profile: Profile, levels: dict[Any, float]) -> str | None:
    """How a numeric column's missing values are written: its most frequent released token,
    when it outnumbers the blank cells (None: blank)."""
    tokens = missing_tokens(levels)
    if not tokens:
        return None
    token = max(tokens, key=lambda v: tokens[v])
    return str(token) if tokens[token] > profile.missing else None


def released_point_masses(
    levels: dict[Any, float], profile: Profile, lo: float, hi: float, integer: bool
) -> list[float]:
    """The released values of a numeric column within [lo, hi] that get codes of their own:
    the :data:`MOST_POINT_MASSES` most frequent, when together they hold
    :data:`POINT_MASS_COVER` of its numbers (by noisy counts; none for dates, nor for an
    integer column the generator encodes one code per value). Post-processing."""
    if profile.date_format is not None or (integer and hi - lo + 1 <= GRID_LIMIT):
        return []
    found: dict[float, float] = {}
    for value, count in levels.items():
        number = float(value) if is_number(str(value)) else math.nan
        whole = not integer or number == round(number)  # (a 2.5 in an integer column: no)
        if whole and lo <= number <= hi and not (profile.zero_code and number == 0.0):
            found[number] = found.get(number, 0.0) + count
    top = sorted(found.items(), key=lambda item: -item[1])[:MOST_POINT_MASSES]
    if sum(count for _, count in top) < POINT_MASS_COVER * profile.numbers:
        return []
    return sorted(number for number, _ in top)


def numeric_spec(
    name: str,
    profile: Profile,
    bounds: tuple[float, float],
    missing_as: str | None,
    levels: dict[Any, float],
) -> ColumnSpec:
    """A numeric column's spec: integer-ness and a point mass at 0 from its profile (a date's
    format: whole days, or a time of day), its released bounds (integers outward for an
    integer column; 0 inside with a point mass), and a point mass at each of its released
    ``levels`` where they hold most of it (:func:`released_point_masses`)."""
    lo, hi = bounds
    date_format = profile.date_format
    integer = profile.is_integer if date_format is None else not has_time(date_format)
    zero_mass = profile.zero_code
    if integer:
        lo, hi = math.floor(lo), math.ceil(hi)
    if zero_mass:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
    if not lo < hi:
        hi = lo + 1.0
    masses = released_point_masses(levels, profile, lo, hi, integer)
    wide = lo >= 0 and hi > 100 * max(lo, 1.0) and date_format is None
    return ColumnSpec(
        name,
        "continuous",
        float(lo),
        float(hi),
        integer=integer,
        transform="log1p" if wide else "none",
        missing=True,
        point_masses=sorted({*masses, *([0.0] if zero_mass else [])}),
        unlisted_as_missing=True,
        missing_as=missing_as,
        date_format=date_format,
    )


def unclassed(counts: Counts, classes: dict[Any, float], std: float) -> bool:
    """Whether the released ``classes`` (noise ``std``) leave out more of the rows with a class
    than :data:`TARGET_NOISE` stds of the estimate's noise, or :data:`OTHER_SHARE` of them."""
    noise = math.sqrt(counts.rows_std(std * TARGET_WEIGHT) ** 2 + (1 + len(classes)) * std**2)
    return left_out(classes, counts.rows - counts.target_missing, TARGET_NOISE * noise)


def left_out(found: dict[Any, float], present: float, floor: float) -> bool:
    """Whether released levels (noisy counts ``found``) leave out of the ``present`` values
    :data:`OTHER_SHARE` of them and at least ``floor`` (what the noise could explain)."""
    rest = present - sum(found.values())
    return rest >= max(OTHER_SHARE * present, floor)


def levels_spec(
    name: str,
    found: dict[Any, float],
    present: float,
    absent: float,
    noise: tuple[float, float],
    config: SchemaConfig,
) -> ColumnSpec | str:
    """A categorical column's spec from its released levels (the ``max_levels`` most frequent
    by noisy count, and :data:`OTHER` when they leave out enough of the ``present`` values:
    more than :data:`OTHER_NOISE` stds of what they leave out, ``noise`` being the noise std
    of ``present`` and of each level's count), or why it is dropped (no level released).

    A column mostly missing (fewer ``present`` values than ``absent`` ones, an empty one
    included) whose values are each too rare to be released is kept as whether it holds one:
    :data:`OTHER` or missing (a "miscellaneous feature" few houses have says which houses have
    one; dropped, it would be a column the output lacks)."""
    frequent = sorted(found, key=lambda level: -found[level])[: config.max_levels]
    if not frequent and present < absent:
        return ColumnSpec(name, "categorical", levels=[OTHER], missing=True, other=OTHER)
    if not frequent:  # an identifier, free text: each value too rare to be released
        return NO_VALUE_RELEASED
    kept = {level: found[level] for level in frequent}
    present_noise, level_noise = noise
    rest_noise = math.sqrt(present_noise**2 + len(kept) * level_noise**2)
    beyond_noise = left_out(kept, present, OTHER_NOISE * rest_noise)
    other = OTHER if beyond_noise and OTHER not in map(str, frequent) else None
    # One level is kept too: a near-constant column (a pool area that is 0 in 99.5% of the
    # rows) is written as its one value rather than left out of the output.
    levels = [*sorted(frequent, key=str), *([other] if other else [])]
    return ColumnSpec(
        name,
        "categorical",
        levels=levels,
        missing=True,
        unlisted_as_missing=other is None,
        other=other,
    )


def _quantiles(config: SchemaConfig) -> tuple[float, float] | None:
    """``schema.quantiles``, checked; None when the noise chooses them (:func:`tail_share`)."""
    if config.quantiles is None:
        return None
    lo_q, hi_q = sorted(config.quantiles)
    if not 0.0 <= lo_q < hi_q <= 1.0:
        raise UserInputError("schema.quantiles must be two numbers in [0, 1]")
    return lo_q, hi_q


def private_target(
    frame: pd.DataFrame, dataset: DatasetConfig, counts: Counts, std: float
) -> tuple[pd.DataFrame, list[Any], Any]:
    """(rows, released classes, positive class): the classes are empty when the target was
    collapsed to one-vs-rest around the positive class; the positive class is the released
    spelling of ``dataset.positive_label`` (matched by :func:`class_key`), if given.

    The classes are released like any categorical column's levels (with noisy counts, whose
    noise is ``std``), and all of them are kept when they hold (nearly) every row with a class
    (a multi-class target stays multi-class; evaluation scores the positive one against the
    rest). A named positive label is public: it is a class whether released or not; when it
    was not released, no other class was, or the released ones leave out more rows than the
    noise explains (:func:`unclassed`), the rest become "not" it, so a table is never refused
    for a class too rare to clear the noise and no class's rows are lost. Rows whose class was
    not released (or is missing) are left out, by a rule applied to each row alone; refusing
    instead would tell whether such a row exists.
    """
    released = counts.levels[dataset.target]
    target, positive = dataset.target, dataset.positive_label
    classes = sorted(released, key=str)
    shown = ", ".join(repr(str(c)) for c in classes[:5]) or "none"
    if positive is not None:
        matches = [c for c in classes if class_key(c) == class_key(positive)]
        if len(classes) < 2 or len(matches) != 1 or unclassed(counts, released, std):
            frame = one_vs_rest(frame, target, positive)
            return frame[frame[target].notna()].reset_index(drop=True), [], positive
        positive = matches[0]
    elif len(classes) > 2:
        raise UserInputError(
            f"target {target!r} has {len(classes)} released classes ({shown}); set "
            "dataset.positive_label=CLASS to score CLASS against the rest"
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
        # What candidate_counts will build, built now: a list it refuses (empty, or equal by
        # value) is a settings error, found before anything is paid.
        Categorical(name, tuple(candidates), missing=True, unlisted_as_missing=True)
    for name in ("epsilon_fraction", "delta_fraction"):
        value = getattr(config, name)
        if value is not None and not 0.0 < value < 1.0:
            raise UserInputError(f"schema.{name} must be in (0, 1)")


def counts_sensitivity(features: int, targeted: bool = True) -> float:
    """Release 1's L2 sensitivity: per feature one count in its profile and one in its bands,
    :data:`VALUE_WEIGHT` in its values, and (``targeted``: the run names a target)
    :data:`TARGET_WEIGHT` in one of the target's cells."""
    target = TARGET_WEIGHT**2 if targeted else 0.0
    return math.sqrt((UNWEIGHED_HISTOGRAMS + VALUE_WEIGHT**2) * features + target)


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
    # In rows of a feature's values (a count is weighed by VALUE_WEIGHT before its noise).
    threshold = gaussian_threshold(std, tail, selected, VALUE_WEIGHT) if selected else 0.0
    threshold /= VALUE_WEIGHT
    releases = [
        Release(
            SCHEMA_COUNTS,
            "gaussian",
            sigma,
            1.0,
            2,
            {
                "mechanisms": "gaussian: value profiles, power-of-two bands, candidate counts "
                f"and partition selection over values, weighed by {VALUE_WEIGHT:g} ("
                + (
                    f"the target's by {TARGET_WEIGHT:g}; release 1, sensitivity sqrt("
                    f"{UNWEIGHED_HISTOGRAMS + VALUE_WEIGHT**2:g} x features + "
                    f"{TARGET_WEIGHT**2:g})"
                    if targeted
                    else "no target; release 1, sensitivity sqrt("
                    f"{UNWEIGHED_HISTOGRAMS + VALUE_WEIGHT**2:g} x features)"
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
        frame, classes, positive = private_target(frame, dataset, counts, std / TARGET_WEIGHT)
    specs: dict[str, ColumnSpec] = {}
    dropped: dict[str, str] = {}
    ranges: dict[str, tuple[float, float]] = {}
    for name in features:
        profile, levels = counts.profiles[name], counts.levels[name]
        declared = config.types.get(name, "categorical" if name in config.candidates else None)
        kind = declared or column_kind(profile, levels)
        # Zeros of a column of numbers (with a code of their own, 0 is inside anyway).
        numbers = profile.date_format is None and not profile.zero_code
        zeros = profile.zero if numbers else 0.0
        ranged = kind == "continuous" and not profile.empty
        banded = quantiles or (TAIL_SHARE[0], 1.0 - TAIL_SHARE[0])
        found = band_range(counts.bands[name], zeros, std, banded) if ranged else None
        if found is not None:
            ranges[name] = found
        else:  # categorical, a code, or numbers without a released range
            present, absent = counts.rows - profile.missing, profile.missing
            noise = (math.hypot(counts.rows_std(std), std), std / VALUE_WEIGHT)
            spec = levels_spec(name, levels, present, absent, noise, config)
            if isinstance(spec, str):
                dropped[name] = spec if kind != "continuous" else "no numeric range released"
            else:
                specs[name] = spec
    bounds = numeric_bounds(frame, ranges, counts.profiles, quantiles, sigma, rng)
    for name, found in bounds.items():
        profile, levels = counts.profiles[name], counts.levels[name]
        specs[name] = numeric_spec(name, profile, found, missing_spelling(profile, levels), levels)
    if not targeted:
        target, classes, positive = condition_column(counts, specs)
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


def condition_column(counts: Counts, specs: dict[str, ColumnSpec]) -> tuple[str, list[Any], Any]:
    """(column, classes, positive class) a table without a named target conditions on: of
    the released categorical columns of 2 to :data:`CONDITION_CLASSES` released values that
    hold :data:`CONDITION_COVER` of the rows (a row outside them, or missing, is left out, as
    a target's is), the one whose released counts are most even (normalised entropy: every
    class then has rows to learn from). Its positive class (what evaluation scores) is the
    later of two, or the most frequent. Post-processing of release 1."""
    best: tuple[float, str, list[Any]] | None = None
    for name, spec in specs.items():
        if spec.kind != "categorical":
            continue
        classes = [level for level in spec.levels if level != OTHER]
        found = np.clip([counts.levels[name].get(level, 0.0) for level in classes], 0.0, None)
        if (
            not 2 <= len(classes) <= CONDITION_CLASSES
            or found.sum() < CONDITION_COVER * counts.rows
        ):
            continue
        shares = found / found.sum()
        evenness = float(-(shares * np.log(np.where(shares > 0, shares, 1.0))).sum())
        evenness /= math.log(len(classes))
        if best is None or evenness > best[0]:
            best = (evenness, name, sorted(classes, key=str))
    if best is None:
        raise UserInputError(
            "no released categorical column of 2-12 values holds most rows to condition on: "
            "name the column to condition on with dataset.target=COLUMN"
        )
    _, name, classes = best
    frequent = max(classes, key=lambda level: counts.levels[name].get(level, 0.0))
    return name, classes, classes[-1] if len(classes) == 2 else frequent
