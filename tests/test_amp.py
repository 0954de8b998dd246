"""torch.autocast("dipu") applies PyTorch's CUDA cast policy; GradScaler works."""

import pytest
import torch

LOW = (torch.float16, torch.bfloat16)


@pytest.fixture
def tensors():
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(8, 8, generator=gen).to("dipu")
    b = torch.randn(8, 8, generator=gen).to("dipu")
    return a, b


@pytest.mark.parametrize("dtype", LOW)
def test_lower_precision_ops(tensors, dtype):
    a, b = tensors
    with torch.autocast("dipu", dtype=dtype):
        assert (a @ b).dtype == dtype
        assert torch.nn.functional.linear(a, b).dtype == dtype
        assert torch.addmm(a, a, b).dtype == dtype
        image = torch.randn(1, 2, 5, 5, device="dipu")
        weight = torch.randn(3, 2, 3, 3, device="dipu")
        assert torch.nn.functional.conv2d(image, weight).dtype == dtype


@pytest.mark.parametrize("dtype", LOW)
def test_fp32_ops(tensors, dtype):
    a, b = tensors
    with torch.autocast("dipu", dtype=dtype):
        low = a @ b
        assert torch.softmax(low, -1).dtype == torch.float32
        assert torch.log_softmax(low, -1).dtype == torch.float32
        assert torch.nn.functional.layer_norm(low, (8,)).dtype == torch.float32
        assert torch.nn.functional.mse_loss(low, low).dtype == torch.float32
        assert low.sum().dtype == torch.float32  # fp32_set_opt_dtype
        assert low.pow(2).dtype == torch.float32


@pytest.mark.parametrize("dtype", LOW)
def test_promote_ops_and_untouched_ops(tensors, dtype):
    a, b = tensors
    with torch.autocast("dipu", dtype=dtype):
        low = a @ b
        assert torch.cat([low, a]).dtype == torch.float32
        assert torch.addcmul(a, low, low).dtype == torch.float32
        assert (low + low).dtype == dtype  # not in any list: runs in its input dtype
        assert torch.relu(low).dtype == dtype


def test_disabled_outside_and_backend_module_answers(tensors):
    a, b = tensors
    assert torch.dipu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert not torch.dipu.is_autocast_enabled()
    with torch.autocast("dipu", dtype=torch.bfloat16):
        assert torch.dipu.is_autocast_enabled()
        assert torch.dipu.get_autocast_dtype() == torch.bfloat16
    assert (a @ b).dtype == torch.float32
    torch.dipu.set_autocast_dtype(torch.float16)
    assert torch.dipu.get_autocast_dtype() == torch.float16
    torch.dipu.set_autocast_enabled(True)
    try:
        assert (a @ b).dtype == torch.float16
    finally:
        torch.dipu.set_autocast_enabled(False)


def test_binary_cross_entropy_is_banned_like_on_cuda():
    p = torch.rand(4, device="dipu")
    with torch.autocast("dipu", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(p, p)


def test_grad_scaler_skips_steps_with_inf_and_trains_otherwise():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).dipu()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("dipu", init_scale=2.0**10)
    x = torch.randn(16, 4, device="dipu")
    y = x.sum(1, keepdim=True)
    losses, scales = [], []
    for step in range(6):
        opt.zero_grad()
        with torch.autocast("dipu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        if step == 2:
            model.weight.grad.fill_(float("inf"))
        before = model.weight.detach().cpu().clone()
        scaler.step(opt)
        scaler.update()
        changed = not torch.equal(before, model.weight.detach().cpu())
        assert changed == (step != 2)
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    assert scales[2] == scales[1] / 2  # the inf step halved the scale
    assert losses[-1] < losses[0]
