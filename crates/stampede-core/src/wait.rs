//! How long a blocking operation waits, and how it spins before it parks.

use std::time::Instant;

/// How long an operation may block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Block until the operation can complete.
    Forever,
    /// Return at once.
    Never,
    /// Block at most this long.
    For(std::time::Duration),
}

impl Wait {
    pub(crate) fn deadline(self) -> (bool, Option<Instant>) {
        match self {
            Wait::Forever => (true, None),
            Wait::Never => (false, None),
            Wait::For(d) => (true, Some(crate::sync::deadline(d))),
        }
    }
}

/// Busy-wait rounds before a blocking get parks, by default: a hand-off often completes
/// within them, saving two context switches. Under loom every round is a scheduling point,
/// so few.
#[cfg(not(loom))]
pub(crate) const SPIN_ROUNDS: u32 = 64;
#[cfg(loom)]
pub(crate) const SPIN_ROUNDS: u32 = 2;

/// Round `round` of `rounds`: spins at first, then yields.
pub(crate) fn spin(round: u32, rounds: u32) {
    if round < rounds / 2 {
        for _ in 0..(1 << round.min(6)) {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}
