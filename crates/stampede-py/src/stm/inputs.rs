//! Getting: a task's input connections to channels, queues and registers, the channel
//! `Selector`, and `Task.attach_input`, which makes them.

use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::{GetError, InputConnection, Timestamp};

use super::conn::{connection_common, Conn};
use super::containers::{Channel, Queue, Register};
use super::support::{blocking, deadline, is_timeout, run};
use super::task::Task;
use crate::errors;
use crate::items;

type ChannelIn = InputConnection<core::Channel>;
type QueueIn = InputConnection<core::Queue>;
type RegisterIn = InputConnection<core::Register>;

/// A channel selector: an ``int`` (that exact timestamp) or a ``Selector``.
fn selector(sel: &Bound<'_, PyAny>) -> PyResult<core::Selector> {
    if let Ok(s) = sel.cast::<Selector>() {
        return Ok(match *s.get() {
            Selector::Oldest => core::Selector::Oldest,
            Selector::Newest => core::Selector::Newest,
            Selector::NewestUnseen => core::Selector::NewestUnseen,
            Selector::NextUnseen => core::Selector::NextUnseen,
        });
    }
    if sel.is_instance_of::<pyo3::types::PyInt>() {
        return sel
            .extract::<Timestamp>()
            .map(core::Selector::Exact)
            .map_err(|_| {
                errors::invalid(sel.py(), format!("timestamp {sel} is not a 64-bit integer"))
            });
    }
    match sel.extract::<Timestamp>() {
        Ok(ts) => Ok(core::Selector::Exact(ts)),
        Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a selector is an int timestamp or a stampede.Selector, not {}",
            sel.get_type()
        ))),
    }
}

/// Which item a channel get asks for (an ``int`` asks for that exact timestamp).
#[pyclass(module = "stampede", frozen, eq, eq_int, hash, skip_from_py_object)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Selector {
    /// The oldest item not consumed on this connection.
    #[pyo3(name = "OLDEST")]
    Oldest,
    /// The newest item not consumed on this connection.
    #[pyo3(name = "NEWEST")]
    Newest,
    /// The newest item this connection has never gotten; skips stale items.
    #[pyo3(name = "NEWEST_UNSEEN")]
    NewestUnseen,
    /// The oldest unconsumed item newer than this connection's last get (in-order streaming).
    #[pyo3(name = "NEXT_UNSEEN")]
    NextUnseen,
}

/// A task's connection for getting from a channel.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct ChannelInput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<ChannelIn>,
    channel: Py<Channel>,
}
connection_common!(ChannelInput);

impl ChannelInput {
    /// Takes the core connection for a correlator (not while another thread uses it).
    pub(crate) fn take(&self, py: Python<'_>) -> PyResult<InputConnection<core::Channel>> {
        self.conn.take(py)
    }

    /// Fails with ``Detached`` for a detached connection.
    pub(crate) fn check_attached(&self, py: Python<'_>) -> PyResult<()> {
        self.conn.get(py).map(drop)
    }

    /// The core connection, for a network fed from the channel (``Detached`` once detached).
    pub(crate) fn connection(&self, py: Python<'_>) -> PyResult<std::sync::Arc<ChannelIn>> {
        self.conn.get(py)
    }
}

fn item_pair(py: Python<'_>, ts: Timestamp, item: &core::Item) -> PyResult<Py<PyAny>> {
    let v = items::to_python(py, item)?;
    Ok((ts, v).into_pyobject(py)?.into_any().unbind())
}

#[pymethods]
impl ChannelInput {
    /// The channel.
    #[getter]
    fn channel(&self, py: Python<'_>) -> Py<Channel> {
        self.channel.clone_ref(py)
    }

    /// ``(ts, value)`` of the item ``selector`` names, waiting for it (at most ``timeout``
    /// seconds, then ``Timeout``). The item stays open until consumed.
    #[pyo3(signature = (selector, *, timeout = None))]
    fn get(
        &self,
        py: Python<'_>,
        selector: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Py<PyAny>> {
        let sel = self::selector(selector)?;
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        let r = match self.conn.local.then(|| c.try_get(sel)) {
            None | Some(Err(GetError::Unavailable(_))) => {
                blocking(py, deadline, |w| c.get_with(sel, w), is_timeout)?
            }
            Some(r) => r,
        };
        match r {
            Ok((ts, item)) => item_pair(py, ts, &item),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// ``(ts, value)`` without waiting; raises ``Unavailable`` (with the neighbouring
    /// timestamps) when nothing matches.
    fn try_get(&self, py: Python<'_>, selector: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let sel = self::selector(selector)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        match run(py, self.conn.local, || c.try_get(sel)) {
            Ok((ts, item)) => item_pair(py, ts, &item),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// Marks the item at ``ts`` consumed on this connection.
    fn consume(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.conn.get(py)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.consume(ts))
        }
        .map_err(|e| errors::stm_error(py, e))
    }

    /// Marks every item at or below ``ts`` consumed, including ones not put yet.
    fn consume_until(&self, py: Python<'_>, ts: Timestamp) -> PyResult<()> {
        let conn = self.conn.get(py)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.consume_until(ts))
        }
        .map_err(|e| errors::stm_error(py, e))
    }
}

/// An item gotten from a queue: its timestamp, ticket and value.
#[pyclass(module = "stampede", frozen, get_all)]
pub(super) struct QueueItem {
    /// The item's timestamp.
    ts: Timestamp,
    /// The ticket to consume it with.
    ticket: u64,
    /// The value.
    value: Py<PyAny>,
}

