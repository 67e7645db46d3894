"""Machine-learning utility of a table: AUROC of eight classifiers trained on it.

This is the utility measure of "A Study on Synthetic Data Generation Based Safe Differentially
Private GAN" (2020): eight off-the-shelf classifiers with library defaults are trained on a table
(synthetic rows, or the real train split for the reference) and scored by AUROC on real held-out
rows. :func:`classifier_auroc` is the single entry point.

Every classifier sees the same features, produced by one preprocessing pipeline fitted on the
*train* frame only:

* categorical columns: values are normalised to strings (numbers by their float value, so ``1``
  and ``1.0`` are the same level), missing values (NaN/None/NA) become their own level
  ``"__missing__"``, then :class:`~sklearn.preprocessing.OneHotEncoder` with
  ``handle_unknown="ignore"`` (a level never seen in train encodes as all zeros);
* continuous columns: coerced to float (``±inf`` counts as missing), median-imputed with a missing
  indicator (a column with no observed value in train is imputed with 0), then standardised.

The preprocessing is fitted once and its output shared by the eight classifiers; this is the
same as eight ``Pipeline(preprocessing, classifier)`` fits, since the preprocessing is
deterministic, but does the work once.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    AdaBoostClassifier,
    BaggingClassifier,
    GradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.naive_bayes import BernoulliNB
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler
from sklearn.tree import DecisionTreeClassifier
from xgboost import XGBClassifier

__all__ = [
    "CLASSIFIERS",
    "MISSING_LEVEL",
    "UtilityScores",
    "classifier_auroc",
    "make_classifier",
    "make_preprocessor",
]

CLASSIFIERS: tuple[str, ...] = (
    "logistic_regression",
    "decision_tree",
    "bagging",
    "random_forest",
    "gradient_boosting",
    "adaboost",
    "bernoulli_nb",
    "xgboost",
)

#: The level a missing categorical value is encoded as.
MISSING_LEVEL = "__missing__"

# sklearn's default (100) happens to suffice on Adult (lbfgs stops after ~70 iterations), but
# synthetic tables are less well conditioned; 1000 leaves ample room.
_LOGREG_MAX_ITER = 1000

# Submission order for the thread pool: slowest first (measured on Adult), so the long
# GradientBoosting fit overlaps with all the others instead of running alone at the end.
_LONGEST_FIRST: tuple[str, ...] = (
    "gradient_boosting",
    "random_forest",
    "adaboost",
    "bagging",
    "xgboost",
    "logistic_regression",
    "decision_tree",
    "bernoulli_nb",
)


@dataclass(frozen=True)
class UtilityScores:
    """AUROC per classifier (keys in :data:`CLASSIFIERS` order), their mean, and wall time."""

    auroc: dict[str, float]
    mean: float
    seconds: float

    def to_dict(self) -> dict:
        return {
            "auroc": {name: float(v) for name, v in self.auroc.items()},
            "mean": float(self.mean),
            "seconds": float(self.seconds),
        }


# --------------------------------------------------------------------------- preprocessing


def _category_string(value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, float, np.integer, np.floating)):
        f = float(value)
        return MISSING_LEVEL if math.isnan(f) else str(f)
    return str(value)


def _categories_as_strings(frame: pd.DataFrame) -> np.ndarray:
    """Object array of level strings; missing values become :data:`MISSING_LEVEL`."""
    out = np.empty(frame.shape, dtype=object)
    for j, name in enumerate(frame.columns):
        codes, uniques = pd.factorize(frame[name], use_na_sentinel=True)
        levels = np.array([_category_string(u) for u in uniques] + [MISSING_LEVEL], dtype=object)
        out[:, j] = levels[codes]  # code -1 (missing) picks the trailing MISSING_LEVEL
    return out


def _continuous_as_float(frame: pd.DataFrame) -> np.ndarray:
    """Float array; non-finite values become NaN. Raises ValueError naming a non-numeric column."""
    out = np.empty(frame.shape, dtype=np.float64)
    for j, name in enumerate(frame.columns):
        col = frame[name]
        try:
            values = pd.to_numeric(col, errors="raise")
            out[:, j] = np.asarray(values, dtype=np.float64, copy=None)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"continuous column {name!r} has non-numeric values: {exc}") from exc
    out[~np.isfinite(out)] = np.nan
    return out


def make_preprocessor(categorical: Sequence[str], continuous: Sequence[str]) -> ColumnTransformer:
    """The (unfitted) feature pipeline shared by all classifiers; takes a DataFrame."""
    transformers = []
    if categorical:
        transformers.append(
            (
                "categorical",
                Pipeline(
                    [
                        ("as_str", FunctionTransformer(_categories_as_strings)),
                        (
                            "onehot",
                            OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                        ),
                    ]
                ),
                list(categorical),
            )
        )
    if continuous:
        transformers.append(
            (
                "continuous",
                Pipeline(
                    [
                        ("as_float", FunctionTransformer(_continuous_as_float)),
                        (
                            "impute",
                            SimpleImputer(
                                strategy="median", add_indicator=True, keep_empty_features=True
                            ),
                        ),
                        ("scale", StandardScaler()),
                    ]
                ),
                list(continuous),
            )
        )
    # Dense output: the tree ensembles are faster on dense arrays than on CSR/CSC input.
    return ColumnTransformer(transformers, remainder="drop", sparse_threshold=0.0)


# --------------------------------------------------------------------------- classifiers


def make_classifier(name: str, seed: int = 0, n_jobs: int = 2) -> ClassifierMixin:
    """One of the eight classifiers, with library defaults and a fixed seed.

    ``n_jobs`` goes to the estimators that have it (Bagging, RandomForest, XGBoost); the fitted
    model does not depend on it. :func:`classifier_auroc` uses ``n_jobs=1`` here and runs
    classifiers side by side instead.
    """
    if name == "logistic_regression":
        return LogisticRegression(max_iter=_LOGREG_MAX_ITER, random_state=seed)
    if name == "decision_tree":
        return DecisionTreeClassifier(random_state=seed)
    if name == "bagging":
        return BaggingClassifier(random_state=seed, n_jobs=n_jobs)
    if name == "random_forest":
        return RandomForestClassifier(random_state=seed, n_jobs=n_jobs)
    if name == "gradient_boosting":
        return GradientBoostingClassifier(random_state=seed)
    if name == "adaboost":
        return AdaBoostClassifier(random_state=seed)
    if name == "bernoulli_nb":
        return BernoulliNB()
    if name == "xgboost":
        return XGBClassifier(
            n_jobs=n_jobs,
            tree_method="hist",
            eval_metric="logloss",
            random_state=seed,
            verbosity=0,
        )
    raise ValueError(f"unknown classifier {name!r}; expected one of {CLASSIFIERS}")


# --------------------------------------------------------------------------- entry point


def _check_columns(
    train: pd.DataFrame,
    test: pd.DataFrame,
    target: str,
    categorical: Sequence[str],
    continuous: Sequence[str],
) -> None:
    if isinstance(categorical, str) or isinstance(continuous, str):
        raise TypeError("categorical and continuous must be sequences of column names, not str")
    features = [*categorical, *continuous]
    if not features:
        raise ValueError("no feature columns: categorical and continuous are both empty")
    dupes = sorted({c for c in features if features.count(c) > 1})
    if dupes:
        raise ValueError(f"columns listed more than once (categorical/continuous): {dupes}")
    if target in features:
        raise ValueError(f"target column {target!r} is also listed as a feature")
    for frame_name, frame in (("train", train), ("test", test)):
        for col in (target, *features):
            if col not in frame.columns:
                raise ValueError(f"column {col!r} is missing from the {frame_name} frame")


def classifier_auroc(
    train: pd.DataFrame,
    test: pd.DataFrame,
    target: str,
    positive_label: object,
    categorical: Sequence[str],
    continuous: Sequence[str],
    seed: int = 0,
    n_jobs: int = 2,
) -> UtilityScores:
    """AUROC on ``test`` of each classifier in :data:`CLASSIFIERS` trained on ``train``.

    The task is binary: ``y = (df[target] == positive_label)``. Columns not listed in
    ``categorical``/``continuous`` (other than ``target``) are ignored.

    If ``train`` holds fewer than two classes (a collapsed synthetic table), no classifier can be
    fitted; each is scored as a constant predictor, AUROC 0.5. A ``test`` frame with one class
    raises ValueError (AUROC is undefined), as does a listed column absent from either frame.

    ``n_jobs`` is how many classifiers are fitted at once (threads; each classifier itself is
    single-threaded). The scores do not depend on it, only the wall time does.
    """
    start = time.perf_counter()
    _check_columns(train, test, target, categorical, continuous)

    y_test = (test[target] == positive_label).to_numpy(dtype=np.int64)
    if len(np.unique(y_test)) < 2:
        raise ValueError(
            f"test frame has a single class for target {target!r} "
            f"(positive_label={positive_label!r}, {int(y_test.sum())} positive of {len(y_test)} "
            "rows); AUROC is undefined"
        )
    y_train = (train[target] == positive_label).to_numpy(dtype=np.int64)

    if len(np.unique(y_train)) < 2:
        auroc = dict.fromkeys(CLASSIFIERS, 0.5)
    else:
        features = [*categorical, *continuous]
        pre = make_preprocessor(categorical, continuous)
        x_train = pre.fit_transform(train[features])
        x_test = pre.transform(test[features])
        auroc = _fit_score_all(x_train, y_train, x_test, y_test, seed=seed, n_jobs=n_jobs)

    mean = float(np.mean([auroc[name] for name in CLASSIFIERS]))
    return UtilityScores(auroc=auroc, mean=mean, seconds=time.perf_counter() - start)


def _fit_score(
    clf: ClassifierMixin,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
) -> float:
    clf.fit(x_train, y_train)
    proba = clf.predict_proba(x_test)
    positive_col = list(clf.classes_).index(1)
    return float(roc_auc_score(y_test, proba[:, positive_col]))


def _fit_score_all(
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    seed: int,
    n_jobs: int,
) -> dict[str, float]:
    """AUROC of every classifier, keys in CLASSIFIERS order.

    Parallelism is across classifiers, not inside them: each classifier is single-threaded and
    up to ``n_jobs`` of them are fitted at once in threads (sklearn's tree builders and xgboost
    release the GIL). Results do not depend on ``n_jobs``: every classifier has its own fixed
    seed, and RandomForest/Bagging/XGBoost give the same model for any thread count.
    Inner parallelism (``n_jobs`` passed to RandomForest/Bagging/XGBoost) was slower: Bagging
    pays a process-pool start-up and xgboost's OpenMP threads spin-wait badly when the cores
    are shared, see ``scripts/bench/profile_utility.py``.
    """
    with warnings.catch_warnings():
        # lbfgs converges in ~70 iterations on Adult; a degenerate synthetic table may not
        # within max_iter, and the score is still that classifier's score: keep the log quiet.
        # (The filter is set here, in the calling thread, because catch_warnings is not
        # thread-safe.)
        warnings.simplefilter("ignore", ConvergenceWarning)
        if n_jobs <= 1:
            return {
                name: _fit_score(make_classifier(name, seed, 1), x_train, y_train, x_test, y_test)
                for name in CLASSIFIERS
            }
        with ThreadPoolExecutor(max_workers=min(n_jobs, len(CLASSIFIERS))) as pool:
            futures = {
                name: pool.submit(
                    _fit_score, make_classifier(name, seed, 1), x_train, y_train, x_test, y_test
                )
                for name in _LONGEST_FIRST
            }
            return {name: futures[name].result() for name in CLASSIFIERS}
