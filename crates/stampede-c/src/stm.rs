//! Space-Time Memory: containers, tasks, connections and their operations.
//!
//! One set of functions serves local and remote containers: a container found by name in
//! another address space behaves like one made here.

use std::ffi::c_char;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use stampede_core::{
    self as core, Container as _, ContainerOptions, PutOptions, Selector, Wait, ZoneId,
};

use crate::error::{
    boxed, guard, guard_value, handle, need_out, opt_text, put_out, release, stp_status, text,
    Error, Result,
};
use crate::item::{new_item, stp_item};
use crate::space::{millis, stp_runtime, wait_budget};

/// Which item a channel get asks for.
#[repr(C)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum stp_selector {
    /// The item with exactly the given timestamp.
    STP_EXACT = 0,
    /// The oldest item not consumed on this connection.
    STP_OLDEST = 1,
    /// The newest item not consumed on this connection.
    STP_NEWEST = 2,
    /// The newest item this connection has never gotten; skips stale items.
    STP_NEWEST_UNSEEN = 3,
    /// The oldest unconsumed item newer than this connection's last get (in-order streaming).
    STP_NEXT_UNSEEN = 4,
}

const _: () = assert!(STP_INFINITY == core::INFINITY);

/// A task's virtual time at creation: the lowest allowed now (the zone's floor).
pub const STP_AT_FLOOR: i64 = -9_223_372_036_854_775_808;
const _: () = assert!(STP_AT_FLOOR == i64::MIN);

/// Blocks forever (a `timeout_ms` value).
pub const STP_FOREVER: i64 = -1;
/// The largest timestamp; a virtual time that holds nothing back.
pub const STP_INFINITY: i64 = 9_223_372_036_854_775_807;

pub(crate) fn wait(timeout_ms: i64) -> Wait {
    match timeout_ms {
        t if t < 0 => Wait::Forever,
        0 => Wait::Never,
        t => Wait::For(millis(t)),
    }
}

/// The stop flag a waiting call polls: `None` for NULL.
///
/// # Safety
/// `stop` is NULL or points to an `int32_t` that stays valid for `'a` and that other threads
/// change only atomically.
pub(crate) unsafe fn stop_flag<'a>(stop: *const i32) -> Result<Option<&'a AtomicI32>> {
    if stop.is_null() {
        return Ok(None);
    }
    if !stop.is_aligned() {
        return Err(Error::invalid("stop is not aligned for an int32_t"));
    }
    // SAFETY: non-NULL and aligned (checked above); valid and changed only atomically for
    // `'a` by the caller's contract.
    Ok(Some(unsafe { AtomicI32::from_ptr(stop.cast_mut()) }))
}

/// Whether a stop flag is set.
pub(crate) fn stopped(flag: &AtomicI32) -> bool {
    flag.load(Ordering::Acquire) != 0
}

fn selector(kind: i32, ts: i64) -> Result<Selector> {
    Ok(match kind {
        0 => Selector::Exact(ts),
        1 => Selector::Oldest,
        2 => Selector::Newest,
        3 => Selector::NewestUnseen,
        4 => Selector::NextUnseen,
        k => return Err(Error::invalid(format!("{k} is not an stp_selector"))),
    })
}

fn options(name: Option<&str>, capacity: usize, zone: u32) -> ContainerOptions {
    let mut o = if capacity == 0 {
        ContainerOptions::unbounded()
    } else {
        ContainerOptions::bounded(capacity)
    };
    if let Some(n) = name {
        o = o.name(n);
    }
    o.zone(ZoneId(zone))
}

/// Containers share their constructor, lookup, close and free; the handles differ in type.
/// The runtime names and finds them, application-wide once it joined an application.
pub(crate) trait Handle: Sized {
    type Of: core::Container;
    const KIND: &'static str;
    fn wrap(c: Self::Of) -> Self;
    fn get(&self) -> &Self::Of;
    fn make(
        rt: &core::Runtime,
        opts: ContainerOptions,
    ) -> std::result::Result<Self::Of, core::StmError>;
    fn find(
        rt: &core::Runtime,
        name: &str,
        timeout: Duration,
    ) -> std::result::Result<Self::Of, core::StmError>;
}

