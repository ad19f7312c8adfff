//! The pthreads face (CableS' single system image): what `<stampede/pthread.h>` maps
//! `pthread_create`, `pthread_join`, mutexes, conditions, barriers and `malloc` onto, so a
//! pthreads program runs across address spaces with only its `#include` changed.
//!
//! - Threads are cluster tasks. A start routine is named by its offset in the program, so
//!   every space runs the same binary; an argument is a pointer, meaningful everywhere when
//!   it points into the global heap.
//! - `malloc` and friends allocate from the global heap once the face has started; memory
//!   allocated before, or by libraries, stays private and is freed where it was made.
//! - A mutex, condition or barrier is named by its address: one in the global heap is one
//!   object for the whole cluster, one elsewhere (a static) belongs to its address space.
//! - Thread exit and cancellation unwind the start routine with `longjmp` in the header's
//!   trampoline, which this face calls for every thread it runs.
//!
//! The program's first address space joins an application on loopback, starts a node
//! agent, and attaches `STAMPEDE_SPACES` − 1 more spaces (default 1: none), each this
//! program again, which serve threads instead of running `main`. Threads go round-robin
//! over the spaces (`STAMPEDE_PLACEMENT`: `round-robin`, `least-loaded` or `here`).

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use stampede_cluster::{
    Cancellation, Cluster, ClusterError, ClusterOptions, Condition, Heap, JoinHandle,
    Mutex as ClusterMutex, NodeAgent, Placement, Registry, TaskBody, Worker,
};
use stampede_net::{Config, Space};

use crate::error::{guard_value, note};

/// A thread's start routine.
#[allow(non_camel_case_types)]
pub type stp_pthread_start_fn = Option<unsafe extern "C" fn(*mut c_void) -> *mut c_void>;

/// Calls a start routine where `pthread_exit` can leave it (the header's trampoline).
#[allow(non_camel_case_types)]
pub type stp_pthread_trampoline =
    Option<unsafe extern "C" fn(stp_pthread_start_fn, *mut c_void) -> *mut c_void>;

/// A cluster thread's id: its spawn's number (0 for the program's first thread).
#[allow(non_camel_case_types)]
pub type stp_pthread_t = u64;

/// A mutex, named by its address (the bytes are not used).
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct stp_pthread_mutex_t {
    _opaque: [u64; 5],
}

/// A condition variable, named by its address.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct stp_pthread_cond_t {
    _opaque: [u64; 6],
}

/// A barrier: its count, arrivals and phase, kept under a mutex and a condition named by
/// its address (as CableS' pthreads barrier), so any threads may wait in any phase.
#[repr(C)]
#[allow(non_camel_case_types)]
pub struct stp_pthread_barrier_t {
    count: u32,
    arrived: u32,
    phase: u64,
    _opaque: [u64; 2],
}

/// How long attaching a space may take.
const T: Duration = Duration::from_secs(60);

/// The face's cluster: waits have no limit but their own, as pthreads' have none (a space
/// that dies still ends the waits on it).
fn options() -> ClusterOptions {
    ClusterOptions::default().timeout(None)
}

