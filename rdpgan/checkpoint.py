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
from pathlib import Path
from typing import Any

import torch

from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write, write_json

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
