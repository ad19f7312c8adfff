//! The auto-calibration toolkit (Brewer's thesis, seed 002, ch. 2-5): statistical cost models
//! of several implementations of one operation, calibrated automatically on the deployment
//! they run on, used to pick the fastest implementation for an input and the best value of a
//! parameter.
//!
//! A [`ModelSpec`] names an implementation's explanatory variables, with the ranges it is
//! calibrated over, and candidate basis terms. A [`Profiler`] times the implementation at
//! [`sample_points`] (corners and edges of the ranges, then random points), taking the median
//! of three runs per point. [`fit`] solves the least-squares problem weighted by 1/y², so the
//! model minimises relative error, computes each coefficient's confidence interval from
//! Student's t, and drops the terms whose interval contains zero. [`Model::verify`] reports
//! the mean relative error on independent samples. [`ModelFile`] stores models with the
//! [`Fingerprint`] of the deployment; a [`Selector`] evaluates every model for an input and
//! returns the predicted fastest, and [`argmin_integer`] and [`crossover`] optimise over a
//! model.
//!
//! ```
//! use stampede_tune::{fit, ModelSpec, Sample, Selector, TermSpec};
//! let spec = |name: &str| {
//!     ModelSpec::new(name)
//!         .variable("n", 1.0, 1e4, true)
//!         .term(TermSpec::one())
//!         .term(TermSpec::var("n"))
//!         .build()
//!         .unwrap()
//! };
//! // Two implementations: a cheap start and a steep slope, or the other way round.
//! let measure = |a: f64, b: f64| -> Vec<Sample> {
//!     (1..=40).map(|i| { let n = i as f64 * 250.0; Sample { x: vec![n], y: a + b * n } }).collect()
//! };
//! let linear = fit(&spec("linear"), &measure(1.0, 0.01), 0.95).unwrap();
//! let indexed = fit(&spec("indexed"), &measure(30.0, 0.001), 0.95).unwrap();
//! let pick = Selector::new(vec![linear, indexed]);
//! assert_eq!(pick.choose(&[100.0]).unwrap().name, "linear");
//! assert_eq!(pick.choose(&[9000.0]).unwrap().name, "indexed");
//! assert!(pick.choose(&[1e6]).is_none()); // outside every model's calibrated range
//! ```

mod error;
mod fit;
mod model;
mod profile;
mod select;
mod spec;
mod store;

pub use error::TuneError;
pub use fit::fit;
pub use model::{Model, Sample, Verification};
pub use profile::{sample_points, Profiler, Progress};
pub use select::{argmin_integer, crossover, Choice, Selector};
pub use spec::{Factor, ModelSpec, SpecBuilder, Term, TermSpec, Variable};
pub use store::{Fingerprint, ModelFile, StalePolicy};

// The guide's examples, which also use the sort library, run as doc tests of
// `stampede-tuned`.
