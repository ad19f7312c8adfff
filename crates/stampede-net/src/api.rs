//! Containers, tasks and connections that work the same whether a container is owned by
//! this address space or another one.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stampede_core::{
    self as core, ContainerId, ErrorCode as Code, Figures, GetError, Item, Neighbors, PutError,
    PutErrorKind, PutOptions, QueueItem, Selector, StmError, Timestamp, Wait, ZoneId,
};
use zenoh::Wait as _;

use crate::error::zenoh_text;
use crate::space::{lock, Shared, Space};
use crate::wire::{self, ErrorCode, NameRecord, Reply, Request, TaskRef, WireItem};
use crate::zbytes;

/// How long a get waits for an item its owner said was pushed before fetching it.
const PUSH_WAIT: Duration = Duration::from_millis(50);

/// Sends `req` to `owner` and waits for its answer, failing when the owner is known to have
/// left or does not answer within the configured timeout.
pub(crate) fn call(sh: &Shared, owner: &str, req: &Request) -> Result<Reply, String> {
    let fail = |why: String| {
        tracing::warn!("{why}");
        sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
        Err(why)
    };
    if sh.is_dead(owner) {
        return fail(format!("address space {owner} has left"));
    }
    let limit = sh.cfg.op_timeout + sh.cfg.wait_slice;
    let payload = zbytes::from_encoded(wire::encode_request(req));
    let replies = match sh
        .session
        .get(sh.key("op", owner))
        .payload(payload)
        .timeout(limit)
        .consolidation(zenoh::query::ConsolidationMode::None)
        .wait()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("request to {owner} not sent: {}", zenoh_text(&e))),
    };
    let start = Instant::now();
    loop {
        match replies.recv_timeout(Duration::from_millis(50)) {
            Ok(Some(r)) => {
                return match r.result() {
                    Ok(s) => match wire::decode_reply(zbytes::to_bytes(s.payload())) {
                        Ok(r) => Ok(r),
                        Err(e) => fail(format!("malformed reply from {owner}: {e}")),
                    },
                    Err(e) => fail(format!(
                        "error from {owner}: {}",
                        String::from_utf8_lossy(&e.payload().to_bytes())
                    )),
                };
            }
            Ok(None) => {
                if sh.is_dead(owner) {
                    return fail(format!("address space {owner} left or died"));
                }
                if start.elapsed() > limit {
                    return fail(format!("no answer from {owner} within {limit:?}"));
                }
            }
            Err(_) => {
                let why = if sh.is_dead(owner) {
                    format!("address space {owner} left or died")
                } else {
                    format!("no answer from {owner}")
                };
                return fail(why);
            }
        }
    }
}

/// Sends without waiting for the answer (detaches and exits, which cannot fail usefully).
fn send(sh: &Shared, owner: &str, req: &Request) {
    if sh.is_dead(owner) {
        return;
    }
    let payload = zbytes::from_encoded(wire::encode_request(req));
    let _ = sh
        .session
        .get(sh.key("op", owner))
        .payload(payload)
        .timeout(sh.cfg.op_timeout)
        .callback(|_| {})
        .wait();
}

/// Calls with a wait: the owner waits one slice at a time, and the request is repeated with
/// the time left until the answer comes or `wait` runs out (then `Reply::Again`).
fn call_waiting(
    sh: &Shared,
    owner: &str,
    wait: Wait,
    make: impl Fn(Wait) -> Request,
) -> Result<Reply, String> {
    call_waiting_until(sh, owner, wait, None, make).map(|r| r.expect("never interrupted"))
}

/// [`call_waiting`], asking `interrupted` between the slices a blocked request waits at its
/// owner; `None` when it asked to stop.
fn call_waiting_until(
    sh: &Shared,
    owner: &str,
    wait: Wait,
    interrupted: Option<&dyn Fn() -> bool>,
    make: impl Fn(Wait) -> Request,
) -> Result<Option<Reply>, String> {
    let deadline = match wait {
        Wait::For(d) => Some(Instant::now() + d),
        _ => None,
    };
    loop {
        let w = match (wait, deadline) {
            (Wait::For(_), Some(d)) => Wait::For(d.saturating_duration_since(Instant::now())),
            (w, _) => w,
        };
        let r = call(sh, owner, &make(w))?;
        if !matches!(r, Reply::Again) {
            return Ok(Some(r));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Some(r));
        }
        if interrupted.is_some_and(|stop| stop()) {
            return Ok(None);
        }
    }
}

