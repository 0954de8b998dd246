"""The example models train on dipu with no CPU fallback and the losses CPU gives.

Each model (``SmallCNN``, ``GPT``, ``MLP`` from examples/models.py) takes training steps with
SGD (momentum) and Adam at their default foreach settings. A dispatch mode records every aten op
that touches a dipu tensor, so a failure names both the ops that fell back and the whole op list.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import dipu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from models import GPT, MLP, GPTConfig, SmallCNN  # noqa: E402


class DipuOpRecorder(TorchDispatchMode):
    """Records the name of every aten op dispatched with a dipu tensor among its arguments or results."""

    def __init__(self):
        super().__init__()
        self.ops: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        tensors = [x for x in tree_leaves((args, kwargs, result)) if isinstance(x, torch.Tensor)]
        if any(t.device.type == "dipu" for t in tensors):
            self.ops[func.name()] = self.ops.get(func.name(), 0) + 1
        return result


def _classification_case(model: torch.nn.Module, input_shape: tuple[int, ...]):
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(input_shape, generator=generator)
    labels = torch.randint(10, (input_shape[0],), generator=generator)
    return model, (inputs, labels), lambda model, inputs, labels: F.cross_entropy(model(inputs), labels)


def _gpt_case(dropout: float):
    config = GPTConfig(vocab_size=32, seq_len=32, n_layer=2, n_head=2, d_model=32, dropout=dropout)
    tokens = torch.randint(32, (4, config.seq_len + 1), generator=torch.Generator().manual_seed(0))
    return GPT(config), (tokens[:, :-1], tokens[:, 1:]), lambda model, inputs, targets: model(inputs, targets)[1]


def build_case(name: str, dropout: float = 0.1):
    """(cpu model, cpu batch, loss function) for one example model, deterministically initialised."""
    torch.manual_seed(0)
    if name == "cnn":
        return _classification_case(SmallCNN(in_channels=3, num_classes=10, width=8), (8, 3, 16, 16))
    if name == "mlp":
        return _classification_case(MLP(in_features=32, hidden=64, num_classes=10), (16, 32))
    return _gpt_case(dropout)


OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=1e-3),
}


def train(model, batch, loss_fn, optimizer, steps: int) -> list[float]:
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = loss_fn(model, *batch)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def to_dipu(model, batch):
    return copy.deepcopy(model).to("dipu"), tuple(t.to("dipu") for t in batch)


@pytest.mark.parametrize("optimizer_name", OPTIMIZERS)
@pytest.mark.parametrize("model_name", ["cnn", "gpt", "mlp"])
def test_training_step_has_no_cpu_fallback(model_name, optimizer_name):
    model, batch, loss_fn = build_case(model_name)
    model, batch = to_dipu(model, batch)
    optimizer = OPTIMIZERS[optimizer_name](model.parameters())
    dipu.reset_fallback_counts()
    with DipuOpRecorder() as recorder:
        # The second step reaches the optimizers' steady state (e.g. momentum's _foreach_mul_).
        train(model, batch, loss_fn, optimizer, steps=2)
    fallbacks = dipu.fallback_counts()
    assert not fallbacks, (
        f"{model_name} + {optimizer_name}: {len(fallbacks)} op(s) ran through the CPU fallback: "
        + ", ".join(f"{op} x{count}" for op, count in sorted(fallbacks.items()))
        + f"\nall {len(recorder.ops)} aten ops dispatched on dipu: " + ", ".join(sorted(recorder.ops))
    )


@pytest.mark.parametrize("optimizer_name", OPTIMIZERS)
@pytest.mark.parametrize("model_name", ["cnn", "gpt", "mlp"])
def test_losses_match_cpu(model_name, optimizer_name):
    # Dropout off: dipu and CPU draw their masks through different ops (native_dropout vs bernoulli_).
    cpu_model, cpu_batch, loss_fn = build_case(model_name, dropout=0.0)
    dipu_model, dipu_batch = to_dipu(cpu_model, cpu_batch)
    cpu_losses = train(cpu_model, cpu_batch, loss_fn, OPTIMIZERS[optimizer_name](cpu_model.parameters()), 3)
    dipu_losses = train(dipu_model, dipu_batch, loss_fn, OPTIMIZERS[optimizer_name](dipu_model.parameters()), 3)
    assert dipu_losses == pytest.approx(cpu_losses, rel=1e-4, abs=1e-5)
