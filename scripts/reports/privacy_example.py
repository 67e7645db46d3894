"""The README's ``privacy.json`` example and self-check figures, from one real run of the
default command.

    python scripts/reports/privacy_example.py

Runs ``python -m rdpgan.train dataset=adult epsilon=8`` (the README's first command) in a
temporary directory, writes its ledger to ``results/privacy_example.json`` (with the command,
date, commit and machine), and replaces the example between the README's markers with it, its
numbers rounded for reading. From the same run, ``results/self_check.md``: how far its
``synthetic.csv`` sits from each release (``metrics.json``'s ``self_check``) and the distance
of each sampling variant that chose it (:meth:`rdpgan.sampler.Sampler.release_distance`).
The run draws fresh OS entropy (as a user's would: a noise seed would mark it not end-to-end);
the sampling rate comes from the noisy label counts, so its last digits, and σ's, move from
run to run. The run's ``seed`` is the default (0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line

REPO = Path(__file__).resolve().parents[2]
ARGS = ["dataset=adult", "epsilon=8"]
START = "<!-- privacy.json example: made by scripts/reports/privacy_example.py -->"
END = "<!-- end of the privacy.json example -->"
# Keys a ledger entry carries as null when they do not apply; the example leaves them out.
EMPTY = (None, [])


def rounded(value: object) -> object:
    if isinstance(value, float):
        return float(f"{value:.5g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items() if v not in EMPTY or k == "notes"}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def example_block(ledger: dict) -> str:
    """The ledger as the README shows it: the header on two lines, a line per release."""
    short = rounded(ledger)
    mechanisms = short.pop("mechanisms")
    head = json.dumps(short)[1:-1]
    lines = [json.dumps(m) for m in mechanisms]
    body = ",\n   ".join(lines)
    return f'```json\n{{{head},\n "mechanisms": [\n   {body}]}}\n```'


def main() -> None:
    commit, date = code_commit(), datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        subprocess.run(
            [sys.executable, "-m", "rdpgan.train", *ARGS, f"hydra.run.dir={run}"],
            check=True,
            cwd=REPO,
            env=os.environ,
        )
        ledger = json.loads((run / "privacy.json").read_text())
        write_self_check(run, commit, date)
    record = {
        "command": "python -m rdpgan.train " + " ".join(ARGS),
        "made_by": "python scripts/reports/privacy_example.py",
        "date": date,
        "commit": commit,
        "machine": machine_line(),
        "seed": 0,
        "privacy.json": ledger,
    }
    (REPO / "results" / "privacy_example.json").write_text(json.dumps(record, indent=1) + "\n")
    readme = REPO / "README.md"
    text = readme.read_text()
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    block = f"{START}\n{example_block(ledger)}\n\n(`{record['command']}` at {commit}, {date}; "
    block += "`results/privacy_example.json` holds it unrounded)\n"
    readme.write_text(before + block + END + after)
    print(f"epsilon_spent {ledger['epsilon_spent']:.4f}; README updated")


def write_self_check(run: Path, commit: str, date: str) -> None:
    """The run's self-check and its sampling choice, as ``results/self_check.md``."""
    from rdpgan.sampler import RAKING_POOL, spare_workers
    from rdpgan.synthesizer import DPCGAN

    gaps = json.loads((run / "metrics.json").read_text())["self_check"]
    sampling = DPCGAN.load(run).sampler
    distances = {
        pool: sampling.release_distance(pool, spare_workers()) for pool in (RAKING_POOL, 1)
    }
    lines = [
        "# The self-check of a default run",
        "",
        "| release | cells | rms gap (noise stds) | largest | where |",
        "| --- | ---: | ---: | ---: | --- |",
        *(
            f"| {g['release']} | {g['cells']} | {g['rms']:.2f} | {g['worst']:.2f} | {g['where']} |"
            for g in gaps
        ),
        "",
        "The sampling variants it chose between (root mean square gap over every released cell,"
        " on 8,192 rows each): "
        + ", ".join(f"pool {pool}: {d:.2f}" for pool, d in distances.items())
        + f"; chosen: pool {sampling.chosen_pool()}.",
        "",
        f"The rows of `synthetic.csv` of `python -m rdpgan.train {' '.join(ARGS)}` (seed 0, fresh"
        f" OS entropy) against the run's own releases. Made by"
        f" `python scripts/reports/privacy_example.py`"
        f" at {commit} on {machine_line()}, {date}.",
    ]
    (REPO / "results" / "self_check.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
