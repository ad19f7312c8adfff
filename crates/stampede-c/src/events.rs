//! Arrival callbacks and garbage handlers of channels and queues, as C function pointers.

use std::ffi::c_void;

use stampede_core::{self as core, Item, SubscriptionId, Timestamp};

use crate::error::{boxed, guard, handle, put_out, release, stp_status};
use crate::item::stp_item;
use crate::stm::{stp_channel, stp_queue, Handle};

/// Told the timestamp of each item put: `ctx` is what was registered with it.
#[allow(non_camel_case_types)]
pub type stp_arrival_fn = Option<unsafe extern "C" fn(ctx: *mut c_void, ts: i64)>;

/// Told of each item reclaimed, with the item, which is valid only during the call (clone it
/// with `stp_item_clone` to keep it).
#[allow(non_camel_case_types)]
pub type stp_garbage_fn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, ts: i64, item: *const stp_item)>;

/// A caller's context pointer, handed back on whatever thread calls.
#[derive(Clone, Copy)]
struct Ctx(*mut c_void);

// SAFETY: the C caller promises (see the functions' contracts) that its context may be used
// from any thread.
unsafe impl Send for Ctx {}
// SAFETY: as above.
unsafe impl Sync for Ctx {}

/// A registered arrival callback; freeing it unsubscribes.
#[allow(non_camel_case_types)]
pub struct stp_subscription {
    cancel: Box<dyn Fn() -> bool + Send + Sync>,
}

fn arrivals<C: core::Container + Clone + Send + Sync + 'static>(
    c: &C,
    f: stp_arrival_fn,
    ctx: *mut c_void,
    subscribe: impl FnOnce(
        &C,
        Box<dyn Fn(Timestamp) + Send + Sync>,
    ) -> Result<SubscriptionId, core::StmError>,
    unsubscribe: fn(&C, SubscriptionId) -> bool,
) -> crate::error::Result<stp_subscription> {
    let f = f.ok_or_else(|| crate::error::Error::invalid("callback is NULL"))?;
    let ctx = Ctx(ctx);
    let id = subscribe(
        c,
        Box::new(move |ts| {
            let ctx = ctx;
            // SAFETY: the caller registered `f` with `ctx` for exactly this.
            unsafe { f(ctx.0, ts) }
        }),
    )?;
    let c = c.clone();
    Ok(stp_subscription {
        cancel: Box::new(move || unsubscribe(&c, id)),
    })
}

fn garbage(
    f: stp_garbage_fn,
    ctx: *mut c_void,
) -> crate::error::Result<impl Fn(Timestamp, &Item) + Send + Sync> {
    let f = f.ok_or_else(|| crate::error::Error::invalid("handler is NULL"))?;
    let ctx = Ctx(ctx);
    Ok(move |ts, item: &Item| {
        let ctx = ctx;
        let it = stp_item::new(item.clone());
        // SAFETY: the caller registered `f` with `ctx` for exactly this; `it` outlives the
        // call.
        unsafe { f(ctx.0, ts, &it) }
    })
}

/// Calls `f(ctx, ts)` for every item put into the channel from now on: on the putting
/// thread for a channel of this runtime, on the runtime's event thread (in order) for one
/// another address space owns. `*out` is the subscription: `stp_subscription_free` ends it.
///
/// # Safety
/// `c` is a live channel; `f` may be called from any thread with `ctx` until the
/// subscription is freed; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_on_arrival(
    c: *const stp_channel,
    f: stp_arrival_fn,
    ctx: *mut c_void,
    out: *mut *mut stp_subscription,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(c, "channel") }?.get();
        crate::error::need_out(out, "out")?;
        let s = arrivals(
            c,
            f,
            ctx,
            |c, g| c.on_arrival(g),
            core::Channel::unsubscribe,
        )?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(s), "out") }
    })
}

/// [`stp_channel_on_arrival`] for a queue.
///
/// # Safety
/// As for `stp_channel_on_arrival`.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_on_arrival(
    q: *const stp_queue,
    f: stp_arrival_fn,
    ctx: *mut c_void,
    out: *mut *mut stp_subscription,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { handle(q, "queue") }?.get();
        crate::error::need_out(out, "out")?;
        let s = arrivals(q, f, ctx, |q, g| q.on_arrival(g), core::Queue::unsubscribe)?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(s), "out") }
    })
}

/// Ends the subscription (no call starts after this returns) and frees it. NULL is ignored.
///
/// # Safety
/// `s` is NULL or a live subscription, not used after this.
#[no_mangle]
pub unsafe extern "C" fn stp_subscription_free(s: *mut stp_subscription) {
    if let Some(sub) = unsafe { s.as_ref() } {
        crate::error::guard_value(false, || (sub.cancel)());
    }
    // SAFETY: forwarded contract.
    unsafe { release(s) }
}

/// Calls `f(ctx, ts, item)` for every item of the channel reclaimed from now on (the
/// channel's one garbage handler: a second call replaces it). For a channel another address
/// space owns, the owner sends each reclaimed item here.
///
/// # Safety
/// `c` is a live channel; `f` may be called from any thread with `ctx` for as long as the
/// channel lives.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_on_garbage(
    c: *const stp_channel,
    f: stp_garbage_fn,
    ctx: *mut c_void,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(c, "channel") }?.get();
        c.on_garbage(garbage(f, ctx)?)?;
        Ok(())
    })
}

/// [`stp_channel_on_garbage`] for a queue: called for every item consumed.
///
/// # Safety
/// As for `stp_channel_on_garbage`.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_on_garbage(
    q: *const stp_queue,
    f: stp_garbage_fn,
    ctx: *mut c_void,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let q = unsafe { handle(q, "queue") }?.get();
        q.on_garbage(garbage(f, ctx)?)?;
        Ok(())
    })
}
