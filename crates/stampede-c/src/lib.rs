//! The C API of Stampede.
//!
//! A C ABI over the runtime, built as `libstampede_c.so` and `libstampede_c.a`, with the header
//! `include/stampede.h` generated from this crate. Handles are opaque pointers with explicit
//! free functions; calls return an `stp_status` and leave a message in `stp_last_error()`;
//! panics are caught at the boundary. The same calls work on the embedded runtime and on an
//! address space joined to a distributed application, and on containers found there by name.
//!
//! Items are shared with Rust and Python unchanged: bytes, text and n-dimensional arrays
//! carry the same type tags and layout in every language.

#![allow(clippy::missing_safety_doc)] // every exported function documents its contract in `# Safety`

#[cfg(target_os = "linux")]
mod cluster;
mod correlate;
mod error;
mod events;
mod item;
mod loan;
mod observe;
mod pacing;
#[cfg(target_os = "linux")]
mod pthread;
mod space;
mod stm;

#[cfg(target_os = "linux")]
pub use cluster::*;
pub use correlate::*;
pub use error::{stp_last_error, stp_last_neighbors, stp_neighbors, stp_status, stp_status_name};
pub use events::*;
pub use item::*;
pub use loan::*;
pub use observe::*;
pub use pacing::*;
#[cfg(target_os = "linux")]
pub use pthread::*;
pub use space::*;
pub use stm::*;

/// The library's version, e.g. "0.1.0". Static; never NULL.
#[no_mangle]
pub extern "C" fn stp_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

// Handles are shared between C threads, so every one must be Send and Sync.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<stp_runtime>();
    shared::<stp_config>();
    shared::<stp_task>();
    shared::<stp_channel>();
    shared::<stp_queue>();
    shared::<stp_register>();
    shared::<stp_channel_in>();
    shared::<stp_channel_out>();
    shared::<stp_queue_in>();
    shared::<stp_queue_out>();
    shared::<stp_register_in>();
    shared::<stp_register_out>();
    shared::<stp_item>();
    shared::<stp_pacer>();
    shared::<stp_subscription>();
    shared::<stp_correlator>();
    shared::<stp_set>();
};

#[cfg(target_os = "linux")]
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<stp_cluster>();
    shared::<stp_thread>();
    shared::<stp_cluster_mutex>();
    shared::<stp_cluster_cond>();
    shared::<stp_cluster_sem>();
    shared::<stp_cluster_barrier>();
    shared::<stp_cluster_segment>();
};
