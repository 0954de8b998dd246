// The C++ wrappers of the hot path's `impl:` kernels (convolution, batch norm, max and adaptive average
// pooling, with their backwards, dropout, and fused attention with its backward) and of cat, whose Tensor[] the
// generator does not write. The generator leaves an entry with an `impl:` body to its Python wrapper (the body is
// Python: dipu/ops/convolution.py, dipu/ops/memory_format.py, dipu/ops/attention.py); these are those bodies written
// again in C++, each beside its Python twin,
// inside the frame every generated C++ wrapper has (Note [Generated C++ wrappers] in
// scripts/autogen/dest/cpp_wrappers.py): the same fast-path test, the same Python path for everything else,
// the same counting. Outputs take the memory format the CPU kernels give them (Note [Memory formats of
// outputs] in dipu/ops/memory_format.py). What the Python body handles and these do not (a pooling shape its rule
// leaves to the meta kernel, batch norm backward with mixed dtypes or without an affine weight, cat of mixed dtypes
// or layouts) takes the Python path. tests/test_cpp_wrappers.py compares both paths with the CPU.
#include "wrapper_support.h"

#include <algorithm>
#include <cmath>
#include <mutex>

namespace dipu::cwrap {
namespace {

// dipu/ops/meta_rules.py's memory_format: ATen's suggest_memory_format for the dense layouts.
at::MemoryFormat layout_of(const at::Tensor& t) {
  if (t.is_contiguous()) return at::MemoryFormat::Contiguous;
  if (t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast)) return at::MemoryFormat::ChannelsLast;
  if (t.dim() == 5 && t.is_contiguous(at::MemoryFormat::ChannelsLast3d)) return at::MemoryFormat::ChannelsLast3d;
  return at::MemoryFormat::Contiguous;
}

// dipu/ops/memory_format.py's empty: a new output in `layout` where the shape has that layout's rank.
at::Tensor empty_in(c10::IntArrayRef shape, at::ScalarType dtype, at::MemoryFormat layout) {
  const size_t rank = layout == at::MemoryFormat::ChannelsLast ? 4 : 5;
  if (layout == at::MemoryFormat::Contiguous || shape.size() != rank) return empty(shape, dtype);
  static c10::Allocator* allocator = c10::GetAllocator(kDipu);
  return at::detail::empty_generic(shape, allocator, c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype, layout);
}

// An optional tensor the DIOPI function writes (batch norm's running statistics).
diopiTensorHandle_t c_written(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? diopi::handle(const_cast<at::Tensor&>(*t)) : nullptr;
}

// No symbolic size among `values` (a symbolic one takes the Python path).
bool concrete(c10::SymIntArrayRef values) {
  for (const c10::SymInt& v : values)
    if (v.is_heap_allocated()) return false;
  return true;
}

// ---- convolution (dipu/ops/convolution.py) ----

// dipu/ops/convolution.py's _memory_format: channels_last when the input or the weight is.
at::MemoryFormat convolution_layout(const at::Tensor& input, const at::Tensor& weight) {
  const at::MemoryFormat layout = layout_of(input);
  return layout != at::MemoryFormat::Contiguous ? layout : layout_of(weight);
}

// _output_size (_transposed_output_size for a transposed one): false where the arguments do not describe a
// convolution the fast path takes.
bool convolution_size(c10::SmallVector<int64_t, 6>& shape, const at::Tensor& input, const at::Tensor& weight,
                      c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                      bool transposed, c10::SymIntArrayRef output_padding, int64_t groups) {
  const int64_t spatial = input.dim() - 2;
  if (spatial < 1 || weight.dim() != input.dim() || static_cast<int64_t>(stride.size()) != spatial ||
      static_cast<int64_t>(padding.size()) != spatial || static_cast<int64_t>(dilation.size()) != spatial ||
      !concrete(stride) || !concrete(padding) || !concrete(dilation) ||
      (transposed && (static_cast<int64_t>(output_padding.size()) != spatial || !concrete(output_padding))))
    return false;
  shape.assign({input.size(0), transposed ? weight.size(1) * groups : weight.size(0)});
  for (int64_t i = 0; i < spatial; ++i) {
    const int64_t step = stride[i].as_int_unchecked(), pad = padding[i].as_int_unchecked(),
                  dil = dilation[i].as_int_unchecked(), kernel = weight.size(i + 2), size = input.size(i + 2);
    if (transposed) {
      const int64_t extent =
          (size - 1) * step - 2 * pad + dil * (kernel - 1) + output_padding[i].as_int_unchecked() + 1;
      if (step <= 0 || extent <= 0) return false;  // the Python path raises what the CPU raises
      shape.push_back(extent);
      continue;
    }
    const int64_t span = size + 2 * pad - dil * (kernel - 1) - 1;
    if (step <= 0 || span < 0) return false;
    shape.push_back(span / step + 1);
  }
  return true;
}

using convolution_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t,
                                        diopiConstTensorHandle_t, diopiConstTensorHandle_t, diopiSize_t, diopiSize_t,
                                        diopiSize_t, int64_t);
