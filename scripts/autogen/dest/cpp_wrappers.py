"""The C++ wrappers (cpp_wrappers.cpp): typed PrivateUse1 kernels calling a C op library's functions directly.

Note [Generated C++ wrappers]
When a C op library is loaded (DIPU_DIOPI_IMPL), the Python wrappers (Note [Generated wrappers] in
python_wrappers.py) already serve its functions through the core's trampoline; these wrappers are the fast
path beside them: unboxed kernels with no Python on the way, registered over the Python wrappers for the ops
whose DIOPI function the library exports. Per call a C++ wrapper does what its Python twin does on its fast
path: takes the device of its first tensor, guards it, works out the output's shape and dtype with the C++
twin of its shape rule (dipu/kernels/cpp/shape_rules.h), allocates it from the caching allocator, calls the
C function and synchronizes in DIPU_SYNC_EXEC_MODE. Everything else goes to the Python wrapper (the kernel's
``python`` path, the same call through the trampoline): a hook switched on (DIPU_DUMP_OP_ARGS, the profiler),
an argument that is not a tensor on that device (a wrapped Python number, a CPU scalar), a non-contiguous
input of a functional kernel (the Python stride rules lay out its output; an elementwise kernel lays it out
itself: Note [Elementwise strides in C++] in dipu/kernels/cpp/wrapper_support.h), an in-place shape mismatch, a
shape rule's precondition failing (a matrix that is not 2-D), and a status other than success: the Python
wrapper calls the function again and owns what a failed status means (the CPU fallback, counted in
dipu.fallback_counts(), or the error naming the library's last error string). A DIOPI function is required
to answer diopiForceFallbackToCPU or an error before writing anything, so the second call sees the
arguments the first did.

Note [The wrappers in parts]
Compiling one wrapper costs little; compiling a thousand in one file costs minutes, much of it torch's code that
boxes and unboxes each kernel's arguments and infers its schema. A kernel is registered as a function pointer known
at run time (``entry(op, kernel, &f)`` in the table), so what its registration instantiates is instantiated once per
signature rather than once per kernel, for one more indirect call per op, which timing a 4-element add and a relu
side by side could not see; c10's boxed adapter is instantiated per signature too (Note [Boxed calls of a C++
wrapper] in dipu/kernels/cpp/wrapper_support.h). The generated text is compiled at -Og (Note
[Builds side by side] in dipu/_native.py). Measured on the 2-core development machine (2026-12-02), a part of about
420 wrappers compiled in 40 s with torch::Library::impl (its boxed adapter and inferred schema per signature) at
-O2, 34 s with a precompiled header of torch's (which costs 25 s and 600 MB to build, so dipu does not use one),
25 s with the registration as it is now, and 18 s with shared bodies (Note [Wrappers sharing a body]). The build
renders the wrappers in as many parts as the machine has cores (render_parts; at most 16, or $MAX_JOBS) and
compiles them side by side (Note [Compiling dipu's libraries] in dipu/_native.py), with the hand-written support
files as one more part. Each part is a whole translation unit with its own table of entries, which adds itself to
the extension's list (``Table`` in wrapper_support.h) while the library loads, before the module is defined; the
list is sorted by op, so neither the number of parts nor the link order changes what a process installs. The cache
key does not include the number of parts for that reason.

Note [Wrappers sharing a body]
A wrapper is given its op's Kernel (the functor the dispatcher calls holds it: ``Unboxed`` in
dipu/kernels/cpp/wrapper_support.h), so the wrappers whose text is the same but for the op (abs_, neg_, sin_ and
35 more in-place unary kernels; the foreach steps; the out= forms of a rule) are one function, named after the
first of them, with a row of the table per op. The 852 wrappers of the spec have 449 bodies. Compiling half the
code takes less time, as does leaving the Kernel records to the compiler as data (a constexpr constructor) and
making only the dispatcher's kernel per signature (``make_kernel``; registering it is one function for all):
measured on the 2-core development machine (2026-12-02), the two generated parts compiled in 18 s each instead
of 21 and 24.

Note [Wrapped numbers in C++]
Where the schema says Tensor and the caller passed a Python number (``x.mul_(0.9)``, ``x * 2``), a C++
kernel receives a wrapped number: a 0-dim CPU tensor. An entry with a ``scalar_interface`` for that
argument calls its scalar function with the number as a diopiScalar_t, as the Python wrapper does; the
shape rule sees the wrapped tensor, whose type promotion is a number's. Without a scalar function the
call goes to the Python path. A number in the entry's other Tensor input (``1 - x`` is ``sub(wrapped 1, x)``,
``torch.add(2, x)``) is made a 0-dim tensor on the device, in the dtype it promotes to beside the tensor
(``device_number``), and the wrapper calls itself again with it, as the Python wrapper does (Note [Python
numbers in Tensor positions] in dipu/kernels/support.py).

Note [Several outputs in C++]
A functional kernel returning several tensors (native_layer_norm and its backward) gets a C++ wrapper when
its rule has a C++ twin filling one Spec per output (CPP_MULTI_RULES); an output the caller did not ask
for (output_mask) is an undefined tensor, passed to C as the null handle and returned as None, as the
Python wrapper does. Its Python path calls the Python wrapper and unpacks the tuple it returns. An entry
whose shapes come from the meta kernel gets one only where a C++ rule stands in for that kernel
(CPP_META_TWINS; tests/test_cpp_wrappers.py checks each against the meta kernel).

Note [Meta shapes in C++]
A functional kernel whose spec takes its shapes from the meta kernel (no named rule, 214 kernels) gets a
C++ wrapper too: it runs its op on meta twins of its tensors (same sizes, strides and dtypes, no memory) and
allocates each output with the sizes, strides and dtype the meta kernel chose, which are the CPU's
(TensorIterator's memory-format rules included). A kernel whose meta kernel throws (the arguments are wrong,
or the op has none) takes the Python path for that call, which raises the error the Python wrapper raises;
one with no meta kernel at all is sent there for good after its first call. An out= kernel whose spec takes its
shapes from the meta kernel asks its functional sibling's, as its Python wrapper does, and resizes ``out`` where
its sizes differ (``support.resize_outputs``): amax.out, cumsum.out, gather.out, the upsampling outs and the rest
of the 46 out= kernels this gave C++ wrappers on 2026-12-03 (those with a Tensor[] argument, several outputs or a
Python meta kernel keep their Python wrappers, for the reasons above and below).
Where ATen has a C++ meta kernel for the op (every structured op, and those whose ``dispatch:`` names Meta:
``schemas.meta_function``), the wrapper calls it as ``at::meta::<op>`` from the op's ``<op>_meta_dispatch.h``,
past the dispatcher: about 1 us (clamp on 16x16, measured) where the Python wrapper costs 10+. Else it calls
the op through ``at::_ops`` on the meta twins, and the dispatcher picks the Meta kernel: torch registers many in
Python (torch/_meta_registrations.py, over the C++ ones), and reaching one from C++ costs more than the Python
wrapper does (index_select: 57 us against 18 us), so ``cpp_wrappers.install`` leaves such a kernel (its Kernel's
``meta_op`` names the op it dispatches) whose meta kernel is Python on its Python wrapper. Named C++ shape rules are
still what makes the hottest ops fastest.

Note [Tensor lists in C++]
The in-place ``_foreach_`` kernels (Tensor[] arguments, nothing returned) get C++ wrappers: the device is
the first tensor's, every element must be on it (else the Python path), and each list reaches C as an
array of handles followed by the run's shared length, as functions.h declares it. A ``Tensor?[]`` (the
indices of index.Tensor and index_put_) is such a list whose None entries are null handles; an index tensor
off the device (a CPU index, which ATen accepts) takes the Python path. Only ``at::TensorList`` and
``c10::List`` kernels: an op that torch declares with ``ITensorListRef`` (``cat``) would need the kernel's exact
C++ signature, which the schema alone does not give.

Note [Generators in C++]
A random kernel's ``Generator?`` reaches C as the handle of a dipu generator: the one given, or the
device's default where none was, as the Python trampoline passes it; the op library draws from the native
generator behind it (Note [Native generators] in dipu/csrc/hooks.cpp), so both paths draw the same numbers
for one seed. A generator of another device takes the Python path.

Note [Outputs a function allocates, in C++]
A function that allocates its output (a functional ``_foreach_`` kernel's list, nonzero's tensor: Note
[Outputs a function allocates] in dipu/diopi/context.py) gets from its C++ wrapper an array of null handles,
as many as the lists it goes with have elements (one for a tensor); it stores there handles of tensors its
call's context holds (diopiRequireTensor), and the wrapper returns those tensors. One that reports success
without storing every handle is sent to the Python path, which says what is wrong.

Only kernels the C++ side can serve whole are emitted (:func:`supported` says why not for the others): a
named shape rule with a C++ twin (``meta`` shapes stay in Python but for CPP_META_TWINS), one output or a
rule of CPP_MULTI_RULES, no ``impl:`` body, at most one function-allocated output, and parameters of the kinds in
``_CONVERSIONS``. The rest keep their Python wrapper, which calls the same C function: slower, never wrong.
"""

