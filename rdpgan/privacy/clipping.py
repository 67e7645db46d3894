"""Per-sample gradient clipping for a module of linear layers, in one backward pass.

A sample's gradient of a linear layer is sum_t g_t a_t^T over its rows t (a_t the layer's input,
g_t the loss's gradient at its output; a (real, fake) pair has two rows), so

- its squared norm is sum_{t,u} (g_t . g_u)(a_t . a_u), without forming it (ghost clipping,
  Li et al. 2022; Opacus computes the same), and
- the sum over samples of the clipped gradients is sum_n c_n sum_t g_nt a_nt^T = (c G)^T A, one
  matrix product per layer (book-keeping, Bu et al. 2023).

So the layers' inputs from the forward pass and their output gradients from one backward pass
(to the layers' outputs: no weight gradient is formed there) are all a step needs. Opacus's ghost
clipping runs a second backward pass through the whole module for the same sum. Only modules
whose trainable parameters all sit in ``nn.Linear`` layers (:class:`CodeLinear` included) are
accepted: for them this is exact, and each layer must run once per forward pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from rdpgan.models import CodeLinear, column_weight_grad


class LinearClipper:
    """Records each trainable linear layer's input and output on ``module``'s forward passes,
    and turns per-sample losses into the sum of each sample's gradient clipped to
    ``max_grad_norm`` (:meth:`clipped_backward`)."""

    def __init__(self, module: nn.Module, max_grad_norm: float):
        self.module = module
        self.max_grad_norm = max_grad_norm
        self.params = [p for p in module.parameters() if p.requires_grad]
        self.layers = [
            m for m in module.modules() if any(p.requires_grad for p in m.parameters(False))
        ]
        others = [type(m).__name__ for m in self.layers if not isinstance(m, nn.Linear)]
        if others:
            raise ValueError(f"only linear layers can be clipped this way, not {others}")
        # A weight tied between layers, or a parameter beside a layer's weight and bias,
        # would have a gradient the layers' own products do not give.
        owned = [id(p) for m in self.layers for p in (m.weight, m.bias) if p is not None]
        if len(set(owned)) < len(owned) or not {id(p) for p in self.params} <= set(owned):
            raise ValueError("each trainable parameter must be one linear layer's own")
        self.recording = True
        self._records: dict[nn.Module, list[tuple[torch.Tensor, torch.Tensor, int]]] = {
            layer: [] for layer in self.layers
        }
        for layer in self.layers:
            layer.register_forward_hook(self._record)

    def _record(self, layer: nn.Module, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        if self.recording:
            self._records[layer].append((inputs[0].detach(), output, output._version))

    def forget(self) -> None:
        """Drop what the forward passes since the last step recorded."""
        for records in self._records.values():
            records.clear()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Forward passes inside record nothing (the module used as a fixed function)."""
        recording, self.recording = self.recording, False
        try:
            yield
        finally:
            self.recording = recording

    def clipped_backward(self, per_sample_loss: torch.Tensor) -> None:
        """Leave in each trainable parameter's ``grad`` the sum over samples of each sample's
        gradient of its loss, clipped to ``max_grad_norm`` in the norm over all parameters.

        Refused (with nothing written) unless each trainable layer ran exactly once since the
        last step, on a batch of the losses' samples, and every one of them is in the loss:
        anything else (a shared layer, a layer left out, a forward from elsewhere, a loss per
        row) would make a norm wrong or stale. What was recorded is dropped either way.
        """
        try:
            inputs, outputs = self._one_forward_each(per_sample_loss)
            output_grads = torch.autograd.grad(per_sample_loss.sum(), outputs, allow_unused=True)
        finally:
            self.forget()
        if any(g is None for g in output_grads):
            raise RuntimeError(
                "a layer's per-sample gradient norm was not computed (a trainable layer is not "
                "in the loss); step refused"
            )
        squared = torch.zeros_like(per_sample_loss, dtype=torch.float64)
        for layer, a, g in zip(self.layers, inputs, output_grads, strict=True):
            squared = squared + per_sample_squared_norms(layer, a, g)
        # A relative margin keeps a clipped norm at or under C despite the float32 sums that
        # form the gradients (a norm is exact to about 1e-7 of itself).
        factor = (self.max_grad_norm / (squared.sqrt() * (1 + 1e-5) + 1e-6)).clamp(max=1.0)
        factor = factor.to(per_sample_loss.dtype)
        for layer, a, g in zip(self.layers, inputs, output_grads, strict=True):
            _set_clipped_sums(layer, a, g * factor.view(-1, *([1] * (g.dim() - 1))))

    def _one_forward_each(
        self, per_sample_loss: torch.Tensor
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        trainable = {id(p) for p in self.module.parameters() if p.requires_grad}
        if {id(p) for p in self.params} != trainable:
            raise RuntimeError("the trainable parameters changed since the module was made private")
        counts = {len(self._records[layer]) for layer in self.layers}
        if counts != {1}:
            raise RuntimeError(
                "a layer's per-sample gradient norm was not computed (each trainable layer must "
                f"run once per step, ran {sorted(counts)} times); step refused"
            )
        records = [self._records[layer][0] for layer in self.layers]
        if any(output._version != version for _, output, version in records):
            raise RuntimeError(
                "a layer's output was changed in place after it was recorded (an in-place "
                "activation?): its gradient would not be the layer's; step refused"
            )
        inputs = [a for a, _, _ in records]
        outputs = [output for _, output, _ in records]
        samples = {len(a) for a in inputs}
        if samples != {len(per_sample_loss)} or per_sample_loss.dim() != 1:
            raise ValueError(
                f"expected one loss per sample, shape ({samples.pop() if samples else '?'},), "
                f"got {tuple(per_sample_loss.shape)}"
            )
        return inputs, outputs


def _rows(t: torch.Tensor) -> torch.Tensor:
    """[samples, rows, features]: a sample's rows side by side (one, if it has no row axis)."""
    return t.unsqueeze(1) if t.dim() == 2 else t.flatten(1, -2)


def per_sample_squared_norms(layer: nn.Linear, a: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Each sample's squared gradient norm over the layer's trainable weight and bias: with G
    its rows' output gradients and A their inputs, sum_{t,u} (G G^T)_tu (A A^T)_tu and
    sum_{t,u} (G G^T)_tu. For a :class:`CodeLinear` given the columns of its rows' 1s,
    (A A^T)_tu counts the columns rows t and u share (a repeat counting as a 2 would): the
    dense formula, exactly."""
    a, g = _rows(a), _rows(g)
    ggt = torch.einsum("nto,nuo->ntu", g, g).double()
    squared = torch.zeros(len(g), dtype=torch.float64, device=g.device)
    if layer.weight.requires_grad:
        if a.is_floating_point():
            aat = torch.einsum("nti,nui->ntu", a, a).double()
        else:
            aat = (a[:, :, None, :, None] == a[:, None, :, None, :]).sum((-1, -2)).double()
        squared = squared + (ggt * aat).sum((1, 2)).clamp(min=0)
    if layer.bias is not None and layer.bias.requires_grad:
        squared = squared + ggt.sum((1, 2)).clamp(min=0)
    return squared


def _set_clipped_sums(layer: nn.Linear, a: torch.Tensor, scaled: torch.Tensor) -> None:
    """The layer's gradients from every sample's output gradients already scaled by its
    clipping factor: (c G)^T A for the weight, the sum of c G for the bias."""
    g = scaled.reshape(-1, layer.out_features)
    if layer.weight.requires_grad:
        if a.is_floating_point():
            grad = g.t().to(a.dtype) @ a.reshape(len(g), layer.in_features)
        elif isinstance(layer, CodeLinear):
            grad = column_weight_grad(a.reshape(len(g), a.shape[-1]), g, layer.in_features)
        else:
            raise TypeError("only a CodeLinear takes the columns of its rows' 1s")
        layer.weight.grad = grad.to(layer.weight.dtype)
    if layer.bias is not None and layer.bias.requires_grad:
        layer.bias.grad = g.sum(0).to(layer.bias.dtype)
