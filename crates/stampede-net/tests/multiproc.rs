//! Address spaces in separate processes on loopback: remote operations against the local
//! semantics, garbage collection across processes, and processes killed with SIGKILL.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::hosts::{Hosts, A, B};
use common::{app, eventually, free_port, Proc};
use stampede_core::{
    Channel, Container, ContainerOptions, DType, GetError, NdArray, PutErrorKind, PutOptions,
    Queue, Register, Selector, StmError, Task, Timestamp, ZoneId, INFINITY,
};
use stampede_net::{Config, NetError, Space};

/// The container, checked to live in this address space.
fn local<C: Container>(c: &C) -> &C {
    assert!(c.is_local(), "expected a container owned here");
    c
}

const T: Duration = Duration::from_secs(20);

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| panic!("{key} not set"))
}

fn peer_of(router: &str) -> Config {
    Config::peer().connect(router)
}

/// The entry point of child processes; does nothing when run as a test.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var("STAMPEDE_TEST_ROLE") else {
        return;
    };
    // Ends the line the test harness started ("test child_entry ... ").
    println!();
    let router = env("ROUTER");
    let app = env("APP");
    let cfg = match std::env::var("MODE").as_deref() {
        Ok("client") => Config::client(router),
        Ok("router") => Config::router(router),
        _ => peer_of(&router),
    };
    let mut cfg = cfg;
    if let Ok(n) = std::env::var("PREFETCH") {
        cfg.queue_prefetch = n.parse().unwrap();
    }
    let space = Space::join(&app, cfg).unwrap();
    match role.as_str() {
        // Owns a channel "owned" and keeps running.
        "owner" => {
            let ch = space
                .channel(ContainerOptions::unbounded().name("owned"))
                .unwrap();
            let t = space.task(0).unwrap();
            let out = t.attach_output(&ch).unwrap();
            out.put(0, "zero").unwrap();
            t.set_virtual_time(INFINITY).unwrap();
            println!("ID {}", space.id());
            println!("READY");
            std::thread::sleep(Duration::from_secs(600));
        }
        // Owns a channel, a queue and a register for `program` and keeps running.
        "containers" => {
            space
                .channel(ContainerOptions::bounded(4).name("p/frames"))
                .unwrap();
            space
                .queue(ContainerOptions::bounded(4).name("p/jobs"))
                .unwrap();
            space
                .register(ContainerOptions::default().name("p/mode"))
                .unwrap();
            println!("READY");
            std::thread::sleep(Duration::from_secs(600));
        }
        // Puts `N` items from `FROM` (or 0) into "frames" with VT following, printing every
        // stored put and the round trip it took.
        "producer" => {
            let from: i64 = std::env::var("FROM").map_or(0, |f| f.parse().unwrap());
            let n: i64 = env("N").parse().unwrap();
            let ch = space.lookup_channel("frames", T).unwrap();
            let t = space.task(from).unwrap();
            let out = t.attach_output(&ch).unwrap();
            println!("READY");
            for ts in from..from + n {
                let start = Instant::now();
                out.put(ts, format!("frame {ts}")).unwrap();
                // Stored once a flush covering it returned.
                out.flush().unwrap();
                println!("RTT {}", start.elapsed().as_micros());
                println!("ACK {ts}");
                t.set_virtual_time(ts + 1).unwrap();
            }
            t.set_virtual_time(INFINITY).unwrap();
            println!("DONE");
            if std::env::var("HANG").is_ok() {
                std::thread::sleep(Duration::from_secs(600));
            }
        }
        // Puts 0.. into "frames" without waiting for its owner, forever.
        "streamer" => {
            let ch = space.lookup_channel("frames", T).unwrap();
            let t = space.task(0).unwrap();
            let out = t.attach_output(&ch).unwrap();
            for ts in 0.. {
                out.put(ts, format!("frame {ts}")).unwrap();
                t.set_virtual_time(ts + 1).unwrap();
                if ts % 100 == 0 {
                    println!("SENT {ts}");
                }
            }
        }
        // Gets NextUnseen from "frames" until `N` items, checking each payload.
        "consumer" => {
            let n: usize = env("N").parse().unwrap();
            let ch = space.lookup_channel("frames", T).unwrap();
            let t = space.task(INFINITY).unwrap();
            let input = t.attach_input(&ch).unwrap();
            println!("READY");
            let mut got = 0;
            while got < n {
                let (ts, item) = input.get(Selector::NextUnseen).unwrap();
                assert_eq!(item.as_str().unwrap(), format!("frame {ts}"));
                input.consume_until(ts).unwrap();
                println!("GOT {ts}");
                got += 1;
            }
            println!("DONE");
        }
        // Takes one queue item and one channel item and holds both open, forever.
        "holder" => {
            let q = space.lookup_queue("jobs", T).unwrap();
            let ch = space.lookup_channel("frames", T).unwrap();
            // Attached at visibility 0, so the channel's items are visible (rule 3).
            let t = space.task(0).unwrap();
            let qi = t.attach_input(&q).unwrap();
            let ci = t.attach_input(&ch).unwrap();
            let item = qi.get().unwrap();
            println!("HELD {}", item.ticket);
            let (ts, _) = ci.get(Selector::Oldest).unwrap();
            // The open items alone hold the watermark now.
            t.set_virtual_time(INFINITY).unwrap();
            println!("OPEN {ts}");
            std::thread::sleep(Duration::from_secs(600));
        }
        // Puts jobs FROM..FROM+N into the queue "jobs".
        "qproducer" => {
            let from: i64 = env("FROM").parse().unwrap();
            let n: i64 = env("N").parse().unwrap();
            let q = space.lookup_queue("jobs", T).unwrap();
            let t = space.task(from).unwrap();
            let out = t.attach_output(&q).unwrap();
            for ts in from..from + n {
                out.put(ts, format!("job {ts}")).unwrap();
                t.set_virtual_time(ts + 1).unwrap();
            }
            println!("DONE");
        }
        // Takes jobs from "jobs" until the queue has been empty for a second.
        "qconsumer" => {
            let q = space.lookup_queue("jobs", T).unwrap();
            let t = space.task(INFINITY).unwrap();
            let input = t.attach_input(&q).unwrap();
            println!("READY");
            while let Ok(job) = input.get_timeout(Duration::from_secs(1)) {
                assert_eq!(job.item.as_str().unwrap(), format!("job {}", job.ts));
                input.consume(job.ticket).unwrap();
                println!("JOB {}", job.ts);
            }
            println!("DONE");
        }
        // Owns "live"; once a reader is attached, puts `N` items and says DONE.
        "source" => {
            let n: i64 = env("N").parse().unwrap();
            let ch = space
                .channel(ContainerOptions::unbounded().name("live"))
                .unwrap();
            let t = space.task(0).unwrap();
            let out = t.attach_output(&ch).unwrap();
            println!("READY");
            let local = local(&ch);
            while local.stats().connections == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
            // The core counts the connection a moment before the attach completes and
            // the reader is known for pushes.
            std::thread::sleep(Duration::from_millis(100));
            for ts in 0..n {
                out.put(ts, vec![ts as u8; 10_000]).unwrap();
            }
            println!("DONE");
            std::thread::sleep(Duration::from_secs(600));
        }
        // The router of an emulated network: owns "frames" and reports departures.
        "hub" => {
            let _frames = space
                .channel(ContainerOptions::bounded(4).name("frames"))
                .unwrap();
            let _observer = space.task(INFINITY).unwrap();
            println!("READY");
            let mut known = space.spaces();
            loop {
                let now = space.spaces();
                for gone in known.iter().filter(|s| !now.contains(s)) {
                    println!("LEFT {gone}");
                }
                known = now;
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Owns "sink" (zone 0) and "flood" (zone 1). Relays each item of "sink" to "relay"
        // while holding it open, and floods the link to the router with large items.
        "relayer" => {
            let n: usize = env("N").parse().unwrap();
            let sink = space
                .channel(ContainerOptions::unbounded().name("sink"))
                .unwrap();
            let flood = space
                .channel(ContainerOptions::bounded(8).name("flood").zone(ZoneId(1)))
                .unwrap();
            let relay = space.lookup_channel("relay", T).unwrap();
            let flooder = space
                .task_builder()
                .zone(ZoneId(1))
                .virtual_time(0)
                .create()
                .unwrap();
            let fout = flooder.attach_output(&flood).unwrap();
            std::thread::spawn(move || {
                let big = vec![7u8; 1 << 20];
                for ts in 0.. {
                    if fout.put_timeout(ts, big.clone(), T).is_err() {
                        return;
                    }
                    flooder.set_virtual_time(ts + 1).unwrap();
                }
            });
            let t = space.task(INFINITY).unwrap();
            let input = t.attach_input(&sink).unwrap();
            let out = t.attach_output(&relay).unwrap();
            println!("READY");
            for _ in 0..n {
                let (ts, item) = input.get(Selector::NextUnseen).unwrap();
                // The open item holds this space's mark at `ts` while the put is on its way.
                if let Err(e) = out.put(ts, item) {
                    println!("FAILED {ts} {e}");
                }
                input.consume(ts).unwrap();
            }
            println!("DONE");
            std::thread::sleep(Duration::from_secs(600));
        }
        // Gets a job of "jobs" and consumes it, then gets another and holds it, with the
        // items its gets took ahead (`PREFETCH`).
        "leaser" => {
            let jobs = space.lookup_queue("jobs", T).unwrap();
            let t = space.task(INFINITY).unwrap();
            let input = t.attach_input(&jobs).unwrap();
            let done = input.get_timeout(T).unwrap();
            input.consume(done.ticket).unwrap();
            println!("CONSUMED {}", done.ts);
            let held = input.get_timeout(T).unwrap();
            println!("HOLDING {}", held.ts);
            println!("LEASED {}", space.stats().leased);
            std::thread::sleep(Duration::from_secs(600));
        }
        // Owns register "r" and writes "v1".."vN" into it, a pause apart.
        "registrar" => {
            let n: u64 = env("N").parse().unwrap();
            let r = space
                .register(ContainerOptions::default().name("r"))
                .unwrap();
            let t = space.task(0).unwrap();
            let out = t.attach_output(&r).unwrap();
            println!("READY");
            let mut go = String::new();
            std::io::stdin().read_line(&mut go).unwrap();
            for k in 1..=n {
                assert_eq!(out.write(format!("v{k}")).unwrap(), k);
                std::thread::sleep(Duration::from_millis(3));
            }
            println!("DONE");
            std::thread::sleep(Duration::from_secs(600));
        }
        // Puts 1..=N into "sink", a pause apart, its virtual time just past each; starts when
        // told to on standard input, so its mark at 1 can be seen first.
        "pacer" => {
            let n: i64 = env("N").parse().unwrap();
            let sink = space.lookup_channel("sink", T).unwrap();
            let t = space.task(1).unwrap();
            let out = t.attach_output(&sink).unwrap();
            println!("READY");
            let mut go = String::new();
            std::io::stdin().read_line(&mut go).unwrap();
            for ts in 1..=n {
                out.put(ts, "x").unwrap();
                t.set_virtual_time(ts + 1).unwrap();
                std::thread::sleep(Duration::from_millis(15));
            }
            t.set_virtual_time(INFINITY).unwrap();
            println!("DONE");
            std::thread::sleep(Duration::from_secs(600));
        }
        other => panic!("unknown role {other}"),
    }
}

/// Whether every item of `ch`, owned by `space`, is reclaimed within the test's patience;
/// runs collection passes meanwhile.
fn all_reclaimed(space: &Space, ch: &Channel) -> bool {
    let ch = local(ch);
    eventually(T, || {
        space.runtime().collect();
        ch.is_empty()
    })
}

fn router(test: &str) -> (Space, String, String) {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app(test);
    let s = Space::join(&app, Config::router(ep.clone())).unwrap();
    (s, ep, app)
}

fn spawn(role: &str, ep: &str, app: &str, extra: &[(&str, String)]) -> Proc {
    let mut env = vec![("ROUTER", ep.to_owned()), ("APP", app.to_owned())];
    env.extend(extra.iter().cloned());
    Proc::spawn(role, &env)
}

#[test]
fn producer_and_consumer_in_other_processes() {
    let (space, ep, app) = router("pc");
    let frames = space
        .channel(ContainerOptions::bounded(4).name("frames"))
        .unwrap();
    // A live task keeps the zone collecting after both others have left.
    let _observer = space.task(INFINITY).unwrap();
    let n = 200;
    let mut consumer = spawn("consumer", &ep, &app, &[("N", n.to_string())]);
    consumer.expect("READY", T);
    let mut producer = spawn("producer", &ep, &app, &[("N", n.to_string())]);
    let lines = consumer.finish(T);
    let got: Vec<i64> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("GOT ").map(|t| t.parse().unwrap()))
        .collect();
    assert_eq!(
        got,
        (0..n as i64).collect::<Vec<_>>(),
        "in order, none lost"
    );
    producer.finish(T);
    // Both are gone: their terms are released and everything is reclaimed.
    let ch = local(&frames).clone();
    assert!(
        all_reclaimed(&space, &ch),
        "left: {:?}\n{}",
        ch.timestamps(),
        space.runtime().explain(Default::default())
    );
}

