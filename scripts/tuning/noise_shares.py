"""The noise on one released count of the marginals, as a share of the released rows.

    python scripts/tuning/noise_shares.py

That public share decides where sampling tilts (``TILT_NOISE_LIMIT``) and, with
``model.sample_pool`` null, where it rakes (``RAKING_NOISE_LIMIT``); the docs quote it for the
tables the tuning rounds and the grid ran on. Each row runs only the releases of a default
``DPCGAN.fit`` (one training step) at the default privacy settings: on Adult's validation
protocol (80% of its train split, as ``tune_adult.py`` fits, and that script's small tables
drawn from it) and on each data set's train split (as the grid fits). The release's noise is
fresh OS entropy, so the released row count, and with it the share, moves slightly from run
to run. Also whether each fit gave the adaptive pairs' share to the marginals (where it would
not rake: ``rdpgan.adaptive.moves_to_marginals``) and the numeric columns' resolution it
planned (``rdpgan.resolution``), on the grid's tables and the development
suite's (``RDPGAN_DATA_DIR`` must hold both), and the share with the split as configured
(``share_configured_split``: the adaptive share kept, as runs before 348a1a7 had it, and the
pairs kept wherever they link every column, however noisy, as runs before round 39's rule
of ``tuning_fidelity.csv`` had them; round 36's linking rule, which round 20 did not have,
still applies, which moves only Adult's 700-row cell; ``derive_tilt_limit.py`` reads it for
the tuning rounds made then). Writes
``results/noise_shares.csv``.
"""

from __future__ import annotations

import math
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from unittest import mock

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line
from data.download_data import DEV_TABLES

from rdpgan import adaptive, sampler
from rdpgan.cli import compose_run_config
from rdpgan.config import RunConfig
from rdpgan.data.loading import Table, load_split
from rdpgan.data.schema import Schema
from rdpgan.data.split import VALIDATION_KEY, split
from rdpgan.privacy.ledger import Release
from rdpgan.synthesizer import DPCGAN
from tuning.tune_adult import subsample

OUT = Path(__file__).resolve().parents[2] / "results" / "noise_shares.csv"
DEV_NAMES = [table.name for table in DEV_TABLES]
# δ where the default's 1e-5 is not below 1/n, as the grid runs the table (refresh_results.sh).
DELTAS = {"fertility": 1e-6}
# (protocol, data set, ε, rows, positives): rows None is the whole split.
SETTINGS = [
    *(("validation", "adult", eps, None, None) for eps in (8.0, 3.0, 2.0, 1.0)),
    *(("validation", "adult", 8.0, n, p) for n, p in ((5000, 320), (2000, 128), (700, 45))),
    *(
        ("grid", name, eps, None, None)
        for name in ("adult", "cervical", "creditcard")
        for eps in (8.0, 1.0)
    ),
    *(("devsuite", name, eps, None, None) for name in DEV_NAMES for eps in (8.0, 1.0)),
]


def releases(
    decision: Callable[[DPCGAN, Schema], bool],
    cfg: RunConfig,
    epsilon: float,
    table: Table,
    train_rows: pd.DataFrame,
) -> DPCGAN:
    """A default fit's releases (one training step), with ``decision`` as the fit's choice of
    whether the adaptive pairs' share moves to the marginals."""
    adaptive.moves_to_marginals = decision
    return DPCGAN(
        epsilon=epsilon,
        delta=cfg.delta,
        privacy=cfg.privacy,
        model=cfg.model,
        train=replace(cfg.train, steps=1, progress=False),
        device="cpu",
    ).fit(train_rows, table.target, table.schema, table.positive_label)


def main() -> None:
    commit, started = code_commit(), datetime.now(timezone.utc)
    rows = []
    # What each fit decided about the adaptive pairs' share (rdpgan.adaptive.moves_to_marginals,
    # planned before the marginals are released), recorded as the fit calls it; and the same
    # fit with the split as configured and its pairs however noisy (as every run before
    # 348a1a7, the tuning rounds that derive_tilt_limit.py reads among them, had it).
    moved: list[bool] = []
    decide = adaptive.moves_to_marginals

    def recorded(model: DPCGAN, features: Schema, pending: Sequence[Release] = ()) -> bool:
        moved.append(decide(model, features, pending))
        return moved[-1]

    def kept(model: DPCGAN, features: Schema, pending: Sequence[Release] = ()) -> bool:
        return False

    for protocol, name, epsilon, n, positives in SETTINGS:
        cfg = compose_run_config([f"dataset={name}", f"delta={DELTAS.get(name, 1e-5)}"])
        table, train_rows, _ = load_split(cfg.dataset)
        if protocol == "validation":
            train_rows, _ = split(train_rows, 0.2, VALIDATION_KEY)
            if n is not None:
                train_rows = subsample(train_rows, table, n, positives)
        model = releases(recorded, cfg, epsilon, table, train_rows)
        with mock.patch.object(sampler, "TILT_NOISE_LIMIT", math.inf):  # pairs however noisy
            configured = releases(kept, cfg, epsilon, table, train_rows)
        noise = model.marginal_noise
        model.model_config = replace(model.model_config, sample_pool=None)  # the null rule
        rows.append(
            {
                "protocol": protocol,
                "dataset": name,
                "epsilon": epsilon,
                "delta": cfg.delta,
                "rows": len(train_rows),
                "released_rows": model.released_rows,
                "marginal_noise": round(noise, 3),
                "share": float(f"{noise / model.released_rows:.3g}"),
                "tilted": model.sampler.tilting(),
                "raked_if_pool_null": model.sampler.raking_pool() > 1,
                "adaptive_share_to_marginals": moved[-1],
                # The numeric columns' resolution the fit planned (rdpgan.resolution).
                "numeric_bins": model.transformer.n_bins,
                "grid_limit": model.transformer.grid_limit,
                "share_configured_split": float(
                    f"{configured.marginal_noise / configured.released_rows:.3g}"
                ),
            }
        )
        print(rows[-1], flush=True)
    frame = pd.DataFrame(rows).assign(
        command=shlex.join(["python", "scripts/tuning/noise_shares.py", *sys.argv[1:]]),
        commit=commit,
        date=f"{started:%Y-%m-%d %H:%M} UTC",
        machine=machine_line(),
    )
    frame.to_csv(OUT, index=False)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
