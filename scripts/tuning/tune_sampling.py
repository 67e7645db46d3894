"""Sampling settings compared on one trained generator, on a validation split of a *train* split.

    python scripts/tuning/tune_sampling.py --table acs12 --epsilon 8 --seeds 0 1 [--round 34]
    python scripts/tuning/tune_sampling.py --table adult --rows 700 --positives 45 --seeds 0 1
    python scripts/tuning/tune_sampling.py --summary

Sampling is post-processing: settings that change only how rows are drawn from a trained
generator (``model.herding_pool``, ``model.herding_pairs``) can be compared on the *same*
generator, which takes the training noise out of the comparison. Per table, ε and seed, one
default model trains on 80% of the table's train split (the rows
:func:`rdpgan.data.split.split` keeps under ``VALIDATION_KEY``; for Adult, optionally a
subsample of them of a small table's size, as in ``tune_adult.py``), then every candidate
samples as many rows as it trained on, from the same sampling seed, and is scored as the
fidelity issue scores: 1-, 2- and 3-way-with-target TVD at 20 quantile bins of the rows it
trained on (and at the public bins), repeated rows, and the mean AUROC of the paper's 8
classifiers on the other 20%. The test split is never read. Tables: Adult
and the development suite only (never cervical or credit card). Rows are appended to
``results/tuning_sampling.csv``; a table/size/seed/ε the round has finished is skipped.
"""

from __future__ import annotations

import argparse
import itertools
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line
from bench.results_rows import append_rows

from rdpgan import postprocess
from rdpgan import sampler as sampler_module
from rdpgan.data.schema import Continuous
from tuning.tune_adult import subsample
from tuning.tune_fidelity import (
    SCORES,
    TABLES,
    fitted,
    provenance,
    scores_of,
    validation_run,
)

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "results" / "tuning_sampling.csv"
# A candidate's setting that is not the model's: the pairs herding follows, in place of
# rdpgan.sampler.herded_pairs while the candidate samples ("all": every pair of feature
# columns, what the sampler takes since round 35; "numeric": the pairs with a numeric column,
# what it took in round 34).
PAIRS = "herded_pairs"
# A candidate's raker that is not the package's (round 56), in place of postprocess.Raker.
RAKER = "raker"


def numeric_pairs(transformer: Any) -> list[tuple[int, int]]:
    numeric = [isinstance(c, Continuous) for c in transformer.features.columns]
    every = itertools.combinations(range(len(numeric)), 2)
    return [(i, j) for i, j in every if numeric[i] or numeric[j]]


PAIR_RULES = {
    "all": lambda transformer: list(itertools.combinations(range(len(transformer.code_sizes)), 2)),
    "numeric": numeric_pairs,
}
# Each round's candidates (model settings), all sampled from the same trained generator.
ROUNDS: dict[int, dict[str, dict[str, object]]] = {
    # Generated rows per kept row where sampling does not rake (1: every row, as before),
    # herding each column within each class.
    33: {
        f"herding{pool}": {"herding_pool": pool, "herding_pairs": False} for pool in (1, 4, 8, 16)
    },
    # Herding on the pairs of columns with a numeric one too (rdpgan.sampler.herded_pairs),
    # from pools of 16 and 32, against round 33's choice (columns alone, 16).
    34: {
        "r34_columns16": {"herding_pool": 16, "herding_pairs": False},
        "r34_pairs16": {"herding_pool": 16, "herding_pairs": True, PAIRS: "numeric"},
        "r34_pairs32": {"herding_pool": 32, "herding_pairs": True, PAIRS: "numeric"},
    },
    # The pairs with a numeric column (round 34's choice) against every pair, at pools of 32
    # and 64.
    35: {
        "r35_numeric32": {"herding_pool": 32, "herding_pairs": True, PAIRS: "numeric"},
        "r35_numeric64": {"herding_pool": 64, "herding_pairs": True, PAIRS: "numeric"},
        "r35_all32": {"herding_pool": 32, "herding_pairs": True, PAIRS: "all"},
        "r35_all64": {"herding_pool": 64, "herding_pairs": True, PAIRS: "all"},
    },
    # Issue 52: the default (raking or not, chosen per model by the self-check; raking with
    # the per-class columns settled last) against no raking (tilt and herding), on every table.
    52: {
        "r52_default": {},
        "r52_unraked": {"sample_pool": 1},
    },
    # Issue 52, where the released marginals are too noisy for the default to rake
    # (results/fidelity_resolution/self_check.md: rows up to 25 noise stds from a released
    # pair, Adult's marital status × relationship at ε = 1): raking at pools of 4 and 32
    # against the default and no raking. 1 seed each, quantile 1-/2-way TVD, default (which
    # did not rake on any of these but TV16 at ε = 8) / pool 4 / pool 32: Adult ε = 1 0.0135/
    # 0.064 / 0.016/0.072 / 0.016/0.068 (AUROC 0.848 / 0.840 / 0.841); nlswork, nasscds and
    # credit_data at ε = 1, credit_data and acs12 at ε = 8 worse raked on both; gss_wages ε = 1
    # 0.0099/0.078 / 0.0084/0.076 / 0.0094/0.073, TV16 ε = 1 0.033/0.115 / 0.032/0.135 /
    # 0.032/0.114. Raking toward releases this noisy costs more than the cells it mends: the
    # default stays (raking only where the marginals are precise, RAKING_NOISE_LIMIT).
    55: {
        "r55_default": {},
        "r55_unraked": {"sample_pool": 1},
        "r55_raked4": {"sample_pool": 4},
        "r55_raked32": {"sample_pool": 32},
    },
    # Round 55's tables: raking toward a box of 3 noise stds around each release (BoxRaker)
    # at pools of 4 and 16, against the default. 1 seed each, quantile 1-/2-way TVD, default /
    # box 4 / box 16: Adult ε = 1 0.0151/0.066 / 0.0162/0.067 / 0.0162/0.067; Adult ε = 8
    # (raked at 32 by default) 0.0064/0.037 / 0.0078/0.042 / 0.0076/0.042; acs12 ε = 8 0.027/
    # 0.081 / 0.040/0.098 / 0.033/0.089; nasscds ε = 1, credit_data ε = 8 worse on both; TV16,
    # nlswork ε = 1 level or worse; gss_wages ε = 1 2-way 0.075 / 0.074 / 0.073, credit_data
    # ε = 1 1-way 0.097 / 0.095 / 0.095 (2-way worse). The cells the rows miss by many stds
    # (structural zeros, results/fidelity_resolution/self_check.md) are too small a part of the
    # TVD for resampling a pool to mend them without costing the rest: not adopted.
    56: {
        "r56_default": {},
        "r56_box4": {"sample_pool": 4, RAKER: "box"},
        "r56_box16": {"sample_pool": 16, RAKER: "box"},
    },
}
SAMPLING_SEED = 1_000
# Round 56's box: a cell is moved only as far as BOX_NOISE noise stds of its release.
BOX_NOISE = 3.0


