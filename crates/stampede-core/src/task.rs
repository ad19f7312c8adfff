//! Tasks and their virtual time.

use std::fmt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::connection::{InputConnection, OutputConnection, Via};
use crate::container::{Container, Flavor, LocalContainer};
use crate::error::StmError;
use crate::gc::{Hold, HoldCause, Zone};
use crate::ids::{ConnId, ContainerId, TaskId};
use crate::pacing::{LateAction, Lateness, Pacer};
use crate::provider::Linked;
use crate::report::{Link, TaskReport};
use crate::runtime::Runtime;
use crate::sync::{lock, AtomicBool, AtomicI64, AtomicU64, Mutex, Ordering};
use crate::time::{Timestamp, ZoneId, INFINITY};

/// A container that can drop a connection when its task goes away.
#[allow(unreachable_pub)] // named only by the sealed `Container` trait, through `LocalContainer`
pub trait Detach: Send + Sync {
    fn detach(&self, conn: ConnId, task: &TaskInner);
    /// Wakes blocked puts so they notice their task has exited.
    fn wake_putters(&self) {}
}

/// The wake target of a put in flight elsewhere: nothing here to wake.
pub(crate) struct NoWake;

impl Detach for NoWake {
    fn detach(&self, _: ConnId, _: &TaskInner) {}
}

struct PendingPut {
    ts: Timestamp,
    container: ContainerId,
    wake: Weak<dyn Detach>,
}

struct TaskState {
    vt: Timestamp,
    /// Timestamps of channel items open on the task's input connections and of queue items
    /// it holds, with multiplicity (few: a task holds what it is working on).
    open: Vec<Timestamp>,
    /// Puts waiting for space.
    pending: Vec<PendingPut>,
    conns: Vec<(Weak<dyn Detach>, ConnId)>,
    /// Every connection, input or output, here or elsewhere, for reports.
    links: Vec<Arc<Link>>,
}

impl TaskState {
    fn visibility(&self) -> Timestamp {
        let open = self.open.iter().copied().min().unwrap_or(INFINITY);
        let pending = self.pending.iter().map(|p| p.ts).min().unwrap_or(INFINITY);
        self.vt.min(open).min(pending)
    }
}

#[allow(unreachable_pub, missing_debug_implementations)] // named only by the sealed `Container` trait
pub struct TaskInner {
    pub(crate) id: TaskId,
    pub(crate) name: String,
    pub(crate) zone: Arc<Zone>,
    /// `state.visibility()`, readable without the lock by puts.
    visibility: AtomicI64,
    state: Mutex<TaskState>,
    alive: AtomicBool,
    /// Nanoseconds parked in this space's containers.
    blocked_ns: AtomicU64,
    /// Acts for a task of another address space, which reports that task's virtual time
    /// itself: the virtual time here only mirrors its visibility for the rule checks.
    proxy: bool,
}

impl fmt::Debug for TaskInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Task")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

impl TaskInner {
    fn store_visibility(&self, st: &TaskState) {
        self.visibility.store(st.visibility(), Ordering::Release);
    }

    pub(crate) fn visibility(&self) -> Timestamp {
        self.visibility.load(Ordering::Acquire)
    }

    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Counts an item open on an input connection, or held from a queue, in the task's
    /// visibility. Items of other zones are in another time base and do not count.
    pub(crate) fn add_open(&self, zone: ZoneId, ts: Timestamp) {
        if zone != self.zone.id {
            return;
        }
        let mut st = lock(&self.state);
        st.open.push(ts);
        self.store_visibility(&st);
    }

    pub(crate) fn remove_open(&self, zone: ZoneId, ts: Timestamp) {
        if zone != self.zone.id {
            return;
        }
        let mut st = lock(&self.state);
        if let Some(i) = st.open.iter().position(|&t| t == ts) {
            st.open.swap_remove(i);
        }
        self.store_visibility(&st);
    }

    pub(crate) fn add_pending(&self, ts: Timestamp, c: ContainerId, wake: Weak<dyn Detach>) {
        let mut st = lock(&self.state);
        st.pending.push(PendingPut {
            ts,
            container: c,
            wake,
        });
        self.store_visibility(&st);
    }

