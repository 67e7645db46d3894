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

import copy
import json
import math
import pickle
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
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

    A block is ``train.checkpoint_share`` of the run's planned DP-SGD steps (or
    ``train.checkpoint_every`` steps when set), and the first block is one step, so that a
    crash in a run's first seconds already has a checkpoint to resume from. Block sizes follow
    from public quantities only (the planned step count), never from the measured pace, which
    depends on the secret batch sizes.

    Privacy is charged ahead, never behind: before a block of steps starts, ``privacy.json`` is
    rewritten as if the whole block were already spent. A run killed mid-block therefore
    resumes with those steps charged (the ledger never forgets privacy it may have used), and
    a resumed run ends with exactly the ledger of an uninterrupted one: the blocks decide when
    the ledger is written, never what it holds.

    A save copies the state in memory (milliseconds) and writes the copy on a background
    thread while the next block trains; the next save waits for it. A kill therefore loses at
    most the block being written and the one being trained: two blocks, 4% of the planned
    steps at the default share.
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
        self.share = config.checkpoint_share
        self.prepaid_until = 0
        self.saves = 0
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="rdpgan-checkpoint")
        self._pending: Future[None] | None = None

    def _write_ledger(self, prepaid_steps: int = 0) -> None:
        record = self.ledger.to_dict(prepaid_steps if self.ledger.private else 0)
        write_json(self.directory / LEDGER_FILE, record)

    def block(self, step: int, last: int) -> int:
        """How many steps, from ``step``, until the next checkpoint: one for the first block,
        then ``checkpoint_every`` or ``checkpoint_share`` of ``last`` (the planned steps)."""
        limit = last - step + 1
        if self.saves == 0:
            return 1
        size = self.every if self.every else math.ceil(self.share * last)
        return max(1, min(limit, size))

    def before(self, step: int, last: int) -> None:
        if step > self.prepaid_until:
            self.prepaid_until = step - 1 + self.block(step, last)
            self._write_ledger(prepaid_steps=self.prepaid_until - step + 1)

    def after(self, step: int, last: int, history: list[dict[str, Any]]) -> None:
        if step == last:
            self.save(step, history, finished=True)
        elif step == self.prepaid_until:
            self.save(step, history, wait=False)

    def save(
        self,
        step: int,
        history: list[dict[str, Any]],
        finished: bool = False,
        wait: bool = True,
    ) -> None:
        """Checkpoint the state after ``step``. ``wait=False``: return once the state is
        copied, the files written on the writer thread (the next save or :meth:`close` waits
        for them, and raises what the write raised)."""
        self.flush()
        meta = {
            "model": self.describe(),
            "ledger": self.ledger.to_dict(),
            "history": list(history),
            "finished": finished,
        }
        self.saves += 1
        if not wait:
            tensors = _copied(self.tensors())
            self._pending = self._writer.submit(save, self.directory, step, tensors, meta)
            return
        save(self.directory, step, self.tensors(), meta)
        # The ledger is exact again: only the steps actually taken are charged.
        self.prepaid_until = step
        self._write_ledger()

    def flush(self) -> None:
        """Wait for the save being written, if any (its error is raised here)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self, quiet: bool = False) -> None:
        """Finish the save being written and stop the writer thread (idempotent). ``quiet``:
        while another error propagates, the write's own error is not raised over it (the
        checkpoint before it stays the last complete one)."""
        try:
            self.flush()
        except Exception:
            if not quiet:
                raise
        finally:
            self._writer.shutdown(wait=True)


def _copied(state: Any) -> Any:
    """``state`` with every tensor copied: what the writer thread saves while training goes on
    changing the originals in place."""
    if isinstance(state, torch.Tensor):
        return state.detach().clone()
    if isinstance(state, dict):
        return {key: _copied(value) for key, value in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_copied(value) for value in state)
    return copy.deepcopy(state)
