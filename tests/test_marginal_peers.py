"""The benchmark's marginal-based peers (scripts/bench/marginal_peers.py): public discretisation in
and out, the (ε, δ) → zCDP conversion, and AIM / MST reproducing a small table's marginals at a
large ε. The peers need the optional ``bench`` extra (mbi); without it their tests are skipped, and
the benchmark must refuse the method in one line."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rdpgan.data.discretize import table_codes, table_sizes
from rdpgan.data.schema import Categorical, Continuous, Schema
from tests.conftest import optional_module

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))
from bench import marginal_peers as peers  # noqa: E402

SCHEMA = Schema(
    [
        Continuous("x", 0.0, 10.0),
        Categorical("a", ("lo", "mid", "hi")),
        Continuous("b", 0.0, 5.0, integer=True),
        Categorical("y", ("no", "yes")),
    ]
)


def small_table(rows: int = 400, seed: int = 0) -> pd.DataFrame:
    """x uniform; a is x's tercile-ish band (a function of x); y follows a (5% flipped); b is
    independent noise."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 10.0, rows)
    a = np.where(x < 3.0, "lo", np.where(x < 7.0, "mid", "hi"))
    y = np.where((a == "hi") ^ (rng.random(rows) < 0.05), "yes", "no")
    b = rng.integers(0, 6, rows)
    return SCHEMA.conform(pd.DataFrame({"x": x, "a": a, "b": b, "y": y}))


def tvd(real: pd.DataFrame, synthetic: pd.DataFrame, columns: tuple[int, ...]) -> float:
    """Total-variation distance of one marginal, on the peers' own codes."""
    (a, sizes), (b, _) = peers.encode(SCHEMA, real), peers.encode(SCHEMA, synthetic)

    def joint(codes: np.ndarray) -> np.ndarray:
        shape = tuple(sizes[c] for c in columns)
        flat = np.ravel_multi_index(tuple(codes[:, c] for c in columns), shape)
        return np.bincount(flat, minlength=math.prod(shape)) / len(codes)

    return 0.5 * float(np.abs(joint(a) - joint(b)).sum())


def test_codes_come_from_the_public_discretisation():
    frame = small_table(50)
    codes, sizes = peers.encode(SCHEMA, frame)
    assert peers.PEER_BINS == 32
    np.testing.assert_array_equal(codes, table_codes(SCHEMA, frame, 32))
    # Domain sizes from the schema alone: 32 bins for x, one code per integer of b.
    assert sizes == table_sizes(SCHEMA, 32) == [32, 3, 6, 2]
    assert peers.encode(SCHEMA, small_table(7, seed=3))[1] == sizes
    # Values past the declared bounds land in the edge bins (clipped), whatever the rows hold.
    outside = frame.head(2).copy()
    outside["x"] = [-5.0, 1e6]
    outside["b"] = [-3, 40]
    clipped = peers.encode(SCHEMA, outside)[0]
    assert clipped[:, 0].tolist() == [0, 31] and clipped[:, 2].tolist() == [0, 5]


def test_decoding_stays_within_each_bin():
    codes = np.array([[0, 0, 0, 0], [31, 2, 5, 1], [16, 1, 3, 0]] * 200)
    frame = peers.decode(SCHEMA, codes, np.random.default_rng(0))
    assert list(frame.columns) == SCHEMA.names
    width = 10.0 / 32
    x = frame["x"].to_numpy().reshape(-1, 3)
    for j, code in enumerate([0, 31, 16]):
        assert (x[:, j] >= code * width - 1e-9).all() and (x[:, j] <= (code + 1) * width).all()
        assert x[:, j].std() > width / 10  # spread within the bin, not its centre
    assert frame["a"].tolist()[:3] == ["lo", "hi", "mid"]
    assert frame["b"].tolist()[:3] == [0, 5, 3]
    np.testing.assert_array_equal(peers.encode(SCHEMA, frame)[0], codes)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 8.0])
def test_zcdp_conversion_is_valid_and_tight(epsilon):
    delta = 1e-5
    rho = peers.rho_from_dp(epsilon, delta)
    standard = peers.rho_standard(epsilon, delta)
    # The standard bound: ε = ρ + 2√(ρ log(1/δ)) exactly.
    assert standard + 2 * math.sqrt(standard * math.log(1 / delta)) == pytest.approx(epsilon)
    # Canonne–Kamath–Steinke is valid (δ met) and tighter than the standard conversion,
    assert peers.delta_of_zcdp(rho, epsilon) <= delta
    assert rho > standard
    # and tight: a slightly larger ρ no longer meets δ.
    assert peers.delta_of_zcdp(rho * 1.001, epsilon) > delta


