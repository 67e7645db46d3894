"""The Python API: fit / sample / save / load, and the budget it spends."""

from __future__ import annotations

import copy
import json
import math
import pickle
import threading
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from threadpoolctl import threadpool_info

from rdpgan import (
    DPCGAN,
    adaptive,
    fitting,
    kernels,
    loops,
    measure,
    numpy_kernels,
    postprocess,
    sampler,
)
from rdpgan.config import ModelConfig, PrivacyConfig, TrainConfig
from rdpgan.data.schema import Schema
from rdpgan.errors import UserInputError
from rdpgan.frozen import FrozenGenerator
from rdpgan.privacy.ledger import SEEDED_NOTE, recompute_epsilon
from rdpgan.transform import TableTransformer

SCHEMA = [
    {"name": "x", "kind": "continuous", "lo": -5, "hi": 5},
    {"name": "n", "kind": "continuous", "lo": 0, "hi": 100, "integer": True},
    {"name": "c", "kind": "categorical", "levels": ["a", "b", "c"], "missing": True},
    {"name": "y", "kind": "categorical", "levels": [0, 1]},
]
SMALL = dict(
    model=ModelConfig(latent_dim=8, generator_hidden=[32], discriminator_hidden=[32]),
    train=TrainConfig(epochs=3, batch_size=64, progress=False),
)


def toy_table(n: int = 1200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    return pd.DataFrame(
        {
            "x": rng.normal(2 * y - 1, 1.0),
            "n": rng.integers(0, 100, n),
            "c": rng.choice(["a", "b", "c", None], n),
            "y": y,
        }
    )


def test_fit_sample_save_load_round_trip(tmp_path):
    privacy = PrivacyConfig(noise_seed=0)
    model = DPCGAN(epsilon=4.0, delta=1e-5, seed=3, device="cpu", privacy=privacy, **SMALL)
    model.fit(toy_table(), target="y", schema=SCHEMA, positive_label=1)
    sample = model.sample(500)
    assert list(sample.columns) == ["x", "n", "c", "y"]
    assert set(sample["c"].dropna()) <= {"a", "b", "c"} and set(sample["y"]) <= {0, 1}
    assert sample["x"].between(-5, 5).all() and sample["n"].between(0, 100).all()
    assert str(sample["n"].dtype) == "int64"

    ledger = model.ledger.to_dict()
    assert 0 < ledger["epsilon_spent"] <= 4.0
    assert not ledger["end_to_end"] and ledger["notes"] == [SEEDED_NOTE]  # a reproducible run
    assert math.isclose(recompute_epsilon(ledger), ledger["epsilon_spent"], rel_tol=1e-12)

    model.save(tmp_path / "m")
    again = DPCGAN.load(tmp_path / "m", device="cpu")
    pd.testing.assert_frame_equal(again.sample(300, seed=9), model.sample(300, seed=9))
    assert abs(len(model.sample()) - 1200) < 60  # default size: the released noisy count


def test_conditional_sampling_and_unknown_label():
    model = DPCGAN(epsilon=4.0, seed=0, device="cpu", **SMALL)
    model.fit(toy_table(), target="y", schema=SCHEMA)
    assert set(model.sample(200, label=1)["y"]) == {1}
    with pytest.raises(UserInputError):
        model.sample(10, label=7)
    with pytest.raises(UserInputError):
        model.sample(0)


def test_noise_multiplier_mode_trains_until_the_budget_stops_it():
    privacy = PrivacyConfig(noise_multiplier=2.0)
    model = DPCGAN(epsilon=1.0, seed=0, device="cpu", privacy=privacy, **SMALL)
    model.fit(toy_table(), target="y", schema=SCHEMA)
    ledger = model.ledger
    dp_sgd = ledger.releases[-1]
    assert dp_sgd.noise_multiplier == 2.0
    assert ledger.steps_left(dp_sgd) == 0  # it trained up to the limit ...
    assert ledger.epsilon() <= 1.0  # ... and not past it
    assert model.metrics["discriminator_steps"] == dp_sgd.steps


def test_the_same_seeds_give_the_same_synthetic_table():
    seeded = PrivacyConfig(noise_seed=11)
    first = DPCGAN(epsilon=2.0, seed=5, privacy=seeded, device="cpu", **SMALL)
    second = DPCGAN(epsilon=2.0, seed=5, privacy=seeded, device="cpu", **SMALL)
    first.fit(toy_table(), "y", SCHEMA)
    second.fit(toy_table(), "y", SCHEMA)
    pd.testing.assert_frame_equal(first.sample(400), second.sample(400))
    assert first.ledger.to_dict()["noise_source"] == "seeded"
    assert not first.ledger.end_to_end  # reproducible means the noise key is a number


def test_by_default_the_dp_noise_does_not_follow_from_the_seed():
    """Knowing `seed` (it is in run.json and model.json) must not give away the noise."""
    runs = [
        DPCGAN(epsilon=2.0, seed=5, device="cpu", **SMALL).fit(toy_table(), "y", SCHEMA)
        for _ in range(2)
    ]
    assert not np.array_equal(runs[0].label_probs, runs[1].label_probs)
    assert not np.array_equal(runs[0].marginals.by_class[0], runs[1].marginals.by_class[0])
    weights = [dict(run.generator.state_dict()) for run in runs]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert runs[0].ledger.to_dict()["noise_source"] == "os-entropy"
    assert runs[0].ledger.end_to_end and runs[0].ledger.notes == []


def test_the_noise_seed_alone_changes_the_model():
    """The training seed fixed, noise_seed decides the noise (label counts, profiles, DP-SGD)."""
    models = [
        DPCGAN(epsilon=2.0, seed=5, privacy=PrivacyConfig(noise_seed=s), device="cpu", **SMALL)
        for s in (1, 1, 2)
    ]
    for model in models:
        model.fit(toy_table(), "y", SCHEMA)
    same = models[0].sample(200, seed=0).equals(models[1].sample(200, seed=0))
    other = models[0].sample(200, seed=0).equals(models[2].sample(200, seed=0))
    assert same and not other


def test_unknown_column_and_bad_target_are_refused():
    frame = toy_table().assign(extra=1)
    with pytest.raises(UserInputError, match="extra"):
        DPCGAN(device="cpu", **SMALL).fit(frame, "y", SCHEMA)
    with pytest.raises(UserInputError, match="nope"):
        DPCGAN(device="cpu", **SMALL).fit(toy_table(), "nope", SCHEMA)
    one_level = [*SCHEMA[:-1], {**SCHEMA[-1], "levels": SCHEMA[-1]["levels"][:1]}]
    with pytest.raises(UserInputError, match="single class"):  # the schema's, public
        DPCGAN(device="cpu", **SMALL).fit(toy_table().assign(y=0), "y", one_level)
    # (and what suits ~1,200 released rows instead: at most a tenth of 1/n, a power of ten)
    with pytest.raises(UserInputError, match=r"1/n.*delta=1e-05 or less suits them"):
        DPCGAN(delta=0.01, device="cpu", **SMALL).fit(toy_table(), "y", SCHEMA)
    # A released target (a paid schema's, reused from its schema.yaml): δ is checked against
    # the released number of rows, the rows kept are not counted.
    released = [*SCHEMA[:-1], {**SCHEMA[-1], "missing": True, "unlisted_as_missing": True}]
    with pytest.raises(UserInputError, match="1/n"):
        DPCGAN(delta=0.01, device="cpu", **SMALL).fit(toy_table(), "y", released)


@pytest.mark.parametrize(
    ("scale", "delta", "suits"), [(2.0, 6e-4, "1e-05"), (20.0, 1e-4, "1e-06"), (0.5, 1e-3, None)]
)
def test_delta_is_judged_from_the_released_row_count_not_the_exact_one(
    monkeypatch, scale, delta, suits
):
    """1,200 rows; the released label counts scaled so that they and the exact count fall on
    opposite sides of 1/δ: the released count decides (so one row never does), and the δ the
    refusal names suits the released count (~24,000: 1e-06), not the exact one (1e-05)."""
    release = measure.label_counts
    monkeypatch.setattr(measure, "label_counts", lambda *args: scale * release(*args))
    model = DPCGAN(delta=delta, device="cpu", **SMALL)
    if suits:  # 1,200 < 1/δ (≈ 1,667; 10,000) < ~2,400 (~24,000) released
        with pytest.raises(UserInputError, match=f"1/n.*delta={suits} or less"):
            model.fit(toy_table(), "y", SCHEMA)
        assert [r.name for r in model.ledger.releases] == ["label_counts"]
    else:  # ~600 released < 1/δ = 1,000 < 1,200
        model.fit(toy_table(), "y", SCHEMA)
        assert model.ledger.to_dict()["epsilon_spent"] <= 8.0


def test_damaged_model_file_is_a_clear_error(tmp_path):
    model = DPCGAN(epsilon=2.0, device="cpu", **SMALL).fit(toy_table(), "y", SCHEMA)
    model.save(tmp_path)
    (tmp_path / "model.npz").write_bytes((tmp_path / "model.npz").read_bytes()[:100])
    with pytest.raises(UserInputError, match="damaged"):
        DPCGAN.load(tmp_path)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"privacy": PrivacyConfig(noise_seed=-1)}, "noise_seed"),
        ({"train": TrainConfig(betas=[0.5])}, "betas"),
        ({"train": TrainConfig(generator_lr=0.0)}, "generator_lr"),
        ({"privacy": PrivacyConfig(marginals_fraction=1.0)}, "marginals_fraction"),
        ({"model": ModelConfig(numeric_bins=0)}, "numeric_bins"),
        ({"model": ModelConfig(marginal_rows=0)}, "marginal_rows"),
        (
            {"privacy": PrivacyConfig(marginals_fraction=0.6, selection_fraction=0.4)},
            "below 1",
        ),
        ({"model": ModelConfig(sample_pool=0)}, "sample_pool"),
        ({"model": ModelConfig(sample_pool=524_289)}, "sample_pool must be between 1 and 524288"),
        ({"model": ModelConfig(sample_pool=1.5)}, "sample_pool must be a whole number"),
        ({"model": ModelConfig(sample_pool=True)}, "sample_pool must be a whole number"),
        ({"model": ModelConfig(herding_pool=0)}, "herding_pool must be between 1"),
        ({"model": ModelConfig(herding_pool=2.5)}, "herding_pool must be a whole number"),
        ({"model": ModelConfig(tilt_sampling="no")}, "tilt_sampling must be true, false or null"),
        ({"model": ModelConfig(tilt_sampling=1)}, "tilt_sampling must be true, false or null"),
        ({"model": ModelConfig(herding_pairs="y")}, "herding_pairs must be true, false or null"),
        ({"privacy": PrivacyConfig(accountant="magic")}, "unknown accountant"),
        ({"privacy": PrivacyConfig(noise_multiplier=0.0)}, "noise_multiplier"),
        ({"train": TrainConfig(batch_size=0)}, "batch_size"),
        ({"train": TrainConfig(n_critic=0)}, "n_critic"),
        ({"train": TrainConfig(max_sample_rate=1.5)}, "max_sample_rate"),
        ({"train": TrainConfig(max_steps=2.5)}, "max_steps must be a whole number"),
        ({"train": TrainConfig(steps=True)}, "steps must be a whole number"),
        ({"train": TrainConfig(generator_ema=1.0)}, "generator_ema"),  # frozen at the start
        ({"train": TrainConfig(generator_ema=-0.1)}, "generator_ema"),
        ({"train": TrainConfig(generator_ema=None)}, "generator_ema"),
        ({"train": TrainConfig(generator_ema=True)}, "generator_ema"),
        ({"train": TrainConfig(checkpoint_share=float("nan"))}, "checkpoint_share"),
        ({"train": TrainConfig(checkpoint_share=0.0)}, "checkpoint_share"),
        ({"train": TrainConfig(checkpoint_share=1.5)}, "checkpoint_share"),
        ({"train": TrainConfig(checkpoint_every=2.5)}, "checkpoint_every"),
        ({"train": TrainConfig(checkpoint_every=-5)}, "checkpoint_every"),
        ({"train": TrainConfig(threads=0)}, "train.threads"),
        ({"train": TrainConfig(threads=True)}, "train.threads"),
    ],
)
def test_settings_that_numpy_or_torch_would_reject_are_refused_up_front(settings, message):
    with pytest.raises(UserInputError, match=message):
        DPCGAN(**settings)


