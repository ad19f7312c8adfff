//! Tests for garbage collection: each term of the watermark, reference-counted puts,
//! garbage handlers, `explain`, time zones, bounded capacity and pending puts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stampede_core::{
    Channel, Container, ContainerOptions, Hold, HoldCause, PutErrorKind, PutOptions, Runtime,
    Selector, Task, WatermarkReport, ZoneId, INFINITY,
};

/// Long enough never to expire in a passing test; a bug makes the test fail instead of hang.
const LONG: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn manual() -> Runtime {
    Runtime::builder().gc_interval(None).build()
}

/// Puts an item far in the future into an unconnected channel, so that the zone's horizon
/// (one above the newest timestamp ever put) does not cap the watermark in these tests.
fn lift_horizon(rt: &Runtime, task: &Task) -> Channel {
    let ch = rt
        .channel(ContainerOptions::default().zone(task.zone()))
        .unwrap();
    task.attach_output(&ch)
        .unwrap()
        .put(1_000_000, "far")
        .unwrap();
    ch
}

/// The terms at the watermark.
fn holders(report: &WatermarkReport) -> Vec<Hold> {
    report.holders().cloned().collect()
}

/// Sets its flag when dropped, so helper threads stop even when the test panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        thread::sleep(ms(1));
    }
}

/// Records how often the garbage handler saw each timestamp.
fn count_garbage(ch: &Channel) -> Arc<Mutex<HashMap<i64, usize>>> {
    let seen = Arc::new(Mutex::new(HashMap::new()));
    ch.on_garbage({
        let seen = seen.clone();
        move |ts, _| *seen.lock().unwrap().entry(ts).or_insert(0) += 1
    })
    .unwrap();
    seen
}

#[test]
fn term_virtual_time_of_every_live_task() {
    let rt = manual();
    let slow = rt
        .task_builder()
        .name("slow")
        .virtual_time(3)
        .create()
        .unwrap();
    let _far = lift_horizon(&rt, &slow);
    let report = rt.explain(ZoneId::DEFAULT);
    assert_eq!(report.watermark, 3);
    assert_eq!(report.zone, ZoneId::DEFAULT);
    assert_eq!(
        holders(&report),
        vec![Hold {
            ts: 3,
            cause: HoldCause::VirtualTime {
                task: slow.id(),
                task_name: "slow".into()
            }
        }]
    );
    assert!(report.to_string().contains("slow"), "{report}");

    let slower = rt
        .task_builder()
        .name("slower")
        .virtual_time(7)
        .create()
        .unwrap();
    slow.set_virtual_time(8).unwrap();
    let report = rt.explain(ZoneId::DEFAULT);
    assert_eq!(report.watermark, 7);
    assert!(matches!(
        &holders(&report)[..],
        [Hold { cause: HoldCause::VirtualTime { task, .. }, .. }] if *task == slower.id()
    ));
    assert_eq!(rt.collect(), 7);
    assert_eq!(rt.explain(ZoneId::DEFAULT).floor, 7);

    // An exited task's virtual time no longer counts.
    drop(slower);
    assert_eq!(rt.explain(ZoneId::DEFAULT).watermark, 8);
    assert_eq!(rt.collect(), 8);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).floor, 8);
}

#[test]
fn term_unconsumed_queue_item() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::default().name("work")).unwrap();
    let p = rt.task(0).unwrap();
    let _far = lift_horizon(&rt, &p);
    let out = p.attach_output(&q).unwrap();
    let ticket = out.put(2, "job").unwrap();
    p.set_virtual_time(10).unwrap();

    let report = rt.explain(ZoneId::DEFAULT);
    assert_eq!(report.watermark, 2);
    assert_eq!(
        holders(&report),
        vec![Hold {
            ts: 2,
            cause: HoldCause::QueueItem {
                container: q.id(),
                container_name: Some("work".into()),
                ticket,
                held_by: None
            }
        }]
    );

    let worker = rt.task(INFINITY).unwrap();
    let input = worker.attach_input(&q).unwrap();
    input.get().unwrap();
    let report = rt.explain(ZoneId::DEFAULT);
    assert_eq!(report.watermark, 2);
    assert!(matches!(
        &holders(&report)[..],
        [Hold { cause: HoldCause::QueueItem { held_by: Some(t), .. }, .. }] if *t == worker.id()
    ));
    assert_eq!(rt.collect(), 2);

    input.consume(ticket).unwrap();
    assert_eq!(rt.explain(ZoneId::DEFAULT).watermark, 10);
    assert_eq!(rt.collect(), 10);
}

