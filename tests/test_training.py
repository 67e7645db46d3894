"""The trainer: the generator's marginal loss (the released pairs' KL terms, batched over
pairs), and which of its steps may run in bfloat16."""

from __future__ import annotations

import threading
import time
from concurrent.futures import wait

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from rdpgan import training
from rdpgan.config import TrainConfig
from rdpgan.marginals import Marginals
from rdpgan.models import Discriminator, Generator, isa_capped_below_bf16
from rdpgan.privacy.dp_sgd import DPSGD
from rdpgan.privacy.ledger import PrivacyLedger
from rdpgan.privacy.randomness import SecretRandomness, exact_sample_rate
from rdpgan.training import CGANTrainer, _columns_of_ones, _PairTargets, native_bf16
from rdpgan.transform import Span


@pytest.mark.parametrize("bucket_cost", [0, 10**6])  # a bucket per width; one for all
def test_the_batched_pair_kl_equals_each_pair_computed_on_its_own(bucket_cost, monkeypatch):
    """Columns of different code counts, coarse maps that merge codes, pairs of different
    shapes (longer side first or second): every pair's KL(released || G's joint) as a direct
    per-pair computation gives, in the pairs' order, however the pairs are batched."""
    monkeypatch.setattr(training, "PAIR_BUCKET_COST", bucket_cost)
    rng = np.random.default_rng(0)
    codes = [3, 7, 2, 5]  # codes per column
    maps = [np.arange(c, dtype=np.int64) // 2 for c in codes]  # pairs of codes merged
    pairs = [(0, 1), (1, 3), (2, 0), (3, 2)]
    joint = []
    for i, j in pairs:
        table = rng.random((maps[i].max() + 1, maps[j].max() + 1))
        table[0, 0] = 0.0  # a cell the target leaves empty adds nothing
        joint.append(table / table.sum())
    # A released table wider than its columns' maps reach (its last coarse cell is empty).
    joint[1] = np.pad(joint[1], ((0, 0), (0, 3)))
    marginals = Marginals([np.ones((2, c)) / c for c in codes], pairs, joint, maps)
    rows = 50
    # Each column's code distribution, columns side by side (Generator.code_probs' layout).
    per_column = [torch.softmax(torch.randn(rows, c, dtype=torch.float64), 1) for c in codes]
    probs = torch.cat(per_column, dim=1).float().requires_grad_(True)
    weights = torch.rand(rows)
    weights = weights / weights.sum()

    targets = _PairTargets(marginals, torch.device("cpu"))
    assert len(targets.buckets) == (4 if bucket_cost == 0 else 1)
    got = targets.kl(probs, weights)

    p = [q.float().double().numpy() for q in per_column]
    w = weights.double().numpy()
    for k, ((i, j), target) in enumerate(zip(pairs, joint, strict=True)):
        coarse_i = p[i] @ np.eye(target.shape[0])[maps[i]]
        coarse_j = p[j] @ np.eye(target.shape[1])[maps[j]]
        model = (w[:, None] * coarse_i).T @ coarse_j
        nonzero = target > 0
        expected = float((target[nonzero] * np.log(target[nonzero] / model[nonzero])).sum())
        assert abs(got.detach()[k].item() - expected) < 1e-5 * max(1.0, abs(expected))
    got.sum().backward()
    assert torch.isfinite(probs.grad).all()


def small_trainer(
    bf16: bool,
    generator_ema: float = 0.0,
    marginals: Marginals | None = None,
    simultaneous: bool = False,
    expected_batch: int = 20,
    generator_batch: int | None = None,
) -> tuple[CGANTrainer, Generator]:
    """A real DP-SGD trainer on a toy table, with reproducible secret draws (and uniform
    released marginals unless given); with ``simultaneous``, G's step scores its fakes with a
    snapshot of D taken before D's step."""
    torch.manual_seed(0)
    spans = [Span(0, 3), Span(3, 8)]
    generator = Generator(8, 2, [16], spans, width=8, straight_through=True)
    discriminator = Discriminator(8, 2, [16], auxiliary_classifier=True)
    ledger = PrivacyLedger(1e6, 1e-5, "rdp")
    secret = SecretRandomness(0)
    critic = DPSGD(
        discriminator,
        torch.optim.SGD(discriminator.parameters(), lr=0.1),
        ledger=ledger,
        release=ledger.open_dp_sgd("dp_sgd", 1.0, 0.5, max_steps=10),
        max_grad_norm=1.0,
        expected_batch_size=20,
        secret=secret,
    )
    features = torch.cat(
        [
            F.one_hot(torch.randint(0, 3, (40,)), 3).float(),
            F.one_hot(torch.randint(0, 5, (40,)), 5).float(),
        ],
        dim=1,
    )
    # Released marginals, so G's step runs the marginal loss too.
    marginals = marginals or Marginals(
        [np.full((2, 3), 1 / 3), np.full((2, 5), 1 / 5)],
        [(0, 1)],
        [np.full((3, 5), 1 / 15)],
        [np.arange(3), np.arange(5)],
    )
    trainer = CGANTrainer(
        generator,
        critic,
        torch.optim.Adam(generator.parameters(), lr=1e-3),
        features,
        torch.randint(0, 2, (40,)),
        torch.tensor([0.5, 0.5]),
        secret,
        exact_sample_rate(0.5),
        expected_batch,
        auxiliary_weight=1.0,
        marginals=marginals,
        marginal_weight=1.0,
        bf16_generator_step=bf16,
        generator_ema=generator_ema,
        critic_snapshot=Discriminator(8, 2, [16], True) if simultaneous else None,
        generator_batch=generator_batch,
    )
    return trainer, generator


@pytest.mark.parametrize(
    ("expected", "cap", "fakes"),
    [(500, None, 500), (500, 256, 256), (100, 256, 100), (20, None, 64), (500, 10, 64)],
)
def test_a_generator_step_takes_d_s_batch_up_to_its_cap_and_never_below_the_floor(
    expected, cap, fakes
):
    trainer, _ = small_trainer(bf16=False, expected_batch=expected, generator_batch=cap)
    assert trainer.fake_batch == fakes
    assert len(trainer._generator_inputs().fake_x) == fakes


def test_the_discriminator_step_on_the_columns_of_ones_is_the_dense_step():
    """A one-hot table's rows (and G's fakes) go to D as the columns of their 1s: the same
    batch, fakes and update as the dense rows, with the same secret draws (noise included)."""
    updated = []
    for as_columns in (True, False):
        trainer, _ = small_trainer(bf16=False)
        assert trainer.feature_columns is not None  # the toy table is all one-hot blocks
        if not as_columns:
            trainer.feature_columns = None
        trainer.discriminator_step()
        updated.append([p.detach().clone() for p in trainer.critic.module.parameters()])
    for ours, dense in zip(*updated, strict=True):
        torch.testing.assert_close(ours, dense, rtol=1e-5, atol=1e-6)


def test_rows_that_are_not_one_one_per_block_stop_the_trainer_rather_than_switch_paths():
    """Whether D takes columns follows the public layout: an encoding that broke its one-hot
    blocks is a bug, not a private fact to switch on."""
    trainer, generator = small_trainer(bf16=False)
    broken = trainer.features.clone()
    broken[0, 0] = 0.5
    with pytest.raises(RuntimeError, match="one 1 per one-hot block"):
        _columns_of_ones(generator, broken)
    assert _columns_of_ones(generator, trainer.features) is not None


def test_the_marginal_loss_is_the_mean_kl_of_each_column_per_class_plus_the_pairs():
    """G's marginal loss, against a direct per-class, per-column computation: the mean over
    classes and columns of KL(released || G's column given the class), plus the mean over
    pairs of KL(released joint || G's, classes weighed by their released shares)."""
    rng = np.random.default_rng(1)

    def distributions(*shape: int) -> np.ndarray:
        table = rng.random(shape)
        return table / table.sum(-1, keepdims=True)

    # Coarse 2 x 2, released with an empty third coarse cell for column 0.
    pair = np.pad(distributions(1, 4).reshape(2, 2), ((0, 0), (0, 1)))
    marginals = Marginals(
        [distributions(2, 3), distributions(2, 5)],
        [(1, 0)],
        [pair / pair.sum()],
        [np.array([0, 1, 1]), np.array([0, 0, 1, 1, 0])],  # coarse codes
    )
    trainer, generator = small_trainer(bf16=False, marginals=marginals)
    torch.manual_seed(5)
    got = trainer.marginal_loss()

    torch.manual_seed(5)
    rows = trainer.marginal_rows
    labels = torch.arange(2).repeat_interleave(rows)
    z = torch.randn(2 * rows, 8)
    with torch.no_grad():
        logits = generator.head(generator.body(torch.cat([z, F.one_hot(labels, 2).float()], 1)))
    blocks = [torch.softmax(logits[:, 0:3], 1).double(), torch.softmax(logits[:, 3:8], 1).double()]

    def kl(target: np.ndarray, model: np.ndarray) -> float:
        cells = target > 0
        return float((target[cells] * np.log(target[cells] / model[cells])).sum())

    expected = np.mean(
        [
            kl(marginals.by_class[column][c], block[labels == c].mean(0).numpy())
            for c in range(2)
            for column, block in enumerate(blocks)
        ]
    )
    coarse = [b.numpy() @ np.eye(3)[m] for b, m in zip(blocks, marginals.maps, strict=True)]
    share = 0.5 / rows  # the released label shares (0.5 each) over each class's rows
    joint = (share * coarse[1]).T @ coarse[0]  # pair (1, 0): column 1's codes are the rows
    expected += kl(marginals.joint[0], joint[:2, :3])
    assert abs(got.item() - expected) < 1e-5


def test_the_saved_generator_is_the_moving_average_of_its_iterates():
    """train.generator_ema: after T G steps the average weighs iterate t by
    decay^(T-t) (1-decay) / (1-decay^T) (a geometric average over the iterates, not one that
    keeps decay^(T-1) of the first), and finish() hands G the average."""
    decay, steps = 0.6, 4
    trainer, generator = small_trainer(bf16=False, generator_ema=decay)
    assert trainer.generator_average is not None

    def never(*args, **kwargs):
        raise AssertionError("a training step ran the average, not the live G")

    trainer.generator_average.module.forward = never  # the steps, D's fakes too, use G itself
    iterates = []
    for _ in range(steps):
        trainer.discriminator_step()
        trainer.generator_step()
        iterates.append([p.detach().clone() for p in generator.parameters()])
    weights = [decay ** (steps - t) * (1 - decay) / (1 - decay**steps) for t in range(1, 5)]
    expected = [
        sum(w * iterate[k] for w, iterate in zip(weights, iterates, strict=True))
        for k in range(len(iterates[0]))
    ]
    assert trainer.averaged_steps() == steps
    trainer.finish()
    for got, want in zip(generator.parameters(), expected, strict=True):
        torch.testing.assert_close(got.detach(), want)
    assert not all(
        torch.equal(p, w) for p, w in zip(generator.parameters(), iterates[-1], strict=True)
    )


def _one_step_in_order(trainer: CGANTrainer, simultaneous: bool) -> tuple[float, float]:
    """A D step, then the generator step written out as one sequential piece: one loss (the
    non-saturating loss, the marginal loss and the class loss) and one backward pass, through
    D as it is after its step, or (``simultaneous``) as it was before it; then G's update."""
    if not simultaneous:
        trainer.discriminator_step()
    trainer.generator_optimizer.zero_grad(set_to_none=True)
    marginal = trainer.marginal_loss()
    fake_x, fake_y, codes = trainer.fake(trainer.fake_batch)
    with trainer.critic.frozen() as discriminator:
        logits, class_logits = discriminator(fake_x, fake_y)
        loss = F.binary_cross_entropy_with_logits(logits, torch.ones_like(logits))
        loss = loss + trainer.marginal_weight * marginal
        loss = loss + trainer.auxiliary_weight * F.cross_entropy(class_logits, codes)
        loss.backward()
    if simultaneous:
        trainer.discriminator_step()
    trainer.generator_optimizer.step()
    assert trainer.generator_average is not None
    trainer.generator_average.update_parameters(trainer.generator)
    d_loss = F.binary_cross_entropy_with_logits(logits.detach(), torch.zeros_like(logits))
    return float(loss.detach()), float(d_loss)


@pytest.mark.parametrize("simultaneous", [False, True])
@pytest.mark.parametrize("bf16", [False, True])
def test_the_generator_half_run_beside_the_discriminator_step_changes_nothing(
    bf16, simultaneous, monkeypatch
):
    """G's own half of its step (marginal loss and gradient, its fakes; with simultaneous
    steps also its adversarial loss and gradient through D's snapshot) on a second thread,
    started once the D step is under way, gives bit for bit what it gives on the main thread
    before the D step, in float32 and under bfloat16 autocast alike: no output depends on
    which way the pacer chose. In float32 both give the losses and weights of the generator
    step written out in order, through D after its step (or, simultaneous, before it), up to
    the order of float sums (its two backward passes add their gradients): the halves share
    no tensor, each stream is drawn from in the same order, and the snapshot is D's weights
    as they were when the step began: beside, G's adversarial loss is taken only once D's
    step has updated D (its own storage, no gradient, no graph: D's gradients stay D's)."""
    monkeypatch.setattr(training, "_spare_core", lambda: True)
    monkeypatch.setattr(training, "native_bf16", lambda device: True)
    ways = ("before", "beside") if bf16 else ("before", "beside", "in order")
    runs, places = {}, {way: set() for way in ways}
    for way in ways:
        trainer, generator = small_trainer(bf16, 0.9, simultaneous=simultaneous)
        assert trainer.bf16_generator_step == bf16
        d_started, d_updated = threading.Event(), threading.Event()
        fakes, inputs = trainer.secret_fakes, trainer._generator_inputs
        adversarial, critic_step = trainer._adversarial_backward, trainer.critic.step

        def updated_step(per_pair, critic_step=critic_step, d_updated=d_updated):
            critic_step(per_pair)
            d_updated.set()

        def after_the_update(discriminator, half, adversarial=adversarial, d_updated=d_updated):
            if threading.current_thread() is not threading.main_thread():
                assert d_updated.wait(5)  # D's weights have moved on; the snapshot has not
            return adversarial(discriminator, half)

        def secret_fakes(n, fakes=fakes, d_started=d_started):
            d_started.set()
            return fakes(n)

        def overlapping(inputs=inputs, d_started=d_started, seen=places[way]):
            if threading.current_thread() is not threading.main_thread():
                assert d_started.wait(5)  # the D step is under way
            seen.add((threading.current_thread().name, d_started.is_set()))
            return inputs()

        trainer.secret_fakes, trainer._generator_inputs = secret_fakes, overlapping
        trainer.critic.step, trainer._adversarial_backward = updated_step, after_the_update
        losses = []
        for _ in range(3):
            if way == "in order":
                losses.append(_one_step_in_order(trainer, simultaneous))
                continue
            d_started.clear()
            d_updated.clear()
            trainer.prepare_generator_step(beside=way == "beside")
            if simultaneous:  # taken here, on this thread, before D's step starts
                taken = trainer.critic_snapshot.parameters()
                pairs = zip(taken, trainer.critic.module.parameters(), strict=True)
                assert all(torch.equal(copy, weights) for copy, weights in pairs)
            trainer.discriminator_step()
            losses.append(trainer.generator_step())
        trainer.close()
        trainer.finish()
        critic = trainer.critic.module
        if simultaneous:
            snapshot = list(trainer.critic_snapshot.parameters())
            pointers = {p.data_ptr() for p in critic.parameters()}
            assert not pointers & {p.data_ptr() for p in snapshot}
            assert all(p.grad is None and p.grad_fn is None for p in snapshot)
        runs[way] = (losses, [*generator.parameters(), *critic.parameters()])
    assert places["before"] == {(threading.main_thread().name, False)}
    assert places["beside"] and all(
        name.startswith("rdpgan-generator") and under_way for name, under_way in places["beside"]
    )
    assert runs["beside"][0] == runs["before"][0]
    for got, want in zip(runs["beside"][1], runs["before"][1], strict=True):
        assert torch.equal(got, want)
    if not bf16:
        np.testing.assert_allclose(runs["beside"][0], runs["in order"][0], rtol=1e-5)
        for got, want in zip(runs["beside"][1], runs["in order"][1], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_simultaneous_steps_beside_update_g_on_its_thread_only_after_d_drew_its_fakes(
    monkeypatch,
):
    """With simultaneous steps beside D's step, G's update runs on the generator's thread,
    but only once D's step has drawn its fakes from G: D's fakes come from G's weights before
    the update, as in order (the test above gives the same bits only while the update is not
    early). Here D's fakes are slow to start, so an update that did not wait would land
    while they are drawn. If D's step fails before its fakes, or the trainer is closed with
    none drawn, the update is called off (G keeps its weights) and the thread is let go."""
    monkeypatch.setattr(training, "_spare_core", lambda: True)
    trainer, generator = small_trainer(False, 0.9, simultaneous=True)
    fakes, update = trainer.secret_fakes, trainer._update_generator
    unchanged, updated_on = [], []

    def slow_fakes(n):
        before = [p.detach().clone() for p in generator.parameters()]
        time.sleep(0.3)  # G's half, on its thread, is done well before
        drawn = fakes(n)
        unchanged.append(all(map(torch.equal, before, generator.parameters())))
        return drawn

    def recorded_update(half):
        updated_on.append(threading.current_thread().name)
        return update(half)

    trainer.secret_fakes, trainer._update_generator = slow_fakes, recorded_update
    for _ in range(2):
        weights = [p.detach().clone() for p in generator.parameters()]
        trainer.prepare_generator_step(beside=True)
        trainer.discriminator_step()
        trainer.generator_step()
        assert not all(map(torch.equal, weights, generator.parameters()))  # G did step
    assert unchanged == [True, True]
    assert len(updated_on) == 2 and all(n.startswith("rdpgan-generator") for n in updated_on)

    def failing_fakes(n):
        time.sleep(0.1)
        raise RuntimeError("D's step failed")

    def bounded(cleanup):  # a cleanup that waits for a gate nobody decides never returns
        worker = threading.Thread(target=cleanup, daemon=True)
        worker.start()
        worker.join(10)
        assert not worker.is_alive(), "G's thread still waits for D's fakes"

    trainer.secret_fakes = failing_fakes
    weights = [p.detach().clone() for p in generator.parameters()]
    trainer.prepare_generator_step(beside=True)
    with pytest.raises(RuntimeError, match="D's step failed"):
        trainer.discriminator_step()
    bounded(trainer.discard_prepared)
    trainer.discard_prepared()  # again (as an interrupted cleanup may): nothing left to do
    assert all(map(torch.equal, weights, generator.parameters()))
    trainer.prepare_generator_step(beside=True)  # and closed with no D step at all
    bounded(trainer.close)
    assert all(map(torch.equal, weights, generator.parameters()))
    assert len(updated_on) == 2


@pytest.mark.parametrize("faster", [True, False])
def test_the_pacer_keeps_the_faster_way_after_timing_both(faster):
    """Each block times both ways afresh (the faster way flips in the second block here)."""
    pacer = training._Pacer()
    ways = []
    block = training.PACE_BLOCK
    for step in range(2 * block):
        fast = faster if step < block else not faster
        beside = pacer.beside()
        ways.append(beside)
        pacer.record(beside, 1.0 if beside == fast else 2.0)
    probe = training.PACE_PROBE
    for start, fast in ((0, faster), (block, not faster)):
        assert ways[start : start + 2 * probe] == [True] * probe + [False] * probe
        assert set(ways[start + 2 * probe : start + block]) == {fast}


def test_run_steps_paces_only_where_a_second_thread_runs(monkeypatch):
    """A trainer without a spare core steps in order, and one with it times both ways."""
    ledger = PrivacyLedger(1e6, 1e-5, "rdp")
    config = TrainConfig(progress=False)
    for spare in (False, True):
        monkeypatch.setattr(training, "_spare_core", lambda spare=spare: spare)
        trainer, _ = small_trainer(bf16=False)
        ways: list[bool] = []
        prepare = trainer.prepare_generator_step

        def recording(beside, prepare=prepare, ways=ways):
            ways.append(beside)
            prepare(beside)

        trainer.prepare_generator_step = recording
        recorded: list[bool] = []
        record = training._Pacer.record

        def timed(self, beside, seconds, record=record, recorded=recorded):
            recorded.append(beside)
            record(self, beside, seconds)

        monkeypatch.setattr(training._Pacer, "record", timed)
        probe = training.PACE_PROBE  # small_trainer's release allows 10 steps
        training.run_steps(trainer, ledger, config, 1, 2 * probe, None, [])
        trainer.close()
        assert ways == ([True] * probe + [False] * probe if spare else [False] * 2 * probe)
        assert recorded == (ways if spare else [])  # every paced step is timed as it ran


def spied_noise(monkeypatch, spare: bool, fails_after: int | None = None) -> tuple:
    """A small trainer (a spare core or not) whose noise draws record the thread each ran on,
    and fail after ``fails_after`` draws; the trainer, its noise and the threads."""
    monkeypatch.setattr(training, "_spare_core", lambda: spare)
    trainer, _ = small_trainer(bf16=False)
    noise = trainer.critic.optimizer.noise
    drawn_on, draw = [], noise._draw

    def spy():
        drawn_on.append(threading.current_thread().name)
        if fails_after is not None and len(drawn_on) > fails_after:
            raise MemoryError("the draw made ahead")
        return draw()

    monkeypatch.setattr(noise, "_draw", spy)
    return trainer, noise, drawn_on


def take_steps(trainer: CGANTrainer, steps: int) -> None:
    for _ in range(steps):
        trainer.prepare_generator_step()
        trainer.discriminator_step()
        trainer.generator_step()


@pytest.mark.parametrize("spare", [False, True])
def test_the_private_steps_noise_is_drawn_a_step_ahead_on_the_generators_thread(spare, monkeypatch):
    """Where a core is spare, each step's noise after the first is drawn during the step
    before, on the generator's thread; closing the trainer drops the draw made ahead for a
    step that never comes. Without one, every draw is made in its own step."""
    trainer, noise, drawn_on = spied_noise(monkeypatch, spare)
    take_steps(trainer, 3)
    ahead = noise.ahead
    trainer.close()
    if spare:
        assert drawn_on[0] == threading.main_thread().name
        assert all(name.startswith("rdpgan-generator") for name in drawn_on[1:])
        # (Step 4's draw, submitted in step 3, may be dropped before its thread starts it.)
        assert len(drawn_on) in (3, 4) and ahead is not None and noise.ahead is None
    else:
        assert drawn_on == [threading.main_thread().name] * 3 and ahead is None


def test_closing_the_trainer_stops_its_thread_though_a_draw_made_ahead_failed(monkeypatch):
    """The noise drawn ahead for a step that never comes is dropped, its failure too: closing
    still stops the generator's thread (and a run's last checkpoint is still written)."""
    trainer, noise, drawn_on = spied_noise(monkeypatch, spare=True, fails_after=1)
    take_steps(trainer, 1)
    wait([noise.ahead])  # it has failed
    pool = trainer._pool
    trainer.close()
    assert len(drawn_on) == 2 and trainer._pool is None and pool._shutdown
    assert noise.ahead is None and noise.executor is None


def test_a_generator_half_is_prepared_once_per_generator_step(monkeypatch):
    monkeypatch.setattr(training, "_spare_core", lambda: True)
    trainer, _ = small_trainer(bf16=False)
    trainer.prepare_generator_step()
    with pytest.raises(RuntimeError, match="already prepared"):
        trainer.prepare_generator_step()
    trainer.discard_prepared()
    trainer.close()


def test_a_prepared_generator_half_is_waited_for_when_the_discriminator_step_fails(
    monkeypatch,
):
    """run_steps: a failing D step leaves no thread writing G's gradients behind it."""
    monkeypatch.setattr(training, "_spare_core", lambda: True)
    trainer, generator = small_trainer(bf16=False)
    started, release = threading.Event(), threading.Event()
    inputs = CGANTrainer._generator_inputs

    def slow(self):
        started.set()
        release.wait(5)
        return inputs(self)

    timer = threading.Timer(0.2, release.set)

    def failing(self):
        started.wait(5)
        timer.start()
        raise RuntimeError("D failed")

    monkeypatch.setattr(CGANTrainer, "_generator_inputs", slow)
    monkeypatch.setattr(CGANTrainer, "discriminator_step", failing)
    config = TrainConfig(progress=False)
    ledger = PrivacyLedger(1e6, 1e-5, "rdp")
    with pytest.raises(RuntimeError, match="D failed"):
        training.run_steps(trainer, ledger, config, 1, 3, None, [])
    assert release.is_set() and trainer._generator_half is None
    assert all(p.grad is not None for p in generator.parameters())  # its half had finished
    timer.join()
    trainer.close()


def test_the_discriminator_step_stays_float32_while_the_generator_half_runs_in_bfloat16(
    monkeypatch,
):
    """Autocast is per thread: G's half in bfloat16 on the second thread, entered before
    and left after the whole private step, changes nothing of that step's precision."""
    monkeypatch.setattr(training, "_spare_core", lambda: True)
    monkeypatch.setattr(training, "native_bf16", lambda device: True)
    trainer, generator = small_trainer(bf16=True)
    entered, stepped = threading.Event(), threading.Event()
    inputs = CGANTrainer._generator_inputs

    def overlapping(self):
        with self.generator_step_precision():
            assert torch.is_autocast_enabled("cpu")
            entered.set()
            assert stepped.wait(5)
        return inputs(self)

    monkeypatch.setattr(CGANTrainer, "_generator_inputs", overlapping)
    seen: list[torch.dtype] = []
    for module in (generator.head, trainer.critic.module.head):
        module.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    trainer.prepare_generator_step()
    assert entered.wait(5)
    trainer.discriminator_step()
    private_step = list(seen)  # before the second thread goes on
    stepped.set()
    assert private_step and set(private_step) == {torch.float32}  # G's fakes, D's pairs
    trainer.generator_step()
    assert set(seen[len(private_step) :]) == {torch.bfloat16}
    trainer.close()


def test_without_a_moving_average_finish_keeps_the_last_iterate():
    trainer, generator = small_trainer(bf16=False)
    trainer.discriminator_step()
    trainer.generator_step()
    last = [p.detach().clone() for p in generator.parameters()]
    trainer.finish()
    assert trainer.generator_average is None and trainer.averaged_steps() == 0
    assert all(torch.equal(p, w) for p, w in zip(generator.parameters(), last, strict=True))


@pytest.mark.parametrize(("bf16", "native"), [(False, True), (True, True), (True, False)])
def test_only_the_generator_step_runs_in_bfloat16(bf16, native, monkeypatch):
    """train.bf16_generator_step: G's step (its marginal loss, and fakes through the frozen D)
    multiplies in bfloat16 where that is native; the private discriminator steps before and
    after it, and the fakes they pair with real rows, do not, and G's step leaves D as it
    found it. (bfloat16 autocast works on any CPU, emulated where not native, so the wiring is
    tested everywhere.)"""
    monkeypatch.setattr(training, "native_bf16", lambda device: native)
    trainer, generator = small_trainer(bf16)
    critic = trainer.critic.module
    seen: list[torch.dtype] = []
    for module in (generator.head, critic.head):
        module.register_forward_hook(lambda module, inputs, output: seen.append(output.dtype))
    trainer.discriminator_step()
    assert seen and set(seen) == {torch.float32}  # G made the fakes, D scored the pairs
    seen.clear()
    before = [(p.detach().clone(), p.grad.clone()) for p in critic.parameters()]
    trainer.generator_step()
    assert set(seen) == ({torch.bfloat16} if bf16 and native else {torch.float32})
    assert len(seen) == 3  # G for the marginal loss and for the fakes, D on the fakes
    assert all(torch.isfinite(p.grad).all() for p in generator.parameters())
    assert not torch.is_autocast_enabled("cpu")
    for (value, grad), p in zip(before, critic.parameters(), strict=True):
        assert torch.equal(value, p) and torch.equal(grad, p.grad)  # D frozen, grads kept
    seen.clear()
    trainer.discriminator_step()  # the next private step is float32 again
    assert seen and set(seen) == {torch.float32}


def test_the_generators_logits_leave_autocast_in_float32():
    """G's products may run in bfloat16, but the Gumbel noise, softmax and losses after them
    do not: a bfloat16 softmax at temperature 0.2 would lose most of its resolution."""
    _, generator = small_trainer(True)
    z, y = torch.randn(5, 8), torch.eye(2)[[0, 1, 0, 1, 1]]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert generator.head(generator.body(torch.cat([z, y], 1))).dtype == torch.bfloat16
        assert generator._logits(z, y).dtype == torch.float32
        assert generator.code_probs(z, y).dtype == torch.float32
        assert generator(z, y).dtype == torch.float32


def test_native_bf16_is_a_fact_about_the_device():
    assert isinstance(native_bf16(torch.device("cpu")), bool)


@pytest.mark.parametrize(
    ("variable", "value", "capped"),
    [
        ("ONEDNN_MAX_CPU_ISA", "AVX2", True),
        ("ONEDNN_MAX_CPU_ISA", "avx512_core", True),
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", False),
        ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX", False),
        ("ONEDNN_MAX_CPU_ISA", "ALL", False),
        ("ATEN_CPU_CAPABILITY", "avx2", True),
        ("ATEN_CPU_CAPABILITY", "avx512", False),
    ],
)
def test_an_emulated_avx2_cpu_has_no_native_bf16(monkeypatch, variable, value, capped):
    """The caps that emulate an AVX2-only CPU (issue 29) turn native bfloat16 off, whatever
    this CPU has; the others leave it to the CPU."""
    for name in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, value)
    assert isa_capped_below_bf16() is capped
    if capped:
        assert not native_bf16(torch.device("cpu"))
    assert native_bf16(torch.device("meta")) is False


def test_a_resumed_optimizer_still_steps_its_tensors_in_one_call():
    """A checkpoint from before foreach Adam brings back foreach=None with its settings."""
    generator = Generator(8, 2, [16], [Span(0, 3), Span(3, 8)], width=8)
    discriminator = Discriminator(8, 2, [16])
    g_opt, _ = training.adam_optimizers(generator, discriminator, TrainConfig())
    older = torch.optim.Adam(generator.parameters(), lr=1e-3).state_dict()
    assert older["param_groups"][0]["foreach"] is None
    training.load_optimizer_state(g_opt, older)
    assert all(group["foreach"] is True for group in g_opt.param_groups)
    assert g_opt.param_groups[0]["lr"] == 1e-3  # the checkpoint's settings otherwise
