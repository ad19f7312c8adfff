//! Running a checked network on the coordination layer's executor: the environment's side.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::boxes::{BoxCall, BoxError, SharedBoxFn};
use super::inst::{Cont, Inst, Target};
use super::network::Network;
use super::record::{Rec, Record};
use super::shared::{lock, Config, Counters, Policy, RunShared, RunState};
use crate::error::SnetError;
use crate::executor::Executor;

/// Counts of what a run did. Records held by synchrocells and gates are counted, not lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Records the environment sent in.
    pub sent: usize,
    /// Records that left the network.
    pub emitted: usize,
    /// Box calls, and those that failed.
    pub box_calls: usize,
    pub box_failures: usize,
    /// Records a filter arm with no output records consumed.
    pub filtered: usize,
    /// Synchrocell merges.
    pub synchronised: usize,
    /// Records stored in synchrocells that have not fired (still waiting for partners).
    pub held_in_synchrocells: usize,
    /// Records at the exits of `||`, `**` and `!!` waiting for earlier records.
    pub held_at_gates: usize,
    /// Records queued at boxes or being processed now (a box call's outputs waiting at the
    /// box's ordering gate for an earlier call count as that call's record), and the most at
    /// any time.
    pub queued: usize,
    pub max_queued: usize,
    /// Records the run refused or could not route (each also an error).
    pub errors: usize,
    /// Box instances made (stars and splits add replicas).
    pub box_instances: usize,
}

/// Sets up a run of a network: the box functions, the policy, the bounds.
///
/// ```
/// use stampede_coord::snet::{Network, Record, Runner, Value};
/// use stampede_coord::Executor;
/// let net = Network::parse("inc.snet", "net inc { box inc ((<x>) -> (<x>)); } connect inc;").unwrap();
/// let run = Runner::new(&net, &Executor::new(2))
///     .bind("inc", |call| {
///         let x = call.tag("x")?;
///         call.emit(0, vec![Value::Tag(x + 1)])
///     })
///     .start()
///     .unwrap();
/// run.send(Record::new().tag("x", 41)).unwrap();
/// let out = run.finish().unwrap();
/// assert_eq!(out[0].get_tag("x"), Some(42));
/// ```
pub struct Runner {
    net: Arc<Network>,
    executor: Executor,
    funcs: Vec<Option<SharedBoxFn>>,
    config: Config,
}

impl Runner {
    /// A run of `net` on `executor`'s workers.
    pub fn new(net: &Network, executor: &Executor) -> Runner {
        Runner {
            net: Arc::new(net.clone()),
            executor: executor.clone(),
            funcs: vec![None; net.boxes.len()],
            config: Config {
                policy: Policy::default(),
                capacity: 1024,
                box_concurrency: executor.workers().max(1),
                ordered_boxes: true,
            },
        }
    }

    /// Binds the function of box `name` (a name the program does not declare is ignored, so
    /// one set of bindings can serve several programs).
    pub fn bind(
        mut self,
        name: &str,
        f: impl Fn(&mut BoxCall<'_>) -> Result<(), BoxError> + Send + Sync + 'static,
    ) -> Self {
        if let Some(i) = self.net.boxes.iter().position(|b| b.name.as_ref() == name) {
            self.funcs[i] = Some(Arc::new(f));
        }
        self
    }

    /// Which box a free worker runs next.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.config.policy = policy;
        self
    }

    /// The most records queued at boxes at once (at least 1): the environment's `send` waits
    /// while the network holds this many (see [`RunStats::queued`]; records held by
    /// synchrocells and by the gates of `||`, `**` and `!!` do not count). Default 1024.
    pub fn capacity(mut self, records: usize) -> Self {
        self.config.capacity = records.max(1);
        self
    }

    /// How many records one box instance may process at once (default: the executor's
    /// workers). Outputs still leave in input order unless [`Runner::unordered_boxes`].
    pub fn box_concurrency(mut self, calls: usize) -> Self {
        self.config.box_concurrency = calls.max(1);
        self
    }

    /// Lets a box's concurrent calls emit in the order they finish.
    pub fn unordered_boxes(mut self) -> Self {
        self.config.ordered_boxes = false;
        self
    }

    /// Starts the run; every box must have a function.
    pub fn start(self) -> Result<Run, SnetError> {
        let unbound: Vec<String> = self
            .net
            .boxes
            .iter()
            .zip(&self.funcs)
            .filter(|(_, f)| f.is_none())
            .map(|(b, _)| b.name.to_string())
            .collect();
        if !unbound.is_empty() {
            return Err(SnetError::Unbound(unbound));
        }
        let shared = Arc::new(RunShared {
            funcs: self
                .funcs
                .into_iter()
                .map(|f| f.expect("checked above"))
                .collect(),
            net: self.net,
            config: self.config,
            executor: self.executor,
            counters: Counters::default(),
            boxes: Mutex::new(Vec::new()),
            gates: Mutex::new(Vec::new()),
            state: Mutex::new(RunState::default()),
            changed: Condvar::new(),
            closed: AtomicBool::new(false),
            most_queued_jobs: AtomicUsize::new(0),
        });
        let root = shared.instantiate(shared.net.root, Arc::new(Cont::Output));
        Ok(Run { shared, root })
    }
}

/// A running network: the environment sends records in and takes records out.
pub struct Run {
    shared: Arc<RunShared>,
    root: Arc<Inst>,
}

