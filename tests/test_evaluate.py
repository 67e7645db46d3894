"""`python -m rdpgan.evaluate`: the paper's 8-classifier AUROC for a run, and its errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rdpgan.errors import UserInputError
from rdpgan.utility import CLASSIFIERS
from tests.conftest import run_cli


def evaluate_cli(run_dir: Path, root: Path, *extra: str):
    env = {**os.environ, "RDPGAN_DATA_DIR": str(root)}
    return run_cli("evaluate", [f"run_dir={run_dir}", *extra], run_dir.parent, env)


def test_evaluation_json_has_every_classifier_for_synthetic_and_real(trained_run, small_adult):
    result = evaluate_cli(trained_run, small_adult)
    assert result.returncode == 0, result.stderr
    report = json.loads((trained_run / "evaluation.json").read_text())
    for scores in (report, report["real"]):
        assert list(scores["auroc"]) == list(CLASSIFIERS)
        assert all(0.0 <= v <= 1.0 for v in scores["auroc"].values())
        assert abs(scores["mean"] - sum(scores["auroc"].values()) / 8) < 1e-12
        assert scores["seconds"] > 0
    assert report["real"]["mean"] > 0.8  # real Adult rows are genuinely predictive
    # Fidelity at both resolutions, each with its floor, all on one printed line.
    for key in ("fidelity", "fidelity_floor", "fidelity_quantile", "fidelity_quantile_floor"):
        assert 0 < report[key]["tvd_1way"] < 1, key
    assert report["fidelity_quantile"]["resolution"] == "quantile"
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("fidelity TVD")]
    assert "public bins" in line and "quantile bins" in line
    assert f"{report['fidelity_quantile']['tvd_1way']:.3f}" in line


def test_missing_run_dir_is_one_line_exit_2(tmp_path, small_adult):
    result = evaluate_cli(tmp_path / "nowhere", small_adult)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "not a finished run" in result.stderr


def test_evaluation_scores_the_column_its_user_names():
    """Issue 53: a table trained without a target is scored on the column its user cares
    about; a numeric column, an unknown level, or a many-level column without a positive
    class is one clear error."""
    from rdpgan.data.schema import Categorical, Continuous, Schema
    from rdpgan.evaluate import utility_task

    schema = Schema(
        [
            Categorical("sex", ("Female", "Male")),
            Categorical("race", ("a", "b", "c")),
            Continuous("age", 0, 100),
        ]
    )
    assert utility_task(schema, "sex", "Male", None, None) == ("sex", "Male")
    assert utility_task(schema, "sex", "Male", "race", "b") == ("race", "b")
    assert utility_task(schema, "race", "a", "sex", None) == ("sex", "Male")
    for column, named, message in (
        (None, "Other", "not a level"),
        ("age", None, "categorical"),
        ("race", "z", "not a level"),
        ("race", None, "3 levels"),
    ):
        with pytest.raises(UserInputError, match=message):
            utility_task(schema, "sex", "Male", column, named)
