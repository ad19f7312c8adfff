//! The executor and the graph as Python objects.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use stampede_coord::{Executor, Graph, GraphError, TraceEvent};

use super::collections::{self, PyItemCollection, PyStepCollection, PyTagCollection, Raised};
use super::step::{self, put_args};
use super::tags::{to_py, to_tag};
use crate::errors::{self, Exc};
use crate::items::to_python;
use crate::space::Space;
use crate::stm::{deadline, drop_detached, lock};

/// How long `wait` sleeps between looks at Ctrl-C.
const SLICE: Duration = Duration::from_millis(100);

/// The executor of graphs made without one: one worker per processor, for the process's life.
pub(crate) fn default_executor() -> &'static Executor {
    static DEFAULT: OnceLock<Executor> = OnceLock::new();
    DEFAULT.get_or_init(Executor::default)
}

/// A pool of worker threads that steal work from each other. Graphs can share one.
#[pyclass(module = "stampede.cnc", name = "Executor", frozen)]
pub(crate) struct PyExecutor {
    exec: Option<Executor>,
}

impl PyExecutor {
    pub(crate) fn exec(&self) -> &Executor {
        self.exec.as_ref().expect("held until dropped")
    }
}

impl Drop for PyExecutor {
    fn drop(&mut self) {
        // Stopping the workers joins them; one may be waiting for the GIL.
        drop_detached(self.exec.take());
    }
}

/// One worker's counters: jobs run, jobs stolen from other workers, sleeps, jobs queued now.
#[pyclass(module = "stampede.cnc", name = "WorkerStats", frozen, get_all)]
pub(crate) struct PyWorkerStats {
    jobs: u64,
    steals: u64,
    sleeps: u64,
    queued: usize,
}

/// An executor's counters: per worker, and the global and critical-path queues' depths.
#[pyclass(module = "stampede.cnc", name = "ExecutorStats", frozen, get_all)]
pub(crate) struct PyExecutorStats {
    workers: Vec<Py<PyWorkerStats>>,
    global_queue: usize,
    urgent_queue: usize,
}

/// One step run, recorded while the executor's ``tracing`` is on.
#[pyclass(module = "stampede.cnc", name = "TraceEvent", frozen, get_all)]
pub(crate) struct PyTraceEvent {
    /// The worker that ran it (0-based).
    worker: usize,
    /// The step collection.
    step: String,
    /// The instance's tag, as text.
    tag: String,
    /// When it started, in seconds since the executor was made.
    start: f64,
    /// When it ended, in seconds since the executor was made.
    end: f64,
}

#[pymethods]
impl PyTraceEvent {
    fn __repr__(&self) -> String {
        format!(
            "TraceEvent(worker={}, step={:?}, tag={:?}, start={:.6}, end={:.6})",
            self.worker, self.step, self.tag, self.start, self.end
        )
    }
}

impl From<TraceEvent> for PyTraceEvent {
    fn from(e: TraceEvent) -> Self {
        PyTraceEvent {
            worker: e.worker,
            step: e.name.to_string(),
            tag: e.tag,
            start: e.start.as_secs_f64(),
            end: e.end.as_secs_f64(),
        }
    }
}

#[pymethods]
impl PyExecutor {
    /// ``workers`` threads; ``None``: one per processor.
    #[new]
    #[pyo3(signature = (workers=None))]
    fn new(py: Python<'_>, workers: Option<usize>) -> PyResult<Self> {
        let exec = match workers {
            Some(0) => {
                return Err(errors::invalid(py, "an executor needs at least one worker"));
            }
            Some(n) => Executor::new(n),
            None => Executor::default(),
        };
        Ok(PyExecutor { exec: Some(exec) })
    }

    /// How many workers it has.
    #[getter]
    fn workers(&self) -> usize {
        self.exec().workers()
    }

    /// Whether each step run is recorded (see :meth:`take_trace`).
    #[getter]
    fn tracing(&self) -> bool {
        self.exec().tracing()
    }

    #[setter]
    fn set_tracing(&self, on: bool) {
        self.exec().set_tracing(on);
    }

    /// The step runs recorded so far, by start time; the record is emptied.
    fn take_trace(&self, py: Python<'_>) -> Vec<PyTraceEvent> {
        let events = py.detach(|| self.exec().take_trace());
        events.into_iter().map(PyTraceEvent::from).collect()
    }

    /// Adds this executor's counters to ``space``'s metrics under ``name``: its
    /// ``/metrics``, ``stampede top`` and dashboards show them from now on.
    fn report_to(&self, py: Python<'_>, space: PyRef<'_, Space>, name: &str) -> PyResult<()> {
        space
            .get(py)?
            .metrics()
            .add(self.exec().metrics_source(name));
        Ok(())
    }

