//! The provider interface: how containers that live elsewhere plug into the core's handles.
//!
//! A user holds one [`Channel`], [`Queue`] or [`Register`] type whether the container lives
//! in this address space or is served by another one. Inside, a handle has a private
//! flavor: a container that lives here is called directly (no virtual call on a put or get);
//! one served elsewhere goes through a [`Backend`] that a provider (the distribution layer,
//! or a future kind) implements. The core keeps every rule that concerns the task here, so
//! a provider only moves operations:
//!
//! - **Connections.** [`Backend::attach`] makes a [`Link`] for a task. The core counts the
//!   items a link's gets leave open, and the puts it has in flight, in the task's visibility
//!   and watermark terms, exactly as for a local connection; it detaches the link when the
//!   connection is dropped or its task exits.
//! - **Watermark terms from elsewhere.** [`set_external_term`] adds the lowest term another
//!   address space reported for a zone ([`HoldCause::Remote`](crate::HoldCause::Remote) in
//!   explanations); [`Runtime::on_local_mark`] reports this runtime's own.
//! - **Acting for a task of another address space** (the owner's side): a
//!   [`proxy_task`] has connections like any task, mirrors the visibility its requester
//!   reports ([`mirror_visibility`]), and leaves its virtual time out of the watermark,
//!   since the other address space reports it.
//! - **Names across an application:** a [`Directory`] announces the runtime's named
//!   containers and finds others' by name, and learns of every root task.
//! - **Where task bodies run:** an [`Executor`]. STM task bodies block, so
//!   [`ThreadExecutor`] gives each its own thread; a work-stealing pool for non-blocking
//!   steps implements the same trait.
//!
//! The interface is versioned by [`VERSION`]: a change to any trait here raises it.
//!
//! A provider serving a channel from a plain map, in a few lines:
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::sync::{Arc, Mutex};
//! use stampede_core::provider::{self, Backend, Consume, Got, Link, Put, TaskRef};
//! use stampede_core::{
//!     ContainerId, GetError, Neighbors, PutError, Runtime, Selector, StmError, Wait, ZoneId,
//! };
//!
//! #[derive(Default)]
//! struct Map(Arc<Mutex<BTreeMap<i64, stampede_core::Item>>>);
//!
//! impl Backend for Map {
//!     fn id(&self) -> ContainerId { ContainerId(1) }
//!     fn zone(&self) -> ZoneId { ZoneId::DEFAULT }
//!     fn name(&self) -> Option<&str> { Some("map") }
//!     fn owner(&self) -> &str { "a map" }
//!     fn close(&self) -> Result<(), StmError> { Ok(()) }
//!     fn attach(&self, _: &TaskRef, _input: bool) -> Result<Box<dyn Link>, StmError> {
//!         Ok(Box::new(Map(self.0.clone())))
//!     }
//! }
//!
//! impl Link for Map {
//!     fn put(&self, p: Put<'_>) -> Result<u64, PutError> {
//!         self.0.lock().unwrap().insert(p.ts, p.item);
//!         Ok(0)
//!     }
//!     fn get(&self, sel: Selector, _: Wait) -> Result<Got, GetError> {
//!         let m = self.0.lock().unwrap();
//!         let (ts, item) = match sel {
//!             Selector::Exact(t) => m.get_key_value(&t),
//!             _ => m.iter().next_back(),
//!         }
//!         .ok_or(GetError::Unavailable(Neighbors::default()))?;
//!         Ok(Got { ts: *ts, seq: 0, item: item.clone() })
//!     }
//!     fn consume(&self, _: Consume) -> Result<(), StmError> { Ok(()) }
//!     fn detach(&self) {}
//! }
//!
//! let rt = Runtime::new();
//! let ch = provider::channel(Arc::new(Map::default()));
//! let t = rt.task(0).unwrap();
//! t.attach_output(&ch).unwrap().put(3, "three").unwrap();
//! let input = t.attach_input(&ch).unwrap();
//! assert_eq!(input.get(Selector::Newest).unwrap().1.as_str(), Some("three"));
//! assert_eq!(t.visibility(), 0); // the open item (3) is above the task's virtual time
//! ```

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::channel::{Channel, Selector};
use crate::container::{ContainerOptions, Flavor, Named};
use crate::error::{GetError, PutError, StmError};
use crate::ids::{ConnId, ContainerId, TaskId};
use crate::item::Item;
use crate::notify::Hooked;
use crate::queue::Queue;
use crate::register::Register;
use crate::runtime::Runtime;
use crate::sync::{lock, AtomicBool, Mutex, Ordering};
use crate::task::{Detach, NoWake, Task, TaskInner};
use crate::time::{Timestamp, ZoneId};
use crate::wait::Wait;

