"""The guarantee holds for the table the user hands in: one added row changes the training rows
by at most that row, before any mechanism runs.

Every test goes through the real loading path (:func:`rdpgan.data.loading.load_tables`: the
file read, the split, the schema, the conforming) on two neighbouring CSV files, the second
being the first with one row x inserted somewhere, and compares the encoded rows the generator
would train on (and those held out) as multisets:

- a declared schema with integer-like levels, a released ``schema.yaml`` reused as
  ``schema.file=`` (its levels are the text "1", "2", "3"), and a registered data set (Adult);
- x blank, fractional, a new level, or a duplicate of an existing row;
- the split of the larger table is the split of the smaller one plus at most x;
- ``dataset.test_size=0`` trains on every row and holds none out.

Before the per-cell reading and per-row split, each of these failed: pandas typed a column
from all of its cells (one blank turned "1" into "1.0" and, with a released schema, every value
of the column into missing), and the split was a permutation of all rows.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from rdpgan.cli import compose_run_config
from rdpgan.config import DatasetConfig, SchemaConfig
from rdpgan.data import loading
from rdpgan.data.loading import load_tables
from rdpgan.data.schema import Schema
from rdpgan.data.schema_file import (
    EDITED_NOTE,
    declared_release,
    read_schema_file,
    read_schema_release,
    schema_yaml,
)
from rdpgan.data.split import check_test_size, row_draws, split
from rdpgan.errors import UserInputError
from rdpgan.privacy.budget import validate_budget
from rdpgan.privacy.ledger import PrivacyLedger, Release
from rdpgan.privacy.private_schema import SchemaBudget, SchemaRelease, private_schema
from rdpgan.transform import TableTransformer
from tests.conftest import FAST, run_cli, train_cli

N = 600
HEADER = ["age", "code", "y"]
DECLARED = [
    {"name": "age", "kind": "continuous", "lo": 0, "hi": 100, "integer": True, "missing": True},
    {
        "name": "code",
        "kind": "categorical",
        "levels": [1, 2, 3],
        "missing": True,
        "unlisted_as_missing": True,
    },
    {"name": "y", "kind": "categorical", "levels": ["no", "yes"]},
]
# x: the row the neighbour adds (the last one: a duplicate of the table's first row).
ADDED = {
    "blank": ["40", "", "yes"],
    "blank number": ["", "2", "no"],
    "large number": ["1e6", "2", "no"],
    "fraction": ["40", "1.5", "yes"],
    "new level": ["40", "4", "no"],
    "duplicate": None,
}


def base_rows() -> list[list[str]]:
    """Ages (a twentieth of them blank), codes 1-3, and a yes/no target."""
    rng = np.random.default_rng(0)
    ages = [str(a) if rng.random() > 0.05 else "" for a in rng.integers(18, 90, N)]
    return [[age, str(rng.integers(1, 4)), str(rng.choice(["no", "yes"]))] for age in ages]


def write(path: Path, rows: list[list[str]], header: list[str] | None = HEADER) -> str:
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        if header is not None:
            writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def neighbours(tmp_path: Path, rows: list[list[str]], x: list[str] | None, **kw) -> tuple[str, str]:
    """The table, and the table with x inserted at a random place (a duplicate of its first
    row when x is None)."""
    x = list(rows[0]) if x is None else x
    at = int(np.random.default_rng(1).integers(0, len(rows) + 1))
    return (
        write(tmp_path / "small.csv", rows, **kw),
        write(tmp_path / "big.csv", [*rows[:at], x, *rows[at:]], **kw),
    )


def encoded(frame: pd.DataFrame, transformer: TableTransformer) -> Counter:
    """The rows as the generator sees them (codes, positions and label), as a multiset."""
    matrix = np.column_stack([transformer.encode(frame), transformer.encode_labels(frame)])
    return Counter(map(tuple, matrix.round(12).tolist()))


def assert_changed_by_one_row(
    dataset: DatasetConfig,
    config: SchemaConfig,
    small: str,
    big: str,
    released: Schema | None = None,
):
    """Both tables loaded; the larger one's training rows are the smaller one's plus at most
    one row, its held-out rows likewise, and exactly one row was added in all."""
    loaded = {}
    for name, path in (("small", small), ("big", big)):
        dataset.path = path
        rng = np.random.default_rng(0)
        loaded[name] = load_tables(dataset, config, None, SchemaBudget(8.0, 1e-5), rng, released)
    (train_a, test_a, release_a), (train_b, test_b, release_b) = loaded["small"], loaded["big"]
    assert release_a.schema.to_specs() == release_b.schema.to_specs()
    transformer = TableTransformer(release_a.schema, dataset.target)
    added = 0
    for a, b in ((train_a, train_b), (test_a, test_b)):
        rows_a, rows_b = encoded(a, transformer), encoded(b, transformer)
        assert not rows_a - rows_b, "a row of the smaller table changed or left"
        added += sum((rows_b - rows_a).values())
    assert added == 1
    return loaded


def csv_dataset(path: str = "", **kw) -> DatasetConfig:
    return DatasetConfig(name="t", file="", path=path, target="y", sep=",", **kw)


@pytest.mark.parametrize("x", ADDED.values(), ids=ADDED.keys())
def test_a_declared_schema_with_integer_like_levels_reads_each_cell_alone(tmp_path, x):
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(DECLARED))
    small, big = neighbours(tmp_path, base_rows(), x)
    config = SchemaConfig(source="declared", file=str(schema))
    assert_changed_by_one_row(csv_dataset(), config, small, big)


@pytest.fixture(scope="module")
def released_schema(tmp_path_factory) -> Path:
    """The schema.yaml a schema=private run writes for the base table: its levels are the text
    the cells hold ('1', '2', '3'), and unlisted values read as missing."""
    tmp = tmp_path_factory.mktemp("released")
    dataset = csv_dataset(path=write(tmp / "t.csv", base_rows()))
    config = SchemaConfig(source="private", candidates={"code": ["1", "2", "3"]})
    _, _, release = load_tables(
        dataset, config, None, SchemaBudget(50.0, 1e-5), np.random.default_rng(0)
    )
    levels = release.schema["code"].levels
    assert levels == ("1", "2", "3") and release.schema["code"].unlisted_as_missing
    path = tmp / "schema.yaml"
    path.write_text(schema_yaml(release, "private"))
    return path


@pytest.mark.parametrize("x", ADDED.values(), ids=ADDED.keys())
def test_a_reused_released_schema_reads_each_cell_alone(tmp_path, released_schema, x):
    small, big = neighbours(tmp_path, base_rows(), x)
    config = SchemaConfig(source="declared", file=str(released_schema))
    assert_changed_by_one_row(csv_dataset(), config, small, big)


def test_a_reused_released_schema_keeps_every_other_value_beside_a_blank_and_a_fraction(
    tmp_path, released_schema
):
    """The issue's case: a released schema.yaml with integer-like levels, reused on a table
    with one blank and one fractional cell in that column."""
    rows = base_rows()
    path = write(tmp_path / "t.csv", [*rows, ["40", "", "yes"], ["41", "2.5", "no"]])
    dataset = csv_dataset(path=path, test_size=0.0)
    config = SchemaConfig(source="declared", file=str(released_schema))
    train, _, _ = load_tables(dataset, config, None, SchemaBudget(8.0, 1e-5), None)
    assert train["code"].iloc[:N].tolist() == [row[1] for row in rows]
    assert train["age"].iloc[:N].isna().tolist() == [row[0] == "" for row in rows]
    assert train["code"].iloc[N:].isna().all()


@pytest.mark.parametrize("x", ADDED.values(), ids=ADDED.keys())
def test_a_private_schema_reads_each_cell_alone(tmp_path, monkeypatch, x):
    """schema=private with its mechanisms' outputs fixed (both tables get the release the
    smaller one drew, as the neighbouring tests fix every draw): the rows it reads, relabels
    and keeps move by the added row alone."""
    small, big = neighbours(tmp_path, base_rows(), x)
    config = SchemaConfig(source="private", candidates={"code": ["1", "2", "3"]})
    drawn: list = []

    def replayed(*args):
        drawn.append(drawn[0] if drawn else private_schema(*args))
        return drawn[-1]

    monkeypatch.setattr(loading, "private_schema", replayed)
    assert_changed_by_one_row(csv_dataset(positive_label="yes"), config, small, big)
    assert len(drawn) == 2


@pytest.mark.parametrize("x", ADDED.values(), ids=ADDED.keys())
def test_a_run_reread_with_its_released_schema_changes_by_one_row(tmp_path, released_schema, x):
    """Resume and evaluation read a private run's rows with its recorded schema.yaml."""
    small, big = neighbours(tmp_path, base_rows(), x)
    recorded = read_schema_file(released_schema)
    config = SchemaConfig(source="private")
    assert_changed_by_one_row(csv_dataset(), config, small, big, released=recorded)