@pytest.mark.parametrize("threads", [None, 2])
def test_fit_trains_under_the_thread_policy_and_gives_the_callers_threads_back(
    threads, monkeypatch
):
    """The API trains as the command does (one torch thread unless ``train.threads`` says
    otherwise, so that a core is spare for the generator's half), and the caller's own thread
    count is back after the fit, even one that failed."""
    seen = []

    def record(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise RuntimeError("recorded")

    monkeypatch.setattr(fitting, "run_steps", record)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        model = DPCGAN(
            epsilon=2.0,
            device="cpu",
            model=SMALL["model"],
            train=replace(SMALL["train"], threads=threads),
        )
        with pytest.raises(RuntimeError, match="recorded"):
            model.fit(toy_table(), "y", SCHEMA)
        assert seen == [1 if threads is None else threads]
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_a_release_is_on_disk_before_anything_after_its_noise_can_fail(tmp_path, monkeypatch):
    """The marginals' noise is drawn, then post-processing fails: privacy.json must still
    charge for them (the file is written when a release is recorded, before its noise)."""

    def fail(*args):
        raise RuntimeError("after the noise")

    monkeypatch.setattr(measure, "conditional_distributions", fail)
    model = DPCGAN(epsilon=2.0, device="cpu", **SMALL)
    with pytest.raises(RuntimeError, match="after the noise"):
        model.fit(toy_table(), "y", SCHEMA, checkpoint_dir=tmp_path)
    names = [m["name"] for m in json.loads((tmp_path / "privacy.json").read_text())["mechanisms"]]
    assert names == ["label_counts", "numeric_densities", "marginals"]


def test_sampling_in_blocks_keeps_the_count_the_class_shares_and_the_seed(monkeypatch):
    """Raking works on blocks of output rows: every block must count, classes keep their
    released shares, the same seed gives the same table, and a fixed label holds throughout."""
    monkeypatch.setattr(sampler, "RAKING_ROWS", 1600)  # blocks of 400 rows at a pool of 4
    privacy = PrivacyConfig(noise_seed=1)
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=4)}  # (toy: too noisy)
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=privacy, **settings)
    model.fit(toy_table(), "y", SCHEMA)
    table = model.sample(1001, seed=5)
    assert len(table) == 1001
    shares = table["y"].value_counts(normalize=True).sort_index().to_numpy()
    np.testing.assert_allclose(shares, model.label_probs, atol=0.01)
    pd.testing.assert_frame_equal(table, model.sample(1001, seed=5))
    assert (model.sample(901, label=1, seed=2)["y"] == 1).all()


