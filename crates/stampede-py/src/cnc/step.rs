//! What a Python step sees while it runs, and the wrappers that run Python callables as a
//! step's body and tuning functions.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyTuple;
use stampede_coord::{StepCtx, StepError, Tag};
use stampede_core::Item;

use super::collections::{PyItemCollection, PyTagCollection, Raised};
use super::tags::{to_py, to_tag};
use crate::errors::{self, Exc};
use crate::items::{to_item, to_python};
use crate::stm::{lock, FINALIZING};

pyo3::create_exception!(
    stampede.cnc,
    Suspended,
    pyo3::exceptions::PyBaseException,
    "Raised by a step's get of an item not put yet: the step stops here and runs again \
     once the item is put. It derives from BaseException so that `except Exception` lets it \
     through; a step never needs to catch it."
);

/// The running step's context, lent to Python for the length of the call.
struct CtxSlot {
    ctx: Mutex<Option<NonNull<StepCtx>>>,
    /// A get found nothing: the step is suspended whatever the callable does next.
    missed: AtomicBool,
}

// SAFETY: the pointer is set only while the worker that owns the `&mut StepCtx` is inside
// the Python call and does not touch the context itself; every use goes through the mutex,
// and `close` clears it before that borrow ends.
unsafe impl Send for CtxSlot {}
// SAFETY: as above; the mutex serialises the uses.
unsafe impl Sync for CtxSlot {}

impl CtxSlot {
    fn with<R>(&self, py: Python<'_>, f: impl FnOnce(&mut StepCtx) -> R) -> PyResult<R> {
        let guard = lock(&self.ctx);
        match *guard {
            // SAFETY: see `CtxSlot`: the context is alive and lent to us while set.
            Some(p) => Ok(f(unsafe { &mut *p.as_ptr() })),
            None => Err(errors::invalid(
                py,
                "a step context is used only while its step runs",
            )),
        }
    }

    /// Ends the loan; true when a get missed.
    fn close(&self) -> bool {
        *lock(&self.ctx) = None;
        self.missed.load(Ordering::Acquire)
    }
}

/// What a running step gets, puts and prescribes through. Gets answer at once or suspend the
/// step (raising :class:`Suspended`); puts and tag puts take effect when the step returns,
/// so a step run again never puts twice.
#[pyclass(module = "stampede.cnc", name = "StepContext", frozen)]
pub(crate) struct PyStepContext {
    slot: Arc<CtxSlot>,
    tag: Tag,
}

#[pymethods]
impl PyStepContext {
    /// The value at ``tag`` in ``items``; raises :class:`Suspended` when it is not there yet.
    fn get(
        &self,
        py: Python<'_>,
        items: PyRef<'_, PyItemCollection>,
        tag: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let tag = to_tag(tag)?;
        let suspended = || Suspended::new_err("an item the step gets is not there yet");
        // After a miss the instance is already waiting: a second miss must not queue it twice.
        if self.slot.missed.load(Ordering::Acquire) {
            return Err(suspended());
        }
        let got = self
            .slot
            .with(py, |ctx| ctx.get(&items.inner, tag.clone()))?;
        match got {
            Ok(item) => to_python(py, &item),
            Err(StepError::Missing) => {
                self.slot.missed.store(true, Ordering::Release);
                Err(suspended())
            }
            Err(StepError::Failed(m)) => Err(errors::raise(
                py,
                Exc::FreedItem,
                (
                    format!("{}{tag}: {m}", items.inner.name()),
                    items.inner.name().to_owned(),
                    to_py(py, &tag)?.unbind(),
                    String::new(),
                ),
            )),
        }
    }

    /// Puts ``value`` at ``tag`` when the step returns; ``gets`` frees it after that many gets.
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
        self.slot.with(py, |ctx| match gets {
            Some(n) => ctx.put_counted(&items.inner, tag, item, n),
            None => ctx.put(&items.inner, tag, item),
        })
    }

    /// Puts ``tag`` into ``tags`` when the step returns.
    fn put_tag(
        &self,
        py: Python<'_>,
        tags: PyRef<'_, PyTagCollection>,
        tag: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let tag = to_tag(tag)?;
        self.slot.with(py, |ctx| ctx.put_tag(&tags.inner, tag))
    }

    /// The instance's tag.
    #[getter]
    fn tag<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        to_py(py, &self.tag)
    }
}

/// A put's tag and item, checked: ``gets`` counts gets an item will receive, so at least 1.
pub(crate) fn put_args(
    tag: &Bound<'_, PyAny>,
    value: &Bound<'_, PyAny>,
    gets: Option<u32>,
) -> PyResult<(Tag, Item)> {
    let py = tag.py();
    if gets == Some(0) {
        return Err(errors::invalid(
            py,
            "gets counts the gets an item will receive: at least 1",
        ));
    }
    Ok((to_tag(tag)?, to_item(py, value)?))
}

/// A step body that calls `func(ctx, tag)`.
pub(crate) fn body(
    func: Py<PyAny>,
    raised: Arc<Raised>,
    step: Arc<str>,
) -> impl Fn(&mut StepCtx, &Tag) -> Result<(), StepError> + Send + Sync + 'static {
    move |ctx, tag| {
        if FINALIZING.load(Ordering::Acquire) {
            return Err(StepError::failed("the Python interpreter is exiting"));
        }
        let slot = Arc::new(CtxSlot {
            ctx: Mutex::new(Some(NonNull::from(&mut *ctx))),
            missed: AtomicBool::new(false),
        });
        let outcome = Python::attach(|py| {
            let context = PyStepContext {
                slot: slot.clone(),
                tag: tag.clone(),
            };
            let r = Bound::new(py, context)
                .and_then(|c| func.bind(py).call1((c, to_py(py, tag)?)).map(drop));
            // The loan ends before the context's borrow does, whatever the callable kept.
            let missed = slot.close();
            match r {
                _ if missed => Err(StepError::Missing),
                Ok(()) => Ok(()),
                Err(e) => {
                    let message = errors::describe(py, &e);
                    let mut first = lock(&raised.step);
                    if first.is_none() {
                        *first = Some((step.to_string(), tag.clone(), e.into_value(py).into_any()));
                    }
                    Err(StepError::Failed(message))
                }
            }
        });
        slot.close();
        outcome
    }
}
