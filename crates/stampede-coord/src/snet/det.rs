//! Keeping input order where the language promises it (`||`, `**`, `!!`, and a box that runs
//! several records at once).
//!
//! A record entering an ordered region takes a ticket with the next sequence number. Every
//! record descended from it (a box's outputs, a filter's copies, a synchrocell's merge of it)
//! holds a clone of the ticket. Records leaving the region wait at its gate until every
//! earlier ticket is done, that is, until no record holding it is left inside; then they leave
//! in ticket order, each ticket's records in the order they arrived.
//!
//! Released records are routed on by one thread at a time per gate (the drainer), each to
//! where it lands before the next: two threads each routing what they released could
//! otherwise overtake each other, and a later ticket's records reach the next box or the
//! output before an earlier one's.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// A record that carries tickets: its stack of them, innermost region last.
pub(crate) trait Ticketed: Sized {
    fn tickets(&mut self) -> &mut Vec<DetRef<Self>>;
}

/// What a gate does when a dropped ticket released records and nobody is draining the gate:
/// a drop cannot route them itself, so the run hands the draining to a job.
pub(crate) type Release<R> = Box<dyn Fn(&Arc<DetGate<R>>) + Send + Sync>;

/// The exit of one ordered region, for records of type `R`.
pub(crate) struct DetGate<R> {
    state: Mutex<GateState<R>>,
    release: Release<R>,
    /// Records waiting here, for the run's statistics.
    held: AtomicUsize,
}

struct GateState<R> {
    next: u64,
    /// The oldest ticket not yet released.
    head: u64,
    /// Per ticket: whether it is done, and its records waiting to leave.
    waiting: BTreeMap<u64, (bool, Vec<R>)>,
    /// Released tickets' records, in ticket order, not yet routed on.
    ready: VecDeque<Vec<R>>,
    /// Whether a thread (or a job on its way) is routing `ready`.
    draining: bool,
}

impl<R> Default for GateState<R> {
    fn default() -> Self {
        GateState {
            next: 0,
            head: 0,
            waiting: BTreeMap::new(),
            ready: VecDeque::new(),
            draining: false,
        }
    }
}

struct Ticket<R> {
    gate: Arc<DetGate<R>>,
    seq: u64,
    live: AtomicUsize,
}

/// One record's hold on a ticket (`None` only once given back at the gate).
pub(crate) struct DetRef<R>(Option<Arc<Ticket<R>>>);

impl<R> Clone for DetRef<R> {
    fn clone(&self) -> Self {
        let t = self.0.as_ref().expect("a held ticket");
        t.live.fetch_add(1, Ordering::Relaxed);
        DetRef(Some(t.clone()))
    }
}

impl<R> Drop for DetRef<R> {
    fn drop(&mut self) {
        let Some(t) = self.0.take() else { return };
        if t.live.fetch_sub(1, Ordering::AcqRel) == 1 && t.gate.done(t.seq) {
            (t.gate.release)(&t.gate);
        }
    }
}

impl<R> DetGate<R> {
    pub fn new(release: Release<R>) -> Arc<DetGate<R>> {
        Arc::new(DetGate {
            state: Mutex::new(GateState::default()),
            release,
            held: AtomicUsize::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState<R>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next released ticket's records, to route on in order; `None` once there are none,
    /// which ends the caller's turn as drainer.
    pub fn take(&self) -> Option<Vec<R>> {
        let mut st = self.lock();
        debug_assert!(st.draining, "only the drainer takes");
        let next = st.ready.pop_front();
        match &next {
            Some(recs) => {
                self.held.fetch_sub(recs.len(), Ordering::Relaxed);
            }
            None => st.draining = false,
        }
        next
    }

    /// Records waiting at this gate for earlier ones.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Marks a ticket done; true when the caller must have the gate drained.
    fn done(&self, seq: u64) -> bool {
        let mut st = self.lock();
        self.finish(&mut st, seq);
        Self::claim(&mut st)
    }

    /// Marks a ticket done and releases every ticket that may now leave, in order.
    fn finish(&self, st: &mut GateState<R>, seq: u64) {
        if let Some(entry) = st.waiting.get_mut(&seq) {
            entry.0 = true;
        }
        loop {
            let head = st.head;
            match st.waiting.get(&head) {
                Some((true, _)) => {
                    let (_, recs) = st.waiting.remove(&head).expect("present");
                    if !recs.is_empty() {
                        st.ready.push_back(recs);
                    }
                    st.head += 1;
                }
                _ => break,
            }
        }
    }

    /// Makes the caller the drainer if there is something to route and nobody routing it.
    fn claim(st: &mut GateState<R>) -> bool {
        if st.draining || st.ready.is_empty() {
            return false;
        }
        st.draining = true;
        true
    }
}

impl<R: Ticketed> DetGate<R> {
    /// Gives `rec` a ticket of this gate.
    pub fn enter(self: &Arc<Self>, rec: &mut R) {
        let seq = {
            let mut st = self.lock();
            let seq = st.next;
            st.next += 1;
            st.waiting.insert(seq, (false, Vec::new()));
            seq
        };
        rec.tickets().push(DetRef(Some(Arc::new(Ticket {
            gate: self.clone(),
            seq,
            live: AtomicUsize::new(1),
        }))));
    }

    /// `rec` leaves the region: it waits for earlier tickets. True when the caller must now
    /// drain the gate ([`DetGate::take`] until `None`).
    #[must_use]
    pub fn exit(&self, mut rec: R) -> bool {
        let mut held = rec
            .tickets()
            .pop()
            .expect("a record leaving an ordered region holds its ticket");
        let ticket = held.0.take().expect("a held ticket");
        debug_assert!(
            std::ptr::eq(&*ticket.gate, self),
            "tickets leave through their own gate"
        );
        let mut st = self.lock();
        if let Some(entry) = st.waiting.get_mut(&ticket.seq) {
            entry.1.push(rec);
            self.held.fetch_add(1, Ordering::Relaxed);
        }
        // Giving the ticket back may finish it.
        if ticket.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.finish(&mut st, ticket.seq);
        }
        Self::claim(&mut st)
    }
}
