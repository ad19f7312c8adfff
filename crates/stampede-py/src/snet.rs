//! `stampede.snet`: S-Net networks whose boxes are Python callables, run on the coordination
//! layer's executor.
//!
//! Records are dicts: a field is a plain key (`"img"`), a tag is written as in the language
//! (`"<k>"`, an int), a binding tag `"<#b>"`. Fields hold Python objects by reference: a box
//! gets the very object the environment or the previous box gave.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMapping, PyTuple};
use stampede_coord::snet::{
    BoxCall, BoxError, Diagnostics, Net, Network, Policy, Record, Run, RunStats, Runner, Value,
};
use stampede_coord::{Executor, SnetError};
use stampede_core::Item;

use crate::cnc::graph::{default_executor, PyExecutor};
use crate::errors::{self, Exc};
use crate::items::{to_item, to_python, PICKLE};
use crate::stm::{
    drop_detached, lock, ChannelInput, ChannelOutput, QueueInput, QueueOutput, FINALIZING,
};

/// A Python object carried as a field, unchanged; pickled only if it must leave the process.
struct PyField(Py<PyAny>);

fn pickle(v: &(dyn std::any::Any + Send + Sync)) -> Bytes {
    let Some(PyField(obj)) = v.downcast_ref::<PyField>() else {
        return Bytes::new();
    };
    Python::attach(|py| {
        py.import("pickle")
            .and_then(|m| m.getattr("dumps"))
            .and_then(|dumps| dumps.call1((obj.bind(py), -1)))
            .and_then(|b| Ok(Bytes::copy_from_slice(b.cast::<PyBytes>()?.as_bytes())))
            .unwrap_or_default()
    })
}

fn field_item(obj: &Bound<'_, PyAny>) -> Item {
    Item::with_hook(
        PICKLE,
        Box::new(PyField(obj.clone().unbind())),
        Arc::new(pickle),
    )
}

fn field_py(py: Python<'_>, item: &Item) -> PyResult<Py<PyAny>> {
    match item.native().and_then(|n| n.downcast_ref::<PyField>()) {
        Some(PyField(obj)) => Ok(obj.clone_ref(py)),
        None => to_python(py, item),
    }
}

/// A dict's entries as a record: `"<t>"` keys are tags, `"<#t>"` binding tags.
fn to_record(py: Python<'_>, d: &Bound<'_, PyDict>) -> PyResult<Record> {
    let mut r = Record::new();
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| errors::invalid(py, "record keys are str"))?;
        let tag_value = |name: &str| -> PyResult<i64> {
            v.extract::<i64>().map_err(|_| {
                errors::invalid(py, format!("tag {name} holds {}, not an int", v.get_type()))
            })
        };
        r = match key.strip_prefix('<').and_then(|k| k.strip_suffix('>')) {
            Some(inner) => match inner.strip_prefix('#') {
                Some(b) => r.binding_tag(b, tag_value(&key)?),
                None => r.tag(inner, tag_value(&key)?),
            },
            None => r.field(&key, field_item(&v)),
        };
    }
    Ok(r)
}

fn to_dict<'py>(py: Python<'py>, r: &Record) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for name in r.field_names() {
        let item = r.get_field(name).expect("named field");
        d.set_item(name, field_py(py, item)?)?;
    }
    for (name, v) in r.tags() {
        d.set_item(format!("<{name}>"), v)?;
    }
    Ok(d)
}

/// The Python exception of a network's failure.
fn raise(py: Python<'_>, e: SnetError, cause: Option<Py<PyAny>>) -> PyErr {
    let msg = e.to_string();
    let err = match e {
        SnetError::Check(d) => errors::raise(py, Exc::CheckFailed, (msg, diagnostics(py, &d).ok())),
        SnetError::BoxFailed {
            name,
            record,
            message,
        }
        | SnetError::BrokeSignature {
            name,
            record,
            message,
        } => errors::raise(py, Exc::BoxFailed, (msg, name, record, message)),
        SnetError::Rejected { record, accepts } => {
            let rec = to_dict(py, &record).map(|d| d.unbind().into_any()).ok();
            errors::raise(py, Exc::RecordRejected, (msg, rec, accepts))
        }
        SnetError::Closed => errors::raise(py, Exc::Closed, (msg,)),
        SnetError::Timeout => errors::raise(py, Exc::Timeout, (msg,)),
        _ => errors::raise(py, Exc::NetworkError, (msg,)),
    };
    if let Some(c) = cause {
        err.set_cause(py, Some(PyErr::from_value(c.into_bound(py))));
    }
    err
}

