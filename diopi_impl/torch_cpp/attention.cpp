// The torch op library's attention in C++ (Note [The DIOPI attention contract] in dipu/ops/attention.py): the twin
// of diopi_impl/torch/attention.py, line by line, and of the blockwise algorithm it uses where ATen's fused CPU kernel
// does not fit (Note [Blockwise attention] in dipu/diopi/attention.py). Both libraries run the same ATen calls in the
// same order, so they give the same numbers and draw the same dropout masks from one seed; the conformance suite
// (tests/test_conformance.py) and tests/test_attention.py compare them with the CPU.
#include <diopi/functions.h>

#include "support.h"

#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_ops.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_ops.h>

#include <algorithm>
#include <limits>

namespace tc = dipu::torch_cpp;

// dipu/diopi/attention.py's _BLOCK_ELEMENTS: the most score elements one block holds. Exported for the tests, which
// make blocks of one query row as they do the Python library's (tests/test_attention.py).
extern "C" DIPU_EXPORT int64_t dipuTorchCppAttentionBlockElements;
int64_t dipuTorchCppAttentionBlockElements = int64_t{1} << 24;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- dipu/diopi/attention.py ----

at::ScalarType accumulation_dtype(at::ScalarType dtype) { return dtype == at::kDouble ? at::kDouble : at::kFloat; }

int64_t rows_per_block(const at::Tensor& query, const at::Tensor& key) {
  const int64_t length = query.size(2);
  const int64_t row = std::max<int64_t>(1, query.size(0) * query.size(1) * key.size(-2));
  return std::max<int64_t>(1, std::min<int64_t>(length, dipuTorchCppAttentionBlockElements / row));
}

at::Tensor repeat_heads(const at::Tensor& tensor, int64_t heads) {
  const int64_t groups = heads / tensor.size(1);
  return groups == 1 ? tensor : tensor.repeat_interleave(groups, 1);
}

at::Tensor sum_head_groups(const at::Tensor& grad, int64_t heads) {
  const int64_t repeated = grad.size(1);
  if (repeated == heads) return grad;
  std::vector<int64_t> shape{grad.size(0), heads, repeated / heads};
  shape.insert(shape.end(), grad.sizes().begin() + 2, grad.sizes().end());
  const int64_t groups = 2;
  return grad.view(shape).sum(at::IntArrayRef(groups));
}

int64_t visible_columns(bool is_causal, int64_t last, int64_t source) {
  return is_causal ? std::min(source, last) : source;
}

at::Tensor block_scores(const at::Tensor& query_rows, const at::Tensor& key, const std::optional<at::Tensor>& bias,
                        bool is_causal, double scale, int64_t first, at::ScalarType acc) {
  at::Tensor scores = query_rows.to(acc).matmul(key.to(acc).transpose(-2, -1)).mul_(scale);
  const int64_t rows = scores.size(-2), columns = scores.size(-1);
  if (bias.has_value()) {
    at::Tensor b = *bias;
    if (b.dim() >= 2 && b.size(-2) != 1) b = b.slice(-2, first, first + rows);
    if (b.size(-1) != 1) b = b.slice(-1, 0, columns);
    if (b.scalar_type() == at::kBool)
      scores.masked_fill_(b.bitwise_not(), -kInf);
    else
      scores.add_(b);
  }
  if (is_causal) scores.masked_fill_(scores.new_ones({rows, columns}, at::kBool).triu_(first + 1), -kInf);
  return scores;
}

at::Tensor keep_mask(const at::Tensor& weights, int64_t source, double dropout_p,
                     const std::optional<at::Generator>& generator) {
  std::vector<int64_t> shape(weights.sizes().begin(), weights.sizes().end());
  shape.back() = source;
  at::Tensor keep = weights.new_empty(shape).bernoulli_(1 - dropout_p, generator).slice(-1, 0, weights.size(-1));
  return dropout_p < 1 ? keep.mul_(1.0 / (1 - dropout_p)) : keep;
}

void blockwise_forward(const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& query, at::Tensor key,
                       at::Tensor value, const std::optional<at::Tensor>& bias, double dropout_p, bool is_causal,
                       double scale, const std::optional<at::Generator>& generator) {
  const int64_t heads = query.size(1), length = query.size(2), source = key.size(-2);
  const at::ScalarType acc = accumulation_dtype(query.scalar_type());
  key = repeat_heads(key, heads);
  value = repeat_heads(value, heads);
  const at::Tensor value_acc = value.to(acc);
  const int64_t step = rows_per_block(query, key);
  for (int64_t first = 0; first < length; first += step) {
    const int64_t last = std::min(length, first + step);
    const int64_t columns = visible_columns(is_causal, last, source);
    at::Tensor scores =
        block_scores(query.slice(2, first, last), key.slice(2, 0, columns), bias, is_causal, scale, first, acc);
    const at::Tensor block_lse = scores.logsumexp(-1);
    at::Tensor weights = scores.sub_(block_lse.unsqueeze(-1)).exp_();
    if (dropout_p > 0) weights.mul_(keep_mask(weights, source, dropout_p, generator));
    out.slice(2, first, last).copy_(weights.matmul(value_acc.slice(2, 0, columns)));
    logsumexp.slice(2, first, last).copy_(block_lse);
  }
}

