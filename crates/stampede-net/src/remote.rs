//! The remote flavor of the core's containers: a container of another address space,
//! served through the core's provider interface. Every operation is a request to the
//! owner, which runs it on a proxy of the requesting task (see `server`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stampede_core::provider::{
    self, ArrivalCallback, Backend, Consume, GarbageCallback, Got, Link, Put, TaskRef as CoreTask,
};
use stampede_core::{
    Channel, ContainerId, ErrorCode as Code, Figures, GetError, Item, Neighbors, PutError,
    PutErrorKind, Queue, Register, Selector, StmError, Timestamp, Wait, ZoneId,
};
use zenoh::Wait as _;

use crate::error::zenoh_text;
use crate::events::Events;
use crate::pipe::Pipe;
use crate::space::{lock, Shared};
use crate::view::{Answer, View};
use crate::wire::{self, ErrorCode, Kind, NameRecord, Reply, Request, TaskRef, WireItem};
use crate::zbytes;

/// How long a get waits for an item its owner said was pushed before fetching it.
const PUSH_WAIT: Duration = Duration::from_millis(50);

/// How long a get that nothing here answers yet waits here for a push before asking the
/// owner: at most [`PUSH_WAIT`], never past its own wait; `None` for a get that does not wait.
fn push_wait_until(wait: Wait) -> Option<Instant> {
    match wait {
        Wait::Never => None,
        Wait::For(d) => Some(Instant::now() + d.min(PUSH_WAIT)),
        Wait::Forever => Some(Instant::now() + PUSH_WAIT),
    }
}

/// Sends `req` to `owner` and waits for its answer, failing when the owner is known to have
/// left or does not answer within the configured timeout.
pub(crate) fn call(sh: &Shared, owner: &str, req: &Request) -> Result<Reply, String> {
    call_within(sh, owner, req, sh.cfg.op_timeout + sh.cfg.wait_slice)
}

/// [`call`], waiting up to `limit` for the answer.
pub(crate) fn call_within(
    sh: &Shared,
    owner: &str,
    req: &Request,
    limit: Duration,
) -> Result<Reply, String> {
    exchange(sh, owner, req, limit, false).map(|mut r| r.swap_remove(0))
}

/// Sends `req` to `owner` and waits up to `limit` for its first answer, or with `all` for
/// every answer until the owner's last: at least one.
fn exchange(
    sh: &Shared,
    owner: &str,
    req: &Request,
    limit: Duration,
    all: bool,
) -> Result<Vec<Reply>, String> {
    let fail = |why: String| {
        tracing::warn!("{why}");
        sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
        Err(why)
    };
    if sh.is_dead(owner) {
        return fail(format!("address space {owner} has left"));
    }
    let f = zbytes::frame(&sh.counters.sends, wire::encode_request(req));
    let replies = match sh
        .session
        .get(sh.to_owner("op", owner))
        .payload(f.payload)
        .attachment(f.attachment)
        .timeout(limit)
        .consolidation(zenoh::query::ConsolidationMode::None)
        .wait()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("request to {owner} not sent: {}", zenoh_text(&e))),
    };
    let start = Instant::now();
    let mut got = Vec::new();
    loop {
        match replies.recv_timeout(Duration::from_millis(50)) {
            Ok(Some(r)) => {
                let s = match r.result() {
                    Ok(s) => s,
                    Err(e) => {
                        return fail(format!(
                            "error from {owner}: {}",
                            String::from_utf8_lossy(&e.payload().to_bytes())
                        ))
                    }
                };
                match wire::decode_reply(zbytes::to_parts(s.payload(), s.attachment())) {
                    Ok(r) => got.push(r),
                    Err(e) => return fail(format!("malformed reply from {owner}: {e}")),
                }
                if !all {
                    return Ok(got);
                }
            }
            Ok(None) => {
                if sh.is_dead(owner) {
                    return fail(format!("address space {owner} left or died"));
                }
                if start.elapsed() > limit {
                    if !got.is_empty() {
                        return Ok(got);
                    }
                    return fail(format!("no answer from {owner} within {limit:?}"));
                }
            }
            // The owner's final message: every answer is in.
            Err(_) if !got.is_empty() => return Ok(got),
            Err(_) => {
                let why = if sh.is_dead(owner) {
                    format!("address space {owner} left or died")
                } else {
                    format!("no answer from {owner}")
                };
                return fail(why);
            }
        }
    }
}