/// A failure an owner reported: the core's code, its figures and text. A container or
/// connection the owner no longer has is, for the requester, closed or detached.
fn failure(r: Reply, owner: &str) -> Option<(Code, Figures, String)> {
    match r {
        Reply::Error { code, a, b, text } => {
            let code = match code {
                ErrorCode::Stm(c) => c,
                ErrorCode::UnknownContainer => Code::Closed,
                ErrorCode::UnknownConnection => Code::Detached,
                ErrorCode::Malformed | ErrorCode::Other => {
                    tracing::warn!(owner, "refused: {text}");
                    return None;
                }
            };
            Some((code, (a, b), text))
        }
        other => {
            tracing::warn!(owner, "{}", crate::server::unexpected(&other));
            None
        }
    }
}

fn get_error(r: Reply, owner: &str) -> GetError {
    if matches!(r, Reply::Again) {
        return GetError::Timeout(Neighbors::default());
    }
    failure(r, owner)
        .and_then(|(code, figures, text)| {
            GetError::from_code(code, figures).or_else(|| misfit("get", code, &text, owner))
        })
        .unwrap_or(GetError::Unreachable)
}

/// Logs an owner's error that no operation of this kind fails with; the caller reports it
/// as unreachable.
fn misfit<T>(op: &str, code: Code, text: &str, owner: &str) -> Option<T> {
    tracing::warn!(owner, "{op} failed with {code}: {text}");
    None
}

fn put_kind(r: Reply, owner: &str) -> PutErrorKind {
    if matches!(r, Reply::Again) {
        return PutErrorKind::Full;
    }
    failure(r, owner)
        .and_then(|(code, (a, _), text)| {
            PutErrorKind::from_code(code, a).or_else(|| misfit("put", code, &text, owner))
        })
        .unwrap_or(PutErrorKind::Unreachable)
}

fn stm_error(r: Reply, owner: &str) -> StmError {
    let Some((code, figures, text)) = failure(r.clone(), owner) else {
        return StmError::Unreachable(match r {
            Reply::Error { text, .. } => format!("{owner}: {text}"),
            other => crate::server::unexpected(&other),
        });
    };
    StmError::from_code(code, figures, &text).unwrap_or(StmError::InvalidArgument(
        format!("{owner} refused: {text}").into(),
    ))
}

/// A container of another address space, as found in the name server.
#[allow(unreachable_pub, missing_debug_implementations)]
pub struct Remote {
    sh: Arc<Shared>,
    rec: NameRecord,
}

impl Remote {
    fn key(&self) -> (String, u64) {
        (self.rec.space.clone(), self.rec.container)
    }
}

