//! The global heap (Linux): one range of addresses mapped at the same place in every address
//! space of a cluster, so a pointer into it names the same bytes everywhere, as in CableS'
//! single system image. C programs allocate from it (the pthreads face maps `malloc` onto
//! it) and pass pointers between tasks in any space.
//!
//! The range is cut into chunks of [`CHUNK`] bytes. Each chunk is a global memory segment
//! (`heap.<n>`) whose home is the first space to touch it, kept consistent by the same
//! release consistency, but the program reads and writes it as plain memory: its pages are
//! protected, and the fault handler does what a segment access does.
//! - A chunk not brought up to date since the last acquire has no access; the first touch
//!   asks the home for anything newer (bytes travel only when the version changed) and
//!   opens the pages for reading.
//! - The first write to a page copies it (its twin) and opens it for writing.
//! - A release closes the written pages again and sends, per chunk, the bytes that differ
//!   from the twins to the home, which applies them at once under a new version. A refresh
//!   keeps this space's unreleased bytes over the home's (several writers per page).
//!
//! The runtime reaches the same memory through a second mapping that is never protected, so
//! it never faults on its own work.
//!
//! Each space allocates from arenas of [`ARENA`] bytes that it claims by name (no two spaces
//! claim one); freeing a block of another space's arena asks that space to.
//!
//! Limits: the kernel does not raise a fault for a system call's buffer, so a `read` into a
//! page not yet accessible fails with `EFAULT`; touch such buffers first. A chunk whose
//! home is gone cannot be brought up to date: the access reports it and aborts the process,
//! as a mapped file that vanished would.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use range_alloc::RangeAllocator;

use crate::error::ClusterError;
use crate::home::Kind;
use crate::shared::{lock, object_name, Cluster, Shared};
use crate::wire::Msg;

/// Where the heap starts in every space: far above where programs, libraries and the
/// kernel's mappings go, and above the address sanitizer's shadow.
pub const BASE: usize = 0x3000_0000_0000;
/// Its size: address space only; memory is used as chunks are touched.
pub const LEN: usize = 64 << 30;
/// The unit of homing, fetching and versioning.
pub const CHUNK: usize = 64 << 10;
/// The unit a space claims to allocate from.
pub const ARENA: usize = 1 << 30;
/// Blocks start at multiples of this.
const ALIGN: usize = 16;

/// A process's view of the global heap, bound to the cluster that serves its faults. Cheap
/// to clone.
#[derive(Clone)]
pub struct Heap {
    cluster: Cluster,
}

impl std::fmt::Debug for Heap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Heap")
            .field("base", &format_args!("{BASE:#x}"))
            .field("len", &LEN)
            .finish_non_exhaustive()
    }
}

/// What the heap of this process did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Chunks this space has touched.
    pub chunks: u64,
    /// Faults handled: first touches and touches after an acquire, and first writes.
    pub faults: u64,
    /// Chunks brought up to date from their homes, and of those, how many got new bytes.
    pub refreshes: u64,
    pub refreshed_bytes: u64,
    /// Chunk releases sent to homes, and the bytes they carried.
    pub releases: u64,
    pub released_bytes: u64,
    /// Blocks allocated and freed here, and frees sent to the arena's space.
    pub allocs: u64,
    pub frees: u64,
    pub remote_frees: u64,
    /// Frees refused: not the start of a live block of this space.
    pub bad_frees: u64,
}

/// The two mappings of the heap's memory.
struct Mapping {
    /// The unprotected view the runtime uses.
    shadow: usize,
    page: usize,
}

struct Chunk {
    state: Mutex<ChunkState>,
}

#[derive(Default)]
struct ChunkState {
    home: Option<String>,
    /// The home's version the bytes come from.
    version: u64,
    /// Up to date since the last acquire (accessible); otherwise no access.
    present: bool,
    /// The bytes as last fetched or released, for the pages written since.
    twin: Vec<u8>,
    /// Pages written since the last release, one bit each.
    dirty: u64,
    /// The home left or died.
    lost: Option<String>,
}

#[derive(Default)]
struct Arenas {
    /// This space's arenas, by number, with their free ranges (offsets in the arena).
    mine: Vec<(usize, RangeAllocator<usize>)>,
    /// Live blocks: start address → the range taken (an aligned block starts inside it).
    blocks: HashMap<usize, Range<usize>>,
}

