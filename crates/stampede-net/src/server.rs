//! The owner's side: operations other address spaces send to the containers owned here.
//!
//! Each remote task gets a *proxy* task here per time zone (the papers' surrogate). Its
//! connections are ordinary connections, so every rule of the local case applies as is;
//! the proxy mirrors the remote task's visibility for the rule checks, and its virtual time
//! is left out of the watermark because the remote space reports it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use stampede_core::provider;
use stampede_core::{
    ContainerOptions, GetError, InputConnection, Item, Named, OutputConnection, PutError,
    PutOptions, StmError, Wait, ZoneId,
};
use zenoh::query::Query;
use zenoh::Wait as _;

use crate::events::Events;
use crate::space::{lock, Shared, ZoneWatermark};
use crate::wire::{self, ErrorCode, Kind, Reply, Request, TaskRef, WireItem};
use crate::zbytes;
use stampede_core::ErrorCode as Code;

/// A connection of a proxy task.
pub(crate) enum Conn {
    ChIn(InputConnection<stampede_core::Channel>),
    ChOut(OutputConnection<stampede_core::Channel>),
    QIn(InputConnection<stampede_core::Queue>),
    QOut(OutputConnection<stampede_core::Queue>),
    RIn(InputConnection<stampede_core::Register>),
    ROut(OutputConnection<stampede_core::Register>),
}

/// The proxy of one remote task in one zone.
pub(crate) struct Surrogate {
    task: stampede_core::Task,
    /// Connections by id, with the id of their container.
    conns: Mutex<HashMap<u64, (u64, Arc<Conn>)>>,
}

/// Threads for operations that wait: they never run on Zenoh's own threads.
pub(crate) struct Pool {
    tx: Sender<Box<dyn FnOnce() + Send>>,
    rx: Receiver<Box<dyn FnOnce() + Send>>,
    idle: Arc<AtomicUsize>,
}

