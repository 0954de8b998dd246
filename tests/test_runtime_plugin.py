"""Vendor runtimes in C: runtime plug-ins to the custom-runtime ABI (Note [C runtime plug-ins]).

The reference C vendor (vendor/refc, asynchronous streams) runs as DIPU_VENDOR=refc; small plug-ins
compiled here cover what real ones do (null optional functions, null handles, memory aligned to
16 bytes) and every way a plug-in can be wrong. PaddleCustomDevice's own CustomCPU runtime runs when
its sources are at hand (PADDLE_CUSTOM_CPU_RUNTIME, PADDLE_DEVICE_EXT_INCLUDE; not in CI).
"""

import os
import shutil
import subprocess

import pytest

import dipu
from dipu import _native

INCLUDE = _native.INCLUDE
REFC = {"DIPU_VENDOR": "refc"}

# A minimal plug-in as Paddle's CustomCPU writes one: malloc'd memory (16-byte aligned), no
# streams or events of its own (every create leaves the handle unwritten), synchronous copies.
# PLUGIN_EDIT is a statement run at the end of InitPlugin, to break the plug-in in one way.
MINIMAL = r"""
#include <stdlib.h>
#include <string.h>
#include "dipu/custom_runtime.h"
static int current;
static size_t live;  /* bytes allocated and not yet freed: checks that dipu passes sizes back */
static C_Status set_device(const C_Device d) { current = d->id; return C_SUCCESS; }
static C_Status get_device(const C_Device d) { d->id = current; return C_SUCCESS; }
static C_Status count(size_t *n) { *n = 1; return C_SUCCESS; }
static C_Status list(size_t *ids) { ids[0] = 0; return C_SUCCESS; }
static C_Status allocate(const C_Device d, void **p, size_t n) {
  if (n > ((size_t)1 << 30)) return C_FAILED;
  char *raw = aligned_alloc(64, (n + 16 + 63) / 64 * 64);
  if (!raw) return C_FAILED;
  live += n; *p = raw + 16;  /* deliberately 16-byte aligned, never 64 */
  return C_SUCCESS;
}
static C_Status deallocate(const C_Device d, void *p, size_t n) {
  live -= n; free((char *)p - 16); return C_SUCCESS;
}
static C_Status copy(const C_Device d, void *dst, const void *src, size_t n) { memcpy(dst, src, n); return COPY_STATUS; }
static C_Status event_noop(const C_Device d, C_Event *e) { return C_SUCCESS; }
static C_Status event_op(const C_Device d, C_Event e) { return C_SUCCESS; }
static C_Status record(const C_Device d, C_Stream s, C_Event e) { return C_SUCCESS; }
static int tracing;  /* profiler sessions started minus stopped, and how many started */
static int traced;
int plugin_tracing(void) { return tracing * 100 + traced; }
static C_Status trace_start(C_Profiler p, void *data) { tracing++; traced++; return C_SUCCESS; }
static C_Status trace_stop(C_Profiler p, void *data) { tracing--; return C_SUCCESS; }
static C_Status stats(const C_Device d, size_t *total, size_t *free_bytes) {
  *total = (size_t)1 << 30; *free_bytes = *total - live; return C_SUCCESS;
}
void InitPlugin(CustomRuntimeParams *params) {
  params->version.major = 0; params->version.minor = 1; params->version.patch = 1;
  params->device_type = "mini"; params->sub_device_type = "v1";
  C_DeviceInterface *t = params->interface;
  t->set_device = set_device; t->get_device = get_device;
  t->get_device_count = count; t->get_device_list = list;
  t->device_memory_allocate = allocate; t->device_memory_deallocate = deallocate;
  t->memory_copy_h2d = copy; t->memory_copy_d2h = copy; t->memory_copy_d2d = copy;
  t->create_event = event_noop; t->record_event = record; t->destroy_event = event_op;
  t->synchronize_event = event_op; t->device_memory_stats = stats;
  t->profiler_start_tracing = trace_start; t->profiler_stop_tracing = trace_stop;
  PLUGIN_EDIT;
}
"""  # noqa: E501


def _compiler():
    compiler = os.environ.get("CC", "cc")
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ('{compiler}')")
    return compiler