from __future__ import annotations

import dataclasses
import keyword

from torchgen import local
from torchgen.api.types import DispatcherSignature
from torchgen.model import FunctionSchema

from .. import proto, schemas
from ..model import Allocation, CallArg, Kernel, StrideRule, Variant
from ..shape_rules import CPP_META_TWINS as _CPP_META_TWINS
from ..shape_rules import ALIKE_RULES, CPP_RULES
from .c_header import c_parameters

TEMPLATE = "cpp_wrappers.cpp.j2"

#: The C++ twins of the shape rules and of meta kernels (Note [Shape rules are a table]).
CPP_SHAPE_RULES = frozenset(CPP_RULES)
CPP_META_TWINS = frozenset(_CPP_META_TWINS)
#: The C++ names of those twins: an overload's joined to its op by _ (var.correction: var_correction).
_TWIN_FUNCTIONS = {op: op.replace(".", "_") for op in _CPP_META_TWINS}
#: Rules (of either table) filling one Spec per output of a kernel with several (Note [Several outputs in C++]).
CPP_MULTI_RULES = frozenset(_TWIN_FUNCTIONS.get(name, name) for name, n in {**CPP_RULES, **_CPP_META_TWINS}.items()
                            if n > 1)

#: The C type of each proto kind the wrappers pass, as dipu's functions.h declares it (Note [The C form of a
#: proto function] in dipu/diopi/c_form.py), and the helper of wrapper_support.h that converts an ATen value,
#: by the dispatcher's C++ type of the argument.
_C_TYPES = {
    proto.Kind.TENSOR: "diopiConstTensorHandle_t",
    proto.Kind.TENSOR_OUT: "diopiTensorHandle_t",
    proto.Kind.SCALAR: "const diopiScalar_t*",
    proto.Kind.INT: "int64_t",
    proto.Kind.FLOAT: "double",
    proto.Kind.BOOL: "bool",
    proto.Kind.SIZE: "diopiSize_t",
    proto.Kind.STRING: "const char*",
    proto.Kind.ROUNDING_MODE: "diopiRoundMode_t",
    proto.Kind.REDUCTION: "diopiReduction_t",
    proto.Kind.TENSOR_LIST: "diopiConstTensorHandle_t*",
    proto.Kind.TENSOR_LIST_OUT: "diopiTensorHandle_t*",
    proto.Kind.SCALAR_LIST: "const diopiScalar_t*",
    proto.Kind.GENERATOR: "diopiGeneratorHandle_t",
    proto.Kind.TENSOR_ALLOC: "diopiTensorHandle_t*",
    proto.Kind.TENSOR_ALLOC_LIST: "diopiTensorHandle_t*",
    proto.Kind.DTYPE: "diopiDtype_t",
}
_LISTS = (proto.Kind.TENSOR_LIST, proto.Kind.TENSOR_LIST_OUT, proto.Kind.SCALAR_LIST)
_CONVERSIONS = {
    proto.Kind.TENSOR: {"const at::Tensor &": "in", "at::Tensor &": "in", "at::Tensor": "in",
                        "const ::std::optional<at::Tensor> &": "in"},
    proto.Kind.TENSOR_OUT: {"at::Tensor &": "out", "at::Tensor": "out", "const at::Tensor &": "out"},
    proto.Kind.SCALAR: {"const at::Scalar &": "scalar", "const ::std::optional<at::Scalar> &": "scalar"},
    proto.Kind.INT: {"int64_t": "integer", "c10::SymInt": "integer"},
    proto.Kind.FLOAT: {"double": "real", "const at::Scalar &": "real"},
    proto.Kind.BOOL: {"bool": "boolean"},
    proto.Kind.SIZE: {"at::IntArrayRef": "sizes", "at::OptionalIntArrayRef": "sizes",
                      "c10::SymIntArrayRef": "sizes", "at::OptionalSymIntArrayRef": "sizes"},
    proto.Kind.STRING: {"c10::string_view": "text", "::std::optional<c10::string_view>": "text"},
    proto.Kind.ROUNDING_MODE: {"::std::optional<c10::string_view>": "rounding_mode"},
    proto.Kind.REDUCTION: {"int64_t": "reduction"},
    proto.Kind.TENSOR_LIST: {"at::TensorList": "list", "const c10::List<::std::optional<at::Tensor>> &": "list"},
    proto.Kind.TENSOR_LIST_OUT: {"at::TensorList": "list"},
    proto.Kind.SCALAR_LIST: {"at::ArrayRef<at::Scalar>": "scalar_list"},
    proto.Kind.GENERATOR: {"::std::optional<at::Generator>": "generator"},
    proto.Kind.DTYPE: {"at::ScalarType": "dtype", "::std::optional<at::ScalarType>": "dtype"},
}
_TENSOR_TYPES = ("const at::Tensor &", "at::Tensor &")
_OPTIONAL_TENSOR = "const ::std::optional<at::Tensor> &"
#: A tensor argument, given or optional: the operands of the stride and overlap checks.
_TENSOR_OR_OPTIONAL = (*_TENSOR_TYPES, _OPTIONAL_TENSOR)
#: The kernel types of a tensor list: Tensor[] and Tensor?[] (indices, whose None entries reach C as null handles).
_LIST_TYPES = ("at::TensorList", "const c10::List<::std::optional<at::Tensor>> &")
#: Optional numbers DIOPI takes by pointer (NULL for None): the address of the kernel's own optional's value.
_BY_POINTER = frozenset({"::std::optional<int64_t>", "::std::optional<double>", "::std::optional<bool>"})
#: A value ATen always has where DIOPI's parameter is optional (``any.dim``'s dim for diopiAny's ``int? dim``):
#: its address.
_PLAIN_BY_POINTER = frozenset({"int64_t", "double", "bool"})
_ANY_BY_POINTER = _BY_POINTER | _PLAIN_BY_POINTER
#: A Scalar where DIOPI's parameter is an optional float (constant_pad_nd's value for diopiPad's ``float? value``): the
#: address of its value as a double.
_SCALAR_AS_REAL = "const at::Scalar &"
#: The kinds of DIOPI's optional numbers, passed by pointer.
_C_BY_POINTER_KINDS = frozenset({proto.Kind.INT, proto.Kind.FLOAT, proto.Kind.BOOL})
#: Literals of the spec (``None``, numbers) by kind: the C++ expression of the C value.
_LITERAL_NONE = {proto.Kind.TENSOR: "nullptr", proto.Kind.SCALAR: "nullptr", proto.Kind.STRING: "nullptr",
                 proto.Kind.SIZE: "diopiSize_t{nullptr, 0}", proto.Kind.ROUNDING_MODE: "RoundModeNone"}


