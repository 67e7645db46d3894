"""Where a default run's wall time goes: start-up, releases, the DP-SGD loop, and what follows.

    python scripts/bench/profile_run.py [--runs 3] [--loaded] [OVERRIDE ...]
                                                 (default: the README's run)

Each run is a fresh ``python -m rdpgan.train`` process (progress bar off, a temporary run
directory) in which this script wraps the job's stages with a clock; nothing else changes. The
stages follow the job's order, each from the end of the one before:

- start-up: the interpreter, imports and Hydra, up to the first line of the job;
- releases: the settings' checks, reading and splitting the table, the schema, the label counts,
  the numeric densities and the marginals;
- training: the DP-SGD loop (discriminator and generator steps, checkpoints);
- adaptive: the pairs measured where G is furthest from the rows (it samples rows of G);
- choice: raking or not, each tried on the self-check's rows (:meth:`Sampler.chosen_pool`);
- sampling: the output rows;
- writing: decoding, the self-check, and the files.

The issue's budget for a default Adult run is 45 s on an AVX2-only EPYC, 10 s of it outside the
loop; the stage times are also the place to look when a run is slow on another machine.
``--loaded`` times each run twice, quiet and beside one busy process (``bench_speed.py``'s
competitor), alternating: which stages a busy neighbour slows. With ``--one-core`` as well,
each is also timed confined to one core (the run's process pinned to the first core it may
use, so no second thread runs beside D's step): how a loaded run compares with a run that
never had a second core. Writes its part of ``results/speed.md`` for this kind of CPU (with
the emulation caps it ran under), one part each way.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.bench_speed import COMMIT, busy_competitor, machine, write_speed_md
from bench.machine_info import cpu_features

STAGES = ("start-up", "releases", "training", "adaptive", "choice", "sampling", "writing")
# Where each stage after start-up ends: (module, object, function) whose return ends it.
ENDS = {
    "releases": ("rdpgan.fitting", None, "_release_marginals"),
    "training": ("rdpgan.fitting", None, "run_steps"),
    "adaptive": ("rdpgan.adaptive", None, "measure_where_wrong"),
    "choice": ("rdpgan.sampler", "Sampler", "chosen_pool"),
}
DEFAULT = ["dataset=adult", "epsilon=8"]


def child(overrides: list[str], out: Path, started: float) -> None:
    """Run the job in this process with the stage clocks on; write the marks to ``out``.

    The job module runs afresh (as ``python -m`` runs it), so the clocks go on what it imports:
    each stage ends when its function returns (the first time), the start-up when the job's
    first call (the thread policy) begins, the sampling when the output's rows are drawn."""
    import importlib

    marks: dict[str, float] = {}

    def ending(name: str, function):
        def wrapped(*args, **kwargs):
            try:
                return function(*args, **kwargs)
            finally:
                marks.setdefault(name, time.time())

        return wrapped

    for name, (module_name, owner, function) in ENDS.items():
        module = importlib.import_module(module_name)
        holder = getattr(module, owner) if owner else module
        setattr(holder, function, ending(name, getattr(holder, function)))
    threads = importlib.import_module("rdpgan.threads")
    policy = threads.apply_thread_policy

    def job_starts(*args, **kwargs):
        marks.setdefault("start-up", time.time())
        return policy(*args, **kwargs)

    threads.apply_thread_policy = job_starts
    sampler = importlib.import_module("rdpgan.sampler").Sampler
    parts = sampler.parts

    def output_rows(self, *args, **kwargs):
        result = parts(self, *args, **kwargs)
        if "choice" in marks:  # (the choice's own trials return before it does)
            marks.setdefault("sampling", time.time())
        return result

    sampler.parts = output_rows
    # A finished run ends the process at once, its exit handlers run (rdpgan.cli.exit_finished).
    atexit.register(lambda: out.write_text(json.dumps({"started": started, **marks})))
    sys.argv = ["rdpgan.train", *overrides]
    runpy.run_module("rdpgan.train", run_name="__main__", alter_sys=True)


def one_run(overrides: list[str], one_core: bool = False) -> dict[str, float]:
    """Seconds per stage of one fresh run; with ``one_core``, pinned to one core."""
    with tempfile.TemporaryDirectory() as tmp:
        marks_file = Path(tmp) / "marks.json"
        args = [*overrides, "train.progress=false", f"hydra.run.dir={Path(tmp) / 'run'}"]
        started = time.time()
        code = (
            "import sys, time; sys.path.insert(0, sys.argv[1]); "
            "from bench.profile_run import child; "
            "child(sys.argv[4:], __import__('pathlib').Path(sys.argv[2]), float(sys.argv[3]))"
        )
        subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                str(Path(__file__).resolve().parents[1]),
                str(marks_file),
                repr(started),
                *args,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
            preexec_fn=_pin_to_one_core if one_core else None,
        )
        ended = time.time()
        marks = json.loads(marks_file.read_text())
    marks["writing"] = ended  # decoding, the self-check, the files and the exit
    seconds, previous = {}, marks["started"]
    for stage in STAGES:
        mark = marks.get(stage, previous)  # a stage the run skipped takes no time
        seconds[stage] = max(mark - previous, 0.0)
        previous = max(mark, previous)
    seconds["total"] = ended - marks["started"]
    return seconds


