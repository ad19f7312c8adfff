//! Fitting (thesis ch. 2.2-2.3, 3.6.2): least squares weighted by 1/y², which minimises the
//! relative error rather than the absolute one; confidence intervals from Student's t; and
//! pruning, one term at a time, of the terms whose interval contains zero.

use faer::solvers::{SolverCore, SpSolverLstsq};
use faer::Mat;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::error::TuneError;
use crate::model::{mean_relative_error, Model, Sample};
use crate::spec::ModelSpec;

/// Fits `spec` to `samples` at `confidence` (e.g. 0.95), dropping irrelevant terms.
pub fn fit(spec: &ModelSpec, samples: &[Sample], confidence: f64) -> Result<Model, TuneError> {
    if !(0.5..1.0).contains(&confidence) {
        return Err(TuneError::Fit(format!(
            "a confidence of {confidence} is not in [0.5, 1)"
        )));
    }
    for s in samples {
        if s.x.len() != spec.variables.len() {
            return Err(TuneError::Input(format!(
                "a sample has {} values; `{}` has {} variables",
                s.x.len(),
                spec.name,
                spec.variables.len()
            )));
        }
        if !(s.y.is_finite() && s.y > 0.0) {
            return Err(TuneError::Fit(format!(
                "a measurement of {} (costs must be positive)",
                s.y
            )));
        }
    }
    let mut active: Vec<usize> = (0..spec.terms.len()).collect();
    let mut dropped = Vec::new();
    loop {
        let solved = solve(spec, samples, &active, confidence)?;
        // The least significant term whose interval contains zero goes, then the rest is
        // fitted again without it (§2.2.5); a model keeps at least one term.
        let weakest = solved
            .intervals
            .iter()
            .enumerate()
            .filter(|(_, (lo, hi))| *lo <= 0.0 && *hi >= 0.0)
            .min_by(|a, b| solved.t_ratio[a.0].total_cmp(&solved.t_ratio[b.0]))
            .map(|(i, _)| i);
        match weakest {
            Some(i) if active.len() > 1 => {
                dropped.push(active.remove(i));
            }
            _ => {
                let model = Model {
                    spec: spec.clone(),
                    kept: active,
                    coefficients: solved.beta,
                    intervals: solved.intervals,
                    dropped,
                    confidence,
                    mre: 1.0,
                    samples: samples.len(),
                };
                let mre = mean_relative_error(
                    samples
                        .iter()
                        .map(|s| (model.predict(&s.x) - s.y).abs() / s.y),
                );
                return Ok(Model { mre, ..model });
            }
        }
    }
}

struct Solved {
    beta: Vec<f64>,
    intervals: Vec<(f64, f64)>,
    /// |β| / standard error, per term.
    t_ratio: Vec<f64>,
}

fn solve(
    spec: &ModelSpec,
    samples: &[Sample],
    active: &[usize],
    confidence: f64,
) -> Result<Solved, TuneError> {
    let (n, k) = (samples.len(), active.len());
    if n <= k {
        return Err(TuneError::Fit(format!(
            "`{}` has {k} terms and {n} samples; it needs more samples than terms",
            spec.name
        )));
    }
    // Rows weighted by 1/y: the residuals are relative errors, and the right side is 1.
    let a = Mat::<f64>::from_fn(n, k, |i, j| {
        spec.terms[active[j]].eval(&samples[i].x) / samples[i].y
    });
    let b = Mat::<f64>::from_fn(n, 1, |_, _| 1.0);
    let x = a.qr().solve_lstsq(&b);
    let beta: Vec<f64> = (0..k).map(|j| x.read(j, 0)).collect();
    if beta.iter().any(|v| !v.is_finite()) {
        return Err(TuneError::Fit(format!(
            "the terms of `{}` are not independent over the samples",
            spec.name
        )));
    }
    let r = &a * &x - &b;
    let rss: f64 = (0..n).map(|i| r.read(i, 0).powi(2)).sum();
    let s2 = rss / (n - k) as f64;
    let normal = a.transpose() * &a;
    let inv = normal.partial_piv_lu().inverse();
    let t = StudentsT::new(0.0, 1.0, (n - k) as f64)
        .map_err(|e| TuneError::Fit(e.to_string()))?
        .inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    let mut intervals = Vec::with_capacity(k);
    let mut t_ratio = Vec::with_capacity(k);
    for (j, b) in beta.iter().enumerate() {
        let var = s2 * inv.read(j, j);
        if !var.is_finite() || var < 0.0 {
            return Err(TuneError::Fit(format!(
                "the terms of `{}` are not independent over the samples",
                spec.name
            )));
        }
        let se = var.sqrt();
        intervals.push((b - t * se, b + t * se));
        t_ratio.push(if se > 0.0 {
            b.abs() / se
        } else {
            f64::INFINITY
        });
    }
    Ok(Solved {
        beta,
        intervals,
        t_ratio,
    })
}