#[pymethods]
impl QueueItem {
    fn __repr__(&self) -> String {
        format!("QueueItem(ts={}, ticket={})", self.ts, self.ticket)
    }
}

/// A task's connection for getting from a queue.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct QueueInput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<QueueIn>,
    queue: Py<Queue>,
}
connection_common!(QueueInput);

impl QueueInput {
    /// The core connection, for a network fed from the queue (``Detached`` once detached).
    pub(crate) fn connection(&self, py: Python<'_>) -> PyResult<std::sync::Arc<QueueIn>> {
        self.conn.get(py)
    }
}

fn queue_item(py: Python<'_>, qi: core::QueueItem) -> PyResult<QueueItem> {
    Ok(QueueItem {
        ts: qi.ts,
        ticket: qi.ticket,
        value: items::to_python(py, &qi.item)?,
    })
}

#[pymethods]
impl QueueInput {
    /// The queue.
    #[getter]
    fn queue(&self, py: Python<'_>) -> Py<Queue> {
        self.queue.clone_ref(py)
    }

    /// Takes the oldest waiting item, waiting for one (at most ``timeout`` seconds). It is
    /// held by this connection until consumed; if the connection detaches first (or its
    /// address space dies), it is delivered again to another getter.
    #[pyo3(signature = (*, timeout = None))]
    fn get(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<QueueItem> {
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        let r = match self.conn.local.then(|| c.try_get()) {
            None | Some(Err(GetError::Unavailable(_))) => {
                blocking(py, deadline, |w| c.get_with(w), is_timeout)?
            }
            Some(r) => r,
        };
        match r {
            Ok(qi) => queue_item(py, qi),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// Takes the oldest waiting item without waiting; raises ``Unavailable`` if none.
    fn try_get(&self, py: Python<'_>) -> PyResult<QueueItem> {
        let conn = self.conn.get(py)?;
        let c = &*conn;
        match run(py, self.conn.local, || c.try_get()) {
            Ok(qi) => queue_item(py, qi),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }

    /// Consumes the item with ``ticket``.
    fn consume(&self, py: Python<'_>, ticket: u64) -> PyResult<()> {
        let conn = self.conn.get(py)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.consume(ticket))
        }
        .map_err(|e| errors::stm_error(py, e))
    }
}

/// A task's connection for reading a register.
#[pyclass(module = "stampede", frozen)]
pub(super) struct RegisterInput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<RegisterIn>,
    register: Py<Register>,
}
connection_common!(RegisterInput);

#[pymethods]
impl RegisterInput {
    /// The register.
    #[getter]
    fn register(&self, py: Python<'_>) -> Py<Register> {
        self.register.clone_ref(py)
    }
    /// ``(sequence, value)`` of a write newer than this connection's last read, waiting for
    /// one (at most ``timeout`` seconds).
    #[pyo3(signature = (*, timeout = None))]
    fn read(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<(u64, Py<PyAny>)> {
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get(py)?;
        let c = &*conn;
        let r = match self.conn.local.then(|| c.try_read()) {
            None | Some(Err(GetError::Unavailable(_))) => {
                blocking(py, deadline, |w| c.read_with(w), is_timeout)?
            }
            Some(r) => r,
        };
        match r {
            Ok((seq, item)) => Ok((seq, items::to_python(py, &item)?)),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }
    /// ``(sequence, value)`` of a newer write without waiting; ``Unavailable`` if none.
    fn try_read(&self, py: Python<'_>) -> PyResult<(u64, Py<PyAny>)> {
        let conn = self.conn.get(py)?;
        let c = &*conn;
        match run(py, self.conn.local, || c.try_read()) {
            Ok((seq, item)) => Ok((seq, items::to_python(py, &item)?)),
            Err(e) => Err(errors::get_error(py, e)),
        }
    }
}

#[pymethods]
impl Task {
    /// Attaches for getting: a ``ChannelInput``, ``QueueInput`` or ``RegisterInput``.
    fn attach_input(slf: &Bound<'_, Self>, container: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let t = me.get(py)?;
        let task = || slf.clone().unbind();
        let stm = |e| errors::stm_error(py, e);
        if let Ok(c) = container.cast::<Channel>() {
            let link = Conn::new(py, &t, &c.get().ch, core::Task::attach_input).map_err(stm)?;
            return Ok(Py::new(
                py,
                ChannelInput {
                    conn: link,
                    task: task(),
                    channel: c.clone().unbind(),
                },
            )?
            .into_any());
        }
        if let Ok(q) = container.cast::<Queue>() {
            let link = Conn::new(py, &t, &q.get().q, core::Task::attach_input).map_err(stm)?;
            return Ok(Py::new(
                py,
                QueueInput {
                    conn: link,
                    task: task(),
                    queue: q.clone().unbind(),
                },
            )?
            .into_any());
        }
        if let Ok(r) = container.cast::<Register>() {
            let link = Conn::new(py, &t, &r.get().reg, core::Task::attach_input).map_err(stm)?;
            return Ok(Py::new(
                py,
                RegisterInput {
                    conn: link,
                    task: task(),
                    register: r.clone().unbind(),
                },
            )?
            .into_any());
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "attach_input needs a Channel, Queue or Register, not {}",
            container.get_type()
        )))
    }
}
