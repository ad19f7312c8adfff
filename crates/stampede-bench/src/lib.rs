//! Benchmarks of Stampede's in-process channel against a `crossbeam-channel` carrying
//! `Arc<[u8]>`, measured in the same run with the same harness.
//!
//! Both systems go through the identical harness ([`Producer`] / [`Consumer`]), so the only
//! difference between the two columns is the transport.
//!
//! * **Hand-off latency** (`inproc_handoff_latency_p50`, `_p99`): a producer thread puts one
//!   item while the consumer thread is *parked* in a blocking get. Before every put the
//!   producer waits until the consumer has released the previous item, busy-waits a
//!   pseudo-random pause (same sequence for both systems), then polls the consumer thread's
//!   scheduler state (`/proc/thread-self` → `.../stat`) until it is `S` (sleeping in the
//!   kernel, i.e. parked on a futex). The sample is the time from just before the put call
//!   (cloning the prebuilt payload handle is inside the window) to just after the consumer's
//!   get returns, both read from one monotonic clock. The two systems take turns every
//!   [`CHUNK`] hand-offs within one run ([`latency_pair`]), so both see the same noise.
//! * **Throughput** (`inproc_throughput`): one producer puts 64-byte items as fast as it
//!   can, one consumer gets and releases every item; items/s from the first put to the last
//!   release. The log also shows blocking waits (voluntary context switches) per 1000 items.
//!
//! By default producers are pinned to one CPU and consumers to another (identically for
//! both systems): otherwise the scheduler's placement of each thread pair, which sticks for
//! seconds, decides whether a wake-up is a same-core preemption (~3 µs) or a cross-core IPI
//! (~15-20 µs on a VM), and swamps the difference between the systems.
//!
//! Every measurement is repeated; the reported value is the median over repeats, and the
//! order of the two systems alternates between repeats.

pub mod diagnose;

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use stampede::{
    Channel, ContainerOptions, InputConnection, OutputConnection, Runtime, Selector, Task, INFINITY,
};

/// Metric name of the median hand-off latency.
pub const LATENCY_P50: &str = "inproc_handoff_latency_p50";
/// Metric name of the 99th-percentile hand-off latency.
pub const LATENCY_P99: &str = "inproc_handoff_latency_p99";
/// Metric name of the one-producer, one-consumer throughput.
pub const THROUGHPUT: &str = "inproc_throughput";

/// Payload sizes of the latency benchmark.
pub const LATENCY_SIZES: [usize; 3] = [64, 4 * 1024, 1024 * 1024];
/// Payload size of the throughput benchmark.
pub const THROUGHPUT_SIZE: usize = 64;
/// Channel capacity of the latency benchmark (both systems).
pub const LATENCY_CAPACITY: usize = 64;
/// Channel capacity of the throughput benchmark (both systems).
pub const THROUGHPUT_CAPACITY: usize = 1024;

/// One result row of `core.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Metric name, e.g. `inproc_handoff_latency_p50`.
    pub metric: String,
    /// Payload size in bytes.
    pub payload_bytes: usize,
    /// Stampede's value (median over repeats).
    pub stampede: f64,
    /// The baseline's value (median over repeats).
    pub baseline: f64,
    /// What the baseline is.
    pub baseline_name: String,
    /// Unit of both values.
    pub unit: String,
}

impl Record {
    /// `stampede / baseline`.
    pub fn ratio(&self) -> f64 {
        self.stampede / self.baseline
    }

    /// The target for this metric, if any.
    pub fn target(&self) -> Option<Target> {
        match self.metric.as_str() {
            LATENCY_P50 => Some(Target::AtMost(2.0)),
            LATENCY_P99 => Some(Target::AtMost(1.5)),
            THROUGHPUT => Some(Target::AtLeast(0.25)),
            _ => None,
        }
    }

    /// Whether the target is met (`None` without a target).
    pub fn met(&self) -> Option<bool> {
        let r = self.ratio();
        self.target().map(|t| match t {
            Target::AtMost(x) => r <= x,
            Target::AtLeast(x) => r >= x,
        })
    }
}

