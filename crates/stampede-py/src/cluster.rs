//! Cluster threads (`stampede_cluster`) for Python: `stampede.cluster`.
//!
//! A Python task is a callable `(ctx, args: bytes) -> bytes | str | None`, registered by
//! name when the cluster starts, or named by import path (`"package.module:function"`),
//! which any member imports when asked to run it. Task bodies run on the cluster's threads
//! and take the GIL to run; every wait here runs without it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::thread::ThreadId;
use std::time::Duration;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use stampede_cluster as cl;

use crate::errors::{self, cluster_error, Exc};
use crate::space::Space;
use crate::stm::{duration, lock};

fn timeout(py: Python<'_>, t: Option<f64>) -> PyResult<Option<Duration>> {
    t.map(|t| duration(py, "timeout", t)).transpose()
}

/// What a Python task sees of itself.
#[pyclass(module = "stampede.cluster", name = "TaskContext", frozen)]
pub(crate) struct PyTaskContext {
    cluster: Py<PyCluster>,
    id: String,
    name: String,
    cancellation: cl::Cancellation,
}

#[pymethods]
impl PyTaskContext {
    /// This task's identity, ``"<spawning space>#<number>"``.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }
    /// The name it was spawned under.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
    /// The cluster of the address space running it, to spawn, lock and wait.
    #[getter]
    fn cluster(&self, py: Python<'_>) -> Py<PyCluster> {
        self.cluster.clone_ref(py)
    }
    /// The address space running it.
    #[getter]
    fn space(&self, py: Python<'_>) -> Py<PyAny> {
        self.cluster.get().space.clone_ref(py)
    }
    /// Whether its joiner asked it to stop.
    #[getter]
    fn cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }
    /// Raises ``TaskCancelled`` once its joiner asked it to stop: a cancellation point.
    fn check(&self, py: Python<'_>) -> PyResult<()> {
        if self.cancellation.is_cancelled() {
            Err(cluster_error(py, cl::ClusterError::Cancelled))
        } else {
            Ok(())
        }
    }
}

/// The body of a Python callable, run with the GIL on the cluster's thread.
fn body(f: Py<PyAny>, cluster: Arc<StdMutex<Option<Py<PyCluster>>>>) -> Arc<cl::TaskBody> {
    Arc::new(move |ctx: &cl::TaskContext, args: Bytes| {
        Python::attach(|py| -> Result<Bytes, cl::TaskError> {
            let Some(c) = lock(&cluster).as_ref().map(|c| c.clone_ref(py)) else {
                return Err("the Python cluster of this space is gone".into());
            };
            let pctx = Py::new(
                py,
                PyTaskContext {
                    cluster: c,
                    id: ctx.id().to_string(),
                    name: ctx.name().to_owned(),
                    cancellation: ctx.cancellation(),
                },
            )
            .map_err(|e| errors::describe(py, &e))?;
            let out = f
                .call1(py, (pctx, PyBytes::new(py, &args)))
                .map_err(|e| errors::describe(py, &e))?;
            let out = out.bind(py);
            if out.is_none() {
                Ok(Bytes::new())
            } else if let Ok(b) = out.cast::<PyBytes>() {
                Ok(Bytes::copy_from_slice(b.as_bytes()))
            } else if let Ok(s) = out.extract::<String>() {
                Ok(Bytes::from(s))
            } else {
                Err(format!(
                    "a task returns bytes, str or None, not {}",
                    out.get_type().name().map_or("?".into(), |n| n.to_string())
                )
                .into())
            }
        })
    })
}

/// Finds `"package.module:function"`.
fn resolve(py: Python<'_>, name: &str) -> Option<Py<PyAny>> {
    let (module, function) = name.split_once(':')?;
    let m = py.import(module).ok()?;
    let mut f = m.into_any();
    for part in function.split('.') {
        f = f.getattr(part).ok()?;
    }
    f.is_callable().then(|| f.unbind())
}

/// The cluster of one address space: spawn tasks anywhere in it, and make its mutexes,
/// conditions, semaphores and barriers.
#[pyclass(module = "stampede.cluster", name = "Cluster", frozen)]
pub(crate) struct PyCluster {
    c: cl::Cluster,
    space: Py<PyAny>,
    /// What the task bodies reach this object through; emptied by ``stop``, which ends the
    /// cycle between them.
    slot: Arc<StdMutex<Option<Py<PyCluster>>>>,
}

