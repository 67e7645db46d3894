"""Crash-safe training: SIGKILL and resume, Ctrl-C, refusal to overspend, damaged checkpoints."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from rdpgan import checkpoint as checkpoint_module
from rdpgan.config import RECORDED_BEFORE, RETIRED, TrainConfig
from rdpgan.privacy.ledger import PrivacyLedger
from tests.conftest import FAST, ForkedProcess, start_cli, train_cli

SETTINGS = [
    *FAST,
    "train.steps=60",
    "train.checkpoint_every=10",
    "epsilon=2",
    "seed=4",
    "privacy.noise_seed=4",
]


def start_training(where: Path, root: Path) -> ForkedProcess:
    env = {**os.environ, "RDPGAN_DATA_DIR": str(root)}
    return start_cli("train", [f"hydra.run.dir={where / 'run'}", *SETTINGS], where, env)


def wait_for_checkpoint(run: Path, process: ForkedProcess, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not (run / "checkpoint.json").is_file():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)


def ledger(run: Path) -> dict:
    return json.loads((run / "privacy.json").read_text())


def dp_steps(record: dict) -> int:
    return record["mechanisms"][-1]["steps"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, small_adult) -> dict:
    where = tmp_path_factory.mktemp("uninterrupted")
    result = train_cli(where, *SETTINGS, root=small_adult)
    assert result.returncode == 0, result.stderr
    return ledger(where / "run")


@pytest.mark.slow
def test_sigkill_then_resume_ends_with_the_uninterrupted_ledger(
    tmp_path, small_adult, uninterrupted
):
    run = tmp_path / "run"
    with start_training(tmp_path, small_adult) as process:
        wait_for_checkpoint(run, process)
        time.sleep(random.uniform(0.0, 0.5))  # somewhere inside a block of steps
        process.kill()
        process.wait()
    if (run / "synthetic.csv").exists():
        pytest.skip("the run had written all its outputs before the kill")
    on_disk = ledger(run)
    checkpoint_step = json.loads((run / "checkpoint.json").read_text())["step"]
    # Written ahead: the file already covers every step the killed process could have taken,
    # and no more than two blocks (checkpoint_every=10 here) past the last complete checkpoint
    # (the one being written in the background, and the one being trained).
    assert checkpoint_step <= dp_steps(on_disk) <= checkpoint_step + 2 * 10
    assert on_disk["epsilon_spent"] <= on_disk["epsilon_target"]

    # A fresh interpreter (its own string-hash seed) against the forked run it continues.
    resumed = train_cli(tmp_path, "resume=true", root=small_adult, fresh=True)
    assert resumed.returncode == 0, resumed.stderr
    final = ledger(run)
    assert dp_steps(final) == dp_steps(uninterrupted)
    assert abs(final["epsilon_spent"] - uninterrupted["epsilon_spent"]) < 1e-9
    assert final["epsilon_spent"] <= final["epsilon_target"]
    assert (run / "synthetic.csv").is_file()

    again = train_cli(tmp_path, "resume=true", root=small_adult)
    assert again.returncode == 2
    assert "will not train further" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_ctrl_c_stops_after_a_step_with_an_exact_ledger_and_resumes(tmp_path, small_adult):
    run = tmp_path / "run"
    with start_training(tmp_path, small_adult) as process:
        wait_for_checkpoint(run, process)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=300)
    if process.returncode == 0:
        pytest.skip("training finished before the signal arrived")
    assert process.returncode == 130, stderr
    assert "resume=true" in stderr and "Traceback" not in stderr
    stopped_at = json.loads((run / "checkpoint.json").read_text())["step"]
    assert dp_steps(ledger(run)) == stopped_at  # exact: nothing pre-charged is left over
    assert not (run / "synthetic.csv").exists()
    # A fresh interpreter (its own string-hash seed) against the forked run it continues.
    resumed = train_cli(tmp_path, "resume=true", root=small_adult, fresh=True)
    assert resumed.returncode == 0, resumed.stderr
    assert ledger(run)["epsilon_spent"] <= 2.0
    # The moving average came back from the checkpoint: it covers every G step, not only
    # those after the resume (one G step per D step here).
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["generator_average_steps"] == metrics["discriminator_steps"]


def test_a_run_killed_after_training_but_before_its_outputs_resumes_to_them(
    tmp_path, small_adult, trained_run
):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    delete_outputs(run)
    ledger_before = ledger(run)
    # A fresh interpreter (its own string-hash seed) against the forked run it continues.
    resumed = train_cli(tmp_path, "resume=true", root=small_adult, fresh=True)
    assert resumed.returncode == 0, resumed.stderr
    assert ledger(run) == ledger_before  # no step taken: nothing more spent
    # The same generator, sampled with the same seed.
    assert (run / "synthetic.csv").read_bytes() == (trained_run / "synthetic.csv").read_bytes()
    metrics = json.loads((run / "metrics.json").read_text())
    original = json.loads((trained_run / "metrics.json").read_text())
    assert metrics["epochs"] == original["epochs"]
    assert metrics["discriminator_steps"] == original["discriminator_steps"]


def test_a_resumed_run_writes_the_rows_it_was_asked_for_unless_told_otherwise(
    tmp_path, small_adult
):
    """Resume finishes the run with its own sample.n (300 here, from FAST: it once wrote the
    released row count instead); a sample.n on the resume command is this file's."""
    first = train_cli(tmp_path, "dataset=adult", "train.steps=10", *FAST, root=small_adult)
    assert first.returncode == 0, first.stderr
    run = tmp_path / "run"
    for n, extra in ((300, []), (40, ["sample.n=40"])):
        delete_outputs(run)
        resumed = train_cli(tmp_path, "resume=true", *extra, root=small_adult)
        assert resumed.returncode == 0, resumed.stderr
        assert len(pd.read_csv(run / "synthetic.csv")) == n


