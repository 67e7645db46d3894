"""Sampling benchmark: rows/s and peak memory of ``python -m rdpgan.sample`` on an Adult model.

    python scripts/bench/bench_sampling.py [--rows 1000000] [--chunk-size 100000] [--run-dir DIR]

Without ``--run-dir``, first trains a default-size model on Adult for ``--train-steps`` DP steps
(800, the default length: raking a barely trained model sweeps longer) with
``python -m rdpgan.train`` in a subprocess (which keeps training's memory out of this process's
peak). Then, in this process and through the same code as the CLI
(:func:`rdpgan.sample.write_samples`), it times generating ``--rows`` rows without writing them
(as the model's settings pick raking and tilt, then unraked keeping every generated row, unraked
and herded as small tables sample, untilted, raked at RAKING_POOL, with G's passes of other row
counts, and with numpy's loops, which calls of fewer generated rows run: :mod:`rdpgan.loops`),
then writing them to Parquet (as the model samples, and raked), then to CSV, in ``--rounds``
rounds (medians reported); the first sample after loading, which fits the tilt, once; as the
roofline, G's matrix products alone (float32, numpy's BLAS, as sampling runs them:
:mod:`rdpgan.frozen`) on one core; and, first of all, the command itself end to end for 1,000
rows (start-up, loading, the tilt's fit, writing a CSV), once with numba's cache empty, then in
``--startup-runs`` fresh processes (a call that small runs numpy's loops, :mod:`rdpgan.loops`,
so numba's cache should make no difference).
Writes its section of ``results/speed.md`` (the part after the training benchmark's).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from threadpoolctl import threadpool_limits

from bench.bench_speed import COMMIT, machine, write_speed_md
from bench.machine_info import cpu_features
from rdpgan import loops
from rdpgan import sampler as sampler_module
from rdpgan.frozen import FrozenGenerator
from rdpgan.sample import (
    iter_samples,
    load_model,
    sampling_workers,
    write_samples,
)

BAR_ROWS_PER_SECOND = 500_000  # issue 13
BAR_ROOFLINE_SHARE = 0.7  # issue 29
BAR_STARTUP_SECONDS = 3.0  # issue 29: ``python -m rdpgan.sample run_dir=... n=1000``
STARTUP_ROWS = 1_000
ROOFLINE_ROWS = sampler_module.SAMPLE_CHUNK  # one generator pass
OTHER_PASS_ROWS = (1_024, 4_096)  # G passes timed beside the default
RAKED_POOL = sampler_module.RAKING_POOL  # the pool raking is timed at
ROOFLINE_CHAINS = 20  # chains per thread when every worker runs them at once


@dataclass(frozen=True)
class Roofline:
    """G's products alone: GFLOP/s and generated rows/s on one thread, and rows/s on every
    worker at once."""

    gflops: float
    per_core: float
    all_cores: float


UNRAKED = "generate + decode, unraked, every row kept (`model.sample_pool=1 herding_pool=1`)"
HERDED = (
    "generate + decode, unraked, herded as small tables sample "
    f"(`model.sample_pool=1`, a pool of {sampler_module.HERDING_POOL})"
)


def matmul_roofline(generator: FrozenGenerator, workers: int, repeats: int = 5) -> Roofline:
    """G's matrix products (the body's layers and sampling's padded head) as a bare float32
    chain: the most a core can generate, before layer normalisation, draws, decoding or
    raking; on one thread, and on ``workers`` threads at once (each with one BLAS thread, as
    sampling runs them), where the cores share their caches and memory."""
    shapes = generator.product_shapes
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(shape, dtype=np.float32) for shape in shapes]
    rows = rng.standard_normal((ROOFLINE_ROWS, shapes[0][0]), dtype=np.float32)

    def chain() -> None:
        # Into arrays of this thread's own, reused: only the products are timed, not the
        # first touch of fresh pages (which sampling, too, avoids for its hidden layers).
        outputs = [np.empty((ROOFLINE_ROWS, weight.shape[1]), np.float32) for weight in weights]
        for _ in range(ROOFLINE_CHAINS):
            x = rows
            for weight, out in zip(weights, outputs, strict=True):
                x = np.matmul(x, weight, out=out)

    def together() -> None:
        threads = [threading.Thread(target=chain) for _ in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    rows_per_thread = ROOFLINE_CHAINS * ROOFLINE_ROWS
    with threadpool_limits(1, user_api="blas"):
        one = min(timed(chain) for _ in range(repeats))
        all_cores = min(timed(together) for _ in range(repeats))
    flops = 2 * rows_per_thread * sum(a * b for a, b in shapes)
    return Roofline(flops / one / 1e9, rows_per_thread / one, workers * rows_per_thread / all_cores)


def startup_seconds(
    run_dir: Path, out: Path, runs: int, numba_cache: Path | None = None
) -> list[float]:
    """Wall seconds of ``python -m rdpgan.sample run_dir=... n=1000`` in ``runs`` fresh
    processes, one after another: what a user waits for a small sample. With ``numba_cache``,
    numba caches its kernels there: empty, the first run compiles them; filled by such a run,
    every run loads them."""
    env = None if numba_cache is None else {**os.environ, "NUMBA_CACHE_DIR": str(numba_cache)}
    command = [
        sys.executable,
        "-m",
        "rdpgan.sample",
        f"run_dir={run_dir}",
        f"out={out}",
        f"n={STARTUP_ROWS}",
    ]
    return [
        timed(lambda: subprocess.run(command, check=True, capture_output=True, env=env))
        for _ in range(runs)
    ]


def train_model(run_dir: Path, steps: int) -> None:
    command = [
        sys.executable,
        "-m",
        "rdpgan.train",
        "dataset=adult",
        f"train.steps={steps}",
        "train.progress=false",
        "sample.n=1",
        f"hydra.run.dir={run_dir}",
    ]
    subprocess.run(command, check=True, capture_output=True, text=True)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def timed(task: Callable[[], object]) -> float:
    start = time.perf_counter()
    task()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=100_000)
    parser.add_argument("--run-dir", type=Path, help="a finished run (default: train one)")
    parser.add_argument("--train-steps", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=3, help="timings per stage (median)")
    parser.add_argument("--startup-runs", type=int, default=7, help="runs of the 1,000-row command")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_sampling_") as scratch:
        work = Path(scratch)
        run_dir = args.run_dir
        if run_dir is None:
            run_dir = work / "run"
            train_model(run_dir, args.train_steps)
        (work / "numba").mkdir()
        compiling = startup_seconds(run_dir, work / "startup.csv", 1, work / "numba")[0]
        startup = sorted(
            startup_seconds(run_dir, work / "startup.csv", args.startup_runs, work / "numba")
        )
        model = load_model(run_dir)
        workers = sampling_workers()  # as the CLI does
        loaded_mb = peak_rss_mb()
        first_sample = timed(lambda: model.sample(1, seed=0))  # fits the tilt once
        n, chunk = args.rows, args.chunk_size

        def generate() -> None:
            for _ in iter_samples(model, n, seed=0, chunk_size=chunk, workers=workers):
                pass

        def write(name: str) -> Callable[[], object]:
            return lambda: write_samples(
                model, work / name, n, seed=0, chunk_size=chunk, workers=workers
            )

        def changed(task: Callable[[], object], pass_rows: int | None = None, **settings: Any):
            """``task`` with some of the model's sampling settings (and G's pass) changed."""

            def changed_task() -> None:
                shipped, shipped_rows = model.model_config, sampler_module.SAMPLE_CHUNK
                model.model_config = replace(shipped, **settings)
                sampler_module.SAMPLE_CHUNK = pass_rows or shipped_rows
                try:
                    task()
                finally:
                    model.model_config, sampler_module.SAMPLE_CHUNK = shipped, shipped_rows

            return changed_task

        def numpy_loops(task: Callable[[], object]) -> Callable[[], None]:
            """``task`` with numpy's loops, as a call of fewer generated rows runs them."""

            def numpy_task() -> None:
                shipped = loops.COMPILED_FROM
                loops.COMPILED_FROM = 2**62
                try:
                    task()
                finally:
                    loops.COMPILED_FROM = shipped

            return numpy_task

        raked = f"raked (`model.sample_pool={RAKED_POOL}`)"
        stages: list[tuple[str, Callable[[], object], str | None]] = [
            ("generate + decode only", generate, None),
            (UNRAKED, changed(generate, sample_pool=1, herding_pool=1), None),
            # (herding_pool null: the default pool, whatever the saved run recorded)
            (HERDED, changed(generate, sample_pool=1, herding_pool=None), None),
            (
                "generate + decode, untilted (`model.tilt_sampling=false`)",
                changed(generate, tilt_sampling=False),
                None,
            ),
            (f"generate + decode, {raked}", changed(generate, sample_pool=RAKED_POOL), None),
            *(
                (
                    f"generate + decode, G passes of {rows:,} rows "
                    f"(default {sampler_module.SAMPLE_CHUNK:,})",
                    changed(generate, rows),
                    None,
                )
                for rows in OTHER_PASS_ROWS
            ),
            (
                "generate + decode, numpy's loops (as calls of fewer than "
                f"{loops.COMPILED_FROM:,} generated rows run them)",
                numpy_loops(generate),
                None,
            ),
            ("Parquet", write("s.parquet"), "s.parquet"),
            (
                f"Parquet, {raked}",
                changed(write("r.parquet"), sample_pool=RAKED_POOL),
                "r.parquet",
            ),
            ("CSV", write("s.csv"), "s.csv"),
        ]
        # Rounds of every stage in turn, so that a slow spell of this shared machine falls on
        # all stages alike; each stage's figure is its median round.
        seconds: list[list[float]] = [[] for _ in stages]
        peaks = []
        for _ in range(args.rounds):
            for times, (_, task, _) in zip(seconds, stages, strict=True):
                times.append(timed(task))
                if len(peaks) < len(stages):
                    peaks.append(peak_rss_mb())
        results = []
        for times, peak, (stage, _, out) in zip(seconds, peaks, stages, strict=True):
            size = f"{(work / out).stat().st_size / 2**20:.0f}" if out else "—"
            median = statistics.median(times)
            results.append((stage, median, n / median, peak, size))

    command = " ".join(["python scripts/bench/bench_sampling.py", *sys.argv[1:]])
    source = f"from {args.run_dir}" if args.run_dir else f"trained {args.train_steps} DP steps"
    verdicts = ", ".join(
        f"{stage} {'met' if rate >= BAR_ROWS_PER_SECOND else 'not met'}"
        for stage, _, rate, _, size in results
        if size != "—"  # the stages that write a file
    )
    assert model.frozen is not None
    roofline = matmul_roofline(model.frozen, workers)
    pool = model.sampler.raking_pool()
    default = f"raking, a pool of {pool}"
    if pool == 1:  # (a pool of 1 rakes nothing: it herds, from as many rows as it asks)
        pool = model.sampler.herding_pool(min(chunk, n))
        default = "no raking" if pool == 1 else f"no raking, herding from a pool of {pool}"
    # What sampling can reach: the products on every worker at once, one row kept of every
    # ``pool`` generated; for this model's own pool, and unraked.
    rates = {stage: rate for stage, _, rate, _, _ in results}
    shares = [
        (label, rates[stage], roofline.all_cores / kept)
        for label, stage, kept in (
            (f"as it samples ({default})", results[0][0], pool),
            ("unraked, every row kept", UNRAKED, 1),
        )
    ]
    lines = [
        f"## Sampling (`python -m rdpgan.sample`) on {cpu_features()}",
        "",
        f"Made by `{command}` at commit {COMMIT} on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, seed 0.",
        f"Machine: {machine()}",
        "",
        f"`python -m rdpgan.sample run_dir=<run> out=<file>.csv n={STARTUP_ROWS:,}` end to end "
        f"(a fresh process: start-up, loading, the tilt's fit, sampling, writing), "
        f"{len(startup)} runs: min {startup[0]:.2f} s, median {statistics.median(startup):.2f} s, "
        f"max {startup[-1]:.2f} s; issue 29's bar: ≤ {BAR_STARTUP_SECONDS:.0f} s: "
        f"**{'met' if statistics.median(startup) <= BAR_STARTUP_SECONDS else 'not met'}** "
        f"(median). A call of {STARTUP_ROWS:,} rows runs numpy's loops, not numba's compiled "
        f"ones (rdpgan.loops); one run before these, with numba's cache empty, took "
        f"{compiling:.2f} s (scripts/setup.sh compiles numba's loops as it installs, for the "
        f"CPU it runs on, for the calls that take them).",
        "",
        f"Adult model with the default sizes ({source}); {n:,} rows in chunks of {chunk:,}, "
        f"{workers} worker thread(s) as the CLI picks, "
        "written to a file in a temporary directory. Seconds are the median of "
        f"{args.rounds} rounds, each running every stage in turn. Peak RSS is this process's "
        "high-water mark after each stage's first run (stages run in order; "
        f"{loaded_mb:.0f} MB after loading the model). The first sample after loading "
        f"took {first_sample:.2f} s (it fits the tilt, once per model; the "
        "stages below reuse it).",
        "",
        "| stage | seconds | rows/s | peak RSS (MB) | file (MB) |",
        "| --- | ---: | ---: | ---: | ---: |",
        *(f"| {s} | {t:.1f} | {r:,.0f} | {m:.0f} | {f} |" for s, t, r, m, f in results),
        "",
        f"Bar: ≥ {BAR_ROWS_PER_SECOND:,} rows/s written, on 2 CPU cores: {verdicts}.",
        "",
        f"Roofline: G's matrix products alone ({ROOFLINE_ROWS:,} rows per product, float32 "
        f"through numpy's BLAS as sampling runs them) run at {roofline.gflops:.0f} GFLOP/s on "
        f"one thread ({roofline.per_core:,.0f} generated rows/s); on all {workers} cores at "
        f"once, one BLAS thread each as sampling's workers run, with nothing else to do, "
        f"{roofline.all_cores:,.0f} rows/s ({roofline.all_cores / roofline.per_core:.2f} "
        f"times one thread: the cores share caches and memory). This model samples with "
        f"{default} (`model.sample_pool`). Raking with a pool of {RAKED_POOL} keeps one row of "
        f"every {RAKED_POOL} generated: at most {roofline.all_cores / RAKED_POOL:,.0f} rows/s "
        "on the same products.",
        "",
        f"Against that roofline, on {workers} cores (issue 29's bar: ≥ 70%):",
        "",
        *(
            f"- {label}: {rate:,.0f} rows/s, {rate / ceiling:.0%} of the {ceiling:,.0f} the "
            f"products allow: **{'met' if rate >= BAR_ROOFLINE_SHARE * ceiling else 'not met'}**"
            for label, rate, ceiling in shares
        ),
    ]
    write_speed_md("\n".join(lines), "bench_sampling.py")


if __name__ == "__main__":
    main()
