"""The ledger never overspends, composes every release, and its file recomputes to itself."""

from __future__ import annotations

import math

import pytest

from rdpgan.config import PrivacyConfig
from rdpgan.errors import UserInputError
from rdpgan.privacy import accountants
from rdpgan.privacy.budget import validate_budget
from rdpgan.privacy.ledger import (
    APPROXIMATE_NOTE,
    NO_FILTER_NOTE,
    SEEDED_NOTE,
    BudgetExhausted,
    PrivacyLedger,
    Release,
    recompute_epsilon,
)

GRID = [
    (q, sigma, eps)
    for q in (0.004, 0.02, 0.1)
    for sigma in (0.7, 1.2, 3.0)
    for eps in (0.5, 2.0, 8.0)
]


def label_release(sigma: float = 10.0) -> Release:
    return Release("label_counts", "gaussian", sigma, 1.0, 1)


@pytest.mark.parametrize(("q", "sigma", "eps"), GRID)
def test_stop_never_exceeds_the_target_and_is_not_early(q, sigma, eps):
    ledger = PrivacyLedger(eps, 1e-5, "rdp")
    ledger.record(label_release())
    release = ledger.open_dp_sgd("dp_sgd", sigma, q, max_steps=10**9)
    steps = ledger.steps_left(release)
    release.steps = steps  # as if charged one by one
    assert ledger.epsilon() <= eps
    with pytest.raises(BudgetExhausted):
        ledger.charge(release)
    history = [*ledger.history()[:-1], (sigma, q, steps + 1)]
    one_more = accountants.epsilon("rdp", history, 1e-5, ledger.order)
    assert one_more > eps  # the stop is at the last affordable step, not before


def test_charging_step_by_step_stops_exactly_at_the_limit():
    ledger = PrivacyLedger(1.0, 1e-5, "rdp")
    release = ledger.open_dp_sgd("dp_sgd", 1.0, 0.05, max_steps=10**9)
    taken = 0
    with pytest.raises(BudgetExhausted):
        while True:
            ledger.charge(release)
            taken += 1
    limit = accountants.max_steps("rdp", [], 1.0, 0.05, 1.0, 1e-5, order=ledger.order)
    assert taken == release.steps == limit
    assert ledger.epsilon() <= 1.0


def test_label_release_is_composed_into_the_same_budget():
    alone = PrivacyLedger(2.0, 1e-5, "rdp")
    with_labels = PrivacyLedger(2.0, 1e-5, "rdp")
    with_labels.record(label_release(5.0))
    # (sigma 1.5: about what 800 steps at this rate are calibrated to at epsilon 2)
    a = alone.steps_left(alone.open_dp_sgd("dp_sgd", 1.5, 0.02, max_steps=10**9))
    b = with_labels.steps_left(with_labels.open_dp_sgd("dp_sgd", 1.5, 0.02, max_steps=10**9))
    assert 0 < b < a


def test_a_release_that_alone_exceeds_the_budget_is_refused():
    ledger = PrivacyLedger(0.1, 1e-5, "rdp")
    with pytest.raises(BudgetExhausted):
        ledger.record(label_release(0.5))
    assert ledger.releases == []


def test_file_recomputes_to_its_own_epsilon_for_every_accountant():
    for kind in ("rdp", "moments", "gdp"):
        ledger = PrivacyLedger(4.0, 1e-5, kind)
        ledger.record(label_release())
        release = ledger.open_dp_sgd("dp_sgd", 1.1, 0.01, max_steps=500, max_grad_norm=1.0)
        for _ in range(ledger.steps_left(release)):
            ledger.charge(release)
        record = ledger.to_dict()
        assert record["accountant"] == kind
        assert record["mechanisms"][1]["steps"] == release.steps
        assert record["mechanisms"][1]["max_grad_norm"] == 1.0
        assert math.isclose(recompute_epsilon(record), record["epsilon_spent"], rel_tol=1e-12)
        assert record["epsilon_spent"] <= 4.0


def test_non_private_ledger_is_loud():
    ledger = PrivacyLedger(8.0, 1e-5, "none")
    record = ledger.to_dict()
    assert record["end_to_end"] is False and record["epsilon_spent"] is None
    assert "NOT PRIVATE" in record["notes"][0]


def test_opt_out_note_clears_end_to_end():
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    assert ledger.end_to_end
    ledger.warn("schema inferred from the data")
    assert not ledger.to_dict()["end_to_end"]


