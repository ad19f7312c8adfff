//! The Strata collectives on the threads platform: latency against shared-memory
//! baselines measured in the same run, each operation's calibrated model, and the models'
//! picks (barrier kind by group size, all-to-all schedule by group size and block size)
//! against the measured best.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use serde_json::{json, Value};
use stampede_strata::models::{calibrate_threads, time_in_threads, Operation};
use stampede_strata::{BarrierKind, Exchange, GroupOptions};
use stampede_tune::Selector;

use crate::median;

const MAX_P: usize = 6;
const MAX_N: f64 = 65_536.0;

/// Seconds per `std::sync::Barrier::wait` over `p` threads.
fn std_barrier(p: usize, reps: usize) -> f64 {
    let b = Barrier::new(p);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..p {
            s.spawn(|| {
                for _ in 0..reps {
                    b.wait();
                }
            });
        }
    });
    t0.elapsed().as_secs_f64() / reps as f64
}

/// Seconds per shared-memory all-reduce of one number over `p` threads: each writes its
/// slot, a barrier, each sums the slots, a barrier (so the slots can be reused).
fn std_reduce(p: usize, reps: usize) -> f64 {
    let b = Barrier::new(p);
    let slots: Vec<AtomicU64> = (0..p).map(|_| AtomicU64::new(0)).collect();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for r in 0..p {
            let (b, slots) = (&b, &slots);
            s.spawn(move || {
                for i in 0..reps {
                    slots[r].store((r + i) as u64, Ordering::Relaxed);
                    b.wait();
                    let sum: u64 = slots.iter().map(|x| x.load(Ordering::Relaxed)).sum();
                    std::hint::black_box(sum);
                    b.wait();
                }
            });
        }
    });
    t0.elapsed().as_secs_f64() / reps as f64
}

