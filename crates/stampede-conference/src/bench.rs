//! The benchmark of the paper's §5.2: sustained frame rate at the slowest display as a
//! function of the number of participants and the frame size, for the Stampede mixer and the
//! TCP baseline measured in the same run, and the bandwidth out of the mixer (Table 1).
//!
//! Each run starts fresh processes of this binary: a mixer, then K participants with
//! unpaced cameras. Once every display has received composites, the run warms up, then
//! watches a window: a participant's rate is the growth of its composite count between its
//! first and its last report inside the window, over the time between their arrivals. The
//! run's result is the slowest participant's rate; a point is the median over repeats.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::ConferenceError;
use crate::report::{DisplayReport, Summary};

/// Until every display has received a composite.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Until a participant told to leave has printed its summary and exited.
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);
/// Display reports per second during a run: the window's edges are this precise.
const REPORT_MS: u64 = 250;

/// A mixer and its participants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum System {
    /// The multi-threaded Stampede mixer over channels (the paper's third version).
    Stampede,
    /// The single-threaded Stampede mixer (the paper's second version).
    #[serde(rename = "stampede-single")]
    #[value(name = "stampede-single")]
    StampedeSingle,
    /// The single-threaded TCP mixer.
    Baseline,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Stampede => "stampede",
            System::StampedeSingle => "stampede-single",
            System::Baseline => "baseline",
        }
    }
}

/// The Stampede mixers, each compared with the baseline.
const MIXERS: [System; 2] = [System::Stampede, System::StampedeSingle];

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The binary to run as mixer and participants (this one).
    pub exe: PathBuf,
    /// The systems, measured in this order within each repeat.
    pub systems: Vec<System>,
    /// Numbers of participants.
    pub ks: Vec<usize>,
    /// Frame sizes in KB (1000 bytes).
    pub sizes: Vec<u32>,
    /// Runs per point.
    pub repeats: usize,
    /// Warm-up after every display received its first composite.
    pub warmup: Duration,
    /// The measurement window.
    pub window: Duration,
    /// Frame width in pixels.
    pub width: usize,
}

/// One point of the results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The system.
    pub system: System,
    /// Participants.
    pub k: usize,
    /// Frame size in KB.
    pub size_kb: u32,
    /// Median over runs of the slowest display's composites per second.
    pub fps_slowest: f64,
    /// Each run's slowest display rate.
    pub fps_runs: Vec<f64>,
    /// `K² · S · F` in MB/s: what the mixer sends for the median rate.
    pub bandwidth_mbps: f64,
    /// Tiles that failed verification, over all runs (must be 0).
    pub bad: u64,
}

/// Stampede's rate over the baseline's at one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// Participants.
    pub k: usize,
    /// Frame size in KB.
    pub size_kb: u32,
    /// `fps_slowest(stampede) / fps_slowest(baseline)`, when both were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stampede_over_baseline: Option<f64>,
    /// The same for the single-threaded Stampede mixer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub single_over_baseline: Option<f64>,
}

/// The host the benchmark ran on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Logical CPUs available.
    pub cpus: usize,
}

/// The benchmark's JSON file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResults {
    /// Always `"conference"`.
    pub bench: String,
    /// Measurement window in seconds.
    pub window_s: f64,
    /// Runs per point.
    pub repeats: usize,
    /// The host.
    pub host: Host,
    /// Every measured point.
    pub points: Vec<Point>,
    /// Where both systems were measured.
    pub ratio: Vec<Ratio>,
}

/// `K² · S · F` in MB/s for frames of `size_kb` KB: every one of K displays receives a
/// composite of K frames.
pub fn bandwidth_mbps(k: usize, size_kb: u32, fps: f64) -> f64 {
    (k * k) as f64 * f64::from(size_kb) / 1000.0 * fps
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn free_port() -> Result<u16, ConferenceError> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| ConferenceError::io("finding a free port", e))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| ConferenceError::io("finding a free port", e))
}

/// A line a child printed, with who printed it and when it arrived.
struct Line {
    who: usize,
    at: Instant,
    text: String,
}

/// A child process, killed and reaped when dropped so no error path leaves one behind.
struct ChildProcess {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
}