@pytest.fixture(scope="module")
def released() -> dict:
    optional_module("peers", "mbi", "pip install mbi (Private-PGM)")
    frame = small_table()
    codes, sizes = peers.encode(SCHEMA, frame)
    out = {"real": frame}
    mst = peers.mst(codes, sizes, 50.0, 1e-5, np.random.default_rng(1), iters=300)
    aim = peers.aim(codes, sizes, 50.0, 1e-5, 6, np.random.default_rng(2), max_iters=300)
    for name, result in [("mst", mst), ("aim", aim)]:
        out[name] = (peers.decode(SCHEMA, result.codes, np.random.default_rng(3)), result)
    return out


@pytest.mark.parametrize("method", ["mst", "aim"])
def test_peer_reproduces_marginals_at_large_epsilon(released, method):
    real = released["real"]
    synthetic, result = released[method]
    assert list(synthetic.columns) == SCHEMA.names
    assert abs(len(synthetic) - len(real)) <= 20  # rows: the model's noisy total
    assert result.rho_spent == pytest.approx(result.rho, rel=1e-9)
    assert result.rho == pytest.approx(peers.rho_from_dp(50.0, 1e-5))
    one_way = [tvd(real, synthetic, (c,)) for c in range(4)]
    assert max(one_way) < 0.12, one_way
    # The strong dependencies survive: a is a function of x's band, y follows a.
    shuffled = real.assign(y=real["y"].sample(frac=1.0, random_state=0).to_numpy())
    assert tvd(real, shuffled, (1, 3)) > 0.3  # what losing the dependency would cost
    assert tvd(real, synthetic, (1, 3)) < 0.08
    assert tvd(real, synthetic, (0, 1)) < 0.2
    pairs = [tvd(real, synthetic, pair) for pair in combinations(range(4), 2)]
    assert np.mean(pairs) < 0.2, pairs


def test_model_marginals_match_brute_force():
    """The junction-tree marginals AIM and MST score candidates with, against the normalised
    product of the model's potentials over the whole (small) domain."""
    mbi = optional_module("peers", "mbi", "pip install mbi (Private-PGM)")
    codes, sizes = peers.encode(SCHEMA, small_table())
    rng = np.random.default_rng(0)
    measured = [(0,), (1,), (2,), (3,), (0, 1), (1, 2)]  # column 3: a separate component
    measurements = [
        mbi.LinearMeasurement(
            peers._counts(codes, sizes, cl) + rng.normal(0.0, 2.0, math.prod(sizes[c] for c in cl)),
            peers._clique(cl),
            stddev=2.0,
        )
        for cl in measured
    ]
    model = peers._fit(mbi, peers._domain(mbi, sizes), measurements, iters=200)
    log_joint = np.zeros(sizes)
    for clique in model.potentials.cliques:
        factor = model.potentials[clique]
        axes = [int(a[1:]) for a in factor.domain.attributes]
        shape = [sizes[c] if c in axes else 1 for c in range(4)]
        order = np.argsort(axes)
        log_joint = log_joint + np.transpose(np.asarray(factor.values), order).reshape(shape)
    joint = np.exp(log_joint - log_joint.max())
    joint *= float(model.total) / joint.sum()
    marginals = peers._ModelMarginals(mbi, model)
    for query in [(0,), (3,), (0, 1), (0, 2), (1, 3), (2, 3)]:
        others = tuple(c for c in range(4) if c not in query)
        expected = joint.sum(axis=others).ravel()
        np.testing.assert_allclose(marginals.counts(query), expected, atol=1e-3 * len(codes))


def test_aim_reports_its_rounds_and_refuses_too_few(released):
    _, result = released["aim"]
    assert result.rounds_run is not None and 1 <= result.rounds_run <= 6 - 4 + 1
    codes, sizes = peers.encode(SCHEMA, small_table(50))
    with pytest.raises(ValueError, match="rounds"):
        peers.aim(codes, sizes, 1.0, 1e-5, 3, np.random.default_rng(0))


def test_benchmark_refuses_a_peer_without_mbi_in_one_line(tmp_path):
    """A stand-in ``mbi`` that fails to import plays the missing package."""
    fake = tmp_path / "fake" / "mbi"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named mbi')\n")
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "bench" / "benchmark.py"),
            "table=cervical",
            "method=aim",
            "epsilon=8",
            "repeats=1",
            f"results_dir={tmp_path / 'results'}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(tmp_path / "fake"), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        },
    )
    assert result.returncode == 2, result.stderr[-2000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: method aim: the marginal peers need the mbi package: "
        "install the bench extra: pip install -e .[bench]"
    ], result.stderr[-2000:]
    assert not (tmp_path / "results").exists()
