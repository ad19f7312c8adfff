//! The code each space of a cluster serves, and the watch on the cluster's membership.
//!
//! Every message arrives at one handler, run by the space's named-code thread in the order
//! each sender sent them: the home's state machine and the slots answer at once; a task to
//! run gets a thread of its own. The handler holds the shared state weakly, so a cluster
//! whose handles are all gone stops.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use stampede_core::Item;
use stampede_net::NameEvent;

use crate::home::Waiter;
use crate::shared::{lock, member_name, Answer, Ended, Shared, ThreadId};
use crate::wire::{encode_fetched, encode_list, encode_rank, Listed, Msg};

/// Handles one message from space `from`; the result answers a call.
pub(crate) fn handle(sh: &Arc<Shared>, from: &str, item: Item) -> Result<Item, String> {
    let bytes = item.as_bytes().cloned().unwrap_or_default();
    let msg = match Msg::decode(bytes) {
        Ok(m) => m,
        Err(e) => {
            sh.counters.malformed.fetch_add(1, Ordering::Relaxed);
            return Err(format!("malformed cluster message: {e}"));
        }
    };
    let waiter = |seq| Waiter {
        space: from.to_owned(),
        seq,
    };
    let none = || Ok(Item::from(Bytes::new()));
    match msg {
        Msg::Run {
            seq,
            task,
            args,
            vt,
        } => {
            crate::thread::run(sh, from.to_owned(), seq, task, args, vt);
            none()
        }
        Msg::Exit { seq, outcome } => {
            sh.ended(seq, Ended::Outcome(outcome));
            none()
        }
        Msg::Cancel { seq } => {
            let id = ThreadId {
                origin: from.to_owned(),
                seq,
            };
            if let Some(r) = lock(&sh.running).get(&id) {
                r.cancel.store(true, Ordering::Release);
            }
            none()
        }
        Msg::Lock { object, seq } => {
            let acts = lock(&sh.homes).lock(&object, waiter(seq));
            sh.apply(&object, acts);
            none()
        }
        Msg::TryLock { object, seq } => {
            let acts = lock(&sh.homes).try_lock(&object, waiter(seq));
            sh.apply(&object, acts);
            none()
        }
        Msg::Unlock { object, seq } => {
            let mut homes = lock(&sh.homes);
            // A holder whose space was dropped (silent past its lease) lost the mutex to the
            // next waiter; if it comes back, it learns so here, at its unlock.
            if !homes.holds(&object, &waiter(seq)) {
                drop(homes);
                sh.counters.stale_unlocks.fetch_add(1, Ordering::Relaxed);
                return Err(format!("{object} is not held by this task here"));
            }
            let acts = homes.unlock(&object, &waiter(seq));
            drop(homes);
            sh.apply(&object, acts);
            none()
        }
        Msg::Withdraw { object, seq } => {
            let acts = lock(&sh.homes).withdraw(&object, &waiter(seq));
            sh.apply(&object, acts);
            none()
        }
        Msg::CondWait { cond, seq } => {
            lock(&sh.homes).cond_wait(&cond, waiter(seq))?;
            none()
        }
        Msg::Signal { cond, all } => {
            let acts = lock(&sh.homes).signal(&cond, all);
            sh.apply(&cond, acts);
            none()
        }
        Msg::Return { object, seq } => {
            let acts = lock(&sh.homes).returned(&object, &waiter(seq));
            sh.apply(&object, acts);
            none()
        }
        Msg::Post { sem } => {
            let acts = lock(&sh.homes).post(&sem);
            sh.apply(&sem, acts);
            none()
        }
        Msg::Grant {
            object,
            seq,
            owner_died,
        } => {
            sh.answer(&object, seq, Answer::Granted { owner_died });
            none()
        }
        Msg::Wake { object, seq } => {
            sh.answer(&object, seq, Answer::Woken);
            none()
        }
        Msg::Refused { seq, why } => {
            sh.answer("", seq, Answer::Refused(why));
            none()
        }
        Msg::Rank { barrier, size } => {
            let rank = lock(&sh.homes).rank(&barrier, size)?;
            Ok(Item::from(encode_rank(rank)))
        }
        Msg::List => Ok(Item::from(encode_list(&listed(sh)))),
        Msg::Stats => Ok(Item::from(sh.encoded_stats())),
        Msg::Detach => {
            sh.detach.ask();
            none()
        }
        Msg::Fetch { segment, have } => {
            let (v, d) = lock(&sh.homes).fetch(&segment, have)?;
            Ok(Item::from(encode_fetched(v, d.as_deref())))
        }
        Msg::Store { segment, writes } => {
            let w: Vec<(u64, &[u8])> = writes.iter().map(|(a, b)| (*a, &b[..])).collect();
            let v = lock(&sh.homes).store(&segment, &w)?;
            Ok(Item::from(Bytes::copy_from_slice(&v.to_le_bytes())))
        }
        Msg::Free { addr } => {
            free(sh, addr);
            none()
        }
        Msg::Claim { object, kind } => Ok(Item::from(Bytes::copy_from_slice(&[sh
            .holds(&object, kind)
            as u8]))),
    }
}

/// The tasks this space runs.
pub(crate) fn listed(sh: &Shared) -> Vec<Listed> {
    let mut v: Vec<Listed> = lock(&sh.running)
        .iter()
        .map(|(id, r)| Listed {
            origin: id.origin.clone(),
            seq: id.seq,
            task: r.task.clone(),
            cancelling: r.cancel.load(Ordering::Acquire),
            running_ms: r.started.elapsed().as_millis() as u64,
        })
        .collect();
    v.sort_by(|a, b| (&a.origin, a.seq).cmp(&(&b.origin, b.seq)));
    v
}

/// Follows the cluster's membership in the name server until the cluster stops: a space
/// that registers joins, one whose name goes (it stopped, left or died) is handled as
/// gone.
pub(crate) fn watch(sh: Weak<Shared>, events: stampede_net::NameWatch) {
    let prefix = member_name("");
    loop {
        let Some(s) = sh.upgrade() else { return };
        if s.stopped.load(Ordering::Acquire) {
            return;
        }
        s.detach_idle();
        drop(s);
        let Some(ev) = events.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let Some(s) = sh.upgrade() else { return };
        match ev {
            NameEvent::Added(rec) => {
                if let Some(id) = rec.name.strip_prefix(&prefix) {
                    s.space_joined(id);
                }
            }
            NameEvent::Removed { name, space } => {
                if name.strip_prefix(&prefix) == Some(space.as_str()) && space != s.id {
                    s.space_left(&space);
                }
            }
        }
    }
}

/// Another space frees a block of this space's heap; a refused free is counted there.
#[cfg(target_os = "linux")]
fn free(sh: &Shared, addr: u64) {
    if let Err(e) = crate::heap::free_here(sh, addr) {
        tracing::warn!("a free from another space: {e}");
    }
}

#[cfg(not(target_os = "linux"))]
fn free(sh: &Shared, _addr: u64) {
    sh.counters
        .malformed
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}
