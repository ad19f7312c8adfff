//! Box calls: queueing records at boxes, the two scheduling policies, and running a box on
//! a record.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Instant;

use super::boxes::BoxCall;
use super::inst::{BoxInst, Target};
use super::record::{Rec, Value};
use super::shared::{lock, Policy, RunShared};
use crate::error::SnetError;
use crate::executor::Priority;

impl RunShared {
    /// Queues a record at a box and makes sure a job will run it.
    pub(crate) fn enqueue(self: &Arc<Self>, b: &Arc<BoxInst>, r: Rec) {
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
    pub(crate) fn run_queue(self: &Arc<Self>, b: Arc<BoxInst>) {
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
    pub(crate) fn wake_most_queued(self: &Arc<Self>) {
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
    pub(crate) fn run_fullest(self: &Arc<Self>) {
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
    pub(crate) fn runnable(&self) -> bool {
        let limit = self.config.box_concurrency;
        lock(&self.boxes).iter().filter_map(Weak::upgrade).any(|b| {
            let q = lock(&b.queue);
            !q.records.is_empty() && q.scheduled < limit
        })
    }

    /// Runs the box on record number `seq` of its queue, then routes what it emitted.
    pub(crate) fn call_box(self: &Arc<Self>, b: &Arc<BoxInst>, rec: Rec, seq: u64) {
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
        // An emit that broke the signature fails the call even if the function went on
        // (ignoring the emit's error) and returned Ok: the record would vanish unreported.
        let failure = match (outcome, call.broken.take()) {
            (Ok(_), Some(broken)) => Some((true, broken)),
            (Ok(Ok(())), None) => None,
            (Ok(Err(e)), None) => Some((false, e.0)),
            (Err(panic), _) => Some((false, panic_message(&panic))),
        };
        let binding = self.net.labels.binding();
        let mut outs = Vec::new();
        match failure {
            Some((broke, message)) => {
                let (name, record) = (info.name.to_string(), rec.describe(&self.net.labels));
                self.fail(if broke {
                    SnetError::BrokeSignature {
                        name,
                        record,
                        message,
                    }
                } else {
                    SnetError::BoxFailed {
                        name,
                        record,
                        message,
                    }
                })
            }
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
