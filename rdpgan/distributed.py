"""Data-parallel training under ``torchrun``: which process this is, and the few collective
operations the trainer needs.

``torchrun --nproc-per-node=N -m rdpgan.train ...`` starts N processes (gloo on CPU, NCCL on
GPU). Rank 0 makes every release before training and shares the released values (never the
rows' statistics themselves); each rank then holds every N-th training row, Poisson-samples it
at the global rate with its own secret source (the union is a Poisson sample of the whole
table), clips per sample, and the clipped sums are added across ranks with Gaussian noise from
rank 0 alone (:class:`rdpgan.privacy.dp_sgd.DPSGD`): one noise draw per step, as in one
process. Only rank 0 keeps a ledger on disk and writes outputs. Every rank, and every link
between them, is trusted: the ranks exchange noise-free clipped gradient sums.
"""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from typing import Any, TypeVar

import numpy as np
import torch
import torch.distributed as dist

from rdpgan.errors import UserInputError

T = TypeVar("T")
COLLECTIVE_TIMEOUT_MINUTES = 30


def start(device: torch.device) -> None:
    """Join the process group ``torchrun`` describes in the environment (no-op without it)."""
    if launched() and not dist.is_initialized():
        if device.type == "cuda":  # one GPU per rank ("cuda" is then this rank's own)
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        # Long enough for rank 0's releases on a large table while the others wait for them.
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, timeout=timedelta(minutes=COLLECTIVE_TIMEOUT_MINUTES))


def launched() -> bool:
    """Whether ``torchrun`` started this process as one of several (joined or not)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def world_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def from_rank_zero(value: T) -> T:
    """Rank 0's ``value`` on every rank (released values only: they are safe to send)."""
    if world_size() == 1:
        return value
    box: list[Any] = [value if rank() == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def refuse_unless_same(*arrays: np.ndarray) -> None:
    """Every rank must hold the same encoded table, row for row: otherwise the shards could
    overlap, and a row in two of them could add two clipped gradients to one step. Compared
    by digest; every rank refuses alike."""
    if world_size() == 1:
        return
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    digests: list[Any] = [None] * world_size()
    dist.all_gather_object(digests, digest.hexdigest())
    if len(set(digests)) > 1:
        raise UserInputError("the processes read different tables: every rank must read the same")


def any_rank(flag: bool) -> bool:
    """Whether ``flag`` is set on any rank (so that all ranks stop at the same step)."""
    if world_size() == 1:
        return flag
    on = torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")
    value = torch.tensor([int(flag)], device=on)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def shard(rows: torch.Tensor) -> torch.Tensor:
    """This rank's rows: every ``world_size``-th, starting at its rank."""
    return rows[rank() :: world_size()]


def align(*modules: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers in every rank's copy of ``modules``."""
    if world_size() == 1:
        return
    for module in modules:
        for tensor in (*module.parameters(), *module.buffers()):
            dist.broadcast(tensor.data, src=0)


def reduce_gradients(module: torch.nn.Module, average: bool) -> None:
    """Replace every rank's gradients of ``module`` with their sum (or mean) over the ranks, so
    that the ranks' identical copies take the same step."""
    if world_size() == 1:
        return
    for parameter in module.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad, op=dist.ReduceOp.SUM)
            if average:
                parameter.grad /= world_size()


def stop() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()
