/*
 * Stampede C API. Generated from crates/stampede-c by cbindgen; do not edit.
 *
 * Conventions:
 * - Functions return stp_status (STP_OK on success); stp_last_error() describes the most
 *   recent failure on the calling thread.
 * - Objects are opaque handles created by *_new/_join/_attach/_lookup and released by the
 *   matching *_free function (NULL is accepted and ignored). Items returned by gets are owned
 *   by the caller.
 * - Every function is thread-safe; a handle must not be freed while another thread uses it.
 * - timeout_ms: STP_FOREVER (-1) blocks, 0 returns at once, > 0 waits at most that long.
 */

#ifndef STAMPEDE_H
#define STAMPEDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// A task's virtual time at creation: the lowest allowed now (the zone's floor).
#define STP_AT_FLOOR -9223372036854775808ull

// Blocks forever (a `timeout_ms` value).
#define STP_FOREVER -1

// The largest timestamp; a virtual time that holds nothing back.
#define STP_INFINITY 9223372036854775807

// The outcome of a call. `STP_OK` is zero; every failure also sets `stp_last_error()`.
typedef enum {
  // Success.
  STP_OK = 0,
  // A NULL handle, a bad length or another invalid argument.
  STP_INVALID_ARGUMENT = 1,
  // A bounded container stayed full (non-blocking put, or the timeout passed).
  STP_FULL = 2,
  // No item matched before the timeout.
  STP_TIMEOUT = 3,
  // No item matched now (non-blocking get).
  STP_UNAVAILABLE = 4,
  // The requested item can never appear again (collected or consumed).
  STP_GONE = 5,
  // The container was closed.
  STP_CLOSED = 6,
  // The connection was detached or its task exited.
  STP_DETACHED = 7,
  // A channel already holds (or held) an item with this timestamp.
  STP_DUPLICATE = 8,
  // A timestamp or virtual time below the task's visibility.
  STP_BELOW_VISIBILITY = 9,
  // The container's address space left, died or did not answer in time.
  STP_UNREACHABLE = 10,
  // A container with this name is already registered.
  STP_NAME_TAKEN = 11,
  // No container of this name appeared in time.
  STP_NOT_FOUND = 12,
  // The name belongs to a container of another kind.
  STP_WRONG_KIND = 13,
  // The name cannot be used.
  STP_INVALID_NAME = 14,
  // The join configuration is invalid.
  STP_CONFIG = 15,
  // No router or peer could be reached.
  STP_CONNECT = 16,
  // The credentials or certificate were rejected.
  STP_AUTH_REJECTED = 17,
  // A malformed message arrived.
  STP_PROTOCOL = 18,
  // The item is not of the asked type (an array accessor on bytes, say).
  STP_WRONG_TYPE = 19,
  // The task has exited.
  STP_TASK_EXITED = 20,
  // An output connection to a container of another time zone.
  STP_ZONE_MISMATCH = 21,
  // The channel accepts no more input connections.
  STP_TOO_MANY_CONNECTIONS = 22,
  // No item with this ticket is held on this connection.
  STP_UNKNOWN_TICKET = 23,
  // A waiting call gave up because its stop flag was set.
  STP_INTERRUPTED = 26,
  // The operation is not available on this container where it lives (a local-only hook
  // on a container served by another address space).
  STP_UNSUPPORTED = 27,
  // A cluster task ended by failing or panicking; the message says how.
  STP_TASK_FAILED = 28,
  // A cluster task was cancelled, or a wait gave up because the calling task was.
  STP_CANCELLED = 29,
  // The container's owner does not allow this space's user the operation; the message
  // names the user, the operation and the container.
  STP_DENIED = 30,
  // A put's item is larger than the container's owner accepts from another address
  // space (its quota).
  STP_TOO_LARGE = 31,
  // An internal error was caught at the boundary; the message says where.
  STP_INTERNAL = 99,
} stp_status;

// What an item holds.
typedef enum {
  // Raw bytes.
  STP_ITEM_BYTES = 0,
  // UTF-8 text.
  STP_ITEM_TEXT = 1,
  // An n-dimensional array (`stp_item_dtype`, `stp_item_shape`).
  STP_ITEM_ARRAY = 2,
  // Another type (a Python object, say): `stp_item_data` gives its wire bytes.
  STP_ITEM_OTHER = 3,
} stp_item_kind;

// Element types of array items; the codes are those of the shared layout.
typedef enum {
  // `bool`, one byte.
  STP_BOOL = 0,
  // `uint8_t`.
  STP_U8 = 1,
  // `int8_t`.
  STP_I8 = 2,
  // `uint16_t`.
  STP_U16 = 3,
  // `int16_t`.
  STP_I16 = 4,
  // `uint32_t`.
  STP_U32 = 5,
  // `int32_t`.
  STP_I32 = 6,
  // `uint64_t`.
  STP_U64 = 7,
  // `int64_t`.
  STP_I64 = 8,
  // IEEE half precision, two bytes.
  STP_F16 = 9,
  // `float`.
  STP_F32 = 10,
  // `double`.
  STP_F64 = 11,
} stp_dtype;

// Why a timestamp holds a zone's watermark back (`stp_hold::cause`).
typedef enum {
  // A live task's virtual time (`task` is set).
  STP_HOLD_VIRTUAL_TIME = 0,
  // A put blocked on a full container (`task`, `container`).
  STP_HOLD_PENDING_PUT = 1,
  // The oldest item not yet consumed on a channel input connection (`task`, `container`).
  STP_HOLD_UNCONSUMED = 2,
  // Nothing at or above this timestamp was ever put in the zone.
  STP_HOLD_HORIZON = 3,
  // The zone has no live task; its floor is kept for tasks that join later.
  STP_HOLD_NO_LIVE_TASK = 4,
  // The lowest term another address space reported.
  STP_HOLD_REMOTE = 5,
  // An unconsumed queue item (`container`; `task` if a task holds it).
  STP_HOLD_QUEUE_ITEM = 6,
  // A cause this version of the library does not name (see the report's text).
  STP_HOLD_OTHER = 7,
} stp_hold_cause;

// The outcome of `stp_pacer_sync`.
typedef enum {
  // On time: slept until due, or late within tolerance.
  STP_TICK_ON_TIME = 0,
  // Late beyond tolerance; going on.
  STP_TICK_LATE = 1,
  // Late; skip to the virtual time given in `*skip_to`.
  STP_TICK_SKIP = 2,
  // Late; the schedule now treats this tick as due now.
  STP_TICK_RESYNCED = 3,
} stp_tick;

// Which item a channel get asks for.
typedef enum {
  // The item with exactly the given timestamp.
  STP_EXACT = 0,
  // The oldest item not consumed on this connection.
  STP_OLDEST = 1,
  // The newest item not consumed on this connection.
  STP_NEWEST = 2,
  // The newest item this connection has never gotten; skips stale items.
  STP_NEWEST_UNSEEN = 3,
  // The oldest unconsumed item newer than this connection's last get (in-order streaming).
  STP_NEXT_UNSEEN = 4,
} stp_selector;

// How an address space joins an application.
typedef enum {
  // Meshes with other peers (listens on an ephemeral port unless told otherwise).
  STP_PEER = 0,
  // Connects to a router; the usual mode of end devices.
  STP_CLIENT = 1,
  // Listens for clients and peers and routes between them.
  STP_ROUTER = 2,
} stp_mode;

// What a pacer does when a tick is reached later than its tolerance.
typedef enum {
  // Go on; later ticks keep their schedule (the task catches up).
  STP_LATE_CONTINUE = 0,
  // Skip the missed ticks: `stp_pacer_sync` reports the virtual time to jump to.
  STP_LATE_SKIP = 1,
  // Rebase the schedule so this tick is due now.
  STP_LATE_RESYNC = 2,
} stp_late_action;

// How the items of a correlated set match (`stp_correlator_new`).
typedef enum {
  // Every channel has an item with the same timestamp.
  STP_MATCH_EXACT = 0,
  // Every other channel has an item within `within` of the first channel's item.
  STP_MATCH_WITHIN = 1,
} stp_match;

