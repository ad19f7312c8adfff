//! An address space: a runtime joined to a distributed application over Zenoh.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use stampede_core::provider::{self, Directory};
use stampede_core::{
    Channel, ContainerOptions, Item, Named, Queue, Register, Runtime, StmError, Timestamp, ZoneId,
};
use zenoh::sample::SampleKind;
use zenoh::{Session, Wait as _};

use crate::code::{self, Call, Code, FailureListener, Handler, InvokeError};
use crate::config::Config;
use crate::error::{zenoh_text, NetError};
use crate::events::Events;
use crate::feed::Feeds;
use crate::intake::Intake;
use crate::latest::Latest;
use crate::marks::{Book, Effect};
use crate::pipe::Pipe;
use crate::publishers::Publishers;
use crate::registrar::{self, Registrar};
use crate::remote;
use crate::server;
use crate::view::{Arrival, Views};
use crate::wire::{self, Kind, NameRecord};
use crate::zbytes;
use stampede_observe::{Endpoint as MetricsEndpoint, Metrics, RuntimeSource, Sample};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Cached items of remote channels, shared by the tasks of this address space.
#[derive(Default)]
pub(crate) struct Cache {
    pub(crate) items: HashMap<(String, u64), BTreeMap<Timestamp, Item>>,
}

/// The shortest time between two hurried marks messages.
const HURRY_EVERY: Duration = Duration::from_micros(500);

/// At most this many items per remote channel stay cached.
pub(crate) const CACHE_PER_CHANNEL: usize = 32;

impl Cache {
    pub(crate) fn insert(&mut self, key: (String, u64), ts: Timestamp, item: Item) {
        let m = self.items.entry(key).or_default();
        m.insert(ts, item);
        while m.len() > CACHE_PER_CHANNEL {
            m.pop_first();
        }
    }
    pub(crate) fn drop_below(&mut self, key: &(String, u64), floor: Timestamp) {
        if let Some(m) = self.items.get_mut(key) {
            *m = m.split_off(&floor);
        }
    }
}

/// Address spaces seen alive, and those seen leaving: requests from them are refused.
#[derive(Default)]
pub(crate) struct Members {
    live: Mutex<HashSet<String>>,
    dead: Mutex<HashSet<String>>,
}

impl Members {
    /// `space` is (again) alive: a space seen leaving and back (a lost link that recovered)
    /// starts afresh.
    fn arrived(&self, space: &str) {
        lock(&self.dead).remove(space);
        lock(&self.live).insert(space.to_owned());
    }
    /// Records that `space` left; whether this is news.
    fn left(&self, space: &str) -> bool {
        let news = lock(&self.dead).insert(space.to_owned());
        lock(&self.live).remove(space);
        news
    }
    fn is_dead(&self, space: &str) -> bool {
        lock(&self.dead).contains(space)
    }
    pub(crate) fn is_live(&self, space: &str) -> bool {
        lock(&self.live).contains(space)
    }
    fn live(&self) -> Vec<String> {
        lock(&self.live).iter().cloned().collect()
    }
}

/// Remote items this space fetched or was pushed, shared by its tasks.
#[derive(Default)]
pub(crate) struct Cached {
    pub(crate) items: Mutex<Cache>,
    /// Signalled when a pushed item lands in the cache.
    pub(crate) filled: Condvar,
}

pub(crate) struct Shared {
    pub(crate) app: String,
    pub(crate) id: String,
    pub(crate) session: Session,
    pub(crate) rt: Runtime,
    pub(crate) cfg: Config,
    pub(crate) owned: Mutex<HashMap<u64, (Named, Option<String>)>>,
    pub(crate) names: Mutex<HashMap<String, (NameRecord, zenoh::liveliness::LivelinessToken)>>,
    pub(crate) surrogates: Mutex<HashMap<(String, u64, u32), Arc<server::Surrogate>>>,
    pub(crate) members: Members,
    /// The marks this space publishes and the terms others' marks give here; see `book()`.
    book: Mutex<Book>,
    /// Passes' local marks not yet taken into the book: a pass reports here, never to the
    /// book itself, since setting a term under the book's lock may run a pass.
    passes: Mutex<BTreeMap<u32, (Timestamp, u64)>>,
    /// Held while a marks message is sent, so messages leave in version order.
    sending: Mutex<()>,
    pub(crate) cache: Cached,
    /// Owned channels whose items are pushed to the spaces reading them.
    pub(crate) feeds: Feeds,
    /// Views of other spaces' channels, one per input connection here.
    pub(crate) views: Views,
    /// The newest pushed values of the remote registers read here.
    pub(crate) latest: Latest,
    /// A publisher of notices (consumes, applied gets) per owner.
    pub(crate) notes: Publishers,
    /// Pushes received, for [`Config::push_loss`].
    pushes_seen: AtomicU64,
    /// Zones whose marks should be collected and sent now (see [`Shared::hurry_marks`]).
    hurry: Sender<u32>,
    last_hurry: Mutex<Option<Instant>>,
    pub(crate) pool: server::Pool,
    /// Output connections to remote channels with puts in flight, by (owner, connection).
    pub(crate) pipes: Mutex<HashMap<(String, u64), Weak<Pipe>>>,
    /// Puts sent here that wait for space.
    pub(crate) intake: Intake,
    pub(crate) next_conn: AtomicU64,
    pub(crate) counters: Counters,
    pub(crate) events: Events,
    /// Named code served here, and the calls this space waits for.
    pub(crate) code: Code,
    /// Who settles this space's name claims (see `registrar`).
    pub(crate) registrar: Registrar,
    /// The user this space's requests carry, and who asks this space as owner.
    pub(crate) user: String,
    pub(crate) guard: crate::guard::Guard,
    /// This space's metrics (its runtime's and its own counters), and where they are
    /// served, if anywhere.
    metrics: Metrics,
    metrics_addr: Mutex<Option<std::net::SocketAddr>>,
    /// Zenoh entities that live as long as the space.
    keep: Mutex<Vec<Box<dyn std::any::Any + Send + Sync>>>,
}

/// Counters of an address space's network activity.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) served: AtomicU64,
    pub(crate) malformed: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) unreachable: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
    pub(crate) spaces_lost: AtomicU64,
    pub(crate) pushed: AtomicU64,
    /// Shared with the channels' arrival hooks.
    pub(crate) push_skipped: Arc<AtomicU64>,
    pub(crate) push_received: AtomicU64,
    /// Shared with the callbacks of consumes sent without waiting.
    pub(crate) consume_failed: Arc<AtomicU64>,
    pub(crate) denied: AtomicU64,
    pub(crate) quota_refused: AtomicU64,
    pub(crate) events_sent: AtomicU64,
    pub(crate) events_received: AtomicU64,
    /// Shared with the owner's event hooks.
    pub(crate) events_dropped: Arc<AtomicU64>,
    pub(crate) events_lost: AtomicU64,
    pub(crate) puts_sent: AtomicU64,
    pub(crate) puts_refused: AtomicU64,
    pub(crate) view_hits: AtomicU64,
    pub(crate) register_hits: AtomicU64,
    pub(crate) leased: AtomicU64,
    pub(crate) lease_hits: AtomicU64,
    pub(crate) view_snapshots: AtomicU64,
    pub(crate) seen_refused: AtomicU64,
    pub(crate) loans_shared: AtomicU64,
    pub(crate) sends: zbytes::Sends,
    pub(crate) loans_plain: AtomicU64,
}