#[test]
fn term_oldest_unconsumed_item_of_each_channel_connection() {
    let rt = manual();
    let ch = rt
        .channel(ContainerOptions::default().name("frames"))
        .unwrap();
    let p = rt.task(0).unwrap();
    let _far = lift_horizon(&rt, &p);
    let c = rt.task_builder().name("tracker").create().unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 1..=3 {
        out.put(ts, ts.to_string()).unwrap();
    }
    p.set_virtual_time(10).unwrap();

    let report = rt.explain(ZoneId::DEFAULT);
    assert_eq!(report.watermark, 1);
    assert_eq!(
        holders(&report),
        vec![Hold {
            ts: 1,
            cause: HoldCause::Unconsumed {
                container: ch.id(),
                container_name: Some("frames".into()),
                connection: input.id(),
                task: c.id(),
                task_name: "tracker".into()
            }
        }]
    );
    let shown = report.to_string();
    assert!(
        shown.contains("frames") && shown.contains("tracker"),
        "{shown}"
    );

    // Open but unconsumed still holds.
    input.get(Selector::Exact(1)).unwrap();
    assert_eq!(rt.collect(), 1);
    assert_eq!(ch.timestamps(), vec![1, 2, 3]);

    input.consume(1).unwrap();
    assert_eq!(rt.explain(ZoneId::DEFAULT).watermark, 2);
    assert_eq!(rt.collect(), 2);
    assert_eq!(ch.timestamps(), vec![2, 3]);

    input.consume_until(3).unwrap();
    assert_eq!(rt.collect(), 10);
    assert!(ch.is_empty());
    assert_eq!(ch.stats().reclaimed, 3);

    // A detached connection no longer holds anything.
    out.put(10, "10").unwrap();
    assert_eq!(rt.explain(ZoneId::DEFAULT).watermark, 10);
    input.detach();
    p.set_virtual_time(11).unwrap();
    assert_eq!(rt.collect(), 11);
    assert!(ch.is_empty());
}

#[test]
fn term_pending_put_names_task_and_container() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt
        .task_builder()
        .name("camera")
        .virtual_time(0)
        .create()
        .unwrap();
    let _far = lift_horizon(&rt, &p);
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(5, "5").unwrap();
    thread::scope(|s| {
        // Puts in any order: 3 after 5, into a full channel.
        let putter = s.spawn(|| out.put(3, "3"));
        wait_until("the put is pending", || {
            rt.explain(ZoneId::DEFAULT)
                .holds
                .iter()
                .any(|h| matches!(h.cause, HoldCause::PendingPut { .. }))
        });
        p.set_virtual_time(100).unwrap();
        assert_eq!(p.visibility(), 3);
        let report = rt.explain(ZoneId::DEFAULT);
        assert_eq!(report.watermark, 3, "{report}");
        assert_eq!(
            holders(&report),
            vec![Hold {
                ts: 3,
                cause: HoldCause::PendingPut {
                    task: p.id(),
                    task_name: "camera".into(),
                    container: ch.id()
                }
            }]
        );
        assert!(report.to_string().contains("camera"));
        // Item 5 is consumed, but stays reachable while the put at 3 is pending.
        input.consume(5).unwrap();
        assert_eq!(rt.collect(), 3);
        assert_eq!(ch.timestamps(), vec![5]);
        ch.close().unwrap();
        assert_eq!(
            putter.join().unwrap().unwrap_err().kind(),
            PutErrorKind::Closed
        );
    });
    assert_eq!(p.visibility(), 100);
    assert_eq!(rt.collect(), 100);
    assert!(ch.is_empty());
}

#[test]
fn a_pending_put_holds_the_watermark_while_it_frees_space() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let _far = lift_horizon(&rt, &p);
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "0").unwrap();
    thread::scope(|s| {
        let putter = s.spawn(|| out.put_timeout(1, "1", LONG));
        wait_until("the put is pending", || {
            p.visibility() == 0 && {
                rt.explain(ZoneId::DEFAULT)
                    .holds
                    .iter()
                    .any(|h| matches!(h.cause, HoldCause::PendingPut { .. }))
            }
        });
        // Raising the producer's virtual time runs a pass: it frees 0, but the pending put
        // keeps the watermark at 1 rather than 100.
        p.set_virtual_time(100).unwrap();
        putter.join().unwrap().unwrap();
    });
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).floor, 1);
    assert_eq!(ch.timestamps(), vec![1]);
    assert_eq!(rt.collect(), 100);
    assert!(ch.is_empty());
}

