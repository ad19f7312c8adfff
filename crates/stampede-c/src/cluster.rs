//! Cluster threads from C: tasks registered by name (`stp_cluster_register`) and spawned in
//! any address space with byte arguments, joined for their result or how they ended, and
//! cluster-wide mutexes, conditions, semaphores, barriers and global memory segments, named.
//! The pthreads face (`<stampede/pthread.h>`) is built on the same cluster.

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CString};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use stampede_cluster::{
    Barrier, Cluster, ClusterError, ClusterOptions, Condition, JoinHandle, Mutex as ClusterMutex,
    Placement, Registry, Segment, Semaphore, TaskBody, TaskContext, Worker,
};
use stampede_core::Item;

use crate::error::{
    boxed, guard, guard_value, handle, need_out, opt_text, put_out, release, stp_status, text,
    Error, Result,
};
use crate::item::stp_item;
use crate::space::stp_runtime;

impl From<ClusterError> for Error {
    fn from(e: ClusterError) -> Self {
        Error::new(crate::error::status(e.code()), e.to_string())
    }
}

/// A task's body: runs with its argument bytes and `user`; returns 0 when it succeeded
/// (its result set by `stp_cluster_task_return`), anything else when it failed (the
/// message set by `stp_cluster_task_fail`, or the number).
#[allow(non_camel_case_types)]
pub type stp_cluster_fn = Option<
    unsafe extern "C" fn(
        task: *mut stp_cluster_task,
        args: *const u8,
        len: usize,
        user: *mut c_void,
    ) -> i32,
>;

/// The running task, passed to its body (valid during the call only).
#[allow(non_camel_case_types)]
pub struct stp_cluster_task {
    /// The context of the call this task struct was made for.
    ctx: *const TaskContext,
    result: Vec<u8>,
    failure: Option<String>,
}

/// This address space's part of its application's cluster.
#[allow(non_camel_case_types)]
pub struct stp_cluster {
    c: Cluster,
    id: CString,
}

/// A spawned task.
#[allow(non_camel_case_types)]
pub struct stp_thread {
    h: Mutex<JoinHandle>,
    space: CString,
}

/// A cluster mutex, with the hold this handle took.
#[allow(non_camel_case_types)]
pub struct stp_cluster_mutex {
    m: ClusterMutex,
    hold: Mutex<Option<u64>>,
}

/// A cluster condition variable.
#[allow(non_camel_case_types)]
pub struct stp_cluster_cond {
    c: Condition,
}

/// A cluster counting semaphore.
#[allow(non_camel_case_types)]
pub struct stp_cluster_sem {
    s: Semaphore,
}

/// One task's place in a cluster barrier (a member waits from one thread at a time).
#[allow(non_camel_case_types)]
pub struct stp_cluster_barrier {
    b: Mutex<Barrier>,
}

/// A global memory segment.
#[allow(non_camel_case_types)]
pub struct stp_cluster_segment {
    s: Segment,
}

struct Registered {
    body: unsafe extern "C" fn(*mut stp_cluster_task, *const u8, usize, *mut c_void) -> i32,
    user: usize,
}

fn registered() -> &'static Mutex<HashMap<String, Registered>> {
    static R: OnceLock<Mutex<HashMap<String, Registered>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The body of the task registered as `name`, for this process's clusters.
pub(crate) fn resolve(name: &str) -> Option<Arc<TaskBody>> {
    let r = registered().lock().unwrap_or_else(|e| e.into_inner());
    let Registered { body, user } = *r.get(name)?;
    Some(Arc::new(move |ctx: &TaskContext, args: Bytes| {
        let mut task = stp_cluster_task {
            ctx,
            result: Vec::new(),
            failure: None,
        };
        // SAFETY: the body and `user` were registered together by the program.
        let code = unsafe { body(&mut task, args.as_ptr(), args.len(), user as *mut c_void) };
        match (code, task.failure) {
            (0, None) => Ok(Bytes::from(task.result)),
            (_, Some(why)) => Err(why.into()),
            (code, None) => Err(format!("returned {code}").into()),
        }
    }))
}

fn registry() -> Registry {
    Registry::new().resolver(resolve)
}