/// A target on the ratio `stampede / baseline`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// Ratio at most this (lower is better).
    AtMost(f64),
    /// Ratio at least this (higher is better).
    AtLeast(f64),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Repeats of every measurement; medians are reported.
    pub repeats: usize,
    /// Measured hand-offs per latency run.
    pub latency_samples: usize,
    /// Hand-offs per latency run discarded before measuring.
    pub latency_warmup: usize,
    /// Shortest pause between hand-offs.
    pub pause_min: Duration,
    /// Longest pause between hand-offs.
    pub pause_max: Duration,
    /// Longest wait for the consumer to park before a put goes ahead anyway.
    pub park_timeout: Duration,
    /// A latency run stops early after this long.
    pub latency_run_limit: Duration,
    /// A throughput run stops early after this long.
    pub throughput_run_limit: Duration,
    /// Items per throughput run.
    pub throughput_items: u64,
    /// Pin every producer thread to the first CPU and every consumer thread to the second
    /// (same placement for both systems); `None` leaves placement to the scheduler.
    pub pin: Option<[usize; 2]>,
    /// Run the latency benchmarks.
    pub latency: bool,
    /// Run the throughput benchmark.
    pub throughput: bool,
}

impl Config {
    /// The full run: under a minute on a 2-core VM.
    pub fn full() -> Self {
        Config {
            repeats: 7,
            latency_samples: 4000,
            latency_warmup: 100,
            pause_min: Duration::from_micros(50),
            pause_max: Duration::from_micros(200),
            park_timeout: Duration::from_millis(5),
            latency_run_limit: Duration::from_millis(5000),
            throughput_run_limit: Duration::from_millis(2000),
            throughput_items: 500_000,
            pin: default_pin(),
            latency: true,
            throughput: true,
        }
    }

    /// A smoke run of a few seconds.
    pub fn quick() -> Self {
        Config {
            repeats: 1,
            latency_samples: 200,
            latency_warmup: 20,
            throughput_items: 20_000,
            ..Config::full()
        }
    }
}

/// Which system a measurement is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// Stampede's channel.
    Stampede,
    /// The crossbeam-channel baseline.
    Crossbeam,
}

impl System {
    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            System::Stampede => "stampede",
            System::Crossbeam => "crossbeam",
        }
    }
}

/// Description of the baseline for a given capacity.
pub fn baseline_name(capacity: usize) -> String {
    format!("crossbeam_channel::bounded({capacity}) of Arc<[u8]>")
}

/// The default output path: `bench-results/core.json` at the workspace root.
pub fn default_out() -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ws.canonicalize()
        .unwrap_or(ws)
        .join("bench-results/core.json")
}

// ---------------------------------------------------------------------------------------
// The harness: both systems implement these.

/// The sending side of one system.
pub trait Producer: Send {
    /// Sends item number `n` (0, 1, 2, ...): clones the prebuilt payload and puts it.
    fn send(&mut self, n: u64);
}

/// The receiving side of one system.
pub trait Consumer: Send {
    /// What a receive hands back until it is released.
    type Got;
    /// Blocks until the next item arrives.
    fn recv(&mut self) -> Self::Got;
    /// Done with the item (Stampede: consume it).
    fn release(&mut self, got: Self::Got);
}

/// Stampede producer: a task at vt 0 with an output connection.
pub struct StampedeProducer {
    task: Task,
    out: OutputConnection<Channel>,
    payload: Bytes,
}

impl Producer for StampedeProducer {
    #[inline]
    fn send(&mut self, n: u64) {
        let ts = n as i64;
        self.out
            .put(ts, self.payload.clone())
            .expect("stampede put");
        self.task
            .set_virtual_time(ts + 1)
            .expect("set_virtual_time");
    }
}

/// Stampede consumer: a task at vt INFINITY with an input connection.
pub struct StampedeConsumer {
    // Field order: the connection detaches before the task exits.
    input: InputConnection<Channel>,
    _task: Task,
}

impl Consumer for StampedeConsumer {
    type Got = (i64, stampede::Item);
    #[inline]
    fn recv(&mut self) -> Self::Got {
        self.input.get(Selector::NextUnseen).expect("stampede get")
    }
    #[inline]
    fn release(&mut self, got: Self::Got) {
        black_box(got.1.as_bytes().map(|b| b.len()));
        self.input.consume(got.0).expect("stampede consume");
    }
}

