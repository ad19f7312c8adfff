//! Calibration with a fallible measuring function: the libraries' runs can fail (a member
//! lost), and a failed run must stop the calibration rather than become a sample.

use stampede_strata::StrataError;
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