fn placement(on: &str) -> cl::Placement {
    match on {
        "here" => cl::Placement::Here,
        "round_robin" => cl::Placement::RoundRobin,
        "least_loaded" => cl::Placement::LeastLoaded,
        space => cl::Placement::On(space.to_owned()),
    }
}

#[pymethods]
impl PyCluster {
    /// Makes ``space`` a member of its application's cluster. ``tasks`` maps names to
    /// callables ``(ctx, args: bytes) -> bytes | str | None``; a name of the form
    /// ``"package.module:function"`` that ``tasks`` lacks is imported when a task of it is
    /// to run here. ``timeout`` bounds every lock, condition, semaphore and barrier wait.
    /// ``token`` is the one a node agent gave a process it started (``python -m
    /// stampede.cluster`` passes it).
    #[staticmethod]
    #[pyo3(signature = (space, tasks = None, *, timeout = None, token = None))]
    fn start(
        py: Python<'_>,
        space: &Bound<'_, Space>,
        tasks: Option<&Bound<'_, PyDict>>,
        timeout: Option<f64>,
        token: Option<String>,
    ) -> PyResult<Py<PyCluster>> {
        let s = space.get().get(py)?;
        // The bodies reach the Python cluster once it exists; it holds them weakly in
        // effect: the slot is emptied when the cluster stops.
        let slot: Arc<StdMutex<Option<Py<PyCluster>>>> = Arc::new(StdMutex::new(None));
        let mut registry = cl::Registry::new();
        if let Some(tasks) = tasks {
            for (k, v) in tasks.iter() {
                let name: String = k.extract()?;
                if !v.is_callable() {
                    return Err(errors::invalid(
                        py,
                        format!("task {name:?} is not callable"),
                    ));
                }
                registry = registry.task_body(&name, body(v.unbind(), slot.clone()));
            }
        }
        let resolver_slot = slot.clone();
        registry = registry.resolver(move |name| {
            Python::attach(|py| resolve(py, name)).map(|f| body(f, resolver_slot.clone()))
        });
        let opts = cl::ClusterOptions::default().timeout(timeout.map(Duration::from_secs_f64));
        let c = py
            .detach(|| {
                cl::Cluster::start_attached(&s, registry, opts, token.as_deref().unwrap_or(""))
            })
            .map_err(|e| cluster_error(py, e))?;
        let me = Py::new(
            py,
            PyCluster {
                c,
                space: space.clone().into_any().unbind(),
                slot: slot.clone(),
            },
        )?;
        *lock(&slot) = Some(me.clone_ref(py));
        Ok(me)
    }

    /// This space's id.
    #[getter]
    fn id(&self) -> &str {
        self.c.id()
    }

    /// The address space.
    #[getter]
    fn space(&self, py: Python<'_>) -> Py<PyAny> {
        self.space.clone_ref(py)
    }

    /// The cluster's spaces, sorted by id (this one included).
    fn spaces(&self) -> Vec<String> {
        self.c.spaces()
    }

    /// Spawns task ``task`` with ``args``: ``on`` is ``"here"``, ``"round_robin"``,
    /// ``"least_loaded"`` or a space's id; ``vt`` is its Stampede task's virtual time (by
    /// default the lowest its space allows).
    #[pyo3(signature = (task, args = None, *, on = "here", vt = None))]
    fn spawn(
        &self,
        py: Python<'_>,
        task: &str,
        args: Option<&[u8]>,
        on: &str,
        vt: Option<i64>,
    ) -> PyResult<PyJoinHandle> {
        let args = Bytes::copy_from_slice(args.unwrap_or_default());
        let h = py
            .detach(|| match vt {
                Some(vt) => self.c.spawn_at(task, args, placement(on), vt),
                None => self.c.spawn(task, args, placement(on)),
            })
            .map_err(|e| cluster_error(py, e))?;
        Ok(PyJoinHandle {
            id: h.id().to_string(),
            space: h.space().to_owned(),
            h: StdMutex::new(Some(h)),
        })
    }