def delete_outputs(run: Path) -> None:
    """What a run killed after its last checkpoint, before writing its outputs, lacks."""
    for output in ("synthetic.csv", "model.npz", "model.json", "metrics.json", "test.csv"):
        (run / output).unlink(missing_ok=True)


def test_the_moving_average_of_g_is_checkpointed(tmp_path, small_adult):
    """With train.generator_ema the saved generator is the average, which the last iterate's
    checkpoint alone cannot rebuild: resuming a run killed before its outputs samples the
    same table as the run did."""
    settings = ["dataset=adult", "seed=2", "privacy.noise_seed=2", "train.generator_ema=0.9"]
    first = train_cli(tmp_path, *settings, *FAST, root=small_adult)
    assert first.returncode == 0, first.stderr
    run = tmp_path / "run"
    with np.load(run / "model.npz", allow_pickle=False) as arrays:
        saved = {k: torch.from_numpy(arrays[k]) for k in arrays.files}
    slot = json.loads((run / "checkpoint.json").read_text())["weights"]
    state = torch.load(run / slot, weights_only=True)
    average = {k.removeprefix("module."): v for k, v in state["generator_average"].items()}
    for name, weights in saved.items():  # the average is saved, not the last iterate
        assert torch.equal(weights, average[name])
    assert any(not torch.equal(saved[k], state["generator"][k]) for k in saved)
    table = (run / "synthetic.csv").read_bytes()
    delete_outputs(run)
    # A fresh interpreter (its own string-hash seed) against the forked run it continues.
    resumed = train_cli(tmp_path, "resume=true", root=small_adult, fresh=True)
    assert resumed.returncode == 0, resumed.stderr
    assert (run / "synthetic.csv").read_bytes() == table