impl Pool {
    pub(crate) fn new() -> Pool {
        let (tx, rx) = crossbeam_channel::unbounded();
        Pool {
            tx,
            rx,
            idle: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub(crate) fn run(&self, job: Box<dyn FnOnce() + Send>) {
        if self.idle.load(Ordering::Acquire) == 0 {
            let rx = self.rx.clone();
            let idle = self.idle.clone();
            let started = std::thread::Builder::new()
                .name("stampede-serve".into())
                .spawn(move || loop {
                    idle.fetch_add(1, Ordering::AcqRel);
                    let job = rx.recv_timeout(Duration::from_secs(30));
                    idle.fetch_sub(1, Ordering::AcqRel);
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            if started.is_err() {
                tracing::error!("could not start a thread for a waiting operation");
            }
        }
        // With no thread started the job waits for a busy one to finish.
        let _ = self.tx.send(job);
    }
}

fn reply(sh: &Shared, q: &Query, r: &Reply) {
    let f = zbytes::frame(&sh.counters.sends, wire::encode_reply(r));
    let sent = q
        .reply(q.key_expr().clone(), f.payload)
        .attachment(f.attachment)
        .wait();
    if let Err(e) = sent {
        tracing::debug!("reply not sent: {e}");
    }
}

/// A failure the core reported, by its stable code: the requester rebuilds the same error.
/// An error without items travels with its detail (a name, what was invalid) as the text.
pub(crate) fn stm_error(e: &StmError) -> Reply {
    let (code, figures) = e.code();
    Reply::failure(code, figures, e.detail().into_owned())
}

fn get_error(e: &GetError) -> Reply {
    let (code, figures) = e.code();
    Reply::failure(code, figures, e.to_string())
}

fn put_error(e: &PutError) -> Reply {
    let (code, a) = e.kind().code();
    Reply::failure(code, (a, e.ts()), e.to_string())
}

/// A put refusal's text, as the putter's own error would say it.
fn kind_text(kind: stampede_core::PutErrorKind, ts: stampede_core::Timestamp) -> String {
    PutError::new(kind, ts, Item::from(Vec::<u8>::new())).to_string()
}

fn wire_item(item: &Item) -> WireItem {
    WireItem {
        tag: item.tag(),
        data: item.wire().clone(),
    }
}

/// Whether a reply means "would have to wait".
pub(crate) fn would_wait(r: &Reply) -> bool {
    matches!(
        r,
        Reply::Error {
            code: ErrorCode::Stm(Code::Unavailable | Code::Timeout | Code::Full),
            ..
        }
    )
}

fn surrogate(sh: &Shared, t: &TaskRef) -> Result<Arc<Surrogate>, Reply> {
    let key = (t.space.clone(), t.task, t.zone);
    lock(&sh.surrogates).get(&key).cloned().ok_or_else(|| {
        Reply::error(
            ErrorCode::UnknownConnection,
            "no such connection here (detached, or the session expired)",
        )
    })
}

/// Attaches the proxy of `t` (made on its first connection) to `container`. The proxy map
/// stays locked throughout, so a detach of the proxy's last other connection cannot drop
/// the proxy in between.
fn attach(
    sh: &Shared,
    t: &TaskRef,
    container: u64,
    input: bool,
    vis: stampede_core::Timestamp,
) -> Result<Reply, Reply> {
    let owned = sh.owned(container).ok_or_else(|| {
        Reply::error(
            ErrorCode::UnknownContainer,
            format!("no container #{container} here"),
        )
    })?;
    let zone = owned.zone();
    let key = (t.space.clone(), t.task, t.zone);
    let mut proxies = lock(&sh.surrogates);
    // Checked again under the proxy map's lock: a space dropped since the request was let
    // in has had its proxies removed (under this lock), and must not get a new one.
    if sh.is_dead(&t.space) {
        sh.counters.refused.fetch_add(1, Ordering::Relaxed);
        return Err(Reply::error(
            ErrorCode::Stm(Code::Detached),
            "this address space's session expired",
        ));
    }
    let held = proxies
        .iter()
        .filter(|(k, _)| k.0 == t.space)
        .map(|(_, s)| lock(&s.conns).len())
        .sum();
    crate::guard::connection(sh, &t.space, held).map_err(|e| stm_error(&e))?;
    let s = match proxies.get(&key) {
        Some(s) => s.clone(),
        None => {
            let task = provider::proxy_task(
                &sh.rt,
                format!("{}/task-{}", t.space, t.task),
                ZoneId(t.zone),
            )
            .map_err(|e| stm_error(&e))?;
            let s = Arc::new(Surrogate {
                task,
                conns: Mutex::default(),
            });
            proxies.insert(key.clone(), s.clone());
            s
        }
    };
    let made = connect(sh, &s.task, owned, container, input, vis);
    let c = match made {
        Ok(c) => c,
        Err(r) => {
            let empty = lock(&s.conns).is_empty();
            let gone = if empty { proxies.remove(&key) } else { None };
            drop(proxies);
            drop(gone); // the proxy task exits outside the map's lock
            return Err(r);
        }
    };
    let id = sh.next_conn.fetch_add(1, Ordering::Relaxed);
    if matches!(c, Conn::ChIn(_) | Conn::RIn(_)) {
        // From here on its items go to the reader's space too (see `feed`).
        sh.feeds.reader_attached(container, &t.space);
    }
    lock(&s.conns).insert(id, (container, Arc::new(c)));
    drop(proxies);
    sh.hold_before_ack(zone);
    Ok(Reply::Attached { conn: id })
}

/// A proxy's new connection to `owned`.
fn connect(
    sh: &Shared,
    t: &stampede_core::Task,
    owned: Named,
    container: u64,
    input: bool,
    vis: stampede_core::Timestamp,
) -> Result<Conn, Reply> {
    let e = |e: StmError| stm_error(&e);
    provider::mirror_visibility(t, vis).map_err(e)?;
    Ok(match (owned, input) {
        (Named::Channel(c), true) => {
            // Hooked first, so every item put once the connection exists is pushed.
            sh.feeds.hook(sh, container, &c);
            Conn::ChIn(t.attach_input(&c).map_err(e)?)
        }
        (Named::Channel(c), false) => Conn::ChOut(t.attach_output(&c).map_err(e)?),
        (Named::Queue(c), true) => Conn::QIn(t.attach_input(&c).map_err(e)?),
        (Named::Queue(c), false) => Conn::QOut(t.attach_output(&c).map_err(e)?),
        (Named::Register(c), true) => {
            sh.feeds.hook_register(sh, container, &c);
            Conn::RIn(t.attach_input(&c).map_err(e)?)
        }
        (Named::Register(c), false) => Conn::ROut(t.attach_output(&c).map_err(e)?),
        (other, _) => {
            return Err(e(StmError::Unsupported(
                format!("serving a {}", other.kind()).into(),
            )))
        }
    })
}

/// Drops connection `id` of the proxy of `t`, and the proxy with its last connection: a
/// proxy without connections holds nothing (its virtual time is no watermark term), and the
/// decision follows connection ids, so a detach and a new attach of the same task may
/// arrive in either order.
fn detach(sh: &Shared, t: &TaskRef, id: u64) {
    let key = (t.space.clone(), t.task, t.zone);
    let mut proxies = lock(&sh.surrogates);
    let Some(s) = proxies.get(&key) else { return };
    let mut conns = lock(&s.conns);
    let gone = conns.remove(&id);
    let last = conns.is_empty();
    drop(conns);
    let proxy = if last { proxies.remove(&key) } else { None };
    drop(proxies);
    if let Some((container, c)) = &gone {
        if matches!(**c, Conn::ChIn(_) | Conn::RIn(_)) {
            sh.feeds.reader_detached(*container, &t.space);
        }
    }
    // Detaching runs the core's release (and garbage handlers) outside the map's lock.
    drop(gone);
    drop(proxy);
}

/// The proxy of `t`, its connection `id` and that connection's container.
fn conn(sh: &Shared, t: &TaskRef, id: u64) -> Result<(Arc<Surrogate>, Arc<Conn>, u64), Reply> {
    let s = surrogate(sh, t)?;
    let c = lock(&s.conns)
        .get(&id)
        .map(|c| (c.1.clone(), c.0))
        .ok_or_else(|| {
            Reply::error(
                ErrorCode::UnknownConnection,
                format!("no connection {id} here (detached, or the session expired)"),
            )
        })?;
    Ok((s, c.0, c.1))
}

/// Runs a request, waiting at most `wait`.
fn execute(sh: &Shared, req: &Request, wait: Wait) -> Reply {
    match execute_inner(sh, req, wait) {
        Ok(r) | Err(r) => r,
    }
}

fn execute_inner(sh: &Shared, req: &Request, wait: Wait) -> Result<Reply, Reply> {
    match req {
        Request::Attach {
            task,
            container,
            input,
            vis,
        } => attach(sh, task, *container, *input, *vis),
        Request::Detach { task, conn } => {
            detach(sh, task, *conn);
            Ok(Reply::Ok)
        }
        Request::Put {
            task,
            conn: id,
            vis,
            ts,
            consumers,
            wait: _,
            item,
        } => store(sh, task, *id, *vis, *ts, *consumers, item, wait),
        Request::Get {
            task,
            conn: id,
            sel,
            wait: _,
            cached,
        } => {
            let (_, c, container) = conn(sh, task, *id)?;
            let floor = sh.rt.gc_stats(ZoneId(task.zone)).floor;
            let item = |ts, it: &Item| (!cached.contains(&ts)).then(|| wire_item(it));
            match &*c {
                Conn::ChIn(i) if !matches!(wait, Wait::Never) => {
                    // Only a waiting get gets here (the first try found nothing), so its item
                    // arrived after the connection attached and the pusher is sending it to
                    // the reader too: reply without the data rather than move it twice. The
                    // reader waits for the push and fetches the item if it was skipped.
                    let pushed = sh.feeds.is_pushed(container);
                    i.get_with(*sel, wait)
                        .map(|(ts, it)| Reply::Item {
                            ts,
                            seq: sh.feeds.arrivals(container),
                            floor,
                            item: if pushed { None } else { item(ts, &it) },
                        })
                        .map_err(|e| get_error(&e))
                }
                Conn::ChIn(i) => i
                    .get_with(*sel, wait)
                    .map(|(ts, it)| Reply::Item {
                        ts,
                        seq: sh.feeds.arrivals(container),
                        floor,
                        item: item(ts, &it),
                    })
                    .map_err(|e| get_error(&e)),
                Conn::QIn(_) => take(sh, task, *id, wait),
                Conn::RIn(i) => i
                    .read_with(wait)
                    .map(|(seq, it)| Reply::Item {
                        ts: 0,
                        seq,
                        floor,
                        item: Some(wire_item(&it)),
                    })
                    .map_err(|e| get_error(&e)),
                _ => Err(Reply::error(
                    ErrorCode::Stm(Code::InvalidArgument),
                    "not an input connection",
                )),
            }
        }
        Request::Take { task, conn: id, .. } => take(sh, task, *id, wait),
        Request::Consume {
            task,
            conn: id,
            ts,
            until,
        } => {
            let (_, c, _) = conn(sh, task, *id)?;
            let r = match (&*c, until) {
                (Conn::ChIn(i), false) => i.consume(*ts),
                (Conn::ChIn(i), true) => i.consume_until(*ts),
                (Conn::QIn(i), false) => i.consume(*ts as u64),
                _ => {
                    return Err(Reply::error(
                        ErrorCode::Stm(Code::InvalidArgument),
                        "not a channel or queue input connection",
                    ))
                }
            };
            r.map(|()| Reply::Ok).map_err(|e| stm_error(&e))
        }
        Request::Close { container } => {
            let owned = sh.owned(*container).ok_or_else(|| {
                Reply::error(
                    ErrorCode::UnknownContainer,
                    format!("no container #{container} here"),
                )
            })?;
            owned.close().map_err(|e| stm_error(&e))?;
            Ok(Reply::Ok)
        }
        Request::Explain { zone } => {
            let w = explain(sh, *zone);
            Ok(Reply::Explain {
                local: w.local,
                floor: w.floor,
                watermark: w.watermark,
                text: w.text,
            })
        }
        Request::Create {
            kind,
            name,
            zone,
            capacity,
            meta,
        } => create(sh, *kind, name, *zone, *capacity, meta).map_err(|e| stm_error(&e)),
        Request::Subscribe {
            space,
            container,
            event,
        } => Events::subscribe(sh, *container, *event, space),
        Request::Unsubscribe {
            space,
            container,
            event,
        } => {
            sh.events.unsubscribe(*container, *event, space);
            Ok(Reply::Ok)
        }
        Request::Visible {
            task,
            conn: id,
            after,
        } => {
            let (_, c, container) = conn(sh, task, *id)?;
            let Conn::ChIn(i) = &*c else {
                return Err(Reply::error(
                    ErrorCode::Stm(Code::InvalidArgument),
                    "visible items are a channel input connection's",
                ));
            };
            // Read first: every arrival up to it is in the timestamps that follow.
            let seq = sh.feeds.arrivals(container);
            let (timestamps, closed) =
                provider::visible_after(i, *after).map_err(|e| stm_error(&e))?;
            Ok(Reply::Visible {
                closed,
                seq,
                timestamps,
            })
        }
        Request::Seen {
            task,
            conn: id,
            sel,
            ts,
        } => {
            let (_, c, _) = conn(sh, task, *id)?;
            let replayed = match &*c {
                Conn::ChIn(i) => provider::replay_get(i, *sel, *ts),
                // A register read carries the write number it read.
                Conn::RIn(i) => provider::replay_read(i, *ts as u64),
                _ => {
                    return Err(Reply::error(
                        ErrorCode::Stm(Code::InvalidArgument),
                        "not a channel or register input connection",
                    ))
                }
            };
            replayed.map_err(|e| {
                // The reader answered from a view the owner does not share: a defect.
                sh.counters.seen_refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    space = task.space,
                    ts,
                    "a get answered by a reader was refused: {e}"
                );
                get_error(&e)
            })?;
            Ok(Reply::Ok)
        }
    }
}

/// Gets the next item of a queue on the proxy of `task`'s connection `id`, waiting at most
/// `wait`; it stays held by the connection until consumed or detached.
fn take(sh: &Shared, task: &TaskRef, id: u64, wait: Wait) -> Result<Reply, Reply> {
    let (_, c, _) = conn(sh, task, id)?;
    let Conn::QIn(i) = &*c else {
        return Err(Reply::error(
            ErrorCode::Stm(Code::InvalidArgument),
            "not a queue input connection",
        ));
    };
    let floor = sh.rt.gc_stats(ZoneId(task.zone)).floor;
    i.get_with(wait)
        .map(|q| Reply::Item {
            ts: q.ts,
            seq: q.ticket,
            floor,
            item: Some(wire_item(&q.item)),
        })
        .map_err(|e| get_error(&e))
}

/// Answers `q`: with `r`, and for a `Take` that got an item, with up to its `more` further
/// items that are waiting now, one reply each.
fn answer(sh: &Shared, q: &Query, req: &Request, r: &Reply) {
    reply(sh, q, r);
    let Request::Take {
        task,
        conn: id,
        more,
        ..
    } = req
    else {
        return;
    };
    if !matches!(r, Reply::Item { .. }) {
        return;
    }
    for _ in 0..*more {
        match take(sh, task, *id, Wait::Never) {
            Ok(item) => reply(sh, q, &item),
            Err(_) => return,
        }
    }
}

/// Stores a put of the proxy of `task` on its connection `id`, waiting at most `wait`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store(
    sh: &Shared,
    task: &TaskRef,
    id: u64,
    vis: stampede_core::Timestamp,
    ts: stampede_core::Timestamp,
    consumers: u32,
    item: &WireItem,
    wait: Wait,
) -> Result<Reply, Reply> {
    let (s, c, container) = conn(sh, task, id)?;
    if let Some(kind) = crate::guard::item(sh, &task.space, item.data.len()) {
        let (code, a) = kind.code();
        return Err(Reply::failure(code, (a, ts), kind_text(kind, ts)));
    }
    provider::mirror_visibility(&s.task, vis).map_err(|e| stm_error(&e))?;
    let it = Item::from_wire(item.tag, item.data.clone());
    let mut opts = PutOptions::default().wait(wait);
    if consumers > 0 {
        opts = opts.consumers(consumers);
    }
    let seq = match &*c {
        // The arrival number once stored: the putter's space reads its views from there on.
        Conn::ChOut(o) => o
            .put_with(ts, it, opts)
            .map(|()| sh.feeds.arrivals(container)),
        Conn::QOut(o) => o.put_with(ts, it, wait),
        Conn::ROut(o) => {
            // Registers are outside collection: no hold moves.
            let seq = o.write(it).map_err(|e| stm_error(&e))?;
            return Ok(Reply::Stored { seq, marks: 0 });
        }
        _ => {
            return Err(Reply::error(
                ErrorCode::Stm(Code::InvalidArgument),
                "not an output connection",
            ))
        }
    }
    .map_err(|e| put_error(&e))?;
    // The putter lets go of its hold on this item once acknowledged: the owner's marks hold
    // it from the version the acknowledgement names.
    let marks = sh.hold_moved_here(ZoneId(task.zone), ts);
    Ok(Reply::Stored { seq, marks })
}

/// Creates a container here for another address space: a named one through the runtime,
/// which registers its name application-wide; an unnamed one is served without a name.
fn create(
    sh: &Shared,
    kind: Kind,
    name: &str,
    zone: u32,
    capacity: u64,
    meta: &str,
) -> Result<Reply, StmError> {
    let mut opts = if capacity == 0 {
        ContainerOptions::unbounded()
    } else {
        let n = usize::try_from(capacity)
            .map_err(|_| StmError::InvalidArgument("capacity does not fit here".into()))?;
        ContainerOptions::bounded(n)
    };
    opts = opts.zone(ZoneId(zone)).meta(meta);
    if !name.is_empty() {
        opts = opts.name(name);
    }
    let c = match kind {
        Kind::Channel => Named::Channel(sh.rt.channel(opts)?),
        Kind::Queue => Named::Queue(sh.rt.queue(opts)?),
        Kind::Register => Named::Register(sh.rt.register(opts)?),
        other => {
            return Err(StmError::Unsupported(
                format!("creating a {other} for another address space").into(),
            ))
        }
    };
    let id = c.id().0;
    let name = (!name.is_empty()).then(|| name.to_owned());
    lock(&sh.owned).entry(id).or_insert((c, name));
    Ok(Reply::Created { container: id })
}

/// This space's watermark explanation for `zone`.
pub(crate) fn explain(sh: &Shared, zone: u32) -> ZoneWatermark {
    let r = sh.rt.explain(ZoneId(zone));
    ZoneWatermark {
        local: r.local,
        floor: r.floor,
        watermark: r.watermark,
        text: r.to_string(),
    }
}

fn wait_of(req: &Request) -> Wait {
    match req {
        Request::Put { wait, .. } | Request::Get { wait, .. } | Request::Take { wait, .. } => *wait,
        _ => Wait::Never,
    }
}

/// Serves one query on the operations key. Operations that can complete at once run on
/// the calling (Zenoh) thread; those that must wait move to the pool and wait at most one
/// wait slice, after which the requester asks again.
pub(crate) fn serve(sh: &Arc<Shared>, q: Query) {
    sh.counters.served.fetch_add(1, Ordering::Relaxed);
    let Some(payload) = q.payload() else {
        sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
        reply(sh, &q, &Reply::error(ErrorCode::Malformed, "empty request"));
        return;
    };
    let req = match wire::decode_request(zbytes::to_parts(payload, q.attachment())) {
        Ok(r) => r,
        Err(e) => {
            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
            reply(sh, &q, &Reply::error(ErrorCode::Malformed, e.to_string()));
            return;
        }
    };
    let from = match &req {
        Request::Attach { task, .. }
        | Request::Detach { task, .. }
        | Request::Put { task, .. }
        | Request::Get { task, .. }
        | Request::Take { task, .. }
        | Request::Consume { task, .. }
        | Request::Seen { task, .. }
        | Request::Visible { task, .. } => Some(&task.space),
        Request::Subscribe { space, .. } | Request::Unsubscribe { space, .. } => Some(space),
        _ => None,
    };
    if let Some(space) = from {
        if sh.is_dead(space) {
            sh.counters.refused.fetch_add(1, Ordering::Relaxed);
            reply(
                sh,
                &q,
                &Reply::error(
                    ErrorCode::Stm(Code::Detached),
                    "this address space's session expired",
                ),
            );
            return;
        }
    }
    if let Err(e) = crate::guard::check(sh, crate::guard::sender(q.key_expr().as_str()), &req) {
        reply(sh, &q, &stm_error(&e));
        return;
    }
    // Creating a named container asks the name server: never on Zenoh's own threads.
    if matches!(req, Request::Create { .. }) {
        let job_sh = sh.clone();
        sh.pool.run(Box::new(move || {
            reply(&job_sh, &q, &execute(&job_sh, &req, Wait::Never));
        }));
        return;
    }
    let wait = wait_of(&req);
    let first = execute(sh, &req, Wait::Never);
    if matches!(wait, Wait::Never) || !would_wait(&first) {
        answer(sh, &q, &req, &first);
        return;
    }
    let slice = sh.cfg.wait_slice;
    let (w, sliced) = match wait {
        Wait::For(d) if d <= slice => (Wait::For(d), false),
        _ => (Wait::For(slice), true),
    };
    let job_sh = sh.clone();
    sh.pool.run(Box::new(move || {
        let r = execute(&job_sh, &req, w);
        if sliced && would_wait(&r) {
            reply(&job_sh, &q, &Reply::Again);
        } else {
            answer(&job_sh, &q, &req, &r);
        }
    }));
}

/// Applies a notice another space published (see `remote`): a channel consume or a get
/// it answered itself, which changes only its connection here and is never answered. A
/// refusal is logged and counted in `SpaceStats::consume_failed`.
pub(crate) fn serve_note(sh: &Shared, s: &zenoh::sample::Sample) {
    let req = match wire::decode_request(zbytes::to_parts(s.payload(), s.attachment())) {
        Ok(r @ (Request::Consume { .. } | Request::Seen { .. })) => r,
        Ok(other) => {
            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("a notice that is no consume or applied get: {other:?}");
            return;
        }
        Err(e) => {
            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("malformed notice: {e}");
            return;
        }
    };
    let (Request::Consume { task, ts, .. } | Request::Seen { task, ts, .. }) = &req else {
        return;
    };
    sh.counters.served.fetch_add(1, Ordering::Relaxed);
    if sh.is_dead(&task.space) {
        sh.counters.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if crate::guard::check(sh, crate::guard::sender(s.key_expr().as_str()), &req).is_err() {
        return;
    }
    if let Reply::Error { text, .. } = execute(sh, &req, Wait::Never) {
        sh.counters.consume_failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            space = task.space,
            ts,
            "a consume or applied get was refused: {text}"
        );
    }
}

/// Serves a query for name records registered here.
pub(crate) fn serve_names(sh: &Shared, q: Query) {
    let prefix = sh.key("meta", &sh.id);
    let recs: Vec<_> = lock(&sh.names).values().map(|(r, _)| r.clone()).collect();
    for r in recs {
        let key = format!("{prefix}/{}", r.name);
        let Ok(k) = zenoh::key_expr::KeyExpr::try_from(key) else {
            continue;
        };
        if q.key_expr().intersects(&k) {
            if let Err(e) = q.reply(k, wire::encode_name(&r)).wait() {
                tracing::debug!("name reply not sent: {e}");
            }
        }
    }
}

/// Error replies for callers that get an unexpected answer.
pub(crate) fn unexpected(r: &Reply) -> String {
    format!("unexpected reply {r:?}")
}