#[test]
fn killed_holder_releases_gc_and_queue_items() {
    let (space, ep, app) = router("holder");
    let jobs = space
        .queue(ContainerOptions::unbounded().name("jobs"))
        .unwrap();
    let frames = space
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let me = space.task(0).unwrap();
    let qout = me.attach_output(&jobs).unwrap();
    let cout = me.attach_output(&frames).unwrap();
    for i in 0..5 {
        qout.put(i, format!("job {i}")).unwrap();
        cout.put(i, format!("frame {i}")).unwrap();
    }
    let mut holder = spawn("holder", &ep, &app, &[]);
    let ticket: u64 = holder.expect("HELD", T).parse().unwrap();
    assert_eq!(holder.expect("OPEN", T), "0");
    me.set_virtual_time(INFINITY).unwrap();
    // The remote connection holds the watermark at 0, and says so.
    std::thread::sleep(Duration::from_millis(100));
    let report = space.runtime().explain(Default::default());
    assert_eq!(report.watermark, 0, "{report}");
    assert!(report.to_string().contains("task-"), "{report}");
    assert_eq!(local(&frames).len(), 5);

    let killed = Instant::now();
    holder.kill9();
    assert!(eventually(T, || space.stats().spaces_lost == 1));
    eprintln!("holder's space lost {:?} after SIGKILL", killed.elapsed());
    // The held job comes back for another getter, in ticket order.
    let worker = space.task(INFINITY).unwrap();
    let qin = worker.attach_input(&jobs).unwrap();
    let first = qin.get_timeout(T).unwrap();
    assert_eq!(first.ticket, ticket);
    let mut tickets = vec![first.ticket];
    while let Ok(x) = qin.try_get() {
        tickets.push(x.ticket);
    }
    assert_eq!(tickets.len(), 5, "every job delivered once: {tickets:?}");
    for t in tickets {
        qin.consume(t).unwrap();
    }
    // The channel's items are reclaimed once the connection is released.
    let ch = local(&frames).clone();
    assert!(all_reclaimed(&space, &ch));
    eprintln!("released {:?} after SIGKILL", killed.elapsed());
}

#[test]
fn killed_client_releases_its_session() {
    // An end device (client mode) consuming from a bounded channel dies mid-stream: the
    // cluster drops its session, its connection no longer holds items, and the producer,
    // blocked on the full channel, goes on.
    let (space, ep, app) = router("client");
    let frames = space
        .channel(ContainerOptions::bounded(4).name("frames"))
        .unwrap();
    let _observer = space.task(INFINITY).unwrap();
    let mut consumer = spawn(
        "consumer",
        &ep,
        &app,
        &[("N", "1000000".into()), ("MODE", "client".into())],
    );
    consumer.expect("READY", T);
    let n = 200;
    let mut producer = spawn("producer", &ep, &app, &[("N", n.to_string())]);
    let mut got = -1;
    while got < 20 {
        got = consumer.expect("GOT", T).parse().unwrap();
    }
    let sessions = space.spaces().len();
    consumer.kill9();
    let lines = producer.finish(T);
    assert!(lines.iter().any(|l| l == "DONE"), "{lines:?}");
    assert!(eventually(T, || space.stats().spaces_lost >= 1));
    assert!(eventually(T, || space.spaces().len() < sessions));
    let ch = local(&frames).clone();
    assert!(
        all_reclaimed(&space, &ch),
        "{}",
        space.runtime().explain(Default::default())
    );
}

#[test]
fn owners_push_new_items_to_readers() {
    let (space, ep, app) = router("push");
    let mut source = spawn("source", &ep, &app, &[("N", "20".into())]);
    source.expect("READY", T);
    let live = space.lookup_channel("live", T).unwrap();
    let t = space.task(0).unwrap();
    let input = t.attach_input(&live).unwrap();
    source.expect("DONE", T);
    // Everything was put while this reader was attached: it arrives ahead of the gets.
    assert!(
        eventually(T, || space.stats().push_received >= 20),
        "{:?}",
        space.stats()
    );
    for want in 0..20 {
        let (ts, item) = input.get_timeout(Selector::NextUnseen, T).unwrap();
        assert_eq!(ts, want);
        assert_eq!(
            item.as_bytes().unwrap().as_ref(),
            &vec![ts as u8; 10_000][..]
        );
        input.consume(ts).unwrap();
    }
    let stats = space.stats();
    eprintln!("{stats:?}");
    assert_eq!(
        stats.view_hits, 20,
        "every get was answered from the pushed items, without a round trip"
    );
}