    pub(crate) fn remove_pending(&self, ts: Timestamp, c: ContainerId) {
        let mut st = lock(&self.state);
        if let Some(i) = st
            .pending
            .iter()
            .position(|p| p.ts == ts && p.container == c)
        {
            st.pending.swap_remove(i);
        }
        self.store_visibility(&st);
    }

    /// The task's own watermark terms: its virtual time and its pending puts.
    pub(crate) fn gc_term(&self, holds: Option<&mut Vec<Hold>>) -> Timestamp {
        let st = lock(&self.state);
        let vt = if self.proxy { INFINITY } else { st.vt };
        if let Some(h) = holds {
            if !self.proxy {
                h.push(Hold {
                    ts: st.vt,
                    cause: HoldCause::VirtualTime {
                        task: self.id,
                        task_name: self.name.clone(),
                    },
                });
            }
            for &PendingPut { ts, container, .. } in &st.pending {
                h.push(Hold {
                    ts,
                    cause: HoldCause::PendingPut {
                        task: self.id,
                        task_name: self.name.clone(),
                        container,
                    },
                });
            }
        }
        let pending = st.pending.iter().map(|p| p.ts).min().unwrap_or(INFINITY);
        vt.min(pending)
    }

    pub(crate) fn register_conn(&self, c: Weak<dyn Detach>, id: ConnId) -> Result<(), StmError> {
        let mut st = lock(&self.state);
        if !self.is_alive() {
            return Err(StmError::TaskExited);
        }
        st.conns.push((c, id));
        Ok(())
    }

    pub(crate) fn add_link(&self, link: Arc<Link>) {
        lock(&self.state).links.push(link);
    }

    pub(crate) fn remove_link(&self, link: &Arc<Link>) {
        lock(&self.state).links.retain(|l| !Arc::ptr_eq(l, link));
    }

    /// Counts the time since `since` as blocked (called after a park, never on a fast path).
    pub(crate) fn add_blocked(&self, since: Instant) {
        let ns = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.blocked_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn is_proxy(&self) -> bool {
        self.proxy
    }

    pub(crate) fn report(&self) -> TaskReport {
        let st = lock(&self.state);
        TaskReport {
            id: self.id,
            name: self.name.clone(),
            zone: self.zone.id,
            virtual_time: st.vt,
            visibility: st.visibility(),
            blocked: Duration::from_nanos(self.blocked_ns.load(Ordering::Relaxed)),
            connections: st.links.iter().map(|l| l.report()).collect(),
        }
    }

    pub(crate) fn unregister_conn(&self, id: ConnId) {
        let mut st = lock(&self.state);
        st.conns.retain(|(_, c)| *c != id);
    }

    /// Sets a proxy task's virtual time to the visibility of the task it acts for.
    pub(crate) fn mirror_visibility(&self, v: Timestamp) -> Result<(), StmError> {
        if !self.proxy {
            return Err(StmError::InvalidArgument("not a proxy task".into()));
        }
        let mut st = lock(&self.state);
        if !self.is_alive() {
            return Err(StmError::TaskExited);
        }
        st.vt = v;
        self.store_visibility(&st);
        Ok(())
    }

    fn set_virtual_time(&self, v: Timestamp) -> Result<(), StmError> {
        // Raising virtual time only raises a watermark term, which a pass may see before or
        // after; lowering it (down to visibility) moves a term, so it takes the GC cut.
        let mut cut = None;
        loop {
            let mut st = lock(&self.state);
            if !self.is_alive() {
                return Err(StmError::TaskExited);
            }
            let vis = st.visibility();
            if v < vis {
                return Err(StmError::BelowVisibility {
                    requested: v,
                    visibility: vis,
                });
            }
            if v < st.vt && cut.is_none() {
                drop(st);
                cut = Some(self.zone.shared());
                continue;
            }
            let raised = v > st.vt;
            st.vt = v;
            self.store_visibility(&st);
            drop(st);
            drop(cut);
            if raised {
                self.zone.nudge();
            }
            return Ok(());
        }
    }

    fn exit(&self) {
        let (conns, blocked) = {
            let mut st = lock(&self.state);
            if !self.alive.swap(false, Ordering::AcqRel) {
                return;
            }
            let blocked: Vec<_> = st.pending.iter().map(|p| p.wake.clone()).collect();
            (std::mem::take(&mut st.conns), blocked)
        };
        for c in blocked.iter().filter_map(Weak::upgrade) {
            c.wake_putters();
        }
        for (c, id) in conns {
            if let Some(c) = c.upgrade() {
                c.detach(id, self);
            }
        }
        self.zone.remove_task(self.id);
        self.zone.nudge();
    }
}

/// A sequential activity with a virtual time, owning its connections.
///
/// A task's *visibility* is the minimum of its virtual time, the timestamps of the items open
/// on its input connections, and the queue items it holds. The runtime enforces four rules:
/// puts carry a timestamp at or above visibility; a child starts at or above its parent's
/// visibility; attaching an input connection marks every item present below visibility as
/// consumed on it; virtual time can only be set at or above visibility.
///
/// ```
/// use stampede_core::{ContainerOptions, Runtime, StmError, INFINITY};
/// let rt = Runtime::new();
/// let frames = rt.channel(ContainerOptions::default()).unwrap();
/// let digitizer = rt.task(0).unwrap();
/// let out = digitizer.attach_output(&frames).unwrap();
/// out.put(0, "frame 0").unwrap();
/// digitizer.set_virtual_time(1).unwrap();
/// assert!(out.put(0, "late").is_err()); // rule 1: below visibility
/// assert!(matches!(digitizer.set_virtual_time(0), Err(StmError::BelowVisibility { .. })));
/// digitizer.set_virtual_time(INFINITY).unwrap(); // done producing
/// ```
///
/// Dropping a task (or calling [`exit`](Task::exit)) detaches all its connections and
/// removes its virtual time from the watermark.
pub struct Task {
    pub(crate) inner: Arc<TaskInner>,
    pub(crate) rt: Runtime,
}

impl fmt::Debug for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl Task {
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.inner.id
    }
    /// The task's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// The task's time zone.
    pub fn zone(&self) -> ZoneId {
        self.inner.zone.id
    }
    /// The runtime the task belongs to.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }
    /// The task's virtual time.
    pub fn virtual_time(&self) -> Timestamp {
        lock(&self.inner.state).vt
    }
    /// The lowest timestamp the task may put now.
    pub fn visibility(&self) -> Timestamp {
        self.inner.visibility()
    }

