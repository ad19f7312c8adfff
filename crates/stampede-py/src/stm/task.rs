//! A task: a thread of control with a virtual time.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::{Timestamp, INFINITY};

use super::support::{drop_detached, lock};
use crate::errors::{self, Exc};

/// A thread of control with a virtual time.
///
/// Virtual time orders what the task may still put and bounds garbage collection: the task
/// never puts below its visibility, and items at or above it stay available to it. A task
/// exits on ``exit()``, at the end of its ``with`` block, or once neither it nor any of its
/// connections is referenced any more. A task of a ``Space`` also reaches the containers of
/// other address spaces.
#[pyclass(module = "stampede", frozen)]
pub(super) struct Task {
    task: Mutex<Option<Arc<core::Task>>>,
    /// A task of a joined runtime: its exit may tell other address spaces, so it drops
    /// without the GIL.
    joined: bool,
    id: u64,
    name: String,
    zone: u32,
}

impl Task {
    pub(super) fn wrap(t: core::Task, joined: bool) -> Task {
        Task {
            id: t.id().0,
            name: t.name().to_owned(),
            zone: t.zone().0,
            joined,
            task: Mutex::new(Some(Arc::new(t))),
        }
    }

    pub(super) fn get(&self, py: Python<'_>) -> PyResult<Arc<core::Task>> {
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
    pub(super) fn exited(&self) -> bool {
        lock(&self.task).is_none()
    }

    /// Sets the virtual time; lowering it below the visibility raises ``BelowVisibility``.
    fn set_virtual_time(&self, py: Python<'_>, vt: Timestamp) -> PyResult<()> {
        self.get(py)?
            .set_virtual_time(vt)
            .map_err(|e| errors::stm_error(py, e))
    }

    // `attach_input` and `attach_output` live with the connections they make (`inputs.rs`,
    // `outputs.rs`).

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
