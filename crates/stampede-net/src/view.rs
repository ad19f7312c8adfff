//! A reader's view of another space's channel: what one input connection can see there,
//! built from the owner's pushes, so most gets are answered here without a round trip.
//!
//! The owner numbers each channel's arrivals and pushes every one (`feed`). A connection
//! starts from a snapshot (the items visible on it and the arrival number read just before)
//! and applies the pushes after it in order; while it has every number up to `complete`, it
//! knows every item stored up to then. The connection's own state (what it consumed, what
//! is open, its last get) is kept here exactly as the owner's core keeps it, since every
//! change to it starts here. A get is answered here when:
//!
//! - the view is whole (no lost or late push), and at least as new as every state the owner
//!   already revealed to this space (`reach`: the arrival number of its answers to gets and
//!   puts), so this space always sees its own stored puts and never goes back in time;
//! - the selected item carries no reference count (it could be reclaimed before this
//!   connection consumed it) and was not only seen in a snapshot (whose count is unknown).
//!
//! Otherwise the owner answers, as before. The result is sequentially consistent per owner:
//! a get sees the channel as it was at some arrival at or after what this space last saw.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use stampede_core::{Selector, Timestamp, INFINITY};

/// Pushes kept past a gap before the view gives up waiting and asks for a snapshot.
const MAX_AHEAD: usize = 4096;

/// How long a gap may stay open before the view is rebuilt: pushes of concurrent puts can
/// arrive out of order, but not this late.
pub(crate) const GAP_PATIENCE: Duration = Duration::from_millis(20);

/// What the view knows of an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Known {
    /// The owner must be asked before this item is used.
    ask: bool,
    /// Its push was applied: none is still to come.
    pushed: bool,
}

impl Known {
    /// Known from a snapshot or an owner's answer: its push may still come.
    const UNPUSHED: Known = Known {
        ask: true,
        pushed: false,
    };
}

/// One pushed arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Arrival {
    pub(crate) seq: u64,
    pub(crate) ts: Timestamp,
    pub(crate) counted: bool,
    /// The item still existed when it was pushed.
    pub(crate) present: bool,
}

/// Where a get is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Here: the item at this timestamp.
    Here(Timestamp),
    /// Nothing stored up to the view's last arrival answers it: a waiting get may wait
    /// here for the next push (a failing one asks the owner, which knows the neighbours
    /// and whether the channel closed).
    Nothing,
    /// By the owner.
    Ask,
}

/// One input connection's view of a remote channel.
#[derive(Debug, Default)]
pub(crate) struct View {
    /// Every arrival up to this number is applied; `None` until a snapshot.
    complete: Option<u64>,
    /// Arrivals past a gap, by number.
    ahead: BTreeMap<u64, Arrival>,
    /// When the oldest open gap was first seen.
    gap_since: Option<Instant>,
    /// The owner revealed its state up to this arrival number.
    reach: u64,
    /// Items stored at the owner and visible on the connection (not consumed on it), by
    /// timestamp.
    items: BTreeMap<Timestamp, Known>,
    /// The connection's state, as the owner's core keeps it. Every timestamp below
    /// `consumed_below` is consumed; `absent` holds those consumed above it whose push may
    /// still come (an item consumed after its push is simply forgotten: a channel never
    /// stores a timestamp twice).
    consumed_below: Timestamp,
    absent: BTreeSet<Timestamp>,
    open: BTreeSet<Timestamp>,
    last_get: Option<Timestamp>,
}

impl View {
    pub(crate) fn new() -> View {
        View {
            consumed_below: Timestamp::MIN,
            ..View::default()
        }
    }

    /// Whether the view must be rebuilt from a snapshot before it can answer.
    pub(crate) fn needs_snapshot(&self, now: Instant) -> bool {
        self.complete.is_none() || self.gap_since.is_some_and(|t| now - t >= GAP_PATIENCE)
    }

