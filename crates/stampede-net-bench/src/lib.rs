//! Stampede across processes (`stampede-net`) against cross-process baselines measured in
//! the same run, between two processes on one host: the binary re-executes itself as the
//! other side (see [`child`]).
//!
//! * **Ping-pong** (`xproc_pingpong_oneway_p50`): the parent sends N bytes, the child
//!   receives them completely and sends N bytes back, the parent receives them completely;
//!   one-way latency is half the round trip. Per run: the median over many round trips after
//!   a warm-up. For Stampede a send is a put into a channel the other process owns and a
//!   receive is a blocking `NextUnseen` get and a consume on the own channel (see [`stm`]).
//! * **Bandwidth** (`xproc_bandwidth`): the child sends N-byte messages for a fixed time, the
//!   parent consumes them; MB/s (10^6 bytes) between the first and the last arrival.
//! * **Reclaim lag** (`gc_reclaim_lag_ms_p50`, `_p99`, Stampede only): from a remote
//!   consumer's consume of an item to its reclamation by the owner, against the owner's
//!   local consume→reclaim lag in the same run.
//!
//! Every run starts fresh processes and connections, and is repeated; a value is the median
//! over repeats. Within a repeat the systems take turns, starting with a different one each
//! time, so slow drifts of the host hit all of them alike. The results are [`Record`]s of
//! Stampede against each baseline, in the format of the other benchmarks' JSON files.
//!
//! A transport is one [`System`]: adding one means writing its module (parent-side
//! measurement plus child-side handler, with a [`child::Role`]) and an entry in a table.

#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub mod child;
mod error;
pub mod stats;
pub mod stm;
mod stream;
pub mod tcp;
pub mod unix;
mod zconfig;
pub mod zenoh_pubsub;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use error::{BenchError, StampedeError};
pub use stats::Throughput;
pub use zconfig::{space_config, zenoh_config};

/// Metric name of the median one-way ping-pong latency.
pub const PINGPONG_METRIC: &str = "xproc_pingpong_oneway_p50";
/// Metric name of the one-producer, one-consumer bandwidth.
pub const BANDWIDTH_METRIC: &str = "xproc_bandwidth";
/// Metric name of the bandwidth of items written into lent shared memory (Stampede's loans,
/// Zenoh's shared-memory buffers).
pub const LOANED_METRIC: &str = "xproc_bandwidth_loaned";
/// Metric name of the median consume→reclaim lag.
pub const RECLAIM_LAG_P50: &str = "gc_reclaim_lag_ms_p50";
/// Metric name of the 99th-percentile consume→reclaim lag.
pub const RECLAIM_LAG_P99: &str = "gc_reclaim_lag_ms_p99";
/// Payload sizes of the ping-pong.
pub const PINGPONG_SIZES: [usize; 4] = [64, 4 << 10, 64 << 10, 1 << 20];
/// Message sizes of the bandwidth runs.
pub const BANDWIDTH_SIZES: [usize; 2] = [64 << 10, 1 << 20];

/// The name of the system under test in [`Series`].
pub const STAMPEDE_NAME: &str = "stampede";
/// The baseline of the reclaim lag.
pub const LOCAL_LAG_BASELINE: &str = "local consumer at the owner (own time zone, same run)";

/// What one ping-pong run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoundTrips {
    /// One-way latency (half the round trip) of each recorded round trip, in µs.
    pub one_way_us: Vec<f64>,
    /// Anything else the log should show about the run.
    pub note: Option<String>,
}

impl From<Vec<f64>> for RoundTrips {
    fn from(one_way_us: Vec<f64>) -> Self {
        Self {
            one_way_us,
            note: None,
        }
    }
}

/// A ping-pong: `(size, round_trips)` → what the parent measured.
pub type PingPong = fn(usize, usize) -> Result<RoundTrips, BenchError>;
/// A bandwidth run: `(size, duration)` → what the consumer measured.
pub type Bandwidth = fn(usize, Duration) -> Result<Throughput, BenchError>;

/// One transport under test: a name and the experiments it takes part in.
#[derive(Clone, Copy, Debug)]
pub struct System {
    /// Name in the results, e.g. `"tcp"`.
    pub name: &'static str,
    /// Its ping-pong, if it takes part.
    pub pingpong: Option<PingPong>,
    /// Its bandwidth run, if it takes part.
    pub bandwidth: Option<Bandwidth>,
    /// Its bandwidth run with messages written into lent shared memory, if it has that.
    pub loaned: Option<Bandwidth>,
}

/// Stampede: address spaces over Zenoh.
pub const STAMPEDE: System = System {
    name: STAMPEDE_NAME,
    pingpong: Some(stm::pingpong),
    bandwidth: Some(stm::bandwidth),
    loaned: Some(stm::bandwidth_loaned),
};

