"""Users' training libraries on dipu, unmodified: Hugging Face ``Trainer`` and Lightning ``Trainer`` under
``DIPU_MOCK_CUDA=1`` (Note [Mock CUDA]), Lightning's ``accelerator="dipu"`` (Note [Lightning accelerator]) and
``accelerate`` with ``ACCELERATE_TORCH_DEVICE=dipu`` (docs/user-guide.md, "Training libraries").

Every run is a fresh interpreter (the mock is decided at import) printing its losses as JSON; each dipu run is
compared with the same library's run on the CPU. The libraries come with the ``test`` extra; without one, its
tests skip. Tiny models built from a config: nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from conftest import run_python


def _needs(*modules: str):
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    return pytest.mark.skipif(bool(missing), reason=f"{', '.join(missing)} not installed (pip install -e '.[test]')")


pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="mock CUDA is checked where torch has no CUDA device")

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "DISABLE_MLFLOW_INTEGRATION": "TRUE", "WANDB_DISABLED": "true"}
MOCK = {**OFFLINE, "DIPU_MOCK_CUDA": "1"}


def _result(proc) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout + proc.stderr
    return json.loads(lines[-1][len("RESULT "):])


# ---------------------------------------------------------------------------------------------------------------
# Hugging Face Trainer

HF_TRAINER = """
import json, tempfile, torch
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

class Tokens(Dataset):
    def __init__(self):
        self.ids = torch.randint(0, 64, (16, 8), generator=torch.Generator().manual_seed(0))
    def __len__(self):
        return len(self.ids)
    def __getitem__(self, i):
        return {{"input_ids": self.ids[i], "labels": self.ids[i]}}

def train(use_cpu, batch, precision):
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=1, n_head=2,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # no dropout: the CPU's and dipu's RNGs differ
    model = GPT2LMHeadModel(config)
    seen = set()  # (dtype of an MLP's output, device) inside the forward pass
    model.transformer.h[0].mlp.register_forward_hook(lambda m, i, out: seen.add((str(out.dtype), str(out.device))))
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=4, per_device_train_batch_size=batch, logging_steps=1,
                                 report_to=[], save_strategy="no", use_cpu=use_cpu, seed=0, dataloader_num_workers=0,
                                 disable_tqdm=True, **({{precision: True}} if precision else {{}}))
        trainer = Trainer(model=model, args=args, train_dataset=Tokens())
        trainer.train()
    return {{"losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
            "n_gpu": args.n_gpu, "device": str(args.device), "wrapper": type(trainer.model_wrapped).__name__,
            "seen": sorted(map(list, seen))}}


print("RESULT", json.dumps([train(*run) for run in {runs!r}]))
"""


def _hf(runs: list[tuple[bool, int, str | None]], env: dict) -> list[dict]:
    """Trainer runs (use_cpu, per-device batch, None/"bf16"/"fp16") in one interpreter."""
    return _result(run_python(HF_TRAINER.format(runs=runs), env=env))


@pytest.fixture(scope="module")
def hf_on_the_cpu() -> dict:
    """The CPU's Trainer runs, fp32 and bf16, batch 8: both tests' references, from one interpreter."""
    fp32, bf16 = _hf([(True, 8, None), (True, 8, "bf16")], env=OFFLINE)
    return {"fp32": fp32, "bf16": bf16}


@_needs("transformers", "accelerate")
def test_hugging_face_trainer_under_mock_cuda_matches_the_cpu(hf_on_the_cpu):
    """fp32 on both simulated devices: Trainer sees two GPUs and wraps the model in nn.DataParallel
    (batch 4 per device), which must give the CPU's losses for one batch of 8."""
    cpu = hf_on_the_cpu["fp32"]
    [dipu] = _hf([(False, 4, None)], env=MOCK)
    assert dipu["n_gpu"] == 2 and dipu["device"] == "cuda:0" and dipu["wrapper"] == "DataParallel", dipu
    assert {device for _, device in dipu["seen"]} == {"dipu:0", "dipu:1"}, dipu["seen"]
    assert len(cpu["losses"]) == 4
    torch.testing.assert_close(dipu["losses"], cpu["losses"], rtol=1e-5, atol=1e-5)


