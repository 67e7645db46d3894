"""How many CPU threads training uses: one, unless ``train.threads`` says otherwise (for the
whole process in a command, for the fit alone in a call of the Python API).

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
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from rdpgan.errors import UserInputError

POLICY_THREADS = 1


def usable_cores() -> int:
    """The CPU cores this process may run on: its affinity where the OS keeps one, else all
    (read without torch, which sampling does not load)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def policy_threads(threads: int | None) -> int:
    """The intra-op thread count for ``train.threads`` (None: :data:`POLICY_THREADS`)."""
    count = POLICY_THREADS if threads is None else threads
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise UserInputError(f"train.threads must be a positive integer or null, got {threads}")
    return count


def apply_thread_policy(threads: int | None) -> int:
    """Set torch's intra-op threads (:func:`policy_threads`) and a single inter-op thread, for
    the rest of the process (a command's); returns the intra-op count."""
    count = policy_threads(threads)
    import torch  # here: the module also serves sampling, which runs without torch

    torch.set_num_threads(count)
    with suppress(RuntimeError):  # settable once per process: a second run keeps the first's
        torch.set_num_interop_threads(1)
    return count


@contextmanager
def thread_policy(threads: int | None) -> Iterator[int]:
    """Torch's intra-op threads set by :func:`policy_threads` for a block, the caller's count
    restored after it: a library call (``DPCGAN.fit``, ``resume``) trains as the command
    does, the generator's half beside the private step (torch's default, a thread a core,
    leaves no core spare for it), without changing the host process's settings for good."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(policy_threads(threads))
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