// A channel: time-indexed items, here or in another address space.
typedef struct stp_channel stp_channel;

// An input connection to a channel.
typedef struct stp_channel_in stp_channel_in;

// An output connection to a channel.
typedef struct stp_channel_out stp_channel_out;

// This address space's part of its application's cluster.
typedef struct stp_cluster stp_cluster;

// One task's place in a cluster barrier (a member waits from one thread at a time).
typedef struct stp_cluster_barrier stp_cluster_barrier;

// A cluster condition variable.
typedef struct stp_cluster_cond stp_cluster_cond;

// A cluster mutex, with the hold this handle took.
typedef struct stp_cluster_mutex stp_cluster_mutex;

// A global memory segment.
typedef struct stp_cluster_segment stp_cluster_segment;

// A cluster counting semaphore.
typedef struct stp_cluster_sem stp_cluster_sem;

// The running task, passed to its body (valid during the call only).
typedef struct stp_cluster_task stp_cluster_task;

// A join configuration, built by `stp_config_new` and the `stp_config_*` setters.
typedef struct stp_config stp_config;

// Delivers correlated sets in increasing timestamp order.
typedef struct stp_correlator stp_correlator;

// An item: the value of a put or a get. Immutable; free with `stp_item_free`.
typedef struct stp_item stp_item;

// Memory lent for one item: fill it, then turn it into the item to put with
// `stp_loan_finish`.
typedef struct stp_loan stp_loan;

// Paces a loop to real time: tick `vt` is due `vt` periods after the first tick.
typedef struct stp_pacer stp_pacer;

// A queue: items each taken by one getter, here or in another address space.
typedef struct stp_queue stp_queue;

// An input connection to a queue.
typedef struct stp_queue_in stp_queue_in;

// An output connection to a queue.
typedef struct stp_queue_out stp_queue_out;

// A register: one current value, here or in another address space.
typedef struct stp_register stp_register;

// An input connection to a register.
typedef struct stp_register_in stp_register_in;

// An output connection to a register.
typedef struct stp_register_out stp_register_out;

// A runtime: the embedded in-process runtime, or an address space of a distributed
// application. Containers and tasks are made from it; free it last.
typedef struct stp_runtime stp_runtime;

// One correlated set: an item per input, in input order.
typedef struct stp_set stp_set;

// A registered arrival callback; freeing it unsubscribes.
typedef struct stp_subscription stp_subscription;

// A task: a thread of control with a virtual time. Use it from any thread; its connections
// belong to it.
typedef struct stp_task stp_task;

// A spawned task.
typedef struct stp_thread stp_thread;

// A task's body: runs with its argument bytes and `user`; returns 0 when it succeeded
// (its result set by `stp_cluster_task_return`), anything else when it failed (the
// message set by `stp_cluster_task_fail`, or the number).
typedef int32_t (*stp_cluster_fn)(stp_cluster_task *task, const uint8_t *args, size_t len, void *user);

// The available timestamps nearest to a get that failed with `STP_TIMEOUT` or
// `STP_UNAVAILABLE`.
typedef struct {
  // Whether `below` is set.
  bool has_below;
  // The nearest available timestamp below the request.
  int64_t below;
  // Whether `above` is set.
  bool has_above;
  // The nearest available timestamp above the request.
  int64_t above;
} stp_neighbors;

// Told the timestamp of each item put: `ctx` is what was registered with it.
typedef void (*stp_arrival_fn)(void *ctx, int64_t ts);

// Told of each item reclaimed, with the item, which is valid only during the call (clone it
// with `stp_item_clone` to keep it).
typedef void (*stp_garbage_fn)(void *ctx, int64_t ts, const stp_item *item);

// Counters of a channel (zero for a channel another address space owns: ask its owner).
typedef struct {
  // Items stored now.
  uint64_t items;
  // Input connections attached now.
  uint64_t connections;
  // Items gotten and not consumed, summed over connections.
  uint64_t open;
  // Successful puts.
  uint64_t puts;
  // Successful gets.
  uint64_t gets;
  // Items reclaimed (by the watermark or by reference counts).
  uint64_t reclaimed;
  // Items passed over unseen by `STP_NEWEST_UNSEEN` gets.
  uint64_t skipped;
  // Puts that failed because the channel was full.
  uint64_t full;
} stp_channel_stats;

// Counters of a queue (zero for a queue another address space owns).
typedef struct {
  // Items waiting to be gotten.
  uint64_t waiting;
  // Items gotten and not yet consumed.
  uint64_t held;
  // Successful puts.
  uint64_t puts;
  // Successful gets.
  uint64_t gets;
  // Items consumed.
  uint64_t consumed;
  // Held items put back for another getter because their connection went away.
  uint64_t redelivered;
  // Puts that failed because the queue was full.
  uint64_t full;
} stp_queue_stats;

// Garbage-collection counters of one time zone of a runtime.
typedef struct {
  // Collection passes run.
  uint64_t passes;
  // Items reclaimed.
  uint64_t reclaimed;
  // Everything below this timestamp has been reclaimed.
  int64_t floor;
} stp_gc_stats;

// Counters of an address space joined to a distributed application (see the Rust
// `SpaceStats` for each one's meaning).
typedef struct {
  uint64_t served;
  uint64_t malformed;
  uint64_t refused;
  uint64_t unreachable;
  uint64_t cache_hits;
  uint64_t spaces_lost;
  uint64_t pushed;
  uint64_t push_skipped;
  uint64_t push_received;
  uint64_t consume_failed;
  uint64_t events_sent;
  uint64_t events_received;
  uint64_t events_dropped;
  uint64_t events_lost;
  uint64_t puts_sent;
  uint64_t puts_refused;
  uint64_t view_hits;
  uint64_t register_hits;
  uint64_t leased;
  uint64_t lease_hits;
  uint64_t view_snapshots;
  uint64_t seen_refused;
  uint64_t sent_as_received;
  uint64_t sent_fresh;
  uint64_t loans_shared;
  uint64_t loans_plain;
  uint64_t invocations_sent;
  uint64_t invocations_served;
  uint64_t invocations_unknown;
  uint64_t invocations_failed;
  uint64_t answers_late;
  uint64_t denied;
  uint64_t quota_refused;
} stp_space_stats;

// A zone's watermark and what holds it (`stp_runtime_explain`).
typedef struct {
  // The zone.
  uint32_t zone;
  // The lowest of this runtime's own terms: what it reports to other address spaces.
  int64_t local;
  // Everything below this has been reclaimed.
  int64_t floor;
  // The watermark the terms give now.
  int64_t watermark;
  // How many terms there are (lowest first); at most `holds_cap` were written.
  size_t holds;
} stp_watermark;

// One term of a zone's watermark.
typedef struct {
  // The timestamp it holds.
  int64_t ts;
  // Why.
  stp_hold_cause cause;
  // The task concerned, or 0.
  uint64_t task;
  // The container concerned, or 0.
  uint64_t container;
} stp_hold;

// Counters of a pacer.
typedef struct {
  // Ticks reached on time.
  uint64_t on_time;
  // Ticks reached late beyond tolerance.
  uint64_t late;
  // Virtual times skipped.
  uint64_t skipped;
  // Schedule rebases.
  uint64_t resyncs;
} stp_pacer_stats;

// A thread's start routine.
typedef void *(*stp_pthread_start_fn)(void*);

// Calls a start routine where `pthread_exit` can leave it (the header's trampoline).
typedef void *(*stp_pthread_trampoline)(stp_pthread_start_fn, void*);

// A cluster thread's id: its spawn's number (0 for the program's first thread).
typedef uint64_t stp_pthread_t;

// A mutex, named by its address (the bytes are not used).
typedef struct {
  uint64_t _opaque[5];
} stp_pthread_mutex_t;

// A condition variable, named by its address.
typedef struct {
  uint64_t _opaque[6];
} stp_pthread_cond_t;

// A barrier: its count, arrivals and phase, kept under a mutex and a condition named by
// its address (as CableS' pthreads barrier), so any threads may wait in any phase.
typedef struct {
  uint32_t count;
  uint32_t arrived;
  uint64_t phase;
  uint64_t _opaque[2];
} stp_pthread_barrier_t;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The library's version, e.g. "0.1.0". Static; never NULL.
const char *stp_version(void);