HF_CPP_PATH = """
import json, torch, dipu, transformers
from dipu.kernels import cpp_wrappers
from dipu.report.collect import op_records
torch.manual_seed(0)
config = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=64, n_layer=2, n_head=4, eos_token_id=0,
                                 pad_token_id=0, bos_token_id=0, attn_implementation="sdpa")
model = transformers.GPT2LMHeadModel(config).to("dipu").train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
ids = torch.randint(1, 100, (2, 16)).to("dipu")
for _ in range(2):
    model(ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
model.eval()
with torch.no_grad():
    model.generate(ids[:, :4], attention_mask=torch.ones_like(ids[:, :4]), max_new_tokens=6, min_new_tokens=6,
                   do_sample=False)
fast, records = cpp_wrappers.fast_calls(), op_records()
native = {n: r for n, r in records.items() if r["category"] == "native"}
print("RESULT", json.dumps({
    "kernels": len(native), "python": {n: [r["calls"], fast.get(n, 0)] for n, r in native.items()
                                       if fast.get(n, 0) < r["calls"]},
    "fallbacks": {n: r["fallback_calls"] for n, r in records.items() if r["fallback_calls"]},
    "attention": {n: c for n, c in fast.items() if "attention" in n}}))
"""


@_needs("transformers")
def test_hugging_face_gpt2_trains_and_generates_on_the_cpp_path(tmp_path):
    """A Hugging Face GPT-2 with its default sdpa attention (dropout in training): two AdamW steps and greedy
    generation with a key/value cache call only C++ wrappers, fused attention included, and nothing falls back."""
    r = _result(run_python(HF_CPP_PATH, env={**OFFLINE, "DIPU_REPORT": str(tmp_path)}))
    assert r["kernels"] > 30, r
    assert r["python"] == {}, f"calls of these ops took the Python wrapper ([calls, C++ calls]): {r['python']}"
    assert r["fallbacks"] == {}, r["fallbacks"]
    assert r["attention"]["_scaled_dot_product_fused_attention_overrideable_backward"] == 4, r["attention"]


