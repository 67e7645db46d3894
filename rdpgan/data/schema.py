"""The declared public schema: the only source of column domains the generator may use.

Bounds and category lists are public knowledge written down before any private row is read
(DP-SGD protects the rows, not the domains: a domain read off the data would leak its extremes).
A :class:`Schema` validates a DataFrame against itself and casts it to the declared dtypes, so
real and synthetic tables always share one shape.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rdpgan import arrow
from rdpgan.config import ColumnSpec
from rdpgan.data.dates import format_days, parse_dates
from rdpgan.data.distinct import per_distinct
from rdpgan.deferred import DeferredModule
from rdpgan.errors import UserInputError

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = DeferredModule("pandas")

TRANSFORMS = ("none", "log1p", "slog1p")
# Errors about the rows never quote a cell: the console is not covered by the guarantee.
NO_VALUES = " (the value is not shown: it comes from the private rows)"


def parsed_numbers(cells: pd.Series) -> np.ndarray:
    """Each cell as ``pd.to_numeric(errors="coerce")`` reads it, as a float (NaN: no number).
    A column of text is parsed once per distinct cell: a column repeats its values, and a
    million cells take a third of a second to parse."""
    if not _all_text(cells):
        return np.array(_numbers_of(cells))  # a copy of pandas' array: callers write into it
    return per_distinct(cells, _numbers_of, np.nan)


def _numbers_of(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _all_text(series: pd.Series) -> bool:
    """Whether every present cell is a str (pandas' text dtype, or objects that are all text)."""
    if isinstance(series.dtype, pd.StringDtype):
        return True
    return series.dtype == object and pd.api.types.infer_dtype(series, skipna=True) in (
        "string",
        "empty",
    )


def _forward(transform: str, values: np.ndarray) -> np.ndarray:
    if transform == "log1p":
        return np.log1p(np.maximum(values, 0.0))
    if transform == "slog1p":
        return np.sign(values) * np.log1p(np.abs(values))
    return values


def _inverse(transform: str, values: np.ndarray) -> np.ndarray:
    if transform == "log1p":
        return np.expm1(values)
    if transform == "slog1p":
        return np.sign(values) * np.expm1(np.abs(values))
    return values


@dataclass(frozen=True)
class Continuous:
    """A numeric column with public bounds ``[lo, hi]``; values outside are clipped."""

    name: str
    lo: float
    hi: float
    integer: bool = False
    transform: str = "none"
    missing: bool = False
    point_masses: tuple[float, ...] = ()
    unlisted_as_missing: bool = False  # a cell that is not a number reads as missing
    missing_as: str | None = None  # how a missing value is spelled (read and written)
    date_format: str | None = None  # dates in this format, held as days since 1970-01-01

    def __post_init__(self) -> None:
        if (self.unlisted_as_missing or self.missing_as is not None) and not self.missing:
            raise UserInputError(
                f"column {self.name!r}: unlisted_as_missing and missing_as need missing: true"
            )
        if any(not self.lo <= p <= self.hi for p in self.point_masses):
            raise UserInputError(f"column {self.name!r}: point masses must lie within the bounds")
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise UserInputError(f"column {self.name!r}: bounds must satisfy lo < hi")
        if self.transform not in TRANSFORMS:
            raise UserInputError(
                f"column {self.name!r}: unknown transform {self.transform!r} "
                f"(choose from {', '.join(TRANSFORMS)})"
            )
        if self.transform == "log1p" and self.lo < 0:
            raise UserInputError(f"column {self.name!r}: log1p needs lo >= 0")
        # Encoding divides by this width: an infinite one (e.g. bounds of +-1e308) would make
        # values NaN, and one NaN row would reach every sum and clipping factor it enters.
        with np.errstate(over="ignore"):
            lo, hi = self._scaled_bounds()
            width = float(hi - lo)
        if not (math.isfinite(width) and width > 0):
            raise UserInputError(
                f"column {self.name!r}: the bounds [{self.lo:g}, {self.hi:g}] are too far apart "
                "to encode (their width is not a finite number)"
            )

    def parse(self, cells: pd.Series) -> pd.Series:
        """The column's numbers from its cells: dates in ``date_format`` as days, the
        ``missing_as`` token and anything else that is no number as missing. Numbers already
        (rows parsed once, days) are themselves."""
        return self.numbers(self.unspelled(cells))

    def unspelled(self, cells: pd.Series) -> pd.Series:
        """The cells, with the ``missing_as`` token as missing."""
        if self.missing_as is None or pd.api.types.is_numeric_dtype(cells):
            return cells
        return cells.where(cells.astype(str).str.strip() != self.missing_as)

    def numbers(self, cells: pd.Series) -> pd.Series:
        """Cells without a missing token as numbers (dates as days; anything else missing)."""
        if pd.api.types.is_numeric_dtype(cells):
            return cells.astype(float)
        if self.date_format is not None:
            return pd.Series(parse_dates(cells, self.date_format), index=cells.index)
        return pd.to_numeric(cells, errors="coerce")

    def written(self, values: pd.Series) -> pd.Series:
        """The column as a CSV holds it: dates in their format, missing as ``missing_as``."""
        if self.date_format is not None:
            text = format_days(values.to_numpy(dtype=float), self.date_format)
            values = pd.Series(text.to_numpy(), index=values.index, dtype=object)
        if self.missing_as is None:
            return values
        return values.astype(object).where(values.notna(), self.missing_as)

    def _scaled_bounds(self) -> np.ndarray:
        """The bounds after the public transform: what [-1, 1] is mapped onto."""
        return _forward(self.transform, np.array([self.lo, self.hi], dtype=float))

    def to_unit(self, values: np.ndarray) -> np.ndarray:
        """Map values into [-1, 1] through the public transform and bounds (clipping)."""
        lo, hi = self._scaled_bounds()
        scaled = (_forward(self.transform, np.clip(values, self.lo, self.hi)) - lo) / (hi - lo)
        return np.clip(2.0 * scaled - 1.0, -1.0, 1.0)

    def from_unit(self, unit: np.ndarray) -> np.ndarray:
        lo, hi = self._scaled_bounds()
        values = _inverse(self.transform, (np.clip(unit, -1.0, 1.0) + 1.0) / 2.0 * (hi - lo) + lo)
        values = np.clip(values, self.lo, self.hi)
        return np.round(values) if self.integer else values

    @property
    def dtype(self) -> str:
        # pandas cannot hold NaN in int64, so a nullable integer column is float64 (as read_csv).
        return "int64" if self.integer and not self.missing else "float64"


@dataclass(frozen=True)
class Categorical:
    """A column whose public levels are listed; a missing value is its own extra level."""

    name: str
    levels: tuple[Any, ...]
    missing: bool = False
    unlisted_as_missing: bool = False
    other: str | None = None  # the level an unlisted value reads as

    def __post_init__(self) -> None:
        if len(self.levels) == 0:
            raise UserInputError(f"column {self.name!r}: a categorical column needs levels")
        if self.unlisted_as_missing and not self.missing:
            raise UserInputError(f"column {self.name!r}: unlisted_as_missing needs missing: true")
        if len(set(self.levels)) != len(self.levels):
            raise UserInputError(f"column {self.name!r}: levels must be distinct")
        if self.other is not None and (
            self.unlisted_as_missing or self.numeric or self.other not in map(str, self.levels)
        ):
            raise UserInputError(
                f"column {self.name!r}: other must be one of the levels (not all numbers), "
                "without unlisted_as_missing"
            )

    @property
    def numeric(self) -> bool:
        return all(
            isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
            for v in self.levels
        )

    def level_named(self, value: Any) -> Any | None:
        """The declared level ``value`` names (as a command line spells it): by value where
        the levels are numeric (1 = 1.0 = "1"), else as text; None where it names none."""
        if self.numeric:
            try:
                wanted: Any = float(value)
            except (TypeError, ValueError):
                return None
            matches = [level for level in self.levels if float(level) == wanted]
        else:
            matches = [level for level in self.levels if str(level) == str(value)]
        return matches[0] if matches else None

    @property
    def n_codes(self) -> int:
        return len(self.levels) + int(self.missing)

    def encode(self, series: pd.Series) -> np.ndarray:
        """Level index per row (the last code is 'missing' when declared). Numbers, and text,
        are looked up once per distinct value (a column repeats its levels); a column the
        schema refuses is read row by row, which refuses at its first defective row."""
        if self.numeric:
            values = pd.Series(parsed_numbers(series), index=series.index)
            if (values.isna() & series.notna()).any() and not self.unlisted_as_missing:
                raise UserInputError(
                    f"column {self.name!r} holds a value that is not a declared level{NO_VALUES}"
                )
            lookup: dict[Any, int] = {float(level): i for i, level in enumerate(self.levels)}
            keys: Any = values.astype(float)
            read: Any = float
        else:
            lookup = {str(level): i for i, level in enumerate(self.levels)}
            keys = series.astype(object).where(series.notna(), None)
            read = str
            if not _all_text(series):  # (1 and 1.0, or True and 1, would share a distinct value)
                return self._codes([None if k is None else str(k) for k in keys], lookup)
        rows, distinct = pd.factorize(keys)  # missing: -1, the table's last entry
        try:
            table = [self._code(read(value), lookup) for value in distinct]
            table.append(self._code(None, lookup) if (rows < 0).any() else len(self.levels))
        except UserInputError:
            return self._codes([None if k is None else read(k) for k in keys], lookup)
        return np.array(table, dtype=np.int64)[rows]

    def _codes(self, keys: Iterable[Any], lookup: dict[Any, int]) -> np.ndarray:
        """Each row's :meth:`_code`, in row order."""
        return np.array([self._code(key, lookup) for key in keys], dtype=np.int64)

    def _code(self, key: Any, lookup: dict[Any, int]) -> int:
        """One cell's code (``key``: its number or text; None or NaN: missing) by ``lookup``;
        a cell the schema refuses is one clear error."""
        if key is None or (isinstance(key, float) and math.isnan(key)):
            if not self.missing:
                raise UserInputError(
                    f"column {self.name!r} has missing values but the schema does not "
                    "declare missing: true"
                )
            return len(self.levels)
        if key in lookup:
            return lookup[key]
        if self.other is not None:
            return lookup[str(self.other)]
        if self.unlisted_as_missing:
            return len(self.levels)
        raise UserInputError(
            f"column {self.name!r} holds a value that is not a declared level{NO_VALUES}"
        )

    def decode(self, codes: np.ndarray) -> pd.Series:
        """Levels by code (any code past the levels is 'missing'), by one table lookup: this
        runs on every sampled row, so a per-row Python loop would dominate large samples."""
        codes = self._level_codes(codes)
        if self.numeric:
            return pd.Series(self._numeric_levels()[codes], name=self.name).astype(self.dtype)
        table = np.array([*self.levels, None], dtype=object)
        return pd.Series(table[codes], name=self.name, dtype=object).astype(self.dtype)

    def decode_arrow(self, codes: np.ndarray) -> pa.Array:
        """:meth:`decode` as an Arrow array (missing as null), taken by code from an Arrow array
        of the levels: no Python object per value, which would cost more than generating it."""
        codes = self._level_codes(codes)
        if self.numeric:  # (null by mask: an integer column has no NaN to carry it)
            missing = codes == len(self.levels)
            levels = np.where(missing, 0.0, self._numeric_levels()[codes])
            return arrow.numbers(levels.astype(self.dtype), missing)
        return arrow.strings([*self.levels, None]).take(arrow.numbers(codes))

    def _level_codes(self, codes: np.ndarray) -> np.ndarray:
        return np.minimum(np.asarray(codes, dtype=np.int64), len(self.levels))

    def _numeric_levels(self) -> np.ndarray:
        """The levels as floats, then NaN for 'missing'."""
        return np.array([*map(float, self.levels), np.nan], dtype="float64")

    @property
    def dtype(self) -> str:
        if not self.numeric:
            return "object"
        integral = all(float(v).is_integer() for v in self.levels)
        return "int64" if integral and not self.missing else "float64"


Column = Continuous | Categorical


class Schema:
    """An ordered list of declared columns."""

    def __init__(self, columns: Sequence[Column]):
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            raise UserInputError("schema lists a column twice")
        self.columns: tuple[Column, ...] = tuple(columns)

    @classmethod
    def from_specs(cls, specs: Sequence[ColumnSpec | dict]) -> Schema:
        columns: list[Column] = []
        for raw in specs:
            spec = raw if isinstance(raw, ColumnSpec) else ColumnSpec(**raw)
            if spec.kind == "continuous":
                if spec.lo is None or spec.hi is None:
                    raise UserInputError(f"column {spec.name!r}: continuous needs lo and hi")
                columns.append(
                    Continuous(
                        spec.name,
                        float(spec.lo),
                        float(spec.hi),
                        spec.integer,
                        spec.transform,
                        spec.missing,
                        tuple(float(p) for p in spec.point_masses),
                        spec.unlisted_as_missing,
                        spec.missing_as,
                        spec.date_format,
                    )
                )
            elif spec.kind == "categorical":
                columns.append(
                    Categorical(
                        spec.name,
                        tuple(spec.levels or ()),
                        spec.missing,
                        spec.unlisted_as_missing,
                        spec.other,
                    )
                )
            else:
                raise UserInputError(
                    f"column {spec.name!r}: kind must be continuous or categorical, "
                    f"not {spec.kind!r}"
                )
        return cls(columns)

    def to_specs(self) -> list[dict]:
        """JSON-ready column list, the inverse of :meth:`from_specs`."""
        specs = []
        for column in self.columns:
            if isinstance(column, Continuous):
                spec = ColumnSpec(
                    column.name,
                    "continuous",
                    column.lo,
                    column.hi,
                    column.integer,
                    column.transform,
                    None,
                    column.missing,
                    list(column.point_masses),
                    column.unlisted_as_missing,
                    column.missing_as,
                    column.date_format,
                )
            else:
                spec = ColumnSpec(
                    column.name,
                    "categorical",
                    levels=list(column.levels),
                    missing=column.missing,
                    unlisted_as_missing=column.unlisted_as_missing,
                    other=column.other,
                )
            specs.append(asdict(spec))
        return specs

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def __getitem__(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise UserInputError(f"unknown column {name!r}; the schema has: {', '.join(self.names)}")

    def without(self, name: str) -> Schema:
        return Schema([c for c in self.columns if c.name != name])

    def dtypes(self) -> dict[str, str]:
        return {c.name: c.dtype for c in self.columns}

    @property
    def spelled(self) -> list[Continuous]:
        """Numeric columns a CSV spells otherwise than as numbers: dates, missing tokens."""
        return [
            c
            for c in self.columns
            if isinstance(c, Continuous) and (c.missing_as is not None or c.date_format)
        ]

    @property
    def nullable_integers(self) -> list[Continuous]:
        """Integer columns that may be missing, spelled as numbers: held as floats (NaN), they
        are written as integers (an age as 58, not 58.0)."""
        return [
            c
            for c in self.columns
            if isinstance(c, Continuous) and c.integer and c.missing and c not in self.spelled
        ]

    def written(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` as a CSV is written (:meth:`Continuous.written`; nullable integers as
        integers)."""
        integers = self.nullable_integers
        out = frame.copy() if self.spelled or integers else frame
        for column in self.spelled:
            out[column.name] = column.written(frame[column.name])
        for column in integers:
            out[column.name] = frame[column.name].round().astype("Int64")
        return out

    def written_arrow(self, table: pa.Table) -> pa.Table:
        """:meth:`written` for an Arrow table (spelled columns become text, nullable integers
        integers)."""
        for column in self.nullable_integers:
            values = pc.cast(pc.round(table[column.name]), pa.int64())
            table = table.set_column(table.schema.get_field_index(column.name), column.name, values)
        for column in self.spelled:
            values = table[column.name]
            if column.date_format is not None:
                days = pd.Series(values.to_numpy(zero_copy_only=False), dtype=float)
                text = pa.array(column.written(days).tolist(), pa.string())
            else:
                spelling = arrow.strings([column.missing_as])[0]
                text = pc.fill_null(pc.cast(values, pa.string()), spelling)
            table = table.set_column(table.schema.get_field_index(column.name), column.name, text)
        return table

    def read_csv(self, path: str | Path) -> pd.DataFrame:
        """A CSV this schema's rows were written to (``synthetic.csv``, ``test.csv``), read as
        text and conformed cell by cell (left to pandas, one blank would retype a column)."""
        return self.conform(pd.read_csv(path, dtype=str))

    def conform(self, df: pd.DataFrame) -> pd.DataFrame:
        """Check ``df`` has exactly the schema's columns and cast it to the declared dtypes.

        Categorical values outside the declared levels are an error (the schema must be public
        and complete); continuous values outside the bounds are allowed here and clipped later.
        """
        missing_cols = [n for n in self.names if n not in df.columns]
        if missing_cols:
            raise UserInputError(
                f"the data has no column {missing_cols[0]!r} declared in the schema"
            )
        extra = [c for c in df.columns if c not in self.names]
        if extra:
            raise UserInputError(f"the data has column {extra[0]!r} not declared in the schema")
        out = {}
        for column in self.columns:
            series = df[column.name]
            if isinstance(column, Categorical):
                out[column.name] = column.decode(column.encode(series))
                continue
            series = column.unspelled(series)
            values = column.numbers(series)
            if (values.isna() & series.notna()).any() and not column.unlisted_as_missing:
                raise UserInputError(
                    f"column {column.name!r} holds a value that is not a number{NO_VALUES}"
                )
            if values.isna().any() and not column.missing:
                raise UserInputError(
                    f"column {column.name!r} has missing values but the schema does not "
                    "declare missing: true"
                )
            if column.dtype == "int64":  # (no NaN here) inf or 1e300 cannot be an int64:
                values = values.clip(column.lo, column.hi)  # clipped as encoding would
            out[column.name] = values.astype(column.dtype)
        return pd.DataFrame(out, index=df.index)
