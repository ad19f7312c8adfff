//! The owner's side of pushes: every item stored in a channel that other spaces read is
//! numbered (its *arrival number*) and sent ahead to each of those spaces, so a reader that
//! has every number up to `n` knows every item stored up to then and answers its gets itself
//! (see `view`). Replies that reveal a channel's state carry its latest arrival number, so a
//! reader never answers from a view older than what it was already told.
//!
//! Registers are fed the same way: each write is pushed (as its write number and the newest
//! value) to the spaces that read the register (see `latest`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use stampede_core::{provider, Channel, Named, Register, Timestamp};
use zenoh::Wait as _;

use crate::publishers::Publishers;
use crate::space::{lock, Shared};
use crate::wire::{self, WireItem};
use crate::zbytes;

/// New items waiting to be pushed; more are skipped (and counted), and readers see the gap.
const BACKLOG: usize = 1024;

/// One arrival waiting for the pusher: (channel, timestamp, arrival number).
type Arrival = (u64, Timestamp, u64);

/// The channels owned here whose items are pushed, and the pusher's inbox.
pub(crate) struct Feeds {
    channels: Mutex<HashMap<u64, Arc<Feed>>>,
    tx: Sender<Arrival>,
    /// A publisher of pushes per reading space.
    pushes: Publishers,
}

/// One pushed channel or register.
#[derive(Default)]
struct Feed {
    /// The last arrival number given (a register's: the newest write pushed).
    arrivals: AtomicU64,
    /// The spaces with input connections to the channel, with how many each has.
    readers: Mutex<BTreeMap<String, usize>>,
}

impl Feeds {
    /// The feeds, and the inbox the pusher thread ([`run`]) drains.
    pub(crate) fn new() -> (Feeds, Receiver<Arrival>) {
        let (tx, rx) = crossbeam_channel::bounded(BACKLOG);
        let feeds = Feeds {
            channels: Mutex::default(),
            tx,
            pushes: Publishers::default(),
        };
        (feeds, rx)
    }

    fn feed(&self, container: u64) -> Option<Arc<Feed>> {
        lock(&self.channels).get(&container).cloned()
    }

    /// Numbers and pushes the new items of owned channel `container` from now on (once per
    /// channel). Items stored before are in the snapshot a reader takes (`Reply::Visible`).
    pub(crate) fn hook(&self, sh: &Shared, container: u64, ch: &Channel) {
        let feed = {
            let mut m = lock(&self.channels);
            if m.contains_key(&container) {
                return;
            }
            let f = Arc::new(Feed::default());
            m.insert(container, f.clone());
            f
        };
        let tx = self.tx.clone();
        let skipped = sh.counters.push_skipped.clone();
        let numbered = Arc::downgrade(&feed);
        let hooked = ch.on_arrival(move |ts| {
            let Some(feed) = numbered.upgrade() else {
                return;
            };
            let seq = feed.arrivals.fetch_add(1, Ordering::SeqCst) + 1;
            // The putting thread never waits for the network: a full inbox skips the push,
            // which its readers see as a gap in the numbers.
            if tx.try_send((container, ts, seq)).is_err() {
                skipped.fetch_add(1, Ordering::Relaxed);
            }
        });
        if let Err(e) = hooked {
            // Owned channels live here, so this does not happen; readers then ask for items.
            lock(&self.channels).remove(&container);
            tracing::warn!(container, "items of this channel are not pushed: {e}");
        }
    }

    /// Pushes the writes of owned register `container` from now on (once per register).
    pub(crate) fn hook_register(&self, sh: &Shared, container: u64, reg: &Register) {
        {
            let mut m = lock(&self.channels);
            if m.contains_key(&container) {
                return;
            }
            m.insert(container, Arc::new(Feed::default()));
        }
        let tx = self.tx.clone();
        let skipped = sh.counters.push_skipped.clone();
        let hooked = provider::on_write(reg, move |seq| {
            // A skipped push only makes readers ask the owner.
            if tx.try_send((container, 0, seq)).is_err() {
                skipped.fetch_add(1, Ordering::Relaxed);
            }
        });
        if let Err(e) = hooked {
            lock(&self.channels).remove(&container);
            tracing::warn!(container, "writes of this register are not pushed: {e}");
        }
    }

    /// Whether new items of `container` are pushed.
    pub(crate) fn is_pushed(&self, container: u64) -> bool {
        lock(&self.channels).contains_key(&container)
    }

