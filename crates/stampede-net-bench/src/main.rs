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
}

fn main() -> ExitCode {
    stampede_net::size_zenoh_runtime_in_main();
    let cli = Cli::parse();
    if let Some(Side::Child(args)) = &cli.side {
        return match child::serve(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("stampede-net-bench {:?} child: {e}", args.role);
                ExitCode::FAILURE
            }
        };
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
