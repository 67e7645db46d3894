"""The paper's benchmark: datasets × {cgan, dp_cgan, rdp_cgan} × ε × repeats, resumable.

    bash scripts/bench/paper_grid.sh                       # the grid of results/README.md, in order
    python scripts/bench/benchmark.py repeats=3 table=adult epsilon=8   # a slice
    python scripts/bench/benchmark.py method=aim,mst epsilon=8 aim_rounds=48   # the reference peers
    python scripts/reports/report_benchmark.py               # tables + figures from results/grid
    # the development suite (python scripts/data/download_data.py --dataset devsuite; fertility's
    # 203k train rows need delta below 1/n: add delta=1e-6 for it), then its report:
    python scripts/bench/benchmark.py table=creditcard_aer,acs12,credit_data,ames,gss_wages \
        method=rdp_cgan,aim,mst epsilon=8,1 repeats=2 results_dir=results/fidelity_resolution
    python scripts/reports/report_fidelity.py --results results/fidelity_resolution

Each repeat r makes its own 80/20 split (each row held out by a hash of its own cells keyed
with r: ``rdpgan.data.split``), trains with seed r (and its secret
randomness keyed by a number derived from the cell, so a cell is reproducible; its ledger then
says it is not end-to-end private) through exactly the code path of ``python -m rdpgan.train``
(so the ledger rules hold), scores the synthetic
table with the paper's 8 classifiers on the held-out real rows, and appends one row to
``<results_dir>/bench_<dataset>.csv`` (``results/grid`` unless ``results_dir=...``). The
real-data reference for split r is computed once and cached in
``<results_dir>/bench_real_<dataset>.csv``. The non-private cgan does not depend on ε: it is run
once per repeat and stored with ``epsilon`` empty. Nothing is tuned here; settings come from
configs/.

The marginal-based peers ``aim`` and ``mst`` (``scripts/bench/marginal_peers.py``; they need the
``bench`` extra, ``pip install -e .[bench]``) are references, not rdpgan runs: for each repeat
they get the same split, run on its train rows with numpy noise keyed by the same cell number,
and their synthetic table (written to ``repeat<r>/synthetic.csv``) is scored exactly as
rdp_cgan's. Their ``epsilon_spent`` is the target ε by their own zCDP accounting; AIM's
round cap is ``aim_rounds`` (48 unless ``aim_rounds=N``), recorded in the ``rounds`` column
with the select-measure rounds it ran in ``rounds_run``.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import hydra

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
import numpy as np
import pandas as pd
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from bench import marginal_peers  # scripts/, beside this file
from bench.machine_info import code_commit, machine_line
from bench.results_rows import append_rows, locked, read_rows
from rdpgan.cli import compose_run_config, existing_files, remove_new_files
from rdpgan.data.loading import Table, load_split
from rdpgan.data.schema import Continuous, Schema
from rdpgan.errors import UserInputError, first_line
from rdpgan.evaluate import score_table
from rdpgan.fidelity import fidelity_scores, per_column_tvd
from rdpgan.io import atomic_write
from rdpgan.train import run as train_run
from rdpgan.train import spending_record

REPO = Path(__file__).resolve().parents[2]
PRIVACY_OF_METHOD = {"cgan": "none", "dp_cgan": "dp", "rdp_cgan": "rdp"}
# The non-private CGAN trains on a schedule chosen for it (configs/train/nonprivate.yaml).
TRAIN_OF_METHOD = {"cgan": "nonprivate", "dp_cgan": "default", "rdp_cgan": "default"}
PEER_METHODS = marginal_peers.PEERS  # not rdpgan runs: see run_peer_repeat
FIDELITY_COLUMNS = (
    "tvd_1way",
    "tvd_2way",
    "tvd_3way_target",
    "k_marginal",
    "association_difference",
)
# The same TVDs at the data's resolution (20 quantiles of each numeric train column), prefixed
# "q_"; with the worst numeric column's 1-way TVD and its name (``q_worst_numeric_column``).
QUANTILE_COLUMNS = ("tvd_1way", "tvd_2way", "tvd_3way_target")


@dataclass
class BenchmarkConfig:
    table: str = "adult"  # a dataset name; `dataset` itself is a config group
    method: str = "rdp_cgan"
    epsilon: float = 8.0
    repeats: int = 10
    delta: float = 1e-5
    results_dir: str = "results/grid"
    # A tuple, not a list with a default_factory: launchers that pickle the job to other
    # processes (joblib's loky) pickle this __main__ class by value, which loses the factory.
    overrides: tuple[str, ...] = ()
    aim_rounds: int = marginal_peers.DEFAULT_AIM_ROUNDS  # AIM's round cap (method=aim only)


ConfigStore.instance().store(name="benchmark_schema", node=BenchmarkConfig)


# A key older rows do not have, read as what they ran: the default training schedule.
ABSENT_KEYS = {"train": "default"}


def is_done(path: Path, keys: dict) -> bool:
    rows = read_rows(path)
    if rows.empty:
        return False
    match = pd.Series(True, index=rows.index)
    for key, value in keys.items():
        column = rows[key] if key in rows else pd.Series(ABSENT_KEYS.get(key), index=rows.index)
        match &= column.isna() if value is None else (column == value)
    return bool(match.any())


# Read once, when the process starts: the code that runs is the code imported then, whatever
# is committed while a long grid is running.
COMMIT = code_commit()


def provenance() -> dict[str, str]:
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_line(),
        "commit": COMMIT,
    }


def command_line(cfg: BenchmarkConfig) -> str:
    """The command that reproduces this cell (copy-pastable, overrides quoted)."""
    words = [f"table={cfg.table}", f"method={cfg.method}", f"epsilon={cfg.epsilon}"]
    if cfg.method == "aim":
        words.append(f"aim_rounds={cfg.aim_rounds}")
    if cfg.overrides:
        words.append("'overrides=[" + ",".join(f'"{o}"' for o in cfg.overrides) + "]'")
    return "python scripts/bench/benchmark.py " + " ".join(words)


def real_reference(cfg: BenchmarkConfig, repeat: int, results: Path) -> dict:
    """The 8 classifiers trained on the real train split of repeat ``repeat`` (cached)."""
    path = results / f"bench_real_{cfg.table}.csv"
    keys = {"dataset": cfg.table, "repeat": repeat}
    # Parallel jobs of one split take turns (a lock of its own: append_row takes the CSV's).
    with locked(results / f"bench_real_{cfg.table}_compute"):
        if not is_done(path, keys):
            compute_real_reference(cfg, repeat, path, keys)
    rows = read_rows(path)
    return rows[(rows["dataset"] == cfg.table) & (rows["repeat"] == repeat)].iloc[0].to_dict()


def compute_real_reference(cfg: BenchmarkConfig, repeat: int, path: Path, keys: dict) -> None:
    """Train and score the 8 classifiers on split ``repeat``'s real rows; append to ``path``."""
    run_cfg = compose_run_config([f"dataset={cfg.table}", f"dataset.split_seed={repeat}"])
    table, train, test = load_split(run_cfg.dataset, run_cfg.data.root)
    scores = score_table(train, test, table.schema, table.target, table.positive_label, 0)
    row = {
        **keys,
        "mean": scores.mean,
        "seconds": scores.seconds,
        **{f"auroc_{k}": v for k, v in scores.auroc.items()},
        # The floor: held-out real rows against the train split, as synthetic rows are.
        **fidelity_columns(train, test, table.schema, table.target),
    }
    append_rows(path, [row])