/// A Stampede producer/consumer pair over a fresh runtime and bounded channel.
pub fn stampede_pair(capacity: usize, payload: Bytes) -> (StampedeProducer, StampedeConsumer) {
    let rt = Runtime::new();
    let ch = rt
        .channel(ContainerOptions::bounded(capacity))
        .expect("channel");
    let ptask = rt.task(0).expect("producer task");
    let out = ptask.attach_output(&ch).expect("attach output");
    let ctask = rt.task(INFINITY).expect("consumer task");
    let input = ctask.attach_input(&ch).expect("attach input");
    (
        StampedeProducer {
            task: ptask,
            out,
            payload,
        },
        StampedeConsumer {
            input,
            _task: ctask,
        },
    )
}

/// Crossbeam producer.
pub struct CrossbeamProducer {
    tx: crossbeam_channel::Sender<Arc<[u8]>>,
    payload: Arc<[u8]>,
}

impl Producer for CrossbeamProducer {
    #[inline]
    fn send(&mut self, _n: u64) {
        self.tx.send(self.payload.clone()).expect("crossbeam send");
    }
}

/// Crossbeam consumer.
pub struct CrossbeamConsumer {
    rx: crossbeam_channel::Receiver<Arc<[u8]>>,
}

impl Consumer for CrossbeamConsumer {
    type Got = Arc<[u8]>;
    #[inline]
    fn recv(&mut self) -> Self::Got {
        self.rx.recv().expect("crossbeam recv")
    }
    #[inline]
    fn release(&mut self, got: Self::Got) {
        black_box(got.len());
        drop(got);
    }
}

/// A crossbeam producer/consumer pair over a fresh bounded channel.
pub fn crossbeam_pair(
    capacity: usize,
    payload: Arc<[u8]>,
) -> (CrossbeamProducer, CrossbeamConsumer) {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    (CrossbeamProducer { tx, payload }, CrossbeamConsumer { rx })
}

// ---------------------------------------------------------------------------------------
// CPU placement.

/// CPUs this process may run on.
#[cfg(target_os = "linux")]
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// CPUs this process may run on (unknown off Linux).
#[cfg(not(target_os = "linux"))]
pub fn allowed_cpus() -> Vec<usize> {
    Vec::new()
}

/// The first two allowed CPUs, if there are two.
pub fn default_pin() -> Option<[usize; 2]> {
    match allowed_cpus()[..] {
        [a, b, ..] => Some([a, b]),
        _ => None,
    }
}

/// Pins the calling thread to `cpu`; returns whether it worked.
#[cfg(target_os = "linux")]
fn pin_current(cpu: usize) -> bool {
    // SAFETY: as above; sched_setaffinity(0, ..) applies to the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_current(_cpu: usize) -> bool {
    false
}

/// Which end of a pair a thread is.
#[derive(Clone, Copy)]
pub(crate) enum Role {
    Producer = 0,
    Consumer = 1,
}

pub(crate) fn place(cfg: &Config, role: Role) {
    if let Some(cpus) = cfg.pin {
        pin_current(cpus[role as usize]);
    }
}

// ---------------------------------------------------------------------------------------
// Parking detection.

/// Reads a thread's scheduler state letter from `/proc/.../stat`.
struct ThreadState {
    path: PathBuf,
}

impl ThreadState {
    /// The calling thread's state file, if `/proc` offers it (Linux).
    fn current() -> Option<ThreadState> {
        let target = std::fs::read_link("/proc/thread-self").ok()?;
        let path = Path::new("/proc").join(target).join("stat");
        let s = ThreadState { path };
        s.read()?;
        Some(s)
    }

    fn read(&self) -> Option<u8> {
        let text = std::fs::read(&self.path).ok()?;
        let close = text.iter().rposition(|&b| b == b')')?;
        text.get(close + 2).copied()
    }

    fn is_sleeping(&self) -> bool {
        self.read() == Some(b'S')
    }
}

/// Context switches of the calling thread so far: (voluntary, involuntary); zeros where
/// `/proc` does not say.
pub fn ctx_switches() -> (u64, u64) {
    let Ok(text) = std::fs::read_to_string("/proc/thread-self/status") else {
        return (0, 0);
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches:"),
        field("nonvoluntary_ctxt_switches:"),
    )
}