/// The version of this interface.
pub const VERSION: u32 = 2;

/// A container served by a provider. One backend type can serve every kind: the handle it
/// is wrapped in ([`channel`], [`queue`], [`register`]) says which operations reach it.
pub trait Backend: Send + Sync + 'static {
    /// The container's id, in its owner's numbering.
    fn id(&self) -> ContainerId;
    /// The container's time zone.
    fn zone(&self) -> ZoneId;
    /// Its registered name, if any.
    fn name(&self) -> Option<&str>;
    /// Who serves it (an address space's id).
    fn owner(&self) -> &str;
    /// Its capacity, if bounded and known.
    fn capacity(&self) -> Option<usize> {
        None
    }
    /// Closes the container where it lives.
    fn close(&self) -> Result<(), StmError>;
    /// Attaches `task` for getting (`input`) or putting. The core has checked that the task
    /// is alive and, for output, that the zones match.
    fn attach(&self, task: &TaskRef, input: bool) -> Result<Box<dyn Link>, StmError>;
    /// Calls `f` with the timestamp of every item put from now on, in order; returns the
    /// subscription's id for [`unsubscribe`](Backend::unsubscribe).
    fn on_arrival(&self, f: ArrivalCallback) -> Result<u64, StmError> {
        drop(f);
        Err(StmError::Unsupported(
            format!("arrival callbacks on a container of {}", self.owner()).into(),
        ))
    }
    /// Cancels an arrival subscription; whether it existed.
    fn unsubscribe(&self, id: u64) -> bool {
        let _ = id;
        false
    }
    /// Runs `h` for every item reclaimed from now on, in order, replacing this space's
    /// previous handler of the container.
    fn on_garbage(&self, h: GarbageCallback) -> Result<(), StmError> {
        drop(h);
        Err(StmError::Unsupported(
            format!("garbage handlers on a container of {}", self.owner()).into(),
        ))
    }
}

/// An arrival callback.
pub type ArrivalCallback = Arc<dyn Fn(Timestamp) + Send + Sync>;
/// A garbage handler.
pub type GarbageCallback = Arc<dyn Fn(Timestamp, &Item) + Send + Sync>;

/// Runs `h`, besides the user's garbage handler, for every item `container` reclaims: how a
/// provider forwards garbage to other address spaces. Replaces the previous watcher; fails
/// for registers (outside garbage collection) and containers served elsewhere.
pub fn watch_garbage(container: &Named, h: GarbageCallback) -> Result<(), StmError> {
    let unsupported = |what: &str| Err(StmError::Unsupported(what.to_owned().into()));
    match container {
        Named::Channel(c) => match &c.flavor {
            Flavor::Local(l) => l.hooks(|hooks, _| hooks.set_watch(h)),
            Flavor::Provided(_) => return unsupported("watching a provided channel"),
        },
        Named::Queue(q) => match &q.flavor {
            Flavor::Local(l) => l.hooks(|hooks, _| hooks.set_watch(h)),
            Flavor::Provided(_) => return unsupported("watching a provided queue"),
        },
        _ => return unsupported("garbage of a register (registers are outside collection)"),
    }
    Ok(())
}

/// A put, as the core hands it to a [`Link`].
#[non_exhaustive]
pub struct Put<'a> {
    /// The timestamp (a queue's or channel's; ignored by registers).
    pub ts: Timestamp,
    /// The item.
    pub item: Item,
    /// A channel item's reference count.
    pub consumers: Option<u32>,
    /// How long to wait for space.
    pub wait: Wait,
    /// The putting task's visibility before this put (for the owner's rule checks).
    pub visibility: Timestamp,
    /// Asked while the put waits, as in
    /// [`OutputConnection::put_interruptible`](crate::OutputConnection::put_interruptible).
    pub interrupted: Option<&'a dyn Fn() -> bool>,
    /// Whether the caller asked to return only once the put is stored
    /// ([`PutOptions::sync`](crate::PutOptions::sync)).
    pub sync: bool,
    hold: Option<PutHold>,
}