macro_rules! container {
    ($(#[$doc:meta])* $name:ident, $core:ty) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            repr: Repr<$core>,
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("name", &self.name())
                    .field("owner", &self.owner())
                    .finish()
            }
        }

        impl $name {
            pub(crate) fn local(c: $core) -> Self {
                $name { repr: Repr::Local(c) }
            }

            pub(crate) fn remote(sh: Arc<Shared>, rec: NameRecord) -> Self {
                $name { repr: Repr::Remote(Arc::new(Remote { sh, rec })) }
            }

            /// The registered name, if any.
            pub fn name(&self) -> Option<String> {
                match &self.repr {
                    Repr::Local(c) => c.name().map(str::to_owned),
                    Repr::Remote(r) => Some(r.rec.name.clone()),
                }
            }

            /// The owning address space, if another one.
            pub fn owner(&self) -> Option<&str> {
                match &self.repr {
                    Repr::Local(_) => None,
                    Repr::Remote(r) => Some(&r.rec.space),
                }
            }

            /// The container in this address space, if it lives here.
            pub fn as_local(&self) -> Option<&$core> {
                match &self.repr {
                    Repr::Local(c) => Some(c),
                    Repr::Remote(_) => None,
                }
            }

            /// The container's time zone.
            pub fn zone(&self) -> ZoneId {
                match &self.repr {
                    Repr::Local(c) => core::Container::zone(c),
                    Repr::Remote(r) => ZoneId(r.rec.zone),
                }
            }

            /// Closes the container, wherever it lives.
            pub fn close(&self) -> Result<(), StmError> {
                match &self.repr {
                    Repr::Local(c) => {
                        c.close();
                        Ok(())
                    }
                    Repr::Remote(r) => {
                        let req = Request::Close { container: r.rec.container };
                        match call(&r.sh, &r.rec.space, &req) {
                            Ok(Reply::Ok) => Ok(()),
                            Ok(other) => Err(stm_error(other, &r.rec.space)),
                            Err(e) => Err(StmError::Unreachable(e)),
                        }
                    }
                }
            }
        }

        impl sealed::Sealed for $name {
            type Core = $core;
            fn repr(&self) -> &Repr<$core> {
                &self.repr
            }
        }

        impl Container for $name {}

        impl From<$core> for $name {
            fn from(c: $core) -> Self {
                $name::local(c)
            }
        }
    };
}

container!(
    /// A channel: one item per timestamp, random access by timestamp; owned here or elsewhere.
    Channel,
    core::Channel
);
container!(
    /// A queue: FIFO, each item delivered once; owned here or elsewhere.
    Queue,
    core::Queue
);
container!(
    /// A register: one value, overwritten by each write; owned here or elsewhere.
    Register,
    core::Register
);

mod sealed {
    #![allow(unreachable_pub)]
    use std::sync::Arc;

    use super::Remote;

    pub trait Sealed {
        type Core: stampede_core::Container;
        fn repr(&self) -> &Repr<Self::Core>;
    }

    #[allow(missing_debug_implementations)]
    pub enum Repr<C> {
        Local(C),
        Remote(Arc<Remote>),
    }

    impl<C: Clone> Clone for Repr<C> {
        fn clone(&self) -> Self {
            match self {
                Repr::Local(c) => Repr::Local(c.clone()),
                Repr::Remote(r) => Repr::Remote(r.clone()),
            }
        }
    }
}
use sealed::Repr;

/// A channel, queue or register of a distributed application.
pub trait Container: sealed::Sealed + Clone + Send + Sync + 'static {}

struct TaskShared {
    /// The address space; `None` for a task of a runtime that joined no application.
    sh: Option<Arc<Shared>>,
    core: core::Task,
    /// Address spaces holding a proxy of this task.
    owners: Mutex<HashSet<String>>,
}

impl TaskShared {
    fn tref(&self) -> TaskRef {
        TaskRef {
            space: self.sh.as_ref().map(|s| s.id.clone()).unwrap_or_default(),
            task: self.core.id().0,
            zone: self.core.zone().0,
        }
    }
}

impl Drop for TaskShared {
    fn drop(&mut self) {
        let owners = std::mem::take(&mut *lock(&self.owners));
        let Some(sh) = &self.sh else { return };
        let task = self.tref();
        for o in owners {
            send(sh, &o, &Request::TaskExit { task: task.clone() });
        }
    }
}

/// A task: the core [`Task`](stampede_core::Task) plus connections to containers of other
/// address spaces. Dropping it detaches everything, here and at the owners.
pub struct Task {
    t: Arc<TaskShared>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("core", &self.t.core.id())
            .finish()
    }
}

impl Task {
    pub(crate) fn new(sh: Option<Arc<Shared>>, core: core::Task) -> Task {
        Task {
            t: Arc::new(TaskShared {
                sh,
                core,
                owners: Mutex::default(),
            }),
        }
    }

    /// The task in the local runtime.
    pub fn core(&self) -> &core::Task {
        &self.t.core
    }

    /// A task of a runtime that joined no application: it works with that runtime's own
    /// containers, through the same API as a task of an address space.
    pub fn from_core(core: core::Task) -> Task {
        Task::new(None, core)
    }

