//! Model factoring (thesis ch. 8): the radix sort's cost written by hand over the models of
//! the primitives it runs, so that a new platform needs only its primitives calibrated.
//!
//! Each of the `q = ⌈32/b⌉` passes runs two combines of `r = 2^b` numbers (the exclusive
//! scan and the reduction of the histograms), one all-to-all of blocks of about `4n/p`
//! bytes, and two local counting passes over `n` keys (the sender's and the receiver's):
//!
//! `T(p, n, b) = q · (2·combine(p, r) + exchange(p, 4n/p) + 2·local(n, r))`.
//!
//! The *hybrid* form `α + β·T` is fitted by the toolkit to measured sorts, absorbing what
//! the formula leaves out; applied with another platform's primitive models it predicts
//! that platform (cross prediction). The impact report says which primitive moves the
//! total most.

use std::time::Instant;

use stampede_tune::{fit, sample_points, Model, ModelSpec, Profiler, Sample, TermSpec, TuneError};

use crate::sort::by_digit;
use crate::sort_models::keys;

/// The primitives, by name, in the order of [`RadixFactoring::parts`].
pub const PRIMITIVES: [&str; 3] = ["combine", "exchange", "local"];

/// The radix sort's cost over primitive models: a Strata reduction over `(p, n elements)`,
/// an all-to-all over `(p, n bytes per block)` and a local pass over `(n keys, r)`.
#[derive(Clone, Debug)]
pub struct RadixFactoring {
    pub combine: Model,
    pub exchange: Model,
    pub local: Model,
}

/// The local pass's specification: keys `16..=max_n`, radix `4..=65536`.
pub fn local_spec(max_n: usize) -> Result<ModelSpec, TuneError> {
    let t = TermSpec::parse;
    ModelSpec::new("local_pass")
        .variable("n", 16.0, max_n as f64, true)
        .variable("r", 4.0, 65_536.0, true)
        .term(t("1")?)
        .term(t("n")?)
        .term(t("r")?)
        .build()
}

/// Calibrates the local pass on this thread.
pub fn calibrate_local(max_n: usize, points: usize) -> Result<Model, TuneError> {
    let spec = local_spec(max_n)?;
    let samples = Profiler::default().profile_measured(
        &sample_points(&spec, points, 23),
        |x| {
            let (n, r) = (x[0] as usize, x[1] as u64);
            let bits = r.trailing_zeros().max(1);
            let ks = keys(n, 5);
            let reps = (200_000 / (n + r as usize)).clamp(1, 200);
            let t0 = Instant::now();
            for _ in 0..reps {
                std::hint::black_box(by_digit(&ks, 0, bits));
            }
            t0.elapsed().as_secs_f64() / reps as f64
        },
        |_| (),
    );
    fit(&spec, &samples, 0.95)
}

impl RadixFactoring {
    /// The three terms of one sort, per primitive, in seconds (+∞ outside a primitive's
    /// calibrated range).
    pub fn parts(&self, p: usize, n: usize, bits: u32) -> [f64; 3] {
        let q = 32u32.div_ceil(bits) as f64;
        let r = (1u64 << bits) as f64;
        let block = (4 * n).div_ceil(p.max(1)).max(1) as f64;
        [
            q * 2.0 * self.combine.predict(&[p as f64, r]),
            q * self.exchange.predict(&[p as f64, block]),
            q * 2.0 * self.local.predict(&[n as f64, r]),
        ]
    }

    /// The factored prediction.
    pub fn predict(&self, p: usize, n: usize, bits: u32) -> f64 {
        self.parts(p, n, bits).iter().sum()
    }

    /// How much the total moves when one primitive costs 10% more, per primitive, averaged
    /// over `inputs` (`(p, n, bits)`): the impact report.
    pub fn impact(&self, inputs: &[(usize, usize, u32)]) -> [f64; 3] {
        let mut out = [0.0; 3];
        for &(p, n, b) in inputs {
            let parts = self.parts(p, n, b);
            let total: f64 = parts.iter().sum();
            for (o, part) in out.iter_mut().zip(parts) {
                *o += 0.1 * part / total / inputs.len() as f64;
            }
        }
        out
    }
}

/// The hybrid model `α + β·f` over factored predictions `f`: fitted to measured sorts.
pub fn fit_hybrid(samples: &[(f64, f64)]) -> Result<Model, TuneError> {
    // Valid for any factored prediction: applying it to another platform's is the point.
    let spec = ModelSpec::new("radix_hybrid")
        .variable("f", 0.0, 1e9, false)
        .term(TermSpec::one())
        .term(TermSpec::var("f"))
        .build()?;
    let samples: Vec<Sample> = samples
        .iter()
        .map(|&(f, y)| Sample { x: vec![f], y })
        .collect();
    fit(&spec, &samples, 0.95)
}
