// torch.autocast("dipu"): PyTorch's CUDA cast policy, registered for
// AutocastPrivateUse1 from the op lists ATen shares with backends for this
// purpose (ATen/autocast_mode.h), so the policy tracks the installed torch.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace {

// As on CUDA, binary_cross_entropy is unsafe to autocast: its log() of a
// half-precision probability underflows. CUDA raises the same advice.
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
              "layer. In this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits or torch.nn.BCEWithLogitsLoss, "
              "which are safe to autocast.");
}

}  // namespace

#define DIPU_LOW_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define DIPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define DIPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define DIPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

// The shared op lists name ATen types unqualified, as inside at::autocast.
namespace at::autocast {
namespace {

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(DIPU_LOW_PRECISION_FP)
  AT_FORALL_FP32(DIPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(DIPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(DIPU_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN((&::binary_cross_entropy_banned)));
}

}  // namespace
}  // namespace at::autocast