#[test]
fn refcounted_item_is_reclaimed_after_that_many_consumes() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let seen = count_garbage(&ch);
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let a = c.attach_input(&ch).unwrap();
    let b = c.attach_input(&ch).unwrap();
    let third = c.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put_with(4, "x", PutOptions::default().consumers(2))
        .unwrap();

    a.consume(4).unwrap();
    a.consume(4).unwrap(); // idempotent: still one consume
    a.consume_until(4).unwrap(); // and not counted again
    assert_eq!(ch.timestamps(), vec![4]);
    assert!(seen.lock().unwrap().is_empty());

    b.get(Selector::Exact(4)).unwrap();
    assert_eq!(c.visibility(), 4);
    b.consume(4).unwrap();
    // Reclaimed at once, though the producer's virtual time (0) is far below.
    assert!(ch.is_empty());
    assert_eq!(*seen.lock().unwrap(), HashMap::from([(4, 1)]));
    assert_eq!(c.visibility(), INFINITY);
    assert_eq!(ch.stats().reclaimed, 1);
    // Later consumes and passes do not run the handler again.
    third.consume(4).unwrap();
    p.set_virtual_time(10).unwrap();
    rt.collect();
    assert_eq!(*seen.lock().unwrap(), HashMap::from([(4, 1)]));
}

#[test]
fn refcounted_item_consumed_before_it_arrives_is_reclaimed_at_put() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let seen = count_garbage(&ch);
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let a = c.attach_input(&ch).unwrap();
    let b = c.attach_input(&ch).unwrap();
    a.consume_until(10).unwrap();
    b.consume(5).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put_with(5, "x", PutOptions::default().consumers(2))
        .unwrap();
    assert!(ch.is_empty());
    assert_eq!(*seen.lock().unwrap(), HashMap::from([(5, 1)]));
    // Its timestamp is retired.
    assert_eq!(
        out.put(5, "again").unwrap_err().kind(),
        PutErrorKind::DuplicateTimestamp
    );
}

#[test]
fn garbage_handler_runs_once_per_item_under_concurrency() {
    const N: i64 = 300;
    let rt = Runtime::new(); // background collector
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let seen = count_garbage(&ch);
    // Keeps the zone alive (a zone without live tasks reclaims nothing).
    let keeper = rt.task(INFINITY).unwrap();
    let consumers: Vec<Task> = (0..2).map(|_| rt.task(INFINITY).unwrap()).collect();
    let inputs: Vec<_> = consumers
        .iter()
        .map(|c| c.attach_input(&ch).unwrap())
        .collect();
    let producer = rt.task(0).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    thread::scope(|s| {
        s.spawn(|| {
            for ts in 0..N {
                let opts = if ts % 2 == 1 {
                    PutOptions::default().consumers(2)
                } else {
                    PutOptions::default()
                };
                out.put_with(ts, ts.to_string(), opts).unwrap();
                producer.set_virtual_time(ts + 1).unwrap();
            }
            producer.set_virtual_time(INFINITY).unwrap();
        });
        for input in &inputs {
            s.spawn(move || {
                let mut next = 0;
                while next < N {
                    match input.get_timeout(Selector::NextUnseen, LONG) {
                        Ok((ts, _)) => {
                            assert!(ts >= next);
                            if ts % 3 == 0 {
                                input.consume_until(ts).unwrap();
                            } else {
                                input.consume(ts).unwrap();
                            }
                            next = ts + 1;
                        }
                        Err(e) => panic!("consumer stalled at {next}: {e}"),
                    }
                }
            });
        }
    });
    // Handlers run after the items leave the channel (outside its lock), possibly on the
    // collector thread: wait for them, then check that each ran exactly once.
    wait_until("every item is reclaimed", || {
        ch.is_empty() && seen.lock().unwrap().len() == N as usize
    });
    rt.collect();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), N as usize);
    assert!(
        seen.iter().all(|(ts, n)| (0..N).contains(ts) && *n == 1),
        "{seen:?}"
    );
    assert_eq!(ch.stats().reclaimed, N as u64);
    drop(keeper);
}

#[test]
fn background_collector_reclaims_without_explicit_passes() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 0..10 {
        out.put(ts, ts.to_string()).unwrap();
    }
    p.set_virtual_time(8).unwrap();
    wait_until("items below 8 are reclaimed", || ch.len() == 2);
    assert_eq!(ch.timestamps(), vec![8, 9]);
    assert!(rt.gc_stats(ZoneId::DEFAULT).passes > 0);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).floor, 8);
}

