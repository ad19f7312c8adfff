//! Cluster threads (CableS, and Stampede's dynamic tasks): one program spawns, joins and
//! cancels tasks in any address space of its application, and synchronises them with
//! cluster-wide mutexes, conditions, semaphores and barriers, as threads of one machine.
//!
//! Each address space that takes part starts a [`Cluster`] with a [`Registry`] of the tasks
//! it can run, by name (code does not travel; the same binary, or one registering the same
//! names, runs everywhere). [`Cluster::spawn`] places a task by a [`Placement`] (here, on a
//! named space, round-robin, least loaded); [`JoinHandle::join`] returns its result bytes or
//! how it ended (failed, panicked, cancelled, lost with its space). A task is a Stampede task
//! too ([`TaskContext::task`]), with a virtual time, so it uses channels and queues as any
//! other.
//!
//! Synchronisation objects are named and live in one address space, their home, the first
//! that made them ([`Cluster::mutex`], [`Cluster::condition`], [`Cluster::semaphore`]). A
//! lock from another space is one message there and one back; from the home itself it is a
//! local operation. When the space of a task holding a mutex dies, the mutex is released
//! and the next holder gets [`LockError::OwnerDied`], as with a robust mutex. A barrier
//! ([`Cluster::barrier`]) is a Strata barrier over its members, so a member that dies makes
//! the others' waits fail instead of hang.
//!
//! Global memory segments ([`Cluster::segment`]) live at the space that first touches them,
//! each space working on its own copy, kept release-consistent by the locks and barriers.
//!
//! Layering, without circles: `error`, `wire`, `home` (the homes' state machine), `cache`,
//! `waits` → `shared` (the state, sending, running a task, departures) → `serve` (the served
//! code and the membership watch), `thread`, `segment` → `sync`, `barrier` → `cluster`
//! (start, stop, lists).

mod barrier;
mod cache;
mod cluster;
mod error;
#[cfg(target_os = "linux")]
mod heap;
mod home;
mod node;
mod segment;
mod serve;
mod shared;
mod sync;
mod thread;
mod waits;
mod wire;

pub use barrier::Barrier;
pub use cluster::{cluster_stats, list_tasks, ClusterStats, SpaceTasks, TaskInfo};
pub use error::{ClusterError, TaskError};
#[cfg(target_os = "linux")]
pub use heap::{Heap, HeapStats};
pub use node::{NodeAgent, Worker, ENV_APP, ENV_CONNECT, ENV_TOKEN};
pub use segment::Segment;
pub use shared::{
    AttachPolicy, Cancellation, Cluster, ClusterOp, ClusterOptions, Registry, Resolver, TaskBody,
    TaskContext, ThreadId,
};
pub use sync::{Condition, LockError, Mutex, MutexGuard, Semaphore};
pub use thread::{JoinHandle, Placement};

// The guide's examples are compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/cluster-threads.md")]
struct Guide;

/// Runs every decoder of this crate's message format on `data` (the fuzz targets, `fuzz/`):
/// none may panic, and what one accepts must survive a re-encoding.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_decoders(data: &[u8]) {
    wire::fuzz(data)
}