using transposed_convolution_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t,
                                                   diopiConstTensorHandle_t, diopiConstTensorHandle_t, diopiSize_t,
                                                   diopiSize_t, diopiSize_t, int64_t, diopiSize_t);
// A transposed convolution calls the entry's second function (`calls:` in the spec), bound as the Kernel's scalar one.
Kernel k_convolution("convolution_overrideable", "diopiConvolution2d", "diopiConvTranspose2d");

at::Tensor dipu_convolution(Kernel& kern, const at::Tensor& input, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, c10::SymIntArrayRef stride,
                            c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation, bool transposed,
                            c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  const c10::DeviceIndex d = input.device().index();
  c10::SmallVector<int64_t, 6> shape;
  if (C10_UNLIKELY(!kern.fast_path() || !on(input, d) || !on(weight, d) || !on(bias, d) ||
                   (transposed && kern.scalar_function == nullptr) || groups.is_heap_allocated() ||
                   !convolution_size(shape, input, weight, stride, padding, dilation, transposed, output_padding,
                                     groups.as_int_unchecked())))
    return kern.python_tensor(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  DeviceScope scope(d);
  at::Tensor out = empty_in(shape, input.scalar_type(), convolution_layout(input, weight));
  diopi::Context ctx(d);
  ctx.fresh = {&out};  // Note [Taken results] in dipu/csrc/allocator.cpp
  const diopiError_t status =
      transposed ? reinterpret_cast<transposed_convolution_fn>(kern.scalar_function)(
                       diopi::handle(ctx), c_out(out), c_in(input), c_in(weight), c_in(bias), c_sizes(stride),
                       c_sizes(padding), c_sizes(output_padding), c_integer(groups), c_sizes(dilation))
                 : reinterpret_cast<convolution_fn>(kern.function)(
                       diopi::handle(ctx), c_out(out), c_in(input), c_in(weight), c_in(bias), c_sizes(stride),
                       c_sizes(padding), c_sizes(dilation), c_integer(groups));
  if (C10_UNLIKELY(status != diopiSuccess))  // the Python wrapper owns what a failed status means
    return kern.python_tensor(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
  kern.finished(d);
  return out;
}

using convolution_backward_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiTensorHandle_t,
                                                 diopiTensorHandle_t, diopiConstTensorHandle_t,
                                                 diopiConstTensorHandle_t, diopiConstTensorHandle_t, diopiSize_t*,
                                                 diopiSize_t, diopiSize_t, diopiSize_t, int64_t);
using transposed_convolution_backward_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t,
                                                            diopiTensorHandle_t, diopiTensorHandle_t,
                                                            diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                                            diopiConstTensorHandle_t, diopiSize_t*, diopiSize_t,
                                                            diopiSize_t, diopiSize_t, diopiSize_t, int64_t);
Kernel k_convolution_backward("convolution_backward_overrideable", "diopiConvolution2dBackward",
                              "diopiConvTranspose2dBackward");

using Three = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Three three(const std::vector<at::Tensor>& r) { return Three(r.at(0), r.at(1), r.at(2)); }

Three dipu_convolution_backward(Kernel& kern, const at::Tensor& grad_output, const at::Tensor& input,
                                const at::Tensor& weight, c10::SymIntArrayRef stride, c10::SymIntArrayRef padding,
                                c10::SymIntArrayRef dilation, bool transposed, c10::SymIntArrayRef output_padding,
                                c10::SymInt groups, std::array<bool, 3> output_mask) {
  const c10::DeviceIndex d = grad_output.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(grad_output, d) || !on(input, d) || !on(weight, d) ||
                   (transposed && (kern.scalar_function == nullptr || !concrete(output_padding))) ||
                   groups.is_heap_allocated() || !concrete(stride) || !concrete(padding) || !concrete(dilation)))
    return three(kern.python_tensors(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                                     groups, output_mask));
  DeviceScope scope(d);
  const at::MemoryFormat layout = convolution_layout(input, weight);
  at::Tensor grad_input = output_mask[0] ? empty_in(input.sizes(), input.scalar_type(), layout) : at::Tensor();
  at::Tensor grad_weight = output_mask[1] ? empty_in(weight.sizes(), weight.scalar_type(), layout) : at::Tensor();
  const int64_t channels = transposed ? weight.size(1) * groups.as_int_unchecked() : weight.size(0);
  at::Tensor grad_bias = output_mask[2] ? empty({channels}, weight.scalar_type()) : at::Tensor();
  diopiSize_t bias_sizes{&channels, 1};  // DIOPI's sign that the forward had a bias
  diopiSize_t* has_bias = output_mask[2] ? &bias_sizes : nullptr;
  diopi::Context ctx(d);
  ctx.fresh = {&grad_input, &grad_weight, &grad_bias};  // Note [Taken results] in dipu/csrc/allocator.cpp
  const diopiError_t status = transposed
                                  ? reinterpret_cast<transposed_convolution_backward_fn>(kern.scalar_function)(
                                        diopi::handle(ctx), c_out(grad_input), c_out(grad_weight), c_out(grad_bias),
                                        c_in(grad_output), c_in(input), c_in(weight), has_bias, c_sizes(stride),
                                        c_sizes(padding), c_sizes(dilation), c_sizes(output_padding), c_integer(groups))
                                  : reinterpret_cast<convolution_backward_fn>(kern.function)(
                                        diopi::handle(ctx), c_out(grad_input), c_out(grad_weight), c_out(grad_bias),
                                        c_in(grad_output), c_in(input), c_in(weight), has_bias, c_sizes(stride),
                                        c_sizes(padding), c_sizes(dilation), c_integer(groups));
  if (C10_UNLIKELY(status != diopiSuccess))
    return three(kern.python_tensors(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                                     groups, output_mask));
  kern.finished(d);
  return Three(grad_input, grad_weight, grad_bias);
}