    /// The cluster mutex ``name``.
    fn mutex(&self, py: Python<'_>, name: &str) -> PyResult<PyMutex> {
        let m = py
            .detach(|| self.c.mutex(name))
            .map_err(|e| cluster_error(py, e))?;
        Ok(PyMutex {
            m,
            holds: StdMutex::new(HashMap::new()),
        })
    }

    /// The cluster condition variable ``name``.
    fn condition(&self, py: Python<'_>, name: &str) -> PyResult<PyCondition> {
        let c = py
            .detach(|| self.c.condition(name))
            .map_err(|e| cluster_error(py, e))?;
        Ok(PyCondition { c })
    }

    /// The counting semaphore ``name``, made with count ``initial`` if no space has made it.
    #[pyo3(signature = (name, initial = 0))]
    fn semaphore(&self, py: Python<'_>, name: &str, initial: u64) -> PyResult<PySemaphore> {
        let s = py
            .detach(|| self.c.semaphore(name, initial))
            .map_err(|e| cluster_error(py, e))?;
        Ok(PySemaphore { s })
    }

    /// This task's place in barrier ``name`` of ``size`` members.
    fn barrier(&self, py: Python<'_>, name: &str, size: usize) -> PyResult<PyBarrier> {
        let b = py
            .detach(|| self.c.barrier(name, size))
            .map_err(|e| cluster_error(py, e))?;
        Ok(PyBarrier {
            rank: b.rank(),
            size: b.size(),
            b: StdMutex::new(b),
        })
    }

    /// The global memory segment ``name`` of ``size`` bytes, homed by the first space to
    /// touch it; release-consistent with the cluster's locks.
    fn segment(&self, py: Python<'_>, name: &str, size: usize) -> PyResult<PySegment> {
        let s = self
            .c
            .segment(name, size)
            .map_err(|e| cluster_error(py, e))?;
        Ok(PySegment { s })
    }

    /// Calls this space made of each operation and their total seconds (waits included):
    /// ``{"create": (calls, seconds), "lock": ..., ...}``.
    fn stats(&self) -> HashMap<&'static str, (u64, f64)> {
        op_table(&self.c.stats())
    }

    /// The tasks this space runs: ``(id, task, cancelling, seconds running)``.
    fn tasks(&self) -> Vec<(String, String, bool, f64)> {
        self.c
            .tasks()
            .into_iter()
            .map(|t| {
                (
                    t.id.to_string(),
                    t.task,
                    t.cancelling,
                    t.running.as_secs_f64(),
                )
            })
            .collect()
    }

    /// Asks a node agent to start ``command`` (a program and its arguments that serve an
    /// attached space, such as ``[sys.executable, "-m", "stampede.cluster"]``) and waits
    /// until it is a member, at most ``timeout`` seconds; returns its id.
    #[pyo3(signature = (command, timeout = 30.0))]
    fn attach(&self, py: Python<'_>, command: Vec<String>, timeout: f64) -> PyResult<String> {
        let t = duration(py, "timeout", timeout)?;
        py.detach(|| self.c.attach(&command, t))
            .map_err(|e| cluster_error(py, e))
    }

    /// Tells member ``space`` to leave and end; waits until it has, at most ``timeout``.
    #[pyo3(signature = (space, timeout = 10.0))]
    fn detach(&self, py: Python<'_>, space: &str, timeout: f64) -> PyResult<()> {
        let t = duration(py, "timeout", timeout)?;
        py.detach(|| self.c.detach(space, t))
            .map_err(|e| cluster_error(py, e))
    }

    /// Waits until another member tells this space to detach (Ctrl-C ends the wait).
    fn wait_detached(&self, py: Python<'_>) -> PyResult<()> {
        while !self.c.detach_asked() {
            py.detach(|| std::thread::sleep(Duration::from_millis(50)));
            py.check_signals()?;
        }
        Ok(())
    }

    /// Leaves the cluster: the others handle this space as gone. Also at the end of a
    /// ``with`` block.
    fn stop(&self) {
        self.c.clone().stop();
        lock(&self.slot).take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.stop();
        false
    }
}

