//! Self-tuning libraries (Brewer's thesis, ch. 4-5) on the Strata collectives: several
//! real implementations of one operation, whose cost models, calibrated on the deployment,
//! pick the implementation and its parameters for each input.
//!
//! [`sort`]: parallel sorting of `u32` keys held by the members of a group, by LSD radix
//! sort with 4-, 8-, 11- or 16-bit digits or by sample sort; [`SortLibrary`] calibrates a
//! model of each on the deployment and picks one per input.
//!
//! [`stencil`]: successive over-relaxation of a grid divided among the members by five
//! layouts, with ghost zones whose width (the extra rows) is a parameter.

mod calibrate;
pub mod factor;
pub mod sort;
mod sort_models;
pub mod stencil;
mod stencil_models;

pub use sort_models::{
    keys, spec, time_sort_member, time_threads, DigitModel, SortLibrary, DIGITS,
};
pub use stencil_models::{
    grid, stencil_spec, time_stencil_member, time_threads as time_stencil_threads, ExtraRowsModel,
    StencilLibrary, StencilMeasure, EXTRA, OMEGA,
};

// The tuning guide's examples are compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/tuning.md")]
struct Guide;
