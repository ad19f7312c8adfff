//! Strata (Brewer's thesis, seed 002, ch. 6-7): the synchronous global operations of a
//! group of tasks in SPMD style, over Space-Time Memory, so the members may live in one
//! address space or several.
//!
//! A [`Member`] joins a named group with its rank; every member then calls the same
//! operations in the same order. Each member owns an inbox channel in the group's zone and
//! puts into the others' (a put into another address space's channel is one message, with
//! no answer awaited); every message carries its step in the group's sequence in its
//! timestamp, so a member running ahead never confuses one operation's messages with
//! another's, and is reclaimed as soon as its receiver has read it.
//!
//! - [`Member::barrier`] (dissemination, or up and down the combining tree),
//!   [`Member::broadcast`], and [`Member::combine`]: reduce, scan and back-scan, inclusive
//!   or exclusive, with add, or, xor, max and min, over vectors element-wise, and
//!   segmented; each also split-phase (`start_*` returns a [`Pending`] to query and
//!   complete, so a member keeps serving transfers while it waits).
//! - The composites: [`Member::global_or`], `min`, `max`, `average`, `variance`, `median`.
//! - Block transfers ([`Member::send_block`], [`Member::recv_block`]): queued, their
//!   packets interleaved in a per-member pseudo-random order and paced by bandwidth
//!   matching; [`Member::all_to_all`] built from them as barrier-separated permutations.
//!
//! ```
//! use stampede_core::Runtime;
//! use stampede_strata::{Combine, GroupOptions, Member, Op};
//!
//! let rt = Runtime::new();
//! let sums: Vec<i64> = std::thread::scope(|s| {
//!     let handles: Vec<_> = (0..4)
//!         .map(|rank| {
//!             let rt = rt.clone();
//!             s.spawn(move || {
//!                 let m = Member::join(&rt, "doc", rank, 4, GroupOptions::default()).unwrap();
//!                 m.barrier().unwrap();
//!                 m.combine_one(Combine::Scan, Op::Add, rank as i64 + 1).unwrap()
//!             })
//!         })
//!         .collect();
//!     handles.into_iter().map(|h| h.join().unwrap()).collect()
//! });
//! assert_eq!(sums, [1, 3, 6, 10]);
//! ```

mod blocks;
mod collective;
mod composite;
mod error;
mod member;
/// Calibrated cost models of the collectives (the `models` feature).
#[cfg(feature = "models")]
pub mod models;
mod op;
mod ops;
mod tree;
mod wire;
mod xfer;

pub use collective::Pending;
pub use error::StrataError;
pub use member::{GroupOptions, Member, MemberStats};
pub use op::{Combine, Number, Op};
pub use ops::BarrierKind;
pub use xfer::Exchange;

// The guide's examples are compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/strata.md")]
struct Guide;

/// Runs every decoder of this crate's message format on `data` (the fuzz targets, `fuzz/`):
/// none may panic, and what one accepts must survive a re-encoding.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_decoders(data: &[u8]) {
    wire::fuzz(data)
}
