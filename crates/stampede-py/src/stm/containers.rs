//! The containers: `Channel`, `Queue` and `Register`, of this address space or of
//! another one, with their arrival subscriptions and garbage handlers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::{Container, Timestamp};

use super::reports::{ChannelStats, QueueStats};
use super::support::{call_back, callable, lock, run};
use crate::errors;
use crate::items;

/// Timestamp-indexed items, at most one per timestamp.
///
/// A channel of this address space, or of another one (``owner`` says which): both take
/// the same connections; lengths, counters, callbacks and arrival streams are the owner's
/// and raise ``NotLocal`` elsewhere.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Channel {
    pub(super) ch: core::Channel,
    subs: Subscriptions,
}

impl Channel {
    pub(crate) fn wrap(ch: core::Channel) -> Self {
        Channel {
            ch,
            subs: Subscriptions::default(),
        }
    }

    pub(super) fn capacity(&self) -> Option<usize> {
        self.ch.capacity()
    }

    fn local(&self, py: Python<'_>, what: &str) -> PyResult<&core::Channel> {
        as_local(&self.ch).ok_or_else(|| errors::not_local(py, what, self.ch.owner()))
    }
}

/// The container, if it lives in this address space.
fn as_local<C: Container>(c: &C) -> Option<&C> {
    c.is_local().then_some(c)
}

/// A container's name as Python writes it.
fn py_name(name: Option<&str>) -> String {
    name.map_or_else(|| "None".to_owned(), |n| format!("{n:?}"))
}

/// Closes a container wherever it lives, without the GIL (closing wakes every waiter; a
/// remote close is a round trip).
fn close_container(
    py: Python<'_>,
    close: impl FnOnce() -> Result<(), core::StmError> + Send,
) -> PyResult<()> {
    py.detach(close).map_err(|e| errors::stm_error(py, e))
}

/// Arrival subscriptions by the ids handed to Python.
#[derive(Default)]
struct Subscriptions {
    next: AtomicU64,
    ids: Mutex<HashMap<u64, core::SubscriptionId>>,
}

impl Subscriptions {
    fn add(&self, id: core::SubscriptionId) -> u64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&self.ids).insert(n, id);
        n
    }
    fn remove(&self, n: u64) -> Option<core::SubscriptionId> {
        lock(&self.ids).remove(&n)
    }
}

fn garbage_handler(handler: Py<PyAny>) -> impl Fn(Timestamp, &core::Item) + Send + Sync + 'static {
    move |ts, item| {
        call_back(|py| {
            let v = items::to_python(py, item)?;
            handler.bind(py).call1((ts, v))?;
            Ok(())
        })
    }
}

fn arrival_callback(cb: Py<PyAny>) -> impl Fn(Timestamp) + Send + Sync + 'static {
    move |ts| {
        call_back(|py| {
            cb.bind(py).call1((ts,))?;
            Ok(())
        })
    }
}

fn wrap_arrivals(py: Python<'_>, a: core::Arrivals) -> PyResult<Py<PyAny>> {
    let raw = Py::new(py, crate::extras::RawArrivals::new(a))?;
    Ok(py
        .import("stampede._arrivals")?
        .getattr("Arrivals")?
        .call1((raw,))?
        .unbind())
}

fn check_capacity(py: Python<'_>, capacity: i64) -> PyResult<usize> {
    usize::try_from(capacity)
        .map_err(|_| errors::invalid(py, format!("capacity {capacity} must not be negative")))
}

