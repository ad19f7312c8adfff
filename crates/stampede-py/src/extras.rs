//! Pacing, temporal correlation and arrival streams.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use futures::Stream;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::{GetError, Timestamp};

use crate::errors;
use crate::items;
use crate::stm::{self, call_back, lock, ChannelInput};

/// What a pacer's late handler decides.
#[pyclass(module = "stampede", frozen, eq, eq_int, hash, skip_from_py_object)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LateAction {
    /// Go on; later ticks keep their original schedule.
    #[pyo3(name = "CONTINUE")]
    Continue,
    /// Skip the missed ticks: ``sync`` returns the first virtual time still in the future.
    #[pyo3(name = "SKIP")]
    Skip,
    /// Rebase the schedule so this tick is due now.
    #[pyo3(name = "RESYNC")]
    Resync,
}

impl From<LateAction> for core::LateAction {
    fn from(a: LateAction) -> Self {
        match a {
            LateAction::Continue => core::LateAction::Continue,
            LateAction::Skip => core::LateAction::Skip,
            LateAction::Resync => core::LateAction::Resync,
        }
    }
}

/// How late a task reached a tick, given to a late handler.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct Lateness {
    /// The virtual time whose tick was due.
    vt: Timestamp,
    /// Seconds after the tick's due time.
    late: f64,
    /// Whole periods missed.
    ticks_behind: u64,
}

/// The outcome of ``Pacer.sync``.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct Tick {
    /// ``"on_time"``, ``"late"``, ``"skip"`` or ``"resynced"``.
    kind: &'static str,
    /// Seconds late (``"late"`` only; else 0).
    late: f64,
    /// For ``"skip"``: the virtual time to carry on from.
    skip_to: Option<Timestamp>,
}

#[pymethods]
impl Tick {
    fn __repr__(&self) -> String {
        match self.kind {
            "late" => format!("Tick(late, {:.6} s)", self.late),
            "skip" => format!("Tick(skip to {})", self.skip_to.unwrap_or_default()),
            k => format!("Tick({k})"),
        }
    }
}

/// Counters of a pacer.
#[pyclass(module = "stampede", frozen, get_all)]
pub(crate) struct PacerStats {
    /// Ticks reached on time.
    on_time: u64,
    /// Ticks reached late beyond the tolerance.
    late: u64,
    /// Virtual times skipped by ``SKIP`` decisions.
    skipped: u64,
    /// Schedule rebases.
    resyncs: u64,
}

/// Paces a task to real time: tick ``vt`` is due ``vt`` periods after the first ``sync``.
///
/// An early ``sync`` sleeps (without the GIL) until the tick is due; one later than the
/// tolerance asks the late handler, a ``LateAction`` or a callable taking a ``Lateness``.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Pacer {
    pacer: Arc<Mutex<core::Pacer>>,
    period: f64,
    // What the late handler raised, re-raised by `sync`.
    failed: Arc<Mutex<Option<PyErr>>>,
    // The thread sleeping in `sync`, which holds `pacer`: signal handlers run on it while
    // it sleeps, and one that used this pacer would wait for itself forever.
    syncing: Mutex<Option<std::thread::ThreadId>>,
}

impl Pacer {
    /// Refuses a call from a signal handler running inside this pacer's own `sync`.
    fn not_in_own_sync(&self) -> PyResult<()> {
        if *lock(&self.syncing) == Some(std::thread::current().id()) {
            return Err(PyRuntimeError::new_err(
                "this pacer is sleeping in sync() on this thread (called from a signal handler?)",
            ));
        }
        Ok(())
    }

