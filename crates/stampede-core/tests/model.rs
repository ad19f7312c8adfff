//! State-machine property test of Space-Time Memory.
//!
//! Random sequences of operations run against the real runtime and against `Model`, a
//! small sequential reference model of design §2 (`docs/design.md`) written below, and every result is
//! compared. Where §2 leaves a choice open the model follows the rule the implementation
//! documents:
//!
//! * the watermark is exactly the `gc` module's: the minimum of every live task's virtual
//!   time, every unconsumed queue item and, per channel input connection, the oldest item
//!   present and not consumed on it, capped by the *horizon* (one above the newest timestamp
//!   ever put) and never below the floor; the applied floor only rises, a zone without live
//!   tasks keeps its floor, and `Runtime::collect` applies it;
//! * a root task starts at or above the zone's floor, a child at or above
//!   `max(parent visibility, floor)`;
//! * rule 3 marks the items *present* below the task's visibility consumed on the new
//!   connection, and such a mark does not count as a consume for reference counts;
//! * `get(Exact(t))` is `Gone` when `t` is below the applied floor, consumed on this
//!   connection or reclaimed by its reference count, else `Unavailable` with the nearest
//!   timestamps visible to the connection below and above the request;
//! * a timestamp reclaimed by its reference count may not be put again, and a channel put
//!   below the floor fails with `BelowVisibility { visibility: floor }`;
//! * a queue delivers in FIFO (ticket) order; the held items of a connection that goes away
//!   (detached, or its task exited: connections in the order they were attached) go back to
//!   the front of the queue in their original order.
//!
//! After every transition the stored timestamps of each channel, the queue's waiting and
//! held counts, the floor and watermark reported by `Runtime::explain`, every task's virtual
//! time and visibility, and the gc module's invariant "every task's visibility is at least
//! the watermark" are checked. A `collect` must return the model's floor, leave nothing
//! below it, and reclaim no item that some task could still reach by the rules (judged
//! from visibilities and connections, not from the watermark).
//!
//! Only non-blocking operations are used, and the runtime has no background collector, so
//! each run is a deterministic single-threaded sequence. The number of cases is 1024 unless
//! `PROPTEST_CASES` says otherwise. Minimal reproductions of what the model found are at
//! the end of the file.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;
use proptest::test_runner::Config;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use stampede_core::{
    Channel, ContainerOptions, GetError, InputConnection, Neighbors, OutputConnection,
    PutErrorKind, PutOptions, Queue, Runtime, Selector, StmError, Task, Timestamp, Wait, ZoneId,
    INFINITY,
};

/// Task slots.
const SLOTS: usize = 4;
/// Most connections held at once (live or dead).
const MAX_CONNS: usize = 10;
/// Channel 0 is bounded, channel 1 unbounded.
const CH_CAP: [Option<usize>; 2] = [Some(3), None];
/// The queue's capacity (of waiting items).
const Q_CAP: usize = 3;

// ---------------------------------------------------------------------------------------
// Transitions and their observable outcomes
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cont {
    Ch(usize),
    Queue,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    In,
    Out,
}

#[derive(Clone, Debug)]
enum Tr {
    CreateRoot {
        slot: usize,
        vt: Timestamp,
    },
    CreateChild {
        slot: usize,
        parent: usize,
        vt: Timestamp,
    },
    SetVt {
        slot: usize,
        vt: Timestamp,
    },
    Attach {
        slot: usize,
        cont: Cont,
        dir: Dir,
    },
    /// Drops the connection at this index.
    Detach {
        conn: usize,
    },
    Exit {
        slot: usize,
    },
    Put {
        conn: usize,
        ts: Timestamp,
        consumers: Option<u32>,
    },
    Get {
        conn: usize,
        sel: Selector,
    },
    Consume {
        conn: usize,
        ts: Timestamp,
    },
    ConsumeUntil {
        conn: usize,
        ts: Timestamp,
    },
    QPut {
        conn: usize,
        ts: Timestamp,
    },
    QGet {
        conn: usize,
    },
    QConsume {
        conn: usize,
        ticket: u64,
    },
    Collect,
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Nothing,
    Stm(Result<(), StmError>),
    Put(Result<(), PutErrorKind>),
    QPut(Result<u64, PutErrorKind>),
    Get(Result<Timestamp, GetError>),
    QGet(Result<(Timestamp, u64), GetError>),
    Collect(Timestamp),
}

// ---------------------------------------------------------------------------------------
// The reference model
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct TaskM {
    uid: u64,
    vt: Timestamp,
}

/// Per-connection item states of a channel input connection.
#[derive(Clone, Debug, Default)]
struct InM {
    /// Everything at or below this is consumed, including items that arrive later.
    until: Option<Timestamp>,
    /// Individually consumed timestamps.
    consumed: BTreeSet<Timestamp>,
    /// Gotten and not consumed.
    open: BTreeSet<Timestamp>,
    /// Ever gotten on this connection.
    seen: BTreeSet<Timestamp>,
    last_get: Option<Timestamp>,
}

impl InM {
    fn is_consumed(&self, ts: Timestamp) -> bool {
        self.until.is_some_and(|u| ts <= u) || self.consumed.contains(&ts)
    }
}

#[derive(Clone, Debug)]
struct ConnM {
    uid: u64,
    task: u64,
    cont: Cont,
    dir: Dir,
    input: InM,
}

#[derive(Clone, Debug)]
struct ItemM {
    refcount: Option<u32>,
    consumed_by: u32,
}

#[derive(Clone, Debug, Default)]
struct ChanM {
    items: BTreeMap<Timestamp, ItemM>,
    /// Timestamps reclaimed by reference count.
    retired: BTreeSet<Timestamp>,
}

