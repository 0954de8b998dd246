"""torch.distributed on dipu tensors: the dicl backend, checked against gloo on the CPU.

Each test spawns 2 ranks on 127.0.0.1 (``python -c`` running one of the ``worker_*``
functions below, which assert and exit non-zero on a mismatch), bounded by timeouts.
"""

import os
import socket
import subprocess
import sys
import time

import pytest
import torch

import dipu
from dipu.distributed import collectives

TESTS = os.path.dirname(os.path.abspath(__file__))
WORLD = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(worker: str, env: dict | None = None, world: int = WORLD, ranks=None, timeout: float = 120):
    """Run ``worker_<worker>()`` on ``ranks`` of a group of ``world``; return {rank: CompletedProcess}."""
    port = _free_port()
    code = f"import sys; sys.path.insert(0, {TESTS!r}); import test_distributed as t; t.worker_{worker}()"
    procs = {}
    for rank in ranks if ranks is not None else range(world):
        rank_env = {**os.environ, **(env or {}), "RANK": str(rank), "WORLD_SIZE": str(world),
                    "LOCAL_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                    "PYTHONWARNINGS": "ignore::FutureWarning"}
        procs[rank] = subprocess.Popen([sys.executable, "-c", code], env=rank_env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results, deadline = {}, time.monotonic() + timeout
    try:
        for rank, proc in procs.items():
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            results[rank] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


def check_all_passed(results):
    for rank, proc in results.items():
        assert proc.returncode == 0, f"rank {rank} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-6000:]}"


# ---- workers (run inside the spawned ranks) ------------------------------------------------------


def _init(backend=None, timeout_s: float = 60, bind_device: bool = False):
    """``bind_device``: pass ``device_id=`` (as torchtitan-style FSDP2 scripts do), which makes c10d
    bind the group to the device and ask its backend about communicator splitting."""
    import datetime

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    index = rank % torch.dipu.device_count()
    torch.dipu.set_device(index)
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=torch.device("dipu", index) if bind_device else None)
    return dist, rank


def _values(dtype, shape, rank, salt):
    generator = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.randint(-20, 20, shape, generator=generator, dtype=dtype)


def _same(name, cpu_tensors, dipu_tensors):
    for cpu, on_dipu in zip(cpu_tensors, dipu_tensors):
        assert on_dipu.device.type == "dipu", f"{name}: result left dipu ({on_dipu.device})"
        assert cpu.dtype == on_dipu.dtype and torch.equal(cpu, on_dipu.cpu()), \
            f"{name}: dipu gave\n{on_dipu.cpu()}\ngloo on cpu gave\n{cpu}"


def worker_collectives():
    """Every collective on dipu tensors equals gloo's on CPU tensors, for 3 dtypes and the reduce ops."""
    dist, rank = _init(os.environ.get("TEST_BACKEND") or None)
    expected_backend = os.environ.get("TEST_EXPECT_GROUP_BACKEND", "dicl")
    assert dist.group.WORLD._get_backend_name() == expected_backend, dist.group.WORLD._get_backend_name()
    device = torch.device("dipu", torch.dipu.current_device())
    R = dist.ReduceOp
    salt = 0

    def compare(name, fn, *shapes_dtypes):
        """Run ``fn`` on CPU tensors (gloo) and on dipu copies of them; every argument must end equal."""
        nonlocal salt
        salt += 1
        cpu = [_values(dtype, shape, rank, salt) for shape, dtype in shapes_dtypes]
        on_dipu = [t.to(device) for t in cpu]
        fn(*cpu)
        fn(*on_dipu)
        _same(name, cpu, on_dipu)

    dtypes = (torch.float32,) if os.environ.get("TEST_QUICK") else (torch.float32, torch.bfloat16, torch.int64)
    for dtype in dtypes:
        s = ((6, 4), dtype)
        ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX] + ([R.BAND, R.BOR, R.BXOR] if dtype == torch.int64 else [])
        for op in ops:
            compare(f"all_reduce {op} {dtype}", lambda x, op=op: dist.all_reduce(x, op=op), s)
            compare(f"reduce_scatter_tensor {op} {dtype}",
                    lambda o, i, op=op: dist.reduce_scatter_tensor(o, i, op=op), ((3, 4), dtype), s)
        for root in range(WORLD):
            compare(f"broadcast from {root} {dtype}", lambda x, root=root: dist.broadcast(x, src=root), s)
            compare(f"reduce to {root} {dtype}",
                    lambda x, root=root: dist.reduce(x, dst=root) if rank == root else
                    dist.reduce(x.clone(), dst=root), s)
        compare(f"all_gather {dtype}", lambda a, b, x: dist.all_gather([a, b], x), s, s, s)
        compare(f"all_gather_into_tensor {dtype}", lambda o, x: dist.all_gather_into_tensor(o, x),
                ((12, 4), dtype), s)
        compare(f"reduce_scatter {dtype}", lambda o, a, b: dist.reduce_scatter(o, [a, b]), s, s, s)
        compare(f"all_to_all_single {dtype}", lambda o, x: dist.all_to_all_single(o, x), s, s)
        splits_in, splits_out = ([1, 5], [1, 2]) if rank == 0 else ([2, 4], [5, 4])
        compare(f"all_to_all_single uneven {dtype}",
                lambda o, x: dist.all_to_all_single(o, x, splits_out, splits_in),
                ((sum(splits_out), 4), dtype), s)
        compare(f"all_to_all {dtype}", lambda o0, o1, x0, x1: dist.all_to_all([o0, o1], [x0, x1]), s, s, s, s)
        compare(f"gather {dtype}", lambda x, a, b: dist.gather(x, [a, b] if rank == 1 else None, dst=1), s, s, s)
        compare(f"scatter {dtype}", lambda o, a, b: dist.scatter(o, [a, b] if rank == 0 else None, src=0),
                s, s, s)
        compare(f"send/recv {dtype}",
                lambda x: dist.send(x, dst=1) if rank == 0 else dist.recv(x, src=0), s)
        compare(f"isend/irecv {dtype}",
                lambda x: (dist.isend(x, dst=0) if rank == 1 else dist.irecv(x, src=1)).wait(), s)

        compare(f"batch_isend_irecv {dtype}",
                lambda a, b: [w.wait() for w in dist.batch_isend_irecv(
                    [dist.P2POp(dist.isend, a, 1 - rank), dist.P2POp(dist.irecv, b, 1 - rank)])], s, s)

        def coalesced(a, b):
            with dist._coalescing_manager():
                dist.all_reduce(a)
                dist.all_reduce(b)

        compare(f"coalesced all_reduce {dtype}", coalesced, s, ((3,), dtype))

        # Asynchronous ops: the work's wait() and its future both deliver the dipu result.
        compare(f"async all_reduce {dtype}", lambda x: dist.all_reduce(x, async_op=True).wait(), s)
        x = _values(dtype, (6, 4), rank, 99).to(device)
        value = dist.all_reduce(x, async_op=True).get_future().wait()
        assert value[0] is x or value[0].data_ptr() == x.data_ptr(), "future value is not the caller's tensor"
        expected = sum(_values(dtype, (6, 4), r, 99) for r in range(WORLD)).to(dtype)
        assert torch.equal(x.cpu(), expected), f"async all_reduce future {dtype}"

        # AVG and PREMUL_SUM (gloo has neither): SUM divided / SUM of pre-multiplied inputs.
        total = sum(_values(dtype, (6, 4), r, 7) for r in range(WORLD))
        x = _values(dtype, (6, 4), rank, 7).to(device)
        dist.all_reduce(x, op=R.AVG)
        avg = total / WORLD if dtype.is_floating_point else torch.div(total, WORLD, rounding_mode="trunc")
        assert torch.equal(x.cpu(), avg.to(dtype)), f"AVG {dtype}: {x.cpu()} vs {avg}"
        if dtype.is_floating_point:
            x = _values(dtype, (6, 4), rank, 7).to(device)
            out = torch.empty(3, 4, dtype=dtype, device=device)
            dist.reduce_scatter_tensor(out, x, op=dist._make_nccl_premul_sum(0.5))
            expected = sum(_values(dtype, (6, 4), r, 7) * 0.5 for r in range(WORLD)).to(dtype)[3 * rank:3 * rank + 3]
            assert torch.allclose(out.cpu().float(), expected.float(), rtol=1e-2), f"PREMUL_SUM {dtype}"
            assert torch.equal(x.cpu(), _values(dtype, (6, 4), rank, 7)), "PREMUL_SUM changed its input"

    # In place: a contiguous view is reduced into its base; a non-contiguous one is refused.
    base = torch.zeros(4, 3, device=device)
    base[1:3] = rank + 1.0
    dist.all_reduce(base[1:3])
    assert torch.equal(base.cpu()[1:3], torch.full((2, 3), 3.0)) and torch.equal(base.cpu()[0], torch.zeros(3))
    try:
        dist.all_reduce(base.t())
    except ValueError as error:
        assert "contiguous" in str(error), error
    else:
        raise AssertionError("all_reduce of a non-contiguous dipu tensor did not raise")

    # CPU tensors in the same group go through gloo; mixing devices is refused.
    c = torch.full((3,), float(rank + 1))
    dist.all_reduce(c)
    assert torch.equal(c, torch.full((3,), 3.0))
    try:
        dist.all_gather([torch.empty(3), torch.empty(3, device=device)], torch.ones(3, device=device))
    except ValueError as error:
        assert "expected all on dipu or all on cpu" in str(error), error
    else:
        raise AssertionError("mixed cpu/dipu tensors did not raise")

    # DTensor: a sharded tensor made whole again (functional collectives).
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh

    mesh = init_device_mesh("dipu", (WORLD,))
    sharded = distribute_tensor(torch.arange(8.0, device=device), mesh, [Shard(0)])
    assert torch.equal(sharded.to_local().cpu(), torch.arange(8.0).chunk(WORLD)[rank])
    whole = sharded.redistribute(mesh, [Replicate()]).to_local()
    assert whole.device == device and torch.equal(whole.cpu(), torch.arange(8.0)), whole

    # What torch.distributed.checkpoint and DeviceMesh use.
    objects = [None] * WORLD
    dist.all_gather_object(objects, {"rank": rank})
    assert objects == [{"rank": r} for r in range(WORLD)], objects
    shared = [f"from rank {rank}"]
    dist.broadcast_object_list(shared, src=1)
    assert shared == ["from rank 1"], shared
    dist.barrier()
    _check_communicator(dist)
    dist.destroy_process_group()