at::Tensor reduce_to_bias(const at::Tensor& grad_scores, at::IntArrayRef bias_shape) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < 4; ++i)
    if (bias_shape[i] == 1 && grad_scores.size(i) != 1) dims.push_back(i);
  return dims.empty() ? grad_scores : grad_scores.sum(dims, true);
}

void blockwise_backward(const at::Tensor& grad_query, const at::Tensor& grad_key, const at::Tensor& grad_value,
                        const at::Tensor& grad_bias, const at::Tensor& grad_out, const at::Tensor& query,
                        at::Tensor key, at::Tensor value, const std::optional<at::Tensor>& bias, double dropout_p,
                        bool is_causal, double scale, const std::optional<at::Generator>& generator) {
  const int64_t heads = query.size(1), length = query.size(2), kv_heads = key.size(1), source = key.size(-2);
  const at::ScalarType acc = accumulation_dtype(query.scalar_type());
  key = repeat_heads(key, heads);
  value = repeat_heads(value, heads);
  const at::Tensor key_acc = key.to(acc), value_acc = value.to(acc);
  const at::Tensor key_sum = grad_key.defined() ? key.new_zeros(key.sizes(), acc) : at::Tensor();
  const at::Tensor value_sum = grad_value.defined() ? value.new_zeros(value.sizes(), acc) : at::Tensor();
  at::Tensor bias_sum;
  if (grad_bias.defined()) {
    TORCH_CHECK(bias.has_value(),
                "diopiScaledDotProductAttentionBackward: grad_attn_bias was asked for without attn_bias");
    std::vector<int64_t> padded(4 - bias->dim(), 1);
    padded.insert(padded.end(), bias->sizes().begin(), bias->sizes().end());
    bias_sum = bias->new_zeros(padded, acc);
  }
  const int64_t step = rows_per_block(query, key);
  for (int64_t first = 0; first < length; first += step) {
    const int64_t last = std::min(length, first + step);
    const int64_t columns = visible_columns(is_causal, last, source);
    const at::Tensor query_rows = query.slice(2, first, last).to(acc);
    at::Tensor weights =
        block_scores(query_rows, key.slice(2, 0, columns), bias, is_causal, scale, first, acc).softmax(-1);
    const at::Tensor grad_rows = grad_out.slice(2, first, last).to(acc);
    at::Tensor grad_weights = grad_rows.matmul(value_acc.slice(2, 0, columns).transpose(-2, -1));
    if (dropout_p > 0) {
      const at::Tensor keep = keep_mask(weights, source, dropout_p, generator);
      if (value_sum.defined())
        value_sum.slice(2, 0, columns).add_(weights.mul(keep).transpose(-2, -1).matmul(grad_rows));
      grad_weights.mul_(keep);
    } else if (value_sum.defined()) {
      value_sum.slice(2, 0, columns).add_(weights.transpose(-2, -1).matmul(grad_rows));
    }
    // softmax backward: dS = P * (dP - rowsum(dP * P))
    const at::Tensor row_dot = grad_weights.mul(weights).sum(at::IntArrayRef(-1), true);
    at::Tensor grad_scores = grad_weights.sub_(row_dot).mul_(weights);
    weights.reset();
    if (bias_sum.defined()) {
      const at::Tensor reduced = reduce_to_bias(grad_scores, bias_sum.sizes());
      const at::Tensor rows = bias_sum.size(2) == 1 ? bias_sum : bias_sum.slice(2, first, last);
      (rows.size(3) == 1 ? rows : rows.slice(-1, 0, columns)).add_(reduced);
    }
    grad_scores.mul_(scale);
    if (grad_query.defined()) grad_query.slice(2, first, last).copy_(grad_scores.matmul(key_acc.slice(2, 0, columns)));
    if (key_sum.defined()) key_sum.slice(2, 0, columns).add_(grad_scores.transpose(-2, -1).matmul(query_rows));
  }
  if (grad_key.defined()) grad_key.copy_(sum_head_groups(key_sum, kv_heads));
  if (grad_value.defined()) grad_value.copy_(sum_head_groups(value_sum, kv_heads));
  if (grad_bias.defined()) grad_bias.copy_(bias_sum.view(grad_bias.sizes()));
}

// ---- diopi_impl/torch/attention.py ----

at::Tensor unit_stride(const at::Tensor& t) {
  return !t.defined() || t.stride(-1) == 1 || t.size(-1) == 1 ? t : t.contiguous();
}