unsafe fn new_container<H: Handle>(
    rt: *const stp_runtime,
    name: *const c_char,
    capacity: usize,
    zone: u32,
    out: *mut *mut H,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (rt, name) = unsafe { (handle(rt, "rt")?, opt_text(name, "name")?) };
        need_out(out, "out")?;
        let c = H::make(rt.core(), options(name, capacity, zone))?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(H::wrap(c)), "out") }
    })
}

unsafe fn lookup_container<H: Handle>(
    rt: *const stp_runtime,
    name: *const c_char,
    timeout_ms: i64,
    out: *mut *mut H,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (rt, name) = unsafe { (handle(rt, "rt")?, text(name, "name")?) };
        need_out(out, "out")?;
        let c = H::find(rt.core(), name, wait_budget(timeout_ms))?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(H::wrap(c)), "out") }
    })
}

unsafe fn container_is_local<H: Handle>(c: *const H) -> bool {
    guard_value(false, || {
        // SAFETY: forwarded contract.
        unsafe { handle(c, H::KIND) }.is_ok_and(|c| c.get().is_local())
    })
}

unsafe fn close_container<H: Handle>(c: *const H) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(c, H::KIND) }?;
        c.get().close()?;
        Ok(())
    })
}

/// A channel: time-indexed items, here or in another address space.
#[allow(non_camel_case_types)]
pub struct stp_channel {
    c: core::Channel,
}

/// A queue: items each taken by one getter, here or in another address space.
#[allow(non_camel_case_types)]
pub struct stp_queue {
    c: core::Queue,
}

/// A register: one current value, here or in another address space.
#[allow(non_camel_case_types)]
pub struct stp_register {
    c: core::Register,
}

impl Handle for stp_channel {
    type Of = core::Channel;
    const KIND: &'static str = "channel";
    fn wrap(c: core::Channel) -> Self {
        stp_channel { c }
    }
    fn get(&self) -> &core::Channel {
        &self.c
    }
    fn make(
        rt: &core::Runtime,
        opts: ContainerOptions,
    ) -> std::result::Result<core::Channel, core::StmError> {
        rt.channel(opts)
    }
    fn find(
        rt: &core::Runtime,
        name: &str,
        timeout: Duration,
    ) -> std::result::Result<core::Channel, core::StmError> {
        rt.lookup_channel(name, timeout)
    }
}

impl Handle for stp_queue {
    type Of = core::Queue;
    const KIND: &'static str = "queue";
    fn wrap(c: core::Queue) -> Self {
        stp_queue { c }
    }
    fn get(&self) -> &core::Queue {
        &self.c
    }
    fn make(
        rt: &core::Runtime,
        opts: ContainerOptions,
    ) -> std::result::Result<core::Queue, core::StmError> {
        rt.queue(opts)
    }
    fn find(
        rt: &core::Runtime,
        name: &str,
        timeout: Duration,
    ) -> std::result::Result<core::Queue, core::StmError> {
        rt.lookup_queue(name, timeout)
    }
}

impl Handle for stp_register {
    type Of = core::Register;
    const KIND: &'static str = "register";
    fn wrap(c: core::Register) -> Self {
        stp_register { c }
    }
    fn get(&self) -> &core::Register {
        &self.c
    }
    fn make(
        rt: &core::Runtime,
        opts: ContainerOptions,
    ) -> std::result::Result<core::Register, core::StmError> {
        rt.register(opts)
    }
    fn find(
        rt: &core::Runtime,
        name: &str,
        timeout: Duration,
    ) -> std::result::Result<core::Register, core::StmError> {
        rt.lookup_register(name, timeout)
    }
}