struct Face {
    space: Space,
    cluster: Cluster,
    heap: Heap,
    agent: Option<NodeAgent>,
    attached: Vec<String>,
    placement: Placement,
    threads: Mutex<HashMap<u64, JoinHandle>>,
    mutexes: Mutex<HashMap<(&'static str, usize), Arc<Held>>>,
    conds: Mutex<HashMap<(&'static str, usize), Condition>>,
}

/// A mutex and the hold of its current owner in this space.
struct Held {
    mutex: ClusterMutex,
    hold: Mutex<Option<u64>>,
}

impl Held {
    /// The hold this space has, taken for an unlock or a wait; EPERM without one.
    fn take_hold(&self) -> Result<u64, (c_int, String)> {
        self.hold
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or((libc::EPERM, "the mutex is not held here".into()))
    }

    fn put_hold(&self, hold: u64) {
        *self.hold.lock().unwrap_or_else(|e| e.into_inner()) = Some(hold);
    }
}

static FACE: Mutex<Option<Arc<Face>>> = Mutex::new(None);
static TRAMPOLINE: OnceLock<stp_pthread_trampoline> = OnceLock::new();

thread_local! {
    /// The trampoline's jump buffer of the thread running here, and `pthread_exit`'s value.
    static FRAME: Cell<(*mut c_void, *mut c_void)> = const { Cell::new((std::ptr::null_mut(), std::ptr::null_mut())) };
    /// The innermost cleanup handler the header's `pthread_cleanup_push` pushed.
    static CLEANUP: Cell<*mut c_void> = const { Cell::new(std::ptr::null_mut()) };
    /// The running thread's id and cancellation.
    static SELF: std::cell::RefCell<Option<(u64, Cancellation)>> = const { std::cell::RefCell::new(None) };
}

fn face() -> Option<Arc<Face>> {
    FACE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Runs a pthreads call: an error becomes its errno value, with the message kept for
/// `stp_last_error()`.
fn call(f: impl FnOnce() -> Result<c_int, (c_int, String)>) -> c_int {
    guard_value(libc::EAGAIN, || match f() {
        Ok(v) => v,
        Err((code, message)) => {
            note(message);
            code
        }
    })
}

fn started() -> Result<Arc<Face>, (c_int, String)> {
    face().ok_or((
        libc::EPERM,
        "the pthreads face has not started (pthread_start)".into(),
    ))
}

/// The errno value a cluster error stands for.
fn errno(e: ClusterError) -> (c_int, String) {
    let code = match &e {
        ClusterError::InvalidArgument(_) | ClusterError::UnknownTask { .. } => libc::EINVAL,
        ClusterError::Timeout { .. } => libc::ETIMEDOUT,
        ClusterError::NotOwner { .. } => libc::EPERM,
        ClusterError::Cancelled => libc::ECANCELED,
        ClusterError::NoSpace(_) => libc::EAGAIN,
        // The object's home died with its state.
        ClusterError::Lost { .. } => libc::ENOTRECOVERABLE,
        _ => libc::EIO,
    };
    (code, e.to_string())
}

/// The program's own load address and where its code ends: start routines are named by
/// their offset from it, the same in every space running the program.
fn program() -> (usize, usize) {
    static PROGRAM: OnceLock<(usize, usize)> = OnceLock::new();
    *PROGRAM.get_or_init(|| {
        unsafe extern "C" fn first(
            info: *mut libc::dl_phdr_info,
            _: libc::size_t,
            out: *mut c_void,
        ) -> c_int {
            // SAFETY: the loader passes a valid entry; `out` is the pair below.
            unsafe {
                let info = &*info;
                let mut end = 0usize;
                for i in 0..info.dlpi_phnum as usize {
                    let ph = &*info.dlpi_phdr.add(i);
                    if ph.p_type == libc::PT_LOAD {
                        end = end.max(ph.p_vaddr as usize + ph.p_memsz as usize);
                    }
                }
                *out.cast::<(usize, usize)>() =
                    (info.dlpi_addr as usize, info.dlpi_addr as usize + end);
            }
            // The first entry is the program itself.
            1
        }
        let mut r = (0usize, 0usize);
        // SAFETY: the callback writes the pair it is given.
        unsafe { libc::dl_iterate_phdr(Some(first), (&mut r as *mut (usize, usize)).cast()) };
        r
    })
}

/// The body that runs start routine `name` ("c:<offset>") through the trampoline.
fn resolve(name: &str) -> Option<Arc<TaskBody>> {
    let off = usize::from_str_radix(name.strip_prefix("c:")?, 16).ok()?;
    let (base, end) = program();
    let at = base.checked_add(off).filter(|a| *a < end)?;
    let tramp = (*TRAMPOLINE.get()?)?;
    // SAFETY: every space runs the same program, so the offset names the same function.
    let start: stp_pthread_start_fn =
        unsafe { std::mem::transmute::<usize, stp_pthread_start_fn>(at) };
    Some(Arc::new(
        move |ctx: &stampede_cluster::TaskContext, args: Bytes| {
            let arg = args.get(..8).map_or(0, |b| {
                u64::from_le_bytes(b.try_into().expect("eight bytes"))
            });
            SELF.with(|s| *s.borrow_mut() = Some((ctx.id().seq, ctx.cancellation())));
            // SAFETY: the trampoline calls the start routine with the creator's argument.
            let ret = unsafe { tramp(start, arg as usize as *mut c_void) };
            SELF.with(|s| *s.borrow_mut() = None);
            Ok(Bytes::copy_from_slice(&(ret as usize as u64).to_le_bytes()))
        },
    ))
}

/// Start routines by offset, and the tasks registered through the C API by name.
fn registry() -> Registry {
    Registry::new().resolver(|name| resolve(name).or_else(|| crate::cluster::resolve(name)))
}

fn env_usize(name: &str, default: usize) -> Result<usize, (c_int, String)> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map_err(|_| (libc::EINVAL, format!("{name}={v:?} is not a number"))),
        Err(_) => Ok(default),
    }
}

fn begin() -> Result<Face, (c_int, String)> {
    let spaces = env_usize("STAMPEDE_SPACES", 1)?.max(1);
    let placement = match std::env::var("STAMPEDE_PLACEMENT").as_deref() {
        Err(_) | Ok("round-robin") => Placement::RoundRobin,
        Ok("least-loaded") => Placement::LeastLoaded,
        Ok("here") => Placement::Here,
        Ok(other) => {
            return Err((
                libc::EINVAL,
                format!("STAMPEDE_PLACEMENT={other:?}: round-robin, least-loaded or here"),
            ))
        }
    };
    let io = |e: std::io::Error| (libc::EIO, e.to_string());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(io)?
        .port();
    let ep = format!("tcp/127.0.0.1:{port}");
    let app = format!("pthreads-{}", std::process::id());
    let space =
        Space::join(&app, Config::router(ep.clone())).map_err(|e| (libc::EIO, e.to_string()))?;
    let opts = options();
    let cluster = Cluster::start(&space, registry(), opts).map_err(errno)?;
    let heap = cluster.heap().map_err(errno)?;
    let mut agent = None;
    let mut attached = Vec::new();
    if spaces > 1 {
        let a = NodeAgent::start(&space, "localhost", vec![ep]).map_err(errno)?;
        let exe = std::env::current_exe().map_err(io)?;
        let cmd = [exe.to_string_lossy().into_owned()];
        for _ in 1..spaces {
            attached.push(cluster.attach(&cmd, T).map_err(errno)?);
        }
        agent = Some(a);
    }
    Ok(Face::new(space, cluster, heap, agent, attached, placement))
}

impl Face {
    fn new(
        space: Space,
        cluster: Cluster,
        heap: Heap,
        agent: Option<NodeAgent>,
        attached: Vec<String>,
        placement: Placement,
    ) -> Face {
        Face {
            space,
            cluster,
            heap,
            agent,
            attached,
            placement,
            threads: Mutex::new(HashMap::new()),
            mutexes: Mutex::new(HashMap::new()),
            conds: Mutex::new(HashMap::new()),
        }
    }
}

/// Starts the face (the header calls it before `main`, and `pthread_start()` again does
/// nothing). In a space the program attached, serves threads until detached and then ends
/// the process; it never returns there. Returns 0 or an errno value.
#[no_mangle]
pub extern "C" fn stp_pthread_start(trampoline: stp_pthread_trampoline) -> c_int {
    call(|| {
        let _ = TRAMPOLINE.set(trampoline);
        let mut f = FACE.lock().unwrap_or_else(|e| e.into_inner());
        if f.is_some() {
            return Ok(0);
        }
        stampede_net::size_zenoh_runtime_in_main();
        if let Some(w) = Worker::from_env() {
            // An attached space: serve threads, with the face's calls working in them,
            // until detached; `main` never runs here.
            let (space, cluster) = match w.start(registry(), options()) {
                Ok(x) => x,
                Err(e) => {
                    eprintln!("stampede: this address space did not start: {e}");
                    std::process::exit(1);
                }
            };
            let heap = match cluster.heap() {
                Ok(h) => h,
                Err(e) => {
                    // Never on to `main`: this process exists to serve threads.
                    eprintln!("stampede: this address space has no global heap: {e}");
                    std::process::exit(1);
                }
            };
            let face = Arc::new(Face::new(
                space,
                cluster,
                heap,
                None,
                Vec::new(),
                Placement::Here,
            ));
            *f = Some(face.clone());
            drop(f);
            face.cluster.wait_detached();
            drop(face);
            stp_pthread_end();
            std::process::exit(0);
        }
        *f = Some(Arc::new(begin()?));
        // At exit the calling thread's thread-locals are gone, which the network layer
        // needs: a fresh thread leaves for it.
        extern "C" fn at_exit() {
            if let Ok(t) = std::thread::Builder::new().spawn(|| stp_pthread_end()) {
                let _ = t.join();
            }
        }
        // SAFETY: registers a function that takes no arguments.
        unsafe { libc::atexit(at_exit) };
        Ok(0)
    })
}

/// Ends the face: detaches the spaces it attached and leaves the application. Threads
/// still running elsewhere are lost. Runs at exit too (from `exit` or a return from `main`).
#[no_mangle]
pub extern "C" fn stp_pthread_end() {
    guard_value((), || {
        let Some(f) = FACE.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        if f.agent.is_some() && std::env::var_os("STAMPEDE_REPORT").is_some() {
            report(&f);
        }
        for id in &f.attached {
            if let Err(e) = f.cluster.detach(id, T) {
                eprintln!("stampede: detaching {id}: {e}");
            }
        }
        match Arc::try_unwrap(f) {
            Ok(f) => {
                if let Some(a) = f.agent {
                    a.stop();
                }
                f.cluster.stop();
                f.space.leave();
            }
            Err(f) => f.space.clone().leave(),
        }
    })
}

/// With `STAMPEDE_REPORT` set, the program's first space prints, at its end, where threads
/// ran and CableS Table 5's counts: each operation's calls and mean milliseconds, summed
/// over the spaces.
fn report(f: &Face) {
    use stampede_cluster::ClusterOp;
    let mut ran = Vec::new();
    let mut sum = vec![(0u64, 0u128); ClusterOp::ALL.len()];
    for (member, stats) in stampede_cluster::cluster_stats(&f.space) {
        match stats {
            Ok(s) => {
                ran.push(format!("{member}: {}", s.ran));
                for (i, &op) in ClusterOp::ALL.iter().enumerate() {
                    let (n, d) = s.op(op);
                    sum[i].0 += n;
                    sum[i].1 += d.as_nanos();
                }
            }
            Err(e) => ran.push(format!("{member}: {e}")),
        }
    }
    eprintln!(
        "stampede: {} address spaces; threads run in each: {}",
        ran.len(),
        ran.join(", ")
    );
    let cells: Vec<String> = ClusterOp::ALL
        .iter()
        .zip(&sum)
        .filter(|(_, (n, _))| *n > 0)
        .map(|(op, (n, ns))| format!("{} {n} × {:.3} ms", op.name(), *ns as f64 / *n as f64 / 1e6))
        .collect();
    eprintln!("stampede: {}", cells.join(", "));
}

/// Remembers the calling thread's jump buffer for `pthread_exit`; returns the previous.
#[no_mangle]
pub extern "C" fn stp_pthread_frame_enter(jb: *mut c_void) -> *mut c_void {
    CLEANUP.with(|c| c.set(std::ptr::null_mut()));
    FRAME.with(|f| {
        let (prev, _) = f.get();
        f.set((jb, std::ptr::null_mut()));
        prev
    })
}

/// Restores the jump buffer `prev` (from `stp_pthread_frame_enter`).
#[no_mangle]
pub extern "C" fn stp_pthread_frame_leave(prev: *mut c_void) {
    FRAME.with(|f| f.set((prev, std::ptr::null_mut())));
}

/// Records `value` as the thread's exit value; returns the jump buffer to leave by, or NULL
/// on a thread the face did not start.
#[no_mangle]
pub extern "C" fn stp_pthread_frame_exit(value: *mut c_void) -> *mut c_void {
    FRAME.with(|f| {
        let (jb, _) = f.get();
        f.set((jb, value));
        jb
    })
}

/// The innermost cleanup handler of the calling thread (the header's
/// `pthread_cleanup_push` keeps them on its stack).
#[no_mangle]
pub extern "C" fn stp_pthread_cleanup_top() -> *mut c_void {
    CLEANUP.with(Cell::get)
}

/// Makes `top` the innermost cleanup handler of the calling thread.
#[no_mangle]
pub extern "C" fn stp_pthread_cleanup_set(top: *mut c_void) {
    CLEANUP.with(|c| c.set(top));
}

/// The value the thread passed to `pthread_exit`.
#[no_mangle]
pub extern "C" fn stp_pthread_exit_value() -> *mut c_void {
    FRAME.with(|f| f.get().1)
}

/// Creates a thread running `start(arg)` in the space the placement picks. `attr` is
/// ignored. Returns 0 or an errno value (EINVAL for a start routine outside the program).
///
/// # Safety
/// `thread` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_pthread_create(
    thread: *mut stp_pthread_t,
    attr: *const c_void,
    start: stp_pthread_start_fn,
    arg: *mut c_void,
) -> c_int {
    let _ = attr; // attributes are not supported; defaults apply
    call(|| {
        let f = started()?;
        let start = start.ok_or((libc::EINVAL, "no start routine".to_string()))? as usize;
        let (base, end) = program();
        if !(base..end).contains(&start) {
            return Err((
                libc::EINVAL,
                "a thread's start routine must be in the program itself (not a library)".into(),
            ));
        }
        if thread.is_null() {
            return Err((libc::EINVAL, "thread is NULL".into()));
        }
        let name = format!("c:{:x}", start - base);
        let h = f
            .cluster
            .spawn(
                &name,
                (arg as usize as u64).to_le_bytes().to_vec(),
                f.placement.clone(),
            )
            .map_err(errno)?;
        let id = h.id().seq;
        f.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, h);
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe { *thread = id };
        Ok(0)
    })
}