    /// The address space the task runs in, if its runtime joined an application.
    pub fn space(&self) -> Option<Space> {
        self.t.sh.clone().map(|sh| Space { sh })
    }

    /// The task's virtual time.
    pub fn virtual_time(&self) -> Timestamp {
        self.t.core.virtual_time()
    }

    /// Virtual time, open items (here and at owners) and puts in flight, whichever is least.
    pub fn visibility(&self) -> Timestamp {
        self.t.core.visibility()
    }

    /// Sets the virtual time (rule 4: at or above visibility).
    pub fn set_virtual_time(&self, vt: Timestamp) -> Result<(), StmError> {
        self.t.core.set_virtual_time(vt)
    }

    /// A child task at `vt` (rule 2: at or above this task's visibility).
    pub fn child(&self, vt: Timestamp) -> Result<Task, StmError> {
        let c = self.t.core.child().virtual_time(vt).create()?;
        Ok(Task::new(self.t.sh.clone(), c))
    }

    fn remote_attach(&self, r: &Arc<Remote>, input: bool) -> Result<RemoteConn, StmError> {
        match &self.t.sh {
            Some(sh) if Arc::ptr_eq(sh, &r.sh) => {}
            _ => {
                return Err(StmError::InvalidArgument(
                    "the container was found through another address space than the task's".into(),
                ))
            }
        }
        let owner = &r.rec.space;
        lock(&self.t.owners).insert(owner.clone());
        let req = Request::Attach {
            task: self.t.tref(),
            container: r.rec.container,
            input,
            vis: self.t.core.visibility(),
        };
        match call(&r.sh, owner, &req) {
            Ok(Reply::Attached { conn }) => Ok(RemoteConn {
                remote: r.clone(),
                task: self.t.clone(),
                id: conn,
                open: Mutex::default(),
            }),
            Ok(other) => Err(stm_error(other, owner)),
            Err(e) => Err(StmError::Unreachable(e)),
        }
    }

    /// Attaches an input connection (rule 3 applies with this task's visibility).
    pub fn attach_input<C: Container>(&self, c: &C) -> Result<InputConnection<C>, StmError> {
        let repr = match c.repr() {
            Repr::Local(l) => ConnRepr::Local(self.t.core.attach_input(l)?),
            Repr::Remote(r) => ConnRepr::Remote(self.remote_attach(r, true)?),
        };
        Ok(InputConnection {
            container: c.clone(),
            repr,
        })
    }

    /// Attaches an output connection.
    pub fn attach_output<C: Container>(&self, c: &C) -> Result<OutputConnection<C>, StmError> {
        let repr = match c.repr() {
            Repr::Local(l) => OutRepr::Local(self.t.core.attach_output(l)?),
            Repr::Remote(r) => {
                if ZoneId(r.rec.zone) != self.t.core.zone() {
                    return Err(StmError::ZoneMismatch {
                        task: self.t.core.zone(),
                        container: ZoneId(r.rec.zone),
                    });
                }
                OutRepr::Remote(self.remote_attach(r, false)?)
            }
        };
        Ok(OutputConnection {
            container: c.clone(),
            repr,
        })
    }

    /// Ends the task.
    pub fn exit(self) {}
}

/// What a remote input connection holds open, mirrored in its task's visibility.
#[derive(Default)]
struct Open {
    /// Channel items open, by timestamp.
    items: BTreeSet<Timestamp>,
    /// Queue items held, by ticket.
    tickets: HashMap<u64, Timestamp>,
}

struct RemoteConn {
    remote: Arc<Remote>,
    task: Arc<TaskShared>,
    id: u64,
    open: Mutex<Open>,
}

impl RemoteConn {
    fn owner(&self) -> &str {
        &self.remote.rec.space
    }
    fn zone(&self) -> ZoneId {
        ZoneId(self.remote.rec.zone)
    }
    fn sh(&self) -> &Shared {
        &self.remote.sh
    }

