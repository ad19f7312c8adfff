//! Arrival notification: callbacks and async streams of new timestamps.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures_core::Stream;

use crate::item::Item;
use crate::sync::{lock, Mutex};
use crate::time::Timestamp;

/// A garbage handler: runs once for every item the channel reclaims.
pub(crate) type GarbageHandler = Arc<dyn Fn(Timestamp, &Item) + Send + Sync>;

/// An arrival callback.
pub(crate) type Callback = Arc<dyn Fn(Timestamp) + Send + Sync>;

/// What a container calls back: arrival subscribers, the user's garbage handler and the
/// provider's garbage watcher (which forwards reclaimed items to other address spaces).
#[derive(Default)]
pub(crate) struct Hooks {
    pub(crate) subscribers: Subscribers,
    user: Option<GarbageHandler>,
    watch: Option<GarbageHandler>,
    /// Both handlers as one, rebuilt when either changes: reclaiming clones one `Arc`.
    garbage: Option<GarbageHandler>,
}

impl Hooks {
    /// The handler to run for reclaimed items.
    pub(crate) fn garbage(&self) -> Option<GarbageHandler> {
        self.garbage.clone()
    }

    /// Installs the user's garbage handler, replacing the previous one.
    pub(crate) fn set_garbage(&mut self, h: GarbageHandler) {
        self.user = Some(h);
        self.compose();
    }

    /// Installs the provider's garbage watcher, replacing the previous one.
    pub(crate) fn set_watch(&mut self, h: GarbageHandler) {
        self.watch = Some(h);
        self.compose();
    }

    fn compose(&mut self) {
        self.garbage = match (&self.user, &self.watch) {
            (Some(u), Some(w)) => {
                let (u, w) = (u.clone(), w.clone());
                Some(Arc::new(move |ts, item: &Item| {
                    u(ts, item);
                    w(ts, item);
                }))
            }
            (u, w) => u.clone().or_else(|| w.clone()),
        };
    }
}

/// A container kind that lives here and has hooks.
pub(crate) trait Hooked {
    /// Runs `f` with the hooks and whether the container is closed, under its lock.
    fn hooks<R>(&self, f: impl FnOnce(&mut Hooks, bool) -> R) -> R;
}

/// Identifies a subscription so it can be cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubscriptionId(pub(crate) u64);

struct StreamBuf {
    queue: VecDeque<Timestamp>,
    capacity: usize,
    dropped: u64,
    waker: Option<Waker>,
    closed: bool,
}

pub(crate) struct StreamShared {
    buf: Mutex<StreamBuf>,
}

enum Sink {
    Callback(Callback),
    Stream(Arc<StreamShared>),
}

/// The subscribers of one container.
#[derive(Default)]
pub(crate) struct Subscribers {
    next: u64,
    sinks: Vec<(SubscriptionId, Sink)>,
}

/// Subscribers to call for one arrival, collected under the container lock and fired after.
pub(crate) struct Pending(Vec<PendingSink>);

enum PendingSink {
    Callback(Callback),
    Stream(Arc<StreamShared>),
}

impl Subscribers {
    pub(crate) fn is_empty(&self) -> bool {
        self.sinks.is_empty()
    }

    pub(crate) fn add_callback(&mut self, f: Callback) -> SubscriptionId {
        let id = SubscriptionId(self.next);
        self.next += 1;
        self.sinks.push((id, Sink::Callback(f)));
        id
    }

    pub(crate) fn add_stream(&mut self, capacity: usize) -> (SubscriptionId, Arc<StreamShared>) {
        let id = SubscriptionId(self.next);
        self.next += 1;
        let shared = StreamShared::new(capacity);
        self.sinks.push((id, Sink::Stream(shared.clone())));
        (id, shared)
    }

    pub(crate) fn remove(&mut self, id: SubscriptionId) -> bool {
        let before = self.sinks.len();
        self.sinks.retain(|(i, sink)| {
            if *i == id {
                if let Sink::Stream(s) = sink {
                    s.close();
                }
                false
            } else {
                true
            }
        });
        self.sinks.len() != before
    }

    pub(crate) fn pending(&mut self) -> Option<Pending> {
        if self.sinks.is_empty() {
            return None;
        }
        // Streams whose receiver is gone unsubscribe themselves.
        self.sinks.retain(|(_, s)| match s {
            Sink::Stream(s) => Arc::strong_count(s) > 1,
            Sink::Callback(_) => true,
        });
        Some(Pending(
            self.sinks
                .iter()
                .map(|(_, s)| match s {
                    Sink::Callback(f) => PendingSink::Callback(f.clone()),
                    Sink::Stream(s) => PendingSink::Stream(s.clone()),
                })
                .collect(),
        ))
    }

    pub(crate) fn close_all(&mut self) {
        for (_, s) in &self.sinks {
            if let Sink::Stream(s) = s {
                s.close();
            }
        }
    }
}

impl Pending {
    pub(crate) fn fire(self, ts: Timestamp) {
        for s in self.0 {
            match s {
                PendingSink::Callback(f) => f(ts),
                PendingSink::Stream(s) => s.push(ts),
            }
        }
    }
}

impl StreamShared {
    pub(crate) fn new(capacity: usize) -> Arc<StreamShared> {
        Arc::new(StreamShared {
            buf: Mutex::new(StreamBuf {
                queue: VecDeque::new(),
                capacity: capacity.max(1),
                dropped: 0,
                waker: None,
                closed: false,
            }),
        })
    }

    pub(crate) fn push(&self, ts: Timestamp) {
        let waker = {
            let mut b = lock(&self.buf);
            if b.queue.len() >= b.capacity {
                b.queue.pop_front();
                b.dropped += 1;
            }
            b.queue.push_back(ts);
            b.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    fn close(&self) {
        let waker = {
            let mut b = lock(&self.buf);
            b.closed = true;
            b.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// An async stream of the timestamps of items as they arrive in a container.
///
/// The stream buffers up to its capacity; when the consumer falls behind, the oldest
/// notifications are dropped and counted in [`dropped`](Arrivals::dropped). It ends when
/// the container is closed (a container served by another address space: when the stream
/// is dropped).
pub struct Arrivals {
    pub(crate) shared: Arc<StreamShared>,
    /// Cancels the subscription behind a stream of a provided container.
    pub(crate) cancel: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Drop for Arrivals {
    fn drop(&mut self) {
        if let Some(c) = self.cancel.take() {
            c();
        }
    }
}

impl fmt::Debug for Arrivals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Arrivals")
            .field("dropped", &self.dropped())
            .finish()
    }
}

impl Arrivals {
    /// Notifications dropped because the stream's buffer was full.
    pub fn dropped(&self) -> u64 {
        lock(&self.shared.buf).dropped
    }
}

impl Stream for Arrivals {
    type Item = Timestamp;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Timestamp>> {
        let mut b = lock(&self.shared.buf);
        if let Some(ts) = b.queue.pop_front() {
            return Poll::Ready(Some(ts));
        }
        if b.closed {
            return Poll::Ready(None);
        }
        b.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
