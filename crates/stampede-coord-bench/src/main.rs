//! `stampede-coord-bench`: the coordination layer against baselines measured in the same run,
//! written to `bench-results/coord.json` (the record format of `core.json`).
//!
//! * `cnc_step_overhead_ns`: the cost of an empty step instance, prescribed by a tag the
//!   environment puts, from the tag put to the end of [`Graph::wait`], against rayon's
//!   `scope.spawn` of an empty closure on a pool of as many threads; with one worker and
//!   with every processor. Target at most 2× rayon per task.
//! * `snet_record_overhead_ns`: the cost of one record through one box of an S-Net network,
//!   a serial chain of eight identity boxes (`id .. id .. … .. id`), from the environment's
//!   first send to the end of the run, divided by records × boxes; against the CnC step
//!   overhead of the same run (no target: S-Net moves a record where CnC runs a step).

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use serde_json::{json, Value};
use stampede_coord::snet::{Network, Policy, Record, Runner};
use stampede_coord::{Executor, Graph};

#[derive(Debug, Parser)]
#[command(name = "stampede-coord-bench", version)]
struct Cli {
    /// Tasks per run.
    #[arg(long, default_value_t = 200_000)]
    tasks: usize,
    /// Runs per figure (the median is reported).
    #[arg(long, default_value_t = 5)]
    repeats: usize,
    /// Worker counts to measure (repeat the option for several); one and every processor
    /// when not given.
    #[arg(long = "workers")]
    workers: Vec<usize>,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results/coord.json")]
    out: PathBuf,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nanoseconds per empty step: `tasks` tags put, then the graph waited for.
fn cnc_steps(workers: usize, tasks: usize) -> f64 {
    let g = Graph::new(Executor::new(workers));
    let t = g.tags("t");
    let s = g.steps("empty", |_, _| Ok(()));
    t.prescribes(&s);
    let start = Instant::now();
    for i in 0..tasks as i64 {
        g.put_tag(&t, i);
    }
    g.wait().expect("empty steps cannot fail");
    start.elapsed().as_nanos() as f64 / tasks as f64
}

/// Boxes in the S-Net chain.
const CHAIN: usize = 8;

/// Nanoseconds per record per box through a chain of identity boxes.
fn snet_chain(workers: usize, records: usize, policy: Policy) -> f64 {
    let chain = ["id"; CHAIN].join(" .. ");
    let net = Network::parse(
        "chain.snet",
        &format!("net chain {{ box id ((<x>) -> (<x>)); }} connect {chain};"),
    )
    .expect("the chain checks");
    let run = Runner::new(&net, &Executor::new(workers))
        .policy(policy)
        .bind("id", |call| call.forward(0))
        .start()
        .expect("every box is bound");
    let start = Instant::now();
    for i in 0..records as i64 {
        run.send(Record::new().tag("x", i))
            .expect("the chain accepts {<x>}");
    }
    run.wait().expect("identity boxes cannot fail");
    let ns = start.elapsed().as_nanos() as f64 / (records * CHAIN) as f64;
    assert_eq!(run.outputs().len(), records, "every record comes out");
    ns
}

/// Nanoseconds per empty closure spawned in a rayon scope.
fn rayon_spawns(workers: usize, tasks: usize) -> f64 {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers)
        .build()
        .expect("a rayon pool");
    let start = Instant::now();
    pool.scope(|s| {
        for _ in 0..tasks {
            s.spawn(|_| {});
        }
    });
    start.elapsed().as_nanos() as f64 / tasks as f64
}

fn main() {
    let cli = Cli::parse();
    let all = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut records: Vec<Value> = Vec::new();
    println!(
        "{:<24}{:>8}{:>14}{:>14}{:>8}",
        "metric", "workers", "cnc ns/task", "rayon ns", "ratio"
    );
    let counts = if cli.workers.is_empty() {
        vec![1, all]
    } else {
        cli.workers.clone()
    };
    for workers in counts {
        // Warm-up: threads, allocator, caches.
        cnc_steps(workers, cli.tasks / 10);
        rayon_spawns(workers, cli.tasks / 10);
        let (mut ours, mut base) = (Vec::new(), Vec::new());
        for _ in 0..cli.repeats.max(1) {
            ours.push(cnc_steps(workers, cli.tasks));
            base.push(rayon_spawns(workers, cli.tasks));
        }
        let (o, b) = (median(ours.clone()), median(base.clone()));
        println!(
            "{:<24}{:>8}{:>14.0}{:>14.0}{:>7.2}x",
            "cnc_step_overhead_ns",
            workers,
            o,
            b,
            o / b
        );
        let mut snet = Vec::new();
        for policy in [Policy::FurthestAdvanced, Policy::MostQueued] {
            snet_chain(workers, cli.tasks / 80, policy);
            let runs: Vec<f64> = (0..cli.repeats.max(1))
                .map(|_| snet_chain(workers, cli.tasks / CHAIN, policy))
                .collect();
            let m = median(runs.clone());
            let name = match policy {
                Policy::FurthestAdvanced => "furthest-advanced",
                Policy::MostQueued => "most-queued",
            };
            println!(
                "{:<24}{:>8}{:>14.0}{:>14.0}{:>7.2}x  ({name}, against the CnC step)",
                "snet_record_overhead_ns",
                workers,
                m,
                o,
                m / o
            );
            snet.push(json!({
                "metric": "snet_record_overhead_ns",
                "payload_bytes": 0,
                "workers": workers,
                "policy": name,
                "stampede": (m * 10.0).round() / 10.0,
                "baseline": (o * 10.0).round() / 10.0,
                "baseline_name": "cnc_step_overhead_ns",
                "unit": "ns",
                "ratio": ((m / o) * 1000.0).round() / 1000.0,
                "boxes": CHAIN,
                "records": cli.tasks / CHAIN,
                "repeats": {"stampede": runs},
            }));
        }
        records.push(json!({
            "metric": "cnc_step_overhead_ns",
            "payload_bytes": 0,
            "workers": workers,
            "stampede": (o * 10.0).round() / 10.0,
            "baseline": (b * 10.0).round() / 10.0,
            "baseline_name": "rayon_scope_spawn",
            "unit": "ns",
            "ratio": ((o / b) * 1000.0).round() / 1000.0,
            "target": "<= 2x",
            "met": o / b <= 2.0,
            "us_per_task": (o / 1000.0 * 1000.0).round() / 1000.0,
            "repeats": {"stampede": ours, "baseline": base},
            "tasks": cli.tasks,
        }));
        records.extend(snet);
    }
    if let Some(dir) = cli.out.parent() {
        std::fs::create_dir_all(dir).expect("cannot create the results directory");
    }
    let text = serde_json::to_string_pretty(&records).expect("records are JSON");
    std::fs::write(&cli.out, text + "\n").expect("cannot write the results");
    println!("results written to {}", cli.out.display());
}