fn options(timeout_ms: i64) -> ClusterOptions {
    ClusterOptions::default().timeout((timeout_ms >= 0).then(|| crate::space::millis(timeout_ms)))
}

fn timeout(ms: i64) -> Option<Duration> {
    (ms >= 0).then(|| crate::space::millis(ms))
}

/// Registers `body` as task `name` in this process, with `user` passed to each call: any
/// address space running this program can then run it. Registering a name again replaces
/// its body.
///
/// # Safety
/// `name` is a NUL-terminated string; `body` is safe to call from any thread with `user`.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_register(
    name: *const c_char,
    body: stp_cluster_fn,
    user: *mut c_void,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let name = unsafe { text(name, "name") }?;
        let body = body.ok_or_else(|| Error::invalid("body is NULL"))?;
        if name.is_empty() || name.starts_with("c:") {
            return Err(Error::invalid(format!("{name:?} cannot name a task")));
        }
        registered()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                name.to_owned(),
                Registered {
                    body,
                    user: user as usize,
                },
            );
        Ok(())
    })
}

/// Makes the address space of `rt` (a runtime joined to an application) a member of its
/// application's cluster, running the registered tasks for any member. `timeout_ms` bounds
/// the cluster's waits for other spaces (`STP_FOREVER`: none).
///
/// # Safety
/// `rt` is a live runtime; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_start(
    rt: *const stp_runtime,
    timeout_ms: i64,
    out: *mut *mut stp_cluster,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let rt = unsafe { handle(rt, "rt") }?;
        let space = rt.space().ok_or_else(|| {
            Error::invalid("a cluster needs a runtime joined to an application (stp_runtime_join)")
        })?;
        let c = Cluster::start(space, registry(), options(timeout_ms))?;
        let id = CString::new(c.id()).unwrap_or_default();
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(stp_cluster { c, id }), "out") }
    })
}

/// In a process a node agent started to attach an address space: joins the application,
/// serves the registered tasks until the cluster detaches this space, leaves, and sets
/// `*served` to true. Elsewhere returns at once with `*served` false. A program calls it
/// first thing in `main` and returns when `*served` is true.
///
/// # Safety
/// `served` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_serve_attached(
    timeout_ms: i64,
    served: *mut bool,
) -> stp_status {
    guard(|| {
        need_out(served, "served")?;
        let Some(w) = Worker::from_env() else {
            // SAFETY: checked writable above.
            return unsafe { put_out(served, false, "served") };
        };
        w.run(registry(), options(timeout_ms))?;
        // SAFETY: checked writable above.
        unsafe { put_out(served, true, "served") }
    })
}

/// This space's id (valid while `c` lives).
///
/// # Safety
/// `c` is a live cluster.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_id(c: *const stp_cluster) -> *const c_char {
    // SAFETY: forwarded contract.
    guard_value(std::ptr::null(), || {
        unsafe { c.as_ref() }.map_or(std::ptr::null(), |c| c.id.as_ptr())
    })
}

/// Releases this handle; the space leaves the cluster when its last handle (and task) goes.
///
/// # Safety
/// `c` is NULL or a live cluster, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_free(c: *mut stp_cluster) {
    // SAFETY: forwarded contract.
    unsafe { release(c) }
}

/// Asks a node agent to start `argv[0..argc]` as a new address space (a program that calls
/// `stp_cluster_serve_attached`) and waits until it is a member; its id goes to `*id`
/// (free with `stp_string_free`).
///
/// # Safety
/// `c` is a live cluster; `argv` holds `argc` NUL-terminated strings; `id` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_attach(
    c: *const stp_cluster,
    argv: *const *const c_char,
    argc: usize,
    timeout_ms: i64,
    id: *mut *mut c_char,
) -> stp_status {
    guard(|| {
        need_out(id, "id")?;
        // SAFETY: forwarded contract.
        let c = unsafe { handle(c, "cluster") }?;
        if argv.is_null() || argc == 0 {
            return Err(Error::invalid("an attach needs a command"));
        }
        let command = (0..argc)
            // SAFETY: `argv` holds `argc` strings by the caller's contract.
            .map(|i| unsafe { text(*argv.add(i), "argv[i]") }.map(str::to_owned))
            .collect::<Result<Vec<String>>>()?;
        let space =
            c.c.attach(&command, timeout(timeout_ms).unwrap_or(Duration::MAX))?;
        let s = CString::new(space).unwrap_or_default().into_raw();
        // SAFETY: checked writable above.
        unsafe { put_out(id, s, "id") }
    })
}