/// A small deterministic PRNG for the pauses (same sequence for both systems).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn busy_wait(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Result of one latency run.
#[derive(Clone, Debug)]
pub struct LatencyRun {
    /// Measured hand-offs.
    pub samples: usize,
    /// Median hand-off latency, µs.
    pub p50_us: f64,
    /// 99th-percentile hand-off latency, µs.
    pub p99_us: f64,
    /// Largest sample, µs.
    pub max_us: f64,
    /// Fraction of measured puts issued while the consumer was seen parked.
    pub parked_fraction: f64,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Waits until `cond` holds: spins briefly, then yields so that a thread we wait for can
/// run even when both share a core (the VM may be oversubscribed).
fn wait_until(mut cond: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !cond() {
        if spins < 256 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            thread::yield_now();
        }
    }
}

/// `stop_at` value meaning "not decided yet".
const OPEN_END: u64 = u64::MAX;

/// Whose turn it is in an interleaved latency run.
struct Turn {
    state: std::sync::Mutex<TurnState>,
    cv: std::sync::Condvar,
}

struct TurnState {
    /// 0 or 1: which system sends its next chunk.
    whose: usize,
    /// The chunk being sent (or about to be) is the last of both systems.
    last_round: bool,
}

impl Turn {
    /// Blocks until it is `me`'s turn; returns whether this round is the last.
    fn wait(&self, me: usize) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.whose != me {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.last_round
    }

    fn pass(&self, me: usize, last_round: bool) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.whose = 1 - me;
        st.last_round |= last_round;
        self.cv.notify_all();
    }
}

/// Raw timings of one system in one latency run.
struct Timings {
    sent_at: Vec<u64>,
    recv_at: Vec<u64>,
    parked: Vec<bool>,
}

impl Timings {
    fn summarize(&self, warmup: usize) -> LatencyRun {
        let skip = warmup.min(self.sent_at.len());
        let mut lat: Vec<u64> = self.sent_at[skip..]
            .iter()
            .zip(&self.recv_at[skip..])
            .map(|(s, r)| r.saturating_sub(*s))
            .collect();
        lat.sort_unstable();
        let n_parked = self.parked[skip..].iter().filter(|p| **p).count();
        LatencyRun {
            samples: lat.len(),
            p50_us: percentile(&lat, 50.0) as f64 / 1e3,
            p99_us: percentile(&lat, 99.0) as f64 / 1e3,
            max_us: lat.last().copied().unwrap_or(0) as f64 / 1e3,
            parked_fraction: n_parked as f64 / lat.len().max(1) as f64,
        }
    }
}

/// Hand-offs per turn of an interleaved latency run.
pub const CHUNK: usize = 10;

/// Runs one hand-off latency measurement of two systems, interleaved.
///
/// The systems take turns sending chunks of [`CHUNK`] hand-offs (system 0 first), so both
/// sample the same stretches of time on a noisy machine; only one pair of threads is active
/// at a time. Each system sends `cfg.latency_warmup + cfg.latency_samples` items, or fewer
/// if the run exceeds `cfg.latency_run_limit`; the first `latency_warmup` are discarded.
pub fn latency_pair<P0, C0, P1, C1>(
    sys0: (P0, C0),
    sys1: (P1, C1),
    cfg: &Config,
    seed: u64,
) -> [LatencyRun; 2]
where
    P0: Producer,
    C0: Consumer,
    P1: Producer,
    C1: Consumer,
{
    let base = Instant::now();
    let turn = Turn {
        state: std::sync::Mutex::new(TurnState {
            whose: 0,
            last_round: false,
        }),
        cv: std::sync::Condvar::new(),
    };
    let t = thread::scope(|s| {
        let turn = &turn;
        let a = s.spawn(move || latency_side(0, sys0.0, sys0.1, cfg, seed, base, turn));
        let b = s.spawn(move || latency_side(1, sys1.0, sys1.1, cfg, seed, base, turn));
        [a.join().expect("system 0"), b.join().expect("system 1")]
    });
    [
        t[0].summarize(cfg.latency_warmup),
        t[1].summarize(cfg.latency_warmup),
    ]
}