/// Each diagnostic as a dict: code, message, line, column, label.
fn diagnostics(py: Python<'_>, d: &Diagnostics) -> PyResult<Py<PyAny>> {
    let list = pyo3::types::PyList::empty(py);
    for x in d.list() {
        let (line, col) = d.line_col(x.span.start);
        let item = PyDict::new(py);
        item.set_item("code", x.code)?;
        item.set_item("message", &x.message)?;
        item.set_item("line", line)?;
        item.set_item("column", col)?;
        item.set_item("label", &x.label)?;
        list.append(item)?;
    }
    Ok(list.into_any().unbind())
}

/// A checked S-Net network: parsed from the network language or built with :class:`Net`.
#[pyclass(module = "stampede.snet", name = "Network", frozen)]
pub(crate) struct PyNetwork {
    net: Network,
}

#[pymethods]
impl PyNetwork {
    /// Parses and checks a program; raises :class:`CheckFailed` with compiler-style
    /// diagnostics (``file:line:col``, the line, a caret) when it does not check.
    #[staticmethod]
    #[pyo3(signature = (source, file="<string>"))]
    fn parse(py: Python<'_>, source: &str, file: &str) -> PyResult<Self> {
        Network::parse(file, source)
            .map(|net| PyNetwork { net })
            .map_err(|d| raise(py, SnetError::Check(d), None))
    }

