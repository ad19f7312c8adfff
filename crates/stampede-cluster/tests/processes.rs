//! Cluster threads across processes on loopback: mutual exclusion under contention, and
//! what a process killed with SIGKILL leaves behind (its tasks lost, its mutex released to
//! a next owner who is told, its barrier failing the others).

// The process helpers of the distribution tests.
#[path = "../../stampede-net/tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{app, free_port, Proc};
use stampede_cluster::{
    AttachPolicy, Cluster, ClusterError, ClusterOptions, LockError, NodeAgent, Placement, Registry,
    TaskContext, TaskError,
};
use stampede_core::ContainerOptions;
use stampede_net::{Config, Space};

const T: Duration = Duration::from_secs(30);
/// Increments per task in the exclusion test.
const N: usize = 20;

fn cfg(base: Config) -> Config {
    let mut c = base;
    // Short leases keep the failure tests fast.
    c.lease = Duration::from_millis(300);
    c
}

/// `N` times: under mutex "count", writes "enter <id>" and "exit <id>" into queue "log"
/// (owned by the test's space), with a yield between, so overlapping holders would
/// interleave their lines.
fn increment(ctx: &TaskContext, _: Bytes) -> Result<Bytes, TaskError> {
    let log = ctx.space().lookup_queue("log", T)?;
    let out = ctx.task().attach_output(&log)?;
    let m = ctx.cluster().mutex("count")?;
    let me = ctx.id().to_string();
    for _ in 0..N {
        let g = m.lock()?;
        out.put(0, format!("enter {me}"))?;
        std::thread::yield_now();
        out.put(0, format!("exit {me}"))?;
        drop(g);
    }
    Ok(Bytes::new())
}

