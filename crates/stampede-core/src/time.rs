//! Virtual time.

/// A point in virtual time: an application-chosen index such as a frame or sample number.
///
/// Timestamps are not wall-clock time; [`Pacer`](crate::Pacer) maps them to real time when a
/// task wants to be paced.
pub type Timestamp = i64;

/// The virtual time of a task that only transforms its inputs. Never an item's timestamp.
///
/// ```
/// assert_eq!(stampede_core::INFINITY, i64::MAX);
/// ```
pub const INFINITY: Timestamp = Timestamp::MAX;

/// Identifies an independent time zone for garbage collection.
///
/// Streams whose timestamps are unrelated (audio samples and video frames, two unrelated
/// cameras) belong in different zones so that one never holds back the other's watermark.
/// Every container and task belongs to exactly one zone; [`ZoneId::DEFAULT`] unless chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneId(pub u32);

impl ZoneId {
    /// The zone of every task and container that does not choose one.
    pub const DEFAULT: ZoneId = ZoneId(0);
}

impl Default for ZoneId {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl std::fmt::Display for ZoneId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "zone {}", self.0)
    }
}

pub(crate) fn fmt_ts(ts: Timestamp) -> String {
    if ts == INFINITY {
        "INFINITY".to_owned()
    } else {
        ts.to_string()
    }
}
