//! How records move: from an instance or a continuation, inline on the thread that carries
//! them, through choices, filters, synchrocells and the exit tests of stars and feedback
//! loops, until each is in a box's queue, held, or out.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::ast::Order;
use super::det::DetGate;
use super::inst::{
    BoxInst, BoxQueue, Cont, FeedbackInst, Inst, Reorder, SplitInst, StarInst, SyncInst, SyncState,
    Target,
};
use super::network::{COut, CPattern, EvalError, NodeId, NodeKind};
use super::record::{Rec, Value};
use super::shared::{lock, RunShared};
use crate::error::SnetError;
use crate::executor::Priority;

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
                let a = self.instantiate(a, Arc::new(Cont::Then(b)));
                return Arc::new(Inst::Serial(a));
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
                    body: OnceLock::new(),
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
    pub(crate) fn gate(self: &Arc<Self>, cont: Arc<Cont>) -> Arc<DetGate<Rec>> {
        let run = Arc::downgrade(self);
        let release = move |gate: &Arc<DetGate<Rec>>| {
            let Some(run) = run.upgrade() else { return };
            run.counters.pending_add(1);
            let (gate, cont) = (gate.clone(), cont.clone());
            let me = run.clone();
            run.executor.spawn(Priority::Normal, move || {
                me.route(Target::Drain(gate, cont), r_none());
                me.counters.pending_sub(1, &me);
            });
        };
        let gate = DetGate::new(Box::new(release));
        lock(&self.gates).push(Arc::downgrade(&gate));
        gate
    }

    /// Moves a record from `target` until every record it becomes is in a box's queue, held
    /// by a synchrocell or an ordered region's gate, or out.
    pub(crate) fn route(self: &Arc<Self>, target: Target, rec: Rec) {
        let mut stack: Stack = smallvec::smallvec![(target, rec)];
        while let Some((t, r)) = stack.pop() {
            self.step(t, r, &mut stack);
        }
    }

    pub(crate) fn step(self: &Arc<Self>, t: Target, mut r: Rec, stack: &mut Stack) {
        match t {
            Target::Inst(inst) => match &*inst {
                Inst::Box(b) => self.enqueue(b, r),
                Inst::Serial(a) => stack.push((Target::Inst(a.clone()), r)),
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
    pub(crate) fn best_branch(&self, node: NodeId, r: &Rec) -> Option<usize> {
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
    pub(crate) fn matches(&self, p: &CPattern, r: &Rec) -> Result<bool, (EvalError, CPattern)> {
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

    pub(crate) fn matches_any(
        &self,
        ps: &[CPattern],
        r: &Rec,
    ) -> Result<bool, (EvalError, CPattern)> {
        for p in ps {
            if self.matches(p, r)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(crate) fn star_test(
        self: &Arc<Self>,
        s: &Arc<StarInst>,
        mut level: usize,
        r: Rec,
        stack: &mut Stack,
    ) {
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

    pub(crate) fn filter(
        self: &Arc<Self>,
        node: NodeId,
        cont: &Arc<Cont>,
        r: Rec,
        stack: &mut Stack,
    ) {
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

    pub(crate) fn sync(self: &Arc<Self>, s: &Arc<SyncInst>, r: Rec, stack: &mut Stack) {
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

    /// A record where the checker said none of its type could be: only records a box emitted
    /// against its declared types, or a guard's outcome, get here.
    pub(crate) fn type_error(&self, node: NodeId, r: &Rec, why: &str) {
        self.fail(SnetError::Unroutable {
            at: self.net.position(self.net.nodes[node].span),
            record: r.describe(&self.net.labels),
            message: why.to_owned(),
        });
    }

    pub(crate) fn eval_error(&self, node: NodeId, e: EvalError, r: &Rec) {
        let span = self.net.nodes[node].span;
        self.expr_error(span, e, r);
    }

    pub(crate) fn guard_error(&self, (e, p): (EvalError, CPattern), r: &Rec) {
        self.expr_error(p.span, e, r);
    }

    pub(crate) fn expr_error(&self, span: super::ast::Span, e: EvalError, r: &Rec) {
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

/// The empty record that goes with a [`Target::Drain`].
fn r_none() -> Rec {
    Rec::default()
}