impl ChildProcess {
    fn spawn(
        exe: &Path,
        args: &[String],
        who: usize,
        name: String,
        lines: &Sender<Line>,
    ) -> Result<ChildProcess, ConferenceError> {
        let mut cmd = Command::new(exe);
        // Departures at the end of every run are expected: only errors are news.
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "error");
        }
        let mut child = cmd
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| ConferenceError::io(format!("starting {name}"), e))?;
        let stdin = child.stdin.take();
        let out = child.stdout.take();
        let tx = lines.clone();
        if let Some(out) = out {
            std::thread::spawn(move || {
                for text in BufReader::new(out).lines().map_while(Result::ok) {
                    let line = Line {
                        who,
                        at: Instant::now(),
                        text,
                    };
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        Ok(ChildProcess { name, child, stdin })
    }

    /// Closes standard input, which tells a participant to leave.
    fn close_stdin(&mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.stdin.take();
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn event_of(text: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    Some(v.get("event")?.as_str()?.to_owned())
}

/// Hands every line arriving before `until` to `f`.
fn drain_until(
    rx: &Receiver<Line>,
    until: Instant,
    what: &str,
    mut f: impl FnMut(Line),
) -> Result<(), ConferenceError> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        match rx.recv_timeout(left) {
            Ok(l) => f(l),
            Err(RecvTimeoutError::Timeout) => return Ok(()),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(ConferenceError::Child(format!(
                    "{what}: every process exited"
                )))
            }
        }
    }
}

/// One run's outcome.
struct Run {
    fps_slowest: f64,
    bad: u64,
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn run_once(
    opts: &BenchOptions,
    system: System,
    k: usize,
    size_kb: u32,
    run: usize,
) -> Result<Run, ConferenceError> {
    let port = free_port()?;
    let app = format!("bench{}-{run}", std::process::id());
    let width = opts.width.to_string();
    let size = size_kb.to_string();
    let (tx, rx): (Sender<Line>, Receiver<Line>) = mpsc::channel();
    let (mixer_args, participant_args) = match system {
        System::Stampede | System::StampedeSingle => {
            let ep = format!("tcp/127.0.0.1:{port}");
            let threads = if system == System::Stampede {
                "multi"
            } else {
                "single"
            };
            (
                args(&[
                    "mixer",
                    "--app",
                    &app,
                    "--listen",
                    &ep,
                    "--width",
                    &width,
                    "--size-kb",
                    &size,
                    "--threads",
                    threads,
                ]),
                args(&["participant", "--app", &app, "--connect", &ep]),
            )
        }
        System::Baseline => {
            let addr = format!("127.0.0.1:{port}");
            (
                args(&[
                    "baseline-mixer",
                    "--listen",
                    &addr,
                    "--width",
                    &width,
                    "--size-kb",
                    &size,
                ]),
                args(&["baseline-participant", "--connect", &addr]),
            )
        }
    };
    let what = format!("{} k={k} size={size_kb}KB", system.name());
    let mut mixer = ChildProcess::spawn(&opts.exe, &mixer_args, 0, format!("{what} mixer"), &tx)?;
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if event_of(&l.text).as_deref() == Some("ready") => break,
            Ok(_) => {}
            Err(_) => {
                return Err(ConferenceError::Timeout(format!(
                    "{what}: the mixer never got ready"
                )))
            }
        }
    }
    let mut participants = Vec::with_capacity(k);
    for id in 1..=k {
        let mut a = participant_args.clone();
        let id_s = id.to_string();
        let report = REPORT_MS.to_string();
        a.extend(args(&[
            "--id",
            &id_s,
            "--fps",
            "0",
            "--width",
            &width,
            "--size-kb",
            &size,
            "--duration",
            "0",
            "--report-ms",
            &report,
        ]));
        participants.push(ChildProcess::spawn(
            &opts.exe,
            &a,
            id,
            format!("{what} participant {id}"),
            &tx,
        )?);
    }
    drop(tx);
    let reports = |l: &Line| -> Option<DisplayReport> {
        serde_json::from_str::<DisplayReport>(&l.text)
            .ok()
            .filter(|r| r.event == "display" && l.who > 0)
    };

    // Until every display has composites.
    let mut started = vec![false; k + 1];
    started[0] = true;
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    while started.iter().any(|s| !s) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                if let Some(r) = reports(&l) {
                    if r.composites > 0 {
                        started[l.who] = true;
                    }
                }
            }
            Err(_) => {
                return Err(ConferenceError::Timeout(format!(
                    "{what}: not every display received composites within {STARTUP_TIMEOUT:?}"
                )))
            }
        }
    }
    drain_until(&rx, Instant::now() + opts.warmup, &what, |_| {})?;
    let mut seen: Vec<Vec<(Instant, u64)>> = vec![Vec::new(); k + 1];
    // Bad tiles per participant: counts only grow, so the last word is the largest.
    let mut bad = vec![0u64; k + 1];
    drain_until(&rx, Instant::now() + opts.window, &what, |l| {
        if let Some(r) = reports(&l) {
            seen[l.who].push((l.at, r.composites));
            bad[l.who] = bad[l.who].max(r.bad);
        }
    })?;
    let mut rates = Vec::with_capacity(k);
    for (id, s) in seen.iter().enumerate().skip(1) {
        let (Some(&(t0, n0)), Some(&(t1, n1))) = (s.first(), s.last()) else {
            return Err(ConferenceError::Child(format!(
                "{what}: participant {id} reported nothing during the window"
            )));
        };
        let secs = t1.saturating_duration_since(t0).as_secs_f64();
        rates.push(if secs > 0.0 {
            n1.saturating_sub(n0) as f64 / secs
        } else {
            0.0
        });
    }

    // Participants leave cleanly; their summaries carry the final count of bad tiles.
    for p in &mut participants {
        p.close_stdin();
    }
    let mut summaries = 0;
    let deadline = Instant::now() + EXIT_TIMEOUT;
    while summaries < k {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                if let Ok(s) = serde_json::from_str::<Summary>(&l.text) {
                    if s.event == "summary" && l.who > 0 {
                        summaries += 1;
                        bad[l.who] = bad[l.who].max(s.bad);
                    }
                } else if let Some(r) = reports(&l) {
                    bad[l.who] = bad[l.who].max(r.bad);
                }
            }
            Err(_) => break,
        }
    }
    for p in &mut participants {
        if summaries < k {
            eprintln!("{}: no summary; killing it", p.name);
        }
        let _ = p.child.kill();
    }
    drop(participants);
    let _ = mixer.child.kill();
    Ok(Run {
        fps_slowest: rates.iter().copied().fold(f64::INFINITY, f64::min),
        bad: bad.iter().sum(),
    })
}