impl Put<'_> {
    /// Takes over the put's watermark term, so it outlives this call: a link that returns
    /// before the owner stored the item keeps it until the owner answers, and drops it then.
    /// Without this, the term ends when the call returns. `None` for register writes
    /// (registers are outside collection).
    pub fn keep_hold(&mut self) -> Option<PutHold> {
        self.hold.take()
    }
}

/// A put's term in its task's visibility and watermark, from
/// [`Put::keep_hold`]; dropping it ends the term.
pub struct PutHold {
    task: Arc<TaskInner>,
    ts: Timestamp,
    container: ContainerId,
}

impl PutHold {
    fn new(task: &Arc<TaskInner>, ts: Timestamp, container: ContainerId) -> PutHold {
        let none: Weak<NoWake> = Weak::new();
        task.add_pending(ts, container, none);
        PutHold {
            task: task.clone(),
            ts,
            container,
        }
    }

    /// The put's timestamp.
    pub fn ts(&self) -> Timestamp {
        self.ts
    }
}

impl fmt::Debug for PutHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PutHold").field("ts", &self.ts).finish()
    }
}

impl Drop for PutHold {
    fn drop(&mut self) {
        self.task.remove_pending(self.ts, self.container);
        self.task.zone.nudge();
    }
}

impl fmt::Debug for Put<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Put")
            .field("ts", &self.ts)
            .field("consumers", &self.consumers)
            .field("wait", &self.wait)
            .field("visibility", &self.visibility)
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

/// An item a [`Link`] got.
#[derive(Clone, Debug)]
pub struct Got {
    /// Its timestamp.
    pub ts: Timestamp,
    /// A queue item's ticket, or a register value's write number; 0 for channels.
    pub seq: u64,
    /// The item.
    pub item: Item,
}

/// What a consume names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Consume {
    /// A channel item.
    Item(Timestamp),
    /// Every channel item at or below the timestamp, including later arrivals.
    Until(Timestamp),
    /// A held queue item.
    Ticket(u64),
}

/// One connection of a task to a provided container. Every call may block the calling
/// thread for as long as its `wait` allows.
pub trait Link: Send + Sync + 'static {
    /// Puts into a channel or queue (returning the ticket) or writes a register (returning
    /// the write number).
    fn put(&self, put: Put<'_>) -> Result<u64, PutError>;
    /// Gets by `sel` (queues and registers: `Selector::Oldest`).
    fn get(&self, sel: Selector, wait: Wait) -> Result<Got, GetError>;
    /// Consumes.
    fn consume(&self, what: Consume) -> Result<(), StmError>;
    /// Waits until every put made on this link is stored or refused; reports one refusal
    /// not reported yet ([`PutError::is_deferred`]). A link whose puts return only once
    /// stored has nothing to wait for.
    fn flush(&self) -> Result<(), PutError> {
        Ok(())
    }
    /// Detaches; called once, when the connection is dropped or its task exits.
    fn detach(&self);
    /// The timestamps of the channel items visible on this connection above `after`
    /// (neither consumed on it nor reclaimed), ascending, and whether the channel is
    /// closed: what a [`Correlator`](crate::Correlator) matches on.
    fn visible_after(&self, after: Option<Timestamp>) -> Result<(Vec<Timestamp>, bool), StmError> {
        let _ = after;
        Err(StmError::Unsupported("correlating this channel".into()))
    }
    /// `len` bytes of memory for an item the producer fills in place and puts on this
    /// connection ([`OutputConnection::loan`](crate::OutputConnection::loan)), where the
    /// provider sends it from without a copy; `None` for plain memory.
    fn loan(&self, len: usize) -> Option<Box<dyn crate::LoanBuffer>> {
        let _ = len;
        None
    }
}

