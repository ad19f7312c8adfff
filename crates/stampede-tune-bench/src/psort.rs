//! The parallel sort library on the threads platform: calibration, model error, selection
//! accuracy over random inputs (half of them near the predicted crossovers), the gain over
//! the best-on-average implementation, the crossovers predicted and measured (thesis
//! Table 4-4), and the digit-size parameter's accuracy (thesis §5.3, Table 5-1).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use stampede_strata::Exchange;
use stampede_tune::{crossover, sample_points, Sample};
use stampede_tuned::sort::Algorithm;
use stampede_tuned::{spec, time_threads, DigitModel, SortLibrary, DIGITS};

use crate::median;

const MAX_P: usize = 4;
const MIN_N: usize = 16;
const MAX_N: usize = 65_536;
const EXCHANGE: Exchange = Exchange::Interleaved;
const PLATFORM: &str = "threads in one process";

fn time3(a: Algorithm, p: usize, n: usize, seed: u64) -> f64 {
    median(
        (0..3)
            .map(|i| time_threads(a, p, n, EXCHANGE, seed + i).expect("a sort run"))
            .collect(),
    )
}

/// Measures the two alternately, five times each, and returns their medians (a noisy
/// machine can make either look slower once).
fn alternate(a: Algorithm, b: Algorithm, p: usize, n: usize, seed: u64) -> (f64, f64) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    for i in 0..5 {
        ta.push(time_threads(a, p, n, EXCHANGE, seed + 100 + i).expect("a sort run"));
        tb.push(time_threads(b, p, n, EXCHANGE, seed + 100 + i).expect("a sort run"));
    }
    (median(ta), median(tb))
}

/// The n at which the predicted winner changes, for `p` members.
fn predicted_crossovers(lib: &SortLibrary, p: usize) -> Vec<(f64, String, String)> {
    let grid: Vec<f64> = (0..=64)
        .map(|i| (MIN_N as f64 * (MAX_N as f64 / MIN_N as f64).powf(i as f64 / 64.0)).round())
        .collect();
    let mut out = Vec::new();
    for w in grid.windows(2) {
        let (a, b) = (lib.choose(p, w[0] as usize), lib.choose(p, w[1] as usize));
        if let (Some(a), Some(b)) = (a, b) {
            if a != b {
                let ia = Algorithm::ALL.iter().position(|&x| x == a).expect("known");
                let ib = Algorithm::ALL.iter().position(|&x| x == b).expect("known");
                let models = lib.models();
                let at = crossover(
                    |n| models[ia].predict(&[p as f64, n]) - models[ib].predict(&[p as f64, n]),
                    w[0],
                    w[1],
                    1.0,
                )
                .unwrap_or(w[1]);
                out.push((at, a.name(), b.name()));
            }
        }
    }
    out
}

