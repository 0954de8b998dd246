// The functions of the torch op library in C++ that the generator cannot make: the Python library writes
// them by hand (diopi_impl/torch), each around an ATen op whose arguments DIOPI spells otherwise (an
// output dtype taken from the output, a keepdim read off the shapes, outputs written from a functional
// result). These are the hot path of the example models' training steps (softmax, reductions, layer norm,
// convolution, batch norm, embedding, nll_loss, cat, dropout, the fused optimizer steps); each follows its
// Python twin line by line, and the conformance suite runs both (tests/test_conformance.py -k torch_cpp-).
#include <diopi/functions.h>

#include "cpu_kernels.h"
#include "support.h"

#include <ATen/ops/_adaptive_avg_pool2d_ops.h>
#include <ATen/ops/_embedding_bag_backward_ops.h>
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/_embedding_bag_per_sample_weights_backward_ops.h>
#include <ATen/ops/_fused_adagrad_ops.h>
#include <ATen/ops/_fused_adam_ops.h>
#include <ATen/ops/_fused_adamw_ops.h>
#include <ATen/ops/_fused_sgd_ops.h>
#include <ATen/ops/_weight_norm_interface_backward_ops.h>
#include <ATen/ops/_weight_norm_interface_ops.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/adaptive_avg_pool2d_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/addmv_ops.h>
#include <ATen/ops/all_ops.h>
#include <ATen/ops/aminmax_ops.h>
#include <ATen/ops/any_ops.h>
#include <ATen/ops/bernoulli_ops.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/constant_pad_nd_ops.h>
#include <ATen/ops/convolution_backward_ops.h>
#include <ATen/ops/convolution_ops.h>
#include <ATen/ops/cudnn_batch_norm_ops.h>
#include <ATen/ops/cudnn_convolution_ops.h>
#include <ATen/ops/elu_backward_ops.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/embedding_dense_backward_ops.h>
#include <ATen/ops/fill_ops.h>
#include <ATen/ops/index_fill_ops.h>
#include <ATen/ops/index_ops.h>
#include <ATen/ops/index_put_ops.h>
#include <ATen/ops/index_select_ops.h>
#include <ATen/ops/linalg_vector_norm_ops.h>
#include <ATen/ops/logsumexp_ops.h>
#include <ATen/ops/masked_scatter_ops.h>
#include <ATen/ops/mul_ops.h>
#include <ATen/ops/native_batch_norm_backward_ops.h>
#include <ATen/ops/native_batch_norm_ops.h>
#include <ATen/ops/native_group_norm_backward_ops.h>
#include <ATen/ops/native_group_norm_ops.h>
#include <ATen/ops/native_layer_norm_backward_ops.h>
#include <ATen/ops/native_layer_norm_ops.h>
#include <ATen/ops/nll_loss2d_backward_ops.h>
#include <ATen/ops/nll_loss2d_forward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/prod_ops.h>
#include <ATen/ops/random_ops.h>
#include <ATen/ops/reflection_pad1d_backward_ops.h>
#include <ATen/ops/reflection_pad1d_ops.h>
#include <ATen/ops/reflection_pad2d_backward_ops.h>
#include <ATen/ops/reflection_pad2d_ops.h>
#include <ATen/ops/reflection_pad3d_backward_ops.h>
#include <ATen/ops/reflection_pad3d_ops.h>
#include <ATen/ops/replication_pad1d_backward_ops.h>
#include <ATen/ops/replication_pad1d_ops.h>
#include <ATen/ops/replication_pad2d_backward_ops.h>
#include <ATen/ops/replication_pad2d_ops.h>
#include <ATen/ops/replication_pad3d_backward_ops.h>
#include <ATen/ops/replication_pad3d_ops.h>
#include <ATen/ops/rsub_ops.h>
#include <ATen/ops/scatter_add_ops.h>
#include <ATen/ops/scatter_ops.h>
#include <ATen/ops/sort_ops.h>
#include <ATen/ops/sum_ops.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/native/ConvUtils.h>
#include <ATen/native/layer_norm.h>

#include <climits>
#include <string_view>

namespace tc = dipu::torch_cpp;

namespace {

// DIOPI's optional dim list (diopi_impl/torch/reductions.py's _dims): absent or empty reduces every dim.
at::OptionalIntArrayRef dims(diopiSize_t dim) {
  return dim.len > 0 ? at::OptionalIntArrayRef(tc::sizes(dim)) : std::nullopt;
}

// reductions.py's diopiAny and diopiAll: without a dim (`Everything`'s overload) over every element, with one
// (`OverDim`'s) keeping it as the output's rank says.
template <class Everything, class OverDim>
diopiError_t any_or_all(diopiTensorHandle_t out, diopiConstTensorHandle_t input, const int64_t* dim) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), o = tc::alias_of(out);
    if (dim == nullptr)
      Everything::call(x, o);
    else
      OverDim::call(x, *dim, tc::kept_dims(o, x), o);
  });
}

// diopi_impl/torch/_aten.py's write_results: each wanted output takes its result, resized where the shapes
// differ; an output the caller allocated for the call takes the result's memory where it can (tc::took).
void write_result(diopiContextHandle_t ctx, diopiTensorHandle_t output, const at::Tensor& result) {
  if (output == nullptr || tc::took(ctx, output, result)) return;
  at::Tensor& target = *reinterpret_cast<at::Tensor*>(output);
  if (target.sizes() != result.sizes()) target.resize_(result.sizes());
  tc::copy_into(tc::alias_of(target), result);
}

// The output mask of a backward: which outputs the caller wants (a null handle: not wanted).
std::array<bool, 3> wanted(diopiTensorHandle_t a, diopiTensorHandle_t b, diopiTensorHandle_t c) {
  return {a != nullptr, b != nullptr, c != nullptr};
}

template <class Results>
void write_results(diopiContextHandle_t ctx, diopiTensorHandle_t a, diopiTensorHandle_t b, diopiTensorHandle_t c,
                   const Results& results) {
  write_result(ctx, a, std::get<0>(results));
  write_result(ctx, b, std::get<1>(results));
  write_result(ctx, c, std::get<2>(results));
}

// diopi_impl/torch/convolution.py's _bias_sizes: ATen needs the bias's shape exactly when it computes its
// gradient; DIOPI's caller may leave it out.
at::OptionalSymIntArrayRef bias_sizes(const diopiSize_t* given, diopiTensorHandle_t grad_bias,
                                      std::array<c10::SymInt, 1>& channels) {
  if (grad_bias == nullptr) return std::nullopt;
  if (given != nullptr) return tc::sym_sizes(*given);
  return c10::SymIntArrayRef(channels);
}

// Both contiguous, or both channels_last (3d) contiguous.
bool same_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  for (const auto layout :
       {at::MemoryFormat::Contiguous, at::MemoryFormat::ChannelsLast, at::MemoryFormat::ChannelsLast3d}) {
    if ((layout == at::MemoryFormat::ChannelsLast && a.dim() != 4) ||
        (layout == at::MemoryFormat::ChannelsLast3d && a.dim() != 5))
      continue;
    if (a.is_contiguous(layout) && b.is_contiguous(layout)) return true;
  }
  return false;
}

std::vector<c10::SymInt> zeros(int64_t n) { return std::vector<c10::SymInt>(std::max<int64_t>(n, 0), 0); }

// Note [cuDNN into the output on CUDA]
// On CUDA, ATen runs a convolution, and a batch norm in evaluation, through cuDNN's functional ops, which
// allocate their result. dipu's wrapper has allocated the output already, so a functional result costs a
// copy (one more kernel and its launch, about 13 us of host time a call), and ATen's native_batch_norm_out
// runs three kernels in evaluation where cuDNN runs one. cuDNN's out= kernels (cudnn_convolution.out,
// cudnn_batch_norm.out) write dipu's output directly. They serve exactly where native CUDA would run cuDNN
// (ATen's select_conv_backend; for batch norm the conditions of ATen's _batch_norm_impl_index) and where the
// output is laid out as cuDNN writes it; every other case, and every device but CUDA, takes the general path.