#[derive(Clone, Debug)]
struct QueueM {
    /// (ticket, ts) in delivery order.
    waiting: Vec<(u64, Timestamp)>,
    /// ticket -> (connection uid, task uid, ts).
    held: BTreeMap<u64, (u64, u64, Timestamp)>,
    next_ticket: u64,
}

#[derive(Clone)]
struct Model {
    tasks: [Option<TaskM>; SLOTS],
    next_uid: u64,
    /// Connections in the order the test holds them, including those of exited tasks.
    conns: Vec<ConnM>,
    chans: [ChanM; 2],
    queue: QueueM,
    /// The applied watermark of the default zone.
    floor: Timestamp,
    /// The newest timestamp ever put into a container of the zone.
    newest: Timestamp,
    /// What the last transition must return.
    last: Outcome,
    /// For `Collect`: per channel, the items that were reachable before the pass.
    reachable: Option<[BTreeSet<Timestamp>; 2]>,
    /// The transitions that built the initial state.
    setup: Vec<Tr>,
}

/// A failing case is reported as its setup; the transitions follow it.
impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("setup", &self.setup)
            .finish_non_exhaustive()
    }
}

fn payload(c: usize, ts: Timestamp) -> String {
    format!("c{c}@{ts}")
}

impl Model {
    fn new() -> Self {
        Model {
            tasks: Default::default(),
            next_uid: 1,
            conns: Vec::new(),
            chans: Default::default(),
            queue: QueueM {
                waiting: Vec::new(),
                held: BTreeMap::new(),
                next_ticket: 1,
            },
            floor: Timestamp::MIN,
            newest: Timestamp::MIN,
            last: Outcome::Nothing,
            reachable: None,
            setup: Vec::new(),
        }
    }

    fn uid(&mut self) -> u64 {
        self.next_uid += 1;
        self.next_uid
    }

    fn alive(&self, task: u64) -> bool {
        self.tasks.iter().flatten().any(|t| t.uid == task)
    }

    fn live_tasks(&self) -> impl Iterator<Item = &TaskM> {
        self.tasks.iter().flatten()
    }

    /// Input connections attached to channel `c` now (their task is alive).
    fn live_inputs(&self, c: usize) -> impl Iterator<Item = &ConnM> {
        self.conns
            .iter()
            .filter(move |k| k.cont == Cont::Ch(c) && k.dir == Dir::In && self.alive(k.task))
    }

    /// min(VT, items open on its channel inputs, queue items it holds).
    fn visibility(&self, task: u64) -> Timestamp {
        let vt = self
            .live_tasks()
            .find(|t| t.uid == task)
            .expect("live task")
            .vt;
        let open = self
            .conns
            .iter()
            .filter(|k| k.task == task && k.dir == Dir::In)
            .filter_map(|k| k.input.open.first().copied())
            .min()
            .unwrap_or(INFINITY);
        let held = self
            .queue
            .held
            .values()
            .filter(|h| h.1 == task)
            .map(|h| h.2)
            .min()
            .unwrap_or(INFINITY);
        vt.min(open).min(held)
    }

    /// Items of channel `c` visible on a connection: present and not consumed on it.
    fn visible(&self, c: usize, k: &InM) -> Vec<Timestamp> {
        self.chans[c]
            .items
            .keys()
            .copied()
            .filter(|&t| !k.is_consumed(t))
            .collect()
    }

    /// The watermark as the gc module defines it: never below the floor, never above the
    /// horizon (one above the newest timestamp ever put), unchanged without live tasks.
    fn watermark(&self) -> Timestamp {
        if self.live_tasks().next().is_none() {
            return self.floor;
        }
        let mut w = self.newest.saturating_add(1);
        for t in self.live_tasks() {
            w = w.min(t.vt);
        }
        for &(_, ts) in &self.queue.waiting {
            w = w.min(ts);
        }
        for h in self.queue.held.values() {
            w = w.min(h.2);
        }
        for c in 0..2 {
            for k in self.live_inputs(c) {
                if let Some(&ts) = self.visible(c, &k.input).first() {
                    w = w.min(ts);
                }
            }
        }
        w.max(self.floor)
    }

    /// Which channel items some task could still get, derived from the rules rather than
    /// from the watermark: an item unconsumed on a live connection; an item at or above
    /// a live task's visibility (the task could attach a new input and get it); an item
    /// at or above an unconsumed queue item (its getter's visibility drops to it). With
    /// no live task, everything stored (a task created later starts at the floor).
    fn reachable_items(&self) -> [BTreeSet<Timestamp>; 2] {
        let mut out: [BTreeSet<Timestamp>; 2] = Default::default();
        let any_task = self.live_tasks().next().is_some();
        let mut bound = INFINITY;
        for t in self.live_tasks() {
            bound = bound.min(self.visibility(t.uid));
        }
        for &(_, ts) in &self.queue.waiting {
            bound = bound.min(ts);
        }
        for h in self.queue.held.values() {
            bound = bound.min(h.2);
        }
        for (c, set) in out.iter_mut().enumerate() {
            for &ts in self.chans[c].items.keys() {
                let unconsumed = self.live_inputs(c).any(|k| !k.input.is_consumed(ts));
                if !any_task || ts >= bound || unconsumed {
                    set.insert(ts);
                }
            }
        }
        out
    }

    /// One more connection consumed `ts` in channel `c`.
    fn count_consume(&mut self, c: usize, ts: Timestamp) {
        if let Some(it) = self.chans[c].items.get_mut(&ts) {
            it.consumed_by += 1;
        }
        self.retire_if_counted(c, ts);
    }

    /// Reclaims a counted item once enough connections consumed it and none has it open.
    fn retire_if_counted(&mut self, c: usize, ts: Timestamp) {
        let Some(it) = self.chans[c].items.get(&ts) else {
            return;
        };
        let open = self.live_inputs(c).any(|k| k.input.open.contains(&ts));
        if it.refcount.is_some_and(|n| it.consumed_by >= n) && !open {
            self.chans[c].items.remove(&ts);
            self.chans[c].retired.insert(ts);
        }
    }

