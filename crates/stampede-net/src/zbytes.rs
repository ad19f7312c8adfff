//! Moving message bytes between Zenoh and Stampede without copying large items.
//!
//! A message that carries a large item goes out with the item's bytes alone as the Zenoh
//! payload and the header as the attachment (see [`Framed`]); smaller messages go as one
//! payload. Between processes of one host Zenoh places a large payload in shared memory.
//! On receipt the payload becomes the stored item's bytes as it is, and the buffer it came
//! in is remembered: when that item is sent on (pushed to readers, returned by a get,
//! echoed into another space's channel), Zenoh is handed the same buffer, which it forwards
//! as a shared-memory descriptor. Counted in `SpaceStats::sent_as_received` and
//! `sent_fresh`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;
use stampede_core::LoanBuffer;
use zenoh::bytes::ZBytes;
use zenoh::shm::{PosixShmProviderBackend, ShmProvider, ShmProviderState, ZShmMut};

use crate::wire::Encoded;

/// Below this size an item travels inside its message and is copied on receipt: keeping a
/// whole payload alive for it costs more.
const COPY_BELOW: usize = 4096;

/// Large items sent: in the buffer they arrived or were lent in, or handed to Zenoh afresh
/// (which copies them into shared memory or onto the link).
#[derive(Debug, Default)]
pub(crate) struct Sends {
    pub(crate) as_received: AtomicU64,
    pub(crate) fresh: AtomicU64,
}

/// A message as Zenoh carries it.
pub(crate) struct Framed {
    /// The item's bytes, or the whole message.
    pub(crate) payload: ZBytes,
    /// The header, when the payload is the item's bytes.
    pub(crate) attachment: Option<ZBytes>,
}