def _check_communicator(dist):
    """Under TEST_EXPECT_XCCL: dipu tensors went through the plug-in's collectives, and only what its ABI
    lacks (bitwise reduce ops) through host copies; under TEST_EXPECT_HOST_PATH=1, everything did."""
    from dipu.distributed import xccl

    expect = os.environ.get("TEST_EXPECT_XCCL")
    if not expect:
        return
    communicator = dist.group.WORLD._communicator
    assert type(communicator).__name__ == "XcclCommunicator", type(communicator)
    reasons = {reason for _, reason in xccl.HOST_FALLBACKS}
    if expect == "host":
        assert communicator._broken and all("self-test" in r for r in reasons) and reasons, xccl.HOST_FALLBACKS
    else:
        assert all(r.startswith("the ABI has no reduce op B") for r in reasons), xccl.HOST_FALLBACKS


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))


def _batches(steps=3):
    generator = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 8, generator=generator), torch.randn(8, 4, generator=generator)) for _ in range(steps)]


def _train(model, rank=None, device=None):
    """SGD with momentum over ``_batches()``: on the whole batch, or on ``rank``'s share of it on ``device``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in _batches():
        if rank is not None:
            x, y = x.chunk(WORLD)[rank].to(device), y.chunk(WORLD)[rank].to(device)
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


def _train_reference():
    """One process on the whole batch, on the CPU."""
    return _train(_model())


def worker_ddp():
    """DDP over 2 ranks, each on half the batch, ends with the weights of one process on the whole batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist, rank = _init()
    device = torch.device("dipu", torch.dipu.current_device())
    model = _model()
    with torch.no_grad():  # rank 1 starts elsewhere: DDP must broadcast rank 0's weights
        for p in model.parameters():
            p.add_(float(rank))
    ddp = _train(DDP(model.to(device), bucket_cap_mb=1e-4), rank, device)  # several buckets
    for (name, p), q in zip(ddp.module.named_parameters(), _train_reference().parameters()):
        assert p.device == device
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)

    # torch.distributed.checkpoint: save from both ranks, load into a fresh model on dipu.
    import torch.distributed.checkpoint as dcp

    dcp.save(ddp.module.state_dict(), checkpoint_id=os.environ["TEST_CHECKPOINT_DIR"])
    fresh = _model().to(device)
    state = fresh.state_dict()
    dcp.load(state, checkpoint_id=os.environ["TEST_CHECKPOINT_DIR"])
    fresh.load_state_dict(state)
    for (name, p), q in zip(fresh.named_parameters(), ddp.module.parameters()):
        assert p.device == device and torch.equal(p.detach().cpu(), q.detach().cpu()), name
    dist.destroy_process_group()