// ---- batch norm (dipu/ops/memory_format.py) ----

// dipu/ops/shape_rules.py's _statistics_dtype: float32 where a parameter's dtype differs from the input's.
at::ScalarType statistics_dtype(const at::Tensor& input,
                                std::initializer_list<const std::optional<at::Tensor>*> params) {
  for (const auto* p : params)
    if (p->has_value() && (*p)->defined() && (*p)->scalar_type() != input.scalar_type()) return at::kFloat;
  return input.scalar_type();
}

using batch_norm_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiTensorHandle_t,
                                       diopiTensorHandle_t, diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                       diopiConstTensorHandle_t, diopiTensorHandle_t, diopiTensorHandle_t, bool, double,
                                       double);
Kernel k_batch_norm("native_batch_norm", "diopiBatchNorm");

Three dipu_batch_norm(Kernel& kern, const at::Tensor& input, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                      const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  const c10::DeviceIndex d = input.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(input, d) || !on(weight, d) || !on(bias, d) || !on(running_mean, d) ||
                   !on(running_var, d) || input.dim() < 2))
    return three(kern.python_tensors(input, weight, bias, running_mean, running_var, training, momentum, eps));
  DeviceScope scope(d);
  const at::ScalarType saved = statistics_dtype(input, {&weight, &bias, &running_mean, &running_var});
  const int64_t channels = training ? input.size(1) : 0;
  at::Tensor out = empty_in(input.sizes(), input.scalar_type(), layout_of(input));
  at::Tensor save_mean = empty({channels}, saved), save_invstd = empty({channels}, saved);
  diopi::Context ctx(d);
  ctx.fresh = {&out, &save_mean, &save_invstd};  // Note [Taken results] in dipu/csrc/allocator.cpp
  const diopiError_t status = reinterpret_cast<batch_norm_fn>(kern.function)(
      diopi::handle(ctx), c_out(out), c_out(save_mean), c_out(save_invstd), c_in(input), c_in(weight), c_in(bias),
      c_written(running_mean), c_written(running_var), training, momentum, eps);
  if (C10_UNLIKELY(status != diopiSuccess))
    return three(kern.python_tensors(input, weight, bias, running_mean, running_var, training, momentum, eps));
  kern.finished(d);
  return Three(out, save_mean, save_invstd);
}

using batch_norm_backward_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiTensorHandle_t,
                                                diopiTensorHandle_t, diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                                diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                                diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                                diopiConstTensorHandle_t, bool, double);
Kernel k_batch_norm_backward("native_batch_norm_backward", "diopiBatchNormBackward");

