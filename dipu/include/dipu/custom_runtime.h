/* dipu's declaration of the custom-runtime plug-in ABI of PaddlePaddle's CustomDevice
 * (Note [C runtime plug-ins] in dipu/csrc/vendor_plugin.cpp).
 *
 * A runtime plug-in is a shared library exporting
 *     void InitPlugin(CustomRuntimeParams* params);
 * dipu fills params->size, params->interface (a zeroed C_DeviceInterface whose `size` is set)
 * and calls it; the plug-in writes its version, its device type and the function pointers it
 * implements. The layout below is the ABI's (x86-64 and aarch64 Linux: 88-byte params,
 * 912-byte interface); the checks at the end of this file keep it so. A plug-in written
 * against Paddle's header loads unchanged, and one written against this header runs on
 * Paddle as well.
 *
 * Required by dipu (checked at load, one error names every missing one): set_device,
 * get_device, get_device_count, get_device_list, device_memory_allocate,
 * device_memory_deallocate, create_event, record_event, destroy_event, synchronize_event,
 * and the synchronous copies memory_copy_h2d and memory_copy_d2h. Everything else is optional; see
 * docs/vendor-guide.md, "A vendor runtime in C", for the defaults dipu uses where a function is null. dipu calls
 * the table from any thread, without a lock of its own: the functions must be thread-safe.
 * Every function returns C_SUCCESS or a failure; dipu turns a failure into a Python
 * exception naming the function (torch.OutOfMemoryError for allocation).
 */
#ifndef DIPU_CUSTOM_RUNTIME_H_
#define DIPU_CUSTOM_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes; dipu accepts plug-ins reporting 0.1.1 or later. */
#define DIPU_CUSTOM_RUNTIME_MAJOR 0
#define DIPU_CUSTOM_RUNTIME_MINOR 1
#define DIPU_CUSTOM_RUNTIME_PATCH 1

typedef enum {
  C_SUCCESS = 0, /* done */
  C_WARNING, /* done, but not as asked (e.g. an asynchronous call ran synchronously) */
  C_FAILED, /* a resource is exhausted, or a query says "not yet" */
  C_ERROR, /* bad argument or use */
  C_INTERNAL_ERROR /* the plug-in itself failed */
} C_Status;

/* Element types, for the collectives and blas_axpby. */
typedef enum {
  UNDEFINED = 0,
  BOOL,
  UINT8,
  UINT16,
  UINT32,
  UINT64,
  INT8,
  INT16,
  INT32,
  INT64,
  FLOAT16,
  FLOAT32,
  FLOAT64,
  BFLOAT16,
  COMPLEX64,
  COMPLEX128
} C_DataType;

typedef enum { ANY = 0, NHWC, NCHW, NCDHW, NDHWC, STRIDED, NUM_DATA_LAYOUTS, ALL_LAYOUT = ANY } C_DataLayout;

/* A device is passed by pointer to its id; the handles are the plug-in's own (possibly null). */
typedef struct C_Device_st {
  int id;
} *C_Device;
typedef struct C_Stream_st *C_Stream;
typedef struct C_Event_st *C_Event;
typedef void (*C_Callback)(C_Device device, C_Stream stream, void *user_data, C_Status *status);

typedef struct {
  size_t sz;
  void *data;
} C_CCLRootId;
typedef struct C_CCLComm_st *C_CCLComm;
typedef enum { SUM = 0, AVG, MAX, MIN, PRODUCT } C_CCLReduceOp;
typedef struct C_Profiler_st *C_Profiler;

struct C_DeviceInterface {
  size_t size; /* set by the framework before InitPlugin: sizeof(C_DeviceInterface) */

  /* devices, streams and events */
  C_Status (*initialize)(void);
  C_Status (*finalize)(void);
  C_Status (*init_device)(const C_Device device);
  C_Status (*set_device)(const C_Device device);
  C_Status (*get_device)(const C_Device device); /* writes the current id into device->id */
  C_Status (*deinit_device)(const C_Device device);
  C_Status (*create_stream)(const C_Device device, C_Stream *stream);
  C_Status (*destroy_stream)(const C_Device device, C_Stream stream);
  C_Status (*query_stream)(const C_Device device, C_Stream stream); /* C_SUCCESS: all done */
  C_Status (*stream_add_callback)(const C_Device device, C_Stream stream, C_Callback callback, void *user_data);
  C_Status (*create_event)(const C_Device device, C_Event *event);
  C_Status (*record_event)(const C_Device device, C_Stream stream, C_Event event);
  C_Status (*destroy_event)(const C_Device device, C_Event event);
  C_Status (*query_event)(const C_Device device, C_Event event); /* C_SUCCESS: completed */
  C_Status (*synchronize_device)(const C_Device device);
  C_Status (*synchronize_stream)(const C_Device device, C_Stream stream);
  C_Status (*synchronize_event)(const C_Device device, C_Event event);
  C_Status (*stream_wait_event)(const C_Device device, C_Stream stream, C_Event event);
  void *reserved_dev_api[8];

