//! Channels: at most one item per timestamp, random access by timestamp.
//!
//! # Layout
//!
//! Items live in a map ordered by timestamp. Each stored item carries two 64-bit words, one
//! bit per input connection: consumed on it, open on it. A connection adds `consumed_below`
//! (everything under it is consumed, including items still to come) and the few timestamps
//! it consumed before they arrived, so selectors scan the map with one mask test per item.
//!
//! A put above every timestamp ever put cannot collide, so when it needs nothing else from
//! the state it appends to a separate inbox and never takes the state lock; state holders
//! merge the inbox first. Gets answer from stored items when they can, since inbox items are
//! newer than all of them; consumes and detaches never need the inbox at all.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::CachePadded;

use crate::container::{Flavor, LocalContainer};
use crate::error::{GetError, Neighbors, PutError, PutErrorKind, StmError};
use crate::gc::{Collectable, Hold, HoldCause, Zone};
use crate::ids::{ConnId, ContainerId};
use crate::item::Item;
use crate::notify::{Arrivals, GarbageHandler, Hooked, Hooks, SubscriptionId};
use crate::sync::{
    lock, wait, AtomicBool, AtomicUsize, Condvar, InterruptPoll, Mutex, MutexGuard, Ordering,
};
use crate::task::{Detach, TaskInner};
use crate::time::{Timestamp, ZoneId, INFINITY};
use crate::wait::{spin, Wait};

/// Which item a channel get asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Selector {
    /// The item with exactly this timestamp.
    Exact(Timestamp),
    /// The oldest item not consumed on this connection.
    Oldest,
    /// The newest item not consumed on this connection.
    Newest,
    /// The newest item this connection has never gotten; skips stale items.
    NewestUnseen,
    /// The oldest unconsumed item newer than this connection's last get: in-order streaming.
    NextUnseen,
}

/// Counters of a channel, from [`Channel::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChannelStats {
    /// Items stored now.
    pub items: usize,
    /// Input connections attached now.
    pub connections: usize,
    /// Items open (gotten, not consumed) summed over connections.
    pub open: usize,
    /// Successful puts.
    pub puts: u64,
    /// Successful gets.
    pub gets: u64,
    /// Items reclaimed (watermark or reference count).
    pub reclaimed: u64,
    /// Items passed over unseen by `NewestUnseen` gets.
    pub skipped: u64,
    /// Puts that failed because the channel was full.
    pub full: u64,
}

struct Slot {
    item: Item,
    /// Reclaim after this many connections consumed the item.
    refcount: Option<u32>,
    consumed_by: u32,
    /// Per input connection (by its bit): consumed on it.
    consumed: u64,
    /// Per input connection (by its bit): open on it.
    open: u64,
    /// Per input connection (by its bit): passed over unseen by a `NewestUnseen` get, and
    /// counted as skipped.
    passed: u64,
}

impl Slot {
    fn new(item: Item, refcount: Option<u32>, consumed: u64) -> Slot {
        Slot {
            item,
            refcount,
            consumed_by: consumed.count_ones(),
            consumed,
            open: 0,
            passed: 0,
        }
    }
}

/// Input connections per channel: each owns one bit of the per-item state words.
pub(crate) const MAX_INPUTS: usize = 64;

struct InConn {
    id: ConnId,
    /// This connection's bit in `Slot::consumed` and `Slot::open`.
    bit: u64,
    task: Arc<TaskInner>,
    /// Every timestamp below this is consumed, including items that arrive later.
    consumed_below: Timestamp,
    /// Timestamps at or above `consumed_below` consumed while no item had them; an item
    /// arriving with one starts consumed.
    absent: BTreeSet<Timestamp>,
    /// Gotten and not yet consumed (few: usually zero or one).
    open: Vec<Timestamp>,
    last_get: Option<Timestamp>,
}

impl InConn {
    fn is_consumed(&self, ts: Timestamp, slot: Option<&Slot>) -> bool {
        ts < self.consumed_below
            || match slot {
                Some(s) => s.consumed & self.bit != 0,
                None => self.absent.contains(&ts),
            }
    }
}

struct State {
    items: BTreeMap<Timestamp, Slot>,
    /// Timestamps reclaimed early by reference count: they may not be put again.
    retired: BTreeSet<Timestamp>,
    conns: Vec<InConn>,
    /// Bits not owned by any input connection.
    free_bits: u64,
    /// Everything below has been reclaimed.
    floor: Timestamp,
    closed: bool,
    /// Items consumed since the last pass looked at this channel. A put blocked here runs
    /// its own pass once a batch of them may be reclaimable, not after every consume.
    consumed_since_pass: usize,
    /// Puts blocked here, from their announcement until they return (see `put`).
    announced: usize,
    /// When a pass last looked at this channel.
    last_pass: Instant,
    /// The inbox's buffer from the previous merge, kept for its capacity.
    spare: Vec<(Timestamp, Item)>,
    put_waiters: usize,
    hooks: Hooks,
    stats: ChannelStats,
}

impl State {
    fn conn(&self, id: ConnId) -> Result<usize, ()> {
        self.conns.iter().position(|c| c.id == id).ok_or(())
    }

