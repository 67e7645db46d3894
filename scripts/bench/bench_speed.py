"""Speed benchmark: a DP discriminator step vs the same step without DP, the thread policy,
and a full Adult run, each quiet and with one competing busy process.

    python scripts/bench/bench_speed.py [--steps 300] [--thread-steps 200] [--skip-full-run]

Times the exact training code (:class:`rdpgan.training.CGANTrainer`) on the real Adult train
split with the default model and batch size; then short runs of the README's main command with
1 and 2 torch threads and the policy's choice, and full runs end to end (the command itself,
the same in float32 instead of its bfloat16 generator step, with alternating instead of
simultaneous steps, with ``train=long``, and under ``torchrun`` with 2 processes), each quiet
and beside a busy process. Run it alone on the
machine.
Writes ``results/speed.md`` (atomically) with the command, date, machine and numbers.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, cpu_features, cpu_model, speed_line
from rdpgan.cli import compose_run_config
from rdpgan.config import ModelConfig, TrainConfig
from rdpgan.data.loading import load_split
from rdpgan.io import atomic_write
from rdpgan.models import Discriminator, Generator
from rdpgan.privacy.dp_sgd import DPSGD, PlainSGD
from rdpgan.privacy.ledger import PrivacyLedger
from rdpgan.privacy.randomness import SecretRandomness, exact_sample_rate
from rdpgan.threads import POLICY_THREADS, apply_thread_policy
from rdpgan.training import CGANTrainer, adam_optimizers
from rdpgan.transform import TableTransformer

REPO = Path(__file__).resolve().parents[2]
SPEED_MD = REPO / "results" / "speed.md"


def make_trainer(private: bool, seed: int = 0) -> CGANTrainer:
    table, train_rows, _ = load_split(compose_run_config(["dataset=adult"]).dataset)
    transformer = TableTransformer(table.schema, table.target)
    features = torch.as_tensor(transformer.encode(train_rows))
    labels = torch.as_tensor(transformer.encode_labels(train_rows))
    model, train = ModelConfig(), TrainConfig()
    torch.manual_seed(seed)
    generator = Generator.for_table(model, transformer)
    discriminator = Discriminator.for_table(model, transformer)
    g_opt, d_opt = adam_optimizers(generator, discriminator, train)
    sample_rate = exact_sample_rate(train.batch_size / len(train_rows))
    secret = SecretRandomness()
    if private:
        ledger = PrivacyLedger(1e6, 1e-5, "rdp")  # a budget that never stops the benchmark
        release = ledger.open_dp_sgd("dp_sgd", 1.0, sample_rate, max_steps=10**6)
        critic: DPSGD | PlainSGD = DPSGD(
            discriminator,
            d_opt,
            ledger=ledger,
            release=release,
            max_grad_norm=1.0,
            expected_batch_size=train.batch_size,
            secret=secret,
        )
    else:
        critic = PlainSGD(discriminator, d_opt, train.batch_size)
    probs = torch.bincount(labels).float() / len(labels)
    trainer = CGANTrainer(
        generator,
        critic,
        g_opt,
        features,
        labels,
        probs,
        secret,
        sample_rate,
        train.batch_size,
        model.auxiliary_weight,
    )
    critic.draw_noise_ahead(None)  # the step's whole work: in a run, G's thread draws the noise
    return trainer


def time_steps(trainer: CGANTrainer, steps: int, warmup: int = 20) -> list[float]:
    try:
        for _ in range(warmup):
            trainer.discriminator_step()
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            trainer.discriminator_step()
            times.append(time.perf_counter() - start)
        return times
    finally:
        trainer.close()


COMMIT = code_commit()  # at start: the code this process imported (and its runs launch)


def machine() -> str:
    return (
        f"{cpu_model()} [{cpu_features()}], {os.cpu_count()} cores, "
        f"{platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), no GPU used. {speed_line()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--skip-full-run", action="store_true")
    parser.add_argument("--thread-steps", type=int, default=200)
    args = parser.parse_args()
    apply_thread_policy(None)  # the step is timed as a default run would take it

    rounds = {"dp": [], "plain": []}
    for _ in range(3):  # interleaved rounds, so a noisy neighbour hurts both sides alike
        for name, private in (("dp", True), ("plain", False)):
            rounds[name] += time_steps(make_trainer(private), args.steps)
    dp_ms = statistics.median(rounds["dp"]) * 1e3
    plain_ms = statistics.median(rounds["plain"]) * 1e3
    lines = [
        f"## Training on {cpu_features()}",
        "",
        f"Made by `python scripts/bench/bench_speed.py --steps {args.steps} --thread-steps "
        f"{args.thread_steps}{' --skip-full-run' if args.skip_full_run else ''}` at commit "
        f"{COMMIT} on "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, seed 0 (initialisation; batches and "
        "noise from fresh OS entropy).",
        f"Machine: {machine()}",
        "",
        "### Discriminator step (Adult train split, default AC-GAN critic, expected batch 500)",
        "",
        "Median over 3 interleaved rounds of "
        f"{args.steps} steps each (after 20 warm-up steps); one step = Poisson batch, fake rows "
        "from G, D forward/backward, the noise (drawn in the step: a run draws it a step ahead "
        "on G's thread, from 2026-11-29), optimizer step.",
        "",
        "| step | median ms | steps/s |",
        "| --- | ---: | ---: |",
        f"| DP-SGD (one-pass clipping, σ=1, C=1) | {dp_ms:.2f} | {1e3 / dp_ms:.0f} |",
        f"| non-private | {plain_ms:.2f} | {1e3 / plain_ms:.0f} |",
        "",
        f"**DP / non-private = {dp_ms / plain_ms:.2f}×** (bar: ≤ 2×).",
    ]
    if not args.skip_full_run:
        lines += thread_policy_section(args.thread_steps)
    write_speed_md("\n".join(lines), "bench_speed.py")


FULL_RUN = ["dataset=adult", "epsilon=8"]  # the README's main command
REPEATED = ("default", "alternating")  # the bar's command, and what it is compared with
QUIET_RUNS = 3  # quiet runs of each of REPEATED (median)
THREAD_SETTINGS = ("1", "2", "null")  # null: rdpgan.threads' policy


def busy_competitor() -> subprocess.Popen:
    """Another CPU-bound process (a notebook, a scorer, a second run): one busy core."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]


