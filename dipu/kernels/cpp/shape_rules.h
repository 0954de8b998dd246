// The C++ twins of the shape rules of dipu/ops/shape_rules.py that the generated C++ wrappers use (its
// RULES says which rules have one: Note [Shape rules are a table]; tests/test_cpp_wrappers.py checks each
// against its Python rule). A rule fills `spec` and returns true, or returns false where
// its Python twin would raise or needs something the C++ side leaves to Python (an index out of
// range, a matrix of the wrong rank): the wrapper then takes the Python path, which raises the
// error the Python wrapper raises. Extra trailing arguments (alpha, dim, ...) are ignored, as the
// Python rules' `*_` ignores them.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/result_type.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace dipu::cwrap::rules {

struct Spec {
  c10::SmallVector<int64_t, 6> shape;
  at::ScalarType dtype;
  bool wanted = true;  // false: an output the caller did not ask for (Note [Several outputs in C++])
  c10::SmallVector<int64_t, 6> strides;  // the meta kernel's, where strided (Note [Meta shapes in C++])
  bool strided = false;
};

inline void same_shape(Spec& spec, const at::Tensor& t) { spec.shape.assign(t.sizes().begin(), t.sizes().end()); }

// A size as the kernel is given it (an int64_t, or a SymInt of a concrete size).
inline int64_t as_int(int64_t value) { return value; }
inline int64_t as_int(const c10::SymInt& value) { return value.guard_int(__FILE__, __LINE__); }

inline at::ScalarType float_dtype(at::ScalarType dtype) {
  return at::isFloatingType(dtype) || at::isComplexType(dtype) ? dtype
                                                               : c10::typeMetaToScalarType(c10::get_default_dtype());
}

template <class... Rest>
bool unary(Spec& spec, const at::Tensor& self, const Rest&...) {
  same_shape(spec, self);
  spec.dtype = self.scalar_type();
  return true;
}

template <class... Rest>
bool pointwise(Spec& spec, const at::Tensor& self, const Rest&... rest) {
  return unary(spec, self, rest...);
}

template <class... Rest>
bool pointwise_alike(Spec& spec, const at::Tensor& self, const Rest&... rest) {
  return unary(spec, self, rest...);
}

template <class... Rest>
bool unary_real(Spec& spec, const at::Tensor& self, const Rest&...) {
  same_shape(spec, self);
  spec.dtype = at::isComplexType(self.scalar_type()) ? c10::toRealValueType(self.scalar_type()) : self.scalar_type();
  return true;
}

template <class... Rest>
bool unary_float(Spec& spec, const at::Tensor& self, const Rest&...) {
  same_shape(spec, self);
  spec.dtype = float_dtype(self.scalar_type());
  return true;
}

template <class... Rest>
bool unary_bool(Spec& spec, const at::Tensor& self, const Rest&...) {
  same_shape(spec, self);
  spec.dtype = at::kBool;
  return true;
}

// Broadcast two shapes as torch._C._infer_size does; false where they do not broadcast.
inline bool broadcast(Spec& spec, c10::IntArrayRef a, c10::IntArrayRef b) {
  if (a.equals(b)) {
    spec.shape.assign(a.begin(), a.end());
    return true;
  }
  size_t n = std::max(a.size(), b.size());
  spec.shape.resize(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    spec.shape[i] = x == 1 ? y : x;
  }
  return true;
}

template <class... Rest>
bool binary(Spec& spec, const at::Tensor& self, const at::Tensor& other, const Rest&...) {
  if (!broadcast(spec, self.sizes(), other.sizes())) return false;
  spec.dtype = self.scalar_type() == other.scalar_type() ? self.scalar_type() : at::result_type(self, other);
  return true;
}
template <class... Rest>
bool binary(Spec& spec, const at::Tensor& self, const at::Scalar& other, const Rest&...) {
  same_shape(spec, self);
  spec.dtype = at::result_type(self, other);
  return true;
}

template <class Other, class... Rest>
bool binary_float(Spec& spec, const at::Tensor& self, const Other& other, const Rest&...) {
  if (!binary(spec, self, other)) return false;
  spec.dtype = float_dtype(spec.dtype);
  return true;
}

// True division gives the default float dtype for integers; a rounding mode keeps the promoted one.
template <class Other>
bool divide(Spec& spec, const at::Tensor& self, const Other& other) {
  return binary_float(spec, self, other);
}
template <class Other, class... Rest>
bool divide(Spec& spec, const at::Tensor& self, const Other& other, const std::optional<c10::string_view>& mode,
            const Rest&...) {
  return mode.has_value() ? binary(spec, self, other) : binary_float(spec, self, other);
}