/// Tells member `space` (one this space attached) to leave and end; waits until it left.
///
/// # Safety
/// `c` is a live cluster; `space` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_detach(
    c: *const stp_cluster,
    space: *const c_char,
    timeout_ms: i64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (c, space) = unsafe { (handle(c, "cluster")?, text(space, "space")?) };
        c.c.detach(space, timeout(timeout_ms).unwrap_or(Duration::MAX))?;
        Ok(())
    })
}

fn placement(on: Option<&str>) -> Placement {
    match on {
        None | Some("round_robin") => Placement::RoundRobin,
        Some("least_loaded") => Placement::LeastLoaded,
        Some("here") => Placement::Here,
        Some(space) => Placement::On(space.to_owned()),
    }
}

/// Spawns task `name` with `args[0..len]` in the space `on` names: NULL or "round_robin",
/// "least_loaded", "here", or a member's id.
///
/// # Safety
/// `c` is a live cluster (or a task's, from `stp_cluster_task_cluster`); `name` is a
/// NUL-terminated string; `on` is NULL or one; `args` is readable for `len` bytes (or NULL
/// with 0); `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_spawn(
    c: *const stp_cluster,
    name: *const c_char,
    args: *const u8,
    len: usize,
    on: *const c_char,
    out: *mut *mut stp_thread,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let (c, name, on) = unsafe {
            (
                handle(c, "cluster")?,
                text(name, "name")?,
                opt_text(on, "on")?,
            )
        };
        let args = if len == 0 {
            Bytes::new()
        } else if args.is_null() {
            return Err(Error::invalid("args is NULL"));
        } else {
            // SAFETY: readable for `len` bytes by the caller's contract.
            Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(args, len) })
        };
        let h = c.c.spawn(name, args, placement(on))?;
        let space = CString::new(h.space()).unwrap_or_default();
        let t = stp_thread {
            h: Mutex::new(h),
            space,
        };
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(t), "out") }
    })
}

/// Waits for the task's end, up to `timeout_ms` (`STP_TIMEOUT`, and it may be joined
/// again): its result bytes as an item in `*result` (free with `stp_item_free`), or how it
/// ended: `STP_TASK_FAILED` (failed or panicked), `STP_CANCELLED`, `STP_UNREACHABLE` (its
/// space left or died), `STP_NOT_FOUND` (no such task there).
///
/// # Safety
/// `t` is a live thread; `result` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_thread_join(
    t: *const stp_thread,
    timeout_ms: i64,
    result: *mut *mut stp_item,
) -> stp_status {
    guard(|| {
        need_out(result, "result")?;
        // SAFETY: forwarded contract.
        let t = unsafe { handle(t, "thread") }?;
        let mut h = t.h.lock().unwrap_or_else(|e| e.into_inner());
        let b = h.join_until(timeout(timeout_ms), &|| false)?;
        let item = boxed(stp_item::new(Item::from(b)));
        // SAFETY: checked writable above.
        unsafe { put_out(result, item, "result") }
    })
}

/// Asks the task to stop: its next cluster call or cancellation check sees it.
///
/// # Safety
/// `t` is a live thread.
#[no_mangle]
pub unsafe extern "C" fn stp_thread_cancel(t: *const stp_thread) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let t = unsafe { handle(t, "thread") }?;
        t.h.lock().unwrap_or_else(|e| e.into_inner()).cancel()?;
        Ok(())
    })
}

/// The id of the space the task runs in (valid while `t` lives).
///
/// # Safety
/// `t` is a live thread.
#[no_mangle]
pub unsafe extern "C" fn stp_thread_space(t: *const stp_thread) -> *const c_char {
    // SAFETY: forwarded contract.
    guard_value(std::ptr::null(), || {
        unsafe { t.as_ref() }.map_or(std::ptr::null(), |t| t.space.as_ptr())
    })
}