LOOPS = ("layer_norm", "draw_codes", "rescale_and_count", "lexicographic_order", "herd_picks")


@pytest.mark.parametrize(
    "matching, loop",
    [
        ({"sample_pool": 4}, "rescale_and_count"),
        ({"sample_pool": 1, "herding_pool": 4}, "herd_picks"),
    ],
    ids=["raked", "herded"],
)
@pytest.mark.parametrize("call", [2000, 2001])
def test_a_call_runs_the_loops_its_generated_rows_choose(monkeypatch, call, matching, loop):
    """Issue 54: numba's start is paid only by calls that repay it. Raked or herded from pools
    of 4, 500 rows generate 2,000: from a threshold of 2,000 on, every loop of the call is
    compiled; from 2,001, every one is numpy's. A chunk of a larger call (200 of 500, too few
    to herd on its own) runs the call's. The tilt is fitted once per model, in numpy (not the
    call's: a call's rows must not depend on the calls before it)."""
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **SMALL)
    model.fit(toy_table(), "y", SCHEMA)
    model.model_config = replace(model.model_config, tilt_sampling=True, **matching)
    assert model.sampler.class_tilts() is not None
    ran: list[tuple[str, str]] = []
    for module in (kernels, numpy_kernels):
        for name in LOOPS:
            original = getattr(module, name)

            def spy(*args, _ran=(module.__name__, name), _original=original, **kwargs):
                ran.append(_ran)
                return _original(*args, **kwargs)

            monkeypatch.setattr(module, name, spy)
    monkeypatch.setattr(loops, "COMPILED_FROM", call)
    chosen = kernels.__name__ if call <= 2000 else numpy_kernels.__name__
    model.sample(500, seed=1)
    assert (chosen, loop) in ran  # the pools were matched
    before = len(ran)
    model.sample_arrow(200, seed=1, call=500)
    assert len(ran) > before and {module for module, _ in ran} == {chosen}


def test_the_choice_measures_both_pools_side_by_side_as_one_after_the_other(monkeypatch):
    """On 2 workers, the choice's two samples run at once, a thread each (not the caller's),
    each on one BLAS thread under the sampling lock, the tilt fitted first by the caller; and
    their distances from the releases are those each gives measured on its own."""
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1.0)
    settings = {**SMALL, "model": replace(SMALL["model"], tilt_sampling=True)}
    model = DPCGAN(epsilon=8.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    pools = (sampler.RAKING_POOL, 1)
    alone = {pool: model.sampler.release_distance(pool, 2) for pool in pools}
    one_worker = {pool: model.sampler.release_distance(pool, 1) for pool in pools}
    model.tilts.clear()
    fitted_on, seen = [], {}
    class_tilts, release_distance = postprocess.class_tilts, sampler.Sampler.release_distance
    together = threading.Barrier(2, timeout=60)  # broken (an error) unless both run at once

    def fitting(*args):
        fitted_on.append(threading.get_ident())
        return class_tilts(*args)

    def recorded(self, pool, workers=1):
        blas = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
        seen[pool] = (threading.get_ident(), set(blas), sampler._BLAS_LIMIT.locked())
        together.wait()
        return release_distance(self, pool, workers)

    monkeypatch.setattr(postprocess, "class_tilts", fitting)
    monkeypatch.setattr(sampler.Sampler, "release_distance", recorded)
    result: dict = {}
    caller = threading.Thread(  # (a daemon: a deadlock fails the test, not the whole run)
        target=lambda: result.update(sampler.release_distances(model.sampler, pools, 2)),
        daemon=True,
    )
    caller.start()
    caller.join(timeout=120)
    assert result == alone and fitted_on == [caller.ident]
    assert {thread for thread, _, _ in seen.values()}.isdisjoint({caller.ident})
    assert len({thread for thread, _, _ in seen.values()}) == 2
    assert all(blas <= {1} and locked for _, blas, locked in seen.values())
    together = threading.Barrier(1)  # one worker: in turn, in the caller's thread
    seen.clear()
    assert sampler.release_distances(model.sampler, pools, 1) == one_worker
    assert {thread for thread, _, _ in seen.values()} == {threading.get_ident()}


def test_threads_generating_a_sample_do_not_change_its_rows(monkeypatch):
    """Each generator pass draws from a stream of its own: two threads give the rows one
    gives, and a pass's stream is not its neighbour's (fails if the passes shared one)."""
    monkeypatch.setattr(sampler, "SAMPLE_CHUNK", 64)  # many passes per class
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **SMALL)
    model.fit(toy_table(), "y", SCHEMA)
    one = model.sample(1000, seed=3)
    threads: set[int] = set()
    sample_codes = FrozenGenerator.sample_codes

    def recorded(self, *args):
        threads.add(threading.get_ident())
        if len(threads) < 2:  # long enough that a second worker takes a pass (and no longer)
            time.sleep(0.01)
        return sample_codes(self, *args)

    monkeypatch.setattr(FrozenGenerator, "sample_codes", recorded)
    pd.testing.assert_frame_equal(model.sample(1000, seed=3, workers=2), one)
    assert len(threads) == 2  # the passes did run on two threads
    pd.testing.assert_frame_equal(model.sample(1000, seed=3, workers=3), one)
    assert not model.sample(1000, seed=4, workers=2).equals(one)
    labels = np.zeros(128, dtype=np.int64)  # two passes of one class: different rows
    codes = model.sampler.generate(labels, np.random.default_rng(0))
    assert not np.array_equal(codes[:64], codes[64:])
    for workers in (0, 1.5, True):
        with pytest.raises(UserInputError, match="workers must be a positive integer"):
            model.sample(10, workers=workers)


def test_tilt_sampling_takes_python_and_numpy_booleans_and_null():
    for tilt in (True, False, None, np.True_):
        assert DPCGAN(model=ModelConfig(tilt_sampling=tilt)).model_config.tilt_sampling == tilt
        assert DPCGAN(model=ModelConfig(herding_pairs=tilt)).model_config.herding_pairs == tilt


