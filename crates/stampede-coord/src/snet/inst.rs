//! The instances of a running network: what each node of a checked network is while it
//! runs, and where the records each one emits go next. Stars and splits add replicas as
//! records need them; only boxes queue records.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::boxes::SharedBoxFn;
use super::det::DetGate;
use super::network::{BoxId, NodeId};
use super::record::Rec;

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
    Gate(Arc<DetGate<Rec>>, Arc<Cont>),
}

pub(crate) enum Inst {
    Box(Arc<BoxInst>),
    /// Entering a serial composition is entering its left operand (whose continuation holds
    /// the right one).
    Serial(Arc<Inst>),
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
        gate: Arc<DetGate<Rec>>,
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
    pub(crate) fn idle(&self) -> usize {
        self.scheduled - self.running
    }
}

#[derive(Default)]
pub(crate) struct Reorder {
    /// The sequence number whose outputs leave next.
    pub(crate) next: u64,
    pub(crate) waiting: std::collections::BTreeMap<u64, Vec<Rec>>,
}

pub(crate) struct StarInst {
    pub(crate) node: NodeId,
    pub(crate) body: NodeId,
    pub(crate) cont: Arc<Cont>,
    /// Replicas from `first` on (fired synchrocells at the front are dropped).
    pub(crate) replicas: Mutex<(usize, VecDeque<Arc<Inst>>)>,
    /// The operand is a lone synchrocell: a fired replica is the identity and is skipped.
    pub(crate) sync_body: bool,
    pub(crate) me: Weak<StarInst>,
}

pub(crate) struct SplitInst {
    pub(crate) node: NodeId,
    pub(crate) body: NodeId,
    pub(crate) cont: Arc<Cont>,
    pub(crate) replicas: Mutex<HashMap<i64, Arc<Inst>>>,
}

pub(crate) struct FeedbackInst {
    pub(crate) node: NodeId,
    pub(crate) body: OnceLock<Arc<Inst>>,
    pub(crate) cont: Arc<Cont>,
}

pub(crate) struct SyncInst {
    pub(crate) node: NodeId,
    pub(crate) cont: Arc<Cont>,
    pub(crate) state: Mutex<SyncState>,
    pub(crate) fired: AtomicBool,
}

pub(crate) struct SyncState {
    pub(crate) slots: Vec<Option<Rec>>,
    /// Records stored (one record may fill several slots).
    pub(crate) stored: usize,
}

/// Where a record is sent.
pub(crate) enum Target {
    Inst(Arc<Inst>),
    Cont(Arc<Cont>),
    /// Not a record's destination: this thread drains the gate's released records to the
    /// continuation (the record with it is empty). `true` once a ticket has been routed.
    Drain(Arc<DetGate<Rec>>, Arc<Cont>),
}