// A convolution into `out` through cudnn_convolution.out; false (nothing written) where ATen would not run
// cuDNN for these arguments or out is not laid out as cuDNN's result.
bool cudnn_convolution_into(at::Tensor& out, const at::Tensor& x, const at::Tensor& w,
                            const std::optional<at::Tensor>& bias, diopiSize_t stride, diopiSize_t padding,
                            diopiSize_t dilation, int64_t groups) {
  if (!x.is_cuda() || x.dim() < 4 || out.numel() == 0 || out.scalar_type() != x.scalar_type()) return false;
  if (bias.has_value() && bias->scalar_type() != x.scalar_type()) return false;  // ATen's error, on the general path
  const auto backend =
      at::native::select_conv_backend(x, w, bias, tc::sym_sizes(stride), tc::sym_sizes(padding),
                                      tc::sym_sizes(dilation), false, zeros(x.dim() - 2), groups, std::nullopt);
  if (backend != at::native::ConvBackend::Cudnn) return false;
  const at::MemoryFormat layout = at::native::_determine_backend_memory_format(x, w, backend);
  if (!out.is_contiguous(layout)) return false;
  at::Context& ctx = at::globalContext();
  at::_ops::cudnn_convolution_out::call(x.contiguous(layout), w, tc::sym_sizes(padding), tc::sym_sizes(stride),
                                        tc::sym_sizes(dilation), groups, ctx.benchmarkCuDNN(),
                                        ctx.deterministicCuDNN() || ctx.deterministicAlgorithms(),
                                        ctx.allowTF32CuDNN(at::Float32Op::CONV), out);
  if (bias.has_value()) {
    std::vector<int64_t> shape(x.dim(), 1);
    shape[1] = -1;
    out.add_(bias->reshape(shape));
  }
  return true;
}

// A batch norm in evaluation into `out` through cudnn_batch_norm.out; false (nothing written) where native
// CUDA would not run cuDNN, or cuDNN's kernel would not take the tensors as they are (it writes the output with
// the input's strides and reads contiguous parameters).
bool cudnn_batch_norm_eval_into(at::Tensor& out, at::Tensor& save_mean, at::Tensor& save_invstd, const at::Tensor& x,
                                const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                const std::optional<at::Tensor>& running_mean,
                                const std::optional<at::Tensor>& running_var, double eps) {
  if (!x.is_cuda() || !weight.has_value() || !bias.has_value() || !running_mean.has_value() ||
      !running_var.has_value() || !save_mean.defined() || !save_invstd.defined())
    return false;
  const at::ScalarType type = x.scalar_type(), params = weight->scalar_type();
  if (type == at::kBFloat16 || params == at::kBFloat16 || (type == at::kHalf && params != at::kFloat) ||
      (type != at::kHalf && params != type))
    return false;
  for (const auto* p : {&*weight, &*bias, &*running_mean, &*running_var})
    if (p->scalar_type() != params || !p->is_contiguous() || p->numel() != x.size(1)) return false;
  if (x.dim() < 3 || x.dim() > 5 || x.size(0) > 65535 || x.numel() >= INT_MAX ||
      !x.is_contiguous(x.suggest_memory_format()) || out.sizes() != x.sizes() || out.strides() != x.strides() ||
      out.scalar_type() != type)
    return false;
  const at::CUDAHooksInterface& cuda = at::detail::getCUDAHooks();
  if (!cuda.compiledWithCuDNN() || !at::globalContext().userEnabledCuDNN() || cuda.versionCuDNN() < 5110L ||
      eps < cuda.batchnormMinEpsilonCuDNN())
    return false;
  at::Tensor reserve = save_mean;  // in evaluation cuDNN replaces it with an empty tensor of its own
  at::_ops::cudnn_batch_norm_out::call(x, *weight, bias, running_mean, running_var, false, 0.0, eps, out, save_mean,
                                       save_invstd, reserve);
  return true;
}

// ---- diopi_impl/torch/optim.py's fused steps: the proto orders eps before weight_decay, ATen after; the lists,
// the step counts and a tensor lr pass as the Python library's alias_tensors lets them (a CPU tensor as it is) ----

double learning_rate(double lr) { return lr; }
at::Tensor learning_rate(diopiConstTensorHandle_t lr) { return tc::alias_or_cpu(lr); }
std::optional<at::Tensor> optional_alias_or_cpu(diopiConstTensorHandle_t h) {
  return h == nullptr ? std::nullopt : std::optional<at::Tensor>(tc::alias_or_cpu(h));
}

template <class Op, class Steps, class Lr>
diopiError_t fused_adagrad(diopiTensorHandle_t* params, diopiTensorHandle_t* grads, diopiTensorHandle_t* state_sums,
                           Steps* state_steps, int64_t n, Lr lr, double lr_decay, double weight_decay, double eps,
                           bool maximize, diopiConstTensorHandle_t grad_scale, diopiConstTensorHandle_t found_inf) {
  return tc::guarded([&] {
    Op::call(tc::aliases_of(params, n), tc::aliases_of(grads, n), tc::aliases_of(state_sums, n),
             tc::aliases_of(state_steps, n), learning_rate(lr), lr_decay, weight_decay, eps, maximize,
             optional_alias_or_cpu(grad_scale), optional_alias_or_cpu(found_inf));
  });
}

template <class Op, class Lr>
diopiError_t fused_adam(diopiTensorHandle_t* params, diopiTensorHandle_t* grads, diopiTensorHandle_t* exp_avgs,
                        diopiTensorHandle_t* exp_avg_sqs, diopiTensorHandle_t* max_exp_avg_sqs,
                        diopiConstTensorHandle_t* state_steps, int64_t n, Lr lr, double beta1, double beta2, double eps,
                        double weight_decay, bool amsgrad, bool maximize, diopiConstTensorHandle_t grad_scale,
                        diopiConstTensorHandle_t found_inf) {
  return tc::guarded([&] {
    Op::call(tc::aliases_of(params, n), tc::aliases_of(grads, n), tc::aliases_of(exp_avgs, n),
             tc::aliases_of(exp_avg_sqs, n), tc::aliases_of(max_exp_avg_sqs, n), tc::aliases_of(state_steps, n),
             learning_rate(lr), beta1, beta2, weight_decay, eps, amsgrad, maximize, optional_alias_or_cpu(grad_scale),
             optional_alias_or_cpu(found_inf));
  });
}

template <class Op, class Lr>
diopiError_t fused_sgd(diopiTensorHandle_t* params, diopiTensorHandle_t* grads,
                       diopiTensorHandle_t* momentum_buffer_list, int64_t n, double weight_decay, double momentum,
                       Lr lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                       diopiConstTensorHandle_t grad_scale, diopiConstTensorHandle_t found_inf) {
  return tc::guarded([&] {
    Op::call(tc::aliases_of(params, n), tc::aliases_of(grads, n), tc::aliases_of(momentum_buffer_list, n), weight_decay,
             momentum, learning_rate(lr), dampening, nesterov, maximize, is_first_step,
             optional_alias_or_cpu(grad_scale), optional_alias_or_cpu(found_inf));
  });
}

}  // namespace

namespace {

// indexing.py's _start: `out`'s alias, holding `input`'s values (out= forms of in-place ATen functions).
at::Tensor started(diopiTensorHandle_t out, diopiConstTensorHandle_t input) {
  at::Tensor o = tc::alias_of(out);
  if (out != input) tc::copy_into(o, tc::alias_of(input));
  return o;
}

// normalization.py's _group_norm_sizes: N, C and the product of the remaining dims.
std::array<c10::SymInt, 3> group_norm_sizes(const at::Tensor& x) {
  int64_t hxw = 1;
  for (int64_t d = 2; d < x.dim(); ++d) hxw *= x.size(d);
  return {x.size(0), x.size(1), hxw};
}

// The out= overload of ATen's pad of this mode over `rank` dims, as resampling.py's _PADS and _PAD_BACKWARDS
// pick it; false where there is none.
template <class Reflect1, class Reflect2, class Reflect3, class Replicate1, class Replicate2, class Replicate3,
          class... Args>
bool pad_by_mode(std::string_view mode, int64_t rank, Args&&... args) {
  if (mode == "reflect" && rank == 1) return Reflect1::call(args...), true;
  if (mode == "reflect" && rank == 2) return Reflect2::call(args...), true;
  if (mode == "reflect" && rank == 3) return Reflect3::call(args...), true;
  if (mode == "replicate" && rank == 1) return Replicate1::call(args...), true;
  if (mode == "replicate" && rank == 2) return Replicate2::call(args...), true;
  if (mode == "replicate" && rank == 3) return Replicate3::call(args...), true;
  return false;
}

}  // namespace

#define DIPU_EXPORT __attribute__((visibility("default")))