/// Waits for `thread` to end and stores its return value (PTHREAD_CANCELED if cancelled).
/// ESRCH for a thread not created in this space or joined already.
///
/// # Safety
/// `ret` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn stp_pthread_join(thread: stp_pthread_t, ret: *mut *mut c_void) -> c_int {
    call(|| {
        let f = started()?;
        let mut h = f
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&thread)
            .ok_or((
                libc::ESRCH,
                format!("no thread {thread} to join in this space"),
            ))?;
        let value = match h.join_until(None, &|| stp_pthread_cancelled()) {
            Ok(b) => b.get(..8).map_or(0, |b| {
                u64::from_le_bytes(b.try_into().expect("eight bytes"))
            }) as usize as *mut c_void,
            // The joiner was cancelled: the thread can still be joined.
            Err(ClusterError::Cancelled) if stp_pthread_cancelled() => {
                f.threads
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(thread, h);
                return Ok(libc::ECANCELED);
            }
            Err(ClusterError::Cancelled) => usize::MAX as *mut c_void,
            Err(e) => return Err(errno(e)),
        };
        if !ret.is_null() {
            // SAFETY: checked non-NULL; the caller's contract.
            unsafe { *ret = value };
        }
        Ok(0)
    })
}

/// Forgets `thread`: nobody will join it.
#[no_mangle]
pub extern "C" fn stp_pthread_detach(thread: stp_pthread_t) -> c_int {
    call(|| {
        let f = started()?;
        let gone = f
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&thread);
        gone.map(|_| 0)
            .ok_or((libc::ESRCH, format!("no thread {thread} in this space")))
    })
}

