//! Arrival and garbage events of containers, forwarded from their owner to the address
//! spaces that installed callbacks or garbage handlers on them (D-Stampede's remote
//! handlers).
//!
//! The owner hooks a container once per kind of event, on the first subscription: its
//! generic hook numbers each event and hands it to one sender thread, which sends it to
//! every subscribed space in order. A subscriber's receive thread hands events to one
//! dispatch thread, which runs the callbacks in order. An event that finds a queue full is
//! dropped and counted (`SpaceStats::events_dropped`); a subscriber that sees a gap in the
//! numbering counts what it lost (`events_lost`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use stampede_core::provider::{self, ArrivalCallback, GarbageCallback};
use stampede_core::{Item, Named, StmError, Timestamp};
use zenoh::Wait as _;

use crate::space::{lock, Shared};
use crate::wire::{self, ErrorCode, Event, EventKind, Reply, WireItem};
use crate::zbytes;

/// How many events wait to be sent, and to be dispatched, before new ones are dropped.
const BACKLOG: usize = 16 * 1024;

/// An event on its way from a hook to the sender thread, which numbers it: numbers then
/// follow the order events are sent in, even when several threads put at once.
struct Outgoing {
    container: u64,
    kind: EventKind,
    ts: Timestamp,
    item: Option<Item>,
}

/// The callbacks this space installed on one container of another.
#[derive(Default)]
struct Installed {
    arrivals: Vec<(u64, ArrivalCallback)>,
    garbage: Option<GarbageCallback>,
    /// The last event number seen, per kind.
    last: [u64; 2],
}

/// Both sides of event forwarding for one address space.
pub(crate) struct Events {
    /// Owner side: who subscribed to what, and which hooks are installed.
    subscribers: Mutex<HashMap<(u64, EventKind), BTreeSet<String>>>,
    hooked: Mutex<HashSet<(u64, EventKind)>>,
    out: Sender<Outgoing>,
    /// Subscriber side: callbacks by owner and container.
    installed: Mutex<HashMap<(String, u64), Installed>>,
    inbox: Sender<Event>,
    next_id: AtomicU64,
}

/// The queues `Events::new` made, for `start`.
pub(crate) struct Queues(Receiver<Outgoing>, Receiver<Event>);

impl Events {
    pub(crate) fn new() -> (Events, Queues) {
        let (out, out_rx) = crossbeam_channel::bounded(BACKLOG);
        let (inbox, in_rx) = crossbeam_channel::bounded(BACKLOG);
        let e = Events {
            subscribers: Mutex::default(),
            hooked: Mutex::default(),
            out,
            installed: Mutex::default(),
            inbox,
            next_id: AtomicU64::new(1),
        };
        (e, Queues(out_rx, in_rx))
    }