/// A spawned task.
#[pyclass(module = "stampede.cluster", name = "JoinHandle", frozen)]
pub(crate) struct PyJoinHandle {
    id: String,
    space: String,
    h: StdMutex<Option<cl::JoinHandle>>,
}

#[pymethods]
impl PyJoinHandle {
    /// The task's identity.
    #[getter]
    fn id(&self) -> &str {
        &self.id
    }
    /// The space it runs in.
    #[getter]
    fn space(&self) -> &str {
        &self.space
    }

    /// Waits for the task's result bytes (at most ``timeout`` seconds: ``Timeout``, and it
    /// may be joined again). Raises ``TaskFailed`` (it raised; ``message`` has its
    /// traceback's last line), ``TaskCancelled``, ``UnknownTask`` or ``SpaceLost``.
    #[pyo3(signature = (timeout = None))]
    fn join(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyBytes>> {
        let limit = self::timeout(py, timeout)?;
        // Ctrl-C ends the wait: the GIL is taken briefly every 50 ms to look.
        let interrupted = || Python::attach(|py| py.check_signals().is_err());
        let r = py.detach(|| {
            let mut g = lock(&self.h);
            let Some(h) = g.as_mut() else {
                return Err(cl::ClusterError::InvalidArgument("joined already".into()));
            };
            h.join_until(limit, &interrupted)
        });
        match r {
            Ok(b) => {
                lock(&self.h).take();
                Ok(PyBytes::new(py, &b).unbind())
            }
            Err(cl::ClusterError::Cancelled) => {
                // An interrupt raises itself; a task's own cancellation is reported.
                py.check_signals()?;
                lock(&self.h).take();
                Err(cluster_error(py, cl::ClusterError::Cancelled))
            }
            Err(e) => {
                if !matches!(e, cl::ClusterError::Timeout { .. }) {
                    lock(&self.h).take();
                }
                Err(cluster_error(py, e))
            }
        }
    }

    /// Whether it has ended.
    fn done(&self) -> bool {
        lock(&self.h).as_ref().map_or(true, |h| h.is_finished())
    }

    /// Asks the task to stop (it sees ``ctx.cancelled``).
    fn cancel(&self, py: Python<'_>) -> PyResult<()> {
        let g = lock(&self.h);
        match g.as_ref() {
            Some(h) => h.cancel().map_err(|e| cluster_error(py, e)),
            None => Ok(()),
        }
    }
}

/// A cluster mutex; ``with m:`` holds it (the value bound by ``as`` says whether the
/// previous holder's space died holding it). Held by the thread that locked it.
#[pyclass(module = "stampede.cluster", name = "Mutex", frozen)]
pub(crate) struct PyMutex {
    m: cl::Mutex,
    holds: StdMutex<HashMap<ThreadId, Vec<u64>>>,
}

impl PyMutex {
    fn push(&self, hold: u64) {
        lock(&self.holds)
            .entry(std::thread::current().id())
            .or_default()
            .push(hold);
    }
    fn pop(&self, py: Python<'_>) -> PyResult<u64> {
        let mut holds = lock(&self.holds);
        let me = std::thread::current().id();
        let hold = holds.get_mut(&me).and_then(|v| v.pop());
        if holds.get(&me).is_some_and(|v| v.is_empty()) {
            holds.remove(&me);
        }
        hold.ok_or_else(|| {
            errors::raise(
                py,
                Exc::InvalidArgument,
                (format!("this thread does not hold mutex {}", self.m.name()),),
            )
        })
    }
}

#[pymethods]
impl PyMutex {
    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        self.m.name()
    }
    /// The address space it lives in.
    #[getter]
    fn home(&self) -> &str {
        self.m.home()
    }
    /// Waits (at most ``timeout`` seconds) until this thread holds it; returns whether the
    /// previous holder's space died holding it (what it protects may be inconsistent).
    #[pyo3(signature = (timeout = None))]
    fn lock(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let t = self::timeout(py, timeout)?;
        let (hold, owner_died) = py
            .detach(|| self.m.lock_raw(t))
            .map_err(|e| cluster_error(py, e))?;
        self.push(hold);
        Ok(owner_died)
    }
    /// Releases it (held by this thread).
    fn unlock(&self, py: Python<'_>) -> PyResult<()> {
        let hold = self.pop(py)?;
        self.m.unlock_raw(hold).map_err(|e| cluster_error(py, e))
    }
    fn __enter__(&self, py: Python<'_>) -> PyResult<bool> {
        self.lock(py, None)
    }
    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.unlock(py)?;
        Ok(false)
    }
}

