/* What runtime.c shares with xccl.c: the streams a collective is queued on. */
#ifndef DIPU_REFC_H_
#define DIPU_REFC_H_

#include "dipu/custom_runtime.h"

typedef C_Status (*RefcCall)(void *arg);

/* The calling thread's current device (set_device). */
int refc_current_device(void);
/* Queues call(arg) on `stream` of `device` (null: the default stream), then release(arg) (may be
 * null). A call returning anything but C_SUCCESS fails the stream (runtime.c's header). */
C_Status refc_enqueue_call(int device, C_Stream stream, RefcCall call, void *arg, void (*release)(void *));
/* Fills the xccl_* group of the table (xccl.c). Weak, so that runtime.c still compiles alone
 * into a runtime without collectives (docs/bring-up.md builds it so). */
__attribute__((weak)) void refc_fill_xccl(C_DeviceInterface *table);

#endif /* DIPU_REFC_H_ */
