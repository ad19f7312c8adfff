//! Puts other spaces sent without waiting: the owner's side (see `pipe`). Each is stored in
//! the order its connection sent it and answered with an acknowledgement; one that finds its
//! channel full waits on the pool, and the connection's later puts queue behind it.
//!
//! Acknowledgements go out from a thread of their own, which merges those of a burst: a
//! stored put's acknowledgement also answers every earlier put of its connection that no
//! refusal of its own answered (puts are stored in order, and a refusal is sent before any
//! later acknowledgement of its connection). A stream of puts then costs one message back
//! per burst, not one per put.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use stampede_core::Wait;
use zenoh::Wait as _;

use crate::publishers::Publishers;
use crate::server;
use crate::space::{lock, Shared};
use crate::wire::{self, Ack, ErrorCode, Reply, Send};
use crate::zbytes;

/// Most acknowledgements merged into one round of sending.
const BURST: usize = 1024;

/// Puts waiting for space, per (putting space, connection), oldest first; the first is
/// being stored.
pub(crate) struct Intake {
    waiting: Mutex<HashMap<(String, u64), VecDeque<Send>>>,
    /// A publisher of acknowledgements per putting space.
    acks: Publishers,
    /// Acknowledgements for the sending thread ([`run`]), with their putting space.
    answers: Sender<(String, Ack)>,
}

impl Intake {
    /// The intake, and the inbox its acknowledging thread ([`run`]) drains.
    pub(crate) fn new() -> (Intake, Receiver<(String, Ack)>) {
        let (answers, rx) = crossbeam_channel::unbounded();
        let intake = Intake {
            waiting: Mutex::default(),
            acks: Publishers::default(),
            answers,
        };
        (intake, rx)
    }

    /// This space is leaving: its acknowledgement publishers go.
    pub(crate) fn close(&self) {
        self.acks.close();
    }

    /// A space left: its waiting puts go with its connections.
    pub(crate) fn space_left(&self, space: &str) {
        lock(&self.waiting).retain(|k, _| k.0 != space);
        self.acks.forget(space);
    }
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
    let user = crate::guard::sender(s.key_expr().as_str());
    if sh.cfg.access.is_some() && !sh.guard.bind(&m.task.space, user) {
        let e = crate::guard::impostor(sh, user);
        return ack(sh, &m, Err(crate::server::stm_error(&e)));
    }
    let key = (m.task.space.clone(), m.conn);
    let mut waiting = lock(&sh.intake.waiting);
    if let Some(q) = waiting.get_mut(&key) {
        if let Err(kind) = crate::guard::waiting_put(sh, &m.task.space, q.len()) {
            drop(waiting);
            let (code, a) = kind.code();
            let text = format!("put at {}: over the owner's quota of waiting puts", m.ts);
            return ack(sh, &m, Err(Reply::failure(code, (a, m.ts), text)));
        }
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
    let a = Ack {
        conn: m.conn,
        seq: m.seq,
        marks,
        arrival,
        failure,
    };
    // The thread only stops with the space.
    let _ = sh.intake.answers.send((m.task.space.clone(), a));
}

/// The acknowledging thread: sends what [`ack`] queued, merging each connection's
/// consecutive stored puts, until the space goes.
pub(crate) fn run(sh: Weak<Shared>, rx: Receiver<(String, Ack)>) {
    loop {
        let first = match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(a) => a,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if sh.strong_count() == 0 {
                    return;
                }
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        };
        let Some(sh) = sh.upgrade() else { return };
        let burst = std::iter::once(first).chain(rx.try_iter().take(BURST - 1));
        for (space, a) in merge(burst) {
            send_ack(&sh, &space, &a);
        }
    }
}

/// `acks` with each connection's run of stored puts answered by its last, in an order that
/// keeps every refusal before the later acknowledgements of its connection.
fn merge(acks: impl Iterator<Item = (String, Ack)>) -> Vec<(String, Ack)> {
    let mut out: Vec<(String, Ack)> = Vec::new();
    // Per (space, connection), the index in `out` of its latest stored put's answer, while
    // no refusal followed it.
    let mut open: HashMap<(String, u64), usize> = HashMap::new();
    for (space, a) in acks {
        let key = (space, a.conn);
        if a.failure.is_some() {
            open.remove(&key);
            out.push((key.0, a));
            continue;
        }
        match open.get(&key) {
            Some(&i) => {
                let m = &mut out[i].1;
                m.seq = m.seq.max(a.seq);
                m.marks = m.marks.max(a.marks);
                m.arrival = m.arrival.max(a.arrival);
            }
            None => {
                open.insert(key.clone(), out.len());
                out.push((key.0, a));
            }
        }
    }
    out
}

fn send_ack(sh: &Shared, space: &str, a: &Ack) {
    let payload = wire::encode_ack(a);
    let key = format!("{}/{}", sh.key("ack", space), sh.id);
    let sent = sh.intake.acks.get(&sh.session, key).and_then(|p| {
        p.put(payload)
            .wait()
            .map_err(|e| crate::error::zenoh_text(&e))
    });
    if let Err(e) = sent {
        tracing::warn!(space, "acknowledgement not sent: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(conn: u64, seq: u64, refused: bool) -> (String, Ack) {
        let failure = refused.then(|| (ErrorCode::Other, 0, 0, String::new()));
        let a = Ack {
            conn,
            seq,
            marks: seq * 10,
            arrival: seq,
            failure,
        };
        ("s".to_owned(), a)
    }

    #[test]
    fn stored_puts_merge_up_to_a_refusal_of_their_connection() {
        let burst = [
            ack(1, 1, false),
            ack(2, 1, false),
            ack(1, 2, false),
            ack(1, 3, true),
            ack(1, 4, false),
            ack(2, 2, false),
            ack(1, 5, false),
        ];
        let got: Vec<_> = merge(burst.into_iter())
            .into_iter()
            .map(|(_, a)| (a.conn, a.seq, a.marks, a.failure.is_some()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, 2, 20, false),
                (2, 2, 20, false),
                (1, 3, 30, true),
                (1, 5, 50, false),
            ]
        );
    }
}
