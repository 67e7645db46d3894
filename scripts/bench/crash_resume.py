"""The crash bar (issues 29 and 51): a default Adult run killed with SIGKILL at 30%, 50% and 70% of
its wall time, then resumed (``resume=true``), against the same run left alone; and what the
checkpoints cost, as the run's wall time with them (every 2% of the steps) over the same run
checkpointed only after its first and last step (``train.checkpoint_share=1``), in pairs.

For each kill it records what was on disk at the kill (the last checkpoint's step, the steps
and epsilon the write-ahead ledger had charged) and what the resumed run ends with: epsilon
spent, the DP-SGD steps its ledger charged, and the discriminator steps whose updates the model
holds (a kill loses the steps after the last checkpoint: they stay charged, as they were taken,
so the model holds up to two checkpoint blocks fewer). Writes ``results/crash_resume.{csv,md}``.

    python scripts/bench/crash_resume.py            # RDPGAN_DATA_DIR must name the data root

Run it alone on the machine: the kill times are fractions of the measured wall time.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "results"
COMMIT = code_commit()
FRACTIONS = (0.3, 0.5, 0.7)
# The model must hold at least this share of the uninterrupted run's DP-SGD steps.
MODEL_STEPS_BAR = 0.95
# Every run keys its secret noise with this number (so marked not end-to-end private): the
# releases before training, hence the sampling rate, sigma and the steps the budget allows, are
# then the same in every run, and their ledgers can be compared exactly. A resumed seeded run
# keys its noise by its first step, as any resumed run does.
NOISE_SEED = 29
DP_SGD = "dp_sgd_discriminator"


def train(run_dir: Path, *overrides: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "rdpgan.train",
        f"hydra.run.dir={run_dir}",
        "train.progress=false",
        f"privacy.noise_seed={NOISE_SEED}",
        *overrides,
    ]


def ledger(run_dir: Path) -> tuple[float | None, int | None]:
    """(epsilon spent, DP-SGD steps charged) in the run's privacy.json (None: no file yet)."""
    path = run_dir / "privacy.json"
    if not path.is_file():
        return None, None
    record = json.loads(path.read_text())
    steps = [m["steps"] for m in record["mechanisms"] if m["name"] == DP_SGD]
    return record["epsilon_spent"], (steps[0] if steps else 0)


def checkpoint_step(run_dir: Path) -> int | None:
    path = run_dir / "checkpoint.json"
    return json.loads(path.read_text())["step"] if path.is_file() else None


def model_steps(run_dir: Path) -> int:
    return json.loads((run_dir / "metrics.json").read_text())["discriminator_steps"]


def run_alone(run_dir: Path, epsilon: float, *overrides: str) -> tuple[float, dict]:
    began = time.monotonic()
    subprocess.run(
        train(run_dir, "dataset=adult", f"epsilon={epsilon}", *overrides),
        check=True,
        capture_output=True,
    )
    seconds = time.monotonic() - began
    spent, steps = ledger(run_dir)
    ended = {"epsilon_spent": spent, "ledger_steps": steps, "model_steps": model_steps(run_dir)}
    return seconds, ended