    /// After connections went away: items they had open may now be reclaimable.
    fn retire_opened_by(&mut self, gone: Vec<(usize, Vec<Timestamp>)>) {
        for (c, open) in gone {
            for ts in open {
                self.retire_if_counted(c, ts);
            }
        }
    }

    /// Puts the queue items held on connection `conn` back among the waiting items, in
    /// ticket order.
    fn redeliver(&mut self, conn: u64) {
        let back: Vec<(u64, Timestamp)> = self
            .queue
            .held
            .iter()
            .filter(|(_, h)| h.0 == conn)
            .map(|(t, h)| (*t, h.2))
            .collect();
        for (t, _) in &back {
            self.queue.held.remove(t);
        }
        self.queue.waiting.extend(back);
        self.queue.waiting.sort_by_key(|w| w.0);
    }

    fn slot_uid(&self, slot: usize) -> u64 {
        self.tasks[slot].as_ref().expect("occupied slot").uid
    }

    fn create(&mut self, slot: usize, vt: Timestamp, min: Timestamp) -> Outcome {
        if vt < min {
            return Outcome::Stm(Err(StmError::BelowVisibility {
                requested: vt,
                visibility: min,
            }));
        }
        let uid = self.uid();
        self.tasks[slot] = Some(TaskM { uid, vt });
        Outcome::Stm(Ok(()))
    }

    fn step(&mut self, tr: &Tr) -> Outcome {
        match *tr {
            Tr::CreateRoot { slot, vt } => self.create(slot, vt, self.floor),
            Tr::CreateChild { slot, parent, vt } => {
                let min = self.visibility(self.slot_uid(parent)).max(self.floor);
                self.create(slot, vt, min)
            }
            Tr::SetVt { slot, vt } => {
                let uid = self.slot_uid(slot);
                let vis = self.visibility(uid);
                if vt < vis {
                    return Outcome::Stm(Err(StmError::BelowVisibility {
                        requested: vt,
                        visibility: vis,
                    }));
                }
                self.tasks[slot].as_mut().expect("occupied").vt = vt;
                Outcome::Stm(Ok(()))
            }
            Tr::Attach { slot, cont, dir } => {
                let task = self.slot_uid(slot);
                let mut input = InM::default();
                if let (Cont::Ch(c), Dir::In) = (cont, dir) {
                    // Rule 3: items present below visibility start consumed (not counted).
                    let vis = self.visibility(task);
                    for &ts in self.chans[c].items.range(..vis).map(|(t, _)| t) {
                        input.consumed.insert(ts);
                    }
                }
                let uid = self.uid();
                self.conns.push(ConnM {
                    uid,
                    task,
                    cont,
                    dir,
                    input,
                });
                Outcome::Stm(Ok(()))
            }
            Tr::Detach { conn } => {
                let k = self.conns.remove(conn);
                if k.cont == Cont::Queue && k.dir == Dir::In && self.alive(k.task) {
                    self.redeliver(k.uid);
                }
                if let (Cont::Ch(c), Dir::In, true) = (k.cont, k.dir, self.alive(k.task)) {
                    self.retire_opened_by(vec![(c, k.input.open.iter().copied().collect())]);
                }
                Outcome::Nothing
            }
            Tr::Exit { slot } => {
                let uid = self.slot_uid(slot);
                self.tasks[slot] = None;
                let gone = self
                    .conns
                    .iter()
                    .filter(|k| k.task == uid && k.dir == Dir::In)
                    .filter_map(|k| match k.cont {
                        Cont::Ch(c) => Some((c, k.input.open.iter().copied().collect())),
                        Cont::Queue => None,
                    })
                    .collect();
                self.retire_opened_by(gone);
                let queue_inputs: Vec<u64> = self
                    .conns
                    .iter()
                    .filter(|k| k.task == uid && k.cont == Cont::Queue && k.dir == Dir::In)
                    .map(|k| k.uid)
                    .collect();
                for k in queue_inputs {
                    self.redeliver(k);
                }
                Outcome::Nothing
            }
            Tr::Put {
                conn,
                ts,
                consumers,
            } => Outcome::Put(self.put(conn, ts, consumers)),
            Tr::Get { conn, sel } => Outcome::Get(self.get(conn, sel)),
            Tr::Consume { conn, ts } => {
                let k = &self.conns[conn];
                let Cont::Ch(c) = k.cont else { unreachable!() };
                if !self.alive(k.task) {
                    return Outcome::Stm(Err(StmError::Detached));
                }
                let k = &mut self.conns[conn].input;
                k.open.remove(&ts);
                if !k.is_consumed(ts) {
                    k.consumed.insert(ts);
                    self.count_consume(c, ts);
                }
                Outcome::Stm(Ok(()))
            }
            Tr::ConsumeUntil { conn, ts } => {
                let k = &self.conns[conn];
                let Cont::Ch(c) = k.cont else { unreachable!() };
                if !self.alive(k.task) {
                    return Outcome::Stm(Err(StmError::Detached));
                }
                let newly: Vec<Timestamp> = self.chans[c]
                    .items
                    .range(..=ts)
                    .map(|(t, _)| *t)
                    .filter(|&t| !k.input.is_consumed(t))
                    .collect();
                let k = &mut self.conns[conn].input;
                k.open.retain(|&t| t > ts);
                k.until = Some(k.until.map_or(ts, |u| u.max(ts)));
                for t in newly {
                    self.count_consume(c, t);
                }
                Outcome::Stm(Ok(()))
            }
            Tr::QPut { conn, ts } => Outcome::QPut(self.qput(conn, ts)),
            Tr::QGet { conn } => {
                let k = &self.conns[conn];
                if !self.alive(k.task) {
                    return Outcome::QGet(Err(GetError::Detached));
                }
                if self.queue.waiting.is_empty() {
                    return Outcome::QGet(Err(GetError::Unavailable(Neighbors::default())));
                }
                let (ticket, ts) = self.queue.waiting.remove(0);
                self.queue.held.insert(ticket, (k.uid, k.task, ts));
                Outcome::QGet(Ok((ts, ticket)))
            }
            Tr::QConsume { conn, ticket } => {
                let k = &self.conns[conn];
                if !self.alive(k.task) {
                    return Outcome::Stm(Err(StmError::Detached));
                }
                match self.queue.held.get(&ticket) {
                    Some(h) if h.0 == k.uid => {
                        self.queue.held.remove(&ticket);
                        Outcome::Stm(Ok(()))
                    }
                    _ => Outcome::Stm(Err(StmError::UnknownTicket(ticket))),
                }
            }
            Tr::Collect => Outcome::Collect(self.collect()),
        }
    }

