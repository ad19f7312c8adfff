//! `stampede.cnc`: Concurrent Collections graphs whose steps are Python callables, run on the
//! coordination layer's work-stealing executor. A step holds the GIL while its Python runs;
//! kernels that release it (numpy, BLAS, OpenCV) run on all workers at once.

mod collections;
pub(crate) mod graph;
mod step;
mod tags;

use pyo3::prelude::*;

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<graph::PyExecutor>()?;
    m.add_class::<graph::PyExecutorStats>()?;
    m.add_class::<graph::PyWorkerStats>()?;
    m.add_class::<graph::PyGraph>()?;
    m.add_class::<graph::PyTraceEvent>()?;
    m.add_class::<collections::PyItemCollection>()?;
    m.add_class::<collections::PyTagCollection>()?;
    m.add_class::<collections::PyStepCollection>()?;
    m.add_class::<step::PyStepContext>()?;
    m.add("Suspended", m.py().get_type::<step::Suspended>())?;
    Ok(())
}
