//! What members send each other, as items of the receiver's inbox channel.
//!
//! An item's timestamp names it uniquely in the inbox: `counter << 18 | kind << 16 |
//! sender`. For a collective message the counter is the step of the group's sequence
//! (every member runs the same steps in the same order), so a member running ahead never
//! mixes its messages with the current step's; for a transfer packet it counts the
//! packets from that sender to that receiver; a notice (the sender left, or failed an
//! operation) is sent at most once per kind of notice.

use stampede_core::Timestamp;

/// Members per group: the sender's rank takes 16 bits of a timestamp.
pub(crate) const MAX_MEMBERS: usize = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Collective = 0,
    Packet = 1,
    Notice = 2,
}

pub(crate) fn stamp(counter: u64, kind: Kind, sender: usize) -> Timestamp {
    ((counter << 18) | ((kind as u64) << 16) | sender as u64) as Timestamp
}

/// The counter, kind and sender of a timestamp; `None` for one no member makes.
pub(crate) fn unstamp(ts: Timestamp) -> Option<(u64, Kind, usize)> {
    let t = ts as u64;
    let kind = match t >> 16 & 3 {
        0 => Kind::Collective,
        1 => Kind::Packet,
        2 => Kind::Notice,
        _ => return None,
    };
    Some((t >> 18, kind, (t & 0xffff) as usize))
}

/// What a notice says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Notice {
    /// The sender left the group.
    Left,
    /// The sender failed an operation; the group cannot go on.
    Aborted(String),
}

impl Notice {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Notice::Left => vec![0],
            Notice::Aborted(why) => {
                let mut out = vec![1];
                out.extend_from_slice(why.as_bytes());
                out
            }
        }
    }

    pub fn decode(b: &[u8]) -> Result<Notice, String> {
        match b.split_first() {
            Some((0, _)) => Ok(Notice::Left),
            Some((1, why)) => Ok(Notice::Aborted(String::from_utf8_lossy(why).into_owned())),
            _ => Err("an unknown notice".into()),
        }
    }

    /// Its timestamp counter: one of each kind per member.
    pub fn counter(&self) -> u64 {
        match self {
            Notice::Left => 0,
            Notice::Aborted(_) => 1,
        }
    }
}

/// The parts a collective message may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// A subtree's combined value, child to parent.
    Up = 0,
    /// Everything left of the receiver's subtree (scans).
    Prefix = 1,
    /// Everything right of the receiver's subtree (back-scans).
    Suffix = 2,
    /// The whole group's value (reductions, broadcasts).
    Total = 3,
}

/// A collective message: the signature of the operation (so members that disagree are
/// told), then tagged parts.
#[derive(Debug, Default)]
pub(crate) struct Message {
    pub signature: u32,
    pub parts: [Option<Vec<u8>>; 4],
}

impl Message {
    pub fn new(signature: u32) -> Message {
        Message {
            signature,
            parts: Default::default(),
        }
    }

    pub fn with(mut self, part: Part, value: Option<Vec<u8>>) -> Message {
        self.parts[part as usize] = value;
        self
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.signature.to_le_bytes().to_vec();
        for (tag, p) in self.parts.iter().enumerate() {
            if let Some(p) = p {
                out.push(tag as u8);
                out.extend_from_slice(&(p.len() as u32).to_le_bytes());
                out.extend_from_slice(p);
            }
        }
        out
    }

    pub fn decode(mut b: &[u8]) -> Result<Message, String> {
        let take = |b: &mut &[u8], n: usize| -> Result<Vec<u8>, String> {
            if b.len() < n {
                return Err("a truncated collective message".into());
            }
            let (head, rest) = b.split_at(n);
            *b = rest;
            Ok(head.to_vec())
        };
        let sig = take(&mut b, 4)?;
        let mut m = Message::new(u32::from_le_bytes(sig.try_into().expect("four bytes")));
        while !b.is_empty() {
            let tag = take(&mut b, 1)?[0] as usize;
            let len = take(&mut b, 4)?;
            let len = u32::from_le_bytes(len.try_into().expect("four bytes")) as usize;
            if tag >= m.parts.len() {
                return Err(format!("an unknown part {tag}"));
            }
            m.parts[tag] = Some(take(&mut b, len)?);
        }
        Ok(m)
    }

    pub fn take(&mut self, part: Part) -> Option<Vec<u8>> {
        self.parts[part as usize].take()
    }
}

/// A packet of a block transfer: which block, its whole length, where this piece goes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Packet<'a> {
    pub tag: u64,
    pub total: u64,
    pub offset: u64,
    pub data: &'a [u8],
}

impl Packet<'_> {
    pub const HEADER: usize = 24;

    pub fn encode(tag: u64, total: u64, offset: u64, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::HEADER + data.len());
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&total.to_le_bytes());
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(data);
        out
    }

    pub fn decode(b: &[u8]) -> Result<Packet<'_>, String> {
        if b.len() < Self::HEADER {
            return Err("a truncated packet".into());
        }
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"));
        Ok(Packet {
            tag: word(0),
            total: word(8),
            offset: word(16),
            data: &b[Self::HEADER..],
        })
    }
}

/// A 32-bit FNV-1a hash: the signature of an operation's description.
pub(crate) fn signature(description: &str) -> u32 {
    description.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn stamps_round_trip(counter in 0u64..(1 << 45), kind in 0u8..3, sender in 0usize..MAX_MEMBERS) {
            let kind = [Kind::Collective, Kind::Packet, Kind::Notice][kind as usize];
            let ts = stamp(counter, kind, sender);
            prop_assert!(ts >= 0);
            prop_assert_eq!(unstamp(ts), Some((counter, kind, sender)));
        }

        #[test]
        fn messages_round_trip(sig: u32, parts in proptest::collection::vec(proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)), 4)) {
            let mut m = Message::new(sig);
            for (i, p) in parts.iter().enumerate() {
                m.parts[i] = p.clone();
            }
            let back = Message::decode(&m.encode()).unwrap();
            prop_assert_eq!(back.signature, sig);
            prop_assert_eq!(back.parts.to_vec(), parts);
        }

        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Message::decode(&bytes);
            let _ = Packet::decode(&bytes);
            let _ = Notice::decode(&bytes);
        }
    }
}

/// Every decoder on `data`: none may panic, and what one accepts encodes to bytes that
/// decode and encode again to the same bytes. The fuzz target's body (`fuzz/`).
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz(data: &[u8]) {
    if let Ok(n) = Notice::decode(data) {
        let once = n.encode();
        let again = Notice::decode(&once).expect("an encoded notice decodes");
        assert_eq!(again, n);
        assert_eq!(again.encode(), once);
    }
    if let Ok(m) = Message::decode(data) {
        let once = m.encode();
        let again = Message::decode(&once).expect("an encoded message decodes");
        assert_eq!(again.encode(), once);
    }
    if let Ok(p) = Packet::decode(data) {
        let once = Packet::encode(p.tag, p.total, p.offset, p.data);
        assert_eq!(once, data, "a packet's encoding is canonical");
        assert_eq!(Packet::decode(&once), Ok(p));
    }
}
