"""Which rows train and which are held out: each row by its own coin.

A row is held out when a keyed hash of its own cells falls below ``test_size``. Membership is
a function of that row alone (and of the public key, ``dataset.split_seed``), so adding or
removing one row of the input table changes the training split by at most that row: the
guarantee of the training split is the guarantee of the table the user handed in. A shuffled
or stratified split would move many rows at once (scikit-learn's ``train_test_split`` of one
more row is another permutation), which no mechanism downstream accounts for.

The hash is BLAKE2b over the row's cells as text, so the split is the same on every machine
and version that reads the file the same way (resume and evaluation rebuild it). Identical
rows land on the same side, which also keeps a duplicate from being both trained on and
scored against. The key is public: whether a given row would be held out is a fact about that
row, not about the table, and the guarantee does not rest on it being secret.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING

import numpy as np

from rdpgan.data.distinct import per_distinct
from rdpgan.deferred import DeferredModule
from rdpgan.errors import UserInputError

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")

_DOMAIN = "rdpgan/split/v1"
# The key of the validation split that tuning scripts cut from a training split.
VALIDATION_KEY = "validation"
_SCALE = float(2**64)


def _cells(column: pd.Series) -> list[str]:
    """A column's cells as the JSON list of a row writes them: missing (None, NaN, NA, NaT) as
    null, else the JSON string of the Python value's text. Each distinct text is encoded once
    (a column repeats its values), and a column of text is read whole (its cells one by one
    cost most of a split)."""
    if isinstance(column.dtype, pd.StringDtype):
        return per_distinct(column, _json_texts, "null").tolist()
    missing = column.isna().tolist()
    values = list(column)  # the scalars itertuples gave (tolist may widen, e.g. float32)
    encoded: dict[str, str] = {}
    cells = []
    for value, gone in zip(values, missing, strict=True):
        if gone:
            cells.append("null")
            continue
        text = str(value)
        cell = encoded.get(text)
        if cell is None:
            cell = encoded[text] = json.dumps(text, ensure_ascii=False)
        cells.append(cell)
    return cells


def _json_texts(texts: pd.Series) -> np.ndarray:
    return np.array([json.dumps(text, ensure_ascii=False) for text in texts], dtype=object)


def row_draws(frame: pd.DataFrame, key: int | str) -> np.ndarray:
    """A number in [0, 1) per row, from that row's cells alone: a keyed BLAKE2b hash of the
    JSON list of its cells (``json.dumps``'s text, its cells' encodings joined as it joins
    them)."""
    hash_key = hashlib.blake2b(f"{_DOMAIN}:{key}".encode(), digest_size=32).digest()
    columns = [_cells(frame.iloc[:, j]) for j in range(frame.shape[1])]
    rows = zip(*columns, strict=True) if columns else ((),) * len(frame)
    digest = functools.partial(hashlib.blake2b, key=hash_key, digest_size=8)
    digests = b"".join(
        digest(("[" + ", ".join(row) + "]").encode("utf-8")).digest() for row in rows
    )
    # Each digest a big-endian 64-bit integer, over 2^64 (float64 of it, correctly rounded).
    return np.frombuffer(digests, dtype=">u8").astype(float) / _SCALE


def check_test_size(test_size: float) -> None:
    if not (isinstance(test_size, (int, float)) and 0.0 <= test_size < 1.0):
        raise UserInputError(f"dataset.test_size must be in [0, 1), got {test_size}")


def split(
    frame: pd.DataFrame, test_size: float, key: int | str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, held out): each row held out when its own draw is below ``test_size`` (0: every
    row trains and none is held out). Only the train part is ever shown to the generator."""
    check_test_size(test_size)
    held_out = row_draws(frame, key) < test_size
    return frame[~held_out].reset_index(drop=True), frame[held_out].reset_index(drop=True)