#[pymethods]
impl Channel {
    /// The registered name, if any.
    #[getter]
    fn name(&self) -> Option<String> {
        self.ch.name().map(str::to_owned)
    }
    /// The address space that owns the channel; ``None`` for this one.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.ch.owner()
    }
    /// The capacity of a bounded channel; ``None`` when unbounded.
    #[getter(capacity)]
    fn py_capacity(&self) -> Option<usize> {
        self.capacity()
    }
    /// The channel's time zone.
    #[getter]
    fn zone(&self) -> u32 {
        self.ch.zone().0
    }
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.local(py, "len()")?.len())
    }
    /// Timestamps of the items stored now, ascending.
    fn timestamps(&self, py: Python<'_>) -> PyResult<Vec<Timestamp>> {
        Ok(self.local(py, "timestamps()")?.timestamps())
    }
    /// Counters.
    fn stats(&self, py: Python<'_>) -> PyResult<ChannelStats> {
        let s = self.local(py, "stats()")?.stats();
        Ok(ChannelStats::from(s))
    }
    /// Closes the channel, wherever it lives: puts fail with ``Closed``; gets drain what is
    /// left, then fail. Items consumed on some connection that no present connection can
    /// still read are released at once (a zone with no live task otherwise keeps them for
    /// tasks that join later).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close_container(py, || self.ch.close())
    }
    /// Whether the channel was closed.
    #[getter]
    fn closed(&self, py: Python<'_>) -> PyResult<bool> {
        Ok(self.local(py, "closed")?.is_closed())
    }
    /// Calls ``handler(ts, value)`` on the collector's thread for every reclaimed item (for
    /// another address space's channel, its owner forwards each reclaimed item here, where
    /// the handler runs on the event thread, in order).
    fn on_garbage(&self, py: Python<'_>, handler: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = garbage_handler(callable(handler, "a garbage handler")?);
        let c = &self.ch;
        run(py, c.is_local(), || c.on_garbage(h)).map_err(|e| errors::stm_error(py, e))
    }
    /// Calls ``callback(ts)`` on the putting thread for every new item (for another address
    /// space's channel, on the event thread, in order); returns an id for ``unsubscribe``.
    fn on_arrival(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<u64> {
        let f = arrival_callback(callable(callback, "an arrival callback")?);
        let c = &self.ch;
        let id = run(py, c.is_local(), || c.on_arrival(f)).map_err(|e| errors::stm_error(py, e))?;
        Ok(self.subs.add(id))
    }

    /// Removes an arrival callback or stream; whether it existed.
    fn unsubscribe(&self, subscription: u64) -> bool {
        self.subs
            .remove(subscription)
            .is_some_and(|id| self.ch.unsubscribe(id))
    }
    /// Timestamps of new items as an ``Arrivals`` (``async for``), buffering ``capacity``.
    #[pyo3(signature = (capacity = 1024))]
    fn arrivals(&self, py: Python<'_>, capacity: i64) -> PyResult<Py<PyAny>> {
        let capacity = check_capacity(py, capacity)?;
        let c = &self.ch;
        let a =
            run(py, c.is_local(), || c.arrivals(capacity)).map_err(|e| errors::stm_error(py, e))?;
        wrap_arrivals(py, a)
    }
    fn __repr__(&self) -> String {
        let name = py_name(self.ch.name());
        match as_local(&self.ch) {
            Some(c) => format!("Channel(name={name}, items={})", c.len()),
            None => format!(
                "Channel(name={name}, owner={:?})",
                self.ch.owner().unwrap_or("?")
            ),
        }
    }
}

/// FIFO items, each delivered to exactly one getter.
///
/// A queue of this address space or of another one (``owner`` says which); lengths,
/// counters, callbacks and arrival streams are the owner's and raise ``NotLocal`` elsewhere.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Queue {
    pub(super) q: core::Queue,
    subs: Subscriptions,
}

impl Queue {
    pub(crate) fn wrap(q: core::Queue) -> Self {
        Queue {
            q,
            subs: Subscriptions::default(),
        }
    }

    fn local(&self, py: Python<'_>, what: &str) -> PyResult<&core::Queue> {
        as_local(&self.q).ok_or_else(|| errors::not_local(py, what, self.q.owner()))
    }
}