  /* memory: the synchronous copies return when the bytes are in place */
  C_Status (*device_memory_allocate)(const C_Device device, void **ptr, size_t size);
  C_Status (*device_memory_deallocate)(const C_Device device, void *ptr, size_t size);
  C_Status (*device_memory_set)(const C_Device device, void *ptr, unsigned char value, size_t size);
  C_Status (*host_memory_allocate)(const C_Device device, void **ptr, size_t size);
  C_Status (*host_memory_deallocate)(const C_Device device, void *ptr, size_t size);
  C_Status (*unified_memory_allocate)(const C_Device device, void **ptr, size_t size);
  C_Status (*unified_memory_deallocate)(const C_Device device, void *ptr, size_t size);
  C_Status (*memory_copy_h2d)(const C_Device device, void *dst, const void *src, size_t size);
  C_Status (*memory_copy_d2h)(const C_Device device, void *dst, const void *src, size_t size);
  C_Status (*memory_copy_d2d)(const C_Device device, void *dst, const void *src, size_t size);
  C_Status (*memory_copy_p2p)(const C_Device dst_device, const C_Device src_device, void *dst, const void *src,
                              size_t size);
  C_Status (*async_memory_copy_h2d)(const C_Device device, C_Stream stream, void *dst, const void *src, size_t size);
  C_Status (*async_memory_copy_d2h)(const C_Device device, C_Stream stream, void *dst, const void *src, size_t size);
  C_Status (*async_memory_copy_d2d)(const C_Device device, C_Stream stream, void *dst, const void *src, size_t size);
  C_Status (*async_memory_copy_p2p)(const C_Device dst_device, const C_Device src_device, C_Stream stream, void *dst,
                                    const void *src, size_t size);
  void *reserved_mem_api[8];

  /* information */
  C_Status (*get_device_count)(size_t *count);
  C_Status (*get_device_list)(size_t *devices);
  C_Status (*device_memory_stats)(const C_Device device, size_t *total_memory, size_t *free_memory);
  C_Status (*device_min_chunk_size)(const C_Device device, size_t *size);
  C_Status (*device_max_chunk_size)(const C_Device device, size_t *size);
  C_Status (*device_max_alloc_size)(const C_Device device, size_t *size);
  C_Status (*device_extra_padding_size)(const C_Device device, size_t *size);
  C_Status (*device_init_alloc_size)(const C_Device device, size_t *size);
  C_Status (*device_realloc_size)(const C_Device device, size_t *size);
  C_Status (*get_compute_capability)(size_t *compute_capability); /* e.g. 70 for 7.0 */
  C_Status (*get_runtime_version)(size_t *version);
  C_Status (*get_driver_version)(size_t *version);
  void *reserved_info_api[8];

  /* collectives */
  C_Status (*xccl_get_unique_id_size)(size_t *size);
  C_Status (*xccl_get_unique_id)(C_CCLRootId *unique_id);
  C_Status (*xccl_comm_init_rank)(size_t ranks, C_CCLRootId *unique_id, size_t rank, C_CCLComm *comm);
  C_Status (*xccl_destroy_comm)(C_CCLComm comm);
  C_Status (*xccl_all_reduce)(void *send_buf, void *recv_buf, size_t count, C_DataType data_type, C_CCLReduceOp op,
                              C_CCLComm comm, C_Stream stream);
  C_Status (*xccl_broadcast)(void *buf, size_t count, C_DataType data_type, size_t root, C_CCLComm comm,
                             C_Stream stream);
  C_Status (*xccl_reduce)(void *send_buf, void *recv_buf, size_t count, C_DataType data_type, C_CCLReduceOp op,
                          size_t root, C_CCLComm comm, C_Stream stream);
  C_Status (*xccl_all_gather)(void *send_buf, void *recv_buf, size_t count, C_DataType data_type, C_CCLComm comm,
                              C_Stream stream);
  C_Status (*xccl_reduce_scatter)(void *send_buf, void *recv_buf, size_t count, C_DataType data_type, C_CCLReduceOp op,
                                  C_CCLComm comm, C_Stream stream);
  C_Status (*xccl_group_start)(void);
  C_Status (*xccl_group_end)(void);
  C_Status (*xccl_send)(void *send_buf, size_t count, C_DataType data_type, size_t dest_rank, C_CCLComm comm,
                        C_Stream stream);
  C_Status (*xccl_recv)(void *recv_buf, size_t count, C_DataType data_type, size_t src_rank, C_CCLComm comm,
                        C_Stream stream);
  C_Status (*xccl_all_to_all)(const void **send_buf, const size_t *send_count, const C_DataType *send_dtype,
                              void **recv_buf, const size_t *recv_count, const C_DataType *recv_dtype, size_t rank,
                              size_t nranks, C_CCLComm comm, C_Stream stream);
  void *reserved_ccl_api[8];

