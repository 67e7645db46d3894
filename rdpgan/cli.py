"""Shared plumbing for the Hydra entry points: one-line errors, exit code 2, no leftovers
(but a ledger that records privacy already spent, which the caller asks to keep).

Hydra reports its own errors (an unknown dataset, a mistyped override) over several lines with
exit code 1; a user deserves one line and the conventional usage-error code 2. So each entry
point first composes its config once with Hydra's compose API to catch those, then hands over
to ``@hydra.main`` for the run directory, logging and multirun.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.initialize import get_gh_backup, restore_gh_from_backup
from omegaconf import DictConfig, OmegaConf

from rdpgan.config import RunConfig, public_run_settings, register_configs
from rdpgan.errors import UserInputError, first_line
from rdpgan.io import read_json, write_json

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "configs")
ConfigT = TypeVar("ConfigT")


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def precheck_overrides(config_name: str, args: list[str]) -> None:
    """Compose the config as Hydra will, failing in one line on any config error."""
    if any(arg.startswith("-") for arg in args):
        return  # --multirun, --help, --cfg ...: Hydra's own modes, left to Hydra
    overrides = [
        a
        for a in args
        if a.startswith("hydra.searchpath=") or not a.lstrip("+~").startswith("hydra.")
    ]
    register_configs()
    try:
        with initialize_config_dir(CONFIG_DIR, version_base="1.3"):
            OmegaConf.to_object(compose(config_name, overrides=overrides))
    except Exception as exc:  # Hydra and OmegaConf raise many types; all mean "bad config"
        fail(first_line(exc))


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
        merged = OmegaConf.merge(OmegaConf.structured(RunConfig), read_json(path))
        return to_typed(merged, RunConfig)
    except Exception as exc:  # JSON and OmegaConf validation errors alike
        raise UserInputError(f"{path} is not a valid run record: {first_line(exc)}") from exc


def existing_files(directory: Path) -> set[Path]:
    return set(directory.rglob("*")) if directory.is_dir() else set()


def _hydra_own(path: Path) -> bool:
    return ".hydra" in path.parts or path.suffix == ".log"


def remove_new_files(
    directory: Path, before: set[Path], keep: Callable[[Path], bool] | None = None
) -> None:
    """Undo a failed run: delete what it created (but the files ``keep`` accepts), and the
    run directory if Hydra made it for us and nothing is kept.

    ``before`` is the listing taken when the job started (Hydra's own files already in it).
    """
    for path in sorted(existing_files(directory) - before, reverse=True):  # deepest first
        if _hydra_own(path) or (keep is not None and keep(path)):
            continue
        if path.is_file():
            path.unlink()
        elif not any(path.iterdir()):
            path.rmdir()
    made_for_this_run = all(_hydra_own(p) for p in before)
    if made_for_this_run and all(_hydra_own(p) for p in existing_files(directory)):
        shutil.rmtree(directory, ignore_errors=True)
        parent = directory.parent
        while parent != Path.cwd() and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def guarded(task: Callable[[], None], cleanup: Callable[[], None] | None = None) -> None:
    """Run ``task``; bad input becomes one line on stderr, exit 2, and ``cleanup``."""
    try:
        task()
    except UserInputError as exc:
        if cleanup is not None:
            cleanup()
        fail(first_line(exc))