// Registers `body` as task `name` in this process, with `user` passed to each call: any
// address space running this program can then run it. Registering a name again replaces
// its body.
//
// # Safety
// `name` is a NUL-terminated string; `body` is safe to call from any thread with `user`.
stp_status stp_cluster_register(const char *name, stp_cluster_fn body, void *user);

// Makes the address space of `rt` (a runtime joined to an application) a member of its
// application's cluster, running the registered tasks for any member. `timeout_ms` bounds
// the cluster's waits for other spaces (`STP_FOREVER`: none).
//
// # Safety
// `rt` is a live runtime; `out` is writable.
stp_status stp_cluster_start(const stp_runtime *rt, int64_t timeout_ms, stp_cluster **out);

// In a process a node agent started to attach an address space: joins the application,
// serves the registered tasks until the cluster detaches this space, leaves, and sets
// `*served` to true. Elsewhere returns at once with `*served` false. A program calls it
// first thing in `main` and returns when `*served` is true.
//
// # Safety
// `served` is writable.
stp_status stp_cluster_serve_attached(int64_t timeout_ms, bool *served);

// This space's id (valid while `c` lives).
//
// # Safety
// `c` is a live cluster.
const char *stp_cluster_id(const stp_cluster *c);

// Releases this handle; the space leaves the cluster when its last handle (and task) goes.
//
// # Safety
// `c` is NULL or a live cluster, not used afterwards.
void stp_cluster_free(stp_cluster *c);

// Asks a node agent to start `argv[0..argc]` as a new address space (a program that calls
// `stp_cluster_serve_attached`) and waits until it is a member; its id goes to `*id`
// (free with `stp_string_free`).
//
// # Safety
// `c` is a live cluster; `argv` holds `argc` NUL-terminated strings; `id` is writable.
stp_status stp_cluster_attach(const stp_cluster *c, const char *const *argv, size_t argc, int64_t timeout_ms, char **id);

// Tells member `space` (one this space attached) to leave and end; waits until it left.
//
// # Safety
// `c` is a live cluster; `space` is a NUL-terminated string.
stp_status stp_cluster_detach(const stp_cluster *c, const char *space, int64_t timeout_ms);

// Spawns task `name` with `args[0..len]` in the space `on` names: NULL or "round_robin",
// "least_loaded", "here", or a member's id.
//
// # Safety
// `c` is a live cluster (or a task's, from `stp_cluster_task_cluster`); `name` is a
// NUL-terminated string; `on` is NULL or one; `args` is readable for `len` bytes (or NULL
// with 0); `out` is writable.
stp_status stp_cluster_spawn(const stp_cluster *c, const char *name, const uint8_t *args, size_t len, const char *on, stp_thread **out);

// Waits for the task's end, up to `timeout_ms` (`STP_TIMEOUT`, and it may be joined
// again): its result bytes as an item in `*result` (free with `stp_item_free`), or how it
// ended: `STP_TASK_FAILED` (failed or panicked), `STP_CANCELLED`, `STP_UNREACHABLE` (its
// space left or died), `STP_NOT_FOUND` (no such task there).
//
// # Safety
// `t` is a live thread; `result` is writable.
stp_status stp_thread_join(const stp_thread *t, int64_t timeout_ms, stp_item **result);

// Asks the task to stop: its next cluster call or cancellation check sees it.
//
// # Safety
// `t` is a live thread.
stp_status stp_thread_cancel(const stp_thread *t);

// The id of the space the task runs in (valid while `t` lives).
//
// # Safety
// `t` is a live thread.
const char *stp_thread_space(const stp_thread *t);

// Releases the handle; the task runs on (nobody joins it).
//
// # Safety
// `t` is NULL or a live thread, not used afterwards.
void stp_thread_free(stp_thread *t);

// Sets the task's result to `data[0..len]`.
//
// # Safety
// `task` is the running task; `data` is readable for `len` bytes (or NULL with 0).
stp_status stp_cluster_task_return(stp_cluster_task *task, const uint8_t *data, size_t len);

// Marks the task failed with `message` (its joiner gets `STP_TASK_FAILED` with it).
//
// # Safety
// `task` is the running task; `message` is a NUL-terminated string.
stp_status stp_cluster_task_fail(stp_cluster_task *task, const char *message);

// Whether the task was asked to stop.
//
// # Safety
// `task` is the running task.
bool stp_cluster_task_cancelled(const stp_cluster_task *task);

// The cluster the task runs in, as a new handle (free it with `stp_cluster_free`).
//
// # Safety
// `task` is the running task; `out` is writable.
stp_status stp_cluster_task_cluster(const stp_cluster_task *task, stp_cluster **out);

// The cluster mutex `name` (made at this space if no space has made it).
//
// # Safety
// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
stp_status stp_cluster_mutex_new(const stp_cluster *c, const char *name, stp_cluster_mutex **out);

// The cluster condition `name`.
//
// # Safety
// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
stp_status stp_cluster_cond_new(const stp_cluster *c, const char *name, stp_cluster_cond **out);

// The cluster semaphore `name`, with `initial` permits if this space makes it.
//
// # Safety
// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
stp_status stp_cluster_sem_new(const stp_cluster *c, const char *name, uint64_t initial, stp_cluster_sem **out);

// A place in barrier `name` of `size` members (each participating task takes its own).
//
// # Safety
// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
stp_status stp_cluster_barrier_new(const stp_cluster *c, const char *name, size_t size, stp_cluster_barrier **out);

// The global memory segment `name` of `len` bytes (zeros at first; homed where first
// touched).
//
// # Safety
// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
stp_status stp_cluster_segment_new(const stp_cluster *c, const char *name, size_t len, stp_cluster_segment **out);

// Locks the mutex, waiting up to `timeout_ms`; `*owner_died` (if not NULL) says whether
// its previous holder's space died holding it. One hold per handle.
//
// # Safety
// `m` is a live mutex; `owner_died` is NULL or writable.
stp_status stp_cluster_mutex_lock(const stp_cluster_mutex *m, int64_t timeout_ms, bool *owner_died);

// Unlocks the mutex this handle holds (`STP_INVALID_ARGUMENT` if it holds none).
//
// # Safety
// `m` is a live mutex.
stp_status stp_cluster_mutex_unlock(const stp_cluster_mutex *m);

// Releases the handle (a hold it has is kept until the space leaves).
//
// # Safety
// `m` is NULL or a live mutex, not used afterwards.
void stp_cluster_mutex_free(stp_cluster_mutex *m);

// Waits on the condition, releasing `m` (which this handle holds) meanwhile, up to
// `timeout_ms`; `*signalled` (if not NULL) is false when it timed out. `m` is held again
// on return, except after an error.
//
// # Safety
// `cv` and `m` are live; `signalled` is NULL or writable.
stp_status stp_cluster_cond_wait(const stp_cluster_cond *cv, const stp_cluster_mutex *m, int64_t timeout_ms, bool *signalled);

// Wakes one waiter.
//
// # Safety
// `cv` is a live condition.
stp_status stp_cluster_cond_signal(const stp_cluster_cond *cv);

// Wakes every waiter.
//
// # Safety
// `cv` is a live condition.
stp_status stp_cluster_cond_broadcast(const stp_cluster_cond *cv);

// Releases the handle.
//
// # Safety
// `cv` is NULL or a live condition, not used afterwards.
void stp_cluster_cond_free(stp_cluster_cond *cv);

// Takes a permit, waiting up to `timeout_ms`.
//
// # Safety
// `s` is a live semaphore.
stp_status stp_cluster_sem_wait(const stp_cluster_sem *s, int64_t timeout_ms);

// Gives a permit back.
//
// # Safety
// `s` is a live semaphore.
stp_status stp_cluster_sem_post(const stp_cluster_sem *s);

// Releases the handle.
//
// # Safety
// `s` is NULL or a live semaphore, not used afterwards.
void stp_cluster_sem_free(stp_cluster_sem *s);