#[test]
fn queue_jobs_spread_over_several_processes() {
    // Two producers and two consumers, each its own process, share one queue: every job is
    // taken exactly once, and all are reclaimed.
    let (space, ep, app) = router("jobs");
    let jobs = space
        .queue(ContainerOptions::bounded(8).name("jobs"))
        .unwrap();
    // Holds the floor at 0 until both producers are done: the one starting at 1000 could
    // otherwise raise it above the other's first job before that one has a task.
    let hold = space.task(0).unwrap();
    let mut consumers: Vec<Proc> = (0..2).map(|_| spawn("qconsumer", &ep, &app, &[])).collect();
    for c in &mut consumers {
        c.expect("READY", T);
    }
    let n = 100;
    let mut producers: Vec<Proc> = [0, 1000]
        .iter()
        .map(|from| {
            spawn(
                "qproducer",
                &ep,
                &app,
                &[("FROM", from.to_string()), ("N", n.to_string())],
            )
        })
        .collect();
    for p in &mut producers {
        p.finish(T);
    }
    hold.set_virtual_time(INFINITY).unwrap();
    let mut taken = Vec::new();
    for c in &mut consumers {
        let lines = c.finish(T);
        let mine: Vec<i64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("JOB ").map(|t| t.parse().unwrap()))
            .collect();
        eprintln!("a consumer took {} jobs", mine.len());
        taken.extend(mine);
    }
    taken.sort_unstable();
    let want: Vec<i64> = (0..n).chain(1000..1000 + n).collect();
    assert_eq!(taken, want, "every job exactly once");
    let q = local(&jobs).clone();
    assert!(eventually(T, || {
        space.runtime().collect();
        q.is_empty()
    }));
}

#[test]
fn killed_producer_loses_no_acknowledged_item() {
    let (space, ep, app) = router("kp");
    let frames = space
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let reader = space.task(INFINITY).unwrap();
    let input = reader.attach_input(&frames).unwrap();
    let mut producer = spawn(
        "producer",
        &ep,
        &app,
        &[("N", "100000".into()), ("HANG", "1".into())],
    );
    producer.expect("READY", T);
    let mut acked = -1;
    while acked < 50 {
        acked = producer.expect("ACK", T).parse().unwrap();
    }
    producer.kill9();
    // Every acknowledged put is there, once, in order.
    let mut got = BTreeSet::new();
    let mut last = -1;
    while let Ok((ts, item)) = input.try_get(Selector::NextUnseen) {
        assert!(ts > last);
        assert_eq!(item.as_str().unwrap(), format!("frame {ts}"));
        assert!(got.insert(ts));
        last = ts;
    }
    assert!(
        (0..=acked).all(|t| got.contains(&t)),
        "acked up to {acked}, got {got:?}"
    );
    input.consume_until(last).unwrap();
    // The producer's virtual time no longer holds the watermark.
    assert!(
        all_reclaimed(&space, &frames),
        "{}",
        space.runtime().explain(Default::default())
    );
}

#[test]
fn waiting_on_a_dead_owner_fails_cleanly() {
    let (space, ep, app) = router("owner");
    let mut owner = spawn("owner", &ep, &app, &[]);
    owner.expect("READY", T);
    let ch = space.lookup_channel("owned", T).unwrap();
    assert!(ch.owner().is_some());
    let t = space.task(0).unwrap();
    let input = t.attach_input(&ch).unwrap();
    t.set_virtual_time(INFINITY).unwrap();
    // The owner's first item may be there or already collected (its zone had no other task
    // when the owner raised its virtual time); after it nothing ever arrives.
    if let Ok((ts, item)) = input.try_get(Selector::NextUnseen) {
        assert_eq!((ts, item.as_str().unwrap()), (0, "zero"));
        input.consume(ts).unwrap();
    }
    let waiter = std::thread::spawn(move || {
        let r = input.get(Selector::NextUnseen);
        (r, Instant::now())
    });
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    owner.kill9();
    let (r, at) = waiter.join().unwrap();
    assert_eq!(r.unwrap_err(), GetError::Unreachable);
    let took = at - killed;
    assert!(took < Duration::from_secs(10), "noticed after {took:?}");
    eprintln!("waiting get failed {took:?} after SIGKILL");
    // The name went with its owner, and new operations fail at once.
    assert!(eventually(T, || space.record("owned").is_none()));
    let out = space.task(0).unwrap();
    let err = out.attach_output(&ch).unwrap_err();
    assert!(matches!(err, StmError::Unreachable(_)), "{err}");
}

/// A user program written once against the core's handles: a producer and a consumer
/// through a bounded channel, a bounded queue and a register. Returns what the consumer saw.
fn program(
    task: &dyn Fn(Timestamp) -> Task,
    frames: &Channel,
    jobs: &Queue,
    mode: &Register,
) -> Vec<String> {
    let consumer = task(INFINITY);
    let (fin, qin, rin) = (
        consumer.attach_input(frames).unwrap(),
        consumer.attach_input(jobs).unwrap(),
        consumer.attach_input(mode).unwrap(),
    );
    let producing = {
        let producer = task(0);
        let (frames, jobs, mode) = (frames.clone(), jobs.clone(), mode.clone());
        std::thread::spawn(move || {
            let (fout, qout, rout) = (
                producer.attach_output(&frames).unwrap(),
                producer.attach_output(&jobs).unwrap(),
                producer.attach_output(&mode).unwrap(),
            );
            rout.write("running").unwrap();
            for n in 0..12 {
                // Bounded to 4: the producer waits for the consumer, here or across hosts.
                fout.put(n, format!("frame {n}")).unwrap();
                qout.put(n, format!("job {n}")).unwrap();
                producer.set_virtual_time(n + 1).unwrap();
            }
            rout.write("done").unwrap();
        })
    };
    let mut seen = vec![format!("mode {}", rin.read().unwrap().1.as_str().unwrap())];
    for _ in 0..12 {
        let (ts, frame) = fin.get(Selector::NextUnseen).unwrap();
        let job = qin.get().unwrap();
        // Both held items count in the consumer's visibility until consumed.
        let held = consumer.visibility();
        seen.push(format!(
            "{ts} {} {} held {held}",
            frame.as_str().unwrap(),
            job.item.as_str().unwrap()
        ));
        fin.consume_until(ts).unwrap();
        qin.consume(job.ticket).unwrap();
    }
    producing.join().unwrap();
    let last = loop {
        let (_, v) = rin.read().unwrap();
        if v.as_str() == Some("done") {
            break v;
        }
    };
    seen.push(format!("mode {}", last.as_str().unwrap()));
    seen.push(format!(
        "{:?}",
        fin.try_get(Selector::NextUnseen)
            .map(|(t, _)| t)
            .unwrap_err()
    ));
    seen
}

#[test]
fn one_program_runs_on_a_local_runtime_and_a_joined_space() {
    let rt = stampede_core::Runtime::new();
    let here = program(
        &|vt| rt.task(vt).unwrap(),
        &rt.channel(ContainerOptions::bounded(4)).unwrap(),
        &rt.queue(ContainerOptions::bounded(4)).unwrap(),
        &rt.register(ContainerOptions::default()).unwrap(),
    );
    // The same program, with every container owned by another process.
    let (space, ep, app) = router("oneapi");
    let mut owner = spawn("containers", &ep, &app, &[]);
    owner.expect("READY", T);
    let frames = space.lookup_channel("p/frames", T).unwrap();
    let jobs = space.lookup_queue("p/jobs", T).unwrap();
    let mode = space.lookup_register("p/mode", T).unwrap();
    assert!(!frames.is_local() && !jobs.is_local() && !mode.is_local());
    assert_eq!(frames.owner(), jobs.owner());
    assert_eq!((frames.capacity(), jobs.capacity()), (Some(4), Some(4)));
    let there = program(&|vt| space.task(vt).unwrap(), &frames, &jobs, &mode);
    assert_eq!(here, there);
    assert_eq!(here.len(), 15);
    assert_eq!(here[1], "0 frame 0 job 0 held 0");
}

