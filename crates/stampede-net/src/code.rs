//! Named remote code: handlers an address space serves by name, which any space of the
//! application invokes with an argument item.
//!
//! An invocation travels on `code/<callee>/<caller>`, published with back-pressure, so the
//! invocations one caller makes reach a callee in the order they were made. They are put
//! through the session rather than a declared publisher: right after a publisher is
//! declared, before the declarations answering its interest arrive, Zenoh 1.10 can drop
//! what it publishes from a peer to its router, and an invocation must not be lost. The callee runs handlers on one thread of its own
//! (`stampede-code`, started with the first invocation), in the order they arrived and never
//! on Zenoh's threads; a handler with long work hands it to threads of its own and returns.
//!
//! Every invocation ends at the callee in one of three ways: done, an unknown name, or a
//! failed handler (an error it returned, or a panic). A call's caller waits for that answer
//! (on `answer/<caller>/<callee>`); the caller of a one-way invocation hears only of
//! failures, which count in its `SpaceStats::invocations_failed` and go to its failure
//! listeners ([`Space::on_invoke_failure`](crate::Space::on_invoke_failure)). A callee that
//! leaves or dies fails the calls waiting for it.

use std::collections::HashMap;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use stampede_core::Item;
use zenoh::Wait as _;

use crate::space::{lock, Shared};
use crate::wire::{self, Answer, Invoke, Outcome, WireItem};
use crate::zbytes;

/// A handler of named code: given the calling address space's id and the argument, its
/// result (the answer to a call) or why it failed.
pub(crate) type Handler = dyn Fn(&str, Item) -> Result<Item, String> + Send + Sync;

/// A listener of the failures of one-way invocations.
pub(crate) type FailureListener = dyn Fn(&InvokeError) + Send + Sync;

/// Why an invocation of named code did not give a result.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvokeError {
    /// The name cannot be used (empty, an empty `/` part, or one of `*$?#`).
    InvalidName(String),
    /// The address space serves nothing under this name.
    Unknown {
        /// The address space invoked.
        space: String,
        /// The name.
        name: String,
    },
    /// The handler returned an error or panicked.
    Failed {
        /// The address space that ran it.
        space: String,
        /// The name.
        name: String,
        /// What it said.
        message: String,
    },
    /// The address space left, died or is not one this space knows alive, or the
    /// invocation could not be sent.
    Unreachable {
        /// The address space invoked.
        space: String,
        /// Why.
        reason: String,
    },
    /// No answer came within the wait.
    Timeout {
        /// The address space invoked.
        space: String,
        /// The name.
        name: String,
    },
}

impl InvokeError {
    /// The project's stable code for this error.
    pub fn code(&self) -> stampede_core::ErrorCode {
        use stampede_core::ErrorCode;
        match self {
            InvokeError::InvalidName(_) => ErrorCode::InvalidName,
            InvokeError::Unknown { .. } => ErrorCode::NotFound,
            InvokeError::Failed { .. } => ErrorCode::TaskFailed,
            InvokeError::Unreachable { .. } => ErrorCode::Unreachable,
            InvokeError::Timeout { .. } => ErrorCode::Timeout,
        }
    }

    /// The address space invoked, if the invocation got as far as naming one.
    pub fn space(&self) -> Option<&str> {
        match self {
            InvokeError::InvalidName(_) => None,
            InvokeError::Unknown { space, .. }
            | InvokeError::Failed { space, .. }
            | InvokeError::Unreachable { space, .. }
            | InvokeError::Timeout { space, .. } => Some(space),
        }
    }
}

impl fmt::Display for InvokeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvokeError::InvalidName(n) => write!(f, "{n:?} cannot name remote code"),
            InvokeError::Unknown { space, name } => {
                write!(f, "address space {space} serves no code named {name:?}")
            }
            InvokeError::Failed {
                space,
                name,
                message,
            } => write!(f, "{name:?} failed in address space {space}: {message}"),
            InvokeError::Unreachable { space, reason } => {
                write!(f, "address space {space} unreachable: {reason}")
            }
            InvokeError::Timeout { space, name } => {
                write!(
                    f,
                    "no answer from {name:?} in address space {space} in time"
                )
            }
        }
    }
}

