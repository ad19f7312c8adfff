//! `stampede-net-bench`: Stampede across processes against raw TCP, a Unix socket and Zenoh
//! pub/sub, measured in the same run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use stampede_net_bench::child::{self, ChildArgs};
use stampede_net_bench::{default_out, records, render_table, run, write_json, Plan, BASELINES};

/// Measures one-way ping-pong latency and bandwidth between two processes on this host with
/// Stampede (two address spaces over Zenoh) and over raw TCP, a Unix socket and Zenoh pub/sub,
/// and Stampede's consume→reclaim lag across processes; writes medians to
/// bench-results/net.json.
#[derive(Debug, Parser)]
#[command(
    name = "stampede-net-bench",
    version,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// A short smoke run (1 repeat, few round trips and items, 0.5 s bandwidth runs).
    #[arg(long)]
    quick: bool,
    /// Repeats of every measurement (medians over repeats are reported) [default: 3].
    #[arg(long)]
    repeats: Option<usize>,
    /// How long the producer sends in a bandwidth run, in seconds [default: 2].
    #[arg(long)]
    seconds: Option<f64>,
    /// Where to write the JSON results [default: <workspace>/bench-results/net.json].
    #[arg(long)]
    out: Option<PathBuf>,
    #[command(subcommand)]
    side: Option<Side>,
}

#[derive(Debug, Subcommand)]
enum Side {
    /// The other process of a measurement, started by the benchmark itself.
    #[command(name = child::SUBCOMMAND, hide = true)]
    Child(ChildArgs),
    /// Only Stampede's ping-pong, at the given sizes: one JSON line per size and repeat,
    /// `{"system": "rust_face", "size", "one_way_us": [...]}` (the other faces' benchmarks
    /// compare against it in the same run).
    Pingpong(PingpongArgs),
}

#[derive(Debug, clap::Args)]
struct PingpongArgs {
    /// Payload sizes in bytes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,1000,10000,35000,55000"
    )]
    sizes: Vec<usize>,
    /// Recorded round trips per run (after a warm-up of a tenth as many, at least 10).
    #[arg(long, default_value_t = 2000)]
    round_trips: usize,
    /// Runs per size.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
}

/// Prints one JSON line per size and repeat of Stampede's ping-pong.
fn pingpong_only(args: &PingpongArgs) -> ExitCode {
    for &size in &args.sizes {
        for _ in 0..args.repeats.max(1) {
            match stampede_net_bench::stm::pingpong(size, args.round_trips.max(1)) {
                Ok(r) => println!(
                    "{}",
                    serde_json::json!({"system": "rust_face", "size": size, "one_way_us": r.one_way_us})
                ),
                Err(e) => {
                    eprintln!("ping-pong of {size} B: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    stampede_net::size_zenoh_runtime_in_main();
    let cli = Cli::parse();
    match &cli.side {
        Some(Side::Child(args)) => {
            return match child::serve(args) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("stampede-net-bench {:?} child: {e}", args.role);
                    ExitCode::FAILURE
                }
            };
        }
        Some(Side::Pingpong(args)) => return pingpong_only(args),
        None => {}
    }

    let mut plan = if cli.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    if let Some(r) = cli.repeats {
        plan.repeats = r.max(1);
    }
    if let Some(s) = cli.seconds {
        match Duration::try_from_secs_f64(s) {
            Ok(d) if !d.is_zero() => plan.duration = d,
            _ => {
                eprintln!("--seconds must be a positive number, not {s}");
                return ExitCode::FAILURE;
            }
        }
    }
    let out = cli.out.unwrap_or_else(default_out);

    let started = Instant::now();
    let series = match run(&plan, &BASELINES, |line| eprintln!("{line}")) {
        Ok(series) => series,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("done in {:.1} s", started.elapsed().as_secs_f64());

    println!();
    print!("{}", render_table(&series));
    match write_json(&out, &records(&series)) {
        Ok(()) => {
            println!("results written to {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cannot write {}: {e}", out.display());
            ExitCode::FAILURE
        }
    }
}
