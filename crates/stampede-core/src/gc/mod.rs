//! The garbage-collection watermark of a time zone.
//!
//! # Invariants
//!
//! The watermark `W` of a zone is the minimum of
//! 1. the virtual time of every live task of the zone,
//! 2. the timestamp of every put that has been issued but not yet stored (a put blocked on a
//!    full container),
//! 3. the timestamp of every unconsumed queue item (waiting or held by a getter),
//! 4. for every input connection to a channel of the zone, the smallest timestamp of an item
//!    present in the channel and not consumed on that connection.
//!
//! Every task's visibility is at least `W`, so no task can ever put, get or attach below it:
//! items below `W` are unreachable and are reclaimed. The applied watermark (the zone's
//! *floor*) only rises, and a task created from the runtime (not from a parent task) must
//! start at or above it. Two rules keep late joiners possible:
//! - a zone with no live task (here or, in a distributed application, anywhere) keeps its
//!   floor: a task that joins later may still start there and read what is stored. The
//!   report names this term ([`HoldCause::NoLiveTask`]); closing a channel releases every
//!   item consumed on it that no present connection can still read (see
//!   [`Channel::close`](crate::Channel::close)), and dropping a container's last handle frees it;
//! - the floor never passes one above the newest timestamp ever put in the zone (the
//!   *horizon*): raising it further would reclaim nothing, and would forbid a source that
//!   joins later from starting right after the existing data.
//!
//! Operations that can move a low term from one place to another (put, attach, spawn,
//! set_virtual_time) hold the zone's GC lock shared; a pass holds it exclusively while it
//! reads the terms, so it sees a consistent cut. Get and consume only move terms within one
//! container or raise them, so they never take the GC lock. Reclamation itself happens
//! after the cut is taken, outside the lock.
//!
//! A task's cached visibility must never be lower than the terms the GC sees for it, so
//! operations raise visibility before they raise the container term (consume), and lower the
//! container term before they lower visibility (get).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Weak};

use crossbeam_utils::CachePadded;

use crate::ids::{ConnId, ContainerId, TaskId};
use crate::sync::{lock, AtomicI64, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, RwLock};
use crate::task::TaskInner;
use crate::time::{fmt_ts, Timestamp, ZoneId, INFINITY};

/// One term of the watermark: a timestamp and what holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The timestamp this term holds the watermark at.
    pub ts: Timestamp,
    /// What holds it.
    pub cause: HoldCause,
}

/// What holds a watermark term.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoldCause {
    /// A live task's virtual time.
    VirtualTime {
        /// The task.
        task: TaskId,
        /// Its name.
        task_name: String,
    },
    /// A put blocked on a full container.
    PendingPut {
        /// The putting task.
        task: TaskId,
        /// Its name.
        task_name: String,
        /// The container it waits for.
        container: ContainerId,
    },
    /// The oldest item not yet consumed on a channel input connection.
    Unconsumed {
        /// The channel.
        container: ContainerId,
        /// The channel's name, if registered.
        container_name: Option<String>,
        /// The input connection.
        connection: ConnId,
        /// The connection's task.
        task: TaskId,
        /// Its name.
        task_name: String,
    },
    /// Nothing at or above this timestamp was ever put in the zone; the floor stops here.
    Horizon,
    /// The zone has no live task, so its floor is kept for tasks that join later; closing a
    /// channel releases the items consumed on it.
    NoLiveTask {
        /// The zone.
        zone: ZoneId,
    },
    /// The lowest term another address space of a distributed application reported.
    Remote {
        /// The reporting address space.
        space: String,
    },
    /// An unconsumed queue item.
    QueueItem {
        /// The queue.
        container: ContainerId,
        /// The queue's name, if registered.
        container_name: Option<String>,
        /// The item's ticket.
        ticket: u64,
        /// The task holding it open, if it was gotten.
        held_by: Option<TaskId>,
    },
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ts = fmt_ts(self.ts);
        let name = |n: &Option<String>, id: &ContainerId| {
            n.clone().unwrap_or_else(|| format!("#{}", id.0))
        };
        match &self.cause {
            HoldCause::VirtualTime { task, task_name } => {
                write!(f, "{ts}: virtual time of task {task_name} ({})", task.0)
            }
            HoldCause::Horizon => write!(f, "{ts}: horizon (one above the newest item put)"),
            HoldCause::NoLiveTask { zone } => write!(
                f,
                "{ts}: no live task in {zone}: floor kept for late joiners \
                 (closing a channel releases its consumed items)"
            ),
            HoldCause::Remote { space } => write!(f, "{ts}: address space {space}"),
            HoldCause::PendingPut {
                task_name,
                container,
                ..
            } => write!(f, "{ts}: put by {task_name} waiting on #{}", container.0),
            HoldCause::Unconsumed {
                container,
                container_name,
                connection,
                task_name,
                ..
            } => write!(
                f,
                "{ts}: unconsumed in {} on connection {} of task {task_name}",
                name(container_name, container),
                connection.0
            ),
            HoldCause::QueueItem {
                container,
                container_name,
                ticket,
                held_by,
            } => write!(
                f,
                "{ts}: queue item {ticket} in {}{}",
                name(container_name, container),
                held_by.map_or(String::new(), |t| format!(", held by task {}", t.0))
            ),
        }
    }
}