def test_herding_keeps_a_pools_rows_in_blocks_and_a_pool_of_one_keeps_every_row(
    tmp_path, monkeypatch
):
    """Unraked, ``model.herding_pool`` rows are generated per row kept, at most HERDING_ROWS
    kept rows at a time in near-equal pools, from HERDING_MIN rows; 1 generates only the rows
    kept (rows drawn as before herding). A model.json saved before the setting keeps every
    row, as it sampled; a saved setting is kept."""
    monkeypatch.setattr(sampler, "HERDING_ROWS", 300)
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=1, herding_pool=3)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    generated = count_generated(monkeypatch)
    herded = model.sample(700, seed=2)  # near-equal pools: 234, 234 and 232 rows kept
    assert len(herded) == 700 and generated == [702, 702, 696]
    assert not herded.duplicated().any()
    generated.clear()  # fewer than HERDING_MIN rows: every generated row is kept
    assert len(model.sample(sampler.HERDING_MIN - 1, seed=2)) == sampler.HERDING_MIN - 1
    assert generated == [sampler.HERDING_MIN - 1]
    model.save(tmp_path)
    assert DPCGAN.load(tmp_path, device="cpu").sampler.herding_pool(700) == 3
    meta = json.loads((tmp_path / "model.json").read_text())
    del meta["model"]["herding_pool"]
    (tmp_path / "model.json").write_text(json.dumps(meta))
    assert DPCGAN.load(tmp_path, device="cpu").sampler.herding_pool(700) == 1
    model.model_config.herding_pool = 1
    generated.clear()
    assert len(model.sample(700, seed=2)) == 700 and generated == [700]
    model.model_config.herding_pool = None  # null: this 3-column table herds pairs too
    assert model.sampler.herding_pool(700) == sampler.HERDING_PAIRS_POOL
    assert model.sampler.herding_pool(sampler.HERDING_PAIR_ROWS + 1) == sampler.HERDING_POOL
    model.model_config.herding_pairs = False
    assert model.sampler.herding_pool(700) == sampler.HERDING_POOL
    del meta["model"]["herding_pairs"]  # saved before pairs: columns alone
    (tmp_path / "model.json").write_text(json.dumps(meta))
    assert DPCGAN.load(tmp_path, device="cpu").sampler.herding_pairs(700) is False


def test_herding_pairs_are_every_pair_of_columns(monkeypatch):
    """Herding follows every pair of feature columns: a pool's herder holds each pair's cells
    after the columns' (class, code) cells; null takes them on narrow tables only (and small
    calls: the other test)."""
    schema = Schema.from_specs(
        [
            {"name": "x", "kind": "continuous", "lo": 0, "hi": 1},
            {"name": "a", "kind": "categorical", "levels": ["p", "q"]},
            {"name": "n", "kind": "continuous", "lo": 0, "hi": 9, "integer": True},
            {"name": "b", "kind": "categorical", "levels": ["r", "s", "t"]},
            {"name": "y", "kind": "categorical", "levels": [0, 1]},
        ]
    )
    transformer = TableTransformer(schema, "y")
    assert sampler.herded_pairs(transformer) == [(i, j) for i in range(4) for j in range(i + 1, 4)]
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=1)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    assert model.sampler.herding_pairs(300)  # null: 3 columns, 300 rows
    monkeypatch.setattr(sampler, "HERDING_PAIR_COLUMNS", 2)
    assert not model.sampler.herding_pairs(300)
    model.model_config.herding_pairs = True
    herders = []
    herder = postprocess.Herder
    monkeypatch.setattr(postprocess, "Herder", lambda *a: herders.append(herder(*a)) or herders[-1])
    assert len(model.sample(300, seed=0)) == 300
    sizes = model.sampler.transformer.code_sizes
    pairs = [(sizes[0], sizes[1]), (sizes[0], sizes[2]), (sizes[1], sizes[2])]
    assert herders[0].shapes[3:] == pairs


def test_a_herding_pool_stays_within_its_cells_with_pairs(monkeypatch):
    """With pairs, a pool's tables (columns and pairs) hold at most HERDING_CELLS cells: a
    call's rows are herded in more, smaller pools, of at least HERDING_MIN rows each."""
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=1, herding_pairs=True)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    pool, tables = sampler.HERDING_PAIRS_POOL, 3 + 3  # three columns, three pairs
    generated = count_generated(monkeypatch)
    for cells, kept in ((tables * pool * 300, [300, 300]), (1, [200, 200, 200])):
        monkeypatch.setattr(sampler, "HERDING_CELLS", cells)
        generated.clear()
        assert len(model.sample(600, seed=0)) == 600
        assert generated == [rows * pool for rows in kept]


def test_null_herding_pairs_follow_the_calls_rows(monkeypatch):
    """Null: a call of at most HERDING_PAIR_ROWS rows herds pairs from HERDING_PAIRS_POOL, a
    larger one columns alone from HERDING_POOL."""
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=1)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    monkeypatch.setattr(sampler, "HERDING_PAIR_ROWS", 300)
    generated = count_generated(monkeypatch)
    for n, pool in ((300, sampler.HERDING_PAIRS_POOL), (301, sampler.HERDING_POOL)):
        generated.clear()
        assert len(model.sample(n, seed=0)) == n and generated == [n * pool]


def test_a_pool_up_to_the_rows_generated_at_once_is_accepted():
    for pool in (1, np.int64(8), sampler.RAKING_ROWS):
        assert DPCGAN(model=ModelConfig(sample_pool=pool)).model_config.sample_pool == pool


def test_the_rows_generated_at_once_are_bounded_whatever_the_pool(monkeypatch):
    """A pool of 8 rakes blocks of RAKING_ROWS // 8 output rows: never more than RAKING_ROWS
    generated rows at once, and every kept row still has its 8 candidates."""
    monkeypatch.setattr(sampler, "RAKING_ROWS", 1000)
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=8)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    generated = count_generated(monkeypatch)
    assert len(model.sample(1001, seed=5)) == 1001
    assert max(generated) <= 1000 and sum(generated) == 8 * 1001


def count_generated(monkeypatch) -> list[int]:
    """The rows of every call to Sampler.generate, in order (the calls still generate)."""
    generated: list[int] = []
    real_generate = sampler.Sampler.generate
    monkeypatch.setattr(
        sampler.Sampler,
        "generate",
        lambda self, labels, rng, workers, **out: (
            generated.append(len(labels)) or real_generate(self, labels, rng, workers, **out)
        ),
    )
    return generated


