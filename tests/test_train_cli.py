"""`python -m rdpgan.train` end to end, and every bad input it must refuse in one line."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from rdpgan.data.schema import Categorical, Schema
from rdpgan.privacy.ledger import SEEDED_NOTE, recompute_epsilon
from tests.conftest import FAST, run_cli, train_cli

REPO = Path(__file__).resolve().parent.parent
ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]


@pytest.mark.slow
def test_short_real_run_writes_every_output(trained_run):
    run = trained_run
    for name in (
        "synthetic.csv",
        "test.csv",
        "model.npz",
        "model.json",
        "privacy.json",
        "metrics.json",
    ):
        assert (run / name).is_file(), name
    assert not list(run.glob(".*.tmp"))

    meta = json.loads((run / "model.json").read_text())
    schema = Schema.from_specs(meta["schema"])
    synthetic = schema.conform(pd.read_csv(run / "synthetic.csv"))  # raises on a foreign level
    assert list(synthetic.columns) == ADULT_COLUMNS
    assert synthetic.dtypes.astype(str).to_dict() == schema.dtypes()
    for column in schema.columns:
        if isinstance(column, Categorical):
            assert set(synthetic[column.name].dropna()) <= set(column.levels)
    assert meta["target"] == "income"
    assert set(synthetic["income"]) == {"<=50K", ">50K"}
    assert abs(len(synthetic) - 2400) < 100  # the released (noisy) train size
    # Each row held out by its own coin (p = 0.2): 600 ± 3 standard deviations of 3,000 rows.
    assert abs(len(pd.read_csv(run / "test.csv")) - 600) < 66

    ledger = json.loads((run / "privacy.json").read_text())
    assert {
        "epsilon_target",
        "epsilon_spent",
        "delta",
        "accountant",
        "end_to_end",
        "mechanisms",
    } <= set(ledger)
    # The shared run is reproducible (privacy.noise_seed): the ledger must say so.
    assert ledger["end_to_end"] is False and ledger["notes"] == [SEEDED_NOTE]
    assert 0 < ledger["epsilon_spent"] <= 3.0
    assert math.isclose(recompute_epsilon(ledger), ledger["epsilon_spent"], rel_tol=1e-12)
    names = [m["name"] for m in ledger["mechanisms"]]
    # (2,400 rows at ε = 3: the affordable pairs do not link every column, so none is released.)
    assert names == ["label_counts", "numeric_densities", "marginals", "dp_sgd_discriminator"]
    dp_sgd = ledger["mechanisms"][-1]
    assert dp_sgd["kind"] == "gaussian" and dp_sgd["steps"] > 0 and dp_sgd["max_grad_norm"] == 1.0

    with np.load(run / "model.npz", allow_pickle=False) as weights:
        assert weights.files and all(weights[k].dtype == np.float32 for k in weights.files)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["epochs"] and "wall_seconds" not in metrics  # time grows with the batches
    # Only quantities private by post-processing: no loss computed on real rows.
    assert {k for epoch in metrics["epochs"] for k in epoch} == {
        "epoch",
        "step",
        "g_loss",
        "d_loss_on_fakes",
        "epsilon",
    }


@pytest.mark.slow
def test_non_private_baseline_ledger_says_so(tmp_path, small_adult):
    result = train_cli(tmp_path, "privacy=none", *FAST, root=small_adult)
    assert result.returncode == 0, result.stderr
    ledger = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert ledger["end_to_end"] is False and ledger["epsilon_spent"] is None
    assert any("NOT PRIVATE" in note for note in ledger["notes"])


def one_class_root(tmp_path: Path, data_dir: Path) -> Path:
    root = tmp_path / "one_class"
    (root / "adult").mkdir(parents=True)
    lines = [
        line
        for line in (data_dir / "adult" / "adult.data").read_text().splitlines()[:2000]
        if line.endswith("<=50K")
    ]
    (root / "adult" / "adult.data").write_text("\n".join(lines) + "\n")
    return root


BAD_INPUTS = [
    (["dataset=nosuchdataset"], "nosuchdataset"),
    (["epsilon=0"], "epsilon"),
    (["epsilon=-1"], "epsilon"),
    (["delta=0"], "delta"),
    (["delta=1.5"], "delta"),
    (["dataset.target=no_such_column"], "no_such_column"),
    (["sample.n=0"], "sample.n"),
    (["epsilon=abc"], "epsilon"),
    (["privacy.accountant=magic"], "magic"),
]


@pytest.mark.parametrize(("overrides", "needle"), BAD_INPUTS, ids=lambda v: str(v))
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, small_adult, overrides, needle):
    result = train_cli(tmp_path, *FAST, *overrides, root=small_adult)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_delta_too_large_is_refused_after_the_label_counts_alone(tmp_path, small_adult):
    """δ is checked against the released row count: the label counts are spent (and kept on
    record with the run's settings), the marginals are not."""
    result = train_cli(tmp_path, "delta=0.01", *FAST, root=small_adult)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "1/n" in lines[0] and "Traceback" not in result.stderr
    run = tmp_path / "run"
    assert {p.name for p in run.iterdir()} == {"privacy.json", "run.json", "schema.yaml"}
    ledger = json.loads((run / "privacy.json").read_text())
    assert [m["name"] for m in ledger["mechanisms"]] == ["label_counts"]


def test_missing_data_file_names_the_root_and_the_download_script(tmp_path):
    empty = tmp_path / "empty_root"
    empty.mkdir()
    result = train_cli(tmp_path, *FAST, root=empty)
    assert result.returncode == 2
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1
    assert str(empty) in message and "scripts/data/download_data.py" in message
    assert not (tmp_path / "run").exists()


def test_a_table_holding_one_declared_class_trains(tmp_path, data_dir):
    """The classes are the schema's (public); how many the rows hold is never counted, since a
    refusal would tell one row of the rarer class from none: the noisy label counts carry it."""
    result = train_cli(tmp_path, *FAST, root=one_class_root(tmp_path, data_dir))
    assert result.returncode == 0, result.stderr
    ledger = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert ledger["end_to_end"] and ledger["epsilon_spent"] <= ledger["epsilon_target"]


@pytest.mark.slow
def test_a_released_schema_brings_its_cost_into_the_run_that_reuses_it(tmp_path, small_adult):
    """``python -m rdpgan.schema`` releases a schema with its cost; a run that declares the
    file unedited composes that cost into its own ledger (and its own schema.yaml carries it
    on), within its own target; an edited file is a declared schema, and the ledger says so."""
    env = {**os.environ, "RDPGAN_DATA_DIR": str(small_adult)}
    released = run_cli("schema", ["hydra.run.dir=schema", "epsilon=4"], tmp_path, env)
    assert released.returncode == 0, released.stderr
    schema_file = tmp_path / "schema" / "schema.yaml"
    cost = yaml.safe_load(schema_file.read_text())["cost"]
    paid = json.loads((tmp_path / "schema" / "privacy.json").read_text())["mechanisms"]
    assert [m["name"] for m in cost["mechanisms"]] == [m["name"] for m in paid] != []

    reused = train_cli(tmp_path, *FAST, "epsilon=4", f"schema.file={schema_file}", root=small_adult)
    assert reused.returncode == 0, reused.stderr
    assert "reused released schema" in reused.stdout
    ledger = json.loads((tmp_path / "run" / "privacy.json").read_text())
    entries = ledger["mechanisms"][: len(paid)]
    assert [(m["name"], m["noise_multiplier"], m["steps"]) for m in entries] == [
        (m["name"], m["noise_multiplier"], m["steps"]) for m in paid
    ]
    assert ledger["end_to_end"] and ledger["epsilon_spent"] <= 4.0
    assert ledger["order"] == cost["order"] is not None  # fixed before the schema's release
    assert recompute_epsilon(ledger) == pytest.approx(ledger["epsilon_spent"])
    carried = yaml.safe_load((tmp_path / "run" / "schema.yaml").read_text())["cost"]
    assert carried["mechanisms"] == cost["mechanisms"]

    text = schema_file.read_text()
    schema_file.write_text(
        text.replace("  kind: continuous\n  lo: ", "  kind: continuous\n  lo: -1", 1)
    )
    (tmp_path / "edited").mkdir()
    edited = train_cli(
        tmp_path / "edited", *FAST, "epsilon=4", f"schema.file={schema_file}", root=small_adult
    )
    assert edited.returncode == 0, edited.stderr
    ledger = json.loads((tmp_path / "edited" / "run" / "privacy.json").read_text())
    assert not ledger["end_to_end"]
    assert any("edited since" in note for note in ledger["notes"])
    assert [m["name"] for m in ledger["mechanisms"][: len(paid)]] == [m["name"] for m in paid]