// Waits until every member reached the barrier (`STP_UNREACHABLE` when a member left or
// died, `STP_TIMEOUT` past the cluster's timeout).
//
// # Safety
// `b` is a live barrier.
stp_status stp_cluster_barrier_wait(const stp_cluster_barrier *b);

// This member's place in the barrier, from 0.
//
// # Safety
// `b` is a live barrier.
size_t stp_cluster_barrier_rank(const stp_cluster_barrier *b);

// Releases the place.
//
// # Safety
// `b` is NULL or a live barrier, not used afterwards.
void stp_cluster_barrier_free(stp_cluster_barrier *b);

// Reads `len` bytes at `offset` into `buf`.
//
// # Safety
// `s` is a live segment; `buf` is writable for `len` bytes.
stp_status stp_cluster_segment_read(const stp_cluster_segment *s, size_t offset, uint8_t *buf, size_t len);

// Writes `data[0..len]` at `offset` (seen elsewhere after this space releases it).
//
// # Safety
// `s` is a live segment; `data` is readable for `len` bytes.
stp_status stp_cluster_segment_write(const stp_cluster_segment *s, size_t offset, const uint8_t *data, size_t len);

// Makes this space's writes visible to the next acquirer.
//
// # Safety
// `s` is a live segment.
stp_status stp_cluster_segment_release(const stp_cluster_segment *s);

// Makes others' releases visible here.
//
// # Safety
// `s` is a live segment.
stp_status stp_cluster_segment_acquire(const stp_cluster_segment *s);

// Releases the handle.
//
// # Safety
// `s` is NULL or a live segment, not used afterwards.
void stp_cluster_segment_free(stp_cluster_segment *s);

// A correlator over `n` input connections (`match` an `stp_match`; `within` the distance
// for `STP_MATCH_WITHIN`). It takes the connections over: do not use or free them after
// the call, which detaches them when it fails with `STP_UNREACHABLE` (a channel's owner
// could not be reached), and `stp_correlator_free` otherwise. Only a call that fails with
// `STP_INVALID_ARGUMENT` leaves them the caller's.
//
// # Safety
// `inputs` holds `n` live, distinct input connections; `out` is writable.
stp_status stp_correlator_new(stp_channel_in *const *inputs, size_t n, int32_t match, int64_t within, stp_correlator **out);

// Gets the next set, waiting per `timeout_ms` (as a channel get); `*out` is a new set the
// caller frees with `stp_set_free`.
//
// # Safety
// `c` is a live correlator; `out` is writable.
stp_status stp_correlator_get(const stp_correlator *c, int64_t timeout_ms, stp_set **out);

// Consumes the set's items on their connections.
//
// # Safety
// `c` is a live correlator and `set` a live set it returned.
stp_status stp_correlator_consume(const stp_correlator *c, const stp_set *set);

// Consumes, on every connection, everything up to the set's item there, skipped items too.
//
// # Safety
// As for `stp_correlator_consume`.
stp_status stp_correlator_consume_until(const stp_correlator *c, const stp_set *set);

// First-channel items skipped so far because they could no longer be matched.
//
// # Safety
// `c` is NULL (0) or a live correlator.
uint64_t stp_correlator_skipped(const stp_correlator *c);

// Detaches the correlator's connections and frees it. NULL is ignored.
//
// # Safety
// `c` is NULL or a live correlator, not used after this.
void stp_correlator_free(stp_correlator *c);

// The set's timestamp: its first input's item's.
//
// # Safety
// `s` is a live set.
int64_t stp_set_ts(const stp_set *s);

// How many items the set has (one per input).
//
// # Safety
// `s` is a live set.
size_t stp_set_len(const stp_set *s);

// The set's item from input `i`: its timestamp in `*ts`, and in `*item` a new item the
// caller frees.
//
// # Safety
// `s` is a live set; `ts` and `item` are writable.
stp_status stp_set_item(const stp_set *s, size_t i, int64_t *ts, stp_item **item);

// Frees a set. NULL is ignored.
//
// # Safety
// `s` is NULL or a live set, not used after this.
void stp_set_free(stp_set *s);

// A message describing the most recent failed call on this thread ("" if none). The string
// stays valid until the next failing call on this thread.
const char *stp_last_error(void);

// The nearest available timestamps reported by the most recent failed get on this thread.
stp_neighbors stp_last_neighbors(void);

// The name of a status code, e.g. "STP_TIMEOUT"; "STP_UNKNOWN" for a value that is not one.
// Static; never NULL.
const char *stp_status_name(int32_t status);

// Calls `f(ctx, ts)` for every item put into the channel from now on: on the putting
// thread for a channel of this runtime, on the runtime's event thread (in order) for one
// another address space owns. `*out` is the subscription: `stp_subscription_free` ends it.
//
// # Safety
// `c` is a live channel; `f` may be called from any thread with `ctx` until the
// subscription is freed; `out` is writable.
stp_status stp_channel_on_arrival(const stp_channel *c, stp_arrival_fn f, void *ctx, stp_subscription **out);

// [`stp_channel_on_arrival`] for a queue.
//
// # Safety
// As for `stp_channel_on_arrival`.
stp_status stp_queue_on_arrival(const stp_queue *q, stp_arrival_fn f, void *ctx, stp_subscription **out);

// Ends the subscription and frees it: when this returns, no call is running on another
// thread and none starts, so the callback's context may be freed (called from inside the
// callback, the context is free once that call returns). A callback must not wait for a
// thread that frees its own subscription. NULL is ignored.
//
// # Safety
// `s` is NULL or a live subscription, not used after this.
void stp_subscription_free(stp_subscription *s);

// Calls `f(ctx, ts, item)` for every item of the channel reclaimed from now on (the
// channel's one garbage handler: a second call replaces it). For a channel another address
// space owns, the owner sends each reclaimed item here.
//
// # Safety
// `c` is a live channel; `f` may be called from any thread with `ctx` for as long as the
// channel lives.
stp_status stp_channel_on_garbage(const stp_channel *c, stp_garbage_fn f, void *ctx);

// [`stp_channel_on_garbage`] for a queue: called for every item consumed.
//
// # Safety
// As for `stp_channel_on_garbage`.
stp_status stp_queue_on_garbage(const stp_queue *q, stp_garbage_fn f, void *ctx);

// A bytes item holding a copy of `len` bytes at `data`.
//
// # Safety
// `data` is readable for `len` bytes (or NULL with `len` 0); `out` is writable.
stp_status stp_item_bytes(const void *data, size_t len, stp_item **out);

// A text item holding a copy of the NUL-terminated UTF-8 string `s`.
//
// # Safety
// `s` is a NUL-terminated string; `out` is writable.
stp_status stp_item_text(const char *s, stp_item **out);

// An array item: `dtype` (an `stp_dtype`), `ndim` dimensions in `shape`, and a copy of `len`
// bytes of row-major little-endian data at `data`. `len` must equal the product of the shape
// times the element size.
//
// # Safety
// `shape` is readable for `ndim` values; `data` for `len` bytes; `out` is writable.
stp_status stp_item_array(int32_t dtype_code, size_t ndim, const size_t *shape, const void *data, size_t len, stp_item **out);

// An item of the user type called `type_name`, holding a copy of its `len` marshalled
// bytes at `data`: tagged `stp_type_tag(type_name)`, so Python code that registered the
// same name (`stampede.register_type`) reads it as its own object, and Rust code as its
// `Stampede` type of that name. `stp_item_data` gives the bytes back.
//
// # Safety
// `type_name` is a NUL-terminated string; `data` is readable for `len` bytes (or NULL with
// `len` 0); `out` is writable.
stp_status stp_item_typed(const char *type_name, const void *data, size_t len, stp_item **out);

// The 64-bit type tag of the type called `type_name` (FNV-1a of its UTF-8 bytes), as every
// language computes it; 0 for NULL.
//
// # Safety
// `type_name` is NULL or a NUL-terminated string.
uint64_t stp_type_tag(const char *type_name);

// Another handle to the same item (items are immutable and shared, not copied).
//
// # Safety
// `item` is a live item.
stp_item *stp_item_clone(const stp_item *item);