  /* profiler */
  C_Status (*profiler_initialize)(C_Profiler prof, void **user_data);
  C_Status (*profiler_finalize)(C_Profiler prof, void *user_data);
  C_Status (*profiler_prepare_tracing)(C_Profiler prof, void *user_data);
  C_Status (*profiler_start_tracing)(C_Profiler prof, void *user_data);
  C_Status (*profiler_stop_tracing)(C_Profiler prof, void *user_data);
  C_Status (*profiler_collect_trace_data)(C_Profiler prof, uint64_t start_ns, void *user_data);
  void *reserved_profiler_api[8];

  /* other: y = alpha * x + beta * y */
  C_Status (*blas_axpby)(const C_Device device, C_Stream stream, C_DataType dtype, size_t numel, float alpha, void *x,
                         float beta, void *y);
  void *reserved_other_api[7];
};
typedef struct C_DeviceInterface C_DeviceInterface;

struct CustomRuntimeVersion {
  size_t major, minor, patch;
};
typedef struct CustomRuntimeVersion CustomRuntimeVersion;

struct CustomRuntimeParams {
  size_t size; /* set by the framework: sizeof(CustomRuntimeParams) */
  C_DeviceInterface *interface; /* set by the framework; the plug-in fills the table */
  CustomRuntimeVersion version; /* set by the plug-in */
  char *device_type; /* set by the plug-in: a non-empty name, e.g. "my_npu" */
  char *sub_device_type; /* set by the plug-in: a model or version string */
  char reserved[32];
};
typedef struct CustomRuntimeParams CustomRuntimeParams;

/* What a plug-in exports. */
void InitPlugin(CustomRuntimeParams *params);

/* dipu's own optional group, not part of Paddle's ABI: virtual memory, for the caching allocator's expandable
 * segments (Note [Expandable segments] in dipu/csrc/allocator.cpp). A plug-in that has it also exports
 *     void DipuInitVirtualMemory(DipuVirtualMemoryInterface *vm);
 * which dipu finds with dlsym after InitPlugin and calls with a zeroed table whose `size` is set; the plug-in
 * fills all five functions or none. C_DeviceInterface is untouched, so a Paddle plug-in loads as it is (and
 * keeps plain segments), and a plug-in with this group still runs on Paddle. Every address and size dipu
 * passes is a multiple of the granularity. */
struct DipuVirtualMemoryInterface {
  size_t size; /* set by dipu: sizeof(DipuVirtualMemoryInterface) */
  C_Status (*granularity)(const C_Device device, size_t *granularity); /* a power of two */
  /* A range of addresses with no memory behind it; C_FAILED: no range that large. */
  C_Status (*reserve)(const C_Device device, void **ptr, size_t size);
  /* Memory behind [ptr, ptr + size) of a reserved range, readable and writable; C_FAILED: out of memory. */
  C_Status (*map)(const C_Device device, void *ptr, size_t size);
  C_Status (*unmap)(const C_Device device, void *ptr, size_t size); /* the memory goes back to the device */
  C_Status (*release)(const C_Device device, void *ptr, size_t size); /* a whole reserved, unmapped range */
};
typedef struct DipuVirtualMemoryInterface DipuVirtualMemoryInterface;
void DipuInitVirtualMemory(DipuVirtualMemoryInterface *vm);

/* The layout is the ABI: sizes and the offsets of each group's first member. */
#if defined(__LP64__)
#ifdef __cplusplus
#define DIPU_CR_ASSERT static_assert
#else
#define DIPU_CR_ASSERT _Static_assert
#endif
DIPU_CR_ASSERT(sizeof(CustomRuntimeParams) == 88, "CustomRuntimeParams is 88 bytes");
DIPU_CR_ASSERT(offsetof(CustomRuntimeParams, device_type) == 40, "device_type at 40");
DIPU_CR_ASSERT(sizeof(C_DeviceInterface) == 912, "C_DeviceInterface is 912 bytes");
DIPU_CR_ASSERT(offsetof(C_DeviceInterface, device_memory_allocate) == 27 * 8, "memory group at 216");
DIPU_CR_ASSERT(offsetof(C_DeviceInterface, get_device_count) == 50 * 8, "info group at 400");
DIPU_CR_ASSERT(offsetof(C_DeviceInterface, xccl_get_unique_id_size) == 70 * 8, "ccl group at 560");
DIPU_CR_ASSERT(offsetof(C_DeviceInterface, profiler_initialize) == 92 * 8, "profiler group at 736");
DIPU_CR_ASSERT(offsetof(C_DeviceInterface, blas_axpby) == 106 * 8, "blas_axpby at 848");
DIPU_CR_ASSERT(sizeof(DipuVirtualMemoryInterface) == 48, "DipuVirtualMemoryInterface is 48 bytes");
#undef DIPU_CR_ASSERT
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif
#endif /* DIPU_CUSTOM_RUNTIME_H_ */
