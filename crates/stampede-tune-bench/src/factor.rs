//! Model factoring (thesis ch. 8) of the radix sort on two platforms: the factored model
//! over each platform's primitive models, the hybrid `α + β·factored` fitted to measured
//! sorts, cross prediction of one platform with the other's hybrid, and the impact report.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use stampede_strata::models::{calibrate, Operation};
use stampede_strata::{Exchange, StrataError};
use stampede_tune::Model;
use stampede_tuned::factor::{calibrate_local, fit_hybrid, RadixFactoring, PRIMITIVES};
use stampede_tuned::sort::Algorithm;

use crate::median;

/// A platform: its collectives and its sorts, timed.
pub trait Platform {
    fn name(&self) -> String;
    /// The slowest member's seconds per `op` over `reps` runs in a group of `p`.
    fn strata(
        &mut self,
        op: Operation,
        p: usize,
        n: usize,
        reps: usize,
    ) -> Result<f64, StrataError>;
    /// The slowest member's seconds to sort `n` keys each in a group of `p`.
    fn sort(&mut self, a: Algorithm, p: usize, n: usize, seed: u64) -> f64;
}

/// Threads in one process.
pub struct Threads;

impl Platform for Threads {
    fn name(&self) -> String {
        "threads in one process".into()
    }
    fn strata(
        &mut self,
        op: Operation,
        p: usize,
        n: usize,
        reps: usize,
    ) -> Result<f64, StrataError> {
        stampede_strata::models::time_in_threads(
            op,
            p,
            n,
            reps,
            &stampede_strata::GroupOptions::default(),
        )
    }
    fn sort(&mut self, a: Algorithm, p: usize, n: usize, seed: u64) -> f64 {
        crate::psort::threads(a, p, n, seed)
    }
}

impl Platform for crate::procs::Processes {
    fn name(&self) -> String {
        "processes on one host".into()
    }
    fn strata(
        &mut self,
        op: Operation,
        p: usize,
        n: usize,
        reps: usize,
    ) -> Result<f64, StrataError> {
        self.time_strata(op, p, n, reps)
    }
    fn sort(&mut self, a: Algorithm, p: usize, n: usize, seed: u64) -> f64 {
        self.time_sort(a, p, n, seed).expect("a sort run")
    }
}

/// The geometric mean of 1 + relative error over (predicted, measured) pairs, as the
/// toolkit reports a model's error.
fn mre(pairs: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for (p, y) in pairs {
        sum += (1.0 + (p - y).abs() / y).ln();
        n += 1;
    }
    (sum / n.max(1) as f64).exp()
}

pub fn run(records: &mut Vec<Value>, platforms: &mut [&mut dyn Platform]) {
    let max_p = 4;
    let local = calibrate_local(16_384, 24).expect("the local pass");
    let mut rng = StdRng::seed_from_u64(88);
    let inputs: Vec<(usize, usize, u32)> = (0..24)
        .map(|_| {
            let u: f64 = rng.gen();
            let n = (256f64.ln() + u * (16_384f64.ln() - 256f64.ln())).exp() as usize;
            (
                rng.gen_range(2..=max_p),
                n,
                [4, 8, 11, 16][rng.gen_range(0..4)],
            )
        })
        .collect();
    let mut fitted: Vec<(String, RadixFactoring, Model, Vec<f64>)> = Vec::new();
    for pl in platforms.iter_mut() {
        let mut model = |op| {
            calibrate(
                op,
                max_p,
                65_536.0,
                20,
                |op, p, n, reps| pl.strata(op, p, n, reps),
                |_| (),
            )
            .expect("a primitive model")
            .0
        };
        let f = RadixFactoring {
            combine: model(Operation::Reduce),
            exchange: model(Operation::AllToAll(Exchange::Interleaved)),
            local: local.clone(),
        };
        let measured: Vec<f64> = inputs
            .iter()
            .enumerate()
            .map(|(i, &(p, n, b))| {
                median(
                    (0..3)
                        .map(|k| pl.sort(Algorithm::Radix(b), p, n, 40 + 3 * i as u64 + k))
                        .collect(),
                )
            })
            .collect();
        let pairs: Vec<(f64, f64)> = inputs
            .iter()
            .zip(&measured)
            .map(|(&(p, n, b), &y)| (f.predict(p, n, b), y))
            .collect();
        let hybrid = fit_hybrid(&pairs).expect("the hybrid");
        let factored_mre = mre(pairs.iter().copied());
        let hybrid_mre = mre(pairs.iter().map(|&(x, y)| (hybrid.predict(&[x]), y)));
        let impact = f.impact(&inputs);
        println!(
            "factoring {}: factored MRE {factored_mre:.3}, hybrid {} MRE {hybrid_mre:.3}; impact of +10%: {}",
            pl.name(),
            hybrid.formula(),
            PRIMITIVES
                .iter()
                .zip(impact)
                .map(|(n, v)| format!("{n} {:.1}%", 100.0 * v))
                .collect::<Vec<_>>()
                .join(", ")
        );
        records.push(json!({
            "metric": "factoring",
            "platform": pl.name(),
            "factored_mre": factored_mre,
            "hybrid": hybrid.formula(),
            "hybrid_mre": hybrid_mre,
            "primitives": {"combine": f.combine.formula(), "exchange": f.exchange.formula(), "local": f.local.formula()},
            "impact_of_10pct": PRIMITIVES.iter().zip(impact).map(|(n, v)| json!({"primitive": n, "total_moves": v})).collect::<Vec<_>>(),
        }));
        fitted.push((pl.name(), f, hybrid, measured));
    }
    // Cross prediction: each platform's hybrid with the other's primitive models.
    for (from, _, hybrid, _) in &fitted {
        for (to, f, _, measured) in &fitted {
            if from == to {
                continue;
            }
            let cross = mre(inputs
                .iter()
                .zip(measured)
                .map(|(&(p, n, b), &y)| (hybrid.predict(&[f.predict(p, n, b)]), y)));
            println!("factoring: {to} predicted with the hybrid of {from}: MRE {cross:.3}");
            records.push(json!({
                "metric": "factoring_cross_prediction",
                "hybrid_from": from,
                "primitives_of": to,
                "mre": cross,
            }));
        }
    }
}