// What the item holds (an `stp_item_kind`); `STP_ITEM_OTHER` for NULL.
//
// # Safety
// `item` is NULL or a live item.
stp_item_kind stp_item_kind_of(const stp_item *item);

// The item's 64-bit type tag (shared by all languages for a type name).
//
// # Safety
// `item` is NULL or a live item.
uint64_t stp_item_tag(const stp_item *item);

// The item's bytes without copying: raw bytes, text (not NUL-terminated), an array's element
// data, or the wire form of another type. Valid while the item handle lives; NULL for a NULL
// item. `len` receives the length when not NULL.
//
// # Safety
// `item` is NULL or a live item; `len` is NULL or writable.
const void *stp_item_data(const stp_item *item, size_t *len);

// The element type of an array item.
//
// # Safety
// `item` is a live item; `out` is writable.
stp_status stp_item_dtype(const stp_item *item, stp_dtype *out);

// The shape of an array item: `*ndim` receives the number of dimensions and `*shape` a
// pointer to them, valid while the item handle lives.
//
// # Safety
// `item` is a live item; `ndim` and `shape` are writable.
stp_status stp_item_shape(const stp_item *item, size_t *ndim, const size_t **shape);

// Releases an item handle. NULL is ignored.
//
// # Safety
// `item` is NULL or a live item, not used afterwards.
void stp_item_free(stp_item *item);

// Lends `len` zeroed bytes to fill in place (`*data`) and put as a bytes item: for a channel
// of another address space on this host, shared memory, so the put copies nothing;
// otherwise plain memory (`stp_loan_in_place`).
//
// # Safety
// `conn` is a live connection; `out` and `data` are writable.
stp_status stp_item_loan(const stp_channel_out *conn, size_t len, stp_loan **out, void **data);

// Lends an array of `dtype` (an `stp_dtype`) and `ndim` dimensions in `shape`, to fill its
// row-major elements in place (`*data`) and put (see `stp_item_loan`).
//
// # Safety
// `conn` is a live connection; `shape` is readable for `ndim` values; `out` and `data` are
// writable.
stp_status stp_item_loan_array(const stp_channel_out *conn, int32_t dtype_code, size_t ndim, const size_t *shape, stp_loan **out, void **data);

// Whether the loan is shared memory that a put sends without a copy (`false` for plain
// memory, or NULL).
//
// # Safety
// `loan` is NULL or a live loan.
bool stp_loan_in_place(const stp_loan *loan);

// Turns a filled loan into the item to put (`*out`, freed by the caller), without a copy:
// the loan's memory becomes the item's and must not be written any more. The loan is
// released, whatever the outcome.
//
// # Safety
// `loan` is a live loan, not used afterwards; `out` is writable.
stp_status stp_loan_finish(stp_loan *loan, stp_item **out);

// Gives back an unfinished loan. NULL is ignored.
//
// # Safety
// `loan` is NULL or a live loan, not used afterwards.
void stp_loan_free(stp_loan *loan);

// Writes the channel's counters to `*out`.
//
// # Safety
// `c` is a live channel; `out` is writable.
stp_status stp_channel_get_stats(const stp_channel *c, stp_channel_stats *out);

// Writes the queue's counters to `*out`.
//
// # Safety
// `q` is a live queue; `out` is writable.
stp_status stp_queue_get_stats(const stp_queue *q, stp_queue_stats *out);

// Writes the garbage-collection counters of time zone `zone` to `*out`.
//
// # Safety
// `rt` is a live runtime; `out` is writable.
stp_status stp_runtime_gc_stats(const stp_runtime *rt, uint32_t zone, stp_gc_stats *out);

// Runs a collection pass over every zone now, instead of waiting for the next one. When it
// returns, every item below each zone's new floor has been handed to its garbage handler,
// whichever pass reclaimed it, so a garbage handler must not wait for a thread that calls
// this (called from inside a garbage handler, it does not wait for other passes).
//
// # Safety
// `rt` is a live runtime.
stp_status stp_runtime_collect(const stp_runtime *rt);

// Writes the counters of the address space `rt` joined to `*out`; `STP_UNSUPPORTED` for
// an embedded runtime.
//
// # Safety
// `rt` is a live runtime; `out` is writable.
stp_status stp_runtime_space_stats(const stp_runtime *rt, stp_space_stats *out);

// Explains zone `zone`'s watermark: its figures in `*out`, its terms (lowest first) in
// `holds[0..holds_cap]` (`out->holds` says how many there are: call again with a larger
// array to see them all), and, unless `text` is NULL, a readable report in `*text`, which
// the caller frees with `stp_string_free`.
//
// # Safety
// `rt` is a live runtime; `out` is writable; `holds` is writable for `holds_cap` entries
// (or NULL with `holds_cap` 0); `text` is NULL or writable.
stp_status stp_runtime_explain(const stp_runtime *rt, uint32_t zone, stp_watermark *out, stp_hold *holds, size_t holds_cap, char **text);

// This runtime's metrics now, in the Prometheus/OpenMetrics text format, in `*text`, which
// the caller frees with `stp_string_free`: its zones, named containers and tasks, and, for
// a runtime joined to an application, its address space's own counters (see
// `docs/observability.md`).
//
// # Safety
// `rt` is a live runtime; `text` is writable.
stp_status stp_runtime_metrics(const stp_runtime *rt, char **text);

// Frees a string this library returned. NULL is ignored.
//
// # Safety
// `s` is NULL or a string from this library, not freed before.
void stp_string_free(char *s);

// A pacer with a tick period and a lateness tolerance in microseconds, and a policy for late
// ticks (an `stp_late_action`).
//
// # Safety
// `out` is writable.
stp_status stp_pacer_new(uint64_t period_us, uint64_t tolerance_us, int32_t late_action, stp_pacer **out);

// Waits until tick `vt` is due. `*out_tick` receives the outcome and, for `STP_TICK_SKIP`,
// `*skip_to` the virtual time to continue from (`skip_to` may be NULL otherwise).
//
// # Safety
// `pacer` is a live pacer; `out_tick` writable; `skip_to` NULL or writable.
stp_status stp_pacer_sync(const stp_pacer *pacer, int64_t vt, stp_tick *out_tick, int64_t *skip_to);

// Waits like `stp_pacer_sync`, but stops with `STP_INTERRUPTED`, counting no tick and
// writing neither out-pointer, once `*stop` is non-zero: the flag is read (atomically) about
// every 50 ms while the pacer sleeps. A binding sets it from another thread to wake a
// paced loop when its caller is interrupted. `stop` NULL is `stp_pacer_sync`.
//
// # Safety
// `pacer` is a live pacer; `stop` is NULL or an aligned `int32_t` that stays valid during
// the call and that other threads write only atomically; `out_tick` writable; `skip_to` NULL
// or writable.
stp_status stp_pacer_sync_interruptible(const stp_pacer *pacer, int64_t vt, const int32_t *stop, stp_tick *out_tick, int64_t *skip_to);

// The pacer's counters.
//
// # Safety
// `pacer` is a live pacer; `out` writable.
stp_status stp_pacer_get_stats(const stp_pacer *pacer, stp_pacer_stats *out);

// Releases a pacer. NULL is ignored.
//
// # Safety
// `pacer` is NULL or a live pacer, not used afterwards.
void stp_pacer_free(stp_pacer *pacer);

// Starts the face (the header calls it before `main`, and `pthread_start()` again does
// nothing). In a space the program attached, serves threads until detached and then ends
// the process; it never returns there. Returns 0 or an errno value.
int stp_pthread_start(stp_pthread_trampoline trampoline);

// Ends the face: detaches the spaces it attached and leaves the application. Threads
// still running elsewhere are lost. Runs at exit too (from `exit` or a return from `main`).
void stp_pthread_end(void);

// Remembers the calling thread's jump buffer for `pthread_exit`; returns the previous.
void *stp_pthread_frame_enter(void *jb);

// Restores the jump buffer `prev` (from `stp_pthread_frame_enter`).
void stp_pthread_frame_leave(void *prev);