@pytest.fixture(scope="module")
def adult_rows(data_dir) -> list[list[str]]:
    with (data_dir / "adult" / "adult.data").open() as file:
        rows = [line for line in csv.reader(file) if line]
    return rows[:2000]


ADULT_ADDED = {
    "duplicate": None,
    "missing workclass": [
        "39", " ?", "77516", " Bachelors", "13", " Never-married", " Adm-clerical",
        " Not-in-family", " White", " Male", "2174", "0", "40", " United-States", " <=50K",
    ],
    "fractional hours": [
        "39", " State-gov", "77516", " Bachelors", "13", " Never-married", " Adm-clerical",
        " Not-in-family", " White", " Male", "2174", "0", "40.5", " United-States", " >50K",
    ],
}  # fmt: skip


@pytest.mark.parametrize("x", ADULT_ADDED.values(), ids=ADULT_ADDED.keys())
def test_a_registered_data_set_changes_by_one_row(tmp_path, adult_rows, x):
    dataset = compose_run_config(["dataset=adult"]).dataset
    small, big = neighbours(tmp_path, adult_rows, x, header=None)
    assert_changed_by_one_row(dataset, SchemaConfig(), small, big)


def test_the_split_of_a_larger_table_is_the_smaller_ones_plus_at_most_the_new_row():
    rng = np.random.default_rng(2)
    table = pd.DataFrame(
        {"a": rng.integers(0, 5, 500).astype(str), "b": rng.choice(["p", "q", None], 500)}
    )
    for trial in range(20):
        x = pd.DataFrame({"a": [str(trial % 5)], "b": [["p", None][trial % 2]]})
        at = int(rng.integers(0, len(table) + 1))
        bigger = pd.concat([table.iloc[:at], x, table.iloc[at:]], ignore_index=True)
        for part_a, part_b in zip(split(table, 0.2, 0), split(bigger, 0.2, 0), strict=True):
            rows_a = Counter(map(tuple, part_a.fillna("").to_numpy().tolist()))
            rows_b = Counter(map(tuple, part_b.fillna("").to_numpy().tolist()))
            assert not rows_a - rows_b and sum((rows_b - rows_a).values()) <= 1
    # The coin is each row's own: a fair share is held out, and another key draws others.
    draws = row_draws(table, 0)
    assert 0.12 < (draws < 0.2).mean() < 0.28
    assert not np.array_equal(draws, row_draws(table, 1))


