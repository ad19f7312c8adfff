//! Runtime, tasks, containers and connections.
//!
//! # Local and remote containers
//! Tasks and containers are stampede-net's, so one Python class serves a container of this
//! address space and one owned by another (found through a `Space`). A connection keeps the
//! core's connection for a local container, as stampede-net itself does, because the
//! correlator takes it by value; for a remote one it keeps stampede-net's. Features only the
//! core has (lengths, counters, callbacks, arrival streams, correlation) work on local
//! containers and raise `NotLocal` on remote ones.
//!
//! # The GIL and locks
//! Calls that may block run with the GIL released; gets wait in slices of [`SLICE`] so that
//! signals (Ctrl-C) are seen between slices. A blocked put (and a pacer's sleep) waits in
//! one piece, because it is a watermark term for as long as it waits; the core asks its
//! [`Signals`] check while it waits instead. Every operation on a remote container is a
//! network round trip and runs without the GIL. Local calls that cannot block keep the GIL:
//! the core never calls into Python while it holds one of its locks, and items drop their
//! Python objects without the GIL (the decrement is deferred), so no core lock ever waits for
//! the GIL. Handles that Python can invalidate (`detach`, `exit`) sit behind a mutex that is
//! only held to clone or take an `Arc`, never across a blocking call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use stampede_core as core;
use stampede_core::{
    Container, ContainerOptions, GetError, InputConnection, OutputConnection, PutOptions,
    Timestamp, Wait, ZoneId, INFINITY,
};

use crate::errors::{self, Exc};
use crate::items;

/// Longest uninterrupted wait with the GIL released.
pub(crate) const SLICE: Duration = Duration::from_millis(100);

/// Set by an `atexit` hook: from then on, core threads no longer call into Python.
pub(crate) static FINALIZING: AtomicBool = AtomicBool::new(false);

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs `f` on the calling core thread with the GIL, unless the interpreter is shutting
/// down; an exception goes to `sys.unraisablehook`.
pub(crate) fn call_back(f: impl FnOnce(Python<'_>) -> PyResult<()>) {
    if FINALIZING.load(Ordering::Acquire) {
        return;
    }
    Python::attach(|py| {
        if let Err(e) = f(py) {
            e.write_unraisable(py, None);
        }
    });
}

/// Drops `x` without the GIL: dropping a task or connection of a distributed application
/// tells the owners of its containers, which is a network send.
pub(crate) fn drop_detached<T: Send>(x: T) {
    if FINALIZING.load(Ordering::Acquire) {
        drop(x);
        return;
    }
    Python::attach(|py| py.detach(|| drop(x)));
}

/// A timeout argument in seconds: `None` waits forever.
pub(crate) fn deadline(py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Instant>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_finite() && t >= 0.0 => Ok(Some(
            Instant::now() + Duration::try_from_secs_f64(t).unwrap_or(Duration::MAX / 4),
        )),
        Some(t) => Err(errors::invalid(
            py,
            format!("timeout {t} is not a non-negative number of seconds"),
        )),
    }
}

pub(crate) fn duration(py: Python<'_>, what: &str, secs: f64) -> PyResult<Duration> {
    if secs.is_finite() && secs >= 0.0 {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(errors::invalid(
            py,
            format!("{what} {secs} is not a non-negative number of seconds"),
        ))
    }
}

/// The next slice of a wait until `deadline`, and whether it is the last one.
pub(crate) fn next_slice(deadline: Option<Instant>) -> (Duration, bool) {
    match deadline {
        None => (SLICE, false),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            if left <= SLICE {
                (left, true)
            } else {
                (SLICE, false)
            }
        }
    }
}

/// The whole wait until `deadline`, for operations that must not be split into slices.
fn whole_wait(deadline: Option<Instant>) -> Wait {
    match deadline {
        None => Wait::Forever,
        Some(d) => Wait::For(d.saturating_duration_since(Instant::now())),
    }
}

/// Runs a blocking operation in slices with the GIL released until it succeeds, fails for
/// a reason other than `retry`, or `deadline` passes.
pub(crate) fn blocking<T: Send, E: Send>(
    py: Python<'_>,
    deadline: Option<Instant>,
    op: impl Fn(Wait) -> Result<T, E> + Sync,
    retry: impl Fn(&E) -> bool,
) -> PyResult<Result<T, E>> {
    loop {
        let (slice, last) = next_slice(deadline);
        let r = py.detach(|| op(Wait::For(slice)));
        match r {
            Err(e) if retry(&e) && !last => py.check_signals()?,
            r => return Ok(r),
        }
    }
}

/// The pending-signal check of a call that waits in one piece (a blocked put, a pacer's
/// sleep): the core asks it while it waits, with no lock held, and it runs the
/// interpreter's signal handlers. The first exception one raises (`KeyboardInterrupt` on
/// Ctrl-C) stops the wait and is kept here for the caller to raise.
#[derive(Default)]
pub(crate) struct Signals(Mutex<Option<PyErr>>);

impl Signals {
    pub(crate) fn pending(&self) -> bool {
        if FINALIZING.load(Ordering::Acquire) {
            return false;
        }
        Python::attach(|py| match py.check_signals() {
            Ok(()) => false,
            Err(e) => {
                lock(&self.0).get_or_insert(e);
                true
            }
        })
    }

    /// The exception a signal handler raised, if any.
    pub(crate) fn take(&self) -> Option<PyErr> {
        lock(&self.0).take()
    }

    /// A failed put's exception: the signal handler's if it stopped the put.
    fn put_error(&self, py: Python<'_>, e: core::PutError, item: &Bound<'_, PyAny>) -> PyErr {
        match self.take() {
            Some(raised) if e.kind() == core::PutErrorKind::Interrupted => raised,
            _ => errors::put_error(py, e, item),
        }
    }
}

fn is_timeout(e: &GetError) -> bool {
    matches!(e, GetError::Timeout(_))
}

pub(crate) fn zone_id(py: Python<'_>, zone: i64) -> PyResult<ZoneId> {
    u32::try_from(zone)
        .map(ZoneId)
        .map_err(|_| errors::invalid(py, format!("zone {zone} is not in 0..2**32")))
}

pub(crate) fn options(
    py: Python<'_>,
    name: Option<String>,
    capacity: Option<i64>,
    zone: i64,
) -> PyResult<ContainerOptions> {
    let mut o = match capacity {
        None => ContainerOptions::unbounded(),
        Some(c) if c > 0 => ContainerOptions::bounded(c as usize),
        Some(c) => {
            return Err(errors::invalid(
                py,
                format!("capacity {c} must be at least 1"),
            ))
        }
    };
    if let Some(n) = name {
        o = o.name(n);
    }
    Ok(o.zone(zone_id(py, zone)?))
}

/// An address space's Space-Time Memory: containers, tasks and their garbage collection.
///
/// A background collector reclaims items below the watermark every ``gc_interval`` seconds
/// (``None``: only on demand, through ``collect`` and full bounded containers).
///
/// A ``Space`` is a runtime joined to a distributed application: the same methods then
/// name containers application-wide and find them wherever they live, so a program written
/// against ``Runtime`` runs unchanged on either. Its collector runs until the space leaves.
#[pyclass(module = "stampede", frozen, subclass)]
pub(crate) struct Runtime {
    rt: core::Runtime,
    threads: Threads,
    // A name is a reference: named containers live as long as the runtime.
    named: Mutex<Vec<core::Named>>,
    // A space's runtime: naming and lookups may cross the network (run without the GIL),
    // and its space stops the collector when it leaves.
    joined: bool,
    // Its space left: no more containers, lookups or tasks.
    left: AtomicBool,
}