impl std::error::Error for InvokeError {}

/// Where a call's answer is delivered.
pub(crate) type Answers = Receiver<Result<Item, InvokeError>>;

/// A call this space waits for the answer to.
struct Pending {
    space: String,
    tx: Sender<Result<Item, InvokeError>>,
}

/// Work for the dispatching thread.
enum Job {
    /// Run a handler for `caller`.
    Run { caller: String, msg: Invoke },
    /// Tell the failure listeners.
    Failure(InvokeError),
}

/// The registry of one address space: what it serves, the calls it waits for, its
/// listeners.
#[derive(Default)]
pub(crate) struct Code {
    handlers: RwLock<HashMap<String, Arc<Handler>>>,
    /// The dispatching thread's inbox, once it runs.
    inbox: Mutex<Option<Sender<Job>>>,
    pending: Mutex<HashMap<u64, Pending>>,
    next: AtomicU64,
    listeners: Mutex<Vec<(u64, Arc<FailureListener>)>>,
    next_listener: AtomicU64,
    pub(crate) counters: CodeCounters,
}

/// What the registry counts (see `SpaceStats`).
#[derive(Debug, Default)]
pub(crate) struct CodeCounters {
    pub(crate) sent: AtomicU64,
    pub(crate) served: AtomicU64,
    pub(crate) unknown: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) late: AtomicU64,
}

impl Code {
    pub(crate) fn serve(&self, name: &str, handler: Arc<Handler>) -> bool {
        let mut h = self.handlers.write().unwrap_or_else(|e| e.into_inner());
        if h.contains_key(name) {
            return false;
        }
        h.insert(name.to_owned(), handler);
        true
    }

    pub(crate) fn unserve(&self, name: &str) -> bool {
        self.handlers
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name)
            .is_some()
    }

    pub(crate) fn listen(&self, f: Arc<FailureListener>) -> u64 {
        let id = self.next_listener.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&self.listeners).push((id, f));
        id
    }

    pub(crate) fn unlisten(&self, id: u64) -> bool {
        let mut l = lock(&self.listeners);
        let before = l.len();
        l.retain(|(i, _)| *i != id);
        l.len() != before
    }

    /// `space` left: the calls waiting for it fail.
    pub(crate) fn space_left(&self, space: &str) {
        let gone: Vec<Pending> = {
            let mut p = lock(&self.pending);
            let seqs: Vec<u64> = p
                .iter()
                .filter(|(_, w)| w.space == space)
                .map(|(s, _)| *s)
                .collect();
            seqs.into_iter().filter_map(|s| p.remove(&s)).collect()
        };
        for w in gone {
            let _ = w.tx.send(Err(InvokeError::Unreachable {
                space: w.space,
                reason: "it left or died".into(),
            }));
        }
    }

    /// This space is leaving: the dispatching thread ends.
    pub(crate) fn close(&self) {
        lock(&self.inbox).take();
    }

    /// Hands `job` to the dispatching thread, starting it first if need be.
    fn dispatch(&self, sh: &Arc<Shared>, job: Job) {
        let mut inbox = lock(&self.inbox);
        if inbox.is_none() {
            let (tx, rx) = crossbeam_channel::unbounded();
            let weak = Arc::downgrade(sh);
            let started = std::thread::Builder::new()
                .name("stampede-code".into())
                .spawn(move || run(weak, rx));
            if let Err(e) = started {
                tracing::error!("could not start the thread that runs named code: {e}");
                return;
            }
            *inbox = Some(tx);
        }
        if let Some(tx) = inbox.as_ref() {
            let _ = tx.send(job);
        }
    }
}

