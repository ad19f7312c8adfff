//! `stampede.tune`: the auto-calibration toolkit from Python: specify, profile, fit, select,
//! store.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use stampede_tune::{
    fit, sample_points, Fingerprint, Model, ModelFile, ModelSpec, Profiler, Progress, Sample,
    Selector, StalePolicy, TermSpec, TuneError,
};

use crate::errors::{self, Exc};

fn raise(py: Python<'_>, e: TuneError) -> PyErr {
    match e {
        TuneError::Stale { ref differences } => {
            errors::raise(py, Exc::TuneError, (e.to_string(), differences.clone()))
        }
        other => errors::raise(
            py,
            Exc::TuneError,
            (other.to_string(), Vec::<String>::new()),
        ),
    }
}

/// A model to calibrate: an implementation's name, its variables with their ranges, and
/// candidate terms such as ``"1"``, ``"n"``, ``"n*log2(n)"``, ``"n^2"``.
#[pyclass(module = "stampede.tune", name = "ModelSpec", frozen)]
pub(crate) struct PyModelSpec {
    spec: ModelSpec,
}

#[pymethods]
impl PyModelSpec {
    /// ``variables``: ``(name, min, max)`` or ``(name, min, max, integer)`` each.
    #[new]
    fn new(
        py: Python<'_>,
        name: &str,
        variables: Vec<Bound<'_, PyAny>>,
        terms: Vec<String>,
    ) -> PyResult<Self> {
        let mut b = ModelSpec::new(name);
        for v in variables {
            let (n, lo, hi, int): (String, f64, f64, bool) =
                match v.extract::<(String, f64, f64, bool)>() {
                    Ok(t) => t,
                    Err(_) => {
                        let (n, lo, hi): (String, f64, f64) = v.extract().map_err(|_| {
                            errors::invalid(
                                py,
                                "a variable is (name, min, max) or (name, min, max, integer)",
                            )
                        })?;
                        (n, lo, hi, false)
                    }
                };
            b = b.variable(&n, lo, hi, int);
        }
        for t in terms {
            b = b.term(TermSpec::parse(&t).map_err(|e| raise(py, e))?);
        }
        Ok(PyModelSpec {
            spec: b.build().map_err(|e| raise(py, e))?,
        })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    /// The candidate terms, as written out.
    #[getter]
    fn terms(&self) -> Vec<String> {
        self.spec.show_terms()
    }

    /// Whether ``x`` lies in every variable's range.
    fn valid(&self, x: Vec<f64>) -> bool {
        self.spec.valid(&x)
    }

    /// ``count`` points to sample: the corners and edges of the ranges first, then random
    /// points (log-uniform over wide ranges); deterministic in ``seed``.
    #[pyo3(signature = (count, seed=0))]
    fn sample_points(&self, count: usize, seed: u64) -> Vec<Vec<f64>> {
        sample_points(&self.spec, count, seed)
    }

    /// Times ``task(x, state)`` at each point, where ``state = setup(x)`` (untimed) and
    /// ``cleanup(x, state)`` runs after (untimed); one warm-up run, then the median of
    /// ``repeats`` runs per point. ``progress(done, total, elapsed_s, eta_s)`` is called after
    /// each point. Returns ``[(x, seconds), ...]``.
    #[pyo3(signature = (points, task, setup=None, cleanup=None, warmup=1, repeats=3, progress=None))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn profile(
        &self,
        py: Python<'_>,
        points: Vec<Vec<f64>>,
        task: Py<PyAny>,
        setup: Option<Py<PyAny>>,
        cleanup: Option<Py<PyAny>>,
        warmup: usize,
        repeats: usize,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Vec<(Vec<f64>, f64)>> {
        // The first Python exception stops the timing of later runs and is raised at the end.
        let failure: std::cell::RefCell<Option<PyErr>> = std::cell::RefCell::new(None);
        let failed = || failure.borrow().is_some();
        let keep = |e: PyErr| {
            failure.borrow_mut().get_or_insert(e);
        };
        let samples = Profiler { warmup, repeats }.profile(
            &points,
            |x| match &setup {
                Some(f) if !failed() => f.call1(py, (x.to_vec(),)).unwrap_or_else(|e| {
                    keep(e);
                    py.None()
                }),
                _ => py.None(),
            },
            |x, state| {
                if !failed() {
                    if let Err(e) = task.call1(py, (x.to_vec(), state.clone_ref(py))) {
                        keep(e);
                    }
                }
            },
            |x, state| {
                if let (Some(f), false) = (&cleanup, failed()) {
                    if let Err(e) = f.call1(py, (x.to_vec(), state)) {
                        keep(e);
                    }
                }
            },
            |p: Progress| {
                if let (Some(f), false) = (&progress, failed()) {
                    let args = (
                        p.done,
                        p.total,
                        p.elapsed.as_secs_f64(),
                        p.eta.as_secs_f64(),
                    );
                    if let Err(e) = f.call1(py, args) {
                        keep(e);
                    }
                }
            },
        );
        match failure.into_inner() {
            Some(e) => Err(e),
            None => Ok(samples.into_iter().map(|s| (s.x, s.y)).collect()),
        }
    }

    /// Fits the model to ``[(x, y), ...]`` (y > 0), weighting by 1/y², dropping the terms
    /// whose confidence interval contains zero.
    #[pyo3(signature = (samples, confidence=0.95))]
    fn fit(
        &self,
        py: Python<'_>,
        samples: Vec<(Vec<f64>, f64)>,
        confidence: f64,
    ) -> PyResult<PyModel> {
        let samples: Vec<Sample> = samples.into_iter().map(|(x, y)| Sample { x, y }).collect();
        fit(&self.spec, &samples, confidence)
            .map(|model| PyModel { model })
            .map_err(|e| raise(py, e))
    }

    fn __repr__(&self) -> String {
        format!("ModelSpec({})", self.spec)
    }
}

/// A calibrated model of one implementation.
#[pyclass(module = "stampede.tune", name = "Model", frozen, from_py_object)]
#[derive(Clone)]
pub(crate) struct PyModel {
    model: Model,
}

#[pymethods]
impl PyModel {
    #[getter]
    fn name(&self) -> &str {
        self.model.name()
    }