/// Every term of a zone's watermark, from [`Runtime::explain`](crate::Runtime::explain).
#[derive(Clone, Debug)]
pub struct WatermarkReport {
    /// The zone.
    pub zone: ZoneId,
    /// The lowest of this runtime's own terms (tasks, puts, connections, queue items), without
    /// the horizon and remote terms: what this address space reports to the others.
    pub local: Timestamp,
    /// The watermark applied so far; everything below it has been reclaimed.
    pub floor: Timestamp,
    /// The watermark the terms give now (a pass would raise the floor to it).
    pub watermark: Timestamp,
    /// Every term, lowest first.
    pub holds: Vec<Hold>,
}

impl WatermarkReport {
    /// The terms at the watermark: what holds it back.
    pub fn holders(&self) -> impl Iterator<Item = &Hold> {
        let w = self.watermark;
        self.holds.iter().filter(move |h| h.ts == w)
    }
}

impl fmt::Display for WatermarkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: watermark {} (reclaimed below {})",
            self.zone,
            fmt_ts(self.watermark),
            fmt_ts(self.floor)
        )?;
        for h in &self.holds {
            writeln!(f, "  {h}")?;
        }
        Ok(())
    }
}

/// What the GC needs from a container.
pub(crate) trait Collectable: Send + Sync {
    /// The container's lowest term; pushes every term to `holds` if given.
    fn low_mark(&self, holds: Option<&mut Vec<Hold>>) -> Timestamp;
    /// Reclaims every item below `w`; returns how many.
    fn reclaim_below(&self, w: Timestamp) -> usize;
    /// The newest timestamp ever put, `Timestamp::MIN` if none.
    fn newest(&self) -> Timestamp;
}

/// Counters of a zone's collector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Passes run.
    pub passes: u64,
    /// Items reclaimed by the watermark or by reference counts.
    pub reclaimed: u64,
    /// The current floor.
    pub floor: Timestamp,
}

#[derive(Default)]
struct Members {
    tasks: BTreeMap<TaskId, Arc<TaskInner>>,
    containers: Vec<Weak<dyn Collectable>>,
    /// Lowest terms reported by other address spaces, by space.
    remote: BTreeMap<String, Timestamp>,
}

/// Told of every pass's local mark (see [`WatermarkReport::local`]) with the pass's number.
pub(crate) type MarkListener = Arc<dyn Fn(ZoneId, Timestamp, u64) + Send + Sync>;

struct Snapshot {
    tasks: Vec<Arc<TaskInner>>,
    containers: Vec<Arc<dyn Collectable>>,
    remote: Vec<(String, Timestamp)>,
}

/// A time zone: its members, its floor and the lock that makes a pass a consistent cut.
pub(crate) struct Zone {
    pub(crate) id: ZoneId,
    // Taken shared by every put: its own cache line, apart from what consumers read.
    gc: CachePadded<RwLock<()>>,
    floor: AtomicI64,
    members: Mutex<Members>,
    /// Puts waiting for space; while nonzero, every raise of a term runs a pass.
    pub(crate) blocked_putters: CachePadded<AtomicUsize>,
    passes: AtomicU64,
    /// Passes handing reclaimed items to their garbage handlers now, by number; a caller's
    /// pass waits for the ones before it (see [`Zone::collect_for_caller`]).
    reclaiming: Mutex<BTreeSet<u64>>,
    reclaim_done: Condvar,
    pub(crate) reclaimed: AtomicU64,
    /// The local mark of the last pass.
    local: AtomicI64,
    listener: Mutex<Option<MarkListener>>,
    /// Busy-wait rounds of a blocking get or put here before it parks.
    pub(crate) spin_rounds: u32,
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Zone").field("id", &self.id).finish()
    }
}

