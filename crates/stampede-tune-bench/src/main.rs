//! `stampede-tune-bench`: the auto-calibration toolkit on three real implementations of one
//! operation, sorting `u32` keys (insertion sort, the standard library's pattern-defeating
//! quicksort, an LSD radix sort with 8-bit digits), written to `bench-results/tune.json`.
//!
//! * `tune_calibration_s`: seconds to calibrate each implementation's model (target at most
//!   60 s), with its mean relative error on independent samples and its formula.
//! * `tune_selection_ns`: the selector's cost per implementation for one input (target at
//!   most 1 µs), against a lookup of a memoised decision in a hash map (what a per-size
//!   planner cache costs) in the same run.
//! * `tune_selection_accuracy`: over random key counts, every implementation is run and the
//!   measured best compared with the pick (see `study.rs`): strict accuracy, picks within 3%
//!   of the best, the mean penalty when wrong, and the gain over always using the
//!   implementation that is best on average (thesis Table 4-3). The default run samples
//!   200 inputs; `--full` runs 1000.
//! * `strata_latency_us`, `strata_model`, `strata_model_picks`: the Strata collectives on
//!   threads (see `strata.rs`).

use std::collections::HashMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod factor;
mod netns;
mod procs;
mod psort;
mod stencil;
mod strata;
mod study;

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use stampede_tune::{fit, sample_points, Model, ModelSpec, Profiler, Selector, TermSpec};
use study::Effort;

#[derive(Debug, Parser)]
#[command(name = "stampede-tune-bench", version)]
struct Cli {
    /// Random inputs of the accuracy study (1000 with --full).
    #[arg(long, default_value_t = 200)]
    inputs: usize,
    /// The full study: 1000 inputs.
    #[arg(long)]
    full: bool,
    /// Only one study: `sort`, `strata`, `psort` or `stencil` (on threads), `processes`
    /// (both libraries on processes on this host), `factor` (model factoring on threads and
    /// processes) or `hosts` (on emulated hosts, as root).
    #[arg(long)]
    only: Option<String>,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results/tune.json")]
    out: PathBuf,
}

/// The most inputs of a library's accuracy study on emulated hosts with 1 ms and with 10 ms
/// links: an input takes seconds there (a 16-bit radix sort moves 512 KiB histograms over
/// the link at every pass), tens of seconds on the 10 ms links.
const HOSTS_INPUTS: [usize; 2] = [200, 40];

/// The key counts the models are calibrated over.
const MIN_N: f64 = 8.0;
const MAX_N: f64 = 65_536.0;

type SortFn = fn(&mut [u32]);

