/* The reference vendor in C: a runtime plug-in (dipu/include/dipu/custom_runtime.h) whose device
 * memory is host memory and whose streams really run asynchronously, one worker thread each, so
 * that a missing wait or a premature free shows up here rather than on hardware.
 *
 * Each device has a default stream (the null handle) and any number of created streams. A stream
 * is a FIFO of tasks run by its worker: asynchronous copies, callbacks, event records (the event
 * completes when the worker reaches it) and waits on events. Synchronous copies wait for the
 * device's default stream first, as a legacy default stream does. Memory comes from
 * posix_memalign and is capped per device, so out-of-memory is a C_FAILED as on a real device.
 * Events are reference-counted: a stream's queued wait on an event outlives the event's destroy.
 * It has dipu's virtual-memory group too (DipuInitVirtualMemory, for expandable segments): a range is
 * reserved with mmap(PROT_NONE), memory mapped into it with MAP_FIXED and counted in the same capacity,
 * and unmapped by mapping PROT_NONE over it again, which gives the pages back.
 *
 * A task may fail (a collective of xccl.c that gave up): its stream then stays failed, as a CUDA
 * stream does after a failed kernel, and every event recorded on it afterwards reports C_ERROR to
 * synchronize_event and query_event. That is how an asynchronous failure reaches the framework,
 * which has no other way to ask.
 *
 * Environment: DIPU_REFC_DEVICE_COUNT (default 2), DIPU_REFC_MEMORY_MB (per device, default
 * 8192), DIPU_REFC_TASK_DELAY_US (each task waits this long first, default 0: widens races in
 * tests).
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "dipu/custom_runtime.h"
#include "refc.h"

#define MAX_DEVICES 16

typedef enum { TASK_COPY, TASK_CALLBACK, TASK_RECORD, TASK_WAIT, TASK_MARK, TASK_CALL } TaskKind;

struct C_Event_st {
  pthread_mutex_t mutex;
  pthread_cond_t done;
  unsigned long recorded, completed; /* record count, and how many of those the stream reached */
  int refs; /* the owner's, plus one per queued task naming the event: freed at zero */
  int failed; /* its last record was reached by a failed stream */
};

/* Drops one reference; the last frees the event. A stream may still have to wait on an event
 * the framework has already destroyed (its wait was queued before the destroy). */
static void event_release(C_Event event) {
  pthread_mutex_lock(&event->mutex);
  int last = --event->refs == 0;
  pthread_mutex_unlock(&event->mutex);
  if (!last) return;
  pthread_mutex_destroy(&event->mutex);
  pthread_cond_destroy(&event->done);
  free(event);
}

typedef struct Task {
  TaskKind kind;
  struct Task *next;
  void *dst;
  const void *src;
  size_t size;
  C_Callback callback;
  void *user_data;
  C_Event event;
  unsigned long ticket; /* TASK_RECORD: the record it completes; TASK_WAIT: the one it waits for */
  int device;
  RefcCall call; /* TASK_CALL: call(user_data), then release(user_data) */
  void (*release)(void *);
} Task;

struct C_Stream_st {
  int device;
  pthread_t worker;
  pthread_mutex_t mutex;
  pthread_cond_t changed;
  Task *head, *tail;
  unsigned long queued, finished; /* tasks ever queued, tasks run */
  int stopping;
  int failed; /* a TASK_CALL on it failed: events recorded after it report C_ERROR */
  struct C_Stream_st *next_of_device;
};

static struct {
  int count;
  size_t capacity, used[MAX_DEVICES];
  long delay_us;
  pthread_mutex_t mutex; /* memory accounting and the stream lists */
  struct C_Stream_st *defaults[MAX_DEVICES];
  struct C_Stream_st *streams[MAX_DEVICES]; /* every stream of a device, defaults included */
} g = {.mutex = PTHREAD_MUTEX_INITIALIZER};
static __thread int t_current;

static long env_long(const char *name, long fallback) {
  const char *text = getenv(name);
  return text && *text ? strtol(text, NULL, 10) : fallback;
}

static void event_complete(C_Event event, unsigned long ticket, int failed) {
  pthread_mutex_lock(&event->mutex);
  if (ticket > event->completed) event->completed = ticket;
  event->failed = failed;
  pthread_cond_broadcast(&event->done);
  pthread_mutex_unlock(&event->mutex);
}