/// Sends without waiting for the answer (detaches and exits, which cannot fail usefully).
pub(crate) fn send(sh: &Shared, owner: &str, req: &Request) {
    if sh.is_dead(owner) {
        return;
    }
    let f = zbytes::frame(&sh.counters.sends, wire::encode_request(req));
    let _ = sh
        .session
        .get(sh.to_owner("op", owner))
        .payload(f.payload)
        .attachment(f.attachment)
        .timeout(sh.cfg.op_timeout)
        .callback(|_| {})
        .wait();
}

/// Calls with a wait: the owner waits one slice at a time, and the request is repeated with
/// the time left until the answer comes or `wait` runs out (then `Reply::Again`).
fn call_waiting(
    sh: &Shared,
    owner: &str,
    wait: Wait,
    make: impl Fn(Wait) -> Request,
) -> Result<Reply, String> {
    call_waiting_until(sh, owner, wait, None, make).map(|r| r.expect("never interrupted"))
}

/// [`call_waiting`], asking `interrupted` between the slices a blocked request waits at its
/// owner; `None` when it asked to stop.
fn call_waiting_until(
    sh: &Shared,
    owner: &str,
    wait: Wait,
    interrupted: Option<&dyn Fn() -> bool>,
    make: impl Fn(Wait) -> Request,
) -> Result<Option<Reply>, String> {
    let deadline = match wait {
        Wait::For(d) => Some(Instant::now() + d),
        _ => None,
    };
    loop {
        let w = match (wait, deadline) {
            (Wait::For(_), Some(d)) => Wait::For(d.saturating_duration_since(Instant::now())),
            (w, _) => w,
        };
        let r = call(sh, owner, &make(w))?;
        if !matches!(r, Reply::Again) {
            return Ok(Some(r));
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(Some(r));
        }
        if interrupted.is_some_and(|stop| stop()) {
            return Ok(None);
        }
    }
}

/// A failure an owner reported: the core's code, its figures and text. A container or
/// connection the owner no longer has is, for the requester, closed or detached.
fn failure(r: Reply, owner: &str) -> Option<(Code, Figures, String)> {
    match r {
        Reply::Error { code, a, b, text } => {
            let code = match code {
                ErrorCode::Stm(c) => c,
                ErrorCode::UnknownContainer => Code::Closed,
                ErrorCode::UnknownConnection => Code::Detached,
                ErrorCode::Malformed | ErrorCode::Other => {
                    tracing::warn!(owner, "refused: {text}");
                    return None;
                }
            };
            Some((code, (a, b), text))
        }
        other => {
            tracing::warn!(owner, "{}", crate::server::unexpected(&other));
            None
        }
    }
}

fn get_error(r: Reply, owner: &str) -> GetError {
    if matches!(r, Reply::Again) {
        return GetError::Timeout(Neighbors::default());
    }
    failure(r, owner)
        .and_then(|(code, figures, text)| {
            GetError::from_code(code, figures).or_else(|| misfit("get", code, &text, owner))
        })
        .unwrap_or(GetError::Unreachable)
}

/// Logs an owner's error that no operation of this kind fails with; the caller reports it
/// as unreachable.
fn misfit<T>(op: &str, code: Code, text: &str, owner: &str) -> Option<T> {
    tracing::warn!(owner, "{op} failed with {code}: {text}");
    None
}

