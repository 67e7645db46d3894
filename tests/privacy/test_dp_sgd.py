"""DP-SGD on the discriminator: the traps that have bitten public DP-GANs, each guarded.

- A per-sample unit is a (real row, fake row) pair: the fake half's gradient is neither dropped
  nor charged as a second step, and the pair is clipped as one.
- The generator's pass through D leaves nothing behind for the next private step.
- Poisson batches can be empty; the step still adds noise and is still charged.
"""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from torch.nn import functional as F

from rdpgan.models import CodeLinear, Discriminator
from rdpgan.privacy.clipping import per_sample_squared_norms
from rdpgan.privacy.dp_sgd import DPSGD, PlainSGD
from rdpgan.privacy.ledger import Release
from rdpgan.privacy.randomness import NOISE_STREAM, SecretRandomness

WIDTH, CLASSES = 6, 2


class CountingLedger:
    """Stands in for the ledger: counts charges, never refuses."""

    def __init__(self) -> None:
        self.charges = 0

    def charge(self, release: Release) -> None:
        self.charges += 1
        release.steps += 1


def private(discriminator, sigma: float = 0.0, clip: float = 1.0, expected: int = 4, seed=0):
    """``discriminator`` made private, stepping by SGD at lr 1, charging a CountingLedger."""
    return DPSGD(
        discriminator,
        torch.optim.SGD(discriminator.parameters(), lr=1.0),
        ledger=CountingLedger(),
        release=Release("dp_sgd", "gaussian", sigma, 0.1),
        max_grad_norm=clip,
        expected_batch_size=expected,
        secret=SecretRandomness(seed),
    )


def make_critic(seed: int, sigma: float, clip: float, expected: int = 4):
    torch.manual_seed(seed)
    discriminator = Discriminator(WIDTH, CLASSES, hidden=[8])
    pristine = copy.deepcopy(discriminator)  # before the clipper attaches its hooks
    critic = private(discriminator, sigma, clip, expected, seed)
    return critic, discriminator, critic.ledger, pristine


def pair_batch(seed: int, size: int = 5):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(size, 2, WIDTH, generator=gen)
    y = F.one_hot(torch.randint(0, CLASSES, (size, 2), generator=gen), CLASSES).float()
    return x, y


def one_hot_pair_batch(seed: int, size: int, blocks: int = 2):
    """Pairs of one-hot rows (``blocks`` blocks of WIDTH // blocks codes each), dense and as
    the columns of their 1s; with few codes, real and fake rows often share a column."""
    gen = torch.Generator().manual_seed(seed)
    block = WIDTH // blocks
    columns = torch.randint(0, block, (size, 2, blocks), generator=gen)
    columns = columns + block * torch.arange(blocks)
    x = torch.zeros(size, 2, WIDTH).scatter_(-1, columns, 1.0)
    y = F.one_hot(torch.randint(0, CLASSES, (size, 2), generator=gen), CLASSES).float()
    return x, columns, y


def pair_losses(module, x, y) -> torch.Tensor:
    logits, _ = module(x, y)
    targets = torch.zeros_like(logits)
    targets[:, 0] = 1.0
    return F.binary_cross_entropy_with_logits(logits, targets, reduction="none").sum(dim=1)


def flat_params(module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in module.parameters()])


def d_step(critic, x, y) -> None:
    critic.zero_grad()
    critic.step(pair_losses(critic.module, x, y))


def reference_update(discriminator, x, y, clip: float, expected: int, drop_fake=False):
    """Sum over pairs of the clipped joint gradient, divided by the expected batch size."""
    total = torch.zeros_like(flat_params(discriminator))
    for i in range(len(x)):
        model = copy.deepcopy(discriminator)
        xi, yi = (x[i : i + 1, :1], y[i : i + 1, :1]) if drop_fake else (x[i : i + 1], y[i : i + 1])
        logits, _ = model(xi, yi)
        targets = torch.zeros_like(logits)
        targets[:, 0] = 1.0
        F.binary_cross_entropy_with_logits(logits, targets, reduction="sum").backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters()])
        total += grad * min(1.0, clip / float(grad.norm()))
    return total / expected