    fn visible<'a>(&'a self, c: &'a InConn) -> impl DoubleEndedIterator<Item = Timestamp> + 'a {
        let bit = c.bit;
        self.items
            .range(c.consumed_below..)
            .filter(move |(_, s)| s.consumed & bit == 0)
            .map(|(ts, _)| *ts)
    }

    fn visible_from<'a>(
        &'a self,
        c: &'a InConn,
        from: Timestamp,
    ) -> impl Iterator<Item = Timestamp> + 'a {
        let bit = c.bit;
        self.items
            .range(from.max(c.consumed_below)..)
            .filter(move |(_, s)| s.consumed & bit == 0)
            .map(|(ts, _)| *ts)
    }

    fn neighbors(&self, c: &InConn, at: Timestamp) -> Neighbors {
        Neighbors {
            below: self.visible(c).rev().find(|&t| t < at),
            above: self.visible(c).find(|&t| t > at),
        }
    }

    /// The consumed bits an item arriving at `ts` starts with.
    fn arriving(&mut self, ts: Timestamp) -> u64 {
        let mut bits = 0;
        for c in &mut self.conns {
            if ts < c.consumed_below || (!c.absent.is_empty() && c.absent.remove(&ts)) {
                bits |= c.bit;
            }
        }
        bits
    }

    /// Closes `ts` if it is open on connection `ci`.
    fn close_open(&mut self, ci: usize, ts: Timestamp, zone: ZoneId) {
        let c = &mut self.conns[ci];
        if let Some(i) = c.open.iter().position(|&t| t == ts) {
            c.open.swap_remove(i);
            c.task.remove_open(zone, ts);
            if let Some(s) = self.items.get_mut(&ts) {
                s.open &= !c.bit;
            }
        }
    }

    /// `consume(ts)` on connection `ci`: closes the item if open, marks it consumed, and
    /// returns it if that reclaims it by its count. One lookup on the common path.
    fn consume_one(&mut self, ci: usize, ts: Timestamp, zone: ZoneId) -> Option<(Timestamp, Item)> {
        let c = &mut self.conns[ci];
        if let Some(i) = c.open.iter().position(|&t| t == ts) {
            c.open.swap_remove(i);
            c.task.remove_open(zone, ts);
        }
        if ts < c.consumed_below {
            return None;
        }
        let Some(s) = self.items.get_mut(&ts) else {
            c.absent.insert(ts);
            return None;
        };
        s.open &= !c.bit;
        if s.consumed & c.bit == 0 {
            s.consumed |= c.bit;
            s.consumed_by += 1;
        }
        if s.refcount.is_some() {
            self.retire_if_counted(ts)
        } else {
            None
        }
    }

    /// On a closed channel: reclaims every item consumed on some connection that no
    /// present connection can still read. Nothing can be put any more, so such an item is
    /// garbage for everyone but a task that attaches later, and the floor a zone keeps for
    /// late joiners would otherwise keep it forever once every task has exited. Items no
    /// connection ever consumed stay for those late joiners.
    fn release_consumed(&mut self) -> Vec<(Timestamp, Item)> {
        self.release_consumed_in(Timestamp::MIN, INFINITY)
    }

    /// [`release_consumed`](Self::release_consumed) for the items in `from..below` only: a
    /// consume changes nothing elsewhere, so draining a closed channel stays linear.
    fn release_consumed_in(&mut self, from: Timestamp, below: Timestamp) -> Vec<(Timestamp, Item)> {
        if !self.closed || from >= below {
            return Vec::new();
        }
        let conns = &self.conns;
        let done: Vec<Timestamp> = self
            .items
            .range(from..below)
            .filter(|(&ts, s)| {
                s.consumed_by > 0 && s.open == 0 && conns.iter().all(|c| c.is_consumed(ts, Some(s)))
            })
            .map(|(&ts, _)| ts)
            .collect();
        let mut dead = Vec::with_capacity(done.len());
        for ts in done {
            let slot = self.items.remove(&ts).expect("present");
            self.retired.insert(ts);
            dead.push((ts, slot.item));
        }
        self.stats.reclaimed += dead.len() as u64;
        dead
    }

    /// Reclaims the item at `ts` if its reference count is reached and no connection still
    /// has it open: an open item holds its getter's visibility, so it must keep holding the
    /// watermark until it is consumed.
    fn retire_if_counted(&mut self, ts: Timestamp) -> Option<(Timestamp, Item)> {
        let slot = self.items.get(&ts)?;
        if !slot.refcount.is_some_and(|n| slot.consumed_by >= n) || slot.open != 0 {
            return None;
        }
        let slot = self.items.remove(&ts).expect("present");
        self.retired.insert(ts);
        self.stats.reclaimed += 1;
        Some((ts, slot.item))
    }
}

impl State {
    /// Gets the item at `ts`, which `sel` selected on connection `ci`: opens it there and
    /// counts what a `NewestUnseen` passed over.
    fn take(&mut self, ci: usize, sel: Selector, ts: Timestamp, zone: ZoneId) -> Item {
        let State { items, conns, .. } = self;
        let c = &mut conns[ci];
        let mut skipped = 0;
        if sel == Selector::NewestUnseen {
            // Each unseen item passed over counts once per connection.
            let bit = c.bit;
            for (_, s) in items.range_mut(c.consumed_below..ts) {
                if (s.consumed | s.open | s.passed) & bit == 0 {
                    s.passed |= bit;
                    skipped += 1;
                }
            }
        }
        let slot = items.get_mut(&ts).expect("selected from the items");
        let item = slot.item.clone();
        c.last_get = Some(ts);
        if slot.open & c.bit == 0 {
            slot.open |= c.bit;
            c.open.push(ts);
            c.task.add_open(zone, ts);
        }
        self.stats.gets += 1;
        self.stats.skipped += skipped;
        item
    }
}