@dataclasses.dataclass(frozen=True)
class CWrapper:
    """What the template prints for one kernel."""

    op: str  # "add.Tensor"
    schema: str
    name: str  # "add_Tensor"
    function: str  # "diopiAdd"
    c_params: str  # the function pointer's parameter types after the context
    returns: str  # the dispatcher's C++ return type
    params: str  # the kernel's C++ parameters
    args: str  # its arguments, for the Python path
    device_arg: str  # the tensor whose device the kernel runs on
    tensors: tuple[str, ...]  # Tensor inputs that must be on that device (optional ones when present)
    optional_tensors: tuple[str, ...]
    allocation: str
    output: str  # the output's name ("out", "self")
    rule: str  # "binary"
    rule_args: str
    contiguous: tuple[str, ...]  # tensors that must be contiguous for a contiguous output
    locals: tuple[str, ...]  # statements before the call (converted scalars, strings)
    call_args: str
    result: str  # what the kernel returns
    number: str  # the Tensor argument a wrapped Python number may stand in (Note [Wrapped numbers in C++])
    scalar_function: str  # the scalar_interface's function, called for such a number
    scalar_c_params: str
    scalar_locals: tuple[str, ...]
    scalar_call_args: str
    outputs: tuple[str, ...] = ()  # with several outputs (Note [Several outputs in C++]): their names
    lists: tuple[str, ...] = ()  # Tensor[] arguments whose elements must be on the device (Note [Tensor lists in C++])
    meta_call: str = ""  # the op on meta twins of its tensors, for kernels with meta shapes (Note [Meta shapes in C++])
    meta_header: str = ""  # the ATen header declaring meta_call's function (Note [Torch's headers, op by op])
    meta_op: str = ""  # the op whose meta kernel meta_call dispatches to; "": it calls an at::meta function
    generators: tuple[str, ...] = ()  # Generator? arguments, which must be dipu's (Note [Generators in C++])
    overlap_check: str = ""  # written_overlaps(...) for a kernel that writes tensors (Note [Overlapping memory in C++])
    # an elementwise kernel's tensor operands in schema order, whose strides lay out a non-contiguous call's output
    # (Note [Elementwise strides in C++] in dipu/kernels/cpp/wrapper_support.h); empty: such a call goes to Python
    strided_operands: tuple[str, ...] = ()


