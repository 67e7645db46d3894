"""The transformer is reversible, clips to the public bounds and only emits schema levels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from rdpgan.data.schema import Categorical, Continuous, Schema, parsed_numbers
from rdpgan.errors import UserInputError
from rdpgan.privacy.schema.profiles import cell_numbers
from rdpgan.transform import TableTransformer

SCHEMA = Schema(
    [
        Continuous("age", 17, 90, integer=True),
        Continuous("income", 0, 100_000, transform="log1p", missing=True, point_masses=(0.0,)),
        Continuous("score", -100, 100, transform="slog1p"),
        Categorical("colour", ("red", "green", "blue"), missing=True),
        Categorical("flag", (0, 1)),
        Categorical("label", ("no", "yes")),
    ]
)


def table() -> pd.DataFrame:
    return SCHEMA.conform(
        pd.DataFrame(
            {
                "age": [17, 45, 90, 33],
                "income": [0.0, 52_000.5, np.nan, 99_999.0],
                "score": [-99.5, 0.0, 3.25, 42.0],
                "colour": ["red", None, "blue", "green"],
                "flag": [0, 1, 1, 0],
                "label": ["no", "yes", "yes", "no"],
            }
        )
    )


def round_trip(transformer: TableTransformer, frame: pd.DataFrame) -> pd.DataFrame:
    matrix = transformer.encode(frame)
    labels = transformer.encode_labels(frame)
    return transformer.decode_parts(
        transformer.within_bins(frame), transformer.codes(matrix), labels
    )


def test_round_trip_restores_values_order_and_dtypes():
    frame = table()
    transformer = TableTransformer(SCHEMA, "label")
    matrix = transformer.encode(frame)
    assert matrix.shape == (4, transformer.width)
    assert set(np.unique(matrix)) == {0.0, 1.0}  # one-hot blocks only
    back = round_trip(transformer, frame)
    assert list(back.columns) == SCHEMA.names
    assert back.dtypes.astype(str).to_dict() == SCHEMA.dtypes()
    # Up to the margin that keeps a decoded value off its bin's edges (1e-6 of a bin).
    pd.testing.assert_frame_equal(back, frame, check_exact=False, rtol=1e-4, atol=1e-5)


def test_out_of_bounds_values_are_clipped_to_the_declared_bounds():
    frame = table()
    frame.loc[0, "age"] = 150
    frame.loc[1, "score"] = -1e6
    back = round_trip(TableTransformer(SCHEMA, "label"), frame)
    assert back.loc[0, "age"] == 90
    assert back.loc[1, "score"] == pytest.approx(-100)


def test_decode_of_arbitrary_generator_output_only_yields_schema_levels():
    transformer = TableTransformer(SCHEMA, "label")
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(200, transformer.width)) * 3
    back = transformer.decode(matrix, rng.integers(0, 2, size=200))
    assert set(back["colour"].dropna()) <= {"red", "green", "blue"}
    assert set(back["flag"]) <= {0, 1}
    assert back["age"].between(17, 90).all()
    assert back["income"].dropna().between(0, 100_000).all()


def test_arrow_decoding_is_the_same_table_with_missing_as_null():
    """What files are written from (Arrow) against what the API returns (pandas), on codes
    that reach every level, point mass and 'missing', and codes past the levels."""
    transformer = TableTransformer(SCHEMA, "label")
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(500, transformer.width)) * 3
    codes = transformer.codes(matrix)
    values = rng.uniform(-1.0, 1.0, (500, len(transformer.wide_columns)))
    labels = rng.integers(0, 2, size=500)
    frame = transformer.decode_parts(values, codes, labels)
    table = transformer.decode_arrow(values, codes, labels)
    assert table.column_names == SCHEMA.names
    assert frame["colour"].isna().any() and frame["income"].isna().any()
    for name in SCHEMA.names:  # missing is null in Arrow (NaN or None in pandas)
        dtype = frame[name].dtype
        expected = pa.string() if dtype.kind == "O" else pa.from_numpy_dtype(dtype)
        assert table[name].type == expected
        assert table[name].to_pylist() == [None if pd.isna(v) else v for v in frame[name]]


def test_undeclared_level_and_undeclared_missing_are_rejected():
    frame = table().astype({"colour": object})
    frame.loc[0, "colour"] = "purple"
    with pytest.raises(UserInputError, match="not a declared level") as refused:
        SCHEMA.conform(frame)
    assert "purple" not in str(refused.value)  # a private cell is never quoted
    with pytest.raises(UserInputError, match="missing"):
        SCHEMA.conform(table().assign(age=[17, None, 30, 40]))


def test_a_column_is_coded_as_its_cells_are_each_alone_and_refused_at_its_first_defect():
    """Each distinct value is looked up once: every row still gets the code its cell gets on
    its own (text, pandas' text dtypes, numbers as levels, mixed objects), and a refused
    column names the defect of its first defective row, as reading row by row does."""
    cells = ["a", "b", "z", None, np.nan, "1", "1.0", 1, 1.0, True, ""]
    picks = np.random.default_rng(0).integers(0, len(cells), 500)
    columns = [
        Categorical("c", ("a", "b", "1", "True"), missing=True, unlisted_as_missing=True),
        Categorical("c", ("a", "b"), missing=True, other="b"),
        Categorical("n", (1, 2.5), missing=True, unlisted_as_missing=True),
    ]
    for column in columns:
        alone = [int(column.encode(pd.Series([cell], dtype=object))[0]) for cell in cells]
        for dtype in (object, "str", "string[pyarrow]"):
            kept = [i for i in picks if dtype is object or isinstance(cells[i], str)]
            series = pd.Series([cells[i] for i in kept], dtype=dtype)
            expected = [alone[i] for i in kept]
            assert column.encode(series).tolist() == expected, (column, dtype)
    strict = Categorical("c", ("a", "b"))  # neither missing nor unlisted values
    for first, message in ((None, "missing values"), ("z", "not a declared level")):
        for dtype in (object, "str"):
            series = pd.Series(["a"] * 50 + [first] + ["b", "z", None] * 20, dtype=dtype)
            with pytest.raises(UserInputError, match=message):
                strict.encode(series)


def test_text_is_read_as_numbers_once_per_distinct_cell_as_each_cell_alone(monkeypatch):
    """parsed_numbers hands pandas each distinct text once (a million cells take a third of a
    second), and each cell reads as it reads alone, in each of pandas' text dtypes."""
    cells = ["1", " 1", "+1", "-0", "1e400", "inf", "nan", "", "1_000", "1.5", "x", None]
    picks = np.random.default_rng(0).integers(0, len(cells), 2000)
    to_numeric, lengths = pd.to_numeric, []

    def counted(values, *args, **kwargs):
        lengths.append(len(values))
        return to_numeric(values, *args, **kwargs)

    for dtype in ("str", "string[pyarrow]", object):
        one = [to_numeric(pd.Series([cell], dtype=dtype), errors="coerce") for cell in cells]
        alone = [number.to_numpy(float, na_value=np.nan)[0] for number in one]
        lengths.clear()
        with monkeypatch.context() as patch:
            patch.setattr(pd, "to_numeric", counted)
            numbers = parsed_numbers(pd.Series([cells[i] for i in picks], dtype=dtype))
        np.testing.assert_array_equal(numbers, np.array([alone[i] for i in picks], dtype=float))
        assert lengths == [len(cells) - 1], dtype  # the missing cell is no text to parse
    # Other columns as pandas reads them, into an array of their own (callers fill in dates).
    for other in (pd.Series(["2020-01-02", "1"], dtype="category"), pd.Series(["a", 1, 2.5])):
        numbers = parsed_numbers(other)
        expected = to_numeric(other, errors="coerce").to_numpy(float, na_value=np.nan)
        np.testing.assert_array_equal(numbers, expected)
        assert numbers.flags.writeable
    np.testing.assert_array_equal(
        cell_numbers(pd.Series(["2020-01-02", "1"], dtype="category")), [18263.0, 1.0]
    )


def test_non_numeric_value_in_continuous_column_is_rejected():
    frame = table().astype({"score": object})
    frame.loc[2, "score"] = "lots"
    with pytest.raises(UserInputError, match="not a number") as refused:
        SCHEMA.conform(frame)
    assert "lots" not in str(refused.value)  # a private cell is never quoted


def test_schema_round_trips_through_its_json_specs():
    again = Schema.from_specs(SCHEMA.to_specs())
    assert again.columns == SCHEMA.columns


def test_point_masses_and_missing_get_their_own_codes_and_come_back_exactly():
    frame = table()
    transformer = TableTransformer(SCHEMA, "label", n_bins=100)
    matrix = transformer.encode(frame)
    codes = transformer.codes(matrix)[:, 1]  # income: 100 bins, then 0, then missing
    assert codes.tolist() == [100, 94, 101, 99]  # log1p(52000.5) / log1p(1e5) = 0.943
    back = transformer.decode(matrix, transformer.encode_labels(frame))
    assert back.loc[0, "income"] == 0.0 and np.isnan(back.loc[2, "income"])
    # A generator that picks the point-mass code yields exactly the mass, whatever its position.
    block = transformer.spans[1]
    assert block.end - block.start == 102
    matrix[:, block.start : block.end] = 0.0
    matrix[:, block.start + 100] = 1.0
    codes = transformer.codes(matrix)
    anywhere = np.full((4, len(transformer.wide_columns)), 0.37)
    decoded = transformer.decode_parts(anywhere, codes, np.zeros(4, dtype=int))
    assert (decoded["income"] == 0.0).all()


def test_small_integer_ranges_get_one_code_per_value_and_no_offset():
    """Spikes on integer codes (40 hours a week) must be representable exactly."""
    transformer = TableTransformer(SCHEMA, "label", n_bins=100)
    age = transformer.spans[0]
    assert age.end - age.start == 90 - 17 + 1
    assert transformer.wide_columns == ["income", "score"]  # age needs no position
    wide = Schema([Continuous("count", 0, 500, integer=True), Categorical("label", ("a", "b"))])
    spans = TableTransformer(wide, "label", n_bins=10).spans  # 501 values: more than 100: binned
    assert [s.end - s.start for s in spans] == [10]


def test_wide_columns_are_cut_at_equal_released_mass_and_decoded_inside_it():
    """With a released density, a wide column's bins hold equal released mass, and sampled
    numbers fall where the density puts them: here all of income's mass is in one cell of
    1,024, so every income decoded in the bin holding it lies in that cell, whatever its
    position."""
    density = np.zeros(1024)
    density[700] = 1.0  # log1p income in [700/1024, 701/1024) of log1p(1e5): 3,000 to 3,040
    transformer = TableTransformer(SCHEMA, "label", n_bins=8, densities={"income": density})
    bins = transformer.bins["income"]
    assert bins.n_values == 2  # one cut only: the cell holds every share of the mass
    rng = np.random.default_rng(0)
    codes = np.zeros((1000, 5), dtype=np.int64)
    codes[:, 1] = rng.integers(0, bins.n_values, 1000)
    values = rng.uniform(-1.0, 1.0, (1000, 2))
    income = transformer.decode_parts(values, codes, np.zeros(1000, dtype=int))["income"]
    lo, hi = np.expm1(np.log1p(1e5) * np.array([700, 701]) / 1024)
    inside = income[codes[:, 1] == 0]
    assert len(inside) > 400 and inside.between(lo, hi).all()
    with pytest.raises(ValueError, match="not binned"):
        TableTransformer(SCHEMA, "label", n_bins=100, densities={"age": density})


def test_point_mass_outside_the_bounds_is_refused():
    with pytest.raises(UserInputError, match="point masses"):
        Continuous("x", 1, 10, point_masses=(0.0,))


def test_nullable_integers_are_written_as_integers():
    """An integer column that may be missing is held as floats (NaN), and written as integers
    (an age as 58, not 58.0) by the CSV and the Arrow writers alike; other columns as they are."""
    schema = Schema.from_specs(
        [
            {
                "name": "age",
                "kind": "continuous",
                "lo": 0,
                "hi": 100,
                "integer": True,
                "missing": True,
            },
            {"name": "x", "kind": "continuous", "lo": 0, "hi": 1, "missing": True},
        ]
    )
    frame = pd.DataFrame({"age": [58.0, np.nan, 9.0], "x": [0.5, 0.25, np.nan]})
    assert schema.written(frame).to_csv(index=False) == "age,x\n58,0.5\n,0.25\n9,\n"
    table = schema.written_arrow(pa.Table.from_pandas(frame))
    assert table["age"].type == pa.int64() and table["age"].to_pylist() == [58, None, 9]
    assert table["x"].to_pylist() == [0.5, 0.25, None]


def test_a_numeric_categorical_decodes_its_missing_code_to_null_in_arrow():
    """Its levels are numbers (a float column, missing as NaN in pandas): in Arrow the missing
    code is null, not the 0.0 its cells hold under the mask."""
    column = Categorical("n", (1, 2, 5), missing=True)
    codes = np.array([0, 3, 2, 1, 3, 0, 2, 3, 1])
    arrow_values = column.decode_arrow(codes).to_pylist()
    pandas_values = column.decode(codes).tolist()
    assert arrow_values == [None if np.isnan(v) else v for v in pandas_values]
    assert arrow_values[1] is None and arrow_values[0] == 1.0