extern "C" {

DIPU_EXPORT diopiError_t diopiAny(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                  const int64_t* dim) {
  return any_or_all<at::_ops::any_all_out, at::_ops::any_out>(out, input, dim);
}

DIPU_EXPORT diopiError_t diopiAll(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                  const int64_t* dim) {
  return any_or_all<at::_ops::all_all_out, at::_ops::all_out>(out, input, dim);
}

DIPU_EXPORT diopiError_t diopiProd(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                   const int64_t* dim) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), o = tc::alias_of(out);
    if (dim == nullptr)
      tc::copy_into(o, at::_ops::prod::call(x, o.scalar_type()));
    else
      at::_ops::prod_int_out::call(x, *dim, tc::kept_dims(o, x), o.scalar_type(), o);
  });
}

DIPU_EXPORT diopiError_t diopiAminmax(diopiContextHandle_t, diopiTensorHandle_t min, diopiTensorHandle_t max,
                                      diopiConstTensorHandle_t input, const int64_t* dim) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), low = tc::alias_of(min), high = tc::alias_of(max);
    at::_ops::aminmax_out::call(x, tc::optional_value(dim), tc::kept_dims(low, x), low, high);
  });
}

DIPU_EXPORT diopiError_t diopiLogSumExp(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                        diopiSize_t dim) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), o = tc::alias_of(out);
    tc::copy_into(o, at::_ops::logsumexp::call(x, tc::sizes(dim), tc::kept_dims(o, x)));
  });
}

DIPU_EXPORT diopiError_t diopiSort(diopiContextHandle_t, diopiTensorHandle_t values, diopiTensorHandle_t indices,
                                   diopiConstTensorHandle_t input, int64_t dim, bool descending, const bool* stable) {
  return tc::guarded([&] {
    at::Tensor v = tc::alias_of(values), i = tc::alias_of(indices);
    at::_ops::sort_values_stable::call(tc::alias_of(input), tc::optional_value(stable), dim, descending, v, i);
  });
}

DIPU_EXPORT diopiError_t diopiNorm(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                   const diopiScalar_t* p, diopiSize_t dim) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), o = tc::alias_of(out);
    std::optional<at::ScalarType> dtype;  // reductions.py's diopiNorm: a floating input is cast to a wider output
    if (at::isFloatingType(x.scalar_type()) && o.scalar_type() != x.scalar_type()) dtype = o.scalar_type();
    at::_ops::linalg_vector_norm_out::call(x, p == nullptr ? at::Scalar(int64_t{2}) : tc::scalar(p), dims(dim),
                                           tc::kept_dims(o, x), dtype, o);
  });
}

namespace {

// Note [ATen's CPU kernels, called directly] in cpu_kernels.h: layer norm's kernels write into the outputs
// where the arguments are what layer_norm_cpu hands its kernel (N > 0 elements normalized over the trailing
// normalized_shape of a non-empty input, weight and bias of that shape, statistics of the input's dtype shaped
// as ATen shapes them); nullopt or false leaves the call to at::_ops.
struct LayerNormArgs {
  int64_t M = 0, N = 0;
  std::vector<int64_t> stats;  // the mean's and rstd's shape: the input's leading dims, then ones
  c10::DeviceIndex device = 0;
  at::ScalarType type = at::kFloat;
  const at::Tensor* x = nullptr;
  const at::Tensor* gamma = nullptr;  // null when absent (the kernel then reads an undefined tensor)
  const at::Tensor* beta = nullptr;
};
// What forward and backward share: the input, weight and bias checked, and the sizes derived from them.
std::optional<LayerNormArgs> layer_norm_args(diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                             diopiConstTensorHandle_t bias, diopiSize_t normalized_shape) {
  if (input == nullptr) return std::nullopt;
  const at::Tensor& t = tc::tensor(input);
  const at::IntArrayRef shape = tc::sizes(normalized_shape);
  const int64_t axis = t.dim() - static_cast<int64_t>(shape.size());
  if (shape.empty() || axis < 0 || t.numel() == 0 || t.sizes().slice(axis) != shape) return std::nullopt;
  LayerNormArgs a;
  a.type = t.scalar_type();
  if (a.type != at::kFloat && a.type != at::kDouble && a.type != at::kBFloat16 && a.type != at::kHalf)
    return std::nullopt;
  a.N = c10::multiply_integers(shape);
  a.M = t.numel() / a.N;
  a.stats.assign(t.sizes().begin(), t.sizes().begin() + axis);
  a.stats.resize(t.dim(), 1);
  a.device = tc::current_device();
  a.x = tc::plain(input, a.device, a.type, a.M * a.N);
  a.gamma = tc::plain(weight, a.device, a.type, a.N);
  a.beta = tc::plain(bias, a.device, a.type, a.N);
  const auto affine_ok = [&](diopiConstTensorHandle_t h, const at::Tensor* p) {
    return h == nullptr || (p != nullptr && p->sizes() == shape);
  };
  if (a.x == nullptr || !affine_ok(weight, a.gamma) || !affine_ok(bias, a.beta)) return std::nullopt;
  return a;
}

bool layer_norm_direct(diopiTensorHandle_t out, diopiTensorHandle_t save_mean, diopiTensorHandle_t save_invstd,
                       diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight, diopiConstTensorHandle_t bias,
                       diopiSize_t normalized_shape, double eps) {
  const auto kernel = tc::cpu_kernel<at::native::LayerNormKernel_DECLARE_DISPATCH_type>();
  if (kernel == nullptr) return false;
  const auto a = layer_norm_args(input, weight, bias, normalized_shape);
  if (!a) return false;
  at::Tensor* y = tc::plain(out, a->device, a->type, a->M * a->N);
  at::Tensor* mean = tc::plain(save_mean, a->device, a->type, a->M);
  at::Tensor* rstd = tc::plain(save_invstd, a->device, a->type, a->M);
  if (y == nullptr || y->sizes() != a->x->sizes() || mean == nullptr || mean->sizes() != a->stats || rstd == nullptr ||
      rstd->sizes() != a->stats)
    return false;
  const at::Tensor undefined;
  kernel(*a->x, a->gamma ? *a->gamma : undefined, a->beta ? *a->beta : undefined, a->M, a->N, eps, y, mean, rstd);
  return true;
}

bool layer_norm_backward_direct(diopiTensorHandle_t grad_input, diopiTensorHandle_t grad_weight,
                                diopiTensorHandle_t grad_bias, diopiConstTensorHandle_t grad_output,
                                diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                diopiConstTensorHandle_t bias, diopiConstTensorHandle_t mean_h,
                                diopiConstTensorHandle_t rstd_h, diopiSize_t normalized_shape) {
  const auto kernel = tc::cpu_kernel<at::native::LayerNormBackwardKernel_DECLARE_DISPATCH_type>();
  if (kernel == nullptr) return false;
  const auto a = layer_norm_args(input, weight, bias, normalized_shape);
  if (!a) return false;
  const int64_t numel = a->M * a->N;
  const at::Tensor* dy = tc::plain(grad_output, a->device, a->type, numel);
  const at::Tensor* mean = tc::plain(mean_h, a->device, a->type, a->M);
  const at::Tensor* rstd = tc::plain(rstd_h, a->device, a->type, a->M);
  at::Tensor* dx = tc::plain(grad_input, a->device, a->type, numel);
  at::Tensor* dgamma = tc::plain(grad_weight, a->device, a->type, a->N);
  at::Tensor* dbeta = tc::plain(grad_bias, a->device, a->type, a->N);
  // ATen shapes dgamma and dbeta as the weight and bias, so a wanted one needs its parameter.
  if (dy == nullptr || dy->sizes() != a->x->sizes() || mean == nullptr || rstd == nullptr ||
      (grad_input != nullptr && (dx == nullptr || dx->sizes() != a->x->sizes())) ||
      (grad_weight != nullptr && (a->gamma == nullptr || dgamma == nullptr || dgamma->sizes() != a->gamma->sizes())) ||
      (grad_bias != nullptr && (a->beta == nullptr || dbeta == nullptr || dbeta->sizes() != a->beta->sizes())))
    return false;
  at::Tensor none_dx, none_dgamma, none_dbeta;  // undefined: the kernel skips an unwanted gradient
  const at::Tensor undefined;
  kernel(*dy, *a->x, *mean, *rstd, a->gamma ? *a->gamma : undefined, a->M, a->N, dx ? dx : &none_dx,
         dgamma ? dgamma : &none_dgamma, dbeta ? dbeta : &none_dbeta);
  return true;
}

}  // namespace