/// A new channel in this runtime: `name` registers it (NULL for none), `capacity` bounds it
/// (0 for unbounded), `zone` is its time zone (0 is the default).
///
/// # Safety
/// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_new(
    rt: *const stp_runtime,
    name: *const c_char,
    capacity: usize,
    zone: u32,
    out: *mut *mut stp_channel,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { new_container(rt, name, capacity, zone, out) }
}

/// The channel registered as `name`, waiting up to `timeout_ms` for it to appear: in this
/// process for an embedded runtime, anywhere in the application for an address space.
///
/// # Safety
/// `rt` is a live runtime; `name` NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_lookup(
    rt: *const stp_runtime,
    name: *const c_char,
    timeout_ms: i64,
    out: *mut *mut stp_channel,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { lookup_container(rt, name, timeout_ms, out) }
}

/// Whether the channel lives in this runtime (false for one another address space serves,
/// found by name, and for NULL). A binding uses it to tell local containers from remote ones.
///
/// # Safety
/// `c` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_is_local(c: *const stp_channel) -> bool {
    // SAFETY: forwarded contract.
    unsafe { container_is_local(c) }
}

/// Closes the channel: puts fail, gets drain what is left.
///
/// # Safety
/// `c` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_close(c: *const stp_channel) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { close_container(c) }
}

/// Releases this handle; the channel lives on while it has a name or connections. NULL is
/// ignored.
///
/// # Safety
/// `c` is NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_free(c: *mut stp_channel) {
    // SAFETY: forwarded contract.
    unsafe { release(c) }
}

/// A new queue in this runtime: `name` registers it (NULL for none), `capacity` bounds it
/// (0 for unbounded), `zone` is its time zone (0 is the default).
///
/// # Safety
/// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_new(
    rt: *const stp_runtime,
    name: *const c_char,
    capacity: usize,
    zone: u32,
    out: *mut *mut stp_queue,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { new_container(rt, name, capacity, zone, out) }
}

/// The queue registered as `name`, waiting up to `timeout_ms` for it to appear: in this
/// process for an embedded runtime, anywhere in the application for an address space.
///
/// # Safety
/// `rt` is a live runtime; `name` NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_lookup(
    rt: *const stp_runtime,
    name: *const c_char,
    timeout_ms: i64,
    out: *mut *mut stp_queue,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { lookup_container(rt, name, timeout_ms, out) }
}

/// Whether the queue lives in this runtime (false for one another address space serves,
/// found by name, and for NULL). A binding uses it to tell local containers from remote ones.
///
/// # Safety
/// `q` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_is_local(q: *const stp_queue) -> bool {
    // SAFETY: forwarded contract.
    unsafe { container_is_local(q) }
}

/// Closes the queue: puts fail, gets drain what is left.
///
/// # Safety
/// `c` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_close(c: *const stp_queue) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { close_container(c) }
}

/// Releases this handle; the queue lives on while it has a name or connections. NULL is
/// ignored.
///
/// # Safety
/// `c` is NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_free(c: *mut stp_queue) {
    // SAFETY: forwarded contract.
    unsafe { release(c) }
}

/// A new register in this runtime: `name` registers it (NULL for none), `capacity` bounds it
/// (0 for unbounded), `zone` is its time zone (0 is the default).
///
/// # Safety
/// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_register_new(
    rt: *const stp_runtime,
    name: *const c_char,
    capacity: usize,
    zone: u32,
    out: *mut *mut stp_register,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { new_container(rt, name, capacity, zone, out) }
}

/// The register registered as `name`, waiting up to `timeout_ms` for it to appear: in this
/// process for an embedded runtime, anywhere in the application for an address space.
///
/// # Safety
/// `rt` is a live runtime; `name` NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_register_lookup(
    rt: *const stp_runtime,
    name: *const c_char,
    timeout_ms: i64,
    out: *mut *mut stp_register,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { lookup_container(rt, name, timeout_ms, out) }
}