pub fn run(records: &mut Vec<Value>, inputs: usize, full: bool) {
    let points = if full { 40 } else { 24 };
    let t0 = std::time::Instant::now();
    let lib = SortLibrary::calibrate_threads(&Algorithm::ALL, MAX_P, MAX_N, points, EXCHANGE)
        .expect("calibration");
    let calibration = t0.elapsed().as_secs_f64();
    for (a, model) in Algorithm::ALL.iter().zip(lib.models()) {
        let fresh: Vec<Sample> = sample_points(&spec(*a, MAX_P, MAX_N).expect("a spec"), 10, 42)
            .into_iter()
            .map(|x| Sample {
                y: time3(*a, x[0] as usize, x[1] as usize, 7),
                x,
            })
            .collect();
        let mre = model.verify(&fresh, 3).mre;
        println!(
            "psort {:<7} MRE {mre:.3} fresh: {}",
            a.name(),
            model.formula()
        );
        records.push(json!({
            "metric": "psort_model",
            "implementation": a.name(),
            "platform": PLATFORM,
            "mre_fit": model.mre,
            "mre_fresh": mre,
            "formula": model.formula(),
        }));
    }
    println!(
        "psort: {} implementations calibrated in {calibration:.1} s ({:.1} s each)",
        Algorithm::ALL.len(),
        calibration / Algorithm::ALL.len() as f64
    );
    records.push(json!({
        "metric": "psort_calibration_s",
        "platform": PLATFORM,
        "stampede": calibration / Algorithm::ALL.len() as f64,
        "unit": "s per implementation",
        "points": points,
        "target": "<= 60 s",
        "met": calibration / Algorithm::ALL.len() as f64 <= 60.0,
    }));

    // Inputs: half uniform (p, and n uniform in its logarithm), half within 10% of a
    // predicted crossover.
    let mut rng = StdRng::seed_from_u64(2026);
    let crossings: Vec<Vec<(f64, String, String)>> = (0..=MAX_P)
        .map(|p| {
            if p >= 2 {
                predicted_crossovers(&lib, p)
            } else {
                Vec::new()
            }
        })
        .collect();
    let mut workload = Vec::with_capacity(inputs);
    for i in 0..inputs {
        let p = rng.gen_range(2..=MAX_P);
        let near = &crossings[p];
        let n = if i % 2 == 1 && !near.is_empty() {
            let c = near[rng.gen_range(0..near.len())].0;
            (c * rng.gen_range(0.9..1.1)).round() as usize
        } else {
            let u: f64 = rng.gen();
            ((MIN_N as f64).ln() + u * ((MAX_N as f64).ln() - (MIN_N as f64).ln())).exp() as usize
        };
        workload.push((p, n.clamp(MIN_N, MAX_N)));
    }
    let (mut strict, mut within, mut wrong, mut penalty_sum) = (0usize, 0usize, 0usize, 0.0);
    let mut totals = vec![0.0; Algorithm::ALL.len()];
    let (mut picked_total, mut best_total) = (0.0, 0.0);
    for (i, &(p, n)) in workload.iter().enumerate() {
        let pick = lib.choose(p, n).expect("inside the calibrated ranges");
        let ipick = Algorithm::ALL
            .iter()
            .position(|&a| a == pick)
            .expect("known");
        let mut t: Vec<f64> = Algorithm::ALL
            .iter()
            .map(|&a| time3(a, p, n, 1000 + i as u64))
            .collect();
        let mut best = (0..t.len())
            .min_by(|&a, &b| t[a].total_cmp(&t[b]))
            .expect("some");
        if best != ipick && t[ipick] > t[best] * 1.03 {
            let (tp, tb) = alternate(pick, Algorithm::ALL[best], p, n, 5000 + i as u64);
            t[ipick] = tp;
            t[best] = tb;
            best = (0..t.len())
                .min_by(|&a, &b| t[a].total_cmp(&t[b]))
                .expect("some");
        }
        for (k, x) in t.iter().enumerate() {
            totals[k] += x;
        }
        picked_total += t[ipick];
        best_total += t[best];
        let penalty = t[ipick] / t[best] - 1.0;
        if best == ipick {
            strict += 1;
        } else {
            wrong += 1;
            penalty_sum += penalty;
        }
        if penalty <= 0.03 {
            within += 1;
        }
    }
    let (avg_best, avg_time) = totals
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, &t)| (Algorithm::ALL[k].name(), t))
        .expect("some");
    let mean_penalty = if wrong == 0 {
        0.0
    } else {
        penalty_sum / wrong as f64
    };
    println!(
        "psort accuracy over {inputs} inputs: strict {:.1}%, within 3% {:.1}%, mean penalty when wrong {:.2}%; the picks take {:.3} of always {avg_best}",
        100.0 * strict as f64 / inputs as f64,
        100.0 * within as f64 / inputs as f64,
        100.0 * mean_penalty,
        picked_total / avg_time
    );
    records.push(json!({
        "metric": "psort_selection_accuracy",
        "platform": PLATFORM,
        "inputs": inputs,
        "full": full,
        "near_crossovers": inputs / 2,
        "strict": strict as f64 / inputs as f64,
        "within_3pct": within as f64 / inputs as f64,
        "wrong": wrong,
        "mean_penalty_when_wrong": mean_penalty,
        "expected_penalty": penalty_sum / inputs as f64,
        "gain": {"picks_s": picked_total, "best_on_average": avg_best, "best_on_average_s": avg_time, "ratio": picked_total / avg_time, "best_possible_s": best_total},
        "targets": {"within_3pct": ">= 0.995 (from --full only)", "strict": ">= 0.9942 (thesis)", "mean_penalty_when_wrong": "<= 0.01"},
    }));

    // Crossovers, predicted and measured on a grid (thesis Table 4-4).
    let mut table = Vec::new();
    for (p, near) in crossings.iter().enumerate().skip(2) {
        let grid: Vec<usize> = (0..=10)
            .map(|i| (MIN_N as f64 * (MAX_N as f64 / MIN_N as f64).powf(i as f64 / 10.0)) as usize)
            .collect();
        let winners: Vec<String> = grid
            .iter()
            .map(|&n| {
                let t: Vec<f64> = Algorithm::ALL.iter().map(|&a| time3(a, p, n, 77)).collect();
                let k = (0..t.len())
                    .min_by(|&a, &b| t[a].total_cmp(&t[b]))
                    .expect("some");
                Algorithm::ALL[k].name()
            })
            .collect();
        let measured: Vec<Value> = grid
            .windows(2)
            .zip(winners.windows(2))
            .filter(|(_, w)| w[0] != w[1])
            .map(|(n, w)| json!({"between": [n[0], n[1]], "from": w[0], "to": w[1]}))
            .collect();
        let predicted: Vec<Value> = near
            .iter()
            .map(|(n, a, b)| json!({"n": n.round(), "from": a, "to": b}))
            .collect();
        println!("psort crossovers at p = {p}: predicted {predicted:?}; measured {measured:?}");
        table.push(json!({"p": p, "predicted": predicted, "measured": measured, "measured_winners": winners.iter().zip(&grid).map(|(w, n)| json!([n, w])).collect::<Vec<_>>()}));
    }
    records.push(json!({"metric": "psort_crossovers", "platform": PLATFORM, "table": table}));

    // The digit size as a parameter.
    let digits = DigitModel::calibrate_threads(MAX_P, MAX_N, if full { 60 } else { 36 }, EXCHANGE)
        .expect("the digit model");
    let cases = if full { 200 } else { 30 };
    let (mut exact, mut penalties, mut rows) = (0usize, Vec::new(), Vec::new());
    for i in 0..cases {
        let p = rng.gen_range(2..=MAX_P);
        let u: f64 = rng.gen();
        let n =
            ((MIN_N as f64).ln() + u * ((MAX_N as f64).ln() - (MIN_N as f64).ln())).exp() as usize;
        let (pick, _) = digits.best(p, n).expect("inside the ranges");
        let t: Vec<(u32, f64)> = DIGITS
            .map(|b| (b, time3(Algorithm::Radix(b), p, n, 9000 + i as u64)))
            .collect();
        let (best, tbest) = t
            .iter()
            .copied()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("some");
        let tpick = t.iter().find(|x| x.0 == pick).expect("in range").1;
        let tfixed = t.iter().find(|x| x.0 == 8).expect("8 bits").1;
        if pick == best {
            exact += 1;
        }
        penalties.push(tpick / tbest - 1.0);
        rows.push(json!({"p": p, "n": n, "predicted_best": pick, "measured_best": best, "penalty": tpick / tbest - 1.0, "benefit_over_8_bits": tfixed / tpick - 1.0}));
    }
    penalties.sort_by(f64::total_cmp);
    let p99 = penalties[((penalties.len() as f64 * 0.99).ceil() as usize).saturating_sub(1)];
    println!(
        "psort digit size over {cases} inputs: the measured best {:.1}% of the time, penalty at the 99th percentile {:.2}%: {}",
        100.0 * exact as f64 / cases as f64,
        100.0 * p99,
        digits.model().formula()
    );
    records.push(json!({
        "metric": "psort_digit_size",
        "platform": PLATFORM,
        "inputs": cases,
        "exact": exact as f64 / cases as f64,
        "penalty_p99": p99,
        "formula": digits.model().formula(),
        "mre_fit": digits.model().mre,
        "targets": {"exact": ">= 0.95", "penalty_p99": "<= 0.02"},
        "cases": rows,
    }));
}
