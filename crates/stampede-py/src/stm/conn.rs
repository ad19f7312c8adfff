//! The connection wrapper every connection class holds, and the Python methods they share.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::{Container, InputConnection, OutputConnection};

use super::support::{drop_detached, lock, run};
use crate::errors::{self, Exc};

/// A connection that Python can detach while other threads use it.
pub(super) struct Conn<T: Send + Sync + 'static> {
    inner: Arc<Mutex<Option<Arc<T>>>>,
    /// The id of a connection to a container here; `None` for another address space's
    /// container (its id lives at the owner).
    pub(super) id: Option<u64>,
    /// Whether the container lives here: its operations then run with the GIL held.
    pub(super) local: bool,
}

impl<T: Send + Sync + 'static> Conn<T> {
    /// Attaches `task` to `container` with `attach` (without the GIL when the container
    /// lives in another address space).
    pub(super) fn new<C: Container>(
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

    pub(super) fn get(&self, py: Python<'_>) -> PyResult<Arc<T>> {
        lock(&self.inner)
            .clone()
            .ok_or_else(|| errors::raise(py, Exc::Detached, ("the connection is detached",)))
    }

    pub(super) fn get_for_put(&self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<Arc<T>> {
        lock(&self.inner)
            .clone()
            .ok_or_else(|| errors::detached_put(py, value))
    }

    pub(super) fn is_detached(&self) -> bool {
        lock(&self.inner).is_none()
    }

    pub(super) fn detach(&self, py: Python<'_>) {
        let c = lock(&self.inner).take();
        py.detach(|| drop(c));
    }

    /// Takes the connection for another owner (a correlator); it must not be in use.
    pub(super) fn take(&self, py: Python<'_>) -> PyResult<T> {
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
pub(super) trait HasId {
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

/// The Python methods every connection class shares. `$ty` has the fields `conn` (a
/// [`Conn`]) and `task` (a `Py<Task>`); `errors` and `Task` are in scope where it expands.
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

pub(super) use connection_common;