def fidelity_columns(
    train: pd.DataFrame, rows: pd.DataFrame, schema: Schema, target: str
) -> dict[str, float | str | None]:
    """The scalar fidelity scores of ``rows`` against the train split, at the public bins and
    (``q_``) at the data's resolution."""
    public = fidelity_scores(train, rows, schema, target)
    quantile = fidelity_scores(train, rows, schema, target, resolution="quantile")
    tvd = per_column_tvd(train, rows, schema, resolution="quantile")
    numeric = [c.name for c in schema.columns if isinstance(c, Continuous)]
    worst = max(numeric, key=lambda name: tvd[name], default=None)
    return {
        **{key: public[key] for key in FIDELITY_COLUMNS},
        **{f"q_{key}": quantile[key] for key in QUANTILE_COLUMNS},
        "q_worst_numeric_1way": None if worst is None else tvd[worst],
        "q_worst_numeric_column": worst,
    }


def cell_noise_seed(cfg: BenchmarkConfig, repeat: int) -> int:
    """A stable 63-bit key per (table, method, epsilon, repeat); cgan's cell has no epsilon,
    so whichever epsilon job runs it draws the same noise."""
    epsilon = "-" if cfg.method == "cgan" else float(cfg.epsilon)
    cell = f"{cfg.table}/{cfg.method}/{epsilon}/{repeat}".encode()
    return int.from_bytes(hashlib.sha256(cell).digest()[:8], "big") >> 1


