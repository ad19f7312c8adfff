//! Queues: FIFO regardless of timestamp, each item delivered to exactly one getter.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::container::{Flavor, LocalContainer};
use crate::error::{GetError, Neighbors, PutError, PutErrorKind, StmError};
use crate::gc::{Collectable, Hold, HoldCause, Zone};
use crate::ids::{ConnId, ContainerId};
use crate::item::Item;
use crate::notify::{Arrivals, Hooked, Hooks, SubscriptionId};
use crate::sync::{lock, wait, Condvar, InterruptPoll, Mutex, MutexGuard, Ordering};
use crate::task::{Detach, TaskInner};
use crate::time::{Timestamp, ZoneId, INFINITY};
use crate::wait::{spin, Wait};

/// An item gotten from a queue: consume it by its ticket.
#[derive(Clone, Debug)]
pub struct QueueItem {
    /// The item's timestamp.
    pub ts: Timestamp,
    /// The ticket that identifies this item in its queue.
    pub ticket: u64,
    /// The value.
    pub item: Item,
}

/// Counters of a queue, from [`Queue::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueueStats {
    /// Items waiting to be gotten.
    pub waiting: usize,
    /// Items gotten and not yet consumed.
    pub held: usize,
    /// Successful puts.
    pub puts: u64,
    /// Successful gets.
    pub gets: u64,
    /// Items consumed (and freed).
    pub consumed: u64,
    /// Held items put back for another getter because their connection went away.
    pub redelivered: u64,
    /// Puts that failed because the queue was full.
    pub full: u64,
}

struct Entry {
    ts: Timestamp,
    ticket: u64,
    item: Item,
}

struct State {
    waiting: VecDeque<Entry>,
    held: BTreeMap<u64, (ConnId, Arc<TaskInner>, Entry)>,
    /// Timestamps of all unconsumed items (waiting or held), with multiplicity.
    unconsumed: BTreeMap<Timestamp, u32>,
    conns: Vec<ConnId>,
    next_ticket: u64,
    /// The newest timestamp ever put.
    newest: Timestamp,
    closed: bool,
    get_waiters: usize,
    put_waiters: usize,
    hooks: Hooks,
    stats: QueueStats,
}

#[allow(unreachable_pub, missing_debug_implementations)] // named only by the sealed `Container` trait
pub struct QueueCore {
    pub(crate) id: ContainerId,
    pub(crate) name: Option<String>,
    capacity: Option<usize>,
    pub(crate) zone: Arc<Zone>,
    state: Mutex<State>,
    getters: Condvar,
    putters: Condvar,
}

impl QueueCore {
    pub(crate) fn new(
        id: ContainerId,
        name: Option<String>,
        capacity: Option<usize>,
        zone: Arc<Zone>,
    ) -> Self {
        QueueCore {
            id,
            name,
            capacity,
            zone,
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                held: BTreeMap::new(),
                unconsumed: BTreeMap::new(),
                conns: Vec::new(),
                next_ticket: 1,
                newest: Timestamp::MIN,
                closed: false,
                get_waiters: 0,
                put_waiters: 0,
                hooks: Hooks::default(),
                stats: QueueStats::default(),
            }),
            getters: Condvar::new(),
            putters: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub(crate) fn attach_input(&self, task: &Arc<TaskInner>, id: ConnId) -> Result<(), StmError> {
        if !task.is_alive() {
            return Err(StmError::TaskExited);
        }
        self.lock().conns.push(id);
        Ok(())
    }

