//! Cross-process baselines for Stampede's networked transport, measured between two
//! processes on one host: the binary re-executes itself as the other side (see [`child`]).
//!
//! * **Ping-pong** (`xproc_pingpong_oneway_p50`): the parent sends N bytes, the child
//!   receives them completely and sends N bytes back, the parent receives them completely;
//!   one-way latency is half the round trip. Per run: the median over many round trips after
//!   a warm-up.
//! * **Bandwidth** (`xproc_bandwidth`): the child sends N-byte messages for a fixed time, the
//!   parent consumes them; MB/s (10^6 bytes) between the first and the last arrival.
//!
//! Every run starts fresh processes and connections, and is repeated; a record holds the
//! per-repeat values and their median. Within a repeat the systems take turns, starting with
//! a different one each time, so slow drifts of the host hit all of them alike.
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
mod stream;
pub mod tcp;
pub mod unix;
mod zconfig;
pub mod zenoh_pubsub;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use error::BenchError;
pub use stats::Throughput;
pub use zconfig::zenoh_config;

/// Metric name of the median one-way ping-pong latency.
pub const PINGPONG_METRIC: &str = "xproc_pingpong_oneway_p50";
/// Metric name of the one-producer, one-consumer bandwidth.
pub const BANDWIDTH_METRIC: &str = "xproc_bandwidth";
/// Payload sizes of the ping-pong.
pub const PINGPONG_SIZES: [usize; 4] = [64, 4 << 10, 64 << 10, 1 << 20];
/// Message sizes of the bandwidth runs.
pub const BANDWIDTH_SIZES: [usize; 2] = [64 << 10, 1 << 20];

/// A ping-pong: `(size, round_trips)` → one-way latency in µs per recorded round trip.
pub type PingPong = fn(usize, usize) -> Result<Vec<f64>, BenchError>;
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
}

/// The baselines, in the order they are reported.
pub const BASELINES: [System; 3] = [
    System {
        name: "tcp",
        pingpong: Some(tcp::pingpong),
        bandwidth: Some(tcp::bandwidth),
    },
    System {
        name: "unix",
        pingpong: Some(unix::pingpong),
        bandwidth: None,
    },
    System {
        name: "zenoh_pubsub",
        pingpong: Some(zenoh_pubsub::pingpong),
        bandwidth: Some(zenoh_pubsub::bandwidth),
    },
];

/// How much to measure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// Runs per (metric, size, system); the record holds their median.
    pub repeats: usize,
    /// Recorded round trips per ping-pong run (a tenth more, at least 10, warm up).
    pub round_trips: usize,
    /// How long the producer sends in a bandwidth run.
    pub duration: Duration,
}

impl Plan {
    /// The full measurement.
    pub fn full() -> Self {
        Self {
            repeats: 3,
            round_trips: 2_000,
            duration: Duration::from_secs(2),
        }
    }

    /// A smoke run that finishes in seconds.
    pub fn quick() -> Self {
        Self {
            repeats: 1,
            round_trips: 100,
            duration: Duration::from_millis(500),
        }
    }
}

/// One result row of `net-baselines.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Metric name, e.g. `xproc_pingpong_oneway_p50`.
    pub metric: String,
    /// Payload (message) size in bytes.
    pub payload_bytes: usize,
    /// Which baseline: `tcp`, `unix` or `zenoh_pubsub`.
    pub baseline_name: String,
    /// The median of `raw`.
    pub baseline: f64,
    /// `us` or `MB/s`.
    pub unit: String,
    /// One value per repeat, in the order measured.
    pub raw: Vec<f64>,
}

/// Warm-up round trips before `round_trips` recorded ones: connections, caches and Zenoh's
/// lazily created shared-memory pool settle in these.
pub(crate) fn warmup_for(round_trips: usize) -> usize {
    (round_trips / 10).max(10)
}

/// Measures every metric of `plan` for each of `systems`, reporting progress through `log`.
/// Stops at the first failed run.
pub fn run(
    plan: &Plan,
    systems: &[System],
    mut log: impl FnMut(&str),
) -> Result<Vec<Record>, BenchError> {
    let mut records = Vec::new();
    for &size in &PINGPONG_SIZES {
        let runs: Vec<_> = systems
            .iter()
            .filter_map(|s| s.pingpong.map(|f| (s.name, f)))
            .collect();
        let measured = measure(plan.repeats, &runs, &mut log, |name, f| {
            let samples = f(size, plan.round_trips)?;
            let p50 = stats::median(&samples);
            let p99 = stats::percentile(&samples, 0.99);
            let line = format!(
                "{PINGPONG_METRIC} {:>7} {name:<13} p50 {p50:9.2} us  p99 {p99:9.2} us  ({} round trips)",
                human_size(size),
                samples.len()
            );
            Ok((p50, line))
        })?;
        for (name, raw) in measured {
            records.push(record(PINGPONG_METRIC, size, name, "us", raw));
        }
    }
    for &size in &BANDWIDTH_SIZES {
        let runs: Vec<_> = systems
            .iter()
            .filter_map(|s| s.bandwidth.map(|f| (s.name, f)))
            .collect();
        let measured = measure(plan.repeats, &runs, &mut log, |name, f| {
            let t = f(size, plan.duration)?;
            let line = format!(
                "{BANDWIDTH_METRIC} {:>7} {name:<13} {:9.1} MB/s  ({} messages, all received, in {:.2} s)",
                human_size(size),
                t.mb_per_s(),
                t.messages,
                t.elapsed.as_secs_f64()
            );
            Ok((t.mb_per_s(), line))
        })?;
        for (name, raw) in measured {
            records.push(record(BANDWIDTH_METRIC, size, name, "MB/s", raw));
        }
    }
    Ok(records)
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

fn record(metric: &str, size: usize, name: &str, unit: &str, raw: Vec<f64>) -> Record {
    Record {
        metric: metric.to_owned(),
        payload_bytes: size,
        baseline_name: name.to_owned(),
        baseline: stats::median(&raw),
        unit: unit.to_owned(),
        raw,
    }
}

/// `<workspace>/bench-results/net-baselines.json`.
pub fn default_out() -> PathBuf {
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    ws.canonicalize()
        .unwrap_or(ws)
        .join("bench-results/net-baselines.json")
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

/// A fixed-width table of `records`: metric, payload, baseline, unit, median, raw values.
pub fn render_table(records: &[Record]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<26} {:>8} {:<13} {:>5} {:>10}  raw (per repeat)",
        "metric", "payload", "baseline", "unit", "median"
    );
    let _ = writeln!(out, "{}", "-".repeat(94));
    for r in records {
        let raw: Vec<String> = r.raw.iter().map(|v| fmt_value(*v)).collect();
        let _ = writeln!(
            out,
            "{:<26} {:>8} {:<13} {:>5} {:>10}  [{}]",
            r.metric,
            human_size(r.payload_bytes),
            r.baseline_name,
            r.unit,
            fmt_value(r.baseline),
            raw.join(", ")
        );
    }
    out
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
