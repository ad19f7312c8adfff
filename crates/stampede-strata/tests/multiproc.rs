//! Collectives across address spaces in separate processes on loopback: every operation
//! against sequential code, and a member killed with SIGKILL failing the others cleanly.

// The process helpers of the distribution tests.
#[path = "../../stampede-net/tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{app, free_port, Proc};
use stampede_net::{Config, Space};
use stampede_strata::{BarrierKind, Combine, Exchange, GroupOptions, Member, Op, StrataError};

const SIZE: usize = 4;

/// Every member's input for round `i`, known to all so each checks its own results.
fn input(rank: usize, i: usize) -> Vec<i64> {
    (0..3)
        .map(|e| ((rank * 7919 + i * 104_729 + e * 31) % 1001) as i64 - 500)
        .collect()
}

fn block(from: usize, to: usize) -> Bytes {
    let n = (from * 5 + to * 3) % 7 * 40_000;
    (0..n)
        .map(|i| (from ^ to ^ i) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// The script every member runs; an error says what differed.
fn script(m: &Member) -> Result<(), String> {
    let (r, p) = (m.rank(), m.size());
    let e = |e: StrataError| e.to_string();
    for kind in [BarrierKind::Dissemination, BarrierKind::Tree] {
        m.start_barrier_with(kind)
            .map_err(e)?
            .complete()
            .map_err(e)?;
    }
    let mut i = 0;
    for kind in Combine::ALL {
        for op in Op::ALL {
            i += 1;
            let got = m.combine(kind, op, &input(r, i)).map_err(e)?;
            let range = match kind {
                Combine::Reduce => 0..p,
                Combine::Scan => 0..r + 1,
                Combine::ExclusiveScan => 0..r,
                Combine::BackScan => r..p,
                Combine::ExclusiveBackScan => r + 1..p,
            };
            let want: Vec<i64> = (0..3)
                .map(|el| {
                    range.clone().map(|j| input(j, i)[el]).fold(
                        match op {
                            Op::Max => i64::MIN,
                            Op::Min => i64::MAX,
                            _ => 0,
                        },
                        |a, b| match op {
                            Op::Add => a + b,
                            Op::Or => a | b,
                            Op::Xor => a ^ b,
                            Op::Max => a.max(b),
                            Op::Min => a.min(b),
                        },
                    )
                })
                .collect();
            if got != want {
                return Err(format!("{kind:?} {op:?}: {got:?}, expected {want:?}"));
            }
        }
    }
    for root in 0..p {
        let got = m.broadcast(root, &[root as f64, 0.5]).map_err(e)?;
        if got != [root as f64, 0.5] {
            return Err(format!("broadcast from {root}: {got:?}"));
        }
    }
    let xs = [3.0, -1.0, 8.5, 2.0];
    let median = m.median(xs[r]).map_err(e)?;
    if median != 2.0 {
        return Err(format!("median {median}"));
    }
    let seg = m
        .combine_segmented(Combine::Scan, Op::Add, &[1u32], r == 2)
        .map_err(e)?;
    if seg[0] as usize != if r >= 2 { r - 1 } else { r + 1 } {
        return Err(format!("segmented scan {seg:?}"));
    }
    for how in [
        Exchange::Barriers { every: 1 },
        Exchange::Interleaved,
        Exchange::Direct,
    ] {
        let got = m
            .all_to_all((0..p).map(|to| block(r, to)).collect(), how)
            .map_err(e)?;
        for (from, b) in got.iter().enumerate() {
            if *b != block(from, r) {
                return Err(format!("{how:?}: the block from {from} differs"));
            }
        }
    }
    m.barrier().map_err(e)?;
    Ok(())
}

fn opts() -> GroupOptions {
    GroupOptions::default()
        .packet_bytes(16 * 1024)
        .timeout(Some(Duration::from_secs(30)))
}

/// The entry point of child processes; does nothing when run as a test.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var("STAMPEDE_TEST_ROLE") else {
        return;
    };
    println!();
    let router = std::env::var("ROUTER").unwrap();
    let app = std::env::var("APP").unwrap();
    let rank: usize = std::env::var("RANK").unwrap().parse().unwrap();
    let space = Space::join(&app, Config::peer().connect(router)).unwrap();
    let m = Member::join(&space, "g", rank, SIZE, opts()).unwrap();
    match role.as_str() {
        "script" => match script(&m) {
            Ok(()) => println!("PASS"),
            Err(why) => println!("FAIL {why}"),
        },
        // Joins, takes part in one barrier, then waits to be killed.
        "victim" => {
            m.barrier().unwrap();
            println!("READY");
            std::thread::sleep(Duration::from_secs(600));
        }
        _ => panic!("unknown role {role}"),
    }
    drop(m);
    space.leave();
}

fn spawn_members(role: &str, ep: &str, app: &str, ranks: std::ops::Range<usize>) -> Vec<Proc> {
    ranks
        .map(|rank| {
            Proc::spawn(
                role,
                &[
                    ("ROUTER", ep.to_owned()),
                    ("APP", app.to_owned()),
                    ("RANK", rank.to_string()),
                ],
            )
        })
        .collect()
}

#[test]
fn collectives_across_processes_match_sequential_code() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("strata");
    let space = Space::join(&app, Config::router(ep.clone())).unwrap();
    let mut kids = spawn_members("script", &ep, &app, 1..SIZE);
    let m = Member::join(&space, "g", 0, SIZE, opts()).unwrap();
    script(&m).unwrap();
    for k in &mut kids {
        assert_eq!(k.expect("", Duration::from_secs(60)), "");
        let lines = k.finish(Duration::from_secs(60));
        assert!(lines.iter().any(|l| l == "PASS"), "{lines:?}");
    }
    drop(m);
    space.leave();
}

#[test]
fn a_member_killed_mid_group_fails_the_others_within_the_lease() {
    let ep = format!("tcp/127.0.0.1:{}", free_port());
    let app = app("strata-kill");
    let space = Space::join(&app, Config::router(ep.clone())).unwrap();
    let mut kids = spawn_members("victim", &ep, &app, 1..SIZE);
    let m = Member::join(&space, "g", 0, SIZE, opts().timeout(None)).unwrap();
    m.barrier().unwrap();
    for k in &mut kids {
        k.expect("READY", Duration::from_secs(30));
    }
    kids[1].kill9();
    let t0 = Instant::now();
    // The others are sleeping, so this barrier cannot complete; the dead member must be
    // noticed rather than waited for.
    let err = m.barrier().unwrap_err();
    assert!(
        matches!(err, StrataError::MemberLost { .. }),
        "expected the lost member, got {err}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t0.elapsed()
    );
    drop(m);
    space.leave();
}