impl Runtime {
    /// The runtime of an address space.
    pub(crate) fn of_space(rt: core::Runtime) -> Runtime {
        Runtime {
            rt,
            threads: Threads::default(),
            named: Mutex::new(Vec::new()),
            joined: true,
            left: AtomicBool::new(false),
        }
    }

    /// Its address space left the application.
    pub(crate) fn mark_left(&self) {
        self.left.store(true, Ordering::Release);
    }

    /// Fails with ``Closed`` once the runtime's address space left.
    fn open(&self, py: Python<'_>) -> PyResult<()> {
        if self.left.load(Ordering::Acquire) {
            return Err(errors::raise(
                py,
                Exc::Closed,
                ("the address space has left its application",),
            ));
        }
        Ok(())
    }

    /// Keeps a named container alive as long as the runtime, and wraps it.
    fn keep(&self, c: core::Named) -> core::Named {
        lock(&self.named).push(c.clone());
        c
    }

    /// Runs a lookup that waits up to `timeout` in slices, so signals are seen between them.
    fn waiting_lookup<T: Send>(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        f: impl Fn(&core::Runtime, Duration) -> Result<T, core::StmError> + Sync,
    ) -> PyResult<T> {
        self.open(py)?;
        let deadline = deadline(py, timeout)?;
        loop {
            let (slice, last) = next_slice(deadline);
            match run(py, !self.joined && slice.is_zero(), || f(&self.rt, slice)) {
                Err(core::StmError::NotFound(_)) if !last => py.check_signals()?,
                r => return r.map_err(|e| errors::stm_error(py, e)),
            }
        }
    }
}

/// Threads started by `spawn`, for `join_all`.
#[derive(Default)]
pub(crate) struct Threads(Mutex<Vec<Py<PyAny>>>);

impl Threads {
    /// Starts ``target(task, *args)`` on a `stampede.TaskThread`.
    pub(crate) fn spawn(
        &self,
        py: Python<'_>,
        task: Task,
        target: &Bound<'_, PyAny>,
        args: Bound<'_, PyTuple>,
        daemon: bool,
    ) -> PyResult<Py<PyAny>> {
        let target = callable(target, "a task's target")?;
        let task = Py::new(py, task)?;
        let thread = py
            .import("stampede._tasks")?
            .getattr("TaskThread")?
            .call1((task, target, args, daemon))?;
        thread.call_method0("start")?;
        let thread = thread.unbind();
        let mut threads = lock(&self.0);
        threads.retain(|t| {
            t.bind(py)
                .call_method0("is_alive")
                .and_then(|a| a.is_truthy())
                .unwrap_or(false)
        });
        threads.push(thread.clone_ref(py));
        Ok(thread)
    }