def killed_and_resumed(run_dir: Path, epsilon: float, after: float) -> dict:
    process = subprocess.Popen(
        train(run_dir, "dataset=adult", f"epsilon={epsilon}"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(after)
    finished_first = process.poll() is not None
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    epsilon_at_kill, steps_at_kill = ledger(run_dir)
    at_kill = {
        "checkpoint_step_at_kill": checkpoint_step(run_dir),
        "ledger_steps_at_kill": steps_at_kill,
        "epsilon_at_kill": epsilon_at_kill,
        "finished_before_kill": finished_first,
    }
    if (run_dir / "synthetic.csv").is_file():  # written last: the run had finished
        outcome = "not needed: the run had finished"
    else:
        resumed = subprocess.run(train(run_dir, "resume=true"), capture_output=True, text=True)
        if resumed.returncode != 0:
            return {**at_kill, "resume": resumed.stderr.strip().splitlines()[-1]}
        outcome = "ok"
    spent, steps = ledger(run_dir)
    return {
        **at_kill,
        "resume": outcome,
        "epsilon_spent": spent,
        "ledger_steps": steps,
        "model_steps": model_steps(run_dir),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--pairs", type=int, default=3, help="overhead pairs (A B A B ...)")
    args = parser.parse_args()
    if not os.environ.get("RDPGAN_DATA_DIR"):
        sys.exit("set RDPGAN_DATA_DIR to the data root (it holds adult/)")
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        seconds, alone = run_alone(Path(tmp) / "alone", args.epsilon)
        rows.append({"kill_at": "none", "killed_after_s": "", **alone})
        overhead = []  # (seconds with checkpoints every block, seconds with two)
        for pair in range(args.pairs):
            blocks = run_alone(Path(tmp) / f"blocks{pair}", args.epsilon)[0]
            ends = run_alone(Path(tmp) / f"ends{pair}", args.epsilon, "train.checkpoint_share=1")
            overhead.append((blocks, ends[0]))
        for fraction in FRACTIONS:
            after = fraction * seconds
            result = killed_and_resumed(Path(tmp) / f"kill{fraction}", args.epsilon, after)
            rows.append({"kill_at": f"{fraction:.0%}", "killed_after_s": f"{after:.1f}", **result})
    write(rows, seconds, overhead, args.epsilon, started)


def write(
    rows: list[dict],
    seconds: float,
    overhead: list[tuple[float, float]],
    epsilon: float,
    started: str,
) -> None:
    fields = [
        "kill_at",
        "killed_after_s",
        "checkpoint_step_at_kill",
        "ledger_steps_at_kill",
        "epsilon_at_kill",
        "finished_before_kill",
        "resume",
        "epsilon_spent",
        "ledger_steps",
        "model_steps",
    ]
    RESULTS.mkdir(exist_ok=True)
    with (RESULTS / "crash_resume.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, [*fields, "commit"])
        writer.writeheader()
        for row in rows:
            writer.writerow({**{f: row.get(f, "") for f in fields}, "commit": COMMIT})
    alone = rows[0]
    lines = [
        "# A crash costs seconds, not the budget",
        "",
        "| kill at | after s | checkpoint step at kill | ledger steps at kill | ε at kill "
        "| resume | ε spent | ledger steps | model steps | model ÷ alone |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |",
    ]

    def cell(value: object, digits: int = 4) -> str:
        if value is None or value == "":
            return "—"
        return f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    for row in rows:
        lines.append(
            "| "
            + " | ".join(
                [
                    row["kill_at"],
                    row["killed_after_s"] or "—",
                    cell(row.get("checkpoint_step_at_kill")),
                    cell(row.get("ledger_steps_at_kill")),
                    cell(row.get("epsilon_at_kill")),
                    row.get("resume", "—"),
                    cell(row.get("epsilon_spent")),
                    cell(row.get("ledger_steps")),
                    cell(row.get("model_steps")),
                    cell(share(row, alone), 3),
                ]
            )
            + " |"
        )
    same = all(
        r.get("epsilon_spent") is not None
        and r["epsilon_spent"] == alone["epsilon_spent"]
        and r["ledger_steps"] == alone["ledger_steps"]
        for r in rows[1:]
    )
    kept = all((share(r, alone) or 0.0) >= MODEL_STEPS_BAR for r in rows[1:])
    ratios = sorted(blocks / ends for blocks, ends in overhead)
    lines += [
        "",
        "Bars: every kill resumes to the uninterrupted run's ε spent and ledger steps: "
        f"**{'met' if same else 'not met'}**; its model holds at least "
        f"{MODEL_STEPS_BAR:.0%} of that run's DP-SGD steps: **{'met' if kept else 'not met'}**.",
        "",
        "What checkpoints cost: the whole run's wall time with a checkpoint every 2% of the "
        "steps (the default) over the same run checkpointed after its first and last step "
        "only (`train.checkpoint_share=1`), run in pairs A B A B: "
        + ", ".join(f"{b:.1f} s / {e:.1f} s" for b, e in overhead)
        + (
            f"; ratio median {statistics.median(ratios):.3f} (min {ratios[0]:.3f}, max "
            f"{ratios[-1]:.3f})."
            if ratios
            else "."
        ),
        "",
        "`at kill`: what was on disk when the process died (the last complete checkpoint's "
        "step, and the DP-SGD steps and ε the write-ahead ledger had charged). `ledger steps`: "
        "the DP-SGD steps the final ledger charges; `model steps`: the discriminator steps whose "
        "updates the model holds (the steps after the last complete checkpoint are lost with "
        "the process but stay charged: they were taken). Checkpoints come every 2% of the "
        "planned steps (`train.checkpoint_share`), written on a background thread while the "
        "next block trains, so a kill loses at most two blocks.",
        "",
        f"Made by `python scripts/bench/crash_resume.py --epsilon {epsilon:g}` at {COMMIT} on "
        f"{machine_line()}, {started}. The run: `python -m rdpgan.train dataset=adult "
        f"epsilon={epsilon:g} privacy.noise_seed={NOISE_SEED}` (default settings; the seed "
        "makes the releases before training, and so the budget's steps, the same in every "
        f"run), {seconds:.1f} s left alone; each other run is killed with SIGKILL (its whole "
        "process group) at a share of that wall time, then resumed with `resume=true` in the "
        "same directory.",
        "",
    ]
    (RESULTS / "crash_resume.md").write_text("\n".join(lines))
    print("\n".join(lines))


def share(row: dict, alone: dict) -> float | None:
    """The row's model steps over the uninterrupted run's."""
    steps = row.get("model_steps")
    return None if steps in (None, "") else steps / alone["model_steps"]


if __name__ == "__main__":
    main()
