"""The native core's build cache: keyed by torch and sources, safe under concurrency."""

import subprocess
import sys
import textwrap

import torch

from dipu import _native


def test_cache_key_follows_torch_version_and_sources(monkeypatch, tmp_path):
    monkeypatch.setenv("DIPU_CACHE_DIR", str(tmp_path))
    first = _native.cache_dir()
    assert first.parent == tmp_path and torch.__version__ in first.name
    monkeypatch.setattr(torch, "__version__", "9.9.9")
    assert _native.cache_dir() != first


def test_concurrent_first_builds_run_once_and_never_expose_a_partial_file(tmp_path):
    target = tmp_path / "key" / "core.so"
    code = textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from dipu import _native

        def build(target):
            with open({str(tmp_path / "builds.log")!r}, "a") as log:
                log.write(f"{{os.getpid()}}\\n")
            partial = target.with_suffix(".tmp")
            partial.write_text("half")
            time.sleep(0.5)
            partial.write_text("complete")
            os.replace(partial, target)

        path = _native.ensure_built(Path({str(target)!r}), build)
        print(path.read_text())
    """)
    env = {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    import os

    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, **env}) for _ in range(4)]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outputs == ["complete"] * 4
    assert len((tmp_path / "builds.log").read_text().split()) == 1
