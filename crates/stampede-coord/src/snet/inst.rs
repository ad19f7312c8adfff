//! The instances of a running network and how records move between them.
//!
//! A network runs as a tree of instances mirroring its checked nodes; stars and splits add
//! replicas as records need them. Only boxes queue records and take a worker; everything
//! else (routing a choice, a filter, a synchrocell, an exit test) happens inline on the thread
//! that sends the record, which carries it until it reaches a box's queue or the output.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use super::ast::Order;
use super::boxes::{BoxCall, SharedBoxFn};
use super::det::DetGate;
use super::network::{BoxId, COut, CPattern, EvalError, NodeId, NodeKind};
use super::record::{Rec, Value};
use super::run::{Policy, RunShared};
use crate::error::SnetError;
use crate::executor::Priority;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where a record goes once it leaves an instance.
pub(crate) enum Cont {
    /// The network's output.
    Output,
    /// Serial composition: into the right operand.
    Then(Arc<Inst>),
    /// Out of replica `level` of a star: the exit test before the next replica.
    StarNext(Weak<StarInst>, usize),
    /// Out of a feedback loop's operand: back in, or out.
    Back(Weak<FeedbackInst>),
    /// Out of an ordered region: wait for earlier records.
    Gate(Arc<DetGate>, Arc<Cont>),
}

