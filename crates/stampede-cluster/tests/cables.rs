//! The CableS programs (PN, PC, PIPE, SPMD) across three address spaces in this process,
//! each checked against sequential code (`make cluster-apps` runs them across processes).

#[path = "../examples/cables/programs.rs"]
mod programs;

use std::time::{Duration, Instant};

use stampede_cluster::{Cluster, ClusterOptions};
use stampede_net::{Config, Space};

#[test]
fn the_cables_programs_give_the_sequential_results_across_three_spaces() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep = format!("tcp/127.0.0.1:{port}");
    let app = format!("t{}-cables", std::process::id());
    let mut spaces = Vec::new();
    for i in 0..3 {
        let cfg = if i == 0 {
            Config::router(ep.clone())
        } else {
            Config::peer().connect(ep.clone())
        };
        let s = Space::join(&app, cfg).unwrap();
        let c = Cluster::start(
            &s,
            programs::registry(),
            ClusterOptions::default().timeout(Some(programs::T)),
        )
        .unwrap();
        spaces.push((s, c));
    }
    let c = &spaces[0].1;
    let t0 = Instant::now();
    while c.spaces().len() < 3 {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(10));
    }
    let other = spaces[1].0.id().to_owned();
    println!("{}", programs::pn(c, 6).unwrap());
    println!("{}", programs::pc(c, &other).unwrap());
    println!("{}", programs::pipe(c).unwrap());
    println!("{}", programs::spmd(c, 3).unwrap());
}