#[derive(Default)]
struct Counts {
    faults: AtomicU64,
    refreshes: AtomicU64,
    refreshed_bytes: AtomicU64,
    releases: AtomicU64,
    released_bytes: AtomicU64,
    allocs: AtomicU64,
    frees: AtomicU64,
    remote_frees: AtomicU64,
    bad_frees: AtomicU64,
}

struct State {
    map: Mapping,
    /// The cluster serving this process's heap.
    bound: Mutex<Option<Weak<Shared>>>,
    chunks: Mutex<HashMap<usize, Arc<Chunk>>>,
    arenas: Mutex<Arenas>,
    counts: Counts,
}

static STATE: OnceLock<Result<State, String>> = OnceLock::new();
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

fn state() -> Result<&'static State, ClusterError> {
    STATE
        .get_or_init(|| {
            // SAFETY: maps fresh memory at an address nothing else uses (the kernel refuses
            // if something does), then installs the handler once.
            let map = unsafe { map()? };
            let st = State {
                map,
                bound: Mutex::new(None),
                chunks: Mutex::new(HashMap::new()),
                arenas: Mutex::new(Arenas::default()),
                counts: Counts::default(),
            };
            // SAFETY: the handler only acts on faults inside the heap, and passes others on.
            unsafe { install()? };
            Ok(st)
        })
        .as_ref()
        .map_err(|e| ClusterError::Heap(e.clone()))
}

fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// One memory file mapped twice: at [`BASE`] with no access, and anywhere for the runtime.
unsafe fn map() -> Result<Mapping, String> {
    let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
    if CHUNK % page != 0 || CHUNK / page > 64 {
        return Err(format!(
            "pages of {page} bytes do not fit the heap's chunks"
        ));
    }
    let fd = libc::memfd_create(c"stampede-heap".as_ptr(), libc::MFD_CLOEXEC);
    if fd < 0 {
        return Err(os_error("memfd_create"));
    }
    if libc::ftruncate(fd, LEN as libc::off_t) != 0 {
        let e = os_error("sizing the heap's memory");
        libc::close(fd);
        return Err(e);
    }
    let flags = libc::MAP_SHARED | libc::MAP_NORESERVE;
    let app = libc::mmap(
        BASE as *mut c_void,
        LEN,
        libc::PROT_NONE,
        flags | libc::MAP_FIXED_NOREPLACE,
        fd,
        0,
    );
    if app == libc::MAP_FAILED || app as usize != BASE {
        let e = os_error(&format!("mapping the heap at {BASE:#x}"));
        if app != libc::MAP_FAILED {
            libc::munmap(app, LEN);
        }
        libc::close(fd);
        return Err(e);
    }
    let shadow = libc::mmap(
        std::ptr::null_mut(),
        LEN,
        libc::PROT_READ | libc::PROT_WRITE,
        flags,
        fd,
        0,
    );
    libc::close(fd);
    if shadow == libc::MAP_FAILED {
        libc::munmap(app, LEN);
        return Err(os_error("mapping the heap's second view"));
    }
    Ok(Mapping {
        shadow: shadow as usize,
        page,
    })
}

unsafe fn install() -> Result<(), String> {
    let mut new: libc::sigaction = std::mem::zeroed();
    new.sa_sigaction = on_fault as *const () as usize;
    // No SA_ONSTACK: the handler talks to other spaces, which needs a thread's own stack,
    // not the small alternate stack kept for overflows.
    new.sa_flags = libc::SA_SIGINFO;
    libc::sigemptyset(&mut new.sa_mask);
    let mut old: libc::sigaction = std::mem::zeroed();
    if libc::sigaction(libc::SIGSEGV, &new, &mut old) != 0 {
        return Err(os_error("installing the heap's fault handler"));
    }
    let _ = PREVIOUS.set(old);
    Ok(())
}

extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers; errno is the
    // interrupted code's, given back as it was.
    let (addr, sent, errno) = unsafe {
        (
            (*info).si_addr() as usize,
            (*info).si_code <= 0,
            *libc::__errno_location(),
        )
    };
    if sent || !(BASE..BASE + LEN).contains(&addr) {
        // A signal some process sent, or a fault outside the heap.
        // SAFETY: forwards the kernel's arguments unchanged.
        unsafe { pass_on(sig, info, ctx, sent) };
        return;
    }
    match catch_unwind(AssertUnwindSafe(|| fault(addr))) {
        // SAFETY: the calling thread's errno.
        Ok(Ok(())) => unsafe { *libc::__errno_location() = errno },
        Ok(Err(e)) => die(&format!(
            "stampede: global memory at {addr:#x} cannot be reached: {e}\n"
        )),
        Err(_) => die(&format!(
            "stampede: the fault handler panicked at {addr:#x}\n"
        )),
    }
}

