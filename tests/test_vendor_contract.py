"""The vendor contract: exactly what dipu calls, and the path of a vendor without a native alias.

The contract (dipu/runtime.py's DeviceRuntime) is compared with the vendor methods that
the native core's vendor method table (dipu/csrc/vendor_bridge.h) and dipu's Python
call, read from the sources (Note [The vendor contract is what the core calls]).

With DIPU_SIM_NATIVE_ALIAS=0 the simulated vendor hides that its memory is host
memory, so the core must move bytes through the vendor's memcpy functions and
stage strided or converting copies through host images (see Note [Copies:
alias or staging]). Everything a user does must still be exact.
"""

import ast
import re
from pathlib import Path

import pytest

from dipu import runtime
from dipu.runtime import DeviceRuntime, parse_size

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "dipu" / "csrc"


def native_vendor_methods() -> set[str]:
    """The entries of the native core's vendor method table (Note [Vendor method table])."""
    header = (CSRC / "vendor_bridge.h").read_text()
    table = re.search(r"#define DIPU_VENDOR_METHODS\(X\)((?:.*\\\n)*.*\n)", header)
    assert table, "vendor_bridge.h no longer defines DIPU_VENDOR_METHODS(X)"
    return set(re.findall(r"X\((\w+)\)", table.group(1)))


def python_vendor_uses() -> dict[str, set[str]]:
    """Attribute name -> modules of dipu (generated code aside) that read it from the vendor object.

    The vendor object is what ``dipu._core.vendor()`` returns, under any name it is imported or
    assigned as (``vendor()``, ``_vendor()``, ``v = vendor(); v.initialize()``), and, in
    dipu/_core.py, the runtime ``load_vendor()`` returned.
    """
    uses: dict[str, set[str]] = {}
    for path in sorted((ROOT / "dipu").rglob("*.py")):
        tree = ast.parse(path.read_text())
        getters = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                   and node.module == "dipu._core" for alias in node.names if alias.name == "vendor"}
        objects: set[str] = set()

        def is_vendor(node: ast.AST) -> bool:
            if isinstance(node, ast.Name):
                return node.id in objects
            if not isinstance(node, ast.Call):
                return False
            if isinstance(node.func, ast.Name):
                return node.func.id in getters or node.func.id == "load_vendor"
            return isinstance(node.func, ast.Attribute) and node.func.attr == "load_vendor"

        assignments = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)
                       and all(isinstance(target, ast.Name) for target in node.targets)]
        while True:  # names bound to the getter or the object, until nothing new is bound
            before = (len(getters), len(objects))
            for node in assignments:
                names = {target.id for target in node.targets}
                if isinstance(node.value, ast.Name) and node.value.id in getters:
                    getters |= names
                elif is_vendor(node.value):
                    objects |= names
            if (len(getters), len(objects)) == before:
                break
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and is_vendor(node.value):
                uses.setdefault(node.attr, set()).add(str(path.relative_to(ROOT)))
    return uses


def contract_methods() -> set[str]:
    return {name for name, value in vars(DeviceRuntime).items() if callable(value) and not name.startswith("_")}


def test_the_contract_is_exactly_what_dipu_calls():
    native = native_vendor_methods()
    python = python_vendor_uses()
    declared = {name for name in dir(DeviceRuntime) if not name.startswith("_")}
    undeclared = {name: sorted(where) for name, where in python.items() if name not in declared}
    assert not undeclared, f"dipu reads vendor attributes DeviceRuntime does not declare: {undeclared}"
    assert native <= contract_methods(), f"the native core calls undeclared methods: {native - contract_methods()}"
    called = native | (set(python) & contract_methods())
    assert contract_methods() - called == set(), "DeviceRuntime declares methods nothing calls"
    required = set(DeviceRuntime.__abstractmethods__)
    assert required and required <= called
    # What the scan must find, so that a scan finding nothing cannot pass.
    assert {"malloc", "memcpy_h2d", "create_event", "start_tracing"} <= native
    assert {"device_count", "device_properties", "initialize", "finalize", "native_generator"} <= set(python)