template <class... Rest>
bool compare(Spec& spec, const at::Tensor& self, const at::Tensor& other, const Rest&...) {
  if (!broadcast(spec, self.sizes(), other.sizes())) return false;
  spec.dtype = at::kBool;
  return true;
}
template <class... Rest>
bool compare(Spec& spec, const at::Tensor& self, const at::Scalar&, const Rest&...) {
  same_shape(spec, self);
  spec.dtype = at::kBool;
  return true;
}

// Three-way broadcast (addcmul, addcdiv); operands of mixed dtypes are left to the Python rule.
template <class... Rest>
bool ternary(Spec& spec, const at::Tensor& self, const at::Tensor& first, const at::Tensor& second, const Rest&...) {
  if (first.scalar_type() != self.scalar_type() || second.scalar_type() != self.scalar_type()) return false;
  Spec pair;
  if (!broadcast(pair, self.sizes(), first.sizes()) || !broadcast(spec, pair.shape, second.sizes())) return false;
  spec.dtype = self.scalar_type();
  return true;
}

// where(condition, self, other): three-way broadcast; a condition that is not bool, or self and other of mixed
// dtypes, are left to the Python rule (and the error or the promotion it gives).
template <class... Rest>
bool where(Spec& spec, const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, const Rest&...) {
  if (condition.scalar_type() != at::kBool || other.scalar_type() != self.scalar_type()) return false;
  Spec pair;
  if (!broadcast(pair, condition.sizes(), self.sizes()) || !broadcast(spec, pair.shape, other.sizes())) return false;
  spec.dtype = self.scalar_type();
  return true;
}

template <class... Rest>
bool mm(Spec& spec, const at::Tensor& self, const at::Tensor& mat2, const Rest&...) {
  if (self.dim() != 2 || mat2.dim() != 2) return false;
  spec.shape = {self.size(0), mat2.size(1)};
  spec.dtype = self.scalar_type();
  return true;
}

template <class... Rest>
bool bmm(Spec& spec, const at::Tensor& self, const at::Tensor& mat2, const Rest&...) {
  if (self.dim() != 3 || mat2.dim() != 3) return false;
  spec.shape = {self.size(0), self.size(1), mat2.size(2)};
  spec.dtype = self.scalar_type();
  return true;
}

template <class... Rest>
bool addmm(Spec& spec, const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const Rest&...) {
  if (mat1.dim() != 2 || mat2.dim() != 2) return false;
  spec.shape = {mat1.size(0), mat2.size(1)};
  spec.dtype = self.scalar_type();
  return true;
}

template <class First, class... Rest>  // the first: a gradient, or normal's float mean
bool like_self(Spec& spec, const First&, const at::Tensor& self, const Rest&...) {
  return unary(spec, self);
}

template <class... Rest>
bool broadcast_grad(Spec& spec, const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                    const Rest&...) {
  Spec pair;
  if (!broadcast(pair, self.sizes(), target.sizes()) || !broadcast(spec, pair.shape, grad_output.sizes())) return false;
  spec.dtype = self.scalar_type();
  return true;
}

// sum/mean over `dims` (all when none or empty), as _reduced_shape; false for a dim out of range.
inline bool reduced_shape(Spec& spec, const at::Tensor& self, c10::IntArrayRef dims, bool keepdim) {
  const int64_t ndim = self.dim();
  c10::SmallVector<bool, 6> reduced(ndim, dims.empty());
  for (int64_t d : dims) {
    if (ndim == 0 ? (d < -1 || d > 0) : (d < -ndim || d >= ndim)) return false;
    if (ndim) reduced[d < 0 ? d + ndim : d] = true;
  }
  spec.shape.clear();
  for (int64_t i = 0; i < ndim; ++i) {
    if (!reduced[i])
      spec.shape.push_back(self.size(i));
    else if (keepdim)
      spec.shape.push_back(1);
  }
  return true;
}

inline at::ScalarType reduction_dtype(const at::Tensor& self, const std::optional<at::ScalarType>& dtype) {
  if (dtype.has_value()) return *dtype;
  return at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()) ? self.scalar_type()
                                                                                         : at::kLong;
}

template <class... Rest>
bool reduction(Spec& spec, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
               const std::optional<at::ScalarType>& dtype, const Rest&...) {
  if (!reduced_shape(spec, self, dim.has_value() ? *dim : c10::IntArrayRef(), keepdim)) return false;
  spec.dtype = reduction_dtype(self, dtype);
  return true;
}