/// The timestamps visible on `input` above `after`, and whether its channel is closed (see
/// [`Link::visible_after`]): how a provider answers for a correlator of another space.
pub fn visible_after(
    input: &crate::InputConnection<Channel>,
    after: Option<Timestamp>,
) -> Result<(Vec<Timestamp>, bool), StmError> {
    input.visible_after(after)
}

/// Applies to `input` a get that selected `ts` with `sel` in another address space, which
/// answered it from the items it was sent: the connection's state (its last get, the item
/// open on it, what a `NewestUnseen` passed over) changes as if the get had run here. Fails
/// with `Gone` when the item is not visible on the connection, and with `Detached` on a
/// connection to a container that does not live here.
pub fn replay_get(
    input: &crate::InputConnection<Channel>,
    sel: Selector,
    ts: Timestamp,
) -> Result<(), GetError> {
    input.replay_get(sel, ts)
}

/// Calls `f` with the number of every write to a register that lives here from now on,
/// on the writing thread, after the write: how a provider sends new values ahead to the
/// spaces that read them. Fails with `Unsupported` for a register served elsewhere.
pub fn on_write(
    register: &Register,
    f: impl Fn(u64) + Send + Sync + 'static,
) -> Result<(), StmError> {
    let c = register.local().ok_or_else(|| {
        StmError::Unsupported("watching the writes of a register served elsewhere".into())
    })?;
    c.watch(Arc::new(f));
    Ok(())
}

/// Applies to `input` a read of write `seq` that another address space answered from a
/// value it was sent: the connection's next read waits for a newer write. Fails with
/// `Detached` on a connection to a register that does not live here.
pub fn replay_read(input: &crate::InputConnection<Register>, seq: u64) -> Result<(), GetError> {
    input.replay_read(seq)
}

/// The item a channel that lives here stores at `ts`, and whether it carries a reference
/// count (then it can be reclaimed before every connection consumed it, so a reader that
/// was sent it must ask before using it).
pub fn stored(channel: &Channel, ts: Timestamp) -> Option<(Item, bool)> {
    channel.local()?.stored(ts)
}

/// The task a [`Link`] acts for.
#[derive(Clone)]
pub struct TaskRef {
    inner: Arc<TaskInner>,
    rt: Runtime,
}

impl fmt::Debug for TaskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl TaskRef {
    pub(crate) fn new(inner: Arc<TaskInner>, rt: Runtime) -> TaskRef {
        TaskRef { inner, rt }
    }
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.inner.id
    }
    /// The task's zone.
    pub fn zone(&self) -> ZoneId {
        self.inner.zone.id
    }
    /// The task's visibility now.
    pub fn visibility(&self) -> Timestamp {
        self.inner.visibility()
    }
    /// The runtime the task belongs to.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }
}

/// A channel served by `backend`.
pub fn channel(backend: Arc<dyn Backend>) -> Channel {
    Channel {
        flavor: Flavor::Provided(backend),
    }
}

/// A queue served by `backend`.
pub fn queue(backend: Arc<dyn Backend>) -> Queue {
    Queue {
        flavor: Flavor::Provided(backend),
    }
}

/// A register served by `backend`.
pub fn register(backend: Arc<dyn Backend>) -> Register {
    Register {
        flavor: Flavor::Provided(backend),
    }
}

/// Adds, replaces or (with `None`) removes the lowest watermark term the address space
/// `source` reported for `zone`. Items are reclaimed only below every such term, and a zone
/// with such terms keeps collecting without local tasks.
pub fn set_external_term(rt: &Runtime, zone: ZoneId, source: &str, ts: Option<Timestamp>) {
    let z = rt.zone(zone);
    z.set_remote(source, ts);
    z.nudge();
}

/// A task acting here for a task of another address space: its virtual time (which starts
/// at `INFINITY`) is not a watermark term, since the other address space reports it, and
/// [`mirror_visibility`] sets it freely.
pub fn proxy_task(rt: &Runtime, name: String, zone: ZoneId) -> Result<Task, StmError> {
    rt.task_builder().name(name).zone(zone).proxy().create()
}

