"""An MLP, a small CNN and a transformer block train on dipu exactly as on CPU, with no CPU fallback;
the example's CNN and GPT train as on CPU natively, with every op forced to the fallback, and on a
vendor with only a runtime."""

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dipu
from conftest import NATIVE_DEVICE


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden, self.out = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        # No bias before batch norm (as in ResNets): it would get no gradient, only rounding noise, which Adam
        # scales up to full steps, so on a GPU vendor its values would compare nothing but that noise.
        self.conv1, self.bn = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.fc = nn.Conv2d(8, 8, 3, padding=1), nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


class TransformerBlock(nn.Module):
    def __init__(self, vocab=11, dim=16, heads=2, length=6):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, dim), nn.Embedding(length, dim)
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        # No qkv bias: the keys' part would get no gradient (softmax ignores a shift shared by a row), only
        # rounding noise, which Adam scales up to full steps (as the CNN's bias before batch norm).
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim)
        self.fc1, self.fc2, self.head = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim), nn.Linear(dim, vocab)
        self.dropout, self.heads = nn.Dropout(0.1), heads

    def forward(self, idx):
        batch, length = idx.shape
        x = self.tokens(idx) + self.positions(torch.arange(length, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
        causal = torch.ones(length, length, device=idx.device).triu(1) > 0
        attention = self.dropout(scores.masked_fill(causal, float("-inf")).softmax(-1))
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(batch, length, -1))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return self.head(x)


def make_case(name):
    torch.manual_seed(0)
    if name == "mlp":
        return MLP(), torch.randn(8, 16), torch.randint(0, 4, (8,))
    if name == "cnn":
        return CNN(), torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))
    return TransformerBlock(), torch.randint(0, 11, (2, 6)), torch.randint(0, 11, (2, 6))


def train(model, x, y, device, optimizer, steps=3):
    model, x, y = copy.deepcopy(model).to(device), x.to(device), y.to(device)
    if optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, foreach=False)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in model.parameters()]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer"])
def test_trains_like_cpu_without_fallback(name, optimizer):
    model, x, y = make_case(name)
    if NATIVE_DEVICE != "cpu" and name == "transformer":
        model.dropout.p = 0.0  # a GPU vendor's generator draws other masks than the CPU's for one seed
    torch.manual_seed(1)  # dropout: the CPU generator and ...
    cpu_losses, cpu_params = train(model, x, y, "cpu", optimizer)
    torch.dipu.manual_seed(1)  # ... the dipu one draw the same masks
    dipu.reset_fallback_counts()
    dipu_losses, dipu_params = train(model, x, y, "dipu", optimizer)
    assert dipu.fallback_counts() == {}
    torch.testing.assert_close(dipu_losses, cpu_losses, rtol=1e-5, atol=1e-6)
    assert cpu_losses[-1] < cpu_losses[0]
    for got, want in zip(dipu_params, cpu_params):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train.py"
BRING_UP_MODES = {
    "native": {},
    "force-fallback-everything": {"DIPU_FORCE_FALLBACK_OPS_LIST": ".*"},
    "runtime-only-vendor": {"DIPU_SIM_NATIVE_ALIAS": "0"},  # no op library, copies through vendor memcpy
}


def example_losses(device: str, env: dict) -> list[float]:
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--device", device, "--epochs", "1"],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [float(loss) for loss in re.findall(r"epoch 1/1  loss (\S+)", proc.stdout)]


@pytest.fixture(scope="module")
def cpu_example_losses():
    return example_losses("cpu", {})


@pytest.mark.parametrize("mode", BRING_UP_MODES)
def test_example_trains_both_models_like_cpu(mode, cpu_example_losses):
    """examples/train.py (a CNN and a GPT) under each bring-up mode prints the CPU's losses (AdamW
    takes its foreach path on dipu and its per-tensor one on the CPU: float rounding differs)."""
    assert len(cpu_example_losses) == 2
    assert example_losses("dipu", BRING_UP_MODES[mode]) == pytest.approx(cpu_example_losses, rel=1e-3)
