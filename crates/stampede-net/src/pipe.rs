//! Puts into another space's channel, sent without waiting for the owner: the putter's
//! side. The owner's side is `intake`.
//!
//! A put is checked for everything this space can know itself (its timestamp, the task's
//! visibility, its own duplicates, a container seen closed, the owner seen leaving), waits
//! for a credit, and is published to the owner; it returns then. Its watermark term stays
//! until the owner's acknowledgement, which names the owner's marks that hold the item
//! (see `marks`). A refusal only the owner can see (another space's duplicate, a close
//! racing the put) comes back later and is reported by the connection's next put or flush.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use stampede_core::provider::{Put, PutHold};
use stampede_core::{Item, PutError, PutErrorKind, Timestamp, Wait, ZoneId, INFINITY};
use zenoh::Wait as _;

use crate::space::{lock, Shared};
use crate::wire::{self, Ack, ErrorCode, TaskRef, WireItem};
use crate::zbytes;

/// At most this many puts of one connection are unacknowledged at once...
const WINDOW_ITEMS: usize = 1024;
/// ...and at most this many bytes (one larger item may always go alone). A window of 64
/// items held 64 KiB streams to half the rate of this one (measured by `make bench`).
const WINDOW_BYTES: usize = 32 << 20;
/// How often a put waiting for a credit, or for the puts on their way, asks its interrupt
/// check.
const POLL: Duration = Duration::from_millis(50);
/// The own puts remembered for duplicates: an older duplicate is the owner's to refuse.
const REMEMBERED: usize = 4096;

/// One output connection's puts in flight to a remote channel.
pub(crate) struct Pipe {
    owner: String,
    container: u64,
    conn: u64,
    zone: ZoneId,
    task: TaskRef,
    /// Credits: a bounded channel takes at most its capacity at once.
    window: usize,
    publisher: zenoh::pubsub::Publisher<'static>,
    state: Mutex<State>,
    /// Signalled on every acknowledgement and failure.
    changed: Condvar,
    /// Held while a put is published, so puts leave in the order of their numbers.
    sending: Mutex<()>,
}

#[derive(Default)]
struct State {
    last: u64,
    flight: BTreeMap<u64, Flying>,
    bytes: usize,
    /// Refusals not reported yet.
    refused: VecDeque<PutError>,
    /// This connection's latest put timestamps at or above the task's visibility (at most
    /// [`REMEMBERED`]): a put at one of them again is this space's own duplicate.
    sent: BTreeSet<Timestamp>,
    closed: bool,
    /// Why nothing can be sent any more (the owner left).
    gone: Option<PutErrorKind>,
}

struct Flying {
    ts: Timestamp,
    item: Item,
    bytes: usize,
    hold: Option<PutHold>,
}