/// Where puts land without taking the state lock.
///
/// A put whose timestamp is above every timestamp ever put cannot be a duplicate, so when it
/// needs nothing else from the state (no reference count, no subscribers, space left) it only
/// appends here. Every holder of the state lock first merges the inbox (see
/// `ChannelCore::lock`), so the state is always complete for them. Lock order: state, inbox.
struct Inbox {
    pending: Vec<(Timestamp, Item)>,
    /// Items stored plus pending: what the capacity bounds.
    count: usize,
    /// The newest timestamp ever put.
    newest: Timestamp,
    closed: bool,
    /// Puts must take the state lock (arrival subscribers need calling).
    slow: bool,
}

#[allow(unreachable_pub, missing_debug_implementations)] // named only by the sealed `Container` trait
pub struct ChannelCore {
    pub(crate) id: ContainerId,
    pub(crate) name: Option<String>,
    capacity: Option<usize>,
    pub(crate) zone: Arc<Zone>,
    // The consumer side works on `state`, the producer side on `inbox`: separate cache lines.
    state: CachePadded<Mutex<State>>,
    inbox: CachePadded<Mutex<Inbox>>,
    /// Whether the inbox may hold items: lets a merge skip the inbox lock.
    pending: AtomicBool,
    /// Gets parked on `getters`; changed only under both locks, so a reader holding either
    /// lock sees every parked getter.
    get_waiters: AtomicUsize,
    getters: Condvar,
    putters: Condvar,
}

/// A put blocked on a full channel runs a pass at least this often.
const PUT_RECHECK: std::time::Duration = std::time::Duration::from_millis(2);

impl ChannelCore {
    pub(crate) fn new(
        id: ContainerId,
        name: Option<String>,
        capacity: Option<usize>,
        zone: Arc<Zone>,
    ) -> Self {
        ChannelCore {
            id,
            name,
            capacity,
            zone,
            state: CachePadded::new(Mutex::new(State {
                items: BTreeMap::new(),
                retired: BTreeSet::new(),
                conns: Vec::new(),
                free_bits: u64::MAX,
                floor: Timestamp::MIN,
                closed: false,
                consumed_since_pass: 0,
                announced: 0,
                last_pass: Instant::now(),
                spare: Vec::new(),
                put_waiters: 0,
                hooks: Hooks::default(),
                stats: ChannelStats::default(),
            })),
            inbox: CachePadded::new(Mutex::new(Inbox {
                pending: Vec::new(),
                count: 0,
                newest: Timestamp::MIN,
                closed: false,
                slow: false,
            })),
            pending: AtomicBool::new(false),
            get_waiters: AtomicUsize::new(0),
            getters: Condvar::new(),
            putters: Condvar::new(),
        }
    }