    /// ``name = c0 + c1·n + ...``
    #[getter]
    fn formula(&self) -> String {
        self.model.formula()
    }

    /// The mean relative error on the samples it was fitted to (1.05: 5% off on average).
    #[getter]
    fn mre(&self) -> f64 {
        self.model.mre
    }

    /// The kept terms, with their coefficients and confidence intervals.
    #[getter]
    fn coefficients(&self) -> Vec<(String, f64, (f64, f64))> {
        let spec = &self.model.spec;
        self.model
            .kept
            .iter()
            .zip(&self.model.coefficients)
            .zip(&self.model.intervals)
            .map(|((t, c), i)| (spec.terms[*t].show(&spec.variables), *c, *i))
            .collect()
    }

    /// The terms the fit dropped.
    #[getter]
    fn dropped(&self) -> Vec<String> {
        let spec = &self.model.spec;
        self.model
            .dropped
            .iter()
            .map(|t| spec.terms[*t].show(&spec.variables))
            .collect()
    }

    /// The predicted cost at ``x``: ``inf`` outside the calibrated ranges.
    fn predict(&self, x: Vec<f64>) -> f64 {
        self.model.predict(&x)
    }

    /// The mean relative error on other samples, and the ``worst`` of them as
    /// ``(x, measured, predicted, relative error)``.
    #[pyo3(signature = (samples, worst=5))]
    #[allow(clippy::type_complexity)] // a Python tuple
    fn verify(
        &self,
        samples: Vec<(Vec<f64>, f64)>,
        worst: usize,
    ) -> (f64, Vec<(Vec<f64>, f64, f64, f64)>) {
        let samples: Vec<Sample> = samples.into_iter().map(|(x, y)| Sample { x, y }).collect();
        let v = self.model.verify(&samples, worst);
        (
            v.mre,
            v.worst
                .into_iter()
                .map(|(s, p, e)| (s.x, s.y, p, e))
                .collect(),
        )
    }