def values(kernels: list[Kernel], functions: frozenset[str] | None = None) -> dict:
    """The template's values: a wrapper for each supported kernel whose DIOPI function is in ``functions``
    (None: every supported kernel)."""
    with local.parametrize(use_const_ref_for_mutable_tensors=False, use_ilistref_for_tensor_lists=False):
        wrappers = [_wrapper(k) for k in kernels
                    if (functions is None or k.entry.function.name in functions) and supported(k) is None]
    return dict(wrappers=wrappers)


def supported(kernel: Kernel) -> str | None:
    """None when the kernel gets a C++ wrapper; else why it keeps only its Python one."""
    entry = kernel.entry
    if entry.impl is not None:
        return "an impl: body"
    if entry.interface is None:
        return "no interface call"
    rule = _rule(kernel)
    if kernel.allocation in (Allocation.NEW, Allocation.RESIZE, Allocation.CHECK):
        if rule is not None and rule not in CPP_SHAPE_RULES and rule not in _TWIN_FUNCTIONS.values():
            return f"shape rule {rule} has no C++ twin"
    elif kernel.allocation is Allocation.BY_FUNCTION:
        kinds = [p.kind for p in entry.interface.function.params]
        if len(kernel.outputs) != 1 or sum(kind.is_allocated for kind in kinds) != 1:
            return "the function allocates several outputs"
    several = len(kernel.outputs) != 1
    if several and (rule not in CPP_MULTI_RULES and rule is not None or kernel.allocation is not Allocation.NEW):
        return "several outputs"
    with local.parametrize(use_const_ref_for_mutable_tensors=False, use_ilistref_for_tensor_lists=False):
        types = _cpp_types(kernel.schema)
        returns = DispatcherSignature.from_schema(kernel.schema).returns_type().cpp_type()
    void = returns == "void" and kernel.allocation is Allocation.NONE
    allocated_list = returns == _TENSOR_VECTOR and kernel.allocation is Allocation.BY_FUNCTION
    if not void and not allocated_list and (returns != (_tuple_of(len(kernel.outputs)) if several else returns) or (
            not several and returns not in ("at::Tensor", "at::Tensor &"))):
        return f"returns {returns}"
    if not any(t in _TENSOR_TYPES or t in _LIST_TYPES for t in types.values()):
        return "no tensor argument to take the device from"
    if rule is None and kernel.allocation in (Allocation.NEW, Allocation.RESIZE):
        with local.parametrize(use_const_ref_for_mutable_tensors=False, use_ilistref_for_tensor_lists=False):
            meta_types = _cpp_types(_meta_schema(kernel))
        unknown = [t for t in meta_types.values() if "Tensor" in t and t not in _META_TWINS]
        if unknown:
            return f"meta shapes with an argument of type {unknown[0]}"
    return _unsupported_call(kernel, entry.interface, types, dict(kernel.renamed))


def _rule(kernel: Kernel) -> str | None:
    """The name of the kernel's shape rule (a C++ twin of the meta kernel for CPP_META_TWINS), None for meta: also
    for a functional kernel whose rule has no C++ twin where ATen has a C++ meta kernel to call instead (Note [Meta
    shapes in C++])."""
    if kernel.shape is not None and kernel.shape.rule is not None:
        name = kernel.shape.rule.name
        if name in CPP_SHAPE_RULES or kernel.allocation is not Allocation.NEW or _direct_meta(kernel.schema) is None:
            return name
        return None
    return _TWIN_FUNCTIONS.get(kernel.name)


def _meta_schema(kernel: Kernel) -> FunctionSchema:
    """The op whose meta kernel gives the outputs' shapes where no rule does: the kernel's own, or an out= kernel's
    functional sibling, as the Python wrappers ask it (Note [Meta shapes in C++])."""
    if kernel.allocation is Allocation.RESIZE and kernel.shape is not None and kernel.shape.meta_of is not None:
        return kernel.shape.meta_of
    return kernel.schema


def _direct_meta(schema: FunctionSchema) -> tuple[str, str] | None:
    """``schemas.meta_function`` with the dispatcher types the wrappers are written with."""
    with local.parametrize(use_const_ref_for_mutable_tensors=False, use_ilistref_for_tensor_lists=False):
        return schemas.meta_function(schema)


_TENSOR_VECTOR = "::std::vector<at::Tensor>"


def _tuple_of(count: int) -> str:
    return f"::std::tuple<{','.join(['at::Tensor'] * count)}>"


def _number_arg(kernel: Kernel, types: dict[str, str]) -> str | None:
    """The Tensor argument a wrapped number may stand in, when the C++ kernel calls the scalar function for it."""
    scalar = kernel.entry.scalar_interface
    if scalar is None or len(scalar.number_args) != 1 or types.get(scalar.number_args[0]) != "const at::Tensor &":
        return None
    if _unsupported_call(kernel, scalar, types, dict(kernel.renamed)) is not None:
        return None
    return scalar.number_args[0]