    /// Reads, parses and checks a ``.snet`` file.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let source = std::fs::read_to_string(&path)
            .map_err(|e| errors::invalid(py, format!("cannot read {}: {e}", path.display())))?;
        Self::parse(py, &source, &path.display().to_string())
    }

    #[getter]
    fn name(&self) -> &str {
        self.net.name()
    }

    /// The program text (for a built network, the text the builder printed).
    #[getter]
    fn source(&self) -> &str {
        self.net.source()
    }

    /// The record types the network accepts, e.g. ``["{img, name}"]``.
    #[getter]
    fn input_type(&self) -> Vec<String> {
        self.net.input_type()
    }

    /// The record types it may emit.
    #[getter]
    fn output_type(&self) -> Vec<String> {
        self.net.output_type()
    }

    /// Each box's name and signature, in declaration order.
    #[getter]
    fn boxes(&self) -> Vec<(String, String)> {
        self.net
            .box_names()
            .into_iter()
            .map(|n| (n.to_owned(), self.net.box_signature(n).unwrap_or_default()))
            .collect()
    }

    /// The network as Graphviz DOT text, inferred record types on the edges.
    fn dot(&self) -> String {
        self.net.dot()
    }

    /// Starts a run: ``boxes`` maps each box name to a callable ``f(ctx, *inputs)`` that
    /// emits with ``ctx.emit(variant, *values)``. ``policy`` is ``"furthest-advanced"`` or
    /// ``"most-queued"``; ``capacity`` bounds the records queued at boxes (``send`` waits);
    /// ``box_concurrency`` (default: the workers) calls of one box may overlap, their outputs
    /// kept in input order unless ``ordered=False``.
    #[pyo3(signature = (boxes, executor=None, policy="furthest-advanced", capacity=1024, box_concurrency=None, ordered=true))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments
    fn run(
        &self,
        py: Python<'_>,
        boxes: &Bound<'_, PyMapping>,
        executor: Option<PyRef<'_, PyExecutor>>,
        policy: &str,
        capacity: usize,
        box_concurrency: Option<usize>,
        ordered: bool,
    ) -> PyResult<PyNetworkRun> {
        let exec: Executor =
            executor.map_or_else(|| default_executor().clone(), |e| e.exec().clone());
        let policy = match policy {
            "furthest-advanced" => Policy::FurthestAdvanced,
            "most-queued" => Policy::MostQueued,
            other => {
                return Err(errors::invalid(
                    py,
                    format!("policy is \"furthest-advanced\" or \"most-queued\", not {other:?}"),
                ))
            }
        };
        let raised: Arc<Mutex<Option<Py<PyAny>>>> = Arc::new(Mutex::new(None));
        let mut runner = Runner::new(&self.net, &exec)
            .policy(policy)
            .capacity(capacity);
        if let Some(k) = box_concurrency {
            runner = runner.box_concurrency(k);
        }
        if !ordered {
            runner = runner.unordered_boxes();
        }
        for pair in boxes.items()?.iter() {
            let (name, f): (String, Bound<'_, PyAny>) = pair.extract()?;
            if !f.is_callable() {
                return Err(errors::invalid(
                    py,
                    format!("the function of box {name} is not callable"),
                ));
            }
            runner = runner.bind(&name, python_box(f.unbind(), raised.clone()));
        }
        let run = runner.start().map_err(|e| raise(py, e, None))?;
        Ok(PyNetworkRun {
            run: Some(run),
            raised,
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "Network({:?}, input={}, output={})",
            self.net.name(),
            self.net.input_type().join(" | "),
            self.net.output_type().join(" | ")
        )
    }
}

/// A box function that calls a Python callable with the context and the input values.
fn python_box(
    func: Py<PyAny>,
    raised: Arc<Mutex<Option<Py<PyAny>>>>,
) -> impl Fn(&mut BoxCall<'_>) -> Result<(), BoxError> + Send + Sync + 'static {
    move |call| {
        if FINALIZING.load(Ordering::Acquire) {
            return Err(BoxError::new("the Python interpreter is exiting"));
        }
        Python::attach(|py| {
            let ctx = Bound::new(
                py,
                PyBoxContext {
                    name: call.name().to_owned(),
                    emitted: Mutex::new(Vec::new()),
                },
            )
            .map_err(|e| BoxError::new(errors::describe(py, &e)))?;
            let mut args: Vec<Py<PyAny>> = vec![ctx.clone().into_any().unbind()];
            for v in call.inputs() {
                args.push(match v {
                    Value::Field(item) => {
                        field_py(py, item).map_err(|e| BoxError::new(errors::describe(py, &e)))?
                    }
                    Value::Tag(t) => t
                        .into_pyobject(py)
                        .expect("ints convert")
                        .into_any()
                        .unbind(),
                });
            }
            let args =
                PyTuple::new(py, args).map_err(|e| BoxError::new(errors::describe(py, &e)))?;
            if let Err(e) = func.bind(py).call1(args) {
                let message = errors::describe(py, &e);
                let mut first = lock(&raised);
                if first.is_none() {
                    *first = Some(e.into_value(py).into_any());
                }
                return Err(BoxError::new(message));
            }
            let emitted = std::mem::take(&mut *lock(&ctx.get().emitted));
            for (variant, values) in emitted {
                let labels = call.output_labels(variant).ok_or_else(|| {
                    BoxError::new(format!("box {} has no output type {variant}", call.name()))
                })?;
                if labels.len() != values.len() {
                    return Err(BoxError::new(format!(
                        "output type {variant} of box {} has {} label(s); {} value(s) were emitted",
                        call.name(),
                        labels.len(),
                        values.len()
                    )));
                }
                let mut out = Vec::with_capacity(values.len());
                for (label, v) in labels.iter().zip(values) {
                    let v = v.bind(py);
                    out.push(if label.starts_with('<') {
                        Value::Tag(v.extract::<i64>().map_err(|_| {
                            BoxError::new(format!(
                                "{label} of box {} got {}, not an int",
                                call.name(),
                                v.get_type()
                            ))
                        })?)
                    } else {
                        Value::Field(field_item(v))
                    });
                }
                call.emit(variant, out)?;
            }
            Ok(())
        })
    }
}

/// What a running box emits through: ``ctx.emit(variant, *values)``, values in the order the
/// output type writes its labels (``variant`` 0 is the first type after ``->``).
#[pyclass(module = "stampede.snet", name = "BoxContext", frozen)]
pub(crate) struct PyBoxContext {
    name: String,
    emitted: Mutex<Vec<(usize, Vec<Py<PyAny>>)>>,
}

#[pymethods]
impl PyBoxContext {
    #[pyo3(signature = (variant, *values))]
    fn emit(&self, variant: usize, values: &Bound<'_, PyTuple>) {
        let values = values.iter().map(Bound::unbind).collect();
        lock(&self.emitted).push((variant, values));
    }

    /// The box's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }
}

/// A running network: send records (dicts) in, take records out.
#[pyclass(module = "stampede.snet", name = "NetworkRun", frozen)]
pub(crate) struct PyNetworkRun {
    run: Option<Run>,
    raised: Arc<Mutex<Option<Py<PyAny>>>>,
}

impl Drop for PyNetworkRun {
    fn drop(&mut self) {
        drop_detached(self.run.take());
    }
}

impl PyNetworkRun {
    fn run(&self) -> &Run {
        self.run.as_ref().expect("held until dropped")
    }

    fn failure(&self, py: Python<'_>, e: SnetError) -> PyErr {
        let cause = matches!(e, SnetError::BoxFailed { .. })
            .then(|| lock(&self.raised).as_ref().map(|c| c.clone_ref(py)))
            .flatten();
        raise(py, e, cause)
    }
}

fn timeout_of(timeout: Option<f64>) -> Option<Duration> {
    timeout.map(|t| Duration::from_secs_f64(t.max(0.0)))
}

#[pymethods]
impl PyNetworkRun {
    /// Sends a record in; waits while the network holds its capacity of records. A record
    /// of a type the network does not accept raises :class:`RecordRejected`.
    fn send(&self, py: Python<'_>, record: &Bound<'_, PyDict>) -> PyResult<()> {
        let r = to_record(py, record)?;
        let run = self.run();
        py.detach(|| run.send(r)).map_err(|e| self.failure(py, e))
    }

    /// The next record out (a dict), waiting for it; ``None`` once the run is closed, quiet
    /// and drained. Raises :class:`Timeout` after ``timeout`` seconds.
    #[pyo3(signature = (timeout=None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyDict>>> {
        let run = self.run();
        let got = match timeout_of(timeout) {
            Some(t) => py
                .detach(|| run.recv_timeout(t))
                .map_err(|e| self.failure(py, e))?,
            None => py.detach(|| run.recv()),
        };
        got.map(|r| to_dict(py, &r).map(Bound::unbind)).transpose()
    }

    /// The records out so far.
    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<Py<PyDict>>> {
        self.run()
            .outputs()
            .iter()
            .map(|r| to_dict(py, r).map(Bound::unbind))
            .collect()
    }

    /// No more records will be sent.
    fn close(&self) {
        self.run().close();
    }

    /// Closes and waits until the network is quiet; raises its first failure
    /// (:class:`BoxFailed` with the box's exception as ``__cause__``, ...).
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let run = self.run();
        match timeout_of(timeout) {
            Some(t) => py.detach(|| run.wait_timeout(t)),
            None => py.detach(|| run.wait()),
        }
        .map_err(|e| self.failure(py, e))
    }

    /// Closes, waits, and returns the records out not yet taken.
    #[pyo3(signature = (timeout=None))]
    fn finish(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Vec<Py<PyDict>>> {
        self.wait(py, timeout)?;
        self.outputs(py)
    }

    /// Sends every item of a channel or queue input (a ``ChannelInput`` or ``QueueInput``,
    /// local or another address space's), in order, as the record ``{field: value, "<tag>":
    /// timestamp}``, consuming each once the network has it; returns how many once the
    /// container is closed and drained. The run stays open.
    #[pyo3(signature = (input, field, tag="ts"))]
    fn feed(
        &self,
        py: Python<'_>,
        input: &Bound<'_, PyAny>,
        field: &str,
        tag: &str,
    ) -> PyResult<usize> {
        let run = self.run();
        let sent = if let Ok(ch) = input.cast::<ChannelInput>() {
            let conn = ch.get().connection(py)?;
            py.detach(|| run.feed_channel(&conn, field, tag))
        } else if let Ok(q) = input.cast::<QueueInput>() {
            let conn = q.get().connection(py)?;
            py.detach(|| run.feed_queue(&conn, field, tag))
        } else {
            return Err(errors::invalid(
                py,
                format!(
                    "feed takes a ChannelInput or QueueInput, not {}",
                    input.get_type()
                ),
            ));
        };
        sent.map_err(|e| self.failure(py, e))
    }

    /// Puts every record the network emits into a channel or queue output at the timestamp
    /// its ``"<tag>"`` holds, its ``field`` as the value (stored as a put from Python would
    /// store it), until the run is closed and quiet; returns how many.
    #[pyo3(signature = (output, field, tag="ts"))]
    fn drain(
        &self,
        py: Python<'_>,
        output: &Bound<'_, PyAny>,
        field: &str,
        tag: &str,
    ) -> PyResult<usize> {
        enum Out {
            Channel(std::sync::Arc<stampede_core::OutputConnection<stampede_core::Channel>>),
            Queue(std::sync::Arc<stampede_core::OutputConnection<stampede_core::Queue>>),
        }
        let out = if let Ok(ch) = output.cast::<ChannelOutput>() {
            Out::Channel(ch.get().connection(py)?)
        } else if let Ok(q) = output.cast::<QueueOutput>() {
            Out::Queue(q.get().connection(py)?)
        } else {
            return Err(errors::invalid(
                py,
                format!(
                    "drain takes a ChannelOutput or QueueOutput, not {}",
                    output.get_type()
                ),
            ));
        };
        let run = self.run();
        let mut put = 0;
        while let Some(r) = py.detach(|| run.recv()) {
            let (Some(item), Some(ts)) = (r.get_field(field), r.get_tag(tag)) else {
                return Err(self.failure(
                    py,
                    SnetError::Stream(format!(
                        "the network emitted {r}, which lacks field `{field}` or tag `<{tag}>`"
                    )),
                ));
            };
            // A Python object a box emitted is stored as Python's own put would store it.
            let item = match item.native().and_then(|n| n.downcast_ref::<PyField>()) {
                Some(PyField(obj)) => to_item(py, obj.bind(py))?,
                None => item.clone(),
            };
            let done = match &out {
                Out::Channel(c) => py.detach(|| c.put(ts, item).map(drop)),
                Out::Queue(q) => py.detach(|| q.put(ts, item).map(drop)),
            };
            done.map_err(|e| {
                self.failure(
                    py,
                    SnetError::Stream(format!("putting the network's output: {e}")),
                )
            })?;
            put += 1;
        }
        Ok(put)
    }

    /// Every failure so far, as messages.
    #[getter]
    fn errors(&self) -> Vec<String> {
        self.run()
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// Counts of what the run did (sent, emitted, box calls and failures, filtered,
    /// synchronised, held in synchrocells and at ordered gates, queued, max queued, errors,
    /// box instances).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let RunStats {
            sent,
            emitted,
            box_calls,
            box_failures,
            filtered,
            synchronised,
            held_in_synchrocells,
            held_at_gates,
            queued,
            max_queued,
            errors,
            box_instances,
            ..
        } = self.run().stats();
        let d = PyDict::new(py);
        for (k, v) in [
            ("sent", sent),
            ("emitted", emitted),
            ("box_calls", box_calls),
            ("box_failures", box_failures),
            ("filtered", filtered),
            ("synchronised", synchronised),
            ("held_in_synchrocells", held_in_synchrocells),
            ("held_at_gates", held_at_gates),
            ("queued", queued),
            ("max_queued", max_queued),
            ("errors", errors),
            ("box_instances", box_instances),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }
}

/// The embedded builder: the same networks as the language, composed with methods.
#[pyclass(module = "stampede.snet", name = "Net", frozen, skip_from_py_object)]
#[derive(Clone)]
pub(crate) struct PyNet {
    net: Net,
}

#[pymethods]
impl PyNet {
    /// A box with its signature, ``"(a, <t>) -> (c) | (d)"``.
    #[staticmethod]
    #[pyo3(name = "box")]
    fn boxed(name: &str, signature: &str) -> Self {
        PyNet {
            net: Net::boxed(name, signature),
        }
    }

    /// A filter written as in the language, ``"[{a} -> {b = a}]"``.
    #[staticmethod]
    fn filter(text: &str) -> Self {
        PyNet {
            net: Net::filter(text),
        }
    }

    /// The identity ``[]``.
    #[staticmethod]
    fn identity() -> Self {
        PyNet {
            net: Net::identity(),
        }
    }

    /// A synchrocell over patterns such as ``"{a}"``, ``"{b, <t>}"``.
    #[staticmethod]
    #[pyo3(signature = (*patterns))]
    fn sync(patterns: Vec<String>) -> Self {
        let refs: Vec<&str> = patterns.iter().map(String::as_str).collect();
        PyNet {
            net: Net::sync(&refs),
        }
    }

    /// A named network (with an optional signature ``"{a} -> {b}"``).
    #[staticmethod]
    #[pyo3(signature = (name, body, signature=None))]
    fn named(name: &str, body: &PyNet, signature: Option<&str>) -> Self {
        PyNet {
            net: Net::named(name, signature, body.net.clone()),
        }
    }

    /// ``self .. next``
    fn then(&self, next: &PyNet) -> Self {
        PyNet {
            net: self.net.clone().then(next.net.clone()),
        }
    }

    /// ``self | other``
    fn __or__(&self, other: &PyNet) -> Self {
        PyNet {
            net: self.net.clone().or(other.net.clone()),
        }
    }

    /// ``self || other``: a choice that keeps input order.
    fn ordered_or(&self, other: &PyNet) -> Self {
        PyNet {
            net: self.net.clone().or_ordered(other.net.clone()),
        }
    }

    /// ``self * exits`` (``ordered=True``: ``**``).
    #[pyo3(signature = (exits, ordered=false))]
    fn star(&self, exits: &str, ordered: bool) -> Self {
        let n = self.net.clone();
        PyNet {
            net: if ordered {
                n.star_ordered(exits)
            } else {
                n.star(exits)
            },
        }
    }

    /// ``self ! <tag>`` (``ordered=True``: ``!!``).
    #[pyo3(signature = (tag, ordered=false))]
    fn split(&self, tag: &str, ordered: bool) -> Self {
        let n = self.net.clone();
        PyNet {
            net: if ordered {
                n.split_ordered(tag)
            } else {
                n.split(tag)
            },
        }
    }

    /// ``self \ patterns``
    fn feedback(&self, patterns: &str) -> Self {
        PyNet {
            net: self.net.clone().feedback(patterns),
        }
    }

    /// The program text of this network as top-level network ``name``.
    #[pyo3(signature = (name, signature=None))]
    fn source(&self, name: &str, signature: Option<&str>) -> String {
        self.net.to_source(name, signature)
    }

    /// Checks it as top-level network ``name``; raises :class:`CheckFailed`.
    #[pyo3(signature = (name, signature=None))]
    fn check(&self, py: Python<'_>, name: &str, signature: Option<&str>) -> PyResult<PyNetwork> {
        self.net
            .check(name, signature)
            .map(|net| PyNetwork { net })
            .map_err(|d| raise(py, SnetError::Check(d), None))
    }

    fn __repr__(&self) -> String {
        format!("Net({:?})", self.net.to_source("net", None))
    }
}

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNetwork>()?;
    m.add_class::<PyNetworkRun>()?;
    m.add_class::<PyBoxContext>()?;
    m.add_class::<PyNet>()?;
    Ok(())
}