def test_row_draws_hash_each_rows_cells_as_the_row_by_row_definition_does():
    """The draws, computed column by column, are the keyed hash of each row's own cells as
    JSON text (missing as null, else the value's str) read row by row: a split made by an
    earlier version (a resume, an evaluation) is the same split. Every kind of column a
    loaded table can hold, missing values of each kind included."""

    def by_row(frame: pd.DataFrame, key: int) -> np.ndarray:
        def cell(value: object) -> str | None:
            missing = value is None or (not isinstance(value, str) and pd.isna(value))
            return None if missing else str(value)

        hash_key = hashlib.blake2b(f"rdpgan/split/v1:{key}".encode(), digest_size=32).digest()
        texts = (
            json.dumps([cell(v) for v in row], ensure_ascii=False)
            for row in frame.itertuples(index=False, name=None)
        )
        return np.array(
            [
                int.from_bytes(
                    hashlib.blake2b(t.encode(), key=hash_key, digest_size=8).digest(), "big"
                )
                / 2.0**64
                for t in texts
            ]
        )

    table = pd.DataFrame(
        {
            "int": [1, 2, 3, 4],
            "float": [1.0, np.nan, 2.5, -0.0],
            "text": ["a", None, 'é"x', "nan"],  # pandas' default text dtype: read whole
            "arrow_text": pd.array(["a", None, "\\", "a"], dtype="string[pyarrow]"),
            "python_text": pd.array(["", "b", None, "b"], dtype="string[python]"),
            "nullable": pd.array([1, None, 3, 4], dtype="Int64"),
            "when": pd.to_datetime(
                ["2020-01-01", None, "1999-12-31 10:00", "2020-01-01"], format="mixed"
            ),
            "flag": [True, False, True, False],
            "kind": pd.Categorical(["x", "y", None, "x"]),
            "float32": np.array([0.1, 2.5, np.nan, 1.0], dtype=np.float32),
            "nullable_float32": pd.array([0.1, None, 2.5, 1.0], dtype="Float32"),
        }
    )
    for key in (0, 7):
        assert np.array_equal(row_draws(table, key), by_row(table, key))
    assert np.array_equal(row_draws(table[[]], 0), by_row(table[[]], 0))  # no columns