/// Whether the register lives in this runtime (false for one another address space serves,
/// found by name, and for NULL). A binding uses it to tell local containers from remote ones.
///
/// # Safety
/// `r` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn stp_register_is_local(r: *const stp_register) -> bool {
    // SAFETY: forwarded contract.
    unsafe { container_is_local(r) }
}

/// Closes the register: puts fail, gets drain what is left.
///
/// # Safety
/// `c` is a live handle.
#[no_mangle]
pub unsafe extern "C" fn stp_register_close(c: *const stp_register) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { close_container(c) }
}

/// Releases this handle; the register lives on while it has a name or connections. NULL is
/// ignored.
///
/// # Safety
/// `c` is NULL or a live handle, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_register_free(c: *mut stp_register) {
    // SAFETY: forwarded contract.
    unsafe { release(c) }
}

/// A task: a thread of control with a virtual time. Use it from any thread; its connections
/// belong to it.
#[allow(non_camel_case_types)]
pub struct stp_task {
    t: core::Task,
}

/// A new root task at virtual time `vt` in the default zone (see `stp_task_new_in`).
///
/// # Safety
/// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_task_new(
    rt: *const stp_runtime,
    vt: i64,
    name: *const c_char,
    out: *mut *mut stp_task,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe { stp_task_new_in(rt, vt, 0, name, out) }
}

/// A new root task at virtual time `vt` in time zone `zone`. `vt` may be `STP_AT_FLOOR`: the
/// lowest virtual time allowed now (0 until the zone's floor passes it), which is what a task joining a running application
/// usually wants (0 is refused once the zone's floor has passed it). `STP_INFINITY` holds
/// nothing back. `name` is for diagnostics (NULL for a default).
///
/// # Safety
/// `rt` is a live runtime; `name` NULL or NUL-terminated; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_task_new_in(
    rt: *const stp_runtime,
    vt: i64,
    zone: u32,
    name: *const c_char,
    out: *mut *mut stp_task,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (rt, name) = unsafe { (handle(rt, "rt")?, opt_text(name, "name")?) };
        need_out(out, "out")?;
        let zone = ZoneId(zone);
        let create = |vt| -> std::result::Result<core::Task, Error> {
            let mut b = rt.core().task_builder().virtual_time(vt).zone(zone);
            if let Some(n) = name {
                b = b.name(n);
            }
            Ok(b.create()?)
        };
        let t = if vt == STP_AT_FLOOR {
            // The floor may rise between reading it and creating the task: retry from the
            // minimum the refusal reports.
            let mut at = rt.core().gc_stats(zone).floor.max(0);
            let mut tries = 0;
            loop {
                match create(at) {
                    Err(e) if e.status == stp_status::STP_BELOW_VISIBILITY && tries < 8 => {
                        at = rt.core().gc_stats(zone).floor.max(at + 1);
                        tries += 1;
                    }
                    r => break r?,
                }
            }
        } else {
            create(vt)?
        };
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(stp_task { t }), "out") }
    })
}

/// A child task at virtual time `vt`, which must be at least the parent's visibility.
///
/// # Safety
/// `task` is a live task; `out` writable.
#[no_mangle]
pub unsafe extern "C" fn stp_task_child(
    task: *const stp_task,
    vt: i64,
    out: *mut *mut stp_task,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let task = unsafe { handle(task, "task") }?;
        need_out(out, "out")?;
        let t = task.t.child().virtual_time(vt).create()?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(stp_task { t }), "out") }
    })
}

/// The task's virtual time; `STP_INFINITY` for NULL.
///
/// # Safety
/// `task` is NULL or a live task.
#[no_mangle]
pub unsafe extern "C" fn stp_task_virtual_time(task: *const stp_task) -> i64 {
    guard_value(STP_INFINITY, || {
        // SAFETY: forwarded contract.
        unsafe { handle(task, "task") }.map_or(STP_INFINITY, |t| t.t.virtual_time())
    })
}