    pub(crate) fn put(
        self: &Arc<Self>,
        task: &TaskInner,
        ts: Timestamp,
        item: Item,
        wait_mode: Wait,
        interrupt: Option<&dyn Fn() -> bool>,
    ) -> Result<u64, PutError> {
        if ts == INFINITY {
            return Err(PutError::new(PutErrorKind::InvalidTimestamp, ts, item));
        }
        let (may_wait, deadline) = wait_mode.deadline();
        let mut blocked = false;
        let mut poll = InterruptPoll::new(interrupt);
        let result = loop {
            // Asked with no lock held, while the put keeps its hold on the watermark.
            if blocked && poll.interrupted() {
                break Err(PutErrorKind::Interrupted);
            }
            let cut = self.zone.shared();
            if !task.is_alive() {
                break Err(PutErrorKind::Detached);
            }
            let vis = task.visibility();
            if ts < vis {
                break Err(PutErrorKind::BelowVisibility { visibility: vis });
            }
            let floor = self.zone.floor();
            if ts < floor {
                break Err(PutErrorKind::BelowVisibility { visibility: floor });
            }
            let mut st = self.lock();
            if st.closed {
                break Err(PutErrorKind::Closed);
            }
            if self.capacity.is_some_and(|cap| st.waiting.len() >= cap) {
                if !may_wait || deadline.is_some_and(|d| Instant::now() >= d) {
                    st.stats.full += 1;
                    break Err(PutErrorKind::Full);
                }
                if !blocked {
                    // Space comes from gets, not from the collector; the pending put only
                    // holds the watermark at `ts`.
                    blocked = true;
                    let me: Arc<dyn Detach> = self.clone();
                    task.add_pending(ts, self.id, Arc::downgrade(&me));
                }
                // Re-checked under the lock: an exit that raced with the check above has
                // either finished its wake-up already or will find this put waiting.
                if !task.is_alive() {
                    break Err(PutErrorKind::Detached);
                }
                drop(cut);
                st.put_waiters += 1;
                let parked = Instant::now();
                let (mut st, _) = wait(&self.putters, st, poll.bound(deadline));
                task.add_blocked(parked);
                st.put_waiters -= 1;
                drop(st);
                continue;
            }
            let ticket = st.next_ticket;
            st.next_ticket += 1;
            st.waiting.push_back(Entry {
                ts,
                ticket,
                item: item.clone(),
            });
            *st.unconsumed.entry(ts).or_insert(0) += 1;
            st.stats.puts += 1;
            st.newest = st.newest.max(ts);
            if st.get_waiters > 0 {
                self.getters.notify_one();
            }
            let pending = st.hooks.subscribers.pending();
            drop(st);
            drop(cut);
            if let Some(p) = pending {
                p.fire(ts);
            }
            break Ok(ticket);
        };
        if blocked {
            task.remove_pending(ts, self.id);
        }
        result.map_err(|k| PutError::new(k, ts, item))
    }

    pub(crate) fn get(
        &self,
        conn: ConnId,
        task: &Arc<TaskInner>,
        wait_mode: Wait,
    ) -> Result<QueueItem, GetError> {
        let (may_wait, deadline) = wait_mode.deadline();
        let mut round = 0;
        let mut st = self.lock();
        loop {
            if !st.conns.contains(&conn) {
                return Err(GetError::Detached);
            }
            if let Some(e) = st.waiting.pop_front() {
                task.add_open(self.zone.id, e.ts);
                let got = QueueItem {
                    ts: e.ts,
                    ticket: e.ticket,
                    item: e.item.clone(),
                };
                st.held.insert(e.ticket, (conn, task.clone(), e));
                st.stats.gets += 1;
                if st.put_waiters > 0 {
                    self.putters.notify_one();
                }
                return Ok(got);
            }
            if st.closed {
                return Err(GetError::Closed);
            }
            if !may_wait {
                return Err(GetError::Unavailable(Neighbors::default()));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(GetError::Timeout(Neighbors::default()));
            }
            if round < self.zone.spin_rounds {
                drop(st);
                spin(round, self.zone.spin_rounds);
                round += 1;
                st = self.lock();
                continue;
            }
            st.get_waiters += 1;
            let parked = Instant::now();
            let (g, _) = wait(&self.getters, st, deadline);
            task.add_blocked(parked);
            st = g;
            st.get_waiters -= 1;
        }
    }