def test_pair_gradient_is_clipped_as_one_unit_and_fake_half_is_kept():
    clip = 0.05  # small enough that every pair is clipped
    critic, discriminator, ledger, before = make_critic(seed=0, sigma=0.0, clip=clip)
    x, y = pair_batch(1)
    d_step(critic, x, y)
    applied = flat_params(before) - flat_params(discriminator)  # SGD, lr = 1
    expected = reference_update(before, x, y, clip, expected=4)
    without_fake = reference_update(before, x, y, clip, expected=4, drop_fake=True)
    torch.testing.assert_close(applied, expected, rtol=1e-4, atol=1e-6)
    assert (applied - without_fake).norm() > 1e-3 * expected.norm()
    assert ledger.charges == 1  # one step for the real and fake loss together


def test_rows_that_need_a_gradient_are_clipped_as_any_rows():
    """D's input may come from a graph (G's rows): the clipped sum is the same, and the step
    leaves the input's own gradient alone."""
    clip = 0.05
    critic, discriminator, _, before = make_critic(seed=0, sigma=0.0, clip=clip)
    x, y = pair_batch(1)
    source = x.clone().requires_grad_(True)
    d_step(critic, source * 1.0, y)
    applied = flat_params(before) - flat_params(discriminator)
    expected = reference_update(before, x, y, clip, expected=4)
    torch.testing.assert_close(applied, expected, rtol=1e-4, atol=1e-6)
    assert source.grad is None


def test_rows_as_columns_of_their_ones_are_clipped_as_the_dense_rows():
    """The plain critic, its label entering the first layer as one more column: a pair's
    clipped gradient is that of its dense rows, whether or not real and fake share columns."""
    clip = 0.05
    critic, discriminator, ledger, before = make_critic(seed=0, sigma=0.0, clip=clip)
    x, columns, y = one_hot_pair_batch(3, size=8, blocks=3)
    assert (columns[:, 0] == columns[:, 1]).any(-1).any()  # the cross terms are exercised
    d_step(critic, columns, y)
    applied = flat_params(before) - flat_params(discriminator)
    expected = reference_update(before, x, y, clip, expected=4)
    torch.testing.assert_close(applied, expected, rtol=1e-4, atol=1e-6)
    assert ledger.charges == 1


@pytest.mark.parametrize("frozen_weight", [False, True])
@pytest.mark.parametrize("as_columns", [False, True])
@pytest.mark.parametrize("shape", [(5, 3), (5, 2, 3), (5, 2, 2, 3)])
def test_per_sample_norms_are_those_of_each_samples_gradient(shape, as_columns, frozen_weight):
    """Any leading shape; rows dense or as the columns of their 1s, repeated columns included
    (a column twice counts as a 2); over the layer's trainable parameters only."""
    torch.manual_seed(0)
    layer = CodeLinear(WIDTH, 4)
    layer.weight.requires_grad_(not frozen_weight)
    columns = torch.randint(0, 3, shape)  # few columns: repeats within and across rows
    dense = F.one_hot(columns, WIDTH).sum(-2).float() + 0.1 * torch.randn(*shape[:-1], WIDTH)
    x = columns if as_columns else dense
    weights = torch.randn(*shape[:-1], 4)
    squared = per_sample_squared_norms(layer, x, weights)
    for i in range(shape[0]):
        layer.zero_grad()
        (layer(x[i : i + 1]) * weights[i : i + 1]).sum().backward()
        grads = [p.grad.flatten() for p in layer.parameters() if p.requires_grad]
        expected = torch.cat(grads).double().pow(2).sum()
        torch.testing.assert_close(squared[i], expected, rtol=1e-5, atol=1e-7)


def ac_pair_losses(module, x, y) -> torch.Tensor:
    """The trainer's per-pair loss for the AC-GAN critic: realness of both rows, plus the
    label loss of the real one."""
    logits, class_logits = module(x, y)
    targets = torch.zeros_like(logits)
    targets[:, 0] = 1.0
    realness = F.binary_cross_entropy_with_logits(logits, targets, reduction="none").sum(dim=1)
    labels = F.cross_entropy(class_logits[:, 0], y[:, 0].argmax(-1), reduction="none")
    return realness + labels


