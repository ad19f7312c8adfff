//! Calibrated models: the coefficients of the kept terms, their confidence intervals, and how
//! well the model predicts (thesis ch. 2).

use serde::{Deserialize, Serialize};

use crate::spec::ModelSpec;

/// One measurement: the explanatory variables' values and the time (or any positive cost).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub x: Vec<f64>,
    pub y: f64,
}

/// A fitted model of one implementation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub spec: ModelSpec,
    /// Indices (into `spec.terms`) of the terms kept, and their coefficients and confidence
    /// intervals at `confidence`.
    pub kept: Vec<usize>,
    pub coefficients: Vec<f64>,
    pub intervals: Vec<(f64, f64)>,
    /// Terms dropped because their interval contained zero.
    pub dropped: Vec<usize>,
    pub confidence: f64,
    /// The mean relative error on the samples it was fitted to (§2.2.4): the geometric mean
    /// of 1 + |predicted − measured| / measured, so 1.05 means off by 5% on average.
    pub mre: f64,
    pub samples: usize,
}

/// How a model does on samples it was not fitted to.
#[derive(Clone, Debug, PartialEq)]
pub struct Verification {
    /// Mean relative error, as [`Model::mre`].
    pub mre: f64,
    /// The worst samples: (sample, prediction, relative error), worst first.
    pub worst: Vec<(Sample, f64, f64)>,
}

impl Model {
    /// The model's name (the implementation's).
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The predicted cost at `x`; +∞ outside the ranges the model was calibrated over.
    /// Whether every index refers to something the model has: what a model read from a
    /// file must pass before it predicts.
    pub(crate) fn check(&self) -> Result<(), String> {
        let bad = |why: &str| Err(format!("model {}: {why}", self.spec.name));
        let terms = self.spec.terms.len();
        if self.kept.iter().chain(&self.dropped).any(|t| *t >= terms) {
            return bad("a kept or dropped term that does not exist");
        }
        if self.coefficients.len() != self.kept.len() || self.intervals.len() != self.kept.len() {
            return bad("not one coefficient and one interval per kept term");
        }
        let vars = self.spec.variables.len();
        if self
            .spec
            .terms
            .iter()
            .flat_map(|t| &t.factors)
            .any(|f| f.var >= vars)
        {
            return bad("a term of a variable that does not exist");
        }
        Ok(())
    }

    #[inline]
    pub fn predict(&self, x: &[f64]) -> f64 {
        if !self.spec.valid(x) {
            return f64::INFINITY;
        }
        let mut y = 0.0;
        for (t, c) in self.kept.iter().zip(&self.coefficients) {
            y += c * self.spec.terms[*t].eval(x);
        }
        y
    }

    /// `y = 12.1 + 3.02·n + 0.051·n·log2(n)`.
    pub fn formula(&self) -> String {
        let parts: Vec<String> = self
            .kept
            .iter()
            .zip(&self.coefficients)
            .map(|(t, c)| {
                let term = self.spec.terms[*t].show(&self.spec.variables);
                if term == "1" {
                    format!("{c:.4e}")
                } else {
                    format!("{c:.4e}·{term}")
                }
            })
            .collect();
        format!("{} = {}", self.spec.name, parts.join(" + "))
    }

    /// The mean relative error on `samples` and the `worst` of them.
    pub fn verify(&self, samples: &[Sample], worst: usize) -> Verification {
        let mut scored: Vec<(Sample, f64, f64)> = samples
            .iter()
            .map(|s| {
                let p = self.predict(&s.x);
                (s.clone(), p, (p - s.y).abs() / s.y)
            })
            .collect();
        let mre = mean_relative_error(scored.iter().map(|(_, _, e)| *e));
        scored.sort_by(|a, b| b.2.total_cmp(&a.2));
        scored.truncate(worst);
        Verification { mre, worst: scored }
    }
}

/// The geometric mean of 1 + each relative error.
pub(crate) fn mean_relative_error(errors: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for e in errors {
        sum += (1.0 + e).ln();
        n += 1;
    }
    if n == 0 {
        1.0
    } else {
        (sum / n as f64).exp()
    }
}