def _pin_to_one_core() -> None:
    """(In the run's process, before it starts.) Its first allowed core alone."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def loaded_run(overrides: list[str], one_core: bool = False) -> dict[str, float]:
    """:func:`one_run` beside one busy process."""
    competitor = busy_competitor()
    try:
        return one_run(overrides, one_core)
    finally:
        competitor.kill()
        competitor.wait()


def stage_table(columns: dict[str, list[dict[str, float]]]) -> list[str]:
    """Median seconds per stage of each column's runs (and each run's, with one column)."""
    medians = {
        name: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        for name, runs in columns.items()
    }
    if len(columns) == 1:
        (runs,) = columns.values()
        (median,) = medians.values()
        return [
            "| stage | seconds | runs |",
            "| --- | ---: | --- |",
            *(
                f"| {stage} | {median[stage]:.2f} | "
                f"{', '.join(f'{run[stage]:.2f}' for run in runs)} |"
                for stage in (*STAGES, "total")
            ),
        ]
    quiet = medians["quiet"]
    others = [name for name in columns if name != "quiet"]
    return [
        "| stage | quiet s | " + " | ".join(f"{name} s | {name} ÷ quiet" for name in others) + " |",
        "| --- | ---: |" + " ---: | ---: |" * len(others),
        *(
            f"| {stage} | {quiet[stage]:.2f} | "
            + " | ".join(
                f"{medians[name][stage]:.2f} | "
                f"{medians[name][stage] / quiet[stage] if quiet[stage] else float('nan'):.2f}×"
                for name in others
            )
            + " |"
            for stage in (*STAGES, "total")
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loaded", action="store_true")
    parser.add_argument("--one-core", action="store_true", help="with --loaded: also on one core")
    parser.add_argument("overrides", nargs="*", default=DEFAULT)
    args = parser.parse_args()
    if args.one_core and not args.loaded:
        parser.error("--one-core compares with the loaded runs: give --loaded too")
    ways = {"quiet": lambda: one_run(args.overrides)}
    if args.loaded:
        ways["loaded"] = lambda: loaded_run(args.overrides)
    if args.one_core:
        ways["one core"] = lambda: one_run(args.overrides, one_core=True)
        ways["one core, loaded"] = lambda: loaded_run(args.overrides, one_core=True)
    columns: dict[str, list[dict[str, float]]] = {name: [] for name in ways}
    for _ in range(args.runs):  # every way in turn: drift shows in all
        for name, run in ways.items():
            columns[name].append(run())
    quiet = {key: statistics.median(run[key] for run in columns["quiet"]) for key in STAGES}
    total = statistics.median(run["total"] for run in columns["quiet"])
    outside = total - quiet["training"]
    command = " ".join(["python -m rdpgan.train", *args.overrides])
    flags = f"--runs {args.runs}{' --loaded' if args.loaded else ''}"
    flags += " --one-core" if args.one_core else ""
    title = "beside a busy process" if args.loaded else "where a default run's time goes"
    lines = [
        f"## {title.capitalize()}, on {cpu_features()}",
        "",
        f"Made by `python scripts/bench/profile_run.py {flags} {' '.join(args.overrides)}` at "
        f"commit {COMMIT} on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, seed 0.",
        f"Machine: {machine()}",
        "",
        f"`{command}`, a fresh process each run (progress bar off); median seconds over "
        f"{args.runs} runs"
        + (
            ", quiet and beside one busy process (`while True: pass`)"
            + (", each also pinned to one core" if args.one_core else "")
            + ", in turn."
            if args.loaded
            else "."
        ),
        "",
        *stage_table(columns),
        "",
        f"Outside the DP-SGD loop (quiet): {outside:.1f} s of {total:.1f} s (the issue's budget "
        "on an AVX2-only EPYC: 10 s of 45 s; divide both by the run's ratio in "
        "`reference_ratio.py`'s part).",
    ]
    part = "profile_run.py" + (" --loaded" if args.loaded else "")
    write_speed_md("\n".join(lines), part + (" --one-core" if args.one_core else ""))


if __name__ == "__main__":
    main()
