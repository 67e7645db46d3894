"""What each column becomes in a ``schema=private`` schema, read off the two releases of
:mod:`rdpgan.privacy.private_schema` (post-processing): its kind (:func:`column_kind`), a
numeric column's spec (:func:`numeric_spec`), a categorical one's levels
(:func:`levels_spec`), the target's classes (:func:`private_target`), or the column a table
without a target conditions on (:func:`condition_column`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from rdpgan.config import ColumnSpec, DatasetConfig, SchemaConfig
from rdpgan.data.dates import format_index, has_time
from rdpgan.data.discretize import GRID_LIMIT
from rdpgan.data.target import class_key, one_vs_rest, released_classes_only
from rdpgan.errors import UserInputError
from rdpgan.privacy.schema import counts as schema_counts
from rdpgan.privacy.schema import profiles as schema_profiles
from rdpgan.privacy.schema.counts import Counts
from rdpgan.privacy.schema.profiles import Profile, is_number

# A multi-class target is kept as it is unless its released classes leave out more rows than
# this many stds of the noise (then one-vs-rest around the positive label keeps every row).
# Chosen from the noise alone, on no table: where every class was released, the estimate of
# the rows left out is noise, so it passes k stds with the Gaussian tail's probability, once in
# ~740 runs at 3 stds and once in ~31,600 at 4. (Draws on acs12's train split at a5b8ef4,
# results/zero_config.md, showed the 1 in ~740; they set nothing.) The price: a class truly
# left unreleased whose rows are between 3 and 4 stds is left out of training, not merged.
TARGET_NOISE = 4.0
# A column is numeric where :data:`~rdpgan.privacy.schema.profiles.NUMERIC_SHARE` of its values
# parse as numbers, or at least MOSTLY_NUMBERS of them, when released text values (at most
# MAX_TOKENS, e.g. "N", "NA", "-") leave the rest below 1 - NUMERIC_SHARE: numeric, those tokens
# missing.
MOSTLY_NUMBERS = 0.75
MAX_TOKENS = 3
# An integer column whose 2 to CODE_LEVELS released values hold CODE_COVERAGE of its numbers is
# a code (1 / 2, a month, a count of rooms): categorical over those values, its other values
# read as missing; unless they leave out enough of its numbers for an OTHER level (needs_other,
# on its numbers). Such a column stays numeric, each released value exact: an OTHER level would
# write text into a column of numbers (lending_club's inquiries in 12 months, 0 to 32, released
# 0 to 8 and "(other)" for 2.4% of its rows). The test is OTHER's own (1 std of the noise): at
# 3, a real tail of 2.5% read as a code's missing values.
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
# A numeric column whose released values (partition selection) hold at least this share of its
# numbers gets a code at each of them, up to MOST_POINT_MASSES (the most frequent): its
# synthetic values land exactly on them (TV16's lemprac, 34 decimals, a quarter of the rows on
# -0.619, came back as 36,125 distinct values). An integer column the generator encodes one
# code per value (GRID_LIMIT) is exact as long as it stays so.
POINT_MASS_COVER = 0.5
# Any released value that alone holds this share of a numeric column's numbers gets a code of
# its own, also in an integer column coded one code per value: where the noise makes
# rdpgan.resolution cut such a column into bins (at least its MIN_BINS = 20, each about 5% of
# the rows), a spike larger than a bin would be spread over the bin's values (acs12's hours a
# week, 44% of workers on 40, at epsilon 1).
SPIKE_SHARE = 0.05
# A table without a named target conditions on a released categorical column of at most
# CONDITION_CLASSES values that hold CONDITION_COVER of its rows, short of CONDITION_NOISE
# stds of the noise of what they leave out (:func:`condition_column`): a noisy row count
# 2.5 stds high must not rule out a column that holds every row.
CONDITION_CLASSES = 12
CONDITION_COVER = 0.95
CONDITION_NOISE = 2.0
MOST_POINT_MASSES = 40
# A released value that holds more than this share of a numeric column's numbers (a test's Ct
# value, 45 for 94% of the tests: the negative ones) is left out of the rows its bounds are read
# from, as 0 is where it has a code of its own, and the bounds then reach it: within it, the
# core the bounds keep the rest near was one cell wide, and the rest (the positive tests' Ct
# values, 14 to 44) was clipped onto 44.
SPIKE_CORE = 0.5


def missing_tokens(levels: dict[Any, float]) -> dict[Any, float]:
    """The (at most :data:`MAX_TOKENS`) most frequent released values that are neither
    numbers nor dates."""
    words = [v for v in levels if not is_number(str(v))]
    dates = format_index(pd.Series(words, dtype=object)) >= 0
    text = sorted((v for v, d in zip(words, dates, strict=True) if not d), key=lambda v: -levels[v])
    return {v: levels[v] for v in text[:MAX_TOKENS]}


def column_kind(profile: Profile, levels: dict[Any, float], level_noise: float = 0.0) -> str:
    """``continuous`` (dates too), ``codes`` or ``categorical``, from a column's released
    profile and values, whose counts' noise std is ``level_noise`` (post-processing; see
    :data:`~rdpgan.privacy.schema.profiles.NUMERIC_SHARE`, :data:`CODE_LEVELS`)."""
    if profile.date_format is not None:
        return "continuous"
    tokens = sum(missing_tokens(levels).values())
    present = profile.kind_present
    numeric = profile.numbers >= schema_profiles.NUMERIC_SHARE * present or (
        profile.numbers >= MOSTLY_NUMBERS * present
        and profile.numbers >= schema_profiles.NUMERIC_SHARE * (present - tokens)
    )
    if not numeric:
        return "categorical"
    numbers = {value: count for value, count in levels.items() if is_number(str(value))}
    codes = (
        profile.is_integer
        and 2 <= len(numbers) <= CODE_LEVELS
        and sum(numbers.values()) >= CODE_COVERAGE * profile.numbers
        and not needs_other(numbers, profile.numbers, (profile.numbers_noise, level_noise))
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


def released_numbers(
    levels: dict[Any, float], profile: Profile, integer: bool
) -> dict[float, float]:
    """A numeric column's released values as numbers, with their noisy counts (spellings of one
    number summed; whole numbers only in an integer column; 0 left out where it has a code of
    its own). Post-processing."""
    found: dict[float, float] = {}
    for value, count in levels.items():
        number = float(value) if is_number(str(value)) else math.nan
        # (A token such as "N" is no number; a 2.5 in an integer column is no whole one.)
        whole = math.isfinite(number) and (not integer or number == round(number))
        if whole and not (profile.zero_code and number == 0.0):
            found[number] = found.get(number, 0.0) + count
    return found


def spike(levels: dict[Any, float], profile: Profile) -> float | None:
    """The released value most of a numeric column's numbers hold (more than
    :data:`SPIKE_CORE` of them; none for dates), which its bounds are read without
    (:func:`rdpgan.privacy.schema.bounds.numeric_bounds`). Post-processing."""
    if profile.date_format is not None:
        return None
    found = released_numbers(levels, profile, profile.is_integer)
    value = max(found, key=lambda number: found[number], default=None)
    return value if value is not None and found[value] > SPIKE_CORE * profile.numbers else None


def released_point_masses(
    levels: dict[Any, float], profile: Profile, lo: float, hi: float, integer: bool
) -> list[float]:
    """The released values of a numeric column within [lo, hi] that get codes of their own:
    the :data:`MOST_POINT_MASSES` most frequent, when together they hold
    :data:`POINT_MASS_COVER` of its numbers, and else (or in an integer column the generator
    may code one code per value) those that alone hold :data:`SPIKE_SHARE` of them; by noisy
    counts, none for dates. Post-processing."""
    if profile.date_format is not None:
        return []
    found = {
        number: count
        for number, count in released_numbers(levels, profile, integer).items()
        if lo <= number <= hi
    }
    top = sorted(found.items(), key=lambda item: -item[1])[:MOST_POINT_MASSES]
    per_value = integer and hi - lo + 1 <= GRID_LIMIT
    if per_value or sum(count for _, count in top) < POINT_MASS_COVER * profile.numbers:
        top = [(number, count) for number, count in top if count >= SPIKE_SHARE * profile.numbers]
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
    ``levels`` that hold most of it, or alone a share of it (:func:`released_point_masses`)."""
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
    weight = schema_counts.TARGET_WEIGHT
    noise = math.sqrt(counts.rows_std(std * weight) ** 2 + (1 + len(classes)) * std**2)
    return left_out(classes, counts.rows - counts.target_missing, TARGET_NOISE * noise)