template <class... Rest>
bool sum_all(Spec& spec, const at::Tensor& self, const std::optional<at::ScalarType>& dtype, const Rest&...) {
  spec.shape.clear();
  spec.dtype = reduction_dtype(self, dtype);
  return true;
}
inline bool sum_all(Spec& spec, const at::Tensor& self) { return sum_all(spec, self, std::nullopt); }

// arange's length, ceil((end - start) / step) in double as the Python rule computes it, and its dtype: the default
// float dtype where a bound is a float, else int64. A zero, non-finite or complex step and a bool bound are left
// to the Python path (which raises the CPU's error or computes with Python's numbers).
template <class... Rest>
bool arange(Spec& spec, const at::Scalar& start, const at::Scalar& end, const at::Scalar& step, const Rest&...) {
  bool is_float = false;
  for (const at::Scalar* v : {&start, &end, &step}) {
    if (v->isComplex() || v->isBoolean()) return false;
    is_float = is_float || v->isFloatingPoint();
  }
  const double span = (end.toDouble() - start.toDouble()) / step.toDouble();
  if (step.toDouble() == 0 || !std::isfinite(span) ||
      (!is_float && (std::abs(start.toLong()) > (int64_t{1} << 53) || std::abs(end.toLong()) > (int64_t{1} << 53))))
    return false;  // beyond 2**53 Python's integer division rounds otherwise than double's
  spec.shape = {std::max<int64_t>(0, static_cast<int64_t>(std::ceil(span)))};
  spec.dtype = is_float ? c10::typeMetaToScalarType(c10::get_default_dtype()) : at::kLong;
  return true;
}
template <class... Rest>
bool arange_end(Spec& spec, const at::Scalar& end, const Rest&...) {
  return arange(spec, at::Scalar(int64_t{0}), end, at::Scalar(int64_t{1}));
}

template <class... Rest>
bool reduce_all(Spec& spec, const at::Tensor& self, const std::optional<at::ScalarType>& dtype, const Rest&...) {
  spec.shape.clear();
  spec.dtype = dtype.value_or(self.scalar_type());
  return true;
}
inline bool reduce_all(Spec& spec, const at::Tensor& self) { return reduce_all(spec, self, std::nullopt); }

// multinomial: num_samples int64 indices per row of probabilities (a vector or a matrix of them).
template <class Int, class... Rest>
bool multinomial(Spec& spec, const at::Tensor& self, const Int& num_samples, const Rest&...) {
  const int64_t samples = as_int(num_samples);
  if (self.dim() < 1 || self.dim() > 2 || samples < 0) return false;
  spec.shape.assign(self.sizes().begin(), self.sizes().end() - 1);
  spec.shape.push_back(samples);
  spec.dtype = at::kLong;
  return true;
}

// ---- several outputs (Note [Several outputs in C++] in scripts/autogen/dest/cpp_wrappers.py) -------------

// The statistics' dtype of a normalization: float32 when a parameter's dtype differs from the input's
// (mixed precision), else the input's (_statistics_dtype).
inline at::ScalarType statistics_dtype(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                                       const std::optional<at::Tensor>& bias) {
  for (const auto* param : {&weight, &bias})
    if (param->has_value() && (*param)->defined() && (*param)->scalar_type() != input.scalar_type()) return at::kFloat;
  return input.scalar_type();
}

// The trailing dims of `input` are `normalized_shape`; false (the Python path raises) otherwise.
template <class Sizes>
bool normalized_axis(const at::Tensor& input, const Sizes& normalized_shape, int64_t& axis) {
  axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  if (axis < 0) return false;
  for (size_t i = 0; i < normalized_shape.size(); ++i)
    if (input.sizes()[axis + i] != as_int(normalized_shape[i])) return false;
  return true;
}

// (out, mean, rstd): the input's shape and dtype, and [*leading dims, 1 per normalized dim] in the
// statistics' dtype.
template <class Sizes, class... Rest>
bool native_layer_norm(std::array<Spec, 3>& specs, const at::Tensor& input, const Sizes& normalized_shape,
                       const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, const Rest&...) {
  int64_t axis;
  if (!normalized_axis(input, normalized_shape, axis)) return false;
  same_shape(specs[0], input);
  specs[0].dtype = input.scalar_type();
  specs[1].shape.assign(input.sizes().begin(), input.sizes().begin() + axis);
  specs[1].shape.resize(input.dim(), 1);
  specs[1].dtype = statistics_dtype(input, weight, bias);
  specs[2] = specs[1];
  return true;
}