/// The baselines, in the order they are reported.
pub const BASELINES: [System; 3] = [
    System {
        name: "tcp",
        pingpong: Some(tcp::pingpong),
        bandwidth: Some(tcp::bandwidth),
        loaned: None,
    },
    System {
        name: "unix",
        pingpong: Some(unix::pingpong),
        bandwidth: None,
        loaned: None,
    },
    System {
        name: "zenoh_pubsub",
        pingpong: Some(zenoh_pubsub::pingpong),
        bandwidth: Some(zenoh_pubsub::bandwidth),
        loaned: Some(zenoh_pubsub::bandwidth_shm),
    },
];

/// How much to measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// Runs per (metric, size, system); values are medians over them.
    pub repeats: usize,
    /// Recorded round trips per ping-pong run (a tenth more, at least 10, warm up).
    pub round_trips: usize,
    /// How long the producer sends in a bandwidth run.
    pub duration: Duration,
    /// Items per reclaim-lag run.
    pub lag_items: usize,
    /// Time between two items of a reclaim-lag run.
    pub lag_period: Duration,
}

impl Plan {
    /// The full measurement.
    pub fn full() -> Self {
        Self {
            repeats: 3,
            round_trips: 2_000,
            duration: Duration::from_secs(2),
            lag_items: 1_000,
            lag_period: Duration::from_millis(1),
        }
    }

    /// A smoke run that finishes in seconds.
    pub fn quick() -> Self {
        Self {
            repeats: 1,
            round_trips: 100,
            duration: Duration::from_millis(500),
            lag_items: 100,
            lag_period: Duration::from_millis(1),
        }
    }
}

/// One system's values of one metric at one payload size, one per repeat.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Metric name, e.g. `xproc_pingpong_oneway_p50`.
    pub metric: &'static str,
    /// Payload (message) size in bytes.
    pub payload_bytes: usize,
    /// [`STAMPEDE_NAME`] or the baseline's name.
    pub system: &'static str,
    /// `us`, `MB/s` or `ms`.
    pub unit: &'static str,
    /// One value per repeat, in the order measured.
    pub raw: Vec<f64>,
}

impl Series {
    /// The median over repeats.
    pub fn median(&self) -> f64 {
        stats::median(&self.raw)
    }
}

/// One result row of `net.json`: Stampede against one baseline, medians over repeats. The
/// same fields as the other benchmarks' files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Metric name, e.g. `xproc_pingpong_oneway_p50`.
    pub metric: String,
    /// Payload (message) size in bytes.
    pub payload_bytes: usize,
    /// Stampede's value.
    pub stampede: f64,
    /// The baseline's value.
    pub baseline: f64,
    /// What the baseline is: `tcp`, `unix`, `zenoh_pubsub` or [`LOCAL_LAG_BASELINE`].
    pub baseline_name: String,
    /// Unit of both values: `us`, `MB/s` or `ms`.
    pub unit: String,
}

/// A target a record should meet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// `stampede / baseline` at most this (lower is better).
    RatioAtMost(f64),
    /// `stampede / baseline` at least this (higher is better).
    RatioAtLeast(f64),
    /// Stampede's value at most this, in the record's unit.
    AtMost(f64),
}

impl Record {
    /// `stampede / baseline`.
    pub fn ratio(&self) -> f64 {
        self.stampede / self.baseline
    }

    /// The target for this record, if any: ping-pong within 1.3x of Zenoh pub/sub and no
    /// slower than raw TCP at 1 MiB; bandwidth at least 0.8x Zenoh pub/sub with lent shared
    /// memory, and with ordinary items 0.5x at 64 KiB and 0.8x above; reclaim lag p99
    /// within 20 ms.
    pub fn target(&self) -> Option<Target> {
        match (self.metric.as_str(), self.baseline_name.as_str()) {
            (PINGPONG_METRIC, "zenoh_pubsub") => Some(Target::RatioAtMost(1.3)),
            (PINGPONG_METRIC, "tcp") if self.payload_bytes == 1 << 20 => {
                Some(Target::RatioAtMost(1.0))
            }
            (BANDWIDTH_METRIC, "zenoh_pubsub") if self.payload_bytes <= 64 << 10 => {
                Some(Target::RatioAtLeast(0.5))
            }
            (BANDWIDTH_METRIC | LOANED_METRIC, "zenoh_pubsub") => Some(Target::RatioAtLeast(0.8)),
            (RECLAIM_LAG_P99, _) => Some(Target::AtMost(20.0)),
            _ => None,
        }
    }

    /// Whether the target is met (`None` without a target).
    pub fn met(&self) -> Option<bool> {
        self.target().map(|t| match t {
            Target::RatioAtMost(x) => self.ratio() <= x,
            Target::RatioAtLeast(x) => self.ratio() >= x,
            Target::AtMost(x) => self.stampede <= x,
        })
    }
}

