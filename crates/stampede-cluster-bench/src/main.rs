//! `stampede-cluster-bench`: CableS' table of basic events (its Table 4) for cluster threads
//! on this machine, address spaces in processes on loopback, each row against Zenoh's own
//! query round trip measured in the same run, written to `bench-results/cluster.json`.
//!
//! This process is address space 0; three workers (this binary again, with
//! `STAMPEDE_CLUSTER_WORKER` set) join its cluster. What needs several spaces at once (the
//! barrier, the condition's waiters) runs as cluster tasks the bench spawns on the workers.
//! Every figure is the median over repetitions; a round is a median of its operations.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Parser;
use serde_json::{json, Value};
use stampede_cluster::{
    Cluster, ClusterOptions, NodeAgent, Placement, Registry, TaskContext, TaskError,
};
use stampede_net::{Config, Space};
use stampede_net_bench::zenoh_config;
use zenoh::Wait;

const ROLE: &str = "STAMPEDE_CLUSTER_WORKER";
const WORKERS: usize = 3;

#[derive(Debug, Parser)]
#[command(name = "stampede-cluster-bench", version)]
struct Cli {
    /// Operations per repetition.
    #[arg(long, default_value_t = 400)]
    ops: usize,
    /// Repetitions of each measurement.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results/cluster.json")]
    out: std::path::PathBuf,
}

