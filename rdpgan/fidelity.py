"""Fidelity: how much a table *looks like* the real one, marginal by marginal.

Both tables are cut into cells by the public discretisation (:mod:`rdpgan.data.discretize`,
``n_bins`` bins per wide numeric column), so the cells never depend on private rows, and every
score can be recomputed from the run directory. Scores, each a mean over marginals:

- ``tvd_1way``, ``tvd_2way``: total-variation distance of every 1-way and 2-way marginal
  (every column, the target included);
- ``tvd_3way_target``: of every (feature, feature, target) marginal;
- ``k_marginal``: in the style of NIST SDNist, 1000 × (1 − TVD) averaged over *all* 3-way
  marginals (1000 = identical; SDNist samples marginals at random, we take them all);
- ``association_difference``: mean absolute difference of Cramér's V over column pairs, whose
  matrices (``association_real``, ``association_synthetic``) the quality report draws;
- ``duplicate_rows``: the share of the second table's rows that repeat one of its earlier rows
  exactly (every column, raw values; not binned). A resampler that matches marginals by
  repeating its best rows shows here, not in the TVDs (real Adult: 0.06% of its train split).

Why not SDMetrics (MIT-licensed, so usable): its column-shape and contingency metrics bin
numbers by ranges read off the data, and a score here must be cut by the public schema only
(and be recomputable from a run directory); it would also bring plotly and more for what is a
few histograms here, and copulas (Business Source License) with it.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from rdpgan.data.discretize import joint_counts, table_codes, table_sizes
from rdpgan.data.schema import Schema

#: Bins per wide numeric column in every fidelity score.
FIDELITY_BINS = 20


def _joint(codes: np.ndarray, sizes: list[int], columns: tuple[int, ...]) -> np.ndarray:
    """The normalised histogram of ``codes`` over the cells of ``columns``."""
    counts = joint_counts([codes[:, c] for c in columns], [sizes[c] for c in columns])
    return counts / max(len(codes), 1)


def _tvd(a: np.ndarray, b: np.ndarray, sizes: list[int], columns: tuple[int, ...]) -> float:
    return 0.5 * float(np.abs(_joint(a, sizes, columns) - _joint(b, sizes, columns)).sum())


def cramers_v(codes: np.ndarray, sizes: list[int], i: int, j: int) -> float:
    """Cramér's V of columns i and j (0: independent, 1: one determines the other)."""
    joint = _joint(codes, sizes, (i, j))
    rows, cols = joint.sum(1), joint.sum(0)
    rows, cols = rows[rows > 0], cols[cols > 0]
    k = min(len(rows), len(cols))
    if k < 2:
        return 0.0
    joint = joint[np.ix_(joint.sum(1) > 0, joint.sum(0) > 0)]
    expected = np.outer(rows, cols)
    chi2_over_n = float(((joint - expected) ** 2 / expected).sum())
    return float(np.sqrt(min(chi2_over_n / (k - 1), 1.0)))


def association_matrix(codes: np.ndarray, sizes: list[int]) -> np.ndarray:
    """Cramér's V for every pair of columns (1 on the diagonal)."""
    n = len(sizes)
    matrix = np.eye(n)
    for i, j in combinations(range(n), 2):
        matrix[i, j] = matrix[j, i] = cramers_v(codes, sizes, i, j)
    return matrix


def per_column_tvd(
    real: pd.DataFrame, synthetic: pd.DataFrame, schema: Schema, n_bins: int = FIDELITY_BINS
) -> dict[str, float]:
    """1-way TVD of each column, by name (what the quality report lists)."""
    a, b = table_codes(schema, real, n_bins), table_codes(schema, synthetic, n_bins)
    sizes = table_sizes(schema, n_bins)
    return {c.name: _tvd(a, b, sizes, (i,)) for i, c in enumerate(schema.columns)}


def fidelity_scores(
    real: pd.DataFrame,
    synthetic: pd.DataFrame,
    schema: Schema,
    target: str,
    n_bins: int = FIDELITY_BINS,
) -> dict[str, Any]:
    """The scores listed in the module docstring, of ``synthetic`` against ``real`` (both
    conformed to ``schema``)."""
    a, b = table_codes(schema, real, n_bins), table_codes(schema, synthetic, n_bins)
    sizes = table_sizes(schema, n_bins)
    n = len(sizes)
    label = schema.names.index(target)
    features = [i for i in range(n) if i != label]
    one = [_tvd(a, b, sizes, (i,)) for i in range(n)]
    two = [_tvd(a, b, sizes, pair) for pair in combinations(range(n), 2)]
    with_target = [_tvd(a, b, sizes, (i, j, label)) for i, j in combinations(features, 2)]
    three = [_tvd(a, b, sizes, triple) for triple in combinations(range(n), 3)]
    real_v, synthetic_v = association_matrix(a, sizes), association_matrix(b, sizes)
    upper = np.triu_indices(n, k=1)
    return {
        "bins": n_bins,
        "tvd_1way": float(np.mean(one)),
        "tvd_2way": float(np.mean(two)) if two else 0.0,
        "tvd_3way_target": float(np.mean(with_target)) if with_target else 0.0,
        "k_marginal": float(1000.0 * (1.0 - np.mean(three))) if three else 1000.0,
        "association_difference": float(np.abs(real_v - synthetic_v)[upper].mean())
        if n > 1
        else 0.0,
        "duplicate_rows": float(synthetic.duplicated().mean()) if len(synthetic) else 0.0,
        "columns": schema.names,
        "association_real": real_v.round(4).tolist(),
        "association_synthetic": synthetic_v.round(4).tolist(),
    }
