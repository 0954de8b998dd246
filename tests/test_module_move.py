"""Moving a module to dipu keeps its Parameter objects, so tied and shared weights stay tied.

See Note [Moving modules keeps shared Parameters] in dipu/csrc/metadata_ops.cpp.
"""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class TiedLM(nn.Module):
    """A language model whose output head is its input embedding, as GPT-2 and T5 do."""

    def __init__(self, vocab=13, dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.embed.weight

    def forward(self, idx):
        return self.lm_head(torch.tanh(self.mix(self.embed(idx))))


MOVES = {
    "to": lambda m: m.to("dipu"),
    "to_device_dtype": lambda m: m.to(torch.device("dipu"), torch.float32),
    "dipu": lambda m: m.dipu(),
    "dipu_1": lambda m: m.dipu(1),
}


@pytest.mark.parametrize("move", MOVES)
def test_tied_weights_stay_tied(move):
    model = TiedLM()
    weight = model.embed.weight
    MOVES[move](model)
    assert model.lm_head.weight is model.embed.weight is weight
    assert weight.device.type == "dipu" and isinstance(weight, nn.Parameter)
    assert len(list(model.parameters())) == 3
    model.cpu()
    assert model.lm_head.weight is model.embed.weight is weight and weight.device.type == "cpu"


def test_to_empty_and_load_state_dict_after_the_move():
    source = TiedLM()
    model = TiedLM().to_empty(device="dipu")
    assert model.lm_head.weight is model.embed.weight
    model.load_state_dict(source.state_dict())
    assert model.lm_head.weight is model.embed.weight
    torch.testing.assert_close(model.embed.weight.cpu(), source.embed.weight.detach())


def test_gradient_and_optimizer_state_move_with_the_parameter():
    model = nn.Linear(3, 2)
    model(torch.randn(4, 3)).sum().backward()
    grad = model.weight.grad.clone()
    model.to("dipu")
    assert model.weight.grad.device.type == "dipu"
    torch.testing.assert_close(model.weight.grad.cpu(), grad)


def test_tied_model_trains_with_the_cpu_gradients():
    torch.manual_seed(0)
    model = TiedLM()
    idx, target = torch.randint(0, 13, (4, 6)), torch.randint(0, 13, (4, 6))
    results = {}
    for device in ("cpu", "dipu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(m(idx.to(device)).flatten(0, 1), target.to(device).flatten())
            loss.backward()
            grad = m.embed.weight.grad.cpu()
            opt.step()
        results[device] = grad, m.embed.weight.detach().cpu(), m.lm_head.weight.detach().cpu()
    for got, want in zip(results["dipu"], results["cpu"]):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_cross_type_moves_still_replace_the_parameter():
    """Only dense CPU <-> dipu moves swap data in place; a dtype change keeps PyTorch's own rules."""
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device="dipu"))
    assert torch._has_compatible_shallow_copy_type(torch.ones(1, device="dipu"), torch.ones(1))
    assert not torch._has_compatible_shallow_copy_type(torch.ones(1, device="dipu"),
                                                       torch.ones(1).to_sparse())
