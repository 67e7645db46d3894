"""Reference marginal-based DP synthesizers for the benchmark: AIM and MST.

**These are benchmark references, not part of rdpgan.** They exist so that
``scripts/bench/benchmark.py`` can score rdp_cgan against the strongest published peers for tabular
DP synthesis on exactly the same splits, metrics and public discretisation. Their noise comes from a
numpy ``Generator`` (and, inside ``mbi``'s sampler, numpy's global generator), seeded per benchmark
cell so a cell can be re-run: fine for a reference, but not the secret randomness a release needs
(rdpgan's own runs draw theirs from OS entropy). Nothing here writes to an rdpgan ledger.

Both work on a table cut into cells by **our public discretisation**
(:mod:`rdpgan.data.discretize`, ``PEER_BINS`` = 32 bins per wide numeric column): codes and
domain sizes depend on the declared schema alone, never on the private rows (a value outside the
declared bounds is clipped into the edge bin). The synthetic codes are decoded back with the same
rule: a categorical code is its level, a numeric bin a value drawn uniformly within it.

- **MST** (McKenna, Miklau & Sheldon, *Winning the NIST Contest*, 2021): measure every 1-way
  marginal, merge each column's codes whose noisy count is below 3σ into one, privately pick a
  maximum spanning tree of the column pairs (weight: L1 error of the independence model on the
  pair; one exponential-mechanism draw per edge), measure the tree's 2-way marginals, and fit a
  graphical model to all measurements with Private-PGM (5000 mirror-descent steps). The budget is
  split in thirds (1-way marginals, tree selection, 2-way marginals).
- **AIM** (McKenna, Mullins, Sheldon & Miklau, *AIM: An Adaptive and Iterative Mechanism*, 2022):
  measure every 1-way marginal, then round after round pick (exponential mechanism) the marginal of
  the workload's downward closure that the current model gets most wrong, weighted by its overlap
  with the workload (all 2-way marginals of at most ``max_cells`` cells), measure it, and refit the
  model; the model may only grow as fast as the budget is spent (``max_model_size`` MB in all), and
  the noise is halved when a measurement stops changing the model. ``rounds`` fixes the per-round
  budget (ρ/rounds, 90% to measurement and 10% to selection, the 1-way marginals counting as one
  round each): AIM's own default of 16·columns takes hours on Adult, so the benchmark caps it
  (48 by default); the number of select-measure rounds actually run is returned. Each refit is
  1000 mirror-descent steps, warm-started from the previous model.

Accounting: zero-concentrated DP (zCDP) under add/remove-one-row neighbours, where every count
marginal has L1 and L2 sensitivity 1. A Gaussian measurement with noise σ costs ρ = 1/(2σ²); an
exponential-mechanism draw at ε₀ with quality sensitivity Δ (scores scaled by ε₀/(2Δ)) is ε₀-DP
and so ε₀²/8-zCDP (Cesar & Rogers 2021, bounded range); zCDP composes by adding ρ. The target
(ε, δ) becomes ρ by the conversion of Canonne, Kamath & Steinke (2020): the largest ρ for which
``delta_of_zcdp(ρ, ε) = inf_{α>1} exp((α-1)(αρ-ε)) / α · (1-1/α)^(α-1) ≤ δ`` (tighter than the
standard ε = ρ + 2√(ρ log(1/δ)), :func:`rho_standard`). The mechanisms spend exactly that ρ, so a
run is (ε, δ)-DP **by the zCDP accounting of the mechanism**: the benchmark records
``epsilon_spent`` = the target ε on that basis, not from an rdpgan accountant.

The graphical-model estimation and sampling come from Private-PGM (PyPI ``mbi``, the ``bench``
extra: ``pip install -e .[bench]``, mbi 2.0.0); selection, measurement, the budget split and the
model marginals that selection scores (:class:`_ModelMarginals`) are written here.
mbi runs on JAX; with two cores set ``OMP_NUM_THREADS=1`` and
``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"`` to keep a run
on one core.
"""

from __future__ import annotations