def _unsupported_call(kernel: Kernel, call, types: dict[str, str], renamed: dict[str, str]) -> str | None:
    numbers = call.number_args
    for arg, param in zip(call.args, call.function.params):
        if arg.name in numbers and param.kind is proto.Kind.SCALAR:
            continue
        if param.kind not in _C_TYPES:
            return f"parameter {param.name} of kind {param.kind.value}"
        given = None if arg.name is None else types.get(renamed.get(arg.name, arg.name))
        if param.optional and param.kind in _C_BY_POINTER_KINDS and arg.name is not None and \
                given not in _ANY_BY_POINTER and not _scalar_as_real(param, given):
            return f"optional parameter {param.name} passed by pointer"
        if arg.name is None:
            if _literal(arg, param) is None:
                return f"literal {arg.literal!r} for {param.name}"
            continue
        name = renamed.get(arg.name, arg.name)
        if name in kernel.outputs and name not in types:
            continue  # a new output: a local at::Tensor
        if param.optional and (types.get(name) in _ANY_BY_POINTER or _scalar_as_real(param, types.get(name))):
            continue
        if param.kind is proto.Kind.DTYPE and not param.optional and types.get(name) != "at::ScalarType":
            return f"optional argument {name} for dtype {param.name}"
        if _CONVERSIONS[param.kind].get(types.get(name, "")) is None:
            return f"argument {name} ({types.get(name)}) for {param.kind.value} {param.name}"
    return None


def _scalar_as_real(param: proto.Param, kernel_type: str | None) -> bool:
    """Whether a Scalar argument passes as DIOPI's optional float, by the address of its value as a double."""
    return param.optional and param.kind is proto.Kind.FLOAT and kernel_type == _SCALAR_AS_REAL


def _cpp_types(schema: FunctionSchema) -> dict[str, str]:
    return {b.argument.name: b.type for b in DispatcherSignature.from_schema(schema).arguments()}


def cpp(name: str) -> str:
    """A schema argument's C++ name (``default`` and the like are C++ keywords)."""
    return name + "_" if name in _CPP_KEYWORDS or keyword.iskeyword(name) else name


_CPP_KEYWORDS = frozenset({"default", "new", "delete", "template", "this", "operator", "register", "union",
                           "int", "float", "double", "char", "bool", "long", "short", "signed", "unsigned"})


def _literal(arg: CallArg, param: proto.Param) -> str | None:
    value = arg.literal
    if value is None:  # an optional number passes by pointer: None is the null one
        return "nullptr" if param.optional and param.kind in _C_BY_POINTER_KINDS else _LITERAL_NONE.get(param.kind)
    if isinstance(value, bool):
        return {proto.Kind.BOOL: "true" if value else "false"}.get(param.kind)
    if isinstance(value, int) and param.kind in (proto.Kind.INT, proto.Kind.FLOAT):
        return f"int64_t{{{value}}}" if param.kind is proto.Kind.INT else f"{float(value)!r}"
    if isinstance(value, float) and param.kind is proto.Kind.FLOAT:
        return repr(value)
    if isinstance(value, str) and param.kind is proto.Kind.STRING and value.isidentifier():
        return f'"{value}"'
    if isinstance(value, (int, float)) and param.kind is proto.Kind.SCALAR:
        return f"at::Scalar(int64_t{{{value}}})" if isinstance(value, int) else f"at::Scalar({value!r})"
    return None


def _wrapper(kernel: Kernel) -> CWrapper:
    schema, entry = kernel.schema, kernel.entry
    signature = DispatcherSignature.from_schema(schema)
    bindings = signature.arguments()
    types = {b.argument.name: b.type for b in bindings}
    renamed = dict(kernel.renamed)
    output = kernel.outputs[0]
    number = _number_arg(kernel, types)
    tensors = tuple(cpp(n) for n, t in types.items() if t in _TENSOR_TYPES and n != number)
    optional_tensors = tuple(cpp(n) for n, t in types.items() if t == _OPTIONAL_TENSOR)
    lists = tuple(cpp(n) for n, t in types.items() if t in _LIST_TYPES)
    generators = tuple(cpp(n) for n, t in types.items() if t == "::std::optional<at::Generator>")
    device_arg = f"{tensors[0]}.device().index()" if tensors else f"device_of({lists[0]})"
    assert entry.interface is not None, "supported() passes entries with an interface only"
    function = entry.interface.function
    scalar = entry.scalar_interface if number else None  # _number_arg found the number in the scalar interface
    locals_, call_args = _call_values(entry.interface, types, renamed)
    scalar_locals, scalar_call_args = _call_values(scalar, types, renamed) if scalar is not None else ((), [])
    scalar_locals = [line for line in scalar_locals if line not in locals_]  # made before the branch already
    contiguous: tuple[str, ...] = ()
    strided_operands: tuple[str, ...] = ()
    rule = rule_args = ""
    non_out = [cpp(a.name) for a in schema.arguments.flat_non_out]
    meta_call = meta_header = meta_op = ""
    allocates = kernel.allocation in (Allocation.NEW, Allocation.RESIZE, Allocation.CHECK)
    shape_rule = _rule(kernel)
    if allocates and shape_rule is None:
        meta_schema = _meta_schema(kernel)
        meta_args = ", ".join(f"meta({cpp(b.name)})" if b.type in _META_TWINS else cpp(b.name)
                              for b in DispatcherSignature.from_schema(meta_schema).arguments())
        direct = _direct_meta(meta_schema)
        if direct is not None:
            meta_header, function_name = direct
            meta_call = f"at::meta::{function_name}({meta_args})"
        else:
            meta_call = f"at::_ops::{meta_schema.name.unambiguous_name()}::call({meta_args})"
            meta_header = f"ATen/ops/{meta_schema.name.name.base}_ops.h"
            meta_op = str(meta_schema.name)
        strides = kernel.strides
        if kernel.allocation is Allocation.NEW and strides is not None and strides.rule is StrideRule.FORMAT_OF and \
                strides.argument is not None:  # ATen's C++ meta kernel may lay it out otherwise
            contiguous = (cpp(strides.argument),)
    elif allocates and shape_rule is not None:
        rule = shape_rule
        rule_args = ", ".join(non_out)
        if (kernel.allocation is Allocation.NEW and kernel.strides is not None and rule not in _CONTIGUOUS_OUTPUTS
                and kernel.strides.rule is not StrideRule.CONTIGUOUS):
            contiguous = tensors + optional_tensors + ((cpp(number),) if number else ())
            if kernel.strides.rule is StrideRule.ELEMENTWISE or rule in ALIKE_RULES:
                strided_operands = tuple(cpp(n) for n, t in types.items() if t in _TENSOR_OR_OPTIONAL)
    result = cpp(renamed.get(output, output))
    if kernel.allocation is Allocation.BY_FUNCTION:
        vector = signature.returns_type().cpp_type() == _TENSOR_VECTOR
        result = f"{result}_c.{'tensors' if vector else 'tensor'}()"
    return CWrapper(
        overlap_check=_overlap_check(kernel, types),
        op=kernel.name, schema=str(schema), name=kernel.name.replace(".", "_"), function=function.name,
        c_params=", ".join(p.type for p in c_parameters(function)[1:]),
        returns=signature.returns_type().cpp_type(),
        params=", ".join(f"{b.type} {cpp(b.name)}" for b in bindings),
        args=", ".join(cpp(b.name) for b in bindings),
        device_arg=device_arg, tensors=tensors, optional_tensors=optional_tensors,
        allocation=kernel.allocation.name, output=cpp(renamed.get(output, output)), rule=rule,
        rule_args=rule_args, contiguous=contiguous, locals=tuple(locals_), call_args=", ".join(call_args),
        result=result, number=cpp(number) if number else "",
        scalar_function=scalar.function.name if scalar is not None else "",
        scalar_c_params=", ".join(p.type for p in c_parameters(scalar.function)[1:]) if scalar is not None else "",
        scalar_locals=tuple(scalar_locals), scalar_call_args=", ".join(scalar_call_args),
        outputs=tuple(cpp(o) for o in kernel.outputs) if len(kernel.outputs) > 1 else (), lists=lists,
        meta_call=meta_call, meta_header=meta_header, meta_op=meta_op, generators=generators,
        strided_operands=strided_operands)