    /// Every worker's counters and queue depth, and the global queues' depths, now.
    fn stats(&self, py: Python<'_>) -> PyResult<PyExecutorStats> {
        let s = self.exec().stats();
        let workers = s
            .workers
            .iter()
            .map(|w| {
                Py::new(
                    py,
                    PyWorkerStats {
                        jobs: w.jobs,
                        steals: w.steals,
                        sleeps: w.sleeps,
                        queued: w.queued,
                    },
                )
            })
            .collect::<PyResult<_>>()?;
        Ok(PyExecutorStats {
            workers,
            global_queue: s.global_queue,
            urgent_queue: s.urgent_queue,
        })
    }

    fn __repr__(&self) -> String {
        format!("Executor(workers={})", self.exec().workers())
    }
}

/// A Concurrent Collections graph: declare collections, prescribe steps, put the initial
/// items and tags, :meth:`wait`, read the results.
#[pyclass(module = "stampede.cnc", name = "Graph", frozen)]
pub(crate) struct PyGraph {
    graph: Option<Graph>,
    raised: Arc<Raised>,
}

impl Drop for PyGraph {
    fn drop(&mut self) {
        drop_detached(self.graph.take());
    }
}

impl PyGraph {
    fn graph(&self) -> &Graph {
        self.graph.as_ref().expect("held until dropped")
    }

    /// The graph's failure as an exception, with the step's own exception as its cause.
    fn error(&self, py: Python<'_>, e: &GraphError) -> PyErr {
        let err = errors::graph_error(py, e, |py, t| Ok(to_py(py, t)?.into_any().unbind()));
        if let GraphError::StepFailed { step, tag, .. } = e {
            if let Some((s, t, exc)) = lock(&self.raised.step).as_ref() {
                if s == step && t == tag {
                    err.set_cause(py, Some(PyErr::from_value(exc.bind(py).clone())));
                }
            }
        }
        err
    }

    /// Calls `step` with slices of `timeout` (`None`: no limit) until it says done, heeding
    /// signals between slices; raises `Timeout` saying `still` when time is up.
    fn in_slices(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        still: &str,
        step: impl Fn(&Graph, Duration) -> Result<bool, GraphError> + Sync,
    ) -> PyResult<()> {
        let until = deadline(py, timeout)?;
        loop {
            let slice = until.map_or(SLICE, |d| {
                SLICE.min(d.saturating_duration_since(Instant::now()))
            });
            match py.detach(|| step(self.graph(), slice)) {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    py.check_signals()?;
                    if until.is_some_and(|d| Instant::now() >= d) {
                        return Err(errors::raise(
                            py,
                            Exc::Timeout,
                            (still.to_owned(), None::<i64>, None::<i64>),
                        ));
                    }
                }
                Err(e) => return Err(self.error(py, &e)),
            }
        }
    }

    /// A tuning function's exception, raised once the graph is quiet.
    fn tuning_error(&self, py: Python<'_>) -> PyResult<()> {
        let Some((step, tag, what, cause)) = lock(&self.raised.tuning).take() else {
            return Ok(());
        };
        let reason = format!("its {what} function raised {}", cause.value(py));
        let err = errors::raise(
            py,
            Exc::StepFailed,
            (
                format!("step {step}{tag} failed: {reason}"),
                step,
                to_py(py, &tag)?.unbind(),
                reason,
            ),
        );
        err.set_cause(py, Some(cause));
        Err(err)
    }
}

#[pymethods]
impl PyGraph {
    /// An empty graph on ``executor`` (``None``: the process's shared one, one worker per
    /// processor).
    #[new]
    #[pyo3(signature = (executor=None))]
    fn new(executor: Option<PyRef<'_, PyExecutor>>) -> Self {
        let exec = executor.map_or_else(|| default_executor().clone(), |e| e.exec().clone());
        PyGraph {
            graph: Some(Graph::new(exec)),
            raised: Arc::new(Raised::default()),
        }
    }

    /// The executor its steps run on.
    #[getter]
    fn executor(&self) -> PyExecutor {
        PyExecutor {
            exec: Some(self.graph().executor().clone()),
        }
    }

    /// A new item collection.
    fn items(&self, name: &str) -> PyItemCollection {
        PyItemCollection {
            inner: self.graph().items(name),
            raised: self.raised.clone(),
        }
    }

    /// A new tag collection. With ``memoize`` (the default) a tag put twice prescribes its
    /// steps once; without, every put does and no set of tags is kept.
    #[pyo3(signature = (name, memoize=true))]
    fn tags(&self, name: &str, memoize: bool) -> PyTagCollection {
        let inner = self.graph().tags(name);
        inner.memoize(memoize);
        PyTagCollection { inner }
    }