DIPU_EXPORT diopiError_t diopiLayerNorm(diopiContextHandle_t ctx, diopiTensorHandle_t out,
                                        diopiTensorHandle_t save_mean, diopiTensorHandle_t save_invstd,
                                        diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                        diopiConstTensorHandle_t bias, diopiSize_t normalized_shape, double eps) {
  return tc::guarded([&] {
    if (layer_norm_direct(out, save_mean, save_invstd, input, weight, bias, normalized_shape, eps)) return;
    const auto results = at::_ops::native_layer_norm::call(tc::alias_of(input), tc::sym_sizes(normalized_shape),
                                                           tc::optional_alias(weight), tc::optional_alias(bias), eps);
    write_results(ctx, out, save_mean, save_invstd, results);
  });
}

DIPU_EXPORT diopiError_t diopiLayerNormBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                                diopiTensorHandle_t grad_weight, diopiTensorHandle_t grad_bias,
                                                diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                                diopiConstTensorHandle_t weight, diopiConstTensorHandle_t bias,
                                                diopiConstTensorHandle_t mean, diopiConstTensorHandle_t rstd,
                                                diopiSize_t normalized_shape) {
  return tc::guarded([&] {
    if (layer_norm_backward_direct(grad_input, grad_weight, grad_bias, grad_output, input, weight, bias, mean, rstd,
                                   normalized_shape))
      return;
    const auto results = at::_ops::native_layer_norm_backward::call(
        tc::alias_of(grad_output), tc::alias_of(input), tc::sym_sizes(normalized_shape), tc::alias_of(mean),
        tc::alias_of(rstd), tc::optional_alias(weight), tc::optional_alias(bias),
        wanted(grad_input, grad_weight, grad_bias));
    write_results(ctx, grad_input, grad_weight, grad_bias, results);
  });
}

// diopi_impl/torch/normalization.py's group norm: ATen's CPU kernels read the input as contiguous.

DIPU_EXPORT diopiError_t diopiGroupNorm(diopiContextHandle_t ctx, diopiTensorHandle_t out,
                                        diopiTensorHandle_t save_mean, diopiTensorHandle_t save_invstd,
                                        diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                        diopiConstTensorHandle_t bias, int64_t num_groups, double eps) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input).contiguous();
    const auto [n, c, hxw] = group_norm_sizes(x);
    write_results(ctx, out, save_mean, save_invstd,
                  at::_ops::native_group_norm::call(x, tc::optional_alias(weight), tc::optional_alias(bias), n, c, hxw,
                                                    num_groups, eps));
  });
}

DIPU_EXPORT diopiError_t diopiGroupNormBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                                diopiTensorHandle_t grad_weight, diopiTensorHandle_t grad_bias,
                                                diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                                diopiConstTensorHandle_t weight, diopiConstTensorHandle_t mean,
                                                diopiConstTensorHandle_t rstd, int64_t num_groups) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input).contiguous();
    const auto [n, c, hxw] = group_norm_sizes(x);
    write_results(ctx, grad_input, grad_weight, grad_bias,
                  at::_ops::native_group_norm_backward::call(
                      tc::alias_of(grad_output).contiguous(), x, tc::alias_of(mean), tc::alias_of(rstd),
                      tc::optional_alias(weight), n, c, hxw, num_groups, wanted(grad_input, grad_weight, grad_bias)));
  });
}

// ---- diopi_impl/torch/activations.py, pointwise.py ----

DIPU_EXPORT diopiError_t diopiRelu(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input) {
  return tc::guarded([&] {  // torch.relu has no out= of its own (ATen's relu.out copies a functional result)
    at::Tensor o = tc::alias_of(out);
    at::_ops::clamp_min_out::call(tc::alias_of(input), 0, o);
  });
}

DIPU_EXPORT diopiError_t diopiAbs(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input);
    // abs_ (one tensor for both: the Python twin's `out is input`): a complex tensor cannot hold its real
    // result (as ATen refuses; the fallback raises its error)
    if (tc::tensor(out).unsafeGetTensorImpl() == tc::tensor(input).unsafeGetTensorImpl() && x.is_complex())
      throw std::runtime_error("In-place abs is not supported for complex tensors.");
    at::Tensor o = tc::alias_of(out);
    at::_ops::abs_out::call(x, o);
  });
}

// ---- diopi_impl/torch/convolution.py ----

DIPU_EXPORT diopiError_t diopiConvolution2d(diopiContextHandle_t ctx, diopiTensorHandle_t out,
                                            diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                            diopiConstTensorHandle_t bias, diopiSize_t stride, diopiSize_t padding,
                                            diopiSize_t dilation, int64_t groups) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input), w = tc::alias_of(weight);
    const std::optional<at::Tensor> b = tc::optional_alias(bias);
    at::Tensor o = tc::alias_of(out);
    if (cudnn_convolution_into(o, x, w, b, stride, padding, dilation, groups)) return;
    write_result(ctx, out,
                 at::_ops::convolution::call(x, w, b, tc::sym_sizes(stride), tc::sym_sizes(padding),
                                             tc::sym_sizes(dilation), false, zeros(x.dim() - 2), groups));
  });
}

DIPU_EXPORT diopiError_t diopiConvolution2dBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                                    diopiTensorHandle_t grad_weight, diopiTensorHandle_t grad_bias,
                                                    diopiConstTensorHandle_t grad_output,
                                                    diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                                    diopiSize_t* given_bias_sizes, diopiSize_t stride,
                                                    diopiSize_t padding, diopiSize_t dilation, int64_t groups) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input), w = tc::alias_of(weight);
    std::array<c10::SymInt, 1> channels{w.size(0)};
    const auto no_padding = zeros(x.dim() - 2);
    write_results(ctx, grad_input, grad_weight, grad_bias,
                  at::_ops::convolution_backward::call(
                      tc::alias_of(grad_output), x, w, bias_sizes(given_bias_sizes, grad_bias, channels),
                      tc::sym_sizes(stride), tc::sym_sizes(padding), tc::sym_sizes(dilation), false, no_padding, groups,
                      wanted(grad_input, grad_weight, grad_bias)));
  });
}

DIPU_EXPORT diopiError_t diopiConvTranspose2d(diopiContextHandle_t, diopiTensorHandle_t out,
                                              diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                              diopiConstTensorHandle_t bias, diopiSize_t stride, diopiSize_t padding,
                                              diopiSize_t output_padding, int64_t groups, diopiSize_t dilation) {
  return tc::guarded([&] {
    tc::copy_into(tc::alias_of(out),
                  at::_ops::convolution::call(tc::alias_of(input), tc::alias_of(weight), tc::optional_alias(bias),
                                              tc::sym_sizes(stride), tc::sym_sizes(padding), tc::sym_sizes(dilation),
                                              true, tc::sym_sizes(output_padding), groups));
  });
}

DIPU_EXPORT diopiError_t diopiConvTranspose2dBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                                      diopiTensorHandle_t grad_weight, diopiTensorHandle_t grad_bias,
                                                      diopiConstTensorHandle_t grad_output,
                                                      diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                                      diopiSize_t* given_bias_sizes, diopiSize_t stride,
                                                      diopiSize_t padding, diopiSize_t dilation,
                                                      diopiSize_t output_padding, int64_t groups) {
  return tc::guarded([&] {
    const at::Tensor w = tc::alias_of(weight);
    std::array<c10::SymInt, 1> channels{w.size(1) * groups};
    write_results(ctx, grad_input, grad_weight, grad_bias,
                  at::_ops::convolution_backward::call(tc::alias_of(grad_output), tc::alias_of(input), w,
                                                       bias_sizes(given_bias_sizes, grad_bias, channels),
                                                       tc::sym_sizes(stride), tc::sym_sizes(padding),
                                                       tc::sym_sizes(dilation), true, tc::sym_sizes(output_padding),
                                                       groups, wanted(grad_input, grad_weight, grad_bias)));
  });
}

// ---- diopi_impl/torch/pooling.py ----

DIPU_EXPORT diopiError_t diopiAdaptiveAvgPool2d(diopiContextHandle_t, diopiTensorHandle_t out,
                                                diopiConstTensorHandle_t input, diopiSize_t output_size) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input);
    at::Tensor o = tc::alias_of(out);
    // ATen makes _adaptive_avg_pool2d.out by copying a functional result; adaptive_avg_pool2d.out runs the same
    // kernel into out, but first lays out out as the input suggests (resize_ with a memory format, which would
    // restride the alias and not the dipu tensor), so it serves only an out laid out so already.
    if (o.dim() == x.dim() && o.is_contiguous(x.suggest_memory_format()))
      at::_ops::adaptive_avg_pool2d_out::call(x, tc::sym_sizes(output_size), o);
    else
      at::_ops::_adaptive_avg_pool2d_out::call(x, tc::sym_sizes(output_size), o);
  });
}

// ---- diopi_impl/torch/normalization.py ----