    /// The state, with the inbox merged into it.
    fn lock(&self) -> MutexGuard<'_, State> {
        let mut st = lock(&self.state);
        self.merge(&mut st);
        st
    }

    fn merge(&self, st: &mut State) {
        // A put racing with this check is simply ordered after the caller's operation.
        if !self.pending.load(Ordering::SeqCst) {
            return;
        }
        let mut ib = lock(&self.inbox);
        self.absorb(st, &mut ib);
    }

    /// Moves the inbox into the state; both locks held.
    fn absorb(&self, st: &mut State, ib: &mut Inbox) {
        self.pending.store(false, Ordering::SeqCst);
        if ib.pending.is_empty() {
            return;
        }
        let mut batch = std::mem::replace(&mut ib.pending, std::mem::take(&mut st.spare));
        st.stats.puts += batch.len() as u64;
        for (ts, item) in batch.drain(..) {
            let consumed = st.arriving(ts);
            st.items.insert(ts, Slot::new(item, None, consumed));
        }
        st.spare = batch;
    }

    /// How many consumes wake a put blocked on this channel to run a pass: one pass per
    /// batch instead of one per item.
    fn wake_batch(&self) -> usize {
        if cfg!(loom) {
            1
        } else {
            self.capacity.map_or(1, |c| (c / 2).max(1))
        }
    }

    /// Accounts for items that left the channel.
    fn uncount(&self, n: usize) {
        if n > 0 {
            lock(&self.inbox).count -= n;
        }
    }

    /// Accounts for items reclaimed by their reference counts and runs the handler on them.
    fn run_garbage(&self, handler: Option<GarbageHandler>, dead: &[(Timestamp, Item)]) {
        if dead.is_empty() {
            return;
        }
        self.zone
            .reclaimed
            .fetch_add(dead.len() as u64, Ordering::Relaxed);
        if let Some(h) = handler {
            for (ts, item) in dead {
                h(*ts, item);
            }
        }
    }

    pub(crate) fn attach_input(&self, task: &Arc<TaskInner>, id: ConnId) -> Result<(), StmError> {
        let cut = self.zone.shared();
        if !task.is_alive() {
            return Err(StmError::TaskExited);
        }
        // Rule 3 compares timestamps with the task's visibility, which is only meaningful in
        // the task's own zone; from another zone the connection starts at the floor.
        let vis = if task.zone.id == self.zone.id {
            task.visibility()
        } else {
            self.zone.floor()
        };
        let mut st = self.lock();
        if st.free_bits == 0 {
            return Err(StmError::TooManyConnections(MAX_INPUTS));
        }
        let bit = st.free_bits & st.free_bits.wrapping_neg();
        st.free_bits &= !bit;
        // Not a consume for reference counts: this connection could never have read them.
        for (_, slot) in st.items.range_mut(..vis) {
            slot.consumed |= bit;
        }
        st.conns.push(InConn {
            id,
            bit,
            task: task.clone(),
            consumed_below: Timestamp::MIN,
            absent: BTreeSet::new(),
            open: Vec::new(),
            last_get: None,
        });
        drop(st);
        drop(cut);
        Ok(())
    }

    pub(crate) fn put(
        self: &Arc<Self>,
        task: &TaskInner,
        ts: Timestamp,
        item: Item,
        refcount: Option<u32>,
        wait_mode: Wait,
        interrupt: Option<&dyn Fn() -> bool>,
    ) -> Result<(), PutError> {
        if ts == INFINITY {
            return Err(PutError::new(PutErrorKind::InvalidTimestamp, ts, item));
        }
        if refcount == Some(0) {
            return Err(PutError::new(PutErrorKind::ZeroConsumers, ts, item));
        }
        let (may_wait, deadline) = wait_mode.deadline();
        let mut blocked = false;
        let mut collected = false;
        // Taken when stored; still here when the put fails, to be handed back.
        let mut item = Some(item);
        let mut poll = InterruptPoll::new(interrupt);
        let result = loop {
            // Asked with no lock held, while the put stays announced: it keeps its hold on
            // the watermark and its place among the waiting puts until it gives up.
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
            if refcount.is_none() && !blocked {
                let mut ib = lock(&self.inbox);
                if !ib.slow
                    && !ib.closed
                    && ts > ib.newest
                    && self.capacity.map_or(true, |cap| ib.count < cap)
                {
                    ib.newest = ts;
                    ib.count += 1;
                    let Some(it) = item.take() else {
                        unreachable!("the item is only taken on success")
                    };
                    ib.pending.push((ts, it));
                    // Usually still set: the consumer merges only when it runs out of items.
                    if !self.pending.load(Ordering::Relaxed) {
                        self.pending.store(true, Ordering::SeqCst);
                    }
                    let wake = self.get_waiters.load(Ordering::Relaxed) > 0;
                    drop(ib);
                    drop(cut);
                    if wake {
                        // Taking the state lock orders this after a getter's last look at
                        // the inbox: it is either parked (and woken here) or will see it.
                        let _st = lock(&self.state);
                        self.getters.notify_all();
                    }
                    break Ok(());
                }
            }
            let mut st = lock(&self.state);
            let mut ib = lock(&self.inbox);
            // Merge under both locks: an item still in the inbox must never be older than
            // one stored here, or gets that answer from stored items would pass it over.
            self.absorb(&mut st, &mut ib);
            if ib.closed {
                break Err(PutErrorKind::Closed);
            }
            if ts < st.floor {
                break Err(PutErrorKind::BelowVisibility {
                    visibility: st.floor,
                });
            }
            if st.items.contains_key(&ts) || st.retired.contains(&ts) {
                break Err(PutErrorKind::DuplicateTimestamp);
            }
            if self.capacity.is_some_and(|cap| ib.count >= cap) {
                drop(ib);
                if may_wait && !blocked {
                    // Announce the waiting put before looking for space, so that raised terms
                    // elsewhere run passes (see `Zone::nudge`) and `ts` holds the watermark.
                    blocked = true;
                    st.announced += 1;
                    let me: Arc<dyn Detach> = self.clone();
                    task.add_pending(ts, self.id, Arc::downgrade(&me));
                    self.zone.blocked_putters.fetch_add(1, Ordering::SeqCst);
                }
                // A pass is worth it once a batch of consumes may have made garbage, or when
                // no pass looked at this channel lately (a raise may have made garbage with
                // nobody waiting). Passing on every full put instead would reclaim a few items
                // per pass. A put that cannot wait gets one pass regardless.
                let batch_due = st.consumed_since_pass >= self.wake_batch();
                let stale = cfg!(loom) || st.last_pass.elapsed() >= PUT_RECHECK;
                if batch_due || (!collected && (stale || !may_wait)) {
                    collected = true;
                    drop(st);
                    drop(cut);
                    self.zone.collect();
                    continue;
                }
                let expired = deadline.is_some_and(|d| Instant::now() >= d);
                if !may_wait || expired {
                    st.stats.full += 1;
                    break Err(PutErrorKind::Full);
                }
                // Re-checked under the lock: an exit that raced with the check above has
                // either finished its wake-up already or will find this put waiting.
                if !task.is_alive() {
                    break Err(PutErrorKind::Detached);
                }
                drop(cut);
                st.put_waiters += 1;
                // Local consumes wake this put once per batch, and a getter about to park
                // wakes it at once; a raise elsewhere runs its own pass. Look again after a
                // short while regardless, so a missed case costs latency, never progress.
                let recheck = Instant::now() + PUT_RECHECK;
                let until = if cfg!(loom) {
                    deadline
                } else {
                    Some(deadline.map_or(recheck, |d| d.min(recheck)))
                };
                let parked = Instant::now();
                let (mut st, _) = wait(&self.putters, st, poll.bound(until));
                task.add_blocked(parked);
                st.put_waiters -= 1;
                st.consumed_since_pass = st.consumed_since_pass.max(self.wake_batch());
                continue;
            }
            let consumed = st.arriving(ts);
            ib.newest = ib.newest.max(ts);
            let mut dead = None;
            if refcount.is_some_and(|n| consumed.count_ones() >= n) {
                st.retired.insert(ts);
                st.stats.reclaimed += 1;
                dead = item.take().map(|it| (ts, it));
            } else {
                ib.count += 1;
                st.items.insert(
                    ts,
                    Slot::new(item.take().expect("not yet stored"), refcount, consumed),
                );
            }
            st.stats.puts += 1;
            let wake = self.get_waiters.load(Ordering::Relaxed) > 0;
            drop(ib);
            let pending = st.hooks.subscribers.pending();
            let handler = st.hooks.garbage();
            drop(st);
            drop(cut);
            if wake {
                self.getters.notify_all();
            }
            if let Some(d) = dead {
                self.run_garbage(handler, &[d]);
            }
            if let Some(p) = pending {
                p.fire(ts);
            }
            break Ok(());
        };
        if blocked {
            lock(&self.state).announced -= 1;
            self.zone.blocked_putters.fetch_sub(1, Ordering::SeqCst);
            task.remove_pending(ts, self.id);
        }
        result.map_err(|k| PutError::new(k, ts, item.expect("a failed put keeps its item")))
    }

    pub(crate) fn get(
        &self,
        conn: ConnId,
        sel: Selector,
        wait_mode: Wait,
    ) -> Result<(Timestamp, Item), GetError> {
        let (may_wait, deadline) = wait_mode.deadline();
        let mut round = 0;
        // Items in the inbox are newer than every stored one, so `Exact`, `Oldest` and
        // `NextUnseen` need them only when the stored items do not answer; leaving them there
        // keeps the producer's cache lines out of the common path.
        let newest_first = matches!(sel, Selector::Newest | Selector::NewestUnseen);
        let mut st = lock(&self.state);
        let mut merged = false;
        loop {
            if newest_first && !merged {
                self.merge(&mut st);
                merged = true;
            }
            let ci = st.conn(conn).map_err(|()| GetError::Detached)?;
            let floor = st.floor.max(self.zone.floor());
            let c = &st.conns[ci];
            let found = match sel {
                Selector::Exact(t) => {
                    if t == INFINITY
                        || t < floor
                        || c.is_consumed(t, st.items.get(&t))
                        || st.retired.contains(&t)
                    {
                        return Err(GetError::Gone(t));
                    }
                    st.items.contains_key(&t).then_some(t)
                }
                Selector::Oldest => st.visible(c).next(),
                Selector::Newest => st.visible(c).next_back(),
                Selector::NewestUnseen => st.visible(c).rev().find(|t| !c.open.contains(t)),
                Selector::NextUnseen => match c.last_get {
                    Some(l) => st.visible_from(c, l.saturating_add(1)).next(),
                    None => st.visible(c).next(),
                },
            };
            if let Some(ts) = found {
                return Ok((ts, st.take(ci, sel, ts, self.zone.id)));
            }
            if !merged {
                self.merge(&mut st);
                merged = true;
                continue;
            }
            let at = match sel {
                Selector::Exact(t) => t,
                Selector::NextUnseen => c.last_get.unwrap_or(Timestamp::MIN),
                _ => INFINITY,
            };
            let nb = st.neighbors(c, at);
            if st.closed {
                return Err(GetError::Closed);
            }
            if !may_wait {
                return Err(GetError::Unavailable(nb));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(GetError::Timeout(nb));
            }
            if round < self.zone.spin_rounds {
                drop(st);
                spin(round, self.zone.spin_rounds);
                round += 1;
                st = lock(&self.state);
                merged = false;
                continue;
            }
            {
                let ib = lock(&self.inbox);
                if !ib.pending.is_empty() {
                    drop(ib);
                    self.merge(&mut st);
                    continue;
                }
                self.get_waiters.fetch_add(1, Ordering::Relaxed);
            }
            // A put blocked here waits for consumes to free space; this getter is about to
            // stop consuming, so let the put run its pass now.
            if st.put_waiters > 0 {
                st.consumed_since_pass = st.consumed_since_pass.max(self.wake_batch());
                self.putters.notify_all();
            }
            let parked = Instant::now();
            let (g, _) = wait(&self.getters, st, deadline);
            st = g;
            if let Some(c) = st.conns.iter().find(|c| c.id == conn) {
                c.task.add_blocked(parked);
            }
            {
                let _ib = lock(&self.inbox);
                self.get_waiters.fetch_sub(1, Ordering::Relaxed);
            }
            merged = false;
        }
    }

    /// Whether a get is parked; call with the state lock held.
    fn has_getters(&self) -> bool {
        self.get_waiters.load(Ordering::Relaxed) > 0
    }

    pub(crate) fn consume(&self, conn: ConnId, ts: Timestamp) -> Result<(), StmError> {
        self.consume_range(conn, ts, false)
    }

    pub(crate) fn consume_until(&self, conn: ConnId, ts: Timestamp) -> Result<(), StmError> {
        self.consume_range(conn, ts, true)
    }

    fn consume_range(&self, conn: ConnId, ts: Timestamp, until: bool) -> Result<(), StmError> {
        // No merge: an item still in the inbox that this consumes starts consumed when it
        // arrives (`State::arriving`), and inbox items carry no reference count.
        let mut st = lock(&self.state);
        let ci = st.conn(conn).map_err(|()| StmError::Detached)?;
        let mut dead = Vec::new();
        let mut newly = 1;
        // The timestamps this consume changed, where a closed channel may release items.
        let mut changed = (ts, ts.saturating_add(1));
        if until {
            let c = &st.conns[ci];
            let below = ts.saturating_add(1).max(c.consumed_below);
            let from = c.consumed_below;
            changed = (from, below);
            let closing: Vec<Timestamp> = c.open.iter().copied().filter(|&t| t < below).collect();
            for t in closing {
                st.close_open(ci, t, self.zone.id);
            }
            let bit = st.conns[ci].bit;
            let mut counted = Vec::new();
            for (&t, slot) in st.items.range_mut(from..below) {
                if slot.consumed & bit == 0 {
                    slot.consumed |= bit;
                    slot.consumed_by += 1;
                    counted.push(t);
                }
            }
            let c = &mut st.conns[ci];
            c.consumed_below = below;
            c.absent = c.absent.split_off(&below);
            newly = counted.len();
            for t in counted {
                dead.extend(st.retire_if_counted(t));
            }
        } else {
            dead.extend(st.consume_one(ci, ts, self.zone.id));
        }
        dead.extend(st.release_consumed_in(changed.0, changed.1));
        self.uncount(dead.len());
        // An `Exact` get parked on this connection may now be gone.
        let wake_getters = self.has_getters();
        // Puts blocked here run the pass themselves, woken once per batch of consumes.
        st.consumed_since_pass += newly;
        let wake_putters =
            st.put_waiters > 0 && (!dead.is_empty() || st.consumed_since_pass >= self.wake_batch());
        let local = st.announced;
        let handler = st.hooks.garbage();
        drop(st);
        // Waiters registered under the lock we held, so they are parked: notifying after
        // unlocking cannot be lost, and they do not wake into a held lock.
        if wake_getters {
            self.getters.notify_all();
        }
        if wake_putters {
            self.putters.notify_all();
        }
        self.run_garbage(handler, &dead);
        self.zone.nudge_beyond(local);
        Ok(())
    }

    /// Applies a get that selected `ts` with `sel` elsewhere (a reader of another address
    /// space answered it from the items it was sent): the same state changes as [`get`]
    /// would make. Fails with `Gone` if the item is not visible on `conn`.
    ///
    /// [`get`]: ChannelCore::get
    pub(crate) fn replay_get(
        &self,
        conn: ConnId,
        sel: Selector,
        ts: Timestamp,
    ) -> Result<(), GetError> {
        let mut st = self.lock();
        let ci = st.conn(conn).map_err(|()| GetError::Detached)?;
        let c = &st.conns[ci];
        if ts < st.floor.max(self.zone.floor()) || c.is_consumed(ts, st.items.get(&ts)) {
            return Err(GetError::Gone(ts));
        }
        if !st.items.contains_key(&ts) {
            return Err(GetError::Gone(ts));
        }
        st.take(ci, sel, ts, self.zone.id);
        Ok(())
    }

    /// The item stored at `ts` and whether it carries a reference count (it may then be
    /// reclaimed before every connection consumed it).
    pub(crate) fn stored(&self, ts: Timestamp) -> Option<(Item, bool)> {
        let st = self.lock();
        st.items
            .get(&ts)
            .map(|s| (s.item.clone(), s.refcount.is_some()))
    }

    /// Visible timestamps on `conn` above `after`, and whether the channel is closed.
    pub(crate) fn visible_after(
        &self,
        conn: ConnId,
        after: Option<Timestamp>,
    ) -> (Vec<Timestamp>, bool) {
        let st = self.lock();
        let Ok(ci) = st.conn(conn) else {
            return (Vec::new(), true);
        };
        let c = &st.conns[ci];
        let v = st
            .visible(c)
            .filter(|&t| after.map_or(true, |a| t > a))
            .collect();
        (v, st.closed)
    }

    pub(crate) fn close(&self) {
        let mut st = lock(&self.state);
        {
            // Merge and close under one hold of the inbox, so no put lands after the merge
            // and escapes the release below.
            let mut ib = lock(&self.inbox);
            self.absorb(&mut st, &mut ib);
            ib.closed = true;
        }
        st.closed = true;
        st.hooks.subscribers.close_all();
        let dead = st.release_consumed();
        self.uncount(dead.len());
        let handler = st.hooks.garbage();
        drop(st);
        self.getters.notify_all();
        self.putters.notify_all();
        self.run_garbage(handler, &dead);
    }
}