// Records `value` as the thread's exit value; returns the jump buffer to leave by, or NULL
// on a thread the face did not start.
void *stp_pthread_frame_exit(void *value);

// The innermost cleanup handler of the calling thread (the header's
// `pthread_cleanup_push` keeps them on its stack).
void *stp_pthread_cleanup_top(void);

// Makes `top` the innermost cleanup handler of the calling thread.
void stp_pthread_cleanup_set(void *top);

// The value the thread passed to `pthread_exit`.
void *stp_pthread_exit_value(void);

// Creates a thread running `start(arg)` in the space the placement picks. `attr` is
// ignored. Returns 0 or an errno value (EINVAL for a start routine outside the program).
//
// # Safety
// `thread` is writable.
int stp_pthread_create(stp_pthread_t *thread, const void *attr, stp_pthread_start_fn start, void *arg);

// Waits for `thread` to end and stores its return value (PTHREAD_CANCELED if cancelled).
// ESRCH for a thread not created in this space or joined already.
//
// # Safety
// `ret` is NULL or writable.
int stp_pthread_join(stp_pthread_t thread, void **ret);

// Forgets `thread`: nobody will join it.
int stp_pthread_detach(stp_pthread_t thread);

// Asks `thread` to stop at its next cancellation point.
int stp_pthread_cancel(stp_pthread_t thread);

// Whether the calling thread was asked to stop (the header's cancellation points).
bool stp_pthread_cancelled(void);

// The calling thread's id (0 for the program's first thread and threads it made itself).
stp_pthread_t stp_pthread_self(void);

// Readies a mutex (optional: one is made at first use). `attr` is ignored.
int stp_pthread_mutex_init(stp_pthread_mutex_t *mutex, const void *attr);

// Forgets a mutex in this space.
int stp_pthread_mutex_destroy(stp_pthread_mutex_t *mutex);

// Locks a mutex; EOWNERDEAD (and held) when its previous owner's space died holding it.
int stp_pthread_mutex_lock(stp_pthread_mutex_t *mutex);

// Locks a mutex if it is free now (one round trip to its home); EBUSY otherwise.
int stp_pthread_mutex_trylock(stp_pthread_mutex_t *mutex);

// Unlocks a mutex this space holds; EPERM otherwise.
int stp_pthread_mutex_unlock(stp_pthread_mutex_t *mutex);

// Readies a condition (optional). `attr` is ignored.
int stp_pthread_cond_init(stp_pthread_cond_t *cond, const void *attr);

// Forgets a condition in this space.
int stp_pthread_cond_destroy(stp_pthread_cond_t *cond);

// Waits on a condition, releasing the mutex meanwhile. With `has_deadline`, gives up at
// `sec`.`nsec` (real-time clock) with ETIMEDOUT, holding the mutex again. ECANCELED when
// the thread was cancelled (the mutex held again).
int stp_pthread_cond_wait(stp_pthread_cond_t *cond, stp_pthread_mutex_t *mutex, bool has_deadline, int64_t sec, int64_t nsec);

// Wakes one waiter of a condition.
int stp_pthread_cond_signal(stp_pthread_cond_t *cond);

// Wakes every waiter of a condition.
int stp_pthread_cond_broadcast(stp_pthread_cond_t *cond);

// Readies a barrier of `count` threads. `attr` is ignored.
//
// # Safety
// `barrier` is writable.
int stp_pthread_barrier_init(stp_pthread_barrier_t *barrier, const void *attr, uint32_t count);

// Forgets a barrier's objects in this space.
int stp_pthread_barrier_destroy(stp_pthread_barrier_t *barrier);

// Waits until `count` threads wait on the barrier, whichever threads and spaces they are;
// one of them gets PTHREAD_BARRIER_SERIAL_THREAD, the others 0. Not a cancellation point.
//
// # Safety
// `barrier` was initialised.
int stp_pthread_barrier_wait(stp_pthread_barrier_t *barrier);

// `malloc`: from the global heap once the face started, from the C library before.
void *stp_malloc(size_t len);

// `calloc`: zeroed.
void *stp_calloc(size_t n, size_t size);

// `free`: a block of the global heap goes back to the space that allocated it; anything
// else to the C library.
//
// # Safety
// `p` is NULL or a live block of `stp_malloc` or the C library.
void stp_free(void *p);

// `realloc`, in whichever space the block was allocated.
//
// # Safety
// `p` is NULL or a live block of `stp_malloc` or the C library.
void *stp_realloc(void *p, size_t len);

// A new embedded runtime: every task and container in this process, nothing on the network.
//
// # Safety
// `out` is writable.
stp_status stp_runtime_new(stp_runtime **out);

// Joins application `app` as a new address space configured by `cfg` (which stays owned by
// the caller). Fails with `STP_CONNECT`, `STP_AUTH_REJECTED` or `STP_CONFIG`.
//
// # Safety
// `app` is a NUL-terminated string; `cfg` a live config; `out` writable.
stp_status stp_runtime_join(const char *app, const stp_config *cfg, stp_runtime **out);

// The address space's unique id, or "" for an embedded runtime. Valid while `rt` lives.
//
// # Safety
// `rt` is NULL or a live runtime.
const char *stp_runtime_id(const stp_runtime *rt);

// Whether `name` is registered: in this process for an embedded runtime, anywhere in the
// application for an address space. Waits up to `timeout_ms` for it to appear.
//
// # Safety
// `rt` is a live runtime; `name` a NUL-terminated string.
stp_status stp_runtime_wait_for(const stp_runtime *rt, const char *name, int64_t timeout_ms);

// Leaves the application (for an address space) and releases the runtime. Free containers,
// tasks and connections made from it first. NULL is ignored.
//
// # Safety
// `rt` is NULL or a live runtime, not used afterwards.
void stp_runtime_free(stp_runtime *rt);

// A join configuration for `mode` (an `stp_mode`) with default timings: lease 1 s, operation
// timeout 5 s. Returns NULL for an unknown mode.
stp_config *stp_config_new(int32_t mode);

// Adds an endpoint to listen on, e.g. "tcp/127.0.0.1:7447".
//
// # Safety
// `cfg` is a live config; `endpoint` a NUL-terminated string.
stp_status stp_config_listen(stp_config *cfg, const char *endpoint);

// Adds a router or peer endpoint to connect to.
//
// # Safety
// `cfg` is a live config; `endpoint` a NUL-terminated string.
stp_status stp_config_connect(stp_config *cfg, const char *endpoint);

// Sets the user and password presented to routers and peers.
//
// # Safety
// `cfg` is a live config; `user`, `password` NUL-terminated strings.
stp_status stp_config_credentials(stp_config *cfg, const char *user, const char *password);

// Uses TLS: PEM files of the trusted root CA, and this space's certificate and private key
// (NULL for none; a listening space needs both).
//
// # Safety
// `cfg` is a live config; the paths are NULL or NUL-terminated strings.
stp_status stp_config_tls(stp_config *cfg, const char *root_ca, const char *certificate, const char *private_key);

// Sets how long a silent address space is considered alive, how long a remote operation
// waits for an answer before failing with `STP_UNREACHABLE`, and how long joining waits for
// a router or peer before failing with `STP_CONNECT`.
//
// # Safety
// `cfg` is a live config.
stp_status stp_config_timeouts(stp_config *cfg, uint64_t lease_ms, uint64_t op_timeout_ms, uint64_t connect_timeout_ms);

// Sets a file of `user:password` lines that a listening space accepts from others.
//
// # Safety
// `cfg` is a live config; `path` a NUL-terminated string.
stp_status stp_config_credentials_file(stp_config *cfg, const char *path);

// Reads the access rules the space enforces on the containers it owns (lines `user
// permissions pattern`; see `docs/distribution.md`); a denied request fails in the
// requesting space with `STP_DENIED`. A missing file or malformed rule is `STP_CONFIG`
// here, naming the line.
//
// # Safety
// `cfg` is a live config; `path` a NUL-terminated string.
stp_status stp_config_access_file(stp_config *cfg, const char *path);