DIPU_EXPORT diopiError_t diopiBatchNorm(diopiContextHandle_t ctx, diopiTensorHandle_t out,
                                        diopiTensorHandle_t save_mean, diopiTensorHandle_t save_invstd,
                                        diopiConstTensorHandle_t input, diopiConstTensorHandle_t weight,
                                        diopiConstTensorHandle_t bias, diopiTensorHandle_t running_mean,
                                        diopiTensorHandle_t running_var, bool training, double momentum, double eps) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input);
    const std::optional<at::Tensor> w = tc::optional_alias(weight), b = tc::optional_alias(bias),
                                    rm = tc::optional_alias(running_mean), rv = tc::optional_alias(running_var);
    at::Tensor o = tc::alias_of(out), mean = tc::alias_of(save_mean), invstd = tc::alias_of(save_invstd);
    if (!training && cudnn_batch_norm_eval_into(o, mean, invstd, x, w, b, rm, rv, eps)) return;
    if (same_dense_layout(x, o)) {
      // The out= kernel writes the outputs in place, where the Python twin copies a functional result (it
      // computes right only where the output is laid out as the input). In evaluation dipu's statistics are
      // empty, as the CPU leaves them; ATen's kernels of other devices (CUDA's) fill their statistics from the
      // running ones, resizing them, which an alias cannot do, so there they get scratch tensors of their own.
      if (!training && (!x.is_cpu() || !mean.defined() || !invstd.defined()))
        mean = x.new_empty({0}), invstd = x.new_empty({0});
      at::_ops::native_batch_norm_out::call(x, w, b, rm, rv, training, momentum, eps, o, mean, invstd);
      return;
    }
    const auto results = at::_ops::native_batch_norm::call(x, w, b, rm, rv, training, momentum, eps);
    write_result(ctx, out, std::get<0>(results));
    if (training) {  // evaluation saves no statistics, whatever ATen's CPU kernel hands back
      write_result(ctx, save_mean, std::get<1>(results));
      write_result(ctx, save_invstd, std::get<2>(results));
    }
  });
}

DIPU_EXPORT diopiError_t diopiBatchNormBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_input,
                                                diopiTensorHandle_t grad_weight, diopiTensorHandle_t grad_bias,
                                                diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                                diopiConstTensorHandle_t weight, diopiConstTensorHandle_t running_mean,
                                                diopiConstTensorHandle_t running_var,
                                                diopiConstTensorHandle_t save_mean,
                                                diopiConstTensorHandle_t save_invstd, bool training, double eps) {
  return tc::guarded([&] {
    write_results(ctx, grad_input, grad_weight, grad_bias,
                  at::_ops::native_batch_norm_backward::call(
                      tc::alias_of(grad_output), tc::alias_of(input), tc::optional_alias(weight),
                      tc::optional_alias(running_mean), tc::optional_alias(running_var), tc::optional_alias(save_mean),
                      tc::optional_alias(save_invstd), training, eps, wanted(grad_input, grad_weight, grad_bias)));
  });
}

// ---- diopi_impl/torch/random.py ----

// As the Python twin: keep each element with probability 1 - p and scale by 1 / (1 - p), the mask drawn as a
// float bernoulli of the input's shape from the dipu generator's native generator, so the numbers are the
// Python library's and the CPU's for one seed.
DIPU_EXPORT diopiError_t diopiDropout(diopiContextHandle_t, diopiTensorHandle_t out, diopiTensorHandle_t mask,
                                      diopiConstTensorHandle_t input, double p, bool train,
                                      diopiGeneratorHandle_t generator) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input);
    at::Tensor o = tc::alias_of(out), m = tc::alias_of(mask);
    if (!train || p == 0 || p == 1) {  // evaluation keeps everything, whatever p
      const bool keep = !train || p != 1;
      at::Tensor factor = c10::scalar_to_tensor(at::Scalar(keep ? 1.0 : 0.0));  // torch.mul's Python float
      factor.unsafeGetTensorImpl()->set_wrapped_number(true);
      at::_ops::mul_out::call(x, factor, o);
      at::_ops::fill__Scalar::call(m, keep);
      return;
    }
    at::Tensor keep = at::empty_like(x);
    at::_ops::bernoulli__float::call(keep, 1 - p, tc::native_generator(generator));
    m.copy_(keep);
    keep.div_(1 - p);
    at::_ops::mul_out::call(x, keep, o);
  });
}

// ---- diopi_impl/torch/embedding.py, losses.py, tensor.py ----

DIPU_EXPORT diopiError_t diopiEmbedding(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t weight,
                                        diopiConstTensorHandle_t indices, int64_t, bool, bool) {
  return tc::guarded([&] {
    const at::Tensor w = tc::alias_of(weight);
    at::Tensor rows = tc::alias_of(out).view({-1, w.size(1)});
    at::_ops::index_select_out::call(w, 0, tc::alias_of(indices).reshape({-1}), rows);
  });
}

DIPU_EXPORT diopiError_t diopiEmbeddingBackward(diopiContextHandle_t, diopiTensorHandle_t out,
                                                diopiConstTensorHandle_t grad, diopiConstTensorHandle_t indices,
                                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq,
                                                bool sparse) {
  if (sparse) return diopiForceFallbackToCPU;  // a dense out cannot hold a sparse gradient
  return tc::guarded([&] {
    tc::copy_into(tc::alias_of(out),
                  at::_ops::embedding_dense_backward::call(tc::alias_of(grad), tc::alias_of(indices), num_weights,
                                                           padding_idx, scale_grad_by_freq));
  });
}

// diopi_impl/torch/embedding.py's bags: ATen's CPU kernel leaves the bookkeeping outputs it does not need for `mode`
// empty, unlike its meta kernel, so each output takes its result's shape (write_result resizes it).
DIPU_EXPORT diopiError_t diopiEmbeddingBag(diopiContextHandle_t ctx, diopiTensorHandle_t out,
                                           diopiTensorHandle_t offset2bag, diopiTensorHandle_t bag_size,
                                           diopiTensorHandle_t max_indices, diopiConstTensorHandle_t weight,
                                           diopiConstTensorHandle_t indices, diopiConstTensorHandle_t offsets,
                                           bool scale_grad_by_freq, int64_t mode, bool sparse,
                                           diopiConstTensorHandle_t per_sample_weights, bool include_last_offset,
                                           int64_t padding_idx) {
  return tc::guarded([&] {
    const auto [result, bags, sizes, maxima] = at::_ops::_embedding_bag::call(
        tc::alias_of(weight), tc::alias_of(indices), tc::alias_of(offsets), scale_grad_by_freq, mode, sparse,
        tc::optional_alias(per_sample_weights), include_last_offset, padding_idx);
    write_result(ctx, out, result);
    write_results(ctx, offset2bag, bag_size, max_indices, std::tie(bags, sizes, maxima));
  });
}

DIPU_EXPORT diopiError_t diopiEmbeddingBagBackward(diopiContextHandle_t, diopiTensorHandle_t grad_weight,
                                                   diopiConstTensorHandle_t grad, diopiConstTensorHandle_t indices,
                                                   diopiConstTensorHandle_t offsets,
                                                   diopiConstTensorHandle_t offset2bag,
                                                   diopiConstTensorHandle_t bag_size,
                                                   diopiConstTensorHandle_t maximum_indices, int64_t num_weights,
                                                   bool scale_grad_by_freq, int64_t mode, bool sparse,
                                                   diopiConstTensorHandle_t per_sample_weights, int64_t padding_idx) {
  if (sparse) return diopiForceFallbackToCPU;  // a dense output cannot hold a sparse gradient
  return tc::guarded([&] {
    tc::copy_into(tc::alias_of(grad_weight),
                  at::_ops::_embedding_bag_backward::call(
                      tc::alias_of(grad), tc::alias_of(indices), tc::alias_of(offsets), tc::alias_of(offset2bag),
                      tc::alias_of(bag_size), tc::alias_of(maximum_indices), num_weights, scale_grad_by_freq, mode,
                      false, tc::optional_alias(per_sample_weights), padding_idx));
  });
}

DIPU_EXPORT diopiError_t diopiEmbeddingBagPerSampleWeightsBackward(
    diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t grad, diopiConstTensorHandle_t weight,
    diopiConstTensorHandle_t indices, diopiConstTensorHandle_t offsets, diopiConstTensorHandle_t offset2bag,
    int64_t mode, int64_t padding_idx) {
  return tc::guarded([&] {
    tc::copy_into(tc::alias_of(out), at::_ops::_embedding_bag_per_sample_weights_backward::call(
                                         tc::alias_of(grad), tc::alias_of(weight), tc::alias_of(indices),
                                         tc::alias_of(offsets), tc::alias_of(offset2bag), mode, padding_idx));
  });
}