#[test]
fn time_zones_are_collected_independently() {
    let rt = manual();
    let video = rt
        .channel(ContainerOptions::default().zone(ZoneId(1)))
        .unwrap();
    let audio = rt.channel(ContainerOptions::default()).unwrap();
    // A stuck task in the default zone.
    let stuck = rt
        .task_builder()
        .name("stuck")
        .virtual_time(0)
        .create()
        .unwrap();
    let a_out = stuck.attach_output(&audio).unwrap();
    for ts in 0..5 {
        a_out.put(ts, ts.to_string()).unwrap();
    }
    let cam = rt
        .task_builder()
        .name("cam")
        .zone(ZoneId(1))
        .virtual_time(0)
        .create()
        .unwrap();
    let v_out = cam.attach_output(&video).unwrap();
    for ts in 0..20 {
        v_out.put(ts, ts.to_string()).unwrap();
    }
    cam.set_virtual_time(15).unwrap();

    assert_eq!(rt.collect_zone(ZoneId(1)), 15);
    assert_eq!(video.timestamps(), (15..20).collect::<Vec<_>>());
    let report = rt.explain(ZoneId(1));
    assert_eq!(report.zone, ZoneId(1));
    assert!(!report.to_string().contains("stuck"), "{report}");
    assert!(holders(&report)
        .iter()
        .all(|h| matches!(&h.cause, HoldCause::VirtualTime { task, .. } if *task == cam.id())));

    // The default zone is still held by the stuck task and keeps its items.
    assert_eq!(rt.collect(), 0);
    assert_eq!(audio.len(), 5);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).floor, 0);
    assert_eq!(rt.gc_stats(ZoneId(1)).floor, 15);

    // An input connection from a task of another zone holds the channel's zone.
    let viewer = rt.task_builder().name("viewer").create().unwrap();
    let input = viewer.attach_input(&video).unwrap();
    cam.set_virtual_time(18).unwrap();
    assert_eq!(rt.collect_zone(ZoneId(1)), 15);
    let report = rt.explain(ZoneId(1));
    assert!(matches!(
        &holders(&report)[..],
        [Hold { cause: HoldCause::Unconsumed { task, .. }, .. }] if *task == viewer.id()
    ));
    input.consume_until(17).unwrap();
    assert_eq!(rt.collect_zone(ZoneId(1)), 18);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).floor, 0);
}

#[test]
fn collect_counts_passes_and_reclaimed_items() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 0..6 {
        out.put(ts, ts.to_string()).unwrap();
    }
    let before = rt.gc_stats(ZoneId::DEFAULT);
    p.set_virtual_time(4).unwrap();
    assert_eq!(rt.collect(), 4);
    let after = rt.gc_stats(ZoneId::DEFAULT);
    assert_eq!(after.passes, before.passes + 1);
    assert_eq!(after.reclaimed, before.reclaimed + 4);
    assert_eq!(after.floor, 4);
    // The floor only rises.
    assert_eq!(rt.collect(), 4);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).reclaimed, after.reclaimed);
}

#[test]
fn bounded_channel_never_exceeds_its_capacity() {
    const CAP: usize = 4;
    const N: i64 = 300;
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::bounded(CAP)).unwrap();
    let producer = rt.task(0).unwrap();
    let consumer = rt.task(INFINITY).unwrap();
    let input = consumer.attach_input(&ch).unwrap();
    let out = producer.attach_output(&ch).unwrap();
    let done = AtomicBool::new(false);
    let max_seen = AtomicUsize::new(0);
    thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                max_seen.fetch_max(ch.stats().items, Ordering::Relaxed);
                max_seen.fetch_max(ch.len(), Ordering::Relaxed);
                thread::yield_now();
            }
        });
        s.spawn(|| {
            for ts in 0..N {
                out.put_timeout(ts, ts.to_string(), LONG).unwrap();
                assert!(ch.len() <= CAP);
                producer.set_virtual_time(ts + 1).unwrap();
            }
        });
        // Stops the monitor even if an assertion below fails.
        let _stop = StopOnDrop(&done);
        let mut got = 0;
        while got < N {
            let (ts, _) = input
                .get_timeout(Selector::NextUnseen, LONG)
                .expect("the producer stalled");
            assert_eq!(ts, got);
            // The item just gotten is open, so it is still stored.
            max_seen.fetch_max(ch.len(), Ordering::Relaxed);
            // Hold up to two items open at once.
            if ts % 2 == 1 {
                input.consume_until(ts).unwrap();
            }
            got += 1;
        }
    });
    let max = max_seen.load(Ordering::Relaxed);
    assert!(max <= CAP, "a bounded channel held {max} > {CAP} items");
    assert!(max > 0);
    assert_eq!(ch.stats().full, 0, "blocking puts never fail with Full");
}