/// Runs every point; prints progress on stderr.
pub fn run_bench(opts: &BenchOptions) -> Result<BenchResults, ConferenceError> {
    let mut runs: Vec<((System, usize, u32), Vec<Run>)> = Vec::new();
    let mut n = 0;
    for &size in &opts.sizes {
        for &k in &opts.ks {
            for &system in &opts.systems {
                runs.push(((system, k, size), Vec::new()));
            }
        }
    }
    for repeat in 0..opts.repeats {
        for ((system, k, size), done) in &mut runs {
            n += 1;
            let r = run_once(opts, *system, *k, *size, n)?;
            eprintln!(
                "repeat {}/{}: {} k={k} size={size}KB: slowest display {:.1} fps{}",
                repeat + 1,
                opts.repeats,
                system.name(),
                r.fps_slowest,
                if r.bad > 0 {
                    format!(", {} bad tiles", r.bad)
                } else {
                    String::new()
                }
            );
            done.push(r);
        }
    }
    let points: Vec<Point> = runs
        .into_iter()
        .map(|((system, k, size_kb), rs)| {
            let fps_runs: Vec<f64> = rs.iter().map(|r| r.fps_slowest).collect();
            let fps = median(&fps_runs);
            Point {
                system,
                k,
                size_kb,
                fps_slowest: fps,
                fps_runs,
                bandwidth_mbps: bandwidth_mbps(k, size_kb, fps),
                bad: rs.iter().map(|r| r.bad).sum(),
            }
        })
        .collect();
    let find = |s: System, k: usize, size: u32| {
        points
            .iter()
            .find(|p| p.system == s && p.k == k && p.size_kb == size)
            .map(|p| p.fps_slowest)
    };
    let over = |s: f64, b: f64| if b > 0.0 { s / b } else { 0.0 };
    let mut ratio = Vec::new();
    for &size_kb in &opts.sizes {
        for &k in &opts.ks {
            let Some(b) = find(System::Baseline, k, size_kb) else {
                continue;
            };
            let r = Ratio {
                k,
                size_kb,
                stampede_over_baseline: find(System::Stampede, k, size_kb).map(|s| over(s, b)),
                single_over_baseline: find(System::StampedeSingle, k, size_kb).map(|s| over(s, b)),
            };
            if r.stampede_over_baseline.is_some() || r.single_over_baseline.is_some() {
                ratio.push(r);
            }
        }
    }
    Ok(BenchResults {
        bench: "conference".into(),
        window_s: opts.window.as_secs_f64(),
        repeats: opts.repeats,
        host: Host {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        },
        points,
        ratio,
    })
}

/// Writes the results as pretty JSON, creating the directory.
pub fn write_results(results: &BenchResults, out: &Path) -> Result<(), ConferenceError> {
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| ConferenceError::io(format!("creating {}", dir.display()), e))?;
    }
    let json = serde_json::to_string_pretty(results).expect("results serialize");
    std::fs::write(out, json + "\n")
        .map_err(|e| ConferenceError::io(format!("writing {}", out.display()), e))
}

