"""Crash-safe training state: tensors in ``checkpoint.a.pt`` or ``checkpoint.b.pt``, everything
else in ``checkpoint.json``.

The tensors (weights, optimizer moments, RNG state) load with ``torch.load(weights_only=True)``,
so a tampered file cannot run code; the metadata is plain JSON. A save writes the tensors to
the slot the current ``checkpoint.json`` does *not* name, then atomically replaces the JSON,
which names the new slot: the JSON is the commit point, so a process killed at any moment
leaves the last complete pair (a single tensors file would be half a step ahead of its JSON
after a kill between the two writes, and the run could not be resumed).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from time import monotonic
from typing import Any

import torch

from rdpgan.config import TrainConfig
from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write, write_json
from rdpgan.privacy.budget import LEDGER_FILE
from rdpgan.privacy.ledger import PrivacyLedger

SLOTS = ("checkpoint.a.pt", "checkpoint.b.pt")
META = "checkpoint.json"


def exists(directory: str | Path) -> bool:
    return (Path(directory) / META).is_file()


def save(directory: str | Path, step: int, tensors: dict[str, Any], meta: dict[str, Any]) -> None:
    directory = Path(directory)
    slot = SLOTS[1] if _committed_slot(directory) == SLOTS[0] else SLOTS[0]
    payload = {**tensors, "step": torch.tensor(step)}
    atomic_write(directory / slot, lambda tmp: torch.save(payload, tmp))
    write_json(directory / META, {**meta, "step": step, "weights": slot})
    for stale in SLOTS:
        if stale != slot:
            (directory / stale).unlink(missing_ok=True)


def _committed_slot(directory: Path) -> str | None:
    try:
        return json.loads((directory / META).read_text()).get("weights")
    except (OSError, ValueError, AttributeError):
        return None


def load(
    directory: str | Path, meta_keys: tuple[str, ...] = (), tensor_keys: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata, tensors) of the last checkpoint in ``directory``; one clear error otherwise.

    ``meta_keys`` and ``tensor_keys`` are what the caller will read: a file that parses but
    lacks them (edited, or from another program) is refused here, not with a KeyError later.
    """
    directory = Path(directory)
    if not exists(directory):
        raise UserInputError(f"no checkpoint to resume in {directory} ({META} is missing)")
    slot = None
    try:
        meta = json.loads((directory / META).read_text())
        slot = meta.get("weights") if isinstance(meta, dict) else None
        if slot not in SLOTS:  # never a path from the file: it could point anywhere
            raise ValueError(f"{META} names no tensors file")
        tensors = torch.load(directory / slot, map_location="cpu", weights_only=True)
    except FileNotFoundError as exc:
        raise UserInputError(f"checkpoint in {directory} is incomplete: {slot} is missing") from exc
    except (
        json.JSONDecodeError,
        pickle.UnpicklingError,
        RuntimeError,
        EOFError,
        ValueError,
    ) as exc:
        raise UserInputError(f"checkpoint in {directory} is damaged or was tampered with") from exc
    if not (
        isinstance(meta, dict)
        and isinstance(tensors, dict)
        and all(key in meta for key in meta_keys)
        and all(key in tensors for key in tensor_keys)
    ):
        raise UserInputError(f"checkpoint in {directory} is damaged or was tampered with")
    if int(tensors.get("step", -1)) != meta.get("step"):
        raise UserInputError(f"checkpoint in {directory} is inconsistent (files from two steps)")
    return meta, tensors


@contextmanager
def must_fit() -> Iterator[None]:
    """Loading a checkpoint's state into this run's objects: a mismatch (another model size,
    or a state this run keeps and the checkpoint lacks) is one clear error."""
    try:
        yield
    except (RuntimeError, KeyError, TypeError, ValueError) as exc:
        kind = type(exc).__name__
        raise UserInputError(f"the checkpoint does not fit this model ({kind})") from exc


class Checkpointer:
    """Saves the training state at the end of every block of steps, and at the end.

    A block is ``train.checkpoint_every`` steps at most, and as many as take
    ``train.checkpoint_seconds`` at the pace measured so far (``first_checkpoint_seconds`` for
    the first, and one step before any pace is known): a crash in the first seconds of a run
    already has a checkpoint to resume from.

    Privacy is charged ahead, never behind: before a block of steps starts, ``privacy.json`` is
    rewritten as if the whole block were already spent. A run killed mid-block therefore
    resumes with those steps charged (the ledger never forgets privacy it may have used), and
    a resumed run ends with exactly the ledger of an uninterrupted one: the blocks decide when
    the ledger is written, never what it holds.
    """

    def __init__(
        self,
        directory: Path,
        config: TrainConfig,
        ledger: PrivacyLedger,
        tensors: Callable[[], dict[str, Any]],
        describe: Callable[[], dict[str, Any]],
    ):
        """``tensors``: the training state's tensors at the moment of a save (weights,
        optimizer moments, RNG state); ``describe``: the model's JSON description."""
        self.directory, self.ledger = directory, ledger
        self.tensors, self.describe = tensors, describe
        self.every = config.checkpoint_every
        self.seconds = config.checkpoint_seconds
        self.first_seconds = config.first_checkpoint_seconds
        self.prepaid_until = 0
        self.started = monotonic()
        self.steps_taken = 0
        self.saves = 0
        self.saving_seconds = 0.0  # not training: left out of the pace

    def _write_ledger(self, prepaid_steps: int = 0) -> None:
        record = self.ledger.to_dict(prepaid_steps if self.ledger.private else 0)
        write_json(self.directory / LEDGER_FILE, record)

    def block(self, step: int, last: int) -> int:
        """How many steps, from ``step``, until the next checkpoint."""
        limit = last - step + 1
        if self.every > 0:
            limit = min(limit, self.every)
        if self.seconds <= 0:
            return limit
        if self.steps_taken == 0:
            return 1  # the pace is not known yet
        pace = (monotonic() - self.started - self.saving_seconds) / self.steps_taken
        # The first save comes after one step; the next after first_seconds; then seconds.
        interval = self.seconds if self.saves >= 2 else self.first_seconds
        return max(1, min(limit, int(interval / max(pace, 1e-9))))

    def before(self, step: int, last: int) -> None:
        if step > self.prepaid_until:
            self.prepaid_until = step - 1 + self.block(step, last)
            self._write_ledger(prepaid_steps=self.prepaid_until - step + 1)

    def after(self, step: int, last: int, history: list[dict[str, Any]]) -> None:
        self.steps_taken += 1
        if step == last or step == self.prepaid_until:
            self.save(step, history, finished=step == last)

    def save(self, step: int, history: list[dict[str, Any]], finished: bool = False) -> None:
        began = monotonic()
        meta = {
            "model": self.describe(),
            "ledger": self.ledger.to_dict(),
            "history": history,
            "finished": finished,
        }
        tensors = self.tensors()
        save(self.directory, step, tensors, meta)
        # The ledger is exact again: only the steps actually taken are charged.
        self.prepaid_until = step
        self._write_ledger()
        self.saves += 1
        self.saving_seconds += monotonic() - began