def test_test_size_zero_trains_on_every_row(tmp_path):
    rows = base_rows()
    dataset = csv_dataset(path=write(tmp_path / "t.csv", rows), test_size=0.0)
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(DECLARED))
    train, test, _ = load_tables(dataset, SchemaConfig(file=str(schema)), None, None, None)
    assert len(train) == N and test.empty and list(test.columns) == HEADER


def test_refusals_quote_no_row_count_line_number_or_class_size(tmp_path):
    """The console is not covered by the guarantee: a refusal names no count of the rows."""
    with pytest.raises(UserInputError, match="1/n") as refused:
        validate_budget(8.0, 0.05, n_rows=57)
    assert "57" not in str(refused.value)
    for at in (0, 6):  # a malformed record, first or later: one field too many
        rows = base_rows()
        rows[at] = [*rows[at], "extra"]
        dataset = csv_dataset(path=write(tmp_path / "bad.csv", rows))
        with pytest.raises(UserInputError, match="same number of fields") as refused:
            load_tables(dataset, SchemaConfig(source="unsafe_infer"), None, None, None)
        message = str(refused.value).replace(dataset.path, "FILE")
        assert "line" not in message and not re.search(r"\d", message), message
    # A class held by one row is no refusal (a stratified split refused it, quoting its size).
    rows = [*base_rows(), ["40", "1", "maybe"]]
    dataset = csv_dataset(path=write(tmp_path / "rare.csv", rows), positive_label="yes")
    load_tables(dataset, SchemaConfig(source="unsafe_infer"), None, None, None)


def test_test_size_zero_runs_end_to_end_and_evaluation_asks_for_held_out_rows(tmp_path):
    """A custodian who only wants to publish: every row trains, no test.csv is written, and
    evaluation says it needs held-out rows (one line, exit 2)."""
    schema = tmp_path / "schema.yaml"
    schema.write_text(yaml.safe_dump(DECLARED))
    path = write(tmp_path / "t.csv", base_rows())
    args = [f"dataset.path={path}", "dataset.target=y", f"schema.file={schema}"]
    result = train_cli(tmp_path, "dataset=csv", *args, "dataset.test_size=0", *FAST)
    assert result.returncode == 0, result.stderr
    run = tmp_path / "run"
    assert (run / "synthetic.csv").is_file() and not (run / "test.csv").exists()
    evaluated = run_cli("evaluate", [f"run_dir={run}"], cwd=tmp_path)
    assert evaluated.returncode == 2 and "dataset.test_size=0" in evaluated.stderr
    assert len(evaluated.stderr.strip().splitlines()) == 1
    for wrong in (1, 1.5, -0.1):
        with pytest.raises(UserInputError, match=r"test_size must be in \[0, 1\)"):
            check_test_size(wrong)


def test_a_declared_integer_column_reads_inf_and_huge_cells_each_alone():
    """inf or 1e300 cannot be an int64: such a cell is clipped to the bounds, as encoding
    would clip it, instead of failing the whole column (a traceback)."""
    schema = Schema.from_specs([DECLARED[0] | {"missing": False}, DECLARED[2]])
    cells = pd.DataFrame({"age": ["1", "inf", "1e300", "-5"], "y": ["no"] * 4}, dtype=str)
    assert schema.conform(cells)["age"].tolist() == [1, 100, 100, 0]


