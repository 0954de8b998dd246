/*
 * dipu's text of the DIOPI runtime ABI: the types a DIOPI op library and its framework exchange,
 * and the runtime functions the framework exports for the library to call back.
 *
 * A library compiled against DeepLink's proto/include/diopi/diopirt.h and one compiled against
 * this header are interchangeable: the type names, enum values, struct layouts and function
 * signatures are the same (the static assertions at the end pin the layouts that cross the
 * boundary). Valid C11 and C++11; dipu's own words throughout.
 *
 * In dipu the runtime functions live in the native core (dipu/csrc/diopi_rt.cpp); a tensor handle
 * points to an at::Tensor the framework owns for the duration of the call, a context handle to
 * the call's dipu::diopi::Context (its device, stream and the tensors it allocated).
 */
#ifndef DIPU_DIOPI_DIOPIRT_H_
#define DIPU_DIOPI_DIOPIRT_H_

#include <stddef.h>
#include <stdint.h>
#if !defined(__cplusplus)
#include <stdbool.h>
#endif

/* Functions an op library may or may not provide are declared weak, so a caller can test them
   for null; the runtime's own functions are exported from the framework with default
   visibility (the framework builds with -fvisibility=hidden). */
#define DIOPI_ATTR_WEAK __attribute__((weak))
#define DIOPI_API DIOPI_ATTR_WEAK
#ifndef DIOPI_RT_API
#define DIOPI_RT_API __attribute__((visibility("default")))
#endif