// Sets the space's quotas for each other address space, as owner: the largest item it
// accepts (bytes; a larger put fails with `STP_TOO_LARGE`), the most connections one space
// may hold (`STP_TOO_MANY_CONNECTIONS` beyond) and the most puts one connection may have
// waiting for room (`STP_FULL` beyond). 0 keeps a default.
//
// # Safety
// `cfg` is a live config.
stp_status stp_config_quotas(stp_config *cfg, uint64_t max_item_bytes, uint64_t max_connections, uint64_t max_waiting_puts);

// Serves the space's metrics over HTTP on `addr` (`host:port`; `GET /metrics`, the
// OpenMetrics text; see `docs/observability.md`). A bad address fails the join with
// `STP_CONFIG`.
//
// # Safety
// `cfg` is a live config; `addr` a NUL-terminated string.
stp_status stp_config_metrics_listen(stp_config *cfg, const char *addr);

// Sets the bytes of shared memory for large messages to processes on this host (0: off;
// the default is 64 MiB).
//
// # Safety
// `cfg` is a live config.
stp_status stp_config_shm_pool(stp_config *cfg, size_t bytes);

// Finds peers by UDP multicast on the local network (off by default, so unrelated
// applications on a network never meet).
//
// # Safety
// `cfg` is a live config.
stp_status stp_config_multicast_scouting(stp_config *cfg, bool enabled);

// Sets how many further waiting items a get on another space's queue takes ahead, held by
// the connection as a lease (0, the default: none). The next gets are answered from the
// lease without a round trip; what was not handed out returns to the queue when the
// connection detaches or this space dies. Leases trade strict oldest-first order across
// getters for throughput.
//
// # Safety
// `cfg` is a live config.
stp_status stp_config_queue_prefetch(stp_config *cfg, uint32_t items);

// Sets how many rounds a blocking get busy-waits before it parks. Negative means the
// default: spin as a local runtime does on more than two cores, not at all on two or fewer,
// where the network threads that deliver items need the processor. Fails with
// `STP_INVALID_ARGUMENT` above `UINT32_MAX`.
//
// # Safety
// `cfg` is a live config.
stp_status stp_config_spin_rounds(stp_config *cfg, int64_t rounds);

// Appends a raw Zenoh setting: `path` (such as "scouting/multicast/enabled") and its JSON5
// value (such as "false"; a string is quoted: "\"text\""), applied after everything else
// the config sets, in the order added. An unknown path or a value that does not parse or
// fit fails here with `STP_CONFIG`, naming the path, and leaves the config unchanged.
//
// # Safety
// `cfg` is a live config; `path`, `json5_value` NUL-terminated strings.
stp_status stp_config_zenoh(stp_config *cfg, const char *path, const char *json5_value);

// The floor of time zone `zone` in this runtime: everything below it has been reclaimed, and
// no new task may start below it. `INT64_MIN` before the first collection; `STP_INFINITY` for
// NULL.
//
// # Safety
// `rt` is NULL or a live runtime.
int64_t stp_runtime_floor(const stp_runtime *rt, uint32_t zone);

// Releases a config. NULL is ignored.
//
// # Safety
// `cfg` is NULL or a live config, not used afterwards.
void stp_config_free(stp_config *cfg);

// A new channel in this runtime: `name` registers it (NULL for none), `capacity` bounds it
// (0 for unbounded), `zone` is its time zone (0 is the default).
//
// # Safety
// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
stp_status stp_channel_new(const stp_runtime *rt, const char *name, size_t capacity, uint32_t zone, stp_channel **out);

// The channel registered as `name`, waiting up to `timeout_ms` for it to appear: in this
// process for an embedded runtime, anywhere in the application for an address space.
//
// # Safety
// `rt` is a live runtime; `name` NUL-terminated; `out` writable.
stp_status stp_channel_lookup(const stp_runtime *rt, const char *name, int64_t timeout_ms, stp_channel **out);

// Whether the channel lives in this runtime (false for one another address space serves,
// found by name, and for NULL). A binding uses it to tell local containers from remote ones.
//
// # Safety
// `c` is NULL or a live handle.
bool stp_channel_is_local(const stp_channel *c);

// Closes the channel: puts fail, gets drain what is left.
//
// # Safety
// `c` is a live handle.
stp_status stp_channel_close(const stp_channel *c);

// Releases this handle; the channel lives on while it has a name or connections. NULL is
// ignored.
//
// # Safety
// `c` is NULL or a live handle, not used afterwards.
void stp_channel_free(stp_channel *c);

// A new queue in this runtime: `name` registers it (NULL for none), `capacity` bounds it
// (0 for unbounded), `zone` is its time zone (0 is the default).
//
// # Safety
// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
stp_status stp_queue_new(const stp_runtime *rt, const char *name, size_t capacity, uint32_t zone, stp_queue **out);

// The queue registered as `name`, waiting up to `timeout_ms` for it to appear: in this
// process for an embedded runtime, anywhere in the application for an address space.
//
// # Safety
// `rt` is a live runtime; `name` NUL-terminated; `out` writable.
stp_status stp_queue_lookup(const stp_runtime *rt, const char *name, int64_t timeout_ms, stp_queue **out);

// Whether the queue lives in this runtime (false for one another address space serves,
// found by name, and for NULL). A binding uses it to tell local containers from remote ones.
//
// # Safety
// `q` is NULL or a live handle.
bool stp_queue_is_local(const stp_queue *q);

// Closes the queue: puts fail, gets drain what is left.
//
// # Safety
// `c` is a live handle.
stp_status stp_queue_close(const stp_queue *c);

// Releases this handle; the queue lives on while it has a name or connections. NULL is
// ignored.
//
// # Safety
// `c` is NULL or a live handle, not used afterwards.
void stp_queue_free(stp_queue *c);

// A new register in this runtime: `name` registers it (NULL for none), `capacity` bounds it
// (0 for unbounded), `zone` is its time zone (0 is the default).
//
// # Safety
// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
stp_status stp_register_new(const stp_runtime *rt, const char *name, size_t capacity, uint32_t zone, stp_register **out);

// The register registered as `name`, waiting up to `timeout_ms` for it to appear: in this
// process for an embedded runtime, anywhere in the application for an address space.
//
// # Safety
// `rt` is a live runtime; `name` NUL-terminated; `out` writable.
stp_status stp_register_lookup(const stp_runtime *rt, const char *name, int64_t timeout_ms, stp_register **out);

// Whether the register lives in this runtime (false for one another address space serves,
// found by name, and for NULL). A binding uses it to tell local containers from remote ones.
//
// # Safety
// `r` is NULL or a live handle.
bool stp_register_is_local(const stp_register *r);

// Closes the register: puts fail, gets drain what is left.
//
// # Safety
// `c` is a live handle.
stp_status stp_register_close(const stp_register *c);

// Releases this handle; the register lives on while it has a name or connections. NULL is
// ignored.
//
// # Safety
// `c` is NULL or a live handle, not used afterwards.
void stp_register_free(stp_register *c);

// A new root task at virtual time `vt` in the default zone (see `stp_task_new_in`).
//
// # Safety
// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
stp_status stp_task_new(const stp_runtime *rt, int64_t vt, const char *name, stp_task **out);

// A new root task at virtual time `vt` in time zone `zone`. `vt` may be `STP_AT_FLOOR`: the
// lowest virtual time allowed now (0 until the zone's floor passes it), which is what a task joining a running application
// usually wants (0 is refused once the zone's floor has passed it). `STP_INFINITY` holds
// nothing back. `name` is for diagnostics (NULL for a default).
//
// # Safety
// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
stp_status stp_task_new_in(const stp_runtime *rt, int64_t vt, uint32_t zone, const char *name, stp_task **out);

// A child task at virtual time `vt`, which must be at least the parent's visibility.
//
// # Safety
// `task` is a live task; `out` writable.
stp_status stp_task_child(const stp_task *task, int64_t vt, stp_task **out);

// The task's virtual time; `STP_INFINITY` for NULL.
//
// # Safety
// `task` is NULL or a live task.
int64_t stp_task_virtual_time(const stp_task *task);

// The task's visibility: the lowest timestamp it may still put or ask for.
//
// # Safety
// `task` is NULL or a live task.
int64_t stp_task_visibility(const stp_task *task);