def build(tmp_path, source, name="plugin", defines=()):
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"lib{name}.so"
    subprocess.run([_compiler(), "-std=c11", "-shared", "-fPIC", f"-I{INCLUDE}", *defines, str(src),
                    "-o", str(out)], check=True, capture_output=True, text=True)
    return out


def minimal(tmp_path, edit="(void)0", copy_status="C_SUCCESS", name="mini"):
    return build(tmp_path, MINIMAL, name, [f"-DPLUGIN_EDIT={edit}", f"-DCOPY_STATUS={copy_status}"])


def load(path):
    return dipu._C.load_runtime_plugin(str(path), "DIPU_VENDOR")


# ---- loading, and bad plug-ins -------------------------------------------------------------------

def test_a_plugin_reports_itself(tmp_path):
    plugin = load(minimal(tmp_path))
    assert (plugin.device_type, plugin.sub_device_type, plugin.version) == ("mini", "v1", (0, 1, 1))
    assert plugin.device_count() == 1
    assert {"set_device", "device_memory_allocate", "memory_copy_h2d"} <= set(plugin.functions())
    assert "create_stream" not in plugin.functions()


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(RuntimeError, match=r"DIPU_VENDOR=.*nope\.so: no such file"):
        load(tmp_path / "nope.so")


def test_a_file_that_is_no_library(tmp_path):
    text = tmp_path / "libtext.so"
    text.write_text("not ELF")
    with pytest.raises(RuntimeError, match="cannot be loaded as a shared library"):
        load(text)


def test_a_library_without_InitPlugin(tmp_path):
    path = build(tmp_path, "int something(void) { return 1; }\n", "other")
    with pytest.raises(RuntimeError, match=r"libother\.so: is not a runtime plug-in: it exports no InitPlugin"):
        load(path)


def test_an_old_version_is_refused(tmp_path):
    path = minimal(tmp_path, edit="params->version.patch = 0")
    with pytest.raises(RuntimeError, match=r"ABI version 0\.1\.0; dipu needs 0\.1\.1 or later"):
        load(path)


def test_every_missing_required_function_is_named_at_once(tmp_path):
    path = minimal(tmp_path, edit="t->create_event = 0; t->device_memory_allocate = 0")
    with pytest.raises(RuntimeError, match="leaves required functions null: create_event, device_memory_allocate$"):
        load(path)


def test_an_empty_device_type_is_refused(tmp_path):
    path = minimal(tmp_path, edit='params->device_type = ""')
    with pytest.raises(RuntimeError, match="left the device type empty"):
        load(path)