def test_null_settings_rake_and_tilt_only_where_the_marginals_are_precise(tmp_path, monkeypatch):
    """model.sample_pool null (what runs saved before the pool of 1 record) and
    model.tilt_sampling null follow the noise on one released count against the released row
    count (both public), each against its own limit, unless the setting names a choice; a
    saved model keeps the same choices."""
    model_settings = replace(SMALL["model"], sample_pool=None, tilt_sampling=None)
    settings = {**SMALL, "model": model_settings}
    # (Pairs released however noisy, so that the noise is the larger of two releases.)
    monkeypatch.setattr(sampler, "TILT_NOISE_LIMIT", math.inf)
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    released = [r for r in model.ledger.releases if r.name in ("marginals", "pair_marginals")]
    noise = max(r.noise_multiplier * math.sqrt(r.details["tables"]) for r in released)
    assert len(released) == 2 and model.marginal_noise == pytest.approx(noise)
    generated = count_generated(monkeypatch)
    share = noise / model.released_rows
    # Where sampling does not rake, it herds, here on pairs too (a narrow table, a small call):
    # from a pool of HERDING_PAIRS_POOL rows per kept row. Where it may rake, the self-check
    # chooses raking or not once, and a saved model keeps the choice.
    for scale, pool, tilted in ((1.01, sampler.RAKING_POOL, True), (0.99, 1, False)):
        monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", share * scale)
        monkeypatch.setattr(sampler, "TILT_NOISE_LIMIT", share * scale)
        assert model.sampler.raking_pool() == pool and model.sampler.tilting() == tilted
        assert (model.sampler.class_tilts() is not None) == tilted
        chosen = model.sampler.chosen_pool()
        assert chosen in {pool, 1}
        per_row = chosen if chosen > 1 else sampler.HERDING_PAIRS_POOL
        generated.clear()
        assert len(model.sample(300, seed=1)) == 300 and generated == [300 * per_row]
        model.save(tmp_path)
        loaded = DPCGAN.load(tmp_path, device="cpu")
        assert loaded.sampler.raking_pool() == pool and loaded.sampler.tilting() == tilted
        generated.clear()
        assert loaded.sampler.chosen_pool() == chosen and generated == []  # kept, not redone
    model.model_config.sample_pool, model.model_config.tilt_sampling = 3, True
    assert model.sampler.raking_pool() == 3 and model.sampler.tilting()
    model.model_config.tilt_sampling = False
    assert not model.sampler.tilting() and model.sampler.class_tilts() is None


def test_a_saved_run_from_before_the_tilt_samples_untilted_as_it_did(tmp_path):
    """model.json without ``tilt_sampling`` (runs saved before it) loads untilted: its rows
    are those the model draws with the tilt off; a run saved now keeps its tilt."""
    settings = {**SMALL, "model": replace(SMALL["model"], tilt_sampling=True)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    assert model.sampler.class_tilts() is not None
    tilted = model.sample(400, seed=2)
    model.save(tmp_path)
    pd.testing.assert_frame_equal(DPCGAN.load(tmp_path, device="cpu").sample(400, seed=2), tilted)
    meta = json.loads((tmp_path / "model.json").read_text())
    del meta["model"]["tilt_sampling"]
    (tmp_path / "model.json").write_text(json.dumps(meta))
    old = DPCGAN.load(tmp_path, device="cpu")
    assert old.model_config.tilt_sampling is False
    model.model_config.tilt_sampling = False
    untilted = model.sample(400, seed=2)
    pd.testing.assert_frame_equal(old.sample(400, seed=2), untilted)
    assert not untilted.equals(tilted)
    meta["model"]["tilt_sampling"] = "no"  # an edited record: one clear error
    (tmp_path / "model.json").write_text(json.dumps(meta))
    with pytest.raises(UserInputError, match="tilt_sampling must be true, false or null"):
        DPCGAN.load(tmp_path, device="cpu")


def test_each_class_is_tilted_toward_its_own_released_distributions(monkeypatch):
    """Exact marginals (a non-private run): each class's sampled codes of ``x`` (whose
    distribution differs by class) follow that class's release, with the noise variance of
    each class's own released count handed to the fit; the untilted rows do not."""
    # No raking (nor herding): it would match the released distributions whatever the tilt
    # does.
    tilted = replace(SMALL["model"], tilt_sampling=True, sample_pool=1, herding_pool=1)
    settings = {**SMALL, "model": tilted}
    model = DPCGAN(device="cpu", privacy=PrivacyConfig(name="none", accountant="none"), **settings)
    model.fit(toy_table(4000), "y", SCHEMA)
    assert model.marginal_noise == 0.0
    handed = []
    fit = postprocess.class_tilts
    monkeypatch.setattr(
        postprocess,
        "class_tilts",
        lambda g, r, variance, *a: handed.append(variance) or fit(g, r, variance, *a),
    )
    _, codes, labels = model.sampler.parts(60_000, None, 1)
    assert handed == [[0.0, 0.0]]
    released = model.marginals.by_class[0]  # x: the first feature column
    for label in (0, 1):
        rows = codes[labels == label, 0]
        shares = np.bincount(rows, minlength=released.shape[1]) / len(rows)
        assert 0.5 * np.abs(shares - released[label]).sum() < 0.03
        assert 0.5 * np.abs(shares - released[1 - label]).sum() > 0.3
    model.model_config.tilt_sampling = False
    _, untilted, labels = model.sampler.parts(60_000, None, 1)
    rows = untilted[labels == 1, 0]
    shares = np.bincount(rows, minlength=released.shape[1]) / len(rows)
    assert 0.5 * np.abs(shares - released[1]).sum() > 0.03


def test_the_tilt_noise_is_each_classs_own(monkeypatch):
    """The variance handed to the fit is (released noise / the class's released count)^2."""
    settings = {**SMALL, "model": replace(SMALL["model"], tilt_sampling=True)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    handed = []
    monkeypatch.setattr(
        postprocess, "class_tilts", lambda g, r, variance, *a: handed.append(variance) or []
    )
    model.sampler.class_tilts()
    counts = model.label_probs * model.released_rows
    np.testing.assert_allclose(handed[0], (model.marginal_noise / counts) ** 2)
    assert handed[0][0] != pytest.approx(handed[0][1])  # the classes differ in size


def test_fitting_again_refits_the_tilt_and_a_copy_samples_alike():
    """Training replaces the weights the cached tilt was fitted to; a pickled or deep-copied
    model (which cannot carry the lock, and must not carry the noise seed) fits its own tilt
    and draws the same rows."""
    settings = {**SMALL, "model": replace(SMALL["model"], tilt_sampling=True)}
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **settings)
    model.fit(toy_table(), "y", SCHEMA)
    first = model.sampler.class_tilts()
    copies = [pickle.loads(pickle.dumps(model, protocol)) for protocol in (0, 5)]
    for other in (*copies, copy.deepcopy(model), copy.copy(model)):
        assert other.privacy.noise_seed is None and other.tilts.fitted is None
        assert other.tilts is not model.tilts  # a refitted copy keeps its tilts to itself
        pd.testing.assert_frame_equal(other.sample(300, seed=4), model.sample(300, seed=4))
    # A model pickled before the sampler had a module of its own (its tilts in ``_tilts``,
    # the noise read from its ledger) samples as it did.
    state = model.__getstate__()
    del state["tilts"], state["marginal_noise"]
    old = DPCGAN.__new__(DPCGAN)
    old.__setstate__({**state, "_tilts": {}, "recorded_marginal_noise": 0.0})
    assert old.marginal_noise == model.marginal_noise > 0
    pd.testing.assert_frame_equal(old.sample(300, seed=4), model.sample(300, seed=4))
    assert model.privacy.noise_seed == 1  # (the original keeps it)
    model.fit(toy_table(seed=1), "y", SCHEMA)
    again = model.sampler.class_tilts()
    assert not np.array_equal(first[0][0], again[0][0])


def test_a_table_without_feature_columns_samples_its_labels():
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **SMALL)
    model.fit(toy_table()[["y"]], "y", SCHEMA[-1:])
    rows = model.sample(50, seed=1)
    assert list(rows.columns) == ["y"] and len(rows) == 50 and set(rows["y"]) <= {0, 1}