// The Python twin takes these outputs' shapes from the meta kernel: the input's for grad_input, the
// weight's for its gradients, each in its tensor's dtype (a half input under autocast has float weights).
// The fast path takes the case where those are plain: an affine weight of one element per channel, or no weight
// and no weight gradients asked for (instance norm without affine parameters).
Three dipu_batch_norm_backward(Kernel& kern, const at::Tensor& grad_out, const at::Tensor& input,
                               const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& running_mean,
                               const std::optional<at::Tensor>& running_var, const std::optional<at::Tensor>& save_mean,
                               const std::optional<at::Tensor>& save_invstd, bool train, double eps,
                               std::array<bool, 3> output_mask) {
  const c10::DeviceIndex d = grad_out.device().index();
  const bool affine = weight.has_value() && weight->defined();
  if (C10_UNLIKELY(
          !kern.fast_path() || !on(grad_out, d) || !on(input, d) || !on(weight, d) || !on(running_mean, d) ||
          !on(running_var, d) || !on(save_mean, d) || !on(save_invstd, d) || input.dim() < 2 ||
          !(affine ? weight->dim() == 1 && weight->size(0) == input.size(1) : !output_mask[1] && !output_mask[2]) ||
          !grad_out.sizes().equals(input.sizes()) || grad_out.scalar_type() != input.scalar_type()))
    return three(kern.python_tensors(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                                     eps, output_mask));
  DeviceScope scope(d);
  at::Tensor grad_input =
      output_mask[0] ? empty_in(input.sizes(), input.scalar_type(), layout_of(input)) : at::Tensor();
  at::Tensor grad_weight = output_mask[1] ? empty(weight->sizes(), weight->scalar_type()) : at::Tensor();
  at::Tensor grad_bias = output_mask[2] ? empty(weight->sizes(), weight->scalar_type()) : at::Tensor();
  diopi::Context ctx(d);
  ctx.fresh = {&grad_input, &grad_weight, &grad_bias};  // Note [Taken results] in dipu/csrc/allocator.cpp
  const diopiError_t status = reinterpret_cast<batch_norm_backward_fn>(kern.function)(
      diopi::handle(ctx), c_out(grad_input), c_out(grad_weight), c_out(grad_bias), c_in(grad_out), c_in(input),
      c_in(weight), c_in(running_mean), c_in(running_var), c_in(save_mean), c_in(save_invstd), train, eps);
  if (C10_UNLIKELY(status != diopiSuccess))
    return three(kern.python_tensors(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train,
                                     eps, output_mask));
  kern.finished(d);
  return Three(grad_input, grad_weight, grad_bias);
}

// ---- max pooling (dipu/ops/memory_format.py; shapes: Note [Pooling shapes without meta tensors]) ----

// dipu/ops/shape_rules.py's _pair: one value for both dims, or two; false otherwise.
bool pair(c10::IntArrayRef values, std::array<int64_t, 2>& result) {
  if (values.size() == 2)
    result = {values[0], values[1]};
  else if (values.size() == 1)
    result = {values[0], values[0]};
  else
    return false;
  return true;
}

// _pooled, for a numerator that is not negative (the caller checks; C++ division truncates).
int64_t pooled(int64_t size, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation, bool ceil_mode) {
  const int64_t span = size + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  if (span < 0) return 0;
  int64_t out = span / stride + 1;
  if (ceil_mode && (out - 1) * stride >= size + pad) --out;
  return out;
}

// max_pool2d_size: false where the Python rule answers None (the meta kernel decides there).
bool max_pool2d_size(c10::SmallVector<int64_t, 6>& shape, const at::Tensor& self, c10::IntArrayRef kernel_size,
                     c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  std::array<int64_t, 2> kernel, step, pad, dil{1, 1};
  if (!pair(kernel_size, kernel) || !pair(padding, pad) || (self.dim() != 3 && self.dim() != 4)) return false;
  if (!pair(dilation, dil)) dil = {1, 1};  // as the Python rule's default
  if (stride.empty())
    step = kernel;
  else if (!pair(stride, step))
    return false;
  if (std::min(kernel[0], kernel[1]) <= 0 || std::min(step[0], step[1]) <= 0 || std::min(dil[0], dil[1]) <= 0 ||
      std::min(pad[0], pad[1]) < 0 || pad[0] * 2 > kernel[0] || pad[1] * 2 > kernel[1])
    return false;
  const int64_t height = self.size(-2), width = self.size(-1);
  const int64_t out_h = pooled(height, kernel[0], step[0], pad[0], dil[0], ceil_mode);
  const int64_t out_w = pooled(width, kernel[1], step[1], pad[1], dil[1], ceil_mode);
  if (out_h <= 0 || out_w <= 0 || self.size(-3) == 0 || height == 0 || width == 0) return false;
  shape.assign(self.sizes().begin(), self.sizes().end() - 2);
  shape.push_back(out_h);
  shape.push_back(out_w);
  return true;
}

using max_pool2d_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiTensorHandle_t,
                                       diopiConstTensorHandle_t, diopiSize_t, diopiSize_t, diopiSize_t, diopiSize_t,
                                       bool);
Kernel k_max_pool2d("max_pool2d_with_indices", "diopiMaxPool2dWithIndices");

std::tuple<at::Tensor, at::Tensor> dipu_max_pool2d(Kernel& kern, const at::Tensor& self, c10::IntArrayRef kernel_size,
                                                   c10::IntArrayRef stride, c10::IntArrayRef padding,
                                                   c10::IntArrayRef dilation, bool ceil_mode) {
  const c10::DeviceIndex d = self.device().index();
  c10::SmallVector<int64_t, 6> shape;
  if (C10_UNLIKELY(!kern.fast_path() || !on(self, d) ||
                   !max_pool2d_size(shape, self, kernel_size, stride, padding, dilation, ceil_mode))) {
    const auto r = kern.python_tensors(self, kernel_size, stride, padding, dilation, ceil_mode);
    return {r.at(0), r.at(1)};
  }
  DeviceScope scope(d);
  const at::MemoryFormat layout = layout_of(self);
  at::Tensor out = empty_in(shape, self.scalar_type(), layout), indices = empty_in(shape, at::kLong, layout);
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<max_pool2d_fn>(kern.function)(
      diopi::handle(ctx), c_out(out), c_out(indices), c_in(self), c_sizes(kernel_size), c_sizes(stride),
      c_sizes(padding), c_sizes(dilation), ceil_mode);
  if (C10_UNLIKELY(status != diopiSuccess)) {
    const auto r = kern.python_tensors(self, kernel_size, stride, padding, dilation, ceil_mode);
    return {r.at(0), r.at(1)};
  }
  kern.finished(d);
  return {out, indices};
}