def left_out(found: dict[Any, float], present: float, floor: float) -> bool:
    """Whether released levels (noisy counts ``found``) leave out of the ``present`` values
    :data:`OTHER_SHARE` of them and at least ``floor`` (what the noise could explain)."""
    rest = present - sum(found.values())
    return rest >= max(OTHER_SHARE * present, floor)


def needs_other(kept: dict[Any, float], present: float, noise: tuple[float, float]) -> bool:
    """Whether the ``kept`` levels (noisy counts) leave out of the ``present`` values enough for
    a level :data:`OTHER`: :data:`OTHER_SHARE` of them, and more than :data:`OTHER_NOISE` stds
    of what they leave out (``noise``: the std of ``present`` and of each level's count)."""
    present_noise, level_noise = noise
    rest_noise = math.sqrt(present_noise**2 + len(kept) * level_noise**2)
    return left_out(kept, present, OTHER_NOISE * rest_noise)


def code_present(profile: Profile, level_noise: float) -> tuple[float, tuple[float, float]]:
    """(The values a code's levels are read against, their noise and each level's): its numbers
    and its text beyond the noise, as :func:`column_kind` read them, so that a code whose
    released values leave none of its numbers out gets no :data:`OTHER` by the noise of another
    count, while unreleased text, or values cut by ``max_levels``, still get one."""
    present = profile.numbers + profile.beyond_noise(profile.text)
    return present, (math.hypot(profile.numbers_noise, profile.noise), level_noise)


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
    beyond_noise = needs_other(kept, present, noise)
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


def condition_column(
    counts: Counts, specs: dict[str, ColumnSpec], noise: tuple[float, float]
) -> tuple[str, list[Any], Any]:
    """(column, classes, positive class) a table without a named target conditions on: of
    the released categorical columns of 2 to :data:`CONDITION_CLASSES` released values that
    hold :data:`CONDITION_COVER` of the rows (a row outside them, or missing, is left out, as
    a target's is) but for :data:`CONDITION_NOISE` stds of the noise (``noise``: the row
    count's std and each value count's), the one whose released counts are most even
    (normalised entropy: every class then has rows to learn from). Its positive class (what
    evaluation scores) is the later of two, or the most frequent. Post-processing of
    release 1."""
    rows_noise, level_noise = noise
    best: tuple[float, str, list[Any]] | None = None
    for name, spec in specs.items():
        if spec.kind != "categorical":
            continue
        classes = [level for level in spec.levels if level != OTHER]
        found = np.clip([counts.levels[name].get(level, 0.0) for level in classes], 0.0, None)
        rest_noise = math.sqrt(rows_noise**2 + len(classes) * level_noise**2)
        slack = (1.0 - CONDITION_COVER) * counts.rows + CONDITION_NOISE * rest_noise
        if not 2 <= len(classes) <= CONDITION_CLASSES or counts.rows - found.sum() > slack:
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