#[test]
fn containers_are_created_in_another_address_space() {
    let (space, ep, app) = router("createon");
    let mut other = spawn("owner", &ep, &app, &[]);
    let id = other.expect("ID", T);
    other.expect("READY", T);
    // A named channel and an unnamed queue, created there from here: they live and are
    // served there.
    let frames = space
        .channel_on(&id, ContainerOptions::bounded(2).name("made/frames"))
        .unwrap();
    let jobs = space.queue_on(&id, ContainerOptions::unbounded()).unwrap();
    assert_eq!(
        (frames.owner(), jobs.owner()),
        (Some(id.as_str()), Some(id.as_str()))
    );
    assert_eq!((frames.name(), jobs.name()), (Some("made/frames"), None));
    assert_eq!(frames.capacity(), Some(2));
    assert_eq!(space.record("made/frames").unwrap().space, id);
    let found = space.lookup_channel("made/frames", T).unwrap();
    assert_eq!(found.owner(), Some(id.as_str()));
    // The owner's zone already passed 0 (its own channel's item).
    let t = space.task(10).unwrap();
    let (out, input) = (
        t.attach_output(&frames).unwrap(),
        t.attach_input(&found).unwrap(),
    );
    out.put(10, "a").unwrap();
    out.put(11, "b").unwrap();
    // Bounded to 2 where it lives, and nothing is consumed yet.
    assert_eq!(out.try_put(12, "c").unwrap_err().kind(), PutErrorKind::Full);
    assert_eq!(input.get(Selector::Oldest).unwrap().1.as_str(), Some("a"));
    let (qo, qi) = (
        t.attach_output(&jobs).unwrap(),
        t.attach_input(&jobs).unwrap(),
    );
    qo.put(15, "job").unwrap();
    let job = qi.get().unwrap();
    assert_eq!((job.ts, job.item.as_str()), (15, Some("job")));
    qi.consume(job.ticket).unwrap();
    // The owner drops a task's proxy with its last connection; attaching again (while the
    // detach may still be on its way) gets a working connection every time.
    drop((qo, qi));
    for _ in 0..20 {
        let again = t.attach_input(&jobs).unwrap();
        assert!(matches!(again.try_get(), Err(GetError::Unavailable(_))));
    }
    // The owner's refusals come back typed.
    assert!(matches!(
        space.channel_on(&id, ContainerOptions::default().name("made/frames")),
        Err(NetError::Stm(StmError::NameTaken(_)))
    ));
    assert!(matches!(
        space.register_on(&id, ContainerOptions::default().name("bad*name")),
        Err(NetError::Stm(StmError::InvalidName(_)))
    ));
    // Closing from here closes it there.
    frames.close().unwrap();
    assert_eq!(
        out.try_put(13, "d").unwrap_err().kind(),
        PutErrorKind::Closed
    );
}

#[test]
fn remote_arrival_callbacks_and_garbage_handlers_are_forwarded_in_order() {
    use futures::StreamExt;
    use std::sync::{Arc, Mutex};

    let (space, ep, app) = router("events");
    let mut owner = spawn("owner", &ep, &app, &[]);
    owner.expect("READY", T);
    let ch = space.lookup_channel("owned", T).unwrap();
    let arrived = Arc::new(Mutex::new(Vec::new()));
    let freed = Arc::new(Mutex::new(Vec::new()));
    let sub = {
        let a = arrived.clone();
        ch.on_arrival(move |ts| a.lock().unwrap().push(ts)).unwrap()
    };
    {
        let f = freed.clone();
        ch.on_garbage(move |ts, item| {
            f.lock()
                .unwrap()
                .push((ts, item.as_str().unwrap().to_owned()))
        })
        .unwrap();
    }
    let mut stream = ch.arrivals(128).unwrap();
    let t = space.task(1).unwrap();
    let (out, input) = (t.attach_output(&ch).unwrap(), t.attach_input(&ch).unwrap());
    let n = 50;
    for ts in 1..=n {
        let once = stampede_core::PutOptions::default().consumers(1);
        out.put_with(ts, format!("v{ts}"), once).unwrap();
    }
    // Each item is reclaimed at the owner once its one consumer consumed it.
    for ts in 1..=n {
        input.get(Selector::Exact(ts)).unwrap();
        input.consume(ts).unwrap();
    }
    assert!(eventually(T, || arrived.lock().unwrap().len() == n as usize));
    assert_eq!(
        *arrived.lock().unwrap(),
        (1..=n).collect::<Vec<_>>(),
        "in order"
    );
    let streamed: Vec<i64> =
        futures::executor::block_on(stream.by_ref().take(n as usize).collect());
    assert_eq!(streamed, (1..=n).collect::<Vec<_>>());
    // Every reclaimed item arrives once, with its bytes (item 0 is the owner's own, which
    // the watermark may reclaim too).
    let mine = || {
        let mut v: Vec<_> = freed
            .lock()
            .unwrap()
            .iter()
            .filter(|f| f.0 > 0)
            .cloned()
            .collect();
        v.sort();
        v
    };
    assert!(eventually(T, || mine().len() == n as usize), "{:?}", mine());
    assert_eq!(
        mine(),
        (1..=n).map(|ts| (ts, format!("v{ts}"))).collect::<Vec<_>>()
    );
    // After unsubscribing, the callback hears nothing more; the stream still does.
    assert!(ch.unsubscribe(sub));
    assert!(!ch.unsubscribe(sub));
    out.put(n + 10, "late").unwrap();
    let next = futures::executor::block_on(stream.next());
    assert_eq!(next, Some(n + 10));
    assert_eq!(arrived.lock().unwrap().len(), n as usize);
    let stats = space.stats();
    assert_eq!((stats.events_lost, stats.events_dropped), (0, 0));
    assert!(stats.events_received > 2 * n as u64);
}

