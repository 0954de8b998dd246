// Memory overlap between the tensors an op writes and its other tensor arguments, for the CPU
// fallback and the generated wrappers (Note [Overlapping memory] in overlap.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace dipu {

// Whether a dipu tensor the op writes (`Tensor(a!)`, in-place self or out=) has elements that
// refer to one memory location, or shares bytes with another dipu tensor argument. With
// `same_tensor_counts` false, one tensor passed as an output and as an input
// (`torch.add(x, y, out=x)`) does not count: the DIOPI contract lets an output be an input
// (two outputs that are one tensor still count).
bool writes_overlapping_memory(const c10::FunctionSchema& schema, c10::ArrayRef<c10::IValue> args,
                               bool same_tensor_counts);

// The aten op (or custom op) a name like "add.out" or "ns::op" names.
c10::OperatorHandle find_op(const std::string& qualified);

// Whether an op's argument is a Generator or an optional one.
bool is_optional_generator(const c10::Argument& arg);

// Runs `op` (its arguments on `stack`) on the CPU over host replicas that share memory exactly as
// the dipu arguments do, so the CPU kernel checks and computes as it would on the CPU. With
// `write_back`, what it wrote is copied back into the dipu tensors and the results are the op's
// (written arguments returned as themselves, new tensors moved to `device`); without, nothing is
// written back and the results are dropped (a probe: only its error matters).
void run_on_host_replicas(const c10::OperatorHandle& op, torch::jit::Stack* stack, std::optional<c10::Device> device,
                          bool write_back);

// Note [Host arguments]
// The fallbacks that run an op on the CPU over host copies (the sparse fallback in cpu_fallback.cpp, the host replicas
// here) swap its arguments on `stack` for host tensors in one way: `to_host` for each tensor, in a tensor list
// and in a list of optional tensors too, and the CPU for a dipu device. arguments_to_host returns each dipu
// tensor the op writes with its host tensor; after the call, results_from_host returns those arguments as
// themselves (what the op returns for in-place and out=) and moves every other tensor result to `device`.
using HostPairs = std::vector<std::pair<at::Tensor, at::Tensor>>;  // (dipu tensor, its host tensor)
HostPairs arguments_to_host(const c10::FunctionSchema& schema, torch::jit::Stack* stack,
                            const std::function<at::Tensor(const at::Tensor&)>& to_host);
void results_from_host(const c10::FunctionSchema& schema, torch::jit::Stack* stack, const HostPairs& written,
                       std::optional<c10::Device> device);

}  // namespace dipu
