"""rdpgan.cli's promises to the user: an override Hydra cannot parse is one line that says how
to quote it, and a failed run deletes only what the command itself created."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest
from hydra.experimental.callback import Callback

from rdpgan import cli
from tests.conftest import run_cli


def train(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("train", list(args), cwd)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert all(needle in lines[0] for needle in needles), result.stderr
    return lines[0]


def test_an_unparsable_override_is_named_with_its_quoted_form(tmp_path):
    bad = "dataset.positive_label=>50K."
    args = ["dataset=csv", "dataset.path=x.csv", "dataset.target=income", bad]
    line = assert_one_line_exit_2(train(tmp_path, *args), f"cannot parse the override '{bad}'")
    assert """'dataset.positive_label=">50K."'""" in line and "quote" in line
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("arg", "needle"),
    [("a=[1,2", """'a="[1,2"'"""), ('a=x"y>', r"""'a="x\"y>"'"""), ("abc", "key=value")],
)
def test_each_unparsable_override_gets_one_line(tmp_path, capsys, arg, needle):
    with pytest.raises(SystemExit) as exit_:
        cli.precheck_overrides("config", ["epsilon=1", arg])
    assert exit_.value.code == 2
    line = capsys.readouterr().err.strip()
    assert line.startswith(f"error: cannot parse the override '{arg}'") and needle in line
    assert len(line.splitlines()) == 1


def failed_run(cwd: Path, run_dir: str) -> None:
    """A run that fails after Hydra has made its directory: there is no data under data.root."""
    result = train(cwd, f"hydra.run.dir={run_dir}", f"data.root={cwd / 'no_data'}")
    assert_one_line_exit_2(result, "not found")


@pytest.mark.parametrize("spelling", ["absolute", "relative"])
def test_a_failed_run_keeps_the_empty_parent_the_user_made(tmp_path, spelling):
    """The old cleanup walked up from the run directory deleting every empty parent."""
    (tmp_path / "X").mkdir()
    failed_run(tmp_path, str(tmp_path / "X" / "bad") if spelling == "absolute" else "X/bad")
    assert (tmp_path / "X").is_dir()
    assert not list((tmp_path / "X").iterdir())  # `bad`, and Hydra's log in it, are gone


def test_a_failed_run_keeps_a_run_directory_the_user_made_and_its_files(tmp_path):
    """The old cleanup took a directory holding only logs for one Hydra made, and deleted it."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.log").write_text("mine\n")
    failed_run(tmp_path, str(mine))
    assert sorted(p.name for p in mine.iterdir()) == ["notes.log"]  # train.log is gone


def test_a_failed_run_removes_the_directories_it_made_outside_the_cwd(tmp_path):
    """Nothing existed below `elsewhere`: all of new/deeper goes, `elsewhere` and cwd stay."""
    cwd, elsewhere = tmp_path / "cwd", tmp_path / "elsewhere"
    cwd.mkdir()
    elsewhere.mkdir()
    failed_run(cwd, str(elsewhere / "new" / "deeper"))
    assert elsewhere.is_dir() and not list(elsewhere.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "elsewhere"]


@pytest.fixture
def listed_at_start(monkeypatch):
    """An empty record, as in a process that has not called record_existing_dirs."""
    monkeypatch.setattr(cli, "_LISTED_AT_START", {})


def test_without_a_record_only_files_new_since_the_job_started_go(tmp_path, listed_at_start):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("")
    before = cli.existing_files(run)
    (run / "model.npz").write_text("")
    cli.remove_new_files(run, before)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["run", "train.log"]


def test_the_precheck_lists_the_run_directory_as_it_resolves(tmp_path, listed_at_start):
    """A run directory's interpolated part (``${now:...}``) is listed as the composition
    resolves it, before Hydra makes anything: a directory the user made there is known."""
    runs = tmp_path / "runs"
    year = time.strftime("%Y")
    (runs / year).mkdir(parents=True)
    args = ["epsilon=1", f"hydra.run.dir={runs}/${{now:%Y}}/run"]
    cli.precheck_overrides("config", args, record_dirs=True)
    assert runs / year in cli._LISTED_AT_START


