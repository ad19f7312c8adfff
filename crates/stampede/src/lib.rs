#![doc = include_str!("../../../README.md")]
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]

pub use stampede_core::*;

/// Distribution: address spaces of one application across processes and hosts, over
/// Eclipse Zenoh (the `stampede-net` crate). Behind the default `net` feature, so a
/// local-only program can leave Zenoh out with `default-features = false`.
#[cfg(feature = "net")]
pub mod net {
    pub use stampede_net::{
        validate_endpoint, Config, Kind, Mode, NameEvent, NameRecord, NameWatch, NetError, Space,
        SpaceStats, SpaceWatermark, Tls, ZoneWatermark, DEFAULT_PEER_LISTEN,
    };
}
