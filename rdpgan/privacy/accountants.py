"""Privacy accountants behind one small interface: build one, ask epsilon, plan steps or noise.

A *history* is a list of ``(noise_multiplier, sample_rate, steps)`` triples, each one a
Poisson-sampled Gaussian mechanism run ``steps`` times (a release with ``sample_rate=1`` and
``steps=1``, such as a noisy histogram, is a plain Gaussian mechanism). Every accountant composes
the whole history, so earlier releases are paid for by later planning.

Kinds:

* ``rdp``: Opacus's RDP accountant (Mironov et al.; Balle et al. 2020 conversion). Upper bound.
* ``moments``: the moments accountant of Abadi et al. 2016 (:mod:`rdpgan.privacy.moments`).
  Upper bound, usually the loosest.
* ``prv``: Opacus's PRV accountant (Gopi et al. 2021). We report the *upper* end of its error
  interval (estimate + ``PRV_EPS_ERROR`` at ``delta - delta/1000``), so it is an upper bound.
  It is by far the slowest; cost grows with the number of steps and with ``1/PRV_EPS_ERROR``.
* ``gdp``: Gaussian differential privacy through the central limit theorem (Bu et al. 2020), as
  in Opacus's ``GaussianAccountant``. It is an *approximation*, not a guaranteed upper bound
  (it can under-state epsilon, especially for few steps or large sample rates); see
  :func:`is_upper_bound`.

Searches (:func:`max_steps`, :func:`calibrate_noise_multiplier`) never use Opacus's
``get_noise_multiplier``: its fixed bracket makes ``gdp`` raise a root-finding error on ordinary
inputs (e.g. q=0.01, 1000 steps, epsilon=8). Ours shrink a bracket whose feasible end has been
evaluated, and treat any exception, nan or inf from an accountant as *infeasible*: that can only
make an answer more conservative, never report a step count or noise level that overspends.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
from opacus.accountants import GaussianAccountant, PRVAccountant, RDPAccountant
from opacus.accountants.accountant import IAccountant
from opacus.accountants.analysis import gdp as gdp_analysis
from opacus.accountants.analysis import rdp as rdp_analysis
from scipy import optimize
from scipy.special import log_ndtr

from rdpgan.privacy.budget import ACCOUNTANTS
from rdpgan.privacy.moments import MomentsAccountant, merge_step
from rdpgan.privacy.moments import get_privacy_spent as moments_privacy_spent

History = list[tuple[float, float, int]]  # (noise_multiplier, sample_rate, steps)

# PRV accuracy: Opacus's default. The reported epsilon is the upper end of the error interval,
# so a larger value is still sound, only looser (and faster: cost scales ~ 1/PRV_EPS_ERROR).
PRV_EPS_ERROR = 0.01
# PRV discretises the privacy loss on a grid of ~ 2 L sqrt(T log(12/delta_err) / 2) / eps_error
# points (L: an RDP bound at a tiny delta). Time and memory grow with it (7.5M points: ~20 s and
# several hundred MB per evaluation), so larger grids are refused with a ValueError instead of
# risking the OOM killer; searches then treat them as infeasible. With eps_error=0.01 this caps
# PRV at roughly 10^5 steps for single-digit epsilons.
PRV_MAX_GRID_POINTS = 5_000_000
# Relative precision of calibrate_noise_multiplier: the returned sigma is feasible and
# sigma / (1 + SIGMA_RTOL) is not (typically 5-8 accountant evaluations, see _refine).
SIGMA_RTOL = 1e-3
# Search range for sigma. Below MIN_SIGMA training is effectively non-private and the
# accountants become numerically fragile, so a budget that allows less noise gets MIN_SIGMA.
MIN_SIGMA = 0.05
MAX_SIGMA = 1e5


def _check_kind(kind: str) -> None:
    if kind not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant kind {kind!r}; expected one of {ACCOUNTANTS}")


def _check_delta(delta: float) -> None:
    if not (isinstance(delta, (int, float)) and 0.0 < delta < 1.0):
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def _as_history(history: Sequence[Sequence[float]] | None) -> History:
    """Validate and copy a history (entries may be lists, e.g. read back from JSON)."""
    out: History = []
    for entry in history or ():
        if len(entry) != 3:
            raise ValueError(f"history entries are (noise_multiplier, sample_rate, steps): {entry}")
        sigma, q, steps = float(entry[0]), float(entry[1]), entry[2]
        if not sigma >= 0.0:
            raise ValueError(f"noise_multiplier must be >= 0, got {sigma}")
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"sample_rate must be in [0, 1], got {q}")
        if isinstance(steps, bool) or int(steps) != steps or steps < 0:
            raise ValueError(f"steps must be a non-negative integer, got {steps!r}")
        out.append((sigma, q, int(steps)))
    return out


def _costly(history: History) -> History:
    """Drop entries that cost nothing (no steps, no sampling, infinite noise).

    They are no-ops for every accountant, and some Opacus code paths divide by them.
    """
    return [(s, q, t) for s, q, t in history if t > 0 and q > 0 and not math.isinf(s)]


def is_upper_bound(kind: str) -> bool:
    """Whether ``kind``'s epsilon is a guaranteed upper bound (False only for CLT-based gdp)."""
    _check_kind(kind)
    return kind != "gdp"