/// A snapshot of an address space's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SpaceStats {
    /// Requests served for other address spaces.
    pub served: u64,
    /// Requests that could not be decoded (answered with an error).
    pub malformed: u64,
    /// Requests refused because their address space had left.
    pub refused: u64,
    /// Operations that failed because an owner was unreachable.
    pub unreachable: u64,
    /// Gets answered from this space's cache of remote items.
    pub cache_hits: u64,
    /// Address spaces seen leaving or dying.
    pub spaces_lost: u64,
    /// Items pushed ahead to remote readers (one per reader).
    pub pushed: u64,
    /// New items not pushed because the pusher was behind (readers fetch them on get).
    pub push_skipped: u64,
    /// Items other spaces pushed here.
    pub push_received: u64,
    /// Channel consumes and applied gets other spaces sent without waiting that this
    /// space, their owner, refused.
    pub consume_failed: u64,
    /// Arrival and garbage events sent to subscribed spaces (one per subscriber).
    pub events_sent: u64,
    /// Events received from owners and dispatched to callbacks here.
    pub events_received: u64,
    /// Events dropped because a queue was full or a send failed (here, as owner or as
    /// subscriber).
    pub events_dropped: u64,
    /// Events an owner numbered that never arrived here (gaps in the numbering).
    pub events_lost: u64,
    /// Puts into remote channels sent without waiting for their owner.
    pub puts_sent: u64,
    /// Of those, puts their owner refused (or that were in flight when it left): each is
    /// reported by its connection's next put or flush.
    pub puts_refused: u64,
    /// Gets on other spaces' channels answered here, from the items their owners pushed,
    /// without a round trip.
    pub view_hits: u64,
    /// Reads of other spaces' registers answered here, from the values their owners
    /// pushed, without a round trip.
    pub register_hits: u64,
    /// Items of other spaces' queues taken ahead into leases (`Config::queue_prefetch`).
    pub leased: u64,
    /// Gets on other spaces' queues answered from a lease, without a round trip.
    pub lease_hits: u64,
    /// Snapshots of remote channels taken to start or rebuild a connection's view (one per
    /// input connection, and one after each push lost on the way).
    pub view_snapshots: u64,
    /// Gets a reader answered from its view that this space, as their owner, found no
    /// longer valid (logged; none is expected).
    pub seen_refused: u64,
    /// Large items this space sent in the buffer they arrived or were lent in (in shared
    /// memory between processes of one host: a descriptor, no copy).
    pub sent_as_received: u64,
    /// Large items this space handed to Zenoh afresh, which copies them into shared memory
    /// or onto the link.
    pub sent_fresh: u64,
    /// Loans for remote channels lent in shared memory (put without a copy).
    pub loans_shared: u64,
    /// Loans for remote channels lent in plain memory instead: too small to be worth it, no
    /// shared memory, or its pool full (a slow reader holds it); the put copies once.
    pub loans_plain: u64,
    /// Invocations of named code this space sent (calls and one-way).
    pub invocations_sent: u64,
    /// Invocations this space ran a handler for.
    pub invocations_served: u64,
    /// Invocations that reached this space for a name it does not serve (each answered
    /// with the error).
    pub invocations_unknown: u64,
    /// Failures of this space's invocations reported back to it: an unknown name or a
    /// handler that failed, for calls and one-way invocations alike.
    pub invocations_failed: u64,
    /// Answers that arrived after their call stopped waiting.
    pub answers_late: u64,
    /// Requests this space, as owner, refused under its access rules.
    pub denied: u64,
    /// Requests this space, as owner, refused as over a quota (item size, connections,
    /// waiting puts).
    pub quota_refused: u64,
}

impl SpaceStats {
    /// Every counter as (name, what it counts, value): the one table the metrics export.
    pub fn counters(&self) -> [(&'static str, &'static str, u64); 33] {
        [
            ("served", "Requests served for other address spaces.", self.served),
            ("malformed", "Requests that could not be decoded (answered with an error).", self.malformed),
            ("refused", "Requests refused because their address space had left.", self.refused),
            ("unreachable", "Operations that failed because an owner was unreachable.", self.unreachable),
            ("cache_hits", "Gets answered from this space's cache of remote items.", self.cache_hits),
            ("spaces_lost", "Address spaces seen leaving or dying.", self.spaces_lost),
            ("pushed", "Items pushed ahead to remote readers (one per reader).", self.pushed),
            ("push_skipped", "New items not pushed because the pusher was behind (readers fetch them on get).", self.push_skipped),
            ("push_received", "Items other spaces pushed here.", self.push_received),
            ("consume_failed", "Channel consumes and applied gets other spaces sent without waiting that this space, their owner, refused.", self.consume_failed),
            ("events_sent", "Arrival and garbage events sent to subscribed spaces (one per subscriber).", self.events_sent),
            ("events_received", "Events received from owners and dispatched to callbacks here.", self.events_received),
            ("events_dropped", "Events dropped because a queue was full or a send failed (here, as owner or as subscriber).", self.events_dropped),
            ("events_lost", "Events an owner numbered that never arrived here (gaps in the numbering).", self.events_lost),
            ("puts_sent", "Puts into remote channels sent without waiting for their owner.", self.puts_sent),
            ("puts_refused", "Of those, puts their owner refused (or that were in flight when it left): each is reported by its connection's next put or flush.", self.puts_refused),
            ("view_hits", "Gets on other spaces' channels answered here, from the items their owners pushed, without a round trip.", self.view_hits),
            ("register_hits", "Reads of other spaces' registers answered here, from the values their owners pushed, without a round trip.", self.register_hits),
            ("leased", "Items of other spaces' queues taken ahead into leases (`Config::queue_prefetch`).", self.leased),
            ("lease_hits", "Gets on other spaces' queues answered from a lease, without a round trip.", self.lease_hits),
            ("view_snapshots", "Snapshots of remote channels taken to start or rebuild a connection's view (one per input connection, and one after each push lost on the way).", self.view_snapshots),
            ("seen_refused", "Gets a reader answered from its view that this space, as their owner, found no longer valid (logged; none is expected).", self.seen_refused),
            ("sent_as_received", "Large items this space sent in the buffer they arrived or were lent in (in shared memory between processes of one host: a descriptor, no copy).", self.sent_as_received),
            ("sent_fresh", "Large items this space handed to Zenoh afresh, which copies them into shared memory or onto the link.", self.sent_fresh),
            ("loans_shared", "Loans for remote channels lent in shared memory (put without a copy).", self.loans_shared),
            ("loans_plain", "Loans for remote channels lent in plain memory instead: too small to be worth it, no shared memory, or its pool full (a slow reader holds it); the put copies once.", self.loans_plain),
            ("invocations_sent", "Invocations of named code this space sent (calls and one-way).", self.invocations_sent),
            ("invocations_served", "Invocations this space ran a handler for.", self.invocations_served),
            ("invocations_unknown", "Invocations that reached this space for a name it does not serve (each answered with the error).", self.invocations_unknown),
            ("invocations_failed", "Failures of this space's invocations reported back to it: an unknown name or a handler that failed, for calls and one-way invocations alike.", self.invocations_failed),
            ("answers_late", "Answers that arrived after their call stopped waiting.", self.answers_late),
            ("denied", "Requests this space, as owner, refused under its access rules (see Config::access).", self.denied),
            ("quota_refused", "Requests this space, as owner, refused as over a quota: item size, connections, waiting puts (see Config::quotas).", self.quota_refused),
        ]
    }
}

impl Shared {
    pub(crate) fn key(&self, what: &str, space: &str) -> String {
        format!("stampede/{}/{what}/{space}", self.app)
    }

    /// The key of this space's requests of kind `what` (`op`, `put`, `note`) to `owner`:
    /// it ends with this space's user, which the owner checks its access rules against.
    pub(crate) fn to_owner(&self, what: &str, owner: &str) -> String {
        format!("stampede/{}/{what}/{owner}/{}", self.app, self.user)
    }

    pub(crate) fn is_dead(&self, space: &str) -> bool {
        self.members.is_dead(space)
    }

