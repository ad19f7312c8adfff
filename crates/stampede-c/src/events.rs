//! Arrival callbacks and garbage handlers of channels and queues, as C function pointers.

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::ThreadId;

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
    gate: Arc<Gate>,
}

/// Lets calls through to a C callback until it is shut, and then tells the shutter when the
/// calls already inside (on other threads) have returned: the container may hand out a call
/// collected before the unsubscribe, and the caller frees its context once free returns.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    left: Condvar,
}

#[derive(Default)]
struct GateState {
    shut: bool,
    /// The threads inside a call now (one entry per call: a callback may nest).
    inside: Vec<ThreadId>,
}

impl Gate {
    /// Runs `f` unless the gate is shut.
    fn pass(&self, f: impl FnOnce()) {
        let me = std::thread::current().id();
        {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if s.shut {
                return;
            }
            s.inside.push(me);
        }
        struct Leave<'a>(&'a Gate, ThreadId);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                let mut s = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(i) = s.inside.iter().position(|t| *t == self.1) {
                    s.inside.swap_remove(i);
                }
                self.0.left.notify_all();
            }
        }
        let _leave = Leave(self, me);
        f();
    }

    /// Shuts the gate and waits until no other thread is inside a call (a call on this
    /// thread, which is shutting from inside the callback, ends when it returns).
    fn shut(&self) {
        let me = std::thread::current().id();
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.shut = true;
        while s.inside.iter().any(|t| *t != me) {
            s = self.left.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }
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
    let gate = Arc::new(Gate::default());
    let id = subscribe(c, {
        let gate = gate.clone();
        Box::new(move |ts| {
            let ctx = ctx;
            // SAFETY: the caller registered `f` with `ctx` for exactly this, until the
            // subscription is freed, which shuts the gate.
            gate.pass(|| unsafe { f(ctx.0, ts) })
        })
    })?;
    let c = c.clone();
    Ok(stp_subscription {
        cancel: Box::new(move || unsubscribe(&c, id)),
        gate,
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

/// Ends the subscription and frees it: when this returns, no call is running on another
/// thread and none starts, so the callback's context may be freed (called from inside the
/// callback, the context is free once that call returns). A callback must not wait for a
/// thread that frees its own subscription. NULL is ignored.
///
/// # Safety
/// `s` is NULL or a live subscription, not used after this.
#[no_mangle]
pub unsafe extern "C" fn stp_subscription_free(s: *mut stp_subscription) {
    if let Some(sub) = unsafe { s.as_ref() } {
        crate::error::guard_value(false, || (sub.cancel)());
        sub.gate.shut();
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
