/* refc's collectives: the xccl_* group of the custom-runtime ABI for ranks on one machine.
 *
 * Note [refc collectives]
 * A communicator is a POSIX shared-memory segment named by the unique id (rank 0 creates it; the
 * others attach; rank 0 unlinks the name once all have, so nothing is left in /dev/shm even if a
 * rank dies later). The segment holds a header (a barrier, an abort flag, point-to-point counters)
 * and two sets of one slot per rank (16 MiB in all, whatever the number of ranks, so that a small
 * /dev/shm holds it). Every collective is a task on the stream it is given, run by that stream's
 * worker (runtime.c), so it is ordered with the stream's other work; it proceeds in
 * chunks of one slot: each rank writes its part into its slot, all meet at the barrier, each reads
 * what it needs from the others' slots. Chunks alternate between the two sets, so one barrier per
 * chunk suffices: a rank rewrites a set only after the barrier of the chunk in between, which every
 * rank reaches only once it has finished reading that set. An all-reduce chunk is a reduce-scatter
 * (rank r reduces part r of every slot) and an all-gather (two barriers), so the reduction work is
 * shared; a small chunk, and every chunk at two ranks, takes one barrier instead (each rank reduces
 * all of it). Reductions run in rank order, so every rank gets the same bits.
 * Point-to-point messages are eager: a send writes the message into a segment of its own and counts
 * it, a recv waits for the count, so sends never wait for receives (batch_isend_irecv, all_to_all).
 *
 * Waits spin briefly, then sleep on a futex in the shared segment, and give up after
 * DIPU_REFC_XCCL_TIMEOUT_S (default 600) or once the communicator is aborted: the task then fails,
 * which fails its stream (runtime.c), and the framework sees C_ERROR on the next event it
 * synchronizes. xccl_destroy_comm while a collective is still queued or running aborts it, on every
 * rank (the framework destroys a communicator whose collective outlived its timeout, as PyTorch
 * aborts an NCCL communicator).
 *
 * DIPU_REFC_XCCL_VERBOSE=1 says how each new communicator works, on stderr.
 * Test switches: DIPU_REFC_XCCL_SLOTS_ONLY=1 (read when a communicator is made) keeps large
 * all-reduces on the slots (Note [Large all-reduces read the peers' memory]);
 * DIPU_REFC_XCCL_FAIL=<function>:<n> makes the n-th and later calls of that xccl_*
 * function return C_INTERNAL_ERROR; DIPU_REFC_XCCL_FAKE_ALL_REDUCE=1 makes xccl_all_reduce a mere
 * barrier that leaves the buffer as it is (what a plug-in that only claims the function does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dipu/custom_runtime.h"
#include "refc.h"

#define UID_BYTES 48
#define MAX_RANKS 64
#define SEGMENT_BYTES ((size_t)16 << 20) /* the slots of one communicator, all ranks and both sets */
#define HEADER_BYTES ((size_t)1 << 16)
#define MAGIC 0x64697075u /* "dipu": the header is initialized */

typedef struct {
  _Atomic uint32_t magic, attached, arrived, generation, aborted, p2p_signal;
  uint32_t ranks;
  _Atomic uint64_t sent[MAX_RANKS][MAX_RANKS]; /* messages ever sent, [from][to] */
  /* Note [Large all-reduces read the peers' memory] */
  _Atomic int32_t pid[MAX_RANKS], can_read[MAX_RANKS];
  _Atomic uint64_t send_at[MAX_RANKS], recv_at[MAX_RANKS];
} Header;
_Static_assert(sizeof(Header) <= HEADER_BYTES, "the header fits its page");

struct C_CCLComm_st {
  Header *header;
  char *slots;
  size_t mapped;
  int rank, ranks, device;
  size_t slot_bytes; /* SEGMENT_BYTES / (2 x ranks), at most 4 MiB: the chunk of a collective */
  char name[UID_BYTES];
  unsigned long chunk; /* chunks run so far: picks the slot set */
  uint64_t sent[MAX_RANKS], received[MAX_RANKS];
  _Atomic int refs; /* the owner's, plus one per queued task */
  int read_peers; /* every rank may read every other's memory */
  char *block; /* 2 x BLOCK_BYTES: the accumulator and one peer's data */
  _Atomic int pending; /* queued or running tasks */
};
typedef struct C_CCLComm_st Comm;

