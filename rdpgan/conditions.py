"""Conditional sampling: rows that meet conditions on any columns ("1,000 women", "ages 30 to
40"), from a fitted generator.

A condition on the target is the generator's own: it samples that class. Conditions on other
columns are met by rejection: rows are generated in batches and those that meet every condition
kept, with a bounded effort (:data:`EFFORT` generated rows per row asked for); a condition that
rows meet too rarely is refused with the share they met it at. Post-processing of the
generator: free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from rdpgan.data.schema import Categorical, Schema
from rdpgan.deferred import DeferredModule
from rdpgan.errors import UserInputError

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")

# Generated rows per row asked for, at most, before a condition is refused as too rare.
EFFORT = 200
# Rows generated per batch: at least this many, and at most MAX_BATCH.
MIN_BATCH, MAX_BATCH = 4_096, 1_048_576

RowTest = Callable[["pd.DataFrame"], np.ndarray]  # (a string: pandas loads at first use)


def parse(conditions: Mapping[str, Any], schema: Schema, target: str) -> tuple[Any, list[RowTest]]:
    """(the target's class, or None; a test per other column) from ``conditions``: a level of
    a categorical column, or a number or an inclusive ``(low, high)`` range of a numeric one."""
    label, tests = None, []
    for name, wanted in conditions.items():
        if name not in schema.names:
            raise UserInputError(f"condition on {name!r}: the table has no such column")
        column = schema[name]
        if isinstance(column, Categorical):
            level = _level(column, wanted)
            if name == target:
                label = level
            else:
                tests.append(lambda frame, name=name, level=level: _equal(frame[name], level))
            continue
        low, high = _range(name, wanted)
        tests.append(
            lambda frame, name=name, low=low, high=high: frame[name].between(low, high).to_numpy()
        )
    return label, tests


def _level(column: Categorical, wanted: Any) -> Any:
    """The declared level ``wanted`` names (:meth:`Categorical.level_named`)."""
    level = column.level_named(wanted)
    if level is None:
        raise UserInputError(f"condition on {column.name!r}: {wanted!r} is not one of its levels")
    return level


def _equal(values: pd.Series, level: Any) -> np.ndarray:
    return (values.astype(str) == str(level)).to_numpy()


def _range(name: str, wanted: Any) -> tuple[float, float]:
    if isinstance(wanted, (list, tuple)) and len(wanted) == 2:
        low, high = wanted
    elif isinstance(wanted, (int, float, str)) and not isinstance(wanted, bool):
        low = high = wanted  # (a number, or one as the command line spells it)
    else:
        raise UserInputError(
            f"condition on {name!r}: give a number or a (low, high) range, got {wanted!r}"
        )
    try:
        low, high = float(low), float(high)
    except (TypeError, ValueError) as exc:
        raise UserInputError(f"condition on {name!r}: {wanted!r} holds no numbers") from exc
    if not low <= high:
        raise UserInputError(f"condition on {name!r}: the range {wanted!r} is empty")
    return low, high


def sample_where(
    generate: Callable[[int, int], pd.DataFrame],
    n: int,
    tests: list[RowTest],
    seed: int,
    described: str,
) -> pd.DataFrame:
    """``n`` rows of ``generate(rows, seed)`` that pass every test, in batches sized by the
    share met so far, each from a seed of its own (from ``seed``): the same call gives the same
    rows. Refused once :data:`EFFORT` generated rows per row asked for were not enough."""
    seeds = np.random.SeedSequence([seed, 0xC0D1])
    kept: list[pd.DataFrame] = []
    have = made = 0
    batch = min(max(MIN_BATCH, 2 * n), MAX_BATCH)
    while have < n:
        if made >= EFFORT * n:
            share = have / made
            raise UserInputError(
                f"conditions {described} hold for {share:.3%} of generated rows ({have} of "
                f"{made}): {n} rows would take more than {EFFORT} generated rows each; relax "
                "them or ask for fewer rows"
            )
        frame = generate(batch, int(seeds.spawn(1)[0].generate_state(1)[0]))
        passed = np.logical_and.reduce([test(frame) for test in tests])
        kept.append(frame[passed])
        have, made = have + int(passed.sum()), made + batch
        share = max(have, 1) / made
        batch = min(max(MIN_BATCH, int(1.2 * (n - have) / share)), MAX_BATCH, EFFORT * n)
    return pd.concat(kept, ignore_index=True).head(n)
