//! `stampede-bench`: Stampede against crossbeam-channel, measured in the same run.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use stampede_bench::{default_out, render_table, run, write_json, Config};

/// Measures Stampede's in-process channel against crossbeam-channel carrying Arc<[u8]> and
/// writes medians to bench-results/core.json.
#[derive(Debug, Parser)]
#[command(name = "stampede-bench", version)]
struct Args {
    /// A short smoke run (1 repeat, few samples).
    #[arg(long)]
    quick: bool,
    /// Where to write the JSON results [default: <workspace>/bench-results/core.json].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Repeats of every measurement (medians are reported).
    #[arg(long)]
    repeats: Option<usize>,
    /// Measured hand-offs per latency run.
    #[arg(long)]
    latency_samples: Option<usize>,
    /// Items per throughput run.
    #[arg(long)]
    items: Option<u64>,
    /// Shortest pause between latency hand-offs, in microseconds.
    #[arg(long)]
    pause_min_us: Option<u64>,
    /// Longest pause between latency hand-offs, in microseconds.
    #[arg(long)]
    pause_max_us: Option<u64>,
    /// Leave thread placement to the scheduler instead of pinning producers to one CPU and
    /// consumers to another.
    #[arg(long)]
    no_pin: bool,
    /// Print timing breakdowns of the Stampede throughput path instead of benchmarking.
    #[arg(long)]
    diagnose: bool,
    /// Run only these benchmarks (for profiling; the JSON then lacks the others).
    #[arg(long, value_enum)]
    only: Option<Only>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Only {
    Latency,
    Throughput,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut cfg = if args.quick {
        Config::quick()
    } else {
        Config::full()
    };
    if let Some(r) = args.repeats {
        cfg.repeats = r.max(1);
    }
    if let Some(n) = args.latency_samples {
        cfg.latency_samples = n.max(1);
    }
    if let Some(n) = args.items {
        cfg.throughput_items = n.max(1);
    }
    if let Some(us) = args.pause_min_us {
        cfg.pause_min = Duration::from_micros(us);
    }
    if let Some(us) = args.pause_max_us {
        cfg.pause_max = Duration::from_micros(us);
    }
    if args.no_pin {
        cfg.pin = None;
    }
    match args.only {
        Some(Only::Latency) => cfg.throughput = false,
        Some(Only::Throughput) => cfg.latency = false,
        None => {}
    }
    if cfg.pause_max < cfg.pause_min {
        cfg.pause_max = cfg.pause_min;
    }
    if args.diagnose {
        let items = args.items.unwrap_or(200_000);
        use std::io::Write as _;
        let mut stdout = std::io::stdout();
        stampede_bench::diagnose::report(items, stampede_bench::THROUGHPUT_CAPACITY, |s| {
            let _ = writeln!(stdout, "{s}");
        });
        return ExitCode::SUCCESS;
    }
    let out = args.out.unwrap_or_else(default_out);

    match cfg.pin {
        Some([p, c]) => eprintln!("producers pinned to CPU {p}, consumers to CPU {c}"),
        None => eprintln!("threads not pinned"),
    }
    let started = Instant::now();
    let records = run(&cfg, |line| eprintln!("{line}"));
    eprintln!("done in {:.1} s", started.elapsed().as_secs_f64());

    println!();
    print!("{}", render_table(&records));
    match write_json(&out, &records) {
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
