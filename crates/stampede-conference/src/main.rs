//! `stampede-conference`: the video conference's mixer and participants, over Stampede or
//! plain TCP, and the benchmark that compares the two.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use stampede_conference::{
    render_tables, run_baseline_mixer, run_baseline_participant, run_bench, run_mixer,
    run_participant, write_results, BaselineMixerOptions, BaselineParticipantOptions, BenchOptions,
    ConferenceError, FrameSize, JoinOptions, MixerOptions, ParticipantOptions, Stop, System,
    Threads, DEFAULT_APP, DEFAULT_BASELINE_ADDR, DEFAULT_ENDPOINT, DEFAULT_WIDTH,
};

/// The D-Stampede video conference: participants put camera frames into their own channels,
/// a mixer composes one image per time slot and every display takes it back. Processes print
/// JSON Lines reports on stdout.
#[derive(Debug, Parser)]
#[command(name = "stampede-conference", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// The Stampede mixer: a router owning conf/mix and conf/clock.
    Mixer(MixerArgs),
    /// A Stampede participant: camera channel conf/cam/<id> and a display of conf/mix.
    Participant(ParticipantArgs),
    /// The single-threaded TCP mixer the Stampede one is measured against.
    BaselineMixer(BaselineMixerArgs),
    /// A participant of the TCP baseline.
    BaselineParticipant(BaselineParticipantArgs),
    /// Measures the sustained frame rate of both versions for 2-6 participants.
    Bench(BenchArgs),
}

#[derive(Debug, Args)]
struct Frame {
    /// Frame width in pixels.
    #[arg(long, default_value_t = DEFAULT_WIDTH)]
    width: usize,
    /// Frame size in KB of 1000 bytes; the height is size / (width · 3), rounded.
    #[arg(long, default_value_t = 74)]
    size_kb: u32,
}

impl Frame {
    fn size(&self) -> FrameSize {
        FrameSize::from_size_kb(self.size_kb, self.width)
    }
}

#[derive(Debug, Args)]
struct Network {
    /// Application name.
    #[arg(long, default_value = DEFAULT_APP)]
    app: String,
    /// Zenoh link lease in ms: how soon a killed process is noticed.
    #[arg(long, default_value_t = 5000)]
    lease_ms: u64,
    /// How long to wait for the other side (router, names, clock), in seconds.
    #[arg(long, default_value_t = 30.0)]
    wait_s: f64,
}

impl Network {
    fn join(&self, endpoint: &str) -> JoinOptions {
        JoinOptions {
            app: self.app.clone(),
            endpoint: endpoint.to_owned(),
            lease: Duration::from_millis(self.lease_ms),
            wait: Duration::from_secs_f64(self.wait_s.max(0.0)),
            ..JoinOptions::default()
        }
    }
}

#[derive(Debug, Args)]
struct Run {
    /// Seconds to run; 0 runs until SIGINT or SIGTERM (participants also stop at the end of
    /// standard input).
    #[arg(long, default_value_t = 0.0)]
    duration: f64,
}

#[derive(Debug, Args)]
struct MixerArgs {
    /// Zenoh endpoint to listen on.
    #[arg(long, default_value = DEFAULT_ENDPOINT)]
    listen: String,
    /// One thread per participant (multi) or one for all (single).
    #[arg(long, value_enum, default_value_t = Threads::Multi)]
    threads: Threads,
    /// How long a slot waits for its frames before composing without them, in ms.
    #[arg(long, default_value_t = 1000)]
    stall_ms: u64,
    /// How long a composite waits for room in conf/mix before it is dropped, in ms.
    #[arg(long, default_value_t = 1000)]
    put_timeout_ms: u64,
    /// Statistics every this many ms.
    #[arg(long, default_value_t = 1000)]
    report_ms: u64,
    #[command(flatten)]
    frame: Frame,
    #[command(flatten)]
    net: Network,
    #[command(flatten)]
    run: Run,
}

#[derive(Debug, Args)]
struct ParticipantArgs {
    /// Participant id, 1 or more.
    #[arg(long)]
    id: u32,
    /// The mixer's Zenoh endpoint.
    #[arg(long, default_value = DEFAULT_ENDPOINT)]
    connect: String,
    /// Camera frames per second; 0 puts as fast as the conference takes them.
    #[arg(long, default_value_t = 30.0)]
    fps: f64,
    /// A display report every this many ms.
    #[arg(long, default_value_t = 500)]
    report_ms: u64,
    #[command(flatten)]
    frame: Frame,
    #[command(flatten)]
    net: Network,
    #[command(flatten)]
    run: Run,
}

#[derive(Debug, Args)]
struct BaselineMixerArgs {
    /// Address to listen on.
    #[arg(long, default_value = DEFAULT_BASELINE_ADDR)]
    listen: String,
    /// Statistics every this many ms.
    #[arg(long, default_value_t = 1000)]
    report_ms: u64,
    #[command(flatten)]
    frame: Frame,
    #[command(flatten)]
    run: Run,
}