impl Run {
    /// Sends a record into the network, waiting while it holds its capacity of records. A
    /// record of a type the network does not accept comes back in the error.
    pub fn send(&self, record: Record) -> Result<(), SnetError> {
        let s = &self.shared;
        if s.closed.load(Ordering::Acquire) {
            return Err(SnetError::Closed);
        }
        let rec = match Rec::from_record(record.clone(), &s.net.labels) {
            Ok(r)
                if s.net
                    .input
                    .iter()
                    .any(|t| s.net.labels.matches(*t, r.labels)) =>
            {
                r
            }
            _ => {
                return Err(SnetError::Rejected {
                    record,
                    accepts: s.net.input_type(),
                });
            }
        };
        if s.counters.pending.load(Ordering::SeqCst) >= s.config.capacity {
            s.counters.senders.fetch_add(1, Ordering::SeqCst);
            let mut st = lock(&s.state);
            while s.counters.pending.load(Ordering::SeqCst) >= s.config.capacity {
                st = s.changed.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            drop(st);
            s.counters.senders.fetch_sub(1, Ordering::AcqRel);
        }
        s.counters.sent.fetch_add(1, Ordering::Relaxed);
        s.route(Target::Inst(self.root.clone()), rec);
        Ok(())
    }

    /// No more records will be sent; the run finishes once the network is quiet.
    pub fn close(&self) {
        self.shared.closed.store(true, Ordering::Release);
        let _g = lock(&self.shared.state);
        self.shared.changed.notify_all();
    }

    fn wait_until(
        &self,
        deadline: Option<Instant>,
        mut done: impl FnMut(&RunState) -> bool,
    ) -> bool {
        let s = &self.shared;
        s.counters.receivers.fetch_add(1, Ordering::AcqRel);
        let mut st = lock(&s.state);
        let ok = loop {
            if done(&st) {
                break true;
            }
            // Sleeps are short: pending counts change without the state lock.
            let nap = Duration::from_millis(20);
            let nap = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break false;
                    }
                    nap.min(d - now)
                }
                None => nap,
            };
            st = s
                .changed
                .wait_timeout(st, nap)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        drop(st);
        s.counters.receivers.fetch_sub(1, Ordering::AcqRel);
        ok
    }

    /// The next record out of the network, waiting for it; `None` once the run is closed,
    /// quiet and every output taken.
    pub fn recv(&self) -> Option<Record> {
        self.recv_deadline(None).ok().flatten()
    }

    /// As [`Run::recv`], giving up with [`SnetError::Timeout`] after `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Option<Record>, SnetError> {
        self.recv_deadline(Some(Instant::now() + timeout))
    }

    fn recv_deadline(&self, deadline: Option<Instant>) -> Result<Option<Record>, SnetError> {
        let s = self.shared.clone();
        let mut got = None;
        let ok = self.wait_until(deadline, |st| !st.outputs.is_empty() || s.quiet());
        if ok {
            got = lock(&s.state).outputs.pop_front();
        }
        match (ok, got) {
            (_, Some(r)) => Ok(Some(r)),
            (true, None) => Ok(None),
            (false, None) => Err(SnetError::Timeout),
        }
    }

    /// Takes the records out of the network so far.
    pub fn outputs(&self) -> Vec<Record> {
        lock(&self.shared.state).outputs.drain(..).collect()
    }

    /// Closes the run and waits until the network is quiet; the first failure, if any, is
    /// the error (all of them are in [`Run::errors`]).
    pub fn wait(&self) -> Result<(), SnetError> {
        self.wait_deadline(None)
    }

    /// As [`Run::wait`], giving up with [`SnetError::Timeout`] after `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), SnetError> {
        self.wait_deadline(Some(Instant::now() + timeout))
    }

    fn wait_deadline(&self, deadline: Option<Instant>) -> Result<(), SnetError> {
        self.close();
        let s = self.shared.clone();
        if !self.wait_until(deadline, |_| s.quiet()) {
            return Err(SnetError::Timeout);
        }
        let first = lock(&s.state).errors.first().cloned();
        match first {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Closes, waits, and returns every record the network emitted that was not taken yet.
    pub fn finish(self) -> Result<Vec<Record>, SnetError> {
        self.wait()?;
        Ok(self.outputs())
    }

    /// Every failure so far: boxes that failed, records that could not be routed.
    pub fn errors(&self) -> Vec<SnetError> {
        lock(&self.shared.state).errors.clone()
    }

    pub fn stats(&self) -> RunStats {
        let s = &self.shared;
        let c = &s.counters;
        let boxes = lock(&s.boxes);
        RunStats {
            sent: c.sent.load(Ordering::Relaxed),
            emitted: c.emitted.load(Ordering::Relaxed),
            box_calls: c.calls.load(Ordering::Relaxed),
            box_failures: c.failures.load(Ordering::Relaxed),
            filtered: c.filtered.load(Ordering::Relaxed),
            synchronised: c.fired.load(Ordering::Relaxed),
            held_in_synchrocells: c.held.load(Ordering::Relaxed),
            held_at_gates: lock(&s.gates)
                .iter()
                .filter_map(std::sync::Weak::upgrade)
                .map(|g| g.held())
                .sum(),
            queued: c.pending.load(Ordering::Relaxed),
            max_queued: c.max_pending.load(Ordering::Relaxed),
            errors: lock(&s.state).errors.len(),
            box_instances: boxes.len(),
        }
    }

    /// The network this run runs.
    pub fn network(&self) -> &Network {
        &self.shared.net
    }
}