    /// Starts the sender and dispatch threads and subscribes to this space's event key.
    pub(crate) fn start(
        sh: &Arc<Shared>,
        Queues(out_rx, in_rx): Queues,
    ) -> Result<zenoh::pubsub::Subscriber<()>, String> {
        let weak = Arc::downgrade(sh);
        let mut numbers: HashMap<(u64, EventKind), u64> = HashMap::new();
        thread("stampede-events-out", move || loop {
            let next = out_rx.recv_timeout(Duration::from_secs(1));
            let Some(sh) = weak.upgrade() else { return };
            match next {
                Ok(e) => {
                    let n = numbers.entry((e.container, e.kind)).or_insert(0);
                    *n += 1;
                    send(&sh, e, *n);
                }
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
        })?;
        let weak = Arc::downgrade(sh);
        thread("stampede-events", move || loop {
            let next = in_rx.recv_timeout(Duration::from_secs(1));
            let Some(sh) = weak.upgrade() else { return };
            match next {
                Ok(e) => dispatch(&sh, e),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
            }
        })?;
        let weak: Weak<Shared> = Arc::downgrade(sh);
        sh.session
            .declare_subscriber(sh.key("event", &sh.id))
            .callback(move |s| {
                let Some(sh) = weak.upgrade() else { return };
                match wire::decode_event(zbytes::to_parts(s.payload(), s.attachment())) {
                    Ok(e) => {
                        if sh.events.inbox.try_send(e).is_err() {
                            sh.counters.events_dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("malformed event: {e}");
                    }
                }
            })
            .wait()
            .map_err(|e| crate::error::zenoh_text(&e))
    }

    /// Owner side: forwards `event`s of `container` to `space` from now on.
    pub(crate) fn subscribe(
        sh: &Shared,
        container: u64,
        event: EventKind,
        space: &str,
    ) -> Result<Reply, Reply> {
        let named = sh.owned(container).ok_or_else(|| {
            Reply::error(
                ErrorCode::UnknownContainer,
                format!("no container #{container} here"),
            )
        })?;
        let ev = &sh.events;
        let first = lock(&ev.hooked).insert((container, event));
        if first {
            if let Err(e) = hook(sh, &named, container, event) {
                lock(&ev.hooked).remove(&(container, event));
                let (code, figures) = e.code();
                return Err(Reply::failure(code, figures, e.to_string()));
            }
        }
        lock(&ev.subscribers)
            .entry((container, event))
            .or_default()
            .insert(space.to_owned());
        Ok(Reply::Ok)
    }

    /// Owner side: stops forwarding to `space`.
    pub(crate) fn unsubscribe(&self, container: u64, event: EventKind, space: &str) {
        if let Some(s) = lock(&self.subscribers).get_mut(&(container, event)) {
            s.remove(space);
        }
    }

    /// Owner side: a space left; nothing more goes to it.
    pub(crate) fn space_left(&self, space: &str) {
        for s in lock(&self.subscribers).values_mut() {
            s.remove(space);
        }
    }

    /// Subscriber side: runs `f` for every arrival in `owner`'s `container`; returns the
    /// callback's id. The first callback subscribes at the owner.
    pub(crate) fn on_arrival(
        sh: &Shared,
        owner: &str,
        container: u64,
        f: ArrivalCallback,
    ) -> Result<u64, StmError> {
        let ev = &sh.events;
        let id = ev.next_id.fetch_add(1, Ordering::Relaxed);
        let first = {
            let mut m = lock(&ev.installed);
            let i = m.entry((owner.to_owned(), container)).or_default();
            i.arrivals.push((id, f));
            let first = i.arrivals.len() == 1;
            if first {
                // Events resume mid-numbering: what came meanwhile was never ours to lose.
                i.last[0] = 0;
            }
            first
        };
        if first {
            if let Err(e) = subscribe_at(sh, owner, container, EventKind::Arrival) {
                if let Some(i) = lock(&ev.installed).get_mut(&(owner.to_owned(), container)) {
                    i.arrivals.retain(|(x, _)| *x != id);
                }
                return Err(e);
            }
        }
        Ok(id)
    }

    /// Subscriber side: removes an arrival callback; the last one unsubscribes at the owner.
    pub(crate) fn unsubscribe_arrival(sh: &Shared, owner: &str, container: u64, id: u64) -> bool {
        let (existed, last) = {
            let mut m = lock(&sh.events.installed);
            let Some(i) = m.get_mut(&(owner.to_owned(), container)) else {
                return false;
            };
            let before = i.arrivals.len();
            i.arrivals.retain(|(x, _)| *x != id);
            (i.arrivals.len() != before, i.arrivals.is_empty())
        };
        if existed && last {
            crate::remote::send(
                sh,
                owner,
                &wire::Request::Unsubscribe {
                    space: sh.id.clone(),
                    container,
                    event: EventKind::Arrival,
                },
            );
        }
        existed
    }

    /// Subscriber side: runs `h` for every item `owner` reclaims from `container`, replacing
    /// this space's previous handler; the first one subscribes at the owner.
    pub(crate) fn on_garbage(
        sh: &Shared,
        owner: &str,
        container: u64,
        h: GarbageCallback,
    ) -> Result<(), StmError> {
        let first = {
            let mut m = lock(&sh.events.installed);
            let i = m.entry((owner.to_owned(), container)).or_default();
            let first = i.garbage.replace(h).is_none();
            if first {
                i.last[1] = 0;
            }
            first
        };
        if first {
            if let Err(e) = subscribe_at(sh, owner, container, EventKind::Garbage) {
                if let Some(i) = lock(&sh.events.installed).get_mut(&(owner.to_owned(), container))
                {
                    i.garbage = None;
                }
                return Err(e);
            }
        }
        Ok(())
    }
}

fn thread(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(|e| format!("could not start a thread: {e}"))
}

/// Installs the owner's generic hook for `event` on `named`.
fn hook(sh: &Shared, named: &Named, container: u64, event: EventKind) -> Result<(), StmError> {
    let out = sh.events.out.clone();
    let dropped = sh.counters.events_dropped.clone();
    let emit = move |ts: Timestamp, item: Option<Item>| {
        let e = Outgoing {
            container,
            kind: event,
            ts,
            item,
        };
        // The thread that put or reclaimed the item never waits for the network.
        if out.try_send(e).is_err() {
            dropped.fetch_add(1, Ordering::Relaxed);
        }
    };
    match (event, named) {
        (EventKind::Arrival, Named::Channel(c)) => c.on_arrival(move |ts| emit(ts, None)).map(drop),
        (EventKind::Arrival, Named::Queue(q)) => q.on_arrival(move |ts| emit(ts, None)).map(drop),
        (EventKind::Garbage, named) => provider::watch_garbage(
            named,
            Arc::new(move |ts, item: &Item| emit(ts, Some(item.clone()))),
        ),
        (_, other) => Err(StmError::Unsupported(
            format!("arrival events of a {}", other.kind()).into(),
        )),
    }
}

/// Asks `owner` to forward `event`s of `container` here.
fn subscribe_at(
    sh: &Shared,
    owner: &str,
    container: u64,
    event: EventKind,
) -> Result<(), StmError> {
    let req = wire::Request::Subscribe {
        space: sh.id.clone(),
        container,
        event,
    };
    match crate::remote::call(sh, owner, &req) {
        Ok(Reply::Ok) => Ok(()),
        Ok(other) => Err(crate::remote::stm_error(other, owner)),
        Err(e) => Err(StmError::Unreachable(e)),
    }
}

/// Sends event number `seq` to every space subscribed to it.
fn send(sh: &Shared, e: Outgoing, seq: u64) {
    let spaces: Vec<String> = lock(&sh.events.subscribers)
        .get(&(e.container, e.kind))
        .map(|s| s.iter().cloned().collect())
        .unwrap_or_default();
    if spaces.is_empty() {
        return;
    }
    let msg = wire::encode_event(&Event {
        owner: sh.id.clone(),
        container: e.container,
        kind: e.kind,
        seq,
        ts: e.ts,
        item: e.item.map(|i| WireItem {
            tag: i.tag(),
            data: i.wire().clone(),
        }),
    });
    for space in spaces {
        let f = zbytes::frame(&sh.counters.sends, msg.clone());
        let sent = sh
            .session
            .put(sh.key("event", &space), f.payload)
            .attachment(f.attachment)
            .wait();
        match sent {
            Ok(()) => sh.counters.events_sent.fetch_add(1, Ordering::Relaxed),
            Err(_) => sh.counters.events_dropped.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Runs the callbacks of one received event, outside every lock.
fn dispatch(sh: &Shared, e: Event) {
    sh.counters.events_received.fetch_add(1, Ordering::Relaxed);
    let slot = usize::from(e.kind == EventKind::Garbage);
    let (arrivals, garbage) = {
        let mut m = lock(&sh.events.installed);
        let Some(i) = m.get_mut(&(e.owner.clone(), e.container)) else {
            return;
        };
        let last = i.last[slot];
        if e.seq <= last {
            return; // a repeat of one already run
        }
        i.last[slot] = e.seq;
        if last != 0 && e.seq > last + 1 {
            sh.counters
                .events_lost
                .fetch_add(e.seq - last - 1, Ordering::Relaxed);
        }
        match e.kind {
            EventKind::Arrival => (i.arrivals.iter().map(|(_, f)| f.clone()).collect(), None),
            EventKind::Garbage => (Vec::new(), i.garbage.clone()),
        }
    };
    for f in arrivals {
        f(e.ts);
    }
    if let (Some(h), Some(wi)) = (garbage, e.item) {
        h(e.ts, &Item::from_wire(wi.tag, wi.data));
    }
}