pub(crate) enum Inst {
    Box(Arc<BoxInst>),
    /// Entering a serial composition is entering its left operand.
    Serial(Arc<Inst>, #[allow(dead_code)] Arc<Inst>),
    Choice {
        node: NodeId,
        branches: Vec<Arc<Inst>>,
    },
    Star(Arc<StarInst>),
    Split(Arc<SplitInst>),
    Feedback(Arc<FeedbackInst>),
    Filter {
        node: NodeId,
        cont: Arc<Cont>,
    },
    Sync(Arc<SyncInst>),
    /// An ordered region: records take a ticket, then enter the inner instance.
    Ordered {
        gate: Arc<DetGate>,
        inner: Arc<Inst>,
    },
}

pub(crate) struct BoxInst {
    pub id: BoxId,
    pub func: SharedBoxFn,
    pub cont: Arc<Cont>,
    /// When calls may overlap and must keep input order: the outputs of calls that finished
    /// before an earlier one, held until it has.
    pub order: Option<Mutex<Reorder>>,
    pub queue: Mutex<BoxQueue>,
}

#[derive(Default)]
pub(crate) struct BoxQueue {
    pub records: VecDeque<Rec>,
    /// Jobs scheduled for this box and not finished.
    pub scheduled: usize,
    /// Of those, the jobs running a call now (furthest-advanced only).
    pub running: usize,
    /// Records taken from the queue so far: the next one's sequence number.
    pub taken: u64,
}

impl BoxQueue {
    /// Jobs scheduled but not yet running a call: each will take a queued record.
    fn idle(&self) -> usize {
        self.scheduled - self.running
    }
}

#[derive(Default)]
pub(crate) struct Reorder {
    /// The sequence number whose outputs leave next.
    next: u64,
    waiting: std::collections::BTreeMap<u64, Vec<Rec>>,
}

pub(crate) struct StarInst {
    node: NodeId,
    body: NodeId,
    cont: Arc<Cont>,
    /// Replicas from `first` on (fired synchrocells at the front are dropped).
    replicas: Mutex<(usize, VecDeque<Arc<Inst>>)>,
    /// The operand is a lone synchrocell: a fired replica is the identity and is skipped.
    sync_body: bool,
    me: Weak<StarInst>,
}

pub(crate) struct SplitInst {
    node: NodeId,
    body: NodeId,
    cont: Arc<Cont>,
    replicas: Mutex<HashMap<i64, Arc<Inst>>>,
}

pub(crate) struct FeedbackInst {
    node: NodeId,
    body: std::sync::OnceLock<Arc<Inst>>,
    cont: Arc<Cont>,
}

pub(crate) struct SyncInst {
    node: NodeId,
    cont: Arc<Cont>,
    state: Mutex<SyncState>,
    fired: AtomicBool,
}

struct SyncState {
    slots: Vec<Option<Rec>>,
    /// Records stored (one record may fill several slots).
    stored: usize,
}

impl RunShared {
    /// Builds the instance of `node` whose outputs go to `cont`.
    pub(crate) fn instantiate(self: &Arc<Self>, node: NodeId, cont: Arc<Cont>) -> Arc<Inst> {
        let kind = self.net.nodes[node].kind.clone();
        let ordered = |o: Order| o == Order::Kept;
        let plain = match kind {
            NodeKind::Box(id) => {
                let conc = self.config.box_concurrency.max(1);
                let order =
                    (conc > 1 && self.config.ordered_boxes).then(|| Mutex::new(Reorder::default()));
                let b = Arc::new(BoxInst {
                    id,
                    func: self.funcs[id].clone(),
                    cont,
                    order,
                    queue: Mutex::new(BoxQueue::default()),
                });
                lock(&self.boxes).push(Arc::downgrade(&b));
                return Arc::new(Inst::Box(b));
            }
            NodeKind::Serial(a, b) => {
                let b = self.instantiate(b, cont);
                let a = self.instantiate(a, Arc::new(Cont::Then(b.clone())));
                return Arc::new(Inst::Serial(a, b));
            }
            NodeKind::Net { body, .. } => return self.instantiate(body, cont),
            NodeKind::Filter(_) => return Arc::new(Inst::Filter { node, cont }),
            NodeKind::Sync(ref ps) => {
                return Arc::new(Inst::Sync(Arc::new(SyncInst {
                    node,
                    cont,
                    state: Mutex::new(SyncState {
                        slots: vec![None; ps.len()],
                        stored: 0,
                    }),
                    fired: AtomicBool::new(false),
                })))
            }
            NodeKind::Choice { order, .. }
            | NodeKind::Star { order, .. }
            | NodeKind::Split { order, .. } => ordered(order),
            NodeKind::Feedback { .. } => false,
        };
        // Ordered combinators wrap their instance in a gate on the way out.
        let (gate, inner_cont) = if plain {
            let g = self.gate(cont.clone());
            (Some(g.clone()), Arc::new(Cont::Gate(g, cont)))
        } else {
            (None, cont)
        };
        let inner = match self.net.nodes[node].kind.clone() {
            NodeKind::Choice { branches, .. } => {
                let branches = branches
                    .iter()
                    .map(|b| self.instantiate(*b, inner_cont.clone()))
                    .collect();
                Arc::new(Inst::Choice { node, branches })
            }
            NodeKind::Star { body, .. } => {
                let sync_body = matches!(self.net.nodes[body].kind, NodeKind::Sync(_));
                Arc::new(Inst::Star(Arc::new_cyclic(|me| StarInst {
                    node,
                    body,
                    cont: inner_cont,
                    replicas: Mutex::new((0, VecDeque::new())),
                    sync_body,
                    me: me.clone(),
                })))
            }
            NodeKind::Split { body, .. } => Arc::new(Inst::Split(Arc::new(SplitInst {
                node,
                body,
                cont: inner_cont,
                replicas: Mutex::new(HashMap::new()),
            }))),
            NodeKind::Feedback { body, .. } => {
                let fb = Arc::new(FeedbackInst {
                    node,
                    body: std::sync::OnceLock::new(),
                    cont: inner_cont,
                });
                let b = self.instantiate(body, Arc::new(Cont::Back(Arc::downgrade(&fb))));
                let _ = fb.body.set(b);
                Arc::new(Inst::Feedback(fb))
            }
            _ => unreachable!("handled above"),
        };
        match gate {
            Some(gate) => Arc::new(Inst::Ordered { gate, inner }),
            None => inner,
        }
    }