    /// Joins every thread; raises the first exception one of them raised.
    pub(crate) fn join_all(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let deadline = deadline(py, timeout)?;
        let threads: Vec<Py<PyAny>> = std::mem::take(&mut *lock(&self.0));
        let mut first_err = None;
        for t in threads {
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64());
            if let Err(e) = t.bind(py).call_method1("result", (left,)) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[pymethods]
impl Runtime {
    #[new]
    #[pyo3(signature = (*, gc_interval = Some(0.005)))]
    fn new(py: Python<'_>, gc_interval: Option<f64>) -> PyResult<Self> {
        let every = match gc_interval {
            None => None,
            Some(s) if s > 0.0 => Some(duration(py, "gc_interval", s)?),
            Some(s) => {
                return Err(errors::invalid(
                    py,
                    format!("gc_interval {s} must be positive or None"),
                ))
            }
        };
        Ok(Runtime {
            rt: core::Runtime::builder().gc_interval(every).build(),
            threads: Threads::default(),
            named: Mutex::new(Vec::new()),
            joined: false,
            left: AtomicBool::new(false),
        })
    }

    /// Creates a channel: at most one item per timestamp, random access by timestamp.
    #[pyo3(signature = (name = None, *, capacity = None, zone = 0))]
    fn channel(
        &self,
        py: Python<'_>,
        name: Option<String>,
        capacity: Option<i64>,
        zone: i64,
    ) -> PyResult<Channel> {
        self.open(py)?;
        let named = name.is_some();
        let opts = options(py, name, capacity, zone)?;
        let ch = run(py, !self.joined, || self.rt.channel(opts))
            .map_err(|e| errors::stm_error(py, e))?;
        if named {
            self.keep(core::Named::Channel(ch.clone()));
        }
        Ok(Channel::wrap(ch))
    }

    /// Creates a queue: FIFO items, each delivered to exactly one getter.
    #[pyo3(signature = (name = None, *, capacity = None, zone = 0))]
    fn queue(
        &self,
        py: Python<'_>,
        name: Option<String>,
        capacity: Option<i64>,
        zone: i64,
    ) -> PyResult<Queue> {
        self.open(py)?;
        let named = name.is_some();
        let opts = options(py, name, capacity, zone)?;
        let q =
            run(py, !self.joined, || self.rt.queue(opts)).map_err(|e| errors::stm_error(py, e))?;
        if named {
            self.keep(core::Named::Queue(q.clone()));
        }
        Ok(Queue::wrap(q))
    }

    /// Creates a register: one overwritable value.
    #[pyo3(signature = (name = None, *, zone = 0))]
    fn register(&self, py: Python<'_>, name: Option<String>, zone: i64) -> PyResult<Register> {
        self.open(py)?;
        let named = name.is_some();
        let opts = options(py, name, None, zone)?;
        let r = run(py, !self.joined, || self.rt.register(opts))
            .map_err(|e| errors::stm_error(py, e))?;
        if named {
            self.keep(core::Named::Register(r.clone()));
        }
        Ok(Register { reg: r })
    }

    /// The channel called ``name``, waiting up to ``timeout`` seconds (``None``: until it
    /// appears): in this runtime, or anywhere in the application for a ``Space``. Raises
    /// ``NotFound`` when it does not appear in time, ``WrongKind`` when the name is not a
    /// channel's.
    #[pyo3(signature = (name, timeout = None))]
    fn lookup_channel(
        &self,
        py: Python<'_>,
        name: &str,
        timeout: Option<f64>,
    ) -> PyResult<Channel> {
        let ch = self.waiting_lookup(py, timeout, |rt, t| rt.lookup_channel(name, t))?;
        Ok(Channel::wrap(ch))
    }

    /// The queue called ``name`` (see ``lookup_channel``).
    #[pyo3(signature = (name, timeout = None))]
    fn lookup_queue(&self, py: Python<'_>, name: &str, timeout: Option<f64>) -> PyResult<Queue> {
        let q = self.waiting_lookup(py, timeout, |rt, t| rt.lookup_queue(name, t))?;
        Ok(Queue::wrap(q))
    }

    /// The register called ``name`` (see ``lookup_channel``).
    #[pyo3(signature = (name, timeout = None))]
    fn lookup_register(
        &self,
        py: Python<'_>,
        name: &str,
        timeout: Option<f64>,
    ) -> PyResult<Register> {
        let reg = self.waiting_lookup(py, timeout, |rt, t| rt.lookup_register(name, t))?;
        Ok(Register { reg })
    }

    /// The live container registered under ``name`` in this runtime, or ``None`` (no
    /// waiting, nothing asked of other address spaces).
    fn lookup(&self, py: Python<'_>, name: &str) -> PyResult<Option<Py<PyAny>>> {
        Ok(match self.rt.lookup(name) {
            None => None,
            Some(core::Named::Channel(c)) => Some(Py::new(py, Channel::wrap(c))?.into_any()),
            Some(core::Named::Queue(q)) => Some(Py::new(py, Queue::wrap(q))?.into_any()),
            Some(core::Named::Register(r)) => Some(Py::new(py, Register { reg: r })?.into_any()),
            Some(_) => None,
        })
    }

    /// Names of the live registered containers.
    fn names(&self) -> Vec<String> {
        self.rt.names()
    }

    /// Creates a task with virtual time ``vt`` on the calling thread (in a ``Space``, it
    /// reaches every address space's containers).
    #[pyo3(signature = (vt = 0, *, name = None, zone = 0))]
    fn task(
        &self,
        py: Python<'_>,
        vt: Timestamp,
        name: Option<String>,
        zone: i64,
    ) -> PyResult<Task> {
        self.open(py)?;
        let mut b = self
            .rt
            .task_builder()
            .virtual_time(vt)
            .zone(zone_id(py, zone)?);
        if let Some(n) = name {
            b = b.name(n);
        }
        // A joined runtime publishes its marks before the task can reach other spaces.
        let t = run(py, !self.joined, || b.create()).map_err(|e| errors::stm_error(py, e))?;
        Ok(Task::wrap(t, self.joined))
    }

    /// Starts ``target(task, *args)`` on a new thread with a new task (virtual time ``vt``);
    /// the task exits when ``target`` returns. Returns the thread (``result()`` joins it).
    #[pyo3(signature = (target, *args, vt = 0, name = None, zone = 0, daemon = false))]
    #[allow(clippy::too_many_arguments)] // the Python signature
    fn spawn(
        &self,
        py: Python<'_>,
        target: &Bound<'_, PyAny>,
        args: Bound<'_, PyTuple>,
        vt: Timestamp,
        name: Option<String>,
        zone: i64,
        daemon: bool,
    ) -> PyResult<Py<PyAny>> {
        let task = self.task(py, vt, name, zone)?;
        self.threads.spawn(py, task, target, args, daemon)
    }

    /// Joins every thread started by ``spawn``; raises the first exception one of them raised.
    #[pyo3(signature = (timeout = None))]
    fn join_all(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        self.threads.join_all(py, timeout)
    }

    /// Runs a collection pass in ``zone`` now; returns the zone's floor.
    #[pyo3(signature = (zone = 0))]
    fn collect(&self, py: Python<'_>, zone: i64) -> PyResult<Timestamp> {
        let z = zone_id(py, zone)?;
        Ok(py.detach(|| self.rt.collect_zone(z)))
    }

    /// Every term of ``zone``'s watermark and what holds it.
    #[pyo3(signature = (zone = 0))]
    fn explain(&self, py: Python<'_>, zone: i64) -> PyResult<WatermarkReport> {
        let z = zone_id(py, zone)?;
        let r = py.detach(|| self.rt.explain(z));
        Ok(WatermarkReport::from(r))
    }

    /// Collection counters of ``zone``.
    #[pyo3(signature = (zone = 0))]
    fn gc_stats(&self, py: Python<'_>, zone: i64) -> PyResult<GcStats> {
        let s = self.rt.gc_stats(zone_id(py, zone)?);
        Ok(GcStats {
            passes: s.passes,
            reclaimed: s.reclaimed,
            floor: s.floor,
        })
    }

    /// Stops the background collector (passes still run on demand). A space's runtime
    /// collects until the space leaves.
    fn close(&self) {
        if !self.joined {
            self.rt.stop_collector();
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _t: Option<Bound<'_, PyAny>>,
        _e: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) {
        self.close();
    }
}

/// A thread of control with a virtual time.
///
/// Virtual time orders what the task may still put and bounds garbage collection: the task
/// never puts below its visibility, and items at or above it stay available to it. A task
/// exits on ``exit()``, at the end of its ``with`` block, or once neither it nor any of its
/// connections is referenced any more. A task of a ``Space`` also reaches the containers of
/// other address spaces.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Task {
    task: Mutex<Option<Arc<core::Task>>>,
    /// A task of a joined runtime: its exit may tell other address spaces, so it drops
    /// without the GIL.
    joined: bool,
    id: u64,
    name: String,
    zone: u32,
}

impl Task {
    pub(crate) fn wrap(t: core::Task, joined: bool) -> Task {
        Task {
            id: t.id().0,
            name: t.name().to_owned(),
            zone: t.zone().0,
            joined,
            task: Mutex::new(Some(Arc::new(t))),
        }
    }

    fn get(&self, py: Python<'_>) -> PyResult<Arc<core::Task>> {
        lock(&self.task).clone().ok_or_else(|| {
            errors::raise(
                py,
                Exc::TaskExited,
                (format!("task {} has exited", self.name),),
            )
        })
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        if let Some(t) = lock(&self.task).take() {
            if self.joined {
                drop_detached(t);
            }
        }
    }
}

/// Runs `f` at once when `local`, else without the GIL: an operation on a container of
/// another address space is a round trip to its owner.
fn run<R: Send>(py: Python<'_>, local: bool, f: impl FnOnce() -> R + Send) -> R {
    if local {
        f()
    } else {
        py.detach(f)
    }
}

#[pymethods]
impl Task {
    /// The task's id, unique in its runtime.
    #[getter]
    fn id(&self) -> u64 {
        self.id
    }
    /// The task's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    /// The task's time zone.
    #[getter]
    fn zone(&self) -> u32 {
        self.zone
    }
    /// The task's virtual time.
    #[getter]
    fn virtual_time(&self, py: Python<'_>) -> PyResult<Timestamp> {
        Ok(self.get(py)?.virtual_time())
    }
    /// The lowest timestamp the task may still put: its virtual time, or the oldest item it
    /// holds open (here or in another address space) if that is lower.
    #[getter]
    fn visibility(&self, py: Python<'_>) -> PyResult<Timestamp> {
        Ok(self.get(py)?.visibility())
    }
    /// Whether the task has exited.
    #[getter]
    fn exited(&self) -> bool {
        lock(&self.task).is_none()
    }

    /// Sets the virtual time; lowering it below the visibility raises ``BelowVisibility``.
    fn set_virtual_time(&self, py: Python<'_>, vt: Timestamp) -> PyResult<()> {
        self.get(py)?
            .set_virtual_time(vt)
            .map_err(|e| errors::stm_error(py, e))
    }

    /// Attaches for getting: a ``ChannelInput``, ``QueueInput`` or ``RegisterInput``.
    fn attach_input(slf: &Bound<'_, Self>, container: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let t = me.get(py)?;
        let task = || slf.clone().unbind();
        let stm = |e| errors::stm_error(py, e);
        if let Ok(c) = container.cast::<Channel>() {
            let link = Conn::new(py, &t, &c.get().ch, core::Task::attach_input).map_err(stm)?;
            return Ok(Py::new(
                py,
                ChannelInput {
                    conn: link,
                    task: task(),
                    channel: c.clone().unbind(),
                },
            )?
            .into_any());
        }
        if let Ok(q) = container.cast::<Queue>() {
            let link = Conn::new(py, &t, &q.get().q, core::Task::attach_input).map_err(stm)?;
            return Ok(Py::new(
                py,
                QueueInput {
                    conn: link,
                    task: task(),
                    queue: q.clone().unbind(),
                },
            )?
            .into_any());
        }
        if let Ok(r) = container.cast::<Register>() {
            let link = Conn::new(py, &t, &r.get().reg, core::Task::attach_input).map_err(stm)?;
            return Ok(Py::new(
                py,
                RegisterInput {
                    conn: link,
                    task: task(),
                    register: r.clone().unbind(),
                },
            )?
            .into_any());
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "attach_input needs a Channel, Queue or Register, not {}",
            container.get_type()
        )))
    }