#[test]
fn refcounted_item_stays_while_a_connection_has_it_open() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let seen = count_garbage(&ch);
    let p = rt.task(0).unwrap();
    let reader = rt.task(INFINITY).unwrap();
    let other = rt.task(INFINITY).unwrap();
    let a = reader.attach_input(&ch).unwrap();
    let b = other.attach_input(&ch).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put_with(1, "x", PutOptions::default().consumers(1))
        .unwrap();
    out.put_with(2, "y", PutOptions::default().consumers(1))
        .unwrap();

    a.get(Selector::Exact(1)).unwrap();
    a.get(Selector::Exact(2)).unwrap();
    assert_eq!(reader.visibility(), 1);
    // The count is reached, but `a` still has the items open: they hold its visibility, so
    // they must stay.
    b.consume_until(2).unwrap();
    assert_eq!(ch.timestamps(), vec![1, 2]);
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(rt.explain(ZoneId::DEFAULT).watermark, 0);

    // Consuming the open item lets it go.
    a.consume(1).unwrap();
    assert_eq!(ch.timestamps(), vec![2]);
    assert_eq!(*seen.lock().unwrap(), HashMap::from([(1, 1)]));
    // So does detaching with it open.
    a.detach();
    assert!(ch.is_empty());
    assert_eq!(*seen.lock().unwrap(), HashMap::from([(1, 1), (2, 1)]));
    assert_eq!(reader.visibility(), INFINITY);
}

#[test]
fn term_pending_put_into_a_full_queue() {
    let rt = manual();
    let q = rt.queue(ContainerOptions::bounded(1)).unwrap();
    let p = rt
        .task_builder()
        .name("splitter")
        .virtual_time(0)
        .create()
        .unwrap();
    let _far = lift_horizon(&rt, &p);
    let out = p.attach_output(&q).unwrap();
    let worker = rt.task(INFINITY).unwrap();
    let input = worker.attach_input(&q).unwrap();
    out.put(20, "first").unwrap();
    thread::scope(|s| {
        // FIFO regardless of timestamp: 7 after 20, into a full queue.
        let putter = s.spawn(|| out.put_timeout(7, "second", LONG));
        wait_until("the put is pending", || {
            rt.explain(ZoneId::DEFAULT)
                .holds
                .iter()
                .any(|h| matches!(h.cause, HoldCause::PendingPut { .. }))
        });
        p.set_virtual_time(100).unwrap();
        // The put counts in its putter's visibility until the queue has stored the item.
        assert_eq!(p.visibility(), 7);
        let report = rt.explain(ZoneId::DEFAULT);
        assert_eq!(report.watermark, 7, "{report}");
        assert_eq!(
            holders(&report),
            vec![Hold {
                ts: 7,
                cause: HoldCause::PendingPut {
                    task: p.id(),
                    task_name: "splitter".into(),
                    container: q.id()
                }
            }]
        );
        // A get makes room.
        let first = input.get_timeout(LONG).unwrap();
        putter.join().unwrap().unwrap();
        input.consume(first.ticket).unwrap();
    });
    assert_eq!(p.visibility(), 100);
    let report = rt.explain(ZoneId::DEFAULT);
    assert_eq!(report.watermark, 7, "the stored item holds it now");
    assert!(matches!(
        &holders(&report)[..],
        [Hold {
            cause: HoldCause::QueueItem { held_by: None, .. },
            ..
        }]
    ));
}