def worker_fsdp2():
    """fully_shard at world size 2 ends with the weights of one process on the whole batch."""
    from torch.distributed.fsdp import fully_shard

    dist, rank = _init(bind_device=True)
    assert dist.get_backend() == "dicl"
    device = torch.device("dipu", torch.dipu.current_device())
    model = _model().to(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    _train(model, rank, device)
    for (name, p), q in zip(model.named_parameters(), _train_reference().parameters()):
        shard = p.to_local()
        assert shard.device == device and shard.shape[0] == q.shape[0] // WORLD, (name, shard.shape)
        full = torch.empty((shard.shape[0] * WORLD, *shard.shape[1:]), device=device)
        dist.all_gather_into_tensor(full, shard.contiguous())
        torch.testing.assert_close(full.cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
        torch.testing.assert_close(p.full_tensor().cpu(), q.detach(), rtol=1e-5, atol=1e-6, msg=name)
    dist.destroy_process_group()


def worker_dead_peer():
    """Rank 1 dies after joining; rank 0's next collective fails within the group's timeout."""
    dist, rank = _init(timeout_s=5)
    x = torch.ones(4, device="dipu")
    dist.all_reduce(x)  # both ranks connected
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(x)
        time.sleep(1)
        dist.all_reduce(x)
    except RuntimeError as error:
        elapsed = time.monotonic() - start
        print(f"error after {elapsed:.1f}s: {error}")
        assert elapsed < 30, elapsed
        os._exit(0)
    raise AssertionError("all_reduce with a dead peer did not raise")


def worker_never_joins():
    """World size 2, only rank 0 started: init_process_group gives up after its timeout."""
    start = time.monotonic()
    try:
        _init(timeout_s=3)
    except Exception as error:  # noqa: BLE001 -- torch raises DistStoreError (a RuntimeError)
        elapsed = time.monotonic() - start
        print(f"error after {elapsed:.1f}s: {type(error).__name__}: {error}")
        assert elapsed < 30, elapsed
        return
    raise AssertionError("init_process_group without the other rank did not raise")


def worker_mismatch():
    """Under TORCH_DISTRIBUTED_DEBUG=DETAIL, disagreeing ranks get an error naming what each called."""
    dist, rank = _init(timeout_s=10)
    device = torch.device("dipu", torch.dipu.current_device())
    cases = [
        (lambda: dist.all_reduce(torch.ones(4 + rank, device=device)),
         "dicl allreduce: ranks disagree on the collective (TORCH_DISTRIBUTED_DEBUG=DETAIL): "
         "rank 0: allreduce on torch.float32 [4]; rank 1: allreduce on torch.float32 [5]"),
        (lambda: dist.broadcast(torch.ones(2, 3, dtype=torch.int64 if rank else torch.float32, device=device), 0),
         "rank 0: broadcast on torch.float32 [2, 3]; rank 1: broadcast on torch.int64 [2, 3]"),
        (lambda: dist.all_reduce(torch.ones(3, device=device)) if rank == 0 else
         dist.broadcast(torch.ones(3, device=device), 0),
         "rank 0: allreduce on torch.float32 [3]; rank 1: broadcast on torch.float32 [3]"),
    ]
    for call, message in cases:
        try:
            call()
        except RuntimeError as error:
            assert message in str(error), str(error)
        else:
            raise AssertionError(f"no error for: {message}")
    x = torch.full((3,), float(rank), device=device)  # agreeing calls still work
    dist.all_reduce(x)
    assert torch.equal(x.cpu(), torch.ones(3))
    dist.destroy_process_group()


def worker_xccl_ranks():
    """At WORLD_SIZE ranks (4 in the test), large tensors (several chunks of refc's slots, sizes
    that do not divide evenly) on the plug-in's collectives equal gloo's on the CPU."""
    dist, rank = _init(timeout_s=60)
    world = dist.get_world_size()
    device = torch.device("dipu", torch.dipu.current_device())

    def values(n, salt):  # integers: every order of summation gives the same float
        return torch.randint(-1000, 1000, (n,), generator=torch.Generator().manual_seed(rank * 97 + salt)).float()

    def both(fn, *tensors):
        on_dipu = [t.to(device) for t in tensors]
        fn(*tensors)
        fn(*on_dipu)
        for cpu, d in zip(tensors, on_dipu):
            assert torch.equal(cpu, d.cpu()), fn

    n = 1_000_003  # ~4 MiB of float32: two chunks of refc's 2 MiB slots, parts of unequal size
    # Large all-reduces read the peers' memory where the kernel lets them; a second group keeps them
    # on the shared-memory slots (refc reads the switch when a communicator is made).
    both(lambda x: dist.all_reduce(x), values(1000, 2))  # one small chunk; makes WORLD's communicator
    os.environ["DIPU_REFC_XCCL_SLOTS_ONLY"] = "1"
    slots_only = dist.new_group()
    for group in (None, slots_only):
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
            both(lambda x, op=op, group=group: dist.all_reduce(x, op=op, group=group), values(n, 1))
    both(lambda x: dist.broadcast(x, src=world - 1), values(n, 3))
    both(lambda o, x: dist.all_gather_into_tensor(o, x), torch.empty(world * 300_001), values(300_001, 4))
    both(lambda o, x: dist.reduce_scatter_tensor(o, x), torch.empty(300_001), values(world * 300_001, 5))
    splits = [(rank + j) % 3 + 1 for j in range(world)]  # uneven, and different on every rank
    gathered = [None] * world
    dist.all_gather_object(gathered, splits)
    out_splits = [gathered[j][rank] for j in range(world)]
    both(lambda o, x: dist.all_to_all_single(o, x, out_splits, splits),
         torch.empty(sum(out_splits), 5), values(sum(splits) * 5, 6).view(-1, 5))
    ring = values(7, 7)  # each rank sends to the next, receives from the previous
    both(lambda x: [w.wait() for w in dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, x.clone(), (rank + 1) % world),
         dist.P2POp(dist.irecv, x, (rank - 1) % world)])], ring)
    dist.barrier()
    _check_communicator(dist)
    dist.destroy_process_group()