    /// A gate whose records leave to `cont`. Records a dropped ticket releases are drained by
    /// a job, counted as pending until it has run.
    fn gate(self: &Arc<Self>, cont: Arc<Cont>) -> Arc<DetGate> {
        let run = Arc::downgrade(self);
        let release = move |gate: &Arc<DetGate>| {
            let Some(run) = run.upgrade() else { return };
            run.counters.pending_add(1);
            let (gate, cont) = (gate.clone(), cont.clone());
            let me = run.clone();
            run.executor.spawn(Priority::Normal, move || {
                me.route(Target::Drain(gate, cont), r_none());
                me.counters.pending_sub(1, &me);
            });
        };
        DetGate::new(Box::new(release))
    }

    /// Moves a record from `target` until every record it becomes is in a box's queue, held
    /// by a synchrocell or an ordered region's gate, or out.
    pub(crate) fn route(self: &Arc<Self>, target: Target, rec: Rec) {
        let mut stack: Stack = smallvec::smallvec![(target, rec)];
        while let Some((t, r)) = stack.pop() {
            self.step(t, r, &mut stack);
        }
    }

    fn step(self: &Arc<Self>, t: Target, mut r: Rec, stack: &mut Stack) {
        match t {
            Target::Inst(inst) => match &*inst {
                Inst::Box(b) => self.enqueue(b, r),
                Inst::Serial(a, _) => stack.push((Target::Inst(a.clone()), r)),
                Inst::Choice { node, branches } => match self.best_branch(*node, &r) {
                    Some(i) => stack.push((Target::Inst(branches[i].clone()), r)),
                    None => self.type_error(*node, &r, "no branch of this choice accepts it"),
                },
                Inst::Star(s) => self.star_test(s, 0, r, stack),
                Inst::Split(s) => {
                    let NodeKind::Split { tag, .. } = self.net.nodes[s.node].kind else {
                        unreachable!()
                    };
                    let Some(v) = r.get(tag).and_then(Value::int) else {
                        return self.type_error(s.node, &r, "it lacks the split's tag");
                    };
                    let replica = {
                        let mut reps = lock(&s.replicas);
                        reps.entry(v)
                            .or_insert_with(|| self.instantiate(s.body, s.cont.clone()))
                            .clone()
                    };
                    stack.push((Target::Inst(replica), r));
                }
                Inst::Feedback(fb) => {
                    let body = fb.body.get().expect("set at instantiation").clone();
                    stack.push((Target::Inst(body), r));
                }
                Inst::Filter { node, cont } => self.filter(*node, cont, r, stack),
                Inst::Sync(s) => self.sync(s, r, stack),
                Inst::Ordered { gate, inner } => {
                    gate.enter(&mut r);
                    stack.push((Target::Inst(inner.clone()), r));
                }
            },
            Target::Cont(c) => match &*c {
                Cont::Output => self.output(r),
                Cont::Then(b) => stack.push((Target::Inst(b.clone()), r)),
                Cont::StarNext(s, level) => {
                    if let Some(s) = s.upgrade() {
                        self.star_test(&s, *level, r, stack);
                    }
                }
                Cont::Back(fb) => {
                    let Some(fb) = fb.upgrade() else { return };
                    let NodeKind::Feedback { back, .. } = &self.net.nodes[fb.node].kind else {
                        unreachable!()
                    };
                    match self.matches_any(back, &r) {
                        Ok(true) => {
                            let body = fb.body.get().expect("set at instantiation").clone();
                            stack.push((Target::Inst(body), r));
                        }
                        Ok(false) => stack.push((Target::Cont(fb.cont.clone()), r)),
                        Err(e) => self.guard_error(e, &r),
                    }
                }
                Cont::Gate(gate, next) => {
                    if gate.exit(r) {
                        stack.push((Target::Drain(gate.clone(), next.clone()), r_none()));
                    }
                }
            },
            // Routing released records one ticket at a time, each record to where it lands
            // before the next: the rest of the stack waits below this entry.
            Target::Drain(gate, next) => {
                if let Some(recs) = gate.take() {
                    stack.push((Target::Drain(gate, next.clone()), r_none()));
                    for r in recs.into_iter().rev() {
                        stack.push((Target::Cont(next.clone()), r));
                    }
                }
            }
        }
    }

