"""`python -m rdpgan.sample`: CSV/Parquet output, labels, seeds, chunking, damaged checkpoints."""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from rdpgan import sampler
from rdpgan.config import SampleCliConfig
from rdpgan.data.schema import Categorical, Schema
from rdpgan.errors import UserInputError
from rdpgan.sample import ARROW_TYPES, chunk_seed, load_model, resolve_label, write_samples
from rdpgan.sample import run as sample_run
from rdpgan.synthesizer import DPCGAN
from tests.conftest import run_cli


def sample_cli(cwd: Path, *args: str, fresh: bool = False) -> subprocess.CompletedProcess[str]:
    return run_cli("sample", list(args), cwd, fresh=fresh)


def schema_of(run: Path) -> Schema:
    return Schema.from_specs(json.loads((run / "model.json").read_text())["schema"])


def read_back(path: Path, schema: Schema) -> pd.DataFrame:
    """The file as a frame conformed to the schema (which raises on any undeclared level)."""
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    return schema.conform(frame)


def assert_one_line_error(result: subprocess.CompletedProcess[str], needle: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_output_has_the_schema_columns_dtypes_and_n_rows(tmp_path, trained_run, suffix):
    # Relative `out`: resolved against the current directory, which Hydra must not change.
    name = f"synthetic{suffix}"
    args = [f"run_dir={trained_run}", f"out={name}", "n=1234", "chunk_size=500"]
    result = sample_cli(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert {p.name for p in tmp_path.iterdir()} == {name}  # no log, no .hydra, no temp file

    schema = schema_of(trained_run)
    frame = read_back(tmp_path / name, schema)
    assert len(frame) == 1234
    assert list(frame.columns) == schema.names
    assert frame.dtypes.astype(str).to_dict() == schema.dtypes()
    if suffix == ".parquet":
        parquet = pq.ParquetFile(tmp_path / name)
        assert parquet.num_row_groups == 3  # written chunk by chunk: 500 + 500 + 234
        arrow = parquet.schema_arrow
        assert {f.name: f.type for f in arrow} == {
            name: ARROW_TYPES[dtype] for name, dtype in schema.dtypes().items()
        }


def test_default_n_is_the_released_row_count(tmp_path, trained_run):
    result = sample_cli(tmp_path, f"run_dir={trained_run}", "out=s.csv")
    assert result.returncode == 0, result.stderr
    released = json.loads((trained_run / "model.json").read_text())["released_rows"]
    assert len(pd.read_csv(tmp_path / "s.csv")) == released


@pytest.mark.parametrize("label", [">50K", "<=50K"])
def test_label_gives_only_that_class(tmp_path, trained_run, label):
    # As a shell passes label='>50K': the quotes are gone by the time Python sees it.
    result = sample_cli(
        tmp_path, f"run_dir={trained_run}", "out=s.parquet", "n=400", f"label={label}"
    )
    assert result.returncode == 0, result.stderr
    assert set(pd.read_parquet(tmp_path / "s.parquet")["income"]) == {label}


def test_conditions_give_only_rows_that_meet_them(tmp_path, trained_run):
    """``conditions.COLUMN=`` as a shell passes it: a level (>50K unquoted), a [low, high]
    range; exactly n rows, all meeting them; an unknown column is one line and exit 2."""
    result = sample_cli(
        tmp_path,
        f"run_dir={trained_run}",
        "out=s.csv",
        "n=300",
        "conditions.sex=Female",
        "conditions.age=[30,40]",
        "conditions.income=>50K",
    )
    assert result.returncode == 0, result.stderr
    rows = read_back(tmp_path / "s.csv", schema_of(trained_run))
    assert len(rows) == 300 and set(rows["sex"]) == {"Female"}
    assert set(rows["income"]) == {">50K"} and rows["age"].between(30, 40).all()
    refused = sample_cli(tmp_path, f"run_dir={trained_run}", "out=t.csv", "conditions.nope=1")
    errors = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and errors == [
        "error: condition on 'nope': the table has no such column"
    ]


def test_labels_match_the_declared_levels_by_type():
    numeric = Categorical("y", (0, 1))
    assert resolve_label(numeric, "1") == 1 and resolve_label(numeric, 1.0) == 1
    assert resolve_label(Categorical("y", (0.5, 2.0)), "0.50") == 0.5
    assert resolve_label(Categorical("y", ("1", "2")), 1) == "1"
    for column, label in [(numeric, "one"), (numeric, "2"), (Categorical("y", ("a", "b")), "A")]:
        with pytest.raises(UserInputError, match="unknown label"):
            resolve_label(column, label)


def test_same_seed_same_bytes_other_seed_other_rows(tmp_path, trained_run):
    common = [f"run_dir={trained_run}", "n=600", "chunk_size=250"]
    for out, seed in [("a.csv", 7), ("b.csv", 7), ("c.csv", 8)]:
        # Fresh interpreters: each its own string-hash seed (forks would share the parent's).
        result = sample_cli(tmp_path, *common, f"out={out}", f"seed={seed}", fresh=True)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    assert (tmp_path / "a.csv").read_bytes() != (tmp_path / "c.csv").read_bytes()


def test_chunks_are_the_api_samples_with_derived_seeds(tmp_path, trained_run):
    """Chunk i of a file is exactly model.sample(size_i, seed=chunk_seed(seed, i))."""
    result = sample_cli(
        tmp_path, f"run_dir={trained_run}", "out=s.csv", "n=600", "chunk_size=250", "seed=7"
    )
    assert result.returncode == 0, result.stderr
    model = DPCGAN.load(trained_run)
    sizes = [250, 250, 100]
    expected = pd.concat(
        [model.sample(size, seed=chunk_seed(7, i)) for i, size in enumerate(sizes)],
        ignore_index=True,
    )
    written = pd.read_csv(tmp_path / "s.csv")
    pd.testing.assert_frame_equal(written, pd.read_csv(io.StringIO(expected.to_csv(index=False))))
    assert len({chunk_seed(7, i) for i in range(1000)}) == 1000


def test_a_failure_while_writing_leaves_no_file(tmp_path, trained_run, monkeypatch):
    model = load_model(trained_run)
    real_sample = model.sample_arrow
    calls = []

    def fail_on_second_chunk(n, label=None, seed=None, workers=1, call=None):
        calls.append(n)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_sample(n, label=label, seed=seed, workers=workers, call=call)

    monkeypatch.setattr(model, "sample_arrow", fail_on_second_chunk)
    for out in ("s.csv", "s.parquet"):
        calls.clear()
        with pytest.raises(UserInputError, match="No space left on device"):
            write_samples(model, tmp_path / out, n=300, chunk_size=100)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_output_survives_a_failed_run(tmp_path, trained_run):
    (tmp_path / "s.csv").write_text("keep me\n")
    (tmp_path / "d.csv").mkdir()
    result = sample_cli(tmp_path, f"run_dir={trained_run}", "out=s.csv", "label=maybe")
    assert_one_line_error(result, "unknown label 'maybe'")
    assert (tmp_path / "s.csv").read_text() == "keep me\n"
    assert_one_line_error(sample_cli(tmp_path, f"run_dir={trained_run}", "out=d.csv"), "directory")
    assert {p.name for p in tmp_path.iterdir()} == {"s.csv", "d.csv"}


def damaged_copy(trained_run: Path, where: Path) -> Path:
    run = where / "damaged_run"
    run.mkdir()
    for name in ("model.npz", "model.json"):
        shutil.copy(trained_run / name, run / name)
    return run


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def save_arrays(path: Path, **arrays: np.ndarray) -> None:
    with open(path, "wb") as file:
        np.savez(file, **arrays)


def edit_arrays(path: Path, edit) -> None:
    with np.load(path) as weights:
        save_arrays(path, **{k: edit(v) for k, v in weights.items()})


def shrink_generator(path: Path) -> None:
    """Weights of another model: every layer's outputs cut to half."""
    edit_arrays(path, lambda v: v[: (len(v) + 1) // 2])


def add_array(path: Path, name: str) -> None:
    with np.load(path) as weights:
        save_arrays(path, **weights, **{name: np.zeros((2, 2), np.float32)})


def one_label_probability(path: Path) -> None:
    meta = json.loads(path.read_text())
    meta["label_probs"] = [1.0]
    path.write_text(json.dumps(meta))


def drop_key(path: Path) -> None:
    meta = json.loads(path.read_text())
    del meta["schema"]
    path.write_text(json.dumps(meta))


DAMAGE = {
    "model.npz truncated": ("model.npz", truncate, "damaged or incompatible"),
    "model.npz empty": ("model.npz", lambda p: p.write_bytes(b""), "damaged or incompatible"),
    "model.npz garbage": ("model.npz", lambda p: p.write_bytes(b"\x00garbage" * 64), "damaged"),
    "model.npz other weights": ("model.npz", lambda p: save_arrays(p, w=np.zeros(3)), "damaged"),
    "model.npz a smaller generator": ("model.npz", shrink_generator, "damaged or incompatible"),
    "model.npz 0-d weights": ("model.npz", lambda p: edit_arrays(p, lambda v: v.sum()), "damaged"),
    "model.npz NaN weights": (
        "model.npz",
        lambda p: edit_arrays(p, lambda v: v * np.nan),
        "damaged",
    ),
    "model.npz an extra array": ("model.npz", lambda p: add_array(p, "body.9.weight"), "damaged"),
    "model.npz missing": ("model.npz", Path.unlink, "model.npz is missing"),
    "model.json not JSON": ("model.json", lambda p: p.write_text("{not json"), "damaged"),
    "model.json a list": ("model.json", lambda p: p.write_text("[1, 2]"), "damaged"),
    "model.json without schema": ("model.json", drop_key, "damaged or incompatible"),
    "model.json one label frequency": ("model.json", one_label_probability, "damaged"),
    "model.json missing": ("model.json", Path.unlink, "model.json is missing"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_model_is_one_line_exit_2_and_no_output(tmp_path, trained_run, case):
    name, damage, needle = DAMAGE[case]
    run = damaged_copy(trained_run, tmp_path)
    damage(run / name)
    result = sample_cli(tmp_path, f"run_dir={run}", "out=s.parquet", "n=10")
    assert_one_line_error(result, needle)
    assert not (tmp_path / "s.parquet").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged_run"]


class RunsCode:
    """Unpickling this calls os.system: a checkpoint that would execute code if trusted."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("container", ["raw pickle", "npz of objects"])
def test_weights_that_would_run_code_are_refused_without_running_it(
    tmp_path, trained_run, container
):
    run = damaged_copy(trained_run, tmp_path)
    marker = tmp_path / "MARKER"
    payload = np.array([RunsCode(marker)], dtype=object)
    if container == "raw pickle":
        (run / "model.npz").write_bytes(pickle.dumps(RunsCode(marker)))
    else:
        save_arrays(run / "model.npz", **{"body.0.weight": payload})

    result = sample_cli(tmp_path, f"run_dir={run}", "out=s.csv", "n=10")
    assert_one_line_error(result, "damaged or incompatible")
    assert not marker.exists()
    assert not (tmp_path / "s.csv").exists()

    # The control: read with pickles allowed, the same file does run its payload, so the
    # assertion above is not vacuous.
    if container == "raw pickle":
        np.load(run / "model.npz", allow_pickle=True)
    else:
        with np.load(run / "model.npz", allow_pickle=True) as arrays:
            arrays["body.0.weight"]
    assert marker.exists()


def test_the_file_does_not_depend_on_the_number_of_workers(tmp_path, trained_run):
    model = load_model(trained_run)
    # The shared run rakes and is tilted: these tests cover both.
    assert model.sampler.raking_pool() == 4 and model.sampler.tilting()
    for workers in (1, 3):
        write_samples(
            model, tmp_path / f"w{workers}.csv", n=700, seed=3, chunk_size=100, workers=workers
        )
    assert (tmp_path / "w1.csv").read_bytes() == (tmp_path / "w3.csv").read_bytes()


def test_sampling_settings_on_the_command_line_apply_to_this_file_only(tmp_path, trained_run):
    """``sample_pool=1 herding_pool=2 tilt_sampling=false`` (and the first and last alone) gives
    the file the model writes with those settings (not the run's file), and leaves the saved
    run as it was."""
    common = [f"run_dir={trained_run}", "n=600", "chunk_size=250", "seed=7"]
    saved = (trained_run / "model.json").read_bytes()
    run_file = tmp_path / "run.csv"
    assert sample_cli(tmp_path, *common, f"out={run_file}").returncode == 0
    everything = {"sample_pool": 1, "herding_pool": 2, "tilt_sampling": False}
    for settings in ({"sample_pool": 1}, {"tilt_sampling": False}, everything):
        words = [f"{name}={str(value).lower()}" for name, value in settings.items()]
        result = sample_cli(tmp_path, *common, "out=chosen.csv", *words, fresh=True)
        assert result.returncode == 0, result.stderr
        model = load_model(trained_run)
        model.model_config = replace(model.model_config, **settings)
        write_samples(model, tmp_path / "api.csv", n=600, seed=7, chunk_size=250)
        assert (tmp_path / "chosen.csv").read_bytes() == (tmp_path / "api.csv").read_bytes()
        assert (tmp_path / "chosen.csv").read_bytes() != run_file.read_bytes(), words
    assert (trained_run / "model.json").read_bytes() == saved


def test_the_file_decides_once_whether_herding_takes_pairs(tmp_path, trained_run, monkeypatch):
    """Null ``herding_pairs`` is decided from the file's n, not each chunk's: with pairs for
    calls of at most 500 rows, 600 rows in chunks of 300 herd columns alone (the API's calls of
    300 would take pairs), 400 rows take pairs; ``herding_pairs=false`` overrides it. (In
    process, to lower the limit; unraked, so that it herds.)"""
    monkeypatch.setattr(sampler, "HERDING_PAIR_ROWS", 500)
    model = load_model(trained_run)
    assert model.model_config.herding_pairs is None

    def api_file(n: int, pairs: bool) -> bytes:
        model.model_config = replace(model.model_config, sample_pool=1, herding_pairs=pairs)
        write_samples(model, tmp_path / "api.csv", n=n, seed=7, chunk_size=300)
        return (tmp_path / "api.csv").read_bytes()

    for n, override, pairs in ((600, None, False), (400, None, True), (400, False, False)):
        cli = SampleCliConfig(
            run_dir=str(trained_run),
            out=str(tmp_path / "cli.csv"),
            n=n,
            chunk_size=300,
            seed=7,
            sample_pool=1,
            herding_pairs=override,
        )
        sample_run(cli)
        written = (tmp_path / "cli.csv").read_bytes()
        assert written == api_file(n, pairs) and written != api_file(n, not pairs), (n, override)


def test_a_saved_run_with_a_large_pool_still_loads_and_samples(tmp_path, trained_run):
    """Runs saved by earlier versions may name any pool: loading must not refuse them."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    meta = json.loads((run / "model.json").read_text())
    meta["model"]["sample_pool"] = 100
    (run / "model.json").write_text(json.dumps(meta))
    result = sample_cli(tmp_path, f"run_dir={run}", "out=s.csv", "n=300")
    assert result.returncode == 0, result.stderr
    assert len(pd.read_csv(tmp_path / "s.csv")) == 300


# Modules that only fitting needs: torch and the networks it trains, Opacus (whose accountants
# pull in scipy.stats), our accountants and ledger, DP-SGD and the mechanisms; and what only a
# large sampling call needs: numba, whose compiled loops (rdpgan.loops) load scipy.linalg.
FIT_ONLY = (
    "torch",
    "rdpgan.models",
    "rdpgan.distributed",
    "opacus",
    "rdpgan.privacy.accountants",
    "rdpgan.privacy.ledger",
    "rdpgan.privacy.dp_sgd",
    "rdpgan.privacy.mechanisms",
    "rdpgan.fitting",
    "rdpgan.measure",
    "rdpgan.training",
    "scipy",
    "numba",
    "rdpgan.kernels",
)


def imported_by(tmp_path: Path, code: str) -> list[str]:
    """The modules a fresh interpreter has imported when ``code`` ends (or exits)."""
    listing = tmp_path / "modules.json"
    prologue = (
        "import atexit, json, sys\n"
        f"dump = lambda: open({str(listing)!r}, 'w').write(json.dumps(sorted(sys.modules)))\n"
        "atexit.register(dump)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(
        [sys.executable, "-c", prologue + code], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    return json.loads(listing.read_text())


def fit_only(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == f or m.startswith(f + ".") for f in FIT_ONLY)]


def test_sampling_a_saved_model_imports_neither_torch_nor_the_dp_machinery(tmp_path, trained_run):
    """Issues 29 and 54's light path: the CLI (1,000 rows) and ``DPCGAN.load(...).sample(...)``
    load and sample without torch, Opacus, the accountants, scipy or numba, and the CLI, which
    writes through Arrow, without pandas (counted, not timed); fitting does import them, so the
    listing can tell."""
    cli = (
        "import runpy\n"
        f"sys.argv = ['sample', 'run_dir={trained_run}', 'out={tmp_path / 's.csv'}', 'n=1000']\n"
        "runpy.run_module('rdpgan.sample', run_name='__main__')\n"
    )
    api = (
        "from rdpgan import DPCGAN\n"
        f"assert len(DPCGAN.load({str(trained_run)!r}).sample(50)) == 50\n"
    )
    by_cli = imported_by(tmp_path, cli)
    assert fit_only(by_cli) == [] and "pandas" not in by_cli
    assert fit_only(imported_by(tmp_path, api)) == []
    assert len(pd.read_csv(tmp_path / "s.csv")) == 1000
    fitted = imported_by(tmp_path, "from rdpgan import fitting\n")
    assert {"torch", "opacus", "rdpgan.privacy.accountants", "scipy.stats"} <= set(fitted)


def test_a_call_far_larger_than_the_table_matches_from_fewer_generated_rows_each(trained_run):
    """Issue 54: a million rows from a 26k-row table were raked from 32 generated rows each.
    A call's matching takes at most RAKING_POOL x the released rows beyond its own, down to
    LARGE_CALL_POOL a row raked and 1 a row herded; a file's chunks count as one call."""
    from rdpgan.sampler import CHOICE_ROWS, LARGE_CALL_POOL, RAKING_POOL

    model = load_model(trained_run)
    model.model_config = replace(model.model_config, sample_pool=None, herding_pool=None)
    sampler = model.sampler
    table = max(sampler.released_rows, CHOICE_ROWS)
    assert sampler.call_pool(RAKING_POOL, table) == RAKING_POOL
    assert sampler.call_pool(RAKING_POOL, 4 * table) == RAKING_POOL // 4
    assert sampler.call_pool(RAKING_POOL, 1000 * table) == LARGE_CALL_POOL
    assert sampler.call_pool(1, 1000 * table) == 1
    assert sampler.herding_pool(1000 * table) == 1


def test_a_saved_model_carries_its_tilts_and_samples_as_if_it_fitted_them(trained_run, tmp_path):
    """Issue 54: the tilt was fitted again by every command that loaded a model (most of a
    1,000-row call). model.json keeps it; the rows are those a fresh fit gives, and a tilt
    that does not fit the generator is refused as a damaged model."""
    meta = json.loads((trained_run / "model.json").read_text())
    assert meta["tilts"] is not None
    model = load_model(trained_run)
    assert model.tilts.fitted is not None
    saved = model.sample(300, seed=4)
    model.tilts.fitted = None  # fitted again, from the same stream
    pd.testing.assert_frame_equal(saved, model.sample(300, seed=4))
    damaged = tmp_path / "damaged"
    shutil.copytree(trained_run, damaged)
    meta["tilts"][0] = meta["tilts"][0][:-1]
    (damaged / "model.json").write_text(json.dumps(meta))
    with pytest.raises(UserInputError, match="damaged or incompatible"):
        load_model(damaged)