import importlib
import itertools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from rdpgan.data.discretize import Bins, table_codes, table_sizes
from rdpgan.data.schema import Categorical, Schema

#: Bins per wide numeric column for the peers (the issue's "32 bins").
PEER_BINS = 32
PEERS = ("aim", "mst")
INSTALL_HINT = "install the bench extra: pip install -e .[bench]"
#: AIM's budget granularity when the benchmark does not say (see the module docstring).
DEFAULT_AIM_ROUNDS = 48


class PeerUnavailable(RuntimeError):
    """The ``mbi`` package (the ``bench`` extra) is not installed."""


def load_mbi() -> Any:
    """Import ``mbi`` (quietly: its import warns about JAX settings that do not matter here)."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module="mbi")
            return importlib.import_module("mbi")
    except ImportError as exc:
        raise PeerUnavailable(f"the marginal peers need the mbi package: {INSTALL_HINT}") from exc


# ---------------------------------------------------------------------------------------------
# (ε, δ) → zCDP ρ


def delta_of_zcdp(rho: float, epsilon: float) -> float:
    """A δ such that ρ-zCDP implies (ε, δ)-DP (Canonne, Kamath & Steinke 2020, Prop. 7).

    Every α > 1 gives a valid bound ``exp((α-1)(αρ-ε)) / α · (1-1/α)^(α-1)``; the numerical
    search only picks a good α, and the bound is evaluated exactly at it, so an imperfect search
    errs on the safe (larger δ) side.
    """
    if rho <= 0.0:
        return 0.0

    def log_delta(alpha: float) -> float:
        return (
            (alpha - 1.0) * (alpha * rho - epsilon)
            - math.log(alpha)
            + (alpha - 1.0) * math.log1p(-1.0 / alpha)
        )

    # The optimal α is at least (1 + ε/ρ)/2 and below (ε + 1)/(2ρ) + 2 (from the derivative).
    upper = (epsilon + 1.0) / (2.0 * rho) + 2.0
    found = minimize_scalar(log_delta, bounds=(1.0 + 1e-9, upper), method="bounded")
    best = min(log_delta(float(found.x)), log_delta(upper))
    return min(1.0, math.exp(best))


def rho_from_dp(epsilon: float, delta: float) -> float:
    """The largest ρ (to 1e-12 relative) with ρ-zCDP ⟹ (ε, δ)-DP by :func:`delta_of_zcdp`."""
    if epsilon <= 0.0 or not 0.0 < delta < 1.0:
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, got ({epsilon}, {delta})")
    low = rho_standard(epsilon, delta)  # feasible: the looser conversion
    high = max(2.0 * low, epsilon)
    while delta_of_zcdp(high, epsilon) <= delta:  # (bracket the boundary from above)
        low, high = high, 2.0 * high
    while high - low > 1e-12 * high:
        middle = (low + high) / 2.0
        if delta_of_zcdp(middle, epsilon) <= delta:
            low = middle
        else:
            high = middle
    return low


def rho_standard(epsilon: float, delta: float) -> float:
    """ρ solving ε = ρ + 2√(ρ log(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    log_inv = math.log(1.0 / delta)
    return (math.sqrt(log_inv + epsilon) - math.sqrt(log_inv)) ** 2


# ---------------------------------------------------------------------------------------------
# Public discretisation in and out


def encode(schema: Schema, frame: pd.DataFrame) -> tuple[np.ndarray, list[int]]:
    """[rows, columns] codes of a conformed frame and the domain size of each column, both from
    the public discretisation at ``PEER_BINS`` (the sizes from the schema alone)."""
    return table_codes(schema, frame, PEER_BINS), table_sizes(schema, PEER_BINS)


def decode(schema: Schema, codes: np.ndarray, rng: np.random.Generator) -> pd.DataFrame:
    """A conformed frame from codes: levels for categorical columns, a uniform value within the
    bin for numeric ones (exact values on an integer grid, point masses and missing as coded)."""
    columns = {}
    for i, column in enumerate(schema.columns):
        if isinstance(column, Categorical):
            columns[column.name] = column.decode(codes[:, i]).to_numpy()
        else:
            offsets = rng.uniform(-1.0, 1.0, len(codes))
            columns[column.name] = Bins(column, PEER_BINS).values(codes[:, i], offsets)
    return schema.conform(pd.DataFrame(columns))


# ---------------------------------------------------------------------------------------------
# Shared pieces


@dataclass(frozen=True)
class PeerOutput:
    """What a peer returns: synthetic codes and what it spent."""

    codes: np.ndarray  # [rows, columns], the input's coding
    rho: float  # the zCDP budget it was given
    rho_spent: float  # what its mechanisms add up to (equals rho up to rounding)
    rounds_run: int | None = None  # AIM: select-measure rounds after the 1-way marginals


def _names(d: int) -> list[str]:
    return [f"c{i}" for i in range(d)]


def _counts(codes: np.ndarray, sizes: list[int], clique: tuple[int, ...]) -> np.ndarray:
    """The flat (C-order) count vector of the marginal on ``clique`` (column indices, sorted)."""
    shape = tuple(sizes[c] for c in clique)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in clique), shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(float)


def _exponential_mechanism(
    quality: np.ndarray, epsilon: float, sensitivity: float, rng: np.random.Generator
) -> int:
    """Index drawn with probability ∝ exp(ε·q/(2Δ)): ε-DP, ε²/8-zCDP."""
    logits = epsilon / (2.0 * sensitivity) * (quality - quality.max())
    weights = np.exp(logits)
    return int(rng.choice(len(quality), p=weights / weights.sum()))


def _fit(mbi: Any, domain: Any, measurements: list, iters: int, warm_start: Any = None) -> Any:
    return mbi.estimation.MirrorDescent().estimate(
        domain, measurements, iters=iters, warm_start=warm_start
    )


def _sample(model: Any, d: int, rng: np.random.Generator) -> np.ndarray:
    """Rows from the fitted model (as many as its noisy total). mbi's sampler draws from numpy's
    global generator: seed it from ``rng`` for the call, then put the caller's state back."""
    state = np.random.get_state()
    np.random.seed(int(rng.integers(2**32)))
    try:
        data = model.synthetic_data()
    finally:
        np.random.set_state(state)
    return np.stack([np.asarray(data.data[name], dtype=np.int64) for name in _names(d)], axis=1)


def _domain(mbi: Any, sizes: list[int]) -> Any:
    return mbi.Domain(_names(len(sizes)), sizes)


def _clique(indices: tuple[int, ...]) -> tuple[str, ...]:
    return tuple(f"c{i}" for i in indices)


class _ModelMarginals:
    """The 1- and 2-way marginals (counts) of a fitted model, read off its junction tree.

    mbi's ``model.project`` runs variable elimination jitted per (model structure, query):
    asked for every candidate in every AIM round that is thousands of XLA compilations (most of
    the run time, and enough executable mappings to crash the process on Adult). Here one
    message-passing call gives the beliefs of the junction tree's maximal cliques; a marginal
    inside one clique is a sum over it, and one across cliques chains the cliques on the tree
    path between them (clique marginals divided by separator marginals) in numpy.
    """

    def __init__(self, mbi: Any, model: Any):
        self.tree = mbi.junction_tree.make_junction_tree(model.domain, model.cliques)[0]
        cliques = list(self.tree.nodes)
        beliefs = mbi.marginal_oracles.message_passing_stable(model.potentials.expand(cliques), 1.0)
        self.tables = {
            clique: np.asarray(beliefs.project(clique).datavector(flatten=False), dtype=float)
            for clique in cliques
        }
        self.total = float(model.total)

    def _sum_to(self, clique: tuple[str, ...], keep: tuple[str, ...]) -> np.ndarray:
        """The clique's probability table summed down to ``keep`` (axes in ``keep``'s order)."""
        labels = {name: i for i, name in enumerate(clique)}
        return np.einsum(self.tables[clique], list(range(len(clique))), [labels[a] for a in keep])

    def counts(self, query: tuple[int, ...]) -> np.ndarray:
        """The flat (C-order) count vector of the model's marginal on 1 or 2 columns."""
        names = _clique(query)
        holding = [[c for c in self.tables if a in c] for a in names]
        both = [c for c in holding[0] if all(a in c for a in names)]
        if both:
            return self.total * self._sum_to(both[0], names).ravel()
        a, b = names
        paths = [
            nx.shortest_path(self.tree, start, end)
            for start in holding[0]
            for end in holding[1]
            if nx.has_path(self.tree, start, end)
        ]
        if not paths:  # different components of the model: independent
            return (
                self.total
                * np.outer(
                    self._sum_to(holding[0][0], (a,)), self._sum_to(holding[1][0], (b,))
                ).ravel()
            )
        path = min(paths, key=len)
        labels: dict[str, int] = {}
        operands: list[Any] = []
        for i, clique in enumerate(path):
            operands += [self.tables[clique], [labels.setdefault(v, len(labels)) for v in clique]]
            if i:
                separator = tuple(v for v in clique if v in path[i - 1])
                marginal = self._sum_to(clique, separator)
                inverse = np.divide(1.0, marginal, out=np.zeros_like(marginal), where=marginal > 0)
                operands += [inverse, [labels[v] for v in separator]]
        joint = np.einsum(*operands, [labels[a], labels[b]], optimize="greedy")
        return self.total * joint.ravel()


# ---------------------------------------------------------------------------------------------
# MST


def mst(
    codes: np.ndarray,
    sizes: list[int],
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    *,
    iters: int = 5000,
) -> PeerOutput:
    """MST on integer codes (see the module docstring); ``iters`` mirror-descent steps for the
    final fit."""
    mbi = load_mbi()
    d = codes.shape[1]
    rho = rho_from_dp(epsilon, delta)
    part = rho / 3.0

    # 1. Every 1-way marginal: d Gaussian measurements costing part in all.
    sigma1 = math.sqrt(d / (2.0 * part))
    noisy1 = [_counts(codes, sizes, (c,)) + rng.normal(0.0, sigma1, sizes[c]) for c in range(d)]

    # 2. Merge rare codes (post-processing of the noisy counts): each column keeps its codes
    # whose noisy count is at least 3σ and gets one extra code for all the others.
    kept = [np.flatnonzero(y >= 3.0 * sigma1) for y in noisy1]
    forward, small_sizes, measurements1 = [], [], []
    for c, y in enumerate(noisy1):
        mapping = np.full(sizes[c], len(kept[c]), dtype=np.int64)
        mapping[kept[c]] = np.arange(len(kept[c]))
        merged = sizes[c] - len(kept[c])
        forward.append(mapping)
        small_sizes.append(len(kept[c]) + int(merged > 0))
        if merged == 0:
            measurements1.append(mbi.LinearMeasurement(y, _clique((c,)), stddev=sigma1))
        else:
            # The merged cell's noisy count is a sum of `merged` noisy counts (noise σ√merged);
            # dividing it and its query by √merged keeps every entry's noise at σ.
            scale = np.ones(small_sizes[c])
            scale[-1] = 1.0 / math.sqrt(merged)
            values = np.append(y[kept[c]], y[mapping == len(kept[c])].sum()) * scale
            measurements1.append(
                mbi.LinearMeasurement(
                    values, _clique((c,)), stddev=sigma1, query=mbi.WeightedQuery(scale)
                )
            )
    small = np.stack([forward[c][codes[:, c]] for c in range(d)], axis=1)
    domain = _domain(mbi, small_sizes)

    # 3. The tree: the independence model fitted to the 1-way measurements; each pair weighted by
    # the L1 error of that model on it (sensitivity 1); d-1 exponential-mechanism draws (Kruskal
    # with private choices) share the second third.
    pairs = list(itertools.combinations(range(d), 2))
    tree: list[tuple[int, int]] = []
    if pairs:
        independent = _ModelMarginals(mbi, _fit(mbi, domain, measurements1, iters=1000))
        weights = {
            pair: float(np.abs(_counts(small, small_sizes, pair) - independent.counts(pair)).sum())
            for pair in pairs
        }
        eps_edge = math.sqrt(8.0 * part / (d - 1))
        component = list(range(d))

        def root(c: int) -> int:
            while component[c] != c:
                c = component[c]
            return c

        for _ in range(d - 1):
            open_pairs = [p for p in pairs if root(p[0]) != root(p[1])]
            quality = np.array([weights[p] for p in open_pairs])
            chosen = open_pairs[_exponential_mechanism(quality, eps_edge, 1.0, rng)]
            tree.append(chosen)
            component[root(chosen[0])] = root(chosen[1])

    # 4. The tree's 2-way marginals: d-1 Gaussian measurements costing the last third.
    measurements2 = []
    if tree:
        sigma2 = math.sqrt(len(tree) / (2.0 * part))
        for pair in tree:
            x = _counts(small, small_sizes, pair)
            y = x + rng.normal(0.0, sigma2, x.size)
            measurements2.append(mbi.LinearMeasurement(y, _clique(pair), stddev=sigma2))
    spent = d / (2.0 * sigma1**2)
    if tree:  # (a single column has no pairs: only the first third is spent)
        spent += len(tree) * eps_edge**2 / 8.0 + len(tree) / (2.0 * sigma2**2)

    # 5. Fit, sample, and spread each merged code uniformly over the codes it stands for.
    model = _fit(mbi, domain, measurements1 + measurements2, iters=iters)
    synthetic = _sample(model, d, rng)
    out = np.empty_like(synthetic)
    for c in range(d):
        original = np.append(kept[c], -1)[synthetic[:, c]]  # the merged code -> -1
        merged_rows = original < 0
        if merged_rows.any():
            rare = np.flatnonzero(forward[c] == len(kept[c]))
            original[merged_rows] = rng.choice(rare, int(merged_rows.sum()))
        out[:, c] = original
    return PeerOutput(out, rho, spent)


# ---------------------------------------------------------------------------------------------
# AIM


def _downward_closure(cliques: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    closure = {
        sub for clique in cliques for r in range(1, len(clique) + 1)
        for sub in itertools.combinations(clique, r)
    }  # fmt: skip
    return sorted(closure, key=lambda c: (len(c), c))


def _small_enough(mbi: Any, model: Any, cliques: list, size_limit: float) -> list:
    """The cliques the model already covers, or that would keep it within ``size_limit`` MB."""
    have = [tuple(clique) for clique in model.cliques]
    free = set(_downward_closure([tuple(int(a[1:]) for a in clique) for clique in have]))
    size = mbi.junction_tree.hypothetical_model_size
    return [
        clique
        for clique in cliques
        if clique in free or size(model.domain, [*have, _clique(clique)]) <= size_limit
    ]


def _excess_error(
    model: _ModelMarginals, clique: tuple[int, ...], answer: np.ndarray, sigma: float
) -> float:
    """The model's L1 error on ``clique`` less what measuring it would leave anyway
    (E|N(0, σ²)| = σ√(2/π) per cell)."""
    estimate = model.counts(clique)
    return float(np.abs(answer - estimate).sum()) - math.sqrt(2.0 / math.pi) * sigma * answer.size


def aim(
    codes: np.ndarray,
    sizes: list[int],
    epsilon: float,
    delta: float,
    rounds: int,
    rng: np.random.Generator,
    *,
    max_model_size: float = 80.0,
    max_iters: int = 1000,
    max_cells: int = 10_000,
    log: Callable[[str], None] | None = None,
) -> PeerOutput:
    """AIM on integer codes (see the module docstring). ``rounds`` (≥ the number of columns)
    sets the per-round budget ρ/rounds; ``max_iters`` mirror-descent steps per refit; ``log``
    gets one line per round."""
    mbi = load_mbi()
    d = codes.shape[1]
    if rounds < d:
        raise ValueError(f"AIM needs rounds >= the number of columns ({d}), got {rounds}")
    rho = rho_from_dp(epsilon, delta)
    domain = _domain(mbi, sizes)

    # Workload: every 2-way marginal small enough (every 1-way one for a single column), weight 1;
    # a candidate's weight is its overlap with the workload.
    workload = [
        pair
        for pair in itertools.combinations(range(d), 2)
        if math.prod(sizes[c] for c in pair) <= max_cells
    ] or [(c,) for c in range(d)]
    candidates = {
        clique: float(sum(len(set(clique) & set(w)) for w in workload))
        for clique in _downward_closure(workload)
    }
    answers = {clique: _counts(codes, sizes, clique) for clique in candidates}

    sigma = math.sqrt(rounds / (2.0 * 0.9 * rho))
    eps_select = math.sqrt(8.0 * 0.1 * rho / rounds)
    measurements = []
    for c in range(d):
        y = _counts(codes, sizes, (c,)) + rng.normal(0.0, sigma, sizes[c])
        measurements.append(mbi.LinearMeasurement(y, _clique((c,)), stddev=sigma))
    spent = d / (2.0 * sigma**2)
    model = _fit(mbi, domain, measurements, iters=max_iters)
    marginals = _ModelMarginals(mbi, model)

    rounds_run = 0
    finished = False
    while not finished:
        remaining = rho - spent
        if remaining < 2.0 * (1.0 / (2.0 * sigma**2) + eps_select**2 / 8.0):
            # The last round takes whatever is left, split 90/10 as the others.
            sigma = math.sqrt(1.0 / (2.0 * 0.9 * remaining))
            eps_select = math.sqrt(8.0 * 0.1 * remaining)
            finished = True
        spent += 1.0 / (2.0 * sigma**2) + eps_select**2 / 8.0
        rounds_run += 1

        # The model may grow in proportion to the budget spent so far.
        size_limit = max_model_size * spent / rho
        # Quality: weighted excess error; its sensitivity is the largest weight.
        eligible = _small_enough(mbi, model, list(candidates), size_limit)
        quality = np.array(
            [candidates[cl] * _excess_error(marginals, cl, answers[cl], sigma) for cl in eligible]
        )
        sensitivity = max(candidates[clique] for clique in eligible)
        chosen = eligible[_exponential_mechanism(quality, eps_select, sensitivity, rng)]

        x = answers[chosen]
        y = x + rng.normal(0.0, sigma, x.size)
        measurements.append(mbi.LinearMeasurement(y, _clique(chosen), stddev=sigma))
        before = marginals.counts(chosen)
        model = _fit(mbi, domain, measurements, iters=max_iters, warm_start=model)
        marginals = _ModelMarginals(mbi, model)
        moved = float(np.abs(marginals.counts(chosen) - before).sum())
        if log is not None:
            log(
                f"aim round {rounds_run}: measured columns {chosen} with sigma {sigma:.1f}, "
                f"{spent / rho:.0%} of rho spent"
            )
        if moved <= math.sqrt(2.0 / math.pi) * sigma * x.size:
            # The measurement barely moved the model: measure more finely from now on.
            sigma /= 2.0
            eps_select *= 2.0

    if spent > rho * (1.0 + 1e-9):
        raise AssertionError(f"AIM overspent: {spent} > {rho}")
    return PeerOutput(_sample(model, d, rng), rho, spent, rounds_run)


# ---------------------------------------------------------------------------------------------
# Table in, table out


def synthesize(
    method: str,
    schema: Schema,
    frame: pd.DataFrame,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    rounds: int = DEFAULT_AIM_ROUNDS,
    log: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, PeerOutput]:
    """A synthetic table (conformed to ``schema``) from the conformed private ``frame``, by the
    peer ``method`` ("aim" or "mst") at (ε, δ); ``rounds`` is AIM's cap."""
    codes, sizes = encode(schema, frame)
    if method == "aim":
        output = aim(codes, sizes, epsilon, delta, rounds, rng, log=log)
    elif method == "mst":
        output = mst(codes, sizes, epsilon, delta, rng)
    else:
        raise ValueError(f"unknown peer {method!r}; choose from {', '.join(PEERS)}")
    return decode(schema, output.codes, rng), output
