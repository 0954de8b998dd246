"""``torch.compile`` on a vendor without a compiler backend (``DeviceRuntime.compiler_backend = None``).

Note [torch.compile without a compiler]
Inductor's kernels cannot run on such a vendor (its memory is opaque and it offers no code generator),
but the graph dynamo captures still can: ``backend="aot_eager"`` traces it with AOT autograd and runs
the traced forward and backward through dipu's own kernels. A user who writes ``torch.compile(model)``
should not have to know that, so for these vendors :func:`install` wraps the call that hands a captured
graph to inductor (``torch._TorchCompileInductorWrapper.__call__``, which ``torch.compile`` uses for its
default backend): a graph that touches dipu (an input, or any value it computes, on a dipu device)
goes to ``aot_eager`` with a warning saying so, once per process; any other graph still goes to inductor.
The wrapper is installed at ``import dipu``, importing nothing from dynamo or inductor (about 1.7 s),
and only for vendors without a compiler. ``NoCompilerScheduling`` in dipu/compile/backend.py stays as a
backstop for callers that reach inductor another way (``compile_fx`` called directly).
"""

from __future__ import annotations

import functools
import warnings

import torch

from dipu._core import vendor

_TYPE = "dipu"


def install() -> None:
    """Route ``torch.compile``'s default backend to ``aot_eager`` for graphs on dipu (idempotent)."""
    wrapper = torch._TorchCompileInductorWrapper
    inductor_call = wrapper.__call__
    if getattr(inductor_call, "_dipu_without_compiler", False):
        return

    @functools.wraps(inductor_call)
    def __call__(self, model_, inputs_, **kwargs):
        if not _touches_dipu(model_, inputs_):
            return inductor_call(self, model_, inputs_, **kwargs)
        _warn_once()
        from torch._dynamo.backends.registry import lookup_backend

        return lookup_backend("aot_eager")(model_, inputs_)

    __call__._dipu_without_compiler = True  # type: ignore[attr-defined]  # a marker on the function, read above
    wrapper.__call__ = __call__  # type: ignore[method-assign]  # torch's class, patched on purpose


def _on_dipu(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == _TYPE


def _touches_dipu(graph_module, inputs) -> bool:
    if any(_on_dipu(value) for value in inputs):
        return True
    graph = getattr(graph_module, "graph", None)
    return graph is not None and any(_on_dipu(node.meta.get("val")) for node in graph.nodes)


@functools.cache
def _warn_once() -> None:
    warnings.warn(
        f"dipu vendor '{vendor().name}' has no compiler backend (its DeviceRuntime.compiler_backend is None): "
        "torch.compile runs graphs on dipu as backend=\"aot_eager\" does, through dipu's own kernels, without "
        "inductor's generated kernels", stacklevel=2)
