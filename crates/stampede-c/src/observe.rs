//! What a runtime and its containers can tell about themselves: counters, the watermark and
//! what holds it.

use std::ffi::{c_char, CString};

use stampede_core::{self as core, HoldCause, ZoneId};
use stampede_net::SpaceStats;

use crate::error::{guard, handle, put_out, stp_status, Error};
use crate::space::stp_runtime;
use crate::stm::{stp_channel, stp_queue, Handle as _};

/// Counters of a channel (zero for a channel another address space owns: ask its owner).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct stp_channel_stats {
    /// Items stored now.
    pub items: u64,
    /// Input connections attached now.
    pub connections: u64,
    /// Items gotten and not consumed, summed over connections.
    pub open: u64,
    /// Successful puts.
    pub puts: u64,
    /// Successful gets.
    pub gets: u64,
    /// Items reclaimed (by the watermark or by reference counts).
    pub reclaimed: u64,
    /// Items passed over unseen by `STP_NEWEST_UNSEEN` gets.
    pub skipped: u64,
    /// Puts that failed because the channel was full.
    pub full: u64,
}

/// Counters of a queue (zero for a queue another address space owns).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct stp_queue_stats {
    /// Items waiting to be gotten.
    pub waiting: u64,
    /// Items gotten and not yet consumed.
    pub held: u64,
    /// Successful puts.
    pub puts: u64,
    /// Successful gets.
    pub gets: u64,
    /// Items consumed.
    pub consumed: u64,
    /// Held items put back for another getter because their connection went away.
    pub redelivered: u64,
    /// Puts that failed because the queue was full.
    pub full: u64,
}

/// Garbage-collection counters of one time zone of a runtime.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct stp_gc_stats {
    /// Collection passes run.
    pub passes: u64,
    /// Items reclaimed.
    pub reclaimed: u64,
    /// Everything below this timestamp has been reclaimed.
    pub floor: i64,
}

/// Why a timestamp holds a zone's watermark back (`stp_hold::cause`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_hold_cause {
    /// A live task's virtual time (`task` is set).
    STP_HOLD_VIRTUAL_TIME = 0,
    /// A put blocked on a full container (`task`, `container`).
    STP_HOLD_PENDING_PUT = 1,
    /// The oldest item not yet consumed on a channel input connection (`task`, `container`).
    STP_HOLD_UNCONSUMED = 2,
    /// Nothing at or above this timestamp was ever put in the zone.
    STP_HOLD_HORIZON = 3,
    /// The zone has no live task; its floor is kept for tasks that join later.
    STP_HOLD_NO_LIVE_TASK = 4,
    /// The lowest term another address space reported.
    STP_HOLD_REMOTE = 5,
    /// An unconsumed queue item (`container`; `task` if a task holds it).
    STP_HOLD_QUEUE_ITEM = 6,
    /// A cause this version of the library does not name (see the report's text).
    STP_HOLD_OTHER = 7,
}

/// One term of a zone's watermark.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct stp_hold {
    /// The timestamp it holds.
    pub ts: i64,
    /// Why.
    pub cause: stp_hold_cause,
    /// The task concerned, or 0.
    pub task: u64,
    /// The container concerned, or 0.
    pub container: u64,
}

/// A zone's watermark and what holds it (`stp_runtime_explain`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct stp_watermark {
    /// The zone.
    pub zone: u32,
    /// The lowest of this runtime's own terms: what it reports to other address spaces.
    pub local: i64,
    /// Everything below this has been reclaimed.
    pub floor: i64,
    /// The watermark the terms give now.
    pub watermark: i64,
    /// How many terms there are (lowest first); at most `holds_cap` were written.
    pub holds: usize,
}

/// Counters of an address space joined to a distributed application (see the Rust
/// `SpaceStats` for each one's meaning).
#[repr(C)]
#[allow(non_camel_case_types, missing_docs)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct stp_space_stats {
    pub served: u64,
    pub malformed: u64,
    pub refused: u64,
    pub unreachable: u64,
    pub cache_hits: u64,
    pub spaces_lost: u64,
    pub pushed: u64,
    pub push_skipped: u64,
    pub push_received: u64,
    pub consume_failed: u64,
    pub events_sent: u64,
    pub events_received: u64,
    pub events_dropped: u64,
    pub events_lost: u64,
    pub puts_sent: u64,
    pub puts_refused: u64,
    pub view_hits: u64,
    pub register_hits: u64,
    pub leased: u64,
    pub lease_hits: u64,
    pub view_snapshots: u64,
    pub seen_refused: u64,
    pub sent_as_received: u64,
    pub sent_fresh: u64,
    pub loans_shared: u64,
    pub loans_plain: u64,
    pub invocations_sent: u64,
    pub invocations_served: u64,
    pub invocations_unknown: u64,
    pub invocations_failed: u64,
    pub answers_late: u64,
    pub denied: u64,
    pub quota_refused: u64,
}