// The meta kernel's (grad_input, grad_weight, grad_bias): each in the shape and dtype of input, weight and
// bias, wanted where output_mask says and the parameter is present (the meta kernel's None for an absent
// one). An empty input (ATen gives zeros there, not an empty tensor) is left to the Python path.
template <class Sizes, class Mask>
bool native_layer_norm_backward(std::array<Spec, 3>& specs, const at::Tensor& grad_out, const at::Tensor& input,
                                const Sizes& normalized_shape, const at::Tensor& mean, const at::Tensor& rstd,
                                const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
                                const Mask& output_mask) {
  int64_t axis;
  if (!normalized_axis(input, normalized_shape, axis) || input.numel() == 0 || !grad_out.sizes().equals(input.sizes()))
    return false;
  const at::Tensor* sources[3] = {&input, weight.has_value() ? &*weight : nullptr, bias.has_value() ? &*bias : nullptr};
  for (size_t i = 0; i < 3; ++i) {
    specs[i].wanted = output_mask[i] && sources[i] != nullptr && sources[i]->defined();
    if (!specs[i].wanted) continue;
    same_shape(specs[i], *sources[i]);
    specs[i].dtype = sources[i]->scalar_type();
  }
  return true;
}

// (values, indices) of a reduction over one dim (max, min, median, mode): the reduced shape in the input's dtype
// and in int64; false for a dim out of range.
template <class... Rest>
bool max_dim(std::array<Spec, 2>& specs, const at::Tensor& self, int64_t dim, bool keepdim, const Rest&...) {
  if (!reduced_shape(specs[0], self, c10::IntArrayRef(dim), keepdim)) return false;
  specs[0].dtype = self.scalar_type();
  specs[1].shape = specs[0].shape;
  specs[1].dtype = at::kLong;
  return true;
}

// (out, mean, rstd) of a group norm: the input's shape and dtype, and (N, group) in the statistics' dtype.
template <class Int, class... Rest>
bool native_group_norm(std::array<Spec, 3>& specs, const at::Tensor& input, const std::optional<at::Tensor>& weight,
                       const std::optional<at::Tensor>& bias, const Int& n, const Int&, const Int&, int64_t group,
                       const Rest&...) {
  same_shape(specs[0], input);
  specs[0].dtype = input.scalar_type();
  specs[1].shape.assign({as_int(n), group});
  specs[1].dtype = statistics_dtype(input, weight, bias);
  specs[2] = specs[1];
  return true;
}

// The fused recurrent cells nn.LSTMCell, nn.GRUCell and their backwards call on dipu (torch takes its fused kernels
// on PrivateUse1): each output in the dtype of the tensor it is shaped after (unary's spec of that tensor).

// (hy, cy, workspace) of an LSTM cell: the cell state's shape twice, and the input gates'.
template <class... Rest>
bool fused_lstm_cell(std::array<Spec, 3>& specs, const at::Tensor& input_gates, const at::Tensor&, const at::Tensor& cx,
                     const Rest&...) {
  unary(specs[0], cx);
  unary(specs[1], cx);
  unary(specs[2], input_gates);
  return true;
}

// (grad_gates, grad_cx, grad_bias) of its backward: the workspace's shape, the cell state's, and one gate row,
// wanted with a bias.
template <class... Rest>
bool fused_lstm_cell_backward(std::array<Spec, 3>& specs, const std::optional<at::Tensor>&,
                              const std::optional<at::Tensor>&, const at::Tensor& cx, const at::Tensor&,
                              const at::Tensor& workspace, bool has_bias, const Rest&...) {
  if (workspace.dim() != 2) return false;
  unary(specs[0], workspace);
  unary(specs[1], cx);
  specs[2].shape.assign({workspace.size(1)});
  specs[2].dtype = workspace.scalar_type();
  specs[2].wanted = has_bias;
  return true;
}

// (hy, workspace) of a GRU cell: the hidden state's shape, and five gate rows per batch element.
template <class... Rest>
bool fused_gru_cell(std::array<Spec, 2>& specs, const at::Tensor&, const at::Tensor&, const at::Tensor& hx,
                    const Rest&...) {
  if (hx.dim() != 2) return false;
  unary(specs[0], hx);
  specs[1].shape.assign({hx.size(0), hx.size(1) * 5});
  specs[1].dtype = hx.scalar_type();
  return true;
}

