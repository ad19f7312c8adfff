//! Stampede across processes and hosts, over Eclipse Zenoh.
//!
//! A [`Space`] (address space) is a process's runtime joined to a named application; it
//! dereferences to its [`Runtime`](stampede_core::Runtime). Containers live in the space
//! that created them and are registered by name; tasks in any space find them with
//! [`Runtime::lookup_channel`](stampede_core::Runtime::lookup_channel) and the others, and
//! use them through the same operations as local ones, with the same rules. Garbage
//! collection spans the application: each space reports the lowest of its own watermark
//! terms, and every space reclaims only below the lowest report. A space that leaves or
//! dies (noticed through Zenoh liveliness within the configured lease) releases its
//! connections, its virtual time and its held queue items, so the others go on.
//!
//! ```no_run
//! use std::time::Duration;
//! use stampede_core::{ContainerOptions, Selector, INFINITY};
//! use stampede_net::{Config, Space};
//!
//! // Process 1 owns the channel and produces.
//! let owner = Space::join("kiosk", Config::peer().listen("tcp/127.0.0.1:7447"))?;
//! let frames = owner.channel(ContainerOptions::bounded(8).name("video/frames"))?;
//! let digitizer = owner.task(0)?;
//! let out = digitizer.attach_output(&frames)?;
//! out.put(0, vec![0u8; 1024])?;
//!
//! // Process 2 finds it by name and consumes.
//! let user = Space::join("kiosk", Config::peer().connect("tcp/127.0.0.1:7447"))?;
//! let frames = user.lookup_channel("video/frames", Duration::from_secs(5))?;
//! let tracker = user.task(INFINITY)?;
//! let input = tracker.attach_input(&frames)?;
//! let (ts, frame) = input.get(Selector::NewestUnseen)?;
//! input.consume_until(ts)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

mod access;
mod code;
mod config;
mod endpoint;
mod error;
mod events;
mod feed;
mod guard;
mod intake;
mod latest;
mod marks;
mod metrics;
mod pipe;
mod publishers;
mod quota;
mod registrar;
mod remote;
mod server;
mod space;
mod view;
#[cfg(not(feature = "fuzzing"))]
mod wire;
/// The message format, public only to the fuzz target (`fuzz/`).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod wire;
mod zbytes;

pub use access::{Access, ANONYMOUS};
pub use code::{Call, InvokeError};
pub use config::{
    size_zenoh_runtime_in_main, zenoh_runtime_for_this_machine, Config, Mode, Tls,
    DEFAULT_PEER_LISTEN, ZENOH_RUNTIME_VAR,
};
pub use endpoint::validate_endpoint;
pub use error::NetError;
pub use quota::Quotas;
pub use space::{NameEvent, NameWatch, Space, SpaceStats, SpaceWatermark, ZoneWatermark};
pub use wire::{Kind, NameRecord};

// The Rust examples of the distribution guide run as this crate's doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/distribution.md")]
mod distribution_guide {}
