//! Profiling (thesis ch. 3.3-3.5): where to sample, and timing robust to outliers.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::model::Sample;
use crate::spec::ModelSpec;

/// Places `count` points over a specification's ranges: every corner of the box of ranges
/// first (the boundaries are where models are extrapolated from, and where implementations
/// cross), then midpoints of the edges, then points drawn at random, uniformly in the
/// logarithm of a variable whose range spans more than a factor of 10 (so small values are
/// sampled as densely as large ones). Integer variables are rounded. Deterministic in `seed`.
pub fn sample_points(spec: &ModelSpec, count: usize, seed: u64) -> Vec<Vec<f64>> {
    let vars = &spec.variables;
    let d = vars.len();
    let mut points: Vec<Vec<f64>> = Vec::new();
    let round = |i: usize, v: f64| {
        if vars[i].integer {
            v.round().clamp(vars[i].min, vars[i].max)
        } else {
            v
        }
    };
    let push = |p: Vec<f64>, points: &mut Vec<Vec<f64>>| {
        if points.len() < count && !points.contains(&p) {
            points.push(p);
        }
    };
    // Corners: each variable at its min or max.
    if d <= 12 {
        for mask in 0..(1u32 << d) {
            let p = (0..d)
                .map(|i| {
                    round(
                        i,
                        if mask >> i & 1 == 1 {
                            vars[i].max
                        } else {
                            vars[i].min
                        },
                    )
                })
                .collect();
            push(p, &mut points);
        }
        // Edge midpoints: one variable in the middle of its range, the others at a bound.
        for mid in 0..d {
            for mask in 0..(1u32 << d) {
                let p = (0..d)
                    .map(|i| {
                        let v = &vars[i];
                        let x = if i == mid {
                            middle(v.min, v.max)
                        } else if mask >> i & 1 == 1 {
                            v.max
                        } else {
                            v.min
                        };
                        round(i, x)
                    })
                    .collect();
                push(p, &mut points);
            }
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut attempts = 0;
    while points.len() < count && attempts < count * 20 {
        attempts += 1;
        let p = (0..d)
            .map(|i| {
                let v = &vars[i];
                let u: f64 = rng.gen();
                let x = if v.min > 0.0 && v.max / v.min > 10.0 {
                    (v.min.ln() + u * (v.max.ln() - v.min.ln())).exp()
                } else {
                    v.min + u * (v.max - v.min)
                };
                round(i, x)
            })
            .collect();
        push(p, &mut points);
    }
    points
}

/// The middle of a range: geometric for a wide positive one, arithmetic otherwise.
fn middle(min: f64, max: f64) -> f64 {
    if min > 0.0 && max / min > 10.0 {
        (min * max).sqrt()
    } else {
        (min + max) / 2.0
    }
}

/// How far a calibration run has got, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub elapsed: Duration,
    /// The time left at the rate so far.
    pub eta: Duration,
}

impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let width = 30;
        let filled = (self.done * width)
            .checked_div(self.total)
            .unwrap_or(width)
            .min(width);
        write!(
            f,
            "[{}{}] {}/{} {:.1}s, about {:.1}s left",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.done,
            self.total,
            self.elapsed.as_secs_f64(),
            self.eta.as_secs_f64()
        )
    }
}

/// How each point is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Profiler {
    /// Untimed runs before the first point (caches, allocator, lazy initialisation).
    pub warmup: usize,
    /// Timed runs per point; the sample is their median (§3.4.1: an interrupt or a page
    /// fault inflates one run, not the median of three).
    pub repeats: usize,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            warmup: 1,
            repeats: 3,
        }
    }
}

impl Profiler {
    /// Measures `task` at every point: for each run, `setup` (untimed), `task` (timed), then
    /// `cleanup` (untimed), in seconds. `progress` is told after each point.
    pub fn profile<S>(
        &self,
        points: &[Vec<f64>],
        mut setup: impl FnMut(&[f64]) -> S,
        mut task: impl FnMut(&[f64], &mut S),
        mut cleanup: impl FnMut(&[f64], S),
        mut progress: impl FnMut(Progress),
    ) -> Vec<Sample> {
        let start = Instant::now();
        if let Some(p) = points.first() {
            for _ in 0..self.warmup {
                let mut state = setup(p);
                task(p, &mut state);
                cleanup(p, state);
            }
        }
        let mut samples = Vec::with_capacity(points.len());
        for (i, p) in points.iter().enumerate() {
            let mut times: Vec<f64> = (0..self.repeats.max(1))
                .map(|_| {
                    let mut state = setup(p);
                    let t0 = Instant::now();
                    task(p, &mut state);
                    let t = t0.elapsed().as_secs_f64();
                    cleanup(p, state);
                    t
                })
                .collect();
            times.sort_by(f64::total_cmp);
            // A run below the clock's resolution would be zero; costs are positive.
            let y = times[times.len() / 2].max(1e-9);
            samples.push(Sample { x: p.clone(), y });
            let elapsed = start.elapsed();
            let done = i + 1;
            let eta = elapsed.mul_f64((points.len() - done) as f64 / done as f64);
            progress(Progress {
                done,
                total: points.len(),
                elapsed,
                eta,
            });
        }
        samples
    }

    /// Measures with the caller's own data collection (thesis §6.3: some operations, a
    /// collective over a group or the cost of receiving, cannot be timed by a wrapper):
    /// `measure` returns seconds for a point, and the sample is the median of
    /// [`repeats`](Profiler::repeats) calls after the warm-up.
    pub fn profile_measured(
        &self,
        points: &[Vec<f64>],
        mut measure: impl FnMut(&[f64]) -> f64,
        mut progress: impl FnMut(Progress),
    ) -> Vec<Sample> {
        let start = Instant::now();
        if let Some(p) = points.first() {
            for _ in 0..self.warmup {
                measure(p);
            }
        }
        let mut samples = Vec::with_capacity(points.len());
        for (i, p) in points.iter().enumerate() {
            let mut times: Vec<f64> = (0..self.repeats.max(1)).map(|_| measure(p)).collect();
            times.sort_by(f64::total_cmp);
            samples.push(Sample {
                x: p.clone(),
                y: times[times.len() / 2].max(1e-9),
            });
            let elapsed = start.elapsed();
            let done = i + 1;
            progress(Progress {
                done,
                total: points.len(),
                elapsed,
                eta: elapsed.mul_f64((points.len() - done) as f64 / done as f64),
            });
        }
        samples
    }
}