/// Asks `thread` to stop at its next cancellation point.
#[no_mangle]
pub extern "C" fn stp_pthread_cancel(thread: stp_pthread_t) -> c_int {
    call(|| {
        let f = started()?;
        let t = f.threads.lock().unwrap_or_else(|e| e.into_inner());
        let h = t
            .get(&thread)
            .ok_or((libc::ESRCH, format!("no thread {thread} in this space")))?;
        h.cancel().map_err(errno)?;
        Ok(0)
    })
}

/// Whether the calling thread was asked to stop (the header's cancellation points).
#[no_mangle]
pub extern "C" fn stp_pthread_cancelled() -> bool {
    SELF.with(|s| s.borrow().as_ref().is_some_and(|(_, c)| c.is_cancelled()))
}

/// The calling thread's id (0 for the program's first thread and threads it made itself).
#[no_mangle]
pub extern "C" fn stp_pthread_self() -> stp_pthread_t {
    SELF.with(|s| s.borrow().as_ref().map_or(0, |(id, _)| *id))
}

/// The cluster-wide name of the object at `addr`: one object for the whole cluster in the
/// global heap, this space's own elsewhere.
fn object(f: &Face, kind: &str, addr: usize) -> String {
    if Heap::contains(addr) {
        format!("pt.{kind}.{addr:x}")
    } else {
        format!("pt.{kind}.{}.{addr:x}", f.cluster.id())
    }
}