    /// Attaches for putting: a ``ChannelOutput``, ``QueueOutput`` or ``RegisterOutput``.
    fn attach_output(slf: &Bound<'_, Self>, container: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let t = me.get(py)?;
        let task = || slf.clone().unbind();
        let stm = |e| errors::stm_error(py, e);
        if let Ok(c) = container.cast::<Channel>() {
            let link = Conn::new(py, &t, &c.get().ch, core::Task::attach_output).map_err(stm)?;
            let bounded = c.get().capacity().is_some();
            return Ok(Py::new(
                py,
                ChannelOutput {
                    conn: link,
                    task: task(),
                    channel: c.clone().unbind(),
                    bounded,
                },
            )?
            .into_any());
        }
        if let Ok(q) = container.cast::<Queue>() {
            let link = Conn::new(py, &t, &q.get().q, core::Task::attach_output).map_err(stm)?;
            return Ok(Py::new(
                py,
                QueueOutput {
                    conn: link,
                    task: task(),
                    queue: q.clone().unbind(),
                },
            )?
            .into_any());
        }
        if let Ok(r) = container.cast::<Register>() {
            let link = Conn::new(py, &t, &r.get().reg, core::Task::attach_output).map_err(stm)?;
            return Ok(Py::new(
                py,
                RegisterOutput {
                    conn: link,
                    task: task(),
                    register: r.clone().unbind(),
                },
            )?
            .into_any());
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "attach_output needs a Channel, Queue or Register, not {}",
            container.get_type()
        )))
    }

    /// Creates a child task; its virtual time defaults to ``INFINITY`` and may not be below
    /// this task's visibility.
    #[pyo3(signature = (vt = None, *, name = None))]
    fn child(&self, py: Python<'_>, vt: Option<Timestamp>, name: Option<String>) -> PyResult<Task> {
        let t = self.get(py)?;
        let vt = vt.unwrap_or(INFINITY);
        let mut b = t.child().virtual_time(vt);
        if let Some(n) = name {
            b = b.name(n);
        }
        let child = b.create().map_err(|e| errors::stm_error(py, e))?;
        Ok(Task::wrap(child, self.joined))
    }

    /// A pacer ticking every ``period`` seconds (see ``Pacer``).
    #[pyo3(signature = (period, *, tolerance = 0.0, on_late = None))]
    fn pacer(
        &self,
        py: Python<'_>,
        period: f64,
        tolerance: f64,
        on_late: Option<Py<PyAny>>,
    ) -> PyResult<crate::extras::Pacer> {
        crate::extras::Pacer::create(py, period, tolerance, on_late)
    }

    /// Exits: the task's connections detach, and it no longer holds the watermark.
    fn exit(&self, py: Python<'_>) {
        let t = lock(&self.task).take();
        py.detach(|| drop(t));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<Bound<'_, PyAny>>,
        _e: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) {
        self.exit(py);
    }

    fn __repr__(&self) -> String {
        format!("Task(id={}, name={:?})", self.id, self.name)
    }
}

type ChannelIn = InputConnection<core::Channel>;
type ChannelOut = OutputConnection<core::Channel>;
type QueueIn = InputConnection<core::Queue>;
type QueueOut = OutputConnection<core::Queue>;
type RegisterIn = InputConnection<core::Register>;
type RegisterOut = OutputConnection<core::Register>;

/// A connection that Python can detach while other threads use it.
pub(crate) struct Conn<T: Send + Sync + 'static> {
    inner: Arc<Mutex<Option<Arc<T>>>>,
    /// The id of a connection to a container here; `None` for another address space's
    /// container (its id lives at the owner).
    id: Option<u64>,
    /// Whether the container lives here: its operations then run with the GIL held.
    local: bool,
}

impl<T: Send + Sync + 'static> Conn<T> {
    /// Attaches `task` to `container` with `attach` (without the GIL when the container
    /// lives in another address space).
    fn new<C: Container>(
        py: Python<'_>,
        task: &core::Task,
        container: &C,
        attach: impl FnOnce(&core::Task, &C) -> Result<T, core::StmError> + Send,
    ) -> Result<Self, core::StmError>
    where
        T: HasId,
    {
        let local = container.is_local();
        let c = run(py, local, || attach(task, container))?;
        Ok(Conn {
            id: local.then(|| c.conn_id()),
            local,
            inner: Arc::new(Mutex::new(Some(Arc::new(c)))),
        })
    }

    pub(crate) fn get(&self, py: Python<'_>) -> PyResult<Arc<T>> {
        lock(&self.inner)
            .clone()
            .ok_or_else(|| errors::raise(py, Exc::Detached, ("the connection is detached",)))
    }

    fn get_for_put(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Arc<T>> {
        lock(&self.inner)
            .clone()
            .ok_or_else(|| errors::detached_put(py, value))
    }

    fn is_detached(&self) -> bool {
        lock(&self.inner).is_none()
    }

    fn detach(&self, py: Python<'_>) {
        let c = lock(&self.inner).take();
        py.detach(|| drop(c));
    }

    /// Takes the connection for another owner (a correlator); it must not be in use.
    pub(crate) fn take(&self, py: Python<'_>) -> PyResult<T> {
        let c = self.get(py)?;
        lock(&self.inner).take();
        Arc::try_unwrap(c)
            .map_err(|_| errors::invalid(py, "the connection is in use by another thread"))
    }
}

impl<T: Send + Sync + 'static> Drop for Conn<T> {
    fn drop(&mut self) {
        if let Some(c) = lock(&self.inner).take() {
            if !self.local {
                drop_detached(c);
            }
        }
    }
}

/// A connection's id.
pub(crate) trait HasId {
    fn conn_id(&self) -> u64;
}
impl<C: Container> HasId for InputConnection<C> {
    fn conn_id(&self) -> u64 {
        self.id().0
    }
}
impl<C: Container> HasId for OutputConnection<C> {
    fn conn_id(&self) -> u64 {
        self.id().0
    }
}

macro_rules! connection_common {
    ($ty:ident) => {
        #[pymethods]
        impl $ty {
            /// The connection's id in this address space's watermark explanations
            /// (``NotLocal`` for a connection to another address space's container, whose
            /// id lives at the owner).
            #[getter]
            fn id(&self, py: Python<'_>) -> PyResult<u64> {
                self.conn
                    .id
                    .ok_or_else(|| errors::not_local(py, "a connection id", None))
            }
            /// Whether the connection was detached (or handed to a correlator).
            #[getter]
            fn detached(&self) -> bool {
                self.conn.is_detached() || self.task.get().exited()
            }
            /// The task that attached the connection.
            #[getter]
            fn task(&self, py: Python<'_>) -> Py<Task> {
                self.task.clone_ref(py)
            }
            /// Detaches: open items close, and the connection no longer holds the watermark.
            fn detach(&self, py: Python<'_>) {
                self.conn.detach(py)
            }
            fn __enter__(slf: Py<Self>) -> Py<Self> {
                slf
            }
            fn __exit__(
                &self,
                py: Python<'_>,
                _t: Option<Bound<'_, PyAny>>,
                _e: Option<Bound<'_, PyAny>>,
                _tb: Option<Bound<'_, PyAny>>,
            ) {
                self.conn.detach(py)
            }
        }
    };
}