def test_with_hydras_own_flags_the_precheck_still_lists_the_directories_given(
    tmp_path, listed_at_start
):
    (tmp_path / "mine").mkdir()
    args = ["--cfg", "job", f"hydra.run.dir={tmp_path / 'mine' / 'run'}"]
    assert cli.precheck_overrides("config", args, record_dirs=True) is None
    assert tmp_path / "mine" in cli._LISTED_AT_START


def test_a_directory_that_will_not_go_is_left_without_a_traceback(
    tmp_path, listed_at_start, monkeypatch
):
    """A mount point (EBUSY) or a read-only parent (EACCES) stays, silently."""
    monkeypatch.chdir(tmp_path)
    cli.record_existing_dirs([f"hydra.run.dir={tmp_path / 'a' / 'run'}"])
    (tmp_path / "a" / "run").mkdir(parents=True)

    def refuse(self: Path) -> None:
        raise OSError(errno.EBUSY, "Device or resource busy", str(self))

    monkeypatch.setattr(Path, "rmdir", refuse)
    cli.remove_new_files(tmp_path / "a" / "run", set())
    assert (tmp_path / "a" / "run").is_dir()


def test_under_torchrun_rank_zero_alone_prints_the_error(tmp_path):
    """Every rank fails alike on bad input: rank 0 alone says so (torchrun's RANK), in one
    line; the others exit 2 in silence."""
    for rank, lines in (("0", 1), ("1", 0)):
        result = subprocess.run(
            [sys.executable, "-m", "rdpgan.sample", f"run_dir={tmp_path / 'none'}", "out=s.csv"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, "RANK": rank},
        )
        assert result.returncode == 2 and len(result.stderr.splitlines()) == lines, result.stderr


def run_python(*lines: str) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter running ``lines`` (a script of its own)."""
    return subprocess.run(
        [sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=120
    )


def test_a_finished_command_exits_0_with_its_exit_handlers_run_and_streams_flushed(tmp_path):
    """exit_finished skips the interpreter's module teardown, nothing else: an exit handler
    still runs, a log file and both streams are flushed (unterminated lines included)."""
    done = run_python(
        "import atexit, logging, pathlib, sys",
        "from rdpgan.cli import exit_finished",
        f"log = pathlib.Path({str(tmp_path)!r})",
        "logging.basicConfig(filename=log / 'run.log', level=logging.INFO)",
        "atexit.register(lambda: (log / 'handler').write_text('ran'))",
        "logging.getLogger('x').info('logged')",
        "print('out', end='')",
        "print('err', end='', file=sys.stderr)",
        "exit_finished()",
        "print('not reached')",
    )
    assert done.returncode == 0
    assert (done.stdout, done.stderr) == ("out", "err")
    assert (tmp_path / "handler").read_text() == "ran"
    assert "logged" in (tmp_path / "run.log").read_text()


def test_under_a_profiler_a_finished_command_leaves_the_exit_to_the_interpreter():
    """A profiler (or coverage) may write its report once the module returns: then
    exit_finished returns and the interpreter's own exit follows."""
    done = run_python(
        "import sys",
        "from rdpgan.cli import exit_finished",
        "sys.setprofile(lambda *args: None)",
        "exit_finished()",
        "sys.setprofile(None)",
        "print('returned')",
    )
    assert done.returncode == 0 and done.stdout == "returned\n"


class Recorder(Callback):
    """A Hydra callback (``hydra.callbacks``) that notes the events it is called for."""

    events: ClassVar[list[str]] = []

    def on_run_start(self, config, **kwargs) -> None:
        self.events.append("run_start")

    def on_multirun_start(self, config, **kwargs) -> None:
        self.events.append("multirun_start")

    def on_job_start(self, config, **kwargs) -> None:
        self.events.append("job_start")

    def on_job_end(self, config, job_return, **kwargs) -> None:
        self.events.append("job_end")

    def on_run_end(self, config, **kwargs) -> None:
        self.events.append("run_end")

    def on_multirun_end(self, config, **kwargs) -> None:
        self.events.append("multirun_end")