    /// A new step collection running ``body(ctx, tag)`` for each prescribed tag, with
    /// optional dependency tuning (``depends(tag) -> [(items, tag), ...]``) and priority
    /// (``priority(tag) -> bool``, true for critical-path work).
    #[pyo3(signature = (name, body, depends=None, priority=None))]
    fn steps(
        &self,
        name: &str,
        body: Py<PyAny>,
        depends: Option<Py<PyAny>>,
        priority: Option<Py<PyAny>>,
    ) -> PyStepCollection {
        let step_name: Arc<str> = name.into();
        let inner = self.graph().steps(
            name,
            step::body(body, self.raised.clone(), step_name.clone()),
        );
        if let Some(f) = depends {
            inner.depends(collections::depends(
                f,
                self.raised.clone(),
                step_name.clone(),
            ));
        }
        if let Some(f) = priority {
            inner.priority(collections::priority(f, self.raised.clone(), step_name));
        }
        PyStepCollection {
            inner,
            raised: self.raised.clone(),
        }
    }

    /// The environment puts ``value`` at ``tag``; ``gets`` frees it after that many gets.
    #[pyo3(signature = (items, tag, value, gets=None))]
    fn put(
        &self,
        py: Python<'_>,
        items: PyRef<'_, PyItemCollection>,
        tag: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        gets: Option<u32>,
    ) -> PyResult<()> {
        let (tag, item) = put_args(tag, value, gets)?;
        // Waking and scheduling may run tuning functions, which take the GIL themselves.
        let items = items.inner.clone();
        py.detach(|| match gets {
            Some(n) => self.graph().put_counted(&items, tag, item, n),
            None => self.graph().put(&items, tag, item),
        });
        Ok(())
    }

    /// The environment puts ``tag`` into ``tags``, running the steps they prescribe.
    fn put_tag(
        &self,
        py: Python<'_>,
        tags: PyRef<'_, PyTagCollection>,
        tag: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let tag = to_tag(tag)?;
        let tags = tags.inner.clone();
        py.detach(|| self.graph().put_tag(&tags, tag));
        Ok(())
    }

    /// The value at ``tag`` now (``None`` when not put, or freed). Not counted as a get.
    /// In a distributed graph an item homed in another space is fetched from there; a home
    /// that cannot be asked raises :class:`GraphError`.
    fn get(
        &self,
        py: Python<'_>,
        items: PyRef<'_, PyItemCollection>,
        tag: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let tag = to_tag(tag)?;
        let inner = items.inner.clone();
        py.detach(|| self.graph().get(&inner, tag))
            .map_err(|e| self.error(py, &e))?
            .map(|item| to_python(py, &item))
            .transpose()
    }

    /// Waits until no step runs or is scheduled (``timeout`` in seconds, ``None``: no limit),
    /// then raises the graph's failure, if any: :class:`StepFailed`, :class:`DuplicatePut`,
    /// :class:`FreedItem`, or :class:`Deadlock` listing the gets nobody answered.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        self.in_slices(
            py,
            timeout,
            "step instances still run or are scheduled",
            |g, d| g.wait_timeout(d),
        )?;
        self.tuning_error(py)
    }

    /// Joins the graph to the ranks of a distributed run: every process of ``space``'s
    /// application that builds the same graph (collections, steps and tuners) calls this
    /// with the same ``name`` and ``ranks`` and its own ``rank``; it returns once all have
    /// joined. Rank 0 is the environment (puts, :meth:`wait`, :meth:`get`, then
    /// :meth:`release`); the others call :meth:`serve`. ``compute_on`` places step
    /// instances, ``home`` places items.
    fn distribute(
        &self,
        py: Python<'_>,
        space: PyRef<'_, Space>,
        name: &str,
        rank: usize,
        ranks: usize,
    ) -> PyResult<()> {
        let space = space.get(py)?;
        py.detach(|| self.graph().distribute(&space, name, rank, ranks))
            .map_err(|e| self.error(py, &e))
    }

    /// On a rank other than 0: runs the steps and keeps the items placed here until the
    /// environment releases the graph (or is lost, which raises). Raises
    /// :class:`~stampede.Timeout` after ``timeout`` seconds still serving (call again to go
    /// on); Ctrl-C interrupts it.
    #[pyo3(signature = (timeout=None))]
    fn serve(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        self.in_slices(py, timeout, "the graph is still being served", |g, d| {
            g.serve_timeout(d)
        })
    }

    /// On rank 0, after the last :meth:`get`: ends the run; the other ranks' :meth:`serve`
    /// returns.
    fn release(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.graph().release())
            .map_err(|e| self.error(py, &e))
    }

    /// ``(rank, ranks)`` once distributed, else ``None``.
    #[getter]
    fn rank(&self) -> Option<(usize, usize)> {
        self.graph().rank()
    }

    fn __repr__(&self) -> String {
        format!("Graph(executor={:?})", self.graph().executor())
    }
}
