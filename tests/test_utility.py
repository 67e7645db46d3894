"""Tests for rdpgan.utility: the eight-classifier AUROC utility measure."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from rdpgan.utility import CLASSIFIERS, UtilityScores, classifier_auroc

CATEGORICAL = ["colour", "flag"]
CONTINUOUS = ["x1", "x2", "x3"]


def _table(n: int, seed: int, signal: bool = True) -> pd.DataFrame:
    """Two categorical and three continuous features; the label is a clear function of them
    (``signal=True``) or independent of them (``signal=False``)."""
    rng = np.random.default_rng(seed)
    x1, x2, x3 = rng.normal(size=(3, n))
    colour = rng.choice(["red", "green", "blue"], size=n)
    flag = rng.choice([0.0, 1.0], size=n)
    if signal:
        score = 2.0 * x1 - x2 + 1.5 * (colour == "red") - 1.0 * flag + 0.3 * rng.normal(size=n)
        label = score > np.median(score)
    else:
        label = rng.random(n) < 0.5
    return pd.DataFrame(
        {
            "x1": x1,
            "colour": colour,
            "x2": x2,
            "flag": flag,
            "x3": x3,
            "label": np.where(label, "yes", "no"),
        }
    )


def _auroc(train: pd.DataFrame, test: pd.DataFrame, **kw) -> UtilityScores:
    kw.setdefault("n_jobs", 1)
    return classifier_auroc(train, test, "label", "yes", CATEGORICAL, CONTINUOUS, **kw)


def test_signal_gives_high_auroc_for_every_classifier(capfd):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scores = _auroc(_table(600, seed=1), _table(1000, seed=2), n_jobs=2)
    assert tuple(scores.auroc) == CLASSIFIERS
    assert all(0.0 <= v <= 1.0 for v in scores.auroc.values())
    assert scores.mean > 0.85, scores.auroc
    assert min(scores.auroc.values()) > 0.7, scores.auroc
    assert scores.mean == pytest.approx(np.mean(list(scores.auroc.values())))
    assert scores.seconds > 0
    # no Python warnings and nothing printed (xgboost logs to stderr itself)
    assert [str(w.message) for w in caught] == []
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_independent_labels_give_chance_auroc():
    scores = _auroc(_table(600, seed=3, signal=False), _table(3000, seed=4, signal=False))
    # AUROC of an uninformative score on 3000 test rows has SD ~0.011.
    assert abs(scores.mean - 0.5) < 0.04, scores.auroc
    assert all(abs(v - 0.5) < 0.08 for v in scores.auroc.values()), scores.auroc


def test_one_class_train_scores_every_classifier_one_half():
    train = _table(200, seed=5)
    train["label"] = "no"
    scores = _auroc(train, _table(200, seed=6))
    assert scores.auroc == dict.fromkeys(CLASSIFIERS, 0.5)
    assert tuple(scores.auroc) == CLASSIFIERS
    assert scores.mean == 0.5
    # an all-positive or an empty train frame collapses the same way
    train["label"] = "yes"
    assert _auroc(train, _table(200, seed=6)).auroc == dict.fromkeys(CLASSIFIERS, 0.5)
    assert _auroc(train.iloc[:0], _table(200, seed=6)).mean == 0.5


def test_one_class_test_raises():
    test = _table(200, seed=6)
    test["label"] = "yes"
    with pytest.raises(ValueError, match="single class"):
        _auroc(_table(200, seed=5), test)


@pytest.mark.parametrize("which", ["train", "test"])
@pytest.mark.parametrize("column", ["x2", "flag", "label"])
def test_missing_column_raises_naming_it(which, column):
    frames = {"train": _table(100, seed=7), "test": _table(100, seed=8)}
    frames[which] = frames[which].drop(columns=column)
    with pytest.raises(ValueError, match=rf"'{column}'.*{which}"):
        _auroc(frames["train"], frames["test"])


def test_target_listed_as_feature_raises():
    with pytest.raises(ValueError, match="target"):
        classifier_auroc(
            _table(100, seed=7), _table(100, seed=8), "label", "yes", ["label"], CONTINUOUS
        )


def test_non_numeric_continuous_column_raises_naming_it():
    train = _table(100, seed=7)
    train["x3"] = "abc"
    with pytest.raises(ValueError, match="'x3'"):
        _auroc(train, _table(100, seed=8))


def test_nans_all_nan_columns_numeric_levels_and_unseen_categories():
    """Cervical-like: NaN in continuous columns (one all-NaN in train), categorical levels
    0.0/1.0/NaN, and test rows carrying levels and NaNs never seen in train."""
    rng = np.random.default_rng(9)
    train, test = _table(500, seed=10), _table(800, seed=11)
    train["x3"] = np.nan  # a synthetic table can leave a column empty
    train.loc[rng.random(500) < 0.2, "x1"] = np.nan
    train.loc[rng.random(500) < 0.1, "flag"] = np.nan
    train.loc[rng.random(500) < 0.1, "colour"] = None
    test.loc[rng.random(800) < 0.1, "x2"] = np.nan  # NaN where train had none
    test.loc[rng.random(800) < 0.1, "x3"] = np.inf
    test.loc[rng.random(800) < 0.1, "flag"] = 2.0  # unseen numeric level
    test.loc[rng.random(800) < 0.1, "colour"] = "purple"  # unseen string level
    scores = _auroc(train, test)
    assert tuple(scores.auroc) == CLASSIFIERS
    assert all(np.isfinite(v) and 0.0 <= v <= 1.0 for v in scores.auroc.values())
    assert scores.mean > 0.75, scores.auroc


def test_numeric_levels_match_across_dtypes():
    """Levels 0.0/1.0/NaN stored as float in train and as nullable ints in test are the same
    levels: the label depends on ``flag`` alone, so AUROC is high only if the encodings agree."""
    rng = np.random.default_rng(12)

    def frame(n, as_int):
        flag = rng.choice([0.0, 1.0, np.nan], size=n)
        label = np.where(np.isnan(flag), rng.random(n) < 0.5, flag == 1.0)
        out = _table(n, seed=13)
        out["flag"] = pd.array(flag, dtype="Int64") if as_int else flag
        out["label"] = np.where(label, "yes", "no")
        return out

    scores = classifier_auroc(
        frame(400, as_int=False), frame(600, as_int=True), "label", "yes", ["flag"], [], n_jobs=1
    )
    assert min(scores.auroc.values()) > 0.8, scores.auroc


def test_same_seed_same_scores_and_to_dict():
    train, test = _table(300, seed=14), _table(300, seed=15)
    a = _auroc(train, test, seed=3, n_jobs=2)
    b = _auroc(train, test, seed=3, n_jobs=2)
    assert a.auroc == b.auroc
    assert a.mean == b.mean
    # parallelism is across classifiers; it must not change any score
    assert _auroc(train, test, seed=3, n_jobs=1).auroc == a.auroc
    d = a.to_dict()
    assert set(d) == {"auroc", "mean", "seconds"}
    assert list(d["auroc"]) == list(CLASSIFIERS)
    assert d["auroc"] == a.auroc and d["mean"] == a.mean
