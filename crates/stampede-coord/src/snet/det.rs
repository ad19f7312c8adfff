//! Keeping input order where the language promises it (`||`, `**`, `!!`, and a box that runs
//! several records at once).
//!
//! A record entering an ordered region takes a ticket with the next sequence number. Every
//! record descended from it (a box's outputs, a filter's copies, a synchrocell's merge of it)
//! holds a clone of the ticket. Records leaving the region wait at its gate until every
//! earlier ticket is done, that is, until no record holding it is left inside; then they leave
//! in ticket order, each ticket's records in the order they arrived.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::record::Rec;

/// What a gate does with records a dropped ticket released (a drop cannot route them
/// itself, so the run hands them to a job).
pub(crate) type Release = Box<dyn Fn(Vec<Rec>) + Send + Sync>;

/// The exit of one ordered region.
pub(crate) struct DetGate {
    state: Mutex<GateState>,
    release: Release,
}

#[derive(Default)]
struct GateState {
    next: u64,
    /// The oldest ticket not yet released.
    head: u64,
    /// Per ticket: whether it is done, and its records waiting to leave.
    waiting: BTreeMap<u64, (bool, Vec<Rec>)>,
}

struct Ticket {
    gate: Arc<DetGate>,
    seq: u64,
    live: AtomicUsize,
}

/// One record's hold on a ticket (`None` only once given back at the gate).
pub(crate) struct DetRef(Option<Arc<Ticket>>);

impl Clone for DetRef {
    fn clone(&self) -> Self {
        let t = self.0.as_ref().expect("a held ticket");
        t.live.fetch_add(1, Ordering::Relaxed);
        DetRef(Some(t.clone()))
    }
}

impl Drop for DetRef {
    fn drop(&mut self) {
        let Some(t) = self.0.take() else { return };
        if t.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            let released = t.gate.done(t.seq);
            if !released.is_empty() {
                (t.gate.release)(released);
            }
        }
    }
}

impl DetGate {
    pub fn new(release: Release) -> Arc<DetGate> {
        Arc::new(DetGate {
            state: Mutex::new(GateState::default()),
            release,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives `rec` a ticket of this gate.
    pub fn enter(self: &Arc<Self>, rec: &mut Rec) {
        let seq = {
            let mut st = self.lock();
            let seq = st.next;
            st.next += 1;
            st.waiting.insert(seq, (false, Vec::new()));
            seq
        };
        rec.det.push(DetRef(Some(Arc::new(Ticket {
            gate: self.clone(),
            seq,
            live: AtomicUsize::new(1),
        }))));
    }

    /// `rec` leaves the region: it waits for earlier tickets. Returns what may leave now.
    pub fn exit(&self, mut rec: Rec) -> Vec<Rec> {
        let mut held = rec
            .det
            .pop()
            .expect("a record leaving an ordered region holds its ticket");
        let ticket = held.0.take().expect("a held ticket");
        debug_assert!(
            std::ptr::eq(&*ticket.gate, self),
            "tickets leave through their own gate"
        );
        {
            let mut st = self.lock();
            if let Some(entry) = st.waiting.get_mut(&ticket.seq) {
                entry.1.push(rec);
            }
        }
        // Giving the ticket back may finish it; what that releases returns to the caller,
        // which routes it.
        if ticket.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.done(ticket.seq)
        } else {
            Vec::new()
        }
    }

    /// Marks a ticket done and releases every record that may now leave, in order.
    fn done(&self, seq: u64) -> Vec<Rec> {
        let mut st = self.lock();
        if let Some(entry) = st.waiting.get_mut(&seq) {
            entry.0 = true;
        }
        let mut out = Vec::new();
        loop {
            let head = st.head;
            match st.waiting.get(&head) {
                Some((true, _)) => {
                    let (_, recs) = st.waiting.remove(&head).expect("present");
                    out.extend(recs);
                    st.head += 1;
                }
                _ => break,
            }
        }
        out
    }
}