using max_pool2d_backward_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t,
                                                diopiConstTensorHandle_t, diopiSize_t, diopiSize_t, diopiSize_t,
                                                diopiSize_t, bool, diopiConstTensorHandle_t);
Kernel k_max_pool2d_backward("max_pool2d_with_indices_backward", "diopiMaxPool2dBackward");

at::Tensor dipu_max_pool2d_backward(Kernel& kern, const at::Tensor& grad_output, const at::Tensor& self,
                                    c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
                                    c10::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices) {
  const c10::DeviceIndex d = grad_output.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(grad_output, d) || !on(self, d) || !on(indices, d)))
    return kern.python_tensor(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices);
  DeviceScope scope(d);
  at::Tensor grad_input = empty_in(self.sizes(), self.scalar_type(), layout_of(self));
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<max_pool2d_backward_fn>(kern.function)(
      diopi::handle(ctx), c_out(grad_input), c_in(grad_output), c_in(self), c_sizes(kernel_size), c_sizes(stride),
      c_sizes(padding), c_sizes(dilation), ceil_mode, c_in(indices));
  if (C10_UNLIKELY(status != diopiSuccess))
    return kern.python_tensor(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices);
  kern.finished(d);
  return grad_input;
}

// ---- average pooling (dipu/ops/memory_format.py): max pooling's output size; a zero divisor is left to the
// Python path (the meta kernel's error) ----

using avg_pool2d_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t, diopiSize_t,
                                       diopiSize_t, diopiSize_t, bool, bool, const int64_t*);
Kernel k_avg_pool2d("avg_pool2d", "diopiAvgPool2d");

at::Tensor dipu_avg_pool2d(Kernel& kern, const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                           c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override) {
  const c10::DeviceIndex d = self.device().index();
  c10::SmallVector<int64_t, 6> shape;
  if (C10_UNLIKELY(!kern.fast_path() || !on(self, d) || divisor_override == 0 ||
                   !max_pool2d_size(shape, self, kernel_size, stride, padding, {}, ceil_mode)))
    return kern.python_tensor(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  DeviceScope scope(d);
  at::Tensor out = empty_in(shape, self.scalar_type(), layout_of(self));
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<avg_pool2d_fn>(kern.function)(
      diopi::handle(ctx), c_out(out), c_in(self), c_sizes(kernel_size), c_sizes(stride), c_sizes(padding), ceil_mode,
      count_include_pad, pointer_to(divisor_override));
  if (C10_UNLIKELY(status != diopiSuccess))
    return kern.python_tensor(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override);
  kern.finished(d);
  return out;
}

using avg_pool2d_backward_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t,
                                                diopiConstTensorHandle_t, diopiSize_t, diopiSize_t, diopiSize_t, bool,
                                                bool, const int64_t*);
Kernel k_avg_pool2d_backward("avg_pool2d_backward", "diopiAvgPool2dBackward");

at::Tensor dipu_avg_pool2d_backward(Kernel& kern, const at::Tensor& grad_output, const at::Tensor& self,
                                    c10::IntArrayRef kernel_size, c10::IntArrayRef stride, c10::IntArrayRef padding,
                                    bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  const c10::DeviceIndex d = grad_output.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(grad_output, d) || !on(self, d)))
    return kern.python_tensor(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                              divisor_override);
  DeviceScope scope(d);
  at::Tensor grad_input = empty_in(self.sizes(), self.scalar_type(), layout_of(self));
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<avg_pool2d_backward_fn>(kern.function)(
      diopi::handle(ctx), c_out(grad_input), c_in(grad_output), c_in(self), c_sizes(kernel_size), c_sizes(stride),
      c_sizes(padding), ceil_mode, count_include_pad, pointer_to(divisor_override));
  if (C10_UNLIKELY(status != diopiSuccess))
    return kern.python_tensor(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                              divisor_override);
  kern.finished(d);
  return grad_input;
}

// ---- adaptive average pooling (dipu/ops/memory_format.py) ----

using adaptive_avg_pool2d_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t,
                                                diopiSize_t);
Kernel k_adaptive_avg_pool2d("_adaptive_avg_pool2d", "diopiAdaptiveAvgPool2d");