fn run(weak: Weak<Shared>, rx: Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        let Some(sh) = weak.upgrade() else { return };
        match job {
            Job::Run { caller, msg } => run_one(&sh, &caller, msg),
            Job::Failure(e) => {
                let listeners: Vec<_> = lock(&sh.code.listeners)
                    .iter()
                    .map(|(_, f)| f.clone())
                    .collect();
                for f in listeners {
                    f(&e);
                }
            }
        }
    }
}

fn run_one(sh: &Arc<Shared>, caller: &str, msg: Invoke) {
    let handler = sh
        .code
        .handlers
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&msg.name)
        .cloned();
    let outcome = match handler {
        None => {
            sh.code.counters.unknown.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(caller, name = msg.name, "invocation of unknown code");
            Outcome::Unknown
        }
        Some(h) => {
            sh.code.counters.served.fetch_add(1, Ordering::Relaxed);
            let arg = Item::from_wire(msg.arg.tag, msg.arg.data);
            match catch_unwind(AssertUnwindSafe(|| h(caller, arg))) {
                Ok(Ok(item)) => Outcome::Done(WireItem {
                    tag: item.tag(),
                    data: item.wire().clone(),
                }),
                Ok(Err(m)) => Outcome::Failed(m),
                Err(panic) => Outcome::Failed(format!(
                    "panicked: {}",
                    panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a panic".to_owned())
                )),
            }
        }
    };
    if !msg.answer && matches!(outcome, Outcome::Done(_)) {
        return;
    }
    let answer = Answer {
        seq: msg.seq,
        name: msg.name,
        outcome,
    };
    if caller == sh.id {
        answered(sh, &sh.id.clone(), answer);
        return;
    }
    if sh.is_dead(caller) {
        return;
    }
    let f = zbytes::frame(&sh.counters.sends, wire::encode_answer(&answer));
    let sent = publish(sh, sh.key("answer", &format!("{caller}/{}", sh.id)), f);
    if let Err(e) = sent {
        sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(caller, "answer to an invocation not sent: {e}");
    }
}

/// Publishes `f` on `key` with back-pressure.
fn publish(sh: &Shared, key: String, f: zbytes::Framed) -> Result<(), String> {
    sh.session
        .put(key, f.payload)
        .attachment(f.attachment)
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .wait()
        .map_err(|e| crate::error::zenoh_text(&e))
}

