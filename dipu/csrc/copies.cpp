// Copies between dipu tensors and those of other devices (copy_, _copy_from, fill_, zero_, _local_scalar_dense),
// and the native aliases they go through.
//
// Note [Copies: alias or staging]
// A vendor whose memory is addressable by a native torch device (host memory
// for the simulated vendor, CUDA memory for a CUDA vendor) declares that device
// and the core copies through zero-copy native aliases: one native copy_ does
// dtype conversion, layout changes and cross-device moves. A vendor without
// one gets the contract path: byte copies through its memcpy functions, staged
// through a host image of the strided span when layouts or dtypes differ.
#include "core.h"
#include "../include/diopi/aten_aliases.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_local_scalar_dense.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <array>
#include <cstdint>

namespace dipu {
namespace {

struct AliasContext {
  c10::intrusive_ptr<c10::StorageImpl> keep_alive;
};
void delete_alias_context(void* ctx) { delete static_cast<AliasContext*>(ctx); }

// Number of elements between the first and the last element of `t`, inclusive.
int64_t span_elements(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
  return span;
}

// Gives `view` the conjugate and negative bits of `t`: a tensor over the same
// memory must read the same values (see Note [Conjugate and negative bits]).
at::Tensor with_bits_of(at::Tensor view, const at::Tensor& t) {
  view._set_conj(t.is_conj());
  view._set_neg(t.is_neg());
  return view;
}

// A CPU tensor with `t`'s sizes, strides and bits holding a copy of its values.
at::Tensor host_image(const at::Tensor& t) {
  int64_t span = span_elements(t);
  at::Tensor buf = at::empty({span}, t.options().device(c10::kCPU));
  if (span > 0) copy_bytes(buf.data_ptr(), buf.device(), t.data_ptr(), t.device(), span * t.itemsize());
  return with_bits_of(buf.as_strided(t.sizes(), t.strides(), 0), t);
}

// Writes the strided span of host image `host` back into device tensor `t`.
void write_back(const at::Tensor& t, const at::Tensor& host) {
  int64_t span = span_elements(t);
  if (span > 0) copy_bytes(t.data_ptr(), t.device(), host.data_ptr(), host.device(), span * t.itemsize());
}

bool same_layout_dense(const at::Tensor& a, const at::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.strides() == b.strides() && a.is_conj() == b.is_conj() &&
         a.is_neg() == b.is_neg() && a.is_non_overlapping_and_dense();
}

// Note [Conjugate and negative bits]
// A complex tensor may carry a lazy conjugation (`conj()`, `mH`) and any
// tensor a lazy negation (`_neg_view`) as bits in its key set. Every tensor the
// core makes over a dipu tensor's memory (native aliases, host images) carries
// the same bits, so native kernels read the values the user sees and a copy
// materializes them. Copies must reach `copy_from` with the bits intact: the
// conjugate/negative fallbacks would otherwise materialize the source with
// `clone`, whose `copy_` lands in `_copy_from` again, recursing until the stack
// overflows; hence the fallthrough registrations at the end of this file.

// A dipu tensor the caller holds, as the vendor's native device sees it for this call (diopi/aten_aliases.h: no
// ownership to take and give back, and the last aliases are reused).
at::Tensor call_alias(const at::Tensor& t) {
  ensure_initialized();  // as native_alias
  const c10::DeviceType type = vendor().alias_type;
  return diopi_aliases::call_alias(t, c10::Device(type, type == c10::DeviceType::CPU ? -1 : t.device().index()));
}

at::Tensor copy_from(const at::Tensor& source, const at::Tensor& dst, bool non_blocking) {
  if (dst.numel() == 0) return dst;
  // copy_ broadcasts its source; ATen hands it to _copy_from unexpanded.
  at::Tensor self = source.sizes() == dst.sizes() ? source : source.expand(dst.sizes());
  if (vendor().has_alias) {
    at::Tensor src = on_dipu(self) ? call_alias(self) : self;
    at::Tensor out = on_dipu(dst) ? call_alias(dst) : dst;
    out.copy_(src, non_blocking);
    return dst;
  }
  // ATen's copy_ hands a dipu copy to _copy_from before its TensorIterator checks memory; the alias path above
  // gets them from the alias device's copy_, and here they are made as it makes them, with its errors.
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, source);
  if (same_layout_dense(self, dst)) {
    copy_bytes(dst.data_ptr(), dst.device(), self.data_ptr(), self.device(), self.nbytes());
    return dst;
  }
  at::Tensor src = on_dipu(self) ? host_image(self) : self;
  if (!on_dipu(dst)) {
    dst.copy_(src);
    return dst;
  }
  at::Tensor host =
      dst.is_non_overlapping_and_dense()
          ? with_bits_of(at::empty_strided(dst.sizes(), dst.strides(), dst.options().device(c10::kCPU)), dst)
          : host_image(dst);
  host.copy_(src);
  write_back(dst, host);
  return dst;
}

// Note [copy_ between aliases]
// ATen's copy_ is a composite that checks its arguments and hands a copy involving dipu to _copy_from, which
// aliases both sides and copies with the alias device's copy_, checks and all. On a vendor with native aliases
// dipu's copy_ takes that last step directly for dense tensors on dipu or the CPU: the alias device's copy_
// broadcasts, casts, reads the lazy bits through the aliases and, as the aliases of one dipu storage share one
// storage (Note [Aliases share one storage]), refuses the overlaps the CPU refuses. Anything else (another
// device or layout, a zero tensor, a vendor without aliases) takes ATen's composite.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  auto plain = [](const at::Tensor& t) {
    return t.defined() && t.layout() == at::kStrided && (on_dipu(t) || t.device().is_cpu()) && !t._is_zerotensor() &&
           !t.is_quantized();
  };
  if (!vendor().has_alias || !plain(self) || !plain(src)) return at::native::copy_(self, src, non_blocking);
  at::Tensor out = on_dipu(self) ? call_alias(self) : self;
  out.copy_(on_dipu(src) ? call_alias(src) : src, non_blocking);
  return self;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  if (vendor().has_alias) return at::_local_scalar_dense(call_alias(self));
  return at::_local_scalar_dense(host_image(self));
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (vendor().has_alias) {
    call_alias(self).fill_(value);
    return self;
  }
  at::Tensor host = host_image(self);
  host.fill_(value);
  write_back(self, host);
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  if (vendor().has_alias) {  // the native zero_, not fill_(0): the CPU's zero_ has a faster path (a memset)
    call_alias(self).zero_();
    return self;
  }
  return fill_scalar(self, 0);
}

