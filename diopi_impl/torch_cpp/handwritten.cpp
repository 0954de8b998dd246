// The functions of the torch op library in C++ that the generator cannot make: the Python library writes
// them by hand (diopi_impl/torch), each around an ATen op whose arguments DIOPI spells otherwise (an
// output dtype taken from the output, a keepdim read off the shapes, outputs written from a functional
// result). These are the hot path of the example models' training steps; each follows its Python twin line
// by line, and the conformance suite runs both (tests/test_conformance.py -k torch_cpp-).
#include <diopi/functions.h>

#include "support.h"

#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/mean_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/sum_ops.h>

namespace tc = dipu::torch_cpp;

namespace {

// diopi_impl/torch/reductions.py's _keepdim: the output keeps the reduced dims when it has the input's rank.
bool keepdim(const at::Tensor& out, const at::Tensor& input) {
  return out.dim() == input.dim() && input.dim() > 0;
}

// DIOPI's optional dim list (diopi_impl/torch/reductions.py's _dims): absent or empty reduces every dim.
at::OptionalIntArrayRef dims(diopiSize_t dim) {
  return dim.len > 0 ? at::OptionalIntArrayRef(tc::sizes(dim)) : std::nullopt;
}

// diopi_impl/torch/_aten.py's write_results: each wanted output takes its result, resized where the shapes
// differ.
void write_result(diopiTensorHandle_t output, const at::Tensor& result) {
  if (output == nullptr) return;
  at::Tensor& target = *reinterpret_cast<at::Tensor*>(output);
  if (target.sizes() != result.sizes()) target.resize_(result.sizes());
  tc::alias_of(target).copy_(result);
}

}  // namespace

#define DIPU_EXPORT __attribute__((visibility("default")))

extern "C" {

DIPU_EXPORT diopiError_t diopiSoftmax(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                      int64_t dim) {
  return tc::guarded([&] {
    at::Tensor o = tc::alias_of(out);
    at::_ops::_softmax_out::call(tc::alias_of(input), dim, false, o);
  });
}

DIPU_EXPORT diopiError_t diopiSoftmaxBackward(diopiContextHandle_t, diopiTensorHandle_t grad_input,
                                              diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t output,
                                              int64_t dim) {
  return tc::guarded([&] {
    at::Tensor gi = tc::alias_of(grad_input);
    at::_ops::_softmax_backward_data_out::call(tc::alias_of(grad_output), tc::alias_of(output), dim,
                                               gi.scalar_type(), gi);
  });
}

DIPU_EXPORT diopiError_t diopiLogSoftmax(diopiContextHandle_t, diopiTensorHandle_t out,
                                         diopiConstTensorHandle_t input, int64_t dim) {
  return tc::guarded([&] {
    at::Tensor o = tc::alias_of(out);
    at::_ops::_log_softmax_out::call(tc::alias_of(input), dim, false, o);
  });
}

DIPU_EXPORT diopiError_t diopiLogSoftmaxBackward(diopiContextHandle_t, diopiTensorHandle_t grad_input,
                                                 diopiConstTensorHandle_t grad_output,
                                                 diopiConstTensorHandle_t output, int64_t dim) {
  return tc::guarded([&] {
    at::Tensor gi = tc::alias_of(grad_input);
    at::_ops::_log_softmax_backward_data_out::call(tc::alias_of(grad_output), tc::alias_of(output), dim,
                                                   gi.scalar_type(), gi);
  });
}

DIPU_EXPORT diopiError_t diopiSum(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                  diopiSize_t dim) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), o = tc::alias_of(out);
    at::_ops::sum_IntList_out::call(x, dims(dim), keepdim(o, x), o.scalar_type(), o);
  });
}

DIPU_EXPORT diopiError_t diopiMean(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                   diopiSize_t dim) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), o = tc::alias_of(out);
    at::_ops::mean_out::call(x, dims(dim), keepdim(o, x), o.scalar_type(), o);
  });
}

DIPU_EXPORT diopiError_t diopiLayerNorm(diopiContextHandle_t, diopiTensorHandle_t out, diopiTensorHandle_t save_mean,
                                        diopiTensorHandle_t save_invstd, diopiConstTensorHandle_t input,
                                        diopiConstTensorHandle_t weight, diopiConstTensorHandle_t bias,
                                        diopiSize_t normalized_shape, double eps) {
  return tc::guarded([&] {
    const auto results = at::_ops::native_layer_norm::call(tc::alias_of(input), tc::sym_sizes(normalized_shape),
                                                           tc::optional_alias(weight), tc::optional_alias(bias), eps);
    write_result(out, std::get<0>(results));
    write_result(save_mean, std::get<1>(results));
    write_result(save_invstd, std::get<2>(results));
  });
}

DIPU_EXPORT diopiError_t diopiLayerNormBackward(diopiContextHandle_t, diopiTensorHandle_t grad_input,
                                                diopiTensorHandle_t grad_weight, diopiTensorHandle_t grad_bias,
                                                diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                                diopiConstTensorHandle_t weight, diopiConstTensorHandle_t bias,
                                                diopiConstTensorHandle_t mean, diopiConstTensorHandle_t rstd,
                                                diopiSize_t normalized_shape) {
  return tc::guarded([&] {
    const std::array<bool, 3> mask{grad_input != nullptr, grad_weight != nullptr, grad_bias != nullptr};
    const auto results = at::_ops::native_layer_norm_backward::call(
        tc::alias_of(grad_output), tc::alias_of(input), tc::sym_sizes(normalized_shape), tc::alias_of(mean),
        tc::alias_of(rstd), tc::optional_alias(weight), tc::optional_alias(bias), mask);
    write_result(grad_input, std::get<0>(results));
    write_result(grad_weight, std::get<1>(results));
    write_result(grad_bias, std::get<2>(results));
  });
}

}  // extern "C"