/// Records of Stampede against every baseline measured alongside it: one per metric,
/// payload size and baseline, in the order the baselines were measured. Values keep three
/// decimals, as in the other result files; further digits are noise.
pub fn records(series: &[Series]) -> Vec<Record> {
    let round = |v: f64| (v * 1e3).round() / 1e3;
    let mut out = Vec::new();
    for s in series.iter().filter(|s| s.system == STAMPEDE_NAME) {
        let baselines = series.iter().filter(|b| {
            b.system != STAMPEDE_NAME && b.metric == s.metric && b.payload_bytes == s.payload_bytes
        });
        for b in baselines {
            out.push(Record {
                metric: s.metric.to_owned(),
                payload_bytes: s.payload_bytes,
                stampede: round(s.median()),
                baseline: round(b.median()),
                baseline_name: b.system.to_owned(),
                unit: s.unit.to_owned(),
            });
        }
    }
    out
}

/// Warm-up round trips before `round_trips` recorded ones: connections, caches and Zenoh's
/// lazily created shared-memory pool settle in these.
pub(crate) fn warmup_for(round_trips: usize) -> usize {
    (round_trips / 10).max(10)
}

/// Measures every metric of `plan` for Stampede and each of `baselines`, reporting progress
/// through `log`; returns every system's per-repeat values. Stops at the first failed run.
pub fn run(
    plan: &Plan,
    baselines: &[System],
    mut log: impl FnMut(&str),
) -> Result<Vec<Series>, BenchError> {
    let systems: Vec<System> = std::iter::once(STAMPEDE)
        .chain(baselines.iter().copied())
        .collect();
    let mut series = Vec::new();
    for &size in &PINGPONG_SIZES {
        let runs: Vec<_> = systems
            .iter()
            .filter_map(|s| s.pingpong.map(|f| (s.name, f)))
            .collect();
        let measured = measure(plan.repeats, &runs, &mut log, |name, f| {
            let run = f(size, plan.round_trips)?;
            let samples = &run.one_way_us;
            let p50 = stats::median(samples);
            let p99 = stats::percentile(samples, 0.99);
            let note = run.note.map_or_else(String::new, |n| format!(", {n}"));
            let line = format!(
                "{PINGPONG_METRIC} {:>7} {name:<13} p50 {p50:9.2} us  p99 {p99:9.2} us  ({} round trips{note})",
                human_size(size),
                samples.len()
            );
            Ok((p50, line))
        })?;
        series.extend(measured.into_iter().map(|(system, raw)| Series {
            metric: PINGPONG_METRIC,
            payload_bytes: size,
            system,
            unit: "us",
            raw,
        }));
    }
    type Of = fn(&System) -> Option<Bandwidth>;
    let bandwidths: [(&'static str, Of); 2] = [
        (BANDWIDTH_METRIC, |s| s.bandwidth),
        (LOANED_METRIC, |s| s.loaned),
    ];
    for (metric, size) in bandwidths
        .iter()
        .flat_map(|b| BANDWIDTH_SIZES.iter().map(move |&size| (b, size)))
    {
        let (metric, of) = *metric;
        let runs: Vec<_> = systems
            .iter()
            .filter_map(|s| of(s).map(|f| (s.name, f)))
            .collect();
        let measured = measure(plan.repeats, &runs, &mut log, |name, f| {
            let t = f(size, plan.duration)?;
            let line = format!(
                "{metric} {:>7} {name:<13} {:9.1} MB/s  ({} messages, all received, in {:.2} s)",
                human_size(size),
                t.mb_per_s(),
                t.messages,
                t.elapsed.as_secs_f64()
            );
            Ok((t.mb_per_s(), line))
        })?;
        series.extend(measured.into_iter().map(|(system, raw)| Series {
            metric,
            payload_bytes: size,
            system,
            unit: "MB/s",
            raw,
        }));
    }
    series.extend(reclaim_lag(plan, &mut log)?);
    Ok(series)
}

/// The reclaim-lag runs: p50 and p99 per repeat, for the remote consumer (Stampede) and the
/// owner's local one (the baseline), measured together.
fn reclaim_lag(plan: &Plan, log: &mut impl FnMut(&str)) -> Result<Vec<Series>, BenchError> {
    let mut quantiles = [(); 4].map(|()| Vec::with_capacity(plan.repeats));
    for repeat in 0..plan.repeats {
        let lags = stm::reclaim_lag(plan.lag_items, plan.lag_period)?;
        let mut line = format!(
            "[{}/{}] gc_reclaim_lag {:>7} ({} items, one every {:?})",
            repeat + 1,
            plan.repeats,
            human_size(stm::LAG_PAYLOAD),
            plan.lag_items,
            plan.lag_period
        );
        for (i, (who, ms)) in [("remote", &lags.remote_ms), ("local", &lags.local_ms)]
            .into_iter()
            .enumerate()
        {
            let (p50, p99) = (stats::median(ms), stats::percentile(ms, 0.99));
            let max = stats::percentile(ms, 1.0);
            let _ = write!(
                line,
                "  {who}: p50 {p50:.2} ms p99 {p99:.2} ms max {max:.2} ms"
            );
            quantiles[2 * i].push(p50);
            quantiles[2 * i + 1].push(p99);
        }
        log(&line);
    }
    let [remote_p50, remote_p99, local_p50, local_p99] = quantiles;
    let series = |metric, system, raw| Series {
        metric,
        payload_bytes: stm::LAG_PAYLOAD,
        system,
        unit: "ms",
        raw,
    };
    Ok(vec![
        series(RECLAIM_LAG_P50, STAMPEDE_NAME, remote_p50),
        series(RECLAIM_LAG_P50, LOCAL_LAG_BASELINE, local_p50),
        series(RECLAIM_LAG_P99, STAMPEDE_NAME, remote_p99),
        series(RECLAIM_LAG_P99, LOCAL_LAG_BASELINE, local_p99),
    ])
}

/// Runs `one` `repeats` times for every system, rotating which goes first; returns each
/// system's per-repeat values. `one` returns the value and a line for the log.
fn measure<F: Copy>(
    repeats: usize,
    runs: &[(&'static str, F)],
    log: &mut impl FnMut(&str),
    mut one: impl FnMut(&'static str, F) -> Result<(f64, String), BenchError>,
) -> Result<Vec<(&'static str, Vec<f64>)>, BenchError> {
    let mut raw = vec![Vec::with_capacity(repeats); runs.len()];
    for repeat in 0..repeats {
        for turn in 0..runs.len() {
            let i = (turn + repeat) % runs.len();
            let (name, f) = runs[i];
            let (value, line) = one(name, f)?;
            log(&format!("[{}/{repeats}] {line}", repeat + 1));
            raw[i].push(value);
        }
    }
    Ok(runs.iter().map(|&(name, _)| name).zip(raw).collect())
}

/// `<workspace>/bench-results/net.json`.
pub fn default_out() -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ws.canonicalize()
        .unwrap_or(ws)
        .join("bench-results/net.json")
}

/// Writes `records` as a pretty-printed JSON array, creating the directory if needed.
pub fn write_json(path: &Path, records: &[Record]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    let text = serde_json::to_string_pretty(records).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// Two fixed-width tables: the records (Stampede, baseline, ratio, target), then every
/// system's value per repeat.
pub fn render_table(series: &[Series]) -> String {
    let records = records(series);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<26} {:>7} {:<13} {:>5} {:>10} {:>10} {:>7} {:>8}  status",
        "metric", "payload", "baseline", "unit", "stampede", "baseline", "ratio", "target"
    );
    let _ = writeln!(out, "{}", "-".repeat(104));
    for r in &records {
        let target = match r.target() {
            Some(Target::RatioAtMost(x)) => format!("<={x}x"),
            Some(Target::RatioAtLeast(x)) => format!(">={x}x"),
            Some(Target::AtMost(x)) => format!("<={x}{}", r.unit),
            None => "-".into(),
        };
        let status = match r.met() {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "-",
        };
        let _ = writeln!(
            out,
            "{:<26} {:>7} {:<13} {:>5} {:>10} {:>10} {:>6.2}x {:>8}  {status}",
            r.metric,
            human_size(r.payload_bytes),
            short(&r.baseline_name),
            r.unit,
            fmt_value(r.stampede),
            fmt_value(r.baseline),
            r.ratio(),
            target,
        );
    }
    let met = records.iter().filter(|r| r.met() == Some(true)).count();
    let with = records.iter().filter(|r| r.met().is_some()).count();
    let _ = writeln!(out, "{met}/{with} targets met");
    if series.iter().any(|s| s.system == LOCAL_LAG_BASELINE) {
        let _ = writeln!(out, "(local: {LOCAL_LAG_BASELINE})");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{:<26} {:>7} {:<13} {:>5} {:>10}  raw (per repeat)",
        "metric", "payload", "system", "unit", "median"
    );
    let _ = writeln!(out, "{}", "-".repeat(104));
    for s in series {
        let raw: Vec<String> = s.raw.iter().map(|v| fmt_value(*v)).collect();
        let _ = writeln!(
            out,
            "{:<26} {:>7} {:<13} {:>5} {:>10}  [{}]",
            s.metric,
            human_size(s.payload_bytes),
            short(s.system),
            s.unit,
            fmt_value(s.median()),
            raw.join(", ")
        );
    }
    out
}

/// A baseline's name for a table column.
fn short(name: &str) -> &str {
    if name == LOCAL_LAG_BASELINE {
        "local"
    } else {
        name
    }
}

fn fmt_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
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