    /// Everything another address space held here goes: its proxies (their connections
    /// detach, held queue items return for redelivery), its watermark terms, its cache.
    fn space_left(&self, space: &str) {
        if space == self.id || !self.members.left(space) {
            return;
        }
        self.counters.spaces_lost.fetch_add(1, Ordering::Relaxed);
        self.guard.forget(space);
        tracing::info!(space, "address space left");
        let gone: Vec<_> = {
            let mut s = lock(&self.surrogates);
            let keys: Vec<_> = s.keys().filter(|k| k.0 == space).cloned().collect();
            keys.into_iter().filter_map(|k| s.remove(&k)).collect()
        };
        drop(gone);
        self.intake.space_left(space);
        let pipes: Vec<_> = lock(&self.pipes)
            .iter()
            .filter(|(k, _)| k.0 == space)
            .filter_map(|(_, p)| p.upgrade())
            .collect();
        for p in pipes {
            p.owner_left(self);
        }
        self.events.space_left(space);
        self.feeds.space_left(space);
        self.views.space_left(space);
        self.notes.forget(space);
        self.code.space_left(space);
        self.with_book(|b| b.left(space));
        lock(&self.cache.items).items.retain(|k, _| k.0 != space);
    }

    /// Runs `f` on the books and sets the terms it changed, under the books' lock so that
    /// changes from two threads are set in the order they were made.
    fn with_book(&self, f: impl FnOnce(&mut Book) -> Vec<Effect>) {
        let mut book = self.book();
        for (space, zone, term) in f(&mut book) {
            provider::set_external_term(&self.rt, ZoneId(zone), &space, term);
        }
    }

    fn marks_received(&self, space: &str, marks: &wire::Marks) {
        if space == self.id || self.is_dead(space) {
            return;
        }
        if space.is_empty() || space.contains(['/', '*', '$']) {
            self.counters.malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                space,
                "watermark marks under a key that names no address space"
            );
            return;
        }
        self.with_book(|b| b.received(space, marks));
    }

    /// Before a new remote connection is acknowledged: whatever it holds here is in this
    /// space's published marks.
    pub(crate) fn hold_before_ack(&self, zone: ZoneId) {
        self.rt.collect_zone(zone);
        if self.book().lowered(zone.0) {
            self.publish_marks();
        }
    }

    /// Another space put an item at `ts` in `zone` here, now stored: returns the version of
    /// this space's marks message that covers it, sent before this returns (see `marks`).
    pub(crate) fn hold_moved_here(&self, zone: ZoneId, ts: Timestamp) -> u64 {
        let after = self.rt.gc_stats(zone).passes;
        let covered = self.book().pin(zone.0, ts, after);
        covered.unwrap_or_else(|| self.publish_marks())
    }

    /// This space's put at `ts` in `zone` was stored by `owner`, covered from its marks
    /// message `version` on; call before the put's own hold goes.
    pub(crate) fn hold_moved(&self, owner: &str, zone: ZoneId, ts: Timestamp, version: u64) {
        self.with_book(|b| b.transfer(owner, zone.0, ts, version));
    }

    /// Sends this space's marks now, with back-pressure rather than loss; returns the
    /// message's version.
    /// The books, with the passes reported since last time.
    fn book(&self) -> MutexGuard<'_, Book> {
        let mut book = lock(&self.book);
        for (zone, (mark, pass)) in std::mem::take(&mut *lock(&self.passes)) {
            book.noted(zone, mark, pass);
        }
        book
    }

    /// Publishes if the last message no longer says what this space holds.
    fn publish_if_stale(&self) {
        if self.book().any_stale() {
            self.publish_marks();
        }
    }

    fn publish_marks(&self) -> u64 {
        let mut book = self.book();
        let msg = book.message();
        let sending = lock(&self.sending);
        drop(book);
        let key = self.key("marks", &self.id);
        let put = self
            .session
            .put(key, wire::encode_marks(&msg))
            .congestion_control(zenoh::qos::CongestionControl::Block);
        if let Err(e) = put.wait() {
            tracing::warn!("could not publish watermark marks: {e}");
        }
        drop(sending);
        msg.version
    }

    pub(crate) fn owned(&self, id: u64) -> Option<Named> {
        lock(&self.owned).get(&id).map(|o| o.0.clone())
    }

    fn acked(&self, owner: &str, s: &zenoh::sample::Sample) {
        match wire::decode_ack(zbytes::to_bytes(s.payload())) {
            Ok(ack) => {
                let pipe = lock(&self.pipes)
                    .get(&(owner.to_owned(), ack.conn))
                    .and_then(Weak::upgrade);
                if let Some(p) = pipe {
                    // Before the put stops counting as in flight: a get that no longer
                    // sees it there must see the state that includes it.
                    self.views.reached(owner, p.container(), ack.arrival);
                    p.acked(self, &ack);
                }
            }
            Err(e) => {
                self.counters.malformed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(owner, "malformed acknowledgement: {e}");
            }
        }
    }

    /// Collects `zone` and sends this space's marks now, not at the next pass: another space
    /// waits for them (a put of this space waits for a credit, so the owner's channel is
    /// full, and only this space's raised mark lets it reclaim). At most once per
    /// [`HURRY_EVERY`].
    pub(crate) fn hurry_marks(&self, zone: ZoneId) {
        let now = Instant::now();
        {
            let mut last = lock(&self.last_hurry);
            if last.is_some_and(|t| now - t < HURRY_EVERY) {
                return;
            }
            *last = Some(now);
        }
        let _ = self.hurry.try_send(zone.0);
    }

    /// Whether this space has puts into `owner`'s channel `container` unanswered.
    pub(crate) fn puts_in_flight(&self, owner: &str, container: u64) -> bool {
        lock(&self.pipes)
            .iter()
            .filter(|(k, _)| k.0 == owner)
            .filter_map(|(_, p)| p.upgrade())
            .any(|p| p.feeds(container) && p.in_flight())
    }

    /// Whether fault injection drops this push ([`Config::push_loss`]).
    fn drop_push(&self) -> bool {
        let n = self.pushes_seen.fetch_add(1, Ordering::Relaxed) + 1;
        self.cfg.push_loss > 0 && n % u64::from(self.cfg.push_loss) == 0
    }

    fn pushed_here(&self, owner: &str, s: &zenoh::sample::Sample) {
        if self.is_dead(owner) {
            return;
        }
        match wire::decode_push(zbytes::to_parts(s.payload(), s.attachment())) {
            Ok(p) => {
                if self.drop_push() {
                    return;
                }
                if let Some(wi) = &p.item {
                    let item = Item::from_wire(wi.tag, wi.data.clone());
                    if self.latest.offer(owner, p.container, p.seq, &item) {
                        self.counters.push_received.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
                let present = p.item.is_some();
                // Under the cache's lock, which gets waiting for a push hold while they look:
                // the bytes are in the cache before a view can select the item.
                let mut cache = lock(&self.cache.items);
                if let Some(wi) = p.item {
                    let item = Item::from_wire(wi.tag, wi.data);
                    cache.insert((owner.to_owned(), p.container), p.ts, item);
                }
                let a = Arrival {
                    seq: p.seq,
                    ts: p.ts,
                    counted: p.counted,
                    present,
                };
                self.views.arrived(owner, p.container, a);
                drop(cache);
                self.cache.filled.notify_all();
                self.counters.push_received.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counters.malformed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(owner, "malformed pushed item: {e}");
            }
        }
    }
}

pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.contains(['*', '$', '?', '#'])
        && name.split('/').all(|p| !p.is_empty())
}

/// An event of [`Space::watch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameEvent {
    /// A name was registered (or was there when watching started).
    Added(NameRecord),
    /// A name disappeared: unregistered, or its owner left or died.
    Removed {
        /// The name.
        name: String,
        /// Its owner.
        space: String,
    },
}

/// Name-server events, from [`Space::watch`].
pub struct NameWatch {
    space: Space,
    rx: Receiver<(String, String, bool)>,
    _sub: zenoh::pubsub::Subscriber<()>,
}

impl std::fmt::Debug for NameWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameWatch").finish_non_exhaustive()
    }
}

impl NameWatch {
    /// The next event, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<NameEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let (space, name, added) = self.rx.recv_timeout(left).ok()?;
            if !added {
                return Some(NameEvent::Removed { name, space });
            }
            // A name can go again before its record is fetched: then skip it.
            if let Some(r) = self
                .space
                .fetch_names(&format!("{space}/{name}"))
                .into_iter()
                .next()
            {
                return Some(NameEvent::Added(r));
            }
        }
    }
}