    /// A snapshot: the items visible on the connection at the owner, read after its arrival
    /// number `seq`. Items it names that this view did not know are asked for before use.
    pub(crate) fn snapshot(&mut self, seq: u64, visible: &[Timestamp]) {
        if self.complete.is_some_and(|c| c >= seq) && self.ahead.is_empty() {
            // Healed meanwhile by the late pushes, and newer than the snapshot: keep it.
            self.gap_since = None;
            return;
        }
        let mut told = std::mem::take(&mut self.items);
        let mut gone = BTreeSet::new();
        // Pushes the snapshot covers still say whether their items are counted, or gone.
        let later = self.ahead.split_off(&(seq + 1));
        for a in std::mem::replace(&mut self.ahead, later).into_values() {
            if !a.present {
                gone.insert(a.ts);
                continue;
            }
            let k = Known {
                ask: a.counted,
                pushed: true,
            };
            told.insert(a.ts, k);
        }
        self.items = visible
            .iter()
            .filter(|&&ts| ts >= self.consumed_below && !self.absent.contains(&ts))
            .filter(|ts| !gone.contains(ts))
            .map(|&ts| (ts, told.get(&ts).copied().unwrap_or(Known::UNPUSHED)))
            .collect();
        self.complete = Some(seq);
        self.gap_since = None;
        self.drain();
        if !self.ahead.is_empty() {
            // Still a gap past the snapshot: rebuilt again if it stays open.
            self.gap_since = Some(Instant::now());
        }
    }

    /// A pushed arrival.
    pub(crate) fn arrived(&mut self, a: Arrival) {
        match self.complete {
            Some(c) if a.seq <= c => {}
            Some(c) if a.seq == c + 1 => {
                self.apply(a);
                self.drain();
            }
            _ => {
                if self.ahead.len() >= MAX_AHEAD {
                    // Too far behind to catch up: the next get takes a snapshot.
                    self.ahead.clear();
                    self.complete = None;
                }
                self.ahead.insert(a.seq, a);
                self.gap_since.get_or_insert_with(Instant::now);
            }
        }
    }

    fn apply(&mut self, a: Arrival) {
        self.complete = Some(a.seq);
        // An item consumed on this connection before it arrived starts consumed.
        let consumed = a.ts < self.consumed_below || self.absent.remove(&a.ts);
        if a.present && !consumed {
            let k = Known {
                ask: a.counted,
                pushed: true,
            };
            self.items.insert(a.ts, k);
        } else {
            self.items.remove(&a.ts);
        }
    }

    /// Applies the arrivals that follow the complete ones.
    fn drain(&mut self) {
        while let Some(c) = self.complete {
            match self.ahead.first_key_value() {
                Some((&s, _)) if s <= c => {
                    self.ahead.pop_first();
                }
                Some((&s, &a)) if s == c + 1 => {
                    self.ahead.pop_first();
                    self.apply(a);
                }
                _ => break,
            }
        }
        if self.ahead.is_empty() {
            self.gap_since = None;
        }
    }

    /// The owner revealed its state up to arrival `seq`.
    pub(crate) fn reached(&mut self, seq: u64) {
        self.reach = self.reach.max(seq);
    }

