"""Every case in tests/bad_inputs/cases.yaml: one line on stderr, exit 2, nothing left behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FAST

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
CASES: list[dict[str, Any]] = yaml.safe_load((CORPUS / "cases.yaml").read_text())["cases"]


def listing(root: Path) -> set[Path]:
    return {p.relative_to(root) for p in root.rglob("*")}


def run_cli(cli: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"rdpgan.{cli}", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


def as_param(case: dict[str, Any]) -> Any:
    marks = [pytest.mark.xfail(reason=case["xfail"], strict=True)] if "xfail" in case else []
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [as_param(case) for case in CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, request, case):
    places = {"corpus": str(CORPUS), "tmp": str(tmp_path)}
    if any("{run}" in arg for arg in case["args"]):  # only these cases pay for a training run
        places["run"] = str(request.getfixturevalue("trained_run"))
    args = [arg.format(**places) for arg in case["args"]]
    watched = [Path(places[key]) for key in ("tmp", "corpus", "run") if key in places]
    before = {root: listing(root) for root in watched}

    result = run_cli(case["cli"], args, cwd=tmp_path)

    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and case["error"] in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    for root in watched:
        assert listing(root) == before[root], f"files left behind in {root}"


def test_the_control_dataset_trains(tmp_path):
    """valid.yaml is sound, so each bad case above fails only for its own defect."""
    args = [f"--config-dir={CORPUS}", "dataset=valid", f"data.root={CORPUS}", *FAST]
    args.append("privacy.noise_seed=0")  # 30 rows: fresh noise would vary the batch size
    result = run_cli("train", [*args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "model.pt").is_file()