#[test]
fn a_correlator_matches_channels_of_other_spaces() {
    use stampede_core::{Correlator, Match};

    let (space, ep, app) = router("corr");
    let mut other = spawn("owner", &ep, &app, &[]);
    let id = other.expect("ID", T);
    other.expect("READY", T);
    let video = space
        .channel_on(&id, ContainerOptions::unbounded())
        .unwrap();
    let audio = space.channel(ContainerOptions::unbounded()).unwrap();
    let t = space.task(10).unwrap();
    let mut corr = Correlator::new(
        vec![
            t.attach_input(&video).unwrap(),
            t.attach_input(&audio).unwrap(),
        ],
        Match::Within(2),
    )
    .unwrap();
    let (v, a) = (
        t.attach_output(&video).unwrap(),
        t.attach_output(&audio).unwrap(),
    );
    // The correlator waits for arrivals of both, here and there.
    let waiter = std::thread::spawn(move || {
        let sets: Vec<_> = (0..3).map(|_| corr.get_timeout(T).unwrap()).collect();
        (corr, sets)
    });
    for ts in [10, 20, 30] {
        v.put(ts, format!("frame {ts}")).unwrap();
        a.put(ts + 1, format!("chunk {}", ts + 1)).unwrap();
    }
    let (corr, sets) = waiter.join().unwrap();
    let got: Vec<_> = sets
        .iter()
        .map(|s| {
            (
                s.ts,
                s.items[0].0,
                s.items[1].0,
                s.items[1].1.as_str().map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(
        got,
        [10, 20, 30]
            .map(|ts| (ts, ts, ts + 1, Some(format!("chunk {}", ts + 1))))
            .to_vec()
    );
    corr.consume_until(&sets[2]).unwrap();
    let mut corr = corr;
    assert!(matches!(corr.try_get(), Err(GetError::Unavailable(_))));
    // Closing the remote channel ends the correlation.
    video.close().unwrap();
    assert_eq!(corr.get_timeout(T).unwrap_err(), GetError::Closed);
}

#[test]
fn remote_channel_matches_local_semantics() {
    // The same operations on a local channel and on a channel of another address space
    // give the same results.
    matches_local_semantics("model", 0, false);
}

#[test]
fn reader_views_match_local_semantics_with_pipelined_puts_and_lost_pushes() {
    // Puts that return once sent, and every third push lost on the way: the reader's view
    // has gaps and is rebuilt, the owner answers meanwhile, and every result is the same.
    let space = matches_local_semantics("model-lossy", 3, true);
    let stats = space.stats();
    eprintln!("{stats:?}");
    assert!(stats.view_snapshots > 1, "lost pushes rebuilt the view");
    assert!(stats.view_hits > 0, "gets were answered from the view");
}

#[test]
fn reader_views_answer_most_gets_without_a_round_trip() {
    let space = matches_local_semantics("model-views", 0, true);
    let stats = space.stats();
    eprintln!("{stats:?}");
    assert!(stats.view_hits > 0, "gets were answered from the view");
    assert_eq!(stats.seen_refused, 0);
}

/// Runs one random trace on a local channel and on another space's channel and compares
/// every result; `push_loss` drops pushes here ([`Config::push_loss`]), `pipelined` puts
/// with the form that returns once sent.
fn matches_local_semantics(test: &str, push_loss: u32, pipelined: bool) -> Space {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app(test);
    let cfg = Config {
        push_loss,
        ..Config::router(ep.clone())
    };
    let space = Space::join(&app, cfg).unwrap();
    let mut owner = spawn("owner", &ep, &app, &[]);
    owner.expect("READY", T);
    let remote = space.lookup_channel("owned", T).unwrap();
    let rt = stampede_core::Runtime::new();
    let local = rt.channel(ContainerOptions::unbounded()).unwrap();
    // Align the local channel with the remote one's first item.
    {
        let t = rt.task(0).unwrap();
        t.attach_output(&local).unwrap().put(0, "zero").unwrap();
    }
    let lt = rt.task(1).unwrap();
    let rtask = space.task(1).unwrap();
    let (lo, ro) = (
        lt.attach_output(&local).unwrap(),
        rtask.attach_output(&remote).unwrap(),
    );
    let (li, ri) = (
        lt.attach_input(&local).unwrap(),
        rtask.attach_input(&remote).unwrap(),
    );
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = |m: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    };
    let sels = |k| match k {
        0 => Selector::Oldest,
        1 => Selector::Newest,
        2 => Selector::NewestUnseen,
        3 => Selector::NextUnseen,
        _ => Selector::Exact(k as i64 - 4),
    };
    for step in 0..300 {
        // Virtual time stays put: raising it moves each side's floor at its own pace
        // (the owner hears of it a report later), which is allowed to differ.
        let op = next(6);
        let ts = next(24) as i64;
        let (a, b) = match op {
            0 | 1 if pipelined => (
                format!("{:?}", lo.put(ts, format!("v{ts}")).map_err(|e| e.kind())),
                // A duplicate is this space's own, refused at once.
                format!("{:?}", ro.put(ts, format!("v{ts}")).map_err(|e| e.kind())),
            ),
            0 | 1 => (
                format!(
                    "{:?}",
                    lo.try_put(ts, format!("v{ts}")).map_err(|e| e.kind())
                ),
                format!(
                    "{:?}",
                    ro.try_put(ts, format!("v{ts}")).map_err(|e| e.kind())
                ),
            ),
            2 | 3 => {
                let s = sels(next(28));
                let f = |r: Result<(i64, stampede_core::Item), GetError>| {
                    format!("{:?}", r.map(|(t, i)| (t, i.as_str().unwrap().to_owned())))
                };
                (f(li.try_get(s)), f(ri.try_get(s)))
            }
            4 => (
                format!("{:?}", li.consume(ts)),
                format!("{:?}", ri.consume(ts)),
            ),
            _ => (
                format!("{:?}", li.consume_until(ts / 4)),
                format!("{:?}", ri.consume_until(ts / 4)),
            ),
        };
        assert_eq!(a, b, "step {step} op {op} ts {ts}");
        assert_eq!(lt.visibility(), rtask.visibility(), "step {step}");
    }
    drop((li, ri, lo, ro, lt, rtask));
    space
}

#[test]
fn put_errors_and_bounded_waits_cross_processes() {
    let (space, ep, app) = router("errs");
    let mut owner = spawn("owner", &ep, &app, &[]);
    owner.expect("READY", T);
    let remote = space.lookup_channel("owned", T).unwrap();
    let t = space.task(1).unwrap();
    let out = t.attach_output(&remote).unwrap();
    let e = out.put(0, "late").unwrap_err();
    assert_eq!(e.kind(), PutErrorKind::BelowVisibility { visibility: 1 });
    assert_eq!(
        e.into_item().as_str().unwrap(),
        "late",
        "the item comes back"
    );
    out.put(5, "five").unwrap();
    assert_eq!(
        out.put(5, "again").unwrap_err().kind(),
        PutErrorKind::DuplicateTimestamp
    );
    let reader = space.task(INFINITY).unwrap();
    let input = reader.attach_input(&remote).unwrap();
    let start = Instant::now();
    let r = input.get_timeout(Selector::Exact(7), Duration::from_millis(600));
    assert!(matches!(r, Err(GetError::Timeout(_))), "{r:?}");
    assert!(start.elapsed() >= Duration::from_millis(600));
    assert!(matches!(
        space.lookup_queue("owned", T).unwrap_err(),
        StmError::WrongKind { .. }
    ));
    assert!(matches!(
        space
            .lookup_channel("nothing", Duration::from_millis(200))
            .unwrap_err(),
        StmError::NotFound(_)
    ));
}

/// Host `A` routes and owns "frames"; host `B`'s spaces are its clients through a relay
/// that delays each direction (see `common::hosts`).
#[test]
fn emulated_hosts_with_delay_and_partition() {
    const LATENCY: Duration = Duration::from_millis(20);
    const JITTER: Duration = Duration::from_millis(5);
    let hosts = match Hosts::new(LATENCY, JITTER) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("skipped: no emulated hosts here ({e})");
            return;
        }
    };
    let app = app("netns");
    let mut hub = hosts.spawn(
        A,
        "hub",
        &[
            ("ROUTER", hosts.router()),
            ("APP", app.clone()),
            ("MODE", "router".into()),
        ],
    );
    hub.expect("READY", T);
    // Clients, so that all their traffic, even between two spaces on `B`, crosses the relay.
    let on_b = |role: &str, extra: &[(&str, String)]| {
        let mut env = vec![
            ("ROUTER", hosts.relay()),
            ("APP", app.clone()),
            ("MODE", "client".into()),
        ];
        env.extend(extra.iter().cloned());
        hosts.spawn(B, role, &env)
    };
    // `N` items from `from` cross in order, none lost; returns the producer's round trips.
    let exchange = |from: i64, n: i64| -> Vec<Duration> {
        let mut consumer = on_b("consumer", &[("N", n.to_string())]);
        consumer.expect("READY", T);
        let mut producer = on_b(
            "producer",
            &[("FROM", from.to_string()), ("N", n.to_string())],
        );
        let got: Vec<i64> = consumer
            .finish(T)
            .iter()
            .filter_map(|l| l.strip_prefix("GOT ").map(|t| t.parse().unwrap()))
            .collect();
        assert_eq!(
            got,
            (from..from + n).collect::<Vec<_>>(),
            "in order, none lost"
        );
        producer
            .finish(T)
            .iter()
            .filter_map(|l| l.strip_prefix("RTT "))
            .map(|us| Duration::from_micros(us.parse().unwrap()))
            .collect()
    };
    let n = 30;
    let mut rtts = exchange(0, n);
    // Each put's answer crosses the relay both ways: at least twice the one-way latency
    // less the jitter. The median has room for the jitter and none for a relay bypassed.
    rtts.sort();
    let median = rtts[rtts.len() / 2];
    eprintln!(
        "put round trips through the relay: min {:?}, median {median:?}",
        rtts[0]
    );
    assert!(median >= LATENCY * 7 / 4, "latency not felt: {rtts:?}");
    // A partition: the hub notices host B's remaining space is gone.
    let mut other = on_b("owner", &[]);
    let id = other.expect("ID", T);
    other.expect("READY", T);
    let cut = Instant::now();
    hosts.partition(true);
    while hub.expect("LEFT", T) != id {}
    eprintln!("partition noticed after {:?}", cut.elapsed());
    other.kill9();
    // Healed, a new space on host B joins through the relay and works, still delayed.
    hosts.partition(false);
    let healed = exchange(n, 10);
    eprintln!("after healing: {healed:?}");
    let floor = (LATENCY - JITTER) * 2;
    assert!(
        healed.iter().all(|&d| d >= floor),
        "a round trip after healing bypassed the relay: {healed:?}"
    );
}

#[test]
fn a_name_never_has_two_owners() {
    let (router, ep, app) = router("names");
    let a = Space::join(&app, peer_of(&ep)).unwrap();
    let b = Space::join(&app, peer_of(&ep)).unwrap();
    let mut won = 0;
    for i in 0..20 {
        let name = format!("contested/{i}");
        let race = |s: Space, name: String| {
            std::thread::spawn(move || s.channel(ContainerOptions::unbounded().name(name)).is_ok())
        };
        let (x, y) = (race(a.clone(), name.clone()), race(b.clone(), name.clone()));
        let (x, y) = (x.join().unwrap(), y.join().unwrap());
        assert!(!(x && y), "{name}: both spaces own it");
        won += usize::from(x || y);
        if x || y {
            let rec = router.wait_for(&name, T).unwrap();
            assert_eq!(rec.space, if x { a.id() } else { b.id() });
        }
    }
    eprintln!("{won} of 20 contested names registered (both refused otherwise)");
}

