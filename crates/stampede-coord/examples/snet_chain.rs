//! A chain of identity boxes: `cargo run --release --example snet_chain -- WORKERS RECORDS`
//! prints nanoseconds per record per box (the benchmark's figure, for profiling).

use std::time::Instant;

use stampede_coord::snet::{Network, Record, Runner};
use stampede_coord::Executor;

fn main() {
    let mut args = std::env::args().skip(1);
    let workers: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let records: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let chain = ["id"; 8].join(" .. ");
    let net = Network::parse(
        "chain.snet",
        &format!("net chain {{ box id ((<x>) -> (<x>)); }} connect {chain};"),
    )
    .expect("the chain checks");
    let run = Runner::new(&net, &Executor::new(workers))
        .bind("id", |call| call.forward(0))
        .start()
        .expect("bound");
    let start = Instant::now();
    for i in 0..records as i64 {
        run.send(Record::new().tag("x", i)).expect("accepted");
    }
    run.wait().expect("no failure");
    println!(
        "{:.0} ns per record per box",
        start.elapsed().as_nanos() as f64 / (records * 8) as f64
    );
}
