//! The runtime of an address space: `Runtime` creates, names and finds containers, creates
//! and spawns tasks, and explains its collector.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use stampede_core as core;
use stampede_core::Timestamp;

use super::containers::{Channel, Queue, Register};
use super::reports::{GcStats, WatermarkReport};
use super::support::{callable, deadline, duration, lock, next_slice, options, run, zone_id};
use super::task::Task;
use crate::errors::{self, Exc};

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
struct Threads(Mutex<Vec<Py<PyAny>>>);

impl Threads {
    /// Starts ``target(task, *args)`` on a `stampede.TaskThread`.
    fn spawn(
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
    fn join_all(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
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

    /// Runs a collection pass in ``zone`` now; returns the zone's floor. When it returns,
    /// every item below that floor has been handed to its garbage handler, whichever pass
    /// reclaimed it (the background collector runs passes too).
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

    /// This runtime's metrics now, in the OpenMetrics text format: its zones, named
    /// containers and tasks.
    fn metrics(&self, py: Python<'_>) -> String {
        let m = stampede_observe::Metrics::new();
        m.add(stampede_observe::RuntimeSource::new(&self.rt));
        py.detach(|| m.render())
    }

    /// Serves a live web page of this runtime (its graph of tasks and containers with
    /// rates, watermarks over time and their holders, containers and tasks) on ``listen``
    /// (``"host:port"``; port 0 picks one) until the returned :class:`Dashboard` closes.
    /// ``executors`` maps names to :class:`stampede.cnc.Executor`\ s whose timelines it shows.
    #[pyo3(signature = (listen = "127.0.0.1:0", title = None, executors = None))]
    fn dashboard(
        &self,
        listen: &str,
        title: Option<&str>,
        executors: Option<
            std::collections::HashMap<String, PyRef<'_, crate::cnc::graph::PyExecutor>>,
        >,
    ) -> PyResult<crate::dashboard::Dashboard> {
        let m = stampede_observe::Metrics::new();
        m.add(stampede_observe::RuntimeSource::new(&self.rt));
        m.add(stampede_observe::process);
        for (name, ex) in executors.unwrap_or_default() {
            m.add(ex.exec().metrics_source(&name));
        }
        let title = title.unwrap_or("stampede");
        crate::dashboard::Dashboard::new(stampede_observe::Dashboard::start(listen, title, m))
    }

    /// Collection counters of ``zone``.
    #[pyo3(signature = (zone = 0))]
    fn gc_stats(&self, py: Python<'_>, zone: i64) -> PyResult<GcStats> {
        let s = self.rt.gc_stats(zone_id(py, zone)?);
        Ok(GcStats::from(s))
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