def test_a_run_saved_with_torch_weights_loads_and_samples_as_one_saved_now(tmp_path):
    """Format 4 (model.pt, a bf16_sampling setting) is still read, so runs and checkpoints
    paid for before format 5 stay usable: the same weights sample the same rows."""
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **SMALL)
    model.fit(toy_table(), "y", SCHEMA).save(tmp_path)
    now = DPCGAN.load(tmp_path).sample(300, seed=2)
    torch.save(model.generator.state_dict(), tmp_path / "model.pt")
    (tmp_path / "model.npz").unlink()
    meta = json.loads((tmp_path / "model.json").read_text())
    meta["format"], meta["model"]["bf16_sampling"] = 4, True
    (tmp_path / "model.json").write_text(json.dumps(meta))
    pd.testing.assert_frame_equal(DPCGAN.load(tmp_path).sample(300, seed=2), now)
    weights = (tmp_path / "model.pt").read_bytes()
    (tmp_path / "model.pt").write_bytes(b"\x00garbage" * 64)  # damaged: one clear error
    with pytest.raises(UserInputError, match="damaged"):
        DPCGAN.load(tmp_path)
    (tmp_path / "model.pt").write_bytes(weights)
    meta["format"] = 3  # (older formats are still refused)
    (tmp_path / "model.json").write_text(json.dumps(meta))
    with pytest.raises(UserInputError, match="format"):
        DPCGAN.load(tmp_path)


def test_a_model_pickled_before_numpy_sampling_samples_alike_and_fits_again():
    """Its state has a torch device and no frozen generator, its generator no layout, and its
    settings the dropped bf16_sampling."""
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **SMALL)
    model.fit(toy_table(), "y", SCHEMA)
    state = copy.deepcopy(model.__getstate__())
    state["device"] = torch.device(state.pop("device_name"))
    del state["frozen"]
    del vars(state["generator"])["layout"]
    vars(state["model_config"])["bf16_sampling"] = True
    old = DPCGAN.__new__(DPCGAN)
    old.__setstate__(state)
    pd.testing.assert_frame_equal(old.sample(300, seed=4), model.sample(300, seed=4))
    assert old.device.type == "cpu" and "bf16_sampling" not in vars(old.model_config)
    old.fit(toy_table(seed=1), "y", SCHEMA)


def test_a_negative_seed_is_one_clear_error_before_anything_is_spent():
    with pytest.raises(UserInputError, match="non-negative"):
        DPCGAN(seed=-1)
    model = DPCGAN(epsilon=4.0, device="cpu", privacy=PrivacyConfig(noise_seed=1), **SMALL)
    model.fit(toy_table(), "y", SCHEMA)
    with pytest.raises(UserInputError, match="non-negative"):
        model.sample(10, seed=-1)


def test_resume_refuses_a_bad_noise_seed_in_one_line(tmp_path):
    train = TrainConfig(steps=2, progress=False)
    model = DPCGAN(epsilon=2.0, device="cpu", model=SMALL["model"], train=train)
    model.fit(toy_table(), "y", SCHEMA, checkpoint_dir=tmp_path)
    with pytest.raises(UserInputError, match="noise_seed"):
        DPCGAN.resume(tmp_path, toy_table(), device="cpu", noise_seed=-1)


def test_device_auto_uses_cpu_without_a_gpu():
    model = DPCGAN(device="auto")
    assert model.device.type == ("cuda" if torch.cuda.is_available() else "cpu")


def test_small_table_caps_the_sampling_rate():
    train = TrainConfig(epochs=2, batch_size=500, max_sample_rate=0.1, progress=False)
    privacy = PrivacyConfig(noise_seed=0)  # the rate follows the noisy row count
    model = DPCGAN(epsilon=4.0, device="cpu", model=SMALL["model"], train=train, privacy=privacy)
    model.fit(toy_table(300), "y", SCHEMA)
    assert model.metrics["sample_rate"] == pytest.approx(0.1)
    assert model.metrics["expected_batch_size"] == pytest.approx(30, abs=3)
    assert model.metrics["discriminator_steps"] == 20  # 2 epochs at rate 0.1


@pytest.mark.parametrize("noise_multiplier", [None, 1.0])
def test_a_large_table_trains_for_max_steps_not_for_its_epochs(noise_multiplier):
    """Epochs on a large table would ask for ever more steps; max_steps caps them (with a
    calibrated sigma, and with a given one that would otherwise run until epsilon is spent)."""
    train = TrainConfig(epochs=50, batch_size=40, max_steps=7, progress=False)
    privacy = PrivacyConfig(noise_seed=0, noise_multiplier=noise_multiplier)
    model = DPCGAN(epsilon=4.0, device="cpu", model=SMALL["model"], train=train, privacy=privacy)
    model.fit(toy_table(1200), "y", SCHEMA)  # 50 epochs: ~1,500 steps
    assert model.metrics["discriminator_steps"] == 7
    assert model.ledger.releases[-1].steps == 7


@pytest.mark.parametrize(
    ("batch_size", "setting", "simultaneous"),
    [(40, None, True), (200, None, False), (200, True, True), (40, False, False)],
)
def test_simultaneous_steps_where_the_expected_batch_reaches_the_batch_size(
    batch_size, setting, simultaneous
):
    """Null: G scores its fakes with D's snapshot only on a table large enough for a full
    batch (a 1,200-row table's batch at rate 0.1 is ~120 rows); true or false as set."""
    train = TrainConfig(steps=3, batch_size=batch_size, progress=False, simultaneous_steps=setting)
    privacy = PrivacyConfig(noise_seed=0)
    model = DPCGAN(epsilon=4.0, device="cpu", model=SMALL["model"], train=train, privacy=privacy)
    model.fit(toy_table(1200), "y", SCHEMA)
    assert model.metrics["simultaneous_steps"] is simultaneous
    assert model.metrics["discriminator_steps"] == 3


def test_the_snapshot_draws_nothing_from_the_public_stream(monkeypatch):
    """Training starts from the same public random state with or without D's snapshot: a
    resumed run, which restores that state from its checkpoint, then continues it as saved."""

    class Started(Exception):
        pass

    states = {}

    def capture(trainer, simultaneous):
        assert (trainer.critic_snapshot is not None) is simultaneous
        states[simultaneous] = torch.get_rng_state()
        raise Started

    privacy = PrivacyConfig(noise_seed=0)  # the same releases, so the same networks' shapes
    for simultaneous in (False, True):
        monkeypatch.setattr(
            fitting, "run_steps", lambda trainer, *_, s=simultaneous: capture(trainer, s)
        )
        train = TrainConfig(steps=3, batch_size=40, progress=False, simultaneous_steps=simultaneous)
        model = DPCGAN(4.0, privacy=privacy, model=SMALL["model"], train=train, device="cpu")
        with pytest.raises(Started):
            model.fit(toy_table(1200), "y", SCHEMA)
    assert torch.equal(states[False], states[True])