// (N, C, H, W) inputs take nll_loss2d, as in diopi_impl/torch/losses.py.
DIPU_EXPORT diopiError_t diopiNLLLossV2(diopiContextHandle_t, diopiTensorHandle_t out, diopiTensorHandle_t total_weight,
                                        diopiConstTensorHandle_t input, diopiConstTensorHandle_t target,
                                        diopiConstTensorHandle_t weight, diopiReduction_t reduction,
                                        int64_t ignore_index) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input);
    at::Tensor o = tc::alias_of(out), total = tc::alias_of(total_weight);
    if (x.dim() == 4)
      at::_ops::nll_loss2d_forward_output::call(x, tc::alias_of(target), tc::optional_alias(weight), reduction,
                                                ignore_index, o, total);
    else
      at::_ops::nll_loss_forward_output::call(x, tc::alias_of(target), tc::optional_alias(weight), reduction,
                                              ignore_index, o, total);
  });
}

DIPU_EXPORT diopiError_t diopiNLLLossV2Backward(diopiContextHandle_t, diopiTensorHandle_t grad_input,
                                                diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                                diopiConstTensorHandle_t target, diopiConstTensorHandle_t weight,
                                                diopiConstTensorHandle_t total_weight, diopiReduction_t reduction,
                                                int64_t ignore_index) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input);
    at::Tensor gi = tc::alias_of(grad_input);
    if (x.dim() == 4)
      at::_ops::nll_loss2d_backward_grad_input::call(tc::alias_of(grad_output), x, tc::alias_of(target),
                                                     tc::optional_alias(weight), reduction, ignore_index,
                                                     tc::alias_of(total_weight), gi);
    else
      at::_ops::nll_loss_backward_grad_input::call(tc::alias_of(grad_output), x, tc::alias_of(target),
                                                   tc::optional_alias(weight), reduction, ignore_index,
                                                   tc::alias_of(total_weight), gi);
  });
}

DIPU_EXPORT diopiError_t diopiCat(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t* tensors,
                                  int64_t num_tensors, int64_t dim) {
  return tc::guarded([&] {
    const c10::DeviceIndex device = tc::current_device();
    c10::SmallVector<at::Tensor, 8> parts;
    parts.reserve(num_tensors);
    for (int64_t i = 0; i < num_tensors; ++i) parts.push_back(tc::alias_of(tensors[i], device));
    at::Tensor o = tc::alias_of(out, device);
    at::_ops::cat_out::call(at::ITensorListRef(at::TensorList(parts)), dim, o);
  });
}

// ---- diopi_impl/torch/indexing.py: advanced indexing ----

namespace {

// indexing.py's _index_list: a null handle selects a whole dim, and a CPU index tensor stays on the CPU (ATen
// takes it beside device tensors).
c10::List<std::optional<at::Tensor>> index_list(const diopiConstTensorHandle_t* indices, int64_t n) {
  const c10::DeviceIndex device = tc::current_device();
  c10::List<std::optional<at::Tensor>> list;
  list.reserve(n);
  for (int64_t i = 0; i < n; ++i)
    list.push_back(indices[i] == nullptr ? std::optional<at::Tensor>() : tc::alias_or_cpu(indices[i], device));
  return list;
}

// 1 - t, as Python's 1 - tensor computes it (rsub).
at::Tensor one_minus(const at::Tensor& t) { return at::_ops::rsub_Scalar::call(t, 1, 1); }

// The summed gates of a recurrent cell: input and hidden gates, and both biases where given (recurrent.py's _gates).
at::Tensor cell_gates(diopiConstTensorHandle_t input_gates, diopiConstTensorHandle_t hidden_gates,
                      diopiConstTensorHandle_t input_bias, diopiConstTensorHandle_t hidden_bias) {
  at::Tensor gates = tc::alias_of(input_gates).add(tc::alias_of(hidden_gates));
  if (input_bias != nullptr) gates = gates.add(tc::alias_of(input_bias)).add(tc::alias_of(hidden_bias));
  return gates;
}

// A bias's gradient: the gates' gradient summed over the batch (torch.sum(gates, 0, out=...)).
void sum_rows(const at::Tensor& gates, diopiTensorHandle_t out) {
  at::Tensor o = tc::alias_of(out);
  at::_ops::sum_IntList_out::call(gates, c10::IntArrayRef{0}, false, std::nullopt, o);
}
}  // namespace

DIPU_EXPORT diopiError_t diopiIndex(diopiContextHandle_t ctx, diopiTensorHandle_t* out, diopiConstTensorHandle_t input,
                                    diopiConstTensorHandle_t* indices, int64_t num_indices) {
  return tc::guarded([&] {
    tc::require_copy(ctx, out, at::_ops::index_Tensor::call(tc::alias_of(input), index_list(indices, num_indices)));
  });
}

DIPU_EXPORT diopiError_t diopiIndexPutInp(diopiContextHandle_t, diopiTensorHandle_t input,
                                          diopiConstTensorHandle_t values, diopiConstTensorHandle_t* indices,
                                          int64_t num_indices, bool accumulate) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input);
    at::_ops::index_put_::call(x, index_list(indices, num_indices), tc::alias_of(values), accumulate);
  });
}

DIPU_EXPORT diopiError_t diopiIndexPut(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                       diopiConstTensorHandle_t values, diopiConstTensorHandle_t* indices,
                                       int64_t num_indices, bool accumulate) {
  return tc::guarded([&] {
    at::Tensor o = tc::alias_of(out);
    if (!tc::tensor(out).is_same(tc::tensor(input))) o.copy_(tc::alias_of(input));
    at::_ops::index_put_::call(o, index_list(indices, num_indices), tc::alias_of(values), accumulate);
  });
}

// ---- diopi_impl/torch/optim.py ----

#define DIPU_FUSED_ADAM(NAME, OP, LR)                                                                                \
  DIPU_EXPORT diopiError_t NAME(                                                                                     \
      diopiContextHandle_t, diopiTensorHandle_t* params, diopiTensorHandle_t* grads, diopiTensorHandle_t* exp_avgs,  \
      diopiTensorHandle_t* exp_avg_sqs, diopiTensorHandle_t* max_exp_avg_sqs, diopiConstTensorHandle_t* state_steps, \
      int64_t num_params, LR lr, double beta1, double beta2, double eps, double weight_decay, bool amsgrad,          \
      bool maximize, diopiConstTensorHandle_t grad_scale, diopiConstTensorHandle_t found_inf) {                      \
    return fused_adam<OP>(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, num_params, lr, beta1, \
                          beta2, eps, weight_decay, amsgrad, maximize, grad_scale, found_inf);                       \
  }
DIPU_FUSED_ADAM(diopiFusedAdam, at::_ops::_fused_adam_, double)
DIPU_FUSED_ADAM(diopiFusedAdamTensorLr, at::_ops::_fused_adam__tensor_lr, diopiConstTensorHandle_t)
DIPU_FUSED_ADAM(diopiFusedAdamW, at::_ops::_fused_adamw_, double)
DIPU_FUSED_ADAM(diopiFusedAdamWTensorLr, at::_ops::_fused_adamw__tensor_lr, diopiConstTensorHandle_t)
#undef DIPU_FUSED_ADAM

DIPU_EXPORT diopiError_t diopiFusedAdagrad(diopiContextHandle_t, diopiTensorHandle_t* params,
                                           diopiTensorHandle_t* grads, diopiTensorHandle_t* state_sums,
                                           diopiTensorHandle_t* state_steps, int64_t num_params, double lr,
                                           double lr_decay, double weight_decay, double eps, bool maximize,
                                           diopiConstTensorHandle_t grad_scale, diopiConstTensorHandle_t found_inf) {
  return fused_adagrad<at::_ops::_fused_adagrad_>(params, grads, state_sums, state_steps, num_params, lr, lr_decay,
                                                  weight_decay, eps, maximize, grad_scale, found_inf);
}

DIPU_EXPORT diopiError_t diopiFusedAdagradTensorLr(diopiContextHandle_t, diopiTensorHandle_t* params,
                                                   diopiTensorHandle_t* grads, diopiTensorHandle_t* state_sums,
                                                   diopiConstTensorHandle_t* state_steps, int64_t num_params,
                                                   diopiConstTensorHandle_t lr, double lr_decay, double weight_decay,
                                                   double eps, bool maximize, diopiConstTensorHandle_t grad_scale,
                                                   diopiConstTensorHandle_t found_inf) {
  return fused_adagrad<at::_ops::_fused_adagrad__tensor_lr>(params, grads, state_sums, state_steps, num_params, lr,
                                                            lr_decay, weight_decay, eps, maximize, grad_scale,
                                                            found_inf);
}

