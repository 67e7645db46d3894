"""Shared plumbing for the Hydra entry points: one-line errors, exit code 2, no leftovers
(but a ledger that records privacy already spent, which the caller asks to keep).

Hydra reports its own errors (an unknown dataset, a mistyped override) over several lines with
exit code 1; a user deserves one line and the conventional usage-error code 2. So each entry
point first composes its config once with Hydra's compose API to catch those, then runs its job
on that composition (:func:`run_hydra_job` where the job has a run directory), handing over to
``@hydra.main`` only for Hydra's own modes: multirun, ``--cfg``, ``--help``, ``--config-dir``.
"""

from __future__ import annotations

import atexit
import copy
import logging
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import NoReturn, TypeVar

import hydra
from hydra import compose, initialize_config_dir
from hydra._internal.callbacks import Callbacks  # (what Hydra.run builds, 1.3)
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import configure_log, run_job
from hydra.errors import OverrideParseException
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from hydra.types import HydraContext, RunMode
from omegaconf import DictConfig, OmegaConf, open_dict

from rdpgan.config import (
    RunConfig,
    public_run_settings,
    register_configs,
    with_absent_train_settings,
)
from rdpgan.errors import UserInputError, first_line
from rdpgan.io import read_json, write_json

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "configs")
ConfigT = TypeVar("ConfigT")


def exit_finished() -> None:
    """End a command that has finished and written its outputs, without the interpreter's
    teardown of the ~3,000 modules training imports (torch, Opacus, SciPy, SymPy): more than a
    second of a run on 2 cores, after the outputs are written. The exit handlers run, the logs
    and streams are flushed; only the module teardown is skipped. Under a profiler or a
    coverage tracer (which may report after the module returns) it returns instead."""
    if _observed():
        return  # the interpreter's own exit follows
    atexit._run_exitfuncs()
    logging.shutdown()
    with suppress(OSError):  # a reader that closed the pipe has what it wanted
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)


def _observed() -> bool:
    """Whether a profiler or tracer watches this process (Python 3.12's cProfile and coverage
    use sys.monitoring)."""
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and any(monitoring.get_tool(i) is not None for i in range(6))


def fail(message: str) -> NoReturn:
    # Under torchrun every rank fails alike: rank 0 alone prints (torchrun's RANK, read without
    # importing torch, which a sampling command does not load).
    if os.environ.get("RANK", "0").strip() in ("", "0"):
        print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def precheck_overrides(
    config_name: str, args: list[str], record_dirs: bool = False, job_name: str = "app"
) -> DictConfig | None:
    """Compose the config as Hydra will for the job ``job_name`` (what ``@hydra.main`` names
    after the entry point's file), its own settings included, failing in one line on any
    config error; the composition (the job's part: :func:`job_config`), or None for Hydra's
    own modes. ``record_dirs``: also :func:`record_existing_dirs`, with the run and sweep
    directories this composition resolves to (one composition for both: each takes a sixth of
    a second)."""
    if any(arg.startswith("-") for arg in args):
        if record_dirs:  # --multirun, --help, --cfg ...: Hydra's own modes, left to Hydra
            record_existing_dirs(args)
        return None
    for arg in args:  # one at a time, so the message can name the override at fault
        refuse_unparsable(arg)
    register_configs()
    try:
        with initialize_config_dir(CONFIG_DIR, job_name=job_name, version_base="1.3"):
            composed = compose(config_name, overrides=args, return_hydra_config=True)
        run_dirs = _run_dirs(composed)
        OmegaConf.to_object(job_config(composed))
    except Exception as exc:  # Hydra and OmegaConf raise many types; all mean "bad config"
        # Hydra's line names the override; the reason (e.g. "Value 'abc' could not be
        # converted to Float") is OmegaConf's, in the exception it wraps.
        reason = f": {first_line(exc.__cause__)}" if exc.__cause__ is not None else ""
        fail(first_line(exc) + reason)
    if record_dirs:
        record_existing_dirs(args, run_dirs)
    return composed


def hydra_entry(job: Callable[[DictConfig], None], config_name: str) -> Callable[[], None]:
    """``@hydra.main`` over ``job`` (Hydra's own modes: multirun, ``--cfg``, ``--help``), the
    config directory given whole: relative to the job's module, Hydra would look for a
    package where the ``rdpgan`` script (``rdpgan.train:main``) imports it."""
    return hydra.main(config_path=CONFIG_DIR, config_name=config_name, version_base="1.3")(job)