// (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias) of its backward: three gate rows
// per batch element twice, the hidden state's shape, and three gate rows twice, wanted with a bias.
template <class... Rest>
bool fused_gru_cell_backward(std::array<Spec, 5>& specs, const at::Tensor& grad_hy, const at::Tensor&, bool has_bias,
                             const Rest&...) {
  if (grad_hy.dim() != 2) return false;
  const int64_t gates = grad_hy.size(1) * 3;
  for (Spec& spec : specs) spec.dtype = grad_hy.scalar_type();
  specs[0].shape.assign({grad_hy.size(0), gates});
  specs[1].shape = specs[0].shape;
  same_shape(specs[2], grad_hy);
  specs[3].shape.assign({gates});
  specs[4].shape = specs[3].shape;
  specs[3].wanted = specs[4].wanted = has_bias;
  return true;
}

// ---- C++ twins of meta kernels (CPP_META_TWINS in dipu/ops/shape_rules.py) --------------------
// Their specs take their shapes from the meta kernel, which torch writes in Python for these: each rule here
// gives the meta kernel's answer for the well-formed calls of the hot path (contiguous outputs) and false for
// the rest, which the Python path sends to the meta kernel (and its error).

inline bool index_dtype(const at::Tensor& t) { return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt; }

// embedding: a row of the weight matrix per index.
template <class... Rest>
bool embedding(Spec& spec, const at::Tensor& weight, const at::Tensor& indices, const Rest&...) {
  if (weight.dim() != 2 || !index_dtype(indices)) return false;
  spec.shape.assign(indices.sizes().begin(), indices.sizes().end());
  spec.shape.push_back(weight.size(1));
  spec.dtype = weight.scalar_type();
  return true;
}

// embedding_dense_backward: the weight's gradient, num_weights rows of the gradient's last dim.
template <class Int, class... Rest>
bool embedding_dense_backward(Spec& spec, const at::Tensor& grad_output, const at::Tensor& indices,
                              const Int& num_weights, const Rest&...) {
  if (grad_output.dim() < 1 || !index_dtype(indices) || as_int(num_weights) < 0) return false;
  spec.shape.assign({as_int(num_weights), grad_output.size(-1)});
  spec.dtype = grad_output.scalar_type();
  return true;
}

// argmax/argmin: int64 indices over `dim` reduced, or over every element (a 0-dim result, all ones with keepdim).
// A reduction over no elements is left to the Python path, which raises the CPU's error.
inline bool arg_reduction(Spec& spec, const at::Tensor& self, const std::optional<int64_t>& dim, bool keepdim) {
  spec.dtype = at::kLong;
  if (!dim.has_value()) {
    spec.shape.assign(keepdim ? self.dim() : 0, 1);
    return self.numel() > 0;
  }
  const int64_t d = *dim;
  if (!reduced_shape(spec, self, c10::IntArrayRef(d), keepdim)) return false;
  return self.dim() == 0 || self.size(d < 0 ? d + self.dim() : d) > 0;
}
inline bool argmax(Spec& spec, const at::Tensor& self, const std::optional<int64_t>& dim, bool keepdim) {
  return arg_reduction(spec, self, dim, keepdim);
}
inline bool argmin(Spec& spec, const at::Tensor& self, const std::optional<int64_t>& dim, bool keepdim) {
  return arg_reduction(spec, self, dim, keepdim);
}

// index_select: the input with `dim` cut to the index's length.
template <class... Rest>
bool index_select(Spec& spec, const at::Tensor& self, int64_t dim, const at::Tensor& index, const Rest&...) {
  if (self.dim() < 1 || index.dim() > 1 || !index_dtype(index) || dim < -self.dim() || dim >= self.dim()) return false;
  same_shape(spec, self);
  spec.shape[dim < 0 ? dim + self.dim() : dim] = index.numel();
  spec.dtype = self.scalar_type();
  return true;
}

// stack: the tensors' shape with a dim of their number inserted at `dim`, laid out contiguously where ATen's is. ATen
// concatenates the tensors along `dim` and views the result (the tensors unsqueezed, for the last dim), and cat's
// output is contiguous where an input's suggested memory format is (a transposed gradient's is; a channels_last
// tensor's is not). None, tensors of different shapes (the meta kernel's error), of different dtypes (its promotion)
// or laid out as channels_last (its layout), and a dim out of range are left to the Python path.
template <class... Rest>
bool stack(Spec& spec, at::TensorList tensors, int64_t dim, const Rest&...) {
  if (tensors.empty()) return false;
  const at::Tensor& first = tensors[0];
  const int64_t rank = first.dim() + 1;
  if (dim < -rank || dim >= rank) return false;
  const int64_t axis = dim < 0 ? dim + rank : dim;
  for (const at::Tensor& t : tensors)
    if (t.sizes() != first.sizes() || t.scalar_type() != first.scalar_type() ||
        (axis < t.dim() ? t : t.unsqueeze(axis)).suggest_memory_format() != at::MemoryFormat::Contiguous)
      return false;
  same_shape(spec, first);
  spec.shape.insert(spec.shape.begin() + axis, static_cast<int64_t>(tensors.size()));
  spec.dtype = first.scalar_type();
  return true;
}