DIPU_EXPORT diopiError_t diopiFusedSgd(diopiContextHandle_t, diopiTensorHandle_t* params, diopiTensorHandle_t* grads,
                                       diopiTensorHandle_t* momentum_buffer_list, int64_t num_params,
                                       double weight_decay, double momentum, double lr, double dampening, bool nesterov,
                                       bool maximize, bool is_first_step, diopiConstTensorHandle_t grad_scale,
                                       diopiConstTensorHandle_t found_inf) {
  return fused_sgd<at::_ops::_fused_sgd_>(params, grads, momentum_buffer_list, num_params, weight_decay, momentum, lr,
                                          dampening, nesterov, maximize, is_first_step, grad_scale, found_inf);
}
DIPU_EXPORT diopiError_t diopiFusedSgdTensorLr(diopiContextHandle_t, diopiTensorHandle_t* params,
                                               diopiTensorHandle_t* grads, diopiTensorHandle_t* momentum_buffer_list,
                                               int64_t num_params, double weight_decay, double momentum,
                                               diopiConstTensorHandle_t lr, double dampening, bool nesterov,
                                               bool maximize, bool is_first_step, diopiConstTensorHandle_t grad_scale,
                                               diopiConstTensorHandle_t found_inf) {
  return fused_sgd<at::_ops::_fused_sgd__tensor_lr>(params, grads, momentum_buffer_list, num_params, weight_decay,
                                                    momentum, lr, dampening, nesterov, maximize, is_first_step,
                                                    grad_scale, found_inf);
}

// ---- diopi_impl/torch/resampling.py's padding: one DIOPI function for ATen's per-mode, per-rank ops ----

DIPU_EXPORT diopiError_t diopiPad(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                  diopiSize_t pad, const char* mode, const double* value) {
  return tc::guarded([&] {
    const at::Tensor x = tc::alias_of(input), o = tc::alias_of(out);
    const std::string_view name = mode == nullptr ? "" : mode;
    if (name == "constant") {
      const at::Scalar fill = value == nullptr ? at::Scalar(int64_t{0}) : at::Scalar(*value);
      tc::copy_into(o, at::_ops::constant_pad_nd::call(x, tc::sym_sizes(pad), fill));
      return;
    }
    at::Tensor target = o;
    const bool padded =
        pad_by_mode<at::_ops::reflection_pad1d_out, at::_ops::reflection_pad2d_out, at::_ops::reflection_pad3d_out,
                    at::_ops::replication_pad1d_out, at::_ops::replication_pad2d_out, at::_ops::replication_pad3d_out>(
            name, pad.len / 2, x, tc::sym_sizes(pad), target);
    TORCH_CHECK(padded, "diopiPad: no ", name, " padding over ", pad.len / 2, " dims");
  });
}

DIPU_EXPORT diopiError_t diopiPadBackward(diopiContextHandle_t, diopiTensorHandle_t grad_input,
                                          diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                          diopiSize_t pad, const char* mode) {
  return tc::guarded([&] {
    at::Tensor target = tc::alias_of(grad_input);
    const bool padded =
        pad_by_mode<at::_ops::reflection_pad1d_backward_grad_input, at::_ops::reflection_pad2d_backward_grad_input,
                    at::_ops::reflection_pad3d_backward_grad_input, at::_ops::replication_pad1d_backward_grad_input,
                    at::_ops::replication_pad2d_backward_grad_input, at::_ops::replication_pad3d_backward_grad_input>(
            mode == nullptr ? "" : mode, pad.len / 2, tc::alias_of(grad_output), tc::alias_of(input),
            tc::sym_sizes(pad), target);
    TORCH_CHECK(padded, "diopiPadBackward: no ", mode == nullptr ? "" : mode, " padding over ", pad.len / 2, " dims");
  });
}

// ---- diopi_impl/torch/indexing.py's scatter, index_fill and masked_scatter; activations.py's elu backward;
// linalg.py's addmv; random.py's random_; normalization.py's weight norm ----

DIPU_EXPORT diopiError_t diopiScatter(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                      int64_t dim, diopiConstTensorHandle_t src, diopiConstTensorHandle_t index,
                                      const char* reduce) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), i = tc::alias_of(index), source = tc::alias_of(src), o = tc::alias_of(out);
    if (reduce == nullptr)
      at::_ops::scatter_src_out::call(x, dim, i, source, o);
    else if (std::string_view(reduce) == "add")  // scatter's deprecated reduce="add", without its warning
      at::_ops::scatter_add_out::call(x, dim, i, source, o);
    else
      at::_ops::scatter_reduce_out::call(x, dim, i, source, reduce, o);
  });
}

DIPU_EXPORT diopiError_t diopiScatterScalar(diopiContextHandle_t, diopiTensorHandle_t out,
                                            diopiConstTensorHandle_t input, int64_t dim, const diopiScalar_t* value,
                                            diopiConstTensorHandle_t index, const char* reduce) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), i = tc::alias_of(index), o = tc::alias_of(out);
    if (reduce == nullptr)
      at::_ops::scatter_value_out::call(x, dim, i, tc::scalar(value), o);
    else
      at::_ops::scatter_value_reduce_out::call(x, dim, i, tc::scalar(value), reduce, o);
  });
}

DIPU_EXPORT diopiError_t diopiIndexFill(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                        int64_t dim, diopiConstTensorHandle_t index, diopiConstTensorHandle_t value) {
  return tc::guarded([&] {
    at::Tensor o = started(out, input);
    at::_ops::index_fill__int_Tensor::call(o, dim, tc::alias_of(index), tc::alias_of(value));
  });
}

DIPU_EXPORT diopiError_t diopiIndexFillScalar(diopiContextHandle_t, diopiTensorHandle_t out,
                                              diopiConstTensorHandle_t input, int64_t dim,
                                              diopiConstTensorHandle_t index, const diopiScalar_t* value) {
  return tc::guarded([&] {
    at::Tensor o = started(out, input);
    at::_ops::index_fill__int_Scalar::call(o, dim, tc::alias_of(index), tc::scalar(value));
  });
}

DIPU_EXPORT diopiError_t diopiMaskedScatter(diopiContextHandle_t, diopiTensorHandle_t out,
                                            diopiConstTensorHandle_t input, diopiConstTensorHandle_t mask,
                                            diopiConstTensorHandle_t source) {
  return tc::guarded([&] {
    at::Tensor o = started(out, input);
    at::_ops::masked_scatter_::call(o, tc::alias_of(mask), tc::alias_of(source));
  });
}

DIPU_EXPORT diopiError_t diopiEluBackward(diopiContextHandle_t, diopiTensorHandle_t grad_input,
                                          diopiConstTensorHandle_t grad_output, diopiConstTensorHandle_t input,
                                          const diopiScalar_t* alpha, const diopiScalar_t* scale,
                                          const diopiScalar_t* input_scale, bool is_result) {
  return tc::guarded([&] {
    at::Tensor g = tc::alias_of(grad_input);
    at::_ops::elu_backward_grad_input::call(tc::alias_of(grad_output), tc::scalar(alpha), tc::scalar(scale),
                                            tc::scalar(input_scale), is_result, tc::alias_of(input), g);
  });
}

DIPU_EXPORT diopiError_t diopiAddmv(diopiContextHandle_t, diopiTensorHandle_t out, diopiConstTensorHandle_t input,
                                    diopiConstTensorHandle_t mat, diopiConstTensorHandle_t vec,
                                    const diopiScalar_t* beta, const diopiScalar_t* alpha) {
  return tc::guarded([&] {
    at::Tensor x = tc::alias_of(input), m = tc::alias_of(mat), v = tc::alias_of(vec), o = tc::alias_of(out);
    if (m.numel() == 0)  // ATen's addmv.out resizes `out`'s storage for an empty matrix, which an alias cannot
      tc::copy_into(o, at::_ops::addmv::call(x, m, v, tc::scalar(beta), tc::scalar(alpha)));
    else
      at::_ops::addmv_out::call(x, m, v, tc::scalar(beta), tc::scalar(alpha), o);
  });
}