// adaptive_pool2d_size: false where the Python rule answers None (the meta kernel decides there).
at::Tensor dipu_adaptive_avg_pool2d(Kernel& kern, const at::Tensor& self, c10::SymIntArrayRef output_size) {
  const c10::DeviceIndex d = self.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(self, d) || output_size.size() != 2 || !concrete(output_size) ||
                   (self.dim() != 3 && self.dim() != 4) || self.size(-1) == 0 || self.size(-2) == 0 ||
                   self.size(-3) == 0 || output_size[0].as_int_unchecked() < 0 ||
                   output_size[1].as_int_unchecked() < 0))
    return kern.python_tensor(self, output_size);
  c10::SmallVector<int64_t, 6> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.push_back(output_size[0].as_int_unchecked());
  shape.push_back(output_size[1].as_int_unchecked());
  DeviceScope scope(d);
  at::Tensor out = empty_in(shape, self.scalar_type(), layout_of(self));
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<adaptive_avg_pool2d_fn>(kern.function)(diopi::handle(ctx), c_out(out),
                                                                                      c_in(self), c_sizes(output_size));
  if (C10_UNLIKELY(status != diopiSuccess)) return kern.python_tensor(self, output_size);
  kern.finished(d);
  return out;
}

using adaptive_avg_pool2d_backward_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t,
                                                         diopiConstTensorHandle_t, diopiConstTensorHandle_t);
Kernel k_adaptive_avg_pool2d_backward("_adaptive_avg_pool2d_backward", "diopiAdaptiveAvgPool2dBackward");

at::Tensor dipu_adaptive_avg_pool2d_backward(Kernel& kern, const at::Tensor& grad_output, const at::Tensor& self) {
  const c10::DeviceIndex d = grad_output.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(grad_output, d) || !on(self, d)))
    return kern.python_tensor(grad_output, self);
  DeviceScope scope(d);
  at::Tensor grad_input = empty_in(self.sizes(), self.scalar_type(), layout_of(self));
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<adaptive_avg_pool2d_backward_fn>(kern.function)(
      diopi::handle(ctx), c_out(grad_input), c_in(grad_output), c_in(self));
  if (C10_UNLIKELY(status != diopiSuccess)) return kern.python_tensor(grad_output, self);
  kern.finished(d);
  return grad_input;
}

// ---- cat: its schema's Tensor[] is an ITensorListRef, which the generator does not write (Note [Tensor
// lists in C++]). Its Python wrapper takes the shapes from the meta kernel; the fast path takes what models
// concatenate: tensors of one dtype and rank, alike but along `dim`, each of which ATen would lay out contiguously
// (suggest_memory_format), so that the meta kernel makes the output contiguous too; a 1-d empty tensor among them is
// skipped, as ATen skips it (a key/value cache's empty start). ----

using cat_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t*, int64_t, int64_t);
Kernel k_cat("cat", "diopiCat");

bool skipped_in_cat(const at::Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

bool cat_size(c10::SmallVector<int64_t, 6>& shape, at::TensorList parts, int64_t& dim, c10::DeviceIndex d) {
  const auto first = std::find_if_not(parts.begin(), parts.end(), skipped_in_cat);
  if (first == parts.end()) return false;
  const int64_t rank = first->dim();
  if (rank == 0 || dim < -rank || dim >= rank) return false;
  if (dim < 0) dim += rank;
  shape.assign(first->sizes().begin(), first->sizes().end());
  shape[dim] = 0;
  for (const at::Tensor& t : parts) {
    if (!on(t, d) || t.scalar_type() != first->scalar_type()) return false;
    if (skipped_in_cat(t)) continue;
    if (t.dim() != rank || t.suggest_memory_format() != at::MemoryFormat::Contiguous) return false;
    for (int64_t i = 0; i < rank; ++i)
      if (i != dim && t.size(i) != shape[i]) return false;
    shape[dim] += t.size(dim);
  }
  return true;
}

at::Tensor dipu_cat(Kernel& kern, const at::ITensorListRef& tensors, int64_t dim) {
  // The list as the caller holds it: copying a tensor that Python also holds would take the GIL twice
  // (torch keeps the Python object alive while C++ shares the tensor), a fifth of a small cat.
  std::vector<at::Tensor> copied;
  at::TensorList parts;
  if (tensors.isUnboxed()) {
    parts = tensors.toUnboxed();
  } else {
    copied.assign(tensors.begin(), tensors.end());
    parts = copied;
  }
  const c10::DeviceIndex d = parts.empty() ? -1 : parts[0].device().index();
  c10::SmallVector<int64_t, 6> shape;
  int64_t axis = dim;
  if (C10_UNLIKELY(!kern.fast_path() || !cat_size(shape, parts, axis, d))) return kern.python_tensor(tensors, dim);
  DeviceScope scope(d);
  at::Tensor out = empty(shape, parts[0].scalar_type());
  HandleList handles{parts};
  diopi::Context ctx(d);
  const diopiError_t status =
      reinterpret_cast<cat_fn>(kern.function)(diopi::handle(ctx), c_out(out), handles.data(), handles.size(), axis);
  if (C10_UNLIKELY(status != diopiSuccess)) return kern.python_tensor(tensors, dim);
  kern.finished(d);
  return out;
}

// ---- native_dropout (dipu/ops/dropout.py): the output and the mask contiguous as the CPU's for a contiguous
// input (any other layout takes the Python path), drawn from the device's default dipu generator, as the
// Python wrapper passes it for the schema's missing generator. ----

using dropout_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiTensorHandle_t,
                                    diopiConstTensorHandle_t, double, bool, diopiGeneratorHandle_t);
