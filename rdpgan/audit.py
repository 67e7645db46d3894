"""An empirical membership-inference audit of a synthetic table.

The attacker sees the synthetic table (and, for the density-ratio attack, some real rows from
the population that were not used for training) and must tell the training rows (members)
from held-out real rows (non-members). Every attack outputs a score per row, higher meaning
"member"; its ROC is what the report draws under the DP guarantee's bound. Distances are
Euclidean in the transformer's encoding (one-hot blocks) with each wide numeric column's
position within its bin (in [-1, 1]), so every column counts on the same scale and a copied
row is closer than a row that only shares its bins.

- ``distance to closest record`` (DCR): members sit closer to a synthetic row if the generator
  copied them.
- ``density ratio`` (DOMIAS-style, van Breugel et al. 2023): the synthetic table is denser than
  the population around members; densities by k-nearest-neighbour distances, the population's
  from a reference half of the held-out rows (the other half are the non-members scored).

Also the exact-copy rate: the share of synthetic rows identical to some training row, against
the same share for an equal number of held-out rows (what chance alone gives).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.neighbors import NearestNeighbors

from rdpgan.transform import TableTransformer

NEIGHBOURS = 5
FPR_TARGETS = (0.01, 0.001)


@dataclass
class AttackResult:
    name: str
    auc: float
    fpr: np.ndarray
    tpr: np.ndarray
    tpr_at: dict[float, float]


@dataclass
class AuditResult:
    attacks: list[AttackResult]
    members: int
    non_members: int
    copies_of_train: float
    copies_of_holdout: float


def _encoded(transformer: TableTransformer, frame: pd.DataFrame) -> np.ndarray:
    features = transformer.encode(frame)
    within = transformer.within_bins(frame).astype(np.float32)
    labels = np.eye(transformer.n_classes, dtype=np.float32)[transformer.encode_labels(frame)]
    return np.concatenate([features, within, labels], axis=1)


def _kth_distance(reference: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    k = min(k, len(reference))
    distances, _ = NearestNeighbors(n_neighbors=k).fit(reference).kneighbors(queries)
    return distances[:, -1]


def _attack(name: str, scores: np.ndarray, is_member: np.ndarray) -> AttackResult:
    fpr, tpr, _ = roc_curve(is_member, scores)
    tpr_at = {target: float(tpr[fpr <= target].max()) for target in FPR_TARGETS}
    return AttackResult(name, float(roc_auc_score(is_member, scores)), fpr, tpr, tpr_at)


def exact_copy_rate(synthetic: pd.DataFrame, rows: pd.DataFrame) -> float:
    """Share of synthetic rows equal (every column, floats to 9 digits) to one of ``rows``."""

    def keys(frame: pd.DataFrame) -> pd.Series:
        rounded = frame.apply(lambda c: c.round(9) if c.dtype.kind == "f" else c)
        return pd.util.hash_pandas_object(rounded, index=False)

    return float(keys(synthetic).isin(set(keys(rows))).mean())


def audit(
    transformer: TableTransformer,
    train: pd.DataFrame,
    holdout: pd.DataFrame,
    synthetic: pd.DataFrame,
    seed: int = 0,
) -> AuditResult:
    """Score members (train rows) against non-members (held-out rows), balanced in number."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(holdout))
    reference = holdout.iloc[order[: len(order) // 2]]
    non_members = holdout.iloc[order[len(order) // 2 :]]
    members = train.iloc[
        rng.choice(len(train), size=min(len(train), len(non_members)), replace=False)
    ]
    queries = _encoded(transformer, pd.concat([members, non_members]))
    is_member = np.r_[np.ones(len(members)), np.zeros(len(non_members))]
    fake = _encoded(transformer, synthetic)
    to_synthetic = _kth_distance(fake, queries, 1)
    # log p_syn(x) - log p_ref(x) = dim * (log r_ref - log r_syn) for k-NN radii r: the
    # dimension only rescales the score, so the ROC needs just the log radius difference.
    tiny = 1e-12
    density_ratio = np.log(
        _kth_distance(_encoded(transformer, reference), queries, NEIGHBOURS) + tiny
    ) - np.log(_kth_distance(fake, queries, NEIGHBOURS) + tiny)
    attacks = [
        _attack("distance to closest record", -to_synthetic, is_member),
        _attack("density ratio (k-NN)", density_ratio, is_member),
    ]
    same_size_train = train.iloc[
        rng.choice(len(train), size=min(len(train), len(holdout)), replace=False)
    ]
    return AuditResult(
        attacks,
        len(members),
        len(non_members),
        exact_copy_rate(synthetic, same_size_train),
        exact_copy_rate(synthetic, holdout),
    )
