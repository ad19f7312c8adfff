//! Item, tag and step collections as Python objects, and the wrappers that run Python
//! callables as their tuning functions.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use stampede_coord::{ItemCollection, Priority, StepCollection, Tag, TagCollection};

use super::tags::{to_py, to_tag};
use crate::stm::{lock, FINALIZING};

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
        let f = placement(rank, slf.raised.clone(), slf.inner.name().into(), "home");
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
        let f = depends(inputs, slf.raised.clone(), slf.name_arc());
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
        let f = placement(rank, slf.raised.clone(), slf.name_arc(), "compute_on");
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
        let f = priority(high, slf.raised.clone(), slf.name_arc());
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

/// The Python exceptions of a graph's callables, kept to explain its failure.
#[derive(Default)]
pub(crate) struct Raised {
    /// The first exception a step raised: (step, tag, exception).
    pub(crate) step: Mutex<Option<(String, Tag, Py<PyAny>)>>,
    /// The first exception of a tuning function: (step or item collection, tag, which
    /// function, exception). The graph went on without the tuning; `wait` reports it.
    pub(crate) tuning: Mutex<Option<(String, Tag, &'static str, PyErr)>>,
}

fn tuning_failed(raised: &Raised, step: &str, tag: &Tag, what: &'static str, e: PyErr) {
    let mut first = lock(&raised.tuning);
    if first.is_none() {
        *first = Some((step.to_owned(), tag.clone(), what, e));
    }
}

/// A `depends` tuning function calling Python. If it raises, the instance runs untuned and
/// `wait` reports the exception.
pub(crate) fn depends(
    func: Py<PyAny>,
    raised: Arc<Raised>,
    step: Arc<str>,
) -> impl Fn(&Tag) -> Vec<(ItemCollection, Tag)> + Send + Sync + 'static {
    move |tag| {
        if FINALIZING.load(Ordering::Acquire) {
            return Vec::new();
        }
        Python::attach(|py| {
            let inputs = || -> PyResult<Vec<(ItemCollection, Tag)>> {
                let out = func.bind(py).call1((to_py(py, tag)?,))?;
                let mut inputs = Vec::new();
                for pair in out.try_iter()? {
                    let (items, t): (PyRef<'_, PyItemCollection>, Bound<'_, PyAny>) =
                        pair?.extract()?;
                    inputs.push((items.inner.clone(), to_tag(&t)?));
                }
                Ok(inputs)
            };
            inputs().unwrap_or_else(|e| {
                tuning_failed(&raised, &step, tag, "depends", e);
                Vec::new()
            })
        })
    }
}

/// A `priority` tuning function calling Python: true means critical-path work. If it
/// raises, the instance runs at normal priority and `wait` reports the exception.
pub(crate) fn priority(
    func: Py<PyAny>,
    raised: Arc<Raised>,
    step: Arc<str>,
) -> impl Fn(&Tag) -> Priority + Send + Sync + 'static {
    move |tag| {
        if FINALIZING.load(Ordering::Acquire) {
            return Priority::Normal;
        }
        Python::attach(|py| {
            let high = func
                .bind(py)
                .call1((to_py(py, tag)?,))
                .and_then(|v| v.is_truthy());
            Ok::<_, PyErr>(high)
        })
        .and_then(|r| r)
        .map_or_else(
            |e| {
                tuning_failed(&raised, &step, tag, "priority", e);
                Priority::Normal
            },
            |high| {
                if high {
                    Priority::High
                } else {
                    Priority::Normal
                }
            },
        )
    }
}

/// A placement tuner calling Python (`compute_on`, `home`): the rank it returns. If it
/// raises or returns no rank, rank 0 is used and `wait` reports the exception.
pub(crate) fn placement(
    func: Py<PyAny>,
    raised: Arc<Raised>,
    name: Arc<str>,
    what: &'static str,
) -> impl Fn(&Tag) -> usize + Send + Sync + 'static {
    move |tag| {
        if FINALIZING.load(Ordering::Acquire) {
            return 0;
        }
        Python::attach(|py| {
            let rank = || -> PyResult<usize> { func.bind(py).call1((to_py(py, tag)?,))?.extract() };
            rank().unwrap_or_else(|e| {
                tuning_failed(&raised, &name, tag, what, e);
                0
            })
        })
    }
}
