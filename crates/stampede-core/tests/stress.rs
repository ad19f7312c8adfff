//! Stress tests: many threads on one bounded channel and one queue, checking that no item is
//! lost, duplicated or leaked.
//!
//! Every value is a [`Tracked`], which counts its creations and drops, so after each test
//! (runtime and handles dropped) the number of live values must return to zero.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use stampede_core::{
    ContainerOptions, GetError, Item, ItemType, MarshalError, PutOptions, Runtime, Selector, Task,
    INFINITY,
};

/// Long enough never to expire in a passing test; a bug makes the test fail instead of hang.
const LONG: Duration = Duration::from_secs(10);

/// Creations and drops of the values of one test.
struct Counters {
    created: AtomicUsize,
    dropped: AtomicUsize,
}

impl Counters {
    const fn new() -> Self {
        Counters {
            created: AtomicUsize::new(0),
            dropped: AtomicUsize::new(0),
        }
    }
    fn live(&self) -> isize {
        self.created.load(Ordering::SeqCst) as isize - self.dropped.load(Ordering::SeqCst) as isize
    }
}

/// A value that knows who made it and counts its own drops.
struct Tracked {
    producer: usize,
    seq: u64,
    counters: &'static Counters,
}

impl Tracked {
    fn item(producer: usize, seq: u64, counters: &'static Counters) -> Item {
        counters.created.fetch_add(1, Ordering::SeqCst);
        Item::new(Tracked {
            producer,
            seq,
            counters,
        })
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.counters.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl ItemType for Tracked {
    const TYPE_NAME: &'static str = "tests.stress.tracked";
    fn marshal(&self) -> Bytes {
        let mut v = (self.producer as u64).to_le_bytes().to_vec();
        v.extend_from_slice(&self.seq.to_le_bytes());
        v.into()
    }
    fn unmarshal(_wire: Bytes) -> Result<Self, MarshalError> {
        Err(MarshalError::Custom(
            "tracked values stay in-process".into(),
        ))
    }
}

fn key(item: &Item) -> (usize, u64) {
    let t = item.get::<Tracked>().expect("a tracked value");
    (t.producer, t.seq)
}

/// Waits (bounded) for every tracked value of a test to be dropped: a collector pass that
/// was running when the runtime went away may still hold a container for a moment.
fn assert_no_live_values(counters: &Counters, created: usize) {
    let deadline = Instant::now() + LONG;
    while counters.live() != 0 {
        assert!(
            Instant::now() < deadline,
            "{} of {created} values leaked",
            counters.live()
        );
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counters.created.load(Ordering::SeqCst), created);
}

/// Counts how often the garbage handler saw each timestamp.
type Seen = Arc<Mutex<HashMap<i64, usize>>>;

/// Handlers run after their items leave the channel, possibly on the collector thread, so
/// this waits (bounded) for all of them before checking that each ran exactly once.
fn assert_each_once(seen: &Seen, total: usize) {
    let deadline = Instant::now() + LONG;
    while seen.lock().unwrap().len() < total && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(1));
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), total, "items never reclaimed");
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "reclaimed more than once: {twice:?}");
}