// native_group_norm_backward's (grad_input, grad_weight, grad_bias), which torch's decomposition computes as its meta
// kernel: the input's shape and [C] twice, wanted where output_mask says, for a contiguous input whose tensors
// share its dtype (mixed dtypes take the decomposition's type promotion, on the Python path).
template <class Int, class Mask>
bool native_group_norm_backward(std::array<Spec, 3>& specs, const at::Tensor& grad_out, const at::Tensor& input,
                                const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                                const Int& n, const Int& c, const Int& hxw, int64_t group, const Mask& output_mask) {
  const at::ScalarType type = input.scalar_type();
  const int64_t channels = as_int(c);
  if (!input.is_contiguous() || input.dim() < 2 || !grad_out.sizes().equals(input.sizes()) || group <= 0 ||
      channels % group != 0 || input.numel() != as_int(n) * channels * as_int(hxw) || grad_out.scalar_type() != type ||
      mean.scalar_type() != type || rstd.scalar_type() != type ||
      (weight.has_value() && weight->defined() && weight->scalar_type() != type))
    return false;
  for (size_t i = 0; i < 3; ++i) {
    specs[i].wanted = output_mask[i];
    specs[i].dtype = type;
    if (i == 0)
      same_shape(specs[i], input);
    else
      specs[i].shape.assign({channels});
  }
  return true;
}

// reflection_pad2d: the input with H + top + bottom rows and W + left + right columns, for a contiguous input of
// non-empty dims whose pads are each smaller than the dim they pad (the meta kernel's checks).
template <class Sizes>
bool reflection_pad2d(Spec& spec, const at::Tensor& input, const Sizes& padding) {
  const int64_t rank = input.dim();
  if ((rank != 3 && rank != 4) || padding.size() != 4 || !input.is_contiguous() ||
      (rank == 4 && input.is_contiguous(at::MemoryFormat::ChannelsLast)))
    return false;
  for (int64_t d = rank - 3; d < rank; ++d)
    if (input.size(d) == 0) return false;
  const int64_t left = as_int(padding[0]), right = as_int(padding[1]), top = as_int(padding[2]),
                bottom = as_int(padding[3]), h = input.size(rank - 2), w = input.size(rank - 1);
  if (std::min({left, right, top, bottom}) < 0 || std::max(left, right) >= w || std::max(top, bottom) >= h)
    return false;
  same_shape(spec, input);
  spec.shape[rank - 2] = h + top + bottom;
  spec.shape[rank - 1] = w + left + right;
  spec.dtype = input.scalar_type();
  return true;
}

// The losses of binary_cross_entropy(_with_logits): the input's shape for reduction none, else 0-dim; in the input's
// dtype, for a contiguous input and target (the decomposition's elementwise ops lay the losses out as they are) of
// one shape and dtype, and weights of that dtype expandable to it.
inline bool pointwise_loss(Spec& spec, const at::Tensor& self, const at::Tensor& target,
                           std::initializer_list<const std::optional<at::Tensor>*> weights, int64_t reduction) {
  if (!self.is_contiguous() || !target.is_contiguous() || !target.sizes().equals(self.sizes()) ||
      target.scalar_type() != self.scalar_type() || !at::isFloatingType(self.scalar_type()))
    return false;
  for (const auto* weight : weights)
    if (weight->has_value() && (*weight)->defined() &&
        ((*weight)->scalar_type() != self.scalar_type() || !at::is_expandable_to((*weight)->sizes(), self.sizes())))
      return false;
  if (reduction == 0)
    same_shape(spec, self);
  else
    spec.shape.clear();
  spec.dtype = self.scalar_type();
  return true;
}

inline bool binary_cross_entropy(Spec& spec, const at::Tensor& self, const at::Tensor& target,
                                 const std::optional<at::Tensor>& weight, int64_t reduction) {
  return pointwise_loss(spec, self, target, {&weight}, reduction);
}

inline bool binary_cross_entropy_with_logits(Spec& spec, const at::Tensor& self, const at::Tensor& target,
                                             const std::optional<at::Tensor>& weight,
                                             const std::optional<at::Tensor>& pos_weight, int64_t reduction) {
  return pointwise_loss(spec, self, target, {&weight, &pos_weight}, reduction);
}