fn put_kind(r: Reply, owner: &str) -> PutErrorKind {
    if matches!(r, Reply::Again) {
        return PutErrorKind::Full;
    }
    failure(r, owner)
        .and_then(|(code, (a, _), text)| {
            PutErrorKind::from_code(code, a).or_else(|| misfit("put", code, &text, owner))
        })
        .unwrap_or(PutErrorKind::Unreachable)
}

pub(crate) fn stm_error(r: Reply, owner: &str) -> StmError {
    let Some((code, figures, text)) = failure(r.clone(), owner) else {
        return StmError::Unreachable(match r {
            Reply::Error { text, .. } => format!("{owner}: {text}"),
            other => crate::server::unexpected(&other),
        });
    };
    StmError::from_code(code, figures, &text).unwrap_or(StmError::InvalidArgument(
        format!("{owner} refused: {text}").into(),
    ))
}

/// A container of another address space, as found in the name server.
pub(crate) struct Remote {
    sh: Arc<Shared>,
    rec: NameRecord,
}

impl Remote {
    fn new(sh: Arc<Shared>, rec: NameRecord) -> Arc<Remote> {
        Arc::new(Remote { sh, rec })
    }
}

/// The core's channel handle for a channel another address space owns.
pub(crate) fn channel(sh: Arc<Shared>, rec: NameRecord) -> Channel {
    provider::channel(Remote::new(sh, rec))
}

/// The core's queue handle for a queue another address space owns.
pub(crate) fn queue(sh: Arc<Shared>, rec: NameRecord) -> Queue {
    provider::queue(Remote::new(sh, rec))
}

/// The core's register handle for a register another address space owns.
pub(crate) fn register(sh: Arc<Shared>, rec: NameRecord) -> Register {
    provider::register(Remote::new(sh, rec))
}

impl Backend for Remote {
    fn id(&self) -> ContainerId {
        ContainerId(self.rec.container)
    }
    fn zone(&self) -> ZoneId {
        ZoneId(self.rec.zone)
    }
    fn name(&self) -> Option<&str> {
        (!self.rec.name.is_empty()).then_some(self.rec.name.as_str())
    }
    fn owner(&self) -> &str {
        &self.rec.space
    }
    fn capacity(&self) -> Option<usize> {
        (self.rec.capacity > 0).then_some(self.rec.capacity as usize)
    }
    fn close(&self) -> Result<(), StmError> {
        let pipes: Vec<_> = lock(&self.sh.pipes)
            .iter()
            .filter(|(k, _)| k.0 == self.rec.space)
            .filter_map(|(_, p)| p.upgrade())
            .filter(|p| p.feeds(self.rec.container))
            .collect();
        for p in &pipes {
            p.before_close(&self.sh, self.sh.cfg.op_timeout);
        }
        let req = Request::Close {
            container: self.rec.container,
        };
        match call(&self.sh, &self.rec.space, &req) {
            Ok(Reply::Ok) => {
                pipes.iter().for_each(|p| p.closed());
                Ok(())
            }
            Ok(other) => Err(stm_error(other, &self.rec.space)),
            Err(e) => Err(StmError::Unreachable(e)),
        }
    }
    fn on_arrival(&self, f: ArrivalCallback) -> Result<u64, StmError> {
        Events::on_arrival(&self.sh, &self.rec.space, self.rec.container, f)
    }
    fn unsubscribe(&self, id: u64) -> bool {
        Events::unsubscribe_arrival(&self.sh, &self.rec.space, self.rec.container, id)
    }
    fn on_garbage(&self, h: GarbageCallback) -> Result<(), StmError> {
        if self.rec.kind == Kind::Register {
            return Err(StmError::Unsupported(
                "garbage handlers on a register (registers are outside collection)".into(),
            ));
        }
        Events::on_garbage(&self.sh, &self.rec.space, self.rec.container, h)
    }
    fn attach(&self, task: &CoreTask, input: bool) -> Result<Box<dyn Link>, StmError> {
        if !task.runtime().same(&self.sh.rt) {
            return Err(StmError::InvalidArgument(
                "the container was found through another address space than the task's".into(),
            ));
        }
        let owner = &self.rec.space;
        let tref = TaskRef {
            space: self.sh.id.clone(),
            task: task.id().0,
            zone: task.zone().0,
        };
        // Open before attaching, so no push that follows the snapshot is missed.
        let view = (input && self.rec.kind == Kind::Channel)
            .then(|| self.sh.views.open(owner, self.rec.container));
        let reads = input && self.rec.kind == Kind::Register;
        if reads {
            self.sh.latest.open(owner, self.rec.container);
        }
        let req = Request::Attach {
            task: tref.clone(),
            container: self.rec.container,
            input,
            vis: task.visibility(),
        };
        let attached = call(&self.sh, owner, &req);
        let conn = match attached {
            Ok(Reply::Attached { conn }) => conn,
            Ok(_) | Err(_) if reads => {
                self.sh.latest.close(owner, self.rec.container);
                return Err(match attached {
                    Ok(r) => stm_error(r, owner),
                    Err(e) => StmError::Unreachable(e),
                });
            }
            Ok(r) => return Err(stm_error(r, owner)),
            Err(e) => return Err(StmError::Unreachable(e)),
        };
        let mut link = RemoteLink {
            sh: self.sh.clone(),
            owner: owner.clone(),
            container: self.rec.container,
            kind: self.rec.kind,
            tref,
            id: conn,
            pipe: None,
            view,
            last_read: reads.then(|| Mutex::new(0)),
            lease: (input && self.rec.kind == Kind::Queue && self.sh.cfg.queue_prefetch > 0)
                .then(|| Mutex::new(VecDeque::new())),
        };
        link.snapshot();
        if !input && self.rec.kind == Kind::Channel {
            let (container, capacity) = (self.rec.container, self.rec.capacity);
            let pipe = Pipe::open(
                &self.sh,
                owner,
                container,
                conn,
                link.tref.clone(),
                capacity,
            );
            match pipe {
                Ok(p) => link.pipe = Some(p),
                // The link detaches as it drops.
                Err(e) => return Err(StmError::Unreachable(format!("cannot send puts: {e}"))),
            }
        }
        Ok(Box::new(link))
    }
}