/// One system's half of [`latency_pair`]: runs its consumer thread and, on this thread,
/// its producer.
fn latency_side<P: Producer, C: Consumer>(
    me: usize,
    mut producer: P,
    mut consumer: C,
    cfg: &Config,
    seed: u64,
    base: Instant,
    turn: &Turn,
) -> Timings {
    let total = (cfg.latency_warmup + cfg.latency_samples) as u64;
    let deadline = base + cfg.latency_run_limit;
    let released = AtomicU64::new(0);
    let stop_at = AtomicU64::new(OPEN_END);
    let consumer_state: OnceLock<Option<ThreadState>> = OnceLock::new();
    thread::scope(|s| {
        let (released, stop_at, consumer_state) = (&released, &stop_at, &consumer_state);
        let cons = s.spawn(move || {
            place(cfg, Role::Consumer);
            let _ = consumer_state.set(ThreadState::current());
            let mut recv_at = Vec::with_capacity(total as usize);
            let mut i = 0;
            loop {
                let got = consumer.recv();
                recv_at.push(base.elapsed().as_nanos() as u64);
                consumer.release(got);
                i += 1;
                released.store(i, Ordering::Release);
                if stop_at.load(Ordering::Acquire) == i {
                    return recv_at;
                }
            }
        });
        place(cfg, Role::Producer);
        let mut rng = XorShift(seed | 1);
        let span = (cfg.pause_max.saturating_sub(cfg.pause_min)).as_nanos() as u64 + 1;
        let mut sent_at = Vec::with_capacity(total as usize);
        let mut parked = Vec::with_capacity(total as usize);
        let mut state = None;
        wait_until(|| {
            state = consumer_state.get();
            state.is_some()
        });
        let state = state.and_then(Option::as_ref);
        let mut n = 0u64;
        loop {
            let mut last = turn.wait(me);
            let chunk = CHUNK as u64;
            if me == 0 && (n + chunk >= total || Instant::now() >= deadline) {
                last = true;
            }
            // The last round always sends a full chunk, so both systems end even.
            let end = if last {
                n + chunk
            } else {
                (n + chunk).min(total)
            };
            while n < end {
                // The previous item is through: the consumer is on its way back into recv.
                wait_until(|| released.load(Ordering::Acquire) >= n);
                busy_wait(cfg.pause_min + Duration::from_nanos(rng.next() % span));
                let is_parked = state.is_some_and(|st| {
                    let give_up = Instant::now() + cfg.park_timeout;
                    loop {
                        if st.is_sleeping() {
                            break true;
                        }
                        if Instant::now() >= give_up {
                            break false;
                        }
                        thread::yield_now();
                    }
                });
                if n + 1 == end && last {
                    stop_at.store(n + 1, Ordering::Release);
                }
                let t0 = base.elapsed().as_nanos() as u64;
                producer.send(n);
                sent_at.push(t0);
                parked.push(is_parked);
                n += 1;
            }
            // Let the consumer finish before the other system starts.
            wait_until(|| released.load(Ordering::Acquire) >= n);
            turn.pass(me, last);
            if last {
                break;
            }
        }
        let recv_at = cons.join().expect("consumer thread");
        // The producer (and its task) lived until everything was received.
        drop(producer);
        Timings {
            sent_at,
            recv_at,
            parked,
        }
    })
}

/// Result of one throughput run.
#[derive(Clone, Copy, Debug)]
pub struct ThroughputRun {
    /// Items moved.
    pub items: u64,
    /// Items per second.
    pub per_sec: f64,
    /// Voluntary context switches (blocking waits) of the producer and the consumer.
    pub blocked: [u64; 2],
}

/// Runs one throughput measurement of up to `items` items, stopping early after `limit`.
pub fn throughput_run<P: Producer, C: Consumer>(
    mut producer: P,
    mut consumer: C,
    cfg: &Config,
) -> ThroughputRun {
    let (items, limit) = (cfg.throughput_items, cfg.throughput_run_limit);
    let start = Barrier::new(2);
    let stop_at = AtomicU64::new(OPEN_END);
    let (t0, t1, n, ctx) = thread::scope(|s| {
        let (start, stop_at) = (&start, &stop_at);
        let cons = s.spawn(move || {
            place(cfg, Role::Consumer);
            start.wait();
            let ctx0 = ctx_switches().0;
            let mut i = 0;
            loop {
                let got = consumer.recv();
                consumer.release(got);
                i += 1;
                if stop_at.load(Ordering::Acquire) == i {
                    return (Instant::now(), i, ctx_switches().0 - ctx0);
                }
            }
        });
        let prod = s.spawn(move || {
            place(cfg, Role::Producer);
            start.wait();
            let ctx0 = ctx_switches().0;
            let t0 = Instant::now();
            let deadline = t0 + limit;
            for n in 0..items {
                let last = n + 1 == items || (n % 1024 == 1023 && Instant::now() >= deadline);
                if last {
                    stop_at.store(n + 1, Ordering::Release);
                }
                producer.send(n);
                if last {
                    break;
                }
            }
            (t0, ctx_switches().0 - ctx0, producer)
        });
        let (t1, n, cctx) = cons.join().expect("consumer thread");
        let (t0, pctx, producer) = prod.join().expect("producer thread");
        drop(producer);
        (t0, t1, n, [pctx, cctx])
    });
    ThroughputRun {
        items: n,
        per_sec: n as f64 / (t1 - t0).as_secs_f64(),
        blocked: ctx,
    }
}