/// The mutex at `addr` (`kind` "m"; a barrier's is "bm").
fn held_at(f: &Face, kind: &'static str, addr: usize) -> Result<Arc<Held>, (c_int, String)> {
    if addr == 0 {
        return Err((libc::EINVAL, "mutex is NULL".into()));
    }
    let mut m = f.mutexes.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = m.get(&(kind, addr)) {
        return Ok(h.clone());
    }
    let mutex = f.cluster.mutex(&object(f, kind, addr)).map_err(errno)?;
    let h = Arc::new(Held {
        mutex,
        hold: Mutex::new(None),
    });
    m.insert((kind, addr), h.clone());
    Ok(h)
}

fn held(f: &Face, addr: usize) -> Result<Arc<Held>, (c_int, String)> {
    held_at(f, "m", addr)
}

/// Readies a mutex (optional: one is made at first use). `attr` is ignored.
#[no_mangle]
pub extern "C" fn stp_pthread_mutex_init(
    mutex: *mut stp_pthread_mutex_t,
    attr: *const c_void,
) -> c_int {
    let _ = attr; // attributes are not supported; defaults apply
    call(|| {
        held(&*started()?, mutex as usize)?;
        Ok(0)
    })
}

/// Forgets a mutex in this space.
#[no_mangle]
pub extern "C" fn stp_pthread_mutex_destroy(mutex: *mut stp_pthread_mutex_t) -> c_int {
    call(|| {
        let f = started()?;
        f.mutexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&("m", mutex as usize));
        Ok(0)
    })
}