/// A task's connection to a container of another address space.
struct RemoteLink {
    sh: Arc<Shared>,
    owner: String,
    container: u64,
    kind: Kind,
    tref: TaskRef,
    id: u64,
    /// Output connections to channels send puts without waiting.
    pipe: Option<Arc<Pipe>>,
    /// Input connections to channels answer gets from what the owner pushed.
    view: Option<Arc<Mutex<View>>>,
    /// Input connections to registers: the write number of the last read, which reads
    /// answered from pushed values (see `latest`) raise.
    last_read: Option<Mutex<u64>>,
    /// Input connections to queues with `Config::queue_prefetch`: items taken ahead, held
    /// by this connection at the owner, oldest first.
    lease: Option<Mutex<VecDeque<Got>>>,
}

impl RemoteLink {
    fn owner(&self) -> &str {
        &self.owner
    }
    fn sh(&self) -> &Shared {
        &self.sh
    }
    fn key(&self) -> (String, u64) {
        (self.owner.clone(), self.container)
    }

    fn fetch(&self, sel: Selector, wait: Wait, cacheable: bool) -> Result<Got, GetError> {
        let key = self.key();
        let cached: Vec<Timestamp> = if cacheable {
            lock(&self.sh().cache.items)
                .items
                .get(&key)
                .map(|m| m.keys().rev().take(wire::MAX_CACHED).copied().collect())
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let r = call_waiting(self.sh(), self.owner(), wait, |w| Request::Get {
            task: self.tref.clone(),
            conn: self.id,
            sel,
            wait: w,
            cached: cached.clone(),
        });
        let (ts, seq, floor, item) = match r {
            Ok(Reply::Item {
                ts,
                seq,
                floor,
                item,
            }) => (ts, seq, floor, item),
            Ok(other) => return Err(get_error(other, self.owner())),
            Err(_) => return Err(GetError::Unreachable),
        };
        let item = match item {
            Some(wi) => {
                let it = Item::from_wire(wi.tag, wi.data);
                if cacheable {
                    let mut c = lock(&self.sh().cache.items);
                    c.drop_below(&key, floor);
                    c.insert(key, ts, it.clone());
                }
                it
            }
            None => {
                // The item is cached, or its push is on the way: wait briefly for it.
                let deadline = Instant::now() + PUSH_WAIT;
                let mut c = lock(&self.sh().cache.items);
                let hit = loop {
                    if let Some(it) = c.items.get(&key).and_then(|m| m.get(&ts).cloned()) {
                        break Some(it);
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break None;
                    }
                    c = self
                        .sh()
                        .cache
                        .filled
                        .wait_timeout(c, left)
                        .map_or_else(|e| e.into_inner().0, |(g, _)| g);
                };
                drop(c);
                match hit {
                    Some(it) => {
                        self.sh()
                            .counters
                            .cache_hits
                            .fetch_add(1, Ordering::Relaxed);
                        it
                    }
                    // Evicted meanwhile: fetch it again (the same get, so no state changes).
                    None => return self.fetch(Selector::Exact(ts), Wait::Never, false),
                }
            }
        };
        Ok(Got { ts, seq, item })
    }

    /// Starts or rebuilds the view from the items visible on the connection now. The
    /// request follows this connection's consumes and applied gets on the same session, so
    /// the owner has applied them when it answers.
    fn snapshot(&self) {
        let Some(view) = &self.view else { return };
        let req = Request::Visible {
            task: self.tref.clone(),
            conn: self.id,
            after: None,
        };
        match call(self.sh(), self.owner(), &req) {
            Ok(Reply::Visible {
                seq, timestamps, ..
            }) => {
                lock(view).snapshot(seq, &timestamps);
                self.sh()
                    .counters
                    .view_snapshots
                    .fetch_add(1, Ordering::Relaxed);
            }
            // The owner answers the gets until a later snapshot succeeds.
            Ok(other) => tracing::debug!(owner = self.owner(), "no snapshot: {other:?}"),
            Err(e) => tracing::debug!(owner = self.owner(), "no snapshot: {e}"),
        }
    }

    /// Answers a get from the view when it can (see `view`). When nothing the view knows
    /// answers a waiting get, it waits here for pushes until `until` (at most [`PUSH_WAIT`]
    /// past now) before the owner is asked: a steady stream is then read without a round
    /// trip, and a lost push costs that much latency at most.
    fn get_here(&self, view: &Mutex<View>, sel: Selector, wait: Wait) -> Option<Got> {
        let sh = self.sh();
        if sh.is_dead(self.owner()) {
            return None;
        }
        if lock(view).needs_snapshot(Instant::now()) {
            self.snapshot();
        }
        let local_until = push_wait_until(wait);
        let key = self.key();
        let (ts, item) = loop {
            let in_flight = sh.puts_in_flight(self.owner(), self.container);
            // The cache's lock first: a push lands in the cache, then in the views.
            let cache = lock(&sh.cache.items);
            let mut v = lock(view);
            match v.select(sel, in_flight) {
                Answer::Here(ts) => {
                    let item = cache.items.get(&key).and_then(|m| m.get(&ts).cloned())?;
                    // Under the same lock as the selection: two threads on one connection
                    // never both get one item.
                    v.got(ts);
                    break (ts, item);
                }
                Answer::Ask => return None,
                Answer::Nothing => {
                    drop(v);
                    let left = local_until?.checked_duration_since(Instant::now())?;
                    drop(
                        sh.cache
                            .filled
                            .wait_timeout(cache, left)
                            .map_or_else(|e| e.into_inner().0, |(g, _)| g),
                    );
                }
            }
        };
        self.sh().counters.view_hits.fetch_add(1, Ordering::Relaxed);
        // The owner applies the get to its connection too; nothing waits for it. One not
        // sent means the owner is unreachable, which the next operation reports.
        let _ = self.notify(Request::Seen {
            task: self.tref.clone(),
            conn: self.id,
            sel,
            ts,
        });
        Some(Got { ts, seq: 0, item })
    }

    /// Reads a register from the newest value its owner pushed, when that is newer than
    /// this connection's last read; a waiting read waits here for a push until at most
    /// [`PUSH_WAIT`] past now before the owner is asked.
    fn read_here(&self, last: &Mutex<u64>, wait: Wait) -> Option<Got> {
        let sh = self.sh();
        if sh.is_dead(self.owner()) {
            return None;
        }
        let until = push_wait_until(wait);
        // Held throughout: two reads on one connection never both take one write.
        let mut last = lock(last);
        let (seq, item) = sh
            .latest
            .newer_than(self.owner(), self.container, &mut last, until)?;
        drop(last);
        sh.counters.register_hits.fetch_add(1, Ordering::Relaxed);
        let _ = self.notify(Request::Seen {
            task: self.tref.clone(),
            conn: self.id,
            sel: Selector::Oldest,
            ts: seq as Timestamp,
        });
        Some(Got { ts: 0, seq, item })
    }

    /// Reads a register: from a pushed value when one is newer than the last read, else
    /// from the owner, which waits for a newer write.
    fn read(&self, last: &Mutex<u64>, wait: Wait) -> Result<Got, GetError> {
        let start = Instant::now();
        if let Some(got) = self.read_here(last, wait) {
            return Ok(got);
        }
        let wait = match wait {
            Wait::For(d) => Wait::For(d.saturating_sub(start.elapsed())),
            w => w,
        };
        let got = self.fetch(Selector::Oldest, wait, false)?;
        self.sh()
            .latest
            .offer(self.owner(), self.container, got.seq, &got.item);
        let read = *lock(last);
        let got = if got.seq > read {
            got
        } else {
            // The owner had not applied a read answered here yet (its notice was lost):
            // make it so and ask once more.
            let seen = Request::Seen {
                task: self.tref.clone(),
                conn: self.id,
                sel: Selector::Oldest,
                ts: read as Timestamp,
            };
            call(self.sh(), self.owner(), &seen).map_err(|_| GetError::Unreachable)?;
            self.fetch(Selector::Oldest, wait, false)?
        };
        let mut read = lock(last);
        if got.seq <= *read {
            return Err(GetError::Unavailable(Default::default()));
        }
        *read = got.seq;
        Ok(got)
    }

    /// Gets a queue item from the lease, or takes the next one from the owner with up to
    /// `Config::queue_prefetch` more that are waiting, which become the lease.
    fn take(&self, lease: &Mutex<VecDeque<Got>>, wait: Wait) -> Result<Got, GetError> {
        let sh = self.sh();
        if let Some(got) = lock(lease).pop_front() {
            sh.counters.lease_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(got);
        }
        let deadline = match wait {
            Wait::For(d) => Some(Instant::now() + d),
            _ => None,
        };
        loop {
            let wait = match deadline {
                Some(d) => Wait::For(d.saturating_duration_since(Instant::now())),
                None => wait,
            };
            let req = Request::Take {
                task: self.tref.clone(),
                conn: self.id,
                wait,
                more: sh.cfg.queue_prefetch,
            };
            let limit = sh.cfg.op_timeout + sh.cfg.wait_slice;
            let replies =
                exchange(sh, self.owner(), &req, limit, true).map_err(|_| GetError::Unreachable)?;
            let mut items = replies.into_iter().map(|r| match r {
                Reply::Item {
                    ts,
                    seq,
                    item: Some(wi),
                    ..
                } => Ok(Got {
                    ts,
                    seq,
                    item: Item::from_wire(wi.tag, wi.data),
                }),
                other => Err(other),
            });
            match items.next() {
                Some(Ok(first)) => {
                    let more: Vec<_> = items.filter_map(Result::ok).collect();
                    sh.counters
                        .leased
                        .fetch_add(more.len() as u64, Ordering::Relaxed);
                    lock(lease).extend(more);
                    return Ok(first);
                }
                Some(Err(Reply::Again)) if !deadline.is_some_and(|d| Instant::now() >= d) => {}
                Some(Err(other)) => return Err(get_error(other, self.owner())),
                None => return Err(GetError::Unreachable),
            }
        }
    }

    fn consume_now(&self, ts: Timestamp, until: bool) -> Result<(), StmError> {
        let req = Request::Consume {
            task: self.tref.clone(),
            conn: self.id,
            ts,
            until,
        };
        match call(self.sh(), self.owner(), &req) {
            Ok(Reply::Ok) => Ok(()),
            Ok(other) => Err(stm_error(other, self.owner())),
            Err(e) => Err(StmError::Unreachable(e)),
        }
    }

    /// Sends a channel consume without waiting for the owner: a consume only releases, so
    /// the owner learning of it a little later just reclaims a little later, and a reader
    /// streaming items saves a round trip per item. A refusal is logged and counted in the
    /// owner's `SpaceStats::consume_failed`.
    fn consume_later(&self, ts: Timestamp, until: bool) -> Result<(), StmError> {
        let sh = self.sh();
        if sh.is_dead(self.owner()) {
            sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
            return Err(StmError::Unreachable(format!(
                "address space {} has left",
                self.owner()
            )));
        }
        if let Some(v) = &self.view {
            let mut v = lock(v);
            if until {
                v.consume_until(ts);
            } else {
                v.consume(ts);
            }
        }
        self.notify(Request::Consume {
            task: self.tref.clone(),
            conn: self.id,
            ts,
            until,
        })
    }

    /// Sends `req`, which only updates the connection at the owner, as a notice: one
    /// publication, no answer (see `server::serve_note`). It travels on the same link as
    /// this space's requests to the owner, so the owner applies it before any later one.
    /// The owner counts a refusal in its `SpaceStats::consume_failed`.
    fn notify(&self, req: Request) -> Result<(), StmError> {
        let sh = self.sh();
        let f = zbytes::frame(&sh.counters.sends, wire::encode_request(&req));
        let sent = sh
            .notes
            .get(&sh.session, sh.to_owner("note", self.owner()))
            .and_then(|p| {
                p.put(f.payload)
                    .attachment(f.attachment)
                    .wait()
                    .map_err(|e| crate::error::zenoh_text(&e))
            });
        sent.map_err(|e| {
            sh.counters.unreachable.fetch_add(1, Ordering::Relaxed);
            StmError::Unreachable(format!("not sent: {e}"))
        })
    }
}

impl Link for RemoteLink {
    fn put(&self, p: Put<'_>) -> Result<u64, PutError> {
        let p = match &self.pipe {
            Some(pipe) if !p.sync && p.wait == Wait::Forever => return pipe.put(self.sh(), p),
            // A put that waits for its answer follows the ones on their way, waiting for them
            // no longer than for room.
            Some(pipe) => pipe.settle_for(self.sh(), p)?,
            None => p,
        };
        let wi = WireItem {
            tag: p.item.tag(),
            data: p.item.wire().clone(),
        };
        // A register's readers here see this space's own write once it returns.
        let written = (self.kind == Kind::Register).then(|| p.item.clone());
        let r = call_waiting_until(self.sh(), self.owner(), p.wait, p.interrupted, |w| {
            Request::Put {
                task: self.tref.clone(),
                conn: self.id,
                vis: p.visibility,
                ts: p.ts,
                consumers: p.consumers.unwrap_or(0),
                wait: w,
                item: wi.clone(),
            }
        });
        if let (Some(pipe), Ok(Some(Reply::Error { code, .. }))) = (&self.pipe, &r) {
            if matches!(
                code,
                ErrorCode::Stm(Code::Closed) | ErrorCode::UnknownContainer
            ) {
                pipe.closed();
            }
        }
        match r {
            Ok(Some(Reply::Stored { seq, marks })) => {
                if self.kind != Kind::Register {
                    let zone = ZoneId(self.tref.zone);
                    self.sh().hold_moved(self.owner(), zone, p.ts, marks);
                }
                if self.kind == Kind::Channel {
                    // This space's gets see the put from here on.
                    self.sh().views.reached(self.owner(), self.container, seq);
                    return Ok(0);
                }
                if let Some(item) = &written {
                    self.sh()
                        .latest
                        .offer(self.owner(), self.container, seq, item);
                }
                Ok(seq)
            }
            Ok(Some(other)) => Err(PutError::new(put_kind(other, self.owner()), p.ts, p.item)),
            Ok(None) => Err(PutError::new(PutErrorKind::Interrupted, p.ts, p.item)),
            Err(_) => Err(PutError::new(PutErrorKind::Unreachable, p.ts, p.item)),
        }
    }

