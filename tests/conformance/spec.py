"""Conformance cases for DIOPI functions, in the spirit of DIOPI's diopi_test.

A :class:`Case` calls one DIOPI function of an op library directly, with dipu
tensors built from a seed, and compares every output with a CPU reference
computed by the matching ATen op. Case files (``cases_*.py`` beside this one)
hold a module-level ``CASES`` list, mostly built with the sweeps below;
``tests/test_conformance.py`` runs them for every installed op library.

Note [What a case checks]
- outputs: every output parameter not given in ``args`` is allocated on dipu
  from the reference result's shape and dtype, and compared with it;
- in-place: every written parameter given in ``args`` is compared with the
  reference's copy after the reference mutated it;
- inputs: every read-only tensor input is unchanged afterwards;
- all with dtype-aware tolerances (torch.testing's defaults) and NaN == NaN;
- a reference that raises means the inputs are invalid: the function must then
  raise or return a failure status too.
Random functions compare exactly: both sides are seeded with
``torch.manual_seed(case.seed)`` and dipu generators draw through native ones.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any
from collections.abc import Callable, Mapping

import torch

from dipu.diopi.proto import DEEPLINK_SPELLINGS

FLOAT = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INT = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
ALL_NUMERIC = FLOAT + INT
BOOL = (torch.bool,)

#: Shapes every sweep covers: 0-d, empty, 1-d, 2-d, 3-d, and size-1 dims.
SHAPES = ((), (0,), (7,), (3, 5), (2, 3, 4), (1, 4, 1, 3))
#: Pairs of broadcast-compatible shapes for binary sweeps.
BROADCAST_PAIRS = (
    ((), ()), ((6,), (6,)), ((3, 5), (3, 5)), ((3, 5), (5,)), ((2, 1, 4), (3, 1)),
    ((0, 3), (3,)), ((3, 4), ()), ((), (2, 3)),
)
LAYOUTS = ("contiguous", "transposed", "sliced")


@dataclasses.dataclass(frozen=True)
class T:
    """A random input tensor: its shape, dtype (None: the case's), layout and value range.

    ``transposed`` gives a tensor whose dims are reversed views of a contiguous
    one; ``sliced`` a view into a larger tensor, with a storage offset and gaps.
    """

    shape: tuple
    dtype: torch.dtype | None = None
    layout: str = "contiguous"
    low: float | None = None
    high: float | None = None

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"T: unknown layout {self.layout!r}; use one of {LAYOUTS}")

    def base_and_view(self, dtype: torch.dtype, gen: torch.Generator):
        """A contiguous CPU base tensor and the function that takes the view from it."""
        dtype = self.dtype or dtype
        shape = tuple(self.shape)
        if self.layout == "transposed" and len(shape) >= 2:
            base_shape = shape[::-1]
            dims = tuple(range(len(shape)))[::-1]
            view = lambda t: t.permute(dims)  # noqa: E731
        elif self.layout == "sliced" and len(shape) >= 1:
            base_shape = tuple(s + 2 for s in shape)
            index = tuple(slice(1, s + 1) for s in shape)
            view = lambda t: t[index]  # noqa: E731
        else:
            base_shape = shape
            view = lambda t: t  # noqa: E731
        return _random(base_shape, dtype, gen, self.low, self.high), view


def _random(shape, dtype, gen, low, high) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point or dtype.is_complex:
        lo = -3.0 if low is None else low
        hi = 3.0 if high is None else high
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    info = torch.iinfo(dtype)
    lo = max(info.min, -9 if low is None else int(low))
    hi = min(info.max, 10 if high is None else int(high))
    return torch.randint(lo, hi, shape, generator=gen).to(dtype)


@dataclasses.dataclass(frozen=True)
class Case:
    """One call of ``function`` (see the module docstring and Note [What a case checks])."""

    function: str
    args: Mapping[str, Any]
    reference: Callable[..., Any]
    dtype: torch.dtype = torch.float32
    rtol: float | None = None
    atol: float | None = None
    seed: int = 0
    note: str = ""

    def __post_init__(self):  # the family tables build names by pattern; a few take DeepLink's spelling
        object.__setattr__(self, "function", DEEPLINK_SPELLINGS.get(self.function, self.function))

    @property
    def label(self) -> str:
        def describe(value):
            if isinstance(value, T):
                return f"{list(value.shape)}{'' if value.layout == 'contiguous' else ' ' + value.layout}"
            if isinstance(value, (list, tuple)) and value and isinstance(value[0], T):
                return "[" + ", ".join(describe(v) for v in value) + "]"
            return repr(value)

        args = ", ".join(f"{k}={describe(v)}" for k, v in self.args.items())
        note = f" {self.note}" if self.note else ""
        return f"{self.function}({args}) {str(self.dtype).replace('torch.', '')}{note}"


def _layouts_for(shape) -> tuple[str, ...]:
    if len(shape) >= 2:
        return LAYOUTS
    return ("contiguous", "sliced") if len(shape) == 1 else ("contiguous",)


def unary_cases(function: str, reference: Callable, dtypes=FLOAT, inplace: bool = False,
                low=None, high=None, shapes=SHAPES, attrs: Mapping[str, list] | None = None,
                **case_kwargs) -> list[Case]:
    """``function(out, input, *attrs)`` (or ``function(input)`` in place) over shapes x layouts x dtypes.

    ``reference(input, **attrs)`` computes the CPU result; for ``inplace`` it may
    mutate ``input`` (the runner compares the mutated tensor).
    """
    cases = []
    names = list((attrs or {}).keys())
    for dtype, shape in itertools.product(dtypes, shapes):
        for layout in _layouts_for(shape):
            for values in itertools.product(*(attrs or {}).values()):
                args = {"input": T(shape, layout=layout, low=low, high=high), **dict(zip(names, values))}
                cases.append(Case(function, args, reference, dtype=dtype, **case_kwargs))
    return cases


def _scalar_for(dtype: torch.dtype):
    if dtype == torch.bool:
        return True
    return 2.5 if dtype.is_floating_point or dtype.is_complex else 2


def binary_cases(function: str, reference: Callable, dtypes=FLOAT, scalar: bool = False,
                 attrs: Mapping[str, list] | None = None, low=None, high=None, pairs=BROADCAST_PAIRS,
                 inplace: bool = False, **case_kwargs) -> list[Case]:
    """``function(out, input, other, *attrs)`` over broadcast pairs x layouts x dtypes x attributes.

    ``scalar``: ``other`` is a Python number (the ``...Scalar`` functions), and
    ``input`` sweeps SHAPES instead. ``inplace``: ``input`` is written, so only
    pairs where ``input`` keeps its shape are used.
    """
    names = list((attrs or {}).keys())
    if scalar:
        pairs = tuple((shape, None) for shape in SHAPES)
    cases = []
    for dtype, (shape, other_shape) in itertools.product(dtypes, pairs):
        if inplace and other_shape is not None and torch.broadcast_shapes(shape, other_shape) != shape:
            continue
        layouts = [("contiguous", "contiguous")]
        if len(shape) >= 2:
            layouts.append(("transposed", "contiguous"))
        if other_shape:
            layouts.append(("contiguous", "sliced"))
        for (layout, other_layout), values in itertools.product(layouts, itertools.product(*(attrs or {}).values())):
            other = (_scalar_for(dtype) if other_shape is None
                     else T(other_shape, layout=other_layout, low=low, high=high))
            args = {"input": T(shape, layout=layout, low=low, high=high), "other": other,
                    **dict(zip(names, values))}
            cases.append(Case(function, args, reference, dtype=dtype, **case_kwargs))
    return cases