@pytest.mark.parametrize("as_columns", [False, True])  # rows dense, or the columns of their 1s
@pytest.mark.parametrize("clip", [0.05, 1.0])  # every pair clipped; some pairs not
def test_every_layer_of_the_ac_critic_is_clipped_per_pair(clip, as_columns):
    """The critic the trainer uses (two hidden layers, the label's projection and the class
    head): the update is the sum over pairs of each pair's clipped gradient of its whole loss,
    over every parameter, however the norms are computed. Rows given as the columns of their
    1s (as the trainer gives one-hot tables) are clipped as their dense rows would be."""

    def fresh() -> Discriminator:
        return Discriminator(WIDTH, CLASSES, hidden=[8, 8], auxiliary_classifier=True)

    torch.manual_seed(0)
    discriminator = fresh()
    critic = private(discriminator, clip=clip)
    clipped = 0
    for seed in (1, 2):  # twice: no norm of one step is reused by the next
        x, columns, y = one_hot_pair_batch(seed, size=6)
        if not as_columns:
            x = x + 0.3 * torch.randn(x.shape, generator=torch.Generator().manual_seed(seed))
        start = fresh()  # a copy without the clipper's hooks
        start.load_state_dict(discriminator.state_dict())
        critic.zero_grad()
        critic.step(ac_pair_losses(critic.module, columns if as_columns else x, y))
        expected = torch.zeros_like(flat_params(start))
        for i in range(len(x)):
            model = copy.deepcopy(start)
            ac_pair_losses(model, x[i : i + 1], y[i : i + 1]).sum().backward()
            grad = torch.cat([p.grad.flatten() for p in model.parameters()])
            clipped += float(grad.norm()) > clip
            expected += grad * min(1.0, clip / float(grad.norm()))
        applied = flat_params(start) - flat_params(discriminator)
        torch.testing.assert_close(applied, expected / 4, rtol=1e-4, atol=1e-6)
    assert clipped > 0 and (clipped == 12) == (clip < 1)


def head_left_out(critic, x, y) -> torch.Tensor:
    """A loss the head is not in: the head's layer gets no per-sample norm."""
    return critic.module.body(torch.cat([x, y], -1)).pow(2).sum(dim=(1, 2))


def two_forward_passes(critic, x, y) -> torch.Tensor:
    """Every layer runs twice before the step (as a shared layer would): one pass's inputs
    and output gradients are not the whole of a sample's gradient."""
    return pair_losses(critic.module, x, y) + pair_losses(critic.module, x.flip(0), y)


def one_loss_per_row(critic, x, y) -> torch.Tensor:
    """[pairs, 1] instead of [pairs]: scaling it by the clipping factors would broadcast."""
    return pair_losses(critic.module, x, y)[:, None]


def assert_no_forward_left(critic) -> None:
    """Nothing the clipper recorded from a forward pass outlives its step."""
    assert not any(critic.clipper._records.values())


@pytest.mark.parametrize(
    ("loss", "error"),
    [
        (head_left_out, "norm was not computed"),
        (two_forward_passes, "run once per step"),
        (one_loss_per_row, "one loss per sample"),
    ],
)
def test_a_step_that_cannot_be_clipped_exactly_is_refused_and_still_charged(loss, error):
    """A layer without a per-sample norm (left out of the loss), layers run twice, or losses
    not one per sample: the step is refused rather than clipped wrongly (e.g. with a layer's
    norm from an earlier step), it is charged all the same, D is unchanged, and a correct step
    can follow."""
    critic, discriminator, ledger, _ = make_critic(seed=0, sigma=0.0, clip=1.0)
    x, y = pair_batch(1)
    d_step(critic, x, y)
    before = flat_params(discriminator).clone()
    critic.zero_grad()
    with pytest.raises((RuntimeError, ValueError), match=error):
        critic.step(loss(critic, x, y))
    assert ledger.charges == 2
    assert torch.equal(flat_params(discriminator), before)
    assert_no_forward_left(critic)
    d_step(critic, x, y)
    assert ledger.charges == 3 and not torch.equal(flat_params(discriminator), before)