    fn put(
        &self,
        ts: Timestamp,
        item: Item,
        consumers: Option<u32>,
        wait: Wait,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<u64, PutError> {
        let consumers = match consumers {
            Some(0) => return Err(PutError::new(PutErrorKind::ZeroConsumers, ts, item)),
            Some(n) => n,
            None => 0,
        };
        let core = &self.task.core;
        let vis = core.visibility();
        let cid = ContainerId(self.remote.rec.container);
        core.add_remote_put(ts, cid);
        let wi = WireItem {
            tag: item.tag(),
            data: item.wire().clone(),
        };
        let tref = self.task.tref();
        let r = call_waiting_until(self.sh(), self.owner(), wait, interrupted, |w| {
            Request::Put {
                task: tref.clone(),
                conn: self.id,
                vis,
                ts,
                consumers,
                wait: w,
                item: wi.clone(),
            }
        });
        core.remove_remote_put(ts, cid);
        match r {
            Ok(Some(Reply::Stored { seq })) => Ok(seq),
            Ok(Some(other)) => Err(PutError::new(put_kind(other, self.owner()), ts, item)),
            Ok(None) => Err(PutError::new(PutErrorKind::Interrupted, ts, item)),
            Err(_) => Err(PutError::new(PutErrorKind::Unreachable, ts, item)),
        }
    }

    fn get(
        &self,
        sel: Selector,
        wait: Wait,
        cacheable: bool,
    ) -> Result<(Timestamp, u64, Item), GetError> {
        let key = self.remote.key();
        let cached: Vec<Timestamp> = if cacheable {
            lock(&self.sh().cache)
                .items
                .get(&key)
                .map(|m| m.keys().rev().take(wire::MAX_CACHED).copied().collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let tref = self.task.tref();
        let r = call_waiting(self.sh(), self.owner(), wait, |w| Request::Get {
            task: tref.clone(),
            conn: self.id,
            sel,
            wait: w,
            cached: cached.clone(),
        });
        let (ts, seq, floor, item) = match r {
            Ok(Reply::Item {
                ts,
                seq,
                floor,
                item,
            }) => (ts, seq, floor, item),
            Ok(other) => return Err(get_error(other, self.owner())),
            Err(_) => return Err(GetError::Unreachable),
        };
        let item = match item {
            Some(wi) => {
                let it = Item::from_wire(wi.tag, wi.data);
                if cacheable {
                    let mut c = lock(&self.sh().cache);
                    c.drop_below(&key, floor);
                    c.insert(key, ts, it.clone());
                }
                it
            }
            None => {
                // The item is cached, or its push is on the way: wait briefly for it.
                let deadline = Instant::now() + PUSH_WAIT;
                let mut c = lock(&self.sh().cache);
                let hit = loop {
                    if let Some(it) = c.items.get(&key).and_then(|m| m.get(&ts).cloned()) {
                        break Some(it);
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break None;
                    }
                    c = self
                        .sh()
                        .cache_filled
                        .wait_timeout(c, left)
                        .map_or_else(|e| e.into_inner().0, |(g, _)| g);
                };
                drop(c);
                match hit {
                    Some(it) => {
                        self.sh()
                            .counters
                            .cache_hits
                            .fetch_add(1, Ordering::Relaxed);
                        it
                    }
                    // Evicted meanwhile: fetch it again (the same get, so no state changes).
                    None => return self.get(Selector::Exact(ts), Wait::Never, false),
                }
            }
        };
        Ok((ts, seq, item))
    }

    fn consume(&self, ts: Timestamp, until: bool) -> Result<(), StmError> {
        let req = Request::Consume {
            task: self.task.tref(),
            conn: self.id,
            ts,
            until,
        };
        match call(self.sh(), self.owner(), &req) {
            Ok(Reply::Ok) => Ok(()),
            Ok(other) => Err(stm_error(other, self.owner())),
            Err(e) => Err(StmError::Unreachable(e)),
        }
    }

    /// Sends a channel consume without waiting for the owner: a consume only releases, so
    /// the owner learning of it a little later just reclaims a little later, and a reader
    /// streaming items saves a round trip per item. A refusal is logged and counted in
    /// `SpaceStats::consume_failed`.
    fn consume_later(&self, ts: Timestamp, until: bool) -> Result<(), StmError> {
        let sh = self.sh();
        if sh.is_dead(self.owner()) {
            sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
            return Err(StmError::Unreachable(format!(
                "address space {} has left",
                self.owner()
            )));
        }
        let req = Request::Consume {
            task: self.task.tref(),
            conn: self.id,
            ts,
            until,
        };
        let failed = sh.counters.consume_failed.clone();
        let owner = self.owner().to_owned();
        let payload = zbytes::from_encoded(wire::encode_request(&req));
        sh.session
            .get(sh.key("op", &owner))
            .payload(payload)
            .timeout(sh.cfg.op_timeout)
            .consolidation(zenoh::query::ConsolidationMode::None)
            .callback(move |r| {
                let ok = r.result().ok().is_some_and(|s| {
                    matches!(
                        wire::decode_reply(zbytes::to_bytes(s.payload())),
                        Ok(Reply::Ok)
                    )
                });
                if !ok {
                    failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(owner, ts, "a consume was refused or not answered");
                }
            })
            .wait()
            .map_err(|e| {
                sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
                StmError::Unreachable(format!("consume not sent: {e}"))
            })
    }

    fn opened(&self, ts: Timestamp) {
        if lock(&self.open).items.insert(ts) {
            self.task.core.add_remote_open(self.zone(), ts);
        }
    }

    fn consumed(&self, ts: Timestamp, until: bool) {
        let mut o = lock(&self.open);
        let gone: Vec<_> = if until {
            let keep = o.items.split_off(&(ts.saturating_add(1)));
            std::mem::replace(&mut o.items, keep).into_iter().collect()
        } else if o.items.remove(&ts) {
            vec![ts]
        } else {
            Vec::new()
        };
        for t in gone {
            self.task.core.remove_remote_open(self.zone(), t);
        }
    }
}

impl Drop for RemoteConn {
    fn drop(&mut self) {
        let o = std::mem::take(&mut *lock(&self.open));
        for t in o.items.into_iter().chain(o.tickets.into_values()) {
            self.task.core.remove_remote_open(self.zone(), t);
        }
        send(
            self.sh(),
            self.owner(),
            &Request::Detach {
                task: self.task.tref(),
                conn: self.id,
            },
        );
    }
}

enum ConnRepr<C: core::Container> {
    Local(core::InputConnection<C>),
    Remote(RemoteConn),
}

enum OutRepr<C: core::Container> {
    Local(core::OutputConnection<C>),
    Remote(RemoteConn),
}

/// An input connection: gets (and consumes) items of a container, here or elsewhere.
pub struct InputConnection<C: Container> {
    container: C,
    repr: ConnRepr<C::Core>,
}

/// An output connection: puts items into a container, here or elsewhere.
pub struct OutputConnection<C: Container> {
    container: C,
    repr: OutRepr<C::Core>,
}

impl<C: Container + std::fmt::Debug> std::fmt::Debug for InputConnection<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputConnection")
            .field("container", &self.container)
            .finish()
    }
}

impl<C: Container + std::fmt::Debug> std::fmt::Debug for OutputConnection<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputConnection")
            .field("container", &self.container)
            .finish()
    }
}

