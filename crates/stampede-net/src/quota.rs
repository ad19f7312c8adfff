//! What one other address space may make an owner hold: the limits that keep an owner up
//! for everyone else when a peer sends oversized items, opens connections without end or
//! ignores its put window (enforced in `guard`).

/// An owner's quotas for each other address space (see [`Config::quotas`]). A refusal is
/// a typed error in the requesting space and counts in the owner's
/// `SpaceStats::quota_refused`.
///
/// [`Config::quotas`]: crate::Config::quotas
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quotas {
    /// The largest item another space may put here, in bytes: a larger one is refused
    /// with `PutErrorKind::TooLarge`, and Zenoh drops a message much larger still before
    /// it is whole. Items lent in shared memory count at their full size.
    pub max_item_bytes: usize,
    /// The most connections one other space may hold here at once; the next attach is
    /// `StmError::TooManyConnections`.
    pub max_connections: usize,
    /// The most puts one connection may have waiting here for room in a full container.
    /// A putter keeps at most its window (1,024 puts) in flight, so only a peer that
    /// ignores it gets here; the puts beyond are refused as `Full`.
    pub max_waiting_puts: usize,
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_item_bytes: 512 << 20,
            max_connections: 4096,
            max_waiting_puts: 4096,
        }
    }
}

impl Quotas {
    /// The Zenoh message size beyond which the transport drops a message: an item at the
    /// limit, with room for its request around it.
    pub(crate) fn max_message_bytes(&self) -> usize {
        self.max_item_bytes.saturating_add(1 << 20)
    }
}
