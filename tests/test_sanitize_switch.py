"""DIPU_SANITIZE: a sanitized native core is a build of its own (Note [Sanitizer builds] in dipu/_native.py)."""

import pytest

from dipu import _native


def test_sanitized_core_has_its_own_cache_key(monkeypatch):
    monkeypatch.delenv("DIPU_SANITIZE", raising=False)
    normal = _native.cache_dir()
    monkeypatch.setenv("DIPU_SANITIZE", "address")
    asan = _native.cache_dir()
    monkeypatch.setenv("DIPU_SANITIZE", "thread")
    tsan = _native.cache_dir()
    assert len({normal, asan, tsan}) == 3
    assert asan.name == normal.name + "-asan" and tsan.name == normal.name + "-tsan"
    monkeypatch.setenv("DIPU_SANITIZE", " ")
    assert _native.cache_dir() == normal


def test_unknown_sanitizer_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("DIPU_SANITIZE", "memory")
    with pytest.raises(ValueError, match=r"DIPU_SANITIZE='memory' names no sanitizer; use one of address, thread"):
        _native.cache_dir()


def test_sanitized_core_without_its_runtime_says_how_to_preload_it(monkeypatch):
    monkeypatch.setenv("DIPU_SANITIZE", "thread")
    with pytest.raises(RuntimeError, match=r"LD_PRELOAD=.*-print-file-name=libtsan.so.*libstdc\+\+"):
        _native.load()  # this interpreter has no TSan runtime: refused before any build