    pub(crate) fn create(
        py: Python<'_>,
        period: f64,
        tolerance: f64,
        on_late: Option<Py<PyAny>>,
    ) -> PyResult<Pacer> {
        let p = stm::duration(py, "period", period)?;
        if p.is_zero() {
            return Err(errors::invalid(py, "period must be positive"));
        }
        let tol = stm::duration(py, "tolerance", tolerance)?;
        let failed: Arc<Mutex<Option<PyErr>>> = Arc::default();
        let failed_in = failed.clone();
        let handler: Box<dyn FnMut(core::Lateness) -> core::LateAction + Send> = match on_late {
            None => Box::new(|_| core::LateAction::Continue),
            Some(h) => {
                if let Ok(a) = h.bind(py).cast::<LateAction>() {
                    let a: core::LateAction = (*a.get()).into();
                    Box::new(move |_| a)
                } else if h.bind(py).is_callable() {
                    Box::new(move |l: core::Lateness| {
                        let mut action = core::LateAction::Continue;
                        Python::attach(|py| {
                            let r = (|| -> PyResult<()> {
                                let arg = Lateness {
                                    vt: l.vt,
                                    late: l.late.as_secs_f64(),
                                    ticks_behind: l.ticks_behind,
                                };
                                let r = h.bind(py).call1((arg,))?;
                                let a = r.cast::<LateAction>().map_err(|_| {
                                    PyTypeError::new_err(format!(
                                        "a late handler returns a LateAction, not {}",
                                        r.get_type()
                                    ))
                                })?;
                                action = (*a.get()).into();
                                Ok(())
                            })();
                            if let Err(e) = r {
                                lock(&failed_in).get_or_insert(e);
                            }
                        });
                        action
                    })
                } else {
                    return Err(PyTypeError::new_err(
                        "on_late is a LateAction or a callable returning one",
                    ));
                }
            }
        };
        Ok(Pacer {
            pacer: Arc::new(Mutex::new(core::Pacer::new(p, tol, handler))),
            period,
            failed,
            syncing: Mutex::new(None),
        })
    }
}

#[pymethods]
impl Pacer {
    /// The tick period in seconds.
    #[getter]
    fn period(&self) -> f64 {
        self.period
    }

    /// Waits until tick ``vt`` is due, or reports lateness through the handler.
    fn sync(&self, py: Python<'_>, vt: Timestamp) -> PyResult<Tick> {
        self.not_in_own_sync()?;
        let signals = stm::Signals::default();
        let me = std::thread::current().id();
        let t = py.detach(|| {
            let mut pacer = lock(&self.pacer);
            *lock(&self.syncing) = Some(me);
            let t = pacer.sync_interruptible(vt, &|| signals.pending());
            *lock(&self.syncing) = None;
            t
        });
        if let Some(e) = lock(&self.failed).take() {
            return Err(e);
        }
        let Some(t) = t else {
            return Err(signals.take().unwrap_or_else(|| {
                PyRuntimeError::new_err("the pacer's wait was interrupted without an exception")
            }));
        };
        Ok(match t {
            core::Tick::OnTime => Tick {
                kind: "on_time",
                late: 0.0,
                skip_to: None,
            },
            core::Tick::Late(d) => Tick {
                kind: "late",
                late: d.as_secs_f64(),
                skip_to: None,
            },
            core::Tick::Skip(ts) => Tick {
                kind: "skip",
                late: 0.0,
                skip_to: Some(ts),
            },
            _ => Tick {
                kind: "resynced",
                late: 0.0,
                skip_to: None,
            },
        })
    }

    /// Counters.
    fn stats(&self, py: Python<'_>) -> PyResult<PacerStats> {
        self.not_in_own_sync()?;
        let s = py.detach(|| lock(&self.pacer).stats());
        Ok(PacerStats {
            on_time: s.on_time,
            late: s.late,
            skipped: s.skipped,
            resyncs: s.resyncs,
        })
    }
}

/// One correlated set: the first input's timestamp and ``(ts, value)`` per input.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Correlated {
    set: core::Correlated,
    #[pyo3(get)]
    ts: Timestamp,
    #[pyo3(get)]
    items: Py<PyAny>,
}