    /// Sets the virtual time; it may not go below the task's visibility (rule 4).
    pub fn set_virtual_time(&self, vt: Timestamp) -> Result<(), StmError> {
        self.inner.set_virtual_time(vt)
    }

    /// Attaches an input connection (rule 3: items present below visibility start consumed).
    ///
    /// The container may live here or be served by another address space: the connection
    /// works the same, and its open items count in this task's visibility either way.
    pub fn attach_input<C: Container>(&self, c: &C) -> Result<InputConnection<C>, StmError> {
        let id = self.rt.next_conn();
        let via = match c.flavor() {
            Flavor::Local(l) => {
                l.attach_input(&self.inner, id)?;
                let detach: Arc<dyn Detach> = l.clone();
                if let Err(e) = self.inner.register_conn(Arc::downgrade(&detach), id) {
                    l.detach(id, &self.inner);
                    return Err(e);
                }
                Via::Local(l.clone())
            }
            Flavor::Provided(b) => Via::Provided(Linked::attach(
                &**b,
                &self.inner,
                &self.rt,
                id,
                true,
                C::HOLDS,
            )?),
        };
        Ok(InputConnection::new(c.clone(), via, self.inner.clone(), id))
    }

    /// Attaches an output connection. Puts go only into containers of the task's own zone.
    pub fn attach_output<C: Container>(&self, c: &C) -> Result<OutputConnection<C>, StmError> {
        if !self.inner.is_alive() {
            return Err(StmError::TaskExited);
        }
        let zone = c.zone();
        if zone != self.zone() {
            return Err(StmError::ZoneMismatch {
                task: self.zone(),
                container: zone,
            });
        }
        let id = self.rt.next_conn();
        let via = match c.flavor() {
            Flavor::Local(l) => Via::Local(l.clone()),
            Flavor::Provided(b) => Via::Provided(Linked::attach(
                &**b,
                &self.inner,
                &self.rt,
                id,
                false,
                C::HOLDS,
            )?),
        };
        Ok(OutputConnection::new(
            c.clone(),
            via,
            self.inner.clone(),
            id,
        ))
    }