def user_environment() -> dict[str, str]:
    """This process's environment as a user's shell has it: torch's thread variables unset
    (the test suite's workers set them), so a command takes the thread policy's choice."""
    return {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def timed_train(overrides: list[str], launcher: Sequence[str] = (sys.executable,)) -> float:
    """Wall seconds of ``python -m rdpgan.train`` with ``overrides``, start-up to outputs."""
    command = [*launcher, "-m", "rdpgan.train", *overrides, "train.progress=false"]
    env = user_environment()
    with tempfile.TemporaryDirectory() as where:  # a fresh run directory every time
        start = time.perf_counter()
        subprocess.run(
            [*command, f"hydra.run.dir={where}/run"],
            check=True,
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        return time.perf_counter() - start


def thread_policy_section(steps: int) -> list[str]:
    """Quiet and loaded (one competing busy process) timings of a short run for 1 and 2 torch
    threads and the policy's choice, then the full run with the policy, quiet and loaded."""
    short = [*FULL_RUN, f"train.steps={steps}", "sample.n=1000"]
    timings: dict[tuple[bool, str], float] = {}
    repeated: dict[str, list[float]] = {}  # quiet runs of REPEATED's commands
    for loaded in (False, True):
        competitor = busy_competitor() if loaded else None
        try:
            for threads in THREAD_SETTINGS:
                timings[loaded, threads] = timed_train([*short, f"train.threads={threads}"])
            for name, (overrides, launcher, _) in FULL_RUNS.items():
                runs = QUIET_RUNS if name in REPEATED and not loaded else 1
                seconds = [timed_train(overrides, launcher) for _ in range(runs)]
                timings[loaded, name] = statistics.median(seconds)
                if runs > 1:
                    repeated[name] = sorted(seconds)
        finally:
            if competitor is not None:
                competitor.kill()
    return [
        "",
        "### Threads, quiet and loaded",
        "",
        f"`python -m rdpgan.train {' '.join(short)} train.threads=T` (start-up, {steps} DP steps, "
        "sampling 1,000 rows, outputs): wall seconds, quiet and with one competing busy process "
        "(`python -c 'while True: pass'`). The policy (`train.threads=null`, the default) uses "
        f"{POLICY_THREADS} thread(s) and OpenMP's passive waits.",
        "",
        "| machine | 1 thread | 2 threads | policy |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {'loaded' if loaded else 'quiet'} | "
            + " | ".join(f"{timings[loaded, t]:.1f}" for t in THREAD_SETTINGS)
            + " |"
            for loaded in (False, True)
        ),
        "",
        "### Full run",
        "",
        "Wall time including start-up, loading, the releases, training, sampling the released "
        "row count and writing outputs (σ calibrated to ε=8, δ=1e-5, the thread policy); "
        "issue 13's bar: ≤ 60 s quiet, ≤ 1.3× that loaded. Quiet, the default command (the "
        f"bar's) and the alternating steps it is compared with are each the median of "
        f"{QUIET_RUNS} runs ("
        + "; ".join(
            f"{name}: " + ", ".join(f"{t:.1f}" for t in seconds) + " s"
            for name, seconds in repeated.items()
        )
        + "); every other figure is one run.",
        "",
        "| command | quiet s | loaded s | loaded ÷ quiet |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| `{shown_command(name)}` | {timings[False, name]:.1f} | {timings[True, name]:.1f} | "
            f"{timings[True, name] / timings[False, name]:.2f}× |"
            for name in FULL_RUNS
        ),
    ]