def test_the_native_core_calls_the_vendor_only_through_its_method_table():
    """Note [Two kinds of vendor runtime]: the core calls the Runtime interface, whose methods are
    the table's; the Python runtime calls each by its VendorMethod, and only it looks names up."""
    header = (CSRC / "vendor_bridge.h").read_text()
    interface = header[header.index("class Runtime {"):header.index("constexpr size_t kMinAlignment")]
    virtuals = set(re.findall(r"virtual [\w:<>,* ]+?[ *](\w+)\(", interface)) - {"to_python"}
    assert virtuals == native_vendor_methods()
    sources = {path.name: path.read_text() for path in sorted(CSRC.glob("*.cpp"))}
    unused = {name for name in native_vendor_methods()
              if f"VendorMethod::{name}" not in sources["vendor_python.cpp"]}
    assert not unused, f"vendor method table entries the Python runtime does not call: {sorted(unused)}"
    assert [name for name, text in sources.items() if "runtime_.attr(" in text] == ["vendor_python.cpp"]


def test_a_synchronous_vendor_writes_no_stream_or_event_code():
    sim = runtime.installed_vendors()["sim"].load()
    assert not [m for m in runtime.STREAM_AND_EVENT_METHODS + ("query_stream", "query_event", "event_elapsed_time")
                if m in vars(sim)]
    cuda = runtime.installed_vendors()["cuda"].load()  # defining the class needs no GPU
    runtime.check_runtime_class("cuda", cuda)
    assert all(m in vars(cuda) for m in runtime.STREAM_AND_EVENT_METHODS)


class _Minimal(DeviceRuntime):
    """Only the required methods: a synchronous runtime."""

    def device_count(self): return 1
    def set_device(self, index): pass
    def synchronize_device(self, index): self.synchronized = index
    def device_properties(self, index): return runtime.DeviceProperties("minimal", 1 << 20)
    def malloc(self, index, nbytes): return 0
    def free(self, index, ptr): pass
    def memcpy_h2d(self, index, dst, src, nbytes): pass
    def memcpy_d2h(self, index, dst, src, nbytes): pass
    def memcpy_d2d(self, dst_index, dst, src_index, src, nbytes): pass


def test_the_default_op_library_needs_addressable_memory():
    # Opaque memory (no native_device_type) and the default library: a runtime only, not a failure at the
    # first op; the torch library named explicitly there is refused, naming the way out.
    assert runtime.op_library_of(_Minimal()) is None

    class Addressable(_Minimal):
        native_device_type = "cpu"

    class NamesTorch(_Minimal):
        diopi_impl = "torch"

    class OwnLibrary(_Minimal):
        diopi_impl = "mine"

    assert runtime.op_library_of(Addressable()) == "torch_cpp"
    assert runtime.op_library_of(OwnLibrary()) == "mine"
    with pytest.raises(TypeError, match="names the op library 'torch', which computes on zero-copy aliases of "
                                        "device memory, but sets no native_device_type"):
        runtime.op_library_of(NamesTorch())


def test_an_op_library_that_cannot_reach_the_memory_fails_at_import(python):
    proc = python("import dipu", check=False, env={"DIPU_SIM_NATIVE_ALIAS": "0", "DIPU_DIOPI_IMPL": "torch"})
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[-1] == (
        "RuntimeError: op library 'torch' computes on zero-copy aliases of device memory, and vendor 'sim' has none "
        "(no native_device_type): choose another op library (DIPU_DIOPI_IMPL, or the vendor's diopi_impl; None runs "
        "every op on the CPU fallback)")