/// The task's visibility: the lowest timestamp it may still put or ask for.
///
/// # Safety
/// `task` is NULL or a live task.
#[no_mangle]
pub unsafe extern "C" fn stp_task_visibility(task: *const stp_task) -> i64 {
    guard_value(STP_INFINITY, || {
        // SAFETY: forwarded contract.
        unsafe { handle(task, "task") }.map_or(STP_INFINITY, |t| t.t.visibility())
    })
}

/// Moves the task's virtual time; it may not go below its visibility.
///
/// # Safety
/// `task` is a live task.
#[no_mangle]
pub unsafe extern "C" fn stp_task_set_virtual_time(task: *const stp_task, vt: i64) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        unsafe { handle(task, "task") }?.t.set_virtual_time(vt)?;
        Ok(())
    })
}

/// Ends the task: its connections detach and it no longer holds the watermark. NULL is
/// ignored.
///
/// # Safety
/// `task` is NULL or a live task, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_task_free(task: *mut stp_task) {
    // SAFETY: forwarded contract.
    unsafe { release(task) }
}

unsafe fn attach<H: Handle, C>(
    task: *const stp_task,
    container: *const H,
    out: *mut *mut C,
    connect: impl FnOnce(&core::Task, &H::Of) -> std::result::Result<C, core::StmError>,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (t, c) = unsafe { (handle(task, "task")?, handle(container, H::KIND)?) };
        need_out(out, "out")?;
        let conn = connect(&t.t, c.get())?;
        // SAFETY: forwarded contract.
        unsafe { put_out(out, boxed(conn), "out") }
    })
}

/// An input connection to a channel.
#[allow(non_camel_case_types)]
pub struct stp_channel_in {
    c: core::InputConnection<core::Channel>,
}

impl stp_channel_in {
    pub(crate) fn into_core(self) -> core::InputConnection<core::Channel> {
        self.c
    }
}

/// Attaches an input connection of `task` to a channel.
///
/// # Safety
/// `task` and `channel` are live handles; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_attach_input(
    task: *const stp_task,
    channel: *const stp_channel,
    out: *mut *mut stp_channel_in,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe {
        attach(task, channel, out, |t, c| {
            t.attach_input(c).map(|c| stp_channel_in { c })
        })
    }
}

/// Detaches and releases the connection. NULL is ignored.
///
/// # Safety
/// `conn` is NULL or a live connection, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_in_free(conn: *mut stp_channel_in) {
    // SAFETY: forwarded contract.
    unsafe { release(conn) }
}

/// An output connection to a channel.
#[allow(non_camel_case_types)]
pub struct stp_channel_out {
    pub(crate) c: core::OutputConnection<core::Channel>,
}

/// Attaches an output connection of `task` to a channel.
///
/// # Safety
/// `task` and `channel` are live handles; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_attach_output(
    task: *const stp_task,
    channel: *const stp_channel,
    out: *mut *mut stp_channel_out,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe {
        attach(task, channel, out, |t, c| {
            t.attach_output(c).map(|c| stp_channel_out { c })
        })
    }
}

/// Detaches and releases the connection. NULL is ignored.
///
/// # Safety
/// `conn` is NULL or a live connection, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_out_free(conn: *mut stp_channel_out) {
    // SAFETY: forwarded contract.
    unsafe { release(conn) }
}

/// An input connection to a queue.
#[allow(non_camel_case_types)]
pub struct stp_queue_in {
    c: core::InputConnection<core::Queue>,
}

/// Attaches an input connection of `task` to a queue.
///
/// # Safety
/// `task` and `queue` are live handles; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_attach_input(
    task: *const stp_task,
    queue: *const stp_queue,
    out: *mut *mut stp_queue_in,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe {
        attach(task, queue, out, |t, c| {
            t.attach_input(c).map(|c| stp_queue_in { c })
        })
    }
}

