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
//!   get returns, both read from one monotonic clock.
//! * **Throughput** (`inproc_throughput`): one producer puts 64-byte items as fast as it
//!   can, one consumer gets and releases every item; items/s from the first put to the last
//!   release.
//!
//! Every measurement is repeated; the reported value is the median over repeats, and the
//! order of the two systems alternates between repeats.

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
    /// Items per throughput run.
    pub throughput_items: u64,
    /// Run the latency benchmarks.
    pub latency: bool,
    /// Run the throughput benchmark.
    pub throughput: bool,
}

impl Config {
    /// The full run: about half a minute on a 2-core VM.
    pub fn full() -> Self {
        Config {
            repeats: 5,
            latency_samples: 2000,
            latency_warmup: 100,
            pause_min: Duration::from_micros(50),
            pause_max: Duration::from_micros(200),
            park_timeout: Duration::from_millis(20),
            throughput_items: 500_000,
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

/// Runs one hand-off latency measurement over a producer/consumer pair.
pub fn latency_run<P: Producer, C: Consumer>(
    mut producer: P,
    mut consumer: C,
    cfg: &Config,
    seed: u64,
) -> LatencyRun {
    let total = cfg.latency_warmup + cfg.latency_samples;
    let base = Instant::now();
    let released = AtomicU64::new(0);
    let consumer_state: OnceLock<Option<ThreadState>> = OnceLock::new();
    let (sent_at, recv_at, parked) = thread::scope(|s| {
        let released = &released;
        let consumer_state = &consumer_state;
        let cons = s.spawn(move || {
            let _ = consumer_state.set(ThreadState::current());
            let mut recv_at = Vec::with_capacity(total);
            for i in 0..total {
                let got = consumer.recv();
                recv_at.push(base.elapsed().as_nanos() as u64);
                consumer.release(got);
                released.store(i as u64 + 1, Ordering::Release);
            }
            recv_at
        });
        let prod = s.spawn(move || {
            let mut rng = XorShift(seed | 1);
            let span = (cfg.pause_max.saturating_sub(cfg.pause_min)).as_nanos() as u64 + 1;
            let mut sent_at = Vec::with_capacity(total);
            let mut parked = Vec::with_capacity(total);
            let state = loop {
                if let Some(s) = consumer_state.get() {
                    break s;
                }
                thread::yield_now();
            };
            for n in 0..total as u64 {
                while released.load(Ordering::Acquire) < n {
                    std::hint::spin_loop();
                }
                busy_wait(cfg.pause_min + Duration::from_nanos(rng.next() % span));
                let is_parked = match state {
                    Some(st) => {
                        let deadline = Instant::now() + cfg.park_timeout;
                        loop {
                            if st.is_sleeping() {
                                break true;
                            }
                            if Instant::now() >= deadline {
                                break false;
                            }
                        }
                    }
                    None => false,
                };
                let t0 = base.elapsed().as_nanos() as u64;
                producer.send(n);
                sent_at.push(t0);
                parked.push(is_parked);
            }
            // Keep the producer (and its task) alive until everything is received.
            while released.load(Ordering::Acquire) < total as u64 {
                thread::yield_now();
            }
            (sent_at, parked)
        });
        let recv_at = cons.join().expect("consumer thread");
        let (sent_at, parked) = prod.join().expect("producer thread");
        (sent_at, recv_at, parked)
    });
    let skip = cfg.latency_warmup;
    let mut lat: Vec<u64> = sent_at[skip..]
        .iter()
        .zip(&recv_at[skip..])
        .map(|(s, r)| r.saturating_sub(*s))
        .collect();
    lat.sort_unstable();
    let n_parked = parked[skip..].iter().filter(|p| **p).count();
    LatencyRun {
        p50_us: percentile(&lat, 50.0) as f64 / 1e3,
        p99_us: percentile(&lat, 99.0) as f64 / 1e3,
        max_us: lat.last().copied().unwrap_or(0) as f64 / 1e3,
        parked_fraction: n_parked as f64 / lat.len().max(1) as f64,
    }
}

/// Runs one throughput measurement; returns items per second.
pub fn throughput_run<P: Producer, C: Consumer>(
    mut producer: P,
    mut consumer: C,
    items: u64,
) -> f64 {
    let start = Barrier::new(2);
    let (t0, t1) = thread::scope(|s| {
        let start = &start;
        let cons = s.spawn(move || {
            start.wait();
            for _ in 0..items {
                let got = consumer.recv();
                consumer.release(got);
            }
            Instant::now()
        });
        let prod = s.spawn(move || {
            start.wait();
            let t0 = Instant::now();
            for n in 0..items {
                producer.send(n);
            }
            (t0, producer)
        });
        let t1 = cons.join().expect("consumer thread");
        let (t0, producer) = prod.join().expect("producer thread");
        drop(producer);
        (t0, t1)
    });
    items as f64 / (t1 - t0).as_secs_f64()
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
    for &size in sizes {
        let data = payload(size);
        let bytes = Bytes::from(data.clone());
        let arc: Arc<[u8]> = Arc::from(data);
        let mut runs: [Vec<LatencyRun>; 2] = [Vec::new(), Vec::new()];
        for r in 0..cfg.repeats {
            let order = if r % 2 == 0 {
                [System::Stampede, System::Crossbeam]
            } else {
                [System::Crossbeam, System::Stampede]
            };
            let seed = 0x9e37_79b9_7f4a_7c15 ^ (r as u64) ^ ((size as u64) << 20);
            for sys in order {
                let res = match sys {
                    System::Stampede => {
                        let (p, c) = stampede_pair(LATENCY_CAPACITY, bytes.clone());
                        latency_run(p, c, cfg, seed)
                    }
                    System::Crossbeam => {
                        let (p, c) = crossbeam_pair(LATENCY_CAPACITY, arc.clone());
                        latency_run(p, c, cfg, seed)
                    }
                };
                log(&format!(
                    "latency {:>8} B  run {}/{}  {:<9}  p50 {:>8.2} us  p99 {:>8.2} us  max {:>9.2} us  parked {:>5.1}%",
                    size,
                    r + 1,
                    cfg.repeats,
                    sys.name(),
                    res.p50_us,
                    res.p99_us,
                    res.max_us,
                    res.parked_fraction * 100.0
                ));
                runs[(sys == System::Crossbeam) as usize].push(res);
            }
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
                    throughput_run(p, c, cfg.throughput_items)
                }
                System::Crossbeam => {
                    let (p, c) = crossbeam_pair(THROUGHPUT_CAPACITY, arc.clone());
                    throughput_run(p, c, cfg.throughput_items)
                }
            };
            log(&format!(
                "throughput {} B  run {}/{}  {:<9}  {:>12.0} items/s",
                THROUGHPUT_SIZE,
                r + 1,
                cfg.repeats,
                sys.name(),
                v
            ));
            tput[(sys == System::Crossbeam) as usize].push(v);
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
        "{:<28} {:>8} {:>8} {:>14} {:>14} {:>8} {:>8}  {}",
        "metric", "payload", "unit", "stampede", "crossbeam", "ratio", "target", "status"
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