// Note [Aliases share one storage]
// ATen finds arguments that overlap (x[1:].add_(x[:-1]), which the CPU refuses rather than compute garbage) by
// comparing their storages, so the aliases of dipu tensors over one storage must share one alias storage. Each
// thread remembers, for the dipu storages it aliased last, the alias storage it made (weakly), and an alias of
// any view of that storage reuses it while it lives and still covers the same memory. A live alias storage keeps
// its dipu storage alive, so an entry whose alias still lives cannot name a storage that was freed and reused.
c10::Storage alias_storage(const c10::Storage& storage, const c10::Device& device) {
  struct Entry {
    c10::StorageImpl* key = nullptr;
    c10::weak_intrusive_ptr<c10::StorageImpl> alias{c10::intrusive_ptr<c10::StorageImpl>()};
  };
  thread_local std::array<Entry, 16> entries;
  c10::StorageImpl* key = storage.unsafeGetStorageImpl();
  Entry& entry = entries[(reinterpret_cast<uintptr_t>(key) >> 6) % entries.size()];
  if (entry.key == key) {
    c10::intrusive_ptr<c10::StorageImpl> live = entry.alias.lock();
    if (live && live->data() == storage.data() && live->nbytes() == storage.nbytes() && live->device() == device)
      return c10::Storage(std::move(live));
  }
  c10::DataPtr data(key->mutable_data_ptr().get(),
                    new AliasContext{c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(key)}, &delete_alias_context,
                    device);
  auto impl = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
                                                    std::move(data), /*allocator=*/nullptr, /*resizable=*/false);
  entry.key = key;
  entry.alias = c10::weak_intrusive_ptr<c10::StorageImpl>(impl);
  return c10::Storage(std::move(impl));
}

}  // namespace

at::Tensor native_alias(const at::Tensor& t) {
  ensure_initialized();  // a forked child must not touch memory its parent's runtime owns
  TORCH_CHECK(vendor().has_alias, "dipu: the ", vendor().name,
              " vendor declares no native alias device (DeviceRuntime.native_device_type)");
  c10::DeviceIndex index = vendor().alias_type == c10::DeviceType::CPU ? -1 : t.device().index();
  c10::Device device(vendor().alias_type, index);
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
      alias_storage(t.storage(), device),
      c10::DispatchKeySet(c10::computeDispatchKey(std::nullopt, at::kStrided, device)), t.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return with_bits_of(std::move(alias), t);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("copy_", &copy_);
  m.impl("_copy_from", &copy_from);
  m.impl("_copy_from_and_resize", &copy_from_and_resize);
  m.impl("_local_scalar_dense", &local_scalar_dense);
  m.impl("fill_.Scalar", &fill_scalar);
  m.impl("zero_", &zero_);
}

// See Note [Conjugate and negative bits].
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace dipu