def worker_failures():
    """A plug-in collective that returns an error raises on every rank at once, naming it (refc's
    DIPU_REFC_XCCL_FAIL=xccl_broadcast:1); then rank 1 dies, and rank 0's next collective fails
    once the group's timeout has passed, naming it, instead of hanging."""
    dist, rank = _init(timeout_s=5)
    x = torch.ones(4, device="dipu")
    start = time.monotonic()
    try:
        dist.broadcast(x, src=0)
    except RuntimeError as error:
        assert "dipu: vendor 'refc' failed in xccl_broadcast: it returned C_INTERNAL_ERROR" in str(error), error
        assert time.monotonic() - start < 5
    else:
        raise AssertionError("broadcast did not raise")
    dist.all_reduce(x)  # the communicator still works
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        dist.all_reduce(x)
    except RuntimeError as error:
        elapsed = time.monotonic() - start
        print(f"error after {elapsed:.1f}s: {error}")
        assert "dicl all_reduce timed out on dipu:0 (rank 0 of 2) after 5 s" in str(error), error
        assert elapsed < 30, elapsed
        os._exit(0)
    raise AssertionError("all_reduce with a dead peer did not raise")


def worker_gpt():
    """The GPT of examples/train.py, trained 3 steps with DDP and then with FSDP2 on 2 ranks, each on
    half of every batch, has the losses and weights of one process trained on the whole batches."""
    sys.path.insert(0, os.path.join(os.path.dirname(TESTS), "examples"))
    from models import GPT, GPTConfig
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist, rank = _init()
    device = torch.device("dipu", torch.dipu.current_device())
    config = GPTConfig(vocab_size=48, seq_len=32, n_layer=2, n_head=4, d_model=32, dropout=0.0)
    tokens = torch.randint(48, (3, 8, 33), generator=torch.Generator().manual_seed(0))

    def model():
        torch.manual_seed(0)
        return GPT(config)

    def train(module, parameters, on=None):
        optimizer = torch.optim.SGD(parameters, lr=0.1, momentum=0.9)  # Adam would magnify rounding in ~0 grads
        losses = []
        for batch in tokens:
            if on is not None:
                batch = batch.chunk(WORLD)[rank].to(on)
            _, loss = module(batch[:, :-1], batch[:, 1:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if on is not None:
                loss = loss.detach()
                dist.all_reduce(loss, op=dist.ReduceOp.AVG)
            losses.append(loss.item())
        return losses

    reference = model()
    expected = train(reference, reference.parameters())
    ddp = DDP(model().to(device))
    torch.testing.assert_close(train(ddp, ddp.parameters(), device), expected, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(ddp.module.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5, msg=name)
    sharded = model().to(device)
    for block in sharded.modules():
        if type(block).__name__ == "Block":
            fully_shard(block)
    fully_shard(sharded)
    torch.testing.assert_close(train(sharded, sharded.parameters(), device), expected, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(sharded.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p.full_tensor().cpu(), q.detach(), rtol=1e-4, atol=1e-5, msg=name)
    _check_communicator(dist)
    dist.destroy_process_group()


def worker_self_test():
    dist, rank = _init()
    device = torch.device("dipu", torch.dipu.current_device())
    x = torch.full((5,), float(rank + 1), device=device)
    dist.all_reduce(x)
    assert torch.equal(x.cpu(), torch.full((5,), 3.0)), x
    out = torch.empty(10, device=device)
    dist.all_gather_into_tensor(out, x)
    assert torch.equal(out.cpu(), torch.full((10,), 3.0)), out
    _check_communicator(dist)
    dist.destroy_process_group()


# ---- tests ---------------------------------------------------------------------------------------


def test_default_backend_for_dipu_is_dicl():
    import torch.distributed as dist

    assert dist.Backend.default_device_backend_map["dipu"] == "dicl"
    assert dist.Backend.backend_capability["dicl"] == ["dipu"]


def test_collectives_match_gloo_on_cpu():
    """With no backend name: dicl for dipu tensors, gloo for CPU tensors."""
    check_all_passed(spawn("collectives"))


@pytest.mark.parametrize("backend", ["dicl", "cpu:gloo,dipu:dicl"])
def test_backend_named_in_init_process_group(backend):
    check_all_passed(spawn("collectives", {"TEST_BACKEND": backend, "TEST_QUICK": "1"}))


def test_collectives_without_vendor_library_use_host_copies():
    """A vendor without collectives (the simulated one without its alias) still works, through gloo on host copies."""
    check_all_passed(spawn("collectives", {"DIPU_SIM_NATIVE_ALIAS": "0"}))


def test_ddp_matches_one_process_on_the_whole_batch_and_checkpoints(tmp_path):
    check_all_passed(spawn("ddp", {"TEST_CHECKPOINT_DIR": str(tmp_path)}))


def test_fsdp2_matches_one_process_on_the_whole_batch():
    check_all_passed(spawn("fsdp2"))


def test_dead_peer_gives_a_timeout_error_not_a_hang():
    results = spawn("dead_peer", timeout=60)
    check_all_passed(results)
    assert "error after" in results[0].stdout


def test_rank_that_never_joins_gives_a_timeout_error():
    results = spawn("never_joins", ranks=[0], timeout=60)
    check_all_passed(results)
    assert "error after" in results[0].stdout


def test_mismatched_collectives_raise_on_both_ranks_under_debug_detail():
    check_all_passed(spawn("mismatch", {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, timeout=60))


# ---- a C plug-in's own collectives (refc's xccl_*) -------------------------------------------------

REFC = {"DIPU_VENDOR": "refc"}


def test_refc_xccl_collectives_match_gloo_on_cpu():
    check_all_passed(spawn("collectives", {**REFC, "TEST_EXPECT_XCCL": "1"}))


def test_refc_xccl_at_four_ranks_with_large_tensors():
    check_all_passed(spawn("xccl_ranks", {**REFC, "TEST_EXPECT_XCCL": "1"}, world=4))


def test_refc_xccl_ddp_and_fsdp2_train_the_gpt_as_one_process_does():
    check_all_passed(spawn("gpt", {**REFC, "TEST_EXPECT_XCCL": "1"}))


def test_refc_xccl_error_status_and_dead_peer_raise_not_hang():
    results = spawn("failures", {**REFC, "DIPU_REFC_XCCL_FAIL": "xccl_broadcast:1"}, timeout=90)
    check_all_passed(results)
    assert "error after" in results[0].stdout, results[0].stdout


def test_plugin_whose_all_reduce_lies_is_caught_by_the_self_test():
    """CustomCPU's xccl_all_reduce only waits for the others; refc's switch imitates it."""
    results = spawn("self_test", {**REFC, "DIPU_REFC_XCCL_FAKE_ALL_REDUCE": "1", "TEST_EXPECT_XCCL": "host"})
    check_all_passed(results)
    assert "xccl_all_reduce failed dipu's self-test" in results[0].stderr, results[0].stderr[-3000:]


# ---- the vendor contract ---------------------------------------------------------------------------


def test_incomplete_vendor_communicator_fails_naming_every_missing_method():
    class Partial(collectives.Communicator):
        def all_reduce(self, tensor, op):
            return None

    with pytest.raises(TypeError) as error:
        collectives.check_communicator_class("acme", Partial)
    assert str(error.value) == (
        f"dipu vendor 'acme' ({__name__}.test_incomplete_vendor_communicator_fails_naming_every_missing_method."
        "<locals>.Partial) does not implement the required collective methods: all_gather, all_to_all, "
        "barrier, broadcast, recv, reduce_scatter, send")
    with pytest.raises(TypeError, match="is not a subclass of dipu.distributed.collectives.Communicator"):
        collectives.check_communicator_class("acme", object)


def test_vendor_with_incomplete_collectives_fails_at_load(python):
    proc = python("""
        import pytest
        from dipu import runtime
        from dipu.distributed import collectives
        from dipu.vendors.sim import SimRuntime

        class Broken(collectives.Communicator):
            pass

        class Vendor(SimRuntime):
            collectives = Broken

        class EntryPoint:
            def load(self):
                return Vendor

        runtime.installed_vendors = lambda: {"broken": EntryPoint()}
        with pytest.raises(TypeError, match="'broken' .* does not implement the required collective methods: "
                                            "all_gather, all_reduce, all_to_all, barrier, broadcast, recv"):
            runtime.load_vendor("broken")
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert proc.returncode == 0


def test_shipped_vendors_implement_the_collective_contract():
    from dipu.vendors.cuda.collectives import NcclCommunicator
    from dipu.vendors.sim.collectives import SimCommunicator

    collectives.check_communicator_class("sim", SimCommunicator)
    collectives.check_communicator_class("cuda", NcclCommunicator)
    if dipu.vendor().name == "sim":
        assert dipu.vendor().collectives is SimCommunicator


def test_the_import_paths_of_before_dipu_distributed_name_its_modules():
    """Vendor runtimes import the contract as dipu.collectives (and a plug-in's communicator as dipu.xccl), where
    it lived before dipu/distributed/: those names are the modules themselves, so a subclass is the contract's."""
    import dipu.collectives
    import dipu.xccl
    from dipu.collectives import Communicator
    from dipu.distributed import xccl

    assert dipu.collectives is collectives and dipu.xccl is xccl and Communicator is collectives.Communicator


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the NCCL path needs NVIDIA GPUs and a CUDA torch")
def test_nccl_collectives_match_gloo_on_cpu():
    if torch.cuda.device_count() < WORLD:
        pytest.skip(f"needs {WORLD} GPUs")
    check_all_passed(spawn("collectives", {"DIPU_VENDOR": "cuda"}))