impl LocalContainer for ChannelCore {
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
        ChannelCore::attach_input(self, task, id)
    }
}

impl Hooked for ChannelCore {
    fn hooks<R>(&self, f: impl FnOnce(&mut Hooks, bool) -> R) -> R {
        let mut st = self.lock();
        let closed = st.closed;
        let r = f(&mut st.hooks, closed);
        // Puts take the slow path (that calls subscribers) only while there are some.
        lock(&self.inbox).slow = !st.hooks.subscribers.is_empty();
        r
    }
}

impl Detach for ChannelCore {
    fn wake_putters(&self) {
        let _st = self.lock();
        self.putters.notify_all();
    }

    fn detach(&self, conn: ConnId, _task: &TaskInner) {
        // Merge first: an inbox item this connection consumed ahead (`consume_until`) must
        // arrive counted as consumed, or closing the channel would not release it.
        let mut st = self.lock();
        let Ok(ci) = st.conn(conn) else { return };
        let c = st.conns.swap_remove(ci);
        st.free_bits |= c.bit;
        for slot in st.items.values_mut() {
            slot.consumed &= !c.bit;
            slot.open &= !c.bit;
            slot.passed &= !c.bit;
        }
        let mut dead = Vec::new();
        for &t in &c.open {
            c.task.remove_open(self.zone.id, t);
            dead.extend(st.retire_if_counted(t));
        }
        dead.extend(st.release_consumed());
        self.uncount(dead.len());
        // Getters of this connection must see it is gone; puts blocked here may have space.
        let wake_getters = self.has_getters();
        let wake_putters = !dead.is_empty() && st.put_waiters > 0;
        let handler = st.hooks.garbage();
        drop(st);
        if wake_getters {
            self.getters.notify_all();
        }
        if wake_putters {
            self.putters.notify_all();
        }
        self.run_garbage(handler, &dead);
        // A detach can raise the watermark anywhere, so a full pass, not a batch.
        self.zone.nudge();
    }
}