def _overlap_check(kernel: Kernel, types: dict[str, str]) -> str:
    """The test of Note [Overlapping memory in C++] in dipu/kernels/cpp/wrapper_support.h (for written lists, element
    by element: Note [Written lists overlapping] in dipu/kernels/support.py), "" for a kernel that writes nothing."""
    schema, written = kernel.schema, kernel.checked_writes
    lists = kernel.checked_written_lists
    if lists and not written:  # Note [Written lists overlapping] in dipu/kernels/support.py
        if any(types[n] != "at::TensorList" for n in lists):
            return ""
        readable: tuple[str, ...] = (*_TENSOR_OR_OPTIONAL, "at::TensorList")
        reads = [cpp(a.name) for a in schema.arguments.flat_all if a.name not in lists and types[a.name] in readable]
        return (f"written_lists_overlap(std::array<at::TensorList, {len(lists)}>{{{', '.join(cpp(n) for n in lists)}}}"
                f"{''.join(', ' + r for r in reads)})")
    if not written or any(types[n] not in _TENSOR_TYPES for n in written):
        return ""
    in_place = kernel.variant is Variant.INPLACE
    readable = (*_TENSOR_OR_OPTIONAL, *_LIST_TYPES)
    reads = [cpp(a.name) for a in schema.arguments.flat_non_out if a.name not in written and types[a.name] in readable]
    pointers = ", ".join(f"&{cpp(n)}" for n in written)
    return (f"written_overlaps(std::array<const at::Tensor*, {len(written)}>{{{pointers}}}, "
            f"{'true' if in_place else 'false'}{''.join(', ' + r for r in reads)})")


#: Argument types a meta twin stands in for (Note [Meta shapes in C++]): the rest pass as they are.
_META_TWINS = frozenset(_TENSOR_OR_OPTIONAL)

#: Rules whose output the meta kernel lays out contiguously whatever the inputs' strides (the matrix products, and the
#: reductions, whose output ATen allocates with the reduced shape's contiguous strides): their functional kernels
#: need no stride rule, so non-contiguous inputs stay on the C++ path.
_CONTIGUOUS_OUTPUTS = frozenset({"mm", "bmm", "addmm", "reduction", "reduce_all", "sum_all"})