/// Received payloads by the address of their bytes, for sending them on as they are.
fn received() -> &'static Mutex<HashMap<usize, Weak<ZBytes>>> {
    static RECEIVED: OnceLock<Mutex<HashMap<usize, Weak<ZBytes>>>> = OnceLock::new();
    RECEIVED.get_or_init(Mutex::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A received single-slice payload, kept alive as the owner of an item's bytes.
struct Received(Arc<ZBytes>);

impl AsRef<[u8]> for Received {
    fn as_ref(&self) -> &[u8] {
        self.0.slices().next().unwrap_or(&[])
    }
}

impl Drop for Received {
    fn drop(&mut self) {
        let key = self.as_ref().as_ptr() as usize;
        let mut m = lock(received());
        if m.get(&key)
            .is_some_and(|w| w.as_ptr() == Arc::as_ptr(&self.0))
        {
            m.remove(&key);
        }
    }
}

/// The item's bytes from a single-slice payload, without a copy when large.
fn item_bytes(z: &ZBytes) -> Bytes {
    let mut slices = z.slices();
    match (slices.next(), slices.next()) {
        (Some(s), None) if s.len() >= COPY_BELOW => remembered(z.clone()),
        (Some(s), None) => Bytes::copy_from_slice(s),
        _ => Bytes::from(z.to_bytes().into_owned()),
    }
}

/// The payload as one buffer: zero-copy when Zenoh delivered it in one piece and it is
/// large, otherwise one copy. For messages without items.
pub(crate) fn to_bytes(z: &ZBytes) -> Bytes {
    let mut slices = z.slices();
    match (slices.next(), slices.next()) {
        (None, _) => Bytes::new(),
        (Some(s), None) if s.len() < COPY_BELOW => Bytes::copy_from_slice(s),
        (Some(_), None) => item_bytes(z),
        _ => Bytes::from(z.to_bytes().into_owned()),
    }
}

/// A received message's parts: with an attachment, the attachment is the header and the
/// payload the item's bytes; without, the payload is the whole message.
pub(crate) fn to_parts(payload: &ZBytes, attachment: Option<&ZBytes>) -> Encoded {
    match attachment {
        Some(head) => Encoded {
            head: Bytes::from(head.to_bytes().into_owned()),
            tail: Some(item_bytes(payload)),
        },
        None => to_bytes(payload).into(),
    }
}

/// Wraps `z` (one slice) as an item's bytes, remembered so sending the item hands Zenoh `z`.
fn remembered(z: ZBytes) -> Bytes {
    let z = Arc::new(z);
    if let Some(s) = z.slices().next() {
        lock(received()).insert(s.as_ptr() as usize, Arc::downgrade(&z));
    }
    Bytes::from_owner(Received(z))
}

/// A loan in the session's shared memory: sent as it is, without a copy.
struct ShmLoan(ZShmMut);

impl LoanBuffer for ShmLoan {
    fn as_slice(&self) -> &[u8] {
        &self.0
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.0
    }
    fn freeze(self: Box<Self>) -> Bytes {
        remembered(ZBytes::from(self.0))
    }
    fn in_place(&self) -> bool {
        true
    }
}

/// The session's shared-memory pool (the one Zenoh copies large messages into), once it is
/// ready. Its state is only polled: waiting on it would take the message that tells Zenoh's
/// own sending side the pool is ready.
pub(crate) fn shm_provider(
    session: &zenoh::Session,
) -> Option<Arc<ShmProvider<PosixShmProviderBackend>>> {
    // Made on first use, in the background: a new space asks once it joined.
    for _ in 0..200 {
        match session.get_shm_provider() {
            ShmProviderState::Ready(p) => return Some(p),
            ShmProviderState::Initializing(_) => {
                std::thread::sleep(std::time::Duration::from_millis(1))
            }
            ShmProviderState::Disabled | ShmProviderState::Error => return None,
        }
    }
    None
}

/// `len` bytes of the session's shared memory for an item, or `None` (no shared memory, or
/// the pool is full: the caller lends plain memory instead, and Zenoh copies it once).
pub(crate) fn lend(session: &zenoh::Session, len: usize) -> Option<Box<dyn LoanBuffer>> {
    use zenoh::shm::{Defragment, GarbageCollect};
    use zenoh::Wait as _;
    if len < COPY_BELOW {
        return None;
    }
    let provider = shm_provider(session)?;
    let buf = provider
        .alloc(len)
        .with_policy::<Defragment<GarbageCollect>>()
        .wait()
        .ok()?;
    Some(Box::new(ShmLoan(buf)))
}

/// `t` in a buffer Zenoh sends as it is: `t` itself if it arrived or was lent in one, else a
/// copy in the session's shared memory, made once for a message that goes to several
/// spaces (Zenoh would copy it for each; the copy counts in `sent_fresh`). `t` when there is
/// no room, or it is small.
pub(crate) fn shared(c: &Sends, session: &zenoh::Session, t: &Bytes) -> Bytes {
    if t.len() < COPY_BELOW || is_remembered(t) {
        return t.clone();
    }
    match lend(session, t.len()) {
        Some(mut buf) => {
            buf.as_mut_slice().copy_from_slice(t);
            c.fresh.fetch_add(1, Ordering::Relaxed);
            buf.freeze()
        }
        None => t.clone(),
    }
}

fn is_remembered(t: &Bytes) -> bool {
    lock(received())
        .get(&(t.as_ptr() as usize))
        .is_some_and(|w| w.strong_count() > 0)
}

/// The ZBytes for an item's bytes: the buffer they arrived in (or were lent in), if any.
fn item_payload(c: &Sends, t: &Bytes) -> ZBytes {
    let found = lock(received())
        .get(&(t.as_ptr() as usize))
        .and_then(Weak::upgrade)
        .filter(|z| z.slices().next().is_some_and(|s| s.len() == t.len()));
    match found {
        Some(z) => {
            c.as_received.fetch_add(1, Ordering::Relaxed);
            (*z).clone()
        }
        None => {
            c.fresh.fetch_add(1, Ordering::Relaxed);
            ZBytes::from(t.clone())
        }
    }
}

/// An encoded message as Zenoh sends it.
pub(crate) fn frame(c: &Sends, e: Encoded) -> Framed {
    match &e.tail {
        Some(t) if t.len() >= COPY_BELOW => Framed {
            payload: item_payload(c, t),
            attachment: Some(ZBytes::from(e.head)),
        },
        None => Framed {
            payload: ZBytes::from(e.head),
            attachment: None,
        },
        Some(_) => Framed {
            payload: ZBytes::from(e.to_vec()),
            attachment: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_received_item_is_sent_on_in_its_own_buffer() {
        let item = Bytes::from(vec![7u8; 10_000]);
        let c = Sends::default();
        let sent = frame(
            &c,
            Encoded {
                head: Bytes::from_static(b"head"),
                tail: Some(item.clone()),
            },
        );
        let got = to_parts(&sent.payload, sent.attachment.as_ref());
        assert_eq!(&got.head[..], b"head");
        let tail = got.tail.expect("the item");
        assert_eq!(tail, item);
        let again = frame(
            &c,
            Encoded {
                head: Bytes::from_static(b"h2"),
                tail: Some(tail.clone()),
            },
        );
        assert_eq!(c.fresh.load(Ordering::Relaxed), 1);
        assert_eq!(
            c.as_received.load(Ordering::Relaxed),
            1,
            "sent on as it came"
        );
        let s = again.payload.slices().next().unwrap();
        assert_eq!(s.as_ptr(), tail.as_ptr(), "the same buffer");
        drop(tail);
    }

    #[test]
    fn small_items_travel_inside_their_message() {
        let sent = frame(
            &Sends::default(),
            Encoded {
                head: Bytes::from_static(b"head"),
                tail: Some(Bytes::from_static(b"item")),
            },
        );
        assert!(sent.attachment.is_none());
        let got = to_parts(&sent.payload, None);
        assert_eq!(&got.to_vec()[..], b"headitem");
    }
}
