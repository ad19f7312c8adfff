//! The reader's side of register pushes: the newest value each owner sent of the registers
//! this space reads, so a read that wants a write newer than its last one is answered here
//! when such a write was pushed, and asks the owner only when none was.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use stampede_core::Item;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The newest known write of one register.
struct Entry {
    /// Input connections of this space to the register.
    users: usize,
    /// The write number of `item` (0 before any is known).
    seq: u64,
    item: Option<Item>,
}

/// The newest known writes of the remote registers this space reads, by (owner, register).
#[derive(Default)]
pub(crate) struct Latest {
    values: Mutex<HashMap<(String, u64), Entry>>,
    /// Signalled when a newer write becomes known.
    newer: Condvar,
}

impl Latest {
    /// A connection of this space reads `container` of `owner` from now on. Call before
    /// attaching, so no push that follows the attach is missed.
    pub(crate) fn open(&self, owner: &str, container: u64) {
        lock(&self.values)
            .entry((owner.to_owned(), container))
            .or_insert(Entry {
                users: 0,
                seq: 0,
                item: None,
            })
            .users += 1;
    }

    /// A connection opened with [`open`](Latest::open) went.
    pub(crate) fn close(&self, owner: &str, container: u64) {
        let mut v = lock(&self.values);
        let key = (owner.to_owned(), container);
        if let Some(e) = v.get_mut(&key) {
            e.users -= 1;
            if e.users == 0 {
                v.remove(&key);
            }
        }
    }

    /// Write `seq` of `container` became known here (pushed, read, or written by this
    /// space); `false` if no connection here reads that register.
    pub(crate) fn offer(&self, owner: &str, container: u64, seq: u64, item: &Item) -> bool {
        let mut v = lock(&self.values);
        let Some(e) = v.get_mut(&(owner.to_owned(), container)) else {
            return false;
        };
        if seq > e.seq {
            e.seq = seq;
            e.item = Some(item.clone());
            drop(v);
            self.newer.notify_all();
        }
        true
    }

    /// The newest known write of `container` if it is newer than `*last`, which then
    /// becomes its number; waits for one to be pushed until `until`.
    pub(crate) fn newer_than(
        &self,
        owner: &str,
        container: u64,
        last: &mut u64,
        until: Option<Instant>,
    ) -> Option<(u64, Item)> {
        let key = (owner.to_owned(), container);
        let mut v = lock(&self.values);
        loop {
            let e = v.get(&key)?;
            if e.seq > *last {
                *last = e.seq;
                return e.item.clone().map(|it| (e.seq, it));
            }
            let left = until?.checked_duration_since(Instant::now())?;
            v = self
                .newer
                .wait_timeout(v, left)
                .map_or_else(|e| e.into_inner().0, |(g, _)| g);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_read_takes_only_a_newer_write_and_waits_for_one() {
        let l = Latest::default();
        assert!(!l.offer("o", 1, 1, &Item::from("a")), "nobody reads it yet");
        l.open("o", 1);
        let mut last = 0;
        assert!(l.newer_than("o", 1, &mut last, None).is_none());
        assert!(l.offer("o", 1, 2, &Item::from("b")));
        assert!(
            l.offer("o", 1, 1, &Item::from("a")),
            "an older write is ignored"
        );
        let (seq, it) = l.newer_than("o", 1, &mut last, None).unwrap();
        assert_eq!((seq, it.as_str(), last), (2, Some("b"), 2));
        assert!(l.newer_than("o", 1, &mut last, None).is_none(), "read once");
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                l.offer("o", 1, 3, &Item::from("c"));
            });
            let until = Instant::now() + Duration::from_secs(5);
            let got = l.newer_than("o", 1, &mut last, Some(until)).unwrap();
            assert_eq!(got.0, 3);
        });
        l.close("o", 1);
        assert!(
            !l.offer("o", 1, 4, &Item::from("d")),
            "closed with its last reader"
        );
    }
}