/// Sets a [`proxy_task`]'s virtual time to the visibility its requester reported, so the
/// rule checks of its next operation use it. Fails on other tasks.
pub fn mirror_visibility(task: &Task, visibility: Timestamp) -> Result<(), StmError> {
    task.inner.mirror_visibility(visibility)
}

/// Names across a distributed application. An address space installs one in its runtime
/// ([`set_directory`]); from then on the runtime's named containers are known
/// application-wide and its lookups find containers wherever they live, so a program
/// written against [`Runtime`] runs unchanged on a local runtime and a joined one.
pub trait Directory: Send + Sync + 'static {
    /// Makes `container`, just created here and registered in this runtime under `name`,
    /// known application-wide (with `opts.meta`). On failure the core withdraws the name
    /// and closes the container.
    fn announce(
        &self,
        name: &str,
        container: &Named,
        opts: &ContainerOptions,
    ) -> Result<(), StmError>;
    /// The container called `name`, wherever it lives, waiting up to `timeout` for it
    /// ([`StmError::NotFound`]; a service's name is [`StmError::WrongKind`]). The core
    /// checks the kind asked for.
    fn find(&self, name: &str, timeout: Duration) -> Result<Named, StmError>;
    /// A root task was created in `zone`: the other address spaces must count it before any
    /// of its requests reaches them.
    fn root_task(&self, zone: ZoneId);
}

/// Installs `directory` in `rt`. The runtime holds it weakly (the directory owns the
/// runtime); once it is gone, naming and lookups fail with `Unreachable`.
pub fn set_directory(rt: &Runtime, directory: Weak<dyn Directory>) {
    rt.set_directory(directory);
}

/// Where task bodies run.
pub trait Executor: Send + Sync + 'static {
    /// Runs `job` (the body of the task `name`); fails when it cannot be started.
    fn execute(&self, name: &str, job: Box<dyn FnOnce() + Send>) -> Result<(), StmError>;
}

/// Runs each task body on its own thread, named after the task: STM task bodies block.
///
/// ```
/// use std::sync::mpsc;
/// use stampede_core::provider::{Executor, ThreadExecutor};
/// let (tx, rx) = mpsc::channel();
/// ThreadExecutor
///     .execute("tracker", Box::new(move || {
///         tx.send(std::thread::current().name().map(str::to_owned)).unwrap();
///     }))
///     .unwrap();
/// assert_eq!(rx.recv().unwrap().as_deref(), Some("tracker"));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct ThreadExecutor;

impl Executor for ThreadExecutor {
    fn execute(&self, name: &str, job: Box<dyn FnOnce() + Send>) -> Result<(), StmError> {
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(job)
            .map(drop)
            .map_err(|_| StmError::InvalidArgument("the OS refused to start a thread".into()))
    }
}

/// What a provided input connection holds open, counted in its task's visibility.
#[derive(Default)]
struct Open {
    /// Channel items open, by timestamp.
    items: std::collections::BTreeSet<Timestamp>,
    /// Queue items held: ticket and timestamp.
    tickets: Vec<(u64, Timestamp)>,
}

/// A connection to a provided container: the link, and the terms the core keeps for it.
pub(crate) struct Linked {
    link: Box<dyn Link>,
    id: ContainerId,
    /// Puts hold the watermark while in flight (not register writes).
    holds: bool,
    zone: ZoneId,
    task: Arc<TaskInner>,
    open: Mutex<Open>,
    detached: AtomicBool,
}