/// A client takes a name only when its router grants it: two clients claiming one name at
/// once get exactly one winner, and a client cut off from its router takes no name at all,
/// not even one held on the far side, which it cannot see (it would otherwise hold a
/// second container or cluster object under that name).
#[test]
fn a_client_takes_a_name_only_with_its_routers_say() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("settle");
    let mut router = spawn("owner", &ep, &app, &[("MODE", "router".into())]);
    router.expect("READY", T);
    let client = || {
        let mut c = Config::client(ep.clone());
        c.op_timeout = Duration::from_secs(1);
        Space::join(&app, c).unwrap()
    };
    let (a, b) = (client(), client());
    for i in 0..10 {
        let name = format!("race/{i}");
        let (x, y) = std::thread::scope(|s| {
            let x = s.spawn(|| a.register_service(&name, ""));
            let y = s.spawn(|| b.register_service(&name, ""));
            (x.join().unwrap(), y.join().unwrap())
        });
        assert!(x.is_ok() != y.is_ok(), "{name}: {x:?} / {y:?}");
        let loser = if x.is_ok() { y } else { x };
        assert!(
            matches!(loser, Err(NetError::Stm(StmError::NameTaken(_)))),
            "{loser:?}"
        );
    }
    assert!(matches!(
        a.register_service("owned", ""),
        Err(NetError::Stm(StmError::NameTaken(_)))
    ));
    let signal = |sig: &str| {
        let pid = router.child.id().to_string();
        assert!(std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP");
    for name in ["owned", "free/name"] {
        match a.register_service(name, "") {
            Err(NetError::Unreachable(why)) => assert!(why.contains("router"), "{why}"),
            other => panic!("{name} claimed with the router stopped: {other:?}"),
        }
    }
    signal("-CONT");
    let c = client();
    assert!(matches!(
        c.register_service("owned", ""),
        Err(NetError::Stm(StmError::NameTaken(_)))
    ));
    c.register_service("free/name", "").unwrap();
}

#[test]
fn a_late_joiner_collects() {
    // A space that joins after others have reported marks learns them under their ids,
    // so its own garbage collection goes on.
    let (router, ep, app) = router("late");
    let _busy = router.task(INFINITY).unwrap();
    let first = Space::join(&app, peer_of(&ep)).unwrap();
    // Its mark (5) is what the late space asks for when it joins.
    let slow = first.task(5).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let late = Space::join(&app, peer_of(&ep)).unwrap();
    let ch = late.channel(ContainerOptions::unbounded()).unwrap();
    let t = late.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    for ts in 0..10 {
        out.put(ts, "x").unwrap();
    }
    t.set_virtual_time(INFINITY).unwrap();
    slow.set_virtual_time(INFINITY).unwrap();
    let local = local(&ch).clone();
    assert!(
        eventually(T, || {
            late.runtime().collect();
            local.is_empty()
        }),
        "{}",
        late.runtime().explain(Default::default())
    );
}

/// A hold moved by a put stays held everywhere while the link from its new owner is flooded:
/// the putter's raised mark reaches this space long before the owner's lowered one, and the
/// item the owner relays here at the same timestamp must still be accepted and readable.
#[test]
fn a_moved_hold_survives_a_flooded_link() {
    let (space, ep, app) = router("flood");
    let n = 60;
    let relay = space
        .channel(ContainerOptions::unbounded().name("relay"))
        .unwrap();
    // Data far ahead: the floor here is limited by the marks alone, not by the horizon.
    let ahead = space
        .channel(ContainerOptions::unbounded().name("ahead"))
        .unwrap();
    // Holds the floor here until the putter's task counts.
    let gate = space.task(0).unwrap();
    let src = space.task(1_000_000).unwrap();
    src.attach_output(&ahead)
        .unwrap()
        .put(1_000_000, "ahead")
        .unwrap();
    src.set_virtual_time(INFINITY).unwrap();
    let reader = space.task(INFINITY).unwrap();
    let input = reader.attach_input(&relay).unwrap();
    let mut relayer = spawn("relayer", &ep, &app, &[("N", n.to_string())]);
    relayer.expect("READY", T);
    // Take in the flood as it comes, so the owner's pushes keep the link full.
    let flood = space.lookup_channel("flood", T).unwrap();
    let drain = space
        .task_builder()
        .zone(ZoneId(1))
        .virtual_time(INFINITY)
        .create()
        .unwrap();
    let fin = drain.attach_input(&flood).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let draining = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok((ts, _)) =
                    fin.get_timeout(Selector::NewestUnseen, Duration::from_millis(200))
                {
                    let _ = fin.consume_until(ts);
                }
            }
        })
    };
    let mut pacer = spawn("pacer", &ep, &app, &[("N", n.to_string())]);
    pacer.expect("READY", T);
    assert!(eventually(T, || {
        let r = space.runtime().explain(ZoneId::DEFAULT);
        r.holds
            .iter()
            .any(|h| h.ts == 1 && matches!(h.cause, stampede_core::HoldCause::Remote { .. }))
    }));
    gate.set_virtual_time(INFINITY).unwrap();
    pacer.say("GO");
    let mut got = Vec::new();
    while got.len() < n {
        match input.get_timeout(Selector::NextUnseen, T) {
            Ok((ts, _)) => {
                input.consume(ts).unwrap();
                got.push(ts);
            }
            Err(e) => panic!(
                "item {} never arrived ({e}); got {got:?}; relayer said {:?}; pacer said \
                 {:?}\n{}",
                got.len() + 1,
                relayer.printed(),
                pacer.printed(),
                space.runtime().explain(ZoneId::DEFAULT)
            ),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    relayer.expect("DONE", T);
    assert!(
        !relayer.printed().iter().any(|l| l.starts_with("FAILED")),
        "relayed puts refused: {:?}",
        relayer.seen
    );
    assert_eq!(
        got,
        (1..=n as i64).collect::<Vec<_>>(),
        "every item, in order"
    );
    pacer.expect("DONE", T);
    draining.join().unwrap();
}

/// A put into a remote channel returns once sent. What the putting space knows fails the put
/// itself; what only the owner sees comes back with the next put (which is then not made)
/// or flush, as the same typed error with the item.
#[test]
fn pipelined_put_refusals_surface_at_the_documented_points() {
    let (space, ep, app) = router("pipelined");
    let mut owner = spawn("owner", &ep, &app, &[]);
    owner.expect("READY", T);
    let remote = space.lookup_channel("owned", T).unwrap();
    let t = space.task(1).unwrap();
    let out = t.attach_output(&remote).unwrap();
    // Another space puts at 10.
    let other = Space::join(&app, peer_of(&ep)).unwrap();
    let theirs = other.lookup_channel("owned", T).unwrap();
    let ot = other.task(1).unwrap();
    ot.attach_output(&theirs)
        .unwrap()
        .put_sync(10, "ten")
        .unwrap();
    // This space's own duplicate: at once.
    out.put(5, "five").unwrap();
    let e = out.put(5, "again").unwrap_err();
    assert_eq!(e.kind(), PutErrorKind::DuplicateTimestamp);
    assert!(!e.is_deferred());
    // Only the owner knows of the other space's item. The synchronous form says so at once...
    let e = out.put_sync(10, "ten").unwrap_err();
    assert_eq!(e.kind(), PutErrorKind::DuplicateTimestamp);
    assert!(!e.is_deferred());
    // ...a pipelined put is refused later, and the next put reports it instead of being made.
    out.put(10, "ten").unwrap();
    assert!(eventually(T, || space.stats().puts_refused == 1));
    let mut e = out.put(6, "six").unwrap_err();
    assert!(e.is_deferred(), "{e:?}");
    assert_eq!(e.kind(), PutErrorKind::DuplicateTimestamp);
    assert_eq!(e.ts(), 10);
    assert_eq!(
        e.take_unsent()
            .map(|(ts, i)| (ts, i.as_str().map(str::to_owned))),
        Some((6, Some("six".to_owned())))
    );
    assert_eq!(e.into_item().as_str(), Some("ten"));
    out.put(6, "six").unwrap();
    out.flush().unwrap();
    // The other space closes the channel while a put is on its way: flush reports it.
    theirs.close().unwrap();
    out.put(7, "seven").unwrap();
    let e = out.flush().unwrap_err();
    assert!(e.is_deferred());
    assert_eq!((e.kind(), e.ts()), (PutErrorKind::Closed, 7));
    // From then on this space knows the channel is closed.
    let e = out.put(8, "eight").unwrap_err();
    assert_eq!(e.kind(), PutErrorKind::Closed);
    assert!(!e.is_deferred());
    out.flush().unwrap();
    assert_eq!(space.stats().puts_refused, 2);
    drop((ot, theirs));
    other.leave();
}

/// A put that waits for its answer follows the pipelined puts on their way, but waits for
/// them only as its own wait allows: while the owner holds one for room, a try is full at
/// once, a timed put full after its timeout, an interrupted one stops; none of them is sent.
#[test]
fn puts_behind_a_held_pipelined_put_keep_their_own_wait() {
    let (space, ep, app) = router("held");
    let ch = space
        .channel(ContainerOptions::bounded(1).name("held"))
        .unwrap();
    // Consumes nothing until told: the channel stays full.
    let reader = space.task(INFINITY).unwrap();
    let input = reader.attach_input(&ch).unwrap();
    let other = Space::join(&app, peer_of(&ep)).unwrap();
    let remote = other.lookup_channel("held", T).unwrap();
    let t = other.task(0).unwrap();
    let out = t.attach_output(&remote).unwrap();
    let once = PutOptions::default().consumers(1);
    out.put_with(1, "A", once).unwrap();
    // Sent once A is stored; the owner holds it for room.
    out.put_with(2, "B", once).unwrap();
    let patience = Duration::from_secs(2);
    let start = Instant::now();
    let e = out.try_put(3, "C").unwrap_err();
    assert!(
        start.elapsed() < patience,
        "try_put took {:?}",
        start.elapsed()
    );
    assert_eq!(e.kind(), PutErrorKind::Full);
    assert_eq!(e.into_item().as_str(), Some("C"));
    let start = Instant::now();
    let e = out
        .put_timeout(4, "D", Duration::from_millis(300))
        .unwrap_err();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < patience,
        "took {took:?}"
    );
    assert_eq!(e.kind(), PutErrorKind::Full);
    assert_eq!(e.into_item().as_str(), Some("D"));
    let start = Instant::now();
    let stop = start + Duration::from_millis(200);
    let e = out
        .put_interruptible(5, "E", PutOptions::default().sync(true), &|| {
            Instant::now() >= stop
        })
        .unwrap_err();
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < patience,
        "took {took:?}"
    );
    assert_eq!(e.kind(), PutErrorKind::Interrupted);
    assert_eq!(e.into_item().as_str(), Some("E"));
    // Room: B is stored, and so is a later put.
    let (ts, a) = input.get_timeout(Selector::NextUnseen, T).unwrap();
    assert_eq!((ts, a.as_str()), (1, Some("A")));
    input.consume(1).unwrap();
    let (ts, b) = input.get_timeout(Selector::NextUnseen, T).unwrap();
    assert_eq!((ts, b.as_str()), (2, Some("B")));
    input.consume(2).unwrap();
    out.flush().unwrap();
    out.put_timeout(6, "F", T).unwrap();
    let (ts, f) = input.get_timeout(Selector::NextUnseen, T).unwrap();
    assert_eq!((ts, f.as_str()), (6, Some("F")));
    let ch = local(&ch);
    assert_eq!(ch.stats().puts, 3, "only A, B and F were stored");
    assert_eq!(ch.timestamps(), vec![6]);
    drop((out, t, remote));
    other.leave();
}