// var and std over `dim` (all when none or empty): the reduced shape, in the real dtype of a floating or complex
// input.
inline bool variance(Spec& spec, const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const at::ScalarType type = self.scalar_type();
  if (!(at::isFloatingType(type) || at::isComplexType(type)) ||
      !reduced_shape(spec, self, dim.has_value() ? *dim : c10::IntArrayRef(), keepdim))
    return false;
  spec.dtype = c10::toRealValueType(type);
  return true;
}
template <class Correction>
bool var_correction(Spec& spec, const at::Tensor& self, at::OptionalIntArrayRef dim, const Correction&, bool keepdim) {
  return variance(spec, self, dim, keepdim);
}
template <class Correction>
bool std_correction(Spec& spec, const at::Tensor& self, at::OptionalIntArrayRef dim, const Correction&, bool keepdim) {
  return variance(spec, self, dim, keepdim);
}

// repeat: each dim of the input (ones in front where `repeats` has more) times its repeat.
template <class Sizes>
bool repeat(Spec& spec, const at::Tensor& self, const Sizes& repeats) {
  const int64_t extra = static_cast<int64_t>(repeats.size()) - self.dim();
  if (extra < 0) return false;
  spec.shape.clear();
  for (size_t i = 0; i < repeats.size(); ++i) {
    const int64_t times = as_int(repeats[i]);
    if (times < 0) return false;
    spec.shape.push_back(times * (static_cast<int64_t>(i) < extra ? 1 : self.size(static_cast<int64_t>(i) - extra)));
  }
  spec.dtype = self.scalar_type();
  return true;
}

// dot: a 0-dim product of two vectors of one length and dtype.
inline bool dot(Spec& spec, const at::Tensor& self, const at::Tensor& tensor) {
  if (self.dim() != 1 || tensor.dim() != 1 || self.size(0) != tensor.size(0) ||
      self.scalar_type() != tensor.scalar_type())
    return false;
  spec.shape.clear();
  spec.dtype = self.scalar_type();
  return true;
}

// mv: a matrix's rows times a vector of its width and dtype.
inline bool mv(Spec& spec, const at::Tensor& self, const at::Tensor& vec) {
  if (self.dim() != 2 || vec.dim() != 1 || self.size(1) != vec.size(0) || self.scalar_type() != vec.scalar_type())
    return false;
  spec.shape.assign({self.size(0)});
  spec.dtype = self.scalar_type();
  return true;
}

// sort's (values, indices): the input's shape, in its dtype and in int64, for a contiguous input (whose strides
// empty_like keeps).
inline bool sort_specs(std::array<Spec, 2>& specs, const at::Tensor& self) {
  if (!self.is_contiguous()) return false;
  same_shape(specs[0], self);
  specs[0].dtype = self.scalar_type();
  specs[1].shape = specs[0].shape;
  specs[1].dtype = at::kLong;
  return true;
}
template <class... Rest>
bool sort(std::array<Spec, 2>& specs, const at::Tensor& self, const Rest&...) {
  return sort_specs(specs, self);
}
template <class... Rest>
bool sort_stable(std::array<Spec, 2>& specs, const at::Tensor& self, const Rest&...) {
  return sort_specs(specs, self);
}

// masked_scatter: the input's shape and dtype, for a mask of the input's shape (no broadcasting).
inline bool masked_scatter(Spec& spec, const at::Tensor& self, const at::Tensor& mask, const at::Tensor&) {
  if (!mask.sizes().equals(self.sizes())) return false;
  same_shape(spec, self);
  spec.dtype = self.scalar_type();
  return true;
}

// logsumexp of a non-empty floating input over `dim` (all when empty).
inline bool logsumexp(Spec& spec, const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
  if (!at::isFloatingType(self.scalar_type()) || self.numel() == 0 || !reduced_shape(spec, self, dim, keepdim))
    return false;
  spec.dtype = self.scalar_type();
  return true;
}

// prod of every element: 0-dim, in `dtype`, else int64 for an integral or bool input, else the input's dtype.
inline bool prod(Spec& spec, const at::Tensor& self, const std::optional<at::ScalarType>& dtype) {
  return sum_all(spec, self, dtype);
}

