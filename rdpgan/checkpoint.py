"""Crash-safe training state: tensors in ``checkpoint.pt``, everything else in ``checkpoint.json``.

The tensors (weights, optimizer moments, RNG state) load with ``torch.load(weights_only=True)``,
so a tampered file cannot run code; the metadata is plain JSON. Both files are written
atomically, tensors first; each carries the step, and a pair whose steps disagree (a crash
between the two renames) is refused rather than half-used.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import torch

from rdpgan.errors import UserInputError
from rdpgan.io import atomic_write, write_json

WEIGHTS = "checkpoint.pt"
META = "checkpoint.json"


def exists(directory: str | Path) -> bool:
    return (Path(directory) / META).is_file()


def save(directory: str | Path, step: int, tensors: dict[str, Any], meta: dict[str, Any]) -> None:
    directory = Path(directory)
    payload = {**tensors, "step": torch.tensor(step)}
    atomic_write(directory / WEIGHTS, lambda tmp: torch.save(payload, tmp))
    write_json(directory / META, {**meta, "step": step})


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
    try:
        meta = json.loads((directory / META).read_text())
        tensors = torch.load(directory / WEIGHTS, map_location="cpu", weights_only=True)
    except FileNotFoundError as exc:
        raise UserInputError(
            f"checkpoint in {directory} is incomplete: {WEIGHTS} is missing"
        ) from exc
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