    /// A collection pass: raise the floor to the watermark and reclaim below it.
    fn collect(&mut self) -> Timestamp {
        self.reachable = Some(self.reachable_items());
        if self.live_tasks().next().is_none() {
            return self.floor;
        }
        let w = self.watermark();
        self.floor = w;
        for ch in &mut self.chans {
            ch.items = ch.items.split_off(&w);
        }
        w
    }

    fn put(
        &mut self,
        conn: usize,
        ts: Timestamp,
        consumers: Option<u32>,
    ) -> Result<(), PutErrorKind> {
        let k = &self.conns[conn];
        let Cont::Ch(c) = k.cont else { unreachable!() };
        if ts == INFINITY {
            return Err(PutErrorKind::InvalidTimestamp);
        }
        if consumers == Some(0) {
            return Err(PutErrorKind::ZeroConsumers);
        }
        if !self.alive(k.task) {
            return Err(PutErrorKind::Detached);
        }
        let vis = self.visibility(k.task);
        if ts < vis {
            return Err(PutErrorKind::BelowVisibility { visibility: vis });
        }
        if ts < self.floor {
            return Err(PutErrorKind::BelowVisibility {
                visibility: self.floor,
            });
        }
        let ch = &self.chans[c];
        if ch.items.contains_key(&ts) || ch.retired.contains(&ts) {
            return Err(PutErrorKind::DuplicateTimestamp);
        }
        if CH_CAP[c].is_some_and(|cap| ch.items.len() >= cap) {
            // A put that finds the channel full runs one pass before giving up.
            self.collect();
            if CH_CAP[c].is_some_and(|cap| self.chans[c].items.len() >= cap) {
                return Err(PutErrorKind::Full);
            }
        }
        // Connections that consumed `ts` before it arrived count towards its reference count.
        let consumed_by = self
            .live_inputs(c)
            .filter(|k| k.input.is_consumed(ts))
            .count() as u32;
        self.newest = self.newest.max(ts);
        let ch = &mut self.chans[c];
        if consumers.is_some_and(|n| consumed_by >= n) {
            ch.retired.insert(ts);
        } else {
            ch.items.insert(
                ts,
                ItemM {
                    refcount: consumers,
                    consumed_by,
                },
            );
        }
        Ok(())
    }

    fn get(&mut self, conn: usize, sel: Selector) -> Result<Timestamp, GetError> {
        let k = &self.conns[conn];
        let Cont::Ch(c) = k.cont else { unreachable!() };
        if !self.alive(k.task) {
            return Err(GetError::Detached);
        }
        let visible = self.visible(c, &k.input);
        let i = &k.input;
        let found = match sel {
            Selector::Exact(t) => {
                if t == INFINITY
                    || t < self.floor
                    || i.is_consumed(t)
                    || self.chans[c].retired.contains(&t)
                {
                    return Err(GetError::Gone(t));
                }
                self.chans[c].items.contains_key(&t).then_some(t)
            }
            Selector::Oldest => visible.first().copied(),
            Selector::Newest => visible.last().copied(),
            Selector::NewestUnseen => visible.iter().rev().copied().find(|t| !i.seen.contains(t)),
            Selector::NextUnseen => match i.last_get {
                Some(l) => visible.iter().copied().find(|&t| t > l),
                None => visible.first().copied(),
            },
        };
        match found {
            Some(ts) => {
                let i = &mut self.conns[conn].input;
                i.last_get = Some(ts);
                i.open.insert(ts);
                i.seen.insert(ts);
                Ok(ts)
            }
            None => {
                let at = match sel {
                    Selector::Exact(t) => t,
                    Selector::NextUnseen => i.last_get.unwrap_or(Timestamp::MIN),
                    _ => INFINITY,
                };
                Err(GetError::Unavailable(Neighbors {
                    below: visible.iter().rev().copied().find(|&t| t < at),
                    above: visible.iter().copied().find(|&t| t > at),
                }))
            }
        }
    }

    fn qput(&mut self, conn: usize, ts: Timestamp) -> Result<u64, PutErrorKind> {
        let k = &self.conns[conn];
        if ts == INFINITY {
            return Err(PutErrorKind::InvalidTimestamp);
        }
        if !self.alive(k.task) {
            return Err(PutErrorKind::Detached);
        }
        let vis = self.visibility(k.task);
        if ts < vis {
            return Err(PutErrorKind::BelowVisibility { visibility: vis });
        }
        if ts < self.floor {
            return Err(PutErrorKind::BelowVisibility {
                visibility: self.floor,
            });
        }
        if self.queue.waiting.len() >= Q_CAP {
            return Err(PutErrorKind::Full);
        }
        let ticket = self.queue.next_ticket;
        self.queue.next_ticket += 1;
        self.queue.waiting.push((ticket, ts));
        self.newest = self.newest.max(ts);
        Ok(ticket)
    }