def run_in_place(config_name: str, job: Callable[[DictConfig], None], args: list[str]) -> None:
    """A command whose job makes no directory and logs nothing (sample, evaluate, report): run
    on the precheck's composition, since Hydra's run (two compositions more, its job set-up)
    would only cost start-up time; Hydra's own modes (``--help``, ``--cfg``) left to Hydra."""
    composed = precheck_overrides(config_name, args)
    if composed is None:
        hydra_entry(job, config_name)()
    else:
        job(job_config(composed))


def job_config(composed: DictConfig) -> DictConfig:
    """A composition without Hydra's settings (a copy): what a job's function is given."""
    job = copy.deepcopy(composed)
    with open_dict(job):
        del job["hydra"]
    return job


def job_name(job: Callable[..., object]) -> str:
    """The name ``@hydra.main`` gives ``job``'s runs: its module's last part, or its file's
    stem where the module runs as ``__main__`` (``python -m rdpgan.train``)."""
    if job.__module__ == "__main__":
        return Path(job.__code__.co_filename).stem
    return job.__module__.rpartition(".")[2]


def left_to_hydra(composed: DictConfig) -> bool:
    """Whether the composition asks for what only Hydra's own start does: a multirun
    (``hydra.mode=MULTIRUN``, no ``-m``), or its debug listing (``hydra.verbose``), printed
    as it composes."""
    return composed.hydra.mode == RunMode.MULTIRUN or bool(composed.hydra.verbose)


def run_hydra_job(composed: DictConfig, task: Callable[[DictConfig], None]) -> None:
    """``@hydra.main``'s run mode on a composition :func:`precheck_overrides` made: the run
    directory, ``HydraConfig``, logging and callbacks as ``Hydra.run`` sets them up, without
    its two compositions more (one for the mode, one for the run), about a third of a second
    of every command. The task's error is raised (its traceback whole, where Hydra's start
    trims it)."""
    name = composed.hydra.job.name
    with initialize_config_dir(CONFIG_DIR, job_name=name, version_base="1.3"):
        with open_dict(composed):
            composed.hydra.mode = RunMode.RUN
        configure_log(composed.hydra.hydra_logging, composed.hydra.verbose)
        callbacks = Callbacks(composed)
        config_name = composed.hydra.job.config_name
        callbacks.on_run_start(config=composed, config_name=config_name)
        context = HydraContext(GlobalHydra.instance().config_loader(), callbacks)
        result = run_job(task, composed, "hydra.run.dir", None, context)
        callbacks.on_run_end(config=composed, config_name=config_name, job_return=result)
        _ = result.return_value  # (the task's exception, re-raised)


def _run_dirs(composed: DictConfig) -> list[str]:
    """The run and sweep directories a composition resolves to (``${now:...}`` as now), or
    none where they do not resolve before Hydra runs (a ``${hydra:...}`` in them)."""
    try:
        return [composed.hydra.run.dir, composed.hydra.sweep.dir]
    except Exception:  # OmegaConf's resolution errors, of several types
        return []


def refuse_unparsable(arg: str) -> None:
    """Fail in one line, naming ``arg`` and how to quote it, when Hydra's override grammar
    cannot parse it (its own report is an ANTLR message over several lines, without a fix:
    an unquoted ``dataset.positive_label=>50K.`` is the usual culprit)."""
    try:
        OverridesParser.create().parse_overrides([arg])
        return
    except OverrideParseException:
        pass
    key, equals, value = arg.partition("=")
    if not equals:
        fail(f"cannot parse the override '{arg}': write it as key=value")
    escaped = value.replace('"', '\\"')
    example = shlex.quote(f'{key}="{escaped}"')
    fail(
        f"cannot parse the override '{arg}': quote a value with special characters, e.g. "
        f"{example} (single quotes for the shell, double quotes for Hydra)"
    )


def compose_run_config(overrides: list[str] | None = None) -> RunConfig:
    """The typed run config for ``overrides``, composed exactly as ``rdpgan.train`` would."""
    register_configs()
    # Also callable from inside another Hydra app (the benchmark): set its state aside.
    outer = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
            return to_typed(compose("config", overrides=overrides or []), RunConfig)
    finally:
        restore_gh_from_backup(outer)


def to_typed(cfg: DictConfig, kind: type[ConfigT]) -> ConfigT:
    typed = OmegaConf.to_object(cfg)
    if not isinstance(typed, kind):
        raise TypeError(f"expected a {kind.__name__} config")
    return typed