/// An invocation another space (or this one) sent here.
pub(crate) fn received(sh: &Arc<Shared>, caller: &str, s: &zenoh::sample::Sample) {
    match wire::decode_invoke(zbytes::to_parts(s.payload(), s.attachment())) {
        Ok(msg) => {
            if sh.is_dead(caller) {
                sh.counters.refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            sh.code.dispatch(
                sh,
                Job::Run {
                    caller: caller.to_owned(),
                    msg,
                },
            );
        }
        Err(e) => {
            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(caller, "malformed invocation: {e}");
        }
    }
}

/// An answer from `callee`, as a sample.
pub(crate) fn answer_received(sh: &Arc<Shared>, callee: &str, s: &zenoh::sample::Sample) {
    match wire::decode_answer(zbytes::to_parts(s.payload(), s.attachment())) {
        Ok(a) => answered(sh, callee, a),
        Err(e) => {
            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(callee, "malformed answer: {e}");
        }
    }
}

fn answered(sh: &Arc<Shared>, callee: &str, a: Answer) {
    let space = callee.to_owned();
    let result = match a.outcome {
        Outcome::Done(item) => Ok(Item::from_wire(item.tag, item.data)),
        Outcome::Unknown => Err(InvokeError::Unknown {
            space,
            name: a.name,
        }),
        Outcome::Failed(message) => Err(InvokeError::Failed {
            space,
            name: a.name,
            message,
        }),
    };
    if result.is_err() {
        sh.code.counters.failed.fetch_add(1, Ordering::Relaxed);
    }
    let waiting = lock(&sh.code.pending).remove(&a.seq);
    match (waiting, result) {
        (Some(w), r) => {
            let _ = w.tx.send(r);
        }
        (None, Err(e)) => {
            tracing::warn!("{e}");
            sh.code.dispatch(sh, Job::Failure(e));
        }
        (None, Ok(_)) => {
            sh.code.counters.late.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Sends an invocation of `name` on `space`; with `answer`, returns the receiver of its
/// answer.
pub(crate) fn invoke(
    sh: &Arc<Shared>,
    space: &str,
    name: &str,
    arg: Item,
    answer: bool,
) -> Result<(u64, Option<Answers>), InvokeError> {
    if !crate::space::valid_name(name) {
        return Err(InvokeError::InvalidName(name.to_owned()));
    }
    let unreachable = |reason: &str| InvokeError::Unreachable {
        space: space.to_owned(),
        reason: reason.to_owned(),
    };
    if space != sh.id {
        if sh.is_dead(space) {
            return Err(unreachable("it left or died"));
        }
        if !sh.members.is_live(space) {
            return Err(unreachable(
                "not an address space of the application this one knows alive",
            ));
        }
    }
    let code = &sh.code;
    let seq = code.next.fetch_add(1, Ordering::Relaxed) + 1;
    let rx = answer.then(|| {
        let (tx, rx) = crossbeam_channel::bounded(1);
        lock(&code.pending).insert(
            seq,
            Pending {
                space: space.to_owned(),
                tx,
            },
        );
        rx
    });
    let msg = Invoke {
        seq,
        answer,
        name: name.to_owned(),
        arg: WireItem {
            tag: arg.tag(),
            data: arg.wire().clone(),
        },
    };
    code.counters.sent.fetch_add(1, Ordering::Relaxed);
    if space == sh.id {
        code.dispatch(
            sh,
            Job::Run {
                caller: sh.id.clone(),
                msg,
            },
        );
        return Ok((seq, rx));
    }
    let f = zbytes::frame(&sh.counters.sends, wire::encode_invoke(&msg));
    let sent = publish(sh, sh.key("code", &format!("{space}/{}", sh.id)), f);
    match sent {
        Ok(()) => Ok((seq, rx)),
        Err(e) => {
            lock(&code.pending).remove(&seq);
            sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
            Err(unreachable(&format!("not sent: {e}")))
        }
    }
}

/// A call of named code on an address space, from [`Space::call`](crate::Space::call): wait
/// for its answer with [`wait`](Call::wait) or [`wait_timeout`](Call::wait_timeout).
/// Dropped unanswered, its answer is not waited for (and counts as late if it comes).
pub struct Call {
    sh: Weak<Shared>,
    seq: u64,
    space: String,
    name: String,
    rx: Answers,
    limit: Duration,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("space", &self.space)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Call {
    pub(crate) fn new(sh: &Arc<Shared>, seq: u64, space: &str, name: &str, rx: Answers) -> Call {
        Call {
            sh: Arc::downgrade(sh),
            seq,
            space: space.to_owned(),
            name: name.to_owned(),
            rx,
            limit: sh.cfg.op_timeout,
        }
    }

    /// The handler's result, waiting up to the space's `Config::op_timeout`.
    pub fn wait(self) -> Result<Item, InvokeError> {
        let limit = self.limit;
        self.wait_timeout(limit)
    }

    /// The handler's result, waiting up to `timeout`.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Item, InvokeError> {
        match self.rx.recv_timeout(timeout) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => Err(InvokeError::Timeout {
                space: self.space.clone(),
                name: self.name.clone(),
            }),
            Err(RecvTimeoutError::Disconnected) => Err(InvokeError::Unreachable {
                space: self.space.clone(),
                reason: "this address space left its application".into(),
            }),
        }
    }

    /// The result if the answer is in, without waiting.
    pub fn try_result(&self) -> Option<Result<Item, InvokeError>> {
        self.rx.try_recv().ok()
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if let Some(sh) = self.sh.upgrade() {
            lock(&sh.code.pending).remove(&self.seq);
        }
    }
}
