//! Puts other spaces sent without waiting: the owner's side (see `pipe`). Each is stored in
//! the order its connection sent it and answered with an acknowledgement; one that finds its
//! channel full waits on the pool, and the connection's later puts queue behind it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use stampede_core::Wait;
use zenoh::Wait as _;

use crate::server;
use crate::space::{lock, Shared};
use crate::wire::{self, Ack, ErrorCode, Reply, Send};
use crate::zbytes;

/// Puts waiting for space, per (putting space, connection), oldest first; the first is
/// being stored.
#[derive(Default)]
pub(crate) struct Intake {
    waiting: Mutex<HashMap<(String, u64), VecDeque<Send>>>,
    /// A publisher of acknowledgements per putting space.
    acks: Mutex<HashMap<String, Arc<zenoh::pubsub::Publisher<'static>>>>,
}

impl Intake {
    /// A space left: its waiting puts go with its connections.
    pub(crate) fn space_left(&self, space: &str) {
        lock(&self.waiting).retain(|k, _| k.0 != space);
        lock(&self.acks).remove(space);
    }
}

/// The publisher of acknowledgements to `space`.
fn acks_to(sh: &Shared, space: &str) -> Result<Arc<zenoh::pubsub::Publisher<'static>>, String> {
    if let Some(p) = lock(&sh.intake.acks).get(space) {
        return Ok(p.clone());
    }
    let key = format!("{}/{}", sh.key("ack", space), sh.id);
    let p = sh
        .session
        .declare_publisher(key)
        .congestion_control(zenoh::qos::CongestionControl::Block)
        .wait()
        .map_err(|e| crate::error::zenoh_text(&e))?;
    let p = Arc::new(p);
    lock(&sh.intake.acks).insert(space.to_owned(), p.clone());
    Ok(p)
}

/// A put another space sent.
pub(crate) fn serve(sh: &Arc<Shared>, s: &zenoh::sample::Sample) {
    let m = match wire::decode_send(zbytes::to_parts(s.payload(), s.attachment())) {
        Ok(m) => m,
        Err(e) => {
            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("malformed put: {e}");
            return;
        }
    };
    sh.counters.served.fetch_add(1, Ordering::Relaxed);
    if sh.is_dead(&m.task.space) {
        sh.counters.refused.fetch_add(1, Ordering::Relaxed);
        return;
    }
    let key = (m.task.space.clone(), m.conn);
    let mut waiting = lock(&sh.intake.waiting);
    if let Some(q) = waiting.get_mut(&key) {
        q.push_back(m);
        return;
    }
    let r = store(sh, &m, Wait::Never);
    if !waits(&r) {
        drop(waiting);
        return ack(sh, &m, r);
    }
    waiting.insert(key.clone(), VecDeque::from([m]));
    drop(waiting);
    let job_sh = sh.clone();
    sh.pool.run(Box::new(move || drain(&job_sh, &key)));
}

/// Stores the waiting puts of one connection in order, each waiting for space one wait
/// slice at a time, until none is left.
fn drain(sh: &Shared, key: &(String, u64)) {
    loop {
        let Some(m) = lock(&sh.intake.waiting)
            .get(key)
            .and_then(|q| q.front().cloned())
        else {
            return;
        };
        let r = loop {
            let r = store(sh, &m, Wait::For(sh.cfg.wait_slice));
            if !waits(&r) || sh.is_dead(&key.0) {
                break r;
            }
        };
        ack(sh, &m, r);
        let mut waiting = lock(&sh.intake.waiting);
        let Some(q) = waiting.get_mut(key) else {
            return;
        };
        q.pop_front();
        if q.is_empty() {
            waiting.remove(key);
            return;
        }
    }
}

fn store(sh: &Shared, m: &Send, wait: Wait) -> Result<Reply, Reply> {
    server::store(sh, &m.task, m.conn, m.vis, m.ts, m.consumers, &m.item, wait)
}

fn waits(r: &Result<Reply, Reply>) -> bool {
    matches!(r, Err(e) if server::would_wait(e))
}

/// Answers the putter.
fn ack(sh: &Shared, m: &Send, r: Result<Reply, Reply>) {
    let (marks, arrival, failure) = match r {
        Ok(Reply::Stored { marks, seq }) => (marks, seq, None),
        Ok(Reply::Error { code, a, b, text }) | Err(Reply::Error { code, a, b, text }) => {
            (0, 0, Some((code, a, b, text)))
        }
        Ok(other) | Err(other) => (
            0,
            0,
            Some((ErrorCode::Other, 0, 0, server::unexpected(&other))),
        ),
    };
    let payload = wire::encode_ack(&Ack {
        conn: m.conn,
        seq: m.seq,
        marks,
        arrival,
        failure,
    });
    let sent = acks_to(sh, &m.task.space).and_then(|p| {
        p.put(payload)
            .wait()
            .map_err(|e| crate::error::zenoh_text(&e))
    });
    if let Err(e) = sent {
        tracing::warn!(space = m.task.space, "acknowledgement not sent: {e}");
    }
}