def test_a_table_whose_expected_batch_is_one_row_still_trains():
    """CI once drew a noisy row count of ~12 for a 30-row table: 10% of it rounds to a one-row
    expected batch. Training must still run (G's own steps use at least MIN_FAKE_BATCH fakes)."""
    train = TrainConfig(steps=6, batch_size=500, max_sample_rate=0.1, progress=False)
    privacy = PrivacyConfig(noise_seed=0)
    model = DPCGAN(epsilon=4.0, device="cpu", model=SMALL["model"], train=train, privacy=privacy)
    model.fit(toy_table(8), "y", SCHEMA)
    assert model.metrics["expected_batch_size"] == 1
    assert model.metrics["discriminator_steps"] == 6
    assert len(model.sample(20)) == 20


def test_n_critic_discriminator_steps_per_generator_step(monkeypatch):
    from rdpgan.training import CGANTrainer

    calls = {"d": 0, "g": 0}
    d_step, g_step = CGANTrainer.discriminator_step, CGANTrainer.generator_step

    def count_d(self):
        calls["d"] += 1
        return d_step(self)

    def count_g(self):
        calls["g"] += 1
        return g_step(self)

    monkeypatch.setattr(CGANTrainer, "discriminator_step", count_d)
    monkeypatch.setattr(CGANTrainer, "generator_step", count_g)
    train = TrainConfig(steps=12, batch_size=64, n_critic=3, progress=False)
    model = DPCGAN(epsilon=4.0, device="cpu", model=SMALL["model"], train=train)
    model.fit(toy_table(), "y", SCHEMA)
    assert calls == {"d": 12, "g": 4}
    assert model.ledger.releases[-1].steps == 12  # one charge per D step, none per G step


@pytest.mark.parametrize("pool", [2, 16])
def test_pairs_are_chosen_against_the_sampler_raked_at_a_pool_of_at_most_choice_pool(
    pool, monkeypatch
):
    """Sampling's larger pool is not what the choice compares with: its rows are generated at
    a pool of min(sampling's, CHOICE_POOL)."""
    monkeypatch.setattr(measure, "EXTRA_PAIRS", 0.0)
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1.0)
    monkeypatch.setattr(adaptive, "GENERATED_ROWS", 300)
    generated = count_generated(monkeypatch)
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=pool)}
    model = DPCGAN(epsilon=30.0, device="cpu", **settings)
    model.fit(toy_table(), "y", SCHEMA)
    assert model.ledger.releases[-2].details["drawn"]
    assert generated == [300 * min(pool, adaptive.CHOICE_POOL)]
    generated.clear()
    model.sample(10, seed=1)
    assert generated == [10 * pool]
    with pytest.raises(UserInputError, match="raking pool"):
        model.sampler.parts(10, None, 1, pool=0)


def test_a_small_table_is_compared_with_a_few_generated_rows_per_released_row(monkeypatch):
    """Below GENERATED_ROWS, the choice of pairs generates GENERATED_PER_ROW rows per
    released row (each from a pool of CHOICE_POOL): a small table's counts are noisier.
    (The cap: the test above.)"""
    monkeypatch.setattr(measure, "EXTRA_PAIRS", 0.0)
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1.0)
    generated = count_generated(monkeypatch)
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=16)}
    model = DPCGAN(epsilon=30.0, device="cpu", **settings)
    model.fit(toy_table(), "y", SCHEMA)
    assert model.ledger.releases[-2].details["drawn"]
    rows = adaptive.GENERATED_PER_ROW * model.released_rows
    assert model.released_rows > 1_000 and rows < adaptive.GENERATED_ROWS
    assert generated[0] == rows * adaptive.CHOICE_POOL


@pytest.mark.parametrize(
    "epsilon, rakes, moved",
    [(30.0, True, False), (30.0, False, True), (0.5, False, False)],
)
def test_the_adaptive_share_goes_to_the_marginals_where_sampling_would_not_rake(
    epsilon, rakes, moved, monkeypatch
):
    """Where the marginals' planned noise is too large to rake toward, no pair is chosen after
    training: their share is spent on the marginals instead (one sigma for the per-class
    tables and the pairs, calibrated to half of marginals + adaptive) and nothing is
    reserved, unless the larger marginals would leave DP-SGD less than the settings do (at
    epsilon 0.5 the label counts take much of the budget: the split stays as configured and
    the run still fits). Every run ends within its epsilon."""
    monkeypatch.setattr(measure, "EXTRA_PAIRS", 0.0)  # a spanning tree: one of 3 pairs open
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1.0 if rakes else 1e-9)
    privacy = PrivacyConfig(noise_seed=0)
    model = DPCGAN(epsilon=epsilon, device="cpu", privacy=privacy, **SMALL)
    model.fit(toy_table(), "y", SCHEMA)
    by_name = {r.name: r for r in model.ledger.releases}
    assert ("adaptive_pair_marginals" in by_name) == rakes
    fraction = privacy.marginals_fraction + (privacy.adaptive_fraction if moved else 0)
    share = fraction / (2 if "pair_marginals" in by_name else 1) * epsilon
    sigma = model.ledger.calibrate(1.0, 1, share, alone=True)
    assert by_name["marginals"].noise_multiplier == pytest.approx(sigma, rel=1e-9)
    assert model.ledger.to_dict()["epsilon_spent"] <= epsilon
    assert model.sampler.raking_pool() == (sampler.RAKING_POOL if rakes else 1)


def test_pairs_that_link_only_at_the_moved_share_leave_it_to_the_per_class_tables(monkeypatch):
    """Pairs affordable only at the moved share (0.75 of the budget, half per release), not at
    the configured 0.5: the adaptive share moves to the marginals and the per-class tables take
    all 0.75, no pair released (round 36's rule, decided at the configured share both where
    the fit plans its split and where it releases)."""
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1e-9)  # never rakes: the share moves
    candidates = measure.pair_candidates

    def affordable_above(sizes, total, ledger, epsilon):
        if epsilon < 0.3125 * ledger.gaussian_budget():  # between 0.25 and 0.375 of it
            return []
        return candidates(sizes, total, ledger, epsilon)

    monkeypatch.setattr(measure, "pair_candidates", affordable_above)
    privacy = PrivacyConfig(noise_seed=0)
    model = DPCGAN(epsilon=30.0, device="cpu", privacy=privacy, **SMALL)
    model.fit(toy_table(), "y", SCHEMA)
    by_name = {r.name: r for r in model.ledger.releases}
    assert not {"pair_selection", "pair_marginals"} & set(by_name)
    moved = (privacy.marginals_fraction + privacy.adaptive_fraction) * 30.0
    sigma = model.ledger.calibrate(1.0, 1, moved, alone=True)
    assert by_name["marginals"].noise_multiplier == pytest.approx(sigma, rel=1e-9)
    assert model.ledger.to_dict()["epsilon_spent"] <= 30.0