    fn visible(&self) -> impl DoubleEndedIterator<Item = (Timestamp, Known)> + '_ {
        self.items.iter().map(|(&ts, &k)| (ts, k))
    }

    /// Where a get with `sel` is answered. `own_puts_in_flight`: this space has puts into
    /// the channel the owner has not answered yet.
    pub(crate) fn select(&self, sel: Selector, own_puts_in_flight: bool) -> Answer {
        let whole = self.complete.is_some_and(|c| c >= self.reach) && self.ahead.is_empty();
        if !whole || own_puts_in_flight {
            return Answer::Ask;
        }
        let found = match sel {
            Selector::Exact(t) if t == INFINITY => return Answer::Ask,
            Selector::Exact(t) => self.items.get(&t).map(|&k| (t, k)),
            Selector::Oldest => self.visible().next(),
            Selector::Newest => self.visible().next_back(),
            Selector::NewestUnseen => self.visible().rev().find(|(t, _)| !self.open.contains(t)),
            Selector::NextUnseen => match self.last_get {
                Some(l) => self.visible().find(|&(t, _)| t > l),
                None => self.visible().next(),
            },
        };
        match found {
            Some((ts, Known { ask: false, .. })) => Answer::Here(ts),
            Some(_) => Answer::Ask,
            // An `Exact` item consumed here is gone at once; one not stored yet may come
            // (or be below the owner's floor: gone too, which only the owner knows, so a
            // wait here is short).
            None => match sel {
                Selector::Exact(t) if t < self.consumed_below || self.absent.contains(&t) => {
                    Answer::Ask
                }
                _ => Answer::Nothing,
            },
        }
    }

    /// A get on the connection selected `ts` (answered here or by the owner).
    pub(crate) fn got(&mut self, ts: Timestamp) {
        self.last_get = Some(ts);
        self.open.insert(ts);
        // The owner may answer with an item whose push has not come yet (its number can
        // even exceed the one the answer carried): known from now on, asked for until the
        // push says more, so no later get here reads a state without it.
        if ts >= self.consumed_below && !self.absent.contains(&ts) {
            self.items.entry(ts).or_insert(Known::UNPUSHED);
        }
    }

    /// `consume(ts)` on the connection.
    pub(crate) fn consume(&mut self, ts: Timestamp) {
        self.open.remove(&ts);
        if ts >= self.consumed_below && !self.items.remove(&ts).is_some_and(|k| k.pushed) {
            self.absent.insert(ts);
        }
    }

    /// `consume_until(ts)` on the connection.
    pub(crate) fn consume_until(&mut self, ts: Timestamp) {
        let below = ts.saturating_add(1).max(self.consumed_below);
        self.consumed_below = below;
        self.absent = self.absent.split_off(&below);
        self.open = self.open.split_off(&below);
        // Consumed items are never visible here again: forget them.
        self.items = self.items.split_off(&below);
    }
}

/// The views of one channel's input connections here.
type ChannelViews = Vec<Weak<Mutex<View>>>;

/// The views of this space's input connections to other spaces' channels, by (owner,
/// channel): where pushes and the owners' answers are applied.
#[derive(Default)]
pub(crate) struct Views {
    by_channel: Mutex<HashMap<(String, u64), ChannelViews>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Views {
    /// A new view of `owner`'s channel `container`, applied every push from now on.
    pub(crate) fn open(&self, owner: &str, container: u64) -> Arc<Mutex<View>> {
        let v = Arc::new(Mutex::new(View::new()));
        let mut m = lock(&self.by_channel);
        let list = m.entry((owner.to_owned(), container)).or_default();
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(&v));
        v
    }

    /// Runs `f` on every live view of the channel.
    fn each(&self, owner: &str, container: u64, mut f: impl FnMut(&mut View)) {
        let views: Vec<_> = {
            let mut m = lock(&self.by_channel);
            let key = (owner.to_owned(), container);
            let Some(list) = m.get_mut(&key) else { return };
            list.retain(|w| w.strong_count() > 0);
            if list.is_empty() {
                m.remove(&key);
                return;
            }
            list.iter().filter_map(Weak::upgrade).collect()
        };
        for v in views {
            f(&mut lock(&v));
        }
    }

    /// A push of the channel arrived.
    pub(crate) fn arrived(&self, owner: &str, container: u64, a: Arrival) {
        self.each(owner, container, |v| v.arrived(a));
    }

    /// The owner revealed the channel's state up to arrival `seq` to this space.
    pub(crate) fn reached(&self, owner: &str, container: u64, seq: u64) {
        if seq > 0 {
            self.each(owner, container, |v| v.reached(seq));
        }
    }

    /// `owner` left: its channels' views go with their connections.
    pub(crate) fn space_left(&self, owner: &str) {
        lock(&self.by_channel).retain(|k, _| k.0 != owner);
    }
}

#[cfg(test)]
mod tests;