impl From<SpaceStats> for stp_space_stats {
    // The test below fails when `SpaceStats` gains a counter this struct lacks.
    fn from(s: SpaceStats) -> Self {
        stp_space_stats {
            served: s.served,
            malformed: s.malformed,
            refused: s.refused,
            unreachable: s.unreachable,
            cache_hits: s.cache_hits,
            spaces_lost: s.spaces_lost,
            pushed: s.pushed,
            push_skipped: s.push_skipped,
            push_received: s.push_received,
            consume_failed: s.consume_failed,
            events_sent: s.events_sent,
            events_received: s.events_received,
            events_dropped: s.events_dropped,
            events_lost: s.events_lost,
            puts_sent: s.puts_sent,
            puts_refused: s.puts_refused,
            view_hits: s.view_hits,
            register_hits: s.register_hits,
            leased: s.leased,
            lease_hits: s.lease_hits,
            view_snapshots: s.view_snapshots,
            seen_refused: s.seen_refused,
            sent_as_received: s.sent_as_received,
            sent_fresh: s.sent_fresh,
            loans_shared: s.loans_shared,
            loans_plain: s.loans_plain,
            invocations_sent: s.invocations_sent,
            invocations_served: s.invocations_served,
            invocations_unknown: s.invocations_unknown,
            invocations_failed: s.invocations_failed,
            answers_late: s.answers_late,
            denied: s.denied,
            quota_refused: s.quota_refused,
        }
    }
}

fn hold(h: &core::Hold) -> stp_hold {
    use stp_hold_cause::*;
    let (cause, task, container) = match &h.cause {
        HoldCause::VirtualTime { task, .. } => (STP_HOLD_VIRTUAL_TIME, task.0, 0),
        HoldCause::PendingPut {
            task, container, ..
        } => (STP_HOLD_PENDING_PUT, task.0, container.0),
        HoldCause::Unconsumed {
            task, container, ..
        } => (STP_HOLD_UNCONSUMED, task.0, container.0),
        HoldCause::Horizon => (STP_HOLD_HORIZON, 0, 0),
        HoldCause::NoLiveTask { .. } => (STP_HOLD_NO_LIVE_TASK, 0, 0),
        HoldCause::Remote { .. } => (STP_HOLD_REMOTE, 0, 0),
        HoldCause::QueueItem {
            container, held_by, ..
        } => (STP_HOLD_QUEUE_ITEM, held_by.map_or(0, |t| t.0), container.0),
        _ => (STP_HOLD_OTHER, 0, 0),
    };
    stp_hold {
        ts: h.ts,
        cause,
        task,
        container,
    }
}

/// Writes the channel's counters to `*out`.
///
/// # Safety
/// `c` is a live channel; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_get_stats(
    c: *const stp_channel,
    out: *mut stp_channel_stats,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle(c, "channel") }?.get().stats();
        let s = stp_channel_stats {
            items: s.items as u64,
            connections: s.connections as u64,
            open: s.open as u64,
            puts: s.puts,
            gets: s.gets,
            reclaimed: s.reclaimed,
            skipped: s.skipped,
            full: s.full,
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, s, "out") }
    })
}

/// Writes the queue's counters to `*out`.
///
/// # Safety
/// `q` is a live queue; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_get_stats(
    q: *const stp_queue,
    out: *mut stp_queue_stats,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle(q, "queue") }?.get().stats();
        let s = stp_queue_stats {
            waiting: s.waiting as u64,
            held: s.held as u64,
            puts: s.puts,
            gets: s.gets,
            consumed: s.consumed,
            redelivered: s.redelivered,
            full: s.full,
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, s, "out") }
    })
}

/// Writes the garbage-collection counters of time zone `zone` to `*out`.
///
/// # Safety
/// `rt` is a live runtime; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_gc_stats(
    rt: *const stp_runtime,
    zone: u32,
    out: *mut stp_gc_stats,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle(rt, "rt") }?.core().gc_stats(ZoneId(zone));
        let s = stp_gc_stats {
            passes: s.passes,
            reclaimed: s.reclaimed,
            floor: s.floor,
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, s, "out") }
    })
}