// Moves the task's virtual time; it may not go below its visibility.
//
// # Safety
// `task` is a live task.
stp_status stp_task_set_virtual_time(const stp_task *task, int64_t vt);

// Ends the task: its connections detach and it no longer holds the watermark. NULL is
// ignored.
//
// # Safety
// `task` is NULL or a live task, not used afterwards.
void stp_task_free(stp_task *task);

// Attaches an input connection of `task` to a channel.
//
// # Safety
// `task` and `channel` are live handles; `out` is writable.
stp_status stp_channel_attach_input(const stp_task *task, const stp_channel *channel, stp_channel_in **out);

// Detaches and releases the connection. NULL is ignored.
//
// # Safety
// `conn` is NULL or a live connection, not used afterwards.
void stp_channel_in_free(stp_channel_in *conn);

// Attaches an output connection of `task` to a channel.
//
// # Safety
// `task` and `channel` are live handles; `out` is writable.
stp_status stp_channel_attach_output(const stp_task *task, const stp_channel *channel, stp_channel_out **out);

// Detaches and releases the connection. NULL is ignored.
//
// # Safety
// `conn` is NULL or a live connection, not used afterwards.
void stp_channel_out_free(stp_channel_out *conn);

// Attaches an input connection of `task` to a queue.
//
// # Safety
// `task` and `queue` are live handles; `out` is writable.
stp_status stp_queue_attach_input(const stp_task *task, const stp_queue *queue, stp_queue_in **out);

// Detaches and releases the connection. NULL is ignored.
//
// # Safety
// `conn` is NULL or a live connection, not used afterwards.
void stp_queue_in_free(stp_queue_in *conn);

// Attaches an output connection of `task` to a queue.
//
// # Safety
// `task` and `queue` are live handles; `out` is writable.
stp_status stp_queue_attach_output(const stp_task *task, const stp_queue *queue, stp_queue_out **out);

// Detaches and releases the connection. NULL is ignored.
//
// # Safety
// `conn` is NULL or a live connection, not used afterwards.
void stp_queue_out_free(stp_queue_out *conn);

// Attaches an input connection of `task` to a register.
//
// # Safety
// `task` and `register` are live handles; `out` is writable.
stp_status stp_register_attach_input(const stp_task *task, const stp_register *register_, stp_register_in **out);

// Detaches and releases the connection. NULL is ignored.
//
// # Safety
// `conn` is NULL or a live connection, not used afterwards.
void stp_register_in_free(stp_register_in *conn);

// Attaches an output connection of `task` to a register.
//
// # Safety
// `task` and `register` are live handles; `out` is writable.
stp_status stp_register_attach_output(const stp_task *task, const stp_register *register_, stp_register_out **out);

// Detaches and releases the connection. NULL is ignored.
//
// # Safety
// `conn` is NULL or a live connection, not used afterwards.
void stp_register_out_free(stp_register_out *conn);

// Puts `item` at timestamp `ts`, waiting up to `timeout_ms` for space in a bounded channel.
// `consumers` > 0 reclaims the item once that many connections consumed it (0: when every
// connection has, or the watermark passes it). The item stays owned by the caller.
//
// Into another address space's channel, a put with `STP_FOREVER` returns once sent: a
// refusal only the owner can see fails the connection's next put (which is then not made;
// `stp_last_error()` names the earlier put) or `stp_channel_flush`.
//
// # Safety
// `conn` and `item` are live handles.
stp_status stp_channel_put(const stp_channel_out *conn, int64_t ts, const stp_item *item, uint32_t consumers, int64_t timeout_ms);

// Puts like `stp_channel_put`, but gives up with `STP_INTERRUPTED`, storing nothing, once
// `*stop` is non-zero: the flag is read (atomically) while the put waits for space, about
// every 50 ms (once per wait slice, 250 ms by default, for a put waiting at another address
// space). A binding sets it from another thread to abandon a blocked put when its caller
// is interrupted. `stop` NULL is `stp_channel_put`. Into another address space's channel with
// `STP_FOREVER` the put returns once sent, so only its wait for a credit is interrupted.
//
// # Safety
// `conn` and `item` are live handles; `stop` is NULL or an aligned `int32_t` that stays
// valid during the call and that other threads write only atomically.
stp_status stp_channel_put_interruptible(const stp_channel_out *conn, int64_t ts, const stp_item *item, uint32_t consumers, int64_t timeout_ms, const int32_t *stop);

// Waits until every put made on `conn` is stored or refused; fails with a refusal not
// reported yet (see `stp_channel_put`). Puts into a local channel are stored at once.
//
// # Safety
// `conn` is a live connection.
stp_status stp_channel_flush(const stp_channel_out *conn);

// Gets the item `selector` picks (`ts` is used by `STP_EXACT` only), waiting up to
// `timeout_ms`. On success `*out_ts` and `*out_item` (a new item the caller frees) are set.
// `STP_TIMEOUT` and `STP_UNAVAILABLE` report the nearest timestamps in `stp_last_neighbors()`.
//
// # Safety
// `conn` is a live connection; `out_ts` and `out_item` are writable.
stp_status stp_channel_get(const stp_channel_in *conn, int32_t selector_kind, int64_t ts, int64_t timeout_ms, int64_t *out_ts, stp_item **out_item);

// Marks the item at `ts` consumed on this connection.
//
// # Safety
// `conn` is a live connection.
stp_status stp_channel_consume(const stp_channel_in *conn, int64_t ts);

// Marks every item up to and including `ts` consumed on this connection.
//
// # Safety
// `conn` is a live connection.
stp_status stp_channel_consume_until(const stp_channel_in *conn, int64_t ts);

// Puts `item` at `ts` on a queue, waiting up to `timeout_ms` for space; `*out_ticket` (may be
// NULL) receives the item's ticket.
//
// # Safety
// `conn` and `item` are live handles; `out_ticket` is NULL or writable.
stp_status stp_queue_put(const stp_queue_out *conn, int64_t ts, const stp_item *item, int64_t timeout_ms, uint64_t *out_ticket);

// Puts like `stp_queue_put`, but gives up with `STP_INTERRUPTED`, storing nothing, once
// `*stop` is non-zero: the flag is read (atomically) while the put waits for space, about
// every 50 ms (once per wait slice, 250 ms by default, for a put waiting at another address
// space). A binding sets it from another thread to abandon a blocked put when its caller
// is interrupted. `stop` NULL is `stp_queue_put`; `*out_ticket` (may be NULL)
// receives the item's ticket.
//
// # Safety
// `conn` and `item` are live handles; `stop` is NULL or an aligned `int32_t` that stays
// valid during the call and that other threads write only atomically; `out_ticket` is NULL
// or writable.
stp_status stp_queue_put_interruptible(const stp_queue_out *conn, int64_t ts, const stp_item *item, int64_t timeout_ms, const int32_t *stop, uint64_t *out_ticket);

// Takes the next item of a queue (each item goes to exactly one getter), waiting up to
// `timeout_ms`. Consume it by its ticket when done.
//
// # Safety
// `conn` is a live connection; the out-pointers are writable.
stp_status stp_queue_get(const stp_queue_in *conn, int64_t timeout_ms, int64_t *out_ts, uint64_t *out_ticket, stp_item **out_item);

// Marks the queue item with `ticket` consumed.
//
// # Safety
// `conn` is a live connection.
stp_status stp_queue_consume(const stp_queue_in *conn, uint64_t ticket);

// Writes a new value to a register; `*out_seq` (may be NULL) receives its sequence number.
//
// # Safety
// `conn` and `item` are live handles; `out_seq` is NULL or writable.
stp_status stp_register_write(const stp_register_out *conn, const stp_item *item, uint64_t *out_seq);

// Reads a register value this connection has not read yet, waiting up to `timeout_ms` for
// one.
//
// # Safety
// `conn` is a live connection; the out-pointers are writable.
stp_status stp_register_read(const stp_register_in *conn, int64_t timeout_ms, uint64_t *out_seq, stp_item **out_item);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* STAMPEDE_H */
