"""Lazy initialization as torch.cuda does it (Note [Lazy initialization] in dipu/device/_initialization.py).

Each test runs in a fresh interpreter (the state under test is per process), and every forked child is
joined with a timeout, so a hang fails the test instead of stalling it.
"""


from conftest import sim_only

PRELUDE = """
import multiprocessing, os, sys, threading, time
import torch                     # autoloads dipu
import dipu

def run_forked(target, timeout=60):
    '''Run target() in a forked child; return its exit code (a hang fails here).'''
    child = multiprocessing.get_context("fork").Process(target=target)
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        raise AssertionError(f"forked child of {target.__name__} hung for {timeout} s")
    return child.exitcode

def started():
    return torch.dipu.is_initialized(), dipu.vendor().initialized
"""

# (what a user does first, whether it starts the runtime)
FIRST_USES = {
    "torch.empty(2, device='dipu')": True,
    "torch.ones(3).to('dipu:1')": True,
    "torch.randn(2, 2, device='dipu') @ torch.randn(2, 2, device='dipu')": True,
    "torch.dipu.synchronize()": True,
    "torch.dipu.Stream()": True,
    "torch.dipu.current_device()": True,
    "torch.dipu.set_device(1)": True,
    "torch.Generator(device='dipu')": True,
    "torch.dipu.get_rng_state()": True,
    "torch.dipu.initial_seed()": True,
    "torch.dipu.mem_get_info()": True,
    "torch.dipu.get_device_name()": True,
    "torch.dipu.init()": True,
    "torch.ones(2).pin_memory()": True,
    "torch.dipu.device_count(), torch.dipu.is_available()": False,
    "torch.manual_seed(1); torch.dipu.manual_seed_all(2); torch.dipu.seed()": False,
    "torch.dipu.memory_allocated(), torch.dipu.max_memory_reserved(), torch.dipu.empty_cache()": False,
    "torch.device('dipu:1'), torch.nn.Linear(2, 2), torch.accelerator.device_count()": False,
}


@sim_only
def test_import_starts_nothing_and_the_first_device_use_starts_the_runtime(python):
    """Each first use runs in its own forked child of a parent that has not started the runtime (which
    is itself the case of a DataLoader worker: such a child initializes on its own)."""
    python(PRELUDE + f"""
assert started() == (False, False), started()
assert torch.dipu.memory_reserved() == 0 and not torch.dipu._is_in_bad_fork()

def check(code, starts):
    def child():
        exec(code)
        if started() != (starts, starts):
            print(f"{{code}}: started() is {{started()}}, expected {{starts}}", file=sys.stderr)
            os._exit(1)
        os._exit(0)
    return child

failed = [code for code, starts in {FIRST_USES!r}.items() if run_forked(check(code, starts)) != 0]
assert not failed, failed
assert started() == (False, False)  # the children's use did not start the parent
""")


@sim_only
def test_seeding_before_the_first_use_is_applied_when_the_runtime_starts(python):
    python(PRELUDE + """
torch.dipu.manual_seed_all(1); torch.dipu.manual_seed(2); torch.dipu.manual_seed_all(3)  # queued: nothing starts
assert started() == (False, False)
def child():  # a child of this parent starts the runtime, which applies the queued seeds in their order
    first = torch.rand(3, device="dipu").cpu()
    torch.dipu.manual_seed_all(3)
    os._exit(0 if torch.equal(first, torch.rand(3, device="dipu").cpu()) else 1)
assert run_forked(child) == 0
torch.manual_seed(3)                         # queued: nothing starts
assert started() == (False, False)
first = torch.randn(4, device="dipu").cpu()  # starts the runtime, then applies the seed
torch.manual_seed(3)
assert torch.equal(first, torch.randn(4, device="dipu").cpu())
torch.dipu.manual_seed(5)                    # once started, seeding applies at once
a = torch.rand(3, device="dipu").cpu()
torch.dipu.manual_seed(5)
assert torch.equal(a, torch.rand(3, device="dipu").cpu())
""")


@sim_only
def test_a_forked_child_of_an_initialized_parent_gets_a_clear_error(python):
    python(PRELUDE + """
x = torch.arange(4.0, device="dipu")  # the parent starts the runtime
assert started() == (True, True)

MESSAGE = "Cannot re-initialize dipu in forked subprocess. To use dipu with multiprocessing, you must use the 'spawn' start method"

def child():
    assert torch.dipu._is_in_bad_fork() and not torch.dipu.is_initialized()
    for use in (lambda: torch.ones(1, device="dipu"), lambda: x + 1, lambda: x.cpu(),
                lambda: torch.dipu.synchronize(), lambda: torch.dipu.current_device()):
        try:
            use()
        except RuntimeError as error:
            assert MESSAGE in str(error), str(error)
        else:
            os._exit(3)  # a device use succeeded in the bad fork
    torch.manual_seed(0)          # seeding every device skips dipu here, as it skips CUDA
    y = torch.ones(2) * 2         # CPU work is unaffected
    del x_alias[:]                # inherited dipu tensors are freed without calling the vendor
    import gc; gc.collect()
    os._exit(0 if y.sum().item() == 4 else 4)

x_alias = [x]
assert run_forked(child) == 0
assert torch.equal((x + 1).cpu(), torch.arange(1.0, 5.0))  # the parent is unaffected
""", env={"DIPU_ALLOCATOR": "raw"})  # raw: a freed block would go straight back to the vendor  # noqa: E501


@sim_only
def test_dataloader_fork_workers_around_the_device(python):
    """Workers forked before the parent uses dipu may use it themselves; workers forked after it (the
    usual training loop) do CPU work and are not disturbed."""
    python(PRELUDE + """
class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        if self.on_device:  # the worker starts its own runtime
            return (torch.tensor(float(i), device="dipu") ** 2).cpu()
        return torch.tensor(float(i)) ** 2

def batches(on_device):
    data = Squares()
    data.on_device = on_device
    loader = torch.utils.data.DataLoader(data, batch_size=4, num_workers=2,
                                         multiprocessing_context="fork", timeout=60)
    return [batch.to("dipu") for batch in loader]  # the parent moves each batch to dipu

want = torch.arange(8.0) ** 2
assert torch.equal(torch.cat(batches(on_device=True)).cpu(), want)
assert started() == (True, True)
assert torch.equal(torch.cat(batches(on_device=False)).cpu(), want)  # forked after initialization
""")


def test_concurrent_first_uses_initialize_once(python):
    python(PRELUDE + """
vendor = dipu.vendor()
calls, original = [], vendor.initialize
def slow_initialize():
    calls.append(threading.get_ident())
    time.sleep(0.2)
    original()
vendor.initialize = slow_initialize
results, errors = [], []
def use():
    try:
        results.append(torch.full((2,), 3.0, device="dipu").sum().item())
    except Exception as error:
        errors.append(error)
threads = [threading.Thread(target=use) for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join(60)
assert not errors and results == [6.0] * 4 and len(calls) == 1, (errors, results, calls)
""")


def test_a_failing_vendor_initialize_is_reported_and_retried(python):
    python(PRELUDE + """
vendor = dipu.vendor()
original = vendor.initialize
def broken():
    raise OSError("driver not loaded")
vendor.initialize = broken
try:
    torch.ones(1, device="dipu")
except RuntimeError as error:
    assert "driver not loaded" in str(error), error
else:
    raise AssertionError("a failing initialize went unnoticed")
assert not torch.dipu.is_initialized()
vendor.initialize = original
assert torch.ones(1, device="dipu").item() == 1.0 and torch.dipu.is_initialized()
""")