Kernel k_native_dropout("native_dropout", "diopiDropout");

std::tuple<at::Tensor, at::Tensor> dipu_native_dropout(Kernel& kern, const at::Tensor& input, double p,
                                                       std::optional<bool> train) {
  const c10::DeviceIndex d = input.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(input, d) || !input.is_contiguous())) {
    const auto r = kern.python_tensors(input, p, train);
    return {r.at(0), r.at(1)};
  }
  DeviceScope scope(d);
  at::Tensor out = empty(input.sizes(), input.scalar_type());
  at::Tensor mask = empty(input.sizes(), at::kBool);
  GeneratorArg generator(std::nullopt, d);  // the device's default, as for every random kernel
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<dropout_fn>(kern.function)(
      diopi::handle(ctx), c_out(out), c_out(mask), c_in(input), p, train.value_or(true), generator.get());
  if (C10_UNLIKELY(status != diopiSuccess)) {
    const auto r = kern.python_tensors(input, p, train);
    return {r.at(0), r.at(1)};
  }
  kern.finished(d);
  return {out, mask};
}

// ---- fused attention (dipu/ops/attention.py): the outputs allocated, the scale resolved and the dropout
// generator's state kept for backward as the Python kernels do, for every case they take (the DIOPI function decides
// how to compute it). ----

using attention_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiTensorHandle_t,
                                      diopiConstTensorHandle_t, diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                      diopiConstTensorHandle_t, double, bool, double, diopiGeneratorHandle_t);
Kernel k_fused_attention("_scaled_dot_product_fused_attention_overrideable", "diopiScaledDotProductAttention");

using Attention = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                             at::Tensor, at::Tensor>;

Attention attention_of(const torch::jit::Stack& r) {
  return Attention(r.at(0).toTensor(), r.at(1).toTensor(), r.at(2).toTensor(), r.at(3).toTensor(), r.at(4).toSymInt(),
                   r.at(5).toSymInt(), r.at(6).toTensor(), r.at(7).toTensor(), r.at(8).toTensor());
}

// resolve_scale
double attention_scale(const at::Tensor& query, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(query.size(-1)));
}

at::Tensor empty_cpu(int64_t size, at::ScalarType dtype) { return at::detail::empty_cpu({size}, dtype); }