impl Pipe {
    /// A pipe for connection `conn` of `task` to `owner`'s channel of `capacity` (0:
    /// unbounded), registered with the space so acknowledgements find it.
    pub(crate) fn open(
        sh: &Shared,
        owner: &str,
        container: u64,
        conn: u64,
        task: TaskRef,
        capacity: u64,
    ) -> Result<Arc<Pipe>, String> {
        let publisher = sh
            .session
            .declare_publisher(sh.to_owner("put", owner))
            .congestion_control(zenoh::qos::CongestionControl::Block)
            .wait()
            .map_err(|e| crate::error::zenoh_text(&e))?;
        let window = match capacity {
            0 => WINDOW_ITEMS,
            c => (c as usize).min(WINDOW_ITEMS),
        };
        let pipe = Arc::new(Pipe {
            owner: owner.to_owned(),
            container,
            conn,
            zone: ZoneId(task.zone),
            task,
            window,
            publisher,
            state: Mutex::default(),
            changed: Condvar::new(),
            sending: Mutex::new(()),
        });
        lock(&sh.pipes).insert((owner.to_owned(), conn), Arc::downgrade(&pipe));
        Ok(pipe)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Sends `p`, waiting for a credit; returns once it is on its way.
    pub(crate) fn put(&self, sh: &Shared, mut p: Put<'_>) -> Result<u64, PutError> {
        let mut st = self.state();
        if let Some(e) = st.refused.pop_front() {
            return Err(e.with_unsent(p.ts, p.item));
        }
        let fail = |kind| {
            if kind == PutErrorKind::Unreachable {
                sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
            }
            Err(PutError::new(kind, p.ts, p.item.clone()))
        };
        if let Some(kind) = st.gone {
            return fail(kind);
        }
        if st.closed {
            return fail(PutErrorKind::Closed);
        }
        if p.ts == INFINITY {
            return fail(PutErrorKind::InvalidTimestamp);
        }
        if p.ts < p.visibility {
            return fail(PutErrorKind::BelowVisibility {
                visibility: p.visibility,
            });
        }
        // Below the visibility, a duplicate fails on the visibility already.
        st.sent = st.sent.split_off(&p.visibility);
        if st.sent.contains(&p.ts) {
            return fail(PutErrorKind::DuplicateTimestamp);
        }
        let bytes = p.item.wire().len();
        while st.flight.len() >= self.window
            || (!st.flight.is_empty() && st.bytes + bytes > WINDOW_BYTES)
        {
            // No credit: the owner's channel is full and reclaims only once this space's
            // raised mark (its puts answered since) reaches it.
            sh.hurry_marks(self.zone);
            if p.interrupted.is_some_and(|stop| stop()) {
                return fail(PutErrorKind::Interrupted);
            }
            if let Some(kind) = st.gone {
                return fail(kind);
            }
            st = self
                .changed
                .wait_timeout(st, POLL)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
        st.last += 1;
        let seq = st.last;
        let msg = wire::encode_send(&wire::Send {
            task: self.task.clone(),
            conn: self.conn,
            seq,
            vis: p.visibility,
            ts: p.ts,
            consumers: p.consumers.unwrap_or(0),
            item: WireItem {
                tag: p.item.tag(),
                data: p.item.wire().clone(),
            },
        });
        st.flight.insert(
            seq,
            Flying {
                ts: p.ts,
                item: p.item.clone(),
                bytes,
                hold: p.keep_hold(),
            },
        );
        st.bytes += bytes;
        st.sent.insert(p.ts);
        if st.sent.len() > REMEMBERED {
            st.sent.pop_first();
        }
        let sending = lock(&self.sending);
        drop(st);
        let f = zbytes::frame(&sh.counters.sends, msg);
        let sent = self
            .publisher
            .put(f.payload)
            .attachment(f.attachment)
            .wait();
        drop(sending);
        if let Err(e) = sent {
            tracing::warn!(owner = self.owner, "put not sent: {e}");
            sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
            let mut st = self.state();
            if let Some(f) = st.flight.remove(&seq) {
                st.bytes -= f.bytes;
                st.sent.remove(&f.ts);
            }
            return Err(PutError::new(PutErrorKind::Unreachable, p.ts, p.item));
        }
        sh.counters.puts_sent.fetch_add(1, Ordering::Relaxed);
        Ok(0)
    }

    /// The owner answered put `ack.seq`: stored, with every earlier one in flight (the
    /// owner stores a connection's puts in order and answers a refusal on its own, before
    /// any later put's answer), or refused.
    pub(crate) fn acked(&self, sh: &Shared, ack: &Ack) {
        let mut st = self.state();
        let Some((code, a, _, text)) = &ack.failure else {
            let later = match ack.seq.checked_add(1) {
                Some(next) => st.flight.split_off(&next),
                None => BTreeMap::new(),
            };
            let stored = std::mem::replace(&mut st.flight, later);
            if stored.is_empty() {
                return;
            }
            st.bytes -= stored.values().map(|f| f.bytes).sum::<usize>();
            drop(st);
            for f in stored.into_values() {
                // The owner's marks hold the item from here on: record the transfer before
                // the put's own term goes.
                sh.hold_moved(&self.owner, self.zone, f.ts, ack.marks);
                drop(f.hold);
            }
            self.changed.notify_all();
            return;
        };
        let Some(f) = st.flight.remove(&ack.seq) else {
            return;
        };
        st.bytes -= f.bytes;
        let kind = refusal(*code, *a).unwrap_or_else(|| {
            tracing::warn!(owner = self.owner, "put refused: {text}");
            PutErrorKind::Unreachable
        });
        st.closed |= kind == PutErrorKind::Closed;
        st.sent.remove(&f.ts);
        st.refused.push_back(PutError::deferred(kind, f.ts, f.item));
        drop(st);
        sh.counters.puts_refused.fetch_add(1, Ordering::Relaxed);
        drop(f.hold);
        self.changed.notify_all();
    }

    /// The owner left: every put in flight fails, and so does every later one.
    pub(crate) fn owner_left(&self, sh: &Shared) {
        let mut st = self.state();
        st.gone = Some(PutErrorKind::Unreachable);
        let flying = std::mem::take(&mut st.flight);
        st.bytes = 0;
        for f in flying.into_values() {
            st.refused
                .push_back(PutError::deferred(PutErrorKind::Unreachable, f.ts, f.item));
            sh.counters.puts_refused.fetch_add(1, Ordering::Relaxed);
        }
        drop(st);
        self.changed.notify_all();
    }

    /// Waits until nothing is in flight (or `limit` passed); reports one refusal.
    pub(crate) fn flush(&self, sh: &Shared, limit: Option<Duration>) -> Result<(), PutError> {
        let mut st = self.settle(sh, limit, None).expect("never interrupted");
        st.refused.pop_front().map_or(Ok(()), Err)
    }

    /// Before a put that waits for its answer, which follows the ones on their way: waits
    /// for them only as `p`'s own wait and interrupt check allow, and returns `p` with the
    /// wait left. One still in flight then fails it unsent, as a put into a full channel (or
    /// interrupted); so does a refusal they met, as a flush reports it.
    pub(crate) fn settle_for<'a>(&self, sh: &Shared, mut p: Put<'a>) -> Result<Put<'a>, PutError> {
        let start = Instant::now();
        let limit = match p.wait {
            Wait::Never => Some(Duration::ZERO),
            Wait::For(d) => Some(d),
            Wait::Forever => None,
        };
        let Some(mut st) = self.settle(sh, limit, p.interrupted) else {
            return Err(PutError::new(PutErrorKind::Interrupted, p.ts, p.item));
        };
        if let Some(e) = st.refused.pop_front() {
            return Err(e.with_unsent(p.ts, p.item));
        }
        if !st.flight.is_empty() {
            // The owner holds an earlier put for room: none for this one either.
            return Err(PutError::new(PutErrorKind::Full, p.ts, p.item));
        }
        drop(st);
        if let Wait::For(d) = p.wait {
            p.wait = Wait::For(d.saturating_sub(start.elapsed()));
        }
        Ok(p)
    }