/// A putter killed with puts in flight: the owner holds a prefix of them, each whole and
/// once, and its watermark moves on.
#[test]
fn a_killed_putter_leaves_a_prefix_of_its_puts() {
    let (space, ep, app) = router("streamer");
    let frames = space
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let reader = space.task(INFINITY).unwrap();
    let input = reader.attach_input(&frames).unwrap();
    let mut streamer = spawn("streamer", &ep, &app, &[]);
    let mut sent = 0;
    while sent < 3000 {
        sent = streamer.expect("SENT", T).parse().unwrap();
    }
    streamer.kill9();
    assert!(eventually(T, || space.stats().spaces_lost == 1));
    let mut next = 0;
    while let Ok((ts, item)) = input.try_get(Selector::NextUnseen) {
        assert_eq!(ts, next, "puts stored in order, none missing");
        assert_eq!(item.as_str().unwrap(), format!("frame {ts}"));
        next += 1;
    }
    // At most 1024 puts are unacknowledged at once: put `sent` was made after the owner
    // stored every put up to `sent - 1024`.
    assert!(next > sent - 1024, "sent {sent}, stored {next}");
    input.consume_until(next - 1).unwrap();
    let ch = local(&frames).clone();
    assert!(
        all_reclaimed(&space, &ch),
        "{}",
        space.runtime().explain(Default::default())
    );
}

/// Items of every size cross whole, through a put that returns once sent and a get.
#[test]
fn items_of_every_size_cross_whole() {
    let (space, ep, app) = router("sizes");
    let ch = space
        .channel(ContainerOptions::unbounded().name("sizes"))
        .unwrap();
    let reader = space.task(INFINITY).unwrap();
    let input = reader.attach_input(&ch).unwrap();
    let other = Space::join(&app, peer_of(&ep)).unwrap();
    let remote = other.lookup_channel("sizes", T).unwrap();
    let t = other.task(0).unwrap();
    let out = t.attach_output(&remote).unwrap();
    let sizes = [0, 1, 4095, 4096, 65_536, 1 << 20, 3 << 20];
    for (ts, &n) in sizes.iter().enumerate() {
        let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + ts) as u8).collect();
        out.put(ts as Timestamp, bytes).unwrap();
    }
    out.flush().unwrap();
    for (ts, &n) in sizes.iter().enumerate() {
        let (got, item) = input.get_timeout(Selector::NextUnseen, T).unwrap();
        assert_eq!(got, ts as Timestamp);
        let want: Vec<u8> = (0..n).map(|i| (i * 7 + ts) as u8).collect();
        assert_eq!(item.as_bytes().unwrap(), &want[..], "{n} bytes");
    }
    drop((out, t, remote));
    other.leave();
}

/// Items echoed between two spaces, each owning the channel the other puts into, at sizes
/// that travel whole, in fragments and in shared memory.
#[test]
fn items_are_echoed_whole_both_ways() {
    let (space, ep, app) = router("echo");
    let a_ch = space
        .channel(ContainerOptions::unbounded().name("a"))
        .unwrap();
    let other = Space::join(&app, peer_of(&ep)).unwrap();
    let b_ch = other
        .channel(ContainerOptions::unbounded().name("b"))
        .unwrap();
    let (ta, tb) = (space.task(0).unwrap(), other.task(0).unwrap());
    let a_in = ta.attach_input(&a_ch).unwrap();
    let a_out = ta
        .attach_output(&space.lookup_channel("b", T).unwrap())
        .unwrap();
    let b_in = tb.attach_input(&b_ch).unwrap();
    let b_out = tb
        .attach_output(&other.lookup_channel("a", T).unwrap())
        .unwrap();
    for (ts, n) in [10, 5000, 65_536, 70_000, 1 << 20, 3 << 20]
        .into_iter()
        .enumerate()
    {
        let ts = ts as Timestamp;
        let bytes: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        a_out.put(ts, bytes.clone()).unwrap();
        let (_, ping) = b_in
            .get_timeout(Selector::NextUnseen, T)
            .unwrap_or_else(|e| panic!("{n} bytes out: {e}"));
        let ping_at = ping.as_bytes().unwrap().as_ptr();
        b_out.put(ts, ping).unwrap();
        let (_, pong) = a_in
            .get_timeout(Selector::NextUnseen, T)
            .unwrap_or_else(|e| panic!("{n} bytes back: {e}"));
        assert_eq!(pong.as_bytes().unwrap(), &bytes[..], "{n} bytes");
        if n >= 1 << 20 {
            // Zenoh placed the item in shared memory; the echo sent the buffer it arrived
            // in, so the pong is the very memory of the ping: no copy on the way back.
            let ping_in = mapped_at(ping_at).expect("the ping is in a shared-memory file");
            let pong_in = mapped_at(pong.as_bytes().unwrap().as_ptr());
            assert_eq!(pong_in, Some(ping_in), "{n} bytes copied");
        }
    }
    assert_eq!(space.stats().malformed + other.stats().malformed, 0);
    drop((a_out, b_out, a_in, b_in, ta, tb));
    other.leave();
}