/// Locks the mutex `h`, through a cancellation (a mutex lock is not a cancellation point).
fn lock_held(h: &Held) -> Result<bool, (c_int, String)> {
    let (hold, owner_died) = h.mutex.lock_raw_until(None, &|| false).map_err(errno)?;
    h.put_hold(hold);
    Ok(owner_died)
}

/// Locks a mutex; EOWNERDEAD (and held) when its previous owner's space died holding it.
#[no_mangle]
pub extern "C" fn stp_pthread_mutex_lock(mutex: *mut stp_pthread_mutex_t) -> c_int {
    call(|| {
        let h = held(&*started()?, mutex as usize)?;
        Ok(if lock_held(&h)? { libc::EOWNERDEAD } else { 0 })
    })
}

/// Locks a mutex if it is free now (one round trip to its home); EBUSY otherwise.
#[no_mangle]
pub extern "C" fn stp_pthread_mutex_trylock(mutex: *mut stp_pthread_mutex_t) -> c_int {
    call(|| {
        let h = held(&*started()?, mutex as usize)?;
        match h.mutex.try_lock_raw().map_err(errno)? {
            Some((hold, owner_died)) => {
                h.put_hold(hold);
                Ok(if owner_died { libc::EOWNERDEAD } else { 0 })
            }
            None => Ok(libc::EBUSY),
        }
    })
}

/// Unlocks a mutex this space holds; EPERM otherwise.
#[no_mangle]
pub extern "C" fn stp_pthread_mutex_unlock(mutex: *mut stp_pthread_mutex_t) -> c_int {
    call(|| {
        let h = held(&*started()?, mutex as usize)?;
        let hold = h.take_hold()?;
        h.mutex.unlock_raw(hold).map_err(errno)?;
        Ok(0)
    })
}

/// The condition at `addr` (`kind` "c"; a barrier's is "bc").
fn condition_of(f: &Face, kind: &'static str, addr: usize) -> Result<Condition, (c_int, String)> {
    if addr == 0 {
        return Err((libc::EINVAL, "condition is NULL".into()));
    }
    let mut c = f.conds.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(x) = c.get(&(kind, addr)) {
        return Ok(x.clone());
    }
    let x = f.cluster.condition(&object(f, kind, addr)).map_err(errno)?;
    c.insert((kind, addr), x.clone());
    Ok(x)
}

fn condition_at(f: &Face, addr: usize) -> Result<Condition, (c_int, String)> {
    condition_of(f, "c", addr)
}

/// Readies a condition (optional). `attr` is ignored.
#[no_mangle]
pub extern "C" fn stp_pthread_cond_init(
    cond: *mut stp_pthread_cond_t,
    attr: *const c_void,
) -> c_int {
    let _ = attr; // attributes are not supported; defaults apply
    call(|| {
        condition_at(&*started()?, cond as usize)?;
        Ok(0)
    })
}

/// Forgets a condition in this space.
#[no_mangle]
pub extern "C" fn stp_pthread_cond_destroy(cond: *mut stp_pthread_cond_t) -> c_int {
    call(|| {
        let f = started()?;
        f.conds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&("c", cond as usize));
        Ok(0)
    })
}

