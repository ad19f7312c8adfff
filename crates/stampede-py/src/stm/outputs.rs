//! Putting: a task's output connections to channels, queues and registers, and
//! `Task.attach_output`, which makes them.

use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::{OutputConnection, PutOptions, Timestamp, Wait};

use super::conn::{connection_common, Conn};
use super::containers::{Channel, Queue, Register};
use super::support::{self, deadline, run, whole_wait, Signals};
use super::task::Task;
use crate::errors::{self, Exc};
use crate::items;

type ChannelOut = OutputConnection<core::Channel>;
type QueueOut = OutputConnection<core::Queue>;
type RegisterOut = OutputConnection<core::Register>;

/// A task's connection for putting into a channel.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct ChannelOutput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<ChannelOut>,
    channel: Py<Channel>,
    bounded: bool,
}
connection_common!(ChannelOutput);

impl ChannelOutput {
    /// The core connection, for a network drained into the channel.
    pub(crate) fn connection(&self, py: Python<'_>) -> PyResult<std::sync::Arc<ChannelOut>> {
        self.conn.get(py)
    }
}

fn put_options(py: Python<'_>, consumers: Option<i64>) -> PyResult<PutOptions> {
    let o = PutOptions::default();
    Ok(match consumers {
        None => o,
        Some(n) => o.consumers(u32::try_from(n).map_err(|_| {
            errors::raise(
                py,
                Exc::InvalidArgument,
                (format!("consumers={n} is not in 0..2**32"),),
            )
        })?),
    })
}

#[pymethods]
impl ChannelOutput {
    /// The channel.
    #[getter]
    fn channel(&self, py: Python<'_>) -> Py<Channel> {
        self.channel.clone_ref(py)
    }

    /// Puts ``item`` at ``ts``; a full bounded channel makes it wait (at most ``timeout``
    /// seconds, then ``Full``). ``consumers=n`` reclaims the item once ``n`` connections
    /// consumed it.
    ///
    /// Into another address space's channel, a put without ``timeout`` returns once sent:
    /// a refusal only the owner sees is raised later, by the next put (which is then not
    /// made) or by ``flush()``, with ``deferred`` set. ``sync=True`` waits for the owner.
    #[pyo3(signature = (ts, item, *, consumers = None, timeout = None, sync = false))]
    fn put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        item: &Bound<'_, PyAny>,
        consumers: Option<i64>,
        timeout: Option<f64>,
        sync: bool,
    ) -> PyResult<()> {
        let deadline = deadline(py, timeout)?;
        let opts = put_options(py, consumers)?.sync(sync);
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        // One wait, not slices: a blocked put is a watermark term and counts once as full.
        // Ctrl-C still stops it (see `Signals`).
        let opts = opts.wait(whole_wait(deadline));
        let signals = Signals::default();
        let stop = || signals.pending();
        let c = &*conn;
        let r = if self.conn.local && !self.bounded {
            c.put_with(ts, it, opts.wait(Wait::Never))
        } else {
            py.detach(|| c.put_interruptible(ts, it, opts, &stop))
        };
        r.map_err(|e| signals.put_error(py, e, item))
    }

    /// Lends ``nbytes`` zeroed bytes to fill in place (``memoryview(loan)[:] = ...``) and put
    /// as a bytes item. Into another address space's channel on this host it is shared
    /// memory, and the put copies nothing (``loan.in_place``).
    fn loan(&self, py: Python<'_>, nbytes: usize) -> PyResult<crate::loan::Loan> {
        let conn = self.conn.get(py)?;
        let l = conn.loan(nbytes).map_err(|e| errors::stm_error(py, e))?;
        Ok(crate::loan::Loan::new(l, None))
    }

    /// Lends a writable numpy array of ``shape`` and ``dtype`` to fill in place and put
    /// (``out.put(ts, array)``), without a copy: see ``loan``. Put, the array is read-only.
    #[pyo3(signature = (shape, dtype = None))]
    fn loan_array<'py>(
        &self,
        py: Python<'py>,
        shape: &Bound<'py, PyAny>,
        dtype: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let shape: Vec<usize> = match shape.extract::<usize>() {
            Ok(n) => vec![n],
            Err(_) => shape.extract()?,
        };
        let uint8 = pyo3::types::PyString::new(py, "uint8").into_any();
        let (dt, np_dtype) = crate::loan::dtype(py, dtype.unwrap_or(&uint8))?;
        let conn = self.conn.get(py)?;
        let l = conn
            .loan_array(dt, &shape)
            .map_err(|e| errors::stm_error(py, e))?;
        crate::loan::array(py, l, np_dtype.bind(py), &shape)
    }

    /// Waits until every put made on this connection is stored or refused, and raises a
    /// refusal not raised yet (``deferred`` set, with that put's timestamp and value).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let conn = self.conn.get(py)?;
        let c = &*conn;
        run(py, self.conn.local, || c.flush()).map_err(|e| support::deferred(py, e, None))
    }

    /// Puts without waiting; a full channel raises ``Full``.
    #[pyo3(signature = (ts, item, *, consumers = None))]
    fn try_put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        item: &Bound<'_, PyAny>,
        consumers: Option<i64>,
    ) -> PyResult<()> {
        let opts = put_options(py, consumers)?.wait(Wait::Never);
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.put_with(ts, it, opts))
        }
        .map_err(|e| support::put_failed(py, e, item))
    }
}