DIPU_EXPORT diopiError_t diopiRandomInp(diopiContextHandle_t, diopiTensorHandle_t inout, int64_t from_,
                                        const int64_t* to, diopiGeneratorHandle_t generator) {
  return tc::guarded([&] {
    at::Tensor t = tc::alias_of(inout);
    if (from_ == 0 && to == nullptr)  // random_(): the same range, drawn as the CPU's random_() draws it
      at::_ops::random_::call(t, tc::native_generator(generator));
    else
      at::_ops::random__from::call(t, from_, tc::optional_value(to), tc::native_generator(generator));
  });
}

DIPU_EXPORT diopiError_t diopiWeightNorm(diopiContextHandle_t ctx, diopiTensorHandle_t out, diopiTensorHandle_t norm,
                                         diopiConstTensorHandle_t v, diopiConstTensorHandle_t g, int64_t dim) {
  return tc::guarded([&] {  // ATen's fused CPU kernel reads its tensors as contiguous
    const auto results =
        at::_ops::_weight_norm_interface::call(tc::alias_of(v).contiguous(), tc::alias_of(g).contiguous(), dim);
    write_result(ctx, out, std::get<0>(results));
    write_result(ctx, norm, std::get<1>(results));
  });
}

DIPU_EXPORT diopiError_t diopiWeightNormBackward(diopiContextHandle_t ctx, diopiTensorHandle_t grad_v,
                                                 diopiTensorHandle_t grad_g, diopiConstTensorHandle_t grad_w,
                                                 diopiConstTensorHandle_t saved_v, diopiConstTensorHandle_t saved_g,
                                                 diopiConstTensorHandle_t saved_norms, int64_t dim) {
  return tc::guarded([&] {
    const auto results = at::_ops::_weight_norm_interface_backward::call(
        tc::alias_of(grad_w).contiguous(), tc::alias_of(saved_v).contiguous(), tc::alias_of(saved_g).contiguous(),
        tc::alias_of(saved_norms).contiguous(), dim);
    write_result(ctx, grad_v, std::get<0>(results));
    write_result(ctx, grad_g, std::get<1>(results));
  });
}

// diopi_impl/torch/recurrent.py's fused cells (Note [Fused recurrent cells] there): the same ATen calls in the same
// order, so that both libraries give the same bits.

DIPU_EXPORT diopiError_t diopiLstmCell(diopiContextHandle_t, diopiTensorHandle_t hy, diopiTensorHandle_t cy,
                                       diopiTensorHandle_t workspace, diopiConstTensorHandle_t input_gates,
                                       diopiConstTensorHandle_t hidden_gates, diopiConstTensorHandle_t cx,
                                       diopiConstTensorHandle_t input_bias, diopiConstTensorHandle_t hidden_bias) {
  return tc::guarded([&] {
    const std::vector<at::Tensor> gates = cell_gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1);
    const at::Tensor i = gates[0].sigmoid(), f = gates[1].sigmoid(), g = gates[2].tanh(), o = gates[3].sigmoid();
    at::Tensor c = tc::alias_of(cy), h = tc::alias_of(hy), w = tc::alias_of(workspace);
    at::_ops::addcmul_out::call(f.mul(tc::alias_of(cx)), i, g, 1, c);
    at::_ops::mul_out::call(o, c.tanh(), h);
    const std::array<at::Tensor, 4> saved{i, f, g, o};
    at::_ops::cat_out::call(at::TensorList(saved), 1, w);
  });
}

DIPU_EXPORT diopiError_t diopiLstmCellBackward(diopiContextHandle_t, diopiTensorHandle_t grad_gates,
                                               diopiTensorHandle_t grad_cx, diopiTensorHandle_t grad_bias,
                                               diopiConstTensorHandle_t grad_hy, diopiConstTensorHandle_t grad_cy,
                                               diopiConstTensorHandle_t cx, diopiConstTensorHandle_t cy,
                                               diopiConstTensorHandle_t workspace, bool) {
  return tc::guarded([&] {
    const std::vector<at::Tensor> saved = tc::alias_of(workspace).chunk(4, 1);
    const at::Tensor &i = saved[0], &f = saved[1], &g = saved[2], &o = saved[3];
    const at::Tensor tanh_cy = tc::alias_of(cy).tanh();
    at::Tensor d_cy = grad_cy == nullptr ? at::zeros_like(tanh_cy) : tc::alias_of(grad_cy).clone();
    at::Tensor d_o;
    if (grad_hy != nullptr) {
      const at::Tensor ghy = tc::alias_of(grad_hy);
      d_cy.add_(ghy.mul(o).mul(one_minus(tanh_cy.mul(tanh_cy))));
      d_o = ghy.mul(tanh_cy).mul(o).mul(one_minus(o));
    } else {
      d_o = at::zeros_like(o);
    }
    at::Tensor gates = tc::alias_of(grad_gates);
    const std::array<at::Tensor, 4> parts{d_cy.mul(g).mul(i).mul(one_minus(i)),
                                          d_cy.mul(tc::alias_of(cx)).mul(f).mul(one_minus(f)),
                                          d_cy.mul(i).mul(one_minus(g.mul(g))), d_o};
    at::_ops::cat_out::call(at::TensorList(parts), 1, gates);
    at::Tensor gcx = tc::alias_of(grad_cx);
    at::_ops::mul_out::call(d_cy, f, gcx);
    if (grad_bias != nullptr) sum_rows(gates, grad_bias);
  });
}

DIPU_EXPORT diopiError_t diopiGruCell(diopiContextHandle_t, diopiTensorHandle_t hy, diopiTensorHandle_t workspace,
                                      diopiConstTensorHandle_t input_gates, diopiConstTensorHandle_t hidden_gates,
                                      diopiConstTensorHandle_t hx, diopiConstTensorHandle_t input_bias,
                                      diopiConstTensorHandle_t hidden_bias) {
  return tc::guarded([&] {
    at::Tensor ig = tc::alias_of(input_gates), hg = tc::alias_of(hidden_gates);
    if (input_bias != nullptr) {
      ig = ig.add(tc::alias_of(input_bias));
      hg = hg.add(tc::alias_of(hidden_bias));
    }
    const std::vector<at::Tensor> in = ig.chunk(3, 1), hidden = hg.chunk(3, 1);
    const at::Tensor r = in[0].add(hidden[0]).sigmoid(), z = in[1].add(hidden[1]).sigmoid();
    const at::Tensor n = in[2].addcmul(r, hidden[2]).tanh();
    const at::Tensor h_minus_n = tc::alias_of(hx).sub(n);
    at::Tensor h = tc::alias_of(hy), w = tc::alias_of(workspace);
    at::_ops::addcmul_out::call(n, z, h_minus_n, 1, h);
    const std::array<at::Tensor, 5> saved{r, z, n, hidden[2], h_minus_n};
    at::_ops::cat_out::call(at::TensorList(saved), 1, w);
  });
}

DIPU_EXPORT diopiError_t diopiGruCellBackward(diopiContextHandle_t, diopiTensorHandle_t grad_input_gates,
                                              diopiTensorHandle_t grad_hidden_gates, diopiTensorHandle_t grad_hx,
                                              diopiTensorHandle_t grad_input_bias, diopiTensorHandle_t grad_hidden_bias,
                                              diopiConstTensorHandle_t grad_hy, diopiConstTensorHandle_t workspace,
                                              bool) {
  return tc::guarded([&] {
    const std::vector<at::Tensor> saved = tc::alias_of(workspace).chunk(5, 1);
    const at::Tensor &r = saved[0], &z = saved[1], &n = saved[2], &hn = saved[3], &h_minus_n = saved[4];
    const at::Tensor go = tc::alias_of(grad_hy);
    const at::Tensor d_n = go.mul(one_minus(z)).mul(one_minus(n.mul(n)));
    const at::Tensor d_r = d_n.mul(hn).mul(r).mul(one_minus(r));
    const at::Tensor d_z = go.mul(h_minus_n).mul(z).mul(one_minus(z));
    at::Tensor gi = tc::alias_of(grad_input_gates), gh = tc::alias_of(grad_hidden_gates);
    const std::array<at::Tensor, 3> input_parts{d_r, d_z, d_n}, hidden_parts{d_r, d_z, d_n.mul(r)};
    at::_ops::cat_out::call(at::TensorList(input_parts), 1, gi);
    at::_ops::cat_out::call(at::TensorList(hidden_parts), 1, gh);
    at::Tensor ghx = tc::alias_of(grad_hx);
    at::_ops::mul_out::call(go, z, ghx);
    if (grad_input_bias != nullptr) sum_rows(gi, grad_input_bias);
    if (grad_hidden_bias != nullptr) sum_rows(gh, grad_hidden_bias);
  });
}

}  // extern "C"