/// Releases the handle; the task runs on (nobody joins it).
///
/// # Safety
/// `t` is NULL or a live thread, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_thread_free(t: *mut stp_thread) {
    // SAFETY: forwarded contract.
    unsafe { release(t) }
}

/// Sets the task's result to `data[0..len]`.
///
/// # Safety
/// `task` is the running task; `data` is readable for `len` bytes (or NULL with 0).
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_task_return(
    task: *mut stp_cluster_task,
    data: *const u8,
    len: usize,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let task = unsafe { task.as_mut() }.ok_or_else(|| Error::invalid("task is NULL"))?;
        task.result = if len == 0 {
            Vec::new()
        } else if data.is_null() {
            return Err(Error::invalid("data is NULL"));
        } else {
            // SAFETY: readable for `len` bytes by the caller's contract.
            unsafe { std::slice::from_raw_parts(data, len) }.to_vec()
        };
        Ok(())
    })
}

/// Marks the task failed with `message` (its joiner gets `STP_TASK_FAILED` with it).
///
/// # Safety
/// `task` is the running task; `message` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_task_fail(
    task: *mut stp_cluster_task,
    message: *const c_char,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let task = unsafe { task.as_mut() }.ok_or_else(|| Error::invalid("task is NULL"))?;
        // SAFETY: forwarded contract.
        task.failure = Some(unsafe { text(message, "message") }?.to_owned());
        Ok(())
    })
}

/// Whether the task was asked to stop.
///
/// # Safety
/// `task` is the running task.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_task_cancelled(task: *const stp_cluster_task) -> bool {
    // SAFETY: forwarded contract.
    guard_value(false, || {
        // SAFETY: the context outlives the call the task struct was made for.
        unsafe { task.as_ref() }.is_some_and(|t| unsafe { &*t.ctx }.is_cancelled())
    })
}

/// The cluster the task runs in, as a new handle (free it with `stp_cluster_free`).
///
/// # Safety
/// `task` is the running task; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_task_cluster(
    task: *const stp_cluster_task,
    out: *mut *mut stp_cluster,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let task = unsafe { handle(task, "task") }?;
        // SAFETY: the context outlives the call the task struct was made for.
        let c = unsafe { &*task.ctx }.cluster().clone();
        let id = CString::new(c.id()).unwrap_or_default();
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(stp_cluster { c, id }), "out") }
    })
}

/// The cluster mutex `name` (made at this space if no space has made it).
///
/// # Safety
/// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_mutex_new(
    c: *const stp_cluster,
    name: *const c_char,
    out: *mut *mut stp_cluster_mutex,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let (c, name) = unsafe { (&handle(c, "cluster")?.c, text(name, "name")?) };
        let made = stp_cluster_mutex {
            m: c.mutex(name)?,
            hold: Mutex::new(None),
        };
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(made), "out") }
    })
}

/// The cluster condition `name`.
///
/// # Safety
/// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_cond_new(
    c: *const stp_cluster,
    name: *const c_char,
    out: *mut *mut stp_cluster_cond,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let (c, name) = unsafe { (&handle(c, "cluster")?.c, text(name, "name")?) };
        let made = stp_cluster_cond {
            c: c.condition(name)?,
        };
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(made), "out") }
    })
}

/// The cluster semaphore `name`, with `initial` permits if this space makes it.
///
/// # Safety
/// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_sem_new(
    c: *const stp_cluster,
    name: *const c_char,
    initial: u64,
    out: *mut *mut stp_cluster_sem,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let (c, name) = unsafe { (&handle(c, "cluster")?.c, text(name, "name")?) };
        let made = stp_cluster_sem {
            s: c.semaphore(name, initial)?,
        };
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(made), "out") }
    })
}

/// A place in barrier `name` of `size` members (each participating task takes its own).
///
/// # Safety
/// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_barrier_new(
    c: *const stp_cluster,
    name: *const c_char,
    size: usize,
    out: *mut *mut stp_cluster_barrier,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let (c, name) = unsafe { (&handle(c, "cluster")?.c, text(name, "name")?) };
        let made = stp_cluster_barrier {
            b: Mutex::new(c.barrier(name, size)?),
        };
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(made), "out") }
    })
}