def _call_values(call, types: dict[str, str], renamed: dict[str, str]) -> tuple[list[str], list[str]]:
    """The statements before the C call and its arguments after the context."""
    locals_, call_args = [], []
    params = call.function.params
    run = None  # the first list of the run of lists being passed: the run's length is its size
    allocated = first_list = None
    allocated_list = False
    for index, (arg, param) in enumerate(zip(call.args, params)):
        if param.kind.is_allocated:  # Note [Outputs a function allocates, in C++]
            allocated = cpp(renamed.get(arg.name, arg.name))
            allocated_list = param.kind is proto.Kind.TENSOR_ALLOC_LIST
            call_args.append(f"{allocated}_c.data()")
            continue
        if param.kind in _LISTS:
            value = cpp(renamed.get(arg.name, arg.name))
            helper = "ScalarList" if param.kind is proto.Kind.SCALAR_LIST else "HandleList"
            locals_.append(f"{helper} {value}_c({value});")
            call_args.append(f"{value}_c.data()")
            run = run or value
            first_list = first_list or value
            if index + 1 == len(params) or params[index + 1].kind not in _LISTS:
                call_args.append(f"{run}_c.size()")
                run = None
            continue
        if arg.name in call.number_args and param.kind is proto.Kind.SCALAR:
            value = cpp(renamed.get(arg.name, arg.name))
            locals_.append(f"const diopiScalar_t {value}_n = scalar(number_of({value}));")
            call_args.append(f"&{value}_n")
            continue
        if arg.name is None:
            literal = _literal(arg, param)
            if literal is None:
                raise ValueError(f"{call.function.name}: no C++ form for {arg.literal!r} as {param.name}")
            if param.kind is proto.Kind.SCALAR and arg.literal is not None:
                locals_.append(f"diopiScalar_t {param.name}_c = scalar({literal});")
                call_args.append(f"&{param.name}_c")
            else:
                call_args.append(literal)
            continue
        name = renamed.get(arg.name, arg.name)
        value = cpp(name)
        if param.optional and types.get(name) in _BY_POINTER:
            call_args.append(f"pointer_to({value})")
            continue
        if param.optional and types.get(name) in _PLAIN_BY_POINTER:
            call_args.append(f"&{value}")
            continue
        if _scalar_as_real(param, types.get(name)):
            locals_.append(f"const double {value}_c = {value}.toDouble();")
            call_args.append(f"&{value}_c")
            continue
        helper = "out" if name not in types else _CONVERSIONS[param.kind][types[name]]
        if helper == "scalar":
            locals_.append(f"ScalarArg {value}_c({value});")
            call_args.append(f"{value}_c.get()")
        elif helper == "text":
            locals_.append(f"TextArg {value}_c({value});")
            call_args.append(f"{value}_c.get()")
        elif helper == "dtype":  # by pointer where optional (Note [The C form of a proto function])
            locals_.append(f"DtypeArg {value}_c({value});")
            call_args.append(f"{value}_c.{'pointer' if param.optional else 'value'}()")
        elif helper == "generator":  # Note [Generators in C++]
            locals_.append(f"GeneratorArg {value}_c({value}, d);")
            call_args.append(f"{value}_c.get()")
        elif helper == "rounding_mode":
            call_args.append(f"c_rounding_mode({value})")
        else:
            call_args.append(f"c_{helper}({value})")
    if allocated is not None:  # as many outputs as the lists have elements, or one
        if not allocated_list:
            size = "1"
        elif first_list is not None:
            size = first_list + "_c.size()"
        else:
            raise ValueError(f"{call.function.name}: allocates a list of outputs, and takes no list to size it by")
        locals_.append(f"Allocated {allocated}_c({size});")
    return locals_, call_args


def explain(kernels: list[Kernel]) -> dict[str, str]:
    """Kernel name -> why it has no C++ wrapper, for the kernels that have none."""
    reasons = {}
    for kernel in kernels:
        reason = supported(kernel)
        if reason is not None:
            reasons[kernel.name] = reason
    return reasons




def _to_python(w: CWrapper) -> str:
    """The statement handing the call to the Python wrapper and returning what it returns."""
    if w.outputs:
        results = ", ".join(f"r.at({i})" for i in range(len(w.outputs)))
        return f"{{ const auto r = kern.python_tensors({w.args}); return {w.returns}({results}); }}"
    if w.returns == "at::Tensor":
        return f"return kern.python_tensor({w.args});"
    if w.returns == _TENSOR_VECTOR:
        return f"return kern.python_tensors({w.args});"
    if w.returns == "void":
        return f"{{ kern.python({w.args}); return; }}"
    return f"{{ kern.python({w.args}); return {w.result}; }}"


#: What a body's statements call the body itself: the name of the first wrapper it serves, known once bodies are
#: shared.
SELF = "@self@"


def _kernel(w: CWrapper) -> str:
    """The Kernel record of the wrapper's op."""
    meta = f', /*meta_op=*/"{w.meta_op}"' if w.meta_op else ""
    return f'Kernel k_{w.name}("{w.op}", "{w.function}", "{w.scalar_function}"{meta});'