/// An address space: a [`Runtime`] joined to a distributed Stampede application.
///
/// A space dereferences to its runtime, and the runtime is the application's: a named
/// container it creates is owned here and registered in the application's name server,
/// its lookups ([`Runtime::lookup_channel`] and the others) find containers wherever they
/// live, and the handles they return work through the same [`Task`](stampede_core::Task)
/// API. A program written against [`Runtime`] therefore runs unchanged on a local runtime
/// and a joined one. The space itself adds what only an application has: name records
/// ([`record`](Space::record), [`records`](Space::records), [`watch`](Space::watch)),
/// services, the other spaces, statistics and the cluster-wide watermark. The space leaves the application when the last handle is dropped (or at
/// [`leave`](Space::leave)); if its process dies instead, the others notice within the
/// configured lease and release everything it held.
#[derive(Clone)]
pub struct Space {
    pub(crate) sh: Arc<Shared>,
}

impl std::fmt::Debug for Space {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Space")
            .field("app", &self.sh.app)
            .field("id", &self.sh.id)
            .finish()
    }
}

fn open_error(e: zenoh::Error, cfg: &Config) -> NetError {
    let text = zenoh_text(&e);
    let l = text.to_lowercase();
    if l.contains("auth") || l.contains("usrpwd") || l.contains("certificate") {
        return NetError::AuthRejected(text);
    }
    // Zenoh reports a refused handshake like an unreachable endpoint. An endpoint that
    // accepts the connection but not the session refused this side's credentials or TLS.
    match cfg.connect.iter().find(|ep| accepts_connections(ep)) {
        Some(ep) => NetError::AuthRejected(format!(
            "{ep} accepts connections but refused the session: missing or wrong \
             credentials, or a certificate it does not trust ({text})"
        )),
        None => NetError::Connect(text),
    }
}

/// Whether a `tcp/` or `tls/` endpoint accepts TCP connections.
fn accepts_connections(endpoint: &str) -> bool {
    use std::net::{TcpStream, ToSocketAddrs};
    let Some(addr) = endpoint
        .strip_prefix("tcp/")
        .or_else(|| endpoint.strip_prefix("tls/"))
    else {
        return false;
    };
    let addr = addr.split(['?', '#']).next().unwrap_or(addr);
    let Ok(addrs) = addr.to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok())
}

impl Space {
    /// Joins application `app` with `cfg`.
    pub fn join(app: &str, cfg: Config) -> Result<Space, NetError> {
        if !valid_name(app) || app.contains('/') {
            return Err(StmError::InvalidName(app.to_owned()).into());
        }
        let zcfg = cfg.to_zenoh()?;
        let session = zenoh::open(zcfg).wait().map_err(|e| open_error(e, &cfg))?;
        let id = session.zid().to_string();
        if cfg.shm_pool > 0 {
            // Starts making the shared-memory pool in the background, for the first loans.
            drop(session.get_shm_provider());
        }
        let small = std::thread::available_parallelism().map_or(true, |n| n.get() <= 2);
        let mut rt = Runtime::builder();
        if let Some(n) = cfg.spin_rounds.or(small.then_some(0)) {
            rt = rt.spin_rounds(n);
        }
        let rt = rt.build();
        let (feeds, push_rx) = Feeds::new();
        let (intake, acks_rx) = Intake::new();
        let (hurry, hurried) = crossbeam_channel::bounded(1);
        let (events, queues) = Events::new();
        let user = cfg.user().to_owned();
        let sh = Arc::new(Shared {
            app: app.to_owned(),
            id: id.clone(),
            session,
            rt,
            pool: server::Pool::new(),
            pipes: Mutex::default(),
            intake,
            cfg,
            owned: Mutex::default(),
            names: Mutex::default(),
            surrogates: Mutex::default(),
            members: Members::default(),
            book: Mutex::new(Book::new(&id)),
            passes: Mutex::default(),
            sending: Mutex::default(),
            cache: Cached::default(),
            feeds,
            views: Views::default(),
            latest: Latest::default(),
            notes: Publishers::default(),
            pushes_seen: AtomicU64::new(0),
            hurry,
            last_hurry: Mutex::new(None),
            next_conn: AtomicU64::new(1),
            counters: Counters::default(),
            events,
            code: Code::default(),
            registrar: Registrar::default(),
            user,
            guard: Default::default(),
            keep: Mutex::default(),
            metrics: Metrics::new(),
            metrics_addr: Mutex::default(),
        });
        let space = Space { sh };
        space.start_metrics()?;
        space.start(push_rx, acks_rx, hurried)?;
        registrar::serve(&space)?;
        // A client learns its router now, while it surely reaches it.
        space.sh.registrar.router(&space.sh);
        let sub = Events::start(&space.sh, queues).map_err(NetError::Connect)?;
        space.keep(sub);
        // From now on the runtime's names and lookups are the application's.
        let names: Arc<dyn Directory> = Arc::new(Names {
            sh: Arc::downgrade(&space.sh),
        });
        provider::set_directory(&space.sh.rt, Arc::downgrade(&names));
        space.keep(names);
        Ok(space)
    }

    fn start_metrics(&self) -> Result<(), NetError> {
        let sh = &self.sh;
        sh.metrics.add(RuntimeSource::new(&sh.rt));
        // This space's own counters; a space that left has nothing more to say.
        let weak = Arc::downgrade(&self.sh);
        sh.metrics.add(move |out: &mut Vec<Sample>| {
            let Some(sh) = weak.upgrade() else { return };
            let space = Space { sh };
            for (name, help, value) in space.stats().counters() {
                out.push(Sample::counter(
                    format!("stampede_space_{name}"),
                    help,
                    value,
                ));
            }
            out.push(Sample::gauge(
                "stampede_space_members",
                "Address spaces of the application this space knows alive, itself included.",
                space.spaces().len() as f64,
            ));
            stampede_observe::process(out);
        });
        // Other spaces ask for this space's samples (`stampede metrics`, `top`).
        let metrics = sh.metrics.clone();
        self.serve(crate::metrics::SERVICE, move |_from, _arg| {
            Ok(Item::from(stampede_observe::to_json(&metrics.samples())))
        })?;
        if let Some(addr) = &sh.cfg.metrics_listen {
            let endpoint = MetricsEndpoint::start(addr, sh.metrics.clone())
                .map_err(|e| NetError::Config(format!("metrics_listen: {e}")))?;
            *lock(&sh.metrics_addr) = Some(endpoint.addr());
            self.keep(endpoint);
        }
        Ok(())
    }

    /// This space's metrics: its runtime's zones, named containers and tasks and its own
    /// counters, read when rendered ([`Metrics::render`] gives the OpenMetrics text). More
    /// sources may be added, e.g. an executor's.
    pub fn metrics(&self) -> Metrics {
        self.sh.metrics.clone()
    }

    /// The samples of address space `space` (this one's or another's), waiting up to
    /// `timeout` for its answer.
    pub fn metrics_of(&self, space: &str, timeout: Duration) -> Result<Vec<Sample>, NetError> {
        if space == self.sh.id {
            return Ok(self.sh.metrics.samples());
        }
        let answer = self
            .call(space, crate::metrics::SERVICE, Item::from(Vec::<u8>::new()))
            .and_then(|c| c.wait_timeout(timeout))
            .map_err(|e| NetError::Unreachable(format!("metrics of {space}: {e}")))?;
        let text = answer
            .as_str()
            .ok_or_else(|| NetError::Unreachable(format!("metrics of {space}: not text")))?;
        stampede_observe::from_json(text)
            .map_err(|e| NetError::Unreachable(format!("{space}: {e}")))
    }