@pytest.mark.parametrize("kind", accountants.ACCOUNTANTS)
def test_only_an_upper_bound_accountant_can_be_end_to_end(kind):
    """gdp's CLT epsilon can understate the privacy spent: its runs must not claim the guarantee,
    and the file must survive a round trip (resume) with the note, once."""
    record = PrivacyLedger(8.0, 1e-5, kind).to_dict()
    proven = accountants.is_upper_bound(kind) and kind != "prv"  # (prv: no filter, its note)
    assert record["end_to_end"] is proven
    again = PrivacyLedger.from_dict(record).to_dict()
    assert again["notes"] == record["notes"] and len(record["notes"]) == int(not proven)


def test_a_record_cannot_shed_the_notes_its_accountant_owes():
    """A privacy.json edited (or written by an older version) without gdp's note gets it back."""
    record = {**PrivacyLedger(8.0, 1e-5, "gdp").to_dict(), "notes": []}
    assert PrivacyLedger.from_dict(record).notes == [APPROXIMATE_NOTE.format(kind="gdp")]


def test_a_seeded_run_is_marked_once_and_for_good():
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    ledger.use_seeded_noise()
    ledger.use_seeded_noise()  # a resume given the seed again
    resumed = PrivacyLedger.from_dict(ledger.to_dict())
    assert resumed.notes == [SEEDED_NOTE] and resumed.noise_source == "seeded"
    assert not resumed.end_to_end


@pytest.mark.parametrize(
    ("eps", "delta", "n"),
    [
        (0, 1e-5, None),
        (-1, 1e-5, None),
        (math.inf, 1e-5, None),
        (1, 0, None),
        (1, 1, None),
        (1, -1e-5, None),
        (1, 1e-3, 5000),
    ],
)
def test_invalid_budgets_are_refused(eps, delta, n):
    with pytest.raises(UserInputError):
        validate_budget(eps, delta, n)


def test_unknown_accountant_is_refused():
    with pytest.raises(UserInputError, match="magic"):
        PrivacyLedger(1.0, 1e-5, "magic")


def test_pure_releases_add_to_the_accountant_and_shrink_the_dp_sgd_allowance():
    with_schema = PrivacyLedger(4.0, 1e-5, "rdp")
    with_schema.record(Release("schema", "pure", epsilon=1.0))
    without = PrivacyLedger(4.0, 1e-5, "rdp")
    for ledger in (with_schema, without):
        ledger.open_dp_sgd("d", 1.0, 0.01, 10**6)
    assert with_schema.steps_left(with_schema.releases[-1]) < without.steps_left(
        without.releases[-1]
    )
    release = with_schema.releases[-1]
    release.steps = with_schema.steps_left(release)
    spent = with_schema.epsilon()
    gaussian_only = accountants.epsilon("rdp", with_schema.history(), 1e-5, with_schema.order)
    assert spent == pytest.approx(gaussian_only + 1.0) and spent <= 4.0
    record = with_schema.to_dict()
    assert recompute_epsilon(record) == pytest.approx(record["epsilon_spent"], abs=1e-12)
    assert PrivacyLedger.from_dict(record).epsilon() == pytest.approx(spent, abs=1e-12)


def test_a_pure_release_past_the_budget_is_refused():
    ledger = PrivacyLedger(1.0, 1e-5, "rdp")
    with pytest.raises(BudgetExhausted):
        ledger.record(Release("schema", "pure", epsilon=1.5))


def test_an_approximate_release_adds_its_epsilon_and_takes_its_delta_from_the_accountant():
    """A stability histogram's (epsilon, delta): the accountant composes the Gaussian releases
    at what is left of delta, and everything planned after it (calibration, the DP-SGD step
    limit) sees that smaller delta."""
    with_schema = PrivacyLedger(4.0, 1e-5, "rdp")
    with_schema.record(Release("schema", "approximate", epsilon=0.5, delta=4e-6))
    assert with_schema.accountant_delta == pytest.approx(6e-6)
    pure_only = PrivacyLedger(4.0, 1e-5, "rdp")
    pure_only.record(Release("schema", "pure", epsilon=0.5))
    for ledger in (with_schema, pure_only):
        ledger.open_dp_sgd("d", 1.0, 0.01, 10**6)
    release = with_schema.releases[-1]
    assert with_schema.steps_left(release) < pure_only.steps_left(pure_only.releases[-1])
    release.steps = with_schema.steps_left(release)
    spent = with_schema.epsilon()
    gaussian = accountants.epsilon("rdp", with_schema.history(), 6e-6, with_schema.order)
    assert spent == pytest.approx(gaussian + 0.5) and spent <= 4.0
    record = with_schema.to_dict()
    assert record["mechanisms"][0]["delta"] == 4e-6
    assert recompute_epsilon(record) == pytest.approx(record["epsilon_spent"], abs=1e-12)
    assert PrivacyLedger.from_dict(record).epsilon() == pytest.approx(spent, abs=1e-12)