/// Waits on a condition, releasing the mutex meanwhile. With `has_deadline`, gives up at
/// `sec`.`nsec` (real-time clock) with ETIMEDOUT, holding the mutex again. ECANCELED when
/// the thread was cancelled (the mutex held again).
#[no_mangle]
pub extern "C" fn stp_pthread_cond_wait(
    cond: *mut stp_pthread_cond_t,
    mutex: *mut stp_pthread_mutex_t,
    has_deadline: bool,
    sec: i64,
    nsec: i64,
) -> c_int {
    call(|| {
        let f = started()?;
        let c = condition_at(&f, cond as usize)?;
        let h = held(&f, mutex as usize)?;
        let hold = h.take_hold()?;
        let timeout = has_deadline.then(|| {
            let at =
                UNIX_EPOCH + Duration::new(sec.max(0) as u64, nsec.clamp(0, 999_999_999) as u32);
            at.duration_since(SystemTime::now()).unwrap_or_default()
        });
        match c.wait_raw(&h.mutex, hold, timeout) {
            Ok((hold, _, timed_out)) => {
                h.put_hold(hold);
                Ok(if timed_out { libc::ETIMEDOUT } else { 0 })
            }
            Err(ClusterError::Cancelled) => {
                // Cancelled while waiting: the mutex is taken again first, as POSIX has it.
                lock_held(&h)?;
                Ok(libc::ECANCELED)
            }
            Err(e) => Err(errno(e)),
        }
    })
}

/// Wakes one waiter of a condition.
#[no_mangle]
pub extern "C" fn stp_pthread_cond_signal(cond: *mut stp_pthread_cond_t) -> c_int {
    call(|| {
        condition_at(&*started()?, cond as usize)?
            .signal()
            .map_err(errno)?;
        Ok(0)
    })
}

/// Wakes every waiter of a condition.
#[no_mangle]
pub extern "C" fn stp_pthread_cond_broadcast(cond: *mut stp_pthread_cond_t) -> c_int {
    call(|| {
        condition_at(&*started()?, cond as usize)?
            .broadcast()
            .map_err(errno)?;
        Ok(0)
    })
}

/// Readies a barrier of `count` threads. `attr` is ignored.
///
/// # Safety
/// `barrier` is writable.
#[no_mangle]
pub unsafe extern "C" fn stp_pthread_barrier_init(
    barrier: *mut stp_pthread_barrier_t,
    attr: *const c_void,
    count: u32,
) -> c_int {
    let _ = attr; // attributes are not supported; defaults apply
    call(|| {
        if barrier.is_null() || count == 0 {
            return Err((
                libc::EINVAL,
                "a barrier needs an address and members".into(),
            ));
        }
        // SAFETY: checked non-NULL; the caller's contract (no thread waits on it yet).
        unsafe {
            (*barrier).count = count;
            (*barrier).arrived = 0;
            (*barrier).phase = 0;
        }
        Ok(0)
    })
}

/// Forgets a barrier's objects in this space.
#[no_mangle]
pub extern "C" fn stp_pthread_barrier_destroy(barrier: *mut stp_pthread_barrier_t) -> c_int {
    call(|| {
        let f = started()?;
        let addr = barrier as usize;
        f.mutexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&("bm", addr));
        f.conds
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&("bc", addr));
        Ok(0)
    })
}