def _body(w: CWrapper) -> list[str]:
    """The statements of the wrapper (Note [Generated C++ wrappers]): the checks that send a call to Python, the
    output's shape, its allocation, the C call and the result; ``kern`` is the op's Kernel, which the wrapper is
    given (Note [Wrappers sharing a body])."""
    to_python = _to_python(w)
    lines = [f"  using fn = diopiError_t (*)(diopiContextHandle_t, {w.c_params});"]
    if w.number:
        lines.append(f"  using scalar_fn = diopiError_t (*)(diopiContextHandle_t, {w.scalar_c_params});")
    lines.append(f"  const c10::DeviceIndex d = {w.device_arg};")

    def unless(condition: str, comment: str = "") -> None:
        lines.extend([f"  if (C10_UNLIKELY({condition}))", f"    {to_python}{comment}"])

    if w.number and w.allocation == "NEW" and len(w.tensors) == 1 and not (w.optional_tensors or w.lists):
        # a number in the other Tensor position (1 - x is sub(wrapped 1, x)): again, with it on x's device
        operand = w.tensors[0]
        args = ", ".join(f"device_number({a}, {w.number})" if a == operand else a for a in w.args.split(", "))
        number_there = f"is_number({operand}) && {w.number}.device().type() == kDipu && kern.fast_path()"
        lines += [f"  if (C10_UNLIKELY({number_there}))",
                  f"    return {SELF}(kern, {args});  // Note [Wrapped numbers in C++]"]
    if w.number:
        lines.append(f"  const bool number = is_number({w.number});  // Note [Wrapped numbers in C++]")
    checks = ["!kern.fast_path()", *(f"!on({t}, d)" for t in (*w.tensors, *w.optional_tensors, *w.lists)),
              *(f"!dipu_generator({g})" for g in w.generators)]
    if w.number:
        checks.append(f"!(number ? kern.scalar_function != nullptr : on({w.number}, d))")
    unless(" || ".join(checks))
    if w.overlap_check:
        unless(w.overlap_check, "  // Note [Overlapping memory in C++]")
    all_contiguous = "(" + " && ".join(f"contiguous({t})" for t in w.contiguous) + ")"
    if w.contiguous and not w.strided_operands:
        unless(f"!{all_contiguous}", "  // the Python stride rules lay out the output")
    if w.meta_call:
        lines.append(f"  std::array<Spec, {len(w.outputs) or 1}> specs;  // Note [Meta shapes in C++]")
        unless(f"!meta_specs(kern, specs, [&] {{ return {w.meta_call}; }})")
    elif w.outputs:
        lines.append(f"  std::array<Spec, {len(w.outputs)}> specs;  // Note [Several outputs in C++]")
        unless(f"!rules::{w.rule}(specs, {w.rule_args})")
    elif w.rule:
        lines.append("  Spec spec;")
        check = f" || {w.output}.sizes() != c10::IntArrayRef(spec.shape)" if w.allocation == "CHECK" else ""
        unless(f"!rules::{w.rule}(spec, {w.rule_args}){check}")
    if w.strided_operands:
        operands = ", ".join(w.strided_operands)
        # Rule.alike: TensorIterator takes the operands in another order, which only equal strides make moot
        laid_out = f"(alike({operands}) && elementwise_strides(spec, {operands}))" if w.rule in ALIKE_RULES else \
            f"elementwise_strides(spec, {operands})"
        unless(f"!{all_contiguous} && !{laid_out}", "  // Note [Elementwise strides in C++]")
    lines.append("  DeviceScope scope(d);")
    if w.allocation == "RESIZE":  # as the Python wrapper resizes (support.resize_outputs)
        shape = "specs[0].shape" if w.meta_call else "spec.shape"
        lines.append(f"  if ({w.output}.sizes() != c10::IntArrayRef({shape})) {w.output}.resize_({shape});")
    elif w.meta_call:
        lines += [f"  at::Tensor {o} = empty(specs[{i}]);" for i, o in enumerate(w.outputs or (w.output,))]
    elif w.outputs:
        lines += [f"  at::Tensor {o} = specs[{i}].wanted ? empty(specs[{i}].shape, specs[{i}].dtype) : at::Tensor();"
                  for i, o in enumerate(w.outputs)]
    elif w.allocation == "NEW":
        allocate = "empty(spec)" if w.strided_operands else "empty(spec.shape, spec.dtype)"
        lines.append(f"  at::Tensor {w.output} = {allocate};")
    lines += [f"  {line}" for line in w.locals]
    lines.append("  diopi::Context ctx(d);")
    call = f"reinterpret_cast<fn>(kern.function)(diopi::handle(ctx), {w.call_args});"
    if w.number:
        lines += ["  diopiError_t status;", "  if (number) {", *(f"    {line}" for line in w.scalar_locals),
                  f"    status = reinterpret_cast<scalar_fn>(kern.scalar_function)(diopi::handle(ctx), "
                  f"{w.scalar_call_args});", "  } else {", f"    status = {call}", "  }"]
    else:
        lines.append(f"  const diopiError_t status = {call}")
    unless("status != diopiSuccess", "  // the Python wrapper owns what a failed status means")
    if w.allocation == "BY_FUNCTION":
        unless(f"!{w.output}_c.complete()",
               "  // success without every output: the Python wrapper says what is missing")
    lines.append("  kern.finished(d);")
    if w.outputs:
        lines.append(f"  return {w.returns}({', '.join(w.outputs)});")
    elif w.returns == "void":
        lines.append("  return;")
    else:
        lines.append(f"  return {w.result};")
    return lines


def render(kernels: list[Kernel], source: str, functions: frozenset[str] | None = None) -> str:
    """The text of cpp_wrappers.cpp for ``kernels`` (see :func:`values`), in one part."""
    return render_parts(kernels, source, functions, 1)[0]


def render_parts(kernels: list[Kernel], source: str, functions: frozenset[str] | None, parts: int) -> list[str]:
    """The wrappers of :func:`render` in ``parts`` files of about as many bodies each, compiled side by side (Note
    [The wrappers in parts]); wrappers with the same text share one body (Note [Wrappers sharing a body])."""
    import jinja2

    from ..emit import TEMPLATES

    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    template = environment.get_template(TEMPLATE)
    bodies: dict[tuple, dict] = {}  # (returns, params, statements) -> the body and the wrappers it serves
    for w in values(kernels, functions)["wrappers"]:
        key = (w.returns, w.params, tuple(_body(w)))
        if key not in bodies:  # named after the first (by op) of the wrappers it serves
            bodies[key] = dict(name=w.name, returns=w.returns, params=w.params, body=key[2], wrappers=[])
        bodies[key]["wrappers"].append(w)
    shared = list(bodies.values())
    parts = max(1, min(parts, len(shared)))
    size = -(-len(shared) // parts)
    rendered = []
    for i in range(parts):
        chunk = shared[i * size:(i + 1) * size]
        served = sorted(((w, b["name"]) for b in chunk for w in b["wrappers"]), key=lambda pair: pair[0].op)
        rendered.append(template.render(
            source=source, part=f"// Part {i + 1} of {parts} (Note [The wrappers in parts]).\n" if parts > 1 else "",
            bodies=[dict(b, schemas=[w.schema for w in b["wrappers"]],
                         body=[line.replace(SELF, f"dipu_{b['name']}") for line in b["body"]]) for b in chunk],
            kernels=[_kernel(w) for w, _ in served], entries=[(w.op, w.name, body) for w, body in served],
            headers=sorted({w.meta_header for w, _ in served if w.meta_header})))
    return rendered


__all__ = [
    "CPP_META_TWINS", "CPP_MULTI_RULES", "CPP_SHAPE_RULES", "TEMPLATE", "explain", "render", "render_parts",
    "supported", "values",
]