static void event_wait(C_Event event, unsigned long ticket) {
  pthread_mutex_lock(&event->mutex);
  while (event->completed < ticket) pthread_cond_wait(&event->done, &event->mutex);
  pthread_mutex_unlock(&event->mutex);
}

static void run(Task *task, C_Stream stream) {
  if (g.delay_us > 0) {
    struct timespec pause = {g.delay_us / 1000000, (g.delay_us % 1000000) * 1000};
    nanosleep(&pause, NULL);
  }
  switch (task->kind) {
    case TASK_COPY: memcpy(task->dst, task->src, task->size); break;
    case TASK_CALLBACK: {
      struct C_Device_st device = {task->device};
      C_Status status = C_SUCCESS;
      task->callback(&device, stream, task->user_data, &status);
      break;
    }
    case TASK_RECORD:
      event_complete(task->event, task->ticket, stream->failed);
      event_release(task->event);
      break;
    case TASK_WAIT:
      event_wait(task->event, task->ticket);
      event_release(task->event);
      break;
    case TASK_MARK: break;
    case TASK_CALL:
      if (task->call(task->user_data) != C_SUCCESS) stream->failed = 1;
      if (task->release) task->release(task->user_data);
      break;
  }
}

static void *worker(void *arg) {
  C_Stream stream = arg;
  pthread_mutex_lock(&stream->mutex);
  for (;;) {
    while (!stream->head && !stream->stopping) pthread_cond_wait(&stream->changed, &stream->mutex);
    if (!stream->head) break; /* stopping, and nothing left */
    Task *task = stream->head;
    pthread_mutex_unlock(&stream->mutex);
    run(task, stream);
    pthread_mutex_lock(&stream->mutex);
    stream->head = task->next;
    if (!stream->head) stream->tail = NULL;
    stream->finished++;
    free(task);
    pthread_cond_broadcast(&stream->changed);
  }
  pthread_mutex_unlock(&stream->mutex);
  return NULL;
}

static C_Stream stream_new(int device) {
  C_Stream stream = calloc(1, sizeof(*stream));
  if (!stream) return NULL;
  stream->device = device;
  pthread_mutex_init(&stream->mutex, NULL);
  pthread_cond_init(&stream->changed, NULL);
  if (pthread_create(&stream->worker, NULL, worker, stream) != 0) {
    free(stream);
    return NULL;
  }
  pthread_mutex_lock(&g.mutex);
  stream->next_of_device = g.streams[device];
  g.streams[device] = stream;
  pthread_mutex_unlock(&g.mutex);
  return stream;
}

static C_Stream resolve(const C_Device device, C_Stream stream) { return stream ? stream : g.defaults[device->id]; }

/* Queues `task` (heap-allocated by the caller); returns its position in the stream's order. */
static unsigned long enqueue(C_Stream stream, Task *task) {
  pthread_mutex_lock(&stream->mutex);
  task->next = NULL;
  if (stream->tail)
    stream->tail->next = task;
  else
    stream->head = task;
  stream->tail = task;
  unsigned long position = ++stream->queued;
  pthread_cond_broadcast(&stream->changed);
  pthread_mutex_unlock(&stream->mutex);
  return position;
}

static void drain(C_Stream stream) {
  pthread_mutex_lock(&stream->mutex);
  unsigned long target = stream->queued;
  while (stream->finished < target) pthread_cond_wait(&stream->changed, &stream->mutex);
  pthread_mutex_unlock(&stream->mutex);
}

static Task *task_new(TaskKind kind) {
  Task *task = calloc(1, sizeof(Task));
  if (task) task->kind = kind;
  return task;
}

/* ---- for xccl.c (refc.h) ---- */
int refc_current_device(void) { return t_current; }

C_Status refc_enqueue_call(int device, C_Stream stream, RefcCall call, void *arg, void (*release)(void *)) {
  struct C_Device_st d = {device};
  if (device < 0 || device >= g.count || !g.defaults[device]) return C_ERROR;
  Task *task = task_new(TASK_CALL);
  if (!task) return C_FAILED;
  task->call = call;
  task->user_data = arg;
  task->release = release;
  enqueue(resolve(&d, stream), task);
  return C_SUCCESS;
}