#[derive(Debug, Args)]
struct BaselineParticipantArgs {
    /// Participant id, 1 or more.
    #[arg(long)]
    id: u32,
    /// The baseline mixer's address.
    #[arg(long, default_value = DEFAULT_BASELINE_ADDR)]
    connect: String,
    /// Camera frames per second; 0 sends as fast as the mixer takes them.
    #[arg(long, default_value_t = 30.0)]
    fps: f64,
    /// A display report every this many ms.
    #[arg(long, default_value_t = 500)]
    report_ms: u64,
    /// How long to keep trying to reach the mixer, in seconds.
    #[arg(long, default_value_t = 30.0)]
    wait_s: f64,
    #[command(flatten)]
    frame: Frame,
    #[command(flatten)]
    run: Run,
}

#[derive(Debug, Args)]
struct BenchArgs {
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results/conference.json")]
    out: PathBuf,
    /// Numbers of participants.
    #[arg(long, value_delimiter = ',', default_values_t = [2, 3, 4, 5, 6])]
    k: Vec<usize>,
    /// Frame sizes in KB.
    #[arg(long, value_delimiter = ',', default_values_t = [74, 125, 190])]
    sizes: Vec<u32>,
    /// Systems to measure.
    #[arg(long, value_delimiter = ',', value_enum, default_values_t = [System::Stampede, System::StampedeSingle, System::Baseline])]
    systems: Vec<System>,
    /// Runs per point; the median is reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Measurement window in seconds.
    #[arg(long, default_value_t = 3.0)]
    window: f64,
    /// Warm-up in seconds once every display receives composites.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Frame width in pixels.
    #[arg(long, default_value_t = DEFAULT_WIDTH)]
    width: usize,
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v.max(1))
}

/// A stop on signals, after `duration` seconds if positive, and (for participants run
/// without a duration) at the end of standard input.
fn stop_for(run: &Run, stdin_ends: bool) -> Result<Stop, ConferenceError> {
    let stop = Stop::new();
    stop.on_signals()?;
    if run.duration > 0.0 {
        stop.after(Duration::from_secs_f64(run.duration));
    } else if stdin_ends {
        stop.on_stdin_eof();
    }
    Ok(stop)
}

fn run(cmd: Cmd) -> Result<(), ConferenceError> {
    match cmd {
        Cmd::Mixer(a) => {
            let stop = stop_for(&a.run, false)?;
            let opts = MixerOptions {
                join: a.net.join(&a.listen),
                threads: a.threads,
                stall: ms(a.stall_ms),
                put_timeout: ms(a.put_timeout_ms),
                frame: a.frame.size(),
                report_every: ms(a.report_ms),
            };
            run_mixer(&opts, &stop).map(drop)
        }
        Cmd::Participant(a) => {
            let stop = stop_for(&a.run, true)?;
            let opts = ParticipantOptions {
                join: a.net.join(&a.connect),
                id: a.id,
                frame: a.frame.size(),
                fps: a.fps,
                report_every: ms(a.report_ms),
            };
            run_participant(&opts, &stop).map(drop)
        }
        Cmd::BaselineMixer(a) => {
            let stop = stop_for(&a.run, false)?;
            let opts = BaselineMixerOptions {
                listen: a.listen,
                frame: a.frame.size(),
                report_every: ms(a.report_ms),
            };
            run_baseline_mixer(&opts, &stop).map(drop)
        }
        Cmd::BaselineParticipant(a) => {
            let stop = stop_for(&a.run, true)?;
            let opts = BaselineParticipantOptions {
                connect: a.connect,
                id: a.id,
                frame: a.frame.size(),
                fps: a.fps,
                report_every: ms(a.report_ms),
                wait: Duration::from_secs_f64(a.wait_s.max(0.0)),
            };
            run_baseline_participant(&opts, &stop).map(drop)
        }
        Cmd::Bench(a) => {
            let exe = std::env::current_exe()
                .map_err(|e| ConferenceError::io("finding this executable", e))?;
            let opts = BenchOptions {
                exe,
                systems: a.systems,
                ks: a.k,
                sizes: a.sizes,
                repeats: a.repeats.max(1),
                warmup: Duration::from_secs_f64(a.warmup.max(0.0)),
                window: Duration::from_secs_f64(a.window.max(0.5)),
                width: a.width,
            };
            let results = run_bench(&opts)?;
            write_results(&results, &a.out)?;
            println!("{}", render_tables(&results));
            println!("wrote {}", a.out.display());
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    stampede_net::size_zenoh_runtime_in_main();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stampede-conference: {e}");
            ExitCode::FAILURE
        }
    }
}