@lru_cache(maxsize=64)
def fixed_order(kind: str, target_epsilon: float, delta: float) -> float | None:
    """The one Rényi order at which a run's ledger evaluates rdp and moments (None for prv,
    gdp), fixed from the target and delta alone, before any release.

    Why one order: the plan (sampling rate, sigma, steps, which releases happen) follows
    released values, and RDP composes adaptively chosen mechanisms only at a fixed order (a
    Rényi filter, Feldman & Zrnic 2021): the best order picked after the plan would be a bound
    proven for no construction. The order is the best one for a Gaussian mechanism that spends
    exactly ``target_epsilon`` at ``delta`` (its RDP is linear in the order): the releases
    before training are Gaussian mechanisms, and DP-SGD's subsampled one nearly is at moderate
    orders (results/fixed_order_cost.md: what fixing it costs DP-SGD in noise).
    """
    _check_kind(kind)
    _check_delta(delta)
    if kind not in ("rdp", "moments") or not target_epsilon > 0:
        return None
    if kind == "rdp":
        orders = np.asarray(RDP_ORDERS, dtype=float)

        def best(scale: float) -> tuple[float, float]:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Optimal order is the")
                eps, order = rdp_analysis.get_privacy_spent(
                    orders=list(orders), rdp=scale * orders, delta=delta
                )
            return float(eps), float(order)

    else:
        orders = np.asarray(MomentsAccountant.DEFAULT_ORDERS, dtype=float)

        def best(scale: float) -> tuple[float, float]:
            eps, order = moments_privacy_spent(
                orders=orders, log_moments=scale * orders * (orders + 1), delta=delta
            )
            return float(eps), float(order)

    low, high = 0.0, 1.0
    while best(high)[0] < target_epsilon:
        high *= 2.0
    for _ in range(100):  # the scale at which the best order spends the target
        middle = 0.5 * (low + high)
        low, high = (middle, high) if best(middle)[0] < target_epsilon else (low, middle)
    return best(high)[1]


# --------------------------------------------------------------------------------------- gdp


def _gdp_mu(history: History, poisson: bool = True) -> float:
    """Total mu of a history: mu-GDP composes as sqrt(sum mu_i^2).

    Subsampled entries use Opacus's CLT formula (an approximation). Entries with sample rate 1
    are plain Gaussian mechanisms, exactly (sqrt(steps)/sigma)-GDP, so no CLT is needed there.
    """
    total = 0.0
    for sigma, q, steps in history:
        if sigma == 0:
            return math.inf
        if q >= 1.0:
            total += steps / sigma**2
            continue
        mu_fn = gdp_analysis.compute_mu_poisson if poisson else gdp_analysis.compute_mu_uniform
        with np.errstate(over="ignore", invalid="ignore"):
            mu = float(mu_fn(steps=steps, noise_multiplier=sigma, sample_rate=q))
        if not math.isfinite(mu):
            return math.inf
        total += mu**2
    return math.sqrt(total)


def gdp_mu(history: Sequence[Sequence[float]]) -> float:
    """mu of a history under the CLT (see :func:`_gdp_mu`): an approximation, not a bound."""
    return _gdp_mu(_costly(_as_history(history)))


