//! Tiled Cholesky on Concurrent Collections (the CnC Cholesky of Chandramowlishwaran, Knobe and
//! Vuduc, IPDPS 2010), checked and timed against faer's Cholesky of the whole matrix.
//!
//! ```text
//! cargo run --release -p stampede-coord --example cholesky -- --n 1024 --tile 128 --workers 2 [--tuned] [--reps R] [--ranks S]
//! ```
//!
//! The graph and its tile indices are described in `cholesky/mod.rs`. With `--ranks S` (S > 1)
//! the graph is spread over S address spaces on this host, placed by tile column: this
//! process is the environment (rank 0) and a Zenoh router on a free loopback port, and it
//! starts S - 1 copies of itself as the other ranks (`--rank r --router ENDPOINT`). Each
//! rank runs `--workers` workers.

#[path = "cholesky/mod.rs"]
mod tiled;

use std::process::ExitCode;

use faer::Parallelism;

struct Args {
    n: usize,
    opts: tiled::Options,
    seed: u64,
    reps: usize,
    ranks: usize,
    /// Set in a process started as another rank: its rank and the router to join.
    rank: Option<(usize, String)>,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        n: 1024,
        opts: tiled::Options {
            tile: 128,
            workers: 2,
            tuned: false,
        },
        seed: 1,
        reps: 1,
        ranks: 1,
        rank: None,
    };
    let mut router = None;
    let mut rank = None;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            v.parse().map_err(|e| format!("{name} {v}: {e}"))
        };
        match a.as_str() {
            "--n" => args.n = num("--n")? as usize,
            "--tile" => args.opts.tile = num("--tile")? as usize,
            "--workers" => args.opts.workers = num("--workers")? as usize,
            "--seed" => args.seed = num("--seed")?,
            "--reps" => args.reps = (num("--reps")? as usize).max(1),
            "--tuned" => args.opts.tuned = true,
            "--ranks" => args.ranks = (num("--ranks")? as usize).max(1),
            "--rank" => rank = Some(num("--rank")? as usize),
            "--router" => router = Some(it.next().ok_or("--router needs a value")?),
            "-h" | "--help" => return Err(
                "usage: cholesky [--n N] [--tile B] [--workers W] [--seed S] [--reps R] [--tuned] [--ranks S]"
                    .into(),
            ),
            other => return Err(format!("unknown argument {other} (see --help)")),
        }
    }
    match (rank, router) {
        (Some(r), Some(ep)) if r > 0 && r < args.ranks => args.rank = Some((r, ep)),
        (None, None) => {}
        _ => return Err("--rank r (0 < r < --ranks) and --router go together".into()),
    }
    if args.ranks > 1 && !cfg!(feature = "net") {
        return Err("--ranks needs the net feature".into());
    }
    Ok(args)
}

fn gflops(n: usize, secs: f64) -> f64 {
    (n as f64).powi(3) / 3.0 / secs / 1e9
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let n = args.n;
    let workers = args.opts.workers.max(1);
    #[cfg(feature = "net")]
    if let Some((rank, router)) = &args.rank {
        return across::serve(&args, *rank, router);
    }
    #[cfg(feature = "net")]
    let mut ranks = match across::Ranks::start(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cholesky: {e}");
            return ExitCode::FAILURE;
        }
    };
    let a = tiled::random_spd(n, args.seed, Parallelism::Rayon(workers));
    // Each run is checked; the best time of `--reps` runs is reported.
    let mut best: Option<tiled::Outcome> = None;
    for _ in 0..args.reps {
        #[cfg(feature = "net")]
        let out = ranks.factor(&args, a.as_ref());
        #[cfg(not(feature = "net"))]
        let out = tiled::factor(a.as_ref(), args.opts);
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                eprintln!("cholesky: {e}");
                return ExitCode::FAILURE;
            }
        };
        let res = tiled::residual(a.as_ref(), out.l.as_ref());
        if res >= 1e-10 {
            eprintln!("cholesky: residual {res:e}");
            return ExitCode::FAILURE;
        }
        if best.as_ref().map_or(true, |b| out.elapsed < b.elapsed) {
            best = Some(out);
        }
    }
    let out = best.expect("at least one run");
    let res = tiled::residual(a.as_ref(), out.l.as_ref());
    let secs = out.elapsed.as_secs_f64();
    println!(
        "cnc {} n={n} tile={} ({}×{} tiles) workers={workers} ranks={}, best of {}: {:.3} s, {:.2} GFLOP/s, residual {res:.2e}, lkji left {}, L tiles {}",
        if args.opts.tuned { "tuned" } else { "untuned" },
        args.opts.tile,
        out.p,
        out.p,
        args.ranks,
        args.reps,
        secs,
        gflops(n, secs),
        out.lkji_left,
        out.l_tiles,
    );
    let faer_best = |par| {
        (0..args.reps)
            .map(|_| tiled::faer_cholesky(a.as_ref(), par))
            .min_by_key(|(_, t)| *t)
            .expect("at least one run")
    };
    let (l, t) = faer_best(Parallelism::None);
    let res_seq = tiled::residual(a.as_ref(), l.as_ref());
    println!(
        "faer sequential: {:.3} s, {:.2} GFLOP/s, residual {res_seq:.2e}",
        t.as_secs_f64(),
        gflops(n, t.as_secs_f64())
    );
    let (l, t) = faer_best(Parallelism::Rayon(workers));
    let res_par = tiled::residual(a.as_ref(), l.as_ref());
    println!(
        "faer parallel ({workers} threads): {:.3} s, {:.2} GFLOP/s, residual {res_par:.2e}",
        t.as_secs_f64(),
        gflops(n, t.as_secs_f64())
    );
    if res < 1e-10 && out.lkji_left == 0 && out.l_tiles == out.p * (out.p + 1) / 2 {
        ExitCode::SUCCESS
    } else {
        eprintln!("cholesky: check failed");
        ExitCode::FAILURE
    }
}

