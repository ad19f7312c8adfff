//! What the runtime and its containers report: counters, and the terms of a watermark.

use pyo3::prelude::*;
use stampede_core as core;
use stampede_core::Timestamp;

/// Counters of a channel.
#[pyclass(module = "stampede", frozen, get_all)]
pub(super) struct ChannelStats {
    /// Items stored now.
    items: usize,
    /// Input connections attached now.
    connections: usize,
    /// Items open (gotten, not consumed), summed over connections.
    open: usize,
    /// Successful puts.
    puts: u64,
    /// Successful gets.
    gets: u64,
    /// Items reclaimed.
    reclaimed: u64,
    /// Items passed over by ``NEWEST_UNSEEN`` gets.
    skipped: u64,
    /// Puts that found the channel full.
    full: u64,
}

impl From<core::ChannelStats> for ChannelStats {
    fn from(s: core::ChannelStats) -> Self {
        ChannelStats {
            items: s.items,
            connections: s.connections,
            open: s.open,
            puts: s.puts,
            gets: s.gets,
            reclaimed: s.reclaimed,
            skipped: s.skipped,
            full: s.full,
        }
    }
}

/// Counters of a queue.
#[pyclass(module = "stampede", frozen, get_all)]
pub(super) struct QueueStats {
    /// Items waiting for a getter.
    waiting: usize,
    /// Items gotten and not yet consumed.
    held: usize,
    /// Successful puts.
    puts: u64,
    /// Successful gets.
    gets: u64,
    /// Items consumed.
    consumed: u64,
    /// Items delivered again after their getter detached or exited.
    redelivered: u64,
    /// Puts that found the queue full.
    full: u64,
}

impl From<core::QueueStats> for QueueStats {
    fn from(s: core::QueueStats) -> Self {
        QueueStats {
            waiting: s.waiting,
            held: s.held,
            puts: s.puts,
            gets: s.gets,
            consumed: s.consumed,
            redelivered: s.redelivered,
            full: s.full,
        }
    }
}

/// Collection counters of a zone.
#[pyclass(module = "stampede", frozen, get_all)]
pub(super) struct GcStats {
    /// Passes run.
    passes: u64,
    /// Items reclaimed by the watermark or by reference counts.
    reclaimed: u64,
    /// The floor: everything below it has been reclaimed.
    floor: Timestamp,
}

impl From<core::GcStats> for GcStats {
    fn from(s: core::GcStats) -> Self {
        GcStats {
            passes: s.passes,
            reclaimed: s.reclaimed,
            floor: s.floor,
        }
    }
}

/// One term of a watermark: a timestamp and what holds it there.
#[pyclass(module = "stampede", frozen, get_all, skip_from_py_object)]
#[derive(Clone)]
pub(super) struct Hold {
    /// The timestamp this term holds the watermark at.
    ts: Timestamp,
    /// ``"virtual_time"``, ``"pending_put"``, ``"unconsumed"``, ``"queue_item"``, ``"horizon"``,
    /// ``"no_live_task"`` (the zone's floor is kept for tasks that join later) or ``"remote"``
    /// (another address space's lowest term).
    cause: &'static str,
    /// The task involved, if any.
    task: Option<u64>,
    /// Its name.
    task_name: Option<String>,
    /// The container involved, if any.
    container: Option<u64>,
    /// Its registered name.
    container_name: Option<String>,
    /// The input connection, for ``"unconsumed"``.
    connection: Option<u64>,
    /// The queue ticket, for ``"queue_item"``.
    ticket: Option<u64>,
    /// A sentence saying all of the above.
    description: String,
}

#[pymethods]
impl Hold {
    fn __repr__(&self) -> String {
        format!("Hold({})", self.description)
    }
}

impl From<&core::Hold> for Hold {
    fn from(h: &core::Hold) -> Self {
        let mut out = Hold {
            ts: h.ts,
            cause: "horizon",
            task: None,
            task_name: None,
            container: None,
            container_name: None,
            connection: None,
            ticket: None,
            description: h.to_string(),
        };
        match &h.cause {
            core::HoldCause::VirtualTime { task, task_name } => {
                out.cause = "virtual_time";
                out.task = Some(task.0);
                out.task_name = Some(task_name.clone());
            }
            core::HoldCause::PendingPut {
                task,
                task_name,
                container,
            } => {
                out.cause = "pending_put";
                out.task = Some(task.0);
                out.task_name = Some(task_name.clone());
                out.container = Some(container.0);
            }
            core::HoldCause::Unconsumed {
                container,
                container_name,
                connection,
                task,
                task_name,
            } => {
                out.cause = "unconsumed";
                out.container = Some(container.0);
                out.container_name = container_name.clone();
                out.connection = Some(connection.0);
                out.task = Some(task.0);
                out.task_name = Some(task_name.clone());
            }
            core::HoldCause::QueueItem {
                container,
                container_name,
                ticket,
                held_by,
            } => {
                out.cause = "queue_item";
                out.container = Some(container.0);
                out.container_name = container_name.clone();
                out.ticket = Some(*ticket);
                out.task = held_by.map(|t| t.0);
            }
            core::HoldCause::NoLiveTask { .. } => out.cause = "no_live_task",
            core::HoldCause::Remote { .. } => out.cause = "remote",
            _ => {}
        }
        out
    }
}

/// Every term of a zone's watermark: ``Runtime.explain``.
#[pyclass(module = "stampede", frozen)]
pub(super) struct WatermarkReport {
    /// The zone.
    #[pyo3(get)]
    zone: u32,
    /// The watermark applied so far; everything below it has been reclaimed.
    #[pyo3(get)]
    floor: Timestamp,
    /// The watermark the terms give now (a pass would raise the floor to it).
    #[pyo3(get)]
    watermark: Timestamp,
    /// Every term, lowest first.
    #[pyo3(get)]
    holds: Vec<Hold>,
    text: String,
}

impl From<core::WatermarkReport> for WatermarkReport {
    fn from(r: core::WatermarkReport) -> Self {
        WatermarkReport {
            zone: r.zone.0,
            floor: r.floor,
            watermark: r.watermark,
            holds: r.holds.iter().map(Hold::from).collect(),
            text: r.to_string(),
        }
    }
}

#[pymethods]
impl WatermarkReport {
    /// The terms at the watermark: what holds it back.
    fn holders(&self) -> Vec<Hold> {
        self.holds
            .iter()
            .filter(|h| h.ts == self.watermark)
            .cloned()
            .collect()
    }
    fn __str__(&self) -> String {
        self.text.clone()
    }
}