def test_resume_refuses_an_edited_schema_before_reading_a_row_with_it(tmp_path):
    """Resume reads the rows with the run's schema.yaml while the model encodes with the
    checkpoint's: an edited file is refused in one line, by the edit, not by a row it breaks."""
    path = write(tmp_path / "t.csv", base_rows())
    args = [f"dataset.path={path}", "dataset.target=y", "schema=private", *FAST, "epsilon=50"]
    result = train_cli(tmp_path, "dataset=csv", *args)
    assert result.returncode == 0, result.stderr
    run = tmp_path / "run"
    for output in ("synthetic.csv", "model.npz", "model.json", "metrics.json", "test.csv"):
        (run / output).unlink()  # killed after its last checkpoint, before its outputs
    record = yaml.safe_load((run / "schema.yaml").read_text())
    for column in record["columns"]:
        if column["name"] == "y":  # rows of the other class would now be refused
            column.update(levels=column["levels"][:1], unlisted_as_missing=False)
    (run / "schema.yaml").write_text(yaml.safe_dump(record))
    resumed = train_cli(tmp_path, "resume=true")
    lines = resumed.stderr.strip().splitlines()
    assert resumed.returncode == 2 and len(lines) == 1, resumed.stderr
    assert "not the one it was trained with" in lines[0]


def test_a_released_schema_file_carries_its_cost_wherever_it_goes(tmp_path, released_schema):
    """Unedited (comments and layout aside), the file brings its releases into every run that
    reads it; edited, or with its cost section cut, it still brings what it records, with a
    note (the run is then not end-to-end); a schema declared by hand is free."""
    config = SchemaConfig(source="declared", file=str(released_schema))
    release = declared_release(csv_dataset(), config)
    recorded = yaml.safe_load(released_schema.read_text())["cost"]
    assert release.reused and not release.notes
    assert [r.to_dict() for r in release.releases] == recorded["mechanisms"] != []
    ledger = PrivacyLedger(50.0, 1e-5, "rdp")
    for paid in release.releases:
        ledger.record(paid)
    assert ledger.epsilon() > 0

    def reread(name: str, text: str):
        path = tmp_path / name
        path.write_text(text)
        return path, declared_release(csv_dataset(), replace(config, file=str(path)))

    _, relaid = reread("relaid.yaml", "# a comment of the user's\n" + released_schema.read_text())
    assert relaid.reused and not relaid.notes

    body = yaml.safe_load(released_schema.read_text())
    body["dropped"] = {"a column": "edited in"}
    path, edited = reread("edited.yaml", yaml.safe_dump(body, sort_keys=False))
    assert edited.releases == release.releases
    assert edited.notes == [EDITED_NOTE.format(path=path)]

    del body["cost"]
    path, cut = reread("cut.yaml", yaml.safe_dump(body, sort_keys=False))
    assert cut.releases == [] and cut.notes == [EDITED_NOTE.format(path=path)]

    del body["fingerprint"]
    _, by_hand = reread("declared.yaml", yaml.safe_dump(body, sort_keys=False))
    assert not by_hand.reused and not by_hand.releases and not by_hand.notes


def test_an_unedited_file_matches_its_fingerprint_whatever_yaml_keeps(tmp_path):
    """A level YAML does not keep to the letter (U+0085 reads back as a space): the
    fingerprint is of the file as it reads back, so an unedited file is not taken as edited."""
    schema = Schema.from_specs(
        [
            {"name": "c", "kind": "categorical", "levels": ["a\x85b", "c"]},
            {"name": "y", "kind": "categorical", "levels": ["0", "1"]},
        ]
    )
    paid = Release("schema", "gaussian", 2.0, 1.0, 2, {"sensitivity": 3.0})
    path = tmp_path / "schema.yaml"
    path.write_text(schema_yaml(SchemaRelease(schema, [paid], epsilon=1.0, delta=1e-5), "private"))
    release = read_schema_release(path)
    assert release.reused and not release.notes and release.releases == [paid]