/// Detaches and releases the connection. NULL is ignored.
///
/// # Safety
/// `conn` is NULL or a live connection, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_in_free(conn: *mut stp_queue_in) {
    // SAFETY: forwarded contract.
    unsafe { release(conn) }
}

/// An output connection to a queue.
#[allow(non_camel_case_types)]
pub struct stp_queue_out {
    c: core::OutputConnection<core::Queue>,
}

/// Attaches an output connection of `task` to a queue.
///
/// # Safety
/// `task` and `queue` are live handles; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_attach_output(
    task: *const stp_task,
    queue: *const stp_queue,
    out: *mut *mut stp_queue_out,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe {
        attach(task, queue, out, |t, c| {
            t.attach_output(c).map(|c| stp_queue_out { c })
        })
    }
}

/// Detaches and releases the connection. NULL is ignored.
///
/// # Safety
/// `conn` is NULL or a live connection, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_out_free(conn: *mut stp_queue_out) {
    // SAFETY: forwarded contract.
    unsafe { release(conn) }
}

/// An input connection to a register.
#[allow(non_camel_case_types)]
pub struct stp_register_in {
    c: core::InputConnection<core::Register>,
}

/// Attaches an input connection of `task` to a register.
///
/// # Safety
/// `task` and `register` are live handles; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_register_attach_input(
    task: *const stp_task,
    register: *const stp_register,
    out: *mut *mut stp_register_in,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe {
        attach(task, register, out, |t, c| {
            t.attach_input(c).map(|c| stp_register_in { c })
        })
    }
}

/// Detaches and releases the connection. NULL is ignored.
///
/// # Safety
/// `conn` is NULL or a live connection, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_register_in_free(conn: *mut stp_register_in) {
    // SAFETY: forwarded contract.
    unsafe { release(conn) }
}

/// An output connection to a register.
#[allow(non_camel_case_types)]
pub struct stp_register_out {
    c: core::OutputConnection<core::Register>,
}

/// Attaches an output connection of `task` to a register.
///
/// # Safety
/// `task` and `register` are live handles; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_register_attach_output(
    task: *const stp_task,
    register: *const stp_register,
    out: *mut *mut stp_register_out,
) -> stp_status {
    // SAFETY: forwarded contract.
    unsafe {
        attach(task, register, out, |t, c| {
            t.attach_output(c).map(|c| stp_register_out { c })
        })
    }
}

/// Detaches and releases the connection. NULL is ignored.
///
/// # Safety
/// `conn` is NULL or a live connection, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_register_out_free(conn: *mut stp_register_out) {
    // SAFETY: forwarded contract.
    unsafe { release(conn) }
}

/// Puts `item` at timestamp `ts`, waiting up to `timeout_ms` for space in a bounded channel.
/// `consumers` > 0 reclaims the item once that many connections consumed it (0: when every
/// connection has, or the watermark passes it). The item stays owned by the caller.
///
/// Into another address space's channel, a put with `STP_FOREVER` returns once sent: a
/// refusal only the owner can see fails the connection's next put (which is then not made;
/// `stp_last_error()` names the earlier put) or `stp_channel_flush`.
///
/// # Safety
/// `conn` and `item` are live handles.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_put(
    conn: *const stp_channel_out,
    ts: i64,
    item: *const stp_item,
    consumers: u32,
    timeout_ms: i64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, item) = unsafe { (handle(conn, "conn")?, handle(item, "item")?) };
        let mut opts = PutOptions::default().wait(wait(timeout_ms));
        if consumers > 0 {
            opts = opts.consumers(consumers);
        }
        c.c.put_with(ts, item.item.clone(), opts)?;
        Ok(())
    })
}

