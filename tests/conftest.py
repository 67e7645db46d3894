"""Shared fixtures: where the real data lives, and small tables for fast tests."""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib
import importlib.util
import json
import logging
import os
import random
import re
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    """One thread per xdist worker (and per CLI it starts): two workers that each run torch on
    every core oversubscribe the machine and run several times slower than one core each."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)


# The tests that use the session's trained run (:func:`trained_run`, as a fixture or asked for
# by name) form one xdist group: `--dist loadgroup` (pyproject's addopts) sends them to one
# worker, which trains it once instead of each worker training its own.
TRAINED_RUN_GROUP = pytest.mark.xdist_group("trained_run")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "trained_run" in getattr(item, "fixturenames", ()):
            item.add_marker(TRAINED_RUN_GROUP)


@pytest.fixture(autouse=True)
def _fixed_global_rngs() -> None:
    """Each test starts from the same global RNG state, whichever tests its xdist worker ran
    before (the product's own DP noise does not come from these generators)."""
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


# Tests of optional extras (the AIM/MST peers' mbi, the development suite's data, Hydra's Ray
# launcher) skip, saying how to run them, unless named here (comma-separated, or "all"): then
# a missing extra fails them.
OPTIONAL = "RDPGAN_TEST_OPTIONAL"


def optional(feature: str, available: bool, how: str) -> None:
    """Skip a test of an optional ``feature`` that is not ``available``, unless it was asked
    for (:data:`OPTIONAL`): then fail, saying ``how`` to provide it."""
    if available:
        return
    asked = {name.strip() for name in os.environ.get(OPTIONAL, "").split(",")}
    if feature in asked or "all" in asked:
        pytest.fail(f"{feature} was asked for ({OPTIONAL}) and is missing: {how}")
    pytest.skip(f"optional {feature}: {how}; {OPTIONAL}={feature} makes it required")


def optional_module(feature: str, module: str, how: str) -> Any:
    """The module an optional feature's test needs (see :func:`optional`)."""
    optional(feature, importlib.util.find_spec(module) is not None, how)
    return importlib.import_module(module)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data sets: $RDPGAN_DATA_DIR, else ../shared/data beside the checkout."""
    # Absolute: tests run the CLIs from temporary directories.
    root = Path(os.environ.get("RDPGAN_DATA_DIR") or SHARED_DATA).resolve()
    if not (root / "adult" / "adult.data").is_file():
        pytest.fail(f"real data not found under {root}; set RDPGAN_DATA_DIR")
    return root


# A short run: two epochs of small networks, and 300 rows sampled rather than the table's
# ~2,400 (whose herding on every pair of columns, from 64 generated rows per row kept, took
# more of such a run than its training). Herding still runs (from 256 rows); tests of what
# sampling writes name their own sample.n.
FAST = [
    "train.epochs=2",
    "train.batch_size=200",
    "train.progress=false",
    "model.generator_hidden=[64]",
    "model.discriminator_hidden=[64]",
    "sample.n=300",
]


# What a fresh interpreter starts with, for a forked CLI to start from: torch's default seed
# (read before any test seeds it) and the warning filters (Python's defaults plus those the
# CLIs' imports install: read once from a real interpreter, since pytest's are active here).
_TORCH_DEFAULT_SEED = torch.initial_seed()
_READ_FILTERS = (
    "import json, warnings, rdpgan.train, rdpgan.sample, rdpgan.evaluate, rdpgan.report\n"
    "text = lambda x: [hasattr(x, 'pattern'), getattr(x, 'pattern', x)]\n"
    "print(json.dumps([(a, text(m), c.__module__, c.__qualname__, text(mod), n)"
    " for a, m, c, mod, n in warnings.filters]))"
)


@functools.cache
def _cli_warning_filters() -> tuple[tuple, ...]:
    """``warnings.filters`` of a real interpreter that has imported the CLIs."""
    printed = subprocess.run(
        [sys.executable, "-c", _READ_FILTERS], capture_output=True, text=True, check=True
    ).stdout
    filters = []
    for action, message, category_module, category, module, lineno in json.loads(printed):
        kind = functools.reduce(
            getattr, category.split("."), importlib.import_module(category_module)
        )
        filters.append((action, _matcher(*message, re.IGNORECASE), kind, _matcher(*module), lineno))
    return tuple(filters)


def _matcher(compiled: bool, text: str | None, flags: int = 0) -> re.Pattern | str | None:
    """A filter's message or module matcher as it was: a regex, a plain string, or none."""
    return re.compile(text, flags) if compiled else text


def _show_warning(message: warnings.WarningMessage) -> None:
    """Python's own printer: the formatted warning on stderr."""
    (message.file or sys.stderr).write(warnings._formatwarnmsg(message))  # type: ignore[attr-defined]


def _as_a_fresh_process(filters: tuple[tuple, ...]) -> None:
    """Undo in a forked child what pytest and the earlier tests changed in this process:
    warning filters and printer, logging handlers, and the global random generators (a fresh
    interpreter seeds Python's and NumPy's from the OS; torch's from a fixed default)."""
    warnings.filters[:] = list(filters)
    warnings._filters_mutated()  # type: ignore[attr-defined]
    warnings._showwarnmsg_impl = _show_warning  # type: ignore[attr-defined]
    warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
    # runpy's note that the module was imported before (by the parent, on purpose).
    warnings.filterwarnings("ignore", "'rdpgan.", RuntimeWarning, "runpy")
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    random.seed()
    np.random.seed()
    torch.manual_seed(_TORCH_DEFAULT_SEED)


def run_cli(
    cli: str,
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``python -m rdpgan.<cli> <args>`` from ``cwd``, as a user types it: a process of its
    own (exit code, stdout and stderr as the shell sees them), forked from this test process
    with the CLI module already imported, so that it starts in milliseconds rather than the
    seconds ``import torch, opacus, hydra, sklearn`` take. ``env`` replaces the environment.
    ``fresh``: a new interpreter instead, for what a fork cannot give (its own string-hash
    seed)."""
    command = [sys.executable, "-m", f"rdpgan.{cli}", *args]
    if fresh:
        return subprocess.run(
            command, capture_output=True, text=True, cwd=cwd, env=env, timeout=600
        )
    importlib.import_module(f"rdpgan.{cli}")  # its imports, loaded once in this process
    return _forked(command, f"rdpgan.{cli}", args, cwd, env)


def run_script(
    script: Path, args: list[str], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """``python SCRIPT <args>`` from ``cwd``, as :func:`run_cli` runs a CLI: forked from this
    test process, whose imports of the script's modules it starts with (import them first)."""
    return _forked([sys.executable, str(script), *args], script, args, cwd, env)


def _forked(
    command: list[str],
    target: str | Path,
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None,
) -> subprocess.CompletedProcess[str]:
    """``target`` (a module name, or a script's path) run in a child forked from this process:
    its exit code, stdout and stderr."""
    with ForkedProcess(target, args, cwd, env) as process:
        stdout, stderr = process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


class ForkedProcess:
    """``target`` run in a child forked from this process, as :func:`run_cli` runs it, and left
    running: what of :class:`subprocess.Popen` the tests use (poll, wait, send_signal, kill,
    communicate), its output read once it has exited. As a context manager, a child still
    running at the end (a test that failed midway) is killed and reaped, its files closed."""

    def __init__(
        self, target: str | Path, args: list[str], cwd: Path, env: dict[str, str] | None
    ) -> None:
        filters = _cli_warning_filters()
        self.returncode: int | None = None
        # Closed by communicate, once the child has written them (its output, read then).
        self._out = tempfile.TemporaryFile()  # noqa: SIM115
        self._err = tempfile.TemporaryFile()  # noqa: SIM115
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            streams = (self._out.fileno(), self._err.fileno())
            _run_forked(target, args, cwd, env, streams, filters)

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        texts = []
        for stream in (self._out, self._err):
            stream.seek(0)
            texts.append(stream.read().decode(errors="replace"))
        return texts[0], texts[1]

    def __enter__(self) -> ForkedProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.kill()
        self.wait()
        self._out.close()
        self._err.close()


def start_cli(cli: str, args: list[str], cwd: Path, env: dict[str, str]) -> ForkedProcess:
    """``python -m rdpgan.<cli> <args>`` as :func:`run_cli` runs it (forked, the module
    already imported here), returned while it runs: for tests that signal a run midway."""
    importlib.import_module(f"rdpgan.{cli}")
    return ForkedProcess(f"rdpgan.{cli}", args, cwd, env)


def _run_forked(
    target: str | Path,
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None,
    streams: tuple[int, int],
    filters: tuple[tuple, ...],
) -> NoReturn:
    """In the forked child: the standard streams on files, the module (or script) run as
    ``__main__`` (what ``python -m`` or ``python SCRIPT`` does: runpy), then exit with its
    code as an interpreter does: the thread and exit hooks it registered run (a joblib
    launcher's shut its worker processes down), pytest's do not."""
    code = 1
    try:
        signal.alarm(600)  # as subprocess.run's timeout: a hung CLI dies
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(streams[0], 1)
        os.dup2(streams[1], 2)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.chdir(cwd)
        atexit._clear()  # pytest's exit handlers are the parent's: a CLI that runs its own
        _as_a_fresh_process(filters)
        try:
            if isinstance(target, Path):
                sys.argv = [str(target), *args]
                runpy.run_path(str(target), run_name="__main__")
            else:
                sys.argv = [str(importlib.util.find_spec(target).origin), *args]
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        # What an interpreter's exit runs, in its order: threads' exit hooks (a
        # concurrent.futures executor's, joblib's), then the exit handlers.
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()  # type: ignore[attr-defined]
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def train_cli(tmp_path: Path, *overrides: str, root: Path | None = None, fresh: bool = False):
    env = {**os.environ}
    if root is not None:
        env["RDPGAN_DATA_DIR"] = str(root)
    args = [f"hydra.run.dir={tmp_path / 'run'}", *overrides]
    return run_cli("train", args, tmp_path, env, fresh=fresh)


@pytest.fixture(scope="session")
def small_adult(tmp_path_factory, data_dir) -> Path:
    """A data root holding the first 3,000 rows of the real adult.data."""
    root = tmp_path_factory.mktemp("adult_root")
    (root / "adult").mkdir()
    lines = (data_dir / "adult" / "adult.data").read_text().splitlines()[:3000]
    (root / "adult" / "adult.data").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, small_adult) -> Path:
    """One short real run (ε=3, evaluated) on the small Adult root, shared by several tests.

    It is tilted and rakes (tilt on and a pool of 4, named: its marginals are too noisy for the
    one and the default has none of the other), so that the sampling tests that use it cover
    both."""
    where = tmp_path_factory.mktemp("trained")
    result = train_cli(
        where,
        "dataset=adult",
        "epsilon=3",
        "seed=1",
        "privacy.noise_seed=1",
        "evaluate=true",
        "model.sample_pool=4",
        "model.tilt_sampling=true",
        *FAST,
        "sample.n=null",  # the default: as many rows as released (raking with 4 is quick)
        root=small_adult,
    )
    assert result.returncode == 0, result.stderr
    return where / "run"