    /// The branch whose accepted types match the record best (the first of equals).
    fn best_branch(&self, node: NodeId, r: &Rec) -> Option<usize> {
        let NodeKind::Choice { branches, .. } = &self.net.nodes[node].kind else {
            unreachable!()
        };
        let binding = self.net.labels.binding();
        let mut best: Option<(u32, usize)> = None;
        for (i, b) in branches.iter().enumerate() {
            let score = self.net.nodes[*b]
                .accepts
                .iter()
                .filter(|s| self.net.labels.matches(**s, r.labels))
                .map(|s| s.minus(binding).len())
                .max();
            if let Some(s) = score {
                if best.map_or(true, |(bs, _)| s > bs) {
                    best = Some((s, i));
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// Whether the record matches a pattern: its labels, then its guard.
    fn matches(&self, p: &CPattern, r: &Rec) -> Result<bool, (EvalError, CPattern)> {
        if !self.net.labels.matches(p.labels, r.labels) {
            return Ok(false);
        }
        match &p.guard {
            None => Ok(true),
            Some(g) => g
                .eval(&|id| r.tag(id))
                .map(|v| v != 0)
                .map_err(|e| (e, p.clone())),
        }
    }

    fn matches_any(&self, ps: &[CPattern], r: &Rec) -> Result<bool, (EvalError, CPattern)> {
        for p in ps {
            if self.matches(p, r)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn star_test(self: &Arc<Self>, s: &Arc<StarInst>, mut level: usize, r: Rec, stack: &mut Stack) {
        let NodeKind::Star { exits, .. } = &self.net.nodes[s.node].kind else {
            unreachable!()
        };
        match self.matches_any(exits, &r) {
            Ok(true) => return stack.push((Target::Cont(s.cont.clone()), r)),
            Ok(false) => {}
            Err(e) => return self.guard_error(e, &r),
        }
        let replica = {
            let mut reps = lock(&s.replicas);
            let (first, list) = &mut *reps;
            if s.sync_body {
                // A fired synchrocell passes everything: skip (and forget) fired replicas.
                while let Some(front) = list.front() {
                    let Inst::Sync(cell) = &**front else { break };
                    if !cell.fired.load(Ordering::Acquire) {
                        break;
                    }
                    list.pop_front();
                    *first += 1;
                }
                level = level.max(*first);
            }
            while *first + list.len() <= level {
                let next = *first + list.len() + 1;
                let cont = Arc::new(Cont::StarNext(s.me.clone(), next));
                list.push_back(self.instantiate(s.body, cont));
            }
            list[level - *first].clone()
        };
        stack.push((Target::Inst(replica), r));
    }

    fn filter(self: &Arc<Self>, node: NodeId, cont: &Arc<Cont>, r: Rec, stack: &mut Stack) {
        let NodeKind::Filter(f) = &self.net.nodes[node].kind else {
            unreachable!()
        };
        let Some(f) = f else {
            return stack.push((Target::Cont(cont.clone()), r));
        };
        if !self.net.labels.matches(f.pattern.labels, r.labels) {
            return self.type_error(node, &r, "the filter's pattern does not match it");
        }
        let tag = |id| r.tag(id);
        let mut chosen = None;
        for (guard, outs) in &f.arms {
            let take = match guard {
                None => true,
                Some(g) => match g.eval(&tag) {
                    Ok(v) => v != 0,
                    Err(e) => return self.eval_error(node, e, &r),
                },
            };
            if take {
                chosen = Some(outs);
                break;
            }
        }
        let outs = match chosen {
            Some(outs) if !outs.is_empty() => outs,
            _ => {
                self.counters.filtered.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let binding = self.net.labels.binding();
        let mut made = Vec::with_capacity(outs.len());
        for (items, _) in outs {
            let mut out = Rec::default();
            for item in items {
                match item {
                    COut::Field { to, from } => {
                        if let Some(v) = r.get(*from) {
                            out.insert(*to, v.clone());
                        }
                    }
                    COut::Tag { to, value } => match value.eval(&tag) {
                        Ok(v) => out.insert(*to, Value::Tag(v)),
                        Err(e) => return self.eval_error(node, e, &r),
                    },
                }
            }
            r.inherit_into(&mut out, f.pattern.labels, binding);
            out.det = r.det.clone();
            made.push(out);
        }
        drop(r);
        for out in made.into_iter().rev() {
            stack.push((Target::Cont(cont.clone()), out));
        }
    }

    fn sync(self: &Arc<Self>, s: &Arc<SyncInst>, r: Rec, stack: &mut Stack) {
        let NodeKind::Sync(patterns) = &self.net.nodes[s.node].kind else {
            unreachable!()
        };
        if s.fired.load(Ordering::Acquire) {
            return stack.push((Target::Cont(s.cont.clone()), r));
        }
        // Which empty slots the record matches, outside the lock (guards read only the record).
        let mut fits = Vec::new();
        for (i, p) in patterns.iter().enumerate() {
            match self.matches(p, &r) {
                Ok(true) => fits.push(i),
                Ok(false) => {}
                Err(e) => return self.guard_error(e, &r),
            }
        }
        let merged = {
            let mut st = lock(&s.state);
            let free: Vec<usize> = fits
                .iter()
                .copied()
                .filter(|i| st.slots[*i].is_none())
                .collect();
            if s.fired.load(Ordering::Acquire) || free.is_empty() {
                drop(st);
                return stack.push((Target::Cont(s.cont.clone()), r));
            }
            // A record fills every empty slot it matches; the first holds it, the others
            // hold a copy (so the merge can read each slot's labels).
            for i in &free[1..] {
                st.slots[*i] = Some(r.clone());
            }
            st.slots[free[0]] = Some(r);
            st.stored += 1;
            self.counters.held.fetch_add(1, Ordering::Relaxed);
            if st.slots.iter().any(Option::is_none) {
                return;
            }
            s.fired.store(true, Ordering::Release);
            self.counters.held.fetch_sub(st.stored, Ordering::Relaxed);
            let taken: Vec<Rec> = st
                .slots
                .iter_mut()
                .map(|s| s.take().expect("all slots full"))
                .collect();
            taken
        };
        // The merge: the first pattern's record, with the labels the other patterns name
        // copied from theirs.
        let mut it = merged.into_iter();
        let mut out = it.next().expect("one slot at least");
        for (p, rec) in patterns[1..].iter().zip(it) {
            for id in p.labels.iter() {
                if let Some(v) = rec.get(id) {
                    out.insert(id, v.clone());
                }
            }
        }
        self.counters.fired.fetch_add(1, Ordering::Relaxed);
        stack.push((Target::Cont(s.cont.clone()), out));
    }

    /// Queues a record at a box and makes sure a job will run it.
    fn enqueue(self: &Arc<Self>, b: &Arc<BoxInst>, r: Rec) {
        self.counters.pending_add(1);
        match self.config.policy {
            Policy::FurthestAdvanced => {
                let spawn = {
                    let mut q = lock(&b.queue);
                    q.records.push_back(r);
                    // Jobs running a call do not take this record: counting them (as
                    // `scheduled < records`) left a record waiting for a running call while
                    // the box had a free call slot.
                    let claim =
                        q.scheduled < self.config.box_concurrency && q.idle() < q.records.len();
                    if claim {
                        q.scheduled += 1;
                    }
                    claim
                };
                if spawn {
                    let (me, b) = (self.clone(), b.clone());
                    self.executor
                        .spawn(Priority::Normal, move || me.run_queue(b));
                }
            }
            Policy::MostQueued => {
                lock(&b.queue).records.push_back(r);
                self.wake_most_queued();
            }
        }
    }

    /// Furthest-advanced: a job runs one record of a box's queue; at most the box's
    /// concurrency of jobs exist at once.
    fn run_queue(self: &Arc<Self>, b: Arc<BoxInst>) {
        let (rec, seq, extra) = {
            let mut q = lock(&b.queue);
            let Some(r) = q.records.pop_front() else {
                q.scheduled -= 1;
                return;
            };
            let seq = q.taken;
            q.taken += 1;
            q.running += 1;
            let extra = q.scheduled < self.config.box_concurrency && q.idle() < q.records.len();
            if extra {
                q.scheduled += 1;
            }
            (r, seq, extra)
        };
        if extra {
            // Queued under the work this call makes, so it runs after it or on a thief.
            let (me, b) = (self.clone(), b.clone());
            self.executor
                .spawn(Priority::Normal, move || me.run_queue(b));
        }
        self.call_box(&b, rec, seq);
        let more = {
            let mut q = lock(&b.queue);
            q.running -= 1;
            if q.records.is_empty() {
                q.scheduled -= 1;
            }
            !q.records.is_empty()
        };
        if more {
            // The rest of the queue waits until this worker has taken the records it just
            // made further: the global queue comes after the worker's own.
            let me = self.clone();
            self.executor.spawn_later(move || me.run_queue(b));
        }
    }

    /// Most-queued: keeps up to one job per worker looking for the fullest box.
    fn wake_most_queued(self: &Arc<Self>) {
        let workers = self.executor.workers();
        let claimed = self
            .most_queued_jobs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < workers).then_some(n + 1)
            })
            .is_ok();
        if claimed {
            let me = self.clone();
            self.executor
                .spawn(Priority::Normal, move || me.run_fullest());
        }
    }

    /// Most-queued: runs one record of the box with the most queued records (and a free
    /// call slot), then hands the worker back to the executor.
    fn run_fullest(self: &Arc<Self>) {
        let limit = self.config.box_concurrency;
        let pick = {
            let boxes = lock(&self.boxes);
            let mut best: Option<(usize, Arc<BoxInst>)> = None;
            for b in boxes.iter().filter_map(Weak::upgrade) {
                let q = lock(&b.queue);
                let len = q.records.len();
                if len > 0 && q.scheduled < limit && best.as_ref().map_or(true, |(l, _)| len > *l) {
                    drop(q);
                    best = Some((len, b));
                }
            }
            best.and_then(|(_, b)| {
                let mut q = lock(&b.queue);
                let r = q.records.pop_front()?;
                q.scheduled += 1;
                let seq = q.taken;
                q.taken += 1;
                drop(q);
                Some((b, r, seq))
            })
        };
        match pick {
            Some((b, rec, seq)) => {
                // Another job looks for the next record while this one runs.
                let me = self.clone();
                self.executor
                    .spawn(Priority::Normal, move || me.run_fullest());
                self.call_box(&b, rec, seq);
                lock(&b.queue).scheduled -= 1;
                // A record skipped for want of a free slot in this box can run now.
                self.wake_most_queued();
            }
            None => {
                self.most_queued_jobs.fetch_sub(1, Ordering::AcqRel);
                // A record queued while this job was looking may have found every job
                // claimed and started none: look again now that this one is gone, or it
                // waits for good in a quiet network. (The box's lock orders the two: the
                // queuing's count comes after this decrement, or this look sees the record.)
                if self.runnable() {
                    self.wake_most_queued();
                }
            }
        }
    }

    /// Whether some box has a queued record and a free call slot.
    fn runnable(&self) -> bool {
        let limit = self.config.box_concurrency;
        lock(&self.boxes).iter().filter_map(Weak::upgrade).any(|b| {
            let q = lock(&b.queue);
            !q.records.is_empty() && q.scheduled < limit
        })
    }

    /// Runs the box on record number `seq` of its queue, then routes what it emitted.
    fn call_box(self: &Arc<Self>, b: &Arc<BoxInst>, rec: Rec, seq: u64) {
        let info = &self.net.boxes[b.id];
        let inputs: Vec<Value> = info
            .params
            .iter()
            .map(|id| {
                rec.get(*id)
                    .cloned()
                    .expect("a checked record has every input label")
            })
            .collect();
        let mut call = BoxCall {
            info,
            labels: &self.net.labels,
            inputs,
            emitted: Vec::new(),
            broken: None,
        };
        let start = self.executor.tracing().then(Instant::now);
        let outcome = catch_unwind(AssertUnwindSafe(|| (b.func)(&mut call)));
        if let Some(start) = start {
            self.executor
                .record(&info.name, || trace_tag(&rec, &self.net.labels), start);
        }
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        let failure = match outcome {
            // An emit that broke the signature fails the call even if the function went on
            // (ignoring the emit's error) and returned Ok: the record would vanish unreported.
            Ok(Ok(())) => call.broken.take(),
            Ok(Err(e)) => Some(e.0),
            Err(panic) => Some(panic_message(&panic)),
        };
        let binding = self.net.labels.binding();
        let mut outs = Vec::new();
        match failure {
            Some(message) => self.fail(SnetError::BoxFailed {
                name: info.name.to_string(),
                record: rec.describe(&self.net.labels),
                message,
            }),
            None => {
                for (variant, values) in call.emitted {
                    let mut out = Rec::default();
                    for (id, v) in info.results[variant].iter().zip(values) {
                        out.insert(*id, v);
                    }
                    rec.inherit_into(&mut out, info.input, binding);
                    out.det = rec.det.clone();
                    outs.push(out);
                }
            }
        }
        drop(rec);
        match &b.order {
            None => {
                for out in outs {
                    self.route(Target::Cont(b.cont.clone()), out);
                }
                self.counters.pending_sub(1, self);
            }
            // Outputs leave in the order the records were taken: a call that finishes early
            // leaves its outputs for the call before it to send on. Routing happens under
            // the lock so that two calls' outputs cannot interleave downstream. A parked
            // call keeps its count until its outputs are sent, so that outputs waiting for a
            // slow earlier call count toward the capacity (uncounted, the environment could
            // pile up any number of later calls' outputs behind it).
            Some(order) => {
                let mut o = lock(order);
                if o.next != seq {
                    o.waiting.insert(seq, outs);
                    return;
                }
                let mut outs = outs;
                loop {
                    for out in outs {
                        self.route(Target::Cont(b.cont.clone()), out);
                    }
                    // Settled call by call, so that what they held and what they sent on
                    // are never both counted.
                    self.counters.pending_sub(1, self);
                    o.next += 1;
                    let next = o.next;
                    match o.waiting.remove(&next) {
                        Some(more) => outs = more,
                        None => break,
                    }
                }
            }
        }
    }

    /// A record where the checker said none of its type could be: only records a box emitted
    /// against its declared types, or a guard's outcome, get here.
    fn type_error(&self, node: NodeId, r: &Rec, why: &str) {
        self.fail(SnetError::Unroutable {
            at: self.net.position(self.net.nodes[node].span),
            record: r.describe(&self.net.labels),
            message: why.to_owned(),
        });
    }

    fn eval_error(&self, node: NodeId, e: EvalError, r: &Rec) {
        let span = self.net.nodes[node].span;
        self.expr_error(span, e, r);
    }

    fn guard_error(&self, (e, p): (EvalError, CPattern), r: &Rec) {
        self.expr_error(p.span, e, r);
    }

    fn expr_error(&self, span: super::ast::Span, e: EvalError, r: &Rec) {
        self.fail(SnetError::TagExpression {
            at: self.net.position(span),
            record: r.describe(&self.net.labels),
            message: match e {
                EvalError::DivisionByZero => "division by zero".to_owned(),
                EvalError::Overflow => "integer overflow".to_owned(),
            },
        });
    }
}

/// Records on their way, most often one.
type Stack = smallvec::SmallVec<[(Target, Rec); 2]>;

/// Where a record is sent.
pub(crate) enum Target {
    Inst(Arc<Inst>),
    Cont(Arc<Cont>),
    /// Not a record's destination: this thread drains the gate's released records to the
    /// continuation (the record with it is empty). `true` once a ticket has been routed.
    Drain(Arc<DetGate>, Arc<Cont>),
}

/// The empty record that goes with a [`Target::Drain`].
fn r_none() -> Rec {
    Rec::default()
}

fn trace_tag(r: &Rec, labels: &super::types::LabelTable) -> String {
    let tags: Vec<String> = r
        .slots
        .iter()
        .filter_map(|(id, v)| v.int().map(|t| format!("{}={t}", labels.name(*id))))
        .collect();
    format!("<{}>", tags.join(","))
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_owned()
    }
}