def _gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong et al. 2019, Cor. 2.13), in log space so nothing overflows."""
    log_a = log_ndtr(-eps / mu + mu / 2.0)
    log_b = eps + log_ndtr(-eps / mu - mu / 2.0)
    return float(math.exp(log_a) * -math.expm1(min(log_b - log_a, 0.0)))


def gdp_epsilon(mu: float, delta: float) -> float:
    """Epsilon of mu-GDP at ``delta``, for every mu.

    Opacus's ``eps_from_mu`` root-finds on the fixed bracket [0, 500] and raises when the root is
    outside it: when even epsilon=0 meets delta (tiny mu; the answer is 0) or epsilon > 500.
    """
    _check_delta(delta)
    if mu == 0:
        return 0.0
    if not math.isfinite(mu):
        return math.inf
    if _gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while _gdp_delta(hi, mu) > delta:
        hi *= 2.0
        if hi > 1e9:
            return math.inf
    return float(optimize.brentq(lambda e: _gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-12))


class ComposingGaussianAccountant(GaussianAccountant):
    """Opacus's ``GaussianAccountant`` fixed to compose a whole history (mechanism ``gdp``).

    The Opacus class reads only ``history[-1]`` in ``get_epsilon`` (a pre-loaded prior release
    is silently dropped) and its ``step`` raises as soon as sigma or the sample rate differ from
    the last entry. This subclass merges steps like the RDP accountant and composes every entry
    (see :func:`_gdp_mu`). Still a CLT approximation, not an upper bound.
    """

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        merge_step(self.history, noise_multiplier, sample_rate)

    def get_epsilon(self, delta: float, poisson: bool = True, **kwargs) -> float:
        return gdp_epsilon(_gdp_mu(_costly(_as_history(self.history)), poisson), delta)


# --------------------------------------------------------------------------------------- rdp


# Opacus's default orders stop at 63, where the conversion alone costs ~0.1 at delta=1e-5 (a
# small release, or a whole run at epsilon 0.1, cannot be certified at all); the larger orders
# only add candidates to the minimum, so every epsilon is as tight or tighter.
OPACUS_ORDERS = tuple(RDPAccountant.DEFAULT_ALPHAS)  # what Opacus's PRV sizes its grid with
RDP_ORDERS = (*OPACUS_ORDERS, 80, 96, 128, 192, 256, 384, 512, 768, 1024)


@lru_cache(maxsize=4096)
def _rdp_per_step(sigma: float, q: float, orders: tuple[float, ...] = RDP_ORDERS) -> np.ndarray:
    """One step's RDP at ``orders``; cached because searches re-ask constantly."""
    out = np.asarray(
        rdp_analysis.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=list(orders)),
        dtype=float,
    )
    out.setflags(write=False)
    return out


class WideRDPAccountant(RDPAccountant):
    """Opacus's RDP accountant at :data:`RDP_ORDERS` unless told otherwise."""

    def get_privacy_spent(
        self, *, delta: float, alphas: list[float] | None = None
    ) -> tuple[float, float]:
        return super().get_privacy_spent(delta=delta, alphas=alphas or list(RDP_ORDERS))


def _rdp_epsilon(history: History, delta: float, orders: tuple[float, ...] = RDP_ORDERS) -> float:
    # Same numbers as WideRDPAccountant.get_epsilon (compute_rdp is linear in steps), but cached.
    total = sum(_rdp_per_step(sigma, q, orders) * steps for sigma, q, steps in history)
    with warnings.catch_warnings():
        # Opacus warns when the best order is an end of its order list (e.g. at the small
        # epsilon of the label release alone): the bound is still valid, only perhaps not the
        # tightest, and the user cannot act on it.
        warnings.filterwarnings("ignore", message="Optimal order is the")
        eps, _ = rdp_analysis.get_privacy_spent(orders=list(orders), rdp=total, delta=delta)
    return float(eps)


# --------------------------------------------------------------------------------------- prv