    fn get(&self, sel: Selector, wait: Wait) -> Result<Got, GetError> {
        if let Some(last) = &self.last_read {
            return self.read(last, wait);
        }
        if let Some(lease) = &self.lease {
            return self.take(lease, wait);
        }
        let Some(view) = &self.view else {
            return self.fetch(sel, wait, self.kind == Kind::Channel);
        };
        let start = Instant::now();
        if let Some(got) = self.get_here(view, sel, wait) {
            return Ok(got);
        }
        let wait = match wait {
            Wait::For(d) => Wait::For(d.saturating_sub(start.elapsed())),
            w => w,
        };
        let got = self.fetch(sel, wait, true)?;
        // Every view of this space reads from this state on, not only this connection's.
        self.sh()
            .views
            .reached(self.owner(), self.container, got.seq);
        lock(view).got(got.ts);
        Ok(Got { seq: 0, ..got })
    }

    fn consume(&self, what: Consume) -> Result<(), StmError> {
        match what {
            Consume::Item(ts) => self.consume_later(ts, false),
            Consume::Until(ts) => self.consume_later(ts, true),
            Consume::Ticket(t) => self.consume_now(t as i64, false),
            other => Err(StmError::Unsupported(
                format!("{other:?} on a remote container").into(),
            )),
        }
    }

