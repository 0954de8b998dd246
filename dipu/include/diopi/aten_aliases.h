// Aliases for the length of a call, for C++ built against ATen (so not a C header, like aten_dtypes.h): the
// native core's copy_, fill_ and zero_ (dipu/csrc/copies.cpp) and the torch op library in C++ (diopi_impl/torch_cpp)
// run ATen kernels of the vendor's native device on tensors of this kind over dipu's memory.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

namespace diopi_aliases {

// Note [Alias cache]
// Making an alias costs a StorageImpl, a TensorImpl and its version counter, which for a tiny op is more than
// the arithmetic. Each thread keeps the last aliases it made in a small table indexed by the memory's address,
// two to a slot, and hands one out again when nothing else holds it (use_count 1: an ATen kernel that kept a
// reference gets a new one) and it still describes exactly the view asked for: the same memory, size, device,
// dtype, sizes, strides, offset and bits. Two ways per slot serve the commonest pairs without a new alias: an
// in-place op's output and input over the same memory (a += b reaches the library as add.out(a, b, out=a), and
// the two arguments must be two tensors: an output ATen resizes must not resize the input it reads), and two
// tensors whose addresses fall in one slot. The alias owns nothing, so one whose memory went back to the
// allocator is never read: it is either replaced or found to describe the memory a new tensor holds, which it
// then correctly aliases.
inline std::array<at::Tensor, 2>& cached_aliases(const void* data) {
    thread_local std::array<std::array<at::Tensor, 2>, 32> slots;
    return slots[(reinterpret_cast<uintptr_t>(data) >> 9) % slots.size()];
}
// Sizes and strides compared element by element: a tensor has a few dims, and memcmp's call costs more.
inline bool same_ints(c10::IntArrayRef a, c10::IntArrayRef b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return false;
    return true;
}
inline bool same_view(const at::Tensor& alias, const at::Tensor& t, const c10::Storage& storage,
                      const c10::Device& device) {
    const c10::TensorImpl& mine = *alias.unsafeGetTensorImpl();
    const c10::TensorImpl& theirs = *t.unsafeGetTensorImpl();
    const c10::StorageImpl& memory = *mine.storage().unsafeGetStorageImpl();
    return memory.data() == storage.data() && memory.nbytes() == storage.nbytes() && mine.device() == device &&
           mine.dtype() == theirs.dtype() && mine.storage_offset() == theirs.storage_offset() &&
           same_ints(mine.sizes(), theirs.sizes()) && same_ints(mine.strides(), theirs.strides()) &&
           mine.is_conj() == theirs.is_conj() && mine.is_neg() == theirs.is_neg();
}

// The tensor of `device` (the vendor's native device) over the memory, sizes, strides and offset of dipu tensor
// t, with its conjugate and negative bits. It owns nothing: it serves while the caller holds t.
inline at::Tensor call_alias(const at::Tensor& t, const c10::Device& device) {
    const c10::Storage& storage = t.storage();
    std::array<at::Tensor, 2>& ways = cached_aliases(storage.data());
    for (const at::Tensor& cached : ways)
        if (cached.defined() && cached.use_count() == 1 && same_view(cached, t, storage, device)) return cached;
    // One memory, one alias storage: ATen finds overlapping arguments by their storages (Note [Aliases share one
    // storage] in dipu/csrc/copies.cpp). Views of one storage share its data address, hence the slot.
    c10::Storage shared;
    for (const at::Tensor& cached : ways)
        if (cached.defined() && cached.storage().data() == storage.data() &&
            cached.storage().nbytes() == storage.nbytes() && cached.device() == device) {
            shared = cached.storage();
            break;
        }
    if (!shared)
        shared =
            c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage.nbytes(),
                                                               c10::DataPtr(const_cast<void*>(storage.data()), device),
                                                               /*allocator=*/nullptr, /*resizable=*/false));
    at::Tensor result = at::detail::make_tensor<c10::TensorImpl>(
        std::move(shared), c10::DispatchKeySet(c10::computeDispatchKey(std::nullopt, at::kStrided, device)), t.dtype());
    result.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    if (t.is_conj()) result._set_conj(true);
    if (t.is_neg()) result._set_neg(true);
    // It replaces an empty way, else one nothing holds (not this call's other argument), the second way if both.
    const size_t way = !ways[0].defined()                                    ? 0
                       : !ways[1].defined()                                  ? 1
                       : ways[1].use_count() > 1 && ways[0].use_count() == 1 ? 0
                                                                             : 1;
    ways[way] = result;
    return result;
}

}  // namespace diopi_aliases