fn insertion(v: &mut [u32]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

fn pdq(v: &mut [u32]) {
    v.sort_unstable();
}

/// LSD radix sort, four passes of 8-bit digits.
fn radix8(v: &mut [u32]) {
    let mut buf = vec![0u32; v.len()];
    let (mut src, mut dst) = (v.to_vec(), std::mem::take(&mut buf));
    for pass in 0..4 {
        let shift = pass * 8;
        let mut count = [0usize; 257];
        for &k in &src {
            count[((k >> shift) & 0xff) as usize + 1] += 1;
        }
        for i in 0..256 {
            count[i + 1] += count[i];
        }
        for &k in &src {
            let d = ((k >> shift) & 0xff) as usize;
            dst[count[d]] = k;
            count[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    v.copy_from_slice(&src);
}

/// Each implementation with the largest key count it is calibrated for: insertion sort is
/// quadratic, so its model is valid (and it is run) only up to 4096 keys, and the selector
/// never considers it beyond (its model predicts +∞ there).
const IMPLEMENTATIONS: [(&str, SortFn, f64); 3] = [
    ("insertion", insertion, 4096.0),
    ("pdqsort", pdq, MAX_N),
    ("radix8", radix8, MAX_N),
];

fn spec(name: &str, max_n: f64) -> ModelSpec {
    ModelSpec::new(name)
        .variable("n", MIN_N, max_n, true)
        .term(TermSpec::one())
        .term(TermSpec::var("n"))
        .term(TermSpec::var("n").times_log("n", 1))
        .term(TermSpec::var("n").times("n", 1))
        .build()
        .expect("a valid specification")
}

fn keys(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen()).collect()
}

/// How many arrays of `n` keys one timed run sorts: enough for about 16 384 keys, so that a
/// run of a few keys is not below the clock's resolution and its overhead.
fn batch(n: usize) -> usize {
    (16_384 / n.max(1)).max(1)
}

/// Fresh arrays for one timed run.
fn batch_keys(n: usize, seed: u64) -> Vec<Vec<u32>> {
    (0..batch(n) as u64)
        .map(|b| keys(n, seed.wrapping_mul(31).wrapping_add(b)))
        .collect()
}

fn sort_batch(f: SortFn, arrays: &mut [Vec<u32>]) {
    for v in arrays {
        f(black_box(v));
    }
}

/// Seconds for `f` to sort `n` random keys: the median of three timed runs, each sorting a
/// batch of fresh arrays, divided by the batch.
fn measure(f: SortFn, n: usize, seed: u64) -> f64 {
    median((0..3).map(|r| measure_once(f, n, seed * 7 + r)).collect())
}

/// Seconds per sort of one batch.
fn measure_once(f: SortFn, n: usize, seed: u64) -> f64 {
    let mut arrays = batch_keys(n, seed);
    let t0 = Instant::now();
    sort_batch(f, &mut arrays);
    (t0.elapsed().as_secs_f64() / arrays.len() as f64).max(1e-10)
}

fn calibrate(name: &str, f: SortFn, max_n: f64) -> (Model, f64, f64) {
    let s = spec(name, max_n);
    let t0 = Instant::now();
    let points = sample_points(&s, 160, 1);
    let mut samples = Profiler::default().profile(
        &points,
        |x| batch_keys(x[0] as usize, x[0] as u64),
        |_, arrays: &mut Vec<Vec<u32>>| sort_batch(f, arrays),
        |_, _| (),
        |p| {
            if p.done == p.total {
                eprintln!("  {name:<10} {p}");
            }
        },
    );
    // Each sample timed a batch: the model is of one array's sort.
    for s in &mut samples {
        s.y /= batch(s.x[0] as usize) as f64;
    }
    let model = fit(&s, &samples, 0.95).expect("the samples fit");
    let seconds = t0.elapsed().as_secs_f64();
    let fresh: Vec<stampede_tune::Sample> = sample_points(&s, 24, 99)
        .into_iter()
        .map(|x| stampede_tune::Sample {
            y: measure(f, x[0] as usize, 5),
            x,
        })
        .collect();
    let mre = model.verify(&fresh, 3).mre;
    (model, seconds, mre)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Tells glibc's allocator to keep freed memory instead of returning it to the kernel, as a
/// long-running stream application's allocator settles into doing. Left at its defaults,
/// every block of 128 KiB or more, and every free that leaves enough at the top of the heap,
/// goes back to the kernel, so the next sort's buffers are fresh pages: on this 2-core
/// virtual machine a 57,000-key radix sort over two threads took 64,000 page faults per
/// 120 sorts and 1.2 to 4.3 ms; with these settings, 1,700 and 1.1 to 1.4 ms. The models
/// are calibrated and checked under the same settings, in every worker process too.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

fn main() {
    keep_freed_memory();
    if procs::worker() {
        return;
    }
    let cli = Cli::parse();
    let inputs = if cli.full {
        cli.inputs.max(1000)
    } else {
        cli.inputs
    };
    let mut records: Vec<Value> = Vec::new();

    let wants = |name: &str| cli.only.as_deref().map_or(true, |o| o == name);
    if wants("sort") {
        sort_study(&mut records, inputs, cli.full);
    }
    if wants("strata") {
        strata::run(&mut records, cli.full);
    }
    // One thread per core: more would measure the scheduler's time slices, not the
    // implementations (2 to 4 members).
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 4));
    // The libraries' studies sample half as many inputs as the sort toolkit's by default.
    let lib_inputs = if cli.full { inputs } else { inputs / 2 };
    if wants("psort") {
        psort::run(
            &mut records,
            lib_inputs,
            cli.full,
            Effort::new(cli.full, 1),
            "threads in one process",
            threads,
            &mut psort::threads,
        );
    }
    if wants("stencil") {
        stencil::run(
            &mut records,
            lib_inputs,
            cli.full,
            Effort::new(cli.full, 1),
            "threads in one process",
            threads,
            &mut |l, n, t, k, seed| {
                stampede_tuned::time_stencil_threads(l, threads, n, t, k, seed)
                    .expect("a stencil run")
            },
        );
    }
    if wants("processes") {
        let mut group = procs::Processes::start(4);
        libraries_on(
            &mut records,
            lib_inputs,
            cli.full,
            Effort::new(cli.full, 2),
            "processes on one host",
            &mut group,
        );
        if wants("factor") {
            factor::run(&mut records, &mut [&mut factor::Threads, &mut group]);
        }
    } else if wants("factor") {
        let mut group = procs::Processes::start(4);
        factor::run(&mut records, &mut [&mut factor::Threads, &mut group]);
    }
    // Emulated hosts take minutes per link: with --full or --only hosts.
    if cli.only.as_deref() == Some("hosts") || (cli.full && cli.only.is_none()) {
        for delay_ms in [1u64, 10] {
            let platform = format!("hosts: 100 Mbit/s links, {delay_ms} ms each way");
            match procs::Processes::start_hosts(4, "100mbit", Duration::from_millis(delay_ms)) {
                Ok(mut group) => {
                    // A run costs about 4 (1 ms) to 8 (10 ms) times one on this host.
                    let effort = Effort::new(cli.full, if delay_ms > 1 { 8 } else { 4 });
                    libraries_on(
                        &mut records,
                        lib_inputs.min(HOSTS_INPUTS[usize::from(delay_ms > 1)]),
                        cli.full,
                        effort,
                        &platform,
                        &mut group,
                    );
                }
                Err(why) => {
                    println!("{platform}: skipped ({why})");
                    records.push(
                        json!({"metric": "platform_skipped", "platform": platform, "why": why}),
                    );
                }
            }
        }
    }

    if let Some(dir) = cli.out.parent() {
        std::fs::create_dir_all(dir).expect("cannot create the results directory");
    }
    let text = serde_json::to_string_pretty(&records).expect("records are JSON");
    std::fs::write(&cli.out, text + "\n").expect("cannot write the results");
    println!("results written to {}", cli.out.display());
}

/// Both libraries' studies on a group of processes.
fn libraries_on(
    records: &mut Vec<Value>,
    inputs: usize,
    full: bool,
    effort: Effort,
    platform: &str,
    group: &mut procs::Processes,
) {
    let p = group.size();
    psort::run(
        records,
        inputs,
        full,
        effort,
        platform,
        p,
        &mut |a, p, n, seed| group.time_sort(a, p, n, seed).expect("a sort run"),
    );
    stencil::run(
        records,
        inputs,
        full,
        effort,
        platform,
        p,
        &mut |l, n, t, k, seed| group.time_stencil(l, n, t, k, seed).expect("a stencil run"),
    );
}

/// The toolkit on three sorts: calibration, selection cost, accuracy and gain.
fn sort_study(records: &mut Vec<Value>, inputs: usize, full: bool) {
    // Calibration.
    let mut models = Vec::new();
    for (name, f, max_n) in IMPLEMENTATIONS {
        let (model, seconds, mre) = calibrate(name, f, max_n);
        println!(
            "{:<10} calibrated in {seconds:6.2} s, MRE {mre:.3} on fresh samples: {}",
            name,
            model.formula()
        );
        records.push(json!({
            "metric": "tune_calibration_s",
            "implementation": name,
            "stampede": (seconds * 1000.0).round() / 1000.0,
            "unit": "s",
            "target": "<= 60 s",
            "met": seconds <= 60.0,
            "mre_fresh": (mre * 1e4).round() / 1e4,
            "mre_fit": (model.mre * 1e4).round() / 1e4,
            "formula": model.formula(),
            "samples": model.samples,
        }));
        models.push(model);
    }
    let selector = Selector::new(models);

    // Selection cost against a memoised decision.
    let queries: Vec<[f64; 1]> = (0..4096)
        .map(|i| [MIN_N + (i as f64 * 15.99).floor()])
        .collect();
    let memo: HashMap<u64, usize> = queries
        .iter()
        .map(|q| (q[0] as u64, selector.best(q).unwrap_or(0)))
        .collect();
    let rounds = 200;
    let (mut ours, mut base) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t0 = Instant::now();
        for _ in 0..rounds {
            for q in &queries {
                black_box(selector.best(black_box(q)));
            }
        }
        ours.push(
            t0.elapsed().as_nanos() as f64
                / (rounds * queries.len() * IMPLEMENTATIONS.len()) as f64,
        );
        let t0 = Instant::now();
        for _ in 0..rounds {
            for q in &queries {
                black_box(memo.get(&(black_box(q[0]) as u64)));
            }
        }
        base.push(t0.elapsed().as_nanos() as f64 / (rounds * queries.len()) as f64);
    }
    let (o, b) = (median(ours.clone()), median(base.clone()));
    println!("selection: {o:.1} ns per implementation; a memoised lookup {b:.1} ns per input");
    records.push(json!({
        "metric": "tune_selection_ns",
        "stampede": (o * 10.0).round() / 10.0,
        "baseline": (b * 10.0).round() / 10.0,
        "baseline_name": "HashMap lookup of a memoised decision, per input",
        "unit": "ns per implementation",
        "implementations": IMPLEMENTATIONS.len(),
        "target": "<= 1000 ns",
        "met": o <= 1000.0,
        "repeats": {"stampede": ours, "baseline": base},
    }));

    // Accuracy over random key counts, log-uniform over the calibrated range.
    let mut rng = StdRng::seed_from_u64(2024);
    let workload: Vec<Vec<f64>> = (0..inputs)
        .map(|_| {
            vec![(MIN_N.ln() + rng.gen::<f64>() * (MAX_N.ln() - MIN_N.ln()))
                .exp()
                .round()]
        })
        .collect();
    let names: Vec<String> = IMPLEMENTATIONS
        .iter()
        .map(|(n, ..)| n.to_string())
        .collect();
    let mut record = study::accuracy(
        "tune",
        "threads in one process",
        full,
        5,
        &names,
        &workload,
        |x| selector.best(x),
        &mut |k, x, seed| {
            let (_, f, max_n) = IMPLEMENTATIONS[k];
            if x[0] <= max_n {
                measure_once(f, x[0] as usize, seed)
            } else {
                f64::INFINITY
            }
        },
    );
    record["library"] = json!("sort (insertion, pdqsort, radix8)");
    records.push(record);
}