/// Runs a collection pass over every zone now, instead of waiting for the next one. When it
/// returns, every item below each zone's new floor has been handed to its garbage handler,
/// whichever pass reclaimed it, so a garbage handler must not wait for a thread that calls
/// this (called from inside a garbage handler, it does not wait for other passes).
///
/// # Safety
/// `rt` is a live runtime.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_collect(rt: *const stp_runtime) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let rt = unsafe { handle(rt, "rt") }?.core();
        for zone in rt.zones() {
            rt.collect_zone(zone);
        }
        Ok(())
    })
}

/// Writes the counters of the address space `rt` joined to `*out`; `STP_UNSUPPORTED` for
/// an embedded runtime.
///
/// # Safety
/// `rt` is a live runtime; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_space_stats(
    rt: *const stp_runtime,
    out: *mut stp_space_stats,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let rt = unsafe { handle(rt, "rt") }?;
        let space = rt.space().ok_or_else(|| {
            Error::from(core::StmError::Unsupported(
                "an embedded runtime has no address-space counters".into(),
            ))
        })?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, space.stats().into(), "out") }
    })
}

/// Explains zone `zone`'s watermark: its figures in `*out`, its terms (lowest first) in
/// `holds[0..holds_cap]` (`out->holds` says how many there are: call again with a larger
/// array to see them all), and, unless `text` is NULL, a readable report in `*text`, which
/// the caller frees with `stp_string_free`.
///
/// # Safety
/// `rt` is a live runtime; `out` is writable; `holds` is writable for `holds_cap` entries
/// (or NULL with `holds_cap` 0); `text` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_explain(
    rt: *const stp_runtime,
    zone: u32,
    out: *mut stp_watermark,
    holds: *mut stp_hold,
    holds_cap: usize,
    text: *mut *mut c_char,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let rt = unsafe { handle(rt, "rt") }?;
        crate::error::need_out(out, "out")?;
        if holds.is_null() && holds_cap > 0 {
            return Err(Error::invalid("holds is NULL with holds_cap > 0"));
        }
        let r = rt.core().explain(ZoneId(zone));
        for (i, h) in r.holds.iter().take(holds_cap).enumerate() {
            // SAFETY: `holds` is writable for `holds_cap` entries.
            unsafe { holds.add(i).write(hold(h)) };
        }
        if !text.is_null() {
            // A report never holds a NUL: names are checked when registered.
            let s = CString::new(r.to_string().replace('\0', " "))
                .map_err(|e| Error::invalid(e.to_string()))?;
            // SAFETY: `text` is writable.
            unsafe { text.write(s.into_raw()) };
        }
        let w = stp_watermark {
            zone,
            local: r.local,
            floor: r.floor,
            watermark: r.watermark,
            holds: r.holds.len(),
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, w, "out") }
    })
}

/// This runtime's metrics now, in the Prometheus/OpenMetrics text format, in `*text`, which
/// the caller frees with `stp_string_free`: its zones, named containers and tasks, and, for
/// a runtime joined to an application, its address space's own counters (see
/// `docs/observability.md`).
///
/// # Safety
/// `rt` is a live runtime; `text` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_runtime_metrics(
    rt: *const stp_runtime,
    text: *mut *mut c_char,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let rt = unsafe { handle(rt, "rt") }?;
        crate::error::need_out(text, "text")?;
        let rendered = match rt.space() {
            Some(space) => space.metrics().render(),
            None => {
                let m = stampede_observe::Metrics::new();
                m.add(stampede_observe::RuntimeSource::new(rt.core()));
                m.render()
            }
        };
        // Label values are names, which hold no NUL.
        let s =
            CString::new(rendered.replace('\0', " ")).map_err(|e| Error::invalid(e.to_string()))?;
        // SAFETY: `text` is writable.
        unsafe { text.write(s.into_raw()) };
        Ok(())
    })
}

/// Frees a string this library returned. NULL is ignored.
///
/// # Safety
/// `s` is NULL or a string from this library, not freed before.
#[no_mangle]
pub unsafe extern "C" fn stp_string_free(s: *mut c_char) {
    if !s.is_null() {
        // SAFETY: made by CString::into_raw, released once by the caller's contract.
        drop(unsafe { CString::from_raw(s) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field names of a struct from its `Debug` form.
    fn fields(debug: &str) -> Vec<String> {
        let body =
            &debug[debug.find('{').expect("a struct") + 1..debug.rfind('}').expect("closed")];
        body.split(',')
            .filter_map(|f| f.split(':').next())
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect()
    }

    #[test]
    fn the_c_space_stats_have_every_counter() {
        let rust = fields(&format!("{:?}", SpaceStats::default()));
        let c = fields(&format!("{:?}", stp_space_stats::default()));
        assert_eq!(
            rust, c,
            "stp_space_stats must list SpaceStats's counters, in order"
        );
    }
}