pub fn run(records: &mut Vec<Value>, full: bool) {
    let opts = GroupOptions::default();
    let repeats = 5;

    // Latency against the baselines.
    for p in [2usize, 4] {
        let reps = 2000;
        let mut rows: Vec<(&str, Vec<f64>)> = vec![
            ("barrier_dissemination", vec![]),
            ("barrier_tree", vec![]),
            ("reduce_1", vec![]),
            ("std_barrier", vec![]),
            ("std_reduce", vec![]),
        ];
        for _ in 0..repeats {
            let t = |op| time_in_threads(op, p, 1, reps, &opts).expect("a group of threads");
            rows[0]
                .1
                .push(t(Operation::Barrier(BarrierKind::Dissemination)));
            rows[1].1.push(t(Operation::Barrier(BarrierKind::Tree)));
            rows[2].1.push(t(Operation::Reduce));
            rows[3].1.push(std_barrier(p, reps));
            rows[4].1.push(std_reduce(p, reps));
        }
        let m: Vec<f64> = rows.iter().map(|r| median(r.1.clone()) * 1e6).collect();
        println!(
            "strata, {p} threads: barrier {:.2} µs (dissemination), {:.2} µs (tree), std::sync::Barrier {:.2} µs; all-reduce of one number {:.2} µs, shared-memory {:.2} µs",
            m[0], m[1], m[3], m[2], m[4]
        );
        for (name, stampede, baseline, base_name) in [
            ("barrier_dissemination", m[0], m[3], "std::sync::Barrier"),
            ("barrier_tree", m[1], m[3], "std::sync::Barrier"),
            (
                "reduce",
                m[2],
                m[4],
                "slots, std::sync::Barrier, sum, barrier",
            ),
        ] {
            records.push(json!({
                "metric": "strata_latency_us",
                "operation": name,
                "platform": "threads in one process",
                "members": p,
                "stampede": (stampede * 100.0).round() / 100.0,
                "baseline": (baseline * 100.0).round() / 100.0,
                "baseline_name": base_name,
                "ratio": stampede / baseline,
                "unit": "µs per operation (median of 5)",
                "repeats": {"stampede": rows.iter().find(|r| r.0 == name || (name == "reduce" && r.0 == "reduce_1")).map(|r| r.1.clone())},
            }));
        }
    }

    // One model per operation.
    let points = if full { 48 } else { 20 };
    let mut models = Vec::new();
    for op in Operation::ALL {
        let (model, seconds) = calibrate_threads(op, MAX_P, MAX_N, points, &opts, |_| ())
            .expect("calibration on threads");
        // Fresh samples for the error.
        let fresh: Vec<stampede_tune::Sample> =
            stampede_tune::sample_points(&op.spec(MAX_P, MAX_N).expect("a spec"), 8, 77)
                .into_iter()
                .map(|x| {
                    let (p, n) = (x[0] as usize, x.get(1).map_or(1, |&n| n as usize));
                    let reps = if matches!(op, Operation::AllToAll(_)) {
                        5
                    } else {
                        50
                    };
                    let y = median(
                        (0..3)
                            .map(|_| time_in_threads(op, p, n, reps, &opts).expect("a run"))
                            .collect(),
                    );
                    stampede_tune::Sample { x, y }
                })
                .collect();
        let mre = model.verify(&fresh, 3).mre;
        println!(
            "{:<32} calibrated in {seconds:5.2} s, MRE {mre:.3} fresh: {}",
            op.name(),
            model.formula()
        );
        records.push(json!({
            "metric": "strata_model",
            "operation": op.name(),
            "platform": "threads in one process",
            "calibration_s": (seconds * 1000.0).round() / 1000.0,
            "target": "<= 60 s",
            "met": seconds <= 60.0,
            "mre_fit": model.mre,
            "mre_fresh": mre,
            "formula": model.formula(),
        }));
        models.push((op, model));
    }

    // The models' picks against the measured best.
    let of = |keep: fn(&Operation) -> bool| {
        Selector::new(
            models
                .iter()
                .filter(|(op, _)| keep(op))
                .map(|(_, m)| m.clone())
                .collect(),
        )
    };
    let barriers = of(|op| matches!(op, Operation::Barrier(_)));
    let exchanges = of(|op| matches!(op, Operation::AllToAll(_)));
    let barrier_ops = [BarrierKind::Dissemination, BarrierKind::Tree];
    let exchange_ops = [
        Exchange::Barriers { every: 1 },
        Exchange::Interleaved,
        Exchange::Direct,
    ];
    let mut picks = Vec::new();
    for p in 2..=MAX_P {
        let measured: Vec<f64> = barrier_ops
            .iter()
            .map(|&k| {
                median(
                    (0..3)
                        .map(|_| {
                            time_in_threads(Operation::Barrier(k), p, 0, 500, &opts).expect("a run")
                        })
                        .collect(),
                )
            })
            .collect();
        picks.push(pick_record("barrier", &[p as f64], &barriers, &measured));
    }
    for p in [2usize, 4, 6] {
        for n in [64usize, 4096, 65_536] {
            let measured: Vec<f64> = exchange_ops
                .iter()
                .map(|&h| {
                    median(
                        (0..3)
                            .map(|_| {
                                time_in_threads(Operation::AllToAll(h), p, n, 10, &opts)
                                    .expect("a run")
                            })
                            .collect(),
                    )
                })
                .collect();
            picks.push(pick_record(
                "all_to_all",
                &[p as f64, n as f64],
                &exchanges,
                &measured,
            ));
        }
    }
    let right = picks.iter().filter(|r| r["within_3pct"] == true).count();
    println!(
        "strata model picks: {right} of {} within 3% of the measured best",
        picks.len()
    );
    records.push(json!({
        "metric": "strata_model_picks",
        "platform": "threads in one process",
        "within_3pct": right,
        "of": picks.len(),
        "picks": picks,
    }));
}

fn pick_record(what: &str, x: &[f64], selector: &Selector, measured: &[f64]) -> Value {
    let pick = selector.best(x).unwrap_or(0);
    let best = (0..measured.len())
        .min_by(|&a, &b| measured[a].total_cmp(&measured[b]))
        .expect("implementations");
    let penalty = measured[pick] / measured[best] - 1.0;
    json!({
        "operation": what,
        "x": x,
        "pick": selector.models()[pick].name(),
        "measured_best": selector.models()[best].name(),
        "measured_s": measured,
        "predicted_s": selector.models().iter().map(|m| m.predict(x)).collect::<Vec<_>>(),
        "penalty": penalty,
        "within_3pct": penalty <= 0.03,
    })
}