    fn visible_after(&self, after: Option<Timestamp>) -> Result<(Vec<Timestamp>, bool), StmError> {
        let req = Request::Visible {
            task: self.tref.clone(),
            conn: self.id,
            after,
        };
        match call(self.sh(), self.owner(), &req) {
            Ok(Reply::Visible {
                closed, timestamps, ..
            }) => Ok((timestamps, closed)),
            Ok(other) => Err(stm_error(other, self.owner())),
            Err(e) => Err(StmError::Unreachable(e)),
        }
    }

    fn flush(&self) -> Result<(), PutError> {
        self.pipe
            .as_ref()
            .map_or(Ok(()), |p| p.flush(self.sh(), None))
    }

    fn loan(&self, len: usize) -> Option<Box<dyn stampede_core::LoanBuffer>> {
        let lent = zbytes::lend(&self.sh().session, len);
        let c = &self.sh().counters;
        match lent {
            Some(_) => c.loans_shared.fetch_add(1, Ordering::Relaxed),
            None => c.loans_plain.fetch_add(1, Ordering::Relaxed),
        };
        lent
    }

    fn detach(&self) {
        if self.last_read.is_some() {
            self.sh().latest.close(self.owner(), self.container);
        }
        if let Some(pipe) = &self.pipe {
            pipe.close(self.sh(), self.sh().cfg.op_timeout);
        }
        send(
            self.sh(),
            self.owner(),
            &Request::Detach {
                task: self.tref.clone(),
                conn: self.id,
            },
        );
    }
}