    /// Whether the connection at `i` has this container and direction.
    fn conn_is(&self, i: usize, queue: bool, dir: Dir) -> bool {
        self.conns
            .get(i)
            .is_some_and(|k| k.dir == dir && (k.cont == Cont::Queue) == queue)
    }

    fn conns_of(&self, queue: bool, dir: Dir) -> Vec<usize> {
        (0..self.conns.len())
            .filter(|&i| self.conn_is(i, queue, dir))
            .collect()
    }

    /// Where puts on output connection `i` are likely to succeed: its task's visibility.
    fn put_base(&self, i: usize) -> Timestamp {
        let k = &self.conns[i];
        if !self.alive(k.task) {
            return 0;
        }
        let vis = self.visibility(k.task).max(self.floor);
        if vis == INFINITY || vis < -100 {
            0
        } else {
            vis
        }
    }

    /// Timestamps worth trying: stored, retired, open, and around floor and visibilities.
    fn ts_pool(&self) -> Vec<Timestamp> {
        let mut pool = vec![0];
        for ch in &self.chans {
            pool.extend(ch.items.keys());
            pool.extend(&ch.retired);
        }
        for k in &self.conns {
            pool.extend(&k.input.open);
            pool.extend(k.input.until);
        }
        pool.extend(self.queue.waiting.iter().map(|e| e.1));
        pool.push(self.floor);
        pool.push(self.floor.saturating_sub(1));
        for t in self.live_tasks() {
            let vis = self.visibility(t.uid);
            pool.extend([t.vt, vis, vis.saturating_sub(1), vis.saturating_add(1)]);
        }
        pool.retain(|&t| t != INFINITY && t != Timestamp::MIN);
        pool.sort_unstable();
        pool.dedup();
        pool
    }
}

// ---------------------------------------------------------------------------------------
// Generation
// ---------------------------------------------------------------------------------------

struct RefModel;

fn ts_strategy(pool: &[Timestamp]) -> BoxedStrategy<Timestamp> {
    prop_oneof![3 => -1i64..14, 4 => select(pool.to_vec())].boxed()
}

fn vt_strategy(pool: &[Timestamp]) -> BoxedStrategy<Timestamp> {
    prop_oneof![4 => -1i64..14, 5 => select(pool.to_vec()), 1 => Just(INFINITY)].boxed()
}

impl ReferenceStateMachine for RefModel {
    type State = Model;
    type Transition = Tr;

    /// A few tasks and connections, set up by ordinary transitions (replayed on the runtime
    /// by `init_test`), so that most of a sequence moves items.
    fn init_state() -> BoxedStrategy<Model> {
        let other_vt = prop_oneof![3 => -1i64..10, 1 => Just(INFINITY)];
        let vts = (0i64..4, proptest::collection::vec(other_vt, 1..=2));
        let cont = prop_oneof![Just(Cont::Ch(0)), Just(Cont::Ch(1)), Just(Cont::Queue)];
        let dir = prop_oneof![3 => Just(Dir::In), 1 => Just(Dir::Out)];
        let conns = proptest::collection::vec((0..SLOTS, cont, dir), 2..=6);
        (vts, conns)
            .prop_map(|((vt0, vts), conns)| {
                let mut setup = vec![Tr::CreateRoot { slot: 0, vt: vt0 }];
                for (i, vt) in vts.into_iter().enumerate() {
                    setup.push(Tr::CreateRoot { slot: i + 1, vt });
                }
                let tasks = setup.len();
                for cont in [Cont::Ch(0), Cont::Ch(1), Cont::Queue] {
                    setup.push(Tr::Attach {
                        slot: 0,
                        cont,
                        dir: Dir::Out,
                    });
                }
                for (slot, cont, dir) in conns {
                    setup.push(Tr::Attach {
                        slot: slot % tasks,
                        cont,
                        dir,
                    });
                }
                let mut m = Model::new();
                for tr in &setup {
                    let got = m.step(tr);
                    assert_eq!(got, Outcome::Stm(Ok(())), "setup {tr:?}");
                }
                m.setup = setup;
                m
            })
            .boxed()
    }