/// A cluster condition variable.
#[pyclass(module = "stampede.cluster", name = "Condition", frozen)]
pub(crate) struct PyCondition {
    c: cl::Condition,
}

#[pymethods]
impl PyCondition {
    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        self.c.name()
    }
    /// Releases ``mutex`` (held by this thread), waits to be signalled (at most ``timeout``
    /// seconds) and holds ``mutex`` again; returns ``False`` if it timed out. Wait in a
    /// loop that checks the predicate.
    #[pyo3(signature = (mutex, timeout = None))]
    fn wait(&self, py: Python<'_>, mutex: &PyMutex, timeout: Option<f64>) -> PyResult<bool> {
        let t = self::timeout(py, timeout)?;
        let hold = mutex.pop(py)?;
        let (hold, _, timed_out) = py
            .detach(|| self.c.wait_raw(&mutex.m, hold, t))
            .map_err(|e| cluster_error(py, e))?;
        mutex.push(hold);
        Ok(!timed_out)
    }
    /// Wakes one waiting task.
    fn signal(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.c.signal())
            .map_err(|e| cluster_error(py, e))
    }
    /// Wakes every waiting task.
    fn broadcast(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.c.broadcast())
            .map_err(|e| cluster_error(py, e))
    }
}

/// A cluster counting semaphore.
#[pyclass(module = "stampede.cluster", name = "Semaphore", frozen)]
pub(crate) struct PySemaphore {
    s: cl::Semaphore,
}

#[pymethods]
impl PySemaphore {
    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        self.s.name()
    }
    /// Takes a unit, waiting (at most ``timeout`` seconds) while the count is zero.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = self::timeout(py, timeout)?;
        py.detach(|| match t {
            Some(t) => self.s.wait_timeout(t),
            None => self.s.wait(),
        })
        .map_err(|e| cluster_error(py, e))
    }
    /// Adds a unit.
    fn post(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.s.post())
            .map_err(|e| cluster_error(py, e))
    }
}

/// A global memory segment: this space's copy of named bytes. Writes are seen elsewhere
/// after this space releases them (an unlock, a post, a barrier, or ``release()``), by
/// spaces that acquired since (a lock, a semaphore wait, a barrier, or ``acquire()``).
#[pyclass(module = "stampede.cluster", name = "Segment", frozen)]
pub(crate) struct PySegment {
    s: cl::Segment,
}

#[pymethods]
impl PySegment {
    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        self.s.name()
    }
    /// Its home, once touched.
    #[getter]
    fn home(&self) -> Option<String> {
        self.s.home()
    }
    fn __len__(&self) -> usize {
        self.s.len()
    }
    /// ``size`` bytes at ``offset`` (to the end by default).
    #[pyo3(signature = (offset = 0, size = None))]
    fn read(&self, py: Python<'_>, offset: usize, size: Option<usize>) -> PyResult<Py<PyBytes>> {
        let n = size.unwrap_or_else(|| self.s.len().saturating_sub(offset));
        let mut buf = vec![0u8; n];
        py.detach(|| self.s.read(offset, &mut buf))
            .map_err(|e| cluster_error(py, e))?;
        Ok(PyBytes::new(py, &buf).unbind())
    }
    /// Writes ``data`` at ``offset``.
    fn write(&self, py: Python<'_>, offset: usize, data: &[u8]) -> PyResult<()> {
        let data = data.to_vec();
        py.detach(|| self.s.write(offset, &data))
            .map_err(|e| cluster_error(py, e))
    }
    /// Makes this space's writes visible to the next acquirer.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.s.release())
            .map_err(|e| cluster_error(py, e))
    }
    /// Makes others' releases visible here.
    fn acquire(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.s.acquire())
            .map_err(|e| cluster_error(py, e))
    }
}

