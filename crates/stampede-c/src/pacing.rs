//! Real-time pacing: keeps a task's virtual time in loose step with the clock.

use std::sync::Mutex;
use std::time::Duration;

use stampede_core::{LateAction, Pacer, Tick};

use crate::error::{boxed, guard, handle, put_out, release, stp_status, Error, Result};
use crate::stm::{stop_flag, stopped};

/// What a pacer does when a tick is reached later than its tolerance.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_late_action {
    /// Go on; later ticks keep their schedule (the task catches up).
    STP_LATE_CONTINUE = 0,
    /// Skip the missed ticks: `stp_pacer_sync` reports the virtual time to jump to.
    STP_LATE_SKIP = 1,
    /// Rebase the schedule so this tick is due now.
    STP_LATE_RESYNC = 2,
}

/// The outcome of `stp_pacer_sync`.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_tick {
    /// On time: slept until due, or late within tolerance.
    STP_TICK_ON_TIME = 0,
    /// Late beyond tolerance; going on.
    STP_TICK_LATE = 1,
    /// Late; skip to the virtual time given in `*skip_to`.
    STP_TICK_SKIP = 2,
    /// Late; the schedule now treats this tick as due now.
    STP_TICK_RESYNCED = 3,
}

/// Counters of a pacer.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct stp_pacer_stats {
    /// Ticks reached on time.
    pub on_time: u64,
    /// Ticks reached late beyond tolerance.
    pub late: u64,
    /// Virtual times skipped.
    pub skipped: u64,
    /// Schedule rebases.
    pub resyncs: u64,
}

/// Paces a loop to real time: tick `vt` is due `vt` periods after the first tick.
#[allow(non_camel_case_types)]
pub struct stp_pacer {
    p: Mutex<Pacer>,
}

/// A pacer with a tick period and a lateness tolerance in microseconds, and a policy for late
/// ticks (an `stp_late_action`).
///
/// # Safety
/// `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_pacer_new(
    period_us: u64,
    tolerance_us: u64,
    late_action: i32,
    out: *mut *mut stp_pacer,
) -> stp_status {
    guard(|| {
        crate::error::need_out(out, "out")?;
        if period_us == 0 {
            return Err(Error::invalid("period_us must be positive"));
        }
        let action = match late_action {
            0 => LateAction::Continue,
            1 => LateAction::Skip,
            2 => LateAction::Resync,
            a => return Err(Error::invalid(format!("{a} is not an stp_late_action"))),
        };
        let p = Pacer::new(
            Duration::from_micros(period_us),
            Duration::from_micros(tolerance_us),
            move |_| action,
        );
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(stp_pacer { p: Mutex::new(p) }), "out") }
    })
}

/// Waits until tick `vt` is due. `*out_tick` receives the outcome and, for `STP_TICK_SKIP`,
/// `*skip_to` the virtual time to continue from (`skip_to` may be NULL otherwise).
///
/// # Safety
/// `pacer` is a live pacer; `out_tick` writable; `skip_to` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_pacer_sync(
    pacer: *const stp_pacer,
    vt: i64,
    out_tick: *mut stp_tick,
    skip_to: *mut i64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle(pacer, "pacer") }?;
        crate::error::need_out(out_tick, "out_tick")?;
        let tick = p.p.lock().map_err(|_| Error::invalid("pacer"))?.sync(vt);
        // SAFETY: forwarded contract.
        unsafe { report(tick, vt, out_tick, skip_to) }
    })
}

/// Writes a tick's outcome through the out-pointers of a sync.
///
/// # Safety
/// `out_tick` is writable; `skip_to` NULL or writable.
unsafe fn report(tick: Tick, vt: i64, out_tick: *mut stp_tick, skip_to: *mut i64) -> Result<()> {
    let (t, to) = match tick {
        Tick::OnTime => (stp_tick::STP_TICK_ON_TIME, vt),
        Tick::Late(_) => (stp_tick::STP_TICK_LATE, vt),
        Tick::Skip(to) => (stp_tick::STP_TICK_SKIP, to),
        Tick::Resynced => (stp_tick::STP_TICK_RESYNCED, vt),
    };
    if !skip_to.is_null() {
        // SAFETY: non-NULL and writable by the caller's contract.
        unsafe { skip_to.write(to) };
    }
    // SAFETY: forwarded contract.
    unsafe { put_out(out_tick, t, "out_tick") }
}

/// Waits like `stp_pacer_sync`, but stops with `STP_INTERRUPTED`, counting no tick and
/// writing neither out-pointer, once `*stop` is non-zero: the flag is read (atomically) about
/// every 50 ms while the pacer sleeps. A binding sets it from another thread to wake a
/// paced loop when its caller is interrupted. `stop` NULL is `stp_pacer_sync`.
///
/// # Safety
/// `pacer` is a live pacer; `stop` is NULL or an aligned `int32_t` that stays valid during
/// the call and that other threads write only atomically; `out_tick` writable; `skip_to` NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_pacer_sync_interruptible(
    pacer: *const stp_pacer,
    vt: i64,
    stop: *const i32,
    out_tick: *mut stp_tick,
    skip_to: *mut i64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle(pacer, "pacer") }?;
        // SAFETY: forwarded contract.
        let stop = unsafe { stop_flag(stop) }?;
        crate::error::need_out(out_tick, "out_tick")?;
        let mut pacer = p.p.lock().map_err(|_| Error::invalid("pacer"))?;
        let tick = match stop {
            Some(flag) => pacer.sync_interruptible(vt, &|| stopped(flag)),
            None => Some(pacer.sync(vt)),
        };
        drop(pacer);
        let Some(tick) = tick else {
            return Err(Error::new(
                stp_status::STP_INTERRUPTED,
                format!("pacer sync at vt {vt}: interrupted while waiting"),
            ));
        };
        // SAFETY: forwarded contract.
        unsafe { report(tick, vt, out_tick, skip_to) }
    })
}

/// The pacer's counters.
///
/// # Safety
/// `pacer` is a live pacer; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_pacer_get_stats(
    pacer: *const stp_pacer,
    out: *mut stp_pacer_stats,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let p = unsafe { handle(pacer, "pacer") }?;
        let s = p.p.lock().map_err(|_| Error::invalid("pacer"))?.stats();
        let s = stp_pacer_stats {
            on_time: s.on_time,
            late: s.late,
            skipped: s.skipped,
            resyncs: s.resyncs,
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, s, "out") }
    })
}

/// Releases a pacer. NULL is ignored.
///
/// # Safety
/// `pacer` is NULL or a live pacer, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_pacer_free(pacer: *mut stp_pacer) {
    // SAFETY: forwarded contract.
    unsafe { release(pacer) }
}