/// Garbage handlers may use their container: they run outside its lock (a handler that
/// calls back into the container would deadlock otherwise), on the thread whose operation
/// reclaimed the item.
#[test]
fn garbage_handlers_run_outside_the_lock_on_the_reclaiming_thread() {
    use std::sync::mpsc;
    type Log = Arc<Mutex<Vec<(i64, usize, thread::ThreadId)>>>;

    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let chan_log: Log = Arc::default();
    let queue_log: Log = Arc::default();
    ch.on_garbage({
        let (ch, log) = (ch.clone(), chan_log.clone());
        move |ts, _| {
            let left = ch.len() + ch.stats().items;
            log.lock().unwrap().push((ts, left, thread::current().id()));
        }
    })
    .unwrap();
    q.on_garbage({
        let (q, log) = (q.clone(), queue_log.clone());
        move |ts, _| {
            let left = q.len() + q.stats().held;
            log.lock().unwrap().push((ts, left, thread::current().id()));
        }
    })
    .unwrap();

    let (done, result) = mpsc::channel();
    let worker = {
        let (rt, ch, q) = (rt.clone(), ch.clone(), q.clone());
        thread::spawn(move || {
            let p = rt.task(0).unwrap();
            let c = rt.task(INFINITY).unwrap();
            let input = c.attach_input(&ch).unwrap();
            let qin = c.attach_input(&q).unwrap();
            let out = p.attach_output(&ch).unwrap();
            out.put(0, "by the watermark").unwrap();
            out.put_with(1, "by its count", PutOptions::default().consumers(1))
                .unwrap();
            input.consume(1).unwrap(); // reference count
            input.consume(0).unwrap();
            p.set_virtual_time(2).unwrap();
            rt.collect(); // watermark
            let qout = p.attach_output(&q).unwrap();
            qout.put(3, "job").unwrap();
            let job = qin.get().unwrap();
            qin.consume(job.ticket).unwrap(); // queue consume
            done.send(thread::current().id()).unwrap();
        })
    };
    let id = result
        .recv_timeout(LONG)
        .expect("a garbage handler deadlocked on its container");
    worker.join().unwrap();
    assert_eq!(*chan_log.lock().unwrap(), vec![(1, 2, id), (0, 0, id)]);
    assert_eq!(*queue_log.lock().unwrap(), vec![(3, 0, id)]);
    // Break the reference cycles container -> handler -> container.
    ch.on_garbage(|_, _| {}).unwrap();
    q.on_garbage(|_, _| {}).unwrap();
}

/// A queue's items are freed by their consumes, never by a pass: the zone's count of
/// reclaimed items is exactly what passes, reference counts and consumes freed.
#[test]
fn reclaimed_counts_exactly_the_freed_items() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let w = rt.task(INFINITY).unwrap();
    let qin = w.attach_input(&q).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let qout = p.attach_output(&q).unwrap();
    for ts in 0..4 {
        out.put(ts, ts.to_string()).unwrap();
        qout.put(ts, ts.to_string()).unwrap();
    }
    let job = qin.get().unwrap();
    p.set_virtual_time(10).unwrap();
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).reclaimed, 0);
    // The queue holds the watermark at 0: nothing to reclaim yet, in several passes.
    assert_eq!(rt.collect(), 0);
    assert_eq!(rt.collect(), 0);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).reclaimed, 0);
    qin.consume(job.ticket).unwrap();
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).reclaimed, 1);
    assert_eq!(rt.collect(), 1);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).reclaimed, 2);
    assert_eq!(ch.timestamps(), vec![1, 2, 3]);
    assert_eq!(q.len(), 3);
}

/// One task may have several puts waiting (from several threads); each is its own term,
/// and the one that completes leaves, not another with the same timestamp.
#[test]
fn each_pending_put_is_its_own_term() {
    let rt = manual();
    let first = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let second = rt.channel(ContainerOptions::bounded(1)).unwrap();
    let p = rt.task(0).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = c.attach_input(&second).unwrap();
    let (out1, out2) = (
        p.attach_output(&first).unwrap(),
        p.attach_output(&second).unwrap(),
    );
    out1.put(0, "0").unwrap();
    out2.put_with(0, "0", PutOptions::default().consumers(1))
        .unwrap();
    let pending = || -> Vec<Hold> {
        let mut holds: Vec<Hold> = rt
            .explain(ZoneId::DEFAULT)
            .holds
            .into_iter()
            .filter(|h| matches!(h.cause, HoldCause::PendingPut { .. }))
            .collect();
        holds.sort_by_key(|h| match h.cause {
            HoldCause::PendingPut { container, .. } => container,
            _ => unreachable!(),
        });
        holds
    };
    let hold = |ch: &Channel| Hold {
        ts: 5,
        cause: HoldCause::PendingPut {
            task: p.id(),
            task_name: p.name().into(),
            container: ch.id(),
        },
    };
    thread::scope(|s| {
        let stuck = s.spawn(|| out1.put_timeout(5, "5", LONG));
        wait_until("the first put is pending", || pending().len() == 1);
        let freed = s.spawn(|| out2.put_timeout(5, "5", LONG));
        wait_until("both puts are pending", || pending().len() == 2);
        assert_eq!(pending(), vec![hold(&first), hold(&second)]);
        assert_eq!(p.visibility(), 0);
        // Its reference count frees the second channel's slot.
        input.consume(0).unwrap();
        freed.join().unwrap().unwrap();
        assert_eq!(pending(), vec![hold(&first)]);
        first.close().unwrap();
        assert_eq!(
            stuck.join().unwrap().unwrap_err().kind(),
            PutErrorKind::Closed
        );
    });
    assert!(pending().is_empty());
    assert_eq!(second.timestamps(), vec![5]);
}