#if defined(__cplusplus)
extern "C" {
#endif

#define DIOPI_VER_MAJOR 1
#define DIOPI_VER_MINOR 0
#define DIOPI_VER_PATCH 0
#define DIOPI_VERSION (DIOPI_VER_MAJOR * 1000 + DIOPI_VER_MINOR * 100 + DIOPI_VER_PATCH)

/* A borrowed array of int64 (sizes, strides, dims); data may be null when len is 0. */
typedef struct {
    const int64_t* data;
    int64_t len;
} diopiSize_t;

/* What every DIOPI function returns. dipu reads diopiForceFallbackToCPU and diopiNoImplement as
   "run this call on the CPU fallback" and every other non-zero code as an error, whose text the
   library gives through diopiGetLastErrorString. */
typedef enum {
    diopiSuccess = 0,
    diopiErrorOccurred = 1,
    diopiNotInited = 2,
    diopiNoRegisteredStreamCreateFunction = 3,
    diopiNoRegisteredStreamDestoryFunction = 4, /* sic: the ABI's spelling */
    diopiNoRegisteredStreamSyncFunction = 5,
    diopiNoRegisteredDeviceMemoryMallocFunction = 6,
    diopiNoRegisteredDeviceMemoryFreeFunction = 7,
    diopiNoRegisteredDevice2DdeviceMemoryCopyFunction = 8,
    diopiNoRegisteredDevice2HostMemoryCopyFunction = 9,
    diopiNoRegisteredHost2DeviceMemoryCopyFunction = 10,
    diopiNoRegisteredGetLastErrorFunction = 11,
    diopi5DNotSupported = 12,
    diopiNoImplement = 13,
    diopiForceFallbackToCPU = 14,
    diopiDtypeNotSupported = 1000,
} diopiError_t;

/* Where a tensor's memory is: the host, or the framework's device (dipu). */
typedef enum {
    diopi_host = 0,
    diopi_device = 1,
} diopiDevice_t;

typedef int8_t diopiDeviceIndex_t;

/* Element types, numbered by increasing precision within each family (the ABI fixes the values). */
typedef enum {
    diopi_dtype_int8 = 0,
    diopi_dtype_uint8 = 1,
    diopi_dtype_int16 = 2,
    diopi_dtype_uint16 = 3,
    diopi_dtype_int32 = 4,
    diopi_dtype_uint32 = 5,
    diopi_dtype_int64 = 6,
    diopi_dtype_uint64 = 7,
    diopi_dtype_float16 = 8,
    diopi_dtype_float32 = 9,
    diopi_dtype_float64 = 10,
    diopi_dtype_bool = 11,
    diopi_dtype_bfloat16 = 12,
    diopi_dtype_tfloat32 = 13,
    diopi_dtype_complex32 = 14,
    diopi_dtype_complex64 = 15,
    diopi_dtype_complex128 = 16,
    diopi_dtype_unsupported = 255
} diopiDtype_t;

/* A number with its type: fval for floating stype, ival for the others (bool included). */
typedef struct {
    diopiDtype_t stype;
    union {
        double fval;
        int64_t ival;
    };
} diopiScalar_t;

typedef enum {
    Contiguous = 0,
    ChannelsLast = 1,
    ChannelsLast3d = 2,
    Preserve = 3,
    ChannelsLast1d = 4
} diopiMemoryFormat_t;

typedef enum { ReductionNone, ReductionMean, ReductionSum, ReductionEND } diopiReduction_t;

typedef enum { RoundModeNone, RoundModeTrunc, RoundModeFloor, RoundModeEND } diopiRoundMode_t;

/* Opaque handles: the library never looks inside them, only passes them back to the runtime. */
struct diopiContext;
typedef struct diopiContext* diopiContextHandle_t;

struct diopiTensor;
typedef struct diopiTensor* diopiTensorHandle_t;
typedef const struct diopiTensor* diopiConstTensorHandle_t;

struct diopiGenerator;
typedef struct diopiGenerator* diopiGeneratorHandle_t;
typedef const struct diopiGenerator* diopiConstGeneratorHandle_t;

/* The vendor's stream (e.g. a cudaStream_t); null for a device's default stream on dipu. */
typedef void* diopiStreamHandle_t;

/* The proto's version as text. */
extern DIOPI_API const char* diopiGetVersion();

/* ---- reading a tensor ---------------------------------------------------------------------- */
/* The address of element 0 (data pointer plus the storage offset). */
extern DIOPI_RT_API diopiError_t diopiGetTensorData(diopiTensorHandle_t th, void**);
extern DIOPI_RT_API diopiError_t diopiGetTensorDataConst(diopiConstTensorHandle_t th, const void**);
/* Sizes and strides (in elements) stay valid while the tensor handle does. */
extern DIOPI_RT_API diopiError_t diopiGetTensorShape(diopiConstTensorHandle_t th, diopiSize_t* size);
extern DIOPI_RT_API diopiError_t diopiGetTensorStride(diopiConstTensorHandle_t th, diopiSize_t* stride);
extern DIOPI_RT_API diopiError_t diopiGetTensorDtype(diopiConstTensorHandle_t th, diopiDtype_t* dtype);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorDevice(diopiConstTensorHandle_t th,
                                                                      diopiDevice_t* device);

extern DIOPI_RT_API diopiError_t diopiGetTensorNumel(diopiConstTensorHandle_t th, int64_t* numel);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorElemSize(diopiConstTensorHandle_t th, int64_t* itemsize);
/* The start of the tensor's storage, the tensor's offset into it (elements), the storage's bytes. */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorStoragePtr(diopiConstTensorHandle_t th,
                                                                          void** pStoragePtr);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorStorageOffset(diopiConstTensorHandle_t th,
                                                                             int64_t* pOffset);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorStorageNbytes(diopiConstTensorHandle_t th,
                                                                             size_t* pNbytes);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorDeviceIndex(diopiConstTensorHandle_t th,
                                                                           diopiDeviceIndex_t* pDevIndex);

/* Sparse (CSR) tensors; dipu has none, so these answer diopiErrorOccurred for any tensor. */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorCrowIndices(diopiConstTensorHandle_t th,
                                                                           diopiConstTensorHandle_t* crow_indices);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorColIndices(diopiConstTensorHandle_t th,
                                                                          diopiConstTensorHandle_t* col_indices);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetTensorValues(diopiConstTensorHandle_t th,
                                                                      diopiConstTensorHandle_t* values);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiIsTensorSparse(diopiConstTensorHandle_t th, bool* is_sparse);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGetCurrentDeviceIndex(diopiDeviceIndex_t* pDevIndex);

/* ---- what a call's context provides ---------------------------------------------------------- */
extern DIOPI_RT_API diopiError_t diopiGetStream(diopiContextHandle_t ctx, diopiStreamHandle_t* stream);

/* A new tensor (stride null: contiguous) that lives until the framework has taken the call's
   results; on diopi_device it comes from the framework's caching allocator. */
extern DIOPI_RT_API diopiError_t diopiRequireTensor(diopiContextHandle_t ctx, diopiTensorHandle_t* tensor,
                                                    const diopiSize_t* size, const diopiSize_t* stride,
                                                    const diopiDtype_t dtype, const diopiDevice_t device);
/* A scratch buffer of num_bytes (a uint8 tensor), with the same lifetime. */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiRequireBuffer(diopiContextHandle_t ctx,
                                                                    diopiTensorHandle_t* tensor, int64_t num_bytes,
                                                                    diopiDevice_t device);

/* ---- random generators ------------------------------------------------------------------------ */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGeneratorGetState(diopiContextHandle_t ctx,
                                                                        diopiConstGeneratorHandle_t th,
                                                                        diopiTensorHandle_t* data);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGeneratorSetState(diopiGeneratorHandle_t th,
                                                                        diopiConstTensorHandle_t state);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGeneratorGetSeedAndOffset(diopiGeneratorHandle_t th,
                                                                                uint64_t* ptrSeed, uint64_t* ptrOffset);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiGeneratorSetSeedAndOffset(diopiGeneratorHandle_t th,
                                                                                uint64_t seed, uint64_t offset);

/* dipu's own addition, not DIOPI's: the generator of the native alias device (the CPU's for the simulated
   vendor, CUDA's for the cuda vendor) that the dipu generator th owns and draws with, valid while th lives.
   dipu's C++ torch library draws from it so its numbers are the Python library's. */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t dipuGetNativeGenerator(diopiConstGeneratorHandle_t th,
                                                                        diopiGeneratorHandle_t* native);

/* dipu's own addition, not DIOPI's: out, an output the caller allocated for this call alone, takes over the
   memory of result, a tensor of the native alias device that the library computed and holds alone, laid out as
   out (same dtype, sizes and strides); out's own memory is freed. So a library that can only get a functional
   result (a new tensor) needs no copy. Anything else answers diopiErrorOccurred and changes nothing; the
   library then copies. For libraries computing on native aliases (dipu's C++ torch library). */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t dipuTakeResult(diopiContextHandle_t ctx, diopiTensorHandle_t out,
                                                                diopiConstTensorHandle_t result);

/* dipu's own addition, not DIOPI's: *out becomes a new output of the call (kept alive by the context, as
   diopiRequireTensor's outputs are) over the memory of result, a contiguous tensor of the native alias device
   that the library computed and holds alone: what a function that allocates its outputs (a functional
   _foreach_ one) stores instead of requiring a tensor and copying result into it. Anything else answers
   diopiErrorOccurred and changes nothing; the library then requires a tensor and copies. */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t dipuRequireResult(diopiContextHandle_t ctx, diopiTensorHandle_t* out,
                                                                   diopiConstTensorHandle_t result);

/* ---- profiling: a named range of the library's own work, from Start to End ---------------------- */
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiRecordStart(const char* record_name, void** record);
extern DIOPI_RT_API DIOPI_ATTR_WEAK diopiError_t diopiRecordEnd(void** record);

#if defined(__cplusplus)
}
#endif

/* The layouts that cross the library boundary by value (x86-64 and aarch64 LP64). */
#if defined(__cplusplus)
#define DIPU_DIOPI_STATIC_ASSERT(condition, message) static_assert(condition, message)
#else
#define DIPU_DIOPI_STATIC_ASSERT(condition, message) _Static_assert(condition, message)
#endif
DIPU_DIOPI_STATIC_ASSERT(sizeof(diopiSize_t) == 16 && offsetof(diopiSize_t, len) == 8,
                         "diopiSize_t is {const int64_t*, int64_t}");
DIPU_DIOPI_STATIC_ASSERT(sizeof(diopiScalar_t) == 16 && offsetof(diopiScalar_t, fval) == 8,
                         "diopiScalar_t is {int stype; union {double, int64_t}} at offset 8");
DIPU_DIOPI_STATIC_ASSERT(sizeof(diopiDtype_t) == 4 && sizeof(diopiError_t) == 4, "DIOPI enums are int-sized");
DIPU_DIOPI_STATIC_ASSERT(sizeof(diopiDeviceIndex_t) == 1, "diopiDeviceIndex_t is int8_t");
#undef DIPU_DIOPI_STATIC_ASSERT

#endif /* DIPU_DIOPI_DIOPIRT_H_ */