/// Four producers put into distinct timestamps (ts = round * P + producer) of one bounded
/// channel with a reference count of the consumers; three consumers each get every item.
#[test]
fn bounded_channel_multicast_with_reference_counts() {
    static COUNTERS: Counters = Counters::new();
    const P: usize = 4;
    const C: usize = 3;
    const N: usize = 1000;
    const TOTAL: usize = P * N;

    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::bounded(8)).unwrap();
    let seen: Seen = Arc::default();
    ch.on_garbage({
        let seen = seen.clone();
        move |ts, _| *seen.lock().unwrap().entry(ts).or_insert(0) += 1
    })
    .unwrap();

    // Consumers attach before anything is put (a task at INFINITY sees only later items).
    let consumers: Vec<_> = (0..C)
        .map(|i| {
            let task = rt
                .task_builder()
                .name(format!("consumer-{i}"))
                .create()
                .unwrap();
            let input = task.attach_input(&ch).unwrap();
            thread::spawn(move || {
                let mut got = HashSet::new();
                // Every consumer drains whatever is present, from either end.
                let sel = match i {
                    0 => Selector::Oldest,
                    1 => Selector::Newest,
                    _ => Selector::NewestUnseen,
                };
                while got.len() < TOTAL {
                    let (ts, item) = input.get_timeout(sel, LONG).unwrap_or_else(|e| {
                        panic!("consumer {i} stalled after {}: {e}", got.len())
                    });
                    let (p, seq) = key(&item);
                    assert_eq!(
                        ts,
                        (seq as usize * P + p) as i64,
                        "item under a wrong timestamp"
                    );
                    assert!(got.insert(ts), "consumer {i} got {ts} twice");
                    input.consume(ts).unwrap();
                }
                drop(task);
                got.len()
            })
        })
        .collect();

    let producers: Vec<_> = (0..P)
        .map(|p| {
            let task = rt.task_builder().virtual_time(p as i64).create().unwrap();
            let out = task.attach_output(&ch).unwrap();
            thread::spawn(move || {
                for seq in 0..N {
                    let ts = (seq * P + p) as i64;
                    out.put_with(
                        ts,
                        Tracked::item(p, seq as u64, &COUNTERS),
                        PutOptions::default().consumers(C as u32),
                    )
                    .unwrap_or_else(|e| panic!("producer {p}: {e}"));
                    task.set_virtual_time(ts + 1).unwrap();
                }
            })
        })
        .collect();

    for h in producers {
        h.join().unwrap();
    }
    for h in consumers {
        assert_eq!(h.join().unwrap(), TOTAL);
    }
    let keeper = rt.task(INFINITY).unwrap();
    rt.collect();
    let stats = ch.stats();
    assert_eq!(stats.items, 0);
    assert_eq!(stats.puts, TOTAL as u64);
    assert_eq!(stats.gets, (C * TOTAL) as u64);
    assert_eq!(stats.reclaimed, TOTAL as u64);
    assert_eq!((stats.open, stats.connections), (0, 0));
    assert_each_once(&seen, TOTAL);

    drop((keeper, ch, rt));
    assert_no_live_values(&COUNTERS, TOTAL);
}