#[pymethods]
impl Correlated {
    fn __repr__(&self) -> String {
        format!("Correlated(ts={}, {} items)", self.ts, self.set.items.len())
    }
}

/// Sets of items, one per input channel, that belong to the same moment.
///
/// The correlator takes over its input connections. Sets come in increasing timestamp
/// order; ``within=None`` matches equal timestamps, ``within=d`` the nearest item within
/// ``d`` of the first input's. A first-input item that can no longer be matched is skipped
/// and counted in ``skipped``. The inputs must be connections to channels of this address
/// space (``NotLocal`` otherwise).
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Correlator {
    inner: Arc<Mutex<Option<core::Correlator>>>,
}

impl Correlator {
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut core::Correlator) -> T + Send,
    ) -> PyResult<T> {
        let r = py.detach(|| lock(&self.inner).as_mut().map(f));
        r.ok_or_else(|| errors::raise(py, errors::Exc::Closed, ("the correlator is closed",)))
    }

    fn set(&self, py: Python<'_>, r: Result<core::Correlated, GetError>) -> PyResult<Correlated> {
        let set = r.map_err(|e| errors::get_error(py, e))?;
        let mut pairs = Vec::with_capacity(set.items.len());
        for (ts, item) in &set.items {
            pairs.push((*ts, items::to_python(py, item)?));
        }
        Ok(Correlated {
            ts: set.ts,
            items: pairs.into_pyobject(py)?.into_any().unbind(),
            set,
        })
    }
}

#[pymethods]
impl Correlator {
    #[new]
    #[pyo3(signature = (inputs, *, within = None))]
    fn new(
        py: Python<'_>,
        inputs: Vec<Bound<'_, ChannelInput>>,
        within: Option<Timestamp>,
    ) -> PyResult<Self> {
        if inputs.is_empty() {
            return Err(errors::invalid(py, "a correlator needs at least one input"));
        }
        let mode = match within {
            None => core::Match::Exact,
            Some(d) if d >= 0 => core::Match::Within(d),
            Some(d) => return Err(errors::invalid(py, format!("within={d} must be >= 0"))),
        };
        // Every input is checked before any is taken, so a refusal takes none.
        for i in &inputs {
            i.get().check_attached(py)?;
        }
        let mut conns = Vec::with_capacity(inputs.len());
        for i in &inputs {
            conns.push(i.get().take(py)?);
        }
        // Subscribing to another space's arrivals is a round trip: without the GIL.
        let c = py
            .detach(|| core::Correlator::new(conns, mode))
            .map_err(|e| errors::stm_error(py, e))?;
        Ok(Correlator {
            inner: Arc::new(Mutex::new(Some(c))),
        })
    }

    /// First-input items skipped because they could no longer be matched.
    #[getter]
    fn skipped(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |c| c.skipped())
    }

    /// The next set, waiting for it (at most ``timeout`` seconds, then ``Timeout``).
    #[pyo3(signature = (*, timeout = None))]
    fn get(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Correlated> {
        let deadline = stm::deadline(py, timeout)?;
        loop {
            let (slice, last) = stm::next_slice(deadline);
            let r = self.with(py, |c| c.get_timeout(slice))?;
            match r {
                Err(GetError::Timeout(_)) if !last => py.check_signals()?,
                r => return self.set(py, r),
            }
        }
    }

    /// The next set without waiting; ``Unavailable`` if none is complete.
    fn try_get(&self, py: Python<'_>) -> PyResult<Correlated> {
        let r = self.with(py, |c| c.try_get())?;
        self.set(py, r)
    }

    /// Consumes the set's items.
    fn consume(&self, py: Python<'_>, matched: &Correlated) -> PyResult<()> {
        self.with(py, |c| c.consume(&matched.set))?
            .map_err(|e| errors::stm_error(py, e))
    }

    /// Consumes the set's items and everything older on every input (skipped items too).
    fn consume_until(&self, py: Python<'_>, matched: &Correlated) -> PyResult<()> {
        self.with(py, |c| c.consume_until(&matched.set))?
            .map_err(|e| errors::stm_error(py, e))
    }

    /// Detaches the inputs.
    fn close(&self, py: Python<'_>) {
        py.detach(|| drop(lock(&self.inner).take()));
    }
}

