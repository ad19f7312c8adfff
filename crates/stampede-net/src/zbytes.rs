//! Moving message bytes between Zenoh and Stampede without copying large items.

use bytes::Bytes;
use zenoh::bytes::ZBytes;

use crate::wire::Encoded;

/// A received payload that is one contiguous slice, kept alive as the owner of a [`Bytes`].
struct Owner(ZBytes);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        self.0.slices().next().unwrap_or(&[])
    }
}

/// The payload as `Bytes`: zero-copy when Zenoh delivered it in one piece (large messages,
/// shared memory), otherwise one copy.
///
/// Payloads in shared memory are copied: Zenoh may reuse such memory if this process stalls
/// long enough to miss its watchdog, and stored items must never change.
pub(crate) fn to_bytes(z: &ZBytes) -> Bytes {
    if z.as_shm().is_some() {
        return Bytes::from(z.to_bytes().into_owned());
    }
    let mut slices = z.slices();
    match (slices.next(), slices.next()) {
        (None, _) => Bytes::new(),
        (Some(s), None) if s.len() < 4096 => Bytes::copy_from_slice(s),
        (Some(_), None) => Bytes::from_owner(Owner(z.clone())),
        _ => Bytes::from(z.to_bytes().into_owned()),
    }
}

/// An encoded message as a payload: the header and the item's bytes as two slices.
pub(crate) fn from_encoded(e: Encoded) -> ZBytes {
    match &e.tail {
        None => ZBytes::from(e.head),
        Some(t) if t.len() < 4096 => ZBytes::from(e.to_vec()),
        Some(t) => {
            let t = t.clone();
            let mut w = ZBytes::writer();
            w.append(ZBytes::from(e.head));
            w.append(ZBytes::from(t));
            w.finish()
        }
    }
}