impl<C: Container> InputConnection<C> {
    /// The container.
    pub fn container(&self) -> &C {
        &self.container
    }
    /// The core connection, if the container lives in this address space (for the core's
    /// local-only features).
    pub fn as_local(&self) -> Option<&core::InputConnection<C::Core>> {
        match &self.repr {
            ConnRepr::Local(c) => Some(c),
            ConnRepr::Remote(_) => None,
        }
    }
    /// Detaches the connection.
    pub fn detach(self) {}
}

impl<C: Container> OutputConnection<C> {
    /// The container.
    pub fn container(&self) -> &C {
        &self.container
    }
    /// The core connection, if the container lives in this address space.
    pub fn as_local(&self) -> Option<&core::OutputConnection<C::Core>> {
        match &self.repr {
            OutRepr::Local(c) => Some(c),
            OutRepr::Remote(_) => None,
        }
    }
    /// Detaches the connection.
    pub fn detach(self) {}
}

impl OutputConnection<Channel> {
    /// Puts `item` at `ts`, waiting for space.
    pub fn put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<(), PutError> {
        self.put_with(ts, item, PutOptions::default())
    }
    /// Puts without waiting.
    pub fn try_put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<(), PutError> {
        self.put_with(ts, item, PutOptions::default().wait(Wait::Never))
    }
    /// Puts, waiting at most `timeout` for space.
    pub fn put_timeout(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        timeout: Duration,
    ) -> Result<(), PutError> {
        self.put_with(ts, item, PutOptions::default().wait(Wait::For(timeout)))
    }
    /// Puts with options (reference count, wait).
    pub fn put_with(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        opts: PutOptions,
    ) -> Result<(), PutError> {
        match &self.repr {
            OutRepr::Local(o) => o.put_with(ts, item, opts),
            OutRepr::Remote(r) => r
                .put(ts, item.into(), opts.consumers, opts.wait, None)
                .map(|_| ()),
        }
    }
    /// Puts with options, asking `interrupted` while the put waits for space (see
    /// [`stampede_core::OutputConnection::put_interruptible`]); on a remote channel it is
    /// asked between the slices the put waits at the owner.
    pub fn put_interruptible(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        opts: PutOptions,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), PutError> {
        match &self.repr {
            OutRepr::Local(o) => o.put_interruptible(ts, item, opts, interrupted),
            OutRepr::Remote(r) => r
                .put(
                    ts,
                    item.into(),
                    opts.consumers,
                    opts.wait,
                    Some(interrupted),
                )
                .map(|_| ()),
        }
    }
}