def test_a_forward_pass_before_the_steps_zero_grad_is_forgotten():
    """A pass through D outside a step (and outside ``frozen``) leaves nothing for the next
    step: its ``zero_grad`` drops it, and the step clips its own pass alone."""
    clip = 0.05
    critic, discriminator, _, before = make_critic(seed=0, sigma=0.0, clip=clip)
    x, y = pair_batch(1)
    pair_losses(critic.module, *pair_batch(2))
    d_step(critic, x, y)
    applied = flat_params(before) - flat_params(discriminator)
    expected = reference_update(before, x, y, clip, expected=4)
    torch.testing.assert_close(applied, expected, rtol=1e-4, atol=1e-6)


def test_a_parameter_unfrozen_after_wrapping_is_not_left_unclipped():
    """The clipper clips the parameters that were trainable when D was made private: one
    unfrozen later would get its gradient unclipped, so the step is refused (and charged);
    frozen again, training goes on."""
    torch.manual_seed(0)
    discriminator = Discriminator(WIDTH, CLASSES, hidden=[8])
    discriminator.head.requires_grad_(False)
    critic = private(discriminator)
    ledger = critic.ledger
    x, y = pair_batch(1)
    discriminator.head.requires_grad_(True)
    before = flat_params(discriminator).clone()
    with pytest.raises(RuntimeError, match="trainable parameters changed"):
        d_step(critic, x, y)
    assert ledger.charges == 1 and torch.equal(flat_params(discriminator), before)
    assert_no_forward_left(critic)
    discriminator.head.requires_grad_(False)
    d_step(critic, x, y)
    assert ledger.charges == 2 and not torch.equal(flat_params(discriminator), before)


@pytest.mark.parametrize("frozen", ["head.bias", "head.weight", "body.0.weight"])
def test_a_frozen_parameter_gets_no_gradient_and_stays_put(frozen):
    """Opacus noises only the parameters that need a gradient; one that does not must get no
    gradient either, or the optimizer would move it by an unclipped, noiseless sum."""
    torch.manual_seed(0)
    discriminator = Discriminator(WIDTH, CLASSES, hidden=[8])
    parameter = discriminator.get_parameter(frozen)
    parameter.requires_grad_(False)
    critic = private(discriminator, sigma=10.0)
    before = parameter.detach().clone()
    d_step(critic, *pair_batch(1))
    assert parameter.grad is None and torch.equal(parameter, before)


def test_each_pairs_clipped_gradient_is_at_most_c():
    """One pair a step, its gradient far above C: the clipped gradient (noise 0, expected
    batch 1) is at most C, float32 sums included."""
    clip = 1e-3
    critic, discriminator, _, _ = make_critic(seed=0, sigma=0.0, clip=clip, expected=1)
    for seed in range(20):
        x, y = pair_batch(seed, size=1)
        d_step(critic, 50.0 * x, y)
        norm = torch.cat([p.grad.flatten() for p in discriminator.parameters()]).double().norm()
        assert clip * (1 - 1e-4) < norm <= clip


def test_layers_whose_gradients_the_clipper_cannot_form_are_refused():
    """A weight tied between two layers (its gradient is the sum of two products) is refused
    when D is made private; an in-place change of a layer's output (its gradient is no longer
    that of the product) when the step is taken, charged and with D unchanged."""
    torch.manual_seed(0)
    tied = Discriminator(WIDTH, CLASSES, hidden=[8, 8])
    tied.body[2].weight = tied.body[0].weight  # both [8, 8]: WIDTH + CLASSES inputs
    with pytest.raises(ValueError, match="one linear layer's own"):
        private(tied)
    critic, discriminator, ledger, _ = make_critic(seed=0, sigma=0.0, clip=1.0)
    discriminator.body[1].inplace = True  # the LeakyReLU after the first layer
    before = flat_params(discriminator).clone()
    with pytest.raises(RuntimeError, match="changed in place"):
        d_step(critic, *pair_batch(1))
    assert ledger.charges == 1 and torch.equal(flat_params(discriminator), before)
    assert_no_forward_left(critic)


