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
use crate::study::{interleaved, Effort, Parameter};

const MIN_N: usize = 16;
const MAX_N: usize = 65_536;
const EXCHANGE: Exchange = Exchange::Interleaved;

/// Where the sorts run: seconds of the slowest of `p` members sorting `n` keys each.
pub type Measure<'a> = &'a mut dyn FnMut(Algorithm, usize, usize, u64) -> f64;

/// The threads platform.
pub fn threads(a: Algorithm, p: usize, n: usize, seed: u64) -> f64 {
    time_threads(a, p, n, EXCHANGE, seed).expect("a sort run")
}

fn time3(t: Measure<'_>, a: Algorithm, p: usize, n: usize, seed: u64) -> f64 {
    median((0..3).map(|i| t(a, p, n, seed + i)).collect())
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

/// The study on one platform, named `platform`, with groups of up to `max_p` members.
pub fn run(
    records: &mut Vec<Value>,
    inputs: usize,
    full: bool,
    effort: Effort,
    platform: &str,
    max_p: usize,
    sorter: Measure<'_>,
) {
    let points = effort.points;
    let t0 = std::time::Instant::now();
    let lib = SortLibrary::calibrate(&Algorithm::ALL, max_p, MAX_N, points, |a, p, n, seed| {
        Ok(sorter(a, p, n, seed))
    })
    .expect("calibration");
    let calibration = t0.elapsed().as_secs_f64();
    for (a, model) in Algorithm::ALL.iter().zip(lib.models()) {
        let fresh: Vec<Sample> = sample_points(&spec(*a, max_p, MAX_N).expect("a spec"), 10, 42)
            .into_iter()
            .map(|x| Sample {
                y: time3(sorter, *a, x[0] as usize, x[1] as usize, 7),
                x,
            })
            .collect();
        let mre = model.verify(&fresh, 3).mre;
        println!(
            "psort {platform}: {:<7} MRE {mre:.3} fresh: {}",
            a.name(),
            model.formula()
        );
        records.push(json!({
            "metric": "psort_model",
            "implementation": a.name(),
            "platform": platform,
            "mre_fit": model.mre,
            "mre_fresh": mre,
            "formula": model.formula(),
        }));
    }
    println!(
        "psort {platform}: {} implementations calibrated in {calibration:.1} s ({:.1} s each)",
        Algorithm::ALL.len(),
        calibration / Algorithm::ALL.len() as f64
    );
    records.push(json!({
        "metric": "psort_calibration_s",
        "platform": platform,
        "stampede": calibration / Algorithm::ALL.len() as f64,
        "unit": "s per implementation",
        "points": points,
        "target": "<= 60 s",
        "met": calibration / Algorithm::ALL.len() as f64 <= 60.0,
    }));

    // Inputs: half uniform (p, and n uniform in its logarithm), half within 10% of a
    // predicted crossover.
    let mut rng = StdRng::seed_from_u64(2026);
    let crossings: Vec<Vec<(f64, String, String)>> = (0..=max_p)
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
        let p = rng.gen_range(2..=max_p);
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
    let names: Vec<String> = Algorithm::ALL.iter().map(|a| a.name()).collect();
    let xs: Vec<Vec<f64>> = workload
        .iter()
        .map(|&(p, n)| vec![p as f64, n as f64])
        .collect();
    let mut record = crate::study::accuracy(
        "psort",
        platform,
        full,
        effort.rounds,
        &names,
        &xs,
        |x| {
            let pick = lib.choose(x[0] as usize, x[1] as usize)?;
            Algorithm::ALL.iter().position(|&a| a == pick)
        },
        &mut |k, x, seed| sorter(Algorithm::ALL[k], x[0] as usize, x[1] as usize, seed),
    );
    record["near_crossovers"] = json!(inputs / 2);
    records.push(record);

    // Crossovers, predicted and measured on a grid (thesis Table 4-4).
    let mut table = Vec::new();
    for (p, near) in crossings.iter().enumerate().skip(2) {
        let grid: Vec<usize> = (0..=10)
            .map(|i| (MIN_N as f64 * (MAX_N as f64 / MIN_N as f64).powf(i as f64 / 10.0)) as usize)
            .collect();
        let winners: Vec<String> = grid
            .iter()
            .map(|&n| {
                let t = interleaved(Algorithm::ALL.len(), effort.rounds, 77, &mut |k, seed| {
                    sorter(Algorithm::ALL[k], p, n, seed)
                });
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
        println!("psort {platform}: crossovers at p = {p}: predicted {predicted:?}; measured {measured:?}");
        table.push(json!({"p": p, "predicted": predicted, "measured": measured, "measured_winners": winners.iter().zip(&grid).map(|(w, n)| json!([n, w])).collect::<Vec<_>>()}));
    }
    records.push(json!({"metric": "psort_crossovers", "platform": platform, "table": table}));

    // The digit size as a parameter.
    let digits = DigitModel::calibrate(max_p, MAX_N, effort.parameter_points, |a, p, n, seed| {
        Ok(sorter(a, p, n, seed))
    })
    .expect("the digit model");
    let cases = effort.parameter_cases;
    let values: Vec<usize> = DIGITS.map(|b| b as usize).collect();
    let mut tally = Parameter::new();
    for i in 0..cases {
        let p = rng.gen_range(2..=max_p);
        let u: f64 = rng.gen();
        let n =
            ((MIN_N as f64).ln() + u * ((MAX_N as f64).ln() - (MIN_N as f64).ln())).exp() as usize;
        let (pick, _) = digits.best(p, n).expect("inside the ranges");
        let t = interleaved(
            values.len(),
            effort.rounds,
            9000 + 10 * i as u64,
            &mut |k, seed| sorter(Algorithm::Radix(values[k] as u32), p, n, seed),
        );
        let at = |b: usize| t[values.iter().position(|&v| v == b).expect("a digit size")];
        let benefit = at(8) / at(pick as usize) - 1.0;
        let case = json!({"p": p, "n": n, "benefit_over_8_bits": benefit});
        tally.add(&values, &t, pick as usize, case);
    }
    records.push(tally.record(
        "psort_digit_size",
        platform,
        "psort digit size",
        digits.model().formula(),
        digits.model().mre,
    ));
}
