"""Release 1 of ``schema=private``: counts over every column at once. Per feature column,
three histograms that one row adds one count to each: its value profile (missing / text /
zero / integer / fraction), the values it holds (Gaussian partition selection,
:mod:`~rdpgan.privacy.mechanisms.partition`: a value is released when its noisy count clears a
threshold; with ``schema.candidates``, counts of the public candidates), and the signed
power-of-two band of its number; its values weighed by :data:`VALUE_WEIGHT`. The target: its
values and its missing cells, weighed by :data:`TARGET_WEIGHT` (a named ``positive_label`` is
public and always a class). L2 sensitivity sqrt((2 + VALUE_WEIGHT²) × features +
TARGET_WEIGHT²). The threshold's tail is a delta of its own (``delta_fraction`` of delta),
recorded as an approximate release by :mod:`rdpgan.privacy.private_schema`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rdpgan.config import SchemaConfig
from rdpgan.data.dates import FORMATS
from rdpgan.privacy.mechanisms.gaussian import noisy_tables
from rdpgan.privacy.mechanisms.partition import gaussian_partitions, gaussian_threshold
from rdpgan.privacy.schema import profiles as schema_profiles
from rdpgan.privacy.schema.profiles import (
    Profile,
    candidate_counts,
    magnitude_bands,
    value_counts,
    value_profile,
)

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
# A candidate (or a cell of the bounds' tree) counts where its noisy count clears this many
# noise stds (a public list needs no partition-selection threshold, only to stay above the
# noise).
NOISE_FLOOR = 3.0


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
        cells = len(schema_profiles.PROFILE_CELLS) + len(FORMATS)
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


def counts_sensitivity(features: int, targeted: bool = True) -> float:
    """Release 1's L2 sensitivity: per feature one count in its profile and one in its bands,
    :data:`VALUE_WEIGHT` in its values, and (``targeted``: the run names a target)
    :data:`TARGET_WEIGHT` in one of the target's cells."""
    target = TARGET_WEIGHT**2 if targeted else 0.0
    return math.sqrt((UNWEIGHED_HISTOGRAMS + VALUE_WEIGHT**2) * features + target)
