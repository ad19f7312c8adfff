//! The global heap across three processes: a pointer means the same bytes in every space,
//! writes under a cluster mutex are seen by the next holder, a task's writes are seen by
//! its joiner, blocks span chunks, and frees reach the space that allocated. Its own test
//! binary: one cluster per process serves the heap.

#![cfg(target_os = "linux")]

#[path = "../../stampede-net/tests/common/mod.rs"]
mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{app, free_port};
use stampede_cluster::{
    Cluster, ClusterError, ClusterOptions, NodeAgent, Placement, Registry, TaskContext, TaskError,
};
use stampede_net::{Config, Space};

const T: Duration = Duration::from_secs(30);
const ADDS: u64 = 25;
/// A block over several chunks (64 KiB each), not starting on a chunk boundary.
const BIG: usize = 200 << 10;

fn u64s(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn bytes(v: &[u64]) -> Bytes {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// `ADDS` times, under mutex "heap-count", adds one to the counter at the pointer.
fn add(ctx: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let p = u64s(&args)[0] as *mut u64;
    let m = ctx.cluster().mutex("heap-count")?;
    for _ in 0..ADDS {
        let g = m.lock()?;
        // SAFETY: the test allocated the counter in the global heap; the mutex excludes.
        unsafe { p.write_volatile(p.read_volatile() + 1) };
        std::thread::yield_now();
        drop(g);
    }
    Ok(Bytes::new())
}

/// Fills the block at the pointer with its index pattern, salted.
fn fill(_: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let a = u64s(&args);
    let (p, len, salt) = (a[0] as *mut u8, a[1] as usize, a[2] as u8);
    for i in 0..len {
        // SAFETY: the block is the caller's allocation of `len` bytes.
        unsafe { p.add(i).write((i as u8).wrapping_mul(7) ^ salt) };
    }
    Ok(Bytes::new())
}

/// Allocates a block here and returns its address; or frees one (the address given).
fn alloc(ctx: &TaskContext, _: Bytes) -> Result<Bytes, TaskError> {
    let p = ctx.cluster().heap()?.alloc(100)?;
    // SAFETY: just allocated, 100 bytes.
    unsafe { p.write(42) };
    Ok(bytes(&[p as u64]))
}

/// This space's heap counters: allocs, frees, remote frees.
fn counts(ctx: &TaskContext, _: Bytes) -> Result<Bytes, TaskError> {
    let s = ctx.cluster().heap()?.stats();
    Ok(bytes(&[s.allocs, s.frees, s.remote_frees]))
}

fn registry() -> Registry {
    Registry::new()
        .task("add", add)
        .task("fill", fill)
        .task("alloc", alloc)
        .task("counts", counts)
}

fn opts() -> ClusterOptions {
    ClusterOptions::default().timeout(Some(T))
}

#[test]
fn child_entry() {
    // Started by a node agent: serve until detached.
    if let Some(w) = stampede_cluster::Worker::from_env() {
        w.run(registry(), opts()).unwrap();
    }
}

#[test]
fn the_heap_is_one_memory_for_three_processes() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let space = Space::join(&app("heap"), Config::router(ep.clone())).unwrap();
    let c = Cluster::start(&space, registry(), opts()).unwrap();
    let heap = c.heap().unwrap();
    let agent = NodeAgent::start(&space, "localhost", vec![ep]).unwrap();
    let exe = std::env::current_exe().unwrap();
    let cmd: Vec<String> = vec![
        exe.to_string_lossy().into_owned(),
        "--exact".into(),
        "child_entry".into(),
        "--test-threads=1".into(),
    ];
    let others: Vec<String> = (0..2).map(|_| c.attach(&cmd, T).unwrap()).collect();
    let mut spaces = others.clone();
    spaces.push(c.id().to_owned());

    // Mutual exclusion and release consistency through plain memory: two tasks per space.
    let counter = heap.alloc(8).unwrap() as *mut u64;
    let hs: Vec<_> = spaces
        .iter()
        .chain(spaces.iter())
        .map(|s| {
            c.spawn("add", bytes(&[counter as u64]), Placement::On(s.clone()))
                .unwrap()
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    // SAFETY: allocated above; the joins made the tasks' writes visible here.
    assert_eq!(unsafe { counter.read_volatile() }, ADDS * 6);

    // A block over several chunks, written elsewhere, read here after the join; then
    // written here and read elsewhere after the spawn.
    let big = heap.alloc(BIG).unwrap();
    c.spawn(
        "fill",
        bytes(&[big as u64, BIG as u64, 0x5a]),
        Placement::On(others[0].clone()),
    )
    .unwrap()
    .join()
    .unwrap();
    // SAFETY: `BIG` bytes allocated above.
    let seen = unsafe { std::slice::from_raw_parts(big, BIG) };
    assert!(seen
        .iter()
        .enumerate()
        .all(|(i, b)| *b == (i as u8).wrapping_mul(7) ^ 0x5a));
    c.spawn(
        "fill",
        bytes(&[big as u64 + 1000, 5000, 0x11]),
        Placement::On(others[1].clone()),
    )
    .unwrap()
    .join()
    .unwrap();
    // Only the bytes the second writer changed changed.
    assert_eq!(seen[999], (999u64 as u8).wrapping_mul(7) ^ 0x5a);
    assert_eq!(seen[1000], 0x11);
    assert_eq!(seen[6000], (6000u64 as u8).wrapping_mul(7) ^ 0x5a);

    // A block allocated elsewhere is readable here and freed there.
    let r = c
        .spawn("alloc", Bytes::new(), Placement::On(others[1].clone()))
        .unwrap()
        .join()
        .unwrap();
    let p = u64s(&r)[0] as *mut u8;
    // SAFETY: the other space allocated and wrote it before its task ended.
    assert_eq!(unsafe { p.read() }, 42);
    heap.free(p).unwrap();
    assert_eq!(heap.stats().remote_frees, 1);
    let freed = || {
        let r = c
            .spawn("counts", Bytes::new(), Placement::On(others[1].clone()))
            .unwrap()
            .join()
            .unwrap();
        u64s(&r)[1]
    };
    let t0 = std::time::Instant::now();
    while freed() != 1 {
        assert!(
            t0.elapsed() < T,
            "the free never reached the allocating space"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Bad frees are typed errors, and lose nothing.
    heap.free(big).unwrap();
    assert!(matches!(
        heap.free(big),
        Err(ClusterError::InvalidArgument(_))
    ));
    assert!(matches!(
        heap.free(counter.cast::<u8>().wrapping_add(1)),
        Err(ClusterError::InvalidArgument(_))
    ));
    let mut stack = 0u8;
    assert!(matches!(
        heap.free(&mut stack),
        Err(ClusterError::InvalidArgument(_))
    ));
    // SAFETY: still allocated.
    assert_eq!(unsafe { counter.read_volatile() }, ADDS * 6);
    let s = heap.stats();
    assert!(s.chunks >= 4 && s.faults > 0 && s.refreshes > 0, "{s:?}");

    for id in others {
        c.detach(&id, T).unwrap();
    }
    agent.stop();
    c.stop();
    space.leave();
}
