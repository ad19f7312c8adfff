//! Item, tag and step collections as Python objects.

use std::sync::Arc;

use pyo3::prelude::*;
use stampede_coord::{ItemCollection, StepCollection, TagCollection};

use super::step::{self, Raised};

/// Values keyed by tag, each written once.
#[pyclass(module = "stampede.cnc", name = "ItemCollection", frozen)]
pub(crate) struct PyItemCollection {
    pub(crate) inner: ItemCollection,
    pub(crate) raised: Arc<Raised>,
}

#[pymethods]
impl PyItemCollection {
    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Items held now (put and not freed).
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// In a distributed graph, ``rank(tag)`` is the rank of the space where each item lives
    /// (every process must compute the same). Returns this collection.
    fn home<'py>(slf: PyRef<'py, Self>, py: Python<'_>, rank: Py<PyAny>) -> PyRef<'py, Self> {
        let f = step::rank(rank, slf.raised.clone(), slf.inner.name().into(), "home");
        let inner = slf.inner.clone();
        py.detach(move || {
            inner.home(f);
        });
        slf
    }

    fn __repr__(&self) -> String {
        format!(
            "ItemCollection({:?}, held={})",
            self.inner.name(),
            self.inner.len()
        )
    }
}

/// Tags that prescribe step collections: putting a tag runs an instance of each.
#[pyclass(module = "stampede.cnc", name = "TagCollection", frozen)]
pub(crate) struct PyTagCollection {
    pub(crate) inner: TagCollection,
}

#[pymethods]
impl PyTagCollection {
    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Every tag put from now on also runs an instance of ``steps``. Returns this collection.
    fn prescribes<'py>(
        slf: PyRef<'py, Self>,
        steps: PyRef<'_, PyStepCollection>,
    ) -> PyRef<'py, Self> {
        slf.inner.prescribes(&steps.inner);
        slf
    }

    /// Distinct tags put so far (while the collection remembers them).
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("TagCollection({:?})", self.inner.name())
    }
}

/// A step collection: one Python callable ``(ctx, tag)`` run for every prescribed tag.
#[pyclass(module = "stampede.cnc", name = "StepCollection", frozen)]
pub(crate) struct PyStepCollection {
    pub(crate) inner: StepCollection,
    pub(crate) raised: Arc<Raised>,
}

impl PyStepCollection {
    fn name_arc(&self) -> Arc<str> {
        self.inner.name().into()
    }
}

#[pymethods]
impl PyStepCollection {
    /// Its name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// Dependency tuning: ``inputs(tag)`` lists the ``(items, tag)`` an instance gets, and it
    /// starts only once all are put, so it never runs twice. Returns this collection.
    fn depends<'py>(slf: PyRef<'py, Self>, py: Python<'_>, inputs: Py<PyAny>) -> PyRef<'py, Self> {
        let f = step::depends(inputs, slf.raised.clone(), slf.name_arc());
        // A worker may hold the tuning lock while it waits for the GIL.
        let inner = slf.inner.clone();
        py.detach(move || {
            inner.depends(f);
        });
        slf
    }

    /// In a distributed graph, ``rank(tag)`` is the rank of the space each instance runs
    /// in. Returns this collection.
    fn compute_on<'py>(slf: PyRef<'py, Self>, py: Python<'_>, rank: Py<PyAny>) -> PyRef<'py, Self> {
        let f = step::rank(rank, slf.raised.clone(), slf.name_arc(), "compute_on");
        let inner = slf.inner.clone();
        py.detach(move || {
            inner.compute_on(f);
        });
        slf
    }

    /// Back to the untuned mode: an instance whose get finds nothing is suspended and run
    /// again when the item arrives. Returns this collection.
    fn untuned<'py>(slf: PyRef<'py, Self>, py: Python<'_>) -> PyRef<'py, Self> {
        let inner = slf.inner.clone();
        py.detach(move || {
            inner.untuned();
        });
        slf
    }

    /// ``high(tag)`` true puts an instance ahead of all normal work (critical-path steps).
    /// Returns this collection.
    fn priority<'py>(slf: PyRef<'py, Self>, py: Python<'_>, high: Py<PyAny>) -> PyRef<'py, Self> {
        let f = step::priority(high, slf.raised.clone(), slf.name_arc());
        let inner = slf.inner.clone();
        py.detach(move || {
            inner.priority(f);
        });
        slf
    }

    fn __repr__(&self) -> String {
        format!("StepCollection({:?})", self.inner.name())
    }
}
