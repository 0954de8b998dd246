"""dipu beside torch's own accelerator: who activates dipu (Note [Who activates dipu] in dipu_autoload.py), and
dipu's error at a CUDA backward where both are active (Note [CUDA backward beside dipu] in
dipu/integrations/coexistence.py).

Without a GPU, torch is made to see one: each child process starts with torch's autoload off, tells torch
it was built with CUDA and sees one GPU, and only then runs the autoload as ``import torch`` runs it.
"""

import textwrap

import pytest
import torch

import dipu_autoload
from dipu.integrations import coexistence

#: Neither variable asks for dipu (an empty value is unset), whatever the suite runs under.
NOT_ASKED = {"DIPU_VENDOR": "", "DIPU_MOCK_CUDA": ""}

#: torch's autoload in a process whose torch sees a GPU; prints what it left.
AUTOLOAD_BESIDE_A_GPU = textwrap.dedent("""
    import sys
    import torch
    before = torch._C._accelerator_getAccelerator()
    torch.accelerator.current_accelerator = lambda check_available=False: torch.device("cuda")
    torch.cuda.device_count = lambda: 1
    torch._import_device_backends()  # what `import torch` runs when TORCH_DEVICE_BACKEND_AUTOLOAD is not 0
    after = torch._C._accelerator_getAccelerator()
    print("dipu" in sys.modules, after == before, torch._C._get_privateuse1_backend_name())
""")


def test_a_process_with_a_gpu_of_its_own_is_untouched(python):
    out = python(AUTOLOAD_BESIDE_A_GPU, env={**NOT_ASKED, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}).stdout
    assert out.split() == ["False", "True", "privateuseone"]


@pytest.mark.parametrize("variable, value", [("DIPU_VENDOR", "sim"), ("DIPU_MOCK_CUDA", "1")])
def test_the_environment_asks_for_dipu_beside_a_gpu(python, variable, value):
    env = {**NOT_ASKED, variable: value, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    out = python(AUTOLOAD_BESIDE_A_GPU + "print(torch._C._accelerator_getAccelerator())", env=env).stdout
    assert out.split() == ["True", "False", "dipu", "dipu"]


def test_import_dipu_activates_it_beside_a_gpu(python):
    out = python(AUTOLOAD_BESIDE_A_GPU + textwrap.dedent("""
        import dipu
        print(torch._C._accelerator_getAccelerator(), torch.randn(3, device="dipu").device)
    """), env={**NOT_ASKED, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}).stdout
    assert out.split() == ["False", "True", "privateuseone", "dipu", "dipu:0"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch has a GPU of its own here, so a child asking for nothing "
                                                     "rightly leaves dipu out")
def test_without_an_accelerator_of_its_own_import_torch_activates_dipu(python, monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)  # a CUDA build on a machine without a GPU
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: torch.device("cuda"))
    with monkeypatch.context() as m:
        for name in NOT_ASKED:
            m.delenv(name, raising=False)
        assert dipu_autoload.native_accelerator() is None and dipu_autoload.should_activate()
    out = python("import torch; print(torch.randn(3, device='dipu').device)", env=NOT_ASKED).stdout
    assert out.strip() == "dipu:0"


def test_the_rule(monkeypatch):
    for name in NOT_ASKED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert dipu_autoload.native_accelerator() == "cuda"
    assert dipu_autoload.requested() is None and not dipu_autoload.should_activate()
    for variable, value in (("DIPU_VENDOR", "cuda"), ("DIPU_MOCK_CUDA", "True")):
        with monkeypatch.context() as m:
            m.setenv(variable, value)
            assert dipu_autoload.requested() == variable and dipu_autoload.should_activate()
    for off in ("0", "false", " "):
        monkeypatch.setenv("DIPU_MOCK_CUDA", off)
        assert not dipu_autoload.should_activate()
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda check_available=False: None)
    assert dipu_autoload.native_accelerator() is None and dipu_autoload.should_activate()


UPSTREAM_ASSERT = ('opt_ready_stream && opt_parent_stream INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/torch/'
                   'csrc/autograd/engine.cpp":1096, please report a bug to PyTorch.')


def test_the_cuda_backward_error_names_cause_issue_and_way_out():
    error = coexistence.explained(RuntimeError(UPSTREAM_ASSERT))
    assert isinstance(error, coexistence.CudaBackwardBesideDipu) and str(error) == coexistence.MESSAGE
    assert str(error).startswith("dipu: a backward pass through CUDA tensors cannot run in a process where dipu "
                                 "is active")
    assert "pytorch/pytorch#161129" in str(error) and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in str(error)
    other = RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    assert coexistence.explained(other) is other
    consumer = RuntimeError("opt_consumer_stream && opt_producer_stream INTERNAL ASSERT FAILED at ...")
    assert isinstance(coexistence.explained(consumer), coexistence.CudaBackwardBesideDipu)


def test_the_explaining_engine_runs_every_backward(python):
    """Installed (as on a CUDA build), backward, autograd.grad and engine callbacks work as before, and an
    engine error that is not the stream assertion comes through unchanged."""
    python("""
        import torch
        from torch.autograd.variable import Variable
        from dipu.integrations import coexistence
        coexistence.install(); coexistence.install()
        engine = Variable._execution_engine
        assert isinstance(engine, torch._C._ImperativeEngine) and type(engine).__name__ == "_Engine"
        x = torch.ones(3, device="dipu", requires_grad=True)
        (x * 2).sum().backward()
        assert x.grad.cpu().tolist() == [2.0, 2.0, 2.0]
        (g,) = torch.autograd.grad((x * x).sum(), x)
        assert g.cpu().tolist() == [2.0, 2.0, 2.0]
        try:
            torch.ones(2).sum().backward()
        except RuntimeError as error:
            assert "does not require grad" in str(error), error
        else:
            raise AssertionError("expected the engine's own error")
    """)