/// Puts like `stp_channel_put`, but gives up with `STP_INTERRUPTED`, storing nothing, once
/// `*stop` is non-zero: the flag is read (atomically) while the put waits for space, about
/// every 50 ms (once per wait slice, 250 ms by default, for a put waiting at another address
/// space). A binding sets it from another thread to abandon a blocked put when its caller
/// is interrupted. `stop` NULL is `stp_channel_put`. Into another address space's channel with
/// `STP_FOREVER` the put returns once sent, so only its wait for a credit is interrupted.
///
/// # Safety
/// `conn` and `item` are live handles; `stop` is NULL or an aligned `int32_t` that stays
/// valid during the call and that other threads write only atomically.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_put_interruptible(
    conn: *const stp_channel_out,
    ts: i64,
    item: *const stp_item,
    consumers: u32,
    timeout_ms: i64,
    stop: *const i32,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, item) = unsafe { (handle(conn, "conn")?, handle(item, "item")?) };
        // SAFETY: forwarded contract.
        let stop = unsafe { stop_flag(stop) }?;
        let mut opts = PutOptions::default().wait(wait(timeout_ms));
        if consumers > 0 {
            opts = opts.consumers(consumers);
        }
        let item = item.item.clone();
        match stop {
            Some(flag) => c.c.put_interruptible(ts, item, opts, &|| stopped(flag))?,
            None => c.c.put_with(ts, item, opts)?,
        }
        Ok(())
    })
}

/// Waits until every put made on `conn` is stored or refused; fails with a refusal not
/// reported yet (see `stp_channel_put`). Puts into a local channel are stored at once.
///
/// # Safety
/// `conn` is a live connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_flush(conn: *const stp_channel_out) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(conn, "conn")? };
        c.c.flush()?;
        Ok(())
    })
}

/// Gets the item `selector` picks (`ts` is used by `STP_EXACT` only), waiting up to
/// `timeout_ms`. On success `*out_ts` and `*out_item` (a new item the caller frees) are set.
/// `STP_TIMEOUT` and `STP_UNAVAILABLE` report the nearest timestamps in `stp_last_neighbors()`.
///
/// # Safety
/// `conn` is a live connection; `out_ts` and `out_item` are writable.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_get(
    conn: *const stp_channel_in,
    selector_kind: i32,
    ts: i64,
    timeout_ms: i64,
    out_ts: *mut i64,
    out_item: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(conn, "conn") }?;
        need_out(out_ts, "out_ts")?;
        need_out(out_item, "out_item")?;
        let (got, item) =
            c.c.get_with(selector(selector_kind, ts)?, wait(timeout_ms))?;
        // SAFETY: checked non-NULL above; writable by the caller's contract.
        unsafe {
            put_out(out_ts, got, "out_ts")?;
            put_out(out_item, new_item(item), "out_item")
        }
    })
}

/// Marks the item at `ts` consumed on this connection.
///
/// # Safety
/// `conn` is a live connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_consume(conn: *const stp_channel_in, ts: i64) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        unsafe { handle(conn, "conn") }?.c.consume(ts)?;
        Ok(())
    })
}

/// Marks every item up to and including `ts` consumed on this connection.
///
/// # Safety
/// `conn` is a live connection.
#[no_mangle]
pub unsafe extern "C" fn stp_channel_consume_until(
    conn: *const stp_channel_in,
    ts: i64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        unsafe { handle(conn, "conn") }?.c.consume_until(ts)?;
        Ok(())
    })
}

/// Puts `item` at `ts` on a queue, waiting up to `timeout_ms` for space; `*out_ticket` (may be
/// NULL) receives the item's ticket.
///
/// # Safety
/// `conn` and `item` are live handles; `out_ticket` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_put(
    conn: *const stp_queue_out,
    ts: i64,
    item: *const stp_item,
    timeout_ms: i64,
    out_ticket: *mut u64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, item) = unsafe { (handle(conn, "conn")?, handle(item, "item")?) };
        let ticket = c.c.put_with(ts, item.item.clone(), wait(timeout_ms))?;
        if !out_ticket.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { out_ticket.write(ticket) };
        }
        Ok(())
    })
}

