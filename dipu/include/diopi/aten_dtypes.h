// The DIOPI dtypes beside ATen's, for C++ built against ATen (so not a C header, unlike the others here): the
// native core (dipu/csrc/diopi_rt.h) and the torch op library in C++ (diopi_impl/torch_cpp) convert with this
// one table, and a vendor's op library written over ATen may too.
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <utility>

#include "diopirt.h"

namespace dipu::diopi_dtypes {

inline constexpr std::pair<c10::ScalarType, diopiDtype_t> kDtypes[] = {
    {c10::kChar, diopi_dtype_int8},
    {c10::kByte, diopi_dtype_uint8},
    {c10::kShort, diopi_dtype_int16},
    {c10::kUInt16, diopi_dtype_uint16},
    {c10::kInt, diopi_dtype_int32},
    {c10::kUInt32, diopi_dtype_uint32},
    {c10::kLong, diopi_dtype_int64},
    {c10::kUInt64, diopi_dtype_uint64},
    {c10::kHalf, diopi_dtype_float16},
    {c10::kFloat, diopi_dtype_float32},
    {c10::kDouble, diopi_dtype_float64},
    {c10::kBool, diopi_dtype_bool},
    {c10::kBFloat16, diopi_dtype_bfloat16},
    {c10::kComplexHalf, diopi_dtype_complex32},
    {c10::kComplexFloat, diopi_dtype_complex64},
    {c10::kComplexDouble, diopi_dtype_complex128},
};

// diopi_dtype_unsupported for a type DIOPI lacks.
inline diopiDtype_t to_diopi(c10::ScalarType type) {
    for (const auto& [aten, diopi] : kDtypes)
        if (aten == type) return diopi;
    return diopi_dtype_unsupported;
}

// Throws, naming `who`, for a DIOPI dtype torch lacks (diopi_dtype_unsupported, diopi_dtype_tfloat32).
inline c10::ScalarType to_aten(diopiDtype_t type, const char* who) {
    for (const auto& [aten, diopi] : kDtypes)
        if (diopi == type) return aten;
    TORCH_CHECK(false, who, ": DIOPI dtype ", static_cast<int>(type), " has no torch dtype");
}

}  // namespace dipu::diopi_dtypes