    fn __repr__(&self) -> String {
        format!("Model({}, mre={:.4})", self.model.formula(), self.model.mre)
    }
}

/// Picks the implementation whose model predicts the lowest cost.
#[pyclass(module = "stampede.tune", name = "ModelSelector", frozen)]
pub(crate) struct PySelector {
    selector: Selector,
}

#[pymethods]
impl PySelector {
    #[new]
    fn new(models: Vec<PyModel>) -> Self {
        PySelector {
            selector: Selector::new(models.into_iter().map(|m| m.model).collect()),
        }
    }

    /// The index of the model predicting the lowest cost at ``x``; ``None`` when ``x`` is
    /// outside every model's ranges.
    fn best(&self, x: Vec<f64>) -> Option<usize> {
        self.selector.best(&x)
    }

    /// ``(index, name, predictions)`` at ``x``, or ``None``.
    fn choose(&self, x: Vec<f64>) -> Option<(usize, String, Vec<f64>)> {
        self.selector
            .choose(&x)
            .map(|c| (c.index, c.name, c.predicted))
    }
}

/// This machine's fingerprint for ``deployment``: CPU model, cores, memory, build.
#[pyfunction]
fn fingerprint<'py>(py: Python<'py>, deployment: &str) -> PyResult<Bound<'py, PyDict>> {
    let f = Fingerprint::here(deployment);
    let d = PyDict::new(py);
    d.set_item("cpu_model", f.cpu_model)?;
    d.set_item("cores", f.cores)?;
    d.set_item("memory_bytes", f.memory_bytes)?;
    d.set_item("build", f.build)?;
    d.set_item("deployment", f.deployment)?;
    Ok(d)
}

/// Saves models calibrated on this machine for ``deployment`` to ``path`` (JSON).
#[pyfunction]
fn save_models(
    py: Python<'_>,
    path: PathBuf,
    models: Vec<PyModel>,
    deployment: &str,
) -> PyResult<()> {
    let file = ModelFile {
        fingerprint: Fingerprint::here(deployment),
        models: models.into_iter().map(|m| m.model).collect(),
    };
    file.save(&path).map_err(|e| raise(py, e))
}

/// Loads models saved for ``deployment`` on this machine; a file calibrated elsewhere raises
/// :class:`TuneError` (``policy="refuse"``) or comes back with the differences as warnings
/// (``policy="warn"``). Returns ``(models, warnings)``.
#[pyfunction]
#[pyo3(signature = (path, deployment, policy="refuse"))]
fn load_models(
    py: Python<'_>,
    path: PathBuf,
    deployment: &str,
    policy: &str,
) -> PyResult<(Vec<PyModel>, Vec<String>)> {
    let policy = match policy {
        "refuse" => StalePolicy::Refuse,
        "warn" => StalePolicy::Warn,
        other => {
            return Err(errors::invalid(
                py,
                format!("policy is \"refuse\" or \"warn\", not {other:?}"),
            ))
        }
    };
    let (file, warnings) =
        ModelFile::load(&path, &Fingerprint::here(deployment), policy).map_err(|e| raise(py, e))?;
    Ok((
        file.models
            .into_iter()
            .map(|model| PyModel { model })
            .collect(),
        warnings,
    ))
}

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyModelSpec>()?;
    m.add_class::<PyModel>()?;
    m.add_class::<PySelector>()?;
    m.add_function(wrap_pyfunction!(fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(save_models, m)?)?;
    m.add_function(wrap_pyfunction!(load_models, m)?)?;
    Ok(())
}
