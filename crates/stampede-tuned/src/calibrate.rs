//! Calibration with a fallible measuring function: the libraries' runs can fail (a member
//! lost), and a failed run must stop the calibration rather than become a sample. And the timing
//! of one sample, which repeats a short run.

use std::time::Instant;

use stampede_strata::{Combine, Member, Op, StrataError};
use stampede_tune::{fit, Model, ModelSpec, Profiler, TuneError};

/// A tuning error as the libraries report it.
pub(crate) fn bad(e: TuneError) -> StrataError {
    StrataError::InvalidArgument(e.to_string())
}

/// Measures `spec` at `points` (median of three each) and fits it.
pub(crate) fn measured_fit(
    spec: &ModelSpec,
    points: &[Vec<f64>],
    mut measure: impl FnMut(&[f64]) -> Result<f64, StrataError>,
) -> Result<Model, StrataError> {
    let mut failed = None;
    let samples = Profiler::default().profile_measured(
        points,
        |x| {
            if failed.is_some() {
                return f64::NAN;
            }
            measure(x).unwrap_or_else(|e| {
                failed = Some(e);
                f64::NAN
            })
        },
        |_| (),
    );
    if let Some(e) = failed {
        return Err(e);
    }
    fit(spec, &samples, 0.95).map_err(bad)
}

/// Seconds per run for this member, for a run every member of `m`'s group makes together.
/// The first run, timed from a barrier, warms up; if the slowest member took less than
/// [`SAMPLE_SECONDS`], the group repeats the run (up to 32 times) and the mean of the
/// repetitions is the sample, since a run of a few microseconds is mostly the clock's and the
/// wake-ups' noise. `prepare(r)` makes run `r`'s input outside the timing.
pub(crate) fn time_repeated<T>(
    m: &Member,
    mut prepare: impl FnMut(usize) -> T,
    mut run: impl FnMut(T) -> Result<(), StrataError>,
) -> Result<f64, StrataError> {
    let input = prepare(0);
    m.barrier()?;
    let t0 = Instant::now();
    run(input)?;
    let first = t0.elapsed().as_secs_f64();
    let slowest = m.combine_one(Combine::Reduce, Op::Max, first)?;
    let more = ((SAMPLE_SECONDS / slowest).ceil() as usize).clamp(1, 33) - 1;
    if more == 0 {
        return Ok(first);
    }
    let inputs: Vec<T> = (1..=more).map(&mut prepare).collect();
    m.barrier()?;
    let t0 = Instant::now();
    for input in inputs {
        run(input)?;
    }
    Ok(t0.elapsed().as_secs_f64() / more as f64)
}

/// The shortest sample [`time_repeated`] times in one go.
pub(crate) const SAMPLE_SECONDS: f64 = 0.002;
