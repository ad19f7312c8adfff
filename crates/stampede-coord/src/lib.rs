//! The coordination layer (seed 004): programs written as steps that say only what they get
//! and put, run on one work-stealing [`Executor`].
//!
//! **Concurrent Collections** ([`Graph`]): item collections map tags to values, written once
//! each; tag collections prescribe step collections, so putting a tag runs a step instance for
//! it; steps get items by tag and put items and tags. A step whose get finds nothing does not
//! block a worker: it is suspended and run again when the item arrives, or, with dependency
//! tuning ([`StepCollection::depends`]), not started until its inputs exist. Values are
//! Stampede [`Item`](stampede_core::Item)s, so one value type runs through Space-Time Memory
//! and the coordination layer.
//!
//! **Across address spaces** (the default `net` feature): every process of a Stampede
//! application builds the same graph and joins it by name and rank (`Graph::distribute`);
//! placement tuners ([`StepCollection::compute_on`], [`ItemCollection::home`]) say where
//! instances run and items live, and the environment's `wait` covers every space.
//!
//! ```
//! use stampede_coord::{Executor, Graph, Tag};
//! let g = Graph::new(Executor::new(2));
//! let squares = g.items("squares");
//! let numbers = g.tags("numbers");
//! let sq = squares.clone();
//! let square = g.steps("square", move |ctx, tag| {
//!     let n = tag.int(0);
//!     ctx.put(&sq, tag.clone(), (n * n).to_le_bytes().to_vec());
//!     Ok(())
//! });
//! numbers.prescribes(&square);
//! for n in 0..10 {
//!     g.put_tag(&numbers, Tag::from(n));
//! }
//! g.wait().unwrap();
//! let nine = g.get(&squares, Tag::from(3)).unwrap().unwrap();
//! assert_eq!(nine.as_bytes().unwrap().as_ref(), &9i64.to_le_bytes());
//! ```

#[cfg(feature = "net")]
mod cluster;
mod error;
mod executor;
mod graph;
mod items;
mod placement;
pub mod snet;
mod steps;
mod tag;

pub use error::{GraphError, SnetError, StepError, Unmet};
pub use executor::{Executor, ExecutorStats, Priority, TraceEvent, WorkerStats};
pub use graph::Graph;
pub use items::ItemCollection;
pub use steps::{StepCollection, StepCtx, TagCollection};
pub use tag::{Tag, TagPart};

// The guides' examples are compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/cnc.md")]
struct Guide;

#[cfg(doctest)]
#[doc = include_str!("../../../docs/snet.md")]
struct SnetGuide;

/// Runs every decoder of this crate's message format on `data` (the fuzz targets, `fuzz/`):
/// none may panic, and what one accepts must survive a re-encoding.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_decoders(data: &[u8]) {
    cluster::fuzz(data)
}