fn registry() -> Registry {
    Registry::new()
        .task("increment", increment)
        .task("sleep", |ctx, _| {
            while !ctx.is_cancelled() {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(Bytes::new())
        })
}

fn start(space: &Space) -> Cluster {
    Cluster::start(
        space,
        registry(),
        ClusterOptions::default().timeout(Some(T)),
    )
    .unwrap()
}

#[test]
fn child_entry() {
    // Started by a node agent: serve until detached.
    if let Some(w) = stampede_cluster::Worker::from_env() {
        w.run(registry(), ClusterOptions::default().timeout(Some(T)))
            .unwrap();
        return;
    }
    let Ok(role) = std::env::var("STAMPEDE_TEST_ROLE") else {
        return;
    };
    // Ends the line the test harness started ("test child_entry ... ").
    println!();
    let env = |k: &str| std::env::var(k).unwrap();
    let space = Space::join(&env("APP"), cfg(Config::peer().connect(env("ROUTER")))).unwrap();
    let c = start(&space);
    match role.as_str() {
        "member" => {
            println!("READY");
        }
        "holder" => {
            let m = c.mutex("robust").unwrap();
            let g = m.lock().unwrap();
            println!("HOLDING");
            std::thread::sleep(Duration::from_secs(600));
            drop(g);
        }
        "segment" => {
            let seg = c.segment("lost-seg", 16).unwrap();
            seg.write(0, b"from the child").unwrap();
            seg.release().unwrap();
            println!("READY");
        }
        "barrier" => {
            let b = c.barrier("kb", 2).unwrap();
            b.wait().unwrap();
            println!("READY");
            std::thread::sleep(Duration::from_secs(600));
        }
        _ => panic!("unknown role {role}"),
    }
    // Serve until told on standard input (or killed).
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    c.stop();
    space.leave();
}

fn members(role: &str, ep: &str, app: &str, n: usize) -> Vec<Proc> {
    (0..n)
        .map(|_| {
            let mut p = Proc::spawn(role, &[("ROUTER", ep.to_owned()), ("APP", app.to_owned())]);
            p.expect(if role == "holder" { "HOLDING" } else { "READY" }, T);
            p
        })
        .collect()
}

fn main_space(test: &str) -> (String, String, Space, Cluster) {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app(test);
    let space = Space::join(&app, cfg(Config::router(ep.clone()))).unwrap();
    let c = start(&space);
    (ep, app, space, c)
}

fn wait_members(c: &Cluster, n: usize) {
    let t0 = Instant::now();
    while c.spaces().len() < n {
        assert!(t0.elapsed() < T, "members never met: {:?}", c.spaces());
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_mutex_excludes_tasks_in_four_processes() {
    let (ep, app, space, c) = main_space("exclusion");
    let log = space
        .queue(ContainerOptions::default().name("log"))
        .unwrap();
    let kids = members("member", &ep, &app, 3);
    wait_members(&c, 4);
    // Two tasks per space, round-robin over the four.
    let hs: Vec<_> = (0..8)
        .map(|_| {
            c.spawn("increment", Bytes::new(), Placement::RoundRobin)
                .unwrap()
        })
        .collect();
    let mut spaces: Vec<String> = hs.iter().map(|h| h.space().to_owned()).collect();
    spaces.sort();
    spaces.dedup();
    assert_eq!(spaces.len(), 4, "every process ran tasks");
    for h in hs {
        h.join().unwrap();
    }
    let reader = space.task(0).unwrap();
    let input = reader.attach_input(&log).unwrap();
    let mut lines = Vec::new();
    while let Ok(q) = input.try_get() {
        lines.push(q.item.as_str().unwrap().to_owned());
        input.consume(q.ticket).unwrap();
    }
    assert_eq!(lines.len(), 2 * 8 * N, "N·K entries and exits");
    for pair in lines.chunks(2) {
        let who = pair[0].strip_prefix("enter ").expect("an entry first");
        assert_eq!(
            pair[1],
            format!("exit {who}"),
            "holders overlapped: {pair:?}"
        );
    }
    drop(kids);
    c.stop();
    space.leave();
}

#[test]
fn a_holder_killed_releases_its_mutex_and_the_next_owner_is_told() {
    let (ep, app, space, c) = main_space("robust");
    let mut kids = members("holder", &ep, &app, 1);
    wait_members(&c, 2);
    let m = c.mutex("robust").unwrap();
    assert_ne!(m.home(), space.id(), "made by the holder's space");
    assert!(matches!(
        m.lock_timeout(Duration::from_millis(100)),
        Err(LockError::Failed(ClusterError::Timeout { .. }))
    ));
    kids[0].kill9();
    // Its home died with it: the mutex is made again here, and it is free.
    let t0 = Instant::now();
    let result = loop {
        match c.mutex("robust") {
            Ok(m) if m.home() == space.id() => break m.lock_timeout(T).map(|_| ()),
            _ => {}
        }
        assert!(t0.elapsed() < T);
        std::thread::sleep(Duration::from_millis(20));
    };
    result.unwrap();
    c.stop();
    space.leave();
}

#[test]
fn a_holder_killed_while_the_home_lives_passes_the_mutex_on_as_owner_died() {
    let (ep, app, space, c) = main_space("robust-home");
    // The mutex lives here; the child takes it and is killed holding it.
    let m = c.mutex("robust").unwrap();
    assert_eq!(m.home(), space.id());
    let mut kids = members("holder", &ep, &app, 1);
    let t0 = Instant::now();
    kids[0].kill9();
    match m.lock_timeout(T) {
        Err(LockError::OwnerDied(g)) => {
            assert!(g.owner_died());
            drop(g);
        }
        other => panic!("expected the owner's death, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    // Told once: the next lock is a plain one.
    drop(m.lock_timeout(T).unwrap());
    c.stop();
    space.leave();
}

#[test]
fn a_barrier_with_a_dead_member_fails_and_a_task_of_a_dead_space_is_lost() {
    let (ep, app, space, c) = main_space("dead");
    let mut kids = members("member", &ep, &app, 1);
    let mut bkids = Vec::new();
    wait_members(&c, 2);
    let target = c.spaces().into_iter().find(|s| s != space.id()).unwrap();
    let h = c
        .spawn("sleep", Bytes::new(), Placement::On(target.clone()))
        .unwrap();
    // The barrier's other member, in a process of its own.
    let b = {
        let c = c.clone();
        let t = std::thread::spawn(move || {
            let b = c.barrier("kb", 2).unwrap();
            b.wait().unwrap();
            b
        });
        bkids.extend(members("barrier", &ep, &app, 1));
        t.join().unwrap()
    };
    kids[0].kill9();
    bkids[0].kill9();
    let t0 = Instant::now();
    match h.join() {
        Err(ClusterError::Lost { space: s }) => assert_eq!(s, target),
        other => panic!("expected the task lost, got {other:?}"),
    }
    match b.wait() {
        Err(ClusterError::Barrier(_)) => {}
        other => panic!("expected the barrier to fail, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    c.stop();
    space.leave();
}

#[test]
fn a_segment_whose_home_died_fails_clearly() {
    let (ep, app, space, c) = main_space("lost-segment");
    let mut kids = members("segment", &ep, &app, 1);
    wait_members(&c, 2);
    let seg = c.segment("lost-seg", 16).unwrap();
    let mut buf = [0u8; 14];
    seg.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"from the child");
    let home = seg.home().unwrap();
    assert_ne!(home, space.id());
    kids[0].kill9();
    let t0 = Instant::now();
    let err = loop {
        match seg.acquire() {
            Err(e) => break e,
            Ok(()) => {
                assert!(t0.elapsed() < T, "the home's death was never noticed");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    assert!(
        matches!(&err, ClusterError::Lost { space } if *space == home),
        "{err}"
    );
    c.stop();
    space.leave();
}

/// What a node agent runs to attach a space: this test binary, as a worker.
fn worker_command() -> Vec<String> {
    let exe = std::env::current_exe().unwrap();
    vec![
        exe.to_string_lossy().into_owned(),
        "--exact".into(),
        "child_entry".into(),
        "--nocapture".into(),
        "--test-threads=1".into(),
    ]
}

#[test]
fn a_node_agent_attaches_a_space_that_runs_tasks_and_detaches_it() {
    let (ep, _app, space, c) = main_space("attach");
    let err = c.attach(&worker_command(), T).unwrap_err();
    assert!(
        matches!(&err, ClusterError::NoSpace(why) if why.contains("stampede node")),
        "{err}"
    );
    let agent = NodeAgent::start(&space, "host-a", vec![ep]).unwrap();
    let id = c.attach(&worker_command(), T).unwrap();
    assert!(c.spaces().contains(&id));
    assert_eq!(agent.running(), 1);
    let h = c
        .spawn("sleep", Bytes::new(), Placement::On(id.clone()))
        .unwrap();
    h.cancel().unwrap();
    h.join().unwrap();
    c.detach(&id, T).unwrap();
    assert!(!c.spaces().contains(&id));
    let t0 = Instant::now();
    while agent.running() > 0 {
        assert!(t0.elapsed() < T, "the detached process never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!((c.stats().attached, c.stats().detached), (1, 1));
    agent.stop();
    c.stop();
    space.leave();
}

#[test]
fn spawning_attaches_a_space_when_the_members_are_full_and_detaches_it_when_idle() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("auto-attach");
    let space = Space::join(&app, cfg(Config::router(ep.clone()))).unwrap();
    let policy = AttachPolicy::new(worker_command(), 1).idle(Some(Duration::from_millis(300)));
    let c = Cluster::start(
        &space,
        registry(),
        ClusterOptions::default()
            .timeout(Some(T))
            .attach(Some(policy)),
    )
    .unwrap();
    let agent = NodeAgent::start(&space, "host-a", vec![ep]).unwrap();
    let first = c
        .spawn("sleep", Bytes::new(), Placement::RoundRobin)
        .unwrap();
    assert_eq!(first.space(), space.id(), "room here");
    let second = c
        .spawn("sleep", Bytes::new(), Placement::RoundRobin)
        .unwrap();
    assert_ne!(second.space(), space.id(), "a space was attached for it");
    assert_eq!(c.spaces().len(), 2);
    for h in [first, second] {
        h.cancel().unwrap();
        h.join().unwrap();
    }
    // Idle for longer than the policy allows: detached, and its process ends.
    let t0 = Instant::now();
    while c.spaces().len() > 1 || agent.running() > 0 {
        assert!(t0.elapsed() < T, "never detached: {:?}", c.spaces());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.stats().detached, 1);
    agent.stop();
    c.stop();
    space.leave();
}
