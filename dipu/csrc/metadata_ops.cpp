// Metadata-only aten ops on dipu tensors: empty tensors, aten's dense views (ATen's own kernels), resize_,
// set_, record_stream, and the shallow-copy check modules move by. None of them reads or writes the contents of
// device memory.
#include "core.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/TensorOptions.h>
#include <torch/library.h>

#include <optional>

namespace dipu {
namespace {

void ensure_storage(const at::Tensor& self, size_t needed) {
  if (needed > self.storage().nbytes()) {
    c10::DeviceGuard guard(self.device());
    resize_storage_bytes(self.storage(), needed);
  }
}

c10::DeviceIndex target_index(std::optional<c10::Device> device) {
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_device();
  check_device_index(index);
  return index;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                               std::optional<at::Device> device, std::optional<bool>,
                               std::optional<at::MemoryFormat> format) {
  c10::DeviceGuard guard(c10::Device(kDipu, target_index(device)));
  return at::detail::empty_generic(size, device_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout>, std::optional<at::Device> device, std::optional<bool>) {
  c10::DeviceGuard guard(c10::Device(kDipu, target_index(device)));
  return at::detail::empty_strided_generic(size, stride, device_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<at::MemoryFormat> format) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  ensure_storage(self, at::detail::computeStorageNbytesContiguous(size, self.itemsize(), self.storage_offset()));
  if (format) impl->empty_tensor_restride(*format);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kDipu, "set_: expected a dipu storage, got one on ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
    ensure_storage(self, at::detail::computeStorageNbytesContiguous(size, self.itemsize(), offset));
  } else {
    impl->set_sizes_and_strides(size, stride);
    ensure_storage(self, at::detail::computeStorageNbytes(size, stride, self.itemsize(), offset));
  }
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t numel = static_cast<int64_t>(source.nbytes() / self.itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, device_allocator(), true);
  empty.unsafeGetStorageImpl()->set_data_ptr_noswap(c10::DataPtr(nullptr, self.device()));
  return set_storage(self, std::move(empty), 0, {0}, {});
}

void record_stream_op(at::Tensor& self, c10::Stream stream) { record_stream(self.storage().data_ptr(), stream); }

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", &empty_memory_format);
  m.impl("empty_strided", &empty_strided);
  m.impl("as_strided", &at::native::as_strided_tensorimpl);
  m.impl("view", &at::native::view);
  m.impl("_reshape_alias", &at::native::_reshape_alias);
  m.impl("unfold", &at::native::unfold);
  m.impl("view_as_real", &at::native::view_as_real);
  m.impl("view_as_complex", &at::native::view_as_complex);
  m.impl("resize_", &resize_);
  m.impl("set_.source_Storage", &set_source_storage);
  m.impl("set_.source_Storage_storage_offset", &set_storage);
  m.impl("set_.source_Tensor", &set_source_tensor);
  m.impl("set_", &set_empty);
  m.impl("record_stream", &record_stream_op);
}

// Note [Moving modules keeps shared Parameters]
// `Module._apply` (`.to`, `.dipu()`, `to_empty`) keeps a Parameter object and
// swaps its data (`param.data = moved`) only when the two tensors have
// "compatible shallow-copy types"; PyTorch's answer lists CPU, CUDA and other
// in-tree dense backends but not PrivateUse1, so each module would get a new
// Parameter and tied weights (an LM head sharing its embedding) would come
// apart. Dense strided tensors of the CPU and dipu share one TensorImpl type,
// so swapping their data is as safe as for CUDA.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == at::kStrided && (on_dipu(t) || t.device().is_cpu()) && !t.is_quantized() && !t.is_nested();
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", &has_compatible_shallow_copy_type);
}

}  // namespace dipu