/// The global memory segment `name` of `len` bytes (zeros at first; homed where first
/// touched).
///
/// # Safety
/// `c` is a live cluster; `name` is a NUL-terminated string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_segment_new(
    c: *const stp_cluster,
    name: *const c_char,
    len: usize,
    out: *mut *mut stp_cluster_segment,
) -> stp_status {
    guard(|| {
        need_out(out, "out")?;
        // SAFETY: forwarded contract.
        let (c, name) = unsafe { (&handle(c, "cluster")?.c, text(name, "name")?) };
        let made = stp_cluster_segment {
            s: c.segment(name, len)?,
        };
        // SAFETY: checked writable above.
        unsafe { put_out(out, boxed(made), "out") }
    })
}

/// Locks the mutex, waiting up to `timeout_ms`; `*owner_died` (if not NULL) says whether
/// its previous holder's space died holding it. One hold per handle.
///
/// # Safety
/// `m` is a live mutex; `owner_died` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_mutex_lock(
    m: *const stp_cluster_mutex,
    timeout_ms: i64,
    owner_died: *mut bool,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(m, "mutex") }?;
        let (hold, died) = m.m.lock_raw(timeout(timeout_ms))?;
        *m.hold.lock().unwrap_or_else(|e| e.into_inner()) = Some(hold);
        if !owner_died.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { owner_died.write(died) };
        }
        Ok(())
    })
}

/// Unlocks the mutex this handle holds (`STP_INVALID_ARGUMENT` if it holds none).
///
/// # Safety
/// `m` is a live mutex.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_mutex_unlock(m: *const stp_cluster_mutex) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let m = unsafe { handle(m, "mutex") }?;
        let hold = m
            .hold
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| Error::invalid("this handle does not hold the mutex"))?;
        m.m.unlock_raw(hold)?;
        Ok(())
    })
}

/// Releases the handle (a hold it has is kept until the space leaves).
///
/// # Safety
/// `m` is NULL or a live mutex, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_mutex_free(m: *mut stp_cluster_mutex) {
    // SAFETY: forwarded contract.
    unsafe { release(m) }
}

/// Waits on the condition, releasing `m` (which this handle holds) meanwhile, up to
/// `timeout_ms`; `*signalled` (if not NULL) is false when it timed out. `m` is held again
/// on return, except after an error.
///
/// # Safety
/// `cv` and `m` are live; `signalled` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_cond_wait(
    cv: *const stp_cluster_cond,
    m: *const stp_cluster_mutex,
    timeout_ms: i64,
    signalled: *mut bool,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let (cv, m) = unsafe { (handle(cv, "condition")?, handle(m, "mutex")?) };
        let mut slot = m.hold.lock().unwrap_or_else(|e| e.into_inner());
        let hold = slot
            .take()
            .ok_or_else(|| Error::invalid("a condition wait needs the mutex held"))?;
        let (hold, _, timed_out) = cv.c.wait_raw(&m.m, hold, timeout(timeout_ms))?;
        *slot = Some(hold);
        if !signalled.is_null() {
            // SAFETY: non-NULL and writable by the caller's contract.
            unsafe { signalled.write(!timed_out) };
        }
        Ok(())
    })
}

/// Wakes one waiter.
///
/// # Safety
/// `cv` is a live condition.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_cond_signal(cv: *const stp_cluster_cond) -> stp_status {
    // SAFETY: forwarded contract.
    guard(|| Ok(unsafe { handle(cv, "condition") }?.c.signal()?))
}

/// Wakes every waiter.
///
/// # Safety
/// `cv` is a live condition.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_cond_broadcast(cv: *const stp_cluster_cond) -> stp_status {
    // SAFETY: forwarded contract.
    guard(|| Ok(unsafe { handle(cv, "condition") }?.c.broadcast()?))
}

/// Releases the handle.
///
/// # Safety
/// `cv` is NULL or a live condition, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_cond_free(cv: *mut stp_cluster_cond) {
    // SAFETY: forwarded contract.
    unsafe { release(cv) }
}

