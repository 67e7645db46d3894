"""The target column: its classes, one-vs-rest relabelling, and the checks a run needs.

Every rule here is applied to each row on its own (a row's label decides whether it is kept or
how it is relabelled), so one row never changes what happens to another.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rdpgan.data.schema import Categorical, Schema
from rdpgan.errors import UserInputError


def check_target(frame: pd.DataFrame, schema: Schema, target: str) -> None:
    """The target must be a categorical column of at least two classes in the schema, never
    missing in the rows. How many classes the rows hold is never counted: a refusal would
    then tell one row of the rarest class from none (the noisy label counts carry it)."""
    column = schema[target]
    if not isinstance(column, Categorical):
        raise UserInputError(f"target {target!r} must be a categorical column in the schema")
    if len(column.levels) < 2:
        raise UserInputError(f"target {target!r} has a single class; nothing to condition on")
    if frame[target].isna().any():
        raise UserInputError(f"target {target!r} has missing values")


def classes_released(schema: Schema, target: str) -> bool:
    """Whether the target's classes are released values (a paid schema, or the schema.yaml of
    a run that paid for one): its other values read as missing, and no refusal after the
    release may count the rows or their classes."""
    return getattr(schema[target], "unlisted_as_missing", False)


def class_key(value: Any) -> str:
    """A class label's identity when matching ``dataset.positive_label``: numbers by value, and
    text without surrounding spaces or one trailing dot (UCI's test files write ">50K.")."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text[:-1] if text.endswith(".") and len(text) > 1 else text
    return str(int(number)) if number.is_integer() else repr(number)


def matching_class(classes: list[Any], positive: Any) -> Any:
    """The class spelled like ``positive`` (by :func:`class_key`: a label 1 names the class
    read as text "1"), or ``positive`` itself when none is."""
    matches = [c for c in classes if positive is not None and class_key(c) == class_key(positive)]
    return matches[0] if matches else positive


def one_vs_rest_classes(positive: Any) -> list[str]:
    return [str(positive), f"not {positive}"]


def one_vs_rest(frame: pd.DataFrame, target: str, positive: Any) -> pd.DataFrame:
    """The target as two classes: ``positive`` and ``not <positive>`` (a public relabelling),
    matched by :func:`class_key` (1 = 1.0, ">50K." = ">50K")."""
    labels = frame[target]
    matches = labels.map(class_key, na_action="ignore") == class_key(positive)
    out = frame.copy()
    out[target] = np.where(matches, str(positive), f"not {positive}")
    out.loc[labels.isna(), target] = np.nan
    return out


def released_classes_only(frame: pd.DataFrame, target: str, classes: list[Any]) -> pd.DataFrame:
    """The rows whose target is one of ``classes``: a rule applied to each row alone."""
    read = Categorical(target, tuple(classes), missing=True, unlisted_as_missing=True)
    return frame[read.encode(frame[target]) < len(classes)].reset_index(drop=True)