/// A channel selector: an ``int`` (that exact timestamp) or a ``Selector``.
fn selector(sel: &Bound<'_, PyAny>) -> PyResult<core::Selector> {
    if let Ok(s) = sel.cast::<Selector>() {
        return Ok(match *s.get() {
            Selector::Oldest => core::Selector::Oldest,
            Selector::Newest => core::Selector::Newest,
            Selector::NewestUnseen => core::Selector::NewestUnseen,
            Selector::NextUnseen => core::Selector::NextUnseen,
        });
    }
    if sel.is_instance_of::<pyo3::types::PyInt>() {
        return sel
            .extract::<Timestamp>()
            .map(core::Selector::Exact)
            .map_err(|_| {
                errors::invalid(sel.py(), format!("timestamp {sel} is not a 64-bit integer"))
            });
    }
    match sel.extract::<Timestamp>() {
        Ok(ts) => Ok(core::Selector::Exact(ts)),
        Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a selector is an int timestamp or a stampede.Selector, not {}",
            sel.get_type()
        ))),
    }
}

/// Which item a channel get asks for (an ``int`` asks for that exact timestamp).
#[pyclass(module = "stampede", frozen, eq, eq_int, hash, skip_from_py_object)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Selector {
    /// The oldest item not consumed on this connection.
    #[pyo3(name = "OLDEST")]
    Oldest,
    /// The newest item not consumed on this connection.
    #[pyo3(name = "NEWEST")]
    Newest,
    /// The newest item this connection has never gotten; skips stale items.
    #[pyo3(name = "NEWEST_UNSEEN")]
    NewestUnseen,
    /// The oldest unconsumed item newer than this connection's last get (in-order streaming).
    #[pyo3(name = "NEXT_UNSEEN")]
    NextUnseen,
}

/// Timestamp-indexed items, at most one per timestamp.
///
/// A channel of this address space, or of another one (``owner`` says which): both take
/// the same connections; lengths, counters, callbacks and arrival streams are the owner's
/// and raise ``NotLocal`` elsewhere.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Channel {
    pub(crate) ch: core::Channel,
    subs: Subscriptions,
}

impl Channel {
    pub(crate) fn wrap(ch: core::Channel) -> Self {
        Channel {
            ch,
            subs: Subscriptions::default(),
        }
    }

    fn capacity(&self) -> Option<usize> {
        self.ch.capacity()
    }

    fn local(&self, py: Python<'_>, what: &str) -> PyResult<&core::Channel> {
        as_local(&self.ch).ok_or_else(|| errors::not_local(py, what, self.ch.owner()))
    }
}

/// The container, if it lives in this address space.
fn as_local<C: Container>(c: &C) -> Option<&C> {
    c.is_local().then_some(c)
}

/// A container's name as Python writes it.
fn py_name(name: Option<&str>) -> String {
    name.map_or_else(|| "None".to_owned(), |n| format!("{n:?}"))
}

/// Closes a container wherever it lives, without the GIL (closing wakes every waiter; a
/// remote close is a round trip).
fn close_container(
    py: Python<'_>,
    close: impl FnOnce() -> Result<(), core::StmError> + Send,
) -> PyResult<()> {
    py.detach(close).map_err(|e| errors::stm_error(py, e))
}

/// Arrival subscriptions by the ids handed to Python.
#[derive(Default)]
struct Subscriptions {
    next: AtomicU64,
    ids: Mutex<HashMap<u64, core::SubscriptionId>>,
}

impl Subscriptions {
    fn add(&self, id: core::SubscriptionId) -> u64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&self.ids).insert(n, id);
        n
    }
    fn remove(&self, n: u64) -> Option<core::SubscriptionId> {
        lock(&self.ids).remove(&n)
    }
}

fn garbage_handler(handler: Py<PyAny>) -> impl Fn(Timestamp, &core::Item) + Send + Sync + 'static {
    move |ts, item| {
        call_back(|py| {
            let v = items::to_python(py, item)?;
            handler.bind(py).call1((ts, v))?;
            Ok(())
        })
    }
}

fn arrival_callback(cb: Py<PyAny>) -> impl Fn(Timestamp) + Send + Sync + 'static {
    move |ts| {
        call_back(|py| {
            cb.bind(py).call1((ts,))?;
            Ok(())
        })
    }
}

fn wrap_arrivals(py: Python<'_>, a: core::Arrivals) -> PyResult<Py<PyAny>> {
    let raw = Py::new(py, crate::extras::RawArrivals::new(a))?;
    Ok(py
        .import("stampede._arrivals")?
        .getattr("Arrivals")?
        .call1((raw,))?
        .unbind())
}

fn check_capacity(py: Python<'_>, capacity: i64) -> PyResult<usize> {
    usize::try_from(capacity)
        .map_err(|_| errors::invalid(py, format!("capacity {capacity} must not be negative")))
}

fn callable(f: &Bound<'_, PyAny>, what: &str) -> PyResult<Py<PyAny>> {
    if f.is_callable() {
        Ok(f.clone().unbind())
    } else {
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be callable, not {}",
            f.get_type()
        )))
    }
}

#[pymethods]
impl Channel {
    /// The registered name, if any.
    #[getter]
    fn name(&self) -> Option<String> {
        self.ch.name().map(str::to_owned)
    }
    /// The address space that owns the channel; ``None`` for this one.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.ch.owner()
    }
    /// The capacity of a bounded channel; ``None`` when unbounded.
    #[getter(capacity)]
    fn py_capacity(&self) -> Option<usize> {
        self.capacity()
    }
    /// The channel's time zone.
    #[getter]
    fn zone(&self) -> u32 {
        self.ch.zone().0
    }
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.local(py, "len()")?.len())
    }
    /// Timestamps of the items stored now, ascending.
    fn timestamps(&self, py: Python<'_>) -> PyResult<Vec<Timestamp>> {
        Ok(self.local(py, "timestamps()")?.timestamps())
    }
    /// Counters.
    fn stats(&self, py: Python<'_>) -> PyResult<ChannelStats> {
        let s = self.local(py, "stats()")?.stats();
        Ok(ChannelStats {
            items: s.items,
            connections: s.connections,
            open: s.open,
            puts: s.puts,
            gets: s.gets,
            reclaimed: s.reclaimed,
            skipped: s.skipped,
            full: s.full,
        })
    }
    /// Closes the channel, wherever it lives: puts fail with ``Closed``; gets drain what is
    /// left, then fail. Items consumed on some connection that no present connection can
    /// still read are released at once (a zone with no live task otherwise keeps them for
    /// tasks that join later).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close_container(py, || self.ch.close())
    }
    /// Whether the channel was closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.local(py, "closed")?.is_closed())
    }
    /// Calls ``handler(ts, value)`` on the collector's thread for every reclaimed item (for
    /// another address space's channel, its owner forwards each reclaimed item here, where
    /// the handler runs on the event thread, in order).
    fn on_garbage(&self, py: Python<'_>, handler: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = garbage_handler(callable(handler, "a garbage handler")?);
        let c = &self.ch;
        run(py, c.is_local(), || c.on_garbage(h)).map_err(|e| errors::stm_error(py, e))
    }
    /// Calls ``callback(ts)`` on the putting thread for every new item (for another address
    /// space's channel, on the event thread, in order); returns an id for ``unsubscribe``.
    fn on_arrival(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<u64> {
        let f = arrival_callback(callable(callback, "an arrival callback")?);
        let c = &self.ch;
        let id = run(py, c.is_local(), || c.on_arrival(f)).map_err(|e| errors::stm_error(py, e))?;
        Ok(self.subs.add(id))
    }

    /// Removes an arrival callback or stream; whether it existed.
    fn unsubscribe(&self, subscription: u64) -> bool {
        self.subs
            .remove(subscription)
            .is_some_and(|id| self.ch.unsubscribe(id))
    }
    /// Timestamps of new items as an ``Arrivals`` (``async for``), buffering ``capacity``.
    #[pyo3(signature = (capacity = 1024))]
    fn arrivals(&self, py: Python<'_>, capacity: i64) -> PyResult<Py<PyAny>> {
        let capacity = check_capacity(py, capacity)?;
        let c = &self.ch;
        let a =
            run(py, c.is_local(), || c.arrivals(capacity)).map_err(|e| errors::stm_error(py, e))?;
        wrap_arrivals(py, a)
    }
    fn __repr__(&self) -> String {
        let name = py_name(self.ch.name());
        match as_local(&self.ch) {
            Some(c) => format!("Channel(name={name}, items={})", c.len()),
            None => format!(
                "Channel(name={name}, owner={:?})",
                self.ch.owner().unwrap_or("?")
            ),
        }
    }
}