@_needs("transformers", "accelerate")
def test_hugging_face_trainer_mixed_precision_under_mock_cuda(hf_on_the_cpu):
    """bf16=True and fp16=True on one device (with DataParallel, Trainer itself skips autocast):
    the forward pass runs in the reduced type on dipu; bf16 gives the CPU's bf16 losses."""
    one_device = {**MOCK, "DIPU_SIM_DEVICE_COUNT": "1"}
    cpu = hf_on_the_cpu["bf16"]
    bf16, fp16 = _hf([(False, 8, "bf16"), (False, 8, "fp16")], env=one_device)
    assert bf16["n_gpu"] == 1 and bf16["wrapper"] == "GPT2LMHeadModel", bf16
    assert bf16["seen"] == [["torch.bfloat16", "dipu:0"]], bf16["seen"]
    assert fp16["seen"] == [["torch.float16", "dipu:0"]], fp16["seen"]
    torch.testing.assert_close(bf16["losses"], cpu["losses"], rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(fp16["losses"], cpu["losses"], rtol=1e-2, atol=1e-2)  # fp16 rounds elsewhere


# ---------------------------------------------------------------------------------------------------------------
# Lightning

LIGHTNING = """
import json, sys, torch
assert "lightning" not in sys.modules  # dipu's accelerator is registered on Lightning's import, not before
import lightning as L
from lightning.pytorch.plugins.precision import MixedPrecision

class Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        self.steps = []
    def training_step(self, batch, index):
        x, y = batch
        out = self.net(x)
        loss = torch.nn.functional.mse_loss(out, y)
        self.steps.append((loss.item(), str(x.device), str(out.dtype)))
        return loss
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

generator = torch.Generator().manual_seed(0)
data = torch.utils.data.TensorDataset(torch.randn(32, 4, generator=generator), torch.randn(32, 1, generator=generator))

def fit(accelerator, precision="32-true", **kwargs):
    module = Regression()
    trainer = L.Trainer(accelerator=accelerator, devices=1, max_steps=4, precision=precision, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, **kwargs)
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=8))
    return module.steps

runs = {{}}
for name, accelerator, kwargs in {runs}:
    runs[name] = fit(accelerator, **kwargs)
print("RESULT", json.dumps(runs))
"""
def _runs(accelerator: str, prefix: str = "") -> str:
    """The three precisions on ``accelerator``, as a list literal for LIGHTNING's ``runs``."""
    return (f'[("{prefix}fp32", "{accelerator}", {{}}), '
            f'("{prefix}bf16", "{accelerator}", {{"precision": "bf16-mixed"}}), '
            f'("{prefix}fp16", "{accelerator}", {{"precision": "16-mixed"}})]')


# Lightning on the CPU turns "16-mixed" into bf16; the fp16 reference is its MixedPrecision plugin on the CPU.
CPU_RUNS = """[("fp32", "cpu", {}), ("bf16", "cpu", {"precision": "bf16-mixed"}),
               ("fp16", "cpu", {"precision": None,
                                "plugins": [MixedPrecision("16-mixed", "cpu", torch.amp.GradScaler("cpu"))]})]"""


def _lightning(python, runs: str, env: dict) -> dict:
    return _result(python(LIGHTNING.format(runs=runs), env=env))


def _assert_same_training(dipu_steps, cpu_steps):
    assert [device for _, device, _ in dipu_steps] == ["dipu:0"] * 4, dipu_steps
    assert [dtype for *_, dtype in dipu_steps] == [dtype for *_, dtype in cpu_steps]
    torch.testing.assert_close([loss for loss, *_ in dipu_steps], [loss for loss, *_ in cpu_steps],
                               rtol=1e-5, atol=1e-5)


@_needs("lightning")
def test_lightning_dipu_accelerator_and_gpu_under_mock_cuda_match_the_cpu(python):
    """accelerator="dipu" (no mock) and accelerator="gpu" under DIPU_MOCK_CUDA=1, in fp32, bf16-mixed and
    16-mixed: the steps run on dipu:0 in the CPU's dtypes with the CPU's losses."""
    native = _lightning(python, f"{CPU_RUNS} + {_runs('dipu', prefix='dipu ')}", env=OFFLINE)
    mock = _lightning(python, _runs("gpu"), env=MOCK)
    for precision in ("fp32", "bf16", "fp16"):
        assert native[precision][0][1] == "cpu"
        _assert_same_training(native["dipu " + precision], native[precision])
        _assert_same_training(mock[precision], native[precision])
    assert native["fp16"][0][2] == "torch.float16" and native["bf16"][0][2] == "torch.bfloat16"


@_needs("lightning")
def test_lightning_dipu_accelerator_registry_and_refusals(python):
    python("""
        import torch, pytest
        import lightning as L, pytorch_lightning as PL
        from lightning.fabric.utilities.exceptions import MisconfigurationException
        for package in (L.pytorch, PL):
            assert "dipu" in package.accelerators.AcceleratorRegistry.available_accelerators(), package
        trainer = L.Trainer(accelerator="dipu", devices=[1], logger=False)
        assert trainer.accelerator.name() == "dipu" and trainer.num_devices == 1
        with pytest.raises(MisconfigurationException, match="one device per process.*devices=2"):
            L.Trainer(accelerator="dipu", devices=2)
        with pytest.raises(MisconfigurationException, match="device 5 does not exist"):
            L.Trainer(accelerator="dipu", devices=[5])
    """)


# ---------------------------------------------------------------------------------------------------------------
# accelerate

@_needs("accelerate")
def test_accelerate_runs_on_dipu_with_its_device_variable(python):
    """The user guide's route: ACCELERATE_TORCH_DEVICE=dipu makes Accelerator() pick dipu; losses equal a CPU loop."""
    proc = python("""
        import json, torch
        from accelerate import Accelerator

        def train(device, prepare=None):
            torch.manual_seed(0)
            net = torch.nn.Linear(4, 1).to(device)
            optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
            if prepare:
                net, optimizer = prepare(net, optimizer)
            generator = torch.Generator().manual_seed(0)
            x, y = torch.randn(8, 4, generator=generator), torch.randn(8, 1, generator=generator)
            losses = []
            for _ in range(3):
                loss = torch.nn.functional.mse_loss(net(x.to(device)), y.to(device))
                (accelerator.backward(loss) if prepare else loss.backward())
                optimizer.step()
                optimizer.zero_grad()
                losses.append(loss.item())
            return losses, str(next(net.parameters()).device)

        accelerator = Accelerator()
        print("RESULT", json.dumps({"device": str(accelerator.device), "cpu": train("cpu"),
                                    "dipu": train(accelerator.device, accelerator.prepare)}))
    """, env={**OFFLINE, "ACCELERATE_TORCH_DEVICE": "dipu"})
    result = _result(proc)
    assert result["device"] == "dipu" and result["dipu"][1] == "dipu:0", result
    torch.testing.assert_close(result["dipu"][0], result["cpu"][0])