/// A fault outside the heap goes to the handler that was there before, or ends the
/// process as it would have.
unsafe fn pass_on(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void, sent: bool) {
    let Some(old) = PREVIOUS.get() else {
        return;
    };
    if old.sa_sigaction == libc::SIG_IGN && sent {
    } else if old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN {
        // Back to the default: a fault happens again when the instruction runs again, and
        // a sent signal is raised again; either ends the process.
        libc::sigaction(sig, old, std::ptr::null_mut());
        if sent {
            libc::raise(sig);
        }
    } else if old.sa_flags & libc::SA_SIGINFO != 0 {
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
            std::mem::transmute(old.sa_sigaction);
        f(sig, info, ctx);
    } else {
        let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
        f(sig);
    }
}

fn die(msg: &str) -> ! {
    // SAFETY: write(2) and abort(3) are safe to call from a signal handler.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

fn chunk_name(n: usize) -> String {
    format!("heap.{n}")
}

fn arena_name(n: usize) -> String {
    format!("heap.arena.{n}")
}

fn protect(start: usize, len: usize, prot: libc::c_int) -> Result<(), ClusterError> {
    // SAFETY: changes access to part of the heap's own mapping only.
    if unsafe { libc::mprotect(start as *mut c_void, len, prot) } != 0 {
        return Err(ClusterError::Heap(os_error("changing a chunk's access")));
    }
    Ok(())
}

impl State {
    fn cluster(&self) -> Result<Arc<Shared>, ClusterError> {
        lock(&self.bound)
            .as_ref()
            .and_then(Weak::upgrade)
            .ok_or_else(|| ClusterError::Heap("no cluster serves this process's heap".into()))
    }

    /// The chunks touched, taken out of the map's lock (a fault may hold a chunk's lock for
    /// a round trip).
    fn touched(&self) -> Vec<(usize, Arc<Chunk>)> {
        lock(&self.chunks)
            .iter()
            .map(|(n, c)| (*n, c.clone()))
            .collect()
    }

    fn chunk(&self, n: usize) -> Arc<Chunk> {
        lock(&self.chunks)
            .entry(n)
            .or_insert_with(|| {
                Arc::new(Chunk {
                    state: Mutex::new(ChunkState::default()),
                })
            })
            .clone()
    }

    /// Chunk `n`'s bytes through the runtime's view.
    #[allow(clippy::mut_from_ref)] // callers hold the chunk's lock
    fn bytes(&self, n: usize) -> &mut [u8] {
        // SAFETY: the shadow mapping covers the whole heap; callers hold the chunk's lock,
        // the only way the runtime writes a chunk.
        unsafe { std::slice::from_raw_parts_mut((self.map.shadow + n * CHUNK) as *mut u8, CHUNK) }
    }

    /// Opens chunk `n` after it was brought up to date: written pages for writing, the
    /// others for reading.
    fn open(&self, n: usize, dirty: u64) -> Result<(), ClusterError> {
        let start = BASE + n * CHUNK;
        protect(start, CHUNK, libc::PROT_READ)?;
        let page = self.map.page;
        for p in 0..CHUNK / page {
            if dirty & (1 << p) != 0 {
                protect(start + p * page, page, libc::PROT_READ | libc::PROT_WRITE)?;
            }
        }
        Ok(())
    }

    /// Brings chunk `n` up to date from its home, keeping this space's unreleased writes.
    fn refresh(&self, sh: &Shared, n: usize, st: &mut ChunkState) -> Result<(), ClusterError> {
        if let Some(space) = &st.lost {
            return Err(ClusterError::Lost {
                space: space.clone(),
            });
        }
        let name = chunk_name(n);
        if st.home.is_none() {
            st.home = Some(sh.home(&name, Kind::Segment, CHUNK as u64)?);
            st.version = 0;
            st.twin = vec![0; CHUNK];
        }
        let home = st.home.clone().expect("found above");
        let (version, fresh) = match sh.fetch_segment(&home, &name, st.version) {
            Ok(r) => r,
            Err(e) => {
                if let ClusterError::Lost { space } = &e {
                    st.lost = Some(space.clone());
                }
                return Err(e);
            }
        };
        if let Some(fresh) = fresh {
            if fresh.len() != CHUNK {
                return Err(ClusterError::Heap(format!(
                    "chunk {name} has {} bytes at its home",
                    fresh.len()
                )));
            }
            let bytes = self.bytes(n);
            let page = self.map.page;
            let mine: Vec<(usize, Vec<u8>)> = (0..CHUNK / page)
                .filter(|p| st.dirty & (1 << p) != 0)
                .map(|p| (p * page, bytes[p * page..(p + 1) * page].to_vec()))
                .collect();
            bytes.copy_from_slice(&fresh);
            for (at, written) in mine {
                for (i, b) in written.into_iter().enumerate() {
                    if b != st.twin[at + i] {
                        bytes[at + i] = b;
                    }
                }
            }
            st.twin.copy_from_slice(&fresh);
            st.version = version;
            self.counts
                .refreshed_bytes
                .fetch_add(CHUNK as u64, Ordering::Relaxed);
        }
        self.counts.refreshes.fetch_add(1, Ordering::Relaxed);
        self.open(n, st.dirty)?;
        st.present = true;
        Ok(())
    }

    /// Sends chunk `n`'s writes since its last release to its home.
    fn release(&self, sh: &Shared, n: usize, st: &mut ChunkState) -> Result<(), ClusterError> {
        if st.dirty == 0 {
            return Ok(());
        }
        let Some(home) = st.home.clone() else {
            return Ok(());
        };
        let (page, start) = (self.map.page, BASE + n * CHUNK);
        if st.present {
            // Writers fault and wait for the chunk's lock until this release is done.
            protect(start, CHUNK, libc::PROT_READ)?;
        }
        let bytes = self.bytes(n);
        let mut runs: Vec<Range<usize>> = Vec::new();
        for p in (0..CHUNK / page).filter(|p| st.dirty & (1 << p) != 0) {
            let mut i = p * page;
            let end = i + page;
            while i < end {
                if bytes[i] == st.twin[i] {
                    i += 1;
                    continue;
                }
                let from = i;
                while i < end && bytes[i] != st.twin[i] {
                    i += 1;
                }
                match runs.last_mut() {
                    Some(r) if r.end == from => r.end = i,
                    _ => runs.push(from..i),
                }
            }
        }
        let dirty = std::mem::take(&mut st.dirty);
        if runs.is_empty() {
            return Ok(());
        }
        let writes: Vec<(u64, &[u8])> = runs
            .iter()
            .map(|r| (r.start as u64, &bytes[r.clone()]))
            .collect();
        let sent: usize = runs.iter().map(|r| r.len()).sum();
        let version = match sh.store_segment(&home, &chunk_name(n), &writes) {
            Ok(v) => v,
            Err(e) => {
                if let ClusterError::Lost { space } = &e {
                    st.lost = Some(space.clone());
                } else {
                    st.dirty = dirty;
                }
                return Err(e);
            }
        };
        for r in runs {
            st.twin[r.clone()].copy_from_slice(&bytes[r]);
        }
        self.counts.releases.fetch_add(1, Ordering::Relaxed);
        self.counts
            .released_bytes
            .fetch_add(sent as u64, Ordering::Relaxed);
        // Up to date only if no other release came between this copy's version and this one.
        if version == st.version + 1 {
            st.version = version;
        } else if st.present {
            st.present = false;
            protect(start, CHUNK, libc::PROT_NONE)?;
        }
        Ok(())
    }

    /// Forgets every chunk and block: the memory reads as zeros and has no access.
    fn reset(&self) {
        let chunks: Vec<usize> = lock(&self.chunks).drain().map(|(n, _)| n).collect();
        for n in chunks {
            let _ = protect(BASE + n * CHUNK, CHUNK, libc::PROT_NONE);
            // SAFETY: drops the pages of the heap's own memory file.
            unsafe {
                libc::madvise(
                    (self.map.shadow + n * CHUNK) as *mut c_void,
                    CHUNK,
                    libc::MADV_REMOVE,
                );
            }
        }
        *lock(&self.arenas) = Arenas::default();
    }
}

/// Handles a fault at `addr` inside the heap.
fn fault(addr: usize) -> Result<(), ClusterError> {
    let heap = state()?;
    heap.counts.faults.fetch_add(1, Ordering::Relaxed);
    let sh = heap.cluster()?;
    let n = (addr - BASE) / CHUNK;
    let chunk = heap.chunk(n);
    let mut st = lock(&chunk.state);
    if !st.present {
        return heap.refresh(&sh, n, &mut st);
    }
    // A present chunk's clean pages are readable: this is a first write.
    let page = heap.map.page;
    let p = (addr - BASE) % CHUNK / page;
    if st.dirty & (1 << p) == 0 {
        let bytes = heap.bytes(n);
        st.twin[p * page..(p + 1) * page].copy_from_slice(&bytes[p * page..(p + 1) * page]);
        st.dirty |= 1 << p;
    }
    // A page still marked written after a failed release is opened again too.
    protect(
        BASE + n * CHUNK + p * page,
        page,
        libc::PROT_READ | libc::PROT_WRITE,
    )
}

/// The heap of this process, if `sh` serves it.
fn bound_to(sh: &Shared) -> Option<&'static State> {
    let st = STATE.get()?.as_ref().ok()?;
    let b = lock(&st.bound);
    let serving = b.as_ref().and_then(Weak::upgrade)?;
    std::ptr::eq(&*serving, sh).then_some(st)
}