/// Wakes a Python callback (an asyncio future's resolver).
struct PyWake(Py<PyAny>);

impl Wake for PyWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        call_back(|py| {
            self.0.bind(py).call0()?;
            Ok(())
        })
    }
}

/// Wakes a thread parked in `next_timeout`.
struct ThreadWake(std::thread::Thread);

impl Wake for ThreadWake {
    fn wake(self: Arc<Self>) {
        self.0.unpark()
    }
}

/// The core's arrival stream; `stampede.Arrivals` wraps it for `async for`.
#[pyclass(module = "stampede", frozen, name = "_RawArrivals")]
pub(crate) struct RawArrivals {
    inner: Mutex<Option<core::Arrivals>>,
}

impl RawArrivals {
    pub(crate) fn new(a: core::Arrivals) -> Self {
        RawArrivals {
            inner: Mutex::new(Some(a)),
        }
    }

    fn poll_with(&self, waker: &Waker) -> Poll<Option<Timestamp>> {
        let mut g = lock(&self.inner);
        match g.as_mut() {
            None => Poll::Ready(None),
            Some(a) => Pin::new(a).poll_next(&mut Context::from_waker(waker)),
        }
    }
}

#[pymethods]
impl RawArrivals {
    /// Notifications dropped because the buffer was full.
    #[getter]
    fn dropped(&self) -> u64 {
        lock(&self.inner).as_ref().map_or(0, |a| a.dropped())
    }

    /// The next timestamp if one is buffered; else ``None``, and ``on_wake()`` is called
    /// when one arrives. Raises ``StopAsyncIteration`` at the end.
    fn poll(&self, on_wake: Py<PyAny>) -> PyResult<Option<Timestamp>> {
        match self.poll_with(&Waker::from(Arc::new(PyWake(on_wake)))) {
            Poll::Ready(Some(ts)) => Ok(Some(ts)),
            Poll::Ready(None) => Err(pyo3::exceptions::PyStopAsyncIteration::new_err(())),
            Poll::Pending => Ok(None),
        }
    }

    /// The next timestamp, waiting at most ``timeout`` seconds; ``None`` on timeout.
    #[pyo3(signature = (timeout = None))]
    fn next_timeout(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Timestamp>> {
        let deadline = stm::deadline(py, timeout)?;
        loop {
            let (slice, last) = stm::next_slice(deadline);
            let r = py.detach(|| {
                let waker = Waker::from(Arc::new(ThreadWake(std::thread::current())));
                let end = Instant::now() + slice;
                loop {
                    match self.poll_with(&waker) {
                        Poll::Ready(r) => return Some(r),
                        Poll::Pending => {
                            let now = Instant::now();
                            if now >= end {
                                return None;
                            }
                            std::thread::park_timeout(end - now);
                        }
                    }
                }
            });
            match r {
                Some(Some(ts)) => return Ok(Some(ts)),
                Some(None) => return Err(PyStopIteration::new_err(())),
                None if last => return Ok(None),
                None => py.check_signals()?,
            }
        }
    }

    /// Stops the notifications.
    fn close(&self) {
        lock(&self.inner).take();
    }
}

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LateAction>()?;
    m.add_class::<Lateness>()?;
    m.add_class::<Tick>()?;
    m.add_class::<PacerStats>()?;
    m.add_class::<Pacer>()?;
    m.add_class::<Correlated>()?;
    m.add_class::<Correlator>()?;
    m.add_class::<RawArrivals>()?;
    Ok(())
}