PYTHON = (sys.executable,)
# name: (the README command's overrides, the launcher, the launcher as a person types it)
FULL_RUNS: dict[str, tuple[list[str], Sequence[str], str]] = {
    "default": (FULL_RUN, PYTHON, "python"),
    "float32": ([*FULL_RUN, "train.bf16_generator_step=false"], PYTHON, "python"),
    "alternating": ([*FULL_RUN, "train.simultaneous_steps=false"], PYTHON, "python"),
    "long": ([*FULL_RUN, "train=long"], PYTHON, "python"),
    "torchrun": (FULL_RUN, TORCHRUN, "torchrun --nproc-per-node=2"),
}


def shown_command(name: str) -> str:
    overrides, _, launcher = FULL_RUNS[name]
    return f"{launcher} -m rdpgan.train {' '.join(overrides)}"


SPEED_HEADER = """# Speed

One part per script and kind of CPU: its features (AVX2, AVX-512, BF16, AMX) and, where an
AVX2-only CPU without native bf16 was emulated on a faster one, the ISA caps it ran under
(torch's `ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2`,
numpy's `OPENBLAS_CORETYPE=Haswell NPY_DISABLE_CPU_FEATURES="X86_V4 AVX512_ICL AVX512_SPR"`, and,
from 2026-11-28, numba's `NUMBA_CPU_NAME=haswell`).
Each script rewrites only its own part for the kind it ran on (one emulated part per script and
CPU: caps that changed replace it). Compare figures within one part: the
machines, and the load on them, differ from one part to the next. The budgets are set for a
real AVX2-only EPYC: `reference_ratio.py`'s part reads this machine against it workload by
workload (a commit timed on both), and estimates this commit's figures there."""
PART = re.compile(r"^<!-- part: (.+?) -->$", re.MULTILINE)


def write_speed_md(text: str, script: str) -> None:
    """Put ``text`` in ``results/speed.md`` as ``script``'s part for this kind of CPU,
    keeping every other part (a file from before the parts is replaced)."""
    old = SPEED_MD.read_text() if SPEED_MD.is_file() else ""
    pieces = PART.split(old)  # [header, key, body, key, body, ...]
    parts = dict(zip(pieces[1::2], (body.strip() for body in pieces[2::2]), strict=True))
    emulated = f"{script} on {cpu_features(caps=False)} (emulating"
    if cpu_features() != cpu_features(caps=False):  # one emulated part: new caps replace it
        parts = {key: body for key, body in parts.items() if not key.startswith(emulated)}
    parts[f"{script} on {cpu_features()}"] = text.strip()
    body = "\n\n".join(f"<!-- part: {key} -->\n\n{parts[key]}" for key in sorted(parts))
    new = f"{SPEED_HEADER}\n\n{body}\n"
    atomic_write(SPEED_MD, lambda tmp: tmp.write_text(new))
    print(text)


if __name__ == "__main__":
    main()
