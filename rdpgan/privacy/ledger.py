"""PrivacyLedger: every data-dependent release of a run, composed in one accountant.

The ledger is the single place that decides a run's epsilon. Each release (the noisy label
histogram, DP-SGD on the discriminator, a private schema, ...) is one entry. Gaussian entries
are (noise_multiplier, sample_rate, steps) triples that the run's accountant composes (RDP,
PRV, ...). Pure epsilon-DP entries (Laplace, exponential mechanism) carry their epsilon, and
approximate entries (a stability-based histogram) their (epsilon, delta): both are added to the
accountant's result by basic composition, which is valid for any accountant and under adaptive
choice. The accountant then gets what is left of delta: the run is (epsilon_spent, delta)-DP
with epsilon_spent = eps_accountant(delta - sum of their deltas) + sum of their epsilons.
Anything the user opted out of (a non-private baseline, a schema read off the data) is
written as a loud note and clears ``end_to_end``, so no output can look more private than it
is. ``privacy.json`` holds enough to recompute the epsilon from scratch (see
:func:`recompute_epsilon`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

from rdpgan.errors import UserInputError
from rdpgan.privacy import accountants
from rdpgan.privacy.budget import NON_PRIVATE, check_accountant

SEEDED_NOTE = (
    "reproducible run: the secret randomness (Poisson masks, DP noise) was keyed by a number "
    "given in the settings, not by fresh OS entropy; the guarantee holds only while that "
    "number is secret"
)
APPROXIMATE_NOTE = (
    "the {kind} accountant is an approximation, not an upper bound: epsilon_spent may be "
    "below the privacy actually spent"
)

NO_FILTER_NOTE = (
    "the {kind} accountant composes the run's plan as if it were fixed in advance, but the plan "
    "follows released values (the sampling rate, sigma, the steps): no filter is proven for it "
    "(rdp and moments compose at an order fixed before any release)"
)


# Release kinds added to the accountant's epsilon by basic composition.
BASIC_KINDS = ("pure", "approximate")


class BudgetExhausted(UserInputError):
    """Raised instead of a release or step that would push epsilon past the target.

    A user error: a budget split that cannot be met (a release too costly for epsilon) is a
    settings problem, reported in one line like any other bad input.
    """


@dataclass
class Release:
    """One mechanism applied to private data: ``kind`` is ``gaussian`` (with its accounting
    triple), ``pure`` (with its ``epsilon``) or ``approximate`` (with ``epsilon`` and ``delta``)."""

    name: str
    kind: str
    noise_multiplier: float | None = None
    sample_rate: float | None = None
    steps: int = 0
    details: dict[str, Any] = field(default_factory=dict)
    epsilon: float | None = None
    delta: float | None = None

    def triple(self) -> tuple[float, float, int]:
        return (float(self.noise_multiplier), float(self.sample_rate), int(self.steps))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("details"))
        return out

    @classmethod
    def from_dict(cls, entry: dict[str, Any]) -> Release:
        """A release from its :meth:`to_dict` (a ``privacy.json`` entry): the keys that are
        not fields are its details, less what a ledger derives (its limit, its cost alone)."""
        if entry.get("kind") not in ("gaussian", *BASIC_KINDS):
            raise ValueError(f"unknown release kind {entry.get('kind')!r}")
        details = {k: v for k, v in entry.items() if k not in RELEASE_FIELDS}
        details.pop("step_limit", None)
        details.pop("epsilon_alone", None)
        return cls(**{k: entry.get(k) for k in RELEASE_FIELDS}, details=details)


RELEASE_FIELDS = ("name", "kind", "noise_multiplier", "sample_rate", "steps", "epsilon", "delta")


class PrivacyLedger:
    """Releases of one run, their composed epsilon, and a hard stop at the target."""

    def __init__(self, epsilon_target: float, delta: float, accountant: str):
        check_accountant(accountant)
        self.epsilon_target = float(epsilon_target)
        self.delta = float(delta)
        self.accountant = accountant
        # The one Rényi order rdp and moments compose at, fixed here before any release (a
        # filter at a fixed order holds for a plan chosen from released values); None: prv, gdp.
        self.order = (
            accountants.fixed_order(accountant, epsilon_target, delta) if self.private else None
        )
        self.releases: list[Release] = []
        self.notes: list[str] = []
        # "os-entropy", or "seeded" when privacy.noise_seed makes the noise reproducible.
        self.noise_source = "os-entropy"
        self._step_limits: dict[str, int] = {}
        # Called after each recorded release, before its noise is drawn: a run writes its
        # ledger file there, so a failure between two releases never hides the first.
        self.on_record: Callable[[], None] | None = None
        if not self.private:
            self.warn("NOT PRIVATE: the discriminator is trained without DP (privacy=none)")
        elif not accountants.is_upper_bound(accountant):
            self.warn(APPROXIMATE_NOTE.format(kind=accountant))
        elif self.order is None:
            self.warn(NO_FILTER_NOTE.format(kind=accountant))

    @property
    def private(self) -> bool:
        return self.accountant != NON_PRIVATE

    @property
    def end_to_end(self) -> bool:
        """True only when nothing data-dependent escaped the ledger."""
        return self.private and not self.notes

    def warn(self, message: str) -> None:
        """Record an opt-out (once); it makes the whole run not end-to-end private."""
        if message not in self.notes:
            self.notes.append(message)

    def use_seeded_noise(self) -> None:
        """The run's secret randomness was keyed by ``privacy.noise_seed``: say so, for good
        (a resumed run keeps the note whatever its own noise source)."""
        self.noise_source = "seeded"
        self.warn(SEEDED_NOTE)

    def find(self, name: str) -> Release | None:
        """The release recorded under ``name`` (the first), or None."""
        return next((r for r in self.releases if r.name == name), None)

    def history(self) -> list[tuple[float, float, int]]:
        return [r.triple() for r in self.releases if r.kind == "gaussian" and r.steps > 0]

    def basic_epsilon(self) -> float:
        """The pure and approximate releases' epsilons, composed by simple addition."""
        return basic_epsilon(r.to_dict() for r in self.releases)

    @property
    def accountant_delta(self) -> float:
        """The delta left to the accountant once the approximate releases have taken theirs."""
        return accountant_delta(self.delta, (r.to_dict() for r in self.releases))

    def cost(self, release: Release) -> float | None:
        """The epsilon (at this ledger's delta, at its best order) of ``release`` as a mechanism
        on its own, for the record.

        The run's total is not the sum of these: the accountant composes the Gaussian releases
        together, which costs less than adding them up.
        """
        if not self.private:
            return None
        if release.kind in BASIC_KINDS:
            return release.epsilon
        if release.steps == 0:
            return 0.0
        return _epsilon_alone(self.accountant, release.triple(), self.accountant_delta)

    def gaussian_budget(self) -> float:
        """What the Gaussian releases (marginals, DP-SGD) may spend after the basic ones."""
        return self.epsilon_target - self.basic_epsilon()

    def calibrate(
        self, sample_rate: float, steps: int, target: float, alone: bool = False
    ) -> float:
        """The least noise multiplier with which ``steps`` Gaussian steps at ``sample_rate``
        fit into epsilon ``target``, after the releases recorded so far (or ``alone``). A plan
        no noise can fit is a settings problem, reported in one line.

        Composed with the releases so far, epsilon is the ledger's own, at its fixed order;
        ``alone``, it is the release's epsilon as a mechanism on its own, at its best order: a
        choice of noise from public numbers, whose cost the ledger then composes at its order.
        """
        prior = [] if alone else self.history()
        try:
            return accountants.calibrate_noise_multiplier(
                self.accountant,
                prior,
                sample_rate,
                steps,
                target,
                self.accountant_delta,
                None if alone else self.order,
            )
        except ValueError as exc:
            raise UserInputError(f"{exc} (raise epsilon or change the budget split)") from exc

    def epsilon(self) -> float:
        return self.epsilon_with([])

    def epsilon_with(self, planned: Sequence[Release], best_order: bool = False) -> float:
        """The run's epsilon if ``planned`` were recorded too (nothing is, and the ledger is
        not touched). ``best_order``: at the releases' best order instead of the ledger's, as
        a plan judges what share of the budget releases take (the ledger's fixed order pays
        its whole conversion from the first release on); never what a run may spend."""
        if not self.private:
            return math.inf
        mechanisms = [r.to_dict() for r in (*self.releases, *planned)]
        ledger = {
            "accountant": self.accountant,
            "order": None if best_order else self.order,
            "delta": self.delta,
            "mechanisms": mechanisms,
        }
        return recompute_epsilon(ledger)

    def record(self, release: Release) -> Release:
        """Add a release already made (e.g. the label histogram)."""
        self.releases.append(release)
        if self.private and (self.accountant_delta <= 0 or self.epsilon() > self.epsilon_target):
            self.releases.pop()
            raise BudgetExhausted(
                f"the {release.name} release would take epsilon past {self.epsilon_target:g} "
                f"or delta past {self.delta:g}: raise the budget or lower what it spends"
            )
        if self.on_record is not None:
            self.on_record()
        return release

    def open_dp_sgd(
        self, name: str, noise_multiplier: float, sample_rate: float, max_steps: int, **details
    ) -> Release:
        """Start a DP-SGD release whose steps are charged one at a time by :meth:`charge`.

        The step limit is the largest T with epsilon(prior releases + T steps) <= target, found
        once here so that each step's check is a counter comparison.
        """
        release = Release(name, "gaussian", noise_multiplier, sample_rate, 0, dict(details))
        affordable = accountants.max_steps(
            self.accountant,
            self.history(),
            noise_multiplier,
            sample_rate,
            self.gaussian_budget(),
            self.accountant_delta,
            limit=max_steps,
            order=self.order,
        )
        self._step_limits[name] = min(max_steps, affordable)
        self.releases.append(release)
        return release

    def steps_left(self, release: Release) -> int:
        return self._step_limits[release.name] - release.steps

    def charge(self, release: Release) -> None:
        """Pay for one step *before* its noisy update is used; refuse a step past the limit."""
        if self.steps_left(release) <= 0:
            raise BudgetExhausted(f"the next {release.name} step would exceed epsilon")
        release.steps += 1

    def to_dict(self, prepaid_steps: int = 0) -> dict[str, Any]:
        """The ledger as JSON; ``prepaid_steps`` more DP-SGD steps are charged in the record.

        A checkpointing trainer writes the ledger *ahead* of the steps it is about to take, so
        a crash between two checkpoints can never leave the file below the privacy spent.
        """
        releases = [replace(r, details=dict(r.details)) for r in self.releases]
        if prepaid_steps:
            open_release = releases[-1]
            if open_release.name not in self._step_limits:
                raise ValueError("only an open DP-SGD release can be prepaid")
            open_release.steps += min(prepaid_steps, self.steps_left(self.releases[-1]))
        view = PrivacyLedger(self.epsilon_target, self.delta, self.accountant)
        view.releases, view.notes, view.order = releases, list(self.notes), self.order
        spent = view.epsilon()
        for release in releases:
            if release.name in self._step_limits:
                release.details["step_limit"] = self._step_limits[release.name]
        return {
            "epsilon_target": self.epsilon_target,
            "epsilon_spent": spent if math.isfinite(spent) else None,
            "delta": self.delta,
            "accountant": self.accountant,
            "order": self.order,
            "accountant_is_upper_bound": (
                accountants.is_upper_bound(self.accountant) if self.private else False
            ),
            "end_to_end": self.end_to_end,
            "notes": list(self.notes),
            "noise_source": self.noise_source,
            "mechanisms": [{**r.to_dict(), "epsilon_alone": view.cost(r)} for r in releases],
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> PrivacyLedger:
        """Rebuild a ledger from its JSON (to resume a run); steps already charged stay charged."""
        ledger = cls(record["epsilon_target"], record["delta"], record["accountant"])
        # Ledgers from before the fixed order (none recorded) keep the best of all orders.
        ledger.order = record.get("order")
        for note in record["notes"]:  # added to the constructor's own notes, never replacing
            ledger.warn(note)
        if record.get("noise_source", "seeded") == "seeded":  # older runs were seeded
            ledger.use_seeded_noise()
        for entry in record["mechanisms"]:
            release = Release.from_dict(entry)
            ledger.releases.append(release)
            if entry.get("step_limit") is not None:
                ledger._step_limits[release.name] = int(entry["step_limit"])
        return ledger


@lru_cache(maxsize=1024)
def _epsilon_alone(accountant: str, triple: tuple[float, float, int], delta: float) -> float:
    """One release's epsilon on its own (cached: a checkpointing run writes its ledger, each
    release's cost included, once a block)."""
    return accountants.epsilon(accountant, [triple], delta)


def recompute_epsilon(ledger: dict[str, Any]) -> float:
    """Epsilon from a ``privacy.json`` alone, independently of the run that wrote it."""
    delta = accountant_delta(ledger["delta"], ledger["mechanisms"])
    gaussian = accountants.epsilon(
        ledger["accountant"], gaussian_history(ledger), delta, ledger.get("order")
    )
    return gaussian + basic_epsilon(ledger["mechanisms"])


def gaussian_history(ledger: dict[str, Any]) -> list[tuple[float, float, int]]:
    """The accountant's input, from a ``privacy.json``."""
    return [
        (m["noise_multiplier"], m["sample_rate"], m["steps"])
        for m in ledger["mechanisms"]
        if m["kind"] == "gaussian" and m["steps"] > 0
    ]


def basic_epsilon(mechanisms: Iterable[dict[str, Any]]) -> float:
    """The pure and approximate releases among ``mechanisms``, by basic composition."""
    return float(sum(m["epsilon"] for m in mechanisms if m["kind"] in BASIC_KINDS))


def accountant_delta(delta: float, mechanisms: Iterable[dict[str, Any]]) -> float:
    """``delta`` less what the approximate releases among ``mechanisms`` spent."""
    return delta - float(sum(m["delta"] for m in mechanisms if m["kind"] == "approximate"))