/// A task's connection for putting into a queue.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct QueueOutput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<QueueOut>,
    queue: Py<Queue>,
}
connection_common!(QueueOutput);

impl QueueOutput {
    /// The core connection, for a network drained into the queue.
    pub(crate) fn connection(&self, py: Python<'_>) -> PyResult<std::sync::Arc<QueueOut>> {
        self.conn.get(py)
    }
}

#[pymethods]
impl QueueOutput {
    /// The queue.
    #[getter]
    fn queue(&self, py: Python<'_>) -> Py<Queue> {
        self.queue.clone_ref(py)
    }

    /// Appends ``item`` with timestamp ``ts``, waiting while a bounded queue is full (at most
    /// ``timeout`` seconds, then ``Full``); returns the item's ticket.
    #[pyo3(signature = (ts, item, *, timeout = None))]
    fn put(
        &self,
        py: Python<'_>,
        ts: Timestamp,
        item: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let deadline = deadline(py, timeout)?;
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        let wait = whole_wait(deadline);
        let signals = Signals::default();
        let stop = || signals.pending();
        py.detach(|| conn.put_interruptible(ts, it, wait, &stop))
            .map_err(|e| signals.put_error(py, e, item))
    }

    /// Appends without waiting; a full queue raises ``Full``.
    fn try_put(&self, py: Python<'_>, ts: Timestamp, item: &Bound<'_, PyAny>) -> PyResult<u64> {
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.try_put(ts, it))
        }
        .map_err(|e| support::put_failed(py, e, item))
    }
}

/// A task's connection for writing a register.
#[pyclass(module = "stampede", frozen)]
pub(super) struct RegisterOutput {
    // Keeps the task alive while a connection of it is referenced.
    task: Py<Task>,
    conn: Conn<RegisterOut>,
    register: Py<Register>,
}
connection_common!(RegisterOutput);

#[pymethods]
impl RegisterOutput {
    /// The register.
    #[getter]
    fn register(&self, py: Python<'_>) -> Py<Register> {
        self.register.clone_ref(py)
    }
    /// Overwrites the value; returns its sequence number.
    fn write(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<u64> {
        let conn = self.conn.get_for_put(py, item)?;
        let it = items::to_item(py, item)?;
        {
            let c = &*conn;
            run(py, self.conn.local, || c.write(it))
        }
        .map_err(|e| errors::stm_error(py, e))
    }
}

#[pymethods]
impl Task {
    /// Attaches for putting: a ``ChannelOutput``, ``QueueOutput`` or ``RegisterOutput``.
    fn attach_output(slf: &Bound<'_, Self>, container: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let me = slf.get();
        let t = me.get(py)?;
        let task = || slf.clone().unbind();
        let stm = |e| errors::stm_error(py, e);
        if let Ok(c) = container.cast::<Channel>() {
            let link = Conn::new(py, &t, &c.get().ch, core::Task::attach_output).map_err(stm)?;
            let bounded = c.get().capacity().is_some();
            return Ok(Py::new(
                py,
                ChannelOutput {
                    conn: link,
                    task: task(),
                    channel: c.clone().unbind(),
                    bounded,
                },
            )?
            .into_any());
        }
        if let Ok(q) = container.cast::<Queue>() {
            let link = Conn::new(py, &t, &q.get().q, core::Task::attach_output).map_err(stm)?;
            return Ok(Py::new(
                py,
                QueueOutput {
                    conn: link,
                    task: task(),
                    queue: q.clone().unbind(),
                },
            )?
            .into_any());
        }
        if let Ok(r) = container.cast::<Register>() {
            let link = Conn::new(py, &t, &r.get().reg, core::Task::attach_output).map_err(stm)?;
            return Ok(Py::new(
                py,
                RegisterOutput {
                    conn: link,
                    task: task(),
                    register: r.clone().unbind(),
                },
            )?
            .into_any());
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "attach_output needs a Channel, Queue or Register, not {}",
            container.get_type()
        )))
    }
}