/* ---- devices ---- */
static C_Status initialize(void) {
  g.count = (int)env_long("DIPU_REFC_DEVICE_COUNT", 2);
  if (g.count < 1 || g.count > MAX_DEVICES) return C_ERROR;
  g.capacity = (size_t)env_long("DIPU_REFC_MEMORY_MB", 8192) << 20;
  g.delay_us = env_long("DIPU_REFC_TASK_DELAY_US", 0);
  return C_SUCCESS;
}
static C_Status init_device(const C_Device device) {
  if (g.defaults[device->id]) return C_SUCCESS;
  g.defaults[device->id] = stream_new(device->id);
  return g.defaults[device->id] ? C_SUCCESS : C_FAILED;
}
static C_Status set_device(const C_Device device) {
  if (device->id < 0 || device->id >= g.count) return C_ERROR;
  t_current = device->id;
  return C_SUCCESS;
}
static C_Status get_device(const C_Device device) {
  device->id = t_current;
  return C_SUCCESS;
}
static C_Status get_device_count(size_t *count) {
  if (!g.count) initialize();
  *count = (size_t)g.count;
  return C_SUCCESS;
}
static C_Status get_device_list(size_t *devices) {
  for (int i = 0; i < g.count; ++i) devices[i] = (size_t)i;
  return C_SUCCESS;
}
static C_Status get_compute_capability(size_t *capability) {
  *capability = 10;
  return C_SUCCESS;
}
static C_Status get_runtime_version(size_t *version) {
  *version = 100;
  return C_SUCCESS;
}

