"""Every case in tests/bad_inputs/cases.yaml: one line on stderr, exit 2, nothing left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from rdpgan.cli import compose_run_config
from rdpgan.config import SchemaConfig
from rdpgan.data.loading import load_tables
from rdpgan.data.schema import Categorical, Continuous
from rdpgan.privacy.private_schema import SchemaBudget
from tests.conftest import FAST, TRAINED_RUN_GROUP, run_cli

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "cases.yaml").read_text())["cases"]


def listing(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def as_param(case: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(reason=case["xfail"], strict=True)] if "xfail" in case else []
    if any("{run}" in arg for arg in case["args"]):  # asks for the trained run by name
        marks.append(TRAINED_RUN_GROUP)
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [as_param(case) for case in CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, request, case):
    places = {"corpus": str(CORPUS), "tmp": str(tmp_path)}
    if any("{run}" in arg for arg in case["args"]):  # only these cases pay for a training run
        places["run"] = str(request.getfixturevalue("trained_run"))
    args = [arg.format(**places) for arg in case["args"]]
    for directory in case.get("mkdirs", []):  # made by the user before the run: must survive
        (tmp_path / directory).mkdir(parents=True)
    watched = [Path(places[key]) for key in ("tmp", "corpus", "run") if key in places]
    before = {root: listing(root) for root in watched}

    result = run_cli(case["cli"], args, cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and case["error"] in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    kept = {Path(path) for path in case.get("keeps", [])}
    assert kept <= listing(tmp_path), "the ledger of privacy already spent was not kept"
    for root in watched:
        left = listing(root) - (kept if root == tmp_path else set())
        assert left == before[root], f"files left behind in {root}"


def test_the_control_dataset_trains(tmp_path):
    """valid.yaml is sound, so each bad case above fails only for its own defect."""
    args = [f"--config-dir={CORPUS}", "dataset=valid", f"data.root={CORPUS}", *FAST]
    args.append("privacy.noise_seed=0")  # 30 rows: fresh noise would vary the batch size
    result = run_cli("train", [*args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "model.npz").is_file()


CSV_CORPUS = CORPUS / "csv"
ACCEPTED: list[dict[str, Any]] = yaml.safe_load((CSV_CORPUS / "accepted.yaml").read_text())[
    "accepted"
]


@pytest.mark.parametrize("case", ACCEPTED, ids=[case["id"] for case in ACCEPTED])
def test_a_messy_csv_gets_a_released_schema_with_nothing_but_the_target(case):
    """What `dataset=csv schema=private` makes of each messy file: kinds, levels and dropped
    columns as expected, finite bounds, and rows that hold only released levels."""
    dataset = compose_run_config(
        ["dataset=csv", f"dataset.path={CSV_CORPUS / case['file']}", "dataset.target=label"]
    ).dataset
    dataset.positive_label = case.get("positive_label")
    config = SchemaConfig(source="private")
    rng = np.random.default_rng(0)
    train, test, release = load_tables(dataset, config, None, SchemaBudget(50.0, 1e-5), rng)
    schema, expect = release.schema, case["expect"]
    assert sorted(release.dropped) == sorted(expect.get("dropped", []))
    for name, kind in expect.get("kinds", {}).items():
        assert isinstance(schema[name], Continuous if kind == "continuous" else Categorical)
    for name, levels in expect.get("levels", {}).items():
        assert list(schema[name].levels) == levels
    for name in expect.get("integer", []):
        assert schema[name].integer
    for key in ("missing_as", "date_format"):
        spelled = {c.name: getattr(c, key) for c in schema.spelled if getattr(c, key)}
        assert spelled == expect.get(key, {})
    for column in schema.columns:
        if isinstance(column, Continuous):
            assert np.isfinite([column.lo, column.hi]).all()
        else:
            for rows in (train, test):
                held = set(rows[column.name].dropna())
                assert held <= set(column.levels), (column.name, held)
