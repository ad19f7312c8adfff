//! Cluster threads across address spaces in one process (each a Zenoh session of its own,
//! so every remote operation crosses the network stack): spawn, join, cancel, placement,
//! mutexes, conditions, semaphores and barriers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

// The process helpers of the distribution tests.
#[path = "../../stampede-net/tests/common/mod.rs"]
mod common;

use bytes::Bytes;
use common::free_port;
use stampede_cluster::{
    Cluster, ClusterError, ClusterOptions, Placement, Registry, TaskContext, TaskError,
};
use stampede_net::{Config, Space};

const T: Duration = Duration::from_secs(20);

fn square(_: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let x = u64::from_le_bytes(args[..].try_into().map_err(|_| "eight bytes")?);
    Ok(Bytes::copy_from_slice(&(x * x).to_le_bytes()))
}

fn registry() -> Registry {
    Registry::new()
        .task("square", square)
        .task("where", |ctx, _| {
            Ok(Bytes::from(ctx.space().id().to_owned()))
        })
        .task("fail", |_, _| Err("on purpose".into()))
        .task("panic", |_, _| panic!("boom"))
        .task("spin", |ctx, _| {
            let t0 = Instant::now();
            while t0.elapsed() < T {
                ctx.check()?;
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(Bytes::new())
        })
        .task("sum", |ctx, args| {
            // Spawns squares across the cluster from inside a task, and locks.
            let n = num(args);
            let hs = (1..=n)
                .map(|i| {
                    ctx.cluster()
                        .spawn("square", i.to_le_bytes().to_vec(), Placement::RoundRobin)
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut sum = 0;
            for h in hs {
                sum += num(h.join()?);
            }
            let m = ctx.cluster().mutex("nested")?;
            drop(m.lock()?);
            Ok(Bytes::copy_from_slice(&sum.to_le_bytes()))
        })
        .task("vt", |ctx, _| {
            Ok(Bytes::copy_from_slice(
                &ctx.task().virtual_time().to_le_bytes(),
            ))
        })
}

/// `n` spaces of one application, each with its cluster; the first is a router the others
/// connect to.
fn cluster(test: &str, n: usize) -> Vec<(Space, Cluster)> {
    let app = format!("t{}-{test}", std::process::id());
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let mut out = Vec::new();
    for i in 0..n {
        let cfg = if i == 0 {
            Config::router(ep.clone())
        } else {
            Config::peer().connect(ep.clone())
        };
        let space = Space::join(&app, cfg).unwrap();
        let c = Cluster::start(
            &space,
            registry(),
            ClusterOptions::default().timeout(Some(T)),
        )
        .unwrap();
        out.push((space, c));
    }
    // Every member sees every other.
    let deadline = Instant::now() + T;
    while out.iter().any(|(_, c)| c.spaces().len() < n) {
        assert!(Instant::now() < deadline, "members never met");
        std::thread::sleep(Duration::from_millis(10));
    }
    out
}

fn num(b: Bytes) -> u64 {
    u64::from_le_bytes(b[..].try_into().unwrap())
}

#[test]
fn tasks_run_here_and_elsewhere_and_report_how_they_ended() {
    let spaces = cluster("spawn", 2);
    let (c, other) = (&spaces[0].1, spaces[1].0.id().to_owned());
    for on in [Placement::Here, Placement::On(other.clone())] {
        let h = c
            .spawn("square", 7u64.to_le_bytes().to_vec(), on.clone())
            .unwrap();
        assert_eq!(num(h.join().unwrap()), 49, "{on:?}");
        let where_ = c.spawn("where", Bytes::new(), on.clone()).unwrap();
        let ran = where_.space().to_owned();
        assert_eq!(where_.join().unwrap(), Bytes::from(ran));
        match c.spawn("fail", Bytes::new(), on.clone()).unwrap().join() {
            Err(ClusterError::Failed { message, .. }) => assert_eq!(message, "on purpose"),
            other => panic!("{other:?}"),
        }
        match c.spawn("panic", Bytes::new(), on.clone()).unwrap().join() {
            Err(ClusterError::Panicked { message, .. }) => assert_eq!(message, "boom"),
            other => panic!("{other:?}"),
        }
        match c.spawn("nothing", Bytes::new(), on.clone()).unwrap().join() {
            Err(ClusterError::UnknownTask { task, .. }) => assert_eq!(task, "nothing"),
            other => panic!("{other:?}"),
        }
        let h = c.spawn_at("vt", Bytes::new(), on.clone(), 42).unwrap();
        assert_eq!(
            h.join().unwrap(),
            Bytes::copy_from_slice(&42i64.to_le_bytes())
        );
        // Cancelled: it sees the request at its next check.
        let mut h = c.spawn("spin", Bytes::new(), on.clone()).unwrap();
        assert!(matches!(
            h.join_timeout(Duration::from_millis(50)),
            Err(ClusterError::Timeout { .. })
        ));
        assert!(!h.is_finished());
        h.cancel().unwrap();
        assert!(matches!(h.join(), Err(ClusterError::Cancelled)), "{on:?}");
    }
    assert!(matches!(
        c.spawn("square", Bytes::new(), Placement::On("nowhere".into())),
        Err(ClusterError::NoSpace(_))
    ));
    let stats = c.stats();
    assert_eq!(stats.spawned, 14);
    assert_eq!(stats.malformed, 0);
}

#[test]
fn round_robin_takes_the_spaces_in_turn_and_least_loaded_spreads() {
    let spaces = cluster("place", 3);
    let c = &spaces[0].1;
    let mut ids: Vec<String> = spaces.iter().map(|(s, _)| s.id().to_owned()).collect();
    ids.sort();
    assert_eq!(c.spaces(), ids);
    let got: Vec<String> = (0..6)
        .map(|_| {
            let h = c
                .spawn("where", Bytes::new(), Placement::RoundRobin)
                .unwrap();
            String::from_utf8(h.join().unwrap().to_vec()).unwrap()
        })
        .collect();
    // Each space in name order, twice, starting wherever the turn was.
    let start = ids.iter().position(|s| *s == got[0]).unwrap();
    let want: Vec<String> = (0..6).map(|k| ids[(start + k) % 3].clone()).collect();
    assert_eq!(got, want);
    // Three long tasks go to three different spaces.
    let hs: Vec<_> = (0..3)
        .map(|_| {
            c.spawn("spin", Bytes::new(), Placement::LeastLoaded)
                .unwrap()
        })
        .collect();
    let mut used: Vec<String> = hs.iter().map(|h| h.space().to_owned()).collect();
    used.sort();
    assert_eq!(used, ids);
    for h in &hs {
        h.cancel().unwrap();
    }
    for h in hs {
        assert!(matches!(h.join(), Err(ClusterError::Cancelled)));
    }
}

#[test]
fn a_mutex_excludes_tasks_of_every_space() {
    let spaces = cluster("mutex", 3);
    let inside = Arc::new(AtomicUsize::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for (i, (_, c)) in spaces.iter().enumerate() {
        for _ in 0..2 {
            let (c, inside, entered) = (c.clone(), inside.clone(), entered.clone());
            threads.push(std::thread::spawn(move || {
                let m = c.mutex("m").unwrap();
                for _ in 0..25 {
                    let g = m.lock().unwrap();
                    assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "space {i}");
                    std::thread::yield_now();
                    inside.fetch_sub(1, Ordering::SeqCst);
                    entered.fetch_add(1, Ordering::SeqCst);
                    drop(g);
                }
            }));
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(entered.load(Ordering::SeqCst), 150);
    for (_, c) in &spaces {
        let stats = c.stats();
        assert_eq!(stats.op(stampede_cluster::ClusterOp::Lock).0, 50);
        assert_eq!(stats.op(stampede_cluster::ClusterOp::Unlock).0, 50);
    }
    // One home for all, and a timed lock gives up while another holds it.
    let m0 = spaces[0].1.mutex("m").unwrap();
    let m2 = spaces[2].1.mutex("m").unwrap();
    assert_eq!(m0.home(), m2.home());
    let g = m2.lock().unwrap();
    assert!(matches!(
        m0.lock_timeout(Duration::from_millis(50)),
        Err(stampede_cluster::LockError::Failed(
            ClusterError::Timeout { .. }
        ))
    ));
    drop(g);
    drop(m0.lock_timeout(T).unwrap());
    // A name is one kind of object.
    assert!(matches!(
        spaces[1].1.semaphore("m", 1),
        Err(ClusterError::InvalidArgument(_))
    ));
}

#[test]
fn conditions_signal_one_and_broadcast_to_all() {
    let spaces = cluster("cond", 3);
    let woken = Arc::new(AtomicUsize::new(0));
    let ready = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for (_, c) in spaces.iter().skip(1) {
        for _ in 0..2 {
            let (c, woken, ready) = (c.clone(), woken.clone(), ready.clone());
            waiters.push(std::thread::spawn(move || {
                let m = c.mutex("cm").unwrap();
                let cv = c.condition("cv").unwrap();
                let g = m.lock().unwrap();
                ready.fetch_add(1, Ordering::SeqCst);
                let g = cv.wait(g).unwrap();
                woken.fetch_add(1, Ordering::SeqCst);
                drop(g);
            }));
        }
    }
    let c = &spaces[0].1;
    let m = c.mutex("cm").unwrap();
    let cv = c.condition("cv").unwrap();
    // All four are queued once each has released the mutex into its wait.
    let deadline = Instant::now() + T;
    loop {
        let g = m.lock().unwrap();
        let r = ready.load(Ordering::SeqCst);
        drop(g);
        if r == 4 {
            break;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    }
    // The last waiter released the mutex after queueing: taking it orders the signal after.
    drop(m.lock().unwrap());
    cv.signal().unwrap();
    let t0 = Instant::now();
    while woken.load(Ordering::SeqCst) < 1 {
        assert!(t0.elapsed() < T);
        std::thread::sleep(Duration::from_millis(2));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(woken.load(Ordering::SeqCst), 1, "a signal wakes one");
    cv.broadcast().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(woken.load(Ordering::SeqCst), 4);
    // A timed wait with nobody signalling times out holding the mutex again.
    let g = m.lock().unwrap();
    let (g, timed_out) = cv.wait_timeout(g, Duration::from_millis(30)).unwrap();
    assert!(timed_out);
    drop(g);
}

#[test]
fn a_semaphore_counts_across_spaces() {
    let spaces = cluster("sem", 2);
    let s0 = spaces[0].1.semaphore("s", 2).unwrap();
    let s1 = spaces[1].1.semaphore("s", 99).unwrap();
    s1.wait().unwrap();
    s0.wait().unwrap();
    assert!(matches!(
        s1.wait_timeout(Duration::from_millis(50)),
        Err(ClusterError::Timeout { .. })
    ));
    let waiter = {
        let s1 = s1.clone();
        std::thread::spawn(move || s1.wait())
    };
    std::thread::sleep(Duration::from_millis(50));
    s0.post().unwrap();
    waiter.join().unwrap().unwrap();
    s1.post().unwrap();
    s0.wait_timeout(T).unwrap();
}

#[test]
fn a_barrier_of_tasks_in_three_spaces_is_reusable() {
    let spaces = cluster("barrier", 3);
    let c = &spaces[0].1;
    let round = Arc::new(AtomicUsize::new(0));
    let mut ts = Vec::new();
    for (_, c) in spaces.iter() {
        let (c, round) = (c.clone(), round.clone());
        ts.push(std::thread::spawn(move || {
            let b = c.barrier("b", 3).unwrap();
            for r in 0..5 {
                // Nobody passes round r before all have reached it.
                assert!(round.load(Ordering::SeqCst) >= 3 * r);
                round.fetch_add(1, Ordering::SeqCst);
                b.wait().unwrap();
                assert!(round.load(Ordering::SeqCst) >= 3 * (r + 1));
                b.wait().unwrap();
            }
            b.rank()
        }));
    }
    let mut ranks: Vec<usize> = ts.into_iter().map(|t| t.join().unwrap()).collect();
    ranks.sort();
    assert_eq!(ranks, vec![0, 1, 2]);
    // The next joiner starts the name's next group of three.
    assert_eq!(c.barrier("b", 3).unwrap().rank(), 0);
    assert!(matches!(
        c.barrier("b", 4),
        Err(ClusterError::InvalidArgument(_))
    ));
    assert!(matches!(
        c.barrier("b2", 0),
        Err(ClusterError::InvalidArgument(_))
    ));
}

#[test]
fn tasks_spawn_and_lock_from_inside_tasks_and_are_listed() {
    let spaces = cluster("nested", 2);
    let other = spaces[1].0.id().to_owned();
    let c = &spaces[0].1;
    let h = c
        .spawn(
            "sum",
            10u64.to_le_bytes().to_vec(),
            Placement::On(other.clone()),
        )
        .unwrap();
    assert_eq!(num(h.join().unwrap()), 385);
    let spin = c
        .spawn("spin", Bytes::new(), Placement::On(other.clone()))
        .unwrap();
    let deadline = Instant::now() + T;
    let listed = loop {
        let l = stampede_cluster::list_tasks(&spaces[0].0);
        if l.iter().any(|s| !s.tasks.is_empty()) {
            break l;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|s| s.error.is_none()));
    let there = listed.iter().find(|s| s.space == other).unwrap();
    assert_eq!(there.tasks.len(), 1);
    assert_eq!(there.tasks[0].task, "spin");
    assert_eq!(&there.tasks[0].id, spin.id());
    spin.cancel().unwrap();
    assert!(matches!(spin.join(), Err(ClusterError::Cancelled)));
}

#[test]
fn a_segment_is_homed_where_first_touched_and_released_writes_are_seen_after_acquire() {
    let spaces = cluster("segment", 2);
    let (a, b) = (&spaces[0].1, &spaces[1].1);
    let sa = a.segment("seg", 64).unwrap();
    let sb = b.segment("seg", 64).unwrap();
    assert_eq!(sa.home(), None, "naming it touches nothing");
    // B touches it first: B is its home.
    sb.write(0, b"hello").unwrap();
    assert_eq!(sb.home().as_deref(), Some(spaces[1].0.id()));
    let mut buf = [0u8; 5];
    sa.read(0, &mut buf).unwrap();
    assert_eq!(sa.home(), sb.home());
    assert_eq!(&buf, &[0; 5], "not released yet");
    // Writes made under a lock are seen by the next holder.
    let m = b.mutex("seg-lock").unwrap();
    let g = m.lock().unwrap();
    sb.write(10, b"world").unwrap();
    drop(g);
    let ma = a.mutex("seg-lock").unwrap();
    let g = ma.lock().unwrap();
    sa.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    sa.read(10, &mut buf).unwrap();
    assert_eq!(&buf, b"world");
    // Both write disjoint parts; each release merges at the home.
    sa.write(20, b"AAAA").unwrap();
    drop(g);
    sb.write(30, b"BBBB").unwrap();
    sb.release().unwrap();
    sb.acquire().unwrap();
    sa.acquire().unwrap();
    for s in [&sa, &sb] {
        let both = s
            .with(|d| (d[20..24].to_vec(), d[30..34].to_vec()))
            .unwrap();
        assert_eq!(both, (b"AAAA".to_vec(), b"BBBB".to_vec()));
    }
    assert!(matches!(
        a.segment("seg", 65),
        Err(ClusterError::InvalidArgument(_))
    ));
    assert!(matches!(
        sa.write(62, b"xyz"),
        Err(ClusterError::InvalidArgument(_))
    ));
}

#[test]
fn a_reader_never_sees_part_of_a_release() {
    let spaces = cluster("torn", 2);
    let writer = spaces[0].1.segment("t", 4096).unwrap();
    let reader = spaces[1].1.segment("t", 4096).unwrap();
    // Homed at the reader: each release travels to it as one message.
    reader.acquire().unwrap();
    let w = std::thread::spawn(move || {
        for k in 1..=60u8 {
            writer.with_mut(|d| d.fill(k)).unwrap();
            writer.release().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    let mut seen = std::collections::BTreeSet::new();
    while !w.is_finished() {
        reader.acquire().unwrap();
        let (first, uniform) = reader
            .with(|d| (d[0], d.iter().all(|&x| x == d[0])))
            .unwrap();
        assert!(uniform, "a torn release: {first} and others");
        seen.insert(first);
    }
    w.join().unwrap();
    reader.acquire().unwrap();
    assert_eq!(reader.with(|d| d[4095]).unwrap(), 60);
    assert!(
        seen.len() > 1,
        "the reader saw releases as they came: {seen:?}"
    );
}

#[test]
fn an_spmd_relaxation_over_a_segment_with_barriers_matches_sequential_code() {
    // Three members in three spaces relax a 1-D rod held in one segment, each its own
    // part, exchanging through the segment between barriers.
    let spaces = cluster("spmd", 3);
    const N: usize = 30;
    const STEPS: usize = 20;
    let sequential = {
        let mut x: Vec<f64> = (0..N).map(|i| if i == 0 { 100.0 } else { 0.0 }).collect();
        for _ in 0..STEPS {
            let old = x.clone();
            for i in 1..N - 1 {
                x[i] = (old[i - 1] + old[i + 1]) / 2.0;
            }
        }
        x
    };
    let members: Vec<_> = spaces
        .iter()
        .enumerate()
        .map(|(r, (_, c))| {
            let c = c.clone();
            std::thread::spawn(move || {
                let seg = c.segment("rod", N * 8).unwrap();
                let b = c.barrier("rod-step", 3).unwrap();
                let get = |seg: &stampede_cluster::Segment| -> Vec<f64> {
                    seg.with(|d| {
                        d.chunks_exact(8)
                            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                            .collect()
                    })
                    .unwrap()
                };
                if r == 0 {
                    seg.write(0, &100f64.to_le_bytes()).unwrap();
                }
                b.wait().unwrap();
                let (lo, hi) = (r * N / 3, (r + 1) * N / 3);
                for _ in 0..STEPS {
                    let old = get(&seg);
                    b.wait().unwrap(); // all read before anyone writes
                    for i in lo.max(1)..hi.min(N - 1) {
                        let v = (old[i - 1] + old[i + 1]) / 2.0;
                        seg.write(i * 8, &v.to_le_bytes()).unwrap();
                    }
                    b.wait().unwrap();
                }
                get(&seg)
            })
        })
        .collect();
    for m in members {
        assert_eq!(m.join().unwrap(), sequential);
    }
}
