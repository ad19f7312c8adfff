//! Collectives against sequential code: random group sizes and inputs, every kind and
//! operator, in one runtime with one thread per member.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use stampede_core::Runtime;
use stampede_strata::{BarrierKind, Combine, Exchange, GroupOptions, Member, Op, StrataError};

/// Runs `f` on every member of a fresh group of `size` and returns the results by rank.
fn group<R: Send>(size: usize, opts: GroupOptions, f: impl Fn(&Member) -> R + Sync) -> Vec<R> {
    let rt = Runtime::new();
    let name = format!("g{}", rand_name());
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..size)
            .map(|rank| {
                let (rt, name, opts, f) = (rt.clone(), name.clone(), opts.clone(), &f);
                s.spawn(move || {
                    let m = Member::join(&rt, &name, rank, size, opts).unwrap();
                    f(&m)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn rand_name() -> u64 {
    static N: AtomicUsize = AtomicUsize::new(0);
    N.fetch_add(1, Ordering::Relaxed) as u64
}

/// The sequential meaning of a combine, element-wise.
fn reference(kind: Combine, op: Op, xs: &[Vec<i64>], i: usize) -> Vec<i64> {
    let len = xs[0].len();
    let id = match op {
        Op::Add | Op::Or | Op::Xor => 0,
        Op::Max => i64::MIN,
        Op::Min => i64::MAX,
    };
    let f = |a: i64, b: i64| match op {
        Op::Add => a.wrapping_add(b),
        Op::Or => a | b,
        Op::Xor => a ^ b,
        Op::Max => a.max(b),
        Op::Min => a.min(b),
    };
    let range = match kind {
        Combine::Reduce => 0..xs.len(),
        Combine::Scan => 0..i + 1,
        Combine::ExclusiveScan => 0..i,
        Combine::BackScan => i..xs.len(),
        Combine::ExclusiveBackScan => i + 1..xs.len(),
    };
    (0..len)
        .map(|e| xs[range.clone()].iter().map(|x| x[e]).fold(id, f))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Every kind and operator in one group, in sequence, against the sequential fold.
    #[test]
    fn combines_match_sequential_code(
        size in 1usize..10,
        len in 0usize..4,
        seed: u64,
    ) {
        let xs: Vec<Vec<i64>> = (0..size)
            .map(|r| (0..len).map(|e| ((seed ^ (r * 31 + e) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as i64 - (1 << 23)).collect())
            .collect();
        let got = group(size, GroupOptions::default(), |m| {
            let mut out = Vec::new();
            for kind in Combine::ALL {
                for op in Op::ALL {
                    out.push(m.combine(kind, op, &xs[m.rank()]).unwrap());
                }
            }
            out
        });
        for (rank, results) in got.iter().enumerate() {
            let mut i = 0;
            for kind in Combine::ALL {
                for op in Op::ALL {
                    prop_assert_eq!(&results[i], &reference(kind, op, &xs, rank), "{:?} {:?} at {}", kind, op, rank);
                    i += 1;
                }
            }
        }
    }

    /// Segmented scans and back-scans: each run of members combined on its own.
    #[test]
    fn segmented_scans_match_each_run_on_its_own(
        xs in proptest::collection::vec((any::<bool>(), -1000i64..1000), 1..10),
    ) {
        let size = xs.len();
        let kinds = [Combine::Scan, Combine::ExclusiveScan, Combine::BackScan, Combine::ExclusiveBackScan];
        // Odd groups block at once when they wait: both ways of waiting are exercised.
        let opts = if size % 2 == 1 { GroupOptions::default().spin(Duration::ZERO) } else { GroupOptions::default() };
        let got = group(size, opts, |m| {
            let (starts, x) = xs[m.rank()];
            kinds.iter().map(|&k| m.combine_segmented(k, Op::Add, &[x], starts).unwrap()[0]).collect::<Vec<_>>()
        });
        for (i, got) in got.iter().enumerate() {
            // The run of member i: from the last start at or before it (member 0 always
            // starts one) to just before the next start.
            let first = (1..=i).rev().find(|&j| xs[j].0).unwrap_or(0);
            let end = (i + 1..size).find(|&j| xs[j].0).unwrap_or(size);
            let sum = |r: std::ops::Range<usize>| xs[r].iter().map(|p| p.1).sum::<i64>();
            prop_assert_eq!(got[0], sum(first..i + 1));
            prop_assert_eq!(got[1], sum(first..i));
            prop_assert_eq!(got[2], sum(i..end));
            prop_assert_eq!(got[3], sum(i + 1..end));
        }
    }

    /// Broadcasts from every root, and the composites against direct computation.
    #[test]
    fn broadcasts_and_composites(size in 1usize..9, xs in proptest::collection::vec(-1e6f64..1e6, 9)) {
        let xs = &xs[..size];
        let got = group(size, GroupOptions::default(), |m| {
            let r = m.rank();
            let b: Vec<Vec<u32>> = (0..m.size()).map(|root| m.broadcast(root, &[root as u32 * 7, 1]).unwrap()).collect();
            let x = xs[r];
            (b, m.average(x).unwrap(), m.variance(x).unwrap(), m.median(x).unwrap(), m.min(x).unwrap(), m.max(x).unwrap(), m.global_or(r == size - 1).unwrap(), m.global_or(false).unwrap())
        });
        let n = size as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = if size < 2 { 0.0 } else { xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) };
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[(size - 1) / 2];
        for (b, avg, v, med, lo, hi, any, none) in got {
            for (root, values) in b.iter().enumerate() {
                prop_assert_eq!(values, &vec![root as u32 * 7, 1]);
            }
            prop_assert!((avg - mean).abs() <= 1e-9 * mean.abs().max(1.0));
            prop_assert!((v - var).abs() <= 1e-6 * var.max(1.0), "variance {} against {}", v, var);
            prop_assert_eq!(med, median);
            prop_assert_eq!(lo, sorted[0]);
            prop_assert_eq!(hi, sorted[size - 1]);
            prop_assert!(any);
            prop_assert!(!none);
        }
    }

    /// Block transfers of any length (empty, under and over a packet) and the three
    /// exchanges give the transpose.
    #[test]
    fn all_to_all_is_the_transpose(size in 1usize..7, lens in proptest::collection::vec(0usize..300, 49)) {
        let block = |from: usize, to: usize| -> Bytes {
            let n = lens[from * 7 + to];
            (0..n).map(|i| (from * 31 + to * 7 + i) as u8).collect::<Vec<u8>>().into()
        };
        let opts = GroupOptions::default().packet_bytes(64).packet_delay(Duration::from_micros(5));
        let got = group(size, opts, |m| {
            let r = m.rank();
            [Exchange::Barriers { every: 1 }, Exchange::Barriers { every: 3 }, Exchange::Interleaved, Exchange::Direct]
                .map(|how| m.all_to_all((0..size).map(|to| block(r, to)).collect(), how).unwrap())
        });
        for (r, per_how) in got.iter().enumerate() {
            for blocks in per_how {
                for (from, b) in blocks.iter().enumerate() {
                    prop_assert_eq!(b, &block(from, r));
                }
            }
        }
    }
}

#[test]
fn barriers_hold_everyone_until_all_arrive() {
    for kind in [BarrierKind::Dissemination, BarrierKind::Tree] {
        for size in [1, 2, 3, 5, 8] {
            let arrived = AtomicUsize::new(0);
            let ok = group(size, GroupOptions::default(), |m| {
                (0..20).all(|round| {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    m.start_barrier_with(kind).unwrap().complete().unwrap();
                    let seen = arrived.load(Ordering::SeqCst) >= (round + 1) * size;
                    // Nobody may start the next round's increment before all have checked.
                    m.start_barrier_with(kind).unwrap().complete().unwrap();
                    seen
                })
            });
            assert!(ok.iter().all(|&b| b), "{kind:?} with {size}");
        }
    }
}

#[test]
fn a_split_phase_barrier_completes_only_after_the_last_arrival() {
    let late = std::sync::atomic::AtomicBool::new(false);
    group(3, GroupOptions::default(), |m| {
        if m.rank() == 2 {
            std::thread::sleep(Duration::from_millis(150));
            late.store(true, Ordering::SeqCst);
            m.barrier().unwrap();
        } else {
            let mut p = m.start_barrier().unwrap();
            assert!(
                !p.query().unwrap(),
                "the barrier completed before member 2 came"
            );
            // The member keeps working (here, a block to itself) while it waits.
            m.send_block(m.rank(), 9, vec![1u8, 2]).unwrap();
            assert_eq!(&m.recv_block(m.rank(), 9).unwrap()[..], &[1, 2]);
            while !p.query().unwrap() {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(late.load(Ordering::SeqCst));
            p.complete().unwrap();
        }
    });
}

#[test]
fn members_that_disagree_are_told() {
    let got = group(
        2,
        GroupOptions::default().timeout(Some(Duration::from_secs(5))),
        |m| {
            if m.rank() == 0 {
                m.combine_one(Combine::Reduce, Op::Add, 1i64).map(|_| ())
            } else {
                m.combine_one(Combine::Reduce, Op::Max, 1i64).map(|_| ())
            }
        },
    );
    assert!(
        got.iter()
            .any(|r| matches!(r, Err(StrataError::Mismatch { .. }))),
        "{got:?}"
    );
    let got = group(
        2,
        GroupOptions::default().timeout(Some(Duration::from_secs(5))),
        |m| {
            m.combine(Combine::Reduce, Op::Add, &vec![1i64; m.rank() + 1])
                .map(|_| ())
        },
    );
    assert!(
        got.iter()
            .any(|r| matches!(r, Err(StrataError::Mismatch { .. }))),
        "{got:?}"
    );
}

#[test]
fn bad_arguments_are_typed_errors() {
    let rt = Runtime::new();
    assert!(matches!(
        Member::join(&rt, "bad", 3, 3, GroupOptions::default()),
        Err(StrataError::InvalidArgument(_))
    ));
    let m = Member::join(&rt, "bad", 0, 1, GroupOptions::default()).unwrap();
    assert!(matches!(
        Member::join(&rt, "bad", 0, 1, GroupOptions::default()),
        Err(StrataError::RankTaken { .. })
    ));
    assert!(matches!(
        m.combine_one(Combine::Reduce, Op::Xor, 1.0f64),
        Err(StrataError::InvalidArgument(_))
    ));
    assert!(matches!(
        m.combine_segmented(Combine::Reduce, Op::Add, &[1i64], true),
        Err(StrataError::InvalidArgument(_))
    ));
    assert!(matches!(
        m.broadcast(1, &[1u32]),
        Err(StrataError::InvalidArgument(_))
    ));
    assert!(matches!(
        m.median(f64::NAN),
        Err(StrataError::InvalidArgument(_))
    ));
    assert!(matches!(
        m.all_to_all(vec![], Exchange::Interleaved),
        Err(StrataError::InvalidArgument(_))
    ));
    // A group of one completes everything at once.
    assert_eq!(
        m.combine_one(Combine::ExclusiveScan, Op::Min, 5u64)
            .unwrap(),
        u64::MAX
    );
    m.barrier().unwrap();
}

#[test]
fn a_member_that_leaves_fails_the_others_instead_of_hanging() {
    let got = group(3, GroupOptions::default(), |m| {
        m.barrier().unwrap();
        if m.rank() == 1 {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
        m.barrier()
    });
    // One of them finds member 1 gone and stops the group; the other learns it either
    // way, never hangs.
    assert!(
        got.iter()
            .any(|r| matches!(r, Err(StrataError::MemberLost { rank: 1 }))),
        "{got:?}"
    );
    for r in [&got[0], &got[2]] {
        assert!(
            matches!(
                r,
                Err(StrataError::MemberLost { .. } | StrataError::Aborted { .. })
            ),
            "{got:?}"
        );
    }
}

#[test]
fn a_member_that_never_joins_is_reported() {
    let rt = Runtime::new();
    let m = Member::join(
        &rt,
        "lonely",
        0,
        2,
        GroupOptions::default().join_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    assert!(matches!(
        m.barrier(),
        Err(StrataError::MemberMissing { rank: 1, .. })
    ));
}

#[test]
fn a_timeout_names_who_is_missing() {
    let got = group(
        2,
        GroupOptions::default().timeout(Some(Duration::from_millis(200))),
        |m| {
            if m.rank() == 1 {
                std::thread::sleep(Duration::from_millis(600));
                return Ok(());
            }
            m.barrier()
        },
    );
    match &got[0] {
        Err(StrataError::Timeout { waiting_for, .. }) => assert_eq!(waiting_for, &[1]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn messages_are_reclaimed_as_they_are_read() {
    let rt = Runtime::new();
    let all_checked = std::sync::Barrier::new(4);
    let stats = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|rank| {
                let (rt, all_checked) = (rt.clone(), &all_checked);
                s.spawn(move || {
                    let m = Member::join(&rt, "gc", rank, 4, GroupOptions::default()).unwrap();
                    for i in 0..200 {
                        m.combine_one(Combine::Scan, Op::Add, i as u64).unwrap();
                    }
                    m.barrier().unwrap();
                    let Some(stampede_core::Named::Channel(inbox)) =
                        rt.lookup(&format!("strata/gc/{rank}"))
                    else {
                        panic!("the inbox is registered while its member lives");
                    };
                    let stats = (m.stats(), inbox.stats());
                    // Nobody leaves (and says so) before everyone has looked.
                    all_checked.wait();
                    stats
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for (s, inbox) in &stats {
        assert_eq!(s.operations, 201);
        // Every message went as soon as it was read.
        assert_eq!(inbox.items, 0);
        assert_eq!(inbox.reclaimed, s.messages_received);
    }
}