    fn transitions(s: &Model) -> BoxedStrategy<Tr> {
        let pool = s.ts_pool();
        let empty: Vec<usize> = (0..SLOTS).filter(|&i| s.tasks[i].is_none()).collect();
        let live: Vec<usize> = (0..SLOTS).filter(|&i| s.tasks[i].is_some()).collect();
        let mut opts: Vec<(u32, BoxedStrategy<Tr>)> = vec![(3, Just(Tr::Collect).boxed())];
        // Set up a few tasks and connections quickly, then mostly move items.
        if !empty.is_empty() {
            let weight = if live.is_empty() { 10 } else { 1 };
            opts.push((
                weight,
                (select(empty.clone()), vt_strategy(&pool))
                    .prop_map(|(slot, vt)| Tr::CreateRoot { slot, vt })
                    .boxed(),
            ));
            if !live.is_empty() {
                opts.push((
                    2,
                    (select(empty), select(live.clone()), vt_strategy(&pool))
                        .prop_map(|(slot, parent, vt)| Tr::CreateChild { slot, parent, vt })
                        .boxed(),
                ));
            }
        }
        if !live.is_empty() {
            opts.push((
                3,
                (select(live.clone()), vt_strategy(&pool))
                    .prop_map(|(slot, vt)| Tr::SetVt { slot, vt })
                    .boxed(),
            ));
            if s.conns.len() < MAX_CONNS {
                let cont = prop_oneof![Just(Cont::Ch(0)), Just(Cont::Ch(1)), Just(Cont::Queue)];
                let dir = prop_oneof![Just(Dir::In), Just(Dir::Out)];
                let weight = if s.conns.len() < 4 { 4 } else { 1 };
                opts.push((
                    weight,
                    (select(live.clone()), cont, dir)
                        .prop_map(|(slot, cont, dir)| Tr::Attach { slot, cont, dir })
                        .boxed(),
                ));
            }
            opts.push((1, select(live).prop_map(|slot| Tr::Exit { slot }).boxed()));
        }
        if !s.conns.is_empty() {
            opts.push((
                1,
                (0..s.conns.len())
                    .prop_map(|conn| Tr::Detach { conn })
                    .boxed(),
            ));
        }
        // Puts mostly at or just above the putter's visibility.
        let near = |queue: bool| -> Vec<(usize, Timestamp)> {
            s.conns_of(queue, Dir::Out)
                .into_iter()
                .map(|i| (i, s.put_base(i)))
                .collect()
        };
        let ch_out = near(false);
        if !ch_out.is_empty() {
            let pool = pool.clone();
            let consumers = prop_oneof![
                16 => Just(None),
                8 => (1u32..=3).prop_map(Some),
                1 => Just(Some(0)),
            ];
            let conn_ts = select(ch_out).prop_flat_map(move |(conn, base)| {
                let ts = prop_oneof![
                    16 => (0i64..5).prop_map(move |d| base.saturating_add(d)),
                    8 => ts_strategy(&pool),
                    1 => Just(INFINITY),
                ];
                (Just(conn), ts)
            });
            opts.push((
                10,
                (conn_ts, consumers)
                    .prop_map(|((conn, ts), consumers)| Tr::Put {
                        conn,
                        ts,
                        consumers,
                    })
                    .boxed(),
            ));
        }
        let ch_in = s.conns_of(false, Dir::In);
        if !ch_in.is_empty() {
            let sel = prop_oneof![
                3 => ts_strategy(&pool).prop_map(Selector::Exact),
                1 => Just(Selector::Oldest),
                1 => Just(Selector::Newest),
                2 => Just(Selector::NewestUnseen),
                2 => Just(Selector::NextUnseen),
            ];
            opts.push((
                10,
                (select(ch_in.clone()), sel)
                    .prop_map(|(conn, sel)| Tr::Get { conn, sel })
                    .boxed(),
            ));
            opts.push((
                3,
                (select(ch_in.clone()), ts_strategy(&pool))
                    .prop_map(|(conn, ts)| Tr::Consume { conn, ts })
                    .boxed(),
            ));
            opts.push((
                2,
                (select(ch_in), ts_strategy(&pool))
                    .prop_map(|(conn, ts)| Tr::ConsumeUntil { conn, ts })
                    .boxed(),
            ));
        }
        let q_out = near(true);
        if !q_out.is_empty() {
            let pool = pool.clone();
            let conn_ts = select(q_out).prop_flat_map(move |(conn, base)| {
                let ts = prop_oneof![
                    16 => (0i64..5).prop_map(move |d| base.saturating_add(d)),
                    8 => ts_strategy(&pool),
                    1 => Just(INFINITY),
                ];
                (Just(conn), ts)
            });
            opts.push((
                5,
                conn_ts.prop_map(|(conn, ts)| Tr::QPut { conn, ts }).boxed(),
            ));
        }
        let q_in = s.conns_of(true, Dir::In);
        if !q_in.is_empty() {
            opts.push((
                5,
                select(q_in.clone())
                    .prop_map(|conn| Tr::QGet { conn })
                    .boxed(),
            ));
            // Mostly consume a ticket held on the connection that holds it.
            let mut pairs: Vec<(usize, u64)> = Vec::new();
            for (&ticket, h) in &s.queue.held {
                if let Some(i) = s.conns.iter().position(|k| k.uid == h.0) {
                    pairs.push((i, ticket));
                }
            }
            let mut tickets: Vec<u64> = s.queue.held.keys().copied().collect();
            tickets.extend(s.queue.waiting.iter().map(|e| e.0));
            tickets.push(s.queue.next_ticket);
            let any = (
                select(q_in),
                prop_oneof![3 => select(tickets), 1 => 0u64..8],
            )
                .boxed();
            let pick = if pairs.is_empty() {
                any
            } else {
                prop_oneof![3 => select(pairs), 1 => any].boxed()
            };
            opts.push((
                5,
                pick.prop_map(|(conn, ticket)| Tr::QConsume { conn, ticket })
                    .boxed(),
            ));
        }
        Union::new_weighted(opts).boxed()
    }

    fn preconditions(s: &Model, tr: &Tr) -> bool {
        let live = |slot: usize| slot < SLOTS && s.tasks[slot].is_some();
        let free = |slot: usize| slot < SLOTS && s.tasks[slot].is_none();
        match *tr {
            Tr::CreateRoot { slot, .. } => free(slot),
            Tr::CreateChild { slot, parent, .. } => free(slot) && live(parent),
            Tr::SetVt { slot, .. } | Tr::Exit { slot } => live(slot),
            Tr::Attach { slot, .. } => live(slot) && s.conns.len() < MAX_CONNS,
            Tr::Detach { conn } => conn < s.conns.len(),
            Tr::Put { conn, .. } => s.conn_is(conn, false, Dir::Out),
            Tr::Get { conn, .. } | Tr::Consume { conn, .. } | Tr::ConsumeUntil { conn, .. } => {
                s.conn_is(conn, false, Dir::In)
            }
            Tr::QPut { conn, .. } => s.conn_is(conn, true, Dir::Out),
            Tr::QGet { conn } | Tr::QConsume { conn, .. } => s.conn_is(conn, true, Dir::In),
            Tr::Collect => true,
        }
    }

    fn apply(mut s: Model, tr: &Tr) -> Model {
        s.reachable = None;
        s.last = s.step(tr);
        s
    }
}

// ---------------------------------------------------------------------------------------
// The system under test
// ---------------------------------------------------------------------------------------

enum ConnS {
    ChIn(usize, InputConnection<Channel>),
    ChOut(usize, OutputConnection<Channel>),
    QIn(InputConnection<Queue>),
    QOut(OutputConnection<Queue>),
}

