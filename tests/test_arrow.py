"""Arrow arrays from numpy buffers (rdpgan.arrow) are the arrays pyarrow.array makes."""

import numpy as np
import pyarrow as pa
import pytest

from rdpgan import arrow


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float64", "float32"])
@pytest.mark.parametrize("length", [0, 1, 8, 9, 1000])
def test_numbers_are_pyarrows_array_with_the_same_nulls(dtype, length):
    rng = np.random.default_rng(length)
    values = rng.integers(0, 100, length).astype(dtype)
    missing = rng.random(length) < 0.3
    made = arrow.numbers(values, missing)
    assert made.equals(pa.array(values, mask=missing))
    assert made.type == pa.from_numpy_dtype(np.dtype(dtype))
    assert made.null_count == missing.sum()
    assert arrow.numbers(values).equals(pa.array(values))
    assert arrow.numbers(values, np.zeros(length, bool)).null_count == 0


def test_numbers_read_a_strided_or_big_endian_column_and_refuse_what_is_not_one():
    matrix = np.arange(12.0).reshape(4, 3)
    assert arrow.numbers(matrix[:, 1]).to_pylist() == [1.0, 4.0, 7.0, 10.0]
    assert arrow.numbers(np.arange(5, dtype=">f8")).to_pylist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    for bad in (matrix, np.array(["a"], dtype=object), np.array([True]), np.float64(1.0)):
        with pytest.raises(ValueError):
            arrow.numbers(bad)
    with pytest.raises(ValueError):
        arrow.numbers(np.arange(3.0), np.zeros(2, bool))


@pytest.mark.parametrize(
    "texts", [[], [None], ["a"], ["ab", None, "dé", "", "x" * 300, None, "z", "q", "9"]]
)
def test_strings_are_pyarrows_array_and_take_by_code(texts):
    made = arrow.strings(texts)
    assert made.equals(pa.array(texts, pa.string()))
    if texts:
        codes = np.array([len(texts) - 1, 0, 0, len(texts) - 1])
        assert made.take(arrow.numbers(codes)).to_pylist() == [texts[c] for c in codes]
