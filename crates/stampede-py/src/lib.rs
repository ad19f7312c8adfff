//! The compiled module of the `stampede` Python package (`stampede._stampede`).
//!
//! Everything here is a thin layer over `stampede-core` and `stampede-net`: Python values
//! become items (`items`), errors become the exceptions of `stampede.errors` (`errors`),
//! blocking calls release the GIL (`stm`), and address spaces join distributed applications
//! (`space`). Concurrent Collections graphs (`cnc`) and S-Net networks (`snet`) run Python
//! steps and boxes on the coordination layer's executor.

use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use pyo3::types::PyType;

mod cluster;
mod cnc;
mod dashboard;
mod dtype;
mod errors;
mod extras;
mod items;
mod kernels;
mod loan;
mod snet;
mod space;
mod stm;
mod tune;

/// Installs marshal hooks for instances of exactly ``cls``: ``marshal(obj) -> bytes`` runs at
/// each put, ``unmarshal(bytes) -> obj`` at each get. Items are tagged with
/// ``type_tag(name)``, so other languages that know ``name`` read them too. Returns the tag.
#[pyfunction]
fn register_type(
    cls: &Bound<'_, PyType>,
    name: &str,
    marshal: Py<PyAny>,
    unmarshal: Py<PyAny>,
) -> u64 {
    items::register_type(cls, name, marshal, unmarshal)
}

/// The 64-bit type tag of the type called ``name`` (FNV-1a of its UTF-8 bytes).
#[pyfunction]
fn type_tag(name: &str) -> u64 {
    stampede_core::TypeTag::of_name(name).0
}

/// The ``ZENOH_RUNTIME`` value suited to this machine (``None``: Zenoh's defaults). Zenoh
/// reads the variable once, when the process's first address space joins: a program sets
/// ``os.environ["ZENOH_RUNTIME"]`` to this before joining, and its child processes inherit it.
#[pyfunction]
fn zenoh_runtime_for_this_machine() -> Option<&'static str> {
    stampede_net::zenoh_runtime_for_this_machine()
}

/// Called at interpreter exit: core threads stop calling into Python.
#[pyfunction]
fn _shutdown() {
    stm::FINALIZING.store(true, Ordering::Release);
}

#[pymodule]
fn _stampede(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Logs only when STAMPEDE_LOG or RUST_LOG asks (docs/observability.md).
    stampede_observe::init_logging(None);
    m.add("INFINITY", stampede_core::INFINITY)?;
    stm::register_classes(m)?;
    cnc::register_classes(m)?;
    snet::register_classes(m)?;
    tune::register_classes(m)?;
    extras::register_classes(m)?;
    space::register_classes(m)?;
    cluster::register_classes(m)?;
    m.add_class::<dashboard::Dashboard>()?;
    m.add_class::<items::Opaque>()?;
    m.add_class::<items::ItemView>()?;
    m.add_class::<loan::Loan>()?;
    m.add_function(wrap_pyfunction!(register_type, m)?)?;
    m.add_function(wrap_pyfunction!(type_tag, m)?)?;
    m.add_function(wrap_pyfunction!(zenoh_runtime_for_this_machine, m)?)?;
    m.add_function(wrap_pyfunction!(_shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(kernels::_ssd_stripes, m)?)?;
    let atexit = m.py().import("atexit")?;
    atexit.call_method1("register", (m.getattr("_shutdown")?,))?;
    Ok(())
}
