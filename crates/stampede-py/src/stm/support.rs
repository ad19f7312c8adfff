//! The small helpers every class shares: the interpreter's shutdown, running with or
//! without the GIL, waits (deadlines, slices, signals) and argument conversions.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::{ContainerOptions, GetError, Wait, ZoneId};

use crate::errors;

/// Longest uninterrupted wait with the GIL released.
pub(super) const SLICE: Duration = Duration::from_millis(100);

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
pub(super) fn whole_wait(deadline: Option<Instant>) -> Wait {
    match deadline {
        None => Wait::Forever,
        Some(d) => Wait::For(d.saturating_duration_since(Instant::now())),
    }
}

/// Runs a blocking operation in slices with the GIL released until it succeeds, fails for
/// a reason other than `retry`, or `deadline` passes.
pub(super) fn blocking<T: Send, E: Send>(
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
    pub(super) fn put_error(
        &self,
        py: Python<'_>,
        e: core::PutError,
        item: &Bound<'_, PyAny>,
    ) -> PyErr {
        match self.take() {
            Some(raised) if e.kind() == core::PutErrorKind::Interrupted => raised,
            _ => put_failed(py, e, item),
        }
    }
}

/// A failed put's exception. A deferred error (an earlier put the owner refused) carries
/// that put's value, rebuilt from its item, with `deferred` set; when `value`'s own put was
/// not made because of it, `unsent` is its `(ts, value)`.
pub(super) fn put_failed(py: Python<'_>, mut e: core::PutError, value: &Bound<'_, PyAny>) -> PyErr {
    if !e.is_deferred() {
        return errors::put_error(py, e, value.clone().unbind());
    }
    let unsent = e.take_unsent().map(|(ts, _)| (ts, value.clone().unbind()));
    deferred(py, e, unsent)
}

/// A deferred put error, from a flush or (with `unsent`) from a put that was not made.
pub(super) fn deferred(
    py: Python<'_>,
    e: core::PutError,
    unsent: Option<(i64, Py<PyAny>)>,
) -> PyErr {
    let (kind, ts, msg) = (e.kind(), e.timestamp(), e.to_string());
    let item = e.into_item();
    let value = match crate::items::to_python(py, &item) {
        Ok(v) => v,
        Err(err) => return err,
    };
    let err = errors::put_error(py, core::PutError::new(kind, ts, item), value);
    errors::deferred(py, err, msg, unsent)
}

pub(super) fn is_timeout(e: &GetError) -> bool {
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

/// Runs `f` at once when `local`, else without the GIL: an operation on a container of
/// another address space is a round trip to its owner.
pub(super) fn run<R: Send>(py: Python<'_>, local: bool, f: impl FnOnce() -> R + Send) -> R {
    if local {
        f()
    } else {
        py.detach(f)
    }
}

pub(super) fn callable(f: &Bound<'_, PyAny>, what: &str) -> PyResult<Py<PyAny>> {
    if f.is_callable() {
        Ok(f.clone().unbind())
    } else {
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "{what} must be callable, not {}",
            f.get_type()
        )))
    }
}