class BoxRaker(postprocess.Raker):
    """Raking toward a box, not a point (round 56): each table's target is the pool's own
    distribution clipped to within :data:`BOX_NOISE` noise stds (``noise`` per count, of
    ``rows`` released rows) of its release, so only the cells the rows miss by more than the
    noise are moved: a pair's structurally empty cell that the rows fill (k401ksubs' married
    people living alone, 5.6% of the rows against 0.4%) without fitting the other cells'
    noise."""

    noise = 0.0
    rows = 1.0

    def _tables(self, codes, labels):
        cells, targets = super()._tables(codes, labels)
        width = BOX_NOISE * self.noise / self.rows
        boxed = []
        for table, target in zip(cells, targets, strict=True):
            own = np.bincount(table, minlength=len(target)) / max(len(table), 1)
            released = target / max(target.sum(), 1e-12)
            boxed.append(np.clip(own, released - width, released + width))
        return cells, boxed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=TABLES, default="adult")
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--delta", type=float, default=1e-5, help="fertility needs 1e-6")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--rows", type=int, help="Adult only: a subsample of this many rows")
    parser.add_argument("--positives", type=int, help="... of which this many positive")
    parser.add_argument("--round", type=int, choices=sorted(ROUNDS), default=max(ROUNDS))
    parser.add_argument("--summary", action="store_true", help="print the CSV's means and stop")
    args = parser.parse_args()
    if args.summary:
        rows = pd.read_csv(OUT)
        columns = [f"q_{s}" for s in SCORES[:3]] + ["validation_mean_auroc", "duplicate_rows"]
        keys = ["table", "rows", "epsilon", "name"]
        print(rows.fillna({"rows": 0}).groupby(keys)[columns].mean().round(4).to_string())
        return
    if args.rows is not None and args.table != "adult":
        parser.error("--rows subsamples Adult only")
    commit, machine = code_commit(), machine_line()
    command = shlex.join(["python", "scripts/tuning/tune_sampling.py", *sys.argv[1:]])
    candidates = ROUNDS[args.round]
    done = pd.read_csv(OUT) if OUT.is_file() else pd.DataFrame()
    for seed in args.seeds:
        if (
            not done.empty
            and (
                (done["table"] == args.table)
                & (done["rows"].fillna(0) == (args.rows or 0))
                & (done["seed"] == seed)
                & (done["epsilon"] == args.epsilon)
                & done["name"].isin(candidates)
            ).any()
        ):
            continue
        overrides = [f"delta={args.delta}"]
        cfg, table, fit_rows, validation = validation_run(args.table, args.epsilon, seed, overrides)
        if args.rows is not None:
            fit_rows = subsample(fit_rows, table, args.rows, args.positives)
        model = fitted(cfg, fit_rows, table, seed)
        trained = model.model_config
        new_rows = []
        for name, settings in candidates.items():
            model_settings = {k: v for k, v in settings.items() if k not in (PAIRS, RAKER)}
            model.model_config = replace(trained, **model_settings)
            rule = PAIR_RULES[str(settings[PAIRS])] if PAIRS in settings else None
            rule = rule or sampler_module.herded_pairs
            BoxRaker.noise, BoxRaker.rows = model.marginal_noise, model.released_rows
            raker = BoxRaker if settings.get(RAKER) == "box" else postprocess.Raker
            with (
                mock.patch.object(sampler_module, "herded_pairs", rule),
                mock.patch.object(postprocess, "Raker", raker),
            ):
                start = time.perf_counter()
                synthetic = model.sample(len(fit_rows), seed=SAMPLING_SEED + seed)
                seconds = time.perf_counter() - start
            row: dict[str, object] = {
                "name": name,
                "table": args.table,
                "rows": args.rows,
                "positives": args.positives,
                "seed": seed,
                "epsilon": args.epsilon,
                "raking_pool": model.sampler.raking_pool(),
                **scores_of(synthetic, fit_rows, validation, table, seed),
            }
            row.update(
                {
                    "settings": " ".join(
                        f"{k}={v}" if k in (PAIRS, RAKER) else f"model.{k}={v}"
                        for k, v in settings.items()
                    ),
                    "sample_seconds": round(seconds, 2),
                    **provenance(commit, command, machine),
                }
            )
            print(row, flush=True)
            new_rows.append(row)
        done = append_rows(OUT, new_rows)


if __name__ == "__main__":
    main()