    /// Starts building a child task; its virtual time must be at least this task's
    /// visibility (rule 2) when it stays in this zone.
    pub fn child(&self) -> TaskBuilder<'_> {
        let mut b = TaskBuilder::new(&self.rt);
        b.parent = Some(&self.inner);
        b.zone = self.zone();
        b
    }

    /// A real-time pacer for this task (see [`Pacer`]).
    pub fn pacer(
        &self,
        period: Duration,
        tolerance: Duration,
        on_late: impl FnMut(Lateness) -> LateAction + Send + 'static,
    ) -> Pacer {
        Pacer::new(period, tolerance, on_late)
    }

    /// Ends the task: detaches every connection (queue items it held are redelivered) and
    /// removes its virtual time from the watermark.
    pub fn exit(self) {}
}

impl Drop for Task {
    fn drop(&mut self) {
        self.inner.exit();
    }
}

/// Configures a new task: name, zone and initial virtual time.
#[derive(Debug)]
pub struct TaskBuilder<'a> {
    rt: Runtime,
    parent: Option<&'a Arc<TaskInner>>,
    name: Option<String>,
    zone: ZoneId,
    vt: Timestamp,
    proxy: bool,
}

impl<'a> TaskBuilder<'a> {
    pub(crate) fn new(rt: &Runtime) -> Self {
        TaskBuilder {
            rt: rt.clone(),
            parent: None,
            name: None,
            zone: ZoneId::DEFAULT,
            vt: INFINITY,
            proxy: false,
        }
    }

    /// Makes the task a proxy for a task of another address space (see
    /// [`provider::proxy_task`](crate::provider::proxy_task)).
    pub(crate) fn proxy(mut self) -> Self {
        self.proxy = true;
        self
    }

    /// Names the task (used in watermark explanations and thread names).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Puts the task in a time zone.
    pub fn zone(mut self, zone: ZoneId) -> Self {
        self.zone = zone;
        self
    }

    /// The initial virtual time (default `INFINITY`).
    pub fn virtual_time(mut self, vt: Timestamp) -> Self {
        self.vt = vt;
        self
    }

    /// Creates the task for use on the current thread.
    ///
    /// A task created from the runtime must start at or above its zone's floor; a child in its
    /// parent's zone at or above the parent's visibility.
    pub fn create(self) -> Result<Task, StmError> {
        let zone = self.rt.zone(self.zone);
        let _cut = zone.shared();
        let min = match self.parent {
            Some(p) if p.zone.id == self.zone => {
                if !p.is_alive() {
                    return Err(StmError::TaskExited);
                }
                p.visibility().max(zone.floor())
            }
            _ => zone.floor(),
        };
        if self.vt < min {
            return Err(StmError::BelowVisibility {
                requested: self.vt,
                visibility: min,
            });
        }
        let id = TaskId(self.rt.next_id());
        let inner = Arc::new(TaskInner {
            id,
            name: self.name.unwrap_or_else(|| format!("task-{}", id.0)),
            zone: zone.clone(),
            visibility: AtomicI64::new(self.vt),
            state: Mutex::new(TaskState {
                vt: self.vt,
                open: Vec::new(),
                pending: Vec::new(),
                conns: Vec::new(),
                links: Vec::new(),
            }),
            alive: AtomicBool::new(true),
            blocked_ns: AtomicU64::new(0),
            proxy: self.proxy,
        });
        zone.add_task(inner.clone());
        drop(_cut);
        // A proxy's virtual time is no watermark term: nothing to announce for it.
        if self.parent.is_none() && !self.proxy {
            self.rt.root_task_created(self.zone);
        }
        Ok(Task {
            inner,
            rt: self.rt.clone(),
        })
    }

    /// Creates the task and runs `f` with it on a new thread; the task exits when `f` returns.
    pub fn spawn<F, R>(self, f: F) -> Result<std::thread::JoinHandle<R>, StmError>
    where
        F: FnOnce(Task) -> R + Send + 'static,
        R: Send + 'static,
    {
        let task = self.create()?;
        std::thread::Builder::new()
            .name(task.name().to_owned())
            .spawn(move || f(task))
            .map_err(|_| StmError::InvalidArgument("the OS refused to start a thread".into()))
    }
}