bool fused_cpu_kernel_fits(const at::Tensor& query, const at::Tensor& value, double dropout_p) {
  return dropout_p == 0 && query.is_cpu() && query.size(-1) == value.size(-1);
}

std::optional<at::Tensor> flash_mask(const std::optional<at::Tensor>& bias, const at::Tensor& query,
                                     const at::Tensor& key) {
  if (!bias.has_value()) return std::nullopt;
  at::Tensor b = *bias;
  if (b.scalar_type() == at::kBool) b = query.new_zeros(b.sizes()).masked_fill_(b.bitwise_not(), -kInf);
  if (b.dim() != 2 && b.dim() != 4) b = b.expand({query.size(0), query.size(1), query.size(2), key.size(2)});
  return unit_stride(b);
}

std::optional<at::Generator> dropout_generator(double dropout_p, diopiGeneratorHandle_t generator) {
  return dropout_p > 0 ? tc::native_generator(generator) : std::nullopt;
}

}  // namespace

DIPU_EXPORT diopiError_t diopiScaledDotProductAttention(diopiContextHandle_t, diopiTensorHandle_t out,
                                                        diopiTensorHandle_t logsumexp, diopiConstTensorHandle_t query,
                                                        diopiConstTensorHandle_t key, diopiConstTensorHandle_t value,
                                                        diopiConstTensorHandle_t attn_bias, double dropout_p,
                                                        bool is_causal, double scale,
                                                        diopiGeneratorHandle_t generator) {
  return tc::guarded([&] {
    const c10::DeviceIndex d = tc::current_device();
    const at::Tensor q = tc::alias_of(query, d), k = tc::alias_of(key, d), v = tc::alias_of(value, d);
    const std::optional<at::Tensor> bias = tc::optional_alias(attn_bias, d);
    const at::Tensor o = tc::alias_of(out, d), lse = tc::alias_of(logsumexp, d);
    if (fused_cpu_kernel_fits(q, v, dropout_p)) {
      const int64_t heads = q.size(1);
      const auto [result, result_lse] = at::_ops::_scaled_dot_product_flash_attention_for_cpu::call(
          unit_stride(q), unit_stride(repeat_heads(k, heads)), unit_stride(repeat_heads(v, heads)), 0.0, is_causal,
          flash_mask(bias, q, k), scale);
      o.copy_(result);
      lse.copy_(result_lse);
      return;
    }
    blockwise_forward(o, lse, q, k, v, bias, dropout_p, is_causal, scale, dropout_generator(dropout_p, generator));
  });
}

DIPU_EXPORT diopiError_t diopiScaledDotProductAttentionBackward(
    diopiContextHandle_t, diopiTensorHandle_t grad_query, diopiTensorHandle_t grad_key, diopiTensorHandle_t grad_value,
    diopiTensorHandle_t grad_attn_bias, diopiConstTensorHandle_t grad_out, diopiConstTensorHandle_t query,
    diopiConstTensorHandle_t key, diopiConstTensorHandle_t value, diopiConstTensorHandle_t attn_bias,
    diopiConstTensorHandle_t out, diopiConstTensorHandle_t logsumexp, double dropout_p, bool is_causal, double scale,
    diopiGeneratorHandle_t generator) {
  return tc::guarded([&] {
    const c10::DeviceIndex d = tc::current_device();
    const at::Tensor q = tc::alias_of(query, d), k = tc::alias_of(key, d), v = tc::alias_of(value, d);
    const std::optional<at::Tensor> bias = tc::optional_alias(attn_bias, d);
    const std::array<at::Tensor, 4> grads{tc::alias_of(grad_query, d), tc::alias_of(grad_key, d),
                                          tc::alias_of(grad_value, d), tc::alias_of(grad_attn_bias, d)};
    if (!grads[3].defined() && fused_cpu_kernel_fits(q, v, dropout_p)) {
      const int64_t heads = q.size(1), kv_heads = k.size(1);
      const auto results = at::_ops::_scaled_dot_product_flash_attention_for_cpu_backward::call(
          unit_stride(tc::alias_of(grad_out, d)), unit_stride(q), unit_stride(repeat_heads(k, heads)),
          unit_stride(repeat_heads(v, heads)), unit_stride(tc::alias_of(out, d)), tc::alias_of(logsumexp, d), 0.0,
          is_causal, flash_mask(bias, q, k), scale);
      if (grads[0].defined()) grads[0].copy_(std::get<0>(results));
      if (grads[1].defined()) grads[1].copy_(sum_head_groups(std::get<1>(results), kv_heads));
      if (grads[2].defined()) grads[2].copy_(sum_head_groups(std::get<2>(results), kv_heads));
      return;
    }
    blockwise_backward(grads[0], grads[1], grads[2], grads[3], tc::alias_of(grad_out, d), q, k, v, bias, dropout_p,
                       is_causal, scale, dropout_generator(dropout_p, generator));
  });
}