static double timeout_s(void) {
  const char *text = getenv("DIPU_REFC_XCCL_TIMEOUT_S");
  double value = text && *text ? strtod(text, NULL) : 600.0;
  return value > 0 ? value : 600.0;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- test switches ---- */
static C_Status injected(const char *function) {
  static _Atomic unsigned long calls[16];
  static const char *names[16] = {"xccl_all_reduce", "xccl_broadcast",      "xccl_reduce",
                                  "xccl_all_gather", "xccl_reduce_scatter", "xccl_send",
                                  "xccl_recv",       "xccl_all_to_all",     "xccl_comm_init_rank"};
  const char *spec = getenv("DIPU_REFC_XCCL_FAIL");
  size_t length = strlen(function);
  if (!spec || strncmp(spec, function, length) != 0 || spec[length] != ':') return C_SUCCESS;
  unsigned long from = strtoul(spec + length + 1, NULL, 10);
  for (int i = 0; i < 16 && names[i]; ++i)
    if (strcmp(names[i], function) == 0 && ++calls[i] >= from) return C_INTERNAL_ERROR;
  return C_SUCCESS;
}

/* ---- waiting ---- */
static void futex_wake(_Atomic uint32_t *word) {
  syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Waits while *word == old. 0 once it changed; -1 on abort or timeout (reported on stderr). */
static int wait_change(Comm *c, _Atomic uint32_t *word, uint32_t old, const char *what) {
  for (int spin = 0; spin < 64; ++spin) {
    if (atomic_load(word) != old) return 0;
    sched_yield();
  }
  double deadline = now_s() + timeout_s();
  for (;;) {
    if (atomic_load(word) != old) return 0;
    if (atomic_load(&c->header->aborted)) {
      fprintf(stderr, "refc xccl: rank %d of %d: %s aborted (the communicator was destroyed)\n", c->rank, c->ranks,
              what);
      return -1;
    }
    double left = deadline - now_s();
    if (left <= 0) {
      fprintf(stderr,
              "refc xccl: rank %d of %d: %s gave up after %.0f s waiting for the other ranks "
              "(DIPU_REFC_XCCL_TIMEOUT_S)\n",
              c->rank, c->ranks, what, timeout_s());
      atomic_store(&c->header->aborted, 1);
      futex_wake(&c->header->generation);
      futex_wake(&c->header->p2p_signal);
      return -1;
    }
    struct timespec slice = {0, 20 * 1000 * 1000}; /* wake up now and then to check the abort flag */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, old, &slice, NULL, 0);
  }
}

static int barrier(Comm *c, const char *what) {
  Header *h = c->header;
  uint32_t generation = atomic_load(&h->generation);
  if (atomic_fetch_add(&h->arrived, 1) == (uint32_t)c->ranks - 1) {
    atomic_store(&h->arrived, 0);
    atomic_fetch_add(&h->generation, 1);
    futex_wake(&h->generation);
    return 0;
  }
  return wait_change(c, &h->generation, generation, what);
}

/* The slot of `rank` in the set of the next chunk. */
static char *slot(Comm *c, int rank) {
  size_t set = c->chunk & 1;
  return c->slots + (set * (size_t)c->ranks + (size_t)rank) * c->slot_bytes;
}

/* ---- element types and reductions ---- */
static size_t type_size(C_DataType type) {
  switch (type) {
    case BOOL:
    case UINT8:
    case INT8: return 1;
    case UINT16:
    case INT16:
    case FLOAT16:
    case BFLOAT16: return 2;
    case UINT32:
    case INT32:
    case FLOAT32: return 4;
    case UINT64:
    case INT64:
    case FLOAT64:
    case COMPLEX64: return 8;
    case COMPLEX128: return 16;
    default: return 0;
  }
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa) { /* subnormal: normalize */
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | ((uint32_t)(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  } else {
    bits = sign;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Round to nearest even, as torch's conversion does. */
static uint16_t to_half(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
  uint32_t abs = bits & 0x7fffffff;
  if (abs >= 0x7f800000u) return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);
  if (abs >= 0x477ff000u) return sign | 0x7c00; /* rounds to infinity */
  if (abs < 0x38800000u) { /* subnormal half (or zero) */
    float magnitude, rounded;
    memcpy(&magnitude, &abs, 4);
    rounded = magnitude + 0.5f; /* the ulp of 0.5 is 2^-24, a half subnormal's: rounds to nearest even */
    uint32_t rounded_bits;
    memcpy(&rounded_bits, &rounded, 4);
    return sign | (uint16_t)(rounded_bits - 0x3f000000u);
  }
  uint32_t mantissa = abs + 0xfff + ((abs >> 13) & 1) - 0x38000000u;
  return sign | (uint16_t)(mantissa >> 13);
}

static float from_bfloat16(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t to_bfloat16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
  return (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

#define LOOP(T, EXPR)                             \
  do {                                            \
    T *d = (T *)dst;                              \
    const T *x = (const T *)a, *y = (const T *)b; \
    for (size_t i = 0; i < n; ++i) {              \
      T p = x[i], q = y[i];                       \
      d[i] = (EXPR);                              \
    }                                             \
  } while (0)
/* Sums and products of signed integers wrap, computed unsigned (the same bits, no overflow UB). */
#define INTEGER(S, U)                            \
  switch (op) {                                  \
    case SUM: LOOP(U, (U)(p + q)); return 0;     \
    case PRODUCT: LOOP(U, (U)(p * q)); return 0; \
    case MAX: LOOP(S, p > q ? p : q); return 0;  \
    case MIN: LOOP(S, p < q ? p : q); return 0;  \
    default: return -1;                          \
  }
#define FLOATING(T)                                       \
  switch (op) {                                           \
    case SUM: LOOP(T, p + q); return 0;                   \
    case PRODUCT: LOOP(T, p * q); return 0;               \
    case MAX: LOOP(T, p > q || p != p ? p : q); return 0; \
    case MIN: LOOP(T, p < q || p != p ? p : q); return 0; \
    default: return -1;                                   \
  }
#define HALF(FROM, TO)                                                                   \
  switch (op) {                                                                          \
    case SUM: LOOP(uint16_t, TO(FROM(p) + FROM(q))); return 0;                           \
    case PRODUCT: LOOP(uint16_t, TO(FROM(p) * FROM(q))); return 0;                       \
    case MAX: LOOP(uint16_t, FROM(p) > FROM(q) || FROM(p) != FROM(p) ? p : q); return 0; \
    case MIN: LOOP(uint16_t, FROM(p) < FROM(q) || FROM(p) != FROM(p) ? p : q); return 0; \
    default: return -1;                                                                  \
  }

/* dst[i] = a[i] op b[i] for n elements (dst may be a). -1: the type or op is not supported. */
static int reduce(void *dst, const void *a, const void *b, size_t n, C_DataType type, C_CCLReduceOp op) {
  switch (type) {
    case BOOL: /* sum and max are "or", product and min "and" */
      switch (op) {
        case SUM:
        case MAX: LOOP(uint8_t, (uint8_t)(p || q)); return 0;
        case PRODUCT:
        case MIN: LOOP(uint8_t, (uint8_t)(p && q)); return 0;
        default: return -1;
      }
    case UINT8: INTEGER(uint8_t, uint8_t)
    case INT8: INTEGER(int8_t, uint8_t)
    case UINT16: INTEGER(uint16_t, uint16_t)
    case INT16: INTEGER(int16_t, uint16_t)
    case UINT32: INTEGER(uint32_t, uint32_t)
    case INT32: INTEGER(int32_t, uint32_t)
    case UINT64: INTEGER(uint64_t, uint64_t)
    case INT64: INTEGER(int64_t, uint64_t)
    case FLOAT32: FLOATING(float)
    case FLOAT64: FLOATING(double)
    case FLOAT16: HALF(from_half, to_half)
    case BFLOAT16: HALF(from_bfloat16, to_bfloat16)
    default: return -1;
  }
}

static int reducible(C_DataType type, C_CCLReduceOp op) {
  uint64_t x = 0;
  return reduce(&x, &x, &x, 0, type, op) == 0;
}

/* out = slot[0] op slot[1] op ... in rank order, over `n` elements at byte `offset` of each slot. */
static void reduce_slots(Comm *c, char *out, size_t offset, size_t n, C_DataType type, C_CCLReduceOp op) {
  size_t bytes = n * type_size(type);
  if (c->ranks == 1) {
    memmove(out, slot(c, 0) + offset, bytes);
    return;
  }
  reduce(out, slot(c, 0) + offset, slot(c, 1) + offset, n, type, op);
  for (int k = 2; k < c->ranks; ++k) reduce(out, out, slot(c, k) + offset, n, type, op);
}

/* ---- the collectives, run on a stream's worker ---- */
/* Below this, or at two ranks (where splitting the work saves no memory traffic, only adds a
 * barrier), every rank reduces the whole chunk itself. */
#define SMALL_BYTES ((size_t)1 << 16)

/* Note [Large all-reduces read the peers' memory]
 * Through the slots, a large all-reduce copies every byte into shared memory first. Linux lets a
 * process read another's memory in one copy (process_vm_readv, which Yama allows once the target
 * has named any process its tracer, as every rank does at init), so where every rank can, a large
 * all-reduce publishes its buffers' addresses instead: rank r reads part r of every rank's input,
 * reduces it in rank order into its own output, and, after a barrier, reads every other part from
 * the rank that reduced it. A last barrier keeps every buffer alive until no one reads it. Half the
 * memory traffic of the slots, and three barriers whatever the size. */
#define BLOCK_BYTES ((size_t)1 << 18)
#define READ_PEERS_BYTES ((size_t)1 << 20) /* from this size on */

static int read_peer(Comm *c, int peer, void *dst, uint64_t address, size_t bytes) {
  while (bytes) {
    struct iovec local = {dst, bytes}, remote = {(void *)(uintptr_t)address, bytes};
    ssize_t got = process_vm_readv(atomic_load(&c->header->pid[peer]), &local, 1, &remote, 1, 0);
    if (got <= 0) {
      fprintf(stderr, "refc xccl: rank %d: reading rank %d's memory failed: %s\n", c->rank, peer, strerror(errno));
      return -1;
    }
    dst = (char *)dst + got;
    address += (uint64_t)got;
    bytes -= (size_t)got;
  }
  return 0;
}

static int run_all_reduce_reading_peers(Comm *c, const char *send, char *recv, size_t count, C_DataType type,
                                        C_CCLReduceOp op) {
  Header *h = c->header;
  size_t size = type_size(type), part = (count + c->ranks - 1) / c->ranks;
  atomic_store(&h->send_at[c->rank], (uint64_t)(uintptr_t)send);
  atomic_store(&h->recv_at[c->rank], (uint64_t)(uintptr_t)recv);
  if (barrier(c, "all_reduce")) return -1;
  size_t lo = part * c->rank < count ? part * c->rank : count, hi = lo + part < count ? lo + part : count;
  size_t per_block = BLOCK_BYTES / size;
  char *acc = c->block, *theirs = c->block + BLOCK_BYTES;
  for (size_t start = lo; start < hi; start += per_block) {
    size_t n = hi - start < per_block ? hi - start : per_block, offset = start * size;
    for (int k = 0; k < c->ranks; ++k) {
      const char *data = send + offset;
      if (k != c->rank) {
        if (read_peer(c, k, k ? theirs : acc, atomic_load(&h->send_at[k]) + offset, n * size)) return -1;
        data = k ? theirs : acc;
      }
      if (k == 0 && data != acc) memcpy(acc, data, n * size);
      if (k > 0) reduce(acc, acc, data, n, type, op);
    }
    memcpy(recv + offset, acc, n * size); /* in place: this block of the input was read above */
  }
  if (barrier(c, "all_reduce")) return -1;
  for (int j = 0; j < c->ranks; ++j) {
    size_t jlo = part * j < count ? part * j : count, jhi = jlo + part < count ? jlo + part : count;
    if (j != c->rank && jhi > jlo &&
        read_peer(c, j, recv + jlo * size, atomic_load(&h->recv_at[j]) + jlo * size, (jhi - jlo) * size))
      return -1;
  }
  return barrier(c, "all_reduce");
}

/* root < 0: all-reduce; else reduce to root. */
static int run_reduce(Comm *c, const char *send, char *recv, size_t count, C_DataType type, C_CCLReduceOp op, int root,
                      int fake, const char *what) {
  size_t size = type_size(type), per_chunk = c->slot_bytes / size;
  if (root < 0 && !fake && c->read_peers && count * size >= READ_PEERS_BYTES && c->ranks > 1)
    return run_all_reduce_reading_peers(c, send, recv, count, type, op);
  for (size_t start = 0; start < count; start += per_chunk, c->chunk++) {
    size_t n = count - start < per_chunk ? count - start : per_chunk;
    char *mine = slot(c, c->rank);
    memcpy(mine, send + start * size, n * size);
    if (barrier(c, what)) return -1;
    if (fake) continue;
    if (root >= 0 || c->ranks <= 2 || n * size <= SMALL_BYTES) {
      if (root < 0 || root == c->rank) reduce_slots(c, recv + start * size, 0, n, type, op);
      continue;
    }
    size_t part = (n + c->ranks - 1) / c->ranks;
    size_t lo = part * c->rank < n ? part * c->rank : n, hi = lo + part < n ? lo + part : n;
    reduce_slots(c, recv + (start + lo) * size, lo * size, hi - lo, type, op);
    memcpy(mine + lo * size, recv + (start + lo) * size, (hi - lo) * size);
    if (barrier(c, what)) return -1;
    for (int j = 0; j < c->ranks; ++j) {
      size_t jlo = part * j < n ? part * j : n, jhi = jlo + part < n ? jlo + part : n;
      if (j != c->rank) memcpy(recv + (start + jlo) * size, slot(c, j) + jlo * size, (jhi - jlo) * size);
    }
  }
  return 0;
}

static int run_broadcast(Comm *c, char *buf, size_t bytes, int root) {
  for (size_t start = 0; start < bytes; start += c->slot_bytes, c->chunk++) {
    size_t n = bytes - start < c->slot_bytes ? bytes - start : c->slot_bytes;
    if (c->rank == root) memcpy(slot(c, root), buf + start, n);
    if (barrier(c, "broadcast")) return -1;
    if (c->rank != root) memcpy(buf + start, slot(c, root), n);
  }
  return 0;
}

static int run_all_gather(Comm *c, const char *send, char *recv, size_t bytes) {
  for (size_t start = 0; start < bytes; start += c->slot_bytes, c->chunk++) {
    size_t n = bytes - start < c->slot_bytes ? bytes - start : c->slot_bytes;
    memcpy(slot(c, c->rank), send + start, n);
    if (barrier(c, "all_gather")) return -1;
    for (int j = 0; j < c->ranks; ++j) memcpy(recv + j * bytes + start, slot(c, j), n);
  }
  return 0;
}

static int run_reduce_scatter(Comm *c, const char *send, char *recv, size_t count, C_DataType type, C_CCLReduceOp op) {
  size_t size = type_size(type), per_chunk = c->slot_bytes / size / (size_t)c->ranks;
  for (size_t start = 0; start < count; start += per_chunk, c->chunk++) {
    size_t n = count - start < per_chunk ? count - start : per_chunk;
    char *mine = slot(c, c->rank);
    for (int j = 0; j < c->ranks; ++j) memcpy(mine + j * n * size, send + (j * count + start) * size, n * size);
    if (barrier(c, "reduce_scatter")) return -1;
    reduce_slots(c, recv + start * size, c->rank * n * size, n, type, op);
  }
  return 0;
}

/* ---- point to point: one shared-memory segment per message ---- */
static void message_name(char *out, size_t size, Comm *c, int from, int to, uint64_t seq) {
  snprintf(out, size, "%s.%d.%d.%llu", c->name, from, to, (unsigned long long)seq);
}

static int run_send(Comm *c, const void *buf, size_t bytes, int to) {
  char name[UID_BYTES + 64];
  message_name(name, sizeof name, c, c->rank, to, c->sent[to]++);
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    fprintf(stderr, "refc xccl: send to rank %d: shm_open(%s): %s\n", to, name, strerror(errno));
    return -1;
  }
  int failed = 0;
  if (bytes) {
    int error = posix_fallocate(fd, 0, (off_t)bytes);
    void *map = error ? MAP_FAILED : mmap(NULL, bytes, PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      fprintf(stderr, "refc xccl: send of %zu bytes to rank %d: no room in /dev/shm (%s)\n", bytes, to,
              strerror(error ? error : errno));
      shm_unlink(name);
      failed = 1;
    } else {
      memcpy(map, buf, bytes);
      munmap(map, bytes);
    }
  }
  close(fd);
  if (failed) return -1;
  Header *h = c->header;
  atomic_fetch_add(&h->sent[c->rank][to], 1);
  atomic_fetch_add(&h->p2p_signal, 1);
  futex_wake(&h->p2p_signal);
  return 0;
}

static int run_recv(Comm *c, void *buf, size_t bytes, int from) {
  Header *h = c->header;
  uint64_t seq = c->received[from]++;
  for (;;) {
    uint32_t signal = atomic_load(&h->p2p_signal);
    if (atomic_load(&h->sent[from][c->rank]) > seq) break;
    if (wait_change(c, &h->p2p_signal, signal, "recv")) return -1;
  }
  char name[UID_BYTES + 64];
  message_name(name, sizeof name, c, from, c->rank, seq);
  int fd = shm_open(name, O_RDONLY, 0);
  if (fd < 0) {
    fprintf(stderr, "refc xccl: recv from rank %d: shm_open(%s): %s\n", from, name, strerror(errno));
    return -1;
  }
  shm_unlink(name);
  struct stat info;
  int failed = fstat(fd, &info) != 0 || (size_t)info.st_size != bytes;
  if (failed) {
    fprintf(stderr, "refc xccl: recv of %zu bytes from rank %d, which sent %lld\n", bytes, from,
            (long long)info.st_size);
  } else if (bytes) {
    void *map = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      failed = 1;
    } else {
      memcpy(buf, map, bytes);
      munmap(map, bytes);
    }
  }
  close(fd);
  return failed ? -1 : 0;
}

/* ---- tasks ---- */
typedef enum { ALL_REDUCE, BROADCAST, REDUCE, ALL_GATHER, REDUCE_SCATTER, SEND, RECV, ALL_TO_ALL } Kind;

typedef struct {
  Kind kind;
  Comm *comm;
  const void *send;
  void *recv;
  size_t count;
  C_DataType type;
  C_CCLReduceOp op;
  int peer; /* root, destination or source */
  int fake;
  /* all_to_all, one entry per rank */
  const void **sends;
  void **recvs;
  size_t *send_bytes, *recv_bytes;
} Job;

static void comm_release(Comm *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  munmap(c->header, c->mapped);
  free(c->block);
  free(c);
}

static C_Status run_job(void *arg) {
  Job *job = arg;
  Comm *c = job->comm;
  size_t bytes = job->count * type_size(job->type);
  int failed = 0;
  switch (job->kind) {
    case ALL_REDUCE:
      failed = run_reduce(c, job->send, job->recv, job->count, job->type, job->op, -1, job->fake, "all_reduce");
      break;
    case REDUCE:
      failed = run_reduce(c, job->send, job->recv, job->count, job->type, job->op, job->peer, 0, "reduce");
      break;
    case BROADCAST: failed = run_broadcast(c, job->recv, bytes, job->peer); break;
    case ALL_GATHER: failed = run_all_gather(c, job->send, job->recv, bytes); break;
    case REDUCE_SCATTER: failed = run_reduce_scatter(c, job->send, job->recv, job->count, job->type, job->op); break;
    case SEND: failed = run_send(c, job->send, bytes, job->peer); break;
    case RECV: failed = run_recv(c, job->recv, bytes, job->peer); break;
    case ALL_TO_ALL:
      for (int j = 0; j < c->ranks && !failed; ++j)
        if (j != c->rank) failed = run_send(c, job->sends[j], job->send_bytes[j], j);
      if (!failed) memmove(job->recvs[c->rank], job->sends[c->rank], job->recv_bytes[c->rank]);
      for (int j = 0; j < c->ranks && !failed; ++j)
        if (j != c->rank) failed = run_recv(c, job->recvs[j], job->recv_bytes[j], j);
      break;
  }
  return failed ? C_ERROR : C_SUCCESS;
}

static void release_job(void *arg) {
  Job *job = arg;
  atomic_fetch_sub(&job->comm->pending, 1);
  comm_release(job->comm);
  free(job->sends);
  free(job->recvs);
  free(job->send_bytes);
  free(job->recv_bytes);
  free(job);
}

static C_Status submit(Job *job, C_Stream stream) {
  Comm *c = job->comm;
  atomic_fetch_add(&c->refs, 1);
  atomic_fetch_add(&c->pending, 1);
  C_Status status = refc_enqueue_call(c->device, stream, run_job, job, release_job);
  if (status != C_SUCCESS) release_job(job);
  return status;
}

/* A job for `comm`, or null (with the reason on stderr) if the call cannot run. */
static Job *job_new(Kind kind, Comm *comm, C_DataType type, const char *function) {
  if (!comm) return NULL;
  if (atomic_load(&comm->header->aborted)) {
    fprintf(stderr, "refc xccl: rank %d: %s on an aborted communicator\n", comm->rank, function);
    return NULL;
  }
  if (!type_size(type)) {
    fprintf(stderr, "refc xccl: %s: unknown data type %d\n", function, (int)type);
    return NULL;
  }
  Job *job = calloc(1, sizeof(Job));
  if (job) {
    job->kind = kind;
    job->comm = comm;
    job->type = type;
  }
  return job;
}

/* ---- the ABI ---- */
static C_Status get_unique_id_size(size_t *size) {
  *size = UID_BYTES;
  return C_SUCCESS;
}

static C_Status get_unique_id(C_CCLRootId *id) {
  static _Atomic unsigned counter;
  if (!id || !id->data || id->sz < UID_BYTES) return C_ERROR;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  memset(id->data, 0, id->sz);
  snprintf(id->data, UID_BYTES, "/dipu-refc-%d-%llx-%x", (int)getpid(),
           (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec, atomic_fetch_add(&counter, 1));
  return C_SUCCESS;
}

static void pause_ms(int ms) {
  struct timespec pause = {0, ms * 1000000L};
  nanosleep(&pause, NULL);
}

static C_Status comm_init_rank(size_t ranks, C_CCLRootId *id, size_t rank, C_CCLComm *out) {
  *out = NULL;
  if (injected("xccl_comm_init_rank")) return C_INTERNAL_ERROR;
  if (ranks < 1 || ranks > MAX_RANKS || rank >= ranks || !id || !id->data || id->sz < UID_BYTES ||
      strncmp(id->data, "/dipu-refc-", 11) != 0)
    return C_ERROR;
  Comm *c = calloc(1, sizeof(Comm));
  if (!c) return C_FAILED;
  memcpy(c->name, id->data, UID_BYTES - 1);
  c->rank = (int)rank;
  c->ranks = (int)ranks;
  c->device = refc_current_device();
  atomic_store(&c->refs, 1);
  c->slot_bytes = SEGMENT_BYTES / (2 * ranks);
  if (c->slot_bytes > ((size_t)4 << 20)) c->slot_bytes = (size_t)4 << 20;
  c->slot_bytes &= ~(size_t)4095;
  c->mapped = HEADER_BYTES + 2 * ranks * c->slot_bytes;
  double deadline = now_s() + timeout_s();
  int fd = -1;
  if (rank == 0) {
    fd = shm_open(c->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    int error = fd < 0 ? errno : posix_fallocate(fd, 0, (off_t)c->mapped);
    if (error) {
      fprintf(stderr, "refc xccl: cannot create %s (%zu MiB in /dev/shm): %s\n", c->name, c->mapped >> 20,
              strerror(error));
      if (fd >= 0) {
        close(fd);
        shm_unlink(c->name);
      }
      free(c);
      return C_FAILED;
    }
  } else {
    for (;;) { /* until rank 0 has created it at full size */
      fd = shm_open(c->name, O_RDWR, 0);
      struct stat info;
      if (fd >= 0 && fstat(fd, &info) == 0 && (size_t)info.st_size >= c->mapped) break;
      if (fd >= 0) close(fd);
      if (now_s() > deadline) {
        fprintf(stderr, "refc xccl: rank %zu: rank 0 never created %s\n", rank, c->name);
        free(c);
        return C_ERROR;
      }
      pause_ms(1);
    }
  }
  void *map = mmap(NULL, c->mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    if (rank == 0) shm_unlink(c->name);
    free(c);
    return C_FAILED;
  }
  c->header = map;
  c->slots = (char *)map + HEADER_BYTES;
  Header *h = c->header;
  if (rank == 0) {
    h->ranks = (uint32_t)ranks;
    atomic_store(&h->magic, MAGIC);
  } else {
    while (atomic_load(&h->magic) != MAGIC && now_s() < deadline) pause_ms(1);
  }
  int agreed = atomic_load(&h->magic) == MAGIC && h->ranks == ranks;
  if (agreed) atomic_fetch_add(&h->attached, 1);
  while (agreed && atomic_load(&h->attached) < ranks && !atomic_load(&h->aborted) && now_s() < deadline) pause_ms(1);
  if (rank == 0) shm_unlink(c->name); /* every rank has it mapped, or never will */
  if (!agreed || atomic_load(&h->attached) != ranks) {
    fprintf(stderr, "refc xccl: rank %zu of %zu: %s\n", rank, ranks,
            agreed ? "not every rank joined the communicator in time (DIPU_REFC_XCCL_TIMEOUT_S)"
                   : "the ranks disagree on the number of ranks");
    atomic_store(&h->aborted, 1);
    comm_release(c);
    return C_ERROR;
  }
  /* Note [Large all-reduces read the peers' memory]: may every rank read every other's? */
  static int probe = 1;
  c->block = malloc(2 * BLOCK_BYTES);
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  atomic_store(&h->pid[rank], (int32_t)getpid());
  atomic_store(&h->send_at[rank], (uint64_t)(uintptr_t)&probe);
  int readable = barrier(c, "xccl_comm_init_rank") == 0 && c->block != NULL;
  for (int j = 0; j < c->ranks && readable; ++j) {
    int value = 0;
    struct iovec local = {&value, sizeof value},
                 remote = {(void *)(uintptr_t)atomic_load(&h->send_at[j]), sizeof value};
    readable =
        j == c->rank ||
        (process_vm_readv(atomic_load(&h->pid[j]), &local, 1, &remote, 1, 0) == (ssize_t)sizeof value && value == 1);
  }
  atomic_store(&h->can_read[rank], readable);
  if (barrier(c, "xccl_comm_init_rank")) {
    comm_release(c);
    return C_ERROR;
  }
  c->read_peers = 1;
  for (int j = 0; j < c->ranks; ++j) c->read_peers &= atomic_load(&h->can_read[j]);
  const char *slots_only = getenv("DIPU_REFC_XCCL_SLOTS_ONLY");
  if (slots_only && *slots_only && *slots_only != '0') c->read_peers = 0;
  const char *verbose = getenv("DIPU_REFC_XCCL_VERBOSE");
  if (verbose && *verbose && *verbose != '0')
    fprintf(stderr, "refc xccl: rank %zu of %zu: %s, %zu KiB slots, large all-reduces %s\n", rank, ranks, c->name,
            c->slot_bytes >> 10, c->read_peers ? "read the peers' memory" : "through the slots");
  *out = c;
  return C_SUCCESS;
}

static C_Status destroy_comm(C_CCLComm comm) {
  if (!comm) return C_ERROR;
  if (atomic_load(&comm->pending) > 0) { /* a collective still queued or running: abort it everywhere */
    atomic_store(&comm->header->aborted, 1);
    futex_wake(&comm->header->generation);
    futex_wake(&comm->header->p2p_signal);
  }
  comm_release(comm);
  return C_SUCCESS;
}

static C_Status reduction(Kind kind, const char *function, void *send, void *recv, size_t count, C_DataType type,
                          C_CCLReduceOp op, int root, C_CCLComm comm, C_Stream stream) {
  if (injected(function)) return C_INTERNAL_ERROR;
  if (!reducible(type, op)) {
    fprintf(stderr, "refc xccl: %s: reduce op %d on data type %d is not supported\n", function, (int)op, (int)type);
    return C_ERROR;
  }
  Job *job = job_new(kind, comm, type, function);
  if (!job) return C_ERROR;
  job->send = send;
  job->recv = recv;
  job->count = count;
  job->op = op;
  job->peer = root;
  if (kind == ALL_REDUCE) {
    const char *fake = getenv("DIPU_REFC_XCCL_FAKE_ALL_REDUCE");
    job->fake = fake && *fake && *fake != '0';
  }
  return submit(job, stream);
}

static C_Status all_reduce(void *send, void *recv, size_t count, C_DataType type, C_CCLReduceOp op, C_CCLComm comm,
                           C_Stream stream) {
  return reduction(ALL_REDUCE, "xccl_all_reduce", send, recv, count, type, op, -1, comm, stream);
}

static C_Status reduce_to(void *send, void *recv, size_t count, C_DataType type, C_CCLReduceOp op, size_t root,
                          C_CCLComm comm, C_Stream stream) {
  if (comm && root >= (size_t)comm->ranks) return C_ERROR;
  return reduction(REDUCE, "xccl_reduce", send, recv, count, type, op, (int)root, comm, stream);
}

static C_Status reduce_scatter(void *send, void *recv, size_t count, C_DataType type, C_CCLReduceOp op, C_CCLComm comm,
                               C_Stream stream) {
  return reduction(REDUCE_SCATTER, "xccl_reduce_scatter", send, recv, count, type, op, -1, comm, stream);
}

static C_Status movement(Kind kind, const char *function, const void *send, void *recv, size_t count, C_DataType type,
                         size_t peer, C_CCLComm comm, C_Stream stream) {
  if (injected(function)) return C_INTERNAL_ERROR;
  if (comm && peer >= (size_t)comm->ranks) return C_ERROR;
  Job *job = job_new(kind, comm, type, function);
  if (!job) return C_ERROR;
  job->send = send;
  job->recv = recv;
  job->count = count;
  job->peer = (int)peer;
  return submit(job, stream);
}

static C_Status broadcast(void *buf, size_t count, C_DataType type, size_t root, C_CCLComm comm, C_Stream stream) {
  return movement(BROADCAST, "xccl_broadcast", buf, buf, count, type, root, comm, stream);
}

static C_Status all_gather(void *send, void *recv, size_t count, C_DataType type, C_CCLComm comm, C_Stream stream) {
  return movement(ALL_GATHER, "xccl_all_gather", send, recv, count, type, 0, comm, stream);
}

static C_Status send_to(void *buf, size_t count, C_DataType type, size_t to, C_CCLComm comm, C_Stream stream) {
  return movement(SEND, "xccl_send", buf, NULL, count, type, to, comm, stream);
}

static C_Status recv_from(void *buf, size_t count, C_DataType type, size_t from, C_CCLComm comm, C_Stream stream) {
  return movement(RECV, "xccl_recv", NULL, buf, count, type, from, comm, stream);
}

static C_Status all_to_all(const void **send, const size_t *send_count, const C_DataType *send_type, void **recv,
                           const size_t *recv_count, const C_DataType *recv_type, size_t rank, size_t ranks,
                           C_CCLComm comm, C_Stream stream) {
  if (injected("xccl_all_to_all")) return C_INTERNAL_ERROR;
  if (!comm || rank != (size_t)comm->rank || ranks != (size_t)comm->ranks) return C_ERROR;
  Job *job = job_new(ALL_TO_ALL, comm, UINT8, "xccl_all_to_all");
  if (!job) return C_ERROR;
  job->sends = calloc(ranks, sizeof(void *));
  job->recvs = calloc(ranks, sizeof(void *));
  job->send_bytes = calloc(ranks, sizeof(size_t));
  job->recv_bytes = calloc(ranks, sizeof(size_t));
  if (!job->sends || !job->recvs || !job->send_bytes || !job->recv_bytes) {
    job->comm = comm;
    atomic_fetch_add(&comm->refs, 1);
    atomic_fetch_add(&comm->pending, 1);
    release_job(job);
    return C_FAILED;
  }
  for (size_t j = 0; j < ranks; ++j) {
    size_t in_size = type_size(send_type[j]), out_size = type_size(recv_type[j]);
    if (!in_size || !out_size) {
      fprintf(stderr, "refc xccl: xccl_all_to_all: unknown data type\n");
      atomic_fetch_add(&comm->refs, 1);
      atomic_fetch_add(&comm->pending, 1);
      release_job(job);
      return C_ERROR;
    }
    job->sends[j] = send[j];
    job->recvs[j] = recv[j];
    job->send_bytes[j] = send_count[j] * in_size;
    job->recv_bytes[j] = recv_count[j] * out_size;
  }
  if (job->send_bytes[rank] != job->recv_bytes[rank]) {
    fprintf(stderr, "refc xccl: xccl_all_to_all: rank %zu sends itself %zu bytes but receives %zu\n", rank,
            job->send_bytes[rank], job->recv_bytes[rank]);
    atomic_fetch_add(&comm->refs, 1);
    atomic_fetch_add(&comm->pending, 1);
    release_job(job);
    return C_ERROR;
  }
  return submit(job, stream);
}

static C_Status group_mark(void) { return C_SUCCESS; } /* sends are eager: nothing to group */

void refc_fill_xccl(C_DeviceInterface *t) {
  t->xccl_get_unique_id_size = get_unique_id_size;
  t->xccl_get_unique_id = get_unique_id;
  t->xccl_comm_init_rank = comm_init_rank;
  t->xccl_destroy_comm = destroy_comm;
  t->xccl_all_reduce = all_reduce;
  t->xccl_broadcast = broadcast;
  t->xccl_reduce = reduce_to;
  t->xccl_all_gather = all_gather;
  t->xccl_reduce_scatter = reduce_scatter;
  t->xccl_group_start = group_mark;
  t->xccl_group_end = group_mark;
  t->xccl_send = send_to;
  t->xccl_recv = recv_from;
  t->xccl_all_to_all = all_to_all;
}
