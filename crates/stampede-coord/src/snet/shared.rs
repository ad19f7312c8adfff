//! What every instance of a run shares: the network, the configuration, the box functions,
//! the executor, the counters, and the state the environment waits on.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};

use super::boxes::SharedBoxFn;
use super::det::DetGate;
use super::inst::BoxInst;
use super::network::Network;
use super::record::{Rec, Record};
use crate::error::SnetError;
use crate::executor::Executor;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Which box a free worker runs next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Policy {
    /// Records that have come furthest first: a worker runs the work its last box call made
    /// before older work, so records drain toward the output (seed 004 §5.4).
    #[default]
    FurthestAdvanced,
    /// The box with the most queued records first (seed 004 §4.3).
    MostQueued,
}

#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub policy: Policy,
    pub capacity: usize,
    pub box_concurrency: usize,
    pub ordered_boxes: bool,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) pending: AtomicUsize,
    pub(crate) max_pending: AtomicUsize,
    pub sent: AtomicUsize,
    pub emitted: AtomicUsize,
    pub calls: AtomicUsize,
    pub failures: AtomicUsize,
    pub filtered: AtomicUsize,
    pub held: AtomicUsize,
    pub fired: AtomicUsize,
    /// Environment threads waiting for room to send, and for outputs or the end.
    pub(crate) senders: AtomicUsize,
    pub(crate) receivers: AtomicUsize,
}

// `pending` and the waiter counts are written by one side and read by the other (a sender announces
// itself, then reads `pending`; a worker lowers `pending`, then reads `waiters`): both must be
// sequentially consistent, or each may read the other's old value, and a sender waiting
// without a timeout misses its wake-up for good.
impl Counters {
    pub fn pending_add(&self, n: usize) {
        let now = self.pending.fetch_add(n, Ordering::SeqCst) + n;
        self.max_pending.fetch_max(now, Ordering::Relaxed);
    }

    /// Counts records done; wakes the environment when the network has drained to half its
    /// capacity (not at every record, which would wake it once per record) or is quiet.
    pub fn pending_sub(&self, n: usize, run: &RunShared) {
        let before = self.pending.fetch_sub(n, Ordering::SeqCst);
        let (now, half) = (before - n, run.config.capacity / 2);
        let room = before > half && now <= half && self.senders.load(Ordering::SeqCst) > 0;
        let quiet = now == 0
            && (self.senders.load(Ordering::SeqCst) > 0
                || self.receivers.load(Ordering::SeqCst) > 0);
        if room || quiet {
            let _guard = lock(&run.state);
            run.changed.notify_all();
        }
    }
}

/// State the environment waits on.
#[derive(Default)]
pub(crate) struct RunState {
    pub outputs: VecDeque<Record>,
    pub errors: Vec<SnetError>,
}

/// What every instance of a run shares.
pub(crate) struct RunShared {
    pub net: Arc<Network>,
    pub config: Config,
    pub funcs: Vec<SharedBoxFn>,
    pub executor: Executor,
    pub counters: Counters,
    pub boxes: Mutex<Vec<Weak<BoxInst>>>,
    /// The gates of ordered regions, for the records waiting at them.
    pub gates: Mutex<Vec<Weak<DetGate<Rec>>>>,
    pub state: Mutex<RunState>,
    pub changed: Condvar,
    pub closed: AtomicBool,
    /// Jobs of the most-queued policy looking for work.
    pub most_queued_jobs: AtomicUsize,
}

impl RunShared {
    pub(crate) fn output(&self, r: Rec) {
        let record = r.to_record(&self.net.labels);
        drop(r);
        self.counters.emitted.fetch_add(1, Ordering::Relaxed);
        let mut st = lock(&self.state);
        st.outputs.push_back(record);
        if self.counters.receivers.load(Ordering::Acquire) > 0 {
            self.changed.notify_all();
        }
    }

    pub(crate) fn fail(&self, e: SnetError) {
        if matches!(
            e,
            SnetError::BoxFailed { .. } | SnetError::BrokeSignature { .. }
        ) {
            self.counters.failures.fetch_add(1, Ordering::Relaxed);
        }
        let mut st = lock(&self.state);
        st.errors.push(e);
        self.changed.notify_all();
    }

    pub(crate) fn quiet(&self) -> bool {
        self.closed.load(Ordering::Acquire) && self.counters.pending.load(Ordering::Acquire) == 0
    }
}