    /// Waits until nothing is in flight (or `limit` passed); `None` once `interrupted`,
    /// asked before every wait of at most [`POLL`], says to stop first.
    fn settle(
        &self,
        sh: &Shared,
        limit: Option<Duration>,
        interrupted: Option<&dyn Fn() -> bool>,
    ) -> Option<MutexGuard<'_, State>> {
        let start = Instant::now();
        let mut st = self.state();
        while !st.flight.is_empty() {
            let left = limit.map(|l| l.saturating_sub(start.elapsed()));
            if left == Some(Duration::ZERO) {
                break;
            }
            if let Some(stop) = interrupted {
                // With no lock held, as the core promises the check.
                drop(st);
                if stop() {
                    return None;
                }
                st = self.state();
                if st.flight.is_empty() {
                    break;
                }
            }
            if start.elapsed() >= POLL {
                // Unanswered for a while: the owner holds them for room, which may come
                // only once this space's raised mark reaches it (as for a credit).
                sh.hurry_marks(self.zone);
            }
            st = self
                .changed
                .wait_timeout(st, left.map_or(POLL, |l| l.min(POLL)))
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
        Some(st)
    }

    /// The channel this pipe puts into.
    pub(crate) fn container(&self) -> u64 {
        self.container
    }

    /// Whether puts are on their way, unanswered.
    pub(crate) fn in_flight(&self) -> bool {
        !self.state().flight.is_empty()
    }

    /// Whether this pipe puts into `container`.
    pub(crate) fn feeds(&self, container: u64) -> bool {
        self.container == container
    }

    /// Waits until this connection's puts are answered, before a close this space sends:
    /// a put made before the close is stored before it, as in sequential code.
    pub(crate) fn before_close(&self, sh: &Shared, limit: Duration) {
        drop(self.settle(sh, Some(limit), None));
    }

    /// This space closed the channel: later puts fail at once.
    pub(crate) fn closed(&self) {
        self.state().closed = true;
    }

    /// The connection goes: waits up to `limit` for the owner's answers, and logs what was
    /// refused and never reported. Returns how many puts that was.
    pub(crate) fn close(&self, sh: &Shared, limit: Duration) -> usize {
        let mut n = 0;
        while let Err(e) = self.flush(sh, Some(limit)) {
            tracing::warn!(owner = self.owner, "{e}, found as the connection detached");
            n += 1;
        }
        let unanswered = self.state().flight.len();
        if unanswered > 0 {
            tracing::warn!(
                owner = self.owner,
                unanswered,
                "puts still unanswered as the connection detached"
            );
        }
        lock(&sh.pipes).remove(&(self.owner.clone(), self.conn));
        n + unanswered
    }
}

/// The put error an owner's refusal stands for.
fn refusal(code: ErrorCode, a: i64) -> Option<PutErrorKind> {
    match code {
        ErrorCode::Stm(c) => PutErrorKind::from_code(c, a),
        ErrorCode::UnknownContainer => Some(PutErrorKind::Closed),
        ErrorCode::UnknownConnection => Some(PutErrorKind::Detached),
        ErrorCode::Malformed | ErrorCode::Other => None,
    }
}