/// Results put in a channel nobody reads are garbage once no task can reach them: the
/// collector reclaims them whatever the timing. A reader that attached before they were put
/// keeps them until it consumes them, however long the caller waits.
#[test]
fn results_are_kept_only_for_a_reader_attached_before_they_are_put() {
    let run = |with_reader: bool| {
        let rt = Runtime::builder().gc_interval(Some(ms(1))).build();
        let tracks = rt.channel(ContainerOptions::unbounded()).unwrap();
        let display = rt.task(INFINITY).unwrap();
        let results = with_reader.then(|| display.attach_input(&tracks).unwrap());
        let source = rt.task(0).unwrap();
        {
            let tracker = rt.task(0).unwrap();
            let out = tracker.attach_output(&tracks).unwrap();
            for ts in 0..10 {
                out.put(ts, "track").unwrap();
            }
        } // the tracker exits
        source.set_virtual_time(100).unwrap(); // the source carries on, above every track
        thread::sleep(ms(50)); // the collector runs many times meanwhile
        rt.collect();
        (tracks.len(), results, display)
    };
    let (kept, _, _) = run(false);
    assert_eq!(kept, 0, "nothing can read the results: they are garbage");
    let (kept, results, _display) = run(true);
    assert_eq!(
        kept, 10,
        "the display's connection keeps every unconsumed result"
    );
    let results = results.unwrap();
    assert_eq!(results.get(Selector::Newest).unwrap().0, 9);
}

/// After every task exits, the zone keeps its floor for late joiners: the consumed items
/// stay, `explain` names that term, and closing the channel releases them (running its
/// garbage handler), while items nobody consumed stay for a reader that attaches later.
#[test]
fn when_every_task_exited_explain_names_the_kept_floor_and_close_releases() {
    let rt = manual();
    let ch = rt
        .channel(ContainerOptions::default().name("done"))
        .unwrap();
    let freed = Arc::new(Mutex::new(Vec::new()));
    let f = freed.clone();
    ch.on_garbage(move |ts, _| f.lock().unwrap().push(ts))
        .unwrap();
    {
        let p = rt.task(0).unwrap();
        let c = rt.task(INFINITY).unwrap();
        let out = p.attach_output(&ch).unwrap();
        let input = c.attach_input(&ch).unwrap();
        for ts in 0..12 {
            out.put(ts, ts.to_string()).unwrap();
        }
        for ts in 0..10 {
            input.get(Selector::Exact(ts)).unwrap();
            input.consume(ts).unwrap();
        }
        // 10 and 11 are never consumed.
    }
    rt.collect();
    assert_eq!(ch.len(), 12, "a zone with no live task keeps its floor");
    let report = rt.explain(ZoneId::DEFAULT);
    let held = holders(&report);
    assert!(
        held.iter().any(|h| h.cause
            == HoldCause::NoLiveTask {
                zone: ZoneId::DEFAULT
            }),
        "explain names the term that keeps the items: {report}"
    );
    assert!(
        report.to_string().contains("no live task in zone 0"),
        "{report}"
    );

    ch.close().unwrap();
    assert_eq!(ch.timestamps(), vec![10, 11], "consumed items are released");
    assert_eq!(*freed.lock().unwrap(), (0..10).collect::<Vec<_>>());
    assert_eq!(ch.stats().reclaimed, 10);
    assert_eq!(rt.gc_stats(ZoneId::DEFAULT).reclaimed, 10);

    // A late reader still finds what nobody consumed; a released item is gone.
    // (It starts at 0 so that attaching does not pass over the stored items, rule 3.)
    let late = rt.task(0).unwrap();
    let input = late.attach_input(&ch).unwrap();
    assert_eq!(
        input.try_get(Selector::Exact(3)).unwrap_err(),
        stampede_core::GetError::Gone(3)
    );
    assert_eq!(input.get(Selector::Oldest).unwrap().0, 10);
    // On a closed channel, a consume by every present reader releases at once.
    input.consume(10).unwrap();
    assert_eq!(ch.timestamps(), vec![11]);
}