impl Linked {
    /// Attaches `task` to `backend` and registers the connection with the task, so its exit
    /// detaches it.
    pub(crate) fn attach(
        backend: &dyn Backend,
        task: &Arc<TaskInner>,
        rt: &Runtime,
        conn: ConnId,
        input: bool,
        holds: bool,
    ) -> Result<Arc<Linked>, StmError> {
        if !task.is_alive() {
            return Err(StmError::TaskExited);
        }
        let link = backend.attach(&TaskRef::new(task.clone(), rt.clone()), input)?;
        let l = Arc::new(Linked {
            link,
            id: backend.id(),
            holds,
            zone: backend.zone(),
            task: task.clone(),
            open: Mutex::default(),
            detached: AtomicBool::new(false),
        });
        let weak: Weak<dyn Detach> = Arc::downgrade(&(l.clone() as Arc<dyn Detach>));
        if let Err(e) = task.register_conn(weak, conn) {
            l.detach_once();
            return Err(e);
        }
        Ok(l)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn put(
        &self,
        ts: Timestamp,
        item: Item,
        consumers: Option<u32>,
        wait: Wait,
        sync: bool,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Result<u64, PutError> {
        if consumers == Some(0) {
            return Err(PutError::new(crate::PutErrorKind::ZeroConsumers, ts, item));
        }
        if self.detached.load(Ordering::Acquire) {
            return Err(PutError::new(crate::PutErrorKind::Detached, ts, item));
        }
        // The put is a watermark term here until the owner answers, as a local waiting put
        // (the link may keep it beyond this call); a register write is not (registers are
        // outside garbage collection).
        let visibility = self.task.visibility();
        let hold = self.holds.then(|| PutHold::new(&self.task, ts, self.id));
        self.link.put(Put {
            ts,
            item,
            consumers,
            wait,
            visibility,
            interrupted,
            sync,
            hold,
        })
    }

    pub(crate) fn flush(&self) -> Result<(), PutError> {
        self.link.flush()
    }

    pub(crate) fn lend(&self, len: usize) -> Option<Box<dyn crate::LoanBuffer>> {
        self.link.loan(len)
    }

    pub(crate) fn get(&self, sel: Selector, wait: Wait) -> Result<Got, GetError> {
        if self.detached.load(Ordering::Acquire) {
            return Err(GetError::Detached);
        }
        self.link.get(sel, wait)
    }

    pub(crate) fn visible_after(
        &self,
        after: Option<Timestamp>,
    ) -> Result<(Vec<Timestamp>, bool), StmError> {
        if self.detached.load(Ordering::Acquire) {
            return Err(StmError::Detached);
        }
        self.link.visible_after(after)
    }

    /// Counts a channel item got in the task's visibility until it is consumed.
    pub(crate) fn opened(&self, ts: Timestamp) {
        if lock(&self.open).items.insert(ts) {
            self.task.add_open(self.zone, ts);
        }
    }

    /// Counts a held queue item in the task's visibility until it is consumed.
    pub(crate) fn held(&self, ticket: u64, ts: Timestamp) {
        let mut o = lock(&self.open);
        if !o.tickets.iter().any(|&(t, _)| t == ticket) {
            o.tickets.push((ticket, ts));
            self.task.add_open(self.zone, ts);
        }
    }

    pub(crate) fn consume(&self, what: Consume) -> Result<(), StmError> {
        if self.detached.load(Ordering::Acquire) {
            return Err(StmError::Detached);
        }
        let r = self.link.consume(what);
        // A connection its owner no longer has holds nothing there: nor here.
        if r.is_err() && !matches!(r, Err(StmError::Detached)) {
            return r;
        }
        let mut o = lock(&self.open);
        let gone: Vec<Timestamp> = match what {
            Consume::Item(ts) => o.items.take(&ts).into_iter().collect(),
            Consume::Until(ts) => {
                let keep = o.items.split_off(&ts.saturating_add(1));
                std::mem::replace(&mut o.items, keep).into_iter().collect()
            }
            Consume::Ticket(t) => match o.tickets.iter().position(|&(x, _)| x == t) {
                Some(i) => vec![o.tickets.swap_remove(i).1],
                None => Vec::new(),
            },
        };
        drop(o);
        for ts in gone {
            self.task.remove_open(self.zone, ts);
        }
        r
    }

    fn detach_once(&self) {
        if self.detached.swap(true, Ordering::AcqRel) {
            return;
        }
        let o = std::mem::take(&mut *lock(&self.open));
        for ts in o
            .items
            .into_iter()
            .chain(o.tickets.into_iter().map(|t| t.1))
        {
            self.task.remove_open(self.zone, ts);
        }
        self.link.detach();
    }

    /// Detaches when the connection is dropped.
    pub(crate) fn drop_conn(&self, conn: ConnId) {
        self.detach_once();
        self.task.unregister_conn(conn);
    }
}

impl Detach for Linked {
    fn detach(&self, _conn: ConnId, _task: &TaskInner) {
        self.detach_once();
    }
}