def prv_grid_points(history: History, delta: float) -> int:
    """Size of the grid Opacus's PRV accountant would build (its own formulas, cheaply via RDP).

    Mirrors ``PRVAccountant._get_domain`` and ``compute_safe_domain_size`` (Opacus 1.6) with
    ``eps_error=PRV_EPS_ERROR`` and ``delta_error=delta/1000``.
    """
    history = _costly(_as_history(history))
    if not history:
        return 0
    delta_error = delta / 1000
    total = sum(steps for _, _, steps in history)
    half_width = _rdp_epsilon(history, delta_error / 4, OPACUS_ORDERS)
    for sigma, q, _ in history:
        half_width = max(
            half_width, _rdp_epsilon([(sigma, q, 1)], delta_error / (8 * total), OPACUS_ORDERS)
        )
    half_width = max(half_width, PRV_EPS_ERROR) + 3
    mesh = PRV_EPS_ERROR / math.sqrt(total * math.log(12 / delta_error) / 2)
    return int(2 * half_width / mesh) if math.isfinite(half_width) else 2**62


def _prv_epsilon(history: History, delta: float) -> float:
    points = prv_grid_points(history, delta)
    if points > PRV_MAX_GRID_POINTS:
        raise ValueError(
            f"the PRV accountant would need a grid of {points:.3g} points for this history "
            f"({sum(t for _, _, t in history)} steps), above PRV_MAX_GRID_POINTS="
            f"{PRV_MAX_GRID_POINTS:.3g}; use fewer steps or the rdp accountant"
        )
    accountant = PRVAccountant()
    accountant.history = history
    with warnings.catch_warnings():
        # Internal noise: an RDP bound used only to size PRV's grid ("optimal order is the
        # largest alpha") and log(0) at sample rate 1. Neither affects the result.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        # Opacus returns the upper end (estimate + eps_error at delta - delta_error);
        # tests/privacy/test_accountants.py checks that this stays true.
        return accountant.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR)


# ---------------------------------------------------------------------------------- factory

_CLASSES: dict[str, Callable[[], IAccountant]] = {
    "rdp": WideRDPAccountant,
    "moments": MomentsAccountant,
    "prv": PRVAccountant,
    "gdp": ComposingGaussianAccountant,
}


def make_accountant(kind: str, history: History | None = None) -> IAccountant:
    """An Opacus-compatible accountant of ``kind`` with ``history`` (e.g. prior releases) loaded.

    ``gdp`` gives :class:`ComposingGaussianAccountant` (a ``GaussianAccountant`` that composes
    the whole history); the rest are the Opacus classes and :class:`MomentsAccountant`.
    Their ``get_epsilon(delta)`` defaults give the same numbers as :func:`epsilon` (for prv,
    without the grid-size guard).
    """
    _check_kind(kind)
    accountant = _CLASSES[kind]()
    accountant.history = _as_history(history)
    return accountant


def epsilon(kind: str, history: History, delta: float, order: float | None = None) -> float:
    """Epsilon spent by the whole ``history`` at ``delta`` (0.0 for an empty history).

    ``order``: the one Rényi order rdp and moments evaluate at (:func:`fixed_order`; None:
    the best of their orders, valid only for a plan fixed in advance). Ignored by prv and gdp.

    An upper bound for rdp, moments and prv (PRV: the upper end of its error interval); a CLT
    approximation for gdp. Never nan: a non-finite result is reported as inf. Accountant
    errors propagate (the searches below turn them into "infeasible"), including PRV's
    refusal of grids above ``PRV_MAX_GRID_POINTS``.
    """
    _check_kind(kind)
    _check_delta(delta)
    history = _costly(_as_history(history))
    if not history:
        return 0.0
    if any(sigma == 0 for sigma, _, _ in history):
        return math.inf  # a noiseless release of private data
    if kind == "rdp":
        eps = _rdp_epsilon(history, delta, RDP_ORDERS if order is None else (order,))
    elif kind == "gdp":
        eps = gdp_epsilon(_gdp_mu(history), delta)
    elif kind == "prv":
        eps = _prv_epsilon(history, delta)
    else:
        accountant = MomentsAccountant()
        accountant.history = history
        eps = accountant.get_epsilon(delta=delta, orders=None if order is None else (int(order),))
    eps = float(eps)
    if math.isnan(eps):
        return math.inf
    return max(eps, 0.0)