def test_generator_pass_through_d_does_not_leak_into_the_next_step():
    x1, y1 = pair_batch(1)
    x2, y2 = pair_batch(2)
    leaked, d_leaked, _, _ = make_critic(seed=0, sigma=0.0, clip=0.5)
    clean, d_clean, _, _ = make_critic(seed=0, sigma=0.0, clip=0.5)
    d_step(leaked, x1, y1)
    d_step(clean, x1, y1)
    grads_before = [p.grad.clone() for p in d_leaked.parameters()]
    fake = torch.randn(7, WIDTH, requires_grad=True)
    with leaked.frozen() as frozen:
        g_loss = F.binary_cross_entropy_with_logits(
            frozen(fake, torch.zeros(7, CLASSES))[0], torch.ones(7)
        )
        g_loss.backward()
    assert fake.grad is not None and fake.grad.abs().sum() > 0  # G does get a signal
    assert_no_forward_left(leaked)  # recording was paused, not merely dropped by zero_grad
    for before, p in zip(grads_before, d_leaked.parameters(), strict=True):
        assert torch.equal(before, p.grad)  # the G pass wrote nothing into D
    d_step(leaked, x2, y2)
    d_step(clean, x2, y2)
    torch.testing.assert_close(flat_params(d_leaked), flat_params(d_clean))


def test_empty_poisson_batch_still_adds_noise_and_is_charged():
    critic, discriminator, ledger, _ = make_critic(seed=0, sigma=1.0, clip=1.0)
    before = flat_params(discriminator).clone()
    x = torch.zeros(0, 2, WIDTH)
    y = torch.zeros(0, 2, CLASSES)
    d_step(critic, x, y)
    after = flat_params(discriminator)
    assert torch.isfinite(after).all()
    assert (after - before).abs().sum() > 0
    assert ledger.charges == 1


def test_the_noise_is_sigma_times_c_on_the_sum_divided_by_the_expected_batch():
    """An empty batch (its clipped sum is 0): each step's update is pure noise of standard
    deviation sigma * C / expected batch size, on every coordinate."""
    sigma, clip, expected = 2.0, 0.5, 4
    critic, discriminator, _, _ = make_critic(seed=0, sigma=sigma, clip=clip, expected=expected)
    x, y = torch.zeros(0, 2, WIDTH), torch.zeros(0, 2, CLASSES)
    updates = []
    for _ in range(200):
        before = flat_params(discriminator).clone()
        d_step(critic, x, y)
        updates.append(flat_params(discriminator) - before)
    std = torch.stack(updates).std(dim=0)  # SGD with lr = 1: the update is minus the gradient
    assert float(std.min()) > 0.8 * sigma * clip / expected
    assert abs(float(std.mean()) / (sigma * clip / expected) - 1) < 0.03


@pytest.mark.parametrize("ahead", [False, True], ids=["drawn_in_the_step", "drawn_a_step_ahead"])
def test_each_steps_noise_is_the_next_draw_of_a_stream_of_its_own(ahead):
    """Empty batches (the clipped sum is 0): step k's update is minus the k-th draw of the noise
    source (the run's seed, then NOISE_STREAM) over the expected batch, drawn in the step or
    a step ahead on another thread alike: no draw reused, skipped or taken from the stream of
    the batches and fakes."""
    sigma, clip, expected = 2.0, 0.5, 4
    critic, discriminator, _, _ = make_critic(seed=0, sigma=sigma, clip=clip, expected=expected)
    x, y = torch.zeros(0, 2, WIDTH), torch.zeros(0, 2, CLASSES)
    noise = SecretRandomness(0).independent(NOISE_STREAM)
    with ThreadPoolExecutor(1) as thread:
        critic.draw_noise_ahead(thread if ahead else None)
        for _ in range(3):
            before = flat_params(discriminator).clone()
            d_step(critic, x, y)
            drawn = [noise.gaussian_noise(p, sigma * clip) for p in discriminator.parameters()]
            expected_update = -torch.cat([d.flatten() for d in drawn]) / expected
            torch.testing.assert_close(flat_params(discriminator) - before, expected_update)
        critic.draw_noise_ahead(None)


def test_plain_sgd_uses_the_same_loss_scaling_as_dp_sgd_without_clipping_or_noise():
    critic, discriminator, _, _ = make_critic(seed=0, sigma=0.0, clip=1e6)
    torch.manual_seed(0)
    plain_d = Discriminator(WIDTH, CLASSES, hidden=[8])
    plain = PlainSGD(plain_d, torch.optim.SGD(plain_d.parameters(), lr=1.0), 4)
    x, y = pair_batch(3)
    d_step(critic, x, y)
    d_step(plain, x, y)
    torch.testing.assert_close(flat_params(discriminator), flat_params(plain_d))