impl Collectable for ChannelCore {
    fn low_mark(&self, mut holds: Option<&mut Vec<Hold>>) -> Timestamp {
        let mut st = self.lock();
        if holds.is_none() {
            // A pass reads the terms now: consumes from here on are not in it, and count
            // towards the next one.
            st.consumed_since_pass = 0;
            st.last_pass = Instant::now();
        }
        let mut w = INFINITY;
        for c in &st.conns {
            if let Some(ts) = st.visible(c).next() {
                w = w.min(ts);
                if let Some(h) = holds.as_deref_mut() {
                    h.push(Hold {
                        ts,
                        cause: HoldCause::Unconsumed {
                            container: self.id,
                            container_name: self.name.clone(),
                            connection: c.id,
                            task: c.task.id,
                            task_name: c.task.name.clone(),
                        },
                    });
                }
            }
        }
        w
    }

    fn newest(&self) -> Timestamp {
        lock(&self.inbox).newest
    }

    fn reclaim_below(&self, w: Timestamp) -> usize {
        let mut st = self.lock();
        if w <= st.floor {
            return 0;
        }
        st.floor = w;
        let keep = st.items.split_off(&w);
        let dead = std::mem::replace(&mut st.items, keep);
        st.retired = st.retired.split_off(&w);
        for c in &mut st.conns {
            if c.absent.first().is_some_and(|&t| t < w) {
                c.absent = c.absent.split_off(&w);
            }
        }
        let n = dead.len();
        st.stats.reclaimed += n as u64;
        self.uncount(n);
        let wake_putters = n > 0 && st.put_waiters > 0;
        // `Exact` gets parked below the new floor are now gone.
        let wake_getters = self.has_getters();
        let handler = st.hooks.garbage();
        drop(st);
        if wake_putters {
            self.putters.notify_all();
        }
        if wake_getters {
            self.getters.notify_all();
        }
        if let Some(h) = handler {
            for (ts, slot) in &dead {
                h(*ts, &slot.item);
            }
        }
        n
    }
}