fn table(
    title: &str,
    ks: &[usize],
    sizes: &[u32],
    cell: impl Fn(usize, u32) -> Option<f64>,
) -> String {
    let mut s = format!("{title}\n{:>10} |", "size (KB)");
    for k in ks {
        s += &format!("{k:>8}");
    }
    s += &format!("\n{}\n", "-".repeat(12 + 8 * ks.len()));
    for &size in sizes {
        s += &format!("{size:>10} |");
        for &k in ks {
            match cell(k, size) {
                Some(v) => s += &format!("{v:>8.2}"),
                None => s += &format!("{:>8}", "-"),
            }
        }
        s.push('\n');
    }
    s
}

/// The tables in the paper's shape: rows are frame sizes, columns numbers of participants.
pub fn render_tables(r: &BenchResults) -> String {
    let mut ks: Vec<usize> = r.points.iter().map(|p| p.k).collect();
    ks.sort_unstable();
    ks.dedup();
    let mut sizes: Vec<u32> = r.points.iter().map(|p| p.size_kb).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let point = |s: System, k: usize, size: u32| {
        r.points
            .iter()
            .find(|p| p.system == s && p.k == k && p.size_kb == size)
    };
    let mut out = String::new();
    for s in [System::Stampede, System::StampedeSingle, System::Baseline] {
        if r.points.iter().any(|p| p.system == s) {
            out += &table(
                &format!(
                    "Sustained frame rate at the slowest display (fps), {}, by number of clients",
                    s.name()
                ),
                &ks,
                &sizes,
                |k, size| point(s, k, size).map(|p| p.fps_slowest),
            );
            out.push('\n');
        }
    }
    for s in MIXERS {
        if r.points.iter().any(|p| p.system == s) {
            out += &table(
                &format!(
                    "Delivered bandwidth out of the mixer, K²·S·F (MBps), {}",
                    s.name()
                ),
                &ks,
                &sizes,
                |k, size| point(s, k, size).map(|p| p.bandwidth_mbps),
            );
            out.push('\n');
        }
    }
    for s in MIXERS {
        let pick = |x: &Ratio| match s {
            System::StampedeSingle => x.single_over_baseline,
            _ => x.stampede_over_baseline,
        };
        if r.ratio.iter().any(|x| pick(x).is_some()) {
            out += &table(
                &format!("Frame rate ratio {} / baseline", s.name()),
                &ks,
                &sizes,
                |k, size| {
                    r.ratio
                        .iter()
                        .find(|x| x.k == k && x.size_kb == size)
                        .and_then(pick)
                },
            );
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_is_k_squared_s_f() {
        assert!((bandwidth_mbps(2, 74, 40.0) - 11.84).abs() < 1e-9);
        assert!((bandwidth_mbps(6, 125, 10.0) - 45.0).abs() < 1e-9);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn tables_have_sizes_as_rows_and_clients_as_columns() {
        let p = |system, k, size_kb, fps| Point {
            system,
            k,
            size_kb,
            fps_slowest: fps,
            fps_runs: vec![fps],
            bandwidth_mbps: bandwidth_mbps(k, size_kb, fps),
            bad: 0,
        };
        let r = BenchResults {
            bench: "conference".into(),
            window_s: 3.0,
            repeats: 1,
            host: Host { cpus: 2 },
            points: vec![
                p(System::Stampede, 2, 74, 40.0),
                p(System::Baseline, 2, 74, 20.0),
                p(System::Stampede, 3, 74, 30.0),
            ],
            ratio: vec![Ratio {
                k: 2,
                size_kb: 74,
                stampede_over_baseline: Some(2.0),
                single_over_baseline: None,
            }],
        };
        let t = render_tables(&r);
        assert!(t.contains("        74 |   40.00   30.00"), "{t}");
        assert!(t.contains("        74 |   20.00       -"), "{t}");
        assert!(t.contains("        74 |    2.00       -"), "{t}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["points"][0]["system"], "stampede");
        assert!(!t.contains("stampede-single"), "{t}");
        // The single-threaded mixer gets its own tables once measured.
        let mut r = r;
        r.points.push(p(System::StampedeSingle, 2, 74, 10.0));
        r.ratio[0].single_over_baseline = Some(0.5);
        let t = render_tables(&r);
        assert!(
            t.contains("Frame rate ratio stampede-single / baseline"),
            "{t}"
        );
        assert!(t.contains("        74 |    0.50       -"), "{t}");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["points"][3]["system"], "stampede-single");
    }
}