    pub(crate) fn consume(&self, conn: ConnId, ticket: u64) -> Result<(), StmError> {
        let mut st = self.lock();
        if !st.conns.contains(&conn) {
            return Err(StmError::Detached);
        }
        match st.held.get(&ticket) {
            Some((c, _, _)) if *c == conn => {}
            _ => return Err(StmError::UnknownTicket(ticket)),
        }
        let (_, task, e) = st.held.remove(&ticket).expect("checked");
        // Raise the task's visibility before the queue's term (see the gc module).
        task.remove_open(self.zone.id, e.ts);
        if let Some(n) = st.unconsumed.get_mut(&e.ts) {
            *n -= 1;
            if *n == 0 {
                st.unconsumed.remove(&e.ts);
            }
        }
        st.stats.consumed += 1;
        self.zone.reclaimed.fetch_add(1, Ordering::Relaxed);
        let handler = st.hooks.garbage();
        drop(st);
        if let Some(h) = handler {
            h(e.ts, &e.item);
        }
        self.zone.nudge();
        Ok(())
    }

    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        st.hooks.subscribers.close_all();
        self.getters.notify_all();
        self.putters.notify_all();
    }
}

impl LocalContainer for QueueCore {
    fn id(&self) -> ContainerId {
        self.id
    }
    fn zone(&self) -> ZoneId {
        self.zone.id
    }
    fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    fn attach_input(&self, task: &Arc<TaskInner>, id: ConnId) -> Result<(), StmError> {
        QueueCore::attach_input(self, task, id)
    }
}

impl Hooked for QueueCore {
    fn hooks<R>(&self, f: impl FnOnce(&mut Hooks, bool) -> R) -> R {
        let mut st = self.lock();
        let closed = st.closed;
        f(&mut st.hooks, closed)
    }
}

impl Detach for QueueCore {
    fn wake_putters(&self) {
        let _st = self.lock();
        self.putters.notify_all();
    }

    fn detach(&self, conn: ConnId, _task: &TaskInner) {
        let mut st = self.lock();
        st.conns.retain(|c| *c != conn);
        let mine: Vec<u64> = st
            .held
            .iter()
            .filter(|(_, (c, _, _))| *c == conn)
            .map(|(t, _)| *t)
            .collect();
        st.stats.redelivered += mine.len() as u64;
        // Waiting items stay in ticket (original FIFO) order: redelivered items go back to
        // where they were.
        for t in mine {
            let (_, task, e) = st.held.remove(&t).expect("listed");
            task.remove_open(self.zone.id, e.ts);
            let at = st.waiting.partition_point(|w| w.ticket < e.ticket);
            st.waiting.insert(at, e);
        }
        // Wake every getter even without redelivered items: a getter of this connection must
        // see that it is detached, and must not swallow a later put's single wake-up.
        if st.get_waiters > 0 {
            self.getters.notify_all();
        }
    }
}

impl Collectable for QueueCore {
    fn low_mark(&self, holds: Option<&mut Vec<Hold>>) -> Timestamp {
        let st = self.lock();
        if let Some(h) = holds {
            let name = || self.name.clone();
            for e in &st.waiting {
                h.push(Hold {
                    ts: e.ts,
                    cause: HoldCause::QueueItem {
                        container: self.id,
                        container_name: name(),
                        ticket: e.ticket,
                        held_by: None,
                    },
                });
            }
            for (task_id, e) in st.held.values().map(|(_, t, e)| (t.id, e)) {
                h.push(Hold {
                    ts: e.ts,
                    cause: HoldCause::QueueItem {
                        container: self.id,
                        container_name: name(),
                        ticket: e.ticket,
                        held_by: Some(task_id),
                    },
                });
            }
        }
        st.unconsumed.keys().next().copied().unwrap_or(INFINITY)
    }

    fn newest(&self) -> Timestamp {
        self.lock().newest
    }

    fn reclaim_below(&self, _w: Timestamp) -> usize {
        // Queue items are freed by consume, never by the watermark (they hold it).
        0
    }
}