    /// The samples of every address space of the application, each with a `space` label,
    /// and `stampede_space_up{space}`: 1 for a space that answered within `timeout`, 0 for
    /// one that did not. The spaces are asked at once.
    pub fn application_metrics(&self, timeout: Duration) -> Vec<Sample> {
        let spaces = self.spaces();
        let asked: Vec<_> = spaces
            .iter()
            .map(|s| {
                let me = self.clone();
                let s = s.clone();
                std::thread::spawn(move || me.metrics_of(&s, timeout))
            })
            .collect();
        let mut out = Vec::new();
        for (space, asked) in spaces.iter().zip(asked) {
            let got = asked
                .join()
                .unwrap_or_else(|_| Err(NetError::Unreachable(space.clone())));
            out.push(
                Sample::gauge(
                    "stampede_space_up",
                    "Whether the address space answered for its metrics.",
                    if got.is_ok() { 1.0 } else { 0.0 },
                )
                .label("space", space.clone()),
            );
            for s in got.unwrap_or_default() {
                out.push(s.label("space", space.clone()));
            }
        }
        out
    }

    /// Serves the application's live dashboard on `listen` (`host:port`, port 0 picks one)
    /// until the returned handle is dropped, titled `title` or else the application's name:
    /// every space's metrics, this one's included, as
    /// [`application_metrics`](Space::application_metrics) gives them, asked at each poll
    /// with `timeout`.
    ///
    /// The page asks for this space's credentials when it has some
    /// ([`Config::credentials`]), and is served over HTTPS with its certificate when it has
    /// one ([`Tls::certificate`](crate::Tls::certificate) and key).
    pub fn dashboard(
        &self,
        listen: &str,
        title: Option<&str>,
        timeout: Duration,
    ) -> std::io::Result<stampede_observe::Dashboard> {
        let metrics = stampede_observe::Metrics::new();
        let me = self.clone();
        metrics.add(move |out: &mut Vec<Sample>| out.extend(me.application_metrics(timeout)));
        let title = title.unwrap_or(&self.sh.app);
        stampede_observe::Dashboard::start_with(listen, title, metrics, &self.http_access())
    }

    /// How a web page about the application is protected: with this space's credentials
    /// and, when it has a certificate and key, over HTTPS.
    pub fn http_access(&self) -> stampede_observe::Access {
        let cfg = &self.sh.cfg;
        stampede_observe::Access {
            credentials: cfg.credentials.clone(),
            tls: cfg
                .tls
                .as_ref()
                .and_then(|t| Some((t.certificate.clone()?, t.private_key.clone()?))),
        }
    }