@pytest.fixture
def hydra_start(tmp_path, monkeypatch, listed_at_start):
    """``rdpgan.train.start`` run here on a job and arguments (its exit left out), counting
    Hydra's compositions; the logging Hydra sets up is undone after."""
    from hydra._internal.hydra import Hydra

    from rdpgan import train as train_module

    compositions = []
    compose_config = Hydra.compose_config
    monkeypatch.setattr(
        Hydra,
        "compose_config",
        lambda self, *a, **k: compositions.append(1) or compose_config(self, *a, **k),
    )
    monkeypatch.setattr(train_module, "exit_finished", lambda: None)
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    Recorder.events.clear()

    def start(job, *args: str) -> int:
        compositions.clear()
        monkeypatch.setattr(sys, "argv", ["train.py", *args])
        train_module.start(job)
        return len(compositions)

    yield start
    root.handlers[:], root.level = handlers, level


def test_a_run_composes_its_config_once_and_runs_its_job_as_hydra_would(tmp_path, hydra_start):
    """The train command's job runs on the precheck's composition, in the run directory Hydra
    makes, with Hydra's view of a run-mode job named after the command, its logging and its
    callbacks; a multirun is handed to Hydra's own start (which composes again), alike."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    calls = []

    def job(cfg) -> None:
        hydra = HydraConfig.get()
        calls.append(
            {
                "keys": set(cfg),
                "mode": hydra.mode,
                "name": hydra.job.name,
                "output_dir": hydra.runtime.output_dir,
                "cwd": os.getcwd(),
                "log_level": logging.getLogger().level,
            }
        )

    job.__module__ = "rdpgan.train"  # as the rdpgan script imports it
    run = tmp_path / "made" / "run"
    record = f"+hydra.callbacks.record._target_={__name__}.Recorder"
    assert hydra_start(job, "epsilon=2", f"hydra.run.dir={run}", record) == 1
    assert len(calls) == 1 and run.is_dir() and cli.made_by_this_command(run.parent)
    assert "hydra" not in calls[0]["keys"] and "privacy" in calls[0]["keys"]
    assert calls[0]["mode"] == RunMode.RUN and calls[0]["name"] == "train"
    assert calls[0]["output_dir"] == str(run) and calls[0]["cwd"] == str(tmp_path)
    assert Recorder.events == ["run_start", "job_start", "job_end", "run_end"]

    sweep = tmp_path / "sweep"
    args = ["hydra.mode=MULTIRUN", "epsilon=1", f"hydra.sweep.dir={sweep}", record]
    assert hydra_start(job, *args) > 1
    assert calls[1]["mode"] == RunMode.MULTIRUN and calls[1]["output_dir"] == str(sweep / "0")
    assert calls[1]["name"] == "train" and calls[1]["log_level"] == calls[0]["log_level"]
    assert Recorder.events[4:] == ["multirun_start", "job_start", "job_end", "multirun_end"]


def test_a_job_is_named_after_its_command_and_its_error_is_raised(tmp_path, hydra_start):
    """``python -m rdpgan.train`` runs the module as ``__main__``: its runs are named after
    its file, as ``@hydra.main`` names them. A job's unexpected error is raised (the command
    then fails with its traceback), never swallowed into a clean exit."""
    from rdpgan import schema, train

    assert cli.job_name(train.train_job) == "train" and cli.job_name(schema.schema_job) == "schema"

    def job(cfg) -> None:
        raise RuntimeError("a bug")

    job.__module__ = "__main__"
    with pytest.raises(RuntimeError, match="a bug"):
        hydra_start(job, f"hydra.run.dir={tmp_path / 'run'}")
    assert cli.job_name(job) == Path(__file__).stem


@pytest.mark.parametrize(
    ("arg", "left"),
    [("epsilon=1", False), ("hydra.verbose=true", True), ("hydra.mode=MULTIRUN", True)],
)
def test_a_multirun_and_hydras_debug_listing_are_left_to_hydra(arg, left):
    assert cli.left_to_hydra(cli.precheck_overrides("config", [arg])) is left
