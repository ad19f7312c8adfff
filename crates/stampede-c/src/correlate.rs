//! Correlation: sets of items, one per input channel, that belong to the same moment.

use std::sync::Mutex;

use stampede_core::{Correlated, Correlator, Match};

use crate::error::Error;
use crate::error::{boxed, guard, guard_value, handle, need_out, put_out, release, stp_status};
use crate::item::new_item;
use crate::stm::{stp_channel_in, wait};

/// How the items of a correlated set match (`stp_correlator_new`).
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_match {
    /// Every channel has an item with the same timestamp.
    STP_MATCH_EXACT = 0,
    /// Every other channel has an item within `within` of the first channel's item.
    STP_MATCH_WITHIN = 1,
}

/// Delivers correlated sets in increasing timestamp order.
#[allow(non_camel_case_types)]
pub struct stp_correlator {
    c: Mutex<Correlator>,
}

/// One correlated set: an item per input, in input order.
#[allow(non_camel_case_types)]
pub struct stp_set {
    s: Correlated,
}

fn correlator(c: &stp_correlator) -> std::sync::MutexGuard<'_, Correlator> {
    c.c.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A correlator over `n` input connections (`match` an `stp_match`; `within` the distance
/// for `STP_MATCH_WITHIN`). It takes the connections over: do not use or free them after
/// the call, which detaches them when it fails with `STP_UNREACHABLE` (a channel's owner
/// could not be reached), and `stp_correlator_free` otherwise. Only a call that fails with
/// `STP_INVALID_ARGUMENT` leaves them the caller's.
///
/// # Safety
/// `inputs` holds `n` live, distinct input connections; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_correlator_new(
    inputs: *const *mut stp_channel_in,
    n: usize,
    r#match: i32,
    within: i64,
    out: *mut *mut stp_correlator,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        if inputs.is_null() || n == 0 {
            return Err(Error::invalid("a correlator needs at least one input"));
        }
        let mode = match r#match {
            0 => Match::Exact,
            1 if within >= 0 => Match::Within(within),
            1 => return Err(Error::invalid("within must not be negative")),
            m => return Err(Error::invalid(format!("{m} is not an stp_match"))),
        };
        // SAFETY: forwarded contract.
        let ptrs = unsafe { std::slice::from_raw_parts(inputs, n) };
        if ptrs.iter().any(|p| p.is_null()) {
            return Err(Error::invalid("an input is NULL"));
        }
        let mut seen = ptrs.to_vec();
        seen.sort_unstable();
        seen.dedup();
        if seen.len() != n {
            return Err(Error::invalid("an input is given twice"));
        }
        let conns: Vec<_> = ptrs
            .iter()
            // SAFETY: live connections from this library, distinct, taken over once.
            .map(|p| unsafe { Box::from_raw(*p) }.into_core())
            .collect();
        let c = Correlator::new(conns, mode)?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(stp_correlator { c: Mutex::new(c) }), "out") }
    })
}

/// Gets the next set, waiting per `timeout_ms` (as a channel get); `*out` is a new set the
/// caller frees with `stp_set_free`.
///
/// # Safety
/// `c` is a live correlator; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_correlator_get(
    c: *const stp_correlator,
    timeout_ms: i64,
    out: *mut *mut stp_set,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(c, "correlator") }?;
        need_out(out, "out")?;
        let s = correlator(c).get_with(wait(timeout_ms))?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(stp_set { s }), "out") }
    })
}

unsafe fn consume_set(c: *const stp_correlator, set: *const stp_set, until: bool) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, set) = unsafe { (handle(c, "correlator")?, handle(set, "set")?) };
        let c = correlator(c);
        if until {
            c.consume_until(&set.s)?;
        } else {
            c.consume(&set.s)?;
        }
        Ok(())
    })
}

/// Consumes the set's items on their connections.
///
/// # Safety
/// `c` is a live correlator and `set` a live set it returned.
#[no_mangle]
pub unsafe extern "C" fn stp_correlator_consume(
    c: *const stp_correlator,
    set: *const stp_set,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { consume_set(c, set, false) }
}

/// Consumes, on every connection, everything up to the set's item there, skipped items too.
///
/// # Safety
/// As for `stp_correlator_consume`.
#[no_mangle]
pub unsafe extern "C" fn stp_correlator_consume_until(
    c: *const stp_correlator,
    set: *const stp_set,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { consume_set(c, set, true) }
}

/// First-channel items skipped so far because they could no longer be matched.
///
/// # Safety
/// `c` is NULL (0) or a live correlator.
#[no_mangle]
pub unsafe extern "C" fn stp_correlator_skipped(c: *const stp_correlator) -> u64 {
    guard_value(0, || {
        // SAFETY: forwarded contract.
        unsafe { c.as_ref() }.map_or(0, |c| correlator(c).skipped())
    })
}

/// Detaches the correlator's connections and frees it. NULL is ignored.
///
/// # Safety
/// `c` is NULL or a live correlator, not used after this.
#[no_mangle]
pub unsafe extern "C" fn stp_correlator_free(c: *mut stp_correlator) {
    // SAFETY: forwarded contract.
    unsafe { release(c) }
}

/// The set's timestamp: its first input's item's.
///
/// # Safety
/// `s` is a live set.
#[no_mangle]
pub unsafe extern "C" fn stp_set_ts(s: *const stp_set) -> i64 {
    // SAFETY: forwarded contract.
    guard_value(0, || unsafe { s.as_ref() }.map_or(0, |s| s.s.ts))
}

/// How many items the set has (one per input).
///
/// # Safety
/// `s` is a live set.
#[no_mangle]
pub unsafe extern "C" fn stp_set_len(s: *const stp_set) -> usize {
    // SAFETY: forwarded contract.
    guard_value(0, || unsafe { s.as_ref() }.map_or(0, |s| s.s.items.len()))
}

/// The set's item from input `i`: its timestamp in `*ts`, and in `*item` a new item the
/// caller frees.
///
/// # Safety
/// `s` is a live set; `ts` and `item` are writable.
#[no_mangle]
pub unsafe extern "C" fn stp_set_item(
    s: *const stp_set,
    i: usize,
    ts: *mut i64,
    item: *mut *mut crate::item::stp_item,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle(s, "set") }?;
        need_out(ts, "ts")?;
        need_out(item, "item")?;
        let (t, it) = s.s.items.get(i).ok_or_else(|| -> Error {
            Error::invalid(format!("input {i} of a set of {}", s.s.items.len()))
        })?;
        // SAFETY: forwarded contract.
        unsafe {
            put_out(ts, *t, "ts")?;
            put_out(item, new_item(it.clone()), "item")
        }
    })
}

/// Frees a set. NULL is ignored.
///
/// # Safety
/// `s` is NULL or a live set, not used after this.
#[no_mangle]
pub unsafe extern "C" fn stp_set_free(s: *mut stp_set) {
    // SAFETY: forwarded contract.
    unsafe { release(s) }
}