/* ---- memory ---- */
static C_Status allocate(const C_Device device, void **ptr, size_t size) {
  *ptr = NULL;
  pthread_mutex_lock(&g.mutex);
  int fits = g.used[device->id] + size <= g.capacity;
  if (fits) g.used[device->id] += size;
  pthread_mutex_unlock(&g.mutex);
  if (!fits) return C_FAILED;
  if (posix_memalign(ptr, 64, size) != 0) {
    pthread_mutex_lock(&g.mutex);
    g.used[device->id] -= size;
    pthread_mutex_unlock(&g.mutex);
    *ptr = NULL;
    return C_FAILED;
  }
  return C_SUCCESS;
}
static C_Status deallocate(const C_Device device, void *ptr, size_t size) {
  free(ptr);
  pthread_mutex_lock(&g.mutex);
  g.used[device->id] -= size;
  pthread_mutex_unlock(&g.mutex);
  return C_SUCCESS;
}
/* ---- virtual memory (DipuVirtualMemoryInterface) ---- */
#define REFC_GRANULARITY ((size_t)2 << 20)
static C_Status vm_granularity(const C_Device device, size_t *granularity) {
  (void)device;
  *granularity = REFC_GRANULARITY;
  return C_SUCCESS;
}
static C_Status vm_reserve(const C_Device device, void **ptr, size_t size) {
  (void)device;
  void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  *ptr = p == MAP_FAILED ? NULL : p;
  return *ptr ? C_SUCCESS : C_FAILED;
}
static int vm_aligned(const void *ptr, size_t size) {
  return size > 0 && (uintptr_t)ptr % REFC_GRANULARITY == 0 && size % REFC_GRANULARITY == 0;
}
static C_Status vm_map(const C_Device device, void *ptr, size_t size) {
  if (!vm_aligned(ptr, size)) return C_ERROR;
  pthread_mutex_lock(&g.mutex);
  int fits = g.used[device->id] + size <= g.capacity;
  if (fits) g.used[device->id] += size;
  pthread_mutex_unlock(&g.mutex);
  if (!fits) return C_FAILED;
  if (mmap(ptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != ptr) {
    pthread_mutex_lock(&g.mutex);
    g.used[device->id] -= size;
    pthread_mutex_unlock(&g.mutex);
    return C_FAILED;
  }
  return C_SUCCESS;
}
static C_Status vm_unmap(const C_Device device, void *ptr, size_t size) {
  if (!vm_aligned(ptr, size)) return C_ERROR;
  if (mmap(ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != ptr)
    return C_INTERNAL_ERROR;
  pthread_mutex_lock(&g.mutex);
  g.used[device->id] -= size;
  pthread_mutex_unlock(&g.mutex);
  return C_SUCCESS;
}
static C_Status vm_release(const C_Device device, void *ptr, size_t size) {
  (void)device;
  return munmap(ptr, size) == 0 ? C_SUCCESS : C_ERROR;
}

void DipuInitVirtualMemory(DipuVirtualMemoryInterface *vm) {
  if (vm->size != sizeof(DipuVirtualMemoryInterface)) return; /* another layout: fill nothing */
  vm->granularity = vm_granularity;
  vm->reserve = vm_reserve;
  vm->map = vm_map;
  vm->unmap = vm_unmap;
  vm->release = vm_release;
}

static C_Status host_allocate(const C_Device device, void **ptr, size_t size) {
  (void)device;
  return posix_memalign(ptr, 64, size) == 0 ? C_SUCCESS : C_FAILED;
}
static C_Status host_deallocate(const C_Device device, void *ptr, size_t size) {
  (void)device;
  (void)size;
  free(ptr);
  return C_SUCCESS;
}
static C_Status memory_stats(const C_Device device, size_t *total, size_t *free_bytes) {
  pthread_mutex_lock(&g.mutex);
  *total = g.capacity;
  *free_bytes = g.capacity - g.used[device->id];
  pthread_mutex_unlock(&g.mutex);
  return C_SUCCESS;
}
static C_Status memory_set(const C_Device device, void *ptr, unsigned char value, size_t size) {
  drain(g.defaults[device->id]);
  memset(ptr, value, size);
  return C_SUCCESS;
}
static C_Status copy(const C_Device device, void *dst, const void *src, size_t size) {
  drain(g.defaults[device->id]);
  memcpy(dst, src, size);
  return C_SUCCESS;
}
static C_Status copy_p2p(const C_Device dst_device, const C_Device src_device, void *dst, const void *src,
                         size_t size) {
  drain(g.defaults[src_device->id]);
  return copy(dst_device, dst, src, size);
}
static C_Status async_copy(const C_Device device, C_Stream stream, void *dst, const void *src, size_t size) {
  Task *task = task_new(TASK_COPY);
  if (!task) return C_FAILED;
  task->dst = dst;
  task->src = src;
  task->size = size;
  enqueue(resolve(device, stream), task);
  return C_SUCCESS;
}

/* ---- streams and events ---- */
static C_Status create_stream(const C_Device device, C_Stream *stream) {
  *stream = stream_new(device->id);
  return *stream ? C_SUCCESS : C_FAILED;
}
static C_Status destroy_stream(const C_Device device, C_Stream stream) {
  (void)device;
  (void)stream; /* streams live until the process ends: dipu keeps a fixed pool of them */
  return C_SUCCESS;
}
static C_Status query_stream(const C_Device device, C_Stream stream) {
  stream = resolve(device, stream);
  pthread_mutex_lock(&stream->mutex);
  int idle = stream->finished == stream->queued;
  pthread_mutex_unlock(&stream->mutex);
  return idle ? C_SUCCESS : C_FAILED;
}
static C_Status synchronize_stream(const C_Device device, C_Stream stream) {
  drain(resolve(device, stream));
  return C_SUCCESS;
}
static C_Status synchronize_device(const C_Device device) {
  pthread_mutex_lock(&g.mutex);
  C_Stream first = g.streams[device->id];
  pthread_mutex_unlock(&g.mutex);
  for (C_Stream s = first; s; s = s->next_of_device) drain(s);
  return C_SUCCESS;
}
static C_Status add_callback(const C_Device device, C_Stream stream, C_Callback callback, void *user_data) {
  Task *task = task_new(TASK_CALLBACK);
  if (!task) return C_FAILED;
  task->callback = callback;
  task->user_data = user_data;
  task->device = device->id;
  enqueue(resolve(device, stream), task);
  return C_SUCCESS;
}
static C_Status create_event(const C_Device device, C_Event *event) {
  (void)device;
  *event = calloc(1, sizeof(struct C_Event_st));
  if (!*event) return C_FAILED;
  pthread_mutex_init(&(*event)->mutex, NULL);
  pthread_cond_init(&(*event)->done, NULL);
  (*event)->refs = 1;
  return C_SUCCESS;
}
static C_Status destroy_event(const C_Device device, C_Event event) {
  (void)device;
  event_release(event); /* queued records and waits keep it alive until they have run */
  return C_SUCCESS;
}
static C_Status record_event(const C_Device device, C_Stream stream, C_Event event) {
  Task *task = task_new(TASK_RECORD);
  if (!task) return C_FAILED;
  pthread_mutex_lock(&event->mutex);
  task->ticket = ++event->recorded;
  event->refs++;
  pthread_mutex_unlock(&event->mutex);
  task->event = event;
  enqueue(resolve(device, stream), task);
  return C_SUCCESS;
}
static C_Status query_event(const C_Device device, C_Event event) {
  (void)device;
  pthread_mutex_lock(&event->mutex);
  int done = event->completed >= event->recorded, failed = event->failed;
  pthread_mutex_unlock(&event->mutex);
  return !done ? C_FAILED : failed ? C_ERROR : C_SUCCESS;
}
static C_Status synchronize_event(const C_Device device, C_Event event) {
  (void)device;
  pthread_mutex_lock(&event->mutex);
  unsigned long last = event->recorded;
  pthread_mutex_unlock(&event->mutex);
  event_wait(event, last);
  pthread_mutex_lock(&event->mutex);
  int failed = event->failed;
  pthread_mutex_unlock(&event->mutex);
  return failed ? C_ERROR : C_SUCCESS;
}
static C_Status stream_wait_event(const C_Device device, C_Stream stream, C_Event event) {
  Task *task = task_new(TASK_WAIT);
  if (!task) return C_FAILED;
  pthread_mutex_lock(&event->mutex);
  task->ticket = event->recorded; /* the record the stream must wait for: the latest */
  event->refs++;
  pthread_mutex_unlock(&event->mutex);
  task->event = event;
  enqueue(resolve(device, stream), task);
  return C_SUCCESS;
}

void InitPlugin(CustomRuntimeParams *params) {
  if (params->size != sizeof(CustomRuntimeParams) || !params->interface ||
      params->interface->size != sizeof(C_DeviceInterface))
    return; /* a framework of another ABI: report nothing, so it refuses the plug-in */
  params->version.major = DIPU_CUSTOM_RUNTIME_MAJOR;
  params->version.minor = DIPU_CUSTOM_RUNTIME_MINOR;
  params->version.patch = DIPU_CUSTOM_RUNTIME_PATCH;
  params->device_type = "refc";
  params->sub_device_type = "reference C runtime";

  C_DeviceInterface *t = params->interface;
  t->initialize = initialize;
  t->init_device = init_device;
  t->set_device = set_device;
  t->get_device = get_device;
  t->create_stream = create_stream;
  t->destroy_stream = destroy_stream;
  t->query_stream = query_stream;
  t->stream_add_callback = add_callback;
  t->create_event = create_event;
  t->record_event = record_event;
  t->destroy_event = destroy_event;
  t->query_event = query_event;
  t->synchronize_device = synchronize_device;
  t->synchronize_stream = synchronize_stream;
  t->synchronize_event = synchronize_event;
  t->stream_wait_event = stream_wait_event;
  t->device_memory_allocate = allocate;
  t->device_memory_deallocate = deallocate;
  t->device_memory_set = memory_set;
  t->host_memory_allocate = host_allocate;
  t->host_memory_deallocate = host_deallocate;
  t->memory_copy_h2d = copy;
  t->memory_copy_d2h = copy;
  t->memory_copy_d2d = copy;
  t->memory_copy_p2p = copy_p2p;
  t->async_memory_copy_h2d = async_copy;
  t->async_memory_copy_d2h = async_copy;
  t->async_memory_copy_d2d = async_copy;
  t->get_device_count = get_device_count;
  t->get_device_list = get_device_list;
  t->device_memory_stats = memory_stats;
  t->get_compute_capability = get_compute_capability;
  t->get_runtime_version = get_runtime_version;
  if (refc_fill_xccl) refc_fill_xccl(t); /* xccl.c, where it was compiled in */
}
