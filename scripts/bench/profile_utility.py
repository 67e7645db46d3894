"""Time each utility classifier on real UCI Adult (real train -> real held-out) and print AUROC.

Usage::

    PYTHONPATH=. python scripts/bench/profile_utility.py [--data ../shared/data/adult/adult.data]
        [--seed 0] [--n-jobs 2] [--repeats 1]

Prints a markdown table to stdout: per classifier, the seconds of fit + predict_proba as
:func:`rdpgan.utility.classifier_auroc` runs it (single-threaded), the seconds with the
estimator's own ``n_jobs`` where it has one (RandomForest, Bagging, XGBoost), and the AUROC; then
the preprocessing time and the end-to-end time of ``classifier_auroc`` with ``n_jobs=1`` and
with ``--n-jobs`` (both must give the same AUROCs). Times are the best of ``--repeats``. The
load average is printed too: on shared cores, timings of multi-threaded code are not stable.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import sklearn
import xgboost
from sklearn.metrics import roc_auc_score

from rdpgan.cli import compose_run_config
from rdpgan.data.loading import load_split
from rdpgan.data.schema import Categorical
from rdpgan.utility import CLASSIFIERS, classifier_auroc, make_classifier, make_preprocessor

# Estimators with their own n_jobs (compared, not used by classifier_auroc).
INNER_PARALLEL = ("bagging", "random_forest", "xgboost")


def _best_of(repeats: int, fn):
    best, value = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - t)
    return best, value


def _fit_predict_auroc(clf, x_train, y_train, x_test, y_test) -> float:
    clf.fit(x_train, y_train)
    proba = clf.predict_proba(x_test)[:, list(clf.classes_).index(1)]
    return float(roc_auc_score(y_test, proba))


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    load_before = _load()

    # Adult through the dataset registry (data root: $RDPGAN_DATA_DIR), split as every run is.
    table, train, test = load_split(compose_run_config(["dataset=adult"]).dataset)
    target, positive = table.target, table.positive_label
    features_schema = table.schema.without(target).columns
    categorical = [c.name for c in features_schema if isinstance(c, Categorical)]
    continuous = [c.name for c in features_schema if not isinstance(c, Categorical)]
    features = categorical + continuous

    t0 = time.perf_counter()
    pre = make_preprocessor(categorical, continuous)
    x_train = pre.fit_transform(train[features])
    x_test = pre.transform(test[features])
    pre_seconds = time.perf_counter() - t0
    y_train = (train[target] == positive).to_numpy(dtype=np.int64)
    y_test = (test[target] == positive).to_numpy(dtype=np.int64)
    data = (x_train, y_train, x_test, y_test)

    rows = []
    for name in CLASSIFIERS:
        sec, auc = _best_of(
            args.repeats,
            lambda name=name: _fit_predict_auroc(make_classifier(name, args.seed, 1), *data),
        )
        inner = None
        if name in INNER_PARALLEL and args.n_jobs > 1:
            inner, auc_inner = _best_of(
                args.repeats,
                lambda name=name: _fit_predict_auroc(
                    make_classifier(name, args.seed, args.n_jobs), *data
                ),
            )
            assert auc_inner == auc, (name, auc, auc_inner)  # thread count must not matter
        rows.append((name, sec, inner, auc))

    def run(n_jobs: int):
        return classifier_auroc(
            train, test, target, positive, categorical, continuous, seed=args.seed, n_jobs=n_jobs
        )

    e2e = {nj: _best_of(args.repeats, lambda nj=nj: run(nj)) for nj in sorted({1, args.n_jobs})}
    mismatch = [
        (name, nj)
        for name, *_, auc in rows
        for nj, (_, scores) in e2e.items()
        if scores.auroc[name] != auc
    ]

    total = sum(sec for _, sec, _, _ in rows)
    mean_auc = float(np.mean([auc for *_, auc in rows]))
    print(
        f"UCI Adult (registry split): {len(train)} train / {len(test)} test rows "
        f"(stratified 80/20, seed {args.seed}), {x_train.shape[1]} features after "
        f"preprocessing; {os.cpu_count()} CPUs, load average {load_before} (start) / "
        f"{_load()} (end); best of {args.repeats}; Python {platform.python_version()}, "
        f"scikit-learn {sklearn.__version__}, xgboost {xgboost.__version__}"
    )
    print()
    inner_head = f"seconds, estimator n_jobs={args.n_jobs}"
    print(f"| classifier | seconds (1 thread) | share | {inner_head} | AUROC (real→real) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, sec, inner, auc in rows:
        inner_txt = "" if inner is None else f"{inner:.2f}"
        print(f"| {name} | {sec:.2f} | {100 * sec / total:.0f}% | {inner_txt} | {auc:.4f} |")
    print(f"| **sum of 8 classifiers** | **{total:.2f}** | 100% | | mean **{mean_auc:.4f}** |")
    print(f"| preprocessing (fit + transform) | {pre_seconds:.2f} | | | |")
    for nj, (sec, scores) in e2e.items():
        print(
            f"| `classifier_auroc(..., n_jobs={nj})` end to end | {sec:.2f} | | "
            f"| mean {scores.mean:.4f} |"
        )
    if mismatch:
        print(f"\nWARNING: classifier_auroc AUROC differs from the per-classifier run: {mismatch}")


if __name__ == "__main__":
    main()