def train_schedule(cfg: BenchmarkConfig) -> str:
    """The ``train=`` group a cell runs: the method's, unless an override names another."""
    named = [o.split("=", 1)[1] for o in cfg.overrides if o.startswith("train=")]
    return named[-1] if named else TRAIN_OF_METHOD[cfg.method]


def run_repeat(cfg: BenchmarkConfig, repeat: int, out: Path, results: Path) -> None:
    epsilon = None if cfg.method == "cgan" else float(cfg.epsilon)
    csv = results / f"bench_{cfg.table}.csv"
    keys = {
        "dataset": cfg.table,
        "method": cfg.method,
        "epsilon": epsilon,
        "repeat": repeat,
        "train": train_schedule(cfg),
    }
    # cgan's cell is the same for every ε: parallel ε jobs take turns at it, so only the first
    # runs it and the others find it done (the CSV's own lock covers one append, not a run).
    with locked(results / f"bench_{cfg.table}_cgan") if epsilon is None else nullcontext():
        if is_done(csv, keys):
            print(f"skip (done): {keys}")
            return
        train_and_score(cfg, repeat, out, results, csv, keys)


def train_and_score(
    cfg: BenchmarkConfig, repeat: int, out: Path, results: Path, csv: Path, keys: dict
) -> None:
    """One rdpgan cell, trained through ``python -m rdpgan.train``'s code and appended to
    ``csv``."""
    real = real_reference(cfg, repeat, results)
    overrides = [
        f"dataset={cfg.table}",
        f"dataset.split_seed={repeat}",
        f"seed={repeat}",
        f"privacy={PRIVACY_OF_METHOD[cfg.method]}",
        f"train={keys['train']}",
        # Reproducible, for a benchmark (a release keeps the OS-entropy default); one key per
        # cell, so that no two cells share masks or noise.
        f"privacy.noise_seed={cell_noise_seed(cfg, repeat)}",
        f"epsilon={cfg.epsilon}",
        f"delta={cfg.delta}",
        "train.progress=false",
        *cfg.overrides,
    ]
    run_cfg = compose_run_config(overrides)
    run_dir = out / f"repeat{repeat}"
    started = time.perf_counter()
    model = train_run(run_cfg, run_dir)
    train_seconds = time.perf_counter() - started
    table, train, test = load_split(run_cfg.dataset, run_cfg.data.root)
    synthetic = table.schema.read_csv(run_dir / "synthetic.csv")
    epsilon_spent = model.ledger.to_dict()["epsilon_spent"]
    row = scored_row(cfg, table, train, test, synthetic, real, epsilon_spent, train_seconds)
    append_rows(csv, [{**keys, **row}])
    print(f"done: {keys} mean AUROC {row['mean']:.4f} (real {real['mean']:.4f})", flush=True)


def scored_row(
    cfg: BenchmarkConfig,
    table: Table,
    train: pd.DataFrame,
    test: pd.DataFrame,
    synthetic: pd.DataFrame,
    real: dict,
    epsilon_spent: float | None,
    train_seconds: float,
) -> dict:
    """The columns every method's row has: utility, fidelity, timings, provenance."""
    scores = score_table(synthetic, test, table.schema, table.target, table.positive_label, 0)
    return {
        "epsilon_spent": epsilon_spent,
        "delta": cfg.delta,
        "mean": scores.mean,
        **{f"auroc_{k}": v for k, v in scores.auroc.items()},
        "real_mean": real["mean"],
        "share_of_real": scores.mean / real["mean"],
        "synthetic_positives": int((synthetic[table.target] == table.positive_label).sum()),
        **fidelity_columns(train, synthetic, table.schema, table.target),
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(scores.seconds, 1),
        "command": command_line(cfg),
        **provenance(),
    }


