//! The names, capacities and encodings every participant and mixer agree on, whatever
//! language it is written in (see `docs/conference.md`).

use stampede_core::{Item, Timestamp, ZoneId};

/// The application joined unless told otherwise.
pub const DEFAULT_APP: &str = "conference";

/// Where the mixer listens (and participants connect) unless told otherwise.
pub const DEFAULT_ENDPOINT: &str = "tcp/127.0.0.1:7447";

/// The mixer's channel of composites.
pub const MIX_CHANNEL: &str = "conf/mix";

/// Composites the mixer's channel holds.
pub const MIX_CAPACITY: usize = 8;

/// The time zone of the mix channel and the clock. Composites are collected apart from the
/// cameras' frames, so a display that has not consumed a composite yet holds back only the
/// mix channel (whose capacity then stops the mixer), not every camera at once through the
/// shared watermark. Displays read across zones without noticing.
pub const MIX_ZONE: ZoneId = ZoneId(1);

/// The mixer's register holding the next slot it will compose.
pub const CLOCK_REGISTER: &str = "conf/clock";

/// The prefix of the participants' camera channels, `conf/cam/<id>`.
pub const CAM_PREFIX: &str = "conf/cam/";

/// Frames a camera channel holds: a camera runs at most this far ahead of what the mixer
/// (and, through garbage collection, the slowest display) has taken.
pub const CAM_CAPACITY: usize = 4;

/// The camera channel of participant `id`.
pub fn cam_name(id: u32) -> String {
    format!("{CAM_PREFIX}{id}")
}

/// The participant id of a camera channel's name: a decimal number of at least 1 without
/// leading zeros, so every id has exactly one name.
///
/// ```
/// use stampede_conference::parse_cam_name;
/// assert_eq!(parse_cam_name("conf/cam/12"), Some(12));
/// assert_eq!(parse_cam_name("conf/cam/012"), None);
/// assert_eq!(parse_cam_name("conf/cam/0"), None);
/// assert_eq!(parse_cam_name("conf/mix"), None);
/// ```
pub fn parse_cam_name(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(CAM_PREFIX)?;
    if rest.is_empty() || rest.starts_with('0') || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

/// The clock register's value: the next slot, 8 bytes little-endian, as raw bytes.
pub fn clock_item(next: Timestamp) -> Item {
    Item::from((next.max(0) as u64).to_le_bytes().to_vec())
}

/// The slot a clock register value holds, if it is one.
pub fn decode_clock(item: &Item) -> Option<Timestamp> {
    let b: [u8; 8] = item.as_bytes()?.as_ref().try_into().ok()?;
    Timestamp::try_from(u64::from_le_bytes(b)).ok()
}

/// How many slots ahead of the mixer's clock a camera starts: half a second of frames, at
/// least 2, so the mixer has time to take the newcomer in before its first frame is due.
///
/// ```
/// use stampede_conference::lead;
/// assert_eq!((lead(0.0), lead(1.0), lead(20.0), lead(25.0)), (2, 2, 10, 13));
/// ```
pub fn lead(fps: f64) -> Timestamp {
    if fps > 0.0 {
        ((fps * 0.5).ceil() as Timestamp).max(2)
    } else {
        2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_values_round_trip_as_raw_bytes() {
        let item = clock_item(1234);
        assert_eq!(item.tag(), stampede_core::TypeTag::BYTES);
        assert_eq!(item.as_bytes().unwrap().as_ref(), &1234u64.to_le_bytes());
        assert_eq!(decode_clock(&item), Some(1234));
        assert_eq!(decode_clock(&Item::from(vec![1u8, 2])), None);
        assert_eq!(decode_clock(&Item::from("12345678")), None);
    }

    #[test]
    fn camera_names_round_trip() {
        for id in [1, 7, 42, u32::MAX] {
            assert_eq!(parse_cam_name(&cam_name(id)), Some(id));
        }
        assert_eq!(parse_cam_name("conf/cam/"), None);
        assert_eq!(parse_cam_name("conf/cam/1/x"), None);
        assert_eq!(parse_cam_name("conf/cam/99999999999"), None);
    }
}