pub(crate) type GcReadGuard<'a> = crate::sync::RwLockReadGuard<'a, ()>;

#[cfg(loom)]
loom::thread_local! {
    /// How many passes this thread is reclaiming in (its garbage handlers may run a pass).
    static IN_RECLAIM: Cell<u32> = Cell::new(0);
}
#[cfg(not(loom))]
thread_local! {
    /// How many passes this thread is reclaiming in (its garbage handlers may run a pass).
    static IN_RECLAIM: Cell<u32> = const { Cell::new(0) };
}

/// A pass reclaiming on this thread: done when dropped, even if a garbage handler panics.
struct Reclaiming<'a> {
    zone: &'a Zone,
    pass: u64,
}

impl Drop for Reclaiming<'_> {
    fn drop(&mut self) {
        IN_RECLAIM.with(|d| d.set(d.get() - 1));
        lock(&self.zone.reclaiming).remove(&self.pass);
        self.zone.reclaim_done.notify_all();
    }
}

impl Zone {
    pub(crate) fn new(id: ZoneId, spin_rounds: u32) -> Zone {
        Zone {
            id,
            gc: CachePadded::new(RwLock::new(())),
            floor: AtomicI64::new(Timestamp::MIN),
            members: Mutex::new(Members::default()),
            blocked_putters: CachePadded::new(AtomicUsize::new(0)),
            passes: AtomicU64::new(0),
            reclaiming: Mutex::new(BTreeSet::new()),
            reclaim_done: Condvar::new(),
            reclaimed: AtomicU64::new(0),
            local: AtomicI64::new(INFINITY),
            listener: Mutex::new(None),
            spin_rounds,
        }
    }

    pub(crate) fn set_listener(&self, l: Option<MarkListener>) {
        *lock(&self.listener) = l;
    }

    /// Sets (or with `None` removes) the lowest term reported by another address space.
    pub(crate) fn set_remote(&self, space: &str, ts: Option<Timestamp>) {
        let mut m = lock(&self.members);
        match ts {
            Some(ts) => {
                m.remote.insert(space.to_owned(), ts);
            }
            None => {
                m.remote.remove(space);
            }
        }
    }

    pub(crate) fn local_mark(&self) -> Timestamp {
        self.local.load(Ordering::Acquire)
    }

    /// Holds off passes while a term moves.
    pub(crate) fn shared(&self) -> GcReadGuard<'_> {
        self.gc
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn floor(&self) -> Timestamp {
        self.floor.load(Ordering::Acquire)
    }

    pub(crate) fn add_task(&self, t: Arc<TaskInner>) {
        lock(&self.members).tasks.insert(t.id, t);
    }

    /// The zone's live tasks now.
    pub(crate) fn tasks(&self) -> Vec<Arc<TaskInner>> {
        lock(&self.members).tasks.values().cloned().collect()
    }

    pub(crate) fn remove_task(&self, id: TaskId) {
        lock(&self.members).tasks.remove(&id);
    }

    pub(crate) fn add_container(&self, c: Weak<dyn Collectable>) {
        lock(&self.members).containers.push(c);
    }

    fn snapshot(&self) -> Snapshot {
        let mut m = lock(&self.members);
        m.containers.retain(|c| c.strong_count() > 0);
        let containers = m.containers.iter().filter_map(Weak::upgrade).collect();
        Snapshot {
            tasks: m.tasks.values().cloned().collect(),
            containers,
            remote: m.remote.iter().map(|(k, v)| (k.clone(), *v)).collect(),
        }
    }

    /// The watermark the terms give, and the local mark.
    fn terms(s: &Snapshot, mut holds: Option<&mut Vec<Hold>>) -> (Timestamp, Timestamp) {
        let (tasks, containers) = (&s.tasks, &s.containers);
        let newest = containers
            .iter()
            .map(|c| c.newest())
            .max()
            .unwrap_or(Timestamp::MIN);
        let horizon = newest.saturating_add(1);
        if let Some(h) = holds.as_deref_mut() {
            h.push(Hold {
                ts: horizon,
                cause: HoldCause::Horizon,
            });
        }
        let mut local = INFINITY;
        for t in tasks {
            local = local.min(t.gc_term(holds.as_deref_mut()));
        }
        for c in containers {
            local = local.min(c.low_mark(holds.as_deref_mut()));
        }
        let mut w = horizon.min(local);
        for &(ref space, ts) in &s.remote {
            w = w.min(ts);
            if let Some(h) = holds.as_deref_mut() {
                h.push(Hold {
                    ts,
                    cause: HoldCause::Remote {
                        space: space.clone(),
                    },
                });
            }
        }
        (w, local)
    }