def _epsilon_or_inf(kind: str, history: History, delta: float, order: float | None = None) -> float:
    """Epsilon for search purposes: any failure counts as infeasible (inf)."""
    try:
        with warnings.catch_warnings():
            # "optimal order is the largest alpha" etc. are expected at the search's extremes.
            warnings.simplefilter("ignore")
            eps = epsilon(kind, history, delta, order)
    except Exception:  # e.g. Opacus PRV/GDP numerical errors at extreme inputs
        return math.inf
    return eps if math.isfinite(eps) else math.inf


def _check_search(kind: str, sigma: float | None, q: float, target: float, delta: float) -> None:
    _check_kind(kind)
    _check_delta(delta)
    if not 0.0 < q <= 1.0:
        raise ValueError(f"sample_rate must be in (0, 1], got {q}")
    if sigma is not None and not sigma >= 0.0:
        raise ValueError(f"noise_multiplier must be >= 0, got {sigma}")
    if not (isinstance(target, (int, float)) and target > 0 and not math.isnan(target)):
        raise ValueError(f"target_epsilon must be positive, got {target!r}")


def _refine(
    excess: Callable[[float], float],
    good: float,
    g_good: float,
    bad: float,
    g_bad: float,
    width: float,
    propose: Callable[[float, float, float], float],
) -> float:
    """Shrink a bracket to ``|bad - good| <= width``; return the feasible end ``good``.

    ``excess(x) = epsilon - target`` is <= 0 at ``good`` and > 0 (possibly inf) at ``bad``.
    Illinois-style regula falsi (falls back to bisection while an end is inf): epsilon is smooth
    in the search variable, so this needs a handful of evaluations where bisection needs ~10-20,
    which matters for PRV. Only evaluated points become ends, so ``good`` is always feasible.
    ``propose(x, good, bad)`` rounds/clamps a trial point strictly inside the bracket.
    """
    retained = 0  # +1: ``good`` moved last time, -1: ``bad`` moved last time
    while abs(bad - good) > width:
        if math.isfinite(g_bad) and g_bad > g_good:
            trial = good + (bad - good) * (-g_good) / (g_bad - g_good)
        else:
            trial = 0.5 * (good + bad)
        trial = propose(trial, good, bad)
        g_trial = excess(trial)
        if g_trial <= 0:
            good, g_good = trial, g_trial
            if retained == +1:
                g_bad *= 0.5  # ``bad`` kept twice: pull the next trial towards it
            retained = +1
        else:
            bad, g_bad = trial, g_trial
            if retained == -1:
                g_good *= 0.5
            retained = -1
    return good


def max_steps(
    kind: str,
    prior: History,
    noise_multiplier: float,
    sample_rate: float,
    target_epsilon: float,
    delta: float,
    limit: int = 10_000_000,
    order: float | None = None,
) -> int:
    """Largest T in [0, limit] with ``epsilon(prior + [(sigma, q, T)]) <= target_epsilon``.

    Why a search: it turns "stop before overspending" into one counter per step. The answer
    is exact: both T and T + 1 are evaluated, so eps(T) <= target < eps(T + 1) unless
    T == limit (epsilon is monotone in T, so this is the largest such T). Returns 0 when the
    prior alone or a single step overspends. Doubling from T=2 finds a bracket (PRV starts from
    the RDP answer instead, as PRV is usually a little tighter), then :func:`_refine`. PRV's cost
    grows with T, so passing the largest T you could use as ``limit`` keeps it cheap.
    """
    _check_search(kind, noise_multiplier, sample_rate, target_epsilon, delta)
    if isinstance(limit, bool) or int(limit) != limit or limit < 0:
        raise ValueError(f"limit must be a non-negative integer, got {limit!r}")
    limit = int(limit)
    prior = _as_history(prior)

    def excess(steps: float) -> float:
        history = [*prior, (noise_multiplier, sample_rate, int(steps))]
        return _epsilon_or_inf(kind, history, delta, order) - target_epsilon

    if limit == 0 or excess(0) > 0:
        return 0
    g1 = excess(1)
    if g1 > 0:
        return 0
    good, g_good = 1, g1
    start = 2
    if kind == "prv":
        start = max_steps(
            "rdp", prior, noise_multiplier, sample_rate, target_epsilon, delta, limit, order
        )
    trial = min(max(start, 2), limit)
    while True:  # find an infeasible end (or the limit), doubling up from a feasible one
        if trial <= good:
            return good  # only when good == limit
        g_trial = excess(trial)
        if g_trial > 0:
            bad, g_bad = trial, g_trial
            break
        good, g_good = trial, g_trial
        trial = min(2 * trial, limit)

    def propose(x: float, a: float, b: float) -> float:
        lo, hi = min(a, b), max(a, b)
        return float(min(max(round(x), lo + 1), hi - 1))

    return int(_refine(excess, good, g_good, bad, g_bad, 1.0, propose))


