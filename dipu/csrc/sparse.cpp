// Sparse COO and compressed (CSR/CSC/BSR/BSC) tensors on dipu.
//
// Note [Sparse tensors on dipu]
// A sparse tensor is a TensorImpl holding dense tensors (COO: indices and values;
// compressed: crow/col indices and values) under the SparsePrivateUse1 or
// SparseCsrPrivateUse1 dispatch key. Here dipu registers ATen's own
// device-independent kernels for what only touches that structure: construction,
// the accessors, the dims and nnz, coalesced flags, resizing, zeroing and copies
// between sparse tensors; every part they create or copy is a dense dipu tensor,
// so the dense kernels (or the dense fallback) do the work. Every other op on a
// sparse dipu tensor (coalesce, add, mul, mm, sum, sparse_mask, ...) goes through
// the sparse CPU fallback registered for both keys in cpu_fallback.cpp (Note [Sparse CPU
// fallback]); moving a sparse tensor (`_to_copy`) copies its indices and values as
// dense tensors and rebuilds it with the constructors below, and an argument the
// fallback writes back is updated by the sparse copy_ below. Ops that
// CompositeImplicitAutograd or CompositeExplicitAutograd kernels serve (to_dense,
// the construction of compressed tensors, `_to_copy`, embedding's sparse
// backward) never reach the fallback.
//
// Note [Sparse views]
// The fallback cannot return a view (Note [Sparse CPU fallback] in cpu_fallback.cpp), and the
// dense composite kernels of permute or unsqueeze call as_strided, which a sparse
// tensor lacks. ATen's sparse kernels of the view ops the CPU has
// (_sparse_broadcast_to, which torch.masked broadcasts its mask with; permute,
// unsqueeze, view_as_real/complex on COO; select on compressed layouts) only
// rebuild the structure from its parts with dense ops, so they are registered here
// as they are: their parts are dipu tensors, which dense dipu kernels serve.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_dimI_native.h>
#include <ATen/ops/_dimV_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_broadcast_to_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/ccol_indices_native.h>
#include <ATen/ops/col_indices_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/crow_indices_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/permute_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/row_indices_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/zero_native.h>
#include <torch/library.h>

namespace dipu {

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("_sparse_broadcast_to", TORCH_FN(at::native::sparse_broadcast_to));
  m.impl("permute", TORCH_FN(at::native::permute_sparse_coo));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_sparse));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real_sparse));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex_sparse));
}

at::Tensor select_compressed(const at::Tensor& self, int64_t dim, c10::SymInt index) {
  return at::native::select_sparse_csr(self, dim, index.guard_int(__FILE__, __LINE__));
}

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_compressed));
  m.impl("crow_indices", TORCH_FN(at::native::crow_indices_sparse_csr));
  m.impl("col_indices", TORCH_FN(at::native::col_indices_sparse_csr));
  m.impl("ccol_indices", TORCH_FN(at::native::ccol_indices_sparse_csr));
  m.impl("row_indices", TORCH_FN(at::native::row_indices_sparse_csr));
  m.impl("values", TORCH_FN(at::native::values_sparse_csr));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse_csr));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse_csr));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse_csr));
  m.impl("resize_", TORCH_FN(at::native::resize_sparse_csr_));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_csr_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_compressed_));
  m.impl("select.int", TORCH_FN(select_compressed));
}

}  // namespace dipu