/// FIFO items, each delivered to exactly one getter.
///
/// A queue of this address space or of another one (``owner`` says which); lengths,
/// counters, callbacks and arrival streams are the owner's and raise ``NotLocal`` elsewhere.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Queue {
    pub(crate) q: core::Queue,
    subs: Subscriptions,
}

impl Queue {
    pub(crate) fn wrap(q: core::Queue) -> Self {
        Queue {
            q,
            subs: Subscriptions::default(),
        }
    }

    fn local(&self, py: Python<'_>, what: &str) -> PyResult<&core::Queue> {
        as_local(&self.q).ok_or_else(|| errors::not_local(py, what, self.q.owner()))
    }
}

#[pymethods]
impl Queue {
    /// The registered name, if any.
    #[getter]
    fn name(&self) -> Option<String> {
        self.q.name().map(str::to_owned)
    }
    /// The address space that owns the queue; ``None`` for this one.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.q.owner()
    }
    /// The capacity of a bounded queue; ``None`` when unbounded.
    #[getter]
    fn capacity(&self) -> Option<usize> {
        self.q.capacity()
    }
    /// The queue's time zone.
    #[getter]
    fn zone(&self) -> u32 {
        self.q.zone().0
    }
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.local(py, "len()")?.len())
    }
    /// Counters.
    fn stats(&self, py: Python<'_>) -> PyResult<QueueStats> {
        let s = self.local(py, "stats()")?.stats();
        Ok(QueueStats {
            waiting: s.waiting,
            held: s.held,
            puts: s.puts,
            gets: s.gets,
            consumed: s.consumed,
            redelivered: s.redelivered,
            full: s.full,
        })
    }
    /// Closes the queue, wherever it lives: puts fail with ``Closed``; gets drain what is
    /// left, then fail.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close_container(py, || self.q.close())
    }
    /// Calls ``handler(ts, value)`` for every reclaimed item.
    fn on_garbage(&self, py: Python<'_>, handler: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = garbage_handler(callable(handler, "a garbage handler")?);
        let c = &self.q;
        run(py, c.is_local(), || c.on_garbage(h)).map_err(|e| errors::stm_error(py, e))
    }
    /// Calls ``callback(ts)`` on the putting thread for every new item.
    fn on_arrival(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<u64> {
        let f = arrival_callback(callable(callback, "an arrival callback")?);
        let c = &self.q;
        let id = run(py, c.is_local(), || c.on_arrival(f)).map_err(|e| errors::stm_error(py, e))?;
        Ok(self.subs.add(id))
    }
    /// Removes an arrival callback or stream; whether it existed.
    fn unsubscribe(&self, subscription: u64) -> bool {
        self.subs
            .remove(subscription)
            .is_some_and(|id| self.q.unsubscribe(id))
    }
    /// Timestamps of new items as an ``Arrivals`` (``async for``), buffering ``capacity``.
    #[pyo3(signature = (capacity = 1024))]
    fn arrivals(&self, py: Python<'_>, capacity: i64) -> PyResult<Py<PyAny>> {
        let capacity = check_capacity(py, capacity)?;
        let c = &self.q;
        let a =
            run(py, c.is_local(), || c.arrivals(capacity)).map_err(|e| errors::stm_error(py, e))?;
        wrap_arrivals(py, a)
    }
    fn __repr__(&self) -> String {
        let name = py_name(self.q.name());
        match as_local(&self.q) {
            Some(q) => format!("Queue(name={name}, waiting={})", q.len()),
            None => format!(
                "Queue(name={name}, owner={:?})",
                self.q.owner().unwrap_or("?")
            ),
        }
    }
}

/// A single overwritable value, of this address space or of another one.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Register {
    pub(crate) reg: core::Register,
}

#[pymethods]
impl Register {
    /// The registered name, if any.
    #[getter]
    fn name(&self) -> Option<String> {
        self.reg.name().map(str::to_owned)
    }
    /// The address space that owns the register; ``None`` for this one.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.reg.owner()
    }
    /// The register's time zone.
    #[getter]
    fn zone(&self) -> u32 {
        self.reg.zone().0
    }
    /// The current ``(sequence, value)`` without waiting, or ``None`` before the first write
    /// (``NotLocal`` on another address space's register: read it through a connection).
    fn peek(&self, py: Python<'_>) -> PyResult<Option<(u64, Py<PyAny>)>> {
        let reg = self
            .reg
            .is_local()
            .then_some(&self.reg)
            .ok_or_else(|| errors::not_local(py, "peek()", self.reg.owner()))?;
        match reg.peek() {
            None => Ok(None),
            Some((seq, item)) => Ok(Some((seq, items::to_python(py, &item)?))),
        }
    }
    /// Closes the register, wherever it lives.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close_container(py, || self.reg.close())
    }
}

/// A task's connection for putting into a channel.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct ChannelOutput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<ChannelOut>,
    channel: Py<Channel>,
    bounded: bool,
}
connection_common!(ChannelOutput);

fn put_options(py: Python<'_>, consumers: Option<i64>) -> PyResult<PutOptions> {
    let o = PutOptions::default();
    Ok(match consumers {
        None => o,
        Some(n) => o.consumers(u32::try_from(n).map_err(|_| {
            errors::raise(
                py,
                Exc::InvalidArgument,
                (format!("consumers={n} is not in 0..2**32"),),
            )
        })?),
    })
}

#[pymethods]
impl ChannelOutput {
    /// The channel.
    #[getter]
    fn channel(&self, py: Python<'_>) -> Py<Channel> {
        self.channel.clone_ref(py)
    }