/// A queue: FIFO delivery regardless of timestamp; several items may share a timestamp; each
/// item goes to exactly one getter, identified by a ticket, and is freed by its consume.
///
/// ```
/// use stampede_core::{ContainerOptions, Runtime, INFINITY};
/// let rt = Runtime::new();
/// let work = rt.queue(ContainerOptions::default()).unwrap();
/// let splitter = rt.task(0).unwrap();
/// let out = splitter.attach_output(&work).unwrap();
/// out.put(5, "left half").unwrap();
/// out.put(5, "right half").unwrap(); // same timestamp is fine in a queue
/// out.put(4, "late").unwrap();        // FIFO, not timestamp order
///
/// let worker = rt.task(INFINITY).unwrap();
/// let input = worker.attach_input(&work).unwrap();
/// let a = input.get().unwrap();
/// assert_eq!((a.ts, a.item.as_str()), (5, Some("left half")));
/// assert_eq!(worker.visibility(), 5); // a held queue item holds visibility
/// input.consume(a.ticket).unwrap();
/// assert_eq!(input.get().unwrap().item.as_str(), Some("right half"));
/// ```
#[derive(Clone)]
pub struct Queue {
    pub(crate) flavor: Flavor<QueueCore>,
}

impl fmt::Debug for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.flavor.debug("Queue", f)
    }
}

impl Queue {
    fn local(&self) -> Option<&Arc<QueueCore>> {
        match &self.flavor {
            Flavor::Local(c) => Some(c),
            Flavor::Provided(_) => None,
        }
    }
    /// The registered name, if any.
    pub fn name(&self) -> Option<&str> {
        self.flavor.name()
    }
    /// The capacity (of waiting items), if bounded. A queue served by another address space
    /// (see [`Container::owner`](crate::Container::owner)) stores nothing here: the
    /// inspection methods below report no items and zero counters for it.
    pub fn capacity(&self) -> Option<usize> {
        match &self.flavor {
            Flavor::Local(c) => c.capacity,
            Flavor::Provided(b) => b.capacity(),
        }
    }
    /// Items waiting to be gotten.
    pub fn len(&self) -> usize {
        self.local().map_or(0, |c| c.lock().waiting.len())
    }
    /// Whether no item is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Counters.
    pub fn stats(&self) -> QueueStats {
        let Some(c) = self.local() else {
            return QueueStats::default();
        };
        let st = c.lock();
        QueueStats {
            waiting: st.waiting.len(),
            held: st.held.len(),
            ..st.stats
        }
    }
    /// Closes the queue: puts fail, gets drain what is left and then return `Closed`. A
    /// queue served by another address space is closed there; that fails only when its
    /// owner cannot be reached.
    pub fn close(&self) -> Result<(), StmError> {
        match &self.flavor {
            Flavor::Local(c) => {
                c.close();
                Ok(())
            }
            Flavor::Provided(b) => b.close(),
        }
    }
    /// Installs the garbage handler, run once for every consumed item (on a queue served by
    /// another address space, forwarded by its owner and run here on the event thread).
    pub fn on_garbage(
        &self,
        handler: impl Fn(Timestamp, &Item) + Send + Sync + 'static,
    ) -> Result<(), StmError> {
        self.flavor.on_garbage(Arc::new(handler))
    }
    /// Calls `f` with the timestamp of every item put from now on.
    pub fn on_arrival(
        &self,
        f: impl Fn(Timestamp) + Send + Sync + 'static,
    ) -> Result<SubscriptionId, StmError> {
        self.flavor.on_arrival(Arc::new(f))
    }
    /// An async stream of the timestamps of items put from now on.
    pub fn arrivals(&self, capacity: usize) -> Result<Arrivals, StmError> {
        self.flavor.arrivals(capacity)
    }
    /// Cancels a subscription; returns whether it existed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.flavor.unsubscribe(id)
    }
}