/// Closing releases only what no present connection can still read: an item open or
/// unconsumed on a live connection stays until that connection is done with it.
#[test]
fn close_keeps_items_a_present_connection_can_still_read() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let p = rt.task(0).unwrap();
    let (a, b) = (rt.task(INFINITY).unwrap(), rt.task(INFINITY).unwrap());
    let out = p.attach_output(&ch).unwrap();
    let (ia, ib) = (a.attach_input(&ch).unwrap(), b.attach_input(&ch).unwrap());
    for ts in 0..4 {
        out.put(ts, "x").unwrap();
    }
    ia.consume_until(3).unwrap();
    ib.consume(0).unwrap();
    ib.get(Selector::Exact(1)).unwrap(); // open on b
    ch.close().unwrap();
    assert_eq!(ch.timestamps(), vec![1, 2, 3], "b consumed only 0");
    ib.consume(1).unwrap();
    assert_eq!(ch.timestamps(), vec![2, 3]);
    drop(ib); // b detaches: nobody can read 2 and 3 any more
    assert!(ch.is_empty());
    drop(ia);
}

/// A caller's pass returns only once every item below its floor has been handed to its
/// garbage handler, even one another pass reclaimed at the same time (the background
/// collector's): the caller may rely on the handlers' work being done.
#[test]
fn collect_returns_after_the_handlers_of_a_pass_running_at_the_same_time() {
    use std::sync::mpsc;

    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let (entered_tx, entered) = mpsc::channel();
    let (gate_tx, gate) = mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let finished = Arc::new(AtomicBool::new(false));
    ch.on_garbage({
        let finished = finished.clone();
        move |_, _| {
            entered_tx.send(()).unwrap();
            gate.lock().unwrap().recv_timeout(LONG).unwrap();
            finished.store(true, Ordering::SeqCst);
        }
    })
    .unwrap();
    let p = rt.task(0).unwrap();
    p.attach_output(&ch).unwrap().put(0, "x").unwrap();
    p.set_virtual_time(1).unwrap();
    let first = {
        let rt = rt.clone();
        thread::spawn(move || rt.collect())
    };
    entered
        .recv_timeout(LONG)
        .expect("the first pass reclaimed the item");
    let (returned_tx, returned) = mpsc::channel();
    let second = {
        let rt = rt.clone();
        thread::spawn(move || returned_tx.send(rt.collect()).unwrap())
    };
    assert!(
        returned.recv_timeout(ms(200)).is_err(),
        "collect returned while another pass was still running a garbage handler"
    );
    gate_tx.send(()).unwrap();
    let floor = returned.recv_timeout(LONG).expect("collect returned");
    assert!(finished.load(Ordering::SeqCst));
    assert_eq!(floor, 1);
    first.join().unwrap();
    second.join().unwrap();
    ch.on_garbage(|_, _| {}).unwrap();
}

/// Runs `rt.collect()` on a thread of its own; fails with `hung` if it has not returned
/// within [`LONG`].
fn collect_within(rt: &Runtime, hung: &str) -> i64 {
    let (tx, rx) = std::sync::mpsc::channel();
    let rt = rt.clone();
    thread::spawn(move || tx.send(rt.collect()).unwrap());
    rx.recv_timeout(LONG).expect(hung)
}

/// A garbage handler may run a pass itself (it does not wait for the pass it runs in), and
/// a handler that panics does not leave later passes waiting for it.
#[test]
fn handlers_may_collect_and_a_panicking_handler_holds_up_no_later_pass() {
    let rt = manual();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    ch.on_garbage({
        let (rt, calls) = (rt.clone(), calls.clone());
        move |ts, _| {
            calls.fetch_add(1, Ordering::SeqCst);
            rt.collect();
            if ts == 1 {
                panic!("on purpose");
            }
        }
    })
    .unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "collects").unwrap();
    p.set_virtual_time(1).unwrap();
    assert_eq!(collect_within(&rt, "a handler's own pass deadlocked"), 1);
    out.put(1, "panics").unwrap();
    p.set_virtual_time(2).unwrap();
    let rt2 = rt.clone();
    assert!(thread::spawn(move || rt2.collect()).join().is_err());
    assert_eq!(
        collect_within(&rt, "a pass waited for one that panicked"),
        2
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    ch.on_garbage(|_, _| {}).unwrap();
}