def test_a_bad_plugin_as_vendor_fails_import_with_the_file_named(tmp_path, python):
    path = minimal(tmp_path, edit="t->set_device = 0")
    proc = python("import dipu", env={"DIPU_VENDOR": str(path), "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
                  check=False)
    assert proc.returncode != 0
    assert f"DIPU_VENDOR={path}: the plug-in 'mini' leaves required functions null: set_device" in proc.stderr
    assert "Segmentation" not in proc.stderr


def test_a_name_that_is_neither_vendor_nor_file(python):
    proc = python("import dipu", env={"DIPU_VENDOR": "nosuchvendor", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
                  check=False)
    assert "names no installed dipu vendor" in proc.stderr and "DIPU_VENDOR=/path/to/libvendor.so" in proc.stderr


# ---- a plug-in as the vendor -----------------------------------------------------------------------

def test_a_minimal_plugin_runs_a_model_through_the_fallback(tmp_path, python):
    """Null streams and events, 16-byte-aligned memory: dipu over-allocates, and trains on it."""
    path = minimal(tmp_path)
    python("""
        import torch, dipu
        assert dipu.vendor().name == "mini" and torch.dipu.device_count() == 1
        assert torch.dipu.get_device_properties(0).name == "mini v1"
        x = torch.randn(64, 8)
        d = x.to("dipu")
        assert d.data_ptr() % 64 == 0, hex(d.data_ptr())
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        ref = __import__("copy").deepcopy(model)
        model.to("dipu")
        opt, ref_opt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
        for _ in range(3):
            for m, o, inp in ((model, opt, d), (ref, ref_opt, x)):
                o.zero_grad(); m(inp).pow(2).mean().backward(); o.step()
        torch.testing.assert_close(model[0].weight.cpu(), ref[0].weight)
        s = torch.dipu.Stream()
        with torch.dipu.stream(s):
            e = torch.dipu.Event(enable_timing=True); e.record(); y = d * 2; f = torch.dipu.Event(enable_timing=True); f.record()
        f.synchronize()
        assert e.elapsed_time(f) >= 0 and torch.equal(y.cpu(), x * 2)
        del d, y, model, opt
        __import__("gc").collect()
        torch.dipu.empty_cache()
        free, total = torch.dipu.mem_get_info()
        assert free == total, (free, total)  # every byte went back with the size it was allocated with
    """, env={"DIPU_VENDOR": str(path)})  # noqa: E501


def test_the_profiler_runs_the_plugins_tracing_hooks(tmp_path, python):
    path = minimal(tmp_path)
    python(f"""
        import ctypes, torch, dipu
        from torch.profiler import ProfilerActivity, profile
        plugin = ctypes.CDLL({str(path)!r})
        x = torch.randn(8, 8).to("dipu")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            y = x @ x
            assert plugin.plugin_tracing() == 101   # started once, still running
        assert plugin.plugin_tracing() == 1         # stopped
        assert "aten::mm" in [e.name for e in prof.events()]
    """, env={"DIPU_VENDOR": str(path)})


def test_a_forked_child_of_an_initialized_plugin_runtime_refuses_device_use(python):
    python("""
        import multiprocessing as mp, torch, dipu
        torch.ones(1, device="dipu")              # starts refc's runtime and its stream threads
        def child(q):
            try:
                torch.ones(1, device="dipu"); q.put("ran")
            except RuntimeError as e:
                q.put(str(e))
        q = mp.get_context("fork").Queue()
        p = mp.get_context("fork").Process(target=child, args=(q,)); p.start(); p.join(60)
        assert "Cannot re-initialize dipu in forked subprocess" in q.get(timeout=5)
    """, env=REFC)


def test_a_failing_plugin_function_raises_and_the_process_goes_on(tmp_path, python):
    path = minimal(tmp_path, copy_status="C_ERROR")
    python("""
        import pytest, torch, dipu
        with pytest.raises(RuntimeError, match="vendor 'mini' .* failed in memory_copy_h2d: it returned C_ERROR"):
            torch.ones(3).to("dipu")
        with pytest.raises(torch.OutOfMemoryError, match="dipu out of memory on mini"):
            torch.empty(2**31, dtype=torch.uint8, device="dipu")
        assert torch.empty(4, device="dipu").shape == (4,)  # still working
    """, env={"DIPU_VENDOR": str(path)})


def test_a_plugin_without_virtual_memory_keeps_plain_segments_with_a_warning(tmp_path, python):
    """Note [Expandable segments]: Paddle's table has no virtual memory; such a plug-in loads as it is."""
    path = minimal(tmp_path)
    assert not load(path).has_virtual_memory()
    out = python("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import torch, dipu
            x = torch.ones(1000, device="dipu")
        print([str(w.message) for w in caught if "expandable" in str(w.message)])
        print({s["is_expandable"] for s in torch.dipu.memory_snapshot()}, x.sum().item())
    """, env={"DIPU_VENDOR": str(path), "PYTORCH_ALLOC_CONF": "expandable_segments:True"}).stdout.splitlines()
    assert "expandable_segments:True: the mini vendor's runtime has no virtual-memory methods" in out[0]
    assert out[1] == "{False} 1000.0"


def test_a_plugin_filling_part_of_the_virtual_memory_group_is_refused(tmp_path):
    source = MINIMAL + r"""
static C_Status granularity(const C_Device d, size_t *g) { *g = 4096; return C_SUCCESS; }
void DipuInitVirtualMemory(DipuVirtualMemoryInterface *vm) { vm->granularity = granularity; }
"""
    path = build(tmp_path, source, "partial", ["-DPLUGIN_EDIT=(void)0", "-DCOPY_STATUS=C_SUCCESS"])
    with pytest.raises(RuntimeError, match="DipuInitVirtualMemory filled 1 of the 5 functions of "
                                           "DipuVirtualMemoryInterface; a plug-in fills all of them or none"):
        load(path)


def test_refc_has_virtual_memory(python):
    python("""
        import dipu
        assert dipu.vendor().plugin.has_virtual_memory() and dipu._core.virtual_memory
    """, env=REFC)


# ---- the reference C vendor --------------------------------------------------------------------------

def test_refc_reports_its_devices(python):
    python("""
        import torch, dipu
        assert dipu.vendor().name == "refc" and torch.dipu.device_count() == 2
        p = torch.dipu.get_device_properties(1)
        assert (p.name, p.total_memory, p.major) == ("refc reference C runtime", 8192 << 20, 1)
        x = torch.arange(6.0, device="dipu:1")
        assert torch.dipu.mem_get_info(1)[0] < 8192 << 20
        assert (x + 1).sum().item() == 21
    """, env=REFC)


def test_refc_streams_are_asynchronous_and_ordered(python):
    """With each stream task delayed 20 ms, an event is pending until its stream reaches it;
    waits, synchronizes and the caching allocator's cross-stream frees respect that."""
    python("""
        import time, torch, dipu
        s = torch.dipu.Stream()
        e = torch.dipu.Event(enable_timing=True)
        f = torch.dipu.Event(enable_timing=True)
        e.record(s); f.record(s)
        assert not f.query()                       # queued behind e's 20 ms task
        t = time.perf_counter(); f.synchronize(); waited = time.perf_counter() - t
        assert f.query() and waited > 0.015, waited
        assert 15 < e.elapsed_time(f) < 1000       # host time when the stream reached each event
        g = torch.dipu.Event(); g.record(s)
        torch.dipu.current_stream().wait_event(g)  # the default stream waits for s
        torch.dipu.synchronize()
        assert g.query() and s.query()
        # A block used on another stream is reused only after that stream's work is done.
        x = torch.empty(1 << 20, device="dipu"); ptr = x.data_ptr()
        x.record_stream(s); h = torch.dipu.Event(); h.record(s)
        del x
        y = torch.empty(1 << 20, device="dipu")
        assert y.data_ptr() != ptr                 # s has not reached the free yet
        h.synchronize(); torch.dipu.synchronize()
        del y
    """, env={**REFC, "DIPU_REFC_TASK_DELAY_US": "20000"})


def test_refc_out_of_memory_is_torch_out_of_memory(python):
    python("""
        import pytest, torch, dipu
        with pytest.raises(torch.OutOfMemoryError, match="dipu out of memory on refc"):
            torch.empty(64 << 20, dtype=torch.uint8, device="dipu")
        x = torch.ones(1000, device="dipu")
        assert x.sum().item() == 1000
    """, env={**REFC, "DIPU_REFC_MEMORY_MB": "32"})


# ---- PaddleCustomDevice's CustomCPU, unmodified --------------------------------------------------------

CUSTOM_CPU = os.environ.get("PADDLE_CUSTOM_CPU_RUNTIME")  # .../backends/custom_cpu/runtime/runtime.cc
PADDLE_INCLUDE = os.environ.get("PADDLE_DEVICE_EXT_INCLUDE")  # dir holding paddle/phi/backends/device_ext.h


@pytest.mark.skipif(not (CUSTOM_CPU and PADDLE_INCLUDE),
                    reason="PaddleCustomDevice's CustomCPU sources and Paddle's device_ext.h are not here "
                           "(set PADDLE_CUSTOM_CPU_RUNTIME and PADDLE_DEVICE_EXT_INCLUDE)")
def test_paddle_custom_cpu_runs_unmodified(tmp_path, python):
    out = tmp_path / "libcustom_cpu.so"
    subprocess.run([os.environ.get("CXX", "c++"), "-std=c++17", "-O2", "-shared", "-fPIC", f"-I{PADDLE_INCLUDE}",
                    CUSTOM_CPU, "-o", str(out)], check=True, capture_output=True)
    python("""
        import torch, dipu
        assert dipu.vendor().name == "custom_cpu" and torch.dipu.device_count() == 2
        assert torch.dipu.get_device_properties(0).name == "custom_cpu v0.1"
        x = torch.randn(4, 4)
        torch.testing.assert_close((x.to("dipu:1") @ x.to("dipu:1")).cpu(), x @ x)
    """, env={"DIPU_VENDOR": str(out)})