// ---------------------------------------------------------------------------------------
// The driver.

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn payload(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i % 251) as u8).collect()
}

/// Runs every benchmark; progress goes to `log`.
pub fn run(cfg: &Config, mut log: impl FnMut(&str)) -> Vec<Record> {
    let mut records = Vec::new();
    let sizes: &[usize] = if cfg.latency { &LATENCY_SIZES } else { &[] };
    if cfg.latency {
        // One discarded short run warms caches, the allocator and the scheduler.
        let warm = Config {
            latency_samples: cfg.latency_samples.min(2 * CHUNK),
            ..cfg.clone()
        };
        let data = payload(LATENCY_SIZES[0]);
        latency_pair(
            stampede_pair(LATENCY_CAPACITY, Bytes::from(data.clone())),
            crossbeam_pair(LATENCY_CAPACITY, Arc::from(data)),
            &warm,
            1,
        );
    }
    for &size in sizes {
        let data = payload(size);
        let bytes = Bytes::from(data.clone());
        let arc: Arc<[u8]> = Arc::from(data);
        let mut runs: [Vec<LatencyRun>; 2] = [Vec::new(), Vec::new()];
        for r in 0..cfg.repeats {
            let seed = 0x9e37_79b9_7f4a_7c15 ^ (r as u64) ^ ((size as u64) << 20);
            let sp = stampede_pair(LATENCY_CAPACITY, bytes.clone());
            let cp = crossbeam_pair(LATENCY_CAPACITY, arc.clone());
            // Alternate which system opens each round.
            let [st, cb] = if r % 2 == 0 {
                latency_pair(sp, cp, cfg, seed)
            } else {
                let [c, s] = latency_pair(cp, sp, cfg, seed);
                [s, c]
            };
            for (sys, res) in [(System::Stampede, &st), (System::Crossbeam, &cb)] {
                log(&format!(
                    "latency {:>8} B  run {}/{}  {:<9}  p50 {:>8.2} us  p99 {:>8.2} us  max {:>9.2} us  parked {:>5.1}%  ({} samples)",
                    size,
                    r + 1,
                    cfg.repeats,
                    sys.name(),
                    res.p50_us,
                    res.p99_us,
                    res.max_us,
                    res.parked_fraction * 100.0,
                    res.samples
                ));
            }
            runs[0].push(st);
            runs[1].push(cb);
        }
        let med = |i: usize, f: fn(&LatencyRun) -> f64| {
            median(&runs[i].iter().map(f).collect::<Vec<_>>())
        };
        for (metric, f) in [
            (
                LATENCY_P50,
                (|r: &LatencyRun| r.p50_us) as fn(&LatencyRun) -> f64,
            ),
            (LATENCY_P99, |r: &LatencyRun| r.p99_us),
        ] {
            records.push(Record {
                metric: metric.into(),
                payload_bytes: size,
                stampede: med(0, f),
                baseline: med(1, f),
                baseline_name: baseline_name(LATENCY_CAPACITY),
                unit: "us".into(),
            });
        }
    }

    if !cfg.throughput {
        return records;
    }
    let data = payload(THROUGHPUT_SIZE);
    let bytes = Bytes::from(data.clone());
    let arc: Arc<[u8]> = Arc::from(data);
    let mut tput: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    for r in 0..cfg.repeats {
        let order = if r % 2 == 0 {
            [System::Stampede, System::Crossbeam]
        } else {
            [System::Crossbeam, System::Stampede]
        };
        for sys in order {
            let v = match sys {
                System::Stampede => {
                    let (p, c) = stampede_pair(THROUGHPUT_CAPACITY, bytes.clone());
                    throughput_run(p, c, cfg)
                }
                System::Crossbeam => {
                    let (p, c) = crossbeam_pair(THROUGHPUT_CAPACITY, arc.clone());
                    throughput_run(p, c, cfg)
                }
            };
            log(&format!(
                "throughput {} B  run {}/{}  {:<9}  {:>12.0} items/s  ({} items; blocking waits per 1k items: producer {:.1}, consumer {:.1})",
                THROUGHPUT_SIZE,
                r + 1,
                cfg.repeats,
                sys.name(),
                v.per_sec,
                v.items,
                v.blocked[0] as f64 * 1e3 / v.items as f64,
                v.blocked[1] as f64 * 1e3 / v.items as f64,
            ));
            tput[(sys == System::Crossbeam) as usize].push(v.per_sec);
        }
    }
    records.push(Record {
        metric: THROUGHPUT.into(),
        payload_bytes: THROUGHPUT_SIZE,
        stampede: median(&tput[0]),
        baseline: median(&tput[1]),
        baseline_name: baseline_name(THROUGHPUT_CAPACITY),
        unit: "items/s".into(),
    });
    records
}