fn words(args: &Bytes) -> Vec<String> {
    String::from_utf8_lossy(args)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Makes mutexes `<prefix>0..<prefix>k` here, so this space is their home.
fn make(ctx: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let w = words(&args);
    let k: usize = w[1].parse()?;
    for i in 0..k {
        ctx.cluster().mutex(&format!("{}{i}", w[0]))?;
    }
    Ok(Bytes::new())
}

/// Waits at barrier `name` of `size` members `rounds` times.
fn barrier(ctx: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let w = words(&args);
    let b = ctx.cluster().barrier(&w[0], w[1].parse()?)?;
    for _ in 0..w[2].parse::<usize>()? {
        b.wait()?;
    }
    Ok(Bytes::new())
}

/// `rounds` times: under mutex `m`, says it is ready (semaphore `ready`), waits on
/// condition `cv`, then says it woke (semaphore `woke`).
fn waiter(ctx: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let w = words(&args);
    let c = ctx.cluster();
    let (m, cv) = (c.mutex(&w[0])?, c.condition(&w[1])?);
    let (ready, woke) = (c.semaphore(&w[2], 0)?, c.semaphore(&w[3], 0)?);
    for _ in 0..w[4].parse::<usize>()? {
        let g = m.lock()?;
        ready.post()?;
        let g = cv.wait(g)?;
        drop(g);
        woke.post()?;
    }
    Ok(Bytes::new())
}

/// Touches segments `<prefix>0..<prefix>k` first, so this space is their home.
fn touch(ctx: &TaskContext, args: Bytes) -> Result<Bytes, TaskError> {
    let w = words(&args);
    for i in 0..w[1].parse::<usize>()? {
        let s = ctx.cluster().segment(&format!("{}{i}", w[0]), 4096)?;
        s.write(0, &[1])?;
        s.release()?;
    }
    Ok(Bytes::new())
}

fn registry() -> Registry {
    Registry::new()
        .task("empty", |_, _| Ok(Bytes::new()))
        .task("touch", touch)
        .task("make", make)
        .task("barrier", barrier)
        .task("waiter", waiter)
}

fn opts() -> ClusterOptions {
    ClusterOptions::default().timeout(Some(Duration::from_secs(60)))
}

/// A worker: joins the cluster and serves it until its standard input closes; or, as
/// `zenoh`, answers raw Zenoh queries for the baseline.
fn worker(role: &str) {
    let env = |k: &str| std::env::var(k).expect("set by the bench");
    if role == "zenoh" {
        let ep = format!("tcp/127.0.0.1:{}", free_port());
        let session = zenoh::open(zenoh_config(Some(&ep), None))
            .wait()
            .expect("a Zenoh session");
        let _q = session
            .declare_queryable(format!("{}/rtt", env("APP")))
            .callback(|q| {
                let key = q.key_expr().clone();
                let _ = q.reply(key, Vec::<u8>::new()).wait();
            })
            .wait()
            .expect("a queryable");
        println!("READY {ep}");
        let _ = std::io::stdin().read_line(&mut String::new());
        return;
    }
    let space = Space::join(&env("APP"), Config::peer().connect(env("ROUTER")))
        .expect("joining the bench's application");
    let c = Cluster::start(&space, registry(), opts()).expect("a cluster");
    println!("READY {}", space.id());
    let _ = std::io::stdin().read_line(&mut String::new());
    c.stop();
    space.leave();
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("an address")
        .port()
}

struct Worker {
    child: Child,
    said: String,
}

impl Worker {
    fn start(role: &str, app: &str, router: &str) -> Worker {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .env(ROLE, role)
            .env("APP", app)
            .env("ROUTER", router)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("a worker process");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("piped"))
            .read_line(&mut line)
            .expect("the worker's first line");
        let said = line
            .trim()
            .strip_prefix("READY ")
            .unwrap_or_else(|| panic!("a worker said {line:?}"))
            .to_owned();
        Worker { child, said }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A figure in µs and its repetitions.
type Sampled = (f64, Vec<f64>);

/// A row's target: at most `ratio` times the round trip, and at most `at_most_us`.
#[derive(Clone, Copy)]
struct Target {
    ratio: f64,
    at_most_us: Option<f64>,
    text: &'static str,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median over `repeats` of the median of `ops` timings of `op` (µs).
fn measure(repeats: usize, ops: usize, mut op: impl FnMut() -> Duration) -> Sampled {
    let reps: Vec<f64> = (0..repeats)
        .map(|_| median((0..ops).map(|_| op().as_secs_f64() * 1e6).collect()))
        .collect();
    (median(reps.clone()), reps)
}

fn timed(f: impl FnOnce()) -> Duration {
    let t0 = Instant::now();
    f();
    t0.elapsed()
}

fn main() {
    stampede_net::size_zenoh_runtime_in_main();
    // Started by the node agent of the attach rows.
    if let Some(w) = stampede_cluster::Worker::from_env() {
        w.run(registry(), opts()).expect("an attached space");
        return;
    }
    if let Ok(role) = std::env::var(ROLE) {
        worker(&role);
        return;
    }
    let cli = Cli::parse();
    let app = format!("cluster-bench-{}", std::process::id());
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let (repeats, ops) = (cli.repeats, cli.ops);

    // The baseline: a raw Zenoh query and its reply between two processes.
    let rtt = {
        let echo = Worker::start("zenoh", &app, "");
        let session = zenoh::open(zenoh_config(None, Some(&echo.said)))
            .wait()
            .expect("a Zenoh session");
        let key = format!("{app}/rtt");
        let ask = || {
            timed(|| {
                let replies = session.get(&key).wait().expect("a query");
                replies
                    .recv_timeout(Duration::from_secs(5))
                    .expect("a reply")
                    .expect("in time");
            })
        };
        for _ in 0..200 {
            ask();
        }
        let r = measure(repeats, ops, ask);
        session.close().wait().expect("closing");
        r
    };
    println!("Zenoh query round trip: {:.1} µs", rtt.0);

    // A router, so the workers reach each other through it (a barrier's members message
    // each other directly); each worker's link to it is direct, as the baseline's is.
    let space = Space::join(&app, Config::router(ep.clone())).expect("the bench's space");
    let c = Cluster::start(&space, registry(), opts()).expect("a cluster");
    let workers: Vec<Worker> = (0..WORKERS)
        .map(|_| Worker::start("member", &app, &ep))
        .collect();
    let t0 = Instant::now();
    while c.spaces().len() < WORKERS + 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "workers never joined"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let w1 = workers[0].said.clone();
    let mut rows: Vec<Value> = Vec::new();
    let row = |rows: &mut Vec<Value>,
               metric: &str,
               what: &str,
               r: Sampled,
               cables_us: Option<f64>,
               target: Option<Target>| {
        let ratio = r.0 / rtt.0;
        let met = target.map(|t| ratio <= t.ratio && t.at_most_us.map_or(true, |u| r.0 <= u));
        println!(
            "{what:<60} {:>9.1} µs  {:>5.2}× RTT  CableS {}",
            r.0,
            ratio,
            cables_us.map_or("-".to_owned(), |c| format!("{c} µs"))
        );
        rows.push(json!({
            "metric": metric,
            "what": what,
            "stampede": r.0,
            "unit": "µs",
            "baseline": rtt.0,
            "baseline_name": "Zenoh query round trip between two processes",
            "ratio": ratio,
            "cables_us": cables_us,
            "target": target.map(|t| t.text),
            "met": met,
            "repeats": {"stampede": r.1, "baseline": rtt.1},
        }));
    };
    println!("{:<60} {:>12}  {:>10}", "event", "this machine", "ratio");

    // Threads.
    let local = measure(repeats, ops, || {
        timed(|| {
            c.spawn("empty", Bytes::new(), Placement::Here)
                .expect("spawn")
                .join()
                .expect("join");
        })
    });
    row(
        &mut rows,
        "cluster_spawn_join_local_us",
        "local spawn + join (empty task)",
        local,
        Some(766.0),
        None,
    );
    for _ in 0..50 {
        c.spawn("empty", Bytes::new(), Placement::On(w1.clone()))
            .expect("spawn")
            .join()
            .expect("join");
    }
    let remote = measure(repeats, ops, || {
        timed(|| {
            c.spawn("empty", Bytes::new(), Placement::On(w1.clone()))
                .expect("spawn")
                .join()
                .expect("join");
        })
    });
    row(
        &mut rows,
        "cluster_spawn_join_remote_us",
        "remote spawn + join (empty task)",
        remote,
        Some(819.0),
        Some(Target {
            ratio: 3.0,
            at_most_us: Some(300.0),
            text: "<= 3x the round trip and <= 300 us",
        }),
    );
    let mut handles = Vec::with_capacity(ops);
    let spawn_only = measure(repeats, ops, || {
        timed(|| {
            handles.push(
                c.spawn("empty", Bytes::new(), Placement::On(w1.clone()))
                    .expect("spawn"),
            )
        })
    });
    for h in handles.drain(..) {
        h.join().expect("join");
    }
    row(
        &mut rows,
        "cluster_spawn_remote_us",
        "remote spawn (returns once sent)",
        spawn_only,
        Some(819.0),
        None,
    );

    // Mutexes homed here, then homed in worker 1.
    let mut k = 0;
    let first_local = measure(repeats, ops.min(100), || {
        k += 1;
        timed(|| {
            let m = c.mutex(&format!("fresh{k}")).expect("a mutex");
            drop(m.lock().expect("locked"));
        })
    });
    row(
        &mut rows,
        "cluster_mutex_lock_local_first_us",
        "local mutex lock (first time)",
        first_local,
        Some(33.0),
        None,
    );
    let m = c.mutex("here").expect("a mutex");
    let again = measure(repeats, ops, || {
        let t0 = Instant::now();
        let g = m.lock().expect("locked");
        let d = t0.elapsed();
        drop(g);
        d
    });
    row(
        &mut rows,
        "cluster_mutex_lock_local_us",
        "local mutex lock",
        again,
        Some(4.0),
        None,
    );
    let unlock_local = measure(repeats, ops, || {
        let g = m.lock().expect("locked");
        timed(|| g.unlock().expect("unlocked"))
    });
    row(
        &mut rows,
        "cluster_mutex_unlock_local_us",
        "local mutex unlock",
        unlock_local,
        Some(6.0),
        None,
    );

    let n_first = ops.min(100) * repeats;
    c.spawn(
        "make",
        format!("far {n_first}").into_bytes(),
        Placement::On(w1.clone()),
    )
    .expect("spawn")
    .join()
    .expect("mutexes made in worker 1");
    let mut k = 0;
    let first_remote = measure(repeats, ops.min(100), || {
        k += 1;
        timed(|| {
            let m = c.mutex(&format!("far{}", k - 1)).expect("a mutex");
            assert_eq!(m.home(), w1, "homed in worker 1");
            drop(m.lock().expect("locked"));
        })
    });
    row(
        &mut rows,
        "cluster_mutex_lock_remote_first_us",
        "remote mutex lock (first time)",
        first_remote,
        Some(122.0),
        None,
    );
    let fm = c.mutex("far0").expect("a mutex");
    let remote_lock = measure(repeats, ops, || {
        let t0 = Instant::now();
        let g = fm.lock().expect("locked");
        let d = t0.elapsed();
        drop(g);
        d
    });
    row(
        &mut rows,
        "cluster_mutex_lock_remote_us",
        "remote mutex lock",
        remote_lock,
        Some(101.0),
        Some(Target {
            ratio: 1.5,
            at_most_us: None,
            text: "<= 1.5x the round trip",
        }),
    );
    let unlock_remote = measure(repeats, ops, || {
        let g = fm.lock().expect("locked");
        timed(|| g.unlock().expect("unlocked"))
    });
    row(
        &mut rows,
        "cluster_mutex_unlock_remote_us",
        "remote mutex unlock (returns once sent)",
        unlock_remote,
        Some(6.0),
        None,
    );

    // Conditions: waiters in the workers, homes here.
    let cm = c.mutex("cm").expect("a mutex");
    let cv = c.condition("cv").expect("a condition");
    let ready = c.semaphore("ready", 0).expect("a semaphore");
    let woke = c.semaphore("woke", 0).expect("a semaphore");
    let rounds = ops.min(200);
    let signal_rounds = repeats * rounds;
    let h = c
        .spawn(
            "waiter",
            format!("cm cv ready woke {signal_rounds}").into_bytes(),
            Placement::On(w1.clone()),
        )
        .expect("spawn");
    let signal = measure(repeats, rounds, || {
        ready.wait().expect("ready");
        // The waiter let go of the mutex inside its wait: it is queued.
        drop(cm.lock().expect("locked"));
        timed(|| {
            cv.signal().expect("signalled");
            woke.wait().expect("woken");
        })
    });
    h.join().expect("the waiter");
    row(
        &mut rows,
        "cluster_condition_signal_wake_us",
        "condition signal to a remote waiter's wake-up (relock, ack)",
        signal,
        Some(100.0),
        None,
    );
    let b_rounds = repeats * rounds;
    let hs: Vec<_> = workers
        .iter()
        .map(|w| {
            c.spawn(
                "waiter",
                format!("cm cv ready woke {b_rounds}").into_bytes(),
                Placement::On(w.said.clone()),
            )
            .expect("spawn")
        })
        .collect();
    let broadcast = measure(repeats, rounds, || {
        for _ in 0..WORKERS {
            ready.wait().expect("ready");
        }
        drop(cm.lock().expect("locked"));
        timed(|| {
            cv.broadcast().expect("broadcast");
            for _ in 0..WORKERS {
                woke.wait().expect("woken");
            }
        })
    });
    for h in hs {
        h.join().expect("a waiter");
    }
    row(
        &mut rows,
        "cluster_condition_broadcast_wake_us",
        "condition broadcast to 3 remote waiters' wake-ups",
        broadcast,
        Some(110.0),
        None,
    );

    // Barriers of 2 and 4 address spaces.
    for size in [2usize, 4] {
        let name = format!("b{size}");
        let total = repeats * ops + 1;
        let hs: Vec<_> = workers[..size - 1]
            .iter()
            .map(|w| {
                c.spawn(
                    "barrier",
                    format!("{name} {size} {total}").into_bytes(),
                    Placement::On(w.said.clone()),
                )
                .expect("spawn")
            })
            .collect();
        let b = c.barrier(&name, size).expect("a barrier");
        if let Err(e) = b.wait() {
            for h in hs {
                eprintln!("member task: {:?}", h.join());
            }
            panic!("the barrier of {size}: {e}");
        }
        let r = measure(repeats, ops, || timed(|| b.wait().expect("a barrier")));
        for h in hs {
            h.join().expect("a barrier member");
        }
        let target = (size == 4).then_some(Target {
            ratio: 3.0,
            at_most_us: None,
            text: "<= 3x the round trip",
        });
        row(
            &mut rows,
            &format!("cluster_barrier_{size}_us"),
            &format!("barrier of {size} address spaces"),
            r,
            Some(70.0),
            target,
        );
    }

    // Segments: first touch here (this space becomes the home), and of one homed in worker
    // 1 (found, confirmed and fetched).
    let mut k = 0;
    let seg_local = measure(repeats, ops.min(100), || {
        k += 1;
        timed(|| {
            let s = c.segment(&format!("seg{k}"), 4096).expect("a segment");
            s.write(0, &[1]).expect("written");
        })
    });
    row(
        &mut rows,
        "cluster_segment_first_touch_local_us",
        "segment first touch, local (becomes its home)",
        seg_local,
        Some(159.0),
        None,
    );
    c.spawn(
        "touch",
        format!("farseg {n_first}").into_bytes(),
        Placement::On(w1.clone()),
    )
    .expect("spawn")
    .join()
    .expect("segments touched in worker 1");
    let mut k = 0;
    let seg_remote = measure(repeats, ops.min(100), || {
        k += 1;
        timed(|| {
            let s = c
                .segment(&format!("farseg{}", k - 1), 4096)
                .expect("a segment");
            let mut b = [0u8; 1];
            s.read(0, &mut b).expect("read");
            assert_eq!(b[0], 1);
        })
    });
    row(
        &mut rows,
        "cluster_segment_first_touch_remote_us",
        "segment first touch, remote (4 KiB fetched)",
        seg_remote,
        Some(252.0),
        None,
    );

    // Attaching and detaching address spaces through a node agent on this host.
    let agent = NodeAgent::start(&space, "bench", vec![ep.clone()]).expect("a node agent");
    let exe = std::env::current_exe()
        .expect("this binary")
        .to_string_lossy()
        .into_owned();
    let mut attach_ms = Vec::new();
    let mut detach_ms = Vec::new();
    for _ in 0..repeats {
        let t0 = Instant::now();
        let id = c
            .attach(std::slice::from_ref(&exe), Duration::from_secs(30))
            .expect("attached");
        attach_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        c.spawn("empty", Bytes::new(), Placement::On(id.clone()))
            .expect("spawn")
            .join()
            .expect("a task on the attached space");
        let t0 = Instant::now();
        c.detach(&id, Duration::from_secs(30)).expect("detached");
        detach_ms.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    let attach = median(attach_ms.clone());
    let detach = median(detach_ms.clone());
    println!(
        "{:<60} {attach:>9.1} ms  target <= 500 ms  CableS 3690 ms",
        "attach an address space (Rust)"
    );
    println!("{:<60} {detach:>9.1} ms", "detach an address space");
    rows.push(json!({
        "metric": "cluster_attach_ms",
        "what": "attach an address space (Rust, this binary), until it is a member",
        "stampede": attach,
        "unit": "ms",
        "cables_ms": 3690.0,
        "target": "<= 500 ms",
        "met": attach <= 500.0,
        "repeats": attach_ms,
    }));
    rows.push(json!({
        "metric": "cluster_detach_ms",
        "what": "detach an address space, until its membership is gone",
        "stampede": detach,
        "unit": "ms",
        "repeats": detach_ms,
    }));
    // Python's, when the project's environment is there (numpy and the package import).
    let python = std::path::Path::new(".venv/bin/python");
    if python.exists() {
        let mut py_ms = Vec::new();
        for _ in 0..3 {
            let t0 = Instant::now();
            let cmd = [
                python.to_string_lossy().into_owned(),
                "-m".into(),
                "stampede.cluster".into(),
            ];
            match c.attach(&cmd, Duration::from_secs(60)) {
                Ok(id) => {
                    py_ms.push(t0.elapsed().as_secs_f64() * 1e3);
                    let _ = c.detach(&id, Duration::from_secs(30));
                }
                Err(e) => {
                    println!("attach a Python address space: {e}");
                    break;
                }
            }
        }
        if !py_ms.is_empty() {
            let m = median(py_ms.clone());
            println!("{:<60} {m:>9.1} ms", "attach an address space (Python)");
            rows.push(json!({
                "metric": "cluster_attach_python_ms",
                "what": "attach a Python address space (python -m stampede.cluster)",
                "stampede": m,
                "unit": "ms",
                "repeats": py_ms,
            }));
        }
    }
    let t0 = Instant::now();
    while agent.running() > 0 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    agent.stop();

    let stats = c.stats();
    println!(
        "cluster: {} tasks spawned from here, {} malformed messages, {} late answers",
        stats.spawned, stats.malformed, stats.unclaimed
    );
    drop(workers);
    c.stop();
    space.leave();
    if let Some(dir) = cli.out.parent() {
        std::fs::create_dir_all(dir).expect("cannot create the results directory");
    }
    let mut f = std::fs::File::create(&cli.out).expect("cannot write the results");
    writeln!(f, "{}", serde_json::to_string_pretty(&rows).expect("JSON")).expect("written");
    println!("results written to {}", cli.out.display());
}