def peer_run(
    cfg: BenchmarkConfig, repeat: int, run_dir: Path, log: Callable[[str], None]
) -> tuple[Table, pd.DataFrame, pd.DataFrame, pd.DataFrame, marginal_peers.PeerOutput, float]:
    """A peer's synthetic table for repeat ``repeat``: the repeat's split, numpy noise keyed by
    the cell, written to ``run_dir/synthetic.csv`` and read back as a scored table is read.
    Returns (table, train, test, synthetic, the peer's output, its seconds)."""
    run_cfg = compose_run_config(
        [f"dataset={cfg.table}", f"dataset.split_seed={repeat}", *cfg.overrides]
    )
    table, train, test = load_split(run_cfg.dataset, run_cfg.data.root)
    # Reproducible numpy noise keyed by the cell: acceptable for a reference, not for a release.
    rng = np.random.default_rng(cell_noise_seed(cfg, repeat))
    started = time.perf_counter()
    synthetic, peer = marginal_peers.synthesize(
        cfg.method,
        table.schema,
        train,
        float(cfg.epsilon),
        cfg.delta,
        rng,
        rounds=cfg.aim_rounds,
        log=log,
    )
    seconds = time.perf_counter() - started
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(run_dir / "synthetic.csv", lambda tmp: synthetic.to_csv(tmp, index=False))
    return table, train, test, table.schema.read_csv(run_dir / "synthetic.csv"), peer, seconds


def run_peer_repeat(cfg: BenchmarkConfig, repeat: int, out: Path, results: Path) -> None:
    """One repeat of a marginal-based peer (aim, mst): same split, same scoring, same columns
    as :func:`run_repeat`, plus AIM's ``rounds`` and ``rounds_run``."""
    csv = results / f"bench_{cfg.table}.csv"
    epsilon = float(cfg.epsilon)
    keys = {"dataset": cfg.table, "method": cfg.method, "epsilon": epsilon, "repeat": repeat}
    if is_done(csv, keys):
        print(f"skip (done): {keys}")
        return
    real = real_reference(cfg, repeat, results)
    table, train, test, synthetic, peer, train_seconds = peer_run(
        cfg, repeat, out / f"repeat{repeat}", lambda line: print(line, flush=True)
    )
    # epsilon_spent: by the mechanism's own zCDP accounting (ρ from (ε, δ)), not a ledger.
    row = scored_row(cfg, table, train, test, synthetic, real, epsilon, train_seconds)
    rounds = {"rounds": cfg.aim_rounds if cfg.method == "aim" else None}
    append_rows(csv, [{**keys, **row, **rounds, "rounds_run": peer.rounds_run}])
    print(f"done: {keys} mean AUROC {row['mean']:.4f} (real {real['mean']:.4f})", flush=True)


@hydra.main(config_path="../../configs/benchmark", config_name="config", version_base="1.3")
def main(raw: DictConfig) -> None:
    cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(BenchmarkConfig), raw))
    assert isinstance(cfg, BenchmarkConfig)
    if cfg.method not in (*PRIVACY_OF_METHOD, *PEER_METHODS):
        raise UserInputError(f"method must be one of {', '.join(PRIVACY_OF_METHOD)}, aim, mst")
    out = Path(HydraConfig.get().runtime.output_dir)
    before = existing_files(out)
    results = REPO / cfg.results_dir
    peer = cfg.method in PEER_METHODS
    try:
        if peer:
            marginal_peers.load_mbi()  # one clear line, before any work, when it is missing
        for repeat in range(cfg.repeats):
            (run_peer_repeat if peer else run_repeat)(cfg, repeat, out, results)
    except marginal_peers.PeerUnavailable as exc:
        remove_new_files(out, before)
        print(f"error: method {cfg.method}: {exc}", file=sys.stderr)
        sys.exit(2)
    except UserInputError as exc:
        remove_new_files(out, before, keep=spending_record)  # repeats' ledgers stay
        print(f"error: {first_line(exc)}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    if not {"-m", "--multirun"} & set(sys.argv[1:]):
        sys.argv.insert(1, "--multirun")  # the grid is the point; sweep params live in the config
    main()
