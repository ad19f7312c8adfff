//! The live web dashboard of a runtime or an application (`Runtime.dashboard`,
//! `Space.dashboard`).

use std::sync::Mutex;

use pyo3::prelude::*;

/// A live web page of a runtime's or an application's metrics, served until closed.
///
/// ``url`` is the page's address. Use it as a context manager, or call ``close()``.
#[pyclass(module = "stampede._stampede", frozen)]
pub(crate) struct Dashboard {
    inner: Mutex<Option<stampede_observe::Dashboard>>,
    url: String,
}

impl Dashboard {
    pub(crate) fn new(d: std::io::Result<stampede_observe::Dashboard>) -> PyResult<Dashboard> {
        let d = d?;
        Ok(Dashboard {
            url: d.url(),
            inner: Mutex::new(Some(d)),
        })
    }
}

#[pymethods]
impl Dashboard {
    /// The page's address, ``http://host:port/``.
    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    /// Stops serving (idempotent).
    fn close(&self, py: Python<'_>) {
        let d = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        py.detach(|| drop(d));
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _t: Option<&Bound<'_, PyAny>>,
        _v: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) {
        self.close(py);
    }

    fn __repr__(&self) -> String {
        format!("Dashboard({})", self.url)
    }
}