    /// The last arrival number of `container` (0 if none were numbered).
    pub(crate) fn arrivals(&self, container: u64) -> u64 {
        self.feed(container)
            .map_or(0, |f| f.arrivals.load(Ordering::SeqCst))
    }

    /// `space` attached an input connection to `container`: its items go there too. Call
    /// before reading the arrival number of a snapshot for that connection.
    pub(crate) fn reader_attached(&self, container: u64, space: &str) {
        if let Some(f) = self.feed(container) {
            *lock(&f.readers).entry(space.to_owned()).or_default() += 1;
        }
    }

    /// `space` detached an input connection from `container`.
    pub(crate) fn reader_detached(&self, container: u64, space: &str) {
        if let Some(f) = self.feed(container) {
            let mut r = lock(&f.readers);
            if let Some(n) = r.get_mut(space) {
                *n -= 1;
                if *n == 0 {
                    r.remove(space);
                }
            }
        }
    }

    /// This space is leaving: its push publishers go.
    pub(crate) fn close(&self) {
        self.pushes.close();
    }

    /// `space` left: nothing more is pushed there.
    pub(crate) fn space_left(&self, space: &str) {
        for f in lock(&self.channels).values() {
            lock(&f.readers).remove(space);
        }
        self.pushes.forget(space);
    }

    fn readers(&self, container: u64) -> Vec<String> {
        self.feed(container)
            .map(|f| lock(&f.readers).keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// The pusher thread: sends each arrival to the readers of its channel until the space goes.
pub(crate) fn run(sh: Weak<Shared>, rx: Receiver<Arrival>) {
    loop {
        let next = rx.recv_timeout(Duration::from_secs(1));
        let Some(sh) = sh.upgrade() else { return };
        match next {
            Ok((container, ts, seq)) => push(&sh, container, ts, seq),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// Sends arrival `seq` (the item at `ts`) of `container` to its current readers. An item
/// reclaimed meanwhile goes as its number alone, so the numbers stay whole.
fn push(sh: &Shared, container: u64, ts: Timestamp, seq: u64) {
    let readers = sh.feeds.readers(container);
    if readers.is_empty() {
        return;
    }
    let msg = match sh.owned(container) {
        Some(Named::Channel(ch)) => channel_push(sh, &ch, container, ts, seq, readers.len()),
        Some(Named::Register(reg)) => match register_push(sh, &reg, container) {
            Some(m) => m,
            None => return,
        },
        _ => return,
    };
    for r in readers {
        if sh.is_dead(&r) {
            continue;
        }
        let key = format!("{}/{}", sh.key("push", &r), sh.id);
        let f = zbytes::frame(&sh.counters.sends, msg.clone());
        // Blocking here only delays later pushes: puts never wait for this thread.
        let sent = sh.feeds.pushes.get(&sh.session, key).and_then(|p| {
            p.put(f.payload)
                .attachment(f.attachment)
                .wait()
                .map_err(|e| crate::error::zenoh_text(&e))
        });
        match sent {
            Ok(()) => sh.counters.pushed.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                tracing::debug!(reader = r, "push not sent: {e}");
                sh.counters.push_skipped.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

/// The push of arrival `seq` of channel `container`.
fn channel_push(
    sh: &Shared,
    ch: &Channel,
    container: u64,
    ts: Timestamp,
    seq: u64,
    readers: usize,
) -> wire::Encoded {
    let stored = provider::stored(ch, ts);
    wire::encode_push(&wire::Push {
        container,
        seq,
        ts,
        counted: stored.as_ref().is_some_and(|s| s.1),
        item: stored.map(|(item, _)| WireItem {
            tag: item.tag(),
            // Several readers get one buffer, copied into shared memory at most once.
            data: if readers > 1 {
                zbytes::shared(&sh.counters.sends, &sh.session, item.wire())
            } else {
                item.wire().clone()
            },
        }),
    })
}

/// The push of the newest value of register `container`, unless it went already: writes
/// that follow each other faster than they are sent go as the last of them.
fn register_push(sh: &Shared, reg: &Register, container: u64) -> Option<wire::Encoded> {
    let (seq, item) = reg.peek()?;
    let feed = sh.feeds.feed(container)?;
    if feed.arrivals.fetch_max(seq, Ordering::SeqCst) >= seq {
        return None;
    }
    Some(wire::encode_push(&wire::Push {
        container,
        seq,
        ts: 0,
        counted: false,
        item: Some(WireItem {
            tag: item.tag(),
            data: item.wire().clone(),
        }),
    }))
}