/// A channel: time-indexed items, at most one per timestamp, put in any order.
///
/// Handles are cheap to clone. Items are reclaimed when the zone's watermark passes them,
/// or, for items put with a reference count, once that many connections consumed them.
#[derive(Clone)]
pub struct Channel {
    pub(crate) flavor: Flavor<ChannelCore>,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.flavor.debug("Channel", f)
    }
}

impl Channel {
    /// The channel's state here, if it lives here.
    pub(crate) fn local(&self) -> Option<&Arc<ChannelCore>> {
        match &self.flavor {
            Flavor::Local(c) => Some(c),
            Flavor::Provided(_) => None,
        }
    }
    /// The registered name, if any.
    pub fn name(&self) -> Option<&str> {
        self.flavor.name()
    }
    /// The capacity, if bounded. A channel served by another address space (see
    /// [`Container::owner`](crate::Container::owner)) stores nothing here: the inspection
    /// methods below report no items and zero counters for it.
    pub fn capacity(&self) -> Option<usize> {
        match &self.flavor {
            Flavor::Local(c) => c.capacity,
            Flavor::Provided(b) => b.capacity(),
        }
    }
    /// Number of items stored now.
    pub fn len(&self) -> usize {
        self.local().map_or(0, |c| c.lock().items.len())
    }
    /// Whether the channel stores no item now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The item stored at `ts`, read without a connection (nothing is marked open or
    /// consumed): for tools and for forwarding items to other address spaces.
    pub fn peek(&self, ts: Timestamp) -> Option<Item> {
        self.local()?.lock().items.get(&ts).map(|s| s.item.clone())
    }
    /// Timestamps of the items stored now, ascending.
    pub fn timestamps(&self) -> Vec<Timestamp> {
        self.local()
            .map(|c| c.lock().items.keys().copied().collect())
            .unwrap_or_default()
    }
    /// Counters.
    pub fn stats(&self) -> ChannelStats {
        let Some(c) = self.local() else {
            return ChannelStats::default();
        };
        let st = c.lock();
        ChannelStats {
            items: st.items.len(),
            connections: st.conns.len(),
            open: st.conns.iter().map(|c| c.open.len()).sum(),
            ..st.stats
        }
    }