def test_a_run_recorded_before_a_setting_existed_resumes_as_it_ran(
    tmp_path, small_adult, trained_run
):
    """Records written before train.bf16_generator_step and train.generator_ema existed lack
    them (and the checkpoint lacks the average): such a run trained in float32 without an
    average. Resuming it must not take today's defaults, which would ask the checkpoint for
    an average it does not hold, and run G's step in bfloat16."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    # Today's settings take simultaneous steps on this table; the record's absent one must not.
    assert json.loads((run / "metrics.json").read_text())["simultaneous_steps"] is True
    slot = run / json.loads((run / "checkpoint.json").read_text())["weights"]
    tensors = torch.load(slot, weights_only=True)
    del tensors["generator_average"]
    torch.save(tensors, slot)
    for record, path in (("run.json", ()), ("checkpoint.json", ("model",))):
        meta = json.loads((run / record).read_text())
        section = meta
        for key in path:
            section = section[key]
        for key in RECORDED_BEFORE:
            del section["train"][key]
        for key in RETIRED:  # settings such runs had and this version no longer knows
            section["train"][key] = 30.0
        (run / record).write_text(json.dumps(meta))
    delete_outputs(run)
    # A fresh interpreter (its own string-hash seed) against the forked run it continues.
    resumed = train_cli(tmp_path, "resume=true", root=small_adult, fresh=True)
    assert resumed.returncode == 0, resumed.stderr
    train = json.loads((run / "model.json").read_text())["train"]
    ran = {
        "max_steps": None,
        "bf16_generator_step": False,
        "generator_ema": 0.0,
        "simultaneous_steps": False,
    }
    assert {key: train[key] for key in ran} == ran
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["generator_average_steps"] == 0
    assert metrics["simultaneous_steps"] is False


def test_damaged_run_record_is_a_one_line_error(tmp_path, small_adult):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text((Path(__file__).parent / "bad_inputs" / "cases.yaml").read_text())
    result = train_cli(tmp_path, "resume=true", root=small_adult)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "run record" in result.stderr


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _without_history(path: Path) -> None:
    meta = json.loads(path.read_text())
    del meta["history"]
    path.write_text(json.dumps(meta))


def _without_generator(path: Path) -> None:
    import torch

    tensors = torch.load(path, weights_only=True)
    del tensors["generator"]
    torch.save(tensors, path)


TENSORS = "the tensors file checkpoint.json names"


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        (TENSORS, _truncate),
        (TENSORS, _without_generator),
        ("checkpoint.json", lambda p: p.write_text("[1, 2]")),
        ("checkpoint.json", _without_history),
        ("privacy.json", lambda p: p.write_text('{"epsilon_target": 1}')),
        ("privacy.json", _truncate),
    ],
    ids=[
        "pt_truncated",
        "pt_missing_tensor",
        "json_not_a_dict",
        "json_missing_key",
        "ledger_missing_keys",
        "ledger_truncated",
    ],
)
def test_a_damaged_checkpoint_or_ledger_is_a_one_line_error_on_resume(
    tmp_path, small_adult, trained_run, name, damage
):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    if name == TENSORS:
        name = json.loads((run / "checkpoint.json").read_text())["weights"]
    damage(run / name)
    before = sorted(p.name for p in run.rglob("*"))
    result = train_cli(tmp_path, "resume=true", root=small_adult)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "damaged" in lines[0] or "tampered" in lines[0], result.stderr
    assert sorted(p.name for p in run.rglob("*")) == before


def test_a_fresh_run_refuses_a_directory_that_holds_a_run(tmp_path, small_adult, trained_run):
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    ledger_before = (run / "privacy.json").read_text()
    result = train_cli(tmp_path, "dataset=adult", *FAST, root=small_adult)
    assert result.returncode == 2, result.stderr
    assert "already holds a run" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert (run / "privacy.json").read_text() == ledger_before


def test_checkpoint_files_are_weights_only_and_checked_for_consistency(tmp_path):
    import torch

    from rdpgan import checkpoint
    from rdpgan.errors import UserInputError

    checkpoint.save(tmp_path, 7, {"w": torch.ones(2)}, {"finished": False})
    meta, tensors = checkpoint.load(tmp_path)
    assert meta["step"] == 7 and torch.equal(tensors["w"], torch.ones(2))
    weights = tmp_path / meta["weights"]
    (tmp_path / checkpoint.META).write_text(json.dumps({**meta, "step": 8}))
    with pytest.raises(UserInputError, match="inconsistent"):
        checkpoint.load(tmp_path)
    (tmp_path / checkpoint.META).write_text(json.dumps({**meta, "weights": "../../etc/passwd"}))
    with pytest.raises(UserInputError, match="damaged"):
        checkpoint.load(tmp_path)
    (tmp_path / checkpoint.META).write_text(json.dumps(meta))
    weights.write_bytes(b"not a checkpoint")
    with pytest.raises(UserInputError, match="damaged"):
        checkpoint.load(tmp_path)


def test_a_kill_between_the_tensors_and_the_json_leaves_the_last_complete_checkpoint(
    tmp_path, monkeypatch
):
    import torch

    from rdpgan import checkpoint

    checkpoint.save(tmp_path, 10, {"w": torch.zeros(2)}, {"finished": False})
    checkpoint.save(tmp_path, 20, {"w": torch.ones(2)}, {"finished": False})

    def killed(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after the tensors, before the JSON

    monkeypatch.setattr(checkpoint, "write_json", killed)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(tmp_path, 30, {"w": torch.full((2,), 2.0)}, {"finished": False})
    meta, tensors = checkpoint.load(tmp_path)
    assert meta["step"] == 20 and torch.equal(tensors["w"], torch.ones(2))
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == list(checkpoint.SLOTS)


def test_checkpoints_come_by_planned_steps_the_first_after_one_step():
    """Driven as run_steps drives it: a save after the first step, then every
    checkpoint_share of the planned steps (or checkpoint_every steps), every step prepaid before
    it is taken and never more than one block ahead. Block sizes follow from the step count
    alone (a pace measured on the secret batch sizes would be a timing channel)."""

    def saves_of(share: float, every: int, last: int) -> list[int]:
        config = TrainConfig(checkpoint_share=share, checkpoint_every=every)
        saver = object.__new__(checkpoint_module.Checkpointer)
        saver.every, saver.share = config.checkpoint_every, config.checkpoint_share
        saver.prepaid_until, saver.saves, saved = 0, 0, []

        def save(step, history, finished=False, wait=True):
            saver.saves += 1
            saved.append(step)

        saver.save = save
        saver._write_ledger = lambda prepaid_steps=0: None
        block_start = 1
        for step in range(1, last + 1):
            saver.before(step, last)
            assert step <= saver.prepaid_until  # charged before it is taken ...
            assert saver.prepaid_until - block_start < max(every, math.ceil(share * last), 1)
            saver.after(step, last, [])
            if saved and saved[-1] == step:
                block_start = step + 1
        return saved

    assert saves_of(0.02, 0, 800) == [1, *range(17, 800, 16), 800]
    assert saves_of(0.02, 0, 60) == [1, *range(3, 60, 2), 60]
    assert saves_of(0.5, 0, 10) == [1, 6, 10]
    assert saves_of(0.02, 10, 60) == [1, 11, 21, 31, 41, 51, 60]
    assert saves_of(1.0, 0, 5) == [1, 5]


def test_a_background_save_holds_the_state_of_its_step(tmp_path):
    """The writer thread saves a copy: training that goes on changing the tensors in place
    does not reach the file of the step that was saved."""
    weights = torch.zeros(3)
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    saver = checkpoint_module.Checkpointer(
        tmp_path, TrainConfig(), ledger, lambda: {"w": weights}, lambda: {}
    )
    saver.save(7, [], wait=False)
    weights += 1.0  # the next block trains
    saver.close()
    meta, tensors = checkpoint_module.load(tmp_path)
    assert meta["step"] == 7 and torch.equal(tensors["w"], torch.zeros(3))


def test_a_kill_while_a_save_is_written_finds_the_ledger_ahead_and_loses_two_blocks(
    tmp_path, monkeypatch
):
    """The save of step 11 held on the writer thread while block 3 trains (a kill now): on
    disk, privacy.json already charges every step taken and the rest of the block, and the last
    complete checkpoint is step 1's; released, the held save lands."""
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    release = ledger.open_dp_sgd("dp_sgd_discriminator", 1.0, 0.02, 100)
    held = threading.Event()
    write = checkpoint_module.save

    def slow(directory, step, tensors, meta):
        if step == 11:
            assert held.wait(30)
        write(directory, step, tensors, meta)

    monkeypatch.setattr(checkpoint_module, "save", slow)
    weights = torch.zeros(1)
    saver = checkpoint_module.Checkpointer(
        tmp_path, TrainConfig(checkpoint_every=10), ledger, lambda: {"w": weights}, lambda: {}
    )
    last = 100
    for step in range(1, 21):
        saver.before(step, last)
        ledger.charge(release)
        weights += 1.0
        saver.after(step, last, [])
    on_disk = json.loads((tmp_path / "privacy.json").read_text())["mechanisms"][-1]["steps"]
    committed = json.loads((tmp_path / "checkpoint.json").read_text())["step"]
    assert release.steps == 20 and on_disk == 21 and committed == 1
    assert on_disk - committed <= 2 * 10
    held.set()
    saver.close()
    meta, tensors = checkpoint_module.load(tmp_path)
    assert meta["step"] == 11 and float(tensors["w"]) == 11.0


def test_resume_refuses_a_ledger_that_charges_less_than_its_checkpoint(tmp_path):
    """A privacy.json restored from an older copy would resume below the privacy spent."""
    from rdpgan.errors import UserInputError
    from rdpgan.fitting import _refuse_older_ledger

    newer = PrivacyLedger(8.0, 1e-5, "rdp")
    newer.open_dp_sgd("dp_sgd_discriminator", 1.0, 0.02, 100).steps = 40
    older = PrivacyLedger.from_dict(newer.to_dict())
    older.releases[-1].steps = 30
    _refuse_older_ledger(newer, older, tmp_path)  # ahead of the checkpoint: fine
    with pytest.raises(UserInputError, match="fewer dp_sgd_discriminator steps"):
        _refuse_older_ledger(older, newer, tmp_path)