def test_an_approximate_release_that_leaves_no_delta_is_refused():
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    with pytest.raises(BudgetExhausted, match="delta"):
        ledger.record(Release("schema", "approximate", epsilon=0.1, delta=1e-5))
    assert not ledger.releases


def test_epsilon_with_is_the_epsilon_the_planned_releases_would_bring_and_records_nothing():
    """Planning touches nothing: no release is added (the ledger's file writer is never
    called), and a plan past the target is a number, not a refusal."""
    ledger = PrivacyLedger(8.0, 1e-5, "rdp")
    ledger.record(Release("label_counts", "gaussian", 10.0, 1.0, 1))
    written: list[str] = []
    ledger.on_record = lambda: written.append("write")
    planned = [Release("a", "gaussian", 2.0, 1.0, 1), Release("b", "pure", epsilon=0.3)]
    spent = ledger.epsilon_with(planned)
    assert ledger.epsilon_with([Release("c", "pure", epsilon=9.0)]) > 8.0
    assert [r.name for r in ledger.releases] == ["label_counts"] and written == []
    before = ledger.epsilon()
    for release in planned:
        ledger.record(release)
    assert spent == pytest.approx(ledger.epsilon(), rel=1e-12) and spent > before + 0.3


@pytest.mark.parametrize("kind", ["rdp", "moments"])
def test_the_order_is_fixed_from_the_target_before_any_release(kind):
    """RDP composes a plan chosen from released values only at an order fixed in advance (a
    Rényi filter): the ledger's order follows from the target, delta and accountant alone,
    whatever the plan, and every epsilon it reports, records and stops at is at that order."""
    planned = PrivacyLedger(8.0, 1e-5, kind)
    planned.record(label_release(5.0))
    other = PrivacyLedger(8.0, 1e-5, kind)
    release = planned.open_dp_sgd("d", 1.0, 0.02, 800)
    other.open_dp_sgd("d", 2.0, 0.1, 300)
    assert planned.order == other.order == accountants.fixed_order(kind, 8.0, 1e-5)
    assert planned.order is not None
    release.steps = planned.steps_left(release)
    record = planned.to_dict()
    at_order = accountants.epsilon(kind, planned.history(), 1e-5, planned.order)
    assert record["order"] == planned.order
    assert record["epsilon_spent"] == pytest.approx(at_order) and at_order <= 8.0
    assert recompute_epsilon(record) == pytest.approx(at_order)
    # Not the best order picked after the plan, which would report less.
    assert accountants.epsilon(kind, planned.history(), 1e-5) < at_order
    # A ledger written before the order was fixed (none recorded) keeps its best order.
    del record["order"]
    assert PrivacyLedger.from_dict(record).order is None
    assert recompute_epsilon(record) < at_order


def test_prv_and_gdp_have_no_order_and_say_what_that_leaves_unproven():
    """No filter is proven for their composition of a plan chosen from released values:
    their ledgers say so (gdp already says it is no upper bound), and are not end-to-end."""
    for kind in ("prv", "gdp"):
        ledger = PrivacyLedger(8.0, 1e-5, kind)
        assert ledger.order is None and not ledger.end_to_end
    assert PrivacyLedger(8.0, 1e-5, "prv").notes == [NO_FILTER_NOTE.format(kind="prv")]


def test_a_reused_schema_brings_the_order_it_was_released_under():
    """A run that reuses a released schema composes at the order fixed before that release,
    whatever target it was given after; under another accountant, its ledger says so."""
    from rdpgan import DPCGAN, fitting
    from rdpgan.data.schema import Schema
    from rdpgan.privacy.private_schema import SchemaRelease

    schema = Schema.from_specs([{"name": "y", "kind": "categorical", "levels": [0, 1]}])
    paid = Release("schema", "gaussian", 3.0, 1.0, 2, {"sensitivity": 2.0})
    released = accountants.fixed_order("rdp", 8.0, 1e-5)
    reused = SchemaRelease(schema, [paid], reused=True, accountant="rdp", order=released)
    model = DPCGAN(epsilon=6.0)
    fitting.charge_schema(model, reused, None)
    assert model.ledger.order == released != accountants.fixed_order("rdp", 6.0, 1e-5)
    assert model.ledger.end_to_end
    other = DPCGAN(epsilon=6.0, privacy=PrivacyConfig(accountant="moments"))
    fitting.charge_schema(other, reused, None)
    assert other.ledger.order == accountants.fixed_order("moments", 6.0, 1e-5)
    assert not other.ledger.end_to_end
