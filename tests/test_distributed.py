"""Data-parallel DP-SGD under torchrun (2 CPU processes, gloo): the same step, the same ledger,
one writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from rdpgan import distributed, fitting
from rdpgan.config import ModelConfig, PrivacyConfig
from rdpgan.privacy.dp_sgd import DPSGD
from rdpgan.privacy.ledger import PrivacyLedger
from rdpgan.privacy.randomness import FIT_STREAM, SecretRandomness
from rdpgan.synthesizer import DPCGAN
from tests.conftest import run_cli

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
ROWS = torch.arange(30, dtype=torch.float32).reshape(10, 3) / 10 - 1
NOISE_SEED = 5
SAMPLE_RATE = 0.5


def one_step(
    rows: torch.Tensor, secret: SecretRandomness, init_seed: int = 0
) -> dict[str, torch.Tensor]:
    """One DP-SGD step of a linear model on ``rows`` (initialised from ``init_seed``, then
    from rank 0's parameters under torchrun); the parameters it ends with."""
    torch.manual_seed(init_seed)
    module = nn.Linear(3, 2)
    distributed.align(module)
    ledger = PrivacyLedger(1e6, 1e-5, "rdp")
    release = ledger.open_dp_sgd("d", 1.0, SAMPLE_RATE, max_steps=10)
    critic = DPSGD(
        module,
        torch.optim.SGD(module.parameters(), lr=1.0),
        ledger=ledger,
        release=release,
        max_grad_norm=0.5,
        expected_batch_size=5,
        secret=secret,
    )
    critic.zero_grad()
    critic.step((critic.module(rows) ** 2).sum(-1) * 10)  # large: every row is clipped
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


WORKER = """
import sys, torch, torch.distributed as dist
sys.path.insert(0, {repo!r})
from tests.test_distributed import ROWS, NOISE_SEED, one_step
from rdpgan import distributed
from rdpgan.privacy.randomness import SecretRandomness
distributed.start(torch.device("cpu"))
rank = distributed.rank()
secret = SecretRandomness(NOISE_SEED) if rank == 0 else SecretRandomness()
params = one_step(distributed.shard(ROWS), secret, init_seed=rank)  # rank 1 starts elsewhere
torch.save(params, sys.argv[1] + str(rank))
distributed.stop()
"""


def test_a_step_on_two_ranks_is_the_step_on_all_rows_with_one_noise_draw(tmp_path):
    """Each rank clips its own rows, rank 0 alone adds noise, the sums meet: every rank's
    parameters are those of one process stepping on all rows with that same noise (and not
    with twice the noise, or rank 1's, or a per-rank mean, or from rank 1's own start)."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(repo=str(Path(__file__).parent.parent)))
    out = tmp_path / "params.pt"
    run = subprocess.run(
        [*TORCHRUN, str(script), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    one = one_step(ROWS, SecretRandomness(NOISE_SEED))
    for rank in (0, 1):
        two = torch.load(f"{out}{rank}")
        for name, value in one.items():
            torch.testing.assert_close(two[name], value, rtol=1e-5, atol=1e-6)
    noiseless = one_step(ROWS, _Noiseless())
    assert not torch.allclose(one["weight"], noiseless["weight"], atol=1e-3)  # noise is there


def test_each_rank_draws_its_own_secret_stream_and_rank_zero_that_of_one_process(monkeypatch):
    """Rank 1's Poisson masks and fakes must not repeat rank 0's (the same rows would be
    picked from both shards' positions alike); rank 0 keeps the one-process stream, so a
    seeded run's releases are the same."""
    model = DPCGAN(privacy=PrivacyConfig(noise_seed=3), model=ModelConfig(), device="cpu")
    draws = {}
    for rank in (0, 1):
        monkeypatch.setattr(distributed, "rank", lambda rank=rank: rank)
        draws[rank] = fitting._secret(model, first_step=1).numpy.integers(0, 2**53, size=8)
    alone = SecretRandomness(3, FIT_STREAM, 1).numpy.integers(0, 2**53, size=8)
    assert (draws[0] == alone).all()
    assert not (draws[1] == draws[0]).any()


DIFFERENT_TABLES = """
import sys, numpy as np, torch
from rdpgan import distributed
from rdpgan.errors import UserInputError
distributed.start(torch.device("cpu"))
rows = np.arange(6).reshape(3, 2)
distributed.refuse_unless_same(rows)  # the same table: passes
rows[0, 0] += distributed.rank()  # rank 1 reads one cell differently
try:
    distributed.refuse_unless_same(rows)
except UserInputError as error:
    print(f"rank {distributed.rank()}: {error}")
distributed.stop()
"""


def test_ranks_that_read_different_tables_all_refuse(tmp_path):
    """Overlapping shards would let one row add two clipped gradients to a step."""
    script = tmp_path / "different.py"
    script.write_text(DIFFERENT_TABLES)
    run = subprocess.run(
        [*TORCHRUN, str(script)], capture_output=True, text=True, timeout=300, env=os.environ
    )
    assert run.returncode == 0, run.stderr[-3000:]
    for rank in (0, 1):
        assert f"rank {rank}: the processes read different tables" in run.stdout


class _Noiseless(SecretRandomness):
    def gaussian_noise(self, reference: torch.Tensor, std: float) -> torch.Tensor:
        return torch.zeros_like(reference)

    def independent(self, stream: int) -> _Noiseless:
        return self  # (DP-SGD's noise source: none either)


SMALL = [
    "dataset=cervical",
    "train.steps=20",
    "train.batch_size=64",
    "train.progress=false",
    "model.generator_hidden=[32]",
    "model.discriminator_hidden=[32]",
    "privacy.noise_seed=3",
    "sample.n=50",
]


def test_torchrun_training_ledger_equals_one_process_and_only_rank_zero_writes(tmp_path, data_dir):
    env = {**os.environ, "RDPGAN_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}
    module = ["-m", "rdpgan.train", *SMALL]
    single = run_cli("train", [*SMALL, f"hydra.run.dir={tmp_path / 'one'}"], tmp_path, env)
    assert single.returncode == 0, single.stderr[-3000:]
    parallel = subprocess.run(
        [*TORCHRUN, *module, f"hydra.run.dir={tmp_path / 'two'}/${{oc.env:RANK}}"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert parallel.returncode == 0, parallel.stderr[-3000:]
    ledger = [json.loads((tmp_path / d / "privacy.json").read_text()) for d in ("one", "two/0")]
    assert ledger[1] == ledger[0]
    assert ledger[1]["epsilon_spent"] <= 8.0
    metrics = [json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("one", "two/0")]
    assert (metrics[0]["processes"], metrics[1]["processes"]) == (1, 2)
    assert metrics[1]["discriminator_steps"] == metrics[0]["discriminator_steps"] == 20
    assert len(pd.read_csv(tmp_path / "two" / "0" / "synthetic.csv")) == 50
    assert not (tmp_path / "two" / "1").exists()  # rank 1 wrote nothing, not even a directory
    assert parallel.stdout.count("wrote 50 synthetic rows") == 1


def test_schema_private_under_torchrun_is_refused_before_anything_is_spent(tmp_path, data_dir):
    env = {**os.environ, "RDPGAN_DATA_DIR": str(data_dir), "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [
            *TORCHRUN,
            "-m",
            "rdpgan.train",
            *SMALL,
            "schema=private",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode != 0
    assert "schema=private is released in one process" in run.stderr
    assert not (tmp_path / "run" / "privacy.json").exists()
