"""The benchmark grid resumes (a finished cell is not re-run) and the report rebuilds from CSVs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import optional_module
from tests.conftest import run_script as forked_script

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from bench.results_rows import read_rows  # noqa: E402
from reports.report_benchmark import fidelity_table, grid_bar  # noqa: E402

TINY_SETTINGS = [
    "train.steps=3",
    "train.batch_size=64",
    "model.generator_hidden=[16]",
    "model.discriminator_hidden=[16]",
]
TINY = "overrides=[" + ",".join(f'"{s}"' for s in TINY_SETTINGS) + "]"


def run_script(script: str, *args: str, cwd: Path, data_dir: Path):
    """``python SCRIPT ARGS`` as a shell runs it, forked from this process (which has imported
    the scripts' modules above)."""
    env = {**os.environ, "RDPGAN_DATA_DIR": str(data_dir)}
    return forked_script(Path(script), list(args), cwd, env)


def cervical_grid(tmp_path: Path, *settings: str) -> list[str]:
    """The benchmark script on cervical's cgan and rdp_cgan cells, tiny, writing under
    ``tmp_path``."""
    return [
        str(REPO / "scripts" / "bench" / "benchmark.py"),
        "table=cervical",
        "method=cgan,rdp_cgan",
        *settings,
        f"results_dir={tmp_path / 'results'}",
        TINY,
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]


def test_grid_slice_runs_resumes_and_reports(tmp_path, data_dir):
    results = tmp_path / "results"
    grid = cervical_grid(tmp_path, "epsilon=2,8", "repeats=1")
    first = run_script(*grid, cwd=tmp_path, data_dir=data_dir)
    assert first.returncode == 0, first.stderr[-2000:]
    runs = pd.read_csv(results / "bench_cervical.csv")
    # cgan ignores ε: one run, not two; rdp_cgan: one per ε.
    assert sorted(runs["method"].tolist()) == ["cgan", "rdp_cgan", "rdp_cgan"]
    private = runs[runs["method"] == "rdp_cgan"]
    assert (private["epsilon_spent"] <= private["epsilon"]).all()
    assert {"command", "date", "machine", "commit", "real_mean"} <= set(runs.columns)
    fidelity = ["tvd_1way", "tvd_2way", "tvd_3way_target", "k_marginal", "association_difference"]
    assert runs[fidelity].notna().all().all()
    assert runs["tvd_1way"].between(0, 1).all() and runs["k_marginal"].between(0, 1000).all()
    # The same at the data's resolution, and the worst numeric column by name.
    fidelity += ["q_tvd_1way", "q_tvd_2way", "q_tvd_3way_target", "q_worst_numeric_1way"]
    assert runs[fidelity].notna().all().all()
    assert runs["q_worst_numeric_1way"].between(0, 1).all()
    real = pd.read_csv(results / "bench_real_cervical.csv")
    assert len(real) == 1 and real[fidelity].notna().all().all()  # the held-out floor
    assert all(isinstance(name, str) for name in runs["q_worst_numeric_column"])

    again = run_script(*grid, cwd=tmp_path, data_dir=data_dir)
    assert again.returncode == 0
    assert again.stdout.count("skip (done)") == 4
    assert len(pd.read_csv(results / "bench_cervical.csv")) == 3

    report = run_script(
        str(REPO / "scripts" / "reports" / "report_benchmark.py"),
        "--results",
        str(results),
        cwd=tmp_path,
        data_dir=data_dir,
    )
    assert report.returncode == 0, report.stderr
    text = (results / "README.md").read_text()
    assert "### cervical" in text and "paper's mean" in text
    assert (results / "auroc_vs_epsilon.png").stat().st_size > 1000
    assert "held-out real rows (floor)" in text and "2-way TVD" in text
    assert "| 2-way TVD | 2-way TVD (quantiles) |" in text
    assert (results / "fidelity_vs_epsilon.png").stat().st_size > 1000


def assert_each_cell_landed_once(results: Path, repeats: int) -> None:
    """Both methods' ``repeats`` repeats of the launcher tests' grid: one row each, none lost,
    and each split's real reference computed once."""
    runs = pd.read_csv(results / "bench_cervical.csv")
    assert sorted(zip(runs["method"], runs["repeat"], strict=True)) == [
        (method, repeat) for method in ("cgan", "rdp_cgan") for repeat in range(repeats)
    ]
    real = pd.read_csv(results / "bench_real_cervical.csv")
    assert sorted(real["repeat"]) == list(range(repeats))


def test_grid_runs_under_the_joblib_launcher(tmp_path, data_dir):
    """Hydra's joblib launcher fans the cells out over 2 processes; their rows all land, each
    once (the CSV append is locked), as with the basic launcher. One repeat: both cells start
    together and need the same split's real reference, which one computes while the other
    waits for it (its own lock)."""
    results = tmp_path / "results"
    grid = cervical_grid(
        tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "epsilon=8", "repeats=1"
    )
    run = run_script(*grid, cwd=tmp_path, data_dir=data_dir)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Joblib.Parallel(n_jobs=2" in run.stdout + run.stderr
    assert_each_cell_landed_once(results, repeats=1)


def test_parallel_epsilon_jobs_run_the_cgan_cell_once(tmp_path, data_dir):
    """cgan's cell does not depend on ε: two ε jobs started together under joblib must not
    both train it (each checked "not done" before the other had finished, until the check
    and the run were made one locked step). Two repeats: each is trained once, on its own
    split, and the other job skips it."""
    results = tmp_path / "results"
    grid = cervical_grid(
        tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "epsilon=2,8", "repeats=2"
    )
    grid[grid.index("method=cgan,rdp_cgan")] = "method=cgan"
    run = run_script(*grid, cwd=tmp_path, data_dir=data_dir)
    assert run.returncode == 0, run.stderr[-2000:]
    runs = pd.read_csv(results / "bench_cervical.csv")
    assert sorted(zip(runs["method"], runs["repeat"], strict=True)) == [("cgan", 0), ("cgan", 1)]
    assert (run.stdout + run.stderr).count("skip (done)") == 2
    real = pd.read_csv(results / "bench_real_cervical.csv")
    assert sorted(real["repeat"]) == [0, 1]  # one reference per split


def test_grid_runs_under_the_ray_launcher(tmp_path, data_dir):
    """Hydra's Ray launcher (the `ray` extra) runs the cells as tasks on a local Ray instance
    it starts with 2 CPUs; their rows all land, each once, as with the joblib launcher."""
    optional_module("ray", "hydra_plugins.hydra_ray_launcher", "pip install -e '.[ray]'")
    results = tmp_path / "results"
    grid = cervical_grid(
        tmp_path,
        "hydra/launcher=ray",
        "+hydra.launcher.ray.init.num_cpus=2",
        "+hydra.launcher.ray.init.include_dashboard=false",
        "epsilon=8",
        "repeats=2",
    )
    run = run_script(*grid, cwd=tmp_path, data_dir=data_dir)
    assert run.returncode == 0, run.stderr[-2000:]
    log = run.stdout + run.stderr
    assert "Ray Launcher is launching 2 jobs" in log
    assert "'num_cpus': 2" in log  # ray.init got the settings, not a default instance
    assert_each_cell_landed_once(results, repeats=2)


def test_fidelity_table_puts_quantile_scores_beside_public_ones_and_copes_without_them():
    """Rows written before the q_ columns existed (and a floor without them) show "–"; a CSV
    without any shows the public columns alone, as before."""
    runs = pd.DataFrame(
        {
            "method": ["cgan", "rdp_cgan", "rdp_cgan"],
            "epsilon": [np.nan, 8.0, 8.0],
            "share_of_real": [0.99, 0.97, 0.96],
            "tvd_1way": [0.01, 0.02, 0.03],
            "tvd_2way": [0.04, 0.05, 0.06],
            "q_tvd_1way": [np.nan, 0.10, 0.20],  # the cgan row is older
            "q_worst_numeric_1way": [np.nan, 0.40, 0.50],
            "q_worst_numeric_column": [None, "fnlwgt", "fnlwgt"],
        }
    )
    real = pd.DataFrame({"tvd_1way": [0.005], "tvd_2way": [0.02]})
    lines = fidelity_table(runs, real).splitlines()
    assert lines[0] == (
        "|  | ε | 1-way TVD | 1-way TVD (quantiles) | 2-way TVD "
        "| worst numeric 1-way TVD (quantiles) | AUROC ÷ real | runs |"
    )
    assert lines[2] == "| held-out real rows (floor) | – | 0.0050 | – | 0.0200 | – | 1 | 1 |"
    assert lines[3].startswith("| cgan (non-private) | – | 0.0100 | – | 0.0400 | – |")
    assert "| 0.1500 ± 0.0707 | 0.0550 ± 0.0071 | 0.4500 ± 0.0707 (fnlwgt) |" in lines[4]
    old = fidelity_table(runs.drop(columns=[c for c in runs if c.startswith("q_")]), real)
    assert "quantiles" not in old and old.splitlines()[2].endswith("| 0.0200 | 1 | 1 |")


def test_cgan_cells_run_their_own_schedule_and_older_rows_count_as_the_default(tmp_path):
    """The non-private cgan trains with ``train=nonprivate`` (an override naming another wins),
    and the grid keys its cells by schedule: a row written before the ``train`` column ran the
    default schedule, so it finishes a private cell but not a cgan one."""
    from bench.benchmark import BenchmarkConfig, is_done, train_schedule

    assert train_schedule(BenchmarkConfig(method="cgan")) == "nonprivate"
    assert train_schedule(BenchmarkConfig(method="rdp_cgan")) == "default"
    assert train_schedule(BenchmarkConfig(method="cgan", overrides=["train=long"])) == "long"
    csv = tmp_path / "bench.csv"
    old = {"dataset": "adult", "repeat": 0}
    pd.DataFrame(
        [{**old, "method": "cgan", "epsilon": None}, {**old, "method": "rdp_cgan", "epsilon": 8.0}]
    ).to_csv(csv, index=False)
    assert not is_done(csv, {**old, "method": "cgan", "epsilon": None, "train": "nonprivate"})
    assert is_done(csv, {**old, "method": "rdp_cgan", "epsilon": 8.0, "train": "default"})


def full_grid(commit: str = "abc1234", cgan: float = 0.98, rdp8: float = 0.96) -> pd.DataFrame:
    """One table's grid rows: repeats 0-2 of every cell, means as given (others 0.9), and
    MST at ε=1 (0.5) for cervical's comparison."""
    rows = [
        {"method": "cgan", "epsilon": np.nan, "train": "nonprivate", "repeat": r, "mean": cgan}
        for r in range(3)
    ]
    for method in ("dp_cgan", "rdp_cgan"):
        for eps in (1.0, 2.0, 4.0, 6.0, 8.0):
            mean = rdp8 if (method, eps) == ("rdp_cgan", 8.0) else 0.9
            rows += [
                {"method": method, "epsilon": eps, "train": "default", "repeat": r, "mean": mean}
                for r in range(3)
            ]
    rows += [{"method": "mst", "epsilon": 1.0, "repeat": r, "mean": 0.5} for r in range(2)]
    return pd.DataFrame(rows).assign(commit=commit)


def mutate(table: str, change) -> dict:
    """A grid that meets the bar, with ``change`` applied to ``table``'s rows."""
    real = pd.DataFrame({"mean": [1.0]})
    grid = {name: (full_grid(), real) for name in ("adult", "cervical", "creditcard")}
    grid[table] = (change(grid[table][0].copy()), real)
    return grid


def set_mean(method: str, eps: float, value: float):
    def change(rows: pd.DataFrame) -> pd.DataFrame:
        rows.loc[(rows["method"] == method) & (rows["epsilon"] == eps), "mean"] = value
        return rows

    return change


@pytest.mark.parametrize(
    ("table", "change", "failing"),
    [
        ("adult", lambda rows: rows, []),
        ("cervical", lambda rows: rows.assign(commit="def5678"), ["one commit"]),
        (
            "cervical",
            lambda rows: pd.concat([rows, rows.iloc[[3]]]),
            ["dp_cgan/1: repeats [0, 0, 1, 2]"],
        ),
        (
            "adult",
            lambda rows: rows.drop(
                rows.index[(rows["method"] == "dp_cgan") & (rows["epsilon"] == 2.0)]
            ),
            ["adult/dp_cgan/2: repeats []", "adult: dp_cgan present at every ε (missing at [2])"],
        ),
        (
            "cervical",
            set_mean("rdp_cgan", 8.0, 0.94),
            ["cervical: rdp_cgan ε=8 0.940 ≥ the paper's 0.950"],
        ),
        (
            "creditcard",
            set_mean("rdp_cgan", 8.0, 0.99),
            ["creditcard: cgan 0.9800 ≥ rdp_cgan ε=8 0.9900"],
        ),
        ("cervical", set_mean("mst", 1.0, 0.95), ["cervical: rdp_cgan ε=1 0.900 ≥ mst ε=1 0.950"]),
        (
            # cgan rows of the private schedule (or older rows without it) are not its cell
            "adult",
            lambda rows: rows.assign(train=rows["train"].replace("nonprivate", "default")),
            [
                "adult/cgan/–: repeats []",
                "adult: cgan nan ≥ rdp_cgan",
                "adult: cgan nan ≥ the paper's",
            ],
        ),
    ],
)
def test_grid_bar_fails_each_item_of_issue_28_on_its_own(table, change, failing, tmp_path):
    """A grid that meets issue 28's bar passes every item; each way of falling short fails
    exactly the items it should, and a NaN share fails its comparison."""
    (tmp_path / "grid").mkdir()
    (tmp_path / "grid" / "bench_adult.csv").write_text("x\n")  # the grid's own: fine
    (tmp_path / "archive").mkdir()
    (tmp_path / "archive" / "bench_adult.csv").write_text("x\n")  # archived: fine
    lines = grid_bar(mutate(table, change), tmp_path / "grid", tmp_path).splitlines()
    failed = [line for line in lines if line.endswith("**NOT met**")]
    assert len(failed) == len(failing), lines
    for expected in failing:
        assert any(expected in line for line in failed), (expected, failed)


def test_grid_bar_finds_a_superseded_grid_and_a_missing_table(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "bench_cervical.csv").write_text("x\n")
    grid = mutate("adult", lambda rows: rows)
    del grid["creditcard"]
    lines = grid_bar(grid, tmp_path / "grid", tmp_path).splitlines()
    failed = [line for line in lines if line.endswith("**NOT met**")]
    assert any("found: old/bench_cervical.csv" in line for line in failed)
    assert any(line.startswith("- creditcard: rdp_cgan ε=8 nan") for line in failed)
    assert "- adult: cgan 0.980 ≥ the paper's CGAN share 0.977 of real: met" in lines


def test_a_commit_of_digits_alone_reads_back_as_text(tmp_path):
    """A short hash such as 1081613 is a commit, not a number (the grid's report joins them)."""
    path = tmp_path / "bench.csv"
    pd.DataFrame({"commit": ["1081613", "0123456", "fb1dab3"], "x": [1, 2, 3]}).to_csv(path)
    assert read_rows(path)["commit"].tolist() == ["1081613", "0123456", "fb1dab3"]


def test_results_rows_appended_at_once_by_several_jobs_are_all_kept(tmp_path):
    """The tuning scripts and the benchmark's launcher workers append to one CSV at once: a
    read-modify-write without the lock loses rows. Three processes started together, each
    importing only the rows module (this checkout's), append 25 rows each."""
    path = tmp_path / "rows.csv"
    writer = (
        "import sys; sys.path[:0] = [sys.argv[1], sys.argv[4]]; "
        "from pathlib import Path; from bench.results_rows import append_rows\n"
        "for i in range(25):\n"
        "    append_rows(Path(sys.argv[2]), "
        "[{'writer': int(sys.argv[3]), 'i': i, 'commit': '0123456'}])"
    )
    jobs = [
        subprocess.Popen(
            [sys.executable, "-c", writer, str(REPO / "scripts"), str(path), str(k), str(REPO)]
        )
        for k in range(3)
    ]
    for job in jobs:
        assert job.wait(timeout=120) == 0  # a crashed writer would only show as missing rows
    rows = read_rows(path)
    assert sorted(zip(rows["writer"], rows["i"], strict=True)) == [
        (k, i) for k in range(3) for i in range(25)
    ]
    assert set(rows["commit"]) == {"0123456"}  # a hash of digits stays text