def run_dir() -> Path:
    return Path(HydraConfig.get().runtime.output_dir)


RUN_RECORD = "run.json"


def write_run_config(directory: Path, cfg: RunConfig) -> None:
    """The settings of a run, kept beside its outputs (all but the secret ``noise_seed``)."""
    write_json(directory / RUN_RECORD, public_run_settings(cfg))


def read_run_config(directory: Path) -> RunConfig:
    path = directory / RUN_RECORD
    if not path.is_file():
        raise UserInputError(f"{directory} has no {RUN_RECORD}; was it made by rdpgan.train?")
    try:
        record = read_json(path)
        if isinstance(record, dict) and isinstance(record.get("train"), dict):
            record["train"] = with_absent_train_settings(record["train"])
        merged = OmegaConf.merge(OmegaConf.structured(RunConfig), record)
        return to_typed(merged, RunConfig)
    except Exception as exc:  # JSON and OmegaConf validation errors alike
        raise UserInputError(f"{path} is not a valid run record: {first_line(exc)}") from exc


# Each directory that might come to hold the run directory, with the names it held when the
# command started (before Hydra made anything): ``remove_new_files`` deletes only what is new.
_LISTED_AT_START: dict[Path, frozenset[str]] = {}


def record_existing_dirs(args: list[str], resolved: Sequence[str] = ()) -> None:
    """Call before Hydra starts. By the time a job runs, Hydra has made its run directory and
    any missing parents, so only a listing taken now tells them from a directory the user
    made (an empty ``X`` in ``hydra.run.dir=X/run`` must outlive a failed run). Lists the
    current directory, the fixed part of each ``hydra.run.dir``/``hydra.sweep.dir`` given,
    and the ``resolved`` run and sweep directories, with all their parents."""
    places = [os.getcwd(), *resolved]
    for arg in args:
        key, _, value = arg.lstrip("+").partition("=")
        if key in ("hydra.run.dir", "hydra.sweep.dir"):
            places.append(value.split("${")[0])  # the part no interpolation can change
    for place in places:
        path = Path(os.path.abspath(place))  # as Hydra spells runtime.output_dir
        for directory in (path, *path.parents):
            if directory not in _LISTED_AT_START and directory.is_dir():
                with suppress(OSError):  # unlisted: all inside counts as pre-existing
                    _LISTED_AT_START[directory] = frozenset(os.listdir(directory))


def made_by_this_command(path: Path) -> bool:
    """Whether ``path`` is known to be new: it, or a parent, was missing from a directory
    listed at start. Anything unknown counts as pre-existing, so is never deleted."""
    path = Path(os.path.abspath(path))
    for each in (path, *path.parents):
        if each.parent != each and each.parent in _LISTED_AT_START:
            return each.name not in _LISTED_AT_START[each.parent]
    return False


def existing_files(directory: Path) -> set[Path]:
    return set(directory.rglob("*")) if directory.is_dir() else set()


def remove_new_files(
    directory: Path, before: set[Path], keep: Callable[[Path], bool] | None = None
) -> None:
    """Undo a failed run: delete what it created (but the files ``keep`` accepts), then the
    run directory and its parents while they are empty and ``made_by_this_command``.

    ``before`` is the listing taken when the job started; of it (Hydra's log, a resumed run's
    files), only what ``made_by_this_command`` goes. Without ``record_existing_dirs`` nothing
    is known new, so the run directory stays. Nothing that existed when the command started is
    deleted, and an ``OSError`` (a mount point, permissions) leaves a path in place rather than
    end in a traceback.
    """
    for path in sorted(existing_files(directory), reverse=True):  # deepest first
        if (path in before and not made_by_this_command(path)) or (keep and keep(path)):
            continue
        try:
            if path.is_dir() and not path.is_symlink():
                path.rmdir()  # only when empty: a kept file keeps its directory
            else:
                path.unlink()
        except OSError:
            pass
    for each in (directory, *directory.parents):
        if not made_by_this_command(each):
            return
        try:
            each.rmdir()
        except FileNotFoundError:
            continue
        except OSError:  # not empty (a kept ledger), or not ours to remove
            return


def guarded(task: Callable[[], None], cleanup: Callable[[], None] | None = None) -> None:
    """Run ``task``; bad input becomes one line on stderr, exit 2, and ``cleanup``."""
    try:
        task()
    except UserInputError as exc:
        if cleanup is not None:
            cleanup()
        fail(first_line(exc))
