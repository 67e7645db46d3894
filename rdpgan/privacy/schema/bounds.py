"""Release 2 of ``schema=private``, for the columns release 1 says are numeric: a hierarchical
histogram (:mod:`~rdpgan.privacy.mechanisms.tree`) of each one's values within the bands
released in 1 (:func:`band_range`). Its bounds are the ``quantiles`` of the released density:
their error is a cell of the released bands, whatever the column's span (a year comes back as
a year, a latitude as a latitude). L2 sensitivity sqrt(levels × numeric columns).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import ndtri

from rdpgan.data.dates import parse_dates
from rdpgan.privacy.mechanisms.gaussian import noisy_tables
from rdpgan.privacy.mechanisms.tree import DENSITY_LEVELS, level_counts, tree_split
from rdpgan.privacy.schema import profiles as schema_profiles
from rdpgan.privacy.schema.profiles import Profile, band_edges, cell_numbers

# A cell of the bounds' tree counts where its noisy count clears this many noise stds (a
# candidate: :data:`~rdpgan.privacy.schema.counts.NOISE_FLOOR`): a tail cell under the floor
# reads as empty and its rows go to its sibling, so a floor of 3 clipped up to a fifth of a small
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
# (:func:`within_reach`): bounds read in such mass then lie within one range of the data
# (:func:`core_reach`). Mass the tree placed, and a spread cell that holds the median, are read
# as released.
REACH_CORE = 0.1
# Beside a spike (kinds.SPIKE_CORE), the rest of a column's values sets its bounds where their
# released count clears this many noise stds (the first level's two cells, each floored at
# TREE_FLOOR, summed: noise alone passes it about once in 1,700 columns); else the bounds are a
# cell of the tree either side of the spike.
SPIKE_REST_NOISE = 4.0
# A core under 5 cells reaches a cell out only for spread mass beyond this many noise stds of
# the bounds' tree (within_reach).
SPREAD_NOISE = 4.0
# A numeric column's bounds are found on a log scale where its bands span more than this ratio
# (all positive): a census income's 1st percentile is then not lost in one linear cell.
LOG_SPAN = 4.0


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
    BANDS = schema_profiles.BANDS  # read off its module now (tune_schema.py may set it)
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


def numbers_of(series: pd.Series, profile: Profile, spike: float | None = None) -> np.ndarray:
    """A column's finite numbers, its dates as days in their released format (without its
    zeros when 0 has a code of its own, nor its ``spike``)."""
    if profile.date_format is not None:
        values = parse_dates(series, profile.date_format)
    else:
        values = cell_numbers(series)
    values = values[np.isfinite(values)]
    if profile.zero_code:
        values = values[values != 0]
    return values if spike is None else values[values != spike]


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


def core_reach(width: int) -> int:
    """Cells past a core ``width`` cells wide that spread mass is kept within: the most r for
    which the bounds stay within one range of the data, at least one cell.

    In the tree's positions (log values on a log scale), and while the mass spread beyond the
    core is under :data:`REACH_CORE` on each side (more, put on its inner edge, would move the
    core's end cell there): the core's quantiles lie in its end cells, so the data's range is
    more than w - 2 cells; a bound read at the reach's far edge lies at most r + 1 cells beyond
    the data, and :func:`density_bounds` widens it by :data:`BOUND_MARGIN` of the bounds'
    span, at most w + 2r cells. So r + 1 + m (w + 2r) <= w - 2 holds from w = 5 on. A narrower
    core has no reach of its own (0): see :func:`within_reach` for the cell it may read."""
    margin = BOUND_MARGIN
    return max(int((width * (1.0 - margin) - 3.0) // (1.0 + 2.0 * margin)), 0)


def within_reach(
    density: np.ndarray, spread_from: np.ndarray, noise_share: float = 0.0
) -> np.ndarray:
    """``density`` with the mass the tree spread evenly over a cell wider than its core kept
    within reach of that core: the cells c - r to d + r, where c and d are the
    :data:`REACH_CORE` and 1 - REACH_CORE quantiles' cells (w = d - c + 1 cells) once such mass
    is put on its cell's edge nearest the median, and r is :func:`core_reach` of w. A core
    under 5 cells reaches a cell out on a side whose spread cells' mass is more than
    ``noise_share`` of the density (:data:`SPREAD_NOISE` stds of the tree's noise) times the
    root of their number (the noise of their sum: a latitude's low tail,
    spread below a 2-cell core, kept rather than clipped), and keeps the rest on its own end
    cells: ames' longitudes and latitudes (2 to 3 cells of their bands) had a bound 1.1 to 2
    data ranges out in 2 of 40 draws, each from about 3.4 stds of noise a reach of 1 kept.

    Where in its cell such mass lies is not released (a latitude's few rows under 42 spread
    over [41.5, 42); 300 dates' last weeks spread over 16 months): spread over the whole cell,
    a bound read in it is placed by the cell's width; all put on its inner edge, a tail the
    tree cannot resolve is clipped. A cell no wider than the core, or holding the median,
    keeps its spread: the tree placed its mass as finely as the core's own. Post-processing."""
    median = int(np.searchsorted(np.cumsum(density), 0.5))
    outer = [b for b in spread_blocks(spread_from) if not b.start <= median < b.stop]
    inner_edges = density.copy()
    for block in outer:
        inner_edges[block] = 0.0
    for block in outer:
        inner_edges[block.stop - 1 if block.stop <= median else block.start] += density[block].sum()
    low, high = quantile_cells(inner_edges, (REACH_CORE, 1.0 - REACH_CORE))
    width = high - low + 1
    reach = core_reach(width)
    wide = [b for b in outer if b.stop - b.start > width]
    below = [b.stop <= median for b in wide]
    # Each side's spread mass against the noise of as many blocks (a tail spread over several).
    beyond = {
        side: sum(density[b].sum() for b, s in zip(wide, below, strict=True) if s == side)
        > noise_share * math.sqrt(max(below.count(side), 1))
        for side in (True, False)
    }
    out = density.copy()
    for block in wide:
        out[block] = 0.0
    for block, side in zip(wide, below, strict=True):
        mass = density[block].sum()
        cells = max(reach, 1) if beyond[side] else reach
        first, last = max(low - cells, 0), min(high + cells, len(density) - 1)
        start, stop = max(block.start, first), min(block.stop, last + 1)
        if start < stop:
            out[start:stop] += mass / (stop - start)
        else:  # beyond reach: on its edge
            out[first if side else last] += mass
    return out


def density_bounds(
    density: np.ndarray, lo: float, hi: float, quantiles: tuple[float, float]
) -> tuple[float, float]:
    """The ``quantiles`` of a released density over equal cells of [lo, hi] (its cells' outer
    edges), widened by :data:`BOUND_MARGIN` of their span within [lo, hi], in the cells'
    positions (log values on a log scale: in values, the margin would reach far below a
    log-scale column's data and far above it, where :func:`core_reach` counts it in cells).
    Post-processing."""
    cells = len(density)
    first, last = quantile_cells(density, quantiles)
    low, high = 2.0 * first / cells - 1.0, 2.0 * min(last + 1, cells) / cells - 1.0
    margin = BOUND_MARGIN * (high - low)
    low, high = max(low - margin, -1.0), min(high + margin, 1.0)
    return position_value(low, lo, hi), position_value(high, lo, hi)


def spike_cell(spike: float, lo: float, hi: float) -> tuple[float, float]:
    """Bounds for a column that is its spike alone: the spike, a finest cell of the bounds'
    tree over [lo, hi] either side (on the tree's scale: a width that follows the column's, be it
    0.001 or 10^18). Post-processing."""
    cell = 2.0 / 2**DENSITY_LEVELS
    position = float(bound_positions(np.array([spike]), lo, hi)[0])
    low, high = position_value(position - cell, lo, hi), position_value(position + cell, lo, hi)
    return min(low, spike), max(high, spike)


def numeric_bounds(
    frame: pd.DataFrame,
    ranges: dict[str, tuple[float, float]],
    profiles: dict[str, Profile],
    quantiles: tuple[float, float] | None,
    noise_multiplier: float,
    rng: np.random.Generator,
    spikes: dict[str, float] | None = None,
) -> dict[str, tuple[float, float]]:
    """Release 2 (see the module docstring): each numeric column's hierarchical histogram within
    its released band range, one Gaussian draw for all (L2 sensitivity sqrt(levels × columns)),
    and the bounds read off it at ``quantiles`` (None: at :func:`tail_share` of its released
    rows), the mass it cannot place kept within reach (:func:`within_reach`). A column's
    ``spikes`` value (public: released in 1) is left out of its histogram and its bounds reach
    it; they are :func:`spike_cell` where the rest reads as empty (under
    :data:`SPIKE_REST_NOISE` stds)."""
    if not ranges:
        return {}
    spikes = spikes or {}
    tables = [
        table
        for name, (lo, hi) in ranges.items()
        for table in level_counts(
            bound_positions(numbers_of(frame[name], profiles[name], spikes.get(name)), lo, hi),
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
        total, spike = float(levels[0].sum()), spikes.get(name)
        if spike is not None and total < SPIKE_REST_NOISE * std:
            bounds[name] = spike_cell(spike, lo, hi)
            continue
        tail = tail_share(total, std)
        read_at = quantiles or (tail, 1.0 - tail)
        reached = within_reach(
            *tree_split(levels, std, own=True), SPREAD_NOISE * std / max(total, 1.0)
        )
        low, high = density_bounds(reached, lo, hi, read_at)
        bounds[name] = (low, high) if spike is None else (min(low, spike), max(high, spike))
    return bounds