/// The same shape, reclaimed only by the watermark: producers advance their virtual time and
/// stay within one round of each other, so that the watermark can always free space.
#[test]
fn bounded_channel_reclaimed_by_the_watermark() {
    static COUNTERS: Counters = Counters::new();
    const P: usize = 4;
    const C: usize = 3;
    const N: usize = 500;
    const TOTAL: usize = P * N;
    const CAP: usize = 2 * P;

    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::bounded(CAP)).unwrap();
    let seen: Seen = Arc::default();
    ch.on_garbage({
        let seen = seen.clone();
        move |ts, _| *seen.lock().unwrap().entry(ts).or_insert(0) += 1
    })
    .unwrap();
    // Keeps the zone collectable after the workers exit.
    let keeper = rt.task(INFINITY).unwrap();
    let max_len = Arc::new(AtomicUsize::new(0));

    let consumers: Vec<_> = (0..C)
        .map(|i| {
            let task = rt.task(INFINITY).unwrap();
            let input = task.attach_input(&ch).unwrap();
            let (ch, max_len) = (ch.clone(), max_len.clone());
            thread::spawn(move || {
                let mut got = HashSet::new();
                while got.len() < TOTAL {
                    let sel = if i == 0 {
                        Selector::Exact(got.len() as i64)
                    } else {
                        Selector::Oldest
                    };
                    let (ts, item) = input.get_timeout(sel, LONG).unwrap_or_else(|e| {
                        panic!("consumer {i} stalled after {}: {e}", got.len())
                    });
                    let (p, seq) = key(&item);
                    assert_eq!(ts, (seq as usize * P + p) as i64);
                    assert!(got.insert(ts), "consumer {i} got {ts} twice");
                    max_len.fetch_max(ch.len(), Ordering::Relaxed);
                    input.consume(ts).unwrap();
                }
                drop(task);
            })
        })
        .collect();

    let rounds: Arc<Vec<AtomicI64>> = Arc::new((0..P).map(|_| AtomicI64::new(0)).collect());
    let producers: Vec<_> = (0..P)
        .map(|p| {
            let task = rt.task_builder().virtual_time(p as i64).create().unwrap();
            let out = task.attach_output(&ch).unwrap();
            let (rounds, ch) = (rounds.clone(), ch.clone());
            thread::spawn(move || {
                for seq in 0..N {
                    // Wait until every producer has finished the previous round.
                    let deadline = Instant::now() + LONG;
                    while rounds
                        .iter()
                        .any(|r| r.load(Ordering::Acquire) < seq as i64)
                    {
                        assert!(Instant::now() < deadline, "producer {p} waited too long");
                        thread::yield_now();
                    }
                    let ts = (seq * P + p) as i64;
                    out.put_timeout(ts, Tracked::item(p, seq as u64, &COUNTERS), LONG)
                        .unwrap_or_else(|e| panic!("producer {p}: {e}"));
                    assert!(ch.len() <= CAP);
                    task.set_virtual_time(ts + 1).unwrap();
                    rounds[p].store(seq as i64 + 1, Ordering::Release);
                }
                task.set_virtual_time(INFINITY).unwrap();
            })
        })
        .collect();

    for h in producers {
        h.join().unwrap();
    }
    for h in consumers {
        h.join().unwrap();
    }
    assert!(max_len.load(Ordering::Relaxed) <= CAP);
    // Only the keeper is left: the watermark reaches the horizon and reclaims everything.
    assert_eq!(rt.collect(), TOTAL as i64);
    let stats = ch.stats();
    assert_eq!(stats.items, 0);
    assert_eq!(stats.puts, TOTAL as u64);
    assert_eq!(stats.gets, (C * TOTAL) as u64);
    assert_eq!(stats.reclaimed, TOTAL as u64);
    assert_eq!(stats.full, 0);
    assert_each_once(&seen, TOTAL);

    drop((keeper, ch, rt));
    assert_no_live_values(&COUNTERS, TOTAL);
}