#[pymethods]
impl Queue {
    /// The registered name, if any.
    #[getter]
    fn name(&self) -> Option<String> {
        self.q.name().map(str::to_owned)
    }
    /// The address space that owns the queue; ``None`` for this one.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.q.owner()
    }
    /// The capacity of a bounded queue; ``None`` when unbounded.
    #[getter]
    fn capacity(&self) -> Option<usize> {
        self.q.capacity()
    }
    /// The queue's time zone.
    #[getter]
    fn zone(&self) -> u32 {
        self.q.zone().0
    }
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.local(py, "len()")?.len())
    }
    /// Counters.
    fn stats(&self, py: Python<'_>) -> PyResult<QueueStats> {
        let s = self.local(py, "stats()")?.stats();
        Ok(QueueStats::from(s))
    }
    /// Closes the queue, wherever it lives: puts fail with ``Closed``; gets drain what is
    /// left, then fail.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close_container(py, || self.q.close())
    }
    /// Calls ``handler(ts, value)`` for every reclaimed item.
    fn on_garbage(&self, py: Python<'_>, handler: &Bound<'_, PyAny>) -> PyResult<()> {
        let h = garbage_handler(callable(handler, "a garbage handler")?);
        let c = &self.q;
        run(py, c.is_local(), || c.on_garbage(h)).map_err(|e| errors::stm_error(py, e))
    }
    /// Calls ``callback(ts)`` on the putting thread for every new item.
    fn on_arrival(&self, py: Python<'_>, callback: &Bound<'_, PyAny>) -> PyResult<u64> {
        let f = arrival_callback(callable(callback, "an arrival callback")?);
        let c = &self.q;
        let id = run(py, c.is_local(), || c.on_arrival(f)).map_err(|e| errors::stm_error(py, e))?;
        Ok(self.subs.add(id))
    }
    /// Removes an arrival callback or stream; whether it existed.
    fn unsubscribe(&self, subscription: u64) -> bool {
        self.subs
            .remove(subscription)
            .is_some_and(|id| self.q.unsubscribe(id))
    }
    /// Timestamps of new items as an ``Arrivals`` (``async for``), buffering ``capacity``.
    #[pyo3(signature = (capacity = 1024))]
    fn arrivals(&self, py: Python<'_>, capacity: i64) -> PyResult<Py<PyAny>> {
        let capacity = check_capacity(py, capacity)?;
        let c = &self.q;
        let a =
            run(py, c.is_local(), || c.arrivals(capacity)).map_err(|e| errors::stm_error(py, e))?;
        wrap_arrivals(py, a)
    }
    fn __repr__(&self) -> String {
        let name = py_name(self.q.name());
        match as_local(&self.q) {
            Some(q) => format!("Queue(name={name}, waiting={})", q.len()),
            None => format!(
                "Queue(name={name}, owner={:?})",
                self.q.owner().unwrap_or("?")
            ),
        }
    }
}

/// A single overwritable value, of this address space or of another one.
#[pyclass(module = "stampede", frozen)]
pub(crate) struct Register {
    pub(crate) reg: core::Register,
}

#[pymethods]
impl Register {
    /// The registered name, if any.
    #[getter]
    fn name(&self) -> Option<String> {
        self.reg.name().map(str::to_owned)
    }
    /// The address space that owns the register; ``None`` for this one.
    #[getter]
    fn owner(&self) -> Option<&str> {
        self.reg.owner()
    }
    /// The register's time zone.
    #[getter]
    fn zone(&self) -> u32 {
        self.reg.zone().0
    }
    /// The current ``(sequence, value)`` without waiting, or ``None`` before the first write
    /// (``NotLocal`` on another address space's register: read it through a connection).
    fn peek(&self, py: Python<'_>) -> PyResult<Option<(u64, Py<PyAny>)>> {
        let reg = self
            .reg
            .is_local()
            .then_some(&self.reg)
            .ok_or_else(|| errors::not_local(py, "peek()", self.reg.owner()))?;
        match reg.peek() {
            None => Ok(None),
            Some((seq, item)) => Ok(Some((seq, items::to_python(py, &item)?))),
        }
    }
    /// Closes the register, wherever it lives.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        close_container(py, || self.reg.close())
    }
}
