//! What an address space adds to its runtime's metrics, beyond its `SpaceStats`.

/// The named code that answers a space's samples, as JSON.
pub(crate) const SERVICE: &str = "stampede/metrics";
