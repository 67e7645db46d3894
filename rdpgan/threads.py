"""How many CPU threads a training process uses: one, unless ``train.threads`` says otherwise.

The networks are small MLPs (a few hundred units, batches of ~500 rows): a second intra-op
thread gains little on a quiet machine, and when another process keeps a core busy every
operator waits for the thread that lost its core (13x slower, as issue 13 measured with torch's
defaults; ``results/speed.md``, made by ``scripts/bench/bench_speed.py``, times 1 and 2 threads
quiet and loaded). OpenMP's threads
also wait passively (``OMP_WAIT_POLICY=PASSIVE``, set in ``rdpgan/__init__.py`` before torch
loads OpenMP) so an idle one never spins on a core another process needs. The second core is
used another way: the half of each generator step that can run before the discriminator step
is done (with simultaneous steps all of it, in one process the update too once D's step has
drawn its fakes from G) runs on a thread of its own beside that step
(``CGANTrainer.prepare_generator_step``), where timing both ways shows it faster
(``training._Pacer``: not when another process holds the core; ``results/speed.md``).
"""

from __future__ import annotations

import os
from contextlib import suppress

from rdpgan.errors import UserInputError

POLICY_THREADS = 1


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity where the OS keeps one, else all
    (read without torch, which sampling does not load)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def apply_thread_policy(threads: int | None) -> int:
    """Set torch's intra-op threads (``threads``, else :data:`POLICY_THREADS`) and a single
    inter-op thread; returns the intra-op count."""
    count = POLICY_THREADS if threads is None else threads
    if not isinstance(count, int) or count < 1:
        raise UserInputError(f"train.threads must be a positive integer or null, got {threads}")
    import torch  # here: the module also serves sampling, which runs without torch

    torch.set_num_threads(count)
    with suppress(RuntimeError):  # settable once per process: a second run keeps the first's
        torch.set_num_interop_threads(1)
    return count