/// Releases every chunk this space wrote (before a lock lets go); the first failure is
/// returned, after all were tried.
pub(crate) fn release(sh: &Shared) -> Result<(), ClusterError> {
    let Some(heap) = bound_to(sh) else {
        return Ok(());
    };
    let chunks = heap.touched();
    let mut first = Ok(());
    for (n, c) in chunks {
        let mut st = lock(&c.state);
        if let Err(e) = heap.release(sh, n, &mut st) {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Makes every chunk stale (after a lock is granted): the next touch brings it up to date.
pub(crate) fn acquire(sh: &Shared) {
    let Some(heap) = bound_to(sh) else {
        return;
    };
    for (n, c) in heap.touched() {
        let mut st = lock(&c.state);
        if st.present {
            st.present = false;
            // A chunk that cannot be closed would be read stale: that cannot go on.
            if let Err(e) = protect(BASE + n * CHUNK, CHUNK, libc::PROT_NONE) {
                die(&format!("stampede: global heap chunk {n}: {e}\n"));
            }
        }
    }
}

/// This space's cluster stopped: chunks already here stay readable for threads still
/// running; the next touch of any other fails. The memory is forgotten when another
/// cluster takes the heap.
pub(crate) fn unbind(sh: &Shared) {
    if let Some(heap) = bound_to(sh) {
        *lock(&heap.bound) = Some(Weak::new());
    }
}

/// Frees the block at `addr` of an arena of this space, for another space.
pub(crate) fn free_here(sh: &Shared, addr: u64) -> Result<(), ClusterError> {
    let heap = bound_to(sh).ok_or_else(|| ClusterError::Heap("no heap here".into()))?;
    heap.free_local(addr as usize)
}

impl State {
    fn free_local(&self, addr: usize) -> Result<(), ClusterError> {
        let mut a = lock(&self.arenas);
        let Some(r) = a.blocks.remove(&addr) else {
            self.counts.bad_frees.fetch_add(1, Ordering::Relaxed);
            return Err(ClusterError::InvalidArgument(format!(
                "{addr:#x} is not a live block of the global heap"
            )));
        };
        let n = (r.start - BASE) / ARENA;
        let at = n * ARENA + BASE;
        if let Some((_, ra)) = a.mine.iter_mut().find(|(m, _)| *m == n) {
            ra.free_range(r.start - at..r.end - at);
        }
        self.counts.frees.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

impl Cluster {
    /// This process's global heap, served by this cluster. One cluster per process serves
    /// the heap, until it stops.
    pub fn heap(&self) -> Result<Heap, ClusterError> {
        let st = state()?;
        let mut b = lock(&st.bound);
        match b.as_ref().and_then(Weak::upgrade) {
            Some(sh) if Arc::ptr_eq(&sh, &self.sh) => {}
            Some(sh) => {
                return Err(ClusterError::Heap(format!(
                    "the heap of this process is served by the cluster of space {}",
                    sh.id
                )))
            }
            None => {
                if b.is_some() {
                    st.reset();
                }
                *b = Some(Arc::downgrade(&self.sh));
            }
        }
        Ok(Heap {
            cluster: self.clone(),
        })
    }
}

impl Heap {
    /// Whether `addr` lies in the heap.
    pub fn contains(addr: usize) -> bool {
        (BASE..BASE + LEN).contains(&addr)
    }

    /// A block of at least `len` bytes, aligned to 16 (zeros when first allocated).
    pub fn alloc(&self, len: usize) -> Result<*mut u8, ClusterError> {
        self.alloc_aligned(len, ALIGN)
    }

    /// A block of at least `len` bytes aligned to `align` (a power of two).
    pub fn alloc_aligned(&self, len: usize, align: usize) -> Result<*mut u8, ClusterError> {
        if !align.is_power_of_two() {
            return Err(ClusterError::InvalidArgument(format!(
                "an alignment of {align}"
            )));
        }
        let extra = align.saturating_sub(ALIGN);
        let want = len
            .max(1)
            .checked_add(extra + ALIGN - 1)
            .map(|l| l & !(ALIGN - 1))
            .filter(|l| *l <= ARENA)
            .ok_or_else(|| {
                ClusterError::InvalidArgument(format!(
                    "{len} bytes: blocks of the global heap hold at most {ARENA}"
                ))
            })?;
        let st = state()?;
        let sh = &self.cluster.sh;
        let r = loop {
            let mut a = lock(&st.arenas);
            if let Some(r) = a.mine.iter_mut().find_map(|(n, ra)| {
                let at = BASE + *n * ARENA;
                ra.allocate_range(want)
                    .ok()
                    .map(|r| at + r.start..at + r.end)
            }) {
                break r;
            }
            let from = a.mine.iter().map(|(n, _)| n + 1).max().unwrap_or(0);
            // Claimed without the lock: a claim asks other spaces, and frees from them
            // (served one at a time) must not wait for it.
            drop(a);
            let n = claim_arena(sh, from)?;
            let mut a = lock(&st.arenas);
            if !a.mine.iter().any(|(m, _)| *m == n) {
                a.mine.push((n, RangeAllocator::new(0..ARENA)));
            }
        };
        let mut a = lock(&st.arenas);
        let addr = (r.start + align - 1) & !(align - 1);
        a.blocks.insert(addr, r);
        st.counts.allocs.fetch_add(1, Ordering::Relaxed);
        Ok(addr as *mut u8)
    }

    /// Frees the block at `ptr`, wherever it was allocated.
    pub fn free(&self, ptr: *mut u8) -> Result<(), ClusterError> {
        let addr = ptr as usize;
        if !Heap::contains(addr) {
            return Err(ClusterError::InvalidArgument(format!(
                "{addr:#x} is not in the global heap"
            )));
        }
        let st = state()?;
        let n = (addr - BASE) / ARENA;
        if lock(&st.arenas).mine.iter().any(|(m, _)| *m == n) {
            return st.free_local(addr);
        }
        let sh = &self.cluster.sh;
        let owner = sh
            .space
            .record(&object_name(&arena_name(n)))
            .map(|r| r.space)
            .ok_or_else(|| {
                ClusterError::InvalidArgument(format!(
                    "{addr:#x} is in an arena no space of the cluster holds"
                ))
            })?;
        // This space's writes to the block reach its home before its owner can give it out
        // again, so they never land on the next user's data.
        release(sh)?;
        sh.send(&owner, &Msg::Free { addr: addr as u64 })?;
        st.counts.remote_frees.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The size of the block at `ptr` if it was allocated in this space.
    pub fn block_len(&self, ptr: *const u8) -> Option<usize> {
        let st = state().ok()?;
        let a = lock(&st.arenas);
        a.blocks.get(&(ptr as usize)).map(|r| r.end - ptr as usize)
    }

    /// What the heap of this process did.
    pub fn stats(&self) -> HeapStats {
        let Ok(st) = state() else {
            return HeapStats::default();
        };
        let c = &st.counts;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        HeapStats {
            chunks: lock(&st.chunks).len() as u64,
            faults: get(&c.faults),
            refreshes: get(&c.refreshes),
            refreshed_bytes: get(&c.refreshed_bytes),
            releases: get(&c.releases),
            released_bytes: get(&c.released_bytes),
            allocs: get(&c.allocs),
            frees: get(&c.frees),
            remote_frees: get(&c.remote_frees),
            bad_frees: get(&c.bad_frees),
        }
    }
}

/// Claims the next arena from `from` that no space holds.
fn claim_arena(sh: &Shared, from: usize) -> Result<usize, ClusterError> {
    for n in from..LEN / ARENA {
        if sh.home(&arena_name(n), Kind::Segment, 0)? == sh.id {
            return Ok(n);
        }
    }
    Err(ClusterError::Heap(format!(
        "every arena of the global heap ({} of {ARENA} bytes) is taken",
        LEN / ARENA
    )))
}