    /// Where this space serves its metrics ([`Config::metrics_listen`]), if anywhere.
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        *lock(&self.sh.metrics_addr)
    }

    fn keep(&self, x: impl std::any::Any + Send + Sync) {
        lock(&self.sh.keep).push(Box::new(x));
    }

    /// Subscribes to what owners send this space on `<what>/<this space>/<owner>`.
    fn subscribe_owners(
        &self,
        what: &str,
        handle: fn(&Arc<Shared>, &str, &zenoh::sample::Sample),
    ) -> Result<(), NetError> {
        let sh = &self.sh;
        let weak = Arc::downgrade(sh);
        let prefix = format!("{}/", sh.key(what, &sh.id));
        let sub = sh
            .session
            .declare_subscriber(format!("{prefix}*"))
            .callback(move |s| {
                let Some(sh) = weak.upgrade() else { return };
                if let Some(owner) = s.key_expr().as_str().strip_prefix(&prefix) {
                    handle(&sh, owner, &s);
                }
            })
            .wait()
            .map_err(|e| NetError::Connect(zenoh_text(&e)))?;
        self.keep(sub);
        Ok(())
    }

    fn start(
        &self,
        push_rx: Receiver<(u64, Timestamp, u64)>,
        acks_rx: Receiver<(String, wire::Ack)>,
        hurried: Receiver<u32>,
    ) -> Result<(), NetError> {
        let sh = &self.sh;
        let z = |e: zenoh::Error| NetError::Connect(zenoh_text(&e));
        // Membership: who is alive, who left.
        let weak = Arc::downgrade(sh);
        let prefix = sh.key("space", "");
        let sub = sh
            .session
            .liveliness()
            .declare_subscriber(sh.key("space", "*"))
            .history(true)
            .callback(move |s| {
                let Some(sh) = weak.upgrade() else { return };
                let Some(space) = s.key_expr().as_str().strip_prefix(&prefix) else {
                    return;
                };
                match s.kind() {
                    SampleKind::Put => {
                        // What a space seen leaving held here was released.
                        sh.members.arrived(space);
                    }
                    SampleKind::Delete => sh.space_left(space),
                }
            })
            .wait()
            .map_err(z)?;
        self.keep(sub);
        // Operations on containers owned here.
        let weak = Arc::downgrade(sh);
        let q = sh
            .session
            .declare_queryable(format!("{}/*", sh.key("op", &sh.id)))
            .callback(move |q| {
                if let Some(sh) = weak.upgrade() {
                    server::serve(&sh, q);
                }
            })
            .wait()
            .map_err(z)?;
        self.keep(q);
        // Name records of names registered here.
        let weak = Arc::downgrade(sh);
        let q = sh
            .session
            .declare_queryable(format!("{}/**", sh.key("meta", &sh.id)))
            .callback(move |q| {
                if let Some(sh) = weak.upgrade() {
                    server::serve_names(&sh, q);
                }
            })
            .wait()
            .map_err(z)?;
        self.keep(q);
        // Watermark marks: others' as they change, ours on request.
        let weak = Arc::downgrade(sh);
        let prefix = sh.key("marks", "");
        let sub = sh
            .session
            .declare_subscriber(sh.key("marks", "*"))
            .callback(move |s| {
                let Some(sh) = weak.upgrade() else { return };
                let Some(space) = s.key_expr().as_str().strip_prefix(&prefix) else {
                    return;
                };
                match wire::decode_marks(zbytes::to_bytes(s.payload())) {
                    Ok(m) => sh.marks_received(space, &m),
                    Err(e) => {
                        sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(space, "malformed watermark marks: {e}");
                    }
                }
            })
            .wait()
            .map_err(z)?;
        self.keep(sub);
        let weak = Arc::downgrade(sh);
        let q = sh
            .session
            .declare_queryable(sh.key("marks", &sh.id))
            .callback(move |q| {
                let Some(sh) = weak.upgrade() else { return };
                let marks = sh.book().last_message();
                // On this space's own key: the asker takes the space's id from it.
                let _ = q
                    .reply(sh.key("marks", &sh.id), wire::encode_marks(&marks))
                    .wait();
            })
            .wait()
            .map_err(z)?;
        self.keep(q);
        // Puts other spaces send without waiting, and the answers to this space's.
        let weak = Arc::downgrade(sh);
        let sub = sh
            .session
            .declare_subscriber(format!("{}/*", sh.key("put", &sh.id)))
            .callback(move |s| {
                if let Some(sh) = weak.upgrade() {
                    crate::intake::serve(&sh, &s);
                }
            })
            .wait()
            .map_err(z)?;
        self.keep(sub);
        // Consumes and applied gets other spaces send without waiting.
        let weak = Arc::downgrade(sh);
        let sub = sh
            .session
            .declare_subscriber(format!("{}/*", sh.key("note", &sh.id)))
            .callback(move |s| {
                if let Some(sh) = weak.upgrade() {
                    server::serve_note(&sh, &s);
                }
            })
            .wait()
            .map_err(z)?;
        self.keep(sub);
        self.subscribe_owners("ack", |sh, owner, s| sh.acked(owner, s))?;
        // Named code others invoke here, and the answers to this space's invocations.
        self.subscribe_owners("code", code::received)?;
        self.subscribe_owners("answer", code::answer_received)?;
        // Items owners push ahead to this space.
        self.subscribe_owners("push", |sh, owner, s| sh.pushed_here(owner, s))?;
        let weak = Arc::downgrade(sh);
        std::thread::Builder::new()
            .name("stampede-push".into())
            .spawn(move || crate::feed::run(weak, push_rx))
            .map_err(|e| NetError::Connect(format!("could not start a thread: {e}")))?;
        let weak = Arc::downgrade(sh);
        std::thread::Builder::new()
            .name("stampede-acks".into())
            .spawn(move || crate::intake::run(weak, acks_rx))
            .map_err(|e| NetError::Connect(format!("could not start a thread: {e}")))?;
        // Report local marks as passes change them.
        let (tx, rx): (Sender<()>, Receiver<()>) = crossbeam_channel::bounded(1);
        let weak: Weak<Shared> = Arc::downgrade(sh);
        {
            let weak = weak.clone();
            sh.rt.on_local_mark(move |zone, mark, pass| {
                if let Some(sh) = weak.upgrade() {
                    let mut passes = lock(&sh.passes);
                    let e = passes.entry(zone.0).or_insert((mark, pass));
                    if e.1 < pass {
                        *e = (mark, pass);
                    }
                    drop(passes);
                    let _ = tx.try_send(());
                }
            });
        }
        std::thread::Builder::new()
            .name("stampede-marks".into())
            .spawn(move || {
                // Changes are sent as passes find them, and all marks again every second,
                // for a space that joined in between; a zone others wait on is collected
                // and sent at once.
                loop {
                    let r = crossbeam_channel::select! {
                        recv(rx) -> r => r.map(|()| None),
                        recv(hurried) -> r => r.map(Some),
                        default(Duration::from_secs(1)) => {
                            let Some(sh) = weak.upgrade() else { return };
                            if sh.session.is_closed() {
                                return; // left, while handles remain
                            }
                            sh.publish_marks();
                            continue;
                        }
                    };
                    let Some(sh) = weak.upgrade() else { return };
                    match r {
                        Ok(None) => sh.publish_if_stale(),
                        Ok(Some(zone)) => {
                            sh.rt.collect_zone(ZoneId(zone));
                            sh.publish_if_stale();
                        }
                        Err(_) => return,
                    }
                }
            })
            .map_err(|e| NetError::Connect(format!("could not start a thread: {e}")))?;
        // Who is here now, and their marks, before anything else happens.
        if let Ok(replies) = sh
            .session
            .liveliness()
            .get(sh.key("space", "*"))
            .timeout(sh.cfg.op_timeout)
            .wait()
        {
            let prefix = sh.key("space", "");
            while let Ok(r) = replies.recv() {
                if let Ok(s) = r.result() {
                    if let Some(space) = s.key_expr().as_str().strip_prefix(&prefix) {
                        sh.members.arrived(space);
                    }
                }
            }
        }
        if let Ok(replies) = sh
            .session
            .get(sh.key("marks", "*"))
            .target(zenoh::query::QueryTarget::All)
            .consolidation(zenoh::query::ConsolidationMode::None)
            .timeout(sh.cfg.op_timeout)
            .wait()
        {
            let prefix = sh.key("marks", "");
            while let Ok(r) = replies.recv() {
                if let Ok(s) = r.result() {
                    let space = s.key_expr().as_str().strip_prefix(&prefix).unwrap_or("");
                    match wire::decode_marks(zbytes::to_bytes(s.payload())) {
                        Ok(m) => sh.marks_received(space, &m),
                        Err(e) => {
                            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!(space, "malformed watermark marks: {e}");
                        }
                    }
                }
            }
        }
        let token = sh
            .session
            .liveliness()
            .declare_token(sh.key("space", &sh.id))
            .wait()
            .map_err(z)?;
        self.keep(token);
        Ok(())
    }

    /// This address space's id: its Zenoh session id.
    pub fn id(&self) -> &str {
        &self.sh.id
    }

    /// The application this space joined.
    pub fn app(&self) -> &str {
        &self.sh.app
    }

    /// The local runtime: containers and tasks of this address space alone.
    pub fn runtime(&self) -> &Runtime {
        &self.sh.rt
    }

    /// The configuration the space joined with.
    pub fn config(&self) -> &Config {
        &self.sh.cfg
    }

    /// The address spaces currently known alive, this one included.
    pub fn spaces(&self) -> Vec<String> {
        let mut v = self.sh.members.live();
        if !v.contains(&self.sh.id) {
            v.push(self.sh.id.clone());
        }
        v.sort();
        v
    }

    /// Whether `space` was seen leaving or dying, and has not come back since (one that
    /// comes back after a lost link counts as present again). A space never seen is not.
    pub fn has_left(&self, space: &str) -> bool {
        self.sh.is_dead(space)
    }

    /// Counters of this space's network activity.
    pub fn stats(&self) -> SpaceStats {
        let c = &self.sh.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SpaceStats {
            served: l(&c.served),
            malformed: l(&c.malformed),
            refused: l(&c.refused),
            unreachable: l(&c.unreachable),
            cache_hits: l(&c.cache_hits),
            spaces_lost: l(&c.spaces_lost),
            pushed: l(&c.pushed),
            push_skipped: l(&c.push_skipped),
            push_received: l(&c.push_received),
            consume_failed: l(&c.consume_failed),
            events_sent: l(&c.events_sent),
            events_received: l(&c.events_received),
            events_dropped: l(&c.events_dropped),
            events_lost: l(&c.events_lost),
            puts_sent: l(&c.puts_sent),
            puts_refused: l(&c.puts_refused),
            view_hits: l(&c.view_hits),
            register_hits: l(&c.register_hits),
            leased: l(&c.leased),
            lease_hits: l(&c.lease_hits),
            view_snapshots: l(&c.view_snapshots),
            seen_refused: l(&c.seen_refused),
            sent_as_received: l(&c.sends.as_received),
            sent_fresh: l(&c.sends.fresh),
            loans_shared: l(&c.loans_shared),
            loans_plain: l(&c.loans_plain),
            invocations_sent: l(&self.sh.code.counters.sent),
            invocations_served: l(&self.sh.code.counters.served),
            invocations_unknown: l(&self.sh.code.counters.unknown),
            invocations_failed: l(&self.sh.code.counters.failed),
            answers_late: l(&self.sh.code.counters.late),
            denied: l(&c.denied),
            quota_refused: l(&c.quota_refused),
        }
    }

    fn publish(&self, rec: NameRecord) -> Result<(), NetError> {
        if !valid_name(&rec.name) {
            return Err(StmError::InvalidName(rec.name).into());
        }
        // Names are first come, first served across the application.
        let taken = |name: String| NetError::Stm(stampede_core::StmError::NameTaken(name));
        if let Some(other) = self.record(&rec.name) {
            if other.space != self.sh.id {
                return Err(taken(rec.name));
            }
        }
        registrar::claim(self, &rec.name)?;
        let name = rec.name.clone();
        {
            let mut names = lock(&self.sh.names);
            if names.contains_key(&name) {
                return Err(taken(name));
            }
            let token = self
                .sh
                .session
                .liveliness()
                .declare_token(format!("{}/{}", self.sh.key("name", &self.sh.id), name))
                .wait()
                .map_err(|e| NetError::Connect(zenoh_text(&e)))?;
            names.insert(name.clone(), (rec, token));
        }
        // Two spaces registering one name at once may both have passed the check above;
        // each then sees the other's record and withdraws, so a name never has two
        // owners (both callers get `NameTaken` and may try again).
        let seen = self.fetch_names(&format!("*/{name}"));
        let rivals = seen.into_iter().any(|r| r.space != self.sh.id);
        if rivals {
            lock(&self.sh.names).remove(&name);
            return Err(taken(name));
        }
        Ok(())
    }

    /// Registers a service: a name with metadata and no container, gone when this space
    /// leaves or dies.
    pub fn register_service(&self, name: &str, meta: &str) -> Result<(), NetError> {
        self.publish(NameRecord {
            name: name.to_owned(),
            space: self.sh.id.clone(),
            kind: Kind::Service,
            container: 0,
            zone: 0,
            capacity: 0,
            meta: meta.to_owned(),
        })
    }

    /// Creates a channel owned and served by the address space `space` (one of
    /// [`spaces`](Space::spaces)); a name registers it application-wide there. This space
    /// uses it like any other space's container.
    pub fn channel_on(&self, space: &str, opts: ContainerOptions) -> Result<Channel, NetError> {
        match self.create_on(space, Kind::Channel, opts)? {
            Named::Channel(c) => Ok(c),
            _ => unreachable!("created a channel"),
        }
    }

    /// Creates a queue owned by `space` (see [`channel_on`](Space::channel_on)).
    pub fn queue_on(&self, space: &str, opts: ContainerOptions) -> Result<Queue, NetError> {
        match self.create_on(space, Kind::Queue, opts)? {
            Named::Queue(q) => Ok(q),
            _ => unreachable!("created a queue"),
        }
    }

    /// Creates a register owned by `space` (see [`channel_on`](Space::channel_on)).
    pub fn register_on(&self, space: &str, opts: ContainerOptions) -> Result<Register, NetError> {
        match self.create_on(space, Kind::Register, opts)? {
            Named::Register(r) => Ok(r),
            _ => unreachable!("created a register"),
        }
    }

    fn create_on(
        &self,
        space: &str,
        kind: Kind,
        opts: ContainerOptions,
    ) -> Result<Named, NetError> {
        let rt = &self.sh.rt;
        if space == self.sh.id {
            return Ok(match kind {
                Kind::Channel => Named::Channel(rt.channel(opts)?),
                Kind::Queue => Named::Queue(rt.queue(opts)?),
                _ => Named::Register(rt.register(opts)?),
            });
        }
        if opts.capacity == Some(0) {
            return Err(StmError::InvalidArgument("capacity must be at least 1".into()).into());
        }
        if let Some(n) = &opts.name {
            if !valid_name(n) {
                return Err(StmError::InvalidName(n.clone()).into());
            }
        }
        let req = wire::Request::Create {
            kind,
            name: opts.name.clone().unwrap_or_default(),
            zone: opts.zone.0,
            capacity: opts.capacity.map_or(0, |c| c as u64),
            meta: opts.meta.clone(),
        };
        // The owner registers a name with up to two name-server rounds of its own.
        let limit = 3 * self.sh.cfg.op_timeout + self.sh.cfg.wait_slice;
        let container = match remote::call_within(&self.sh, space, &req, limit) {
            Ok(wire::Reply::Created { container }) => container,
            Ok(other) => return Err(remote::stm_error(other, space).into()),
            Err(e) => return Err(NetError::Unreachable(e)),
        };
        let rec = NameRecord {
            name: opts.name.unwrap_or_default(),
            space: space.to_owned(),
            kind,
            container,
            zone: opts.zone.0,
            capacity: opts.capacity.map_or(0, |c| c as u64),
            meta: opts.meta,
        };
        let sh = self.sh.clone();
        Ok(match kind {
            Kind::Channel => Named::Channel(remote::channel(sh, rec)),
            Kind::Queue => Named::Queue(remote::queue(sh, rec)),
            _ => Named::Register(remote::register(sh, rec)),
        })
    }

    /// Removes a name this space registered; `false` if it had none such.
    pub fn unregister(&self, name: &str) -> bool {
        lock(&self.sh.names).remove(name).is_some()
    }

    fn fetch_names(&self, pattern: &str) -> Vec<NameRecord> {
        let sh = &self.sh;
        // An unbounded channel: this space's own queryable answers on this very thread,
        // before the get returns, and a bounded one (Zenoh's default holds 256 replies)
        // would block it for ever once this space has more names than that.
        let (tx, replies) = std::sync::mpsc::channel();
        let sent = sh
            .session
            .get(format!("stampede/{}/meta/{pattern}", sh.app))
            .target(zenoh::query::QueryTarget::All)
            .consolidation(zenoh::query::ConsolidationMode::None)
            .timeout(sh.cfg.op_timeout)
            .callback(move |r| {
                let _ = tx.send(r);
            })
            .wait();
        if sent.is_err() {
            return Vec::new();
        }
        let mut out = Vec::new();
        while let Ok(r) = replies.recv() {
            if let Ok(s) = r.result() {
                match wire::decode_name(zbytes::to_bytes(s.payload())) {
                    Ok(rec) if !sh.is_dead(&rec.space) => out.push(rec),
                    Ok(_) => {}
                    Err(e) => {
                        sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("malformed name record: {e}");
                    }
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name).then(a.space.cmp(&b.space)));
        out
    }

    /// The record of `name`, if some live address space registered it now.
    pub fn record(&self, name: &str) -> Option<NameRecord> {
        if !valid_name(name) {
            return None;
        }
        if let Some((r, _)) = lock(&self.sh.names).get(name) {
            return Some(r.clone());
        }
        self.fetch_names(&format!("*/{name}")).into_iter().next()
    }

    /// Waits up to `timeout` for `name` to be registered.
    pub fn wait_for(&self, name: &str, timeout: Duration) -> Result<NameRecord, NetError> {
        if !valid_name(name) {
            return Err(StmError::InvalidName(name.to_owned()).into());
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.record(name) {
                return Ok(r);
            }
            if Instant::now() >= deadline {
                return Err(StmError::NotFound(name.to_owned()).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every name registered in the application now.
    pub fn records(&self) -> Vec<NameRecord> {
        self.fetch_names("*/**")
    }

    /// Watches names being registered and removed; current names come first as `Added`.
    pub fn watch(&self) -> Result<NameWatch, NetError> {
        self.watch_under("")
    }

    /// As [`watch`](Space::watch), for the names under `prefix` only (`""`, or whole
    /// chunks ending in `/`, such as `"cluster/space/"`): the name server sends only those,
    /// so a watch of a few names costs nothing however many others there are.
    pub fn watch_under(&self, prefix: &str) -> Result<NameWatch, NetError> {
        let chunks = prefix.strip_suffix('/').map(|p| p.split('/'));
        let whole = match chunks {
            None => prefix.is_empty(),
            Some(mut c) => c.all(|c| !c.is_empty() && !c.contains(['*', '$', '?', '#'])),
        };
        if !whole {
            return Err(NetError::Stm(StmError::InvalidName(prefix.to_owned())));
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        let under = format!("stampede/{}/name/*/{prefix}**", self.sh.app);
        let prefix = format!("stampede/{}/name/", self.sh.app);
        let sub = self
            .sh
            .session
            .liveliness()
            .declare_subscriber(under)
            .history(true)
            .callback(move |s| {
                let rest = s.key_expr().as_str().strip_prefix(&prefix).unwrap_or("");
                if let Some((space, name)) = rest.split_once('/') {
                    let _ = tx.send((
                        space.to_owned(),
                        name.to_owned(),
                        s.kind() == SampleKind::Put,
                    ));
                }
            })
            .wait()
            .map_err(|e| NetError::Connect(zenoh_text(&e)))?;
        Ok(NameWatch {
            space: self.clone(),
            rx,
            _sub: sub,
        })
    }

    /// Serves `handler` under `name`: any address space of the application may invoke it
    /// here ([`invoke`](Space::invoke), [`call`](Space::call)). Handlers run one at a time,
    /// in the order invocations arrived, on a thread of this space; one that has long work
    /// to do hands it to threads of its own and returns, and none may wait for a call to
    /// this space. The handler gets the caller's id and the argument; its result answers a
    /// call, and an error (or a panic) is reported to the caller.
    ///
    /// Fails with [`StmError::InvalidName`] for a name that cannot be used and
    /// [`StmError::NameTaken`] when this space serves the name already.
    pub fn serve(
        &self,
        name: &str,
        handler: impl Fn(&str, Item) -> Result<Item, String> + Send + Sync + 'static,
    ) -> Result<(), NetError> {
        if !valid_name(name) {
            return Err(StmError::InvalidName(name.to_owned()).into());
        }
        let handler: Arc<Handler> = Arc::new(handler);
        if self.sh.code.serve(name, handler) {
            Ok(())
        } else {
            Err(StmError::NameTaken(name.to_owned()).into())
        }
    }

    /// Stops serving `name`; `false` if nothing was served under it.
    pub fn unserve(&self, name: &str) -> bool {
        self.sh.code.unserve(name)
    }

    /// Invokes the code `space` serves under `name` with `arg`, without waiting: returns
    /// once the invocation is sent. The invocations this space makes reach `space` in the
    /// order they were made. A failure there (nothing served under the name, a handler
    /// that failed) comes back later: it counts in [`SpaceStats::invocations_failed`] and
    /// goes to the listeners of [`on_invoke_failure`](Space::on_invoke_failure). `space`
    /// may be this space's own id.
    ///
    /// Fails at once with [`InvokeError::InvalidName`], or [`InvokeError::Unreachable`] for
    /// a space that left, died or is not known alive here, or when the invocation could not
    /// be sent.
    pub fn invoke(&self, space: &str, name: &str, arg: impl Into<Item>) -> Result<(), InvokeError> {
        code::invoke(&self.sh, space, name, arg.into(), false).map(|_| ())
    }

    /// Invokes the code `space` serves under `name` with `arg` and returns the call, whose
    /// [`wait`](Call::wait) gives the handler's result, or why there is none: an unknown
    /// name, a failed handler, a space that left or died meanwhile, no answer in time. Fails
    /// at once as [`invoke`](Space::invoke) does.
    pub fn call(&self, space: &str, name: &str, arg: impl Into<Item>) -> Result<Call, InvokeError> {
        let (seq, rx) = code::invoke(&self.sh, space, name, arg.into(), true)?;
        let rx = rx.expect("a call has an answer to wait for");
        Ok(Call::new(&self.sh, seq, space, name, rx))
    }

    /// Calls `f` with every failure of this space's one-way invocations (see
    /// [`invoke`](Space::invoke)), on the thread that runs named code here; returns an id
    /// for [`remove_invoke_failure`](Space::remove_invoke_failure).
    pub fn on_invoke_failure(&self, f: impl Fn(&InvokeError) + Send + Sync + 'static) -> u64 {
        let f: Arc<FailureListener> = Arc::new(f);
        self.sh.code.listen(f)
    }

    /// Removes a listener of [`on_invoke_failure`](Space::on_invoke_failure); `false` if
    /// there was none with this id.
    pub fn remove_invoke_failure(&self, id: u64) -> bool {
        self.sh.code.unlisten(id)
    }

    /// What holds `zone`'s watermark in every live address space, this one first; a space
    /// that did not answer is listed with the reason.
    pub fn explain_cluster(&self, zone: ZoneId) -> Vec<SpaceWatermark> {
        let mut out = vec![SpaceWatermark {
            space: self.sh.id.clone(),
            report: Ok(server::explain(&self.sh, zone.0)),
        }];
        for s in self.spaces() {
            if s != self.sh.id {
                let r = remote::call(&self.sh, &s, &wire::Request::Explain { zone: zone.0 });
                let report = match r {
                    Ok(wire::Reply::Explain {
                        local,
                        floor,
                        watermark,
                        text,
                    }) => Ok(ZoneWatermark {
                        local,
                        floor,
                        watermark,
                        text,
                    }),
                    Ok(wire::Reply::Error { text, .. }) => Err(NetError::Unreachable(text)),
                    Ok(other) => Err(NetError::Unreachable(crate::server::unexpected(&other))),
                    Err(why) => Err(NetError::Unreachable(why)),
                };
                out.push(SpaceWatermark { space: s, report });
            }
        }
        out
    }

    /// Leaves the application: names and the liveliness token go, so others release what
    /// this space held at once rather than after the lease. The Zenoh session closes here,
    /// on the caller's thread: left to the last handle, it could close on a background
    /// thread while the process exits, after Zenoh's statics are gone.
    pub fn leave(self) {
        self.sh.release();
        self.sh.close_session();
    }
}

impl std::ops::Deref for Space {
    type Target = Runtime;
    fn deref(&self) -> &Runtime {
        &self.sh.rt
    }
}

/// The space's directory, installed in its runtime: names and lookups across the
/// application, and the marks a new root task needs published first.
struct Names {
    sh: Weak<Shared>,
}

impl Names {
    fn space(&self) -> Result<Space, StmError> {
        self.sh
            .upgrade()
            .map(|sh| Space { sh })
            .ok_or_else(|| StmError::Unreachable("the address space left its application".into()))
    }
}

/// A failure of the name server as the runtime reports it.
fn naming_error(e: NetError) -> StmError {
    match e {
        NetError::Stm(e) => e,
        other => StmError::Unreachable(other.to_string()),
    }
}

impl Directory for Names {
    fn announce(&self, name: &str, c: &Named, opts: &ContainerOptions) -> Result<(), StmError> {
        let space = self.space()?;
        let sh = &space.sh;
        if !valid_name(name) {
            return Err(StmError::InvalidName(name.to_owned()));
        }
        let id = c.id().0;
        // Serve the container before announcing its name: whoever sees the name may attach
        // at once.
        lock(&sh.owned).insert(id, (c.clone(), Some(name.to_owned())));
        let rec = NameRecord {
            name: name.to_owned(),
            space: sh.id.clone(),
            kind: c.kind(),
            container: id,
            zone: c.zone().0,
            capacity: c.capacity().map_or(0, |n| n as u64),
            meta: opts.meta.clone(),
        };
        space.publish(rec).map_err(|e| {
            lock(&sh.owned).remove(&id);
            naming_error(e)
        })
    }

    fn find(&self, name: &str, timeout: Duration) -> Result<Named, StmError> {
        let space = self.space()?;
        let r = space.wait_for(name, timeout).map_err(naming_error)?;
        if r.space == space.sh.id {
            if let Some(c) = space.sh.owned(r.container) {
                return Ok(c);
            }
        }
        let sh = space.sh.clone();
        Ok(match r.kind {
            Kind::Channel => Named::Channel(remote::channel(sh, r)),
            Kind::Queue => Named::Queue(remote::queue(sh, r)),
            Kind::Register => Named::Register(remote::register(sh, r)),
            is => {
                return Err(StmError::WrongKind {
                    name: name.to_owned(),
                    is,
                })
            }
        })
    }

    fn root_task(&self, zone: ZoneId) {
        // Others must count the new task before it can reach their containers: report
        // this zone's mark now, ahead of any request the task sends.
        let Some(sh) = self.sh.upgrade() else { return };
        sh.rt.collect_zone(zone);
        sh.publish_marks();
    }
}

impl Shared {
    /// What goes before the session closes: names, subscriptions, declared publishers
    /// (undeclared while the session can), the collector.
    fn release(&self) {
        lock(&self.names).clear();
        lock(&self.keep).clear();
        self.notes.close();
        self.code.close();
        self.feeds.close();
        self.intake.close();
        self.rt.stop_collector();
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.release();
        self.close_session();
    }
}

/// How long closing the session waits for Zenoh's own tasks. Its default, 10 s, is what a
/// reconnection caught in a handshake with a stopped peer held `leave` for; what is still
/// running then is abandoned, and the peers notice within their lease.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

impl Shared {
    fn close_session(&self) {
        let _ = self.session.close().timeout(CLOSE_TIMEOUT).wait();
    }
}

/// One address space's answer to [`Space::explain_cluster`].
#[derive(Clone, Debug)]
pub struct SpaceWatermark {
    /// The address space.
    pub space: String,
    /// What holds the zone's watermark there, or why it did not answer.
    pub report: Result<ZoneWatermark, NetError>,
}

/// What holds a zone's watermark in one address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneWatermark {
    /// The lowest of the space's own terms: what it reports to the others.
    pub local: Timestamp,
    /// Its floor: everything below has been reclaimed there.
    pub floor: Timestamp,
    /// The watermark its terms and the others' reports give now.
    pub watermark: Timestamp,
    /// Its explanation, one line per term.
    pub text: String,
}