@pytest.mark.parametrize("limit, paired", [(1.0, True), (0.0, False)])
def test_a_fit_releases_pairs_only_where_the_tilts_noise_limit_allows(limit, paired, monkeypatch):
    """The fit plans its split (rdpgan.adaptive) and releases its marginals with the tilt's
    noise limit: above every plan's noise the pairs are released, below it none, and the
    adaptive share moved to the marginals (sampling would not rake) goes to the per-class
    tables alone."""
    monkeypatch.setattr(sampler, "TILT_NOISE_LIMIT", limit)
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1e-9)  # never rakes: the share moves
    planned = measure.planned_marginal_releases
    limits = []

    def spy(*args, **kwargs):
        limits.append(args[6] if len(args) > 6 else kwargs.get("noise_limit"))
        return planned(*args, **kwargs)

    monkeypatch.setattr(measure, "planned_marginal_releases", spy)
    model = DPCGAN(epsilon=30.0, device="cpu", privacy=PrivacyConfig(noise_seed=0), **SMALL)
    model.fit(toy_table(), "y", SCHEMA)
    by_name = {r.name: r for r in model.ledger.releases}
    assert ("pair_marginals" in by_name) == paired
    assert limits and all(value == limit for value in limits)  # the plan used it too
    moved = (model.privacy.marginals_fraction + model.privacy.adaptive_fraction) * 30.0
    sigma = model.ledger.calibrate(1.0, 1, moved / (2 if paired else 1), alone=True)
    assert by_name["marginals"].noise_multiplier == pytest.approx(sigma, rel=1e-9)


@pytest.mark.parametrize("pool", [1, 4])
def test_pairs_chosen_after_training_are_reserved_before_dp_sgd_and_raked_toward(pool, monkeypatch):
    """Reserved (before DP-SGD, which is calibrated to the rest) only where sampling rakes,
    drawn once after training, and added to the pairs the raker matches."""
    monkeypatch.setattr(measure, "EXTRA_PAIRS", 0.0)  # a spanning tree: one of 3 pairs open
    monkeypatch.setattr(sampler, "RAKING_NOISE_LIMIT", 1.0)  # precise enough to rake
    settings = {**SMALL, "model": replace(SMALL["model"], sample_pool=pool)}
    model = DPCGAN(epsilon=30.0, device="cpu", **settings)  # every pair affordable
    model.fit(toy_table(), "y", SCHEMA)
    names = [r.name for r in model.ledger.releases]
    reserved = ["adaptive_pair_selection", "adaptive_pair_marginals"]
    if pool == 1:
        assert not set(reserved) & set(names)
        return
    assert names[-3:] == [*reserved, "dp_sgd_discriminator"]
    selection, tables = model.ledger.releases[-3:-1]
    assert selection.details["drawn"] and tables.details["drawn"]
    assert selection.details["rounds"] == 1 and len(model.marginals.pairs) == 3
    assert len(model.marginals.joint) == len(model.marginals.pairs)
    spent = model.ledger.to_dict()
    assert 29.9 <= spent["epsilon_spent"] <= 30.0  # DP-SGD calibrated to what they left
    assert math.isclose(recompute_epsilon(spent), spent["epsilon_spent"], rel_tol=1e-9)
    pure = [r.epsilon for r in model.ledger.releases if r.kind == "pure"]
    assert selection.epsilon > 0 and model.ledger.basic_epsilon() == pytest.approx(sum(pure))


def test_fit_without_a_schema_releases_one_and_pays_for_it(data_dir):
    """``DPCGAN(epsilon=4).fit(df, target=...)``, as a data scientist writes it: the schema is
    released with DP from the frame's cells (read one by one, as a CSV's), its cost is in the
    ledger, and the rows it samples hold the released columns; integers come back whole."""
    from tests.test_train_cli import ADULT_COLUMNS

    # What is checked is the releases, the ledger and the decoding: ten steps of training do.
    quick = {**SMALL, "train": TrainConfig(steps=10, batch_size=64, progress=False)}
    df = pd.read_csv(
        data_dir / "adult" / "adult.data",
        header=None,
        names=ADULT_COLUMNS,
        skipinitialspace=True,
        nrows=6000,
    )
    model = DPCGAN(epsilon=4.0, device="cpu", **quick).fit(df, target="income")
    names = [r.name for r in model.ledger.releases]
    assert names[:2] == ["schema", "schema_new_values"] and "dp_sgd_discriminator" in names
    assert model.ledger.end_to_end and model.ledger.epsilon() <= 4.0
    rows = model.sample(200, seed=1)
    assert list(rows.columns) == [c for c in ADULT_COLUMNS if c in rows.columns]
    assert set(rows["income"]) <= {">50K", "<=50K"}
    age = rows["age"].dropna()
    assert (age == age.round()).all()
    # Without a target, the released schema chooses the column to condition on.
    # Without occupation too: it is the more even, and passed over only for its 13 released
    # classes (one over the cap), of which Protective-serv's 115 rows clear partition
    # selection's threshold by 2 noise stds; when it missed (2% of draws) occupation won.
    untargeted = DPCGAN(epsilon=4.0, device="cpu", **quick).fit(
        df.drop(columns=["income", "occupation"])
    )
    assert untargeted.transformer.target == "sex"  # the most even released categorical left
    assert untargeted.ledger.releases[0].name == "schema"
    # A declared schema chooses from itself alone: its first categorical never missing.
    declared = DPCGAN(epsilon=8.0, device="cpu", **quick).fit(toy_table(), schema=SCHEMA)
    assert declared.transformer.target == "y"  # ("c" may be missing)


def test_conditional_sampling_returns_exactly_the_rows_asked_for():
    """Conditions on any columns: a level, an inclusive numeric range, the target (by the
    generator's own conditioning); exactly n rows, all meeting them, the same for the same
    seed; a condition rows meet too rarely, or one the table cannot hold, is one clear error."""
    model = DPCGAN(epsilon=8.0, device="cpu", **SMALL).fit(toy_table(), "y", SCHEMA)
    women = model.sample(400, seed=1, conditions={"c": "b"})
    assert len(women) == 400 and set(women["c"]) == {"b"}
    ranged = model.sample(300, seed=1, conditions={"n": (30, 40), "y": 1})
    assert len(ranged) == 300 and ranged["n"].between(30, 40).all()
    assert set(ranged["y"]) == {1}
    again = model.sample(300, seed=1, conditions={"n": (30, 40), "y": "1"})
    pd.testing.assert_frame_equal(ranged, again)
    with pytest.raises(UserInputError, match=r"hold for .*% of generated rows"):
        model.sample(50, seed=1, conditions={"x": (4.999, 5.0), "n": (100, 100)})
    for conditions, message in (
        ({"nope": 1}, "no such column"),
        ({"c": "z"}, "not one of its levels"),
        ({"n": (40, 30)}, "is empty"),
        ({"n": "many"}, "holds no numbers"),
        ({"n": [1, 2, 3]}, "a number or a"),
    ):
        with pytest.raises(UserInputError, match=message):
            model.sample(10, conditions=conditions)