#[test]
fn a_loaned_item_crosses_without_a_copy() {
    let (space, ep, app) = router("loan");
    let ch = space
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let producer = Space::join(&app, peer_of(&ep)).unwrap();
    let (tp, tc) = (producer.task(0).unwrap(), space.task(0).unwrap());
    let input = tc.attach_input(&ch).unwrap();
    let out = tp
        .attach_output(&producer.lookup_channel("frames", T).unwrap())
        .unwrap();
    for ts in 0..4 {
        let mut frame = out.loan_array(DType::U8, &[480, 640, 3]).unwrap();
        assert!(frame.in_place(), "lent in shared memory");
        frame.fill(ts as u8);
        let at = frame.as_ptr();
        out.put(ts, frame).unwrap();
        let (_, got) = input.get_timeout(Selector::NextUnseen, T).unwrap();
        let a: NdArray = got.decode().unwrap();
        assert_eq!(a.shape(), &[480, 640, 3]);
        assert!(a.as_slice::<u8>().unwrap().iter().all(|&b| b == ts as u8));
        // The owner stores the very memory the producer wrote: the same place in the same
        // shared-memory file, mapped here a second time for the receiving side.
        let written = mapped_at(at).expect("the loan is in a shared-memory file");
        assert_eq!(
            mapped_at(a.data().as_ptr()),
            Some(written),
            "copied on the way"
        );
        input.consume(ts).unwrap();
    }
    let s = producer.stats();
    // Zenoh was handed each loan's own shared-memory buffer, which it sends as a descriptor.
    assert_eq!(
        (s.loans_shared, s.sent_as_received, s.sent_fresh),
        (4, 4, 0)
    );
    drop((out, input, tp, tc));
    producer.leave();
}

#[test]
fn loans_fall_back_to_plain_memory_when_the_pool_is_full() {
    let (space, ep, app) = router("loan-full");
    let _ch = space
        .channel(ContainerOptions::unbounded().name("frames"))
        .unwrap();
    let cfg = Config {
        shm_pool: 1 << 20,
        ..peer_of(&ep)
    };
    let producer = Space::join(&app, cfg).unwrap();
    let tp = producer.task(0).unwrap();
    let out = tp
        .attach_output(&producer.lookup_channel("frames", T).unwrap())
        .unwrap();
    // A reader that never lets go holds the pool: here, loans kept unsent.
    let held: Vec<_> = (0..3).map(|_| out.loan(300_000).unwrap()).collect();
    assert!(held.iter().all(|l| l.in_place()));
    let mut more = out.loan(300_000).unwrap();
    assert!(
        !more.in_place(),
        "the pool is full: plain memory, not a wait"
    );
    more.fill(9);
    out.put(0, more).unwrap();
    out.flush().unwrap();
    let s = producer.stats();
    assert_eq!((s.loans_shared, s.loans_plain), (3, 1));
    drop((held, out, tp));
    producer.leave();
}

/// The file (by inode) and the offset in it that address `p` of this process maps.
fn mapped_at(p: *const u8) -> Option<(u64, u64)> {
    let p = p as u64;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (start, end) = f.first()?.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        );
        let inode: u64 = f.get(4)?.parse().ok()?;
        let offset = u64::from_str_radix(f.get(2)?, 16).ok()?;
        (start <= p && p < end && inode != 0).then_some((inode, offset + (p - start)))
    })
}

#[test]
fn an_item_pushed_to_several_readers_is_copied_once() {
    let (space, ep, app) = router("fan-out");
    let ch = space
        .channel(ContainerOptions::unbounded().name("mix"))
        .unwrap();
    let readers: Vec<Space> = (0..2)
        .map(|_| Space::join(&app, peer_of(&ep)).unwrap())
        .collect();
    let tasks: Vec<_> = readers.iter().map(|r| r.task(0).unwrap()).collect();
    let inputs: Vec<_> = readers
        .iter()
        .zip(&tasks)
        .map(|(r, t)| {
            t.attach_input(&r.lookup_channel("mix", T).unwrap())
                .unwrap()
        })
        .collect();
    let t = space.task(0).unwrap();
    let out = t.attach_output(&ch).unwrap();
    let n = 4;
    for ts in 0..n {
        out.put(ts, vec![ts as u8; 200_000]).unwrap();
    }
    for i in &inputs {
        for ts in 0..n {
            let (got, item) = i.get_timeout(Selector::NextUnseen, T).unwrap();
            assert_eq!((got, item.as_bytes().unwrap().len()), (ts, 200_000));
        }
    }
    let s = space.stats();
    // Each item went into shared memory once and to both readers as that buffer (a get the
    // owner answered, on a slow machine, would send the stored item itself: fresh).
    assert_eq!(s.pushed, 2 * n as u64, "{s:?}");
    assert_eq!(s.sent_as_received, 2 * n as u64, "{s:?}");
    assert!(s.sent_fresh >= n as u64, "{s:?}");
    drop((inputs, tasks, out, t));
    for r in readers {
        r.leave();
    }
}

/// Reads of a register another space owns follow its writes as a local read does: each
/// returns a write newer than the connection's last, this space's own writes are seen once
/// they return, and the reads are answered from the values the owner pushed, here even when
/// pushes are lost on the way.
#[test]
fn register_reads_are_answered_from_pushed_writes() {
    for loss in [0, 3] {
        let ep = format!("tcp/127.0.0.1:{}", free_port());
        let app = app(&format!("reg{loss}"));
        let mut cfg = Config::router(ep.clone());
        cfg.push_loss = loss;
        let space = Space::join(&app, cfg).unwrap();
        let n = 200;
        let mut owner = spawn("registrar", &ep, &app, &[("N", n.to_string())]);
        owner.expect("READY", T);
        let r = space.lookup_register("r", T).unwrap();
        let t = space.task(INFINITY).unwrap();
        let input = t.attach_input(&r).unwrap();
        assert!(matches!(input.try_read(), Err(GetError::Unavailable(_))));
        owner.say("GO");
        let mut last = 0;
        while last < n {
            let (seq, v) = input.read_timeout(T).unwrap();
            assert!(seq > last, "write {seq} read after {last}");
            assert_eq!(v.as_str(), Some(format!("v{seq}").as_str()));
            last = seq;
        }
        owner.expect("DONE", T);
        assert!(matches!(input.try_read(), Err(GetError::Unavailable(_))));
        let out = t.attach_output(&r).unwrap();
        let mine = out.write("mine").unwrap();
        assert_eq!(mine, n + 1);
        let (seq, v) = input.try_read().unwrap();
        assert_eq!(
            (seq, v.as_str()),
            (n + 1, Some("mine")),
            "its own write, at once"
        );
        assert!(matches!(input.try_read(), Err(GetError::Unavailable(_))));
        let stats = space.stats();
        eprintln!(
            "loss 1/{loss}: {} of {} reads answered here, {} pushes received",
            stats.register_hits,
            n + 1,
            stats.push_received
        );
        assert!(stats.register_hits > 0, "reads were answered here");
    }
}

/// A get on another space's queue can take items ahead as a lease: they wait for the next
/// gets there, not here, and when that space dies every one it had not consumed comes back,
/// once, for the other getters.
#[test]
fn leased_queue_items_of_a_killed_getter_are_redelivered_once() {
    let (space, ep, app) = router("lease");
    let jobs = space
        .queue(ContainerOptions::unbounded().name("jobs"))
        .unwrap();
    let producer = space.task(0).unwrap();
    let out = producer.attach_output(&jobs).unwrap();
    let n = 10;
    for ts in 1..=n {
        out.put(ts, format!("job {ts}")).unwrap();
    }
    let mut leaser = spawn("leaser", &ep, &app, &[("PREFETCH", "4".to_owned())]);
    let consumed: i64 = leaser.expect("CONSUMED", T).parse().unwrap();
    let holding: i64 = leaser.expect("HOLDING", T).parse().unwrap();
    assert_eq!((consumed, holding), (1, 2), "oldest first");
    assert_eq!(leaser.expect("LEASED", T), "4", "one get took four more");
    let q = local(&jobs).stats();
    assert_eq!(
        (q.waiting, q.held, q.consumed),
        (5, 4, 1),
        "held there: the open item and three leased"
    );
    let worker = space.task(INFINITY).unwrap();
    let qin = worker.attach_input(&jobs).unwrap();
    let first = qin.try_get().unwrap();
    assert_eq!(
        first.ts, 6,
        "leased items are not got here while their getter lives"
    );
    qin.consume(first.ticket).unwrap();

    leaser.kill9();
    assert!(eventually(T, || space.stats().spaces_lost == 1));
    let mut got = vec![first.ts];
    while got.len() < n as usize - 1 {
        let job = qin.get_timeout(T).unwrap();
        assert_eq!(job.item.as_str(), Some(format!("job {}", job.ts).as_str()));
        qin.consume(job.ticket).unwrap();
        got.push(job.ts);
    }
    got.sort_unstable();
    assert_eq!(
        got,
        (2..=n).collect::<Vec<_>>(),
        "each once, none consumed twice"
    );
    assert!(matches!(qin.try_get(), Err(GetError::Unavailable(_))));
    let q = local(&jobs).stats();
    assert_eq!(
        (q.waiting, q.held, q.consumed, q.redelivered),
        (0, 0, n as u64, 4)
    );
}
