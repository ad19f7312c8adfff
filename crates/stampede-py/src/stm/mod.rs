//! Runtime, tasks, containers and connections.
//!
//! # Local and remote containers
//! Tasks and containers are stampede-net's, so one Python class serves a container of this
//! address space and one owned by another (found through a `Space`). A connection keeps the
//! core's connection for a local container, as stampede-net itself does, because the
//! correlator takes it by value; for a remote one it keeps stampede-net's. Features only the
//! core has (lengths, counters, callbacks, arrival streams, correlation) work on local
//! containers and raise `NotLocal` on remote ones.
//!
//! # The GIL and locks
//! Calls that may block run with the GIL released; gets wait in slices of [`SLICE`] so that
//! signals (Ctrl-C) are seen between slices. A blocked put (and a pacer's sleep) waits in
//! one piece, because it is a watermark term for as long as it waits; the core asks its
//! [`Signals`] check while it waits instead. Every operation on a remote container is a
//! network round trip and runs without the GIL. Local calls that cannot block keep the GIL:
//! the core never calls into Python while it holds one of its locks, and items drop their
//! Python objects without the GIL (the decrement is deferred), so no core lock ever waits for
//! the GIL. Handles that Python can invalidate (`detach`, `exit`) sit behind a mutex that is
//! only held to clone or take an `Arc`, never across a blocking call.
//!
//! # Layout
//! `support` holds the shared helpers (waits, signals, the GIL); `reports` the counters and
//! watermark explanations; `containers` the containers; `task` the task; `runtime` the
//! runtime, which makes containers and tasks; `conn` the wrapper every connection holds;
//! `inputs` and `outputs` the connection classes and `Task.attach_input` and
//! `Task.attach_output`, which make them. Each imports only modules listed before it.
//!
//! [`SLICE`]: support::SLICE

mod conn;
mod containers;
mod inputs;
mod outputs;
mod reports;
mod runtime;
mod support;
mod task;

use pyo3::prelude::*;

pub(crate) use containers::{Channel, Queue, Register};
pub(crate) use inputs::{ChannelInput, QueueInput};
use inputs::{QueueItem, RegisterInput, Selector};
use outputs::RegisterOutput;
pub(crate) use outputs::{ChannelOutput, QueueOutput};
use reports::{ChannelStats, GcStats, Hold, QueueStats, WatermarkReport};
pub(crate) use runtime::Runtime;
pub(crate) use support::{
    call_back, deadline, drop_detached, duration, lock, next_slice, options, zone_id, Signals,
    FINALIZING,
};
use task::Task;

pub(crate) fn register_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Runtime>()?;
    m.add_class::<Task>()?;
    m.add_class::<Selector>()?;
    m.add_class::<Channel>()?;
    m.add_class::<Queue>()?;
    m.add_class::<Register>()?;
    m.add_class::<ChannelInput>()?;
    m.add_class::<ChannelOutput>()?;
    m.add_class::<QueueInput>()?;
    m.add_class::<QueueOutput>()?;
    m.add_class::<QueueItem>()?;
    m.add_class::<RegisterInput>()?;
    m.add_class::<RegisterOutput>()?;
    m.add_class::<ChannelStats>()?;
    m.add_class::<QueueStats>()?;
    m.add_class::<GcStats>()?;
    m.add_class::<Hold>()?;
    m.add_class::<WatermarkReport>()?;
    Ok(())
}