    /// Closes the channel: puts fail, gets return what is left and then `Closed`.
    ///
    /// Closing also releases consumed items: from now on an item that was consumed on some
    /// connection and that no present input connection can still read is reclaimed at once
    /// (its garbage handler runs), without waiting for the watermark. This is how the items
    /// of a finished run are freed when every task has exited, since a zone with no live
    /// task keeps its floor for tasks that join later. Items nobody consumed stay for a
    /// reader that attaches later.
    ///
    /// ```
    /// use stampede_core::{ContainerOptions, HoldCause, Runtime, ZoneId, INFINITY};
    /// let rt = Runtime::builder().gc_interval(None).build();
    /// let ch = rt.channel(ContainerOptions::default()).unwrap();
    /// {
    ///     let (p, c) = (rt.task(0).unwrap(), rt.task(INFINITY).unwrap());
    ///     let (out, input) = (p.attach_output(&ch).unwrap(), c.attach_input(&ch).unwrap());
    ///     for ts in 0..10 {
    ///         out.put(ts, "x").unwrap();
    ///     }
    ///     input.consume_until(9).unwrap();
    /// } // both tasks exit
    /// rt.collect();
    /// assert_eq!(ch.len(), 10); // kept: a task may still join at the zone's floor
    /// let report = rt.explain(ZoneId::DEFAULT);
    /// assert!(report.holders().any(|h| matches!(h.cause, HoldCause::NoLiveTask { .. })));
    /// ch.close().unwrap();
    /// assert!(ch.is_empty()); // every item was consumed: released
    /// ```
    ///
    /// A channel served by another address space is closed there; that fails only when its
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

    /// Whether the channel was closed (here; `false` for a channel served elsewhere, whose
    /// connections report `Closed` instead).
    pub fn is_closed(&self) -> bool {
        self.local().is_some_and(|c| c.lock().closed)
    }

    /// Installs the garbage handler, run once for every reclaimed item (outside any lock).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use stampede_core::{ContainerOptions, Runtime, INFINITY};
    /// let rt = Runtime::builder().gc_interval(None).build();
    /// let ch = rt.channel(ContainerOptions::default()).unwrap();
    /// let freed = Arc::new(Mutex::new(Vec::new()));
    /// let f = freed.clone();
    /// ch.on_garbage(move |ts, _item| f.lock().unwrap().push(ts)).unwrap();
    /// let t = rt.task(0).unwrap();
    /// let out = t.attach_output(&ch).unwrap();
    /// out.put(0, "a").unwrap();
    /// out.put(1, "b").unwrap();
    /// t.set_virtual_time(1).unwrap();
    /// rt.collect();
    /// assert_eq!(*freed.lock().unwrap(), vec![0]); // 1 is still reachable: vt is 1
    /// ```
    ///
    /// On a channel served by another address space, its owner forwards every reclaimed item
    /// to this space, where the handler runs on the event thread, in order.
    pub fn on_garbage(
        &self,
        handler: impl Fn(Timestamp, &Item) + Send + Sync + 'static,
    ) -> Result<(), StmError> {
        self.flavor.on_garbage(Arc::new(handler))
    }

    /// Calls `f` with the timestamp of every item put from now on, on the putting thread (on
    /// a channel served by another address space, on this space's event thread, in order).
    pub fn on_arrival(
        &self,
        f: impl Fn(Timestamp) + Send + Sync + 'static,
    ) -> Result<SubscriptionId, StmError> {
        self.flavor.on_arrival(Arc::new(f))
    }

    /// An async stream of the timestamps of items put from now on, buffering up to
    /// `capacity` notifications.
    ///
    /// ```
    /// use futures::StreamExt;
    /// use stampede_core::{ContainerOptions, Runtime};
    /// let rt = Runtime::new();
    /// let ch = rt.channel(ContainerOptions::default()).unwrap();
    /// let mut arrivals = ch.arrivals(16).unwrap();
    /// let t = rt.task(0).unwrap();
    /// let out = t.attach_output(&ch).unwrap();
    /// out.put(7, "x").unwrap();
    /// assert_eq!(futures::executor::block_on(arrivals.next()), Some(7));
    /// ```
    pub fn arrivals(&self, capacity: usize) -> Result<Arrivals, StmError> {
        self.flavor.arrivals(capacity)
    }

    /// Cancels a subscription; returns whether it existed.
    pub fn unsubscribe(&self, id: SubscriptionId) -> bool {
        self.flavor.unsubscribe(id)
    }
}