    /// Tells the listener of pass `pass`'s local mark, outside every lock but this one's.
    /// Passes on two threads may report out of order: the number says which is newer.
    fn note_local(&self, local: Timestamp, pass: u64) {
        let l = lock(&self.listener).clone();
        if let Some(l) = l {
            l(self.id, local, pass);
        }
    }

    /// Runs one pass: takes a consistent cut of the terms, raises the floor, reclaims.
    /// Another pass may still be running the garbage handlers of what it reclaimed.
    pub(crate) fn collect(&self) -> Timestamp {
        self.collect_pass().0
    }

    /// A pass for a caller that asked for one: when it returns, every item below the floor
    /// it returns has been reclaimed and handed to its garbage handler, by this pass or by
    /// one that ran at the same time (the background collector's, a putter's). A pass run
    /// from inside a garbage handler does not wait, since the pass it would wait for may be
    /// its own caller's.
    pub(crate) fn collect_for_caller(&self) -> Timestamp {
        let (w, pass) = self.collect_pass();
        if IN_RECLAIM.with(Cell::get) == 0 {
            let mut r = lock(&self.reclaiming);
            while r.first().is_some_and(|&p| p < pass) {
                r = self
                    .reclaim_done
                    .wait(r)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        }
        w
    }

    /// One pass; its floor and its number.
    fn collect_pass(&self) -> (Timestamp, u64) {
        let (w, local, pass, snap) = {
            let _cut = self
                .gc
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let snap = self.snapshot();
            let pass = self.passes.fetch_add(1, Ordering::Relaxed) + 1;
            let floor = self.floor();
            let (w, local) = Self::terms(&snap, None);
            // Stored within the cut, so the mark always is the newest pass's.
            self.local.store(local, Ordering::Release);
            if snap.tasks.is_empty() && snap.remote.is_empty() {
                (floor, local, pass, None)
            } else {
                let w = w.max(floor);
                self.floor.store(w, Ordering::Release);
                // Within the cut: a pass numbered after this one sees it reclaiming.
                lock(&self.reclaiming).insert(pass);
                (w, local, pass, Some(snap))
            }
        };
        // Made before anything else can panic, so that the pass is never left registered.
        let _reclaiming = snap.is_some().then(|| {
            IN_RECLAIM.with(|d| d.set(d.get() + 1));
            Reclaiming { zone: self, pass }
        });
        self.note_local(local, pass);
        let Some(snap) = snap else { return (w, pass) };
        let mut n = 0;
        for c in &snap.containers {
            n += c.reclaim_below(w);
        }
        self.reclaimed.fetch_add(n as u64, Ordering::Relaxed);
        (w, pass)
    }

    /// Runs a pass if a put is waiting for space that a raised term may free.
    pub(crate) fn nudge(&self) {
        self.nudge_beyond(0);
    }

    /// Runs a pass if more than `woken` puts are waiting: the caller woke `woken` of them,
    /// which run their own pass.
    pub(crate) fn nudge_beyond(&self, woken: usize) {
        if self.blocked_putters.load(Ordering::SeqCst) > woken {
            self.collect();
        }
    }

    pub(crate) fn explain(&self) -> WatermarkReport {
        let _cut = self
            .gc
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let snap = self.snapshot();
        let mut holds = Vec::new();
        let (w, local) = Self::terms(&snap, Some(&mut holds));
        let floor = self.floor();
        let idle = snap.tasks.is_empty() && snap.remote.is_empty();
        if idle {
            holds.push(Hold {
                ts: floor,
                cause: HoldCause::NoLiveTask { zone: self.id },
            });
        }
        holds.sort_by_key(|h| h.ts);
        WatermarkReport {
            zone: self.id,
            local,
            floor,
            watermark: if idle { floor } else { w.max(floor) },
            holds,
        }
    }

    pub(crate) fn stats(&self) -> GcStats {
        GcStats {
            passes: self.passes.load(Ordering::Relaxed),
            reclaimed: self.reclaimed.load(Ordering::Relaxed),
            floor: self.floor(),
        }
    }
}