/// Four producers feed one bounded queue; several workers consume. Some workers lose their
/// connection, or exit, while holding an item: it must be redelivered, and every item must be
/// consumed exactly once.
#[test]
fn queue_with_several_workers_and_failures() {
    static COUNTERS: Counters = Counters::new();
    const P: usize = 4;
    const W: usize = 4;
    const N: usize = 1000;
    const TOTAL: usize = P * N;

    let rt = Runtime::new();
    let q = rt.queue(ContainerOptions::bounded(4)).unwrap();
    let freed: Arc<Mutex<HashMap<(usize, u64), usize>>> = Arc::default();
    q.on_garbage({
        let freed = freed.clone();
        move |_, item| *freed.lock().unwrap().entry(key(item)).or_insert(0) += 1
    })
    .unwrap();
    let consumed = Arc::new(AtomicUsize::new(0));
    let crashes = Arc::new(AtomicUsize::new(0));

    let run_worker = |w: usize, task: Task| {
        let (q, consumed, crashes) = (q.clone(), consumed.clone(), crashes.clone());
        move || {
            let mut mine = Vec::new();
            let mut input = task.attach_input(&q).unwrap();
            let deadline = Instant::now() + LONG;
            let mut gets = 0usize;
            while consumed.load(Ordering::SeqCst) < TOTAL {
                assert!(Instant::now() < deadline, "worker {w} ran too long");
                match input.get_timeout(Duration::from_millis(5)) {
                    Ok(got) => {
                        gets += 1;
                        assert_eq!(got.ts, key(&got.item).1 as i64);
                        // Worker 0 drops its connection while holding every 7th item.
                        if w == 0 && gets % 7 == 0 {
                            crashes.fetch_add(1, Ordering::SeqCst);
                            drop(got);
                            input = task.attach_input(&q).unwrap();
                            continue;
                        }
                        input.consume(got.ticket).unwrap();
                        mine.push(key(&got.item));
                        consumed.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(GetError::Timeout(_)) => {}
                    Err(e) => panic!("worker {w}: {e}"),
                }
            }
            mine
        }
    };

    // One worker takes an item and then exits without consuming it.
    let quitter = rt.task(INFINITY).unwrap();
    let quitter_in = quitter.attach_input(&q).unwrap();

    let producers: Vec<_> = (0..P)
        .map(|p| {
            let task = rt.task(0).unwrap();
            let out = task.attach_output(&q).unwrap();
            thread::spawn(move || {
                for seq in 0..N {
                    // Several items share each timestamp.
                    out.put_timeout(seq as i64, Tracked::item(p, seq as u64, &COUNTERS), LONG)
                        .unwrap_or_else(|e| panic!("producer {p}: {e}"));
                    task.set_virtual_time(seq as i64).unwrap();
                }
            })
        })
        .collect();

    // The quitter takes the first item before any worker runs, then exits holding it.
    let held = quitter_in
        .get_timeout(LONG)
        .expect("the quitter gets an item");
    let workers: Vec<_> = (0..W)
        .map(|w| thread::spawn(run_worker(w, rt.task(INFINITY).unwrap())))
        .collect();
    drop(held);
    drop(quitter);
    assert_eq!(quitter_in.try_get().unwrap_err(), GetError::Detached);
    drop(quitter_in);

    for h in producers {
        h.join().unwrap();
    }
    let mut all = Vec::new();
    for h in workers {
        all.extend(h.join().unwrap());
    }
    assert_eq!(all.len(), TOTAL);
    let unique: HashSet<_> = all.iter().copied().collect();
    assert_eq!(unique.len(), TOTAL, "an item was consumed twice");
    assert!(unique.iter().all(|&(p, seq)| p < P && (seq as usize) < N));

    let stats = q.stats();
    assert_eq!(stats.puts, TOTAL as u64);
    assert_eq!(stats.consumed, TOTAL as u64);
    assert_eq!((stats.waiting, stats.held), (0, 0));
    let crashes = crashes.load(Ordering::SeqCst) as u64;
    assert!(crashes > 0);
    assert_eq!(
        stats.redelivered,
        crashes + 1,
        "every dropped hold is redelivered"
    );
    assert_eq!(stats.gets, TOTAL as u64 + crashes + 1);
    {
        let freed = freed.lock().unwrap();
        assert_eq!(freed.len(), TOTAL);
        assert!(freed.values().all(|&n| n == 1));
    }

    drop((q, rt));
    assert_no_live_values(&COUNTERS, TOTAL);
}

/// A digitizer, a tracker that skips stale frames and a sink, with the background
/// collector: the tracker sees frames in increasing order, every frame is either gotten or
/// skipped exactly once, and everything is reclaimed in the end.
#[test]
fn pipeline_with_a_skipping_tracker() {
    static COUNTERS: Counters = Counters::new();
    const N: i64 = 2000;

    let rt = Runtime::new();
    let frames = rt.channel(ContainerOptions::bounded(4)).unwrap();
    let tracks = rt.channel(ContainerOptions::default()).unwrap();
    let keeper = rt.task(INFINITY).unwrap();

    let sink_task = rt.task(INFINITY).unwrap();
    let results = sink_task.attach_input(&tracks).unwrap();
    let sink = thread::spawn(move || {
        let mut seen = 0;
        loop {
            match results.get_timeout(Selector::NextUnseen, LONG) {
                Ok((ts, item)) => {
                    assert_eq!(key(&item), (1, ts as u64));
                    results.consume_until(ts).unwrap();
                    seen += 1;
                }
                Err(GetError::Closed) => break,
                Err(e) => panic!("sink: {e}"),
            }
        }
        drop(sink_task);
        seen
    });

    let tracker_task = rt.task(INFINITY).unwrap();
    let input = tracker_task.attach_input(&frames).unwrap();
    let output = tracker_task.attach_output(&tracks).unwrap();
    let tracks_handle = tracks.clone();
    let tracker = thread::spawn(move || {
        let mut last = -1;
        let mut gotten = 0u64;
        loop {
            match input.get_timeout(Selector::NewestUnseen, LONG) {
                Ok((ts, frame)) => {
                    assert!(ts > last, "{ts} after {last}");
                    assert_eq!(key(&frame).1 as i64, ts);
                    output
                        .put(ts, Tracked::item(1, ts as u64, &COUNTERS))
                        .unwrap();
                    input.consume_until(ts).unwrap();
                    last = ts;
                    gotten += 1;
                }
                Err(GetError::Closed) => break,
                Err(e) => panic!("tracker: {e}"),
            }
        }
        tracks_handle.close().unwrap();
        drop(tracker_task);
        (gotten, last)
    });

    let digitizer = rt.task(0).unwrap();
    let out = digitizer.attach_output(&frames).unwrap();
    for n in 0..N {
        out.put_timeout(n, Tracked::item(0, n as u64, &COUNTERS), LONG)
            .unwrap();
        assert!(frames.len() <= 4);
        digitizer.set_virtual_time(n + 1).unwrap();
    }
    frames.close().unwrap();
    let (gotten, last) = tracker.join().unwrap();
    let delivered = sink.join().unwrap();
    assert_eq!(last, N - 1, "the newest frame is never skipped");
    assert_eq!(delivered, gotten);
    let stats = frames.stats();
    assert_eq!(stats.gets, gotten);
    assert_eq!(
        stats.gets + stats.skipped,
        N as u64,
        "every frame gotten or skipped, once"
    );

    drop((out, digitizer));
    rt.collect();
    assert_eq!(frames.stats().items, 0);
    assert_eq!(tracks.stats().items, 0);

    drop((keeper, frames, tracks, rt));
    assert_no_live_values(&COUNTERS, N as usize + gotten as usize);
}

/// A put that must take the state lock (here: a reference count) racing with one that only
/// appends to the inbox: in-order streaming still delivers both, oldest first, every round.
#[test]
fn racing_fast_and_slow_puts_keep_in_order_streaming() {
    let rt = Runtime::builder().gc_interval(None).build();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let consumer = rt.task(INFINITY).unwrap();
    let input = consumer.attach_input(&ch).unwrap();
    let rounds: i64 = 20_000;
    let go = Arc::new(Barrier::new(3));
    let done = Arc::new(Barrier::new(3));
    let mk = |odd: bool| {
        let (go, done, ch, rt) = (go.clone(), done.clone(), ch.clone(), rt.clone());
        std::thread::spawn(move || {
            let t = rt.task(0).unwrap();
            let out = t.attach_output(&ch).unwrap();
            for k in 0..rounds {
                go.wait();
                if odd {
                    out.put(10 * k + 1, "fast").unwrap();
                } else {
                    out.put_with(10 * k + 2, "rc", PutOptions::default().consumers(1))
                        .unwrap();
                }
                done.wait();
            }
        })
    };
    let a = mk(true);
    let b = mk(false);
    let mut bad = Vec::new();
    for k in 0..rounds {
        go.wait();
        done.wait();
        // Both puts have returned; the oldest visible item is 10k+1.
        // In-order streaming: drain everything NextUnseen delivers this round.
        let mut got = Vec::new();
        while let Ok((ts, _)) = input.try_get(Selector::NextUnseen) {
            got.push(ts);
        }
        if got != vec![10 * k + 1, 10 * k + 2] {
            bad.push((k, got));
        }
        input.consume_until(10 * k + 2).unwrap();
    }
    a.join().unwrap();
    b.join().unwrap();
    assert!(
        bad.is_empty(),
        "{} of {rounds} rounds streamed out of order; first: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
}