/// Puts like `stp_queue_put`, but gives up with `STP_INTERRUPTED`, storing nothing, once
/// `*stop` is non-zero: the flag is read (atomically) while the put waits for space, about
/// every 50 ms (once per wait slice, 250 ms by default, for a put waiting at another address
/// space). A binding sets it from another thread to abandon a blocked put when its caller
/// is interrupted. `stop` NULL is `stp_queue_put`; `*out_ticket` (may be NULL)
/// receives the item's ticket.
///
/// # Safety
/// `conn` and `item` are live handles; `stop` is NULL or an aligned `int32_t` that stays
/// valid during the call and that other threads write only atomically; `out_ticket` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_put_interruptible(
    conn: *const stp_queue_out,
    ts: i64,
    item: *const stp_item,
    timeout_ms: i64,
    stop: *const i32,
    out_ticket: *mut u64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, item) = unsafe { (handle(conn, "conn")?, handle(item, "item")?) };
        // SAFETY: forwarded contract.
        let stop = unsafe { stop_flag(stop) }?;
        let item = item.item.clone();
        let ticket = match stop {
            Some(flag) => {
                c.c.put_interruptible(ts, item, wait(timeout_ms), &|| stopped(flag))?
            }
            None => c.c.put_with(ts, item, wait(timeout_ms))?,
        };
        if !out_ticket.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { out_ticket.write(ticket) };
        }
        Ok(())
    })
}

/// Takes the next item of a queue (each item goes to exactly one getter), waiting up to
/// `timeout_ms`. Consume it by its ticket when done.
///
/// # Safety
/// `conn` is a live connection; the out-pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_get(
    conn: *const stp_queue_in,
    timeout_ms: i64,
    out_ts: *mut i64,
    out_ticket: *mut u64,
    out_item: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(conn, "conn") }?;
        need_out(out_ts, "out_ts")?;
        need_out(out_ticket, "out_ticket")?;
        need_out(out_item, "out_item")?;
        let q = c.c.get_with(wait(timeout_ms))?;
        // SAFETY: checked non-NULL above; writable by the caller's contract.
        unsafe {
            put_out(out_ts, q.ts, "out_ts")?;
            put_out(out_ticket, q.ticket, "out_ticket")?;
            put_out(out_item, new_item(q.item), "out_item")
        }
    })
}

/// Marks the queue item with `ticket` consumed.
///
/// # Safety
/// `conn` is a live connection.
#[no_mangle]
pub unsafe extern "C" fn stp_queue_consume(conn: *const stp_queue_in, ticket: u64) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        unsafe { handle(conn, "conn") }?.c.consume(ticket)?;
        Ok(())
    })
}

/// Writes a new value to a register; `*out_seq` (may be NULL) receives its sequence number.
///
/// # Safety
/// `conn` and `item` are live handles; `out_seq` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_register_write(
    conn: *const stp_register_out,
    item: *const stp_item,
    out_seq: *mut u64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, item) = unsafe { (handle(conn, "conn")?, handle(item, "item")?) };
        let seq = c.c.write(item.item.clone())?;
        if !out_seq.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { out_seq.write(seq) };
        }
        Ok(())
    })
}

/// Reads a register value this connection has not read yet, waiting up to `timeout_ms` for
/// one.
///
/// # Safety
/// `conn` is a live connection; the out-pointers are writable.
#[no_mangle]
pub unsafe extern "C" fn stp_register_read(
    conn: *const stp_register_in,
    timeout_ms: i64,
    out_seq: *mut u64,
    out_item: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let c = unsafe { handle(conn, "conn") }?;
        need_out(out_seq, "out_seq")?;
        need_out(out_item, "out_item")?;
        let (seq, item) = c.c.read_with(wait(timeout_ms))?;
        // SAFETY: checked non-NULL above; writable by the caller's contract.
        unsafe {
            put_out(out_seq, seq, "out_seq")?;
            put_out(out_item, new_item(item), "out_item")
        }
    })
}
