//! What the toolkit reports.

use std::fmt;

/// Why a model could not be specified, fitted, stored or used.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TuneError {
    /// A specification names a variable twice, a term names an unknown one, or a range is
    /// empty.
    Spec(String),
    /// Fewer usable samples than terms, a non-positive measurement, or a singular design.
    Fit(String),
    /// An input has the wrong number of values.
    Input(String),
    /// A model file could not be read or written.
    Store(String),
    /// A model file was calibrated elsewhere: its fingerprint differs from this deployment's.
    Stale {
        /// What differs, as `field: stored -> here`.
        differences: Vec<String>,
    },
}

impl fmt::Display for TuneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TuneError::Spec(m) => write!(f, "model specification: {m}"),
            TuneError::Fit(m) => write!(f, "fitting: {m}"),
            TuneError::Input(m) => write!(f, "input: {m}"),
            TuneError::Store(m) => write!(f, "model file: {m}"),
            TuneError::Stale { differences } => write!(
                f,
                "the models were calibrated on another deployment ({})",
                differences.join("; ")
            ),
        }
    }
}

impl std::error::Error for TuneError {}