// var_mean and std_mean: the statistic in the real dtype of a floating or complex input, the mean in its dtype.
template <class Correction>
bool var_mean_correction(std::array<Spec, 2>& specs, const at::Tensor& self, at::OptionalIntArrayRef dim,
                         const Correction&, bool keepdim) {
  if (!variance(specs[0], self, dim, keepdim)) return false;
  specs[1].shape = specs[0].shape;
  specs[1].dtype = self.scalar_type();
  return true;
}
template <class Correction>
bool std_mean_correction(std::array<Spec, 2>& specs, const at::Tensor& self, at::OptionalIntArrayRef dim,
                         const Correction& correction, bool keepdim) {
  return var_mean_correction(specs, self, dim, correction, keepdim);
}

// _weight_norm_interface's (w, norm) as torch's decomposition computes them: w of v's shape, the norm over every dim
// but `dim` (kept as ones), float32 where g is bfloat16; for a contiguous v, and g of its dtype with v.size(dim)
// elements.
inline bool _weight_norm_interface(std::array<Spec, 2>& specs, const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  if (!v.is_contiguous() || dim < 0 || dim >= v.dim() || g.scalar_type() != v.scalar_type() ||
      g.numel() != v.size(dim) || !at::isFloatingType(v.scalar_type()))
    return false;
  same_shape(specs[0], v);
  specs[0].dtype = v.scalar_type();
  specs[1].shape.assign(v.dim(), 1);
  specs[1].shape[dim] = v.size(dim);
  specs[1].dtype = g.scalar_type() == at::kBFloat16 ? at::kFloat : v.scalar_type();
  return true;
}

// _weight_norm_interface_backward's (grad_v, grad_g): empty_like saved_v and saved_g, for contiguous ones.
inline bool _weight_norm_interface_backward(std::array<Spec, 2>& specs, const at::Tensor&, const at::Tensor& saved_v,
                                            const at::Tensor& saved_g, const at::Tensor&, int64_t) {
  if (!saved_v.is_contiguous() || !saved_g.is_contiguous()) return false;
  for (size_t i = 0; i < 2; ++i) {
    same_shape(specs[i], i == 0 ? saved_v : saved_g);
    specs[i].dtype = (i == 0 ? saved_v : saved_g).scalar_type();
  }
  return true;
}

// log_sigmoid_forward's (output, buffer) as torch's decomposition computes them off CUDA: both of the input's shape
// and dtype, for a contiguous floating input.
inline bool log_sigmoid_forward(std::array<Spec, 2>& specs, const at::Tensor& self) {
  if (!self.is_contiguous() || !at::isFloatingType(self.scalar_type())) return false;
  same_shape(specs[0], self);
  specs[0].dtype = self.scalar_type();
  specs[1] = specs[0];
  return true;
}

// nll_loss2d_forward's (output, total_weight): the per-pixel losses (N, H, W) for reduction none, else a 0-dim loss;
// a 0-dim total weight. An (N, C, H, W) input, int64 targets of shape (N, H, W), a weight of one element per class.
template <class Int>
bool nll_loss2d_forward(std::array<Spec, 2>& specs, const at::Tensor& self, const at::Tensor& target,
                        const std::optional<at::Tensor>& weight, int64_t reduction, const Int&) {
  if (self.dim() != 4 || target.dim() != 3 || target.scalar_type() != at::kLong || target.size(0) != self.size(0) ||
      target.size(1) != self.size(2) || target.size(2) != self.size(3) ||
      (weight.has_value() && weight->defined() && weight->numel() != self.size(1)))
    return false;
  specs[0].shape.clear();
  if (reduction == 0) specs[0].shape.assign(target.sizes().begin(), target.sizes().end());
  specs[0].dtype = self.scalar_type();
  specs[1].shape.clear();
  specs[1].dtype = self.scalar_type();
  return true;
}

// nll_loss_forward's (output, total_weight): per-sample losses for reduction none of a batch, else a 0-dim
// loss; a 0-dim total weight. Class-index targets of int64 only, a weight of one element per class.
template <class Int, class... Rest>
bool nll_loss_forward(std::array<Spec, 2>& specs, const at::Tensor& self, const at::Tensor& target,
                      const std::optional<at::Tensor>& weight, int64_t reduction, const Int&, const Rest&...) {
  const bool batch = self.dim() == 2;
  if ((self.dim() != 1 && !batch) || target.scalar_type() != at::kLong || target.dim() != (batch ? 1 : 0) ||
      (batch && target.size(0) != self.size(0)) ||
      (weight.has_value() && weight->defined() && weight->numel() != self.size(-1)))
    return false;
  specs[0].shape.clear();
  if (batch && reduction == 0) specs[0].shape.push_back(self.size(0));
  specs[0].dtype = self.scalar_type();
  specs[1].shape.clear();
  specs[1].dtype = self.scalar_type();
  return true;
}

}  // namespace dipu::cwrap::rules