/// The factorization over several address spaces on this host.
#[cfg(feature = "net")]
mod across {
    use std::process::{Child, Command, ExitCode};

    use faer::MatRef;
    use stampede_net::{Config, Space};

    use super::{tiled, Args};

    /// This process's space and the other ranks' processes, each of which runs one
    /// factorization per `factor` here.
    pub(super) struct Ranks {
        space: Option<Space>,
        children: Vec<Child>,
        runs: usize,
    }

    impl Ranks {
        pub(super) fn start(args: &Args) -> Result<Ranks, String> {
            if args.ranks == 1 {
                return Ok(Ranks {
                    space: None,
                    children: Vec::new(),
                    runs: 0,
                });
            }
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| format!("no free port: {e}"))?
                .port();
            let ep = format!("tcp/127.0.0.1:{port}");
            let space =
                Space::join("cholesky", Config::router(ep.clone())).map_err(|e| e.to_string())?;
            let exe = std::env::current_exe().map_err(|e| e.to_string())?;
            let mut children = Vec::new();
            for r in 1..args.ranks {
                let child = Command::new(&exe)
                    .args(std::env::args().skip(1))
                    .args(["--rank", &r.to_string(), "--router", &ep])
                    .spawn()
                    .map_err(|e| format!("cannot start rank {r}: {e}"))?;
                children.push(child);
            }
            Ok(Ranks {
                space: Some(space),
                children,
                runs: 0,
            })
        }

        pub(super) fn factor(
            &mut self,
            args: &Args,
            a: MatRef<'_, f64>,
        ) -> Result<tiled::Outcome, String> {
            match &self.space {
                None => tiled::factor(a, args.opts),
                Some(space) => {
                    self.runs += 1;
                    let name = format!("cholesky-{}", self.runs);
                    tiled::factor_across(space, &name, 0, args.ranks, args.n, Some(a), args.opts)
                        .map(|o| o.expect("the environment's outcome"))
                }
            }
        }
    }

    impl Drop for Ranks {
        fn drop(&mut self) {
            for c in &mut self.children {
                let _ = c.wait();
            }
            if let Some(s) = self.space.take() {
                s.leave();
            }
        }
    }

    /// Another rank: serves one factorization per repetition.
    pub(super) fn serve(args: &Args, rank: usize, router: &str) -> ExitCode {
        let space = match Space::join("cholesky", Config::peer().connect(router)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("cholesky rank {rank}: {e}");
                return ExitCode::FAILURE;
            }
        };
        for run in 1..=args.reps {
            let name = format!("cholesky-{run}");
            if let Err(e) =
                tiled::factor_across(&space, &name, rank, args.ranks, args.n, None, args.opts)
            {
                eprintln!("cholesky rank {rank}: {e}");
                return ExitCode::FAILURE;
            }
        }
        space.leave();
        ExitCode::SUCCESS
    }
}