impl OutputConnection<Queue> {
    /// Puts `item` at `ts`, waiting for space; returns its ticket.
    pub fn put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<u64, PutError> {
        self.put_with(ts, item, Wait::Forever)
    }
    /// Puts without waiting.
    pub fn try_put(&self, ts: Timestamp, item: impl Into<Item>) -> Result<u64, PutError> {
        self.put_with(ts, item, Wait::Never)
    }
    /// Puts, waiting at most `timeout` for space.
    pub fn put_timeout(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        timeout: Duration,
    ) -> Result<u64, PutError> {
        self.put_with(ts, item, Wait::For(timeout))
    }
    /// Puts with an explicit wait mode.
    pub fn put_with(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        wait: Wait,
    ) -> Result<u64, PutError> {
        match &self.repr {
            OutRepr::Local(o) => o.put_with(ts, item, wait),
            OutRepr::Remote(r) => r.put(ts, item.into(), None, wait, None),
        }
    }
    /// Puts, asking `interrupted` while the put waits for space (see
    /// [`OutputConnection::<Channel>::put_interruptible`]).
    pub fn put_interruptible(
        &self,
        ts: Timestamp,
        item: impl Into<Item>,
        wait: Wait,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<u64, PutError> {
        match &self.repr {
            OutRepr::Local(o) => o.put_interruptible(ts, item, wait, interrupted),
            OutRepr::Remote(r) => r.put(ts, item.into(), None, wait, Some(interrupted)),
        }
    }
}

impl OutputConnection<Register> {
    /// Writes a new value; returns its sequence number.
    pub fn write(&self, item: impl Into<Item>) -> Result<u64, StmError> {
        match &self.repr {
            OutRepr::Local(o) => o.write(item),
            OutRepr::Remote(r) => {
                r.put(0, item.into(), None, Wait::Never, None)
                    .map_err(|e| match e.kind() {
                        PutErrorKind::Closed => StmError::Closed,
                        PutErrorKind::Detached => StmError::Detached,
                        k => StmError::Unreachable(format!("write failed: {k:?}")),
                    })
            }
        }
    }
}

impl InputConnection<Channel> {
    /// Gets an item, waiting until one matches.
    pub fn get(&self, sel: Selector) -> Result<(Timestamp, Item), GetError> {
        self.get_with(sel, Wait::Forever)
    }
    /// Gets without waiting.
    pub fn try_get(&self, sel: Selector) -> Result<(Timestamp, Item), GetError> {
        self.get_with(sel, Wait::Never)
    }
    /// Gets, waiting at most `timeout`.
    pub fn get_timeout(
        &self,
        sel: Selector,
        timeout: Duration,
    ) -> Result<(Timestamp, Item), GetError> {
        self.get_with(sel, Wait::For(timeout))
    }
    /// Gets with an explicit wait.
    pub fn get_with(&self, sel: Selector, wait: Wait) -> Result<(Timestamp, Item), GetError> {
        match &self.repr {
            ConnRepr::Local(i) => i.get_with(sel, wait),
            ConnRepr::Remote(r) => {
                let (ts, _, item) = r.get(sel, wait, true)?;
                r.opened(ts);
                Ok((ts, item))
            }
        }
    }
    /// Marks the item at `ts` consumed on this connection.
    pub fn consume(&self, ts: Timestamp) -> Result<(), StmError> {
        match &self.repr {
            ConnRepr::Local(i) => i.consume(ts),
            ConnRepr::Remote(r) => {
                r.consume_later(ts, false)?;
                r.consumed(ts, false);
                Ok(())
            }
        }
    }
    /// Marks every item at or below `ts` consumed, including later arrivals.
    pub fn consume_until(&self, ts: Timestamp) -> Result<(), StmError> {
        match &self.repr {
            ConnRepr::Local(i) => i.consume_until(ts),
            ConnRepr::Remote(r) => {
                r.consume_later(ts, true)?;
                r.consumed(ts, true);
                Ok(())
            }
        }
    }
}

impl InputConnection<Queue> {
    /// Gets the next item, waiting for one.
    pub fn get(&self) -> Result<QueueItem, GetError> {
        self.get_with(Wait::Forever)
    }
    /// Gets without waiting.
    pub fn try_get(&self) -> Result<QueueItem, GetError> {
        self.get_with(Wait::Never)
    }
    /// Gets, waiting at most `timeout`.
    pub fn get_timeout(&self, timeout: Duration) -> Result<QueueItem, GetError> {
        self.get_with(Wait::For(timeout))
    }
    /// Gets with an explicit wait.
    pub fn get_with(&self, wait: Wait) -> Result<QueueItem, GetError> {
        match &self.repr {
            ConnRepr::Local(i) => i.get_with(wait),
            ConnRepr::Remote(r) => {
                let (ts, ticket, item) = r.get(Selector::Oldest, wait, false)?;
                if lock(&r.open).tickets.insert(ticket, ts).is_none() {
                    r.task.core.add_remote_open(r.zone(), ts);
                }
                Ok(QueueItem { ts, ticket, item })
            }
        }
    }
    /// Frees the item with `ticket`.
    pub fn consume(&self, ticket: u64) -> Result<(), StmError> {
        match &self.repr {
            ConnRepr::Local(i) => i.consume(ticket),
            ConnRepr::Remote(r) => {
                r.consume(ticket as i64, false)?;
                if let Some(ts) = lock(&r.open).tickets.remove(&ticket) {
                    r.task.core.remove_remote_open(r.zone(), ts);
                }
                Ok(())
            }
        }
    }
}

impl InputConnection<Register> {
    /// Reads a value newer than this connection's last read, waiting for one.
    pub fn read(&self) -> Result<(u64, Item), GetError> {
        self.read_with(Wait::Forever)
    }
    /// Reads without waiting.
    pub fn try_read(&self) -> Result<(u64, Item), GetError> {
        self.read_with(Wait::Never)
    }
    /// Reads, waiting at most `timeout`.
    pub fn read_timeout(&self, timeout: Duration) -> Result<(u64, Item), GetError> {
        self.read_with(Wait::For(timeout))
    }
    /// Reads with an explicit wait.
    pub fn read_with(&self, wait: Wait) -> Result<(u64, Item), GetError> {
        match &self.repr {
            ConnRepr::Local(i) => i.read_with(wait),
            ConnRepr::Remote(r) => r
                .get(Selector::Oldest, wait, false)
                .map(|(_, seq, it)| (seq, it)),
        }
    }
}
