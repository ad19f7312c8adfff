//! Moving message bytes between Zenoh and Stampede without copying large items.
//!
//! A message that carries an item goes out as two slices, its header and the item's bytes
//! (see [`Encoded`]); Zenoh keeps them apart, placing a large item in shared memory between
//! processes of one host. On receipt the item's slice becomes the stored item's bytes as it
//! is: an item that crossed in shared memory is never copied.

use bytes::Bytes;
use zenoh::bytes::ZBytes;

use crate::wire::Encoded;

/// Below this size a slice is copied: keeping the whole payload alive for it costs more.
const COPY_BELOW: usize = 4096;

/// A received payload kept alive as the owner of one of its slices.
struct Owner(ZBytes, usize);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        self.0.slices().nth(self.1).unwrap_or(&[])
    }
}

fn slice(z: &ZBytes, i: usize, s: &[u8]) -> Bytes {
    if s.len() < COPY_BELOW {
        Bytes::copy_from_slice(s)
    } else {
        Bytes::from_owner(Owner(z.clone(), i))
    }
}

/// The payload as one buffer: zero-copy when Zenoh delivered it in one piece, otherwise one
/// copy. For messages without items.
pub(crate) fn to_bytes(z: &ZBytes) -> Bytes {
    let mut slices = z.slices();
    match (slices.next(), slices.next()) {
        (None, _) => Bytes::new(),
        (Some(s), None) => slice(z, 0, s),
        _ => Bytes::from(z.to_bytes().into_owned()),
    }
}

/// The payload as a message's parts: a header and an item's bytes received apart, each
/// zero-copy when large. Decoders take the parts as they are.
pub(crate) fn to_parts(z: &ZBytes) -> Encoded {
    let mut slices = z.slices();
    match (slices.next(), slices.next(), slices.next()) {
        (Some(head), Some(tail), None) => Encoded {
            head: slice(z, 0, head),
            tail: Some(slice(z, 1, tail)),
        },
        _ => to_bytes(z).into(),
    }
}

/// An encoded message as a payload: the header and the item's bytes as two slices.
pub(crate) fn from_encoded(e: Encoded) -> ZBytes {
    match &e.tail {
        None => ZBytes::from(e.head),
        Some(t) if t.len() < COPY_BELOW => ZBytes::from(e.to_vec()),
        Some(t) => {
            let t = t.clone();
            let mut w = ZBytes::writer();
            w.append(ZBytes::from(e.head));
            w.append(ZBytes::from(t));
            w.finish()
        }
    }
}