/// Writes the records as a pretty JSON array, creating the directory.
pub fn write_json(path: &Path, records: &[Record]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let text = serde_json::to_string_pretty(records).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

fn human_size(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

fn fmt_value(v: f64, unit: &str) -> String {
    if unit == "items/s" {
        format!("{:.0}", v)
    } else {
        format!("{v:.2}")
    }
}

/// A readable table of the records with ratios and targets.
pub fn render_table(records: &[Record]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>8} {:>8} {:>14} {:>14} {:>8} {:>8}  status",
        "metric", "payload", "unit", "stampede", "crossbeam", "ratio", "target"
    );
    let _ = writeln!(out, "{}", "-".repeat(102));
    for r in records {
        let target = match r.target() {
            Some(Target::AtMost(x)) => format!("<={x}x"),
            Some(Target::AtLeast(x)) => format!(">={x}x"),
            None => "-".into(),
        };
        let status = match r.met() {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "-",
        };
        let _ = writeln!(
            out,
            "{:<28} {:>8} {:>8} {:>14} {:>14} {:>7.2}x {:>8}  {}",
            r.metric,
            human_size(r.payload_bytes),
            r.unit,
            fmt_value(r.stampede, &r.unit),
            fmt_value(r.baseline, &r.unit),
            r.ratio(),
            target,
            status
        );
    }
    let met = records.iter().filter(|r| r.met() == Some(true)).count();
    let with = records.iter().filter(|r| r.met().is_some()).count();
    let _ = writeln!(out, "{met}/{with} targets met");
    out
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// The parking check tells a spinning thread from one blocked in the kernel.
    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc, which Miri's isolation hides
    fn thread_state_tells_running_from_parked() {
        let stop = AtomicBool::new(false);
        let (tx, rx) = crossbeam_channel::bounded::<()>(0);
        let (state_tx, state_rx) = crossbeam_channel::bounded(1);
        thread::scope(|s| {
            let stop = &stop;
            s.spawn(move || {
                state_tx.send(ThreadState::current()).unwrap();
                while !stop.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                rx.recv().unwrap();
            });
            let st = state_rx.recv().unwrap().expect("/proc/thread-self");
            // Spinning: runnable (running or preempted), never sleeping.
            for _ in 0..100 {
                assert_ne!(st.read(), Some(b'S'));
            }
            stop.store(true, Ordering::Release);
            let deadline = Instant::now() + Duration::from_secs(10);
            while !st.is_sleeping() {
                assert!(Instant::now() < deadline, "never saw the thread park");
                thread::yield_now();
            }
            tx.send(()).unwrap();
        });
    }

    /// A thread pinned to an allowed CPU may run there only; other threads keep their set.
    #[test]
    fn a_thread_pins_to_an_allowed_cpu() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let first = cpus[0];
        let pinned = thread::spawn(move || (pin_current(first), allowed_cpus()))
            .join()
            .unwrap();
        assert_eq!(pinned, (true, vec![first]));
        assert_eq!(allowed_cpus(), cpus);
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