/// Takes a permit, waiting up to `timeout_ms`.
///
/// # Safety
/// `s` is a live semaphore.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_sem_wait(
    s: *const stp_cluster_sem,
    timeout_ms: i64,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle(s, "semaphore") }?;
        match timeout(timeout_ms) {
            Some(t) => s.s.wait_timeout(t)?,
            None => s.s.wait()?,
        }
        Ok(())
    })
}

/// Gives a permit back.
///
/// # Safety
/// `s` is a live semaphore.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_sem_post(s: *const stp_cluster_sem) -> stp_status {
    // SAFETY: forwarded contract.
    guard(|| Ok(unsafe { handle(s, "semaphore") }?.s.post()?))
}

/// Releases the handle.
///
/// # Safety
/// `s` is NULL or a live semaphore, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_sem_free(s: *mut stp_cluster_sem) {
    // SAFETY: forwarded contract.
    unsafe { release(s) }
}

/// Waits until every member reached the barrier (`STP_UNREACHABLE` when a member left or
/// died, `STP_TIMEOUT` past the cluster's timeout).
///
/// # Safety
/// `b` is a live barrier.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_barrier_wait(b: *const stp_cluster_barrier) -> stp_status {
    // SAFETY: forwarded contract.
    guard(|| {
        // SAFETY: forwarded contract.
        let b = unsafe { handle(b, "barrier") }?;
        b.b.lock().unwrap_or_else(|e| e.into_inner()).wait()?;
        Ok(())
    })
}

/// This member's place in the barrier, from 0.
///
/// # Safety
/// `b` is a live barrier.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_barrier_rank(b: *const stp_cluster_barrier) -> usize {
    // SAFETY: forwarded contract.
    guard_value(0, || {
        unsafe { b.as_ref() }.map_or(0, |b| b.b.lock().unwrap_or_else(|e| e.into_inner()).rank())
    })
}

/// Releases the place.
///
/// # Safety
/// `b` is NULL or a live barrier, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_barrier_free(b: *mut stp_cluster_barrier) {
    // SAFETY: forwarded contract.
    unsafe { release(b) }
}

/// Reads `len` bytes at `offset` into `buf`.
///
/// # Safety
/// `s` is a live segment; `buf` is writable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_segment_read(
    s: *const stp_cluster_segment,
    offset: usize,
    buf: *mut u8,
    len: usize,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle(s, "segment") }?;
        if buf.is_null() && len > 0 {
            return Err(Error::invalid("buf is NULL"));
        }
        let mut tmp = vec![0; len];
        s.s.read(offset, &mut tmp)?;
        if len > 0 {
            // SAFETY: writable for `len` bytes by the caller's contract.
            unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), buf, len) };
        }
        Ok(())
    })
}

/// Writes `data[0..len]` at `offset` (seen elsewhere after this space releases it).
///
/// # Safety
/// `s` is a live segment; `data` is readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_segment_write(
    s: *const stp_cluster_segment,
    offset: usize,
    data: *const u8,
    len: usize,
) -> stp_status {
    guard(|| {
        // SAFETY: forwarded contract.
        let s = unsafe { handle(s, "segment") }?;
        if data.is_null() && len > 0 {
            return Err(Error::invalid("data is NULL"));
        }
        let d = if len == 0 {
            &[][..]
        } else {
            // SAFETY: readable for `len` bytes by the caller's contract.
            unsafe { std::slice::from_raw_parts(data, len) }
        };
        s.s.write(offset, d)?;
        Ok(())
    })
}

/// Makes this space's writes visible to the next acquirer.
///
/// # Safety
/// `s` is a live segment.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_segment_release(s: *const stp_cluster_segment) -> stp_status {
    // SAFETY: forwarded contract.
    guard(|| Ok(unsafe { handle(s, "segment") }?.s.release()?))
}

/// Makes others' releases visible here.
///
/// # Safety
/// `s` is a live segment.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_segment_acquire(s: *const stp_cluster_segment) -> stp_status {
    // SAFETY: forwarded contract.
    guard(|| Ok(unsafe { handle(s, "segment") }?.s.acquire()?))
}

/// Releases the handle.
///
/// # Safety
/// `s` is NULL or a live segment, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn stp_cluster_segment_free(s: *mut stp_cluster_segment) {
    // SAFETY: forwarded contract.
    unsafe { release(s) }
}
