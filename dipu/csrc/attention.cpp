// Which kernel F.scaled_dot_product_attention runs on dipu.
//
// Note [Fused attention on dipu]
// ATen's scaled_dot_product_attention asks the device's `_fused_sdp_choice_stub` (a
// DispatchStub, so only C++ can fill it) which backend to run; a device without an entry
// gets the math decomposition (matmul, softmax, matmul, all of the L x S scores kept for
// backward). dipu answers `overrideable` whenever the overrideable backend is enabled
// (torch.nn.attention.sdpa_kernel) and the call has the shape the placeholder pair
// `_scaled_dot_product_fused_attention_overrideable(_backward)` describes: 4-d dense
// query/key/value (batch, heads, length, head dim) of one floating dtype, the same
// number of heads or a grouped-query layout with enable_gqa. Those placeholders are
// dipu kernels calling the DIOPI attention functions (dipu/ops/attention.py), or, for a
// vendor without them, CPU substitutes (dipu/ops/overrideable.py). Every other call, and
// every call once the user disables the overrideable backend, takes the math path, so
// its errors and results stay exactly PyTorch's.
#include "core.h"

#include <ATen/Context.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>

namespace dipu {
namespace {

bool overrideable_fits(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, bool is_causal, bool enable_gqa) {
  for (const at::Tensor* t : {&query, &key, &value}) {
    if (t->dim() != 4 || t->is_nested() || t->layout() != at::kStrided) return false;
  }
  if (!at::isFloatingType(query.scalar_type()) || key.scalar_type() != query.scalar_type() ||
      value.scalar_type() != query.scalar_type())
    return false;
  if (query.size(0) != key.size(0) || key.size(0) != value.size(0)) return false;
  if (query.size(-1) != key.size(-1) || key.size(-2) != value.size(-2)) return false;
  if (query.numel() == 0 || key.numel() == 0 || value.numel() == 0) return false;
  int64_t heads = query.size(1), kv_heads = key.size(1);
  if (value.size(1) != kv_heads) return false;
  if (heads != kv_heads && !(enable_gqa && heads % kv_heads == 0)) return false;
  // The math path reports masks it cannot take (and a mask together with is_causal).
  if (attn_mask.has_value() && (is_causal || attn_mask->dim() > 4 || attn_mask->is_nested())) return false;
  return true;
}

int64_t choose_sdp_backend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                           const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                           std::optional<double> scale, bool enable_gqa) {
  auto& context = at::globalContext();
  if (context.userEnabledOverrideableSDP() && overrideable_fits(query, key, value, attn_mask, is_causal, enable_gqa))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  TORCH_CHECK(context.userEnabledMathSDP(),
              "No viable backend for scaled_dot_product_attention was found on dipu: the overrideable "
              "(fused) backend ",
              context.userEnabledOverrideableSDP() ? "does not take these inputs" : "is disabled",
              " and the math backend is disabled. dipu's fused attention takes 4-d query/key/value of one "
              "floating dtype, with equal heads or enable_gqa=True.");
  return static_cast<int64_t>(at::SDPBackend::math);
}

}  // namespace
}  // namespace dipu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &dipu::choose_sdp_backend)
}  // namespace at::native
