//! Loans: memory an output connection lends for one item, filled in place and put without a
//! copy. Into another address space's channel on this host it is shared memory, so the
//! item's bytes are written once, by the producer, and reach the readers as they are.

use std::ffi::c_void;

use stampede_core::{Item, Loan};

use crate::error::{guard, guard_value, handle, need_out, put_out, release, stp_status};
use crate::error::{Error, Result};
use crate::item::{dims, dtype, new_item, stp_item};
use crate::stm::stp_channel_out;

/// Memory lent for one item: fill it, then turn it into the item to put with
/// `stp_loan_finish`.
#[allow(non_camel_case_types)]
pub struct stp_loan {
    loan: Option<Loan>,
}

/// # Safety
/// `loan` and `data` are writable.
unsafe fn lend(l: Loan, out: *mut *mut stp_loan, data: *mut *mut c_void) -> Result<()> {
    let mut h = Box::new(stp_loan { loan: Some(l) });
    let at = h
        .loan
        .as_mut()
        .map_or(std::ptr::null_mut(), |l| l.as_mut_ptr());
    // SAFETY: forwarded contract.
    unsafe {
        put_out(data, at.cast::<c_void>(), "data")?;
        put_out(out, Box::into_raw(h), "out")
    }
}

/// Lends `len` zeroed bytes to fill in place (`*data`) and put as a bytes item: for a channel
/// of another address space on this host, shared memory, so the put copies nothing;
/// otherwise plain memory (`stp_loan_in_place`).
///
/// # Safety
/// `conn` is a live connection; `out` and `data` are writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_loan(
    conn: *const stp_channel_out,
    len: usize,
    out: *mut *mut stp_loan,
    data: *mut *mut c_void,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        need_out(data, "data")?;
        // SAFETY: forwarded contract.
        let c = unsafe { handle(conn, "conn")? };
        let l = c.c.loan(len)?;
        // SAFETY: forwarded contract.
        unsafe { lend(l, out, data) }
    })
}

/// Lends an array of `dtype` (an `stp_dtype`) and `ndim` dimensions in `shape`, to fill its
/// row-major elements in place (`*data`) and put (see `stp_item_loan`).
///
/// # Safety
/// `conn` is a live connection; `shape` is readable for `ndim` values; `out` and `data` are
/// writable.
#[no_mangle]
pub unsafe extern "C" fn stp_item_loan_array(
    conn: *const stp_channel_out,
    dtype_code: i32,
    ndim: usize,
    shape: *const usize,
    out: *mut *mut stp_loan,
    data: *mut *mut c_void,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        need_out(data, "data")?;
        let d = dtype(dtype_code)?;
        // SAFETY: forwarded contract.
        let dims = unsafe { dims(ndim, shape) }?;
        // SAFETY: forwarded contract.
        let c = unsafe { handle(conn, "conn")? };
        let l = c.c.loan_array(d, dims)?;
        // SAFETY: forwarded contract.
        unsafe { lend(l, out, data) }
    })
}

/// Whether the loan is shared memory that a put sends without a copy (`false` for plain
/// memory, or NULL).
///
/// # Safety
/// `loan` is NULL or a live loan.
#[no_mangle]
pub unsafe extern "C" fn stp_loan_in_place(loan: *const stp_loan) -> bool {
    guard_value(false, || {
        // SAFETY: forwarded contract.
        unsafe { handle(loan, "loan") }
            .ok()
            .and_then(|l| l.loan.as_ref())
            .is_some_and(Loan::in_place)
    })
}

/// Turns a filled loan into the item to put (`*out`, freed by the caller), without a copy:
/// the loan's memory becomes the item's and must not be written any more. The loan is
/// released, whatever the outcome.
///
/// # Safety
/// `loan` is a live loan, not used afterwards; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_loan_finish(
    loan: *mut stp_loan,
    out: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        if loan.is_null() {
            return Err(Error::invalid("loan is NULL"));
        }
        // SAFETY: a live loan from `stp_item_loan*`, released here once.
        let mut h = unsafe { Box::from_raw(loan) };
        need_out(out, "out")?;
        let l = h
            .loan
            .take()
            .ok_or_else(|| Error::invalid("the loan was finished"))?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, new_item(Item::from(l)), "out") }
    })
}

/// Gives back an unfinished loan. NULL is ignored.
///
/// # Safety
/// `loan` is NULL or a live loan, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_loan_free(loan: *mut stp_loan) {
    // SAFETY: forwarded contract.
    unsafe { release(loan) }
}
