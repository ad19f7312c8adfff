//! The pthreads programs of CableS' Table 5 on cluster threads, across address spaces on
//! loopback, each checking its result against sequential code, then the table: the calls
//! each program made of each operation and their mean cost.
//!
//! - **PN**: prime numbers in a range. Worker tasks take the next candidate from a counter in
//!   global memory under a mutex, test it, and count the primes found under the mutex.
//! - **PC**: producer and consumer over a bounded buffer in global memory, with a mutex and
//!   two conditions (not full, not empty).
//! - **PIPE**: a threaded pipeline; each stage takes a value from its mailbox in global
//!   memory (a mutex and a condition per mailbox), computes, and passes it on.
//! - **SPMD**: a relaxation of a rod held in a global segment by members that each update
//!   their own part between barriers.
//!
//! `cargo run --release -p stampede-cluster --example cables -- [pn|pc|pipe|spmd|all]
//! [--spaces N]`: this process is address space 0 and a node agent; the other N − 1 spaces
//! are this binary again, attached through the agent.

mod programs;

use std::time::Instant;

use programs::{pc, pipe, pn, registry, spmd, T};
use stampede_cluster::{Cluster, ClusterOp, ClusterOptions, NodeAgent, TaskError, Worker};
use stampede_net::{Config, Space};

fn opts() -> ClusterOptions {
    ClusterOptions::default().timeout(Some(T))
}

/// Every space's counters, summed: `(calls, total)` per operation.
fn counters(space: &Space) -> Result<Vec<(u64, u128)>, TaskError> {
    let mut sum = vec![(0u64, 0u128); ClusterOp::ALL.len()];
    for (member, stats) in stampede_cluster::cluster_stats(space) {
        let stats = stats.map_err(|e| format!("{member}: {e}"))?;
        for (i, &op) in ClusterOp::ALL.iter().enumerate() {
            let (n, d) = stats.op(op);
            sum[i].0 += n;
            sum[i].1 += d.as_nanos();
        }
    }
    Ok(sum)
}

fn main() -> Result<(), TaskError> {
    stampede_net::size_zenoh_runtime_in_main();
    if let Some(w) = Worker::from_env() {
        w.run(registry(), opts())?;
        return Ok(());
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let which = args.first().map_or("all", String::as_str).to_owned();
    let n_spaces: usize = args
        .iter()
        .position(|a| a == "--spaces")
        .and_then(|i| args.get(i + 1))
        .map_or(Ok(3), |s| s.parse())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let ep = format!("tcp/127.0.0.1:{port}");
    let app = format!("cables-{}", std::process::id());
    let space = Space::join(&app, Config::router(ep.clone()))?;
    let c = Cluster::start(&space, registry(), opts())?;
    let agent = NodeAgent::start(&space, "localhost", vec![ep])?;
    let exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let mut attached = Vec::new();
    for _ in 1..n_spaces.max(2) {
        attached.push(c.attach(std::slice::from_ref(&exe), T)?);
    }
    println!(
        "{} address spaces: this one and {} attached",
        c.spaces().len(),
        attached.len()
    );
    let programs: Vec<&str> = match which.as_str() {
        "all" => vec!["pn", "pc", "pipe", "spmd"],
        one => vec![one],
    };
    println!(
        "{:<6} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7}   (calls / mean ms)  result",
        "PROG", "Cr", "J", "Lo", "Un", "Wa", "Si", "Br", "Ba"
    );
    let mut failed = false;
    for p in programs {
        let before = counters(&space)?;
        let t0 = Instant::now();
        let result = match p {
            "pn" => pn(&c, 2 * n_spaces),
            "pc" => pc(&c, &attached[0]),
            "pipe" => pipe(&c),
            "spmd" => spmd(&c, n_spaces),
            other => Err(format!("no program {other:?}: pn, pc, pipe, spmd or all").into()),
        };
        let took = t0.elapsed();
        let after = counters(&space)?;
        let cols = [
            ClusterOp::Create,
            ClusterOp::Join,
            ClusterOp::Lock,
            ClusterOp::Unlock,
            ClusterOp::Wait,
            ClusterOp::Signal,
            ClusterOp::Broadcast,
            ClusterOp::Barrier,
        ];
        let cells: Vec<String> = cols
            .iter()
            .map(|&o| {
                let i = ClusterOp::ALL.iter().position(|&x| x == o).expect("in ALL");
                let n = after[i].0 - before[i].0;
                let ns = after[i].1 - before[i].1;
                if n == 0 {
                    "-".into()
                } else {
                    format!("{n}/{:.2}", ns as f64 / n as f64 / 1e6)
                }
            })
            .collect();
        let line: Vec<String> = cells.iter().map(|c| format!("{c:>7}")).collect();
        match result {
            Ok(what) => println!(
                "{:<6} {}   ok in {took:.2?}: {what}",
                p.to_uppercase(),
                line.join(" ")
            ),
            Err(e) => {
                failed = true;
                println!("{:<6} {}   FAILED: {e}", p.to_uppercase(), line.join(" "));
            }
        }
    }
    for id in attached {
        c.detach(&id, T)?;
    }
    agent.stop();
    c.stop();
    space.leave();
    if failed {
        return Err("a program's result was wrong".into());
    }
    Ok(())
}