/// Waits until `count` threads wait on the barrier, whichever threads and spaces they are;
/// one of them gets PTHREAD_BARRIER_SERIAL_THREAD, the others 0. Not a cancellation point.
///
/// # Safety
/// `barrier` was initialised.
#[no_mangle]
pub unsafe extern "C" fn stp_pthread_barrier_wait(barrier: *mut stp_pthread_barrier_t) -> c_int {
    call(|| {
        let f = started()?;
        let addr = barrier as usize;
        if barrier.is_null() {
            return Err((libc::EINVAL, "barrier is NULL".into()));
        }
        let h = held_at(&f, "bm", addr)?;
        let c = condition_of(&f, "bc", addr)?;
        lock_held(&h)?;
        // Under the barrier's mutex, so its fields are this space's to read and write (the
        // lock brought them up to date; the unlock releases them).
        // SAFETY: initialised by the caller's contract, and only touched under the mutex.
        let (count, phase) = unsafe {
            (
                std::ptr::read_volatile(&(*barrier).count),
                std::ptr::read_volatile(&(*barrier).phase),
            )
        };
        // SAFETY: as above.
        let arrived = unsafe { std::ptr::read_volatile(&(*barrier).arrived) } + 1;
        let serial = arrived >= count;
        if serial {
            // SAFETY: as above.
            unsafe {
                std::ptr::write_volatile(&mut (*barrier).arrived, 0);
                std::ptr::write_volatile(&mut (*barrier).phase, phase.wrapping_add(1));
            }
            c.broadcast().map_err(errno)?;
        } else {
            // SAFETY: as above.
            unsafe { std::ptr::write_volatile(&mut (*barrier).arrived, arrived) };
            // SAFETY: as above; each wait returns with the mutex held again.
            while unsafe { std::ptr::read_volatile(&(*barrier).phase) } == phase {
                let hold = h.take_hold()?;
                let (hold, _, _) = c
                    .wait_raw_until(&h.mutex, hold, None, &|| false)
                    .map_err(errno)?;
                h.put_hold(hold);
            }
        }
        let hold = h.take_hold()?;
        h.mutex.unlock_raw(hold).map_err(errno)?;
        Ok(if serial {
            libc::PTHREAD_BARRIER_SERIAL_THREAD
        } else {
            0
        })
    })
}

/// Size of the header in front of each block of the global heap: its length, so any
/// space can `realloc` it.
const HEADER: usize = 16;

/// `malloc`: from the global heap once the face started, from the C library before.
#[no_mangle]
pub extern "C" fn stp_malloc(len: usize) -> *mut c_void {
    guard_value(std::ptr::null_mut(), || {
        let Some(f) = face() else {
            // SAFETY: the C library's allocator.
            return unsafe { libc::malloc(len) };
        };
        match len.checked_add(HEADER).map(|n| f.heap.alloc(n)) {
            Some(Ok(p)) => {
                // SAFETY: a fresh block of `len + HEADER` bytes.
                unsafe {
                    p.cast::<u64>().write(len as u64);
                    p.add(HEADER).cast()
                }
            }
            Some(Err(e)) => {
                note(e.to_string());
                set_errno(libc::ENOMEM);
                std::ptr::null_mut()
            }
            None => {
                set_errno(libc::ENOMEM);
                std::ptr::null_mut()
            }
        }
    })
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// `calloc`: zeroed.
#[no_mangle]
pub extern "C" fn stp_calloc(n: usize, size: usize) -> *mut c_void {
    let Some(len) = n.checked_mul(size) else {
        set_errno(libc::ENOMEM);
        return std::ptr::null_mut();
    };
    let p = stp_malloc(len);
    if !p.is_null() {
        // SAFETY: `len` bytes just allocated.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, len) };
    }
    p
}

/// `free`: a block of the global heap goes back to the space that allocated it; anything
/// else to the C library.
///
/// # Safety
/// `p` is NULL or a live block of `stp_malloc` or the C library.
#[no_mangle]
pub unsafe extern "C" fn stp_free(p: *mut c_void) {
    if p.is_null() {
        return;
    }
    if !Heap::contains(p as usize) {
        // SAFETY: the caller's contract.
        unsafe { libc::free(p) };
        return;
    }
    guard_value((), || match face() {
        Some(f) => {
            if let Err(e) = f.heap.free(p.cast::<u8>().wrapping_sub(HEADER)) {
                eprintln!("stampede: free({p:p}): {e}");
            }
        }
        None => eprintln!("stampede: free({p:p}) after the pthreads face ended"),
    })
}

/// `realloc`, in whichever space the block was allocated.
///
/// # Safety
/// `p` is NULL or a live block of `stp_malloc` or the C library.
#[no_mangle]
pub unsafe extern "C" fn stp_realloc(p: *mut c_void, len: usize) -> *mut c_void {
    if p.is_null() {
        return stp_malloc(len);
    }
    if !Heap::contains(p as usize) {
        // SAFETY: the caller's contract.
        return unsafe { libc::realloc(p, len) };
    }
    // SAFETY: a block of the global heap starts with its length.
    let old = unsafe { p.cast::<u8>().sub(HEADER).cast::<u64>().read() } as usize;
    let q = stp_malloc(len);
    if !q.is_null() {
        // SAFETY: both blocks hold at least the bytes copied.
        unsafe {
            std::ptr::copy_nonoverlapping(p.cast::<u8>(), q.cast::<u8>(), old.min(len));
            stp_free(p);
        }
    }
    q
}