Attention dipu_fused_attention(Kernel& kern, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                               const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                               bool return_debug_mask, std::optional<double> scale) {
  const c10::DeviceIndex d = query.device().index();
  if (C10_UNLIKELY(!kern.fast_path() || !on(query, d) || !on(key, d) || !on(value, d) || !on(attn_bias, d) ||
                   query.dim() != 4 || key.dim() != 4 || value.dim() != 4))
    return attention_of(
        kern.python_values(query, key, value, attn_bias, dropout_p, is_causal, return_debug_mask, scale));
  DeviceScope scope(d);
  const int64_t length = query.size(2);
  at::Tensor out = empty({query.size(0), query.size(1), length, value.size(-1)}, query.scalar_type());
  at::Tensor logsumexp =
      empty({query.size(0), query.size(1), length}, query.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
  at::Tensor rng_state = empty_cpu(0, at::kByte);  // the default generator's state before the mask is drawn
  at::Generator generator;
  if (dropout_p > 0) {
    generator = at::globalContext().defaultGenerator(c10::Device(kDipu, d));
    std::lock_guard<std::mutex> lock(generator.mutex());
    rng_state = generator.get_state();
  }
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<attention_fn>(kern.function)(
      diopi::handle(ctx), c_out(out), c_out(logsumexp), c_in(query), c_in(key), c_in(value), c_in(attn_bias), dropout_p,
      is_causal, attention_scale(query, scale), diopi::handle(generator));
  if (C10_UNLIKELY(status != diopiSuccess))
    return attention_of(
        kern.python_values(query, key, value, attn_bias, dropout_p, is_causal, return_debug_mask, scale));
  kern.finished(d);
  // dense attention: no cumulative sequence lengths, no debug mask
  return Attention(out, logsumexp, empty({0}, at::kLong), empty({0}, at::kLong), length, key.size(-2), rng_state,
                   empty_cpu(0, at::kLong), empty({0}, query.scalar_type()));
}

using attention_backward_fn = diopiError_t (*)(diopiContextHandle_t, diopiTensorHandle_t, diopiTensorHandle_t,
                                               diopiTensorHandle_t, diopiTensorHandle_t, diopiConstTensorHandle_t,
                                               diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                               diopiConstTensorHandle_t, diopiConstTensorHandle_t,
                                               diopiConstTensorHandle_t, diopiConstTensorHandle_t, double, bool, double,
                                               diopiGeneratorHandle_t);
Kernel k_fused_attention_backward("_scaled_dot_product_fused_attention_overrideable_backward",
                                  "diopiScaledDotProductAttentionBackward");

using Four = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

Four dipu_fused_attention_backward(Kernel& kern, const at::Tensor& grad_out, const at::Tensor& query,
                                   const at::Tensor& key, const at::Tensor& value, const at::Tensor& attn_bias,
                                   std::array<bool, 4> grad_input_mask, const at::Tensor& out,
                                   const at::Tensor& logsumexp, const at::Tensor& cum_seq_q,
                                   const at::Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
                                   bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
                                   std::optional<double> scale) {
  const c10::DeviceIndex d = query.device().index();
  const auto python = [&] {
    const auto r =
        kern.python_tensors(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
                            cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset, scale);
    return Four(r.at(0), r.at(1), r.at(2), r.at(3));
  };
  if (C10_UNLIKELY(!kern.fast_path() || !on(grad_out, d) || !on(query, d) || !on(key, d) || !on(value, d) ||
                   (attn_bias.defined() && !on(attn_bias, d)) || !on(out, d) || !on(logsumexp, d)))
    return python();
  DeviceScope scope(d);
  std::array<at::Tensor, 4> grads;
  const at::Tensor* inputs[3] = {&query, &key, &value};
  for (size_t i = 0; i < 3; ++i)
    if (grad_input_mask[i]) grads[i] = empty(inputs[i]->sizes(), inputs[i]->scalar_type());
  if (grad_input_mask[3] && attn_bias.defined() && attn_bias.is_floating_point())
    grads[3] = empty(attn_bias.sizes(), attn_bias.scalar_type());
  at::Generator generator;  // restored_generator: a new one in the state the forward's had before it drew
  if (dropout_p > 0 && philox_seed.defined() && philox_seed.numel() > 0) {
    at::Generator original = at::globalContext().defaultGenerator(c10::Device(kDipu, d));
    {
      std::lock_guard<std::mutex> lock(original.mutex());
      generator = original.clone();
    }
    generator.set_state(philox_seed.cpu());
  }
  diopi::Context ctx(d);
  const diopiError_t status = reinterpret_cast<attention_backward_fn>(kern.function)(
      diopi::handle(ctx), c_out(grads[0]), c_out(grads[1]), c_out(grads[2]), c_out(grads[3]), c_in(grad_out),
      c_in(query), c_in(key), c_in(value), c_in(attn_bias), c_in(out), c_in(logsumexp), dropout_p, is_causal,
      attention_scale(query, scale), diopi::handle(generator));
  if (C10_UNLIKELY(status != diopiSuccess)) return python();
  kern.finished(d);
  return Four(grads[0], grads[1], grads[2], grads[3]);
}

const Entry kImplEntries[] = {
    entry("convolution_overrideable", k_convolution, &dipu_convolution),
    entry("convolution_backward_overrideable", k_convolution_backward, &dipu_convolution_backward),
    entry("native_batch_norm", k_batch_norm, &dipu_batch_norm),
    entry("native_batch_norm_backward", k_batch_norm_backward, &dipu_batch_norm_backward),
    entry("max_pool2d_with_indices", k_max_pool2d, &dipu_max_pool2d),
    entry("max_pool2d_with_indices_backward", k_max_pool2d_backward, &dipu_max_pool2d_backward),
    entry("avg_pool2d", k_avg_pool2d, &dipu_avg_pool2d),
    entry("avg_pool2d_backward", k_avg_pool2d_backward, &dipu_avg_pool2d_backward),
    entry("_adaptive_avg_pool2d", k_adaptive_avg_pool2d, &dipu_adaptive_avg_pool2d),
    entry("_adaptive_avg_pool2d_backward", k_adaptive_avg_pool2d_backward, &dipu_adaptive_avg_pool2d_backward),
    entry("cat", k_cat, &dipu_cat),
    entry("native_dropout", k_native_dropout, &dipu_native_dropout),
    entry("_scaled_dot_product_fused_attention_overrideable", k_fused_attention, &dipu_fused_attention),
    entry("_scaled_dot_product_fused_attention_overrideable_backward", k_fused_attention_backward,
          &dipu_fused_attention_backward),
};
const Table kImplTable(kImplEntries, std::size(kImplEntries));

}  // namespace

}  // namespace dipu::cwrap
