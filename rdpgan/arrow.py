"""Arrow arrays made from numpy buffers, for writing sampled rows. ``pyarrow.array`` imports
pandas at its first call (pyarrow's pandas shim looks at every input), which was a third of
``python -m rdpgan.sample n=1000``; these hand Arrow the buffers as they are and import
nothing (issue 54)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa


def numbers(values: np.ndarray, missing: np.ndarray | None = None) -> pa.Array:
    """A 1-d integer or float array as an Arrow array of its type, null where ``missing``."""
    if np.ndim(values) != 1 or values.dtype.kind not in "iuf":
        raise ValueError(
            f"expected a 1-d integer or float array, got {values.dtype} {values.shape}"
        )
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))  # Arrow's order
    validity, nulls = _validity(missing, len(values))
    kind = pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(
        kind, len(values), [validity, pa.py_buffer(values)], null_count=nulls
    )


def strings(texts: Sequence[str | None]) -> pa.Array:
    """Strings (None: null) as an Arrow string array: the few levels codes are taken from."""
    encoded = [b"" if text is None else text.encode() for text in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    validity, nulls = _validity(np.array([t is None for t in texts], dtype=bool), len(texts))
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(pa.string(), len(texts), buffers, null_count=nulls)


def _validity(missing: np.ndarray | None, length: int) -> tuple[pa.Buffer | None, int]:
    """Arrow's validity bitmap (one bit a value, least significant first) and null count."""
    if missing is None:
        return None, 0
    missing = np.asarray(missing, dtype=bool)
    if missing.shape != (length,):
        raise ValueError(f"missing has shape {missing.shape}, the values ({length},)")
    nulls = int(missing.sum())
    if nulls == 0:
        return None, 0
    return pa.py_buffer(np.packbits(~missing, bitorder="little")), nulls
