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
  // The operation is not available on this container where it lives (a local-only hook
  // on a container served by another address space).
  STP_UNSUPPORTED = 27,
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

// A channel: time-indexed items, here or in another address space.
typedef struct stp_channel stp_channel;

// An input connection to a channel.
typedef struct stp_channel_in stp_channel_in;

// An output connection to a channel.
typedef struct stp_channel_out stp_channel_out;

// A join configuration, built by `stp_config_new` and the `stp_config_*` setters.
typedef struct stp_config stp_config;

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

// A task: a thread of control with a virtual time. Use it from any thread; its connections
// belong to it.
typedef struct stp_task stp_task;

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

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The library's version, e.g. "0.1.0". Static; never NULL.
const char *stp_version(void);

// A message describing the most recent failed call on this thread ("" if none). The string
// stays valid until the next failing call on this thread.
const char *stp_last_error(void);

// The nearest available timestamps reported by the most recent failed get on this thread.
stp_neighbors stp_last_neighbors(void);

// The name of a status code, e.g. "STP_TIMEOUT"; "STP_UNKNOWN" for a value that is not one.
// Static; never NULL.
const char *stp_status_name(int32_t status);

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