struct Sut {
    rt: Runtime,
    chans: [Channel; 2],
    queue: Queue,
    tasks: Vec<Option<Task>>,
    conns: Vec<ConnS>,
}

impl Sut {
    fn new() -> Self {
        let rt = Runtime::builder().gc_interval(None).build();
        let opts = |cap: Option<usize>| match cap {
            Some(n) => ContainerOptions::bounded(n),
            None => ContainerOptions::unbounded(),
        };
        let chans = [
            rt.channel(opts(CH_CAP[0])).expect("channel 0"),
            rt.channel(opts(CH_CAP[1])).expect("channel 1"),
        ];
        let queue = rt.queue(ContainerOptions::bounded(Q_CAP)).expect("queue");
        Sut {
            rt,
            chans,
            queue,
            tasks: (0..SLOTS).map(|_| None).collect(),
            conns: Vec::new(),
        }
    }

    fn task(&self, slot: usize) -> &Task {
        self.tasks[slot].as_ref().expect("occupied slot")
    }

    fn add_task(&mut self, slot: usize, t: Result<Task, StmError>) -> Outcome {
        Outcome::Stm(t.map(|t| self.tasks[slot] = Some(t)))
    }

    fn run(&mut self, tr: &Tr, model: &Model) -> Outcome {
        match *tr {
            Tr::CreateRoot { slot, vt } => {
                let t = self.rt.task(vt);
                self.add_task(slot, t)
            }
            Tr::CreateChild { slot, parent, vt } => {
                let t = self.task(parent).child().virtual_time(vt).create();
                self.add_task(slot, t)
            }
            Tr::SetVt { slot, vt } => Outcome::Stm(self.task(slot).set_virtual_time(vt)),
            Tr::Attach { slot, cont, dir } => {
                let t = self.task(slot);
                let conn = match (cont, dir) {
                    (Cont::Ch(c), Dir::In) => {
                        t.attach_input(&self.chans[c]).map(|k| ConnS::ChIn(c, k))
                    }
                    (Cont::Ch(c), Dir::Out) => {
                        t.attach_output(&self.chans[c]).map(|k| ConnS::ChOut(c, k))
                    }
                    (Cont::Queue, Dir::In) => t.attach_input(&self.queue).map(ConnS::QIn),
                    (Cont::Queue, Dir::Out) => t.attach_output(&self.queue).map(ConnS::QOut),
                };
                Outcome::Stm(conn.map(|k| self.conns.push(k)))
            }
            Tr::Detach { conn } => {
                drop(self.conns.remove(conn));
                Outcome::Nothing
            }
            Tr::Exit { slot } => {
                self.tasks[slot].take().expect("occupied slot").exit();
                Outcome::Nothing
            }
            Tr::Put {
                conn,
                ts,
                consumers,
            } => {
                let ConnS::ChOut(c, k) = &self.conns[conn] else {
                    unreachable!()
                };
                let mut opts = PutOptions::default().wait(Wait::Never);
                if let Some(n) = consumers {
                    opts = opts.consumers(n);
                }
                Outcome::Put(k.put_with(ts, payload(*c, ts), opts).map_err(|e| e.kind()))
            }
            Tr::Get { conn, sel } => {
                let ConnS::ChIn(c, k) = &self.conns[conn] else {
                    unreachable!()
                };
                Outcome::Get(k.try_get(sel).map(|(ts, item)| {
                    assert_eq!(
                        item.as_str(),
                        Some(payload(*c, ts).as_str()),
                        "item at {ts}"
                    );
                    ts
                }))
            }
            Tr::Consume { conn, ts } => {
                let ConnS::ChIn(_, k) = &self.conns[conn] else {
                    unreachable!()
                };
                Outcome::Stm(k.consume(ts))
            }
            Tr::ConsumeUntil { conn, ts } => {
                let ConnS::ChIn(_, k) = &self.conns[conn] else {
                    unreachable!()
                };
                Outcome::Stm(k.consume_until(ts))
            }
            Tr::QPut { conn, ts } => {
                let ConnS::QOut(k) = &self.conns[conn] else {
                    unreachable!()
                };
                let body = match model.last {
                    Outcome::QPut(Ok(ticket)) => format!("q{ticket}"),
                    _ => "rejected".to_owned(),
                };
                Outcome::QPut(k.try_put(ts, body).map_err(|e| e.kind()))
            }
            Tr::QGet { conn } => {
                let ConnS::QIn(k) = &self.conns[conn] else {
                    unreachable!()
                };
                Outcome::QGet(k.try_get().map(|q| {
                    let body = format!("q{}", q.ticket);
                    assert_eq!(
                        q.item.as_str(),
                        Some(body.as_str()),
                        "queue item {}",
                        q.ticket
                    );
                    (q.ts, q.ticket)
                }))
            }
            Tr::QConsume { conn, ticket } => {
                let ConnS::QIn(k) = &self.conns[conn] else {
                    unreachable!()
                };
                Outcome::Stm(k.consume(ticket))
            }
            Tr::Collect => {
                let before: Vec<Vec<Timestamp>> =
                    self.chans.iter().map(Channel::timestamps).collect();
                let floor = self.rt.collect();
                let reachable = model
                    .reachable
                    .as_ref()
                    .expect("model records reachability");
                for (c, ch) in self.chans.iter().enumerate() {
                    let after = ch.timestamps();
                    for ts in before[c].iter().filter(|t| !after.contains(t)) {
                        assert!(
                            !reachable[c].contains(ts),
                            "collect reclaimed item {ts} of channel {c}, which was still reachable \
                             (new floor {floor})"
                        );
                    }
                    if let Some(ts) = after.iter().find(|&&t| t < floor) {
                        panic!("collect left item {ts} of channel {c} below the floor {floor}");
                    }
                }
                Outcome::Collect(floor)
            }
        }
    }
}

struct StmTest;

