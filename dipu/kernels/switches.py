"""The debug switches users set with environment variables (docs/reference.md); a leaf.

Note [Hooks cost nothing unless asked for]
Force fallback and autocompare are decided when the generated kernels are
registered (dipu/kernels/registry.py): a force-fallback op is simply not
registered (the core's CPU fallback takes it) and an autocompare op gets a
compared kernel over its plain one. ``DIPU_CHECK_TENSOR_DEVICE`` and
``DIPU_SYNC_EXEC_MODE`` are read once at import into constants the wrappers
test. Only ``DIPU_DUMP_OP_ARGS`` must follow changes at run time, so Python
wrappers read it per call straight from ``os.environ``'s underlying dict
(``env_get(DUMP_KEY)``, about 30 ns; ``os.getenv`` costs about 750 ns). The C++
wrappers read a flag instead (``watch_dump``): that dict is replaced by one that
tells them when the variable changes, which costs a C++ call nothing (the C
library's getenv scanned the whole environment, 3% of a tiny add). Both paths so
follow the same thing, ``os.environ``; a C ``setenv`` behind its back reaches
neither.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

FORCE_FALLBACK_VAR = "DIPU_FORCE_FALLBACK_OPS_LIST"
FORCE_FALLBACK_CONFIG = ".dipu_force_fallback_op_list.config"
AUTOCOMPARE_VAR = "DIPU_AUTOCOMPARE_OPS_LIST"
DUMP_VAR = "DIPU_DUMP_OP_ARGS"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "off", "no")


CHECK_DEVICE = env_flag("DIPU_CHECK_TENSOR_DEVICE")
SYNC = env_flag("DIPU_SYNC_EXEC_MODE")

# See Note [Hooks cost nothing unless asked for].
DUMP_KEY = os.environ.encodekey(DUMP_VAR)
DUMP_OFF = frozenset((None, os.environ.encodevalue(""), os.environ.encodevalue("0")))
_dump_watchers: list = []


class _WatchedEnviron(dict):
    """``os.environ``'s underlying dict, which os.environ changes only through these two methods (its update,
    pop, clear and setdefault included): each change of DIPU_DUMP_OP_ARGS is told to the watchers."""

    __slots__ = ()

    def __setitem__(self, key, value):
        dict.__setitem__(self, key, value)
        if key == DUMP_KEY:
            _tell_dump_watchers()

    def __delitem__(self, key):
        dict.__delitem__(self, key)
        if key == DUMP_KEY:
            _tell_dump_watchers()


def _tell_dump_watchers() -> None:
    on = env_get(DUMP_KEY) not in DUMP_OFF
    for watcher in _dump_watchers:
        watcher(on)


def watch_dump(watcher) -> None:
    """Call ``watcher(on)`` now and whenever os.environ's DIPU_DUMP_OP_ARGS changes (on: not unset, "" or "0")."""
    _dump_watchers.append(watcher)
    watcher(env_get(DUMP_KEY) not in DUMP_OFF)


_environ: Any = os.environ  # its mapping, _data, is CPython's private attribute, which typeshed does not declare
if type(_environ._data) is dict:
    _environ._data = _WatchedEnviron(_environ._data)
env_get = _environ._data.get


DUMP_LEVELS = {"": 0, "0": 0, "1": 1, "2": 2, "3": 3}


def dump_level() -> int:
    """DIPU_DUMP_OP_ARGS: 0 off; 1 op and DIOPI function; 2 plus arguments, then results; 3 plus values."""
    text = os.environ.get(DUMP_VAR, "").strip()
    level = DUMP_LEVELS.get(text)
    if level is None:
        raise ValueError(f"{DUMP_VAR}={text!r}: expected 0 (off), 1 (op and DIOPI function), "
                         f"2 (plus arguments and results) or 3 (plus tensor values)")
    return level


dump_level()  # an invalid level fails at import, not at the first op


class OpPatterns:
    """Comma-separated regexes, whitespace trimmed, each matched against the whole op name."""

    def __init__(self, texts: list[tuple[str, str]]):
        self.regexes = []
        for source, text in texts:
            for pattern in (p.strip() for p in text.split(",")):
                if not pattern:
                    continue
                try:
                    self.regexes.append(re.compile(pattern))
                except re.error as error:
                    raise ValueError(f"{source}: invalid regular expression {pattern!r}: {error}") from None

    @classmethod
    def from_env(cls, var: str, config_file: str | None = None) -> OpPatterns:
        texts = [(var, os.environ.get(var, ""))]
        if config_file is not None and Path(config_file).is_file():
            lines = Path(config_file).read_text().splitlines()
            texts += [(config_file, line) for line in lines if not line.lstrip().startswith("#")]
        return cls(texts)

    def matches(self, name: str) -> bool:
        return any(regex.fullmatch(name) for regex in self.regexes)

    def __bool__(self) -> bool:
        return bool(self.regexes)


def force_fallback_patterns() -> OpPatterns:
    return OpPatterns.from_env(FORCE_FALLBACK_VAR, FORCE_FALLBACK_CONFIG)


def autocompare_patterns() -> OpPatterns:
    return OpPatterns.from_env(AUTOCOMPARE_VAR)
