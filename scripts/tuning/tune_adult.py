"""Hyperparameter search on Adult only, scored on a validation split of the *train* split.

    python scripts/tuning/tune_adult.py [--epsilon 8] [--seeds 0] [--only NAME ...]

The held-out test split is never touched: each candidate trains on 80% of Adult's train split
and is scored (mean AUROC of the paper's 8 classifiers) on the other 20%. Choosing settings this
way still looks at private data outside the ledger; results/README.md says so (its timings
too are statistics of Adult's rows outside the ledger). Each run's secret randomness is fresh
OS entropy, so a repeated ``--seeds`` value does not reproduce a row exactly. Rows are appended
to ``results/tuning_adult.csv`` (a finished candidate/seed/ε is skipped), so the search resumes.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: its folders
from bench.machine_info import code_commit, machine_line
from bench.results_rows import append_rows

from rdpgan.cli import compose_run_config
from rdpgan.config import ModelConfig, PrivacyConfig, TrainConfig
from rdpgan.data.loading import load_split
from rdpgan.data.split import VALIDATION_KEY, split
from rdpgan.evaluate import score_table
from rdpgan.fidelity import fidelity_scores
from rdpgan.synthesizer import DPCGAN

REPO = Path(__file__).resolve().parents[2]
FIDELITY_COLUMNS = ("tvd_1way", "tvd_2way", "tvd_3way_target", "k_marginal", "duplicate_rows")
COMMIT = code_commit()  # at start: the code this process imported
COMMAND = shlex.join(["python", "scripts/tuning/tune_adult.py", *sys.argv[1:]])
MACHINE = machine_line()
OUT = REPO / "results" / "tuning_adult.csv"
# The starting point of the search, pinned (the package defaults are its outcome).
BASE_MODEL = ModelConfig(
    straight_through=False, auxiliary_weight=0.0, marginal_weight=0.0, numeric_bins=1
)
# Rounds 1-7 ran at the package's training defaults of their day (lr 2e-4, no step cap below
# 3,000, float32, no moving average of G); pinned, so that each name still means what its rows
# in the CSV ran.
BASE_TRAIN = TrainConfig(
    epochs=20,
    max_steps=3000,
    generator_lr=2e-4,
    discriminator_lr=2e-4,
    bf16_generator_step=False,
    generator_ema=0.0,
    progress=False,
)

LONG = replace(BASE_TRAIN, steps=2600)  # ≈ 50 epochs of Adult at the default batch
ST = replace(BASE_MODEL, straight_through=True)
E50 = replace(BASE_TRAIN, epochs=50)
FAST_LR = replace(E50, generator_lr=1e-3, discriminator_lr=1e-3)
NONPRIVATE = PrivacyConfig(name="none", accountant="none")
AUX1 = replace(ST, auxiliary_weight=1.0)
SMALL = ModelConfig(generator_hidden=[128, 128], discriminator_hidden=[128, 128])
FULL = E50  # the package's training defaults up to round 11 (50 epochs, float32), by name
DEFAULT_R12 = replace(  # ... and since round 12 (d541163)
    E50,
    max_steps=800,
    generator_lr=5e-4,
    discriminator_lr=5e-4,
    bf16_generator_step=True,
    generator_ema=0.99,
)
# The model settings of rounds 8-13, pinned like the others: marginal loss weight 1 (3 since
# round 15) over 128 rows per class, raking with a pool of 4 always (only where the marginals
# are precise since round 15), sampling in float32 (from round 14 until sampling moved to numpy,
# in bfloat16 where native; float32 since), untilted (tilted since round 19).
MODEL_R13 = ModelConfig(
    marginal_weight=1.0,
    marginal_rows=128,
    sample_pool=4,
    tilt_sampling=False,
)
# The package's model defaults since round 15 (4c4de2d).
MODEL_R15 = replace(MODEL_R13, marginal_weight=3.0, sample_pool=None)
# ModelConfig's settings that only change how a fitted model samples.
SAMPLING_SETTINGS = {"sample_pool": 1, "tilt_sampling": False}
# Round 21's train=nonprivate (configs/train/nonprivate.yaml; round 24 doubled its steps).
NONPRIVATE_R21 = TrainConfig(progress=False, steps=2600, discriminator_lr=1e-4)

CANDIDATES: dict[str, tuple[ModelConfig, TrainConfig, PrivacyConfig]] = {
    # Round 1 (before point masses): 20 epochs, variations of D size, lr, batch, clip.
    "default": (BASE_MODEL, BASE_TRAIN, PrivacyConfig()),
    "nonprivate": (BASE_MODEL, BASE_TRAIN, PrivacyConfig(name="none", accountant="none")),
    "small_d": (replace(BASE_MODEL, discriminator_hidden=[128, 128]), BASE_TRAIN, PrivacyConfig()),
    "tiny_d": (replace(BASE_MODEL, discriminator_hidden=[64]), BASE_TRAIN, PrivacyConfig()),
    "lr1e-3": (
        BASE_MODEL,
        replace(BASE_TRAIN, generator_lr=1e-3, discriminator_lr=1e-3),
        PrivacyConfig(),
    ),
    "batch1000": (BASE_MODEL, replace(BASE_TRAIN, batch_size=1000), PrivacyConfig()),
    "epochs50": (BASE_MODEL, replace(BASE_TRAIN, epochs=50), PrivacyConfig()),
    "clip0.1": (BASE_MODEL, BASE_TRAIN, PrivacyConfig(max_grad_norm=0.1)),
    # Round 2 (with point masses for zero-inflated columns): length in steps.
    "s2600": (BASE_MODEL, LONG, PrivacyConfig()),
    "s2600_nonprivate": (BASE_MODEL, LONG, PrivacyConfig(name="none", accountant="none")),
    "s2600_st": (replace(BASE_MODEL, straight_through=True), LONG, PrivacyConfig()),
    "s5000": (BASE_MODEL, replace(BASE_TRAIN, steps=5000), PrivacyConfig()),
    "s2600_tiny_d": (replace(BASE_MODEL, discriminator_hidden=[64]), LONG, PrivacyConfig()),
    "s2600_batch250": (BASE_MODEL, replace(LONG, batch_size=250), PrivacyConfig()),
    # Round 3: straight-through Gumbel combined with the round-2 levers.
    "s2600_st_nonprivate": (
        replace(BASE_MODEL, straight_through=True),
        LONG,
        PrivacyConfig(name="none", accountant="none"),
    ),
    "s5000_st": (
        replace(BASE_MODEL, straight_through=True),
        replace(LONG, steps=5000),
        PrivacyConfig(),
    ),
    # Round 4 (small tables simulated on Adult with --rows 700): length by epochs or by steps.
    "small_e50": (
        replace(BASE_MODEL, straight_through=True),
        replace(BASE_TRAIN, epochs=50),
        PrivacyConfig(),
    ),
    "small_s2600": (replace(BASE_MODEL, straight_through=True), LONG, PrivacyConfig()),
    "small_e50_nonprivate": (
        replace(BASE_MODEL, straight_through=True),
        replace(BASE_TRAIN, epochs=50),
        PrivacyConfig(name="none", accountant="none"),
    ),
    "small_s2600_nonprivate": (
        replace(BASE_MODEL, straight_through=True),
        LONG,
        PrivacyConfig(name="none", accountant="none"),
    ),
    # Round 5 (small *imbalanced* tables, --rows 700 --positives 45): D's size, length, lr.
    "r5_base": (ST, E50, PrivacyConfig()),
    "r5_base_nonprivate": (ST, E50, NONPRIVATE),
    "r5_d64": (replace(ST, discriminator_hidden=[64]), E50, PrivacyConfig()),
    "r5_d16": (replace(ST, discriminator_hidden=[16]), E50, PrivacyConfig()),
    "r5_d16_lr1e-3": (replace(ST, discriminator_hidden=[16]), FAST_LR, PrivacyConfig()),
    "r5_d64_lr1e-3": (replace(ST, discriminator_hidden=[64]), FAST_LR, PrivacyConfig()),
    "r5_d16_e200": (
        replace(ST, discriminator_hidden=[16]),
        replace(E50, epochs=200),
        PrivacyConfig(),
    ),
    "r5_d16_clip0.1": (
        replace(ST, discriminator_hidden=[16]),
        E50,
        PrivacyConfig(max_grad_norm=0.1),
    ),
    "r5_aux1": (replace(ST, auxiliary_weight=1.0), E50, PrivacyConfig()),
    "r5_aux1_nonprivate": (replace(ST, auxiliary_weight=1.0), E50, NONPRIVATE),
    "r5_aux1_d64": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[64]),
        E50,
        PrivacyConfig(),
    ),
    "r5_aux3": (replace(ST, auxiliary_weight=3.0), E50, PrivacyConfig()),
    "r5_aux1_linear": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[]),
        E50,
        PrivacyConfig(),
    ),
    "r5_aux1_linear_nonprivate": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[]),
        E50,
        NONPRIVATE,
    ),
    "r5_aux1_d16": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[16]),
        E50,
        PrivacyConfig(),
    ),
    "r5_aux1_linear_lr1e-3": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[]),
        FAST_LR,
        PrivacyConfig(),
    ),
    "r5_aux1_linear_s2600": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[]),
        LONG,
        PrivacyConfig(),
    ),
    "r5_aux1_linear_s2600_nonprivate": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[]),
        LONG,
        NONPRIVATE,
    ),
    "r5_aux1_d16_s2600": (
        replace(ST, auxiliary_weight=1.0, discriminator_hidden=[16]),
        LONG,
        PrivacyConfig(),
    ),
    "r5_aux1_beta9": (AUX1, replace(E50, betas=[0.9, 0.999]), PrivacyConfig()),
    "r5_aux1_dlr1e-3": (AUX1, replace(E50, discriminator_lr=1e-3), PrivacyConfig()),
    "r5_aux1_clip0.1": (AUX1, E50, PrivacyConfig(max_grad_norm=0.1)),
    "r5_aux1_batch2x": (AUX1, replace(E50, max_sample_rate=0.2), PrivacyConfig()),
    "r5_aux1_lr1e-3": (AUX1, FAST_LR, PrivacyConfig()),
    "r5_aux1_s2600": (AUX1, LONG, PrivacyConfig()),
    "r5_aux1_s2600_nonprivate": (AUX1, LONG, NONPRIVATE),
    # Round 6: the AC-GAN critic on the full Adult table (2,600 steps, as the defaults).
    "s2600_st_aux1": (AUX1, LONG, PrivacyConfig()),
    "s2600_st_tiny_d": (
        replace(BASE_MODEL, straight_through=True, discriminator_hidden=[64]),
        LONG,
        PrivacyConfig(),
    ),
    # Round 7: released class profiles matched by G (then model.moment_weight), share of
    # epsilon spent on them (then privacy.class_means_fraction); small imbalanced tables
    # (--rows 700 --positives 45) first, then the full table. Round 8 generalised them into
    # the marginals; these names now run the marginals.
    **{
        f"{prefix}_m{weight:g}_f{fraction:g}{suffix}": (
            replace(AUX1, marginal_weight=weight, numeric_bins=1),
            train,
            replace(privacy, marginals_fraction=fraction),
        )
        for prefix, train in (("r7", E50), ("s2600_st_aux1", LONG))
        for weight in (1.0, 10.0)
        for fraction in (0.25, 0.5, 0.75)
        for suffix, privacy in (("", PrivacyConfig()), ("_nonprivate", NONPRIVATE))
    },
    # Round 8 (issue 11, fidelity): numbers as fine bins + within-bin position, released
    # marginals matched by a KL loss and by raking the sampled rows. Scored on fidelity too.
    # Each ran the package defaults of its commit (in its rows): r8_default before pair
    # marginals existed, r8_pairs with a spanning tree of them (100 bins, clipped tables),
    # r8_final with the shipped defaults (40 bins, Norm-Sub, pairs beyond the tree).
    "r8_default": (MODEL_R13, FULL, PrivacyConfig()),
    "r8_pairs": (MODEL_R13, FULL, PrivacyConfig()),
    "r8_final": (MODEL_R13, FULL, PrivacyConfig()),
    "r8_nonprivate": (MODEL_R13, FULL, NONPRIVATE),
    "r8_no_raking": (replace(MODEL_R13, sample_pool=1), FULL, PrivacyConfig()),
    "r8_no_marginal_loss": (replace(MODEL_R13, marginal_weight=1e-9), FULL, PrivacyConfig()),
    "r8_f0.25": (MODEL_R13, FULL, replace(PrivacyConfig(), marginals_fraction=0.25)),
    "r8_f0.75": (MODEL_R13, FULL, replace(PrivacyConfig(), marginals_fraction=0.75)),
    "r8_bins40": (replace(MODEL_R13, numeric_bins=40), FULL, PrivacyConfig()),
    "r8_pool8": (replace(MODEL_R13, sample_pool=8), FULL, PrivacyConfig()),
    # Round 9 (issue 13, speed): fewer, cheaper steps against the 50-epoch default.
    "r9_e50": (MODEL_R13, FULL, PrivacyConfig()),
    "r9_s600": (MODEL_R13, replace(FULL, steps=600), PrivacyConfig()),
    "r9_s600_lr5e-4": (
        MODEL_R13,
        replace(FULL, steps=600, generator_lr=5e-4, discriminator_lr=5e-4),
        PrivacyConfig(),
    ),
    "r9_s1000_c2": (MODEL_R13, replace(FULL, steps=1000, n_critic=2), PrivacyConfig()),
    # Round 10 (issue 13): a length for a full Adult run in a minute, between
    # round 9's 600 steps and its 50 epochs.
    **{
        f"r10_s{steps}_lr{lr:.0e}".replace("e-0", "e-"): (
            MODEL_R13,
            replace(FULL, steps=steps, generator_lr=lr, discriminator_lr=lr),
            PrivacyConfig(),
        )
        for steps, lr in ((700, 5e-4), (800, 4e-4), (800, 5e-4))
    },
    "r10_e50": (MODEL_R13, FULL, PrivacyConfig()),  # r9_e50 again, at round 10's code
    # ... and the generator's step in bfloat16 (the discriminator's stays float32).
    "r10_s800_lr5e-4_bf16": (
        MODEL_R13,
        replace(
            FULL, steps=800, generator_lr=5e-4, discriminator_lr=5e-4, bf16_generator_step=True
        ),
        PrivacyConfig(),
    ),
    # Round 11 (issue 13): the default in a minute. Narrower networks (a DP step's cost, and its
    # noise, grow with D's width) at shorter lengths, against r10_e50.
    "r11_g128_d128_e50": (SMALL, FULL, PrivacyConfig()),
    **{
        f"r11_{nets}_s{steps}_lr5e-4": (
            model,
            replace(FULL, steps=steps, generator_lr=5e-4, discriminator_lr=5e-4),
            PrivacyConfig(),
        )
        for nets, model, steps in (
            ("g128_d128", SMALL, 1200),
            ("g128_d128", SMALL, 1500),
            ("d128", replace(MODEL_R13, discriminator_hidden=[128, 128]), 1000),
        )
    },
    # Round 12 (issue 13): a moving average of G's weights (free: post-processing of its
    # iterates), at round 10's length (with it, the default since round 12) and at 50 epochs
    # (train=long).
    **{
        f"r12_s800_lr5e-4_bf16_ema{decay:g}": (
            MODEL_R13,
            replace(
                FULL,
                steps=800,
                generator_lr=5e-4,
                discriminator_lr=5e-4,
                bf16_generator_step=True,
                generator_ema=decay,
            ),
            PrivacyConfig(),
        )
        for decay in (0.99, 0.995)
    },
    "r12_e50_ema0.998": (MODEL_R13, replace(FULL, generator_ema=0.998), PrivacyConfig()),
    # Round 13: small tables (run only as --rows 700 --positives 45, a small imbalanced table
    # simulated on Adult, as in round 7), where epochs, not the step cap, set the length: the
    # default since round 12, the one before it, and the new one at the old learning rate.
    "r13_small_default": (MODEL_R13, DEFAULT_R12, PrivacyConfig()),
    "r13_small_previous": (MODEL_R13, FULL, PrivacyConfig()),
    "r13_small_lr2e-4": (
        MODEL_R13,
        replace(DEFAULT_R12, generator_lr=2e-4, discriminator_lr=2e-4),
        PrivacyConfig(),
    ),
    # Round 14 (issue 13): how sampling runs, on models trained once per seed and shared by
    # these names (they differ only in sampling settings): float32 products as before, in
    # bfloat16 (the default until sampling moved to numpy: the names now sample alike, in
    # float32), and with a smaller pool of rows to rake or none.
    "r14_sample_fp32": (MODEL_R13, DEFAULT_R12, PrivacyConfig()),
    **{
        f"r14_sample_bf16_pool{pool}": (
            replace(MODEL_R13, sample_pool=pool),
            DEFAULT_R12,
            PrivacyConfig(),
        )
        for pool in (4, 2, 1)
    },
    # Round 15 (issue 13): a stronger marginal loss, so that G's own rows come closer to the
    # released tables and raking has less to do (with the default pool, and without raking).
    **{
        f"r15_marginal{weight:g}_pool{pool}": (
            replace(MODEL_R13, marginal_weight=weight, sample_pool=pool),
            DEFAULT_R12,
            PrivacyConfig(),
        )
        for weight in (3.0, 10.0)
        for pool in (4, 1)
    },
    # Round 16 (issue 13): a narrower G (half the products a sampled row costs) at round 15's
    # marginal loss; D keeps its width.
    **{
        f"r16_g128_marginal3_pool{pool}": (
            replace(
                MODEL_R13,
                generator_hidden=[128, 128],
                marginal_weight=3.0,
                sample_pool=pool,
            ),
            DEFAULT_R12,
            PrivacyConfig(),
        )
        for pool in (4, 1)
    },
    # Round 17 (issue 13): cheaper training at the defaults of round 15: the marginal loss
    # over half the rows per class, and fewer steps.
    "r17_default": (MODEL_R15, DEFAULT_R12, PrivacyConfig()),
    "r17_rows64": (replace(MODEL_R15, marginal_rows=64), DEFAULT_R12, PrivacyConfig()),
    **{
        f"r17_steps{steps}": (MODEL_R15, replace(DEFAULT_R12, max_steps=steps), PrivacyConfig())
        for steps in (700, 600)
    },
    # Round 18 (issue 13): the defaults again, after sampling moved to exp2 draws and 4k-row G
    # passes (the same distribution up to float rounding): a check against r17_default.
    "r18_default": (MODEL_R15, DEFAULT_R12, PrivacyConfig()),
    # Round 19 (issue 13): sampling tilted toward the released per-class column distributions
    # (free at sampling time), with the default pool (4 at ε=8, 1 at ε ≤ 3: run at both), with
    # smaller pools, and without it, on models shared by these names.
    **{
        f"r19_{'tilted' if tilt else 'untilted'}_pool{pool or 'default'}": (
            replace(MODEL_R15, tilt_sampling=tilt, sample_pool=pool),
            DEFAULT_R12,
            PrivacyConfig(),
        )
        for tilt in (False, True)
        for pool in (None, 2, 1)
    },
    # Round 20 (issue 13): the tilt shrunk toward G's own distributions where the release is
    # within its noise (round 19's was not), against no tilt, without raking, at ε = 8, 3, 2, 1
    # and on small tables: where the tilt pays (model.tilt_sampling null's limit).
    **{
        f"r20_{'tilted' if tilt else 'untilted'}": (
            replace(MODEL_R15, tilt_sampling=tilt, sample_pool=1),
            DEFAULT_R12,
            PrivacyConfig(),
        )
        for tilt in (False, True)
    },
    # Round 21 (issue 28): a schedule for the non-private CGAN, the ceiling of the same model
    # (exact statistics, no clipping or noise): the package's defaults, longer, slower.
    "r21_nonprivate_default": (ModelConfig(), TrainConfig(progress=False), NONPRIVATE),
    "r21_nonprivate_s2600": (
        ModelConfig(),
        TrainConfig(progress=False, steps=2600),
        NONPRIVATE,
    ),
    "r21_nonprivate_lr2e-4_s2600": (
        ModelConfig(),
        TrainConfig(progress=False, steps=2600, generator_lr=2e-4, discriminator_lr=2e-4),
        NONPRIVATE,
    ),
    "r21_nonprivate_dlr1e-4_s2600": (
        ModelConfig(),
        TrainConfig(progress=False, steps=2600, discriminator_lr=1e-4),
        NONPRIVATE,
    ),
    "r21_private_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    # Round 22 (issue 28): small tables, run with --rows 700 --positives 45 (cervical's size
    # and class balance, simulated on Adult): the budget split and the batch. Two seeds each
    # moved the AUROC by less than the seeds do (0.70/0.66 default): nothing adopted. The
    # rows' command also names r22_marginals0.7 (refused: the shares summed above 1) and
    # r22_g128 (never reached); neither has rows, both were dropped from this list.
    "r22_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    "r22_rate0.3": (
        ModelConfig(),
        TrainConfig(progress=False, max_sample_rate=0.3),
        PrivacyConfig(),
    ),
    "r22_marginals0.3": (
        ModelConfig(),
        TrainConfig(progress=False),
        PrivacyConfig(marginals_fraction=0.3),
    ),
    # Round 23 (issue 28): small tables again (--rows 700 --positives 45), on what the noise
    # does to a 45-row class's released profile: fewer bins per numeric column (fewer, fuller
    # cells), sampling tilted toward the released profiles whatever their noise, a stronger
    # marginal loss, and fewer DP steps (less noise per step for the same ε). The default is
    # run again: sampling is numpy float32 since round 22.
    "r23_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    "r23_bins10": (ModelConfig(numeric_bins=10), TrainConfig(progress=False), PrivacyConfig()),
    "r23_tilt": (ModelConfig(tilt_sampling=True), TrainConfig(progress=False), PrivacyConfig()),
    "r23_marginal10": (
        ModelConfig(marginal_weight=10.0),
        TrainConfig(progress=False),
        PrivacyConfig(),
    ),
    "r23_epochs20": (ModelConfig(), TrainConfig(progress=False, epochs=20.0), PrivacyConfig()),
    # After four seeds each (0.661 ± 0.031 default, 0.685 bins10, 0.684 marginal10, the rest
    # within the seeds' noise): both of the two leads together, and four more seeds each.
    "r23_bins10_marginal10": (
        ModelConfig(numeric_bins=10, marginal_weight=10.0),
        TrainConfig(progress=False),
        PrivacyConfig(),
    ),
    # Round 24 (issue 28): the non-private CGAN tied rdp_cgan at ε = 8 in the grid at e7a059b
    # (0.9839 vs 0.9844 of real). Its schedule of round 21 (train=nonprivate) is run again
    # beside today's private default, and two ceilings a private run cannot afford: twice the
    # steps, and networks twice as wide.
    "r24_private_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    "r24_nonprivate_s2600": (ModelConfig(), NONPRIVATE_R21, NONPRIVATE),
    "r24_nonprivate_s5200": (ModelConfig(), replace(NONPRIVATE_R21, steps=5200), NONPRIVATE),
    "r24_nonprivate_h512_s2600": (
        ModelConfig(generator_hidden=[512, 512], discriminator_hidden=[512, 512]),
        NONPRIVATE_R21,
        NONPRIVATE,
    ),
    # Round 25 (issue 29's AVX2 bar): simultaneous steps, G scoring its fakes with D as it was
    # before D's step, so that all of G's step but its update overlaps D's on a second core.
    # ε = 8, 4 seeds: mean AUROC 0.861 -> 0.862, 2-way TVD (public bins) 0.038 -> 0.041; ε = 1,
    # 2 seeds: 0.846 -> 0.847, 2-way level. Adopted with tuning_fidelity.csv's round 25.
    "r25_private_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    "r25_simultaneous": (
        ModelConfig(),
        TrainConfig(progress=False, simultaneous_steps=True),
        PrivacyConfig(),
    ),
    # Round 30 (issue 28's small tables; issue 26's small tables of the development suite):
    # where a table is small, DP-SGD's noise per row is large and the released per-class
    # marginals carry most of what G learns of the target, yet round 22 only tried a smaller
    # share for them. A larger one, with no adaptive pairs' share (a run that does not rake,
    # as none at this size does, chooses no pairs): --rows 700 --positives 45, 8 seeds. Mean
    # AUROC 0.644 ± 0.024 (default), 0.678 ± 0.072 at 0.6, 0.697 ± 0.025 at 0.75; 1-/2-/3-way
    # TVD 0.066/0.161/0.195, 0.057/0.147/0.180, 0.049/0.138/0.169: 0.75 better on every score.
    "r30_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    "r30_marginals0.6": (
        ModelConfig(),
        TrainConfig(progress=False),
        PrivacyConfig(marginals_fraction=0.6, adaptive_fraction=0.0),
    ),
    "r30_marginals0.75": (
        ModelConfig(),
        TrainConfig(progress=False),
        PrivacyConfig(marginals_fraction=0.75, adaptive_fraction=0.0),
    ),
    # Round 31 (issue 28's small tables): with the adaptive share moved to the marginals where
    # sampling does not rake (the default since 348a1a7), fewer bins per wide numeric column
    # (fewer, fuller cells in the per-class tables): --rows 700 --positives 45, 8 seeds. The
    # default reproduces round 30's 0.75 (AUROC 0.700 against 0.697, TVD within 0.003); 20
    # bins a little worse everywhere (AUROC 0.686, 1-/2-/3-way 0.051/0.139/0.172 against
    # 0.049/0.136/0.166): not adopted.
    "r31_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    "r31_bins20": (ModelConfig(numeric_bins=20), TrainConfig(progress=False), PrivacyConfig()),
    # Round 32 (as tune_fidelity.py's round 32): a tenth of ε from the marginals to the
    # numeric columns' densities, 0.15 -> 0.25. 8 seeds: AUROC 0.69 against round 31's
    # default 0.70, 1-/2-/3-way TVD 0.050/0.138/0.171 against 0.049/0.136/0.166: not adopted.
    "r32_density25": (
        ModelConfig(),
        TrainConfig(progress=False),
        PrivacyConfig(marginals_fraction=0.4, numeric_density_fraction=0.25),
    ),
    # Round 53 (issue 54's AVX2 bar): G's step runs beside D's on the second core and, with
    # 500 fakes, is the longer of the two (AVX2 caps: 27.6 ms against D's 23 ms); with 256 the
    # default run's loop took 24.8 s instead of 29.7 s. Does G need 500 fakes a step?
    # ε = 8, 4 seeds: mean AUROC 0.8652 (500) against 0.8633 (256), quantile 1-/2-/3-way TVD
    # 0.0054/0.0312/0.0434 against 0.0051/0.0306/0.0428; ε = 1, 3 seeds: 0.8475 against
    # 0.8499, 0.0127/0.0586/0.0766 against 0.0127/0.0588/0.0759: level within the seeds.
    # Adopted with tune_fidelity.py's round 53 (nasscds, TV16).
    "r53_generator_batch500": (
        ModelConfig(),
        TrainConfig(progress=False, generator_batch=None),
        PrivacyConfig(),
    ),
    "r53_generator_batch256": (
        ModelConfig(),
        TrainConfig(progress=False, generator_batch=256),
        PrivacyConfig(),
    ),
    # Round 54 (issue 54's run budget): half the steps on twice the expected batch, the same
    # rows drawn in all, against the defaults in the same sitting (3 seeds; AUROC, 1-/2-/3-way
    # TVD). At ε = 8 the defaults 0.865, 0.005/0.031/0.043; half the steps 0.862 (AUROC lower
    # on every seed), TVD level; with both learning rates doubled 0.865, level; with G's
    # alone, or 750 rows for 533 steps, 0.865, 2-/3-way TVD 0.001 higher. At ε = 1 the
    # defaults 0.851, 0.013/0.058/0.075; half the steps 0.848, 0.014/0.063/0.081; with both
    # rates doubled 0.849, 0.013/0.059/0.076. Half the steps took 40% off this script's fit,
    # but only 10% off the default command's wall time (28.1 s against 32.0 s, 3 paired runs
    # at 66d6540 on this Xeon: a step on twice the rows costs nearly twice as much). Not
    # adopted: on the development suite (tune_fidelity.py's round 54) it was mixed.
    "r54_default": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
    "r54_batch1000_steps400": (
        ModelConfig(),
        TrainConfig(progress=False, batch_size=1000, max_steps=400),
        PrivacyConfig(),
    ),
    "r54_batch1000_steps400_lr1e-3": (
        ModelConfig(),
        TrainConfig(
            progress=False,
            batch_size=1000,
            max_steps=400,
            generator_lr=1e-3,
            discriminator_lr=1e-3,
        ),
        PrivacyConfig(),
    ),
    "r54_batch1000_steps400_glr1e-3": (
        ModelConfig(),
        TrainConfig(progress=False, batch_size=1000, max_steps=400, generator_lr=1e-3),
        PrivacyConfig(),
    ),
    "r54_batch750_steps533": (
        ModelConfig(),
        TrainConfig(progress=False, batch_size=750, max_steps=533),
        PrivacyConfig(),
    ),
    # Round 55: the defaults once DP-SGD clips in one backward pass (rdpgan/privacy/clipping.py)
    # instead of Opacus's ghost clipping: the same clipped sums up to float rounding (and a
    # 1e-5 relative margin on each pair's factor), checked against r54_default's rows.
    "r55_default_one_pass_clipping": (ModelConfig(), TrainConfig(progress=False), PrivacyConfig()),
}


def round_of(name: str) -> int:
    if re.match(r"r\d+_", name) and int(name[1 : name.index("_")]) >= 8:
        return int(name[1 : name.index("_")])
    if "_m" in name and "_f" in name:
        return 7
    if name.startswith("r5_"):
        return 5
    if name.endswith("_aux1"):
        return 6
    if name.startswith("small"):
        return 4
    return 1 if not name[1].isdigit() else (3 if "_st" in name else 2)


def subsample(rows: pd.DataFrame, table, n: int, positives: int | None) -> pd.DataFrame:
    """``n`` random rows, ``positives`` of them of the positive class when given."""
    if positives is None:
        return rows.sample(n=n, random_state=0).reset_index(drop=True)
    is_positive = rows[table.target] == table.positive_label
    parts = [
        rows[is_positive].sample(n=positives, random_state=0),
        rows[~is_positive].sample(n=n - positives, random_state=0),
    ]
    return pd.concat(parts).sample(frac=1.0, random_state=0).reset_index(drop=True)


def size_matches(done: pd.DataFrame, column: str, wanted: int | None) -> pd.Series:
    """Which rows of ``done`` ran with ``wanted`` in ``column`` (``rows``, ``positives``):
    None, or a column the oldest rows lack, is the whole table."""
    recorded = done[column] if column in done else pd.Series(float("nan"), index=done.index)
    return recorded.isna() if wanted is None else recorded == wanted


def is_done(done: pd.DataFrame, name: str, seed: int, args: argparse.Namespace) -> bool:
    """Whether ``done`` has this candidate's row for this seed, ε and table size."""
    match = (done["name"] == name) & (done["seed"] == seed) & (done["epsilon"] == args.epsilon)
    for column in ("rows", "positives"):
        match &= size_matches(done, column, getattr(args, column))
    return bool(match.any())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=8.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--only", nargs="+", default=list(CANDIDATES))
    parser.add_argument(
        "--rows",
        type=int,
        default=None,
        help="train on a random subset of this many rows: a small table, simulated on Adult",
    )
    parser.add_argument(
        "--summary",
        action="store_true",
        help="print mean validation AUROC per candidate and ε (over seeds) from the CSV, and stop",
    )
    parser.add_argument(
        "--positives",
        type=int,
        default=None,
        help="with --rows: this many of them positive (a small imbalanced table)",
    )
    args = parser.parse_args()
    if args.summary:
        rows = pd.read_csv(OUT)
        rows = rows[rows["name"].isin(args.only)] if args.only != list(CANDIDATES) else rows
        auroc = "validation_mean_auroc"
        for column in ("rows", "positives"):  # absent from the oldest rows: the full table
            rows[column] = rows[column] if column in rows else float("nan")
        keys = ["name", "epsilon", "rows", "positives"]  # a small table is its own candidate
        summary = rows.groupby(keys, sort=False, dropna=False).agg(
            mean=(auroc, "mean"),
            std=(auroc, "std"),
            count=(auroc, "count"),
            **{column: (column, "mean") for column in FIDELITY_COLUMNS if column in rows},
        )
        print(summary.round(3).to_string())
        return

    table, train_rows, _test_rows_never_used = load_split(
        compose_run_config(["dataset=adult"]).dataset
    )
    fit_rows, validation = split(train_rows, 0.2, VALIDATION_KEY)
    if args.rows is not None:
        fit_rows = subsample(fit_rows, table, args.rows, args.positives)
    done = pd.read_csv(OUT) if OUT.is_file() else pd.DataFrame(columns=["name", "seed", "epsilon"])
    fitted_models: dict[str, tuple[DPCGAN, float]] = {}
    for name in args.only:
        model_cfg, train_cfg, privacy_cfg = CANDIDATES[name]
        for seed in args.seeds:
            if is_done(done, name, seed, args):
                continue
            start = time.perf_counter()
            # Candidates that differ only in how they sample share one fitted model per seed.
            key = repr((replace(model_cfg, **SAMPLING_SETTINGS), train_cfg, privacy_cfg, seed))
            if key not in fitted_models:
                model = DPCGAN(
                    epsilon=args.epsilon,
                    privacy=privacy_cfg,
                    model=model_cfg,
                    train=train_cfg,
                    seed=seed,
                    device="cpu",
                ).fit(fit_rows, table.target, table.schema, table.positive_label)
                fitted_models[key] = (model, time.perf_counter() - start)
            model, train_seconds = fitted_models[key]
            model.model_config = model_cfg  # the same but for the sampling settings
            sample_start = time.perf_counter()
            synthetic = model.sample(len(fit_rows))
            scores = score_table(
                synthetic, validation, table.schema, table.target, table.positive_label, seed
            )
            row = {
                "name": name,
                "seed": seed,
                "epsilon": args.epsilon,
                "validation_mean_auroc": round(scores.mean, 4),
                "round": round_of(name),
                "train_seconds": round(train_seconds, 1),  # once per shared model
                "total_seconds": round(train_seconds + time.perf_counter() - sample_start, 1),
                **{f"auroc_{k}": round(v, 4) for k, v in scores.auroc.items()},
                # Against the rows trained on, as the evaluation harness does.
                **{
                    k: round(v, 4)
                    for k, v in fidelity_scores(
                        fit_rows, synthetic, table.schema, table.target
                    ).items()
                    if k in FIDELITY_COLUMNS
                },
                "commit": COMMIT,
                # Rows before these columns existed ran on the full 80% (round 13's, named
                # r13_small_*, on --rows 700 --positives 45).
                "rows": args.rows,
                "positives": args.positives,
                "command": COMMAND,
                "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "machine": MACHINE,
            }
            print(row, flush=True)
            done = append_rows(OUT, [row])  # others may write


if __name__ == "__main__":
    main()