impl StateMachineTest for StmTest {
    type SystemUnderTest = Sut;
    type Reference = RefModel;

    fn init_test(m: &Model) -> Sut {
        let mut sut = Sut::new();
        for tr in &m.setup {
            let got = sut.run(tr, m);
            assert_eq!(got, Outcome::Stm(Ok(())), "setup {tr:?}");
        }
        sut
    }

    fn apply(mut sut: Sut, model: &Model, tr: Tr) -> Sut {
        let got = sut.run(&tr, model);
        assert_eq!(got, model.last, "result of {tr:?}");
        sut
    }

    fn check_invariants(sut: &Sut, m: &Model) {
        for (c, ch) in sut.chans.iter().enumerate() {
            let want: Vec<Timestamp> = m.chans[c].items.keys().copied().collect();
            assert_eq!(ch.timestamps(), want, "items stored in channel {c}");
            if let Some(cap) = CH_CAP[c] {
                assert!(ch.len() <= cap, "channel {c} holds more than its capacity");
            }
            let stats = ch.stats();
            assert_eq!(
                stats.connections,
                m.live_inputs(c).count(),
                "input connections of channel {c}"
            );
            let open: usize = m.live_inputs(c).map(|k| k.input.open.len()).sum();
            assert_eq!(stats.open, open, "items open in channel {c}");
        }
        let q = sut.queue.stats();
        assert_eq!(q.waiting, m.queue.waiting.len(), "queue items waiting");
        assert_eq!(q.held, m.queue.held.len(), "queue items held");

        let report = sut.rt.explain(ZoneId::DEFAULT);
        assert_eq!(report.floor, m.floor, "floor in explain()");
        assert_eq!(
            sut.rt.gc_stats(ZoneId::DEFAULT).floor,
            m.floor,
            "floor in gc_stats()"
        );
        let w = m.watermark();
        assert_eq!(report.watermark, w, "watermark in explain(): {report}");
        if let Some(low) = report.holds.first() {
            if m.live_tasks().next().is_some() {
                assert_eq!(low.ts.max(m.floor), w, "lowest hold in explain(): {report}");
            }
        }

        for slot in 0..SLOTS {
            match (&sut.tasks[slot], &m.tasks[slot]) {
                (None, None) => {}
                (Some(t), Some(tm)) => {
                    assert_eq!(t.virtual_time(), tm.vt, "virtual time of slot {slot}");
                    assert_eq!(
                        t.visibility(),
                        m.visibility(tm.uid),
                        "visibility of slot {slot}"
                    );
                }
                _ => panic!("task slot {slot} differs"),
            }
        }

        // The gc module: "Every task's visibility is at least W".
        for t in m.live_tasks() {
            let vis = m.visibility(t.uid);
            assert!(
                vis >= w,
                "a task's visibility {vis} is below the watermark {w}"
            );
        }
    }
}

fn config() -> Config {
    // `PROPTEST_CASES` and the other `PROPTEST_*` variables still override this.
    Config {
        cases: 1024,
        failure_persistence: None,
        ..Config::default()
    }
}

prop_state_machine! {
    #![proptest_config(config())]

    #[test]
    fn runtime_matches_reference_model(sequential 1..40 => StmTest);
}

// ---------------------------------------------------------------------------------------
// Minimal reproductions of what the model found
// ---------------------------------------------------------------------------------------

/// The gc module promises "every task's visibility is at least `W`". An item open on one
/// connection but reclaimed by its reference count (here through rule 3 on another task's
/// new connection) still holds its getter's visibility, yet no longer holds the watermark.
#[test]
fn open_item_reclaimed_by_count_keeps_visibility_at_or_above_watermark() {
    let rt = Runtime::builder().gc_interval(None).build();
    let ch = rt.channel(ContainerOptions::unbounded()).unwrap();
    let t = rt.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let input = t.attach_input(&ch).unwrap();
    out.put_with(0, "x", PutOptions::default().consumers(1))
        .unwrap();
    assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 0);
    t.set_virtual_time(1).unwrap();
    let late = rt.task(9).unwrap();
    let _marks_0_consumed = late.attach_input(&ch).unwrap(); // rule 3: the count is reached
    assert_eq!(t.visibility(), 0); // item 0 is still open on `input`
    let report = rt.explain(ZoneId::DEFAULT);
    assert!(
        report.watermark <= t.visibility(),
        "watermark above a task's visibility {}:\n{report}",
        t.visibility()
    );
}

/// The consequence: a pass reclaims an item that a task may still reach by the rules. `t`
/// has visibility 4, so a new input connection of `t` must see `a@4` (rule 3 marks only
/// items below 4), but the watermark ignores the open `b@4` and reclaims `a@4`.
#[test]
fn collect_keeps_items_a_task_can_still_reach() {
    let rt = Runtime::builder().gc_interval(None).build();
    let a = rt.channel(ContainerOptions::unbounded()).unwrap();
    let b = rt.channel(ContainerOptions::unbounded()).unwrap();
    let t = rt.task(0).unwrap();
    let (out_a, out_b) = (t.attach_output(&a).unwrap(), t.attach_output(&b).unwrap());
    let reader = t.attach_input(&b).unwrap();
    out_a.put(4, "a4").unwrap();
    out_b
        .put_with(4, "b4", PutOptions::default().consumers(1))
        .unwrap();
    assert_eq!(reader.try_get(Selector::Exact(4)).unwrap().0, 4);
    t.set_virtual_time(5).unwrap();
    let other = rt.task(INFINITY).unwrap();
    let _consumes_b4 = other.attach_input(&b).unwrap(); // rule 3: b@4 reclaimed by its count
    assert_eq!(t.visibility(), 4);
    rt.collect();
    let late = t.attach_input(&a).unwrap();
    assert_eq!(late.try_get(Selector::Exact(4)).map(|(ts, _)| ts), Ok(4));
}