def test_default_streams_and_events_are_synchronous():
    runtime.check_runtime_class("minimal", _Minimal)
    vendor = _Minimal()
    stream = vendor.create_stream(0, priority=-1)
    assert vendor.query_stream(0, stream) and vendor.synchronized == 0
    start, end, untimed = vendor.create_event(0, True), vendor.create_event(0, True), vendor.create_event(0, False)
    with pytest.raises(RuntimeError, match="Both events must be recorded"):
        vendor.event_elapsed_time(0, start, end)
    vendor.record_event(0, start, stream)
    vendor.stream_wait_event(0, None, start)
    vendor.record_event(0, end, None)
    assert vendor.query_event(0, end)
    assert vendor.event_elapsed_time(0, start, end) >= 0.0
    vendor.destroy_event(0, untimed)
    vendor.destroy_stream(0, stream)
    assert vendor.mem_get_info(0) == (1 << 20, 1 << 20)


def test_vendor_with_streams_of_its_own_implements_all_of_them():
    class HalfStreams(_Minimal):
        def create_stream(self, index, priority=0): return object()
        def synchronize_stream(self, index, stream): pass

    with pytest.raises(TypeError) as info:
        runtime.check_runtime_class("half", HalfStreams)
    message = str(info.value)
    assert ("implements the stream and event methods create_stream, synchronize_stream but not destroy_stream, "
            in message)
    assert "a vendor with streams of its own implements all of them, one without none" in message

    class TimelessEvents(_Minimal):  # events of its own, no elapsed time: timing them raises as before
        pass

    for method in runtime.STREAM_AND_EVENT_METHODS:
        setattr(TimelessEvents, method, lambda self, *args, **kwargs: object())
    runtime.check_runtime_class("timeless", TimelessEvents)
    vendor = TimelessEvents()
    vendor.name = "timeless"
    with pytest.raises(NotImplementedError, match="vendor 'timeless' does not time events"):
        vendor.event_elapsed_time(0, vendor.create_event(0, True), vendor.create_event(0, True))


def test_copies_views_fill_and_ops_through_vendor_memcpy(python):
    out = python("""
        import torch, dipu
        assert dipu.vendor().native_device_type is None
        x = torch.arange(24.0).reshape(4, 6)
        d = x.to("dipu:1")
        assert torch.equal(d.cpu(), x)
        assert torch.equal(d.t().cpu(), x.t())                  # strided D2H
        assert torch.equal(d[1:, 2:5].cpu(), x[1:, 2:5])        # offset + gaps
        assert torch.equal(d.to(torch.int64).cpu(), x.long())   # dtype conversion on device
        assert torch.equal(d.t().contiguous().cpu(), x.t().contiguous())
        e = d.to("dipu:0")                                      # D2D across devices
        assert e.device.index == 0 and torch.equal(e.cpu(), x)
        d[:, 1].fill_(-1)                                       # fill_ through a strided view
        d[2].zero_()
        y = x.clone(); y[:, 1] = -1; y[2] = 0
        assert torch.equal(d.cpu(), y)
        d[3].copy_(torch.tensor(5.0).to("dipu"))                 # broadcasting D2D copy
        y[3] = 5.0
        d[0, 1:3].copy_(torch.tensor([7.0, 8.0]))               # H2D into a strided slice
        y[0, 1:3] = torch.tensor([7.0, 8.0])
        assert torch.equal(d.cpu(), y)
        assert d[0, 2].item() == 8.0
        assert torch.allclose((d * 2 + 1).cpu(), y * 2 + 1)      # ops via the CPU fallback
        t = torch.arange(4.0, device="dipu"); t.resize_(8)
        assert torch.equal(t[:4].cpu(), torch.arange(4.0))
        print("ok")
    """, env={"DIPU_SIM_NATIVE_ALIAS": "0"}).stdout
    assert out.strip() == "ok"


def test_bad_alias_switch_is_rejected(python):
    proc = python("import dipu", env={"DIPU_SIM_NATIVE_ALIAS": "maybe"}, check=False)
    assert "DIPU_SIM_NATIVE_ALIAS='maybe' must be 0 or 1" in proc.stderr


def test_size_parsing():
    assert parse_size("X", "512M") == 512 << 20
    assert parse_size("X", "2G") == 2 << 30
    assert parse_size("X", "1.5GiB") == 3 << 29
    assert parse_size("X", "4096") == 4096