/// This task's place in a cluster barrier.
#[pyclass(module = "stampede.cluster", name = "Barrier", frozen)]
pub(crate) struct PyBarrier {
    rank: usize,
    size: usize,
    b: StdMutex<cl::Barrier>,
}

#[pymethods]
impl PyBarrier {
    /// This task's place, from 0.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }
    /// The number of members.
    #[getter]
    fn size(&self) -> usize {
        self.size
    }
    /// Waits until every member has reached this wait; raises ``BarrierFailed`` when a
    /// member left or died.
    fn wait(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| lock(&self.b).wait())
            .map_err(|e| cluster_error(py, e))
    }
}

/// A host's node agent: starts address spaces for the application's clusters when they
/// attach one (what ``stampede node`` runs).
#[pyclass(module = "stampede.cluster", name = "NodeAgent", frozen)]
pub(crate) struct PyNodeAgent {
    a: StdMutex<Option<cl::NodeAgent>>,
}

#[pymethods]
impl PyNodeAgent {
    /// Serves ``space``'s application as host ``host``'s agent; the spaces it starts connect
    /// to ``connect``.
    #[staticmethod]
    fn start(
        py: Python<'_>,
        space: &Bound<'_, Space>,
        host: &str,
        connect: Vec<String>,
    ) -> PyResult<PyNodeAgent> {
        let s = space.get().get(py)?;
        let a = py
            .detach(|| cl::NodeAgent::start(&s, host, connect))
            .map_err(|e| cluster_error(py, e))?;
        Ok(PyNodeAgent {
            a: StdMutex::new(Some(a)),
        })
    }
    /// The processes it started that still run.
    fn running(&self) -> usize {
        lock(&self.a).as_ref().map_or(0, |a| a.running())
    }
    /// Stops serving (the processes it started run on).
    fn stop(&self) {
        if let Some(a) = lock(&self.a).take() {
            a.stop();
        }
    }
}

fn op_table(s: &cl::ClusterStats) -> HashMap<&'static str, (u64, f64)> {
    cl::ClusterOp::ALL
        .iter()
        .map(|&o| {
            let (n, d) = s.op(o);
            (o.name(), (n, d.as_secs_f64()))
        })
        .collect()
}

/// Every member's operation counts (as ``Cluster.stats``), by space; a member that did not
/// answer maps to ``None``.
#[pyfunction]
#[allow(clippy::type_complexity)] // the Python shape
fn cluster_stats(
    py: Python<'_>,
    space: &Bound<'_, Space>,
) -> PyResult<HashMap<String, Option<HashMap<&'static str, (u64, f64)>>>> {
    let s = space.get().get(py)?;
    Ok(py
        .detach(|| cl::cluster_stats(&s))
        .into_iter()
        .map(|(m, st)| (m, st.ok().map(|st| op_table(&st))))
        .collect())
}

/// The tasks every member of ``space``'s cluster runs, by space: ``(space, error or None,
/// [(id, task, cancelling, seconds running)])``.
#[pyfunction]
#[allow(clippy::type_complexity)] // the Python shape
fn list_tasks(
    py: Python<'_>,
    space: &Bound<'_, Space>,
) -> PyResult<Vec<(String, Option<String>, Vec<(String, String, bool, f64)>)>> {
    let s = space.get().get(py)?;
    Ok(py
        .detach(|| cl::list_tasks(&s))
        .into_iter()
        .map(|st| {
            let tasks = st
                .tasks
                .into_iter()
                .map(|t| {
                    (
                        t.id.to_string(),
                        t.task,
                        t.cancelling,
                        t.running.as_secs_f64(),
                    )
                })
                .collect();
            (st.space, st.error, tasks)
        })
        .collect())
}

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCluster>()?;
    m.add_class::<PyJoinHandle>()?;
    m.add_class::<PyTaskContext>()?;
    m.add_class::<PyMutex>()?;
    m.add_class::<PyCondition>()?;
    m.add_class::<PySemaphore>()?;
    m.add_class::<PyBarrier>()?;
    m.add_class::<PySegment>()?;
    m.add_class::<PyNodeAgent>()?;
    m.add_function(wrap_pyfunction!(list_tasks, m)?)?;
    m.add_function(wrap_pyfunction!(cluster_stats, m)?)?;
    Ok(())
}