    /// Puts ``item`` at ``ts``; a full bounded channel makes it wait (at most ``timeout``
    /// seconds, then ``Full``). ``consumers=n`` reclaims the item once ``n`` connections
    /// consumed it.
    #[pyo3(signature = (ts, item, *, consumers = None, timeout = None))]
    fn put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        item: &Bound<'_, PyAny>,
        consumers: Option<i64>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let deadline = deadline(py, timeout)?;
        let opts = put_options(py, consumers)?;
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        // One wait, not slices: a blocked put is a watermark term and counts once as full.
        // Ctrl-C still stops it (see `Signals`).
        let opts = opts.wait(whole_wait(deadline));
        let signals = Signals::default();
        let stop = || signals.pending();
        let c = &*conn;
        let r = if self.conn.local && !self.bounded {
            c.put_with(ts, it, opts.wait(Wait::Never))
        } else {
            py.detach(|| c.put_interruptible(ts, it, opts, &stop))
        };
        r.map_err(|e| signals.put_error(py, e, item))
    }

    /// Puts without waiting; a full channel raises ``Full``.
    #[pyo3(signature = (ts, item, *, consumers = None))]
    fn try_put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        item: &Bound<'_, PyAny>,
        consumers: Option<i64>,
    ) -> PyResult<()> {
        let opts = put_options(py, consumers)?.wait(Wait::Never);
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.put_with(ts, it, opts))
        }
        .map_err(|e| errors::put_error(py, e, item))
    }
}

/// A task's connection for getting from a channel.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct ChannelInput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<ChannelIn>,
    channel: Py<Channel>,
}
connection_common!(ChannelInput);

impl ChannelInput {
    /// Takes the core connection for a correlator: local channels only, and not while
    /// another thread uses it.
    pub(crate) fn take_local(&self, py: Python<'_>) -> PyResult<InputConnection<core::Channel>> {
        self.check_local(py)?;
        self.conn.take(py)
    }

    /// Fails with ``NotLocal`` for a connection to another address space's channel.
    pub(crate) fn check_local(&self, py: Python<'_>) -> PyResult<()> {
        self.conn.get(py)?;
        if self.conn.local {
            Ok(())
        } else {
            Err(self.remote_error(py))
        }
    }

    fn remote_error(&self, py: Python<'_>) -> PyErr {
        let ch = &self.channel.get().ch;
        errors::not_local(py, "a Correlator", ch.owner())
    }
}

fn item_pair(py: Python<'_>, ts: Timestamp, item: &core::Item) -> PyResult<Py<PyAny>> {
    let v = items::to_python(py, item)?;
    Ok((ts, v).into_pyobject(py)?.into_any().unbind())
}

#[pymethods]
impl ChannelInput {
    /// The channel.
    #[getter]
    fn channel(&self, py: Python<'_>) -> Py<Channel> {
        self.channel.clone_ref(py)
    }

    /// ``(ts, value)`` of the item ``selector`` names, waiting for it (at most ``timeout``
    /// seconds, then ``Timeout``). The item stays open until consumed.
    #[pyo3(signature = (selector, *, timeout = None))]
    fn get(
        &self,
        py: Python<'_>,
        selector: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let sel = self::selector(selector)?;
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        let r = match self.conn.local.then(|| c.try_get(sel)) {
            None | Some(Err(GetError::Unavailable(_))) => {
                blocking(py, deadline, |w| c.get_with(sel, w), is_timeout)?
            }
            Some(r) => r,
        };
        match r {
            Ok((ts, item)) => item_pair(py, ts, &item),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// ``(ts, value)`` without waiting; raises ``Unavailable`` (with the neighbouring
    /// timestamps) when nothing matches.
    fn try_get(&self, py: Python<'_>, selector: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let sel = self::selector(selector)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        match run(py, self.conn.local, || c.try_get(sel)) {
            Ok((ts, item)) => item_pair(py, ts, &item),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// Marks the item at ``ts`` consumed on this connection.
    fn consume(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.conn.get(py)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.consume(ts))
        }
        .map_err(|e| errors::stm_error(py, e))
    }

    /// Marks every item at or below ``ts`` consumed, including ones not put yet.
    fn consume_until(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.conn.get(py)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.consume_until(ts))
        }
        .map_err(|e| errors::stm_error(py, e))
    }
}

/// An item gotten from a queue: its timestamp, ticket and value.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct QueueItem {
    /// The item's timestamp.
    ts: Timestamp,
    /// The ticket to consume it with.
    ticket: u64,
    /// The value.
    value: Py<PyAny>,
}

#[pymethods]
impl QueueItem {
    fn __repr__(&self) -> String {
        format!("QueueItem(ts={}, ticket={})", self.ts, self.ticket)
    }
}

/// A task's connection for putting into a queue.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct QueueOutput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<QueueOut>,
    queue: Py<Queue>,
}
connection_common!(QueueOutput);

#[pymethods]
impl QueueOutput {
    /// The queue.
    #[getter]
    fn queue(&self, py: Python<'_>) -> Py<Queue> {
        self.queue.clone_ref(py)
    }

    /// Appends ``item`` with timestamp ``ts``, waiting while a bounded queue is full (at most
    /// ``timeout`` seconds, then ``Full``); returns the item's ticket.
    #[pyo3(signature = (ts, item, *, timeout = None))]
    fn put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        item: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        let wait = whole_wait(deadline);
        let signals = Signals::default();
        let stop = || signals.pending();
        py.detach(|| conn.put_interruptible(ts, it, wait, &stop))
            .map_err(|e| signals.put_error(py, e, item))
    }

    /// Appends without waiting; a full queue raises ``Full``.
    fn try_put(&self, py: Python<'_>, ts: Timestamp, item: &Bound<'_, PyAny>) -> PyResult<u64> {
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.try_put(ts, it))
        }
        .map_err(|e| errors::put_error(py, e, item))
    }
}

/// A task's connection for getting from a queue.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct QueueInput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<QueueIn>,
    queue: Py<Queue>,
}
connection_common!(QueueInput);

fn queue_item(py: Python<'_>, qi: core::QueueItem) -> PyResult<QueueItem> {
    Ok(QueueItem {
        ts: qi.ts,
        ticket: qi.ticket,
        value: items::to_python(py, &qi.item)?,
    })
}

#[pymethods]
impl QueueInput {
    /// The queue.
    #[getter]
    fn queue(&self, py: Python<'_>) -> Py<Queue> {
        self.queue.clone_ref(py)
    }

    /// Takes the oldest waiting item, waiting for one (at most ``timeout`` seconds). It is
    /// held by this connection until consumed; if the connection detaches first (or its
    /// address space dies), it is delivered again to another getter.
    #[pyo3(signature = (*, timeout = None))]
    fn get(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<QueueItem> {
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        let r = match self.conn.local.then(|| c.try_get()) {
            None | Some(Err(GetError::Unavailable(_))) => {
                blocking(py, deadline, |w| c.get_with(w), is_timeout)?
            }
            Some(r) => r,
        };
        match r {
            Ok(qi) => queue_item(py, qi),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// Takes the oldest waiting item without waiting; raises ``Unavailable`` if none.
    fn try_get(&self, py: Python<'_>) -> PyResult<QueueItem> {
        let conn = self.conn.get(py)?;
        let c = &*conn;
        match run(py, self.conn.local, || c.try_get()) {
            Ok(qi) => queue_item(py, qi),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// Consumes the item with ``ticket``.
    fn consume(&self, py: Python<'_>, ticket: u64) -> PyResult<()> {
        let conn = self.conn.get(py)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.consume(ticket))
        }
        .map_err(|e| errors::stm_error(py, e))
    }
}

/// A task's connection for writing a register.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct RegisterOutput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<RegisterOut>,
    register: Py<Register>,
}
connection_common!(RegisterOutput);

#[pymethods]
impl RegisterOutput {
    /// The register.
    #[getter]
    fn register(&self, py: Python<'_>) -> Py<Register> {
        self.register.clone_ref(py)
    }
    /// Overwrites the value; returns its sequence number.
    fn write(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<u64> {
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.write(it))
        }
        .map_err(|e| errors::stm_error(py, e))
    }
}

/// A task's connection for reading a register.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct RegisterInput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<RegisterIn>,
    register: Py<Register>,
}
connection_common!(RegisterInput);