def calibrate_noise_multiplier(
    kind: str,
    prior: History,
    sample_rate: float,
    steps: int,
    target_epsilon: float,
    delta: float,
    order: float | None = None,
) -> float:
    """Smallest sigma (to ``SIGMA_RTOL`` relative) with ``epsilon(prior + [(sigma, q, steps)])
    <= target_epsilon``, so that a planned run ends exactly at the budget.

    The search keeps the feasible end, so the returned sigma always meets the target, and
    sigma / (1 + SIGMA_RTOL) does not (sigma below ``MIN_SIGMA`` is not searched: MIN_SIGMA is
    returned if it is already feasible). Raises ValueError when no sigma up to ``MAX_SIGMA``
    works, e.g. when the prior alone spends the budget. Bracketing by factors of 2 from
    sigma=1 (PRV: from the RDP answer, by factors of 1.25), then :func:`_refine` in log sigma;
    PRV typically needs ~5-8 of its slow evaluations.
    """
    _check_search(kind, None, sample_rate, target_epsilon, delta)
    if isinstance(steps, bool) or int(steps) != steps or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    steps = int(steps)
    prior = _as_history(prior)

    prior_eps = _epsilon_or_inf(kind, prior, delta, order)
    if not prior_eps <= target_epsilon:
        raise ValueError(
            f"the earlier releases alone spend epsilon={prior_eps:.4g} ({kind}, delta={delta:g}),"
            f" more than the target {target_epsilon:g}: no noise multiplier can fit any steps"
        )

    def excess(log_sigma: float) -> float:
        history = [*prior, (math.exp(log_sigma), sample_rate, steps)]
        return _epsilon_or_inf(kind, history, delta, order) - target_epsilon

    start, step = 0.0, math.log(2.0)
    if kind == "prv":  # PRV needs a little less noise than RDP: start there, step finely
        try:
            rdp_sigma = calibrate_noise_multiplier(
                "rdp", prior, sample_rate, steps, target_epsilon, delta, order
            )
            start, step = math.log(rdp_sigma), math.log(1.25)
        except ValueError:  # RDP cannot fit the plan, PRV (tighter) may: search from sigma=1
            pass
    log_min, log_max = math.log(MIN_SIGMA), math.log(MAX_SIGMA)
    start = min(max(start, log_min), log_max)
    g_start = excess(start)
    if g_start <= 0:  # walk down to an infeasible sigma
        good, g_good = start, g_start
        while True:
            trial = max(good - step, log_min)
            if trial >= good:
                return math.exp(good)  # MIN_SIGMA, exactly as evaluated
            g_trial = excess(trial)
            if g_trial > 0:
                bad, g_bad = trial, g_trial
                break
            good, g_good = trial, g_trial
    else:  # walk up to a feasible sigma
        bad, g_bad = start, g_start
        while True:
            if bad >= log_max:
                raise ValueError(
                    f"no noise multiplier up to {MAX_SIGMA:g} fits {steps} steps at sample rate"
                    f" {sample_rate:g} into epsilon={target_epsilon:g} ({kind}, delta={delta:g});"
                    f" the earlier releases already spend {prior_eps:.4g}"
                )
            trial = min(bad + step, log_max)
            g_trial = excess(trial)
            if g_trial <= 0:
                good, g_good = trial, g_trial
                break
            bad, g_bad = trial, g_trial

    width = math.log1p(SIGMA_RTOL)

    def propose(x: float, a: float, b: float) -> float:
        # Stay at least a third of the tolerance inside, so a trial next to the root also ends
        # the search from the other side.
        lo, hi = min(a, b), max(a, b)
        margin = min(width / 3.0, (hi - lo) / 2.0)
        return min(max(x, lo + margin), hi - margin)

    return math.exp(_refine(excess, good, g_good, bad, g_bad, width, propose))