#[pymethods]
impl RegisterInput {
    /// The register.
    #[getter]
    fn register(&self, py: Python<'_>) -> Py<Register> {
        self.register.clone_ref(py)
    }
    /// ``(sequence, value)`` of a write newer than this connection's last read, waiting for
    /// one (at most ``timeout`` seconds).
    #[pyo3(signature = (*, timeout = None))]
    fn read(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<(u64, Py<PyAny>)> {
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        let r = match self.conn.local.then(|| c.try_read()) {
            None | Some(Err(GetError::Unavailable(_))) => {
                blocking(py, deadline, |w| c.read_with(w), is_timeout)?
            }
            Some(r) => r,
        };
        match r {
            Ok((seq, item)) => Ok((seq, items::to_python(py, &item)?)),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }
    /// ``(sequence, value)`` of a newer write without waiting; ``Unavailable`` if none.
    fn try_read(&self, py: Python<'_>) -> PyResult<(u64, Py<PyAny>)> {
        let conn = self.conn.get(py)?;
        let c = &*conn;
        match run(py, self.conn.local, || c.try_read()) {
            Ok((seq, item)) => Ok((seq, items::to_python(py, &item)?)),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }
}

/// Counters of a channel.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct ChannelStats {
    /// Items stored now.
    items: usize,
    /// Input connections attached now.
    connections: usize,
    /// Items open (gotten, not consumed), summed over connections.
    open: usize,
    /// Successful puts.
    puts: u64,
    /// Successful gets.
    gets: u64,
    /// Items reclaimed.
    reclaimed: u64,
    /// Items passed over by ``NEWEST_UNSEEN`` gets.
    skipped: u64,
    /// Puts that found the channel full.
    full: u64,
}

/// Counters of a queue.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct QueueStats {
    /// Items waiting for a getter.
    waiting: usize,
    /// Items gotten and not yet consumed.
    held: usize,
    /// Successful puts.
    puts: u64,
    /// Successful gets.
    gets: u64,
    /// Items consumed.
    consumed: u64,
    /// Items delivered again after their getter detached or exited.
    redelivered: u64,
    /// Puts that found the queue full.
    full: u64,
}

/// Collection counters of a zone.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct GcStats {
    /// Passes run.
    passes: u64,
    /// Items reclaimed by the watermark or by reference counts.
    reclaimed: u64,
    /// The floor: everything below it has been reclaimed.
    floor: Timestamp,
}

/// One term of a watermark: a timestamp and what holds it there.
#[pyclass(module = "stampede", frozen, get_all, skip_from_py_object)]
#[derive(Clone)]
pub(crate) struct Hold {
    /// The timestamp this term holds the watermark at.
    ts: Timestamp,
    /// ``"virtual_time"``, ``"pending_put"``, ``"unconsumed"``, ``"queue_item"``, ``"horizon"``,
    /// ``"no_live_task"`` (the zone's floor is kept for tasks that join later) or ``"remote"``
    /// (another address space's lowest term).
    cause: &'static str,
    /// The task involved, if any.
    task: Option<u64>,
    /// Its name.
    task_name: Option<String>,
    /// The container involved, if any.
    container: Option<u64>,
    /// Its registered name.
    container_name: Option<String>,
    /// The input connection, for ``"unconsumed"``.
    connection: Option<u64>,
    /// The queue ticket, for ``"queue_item"``.
    ticket: Option<u64>,
    /// A sentence saying all of the above.
    description: String,
}

#[pymethods]
impl Hold {
    fn __repr__(&self) -> String {
        format!("Hold({})", self.description)
    }
}

impl From<&core::Hold> for Hold {
    fn from(h: &core::Hold) -> Self {
        let mut out = Hold {
            ts: h.ts,
            cause: "horizon",
            task: None,
            task_name: None,
            container: None,
            container_name: None,
            connection: None,
            ticket: None,
            description: h.to_string(),
        };
        match &h.cause {
            core::HoldCause::VirtualTime { task, task_name } => {
                out.cause = "virtual_time";
                out.task = Some(task.0);
                out.task_name = Some(task_name.clone());
            }
            core::HoldCause::PendingPut {
                task,
                task_name,
                container,
            } => {
                out.cause = "pending_put";
                out.task = Some(task.0);
                out.task_name = Some(task_name.clone());
                out.container = Some(container.0);
            }
            core::HoldCause::Unconsumed {
                container,
                container_name,
                connection,
                task,
                task_name,
            } => {
                out.cause = "unconsumed";
                out.container = Some(container.0);
                out.container_name = container_name.clone();
                out.connection = Some(connection.0);
                out.task = Some(task.0);
                out.task_name = Some(task_name.clone());
            }
            core::HoldCause::QueueItem {
                container,
                container_name,
                ticket,
                held_by,
            } => {
                out.cause = "queue_item";
                out.container = Some(container.0);
                out.container_name = container_name.clone();
                out.ticket = Some(*ticket);
                out.task = held_by.map(|t| t.0);
            }
            core::HoldCause::NoLiveTask { .. } => out.cause = "no_live_task",
            core::HoldCause::Remote { .. } => out.cause = "remote",
            _ => {}
        }
        out
    }
}

/// Every term of a zone's watermark: ``Runtime.explain``.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct WatermarkReport {
    /// The zone.
    #[pyo3(get)]
    zone: u32,
    /// The watermark applied so far; everything below it has been reclaimed.
    #[pyo3(get)]
    floor: Timestamp,
    /// The watermark the terms give now (a pass would raise the floor to it).
    #[pyo3(get)]
    watermark: Timestamp,
    /// Every term, lowest first.
    #[pyo3(get)]
    holds: Vec<Hold>,
    text: String,
}

impl From<core::WatermarkReport> for WatermarkReport {
    fn from(r: core::WatermarkReport) -> Self {
        WatermarkReport {
            zone: r.zone.0,
            floor: r.floor,
            watermark: r.watermark,
            holds: r.holds.iter().map(Hold::from).collect(),
            text: r.to_string(),
        }
    }
}

#[pymethods]
impl WatermarkReport {
    /// The terms at the watermark: what holds it back.
    fn holders(&self) -> Vec<Hold> {
        self.holds
            .iter()
            .filter(|h| h.ts == self.watermark)
            .cloned()
            .collect()
    }
    fn __str__(&self) -> String {
        self.text.clone()
    }
}

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Runtime>()?;
    m.add_class::<Task>()?;
    m.add_class::<Selector>()?;
    m.add_class::<Channel>()?;
    m.add_class::<Queue>()?;
    m.add_class::<Register>()?;
    m.add_class::<ChannelInput>()?;
    m.add_class::<ChannelOutput>()?;
    m.add_class::<QueueInput>()?;
    m.add_class::<QueueOutput>()?;
    m.add_class::<QueueItem>()?;
    m.add_class::<RegisterInput>()?;
    m.add_class::<RegisterOutput>()?;
    m.add_class::<ChannelStats>()?;
    m.add_class::<QueueStats>()?;
    m.add_class::<GcStats>()?;
    m.add_class::<Hold>()?;
    m.add_class::<WatermarkReport>()?;
    Ok(())
}
