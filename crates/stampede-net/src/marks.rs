//! The distributed watermark's books: the marks this space publishes, and the terms the
//! other spaces' marks give here.
//!
//! Every space publishes, per zone, the lowest of its own terms in numbered messages (one
//! sender's messages arrive in order and none is dropped). A put to another space's
//! container moves a hold from the putter to the owner, and the two spaces' messages race to
//! every third space. The transfer is made exact:
//! 1. the owner *pins* the stored item's timestamp in its marks at once (no collection
//!    pass), publishes if its last message did not already cover it, and acknowledges the
//!    put with the version of a message that covers it;
//! 2. before the putter lets go of its own hold, it records the *transfer* (owner, zone,
//!    timestamp, version), and every message it sends carries its transfers until it has
//!    sent one and seen the owner's covering version itself;
//! 3. a space that receives a transfer and has not yet seen the owner's covering version
//!    keeps the timestamp as a lower bound on the owner's term until it has.
//!
//! So wherever the putter's raised mark arrives, the owner's term there is already at or
//! below the item, whatever order the two senders' messages take.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use stampede_core::{Timestamp, INFINITY};

use crate::wire::{Marks, Transfer};

/// A term to set here: another space's lowest term in a zone (`None`: it holds nothing).
pub(crate) type Effect = (String, u32, Option<Timestamp>);

/// One space's marks bookkeeping; see the module documentation.
#[derive(Debug)]
pub(crate) struct Book {
    me: String,
    /// Each zone's local mark by the newest pass noted, and that pass's number.
    pass: BTreeMap<u32, (Timestamp, u64)>,
    /// Items stored here for other spaces that no noted pass has seen yet.
    pins: Vec<Pin>,
    /// What the last message said, and its version.
    published: BTreeMap<u32, Timestamp>,
    version: u64,
    /// Holds this space moved to owners, carried in its messages (see step 2), one per
    /// owner and zone: the lowest timestamp and the newest version, which covers the rest.
    transfers: BTreeMap<(String, u32), Outgoing>,
    peers: HashMap<String, Peer>,
}

#[derive(Debug)]
struct Pin {
    zone: u32,
    ts: Timestamp,
    /// The zone's pass count read after the item was stored: later passes saw it.
    after: u64,
}

#[derive(Debug)]
struct Outgoing {
    ts: Timestamp,
    version: u64,
    sent: bool,
}

#[derive(Debug, Default)]
struct Peer {
    /// The newest version of its messages seen here.
    seen: u64,
    reported: BTreeMap<u32, Timestamp>,
    /// Lower bounds from holds moved to it, per zone: the lowest timestamp, kept until its
    /// messages reach the newest version that covers one.
    bounds: BTreeMap<u32, (Timestamp, u64)>,
    /// Its terms as last set here.
    applied: BTreeMap<u32, Timestamp>,
}

impl Peer {
    fn terms(&self) -> BTreeMap<u32, Timestamp> {
        let mut t = self.reported.clone();
        for (&z, &(ts, _)) in &self.bounds {
            let e = t.entry(z).or_insert(INFINITY);
            *e = (*e).min(ts);
        }
        t.retain(|_, ts| *ts != INFINITY);
        t
    }
}

impl Book {
    pub(crate) fn new(me: &str) -> Book {
        Book {
            me: me.to_owned(),
            pass: BTreeMap::new(),
            pins: Vec::new(),
            published: BTreeMap::new(),
            version: 0,
            transfers: BTreeMap::new(),
            peers: HashMap::new(),
        }
    }

    /// This space's marks now: the newest passes' local marks, lowered by the pins.
    pub(crate) fn own(&self) -> BTreeMap<u32, Timestamp> {
        let mut m: BTreeMap<u32, Timestamp> =
            self.pass.iter().map(|(&z, &(ts, _))| (z, ts)).collect();
        for p in &self.pins {
            let e = m.entry(p.zone).or_insert(INFINITY);
            *e = (*e).min(p.ts);
        }
        m
    }

    /// Whether the last message said something else than `own()`: one is due.
    pub(crate) fn any_stale(&self) -> bool {
        self.own() != self.published
    }

    /// Whether the last message left `zone` above what this space holds now: then a
    /// message must go out before anything relies on the lower mark.
    pub(crate) fn lowered(&self, zone: u32) -> bool {
        let own = self.own().get(&zone).copied().unwrap_or(INFINITY);
        own < self.published.get(&zone).copied().unwrap_or(INFINITY)
    }

    /// Notes pass `pass`'s local mark of `zone`, unless a later pass was noted.
    pub(crate) fn noted(&mut self, zone: u32, mark: Timestamp, pass: u64) {
        if self.pass.get(&zone).is_some_and(|&(_, n)| n >= pass) {
            return;
        }
        self.pass.insert(zone, (mark, pass));
        self.pins.retain(|p| p.zone != zone || p.after >= pass);
    }

    /// Pins an item another space put here at `ts` in `zone`, stored before the zone's pass
    /// count read `after`. Returns the version of a sent message that covers it, or `None`
    /// when one must be sent first.
    pub(crate) fn pin(&mut self, zone: u32, ts: Timestamp, after: u64) -> Option<u64> {
        self.pins.push(Pin { zone, ts, after });
        let sent = self.published.get(&zone).copied().unwrap_or(INFINITY);
        (self.version > 0 && sent <= ts).then_some(self.version)
    }

    /// The next message to send: this space's marks and its open transfers.
    pub(crate) fn message(&mut self) -> Marks {
        self.version += 1;
        let peers = &self.peers;
        self.transfers.retain(|(owner, _), o| {
            !o.sent || !peers.get(owner).is_some_and(|p| p.seen >= o.version)
        });
        self.published = self.own();
        for o in self.transfers.values_mut() {
            o.sent = true;
        }
        self.last_message()
    }

    /// The last message again, with the open transfers, for a newcomer that asked: its
    /// transfers stay unsent, since the other spaces did not get it.
    pub(crate) fn last_message(&self) -> Marks {
        Marks {
            version: self.version,
            marks: self.published.iter().map(|(&z, &m)| (z, m)).collect(),
            transfers: self
                .transfers
                .iter()
                .map(|((owner, zone), o)| Transfer {
                    owner: owner.clone(),
                    zone: *zone,
                    ts: o.ts,
                    version: o.version,
                })
                .collect(),
        }
    }

    /// Records that this space moved a hold at `ts` in `zone` to `owner`, which covers it
    /// from its message `version` on. Call before letting go of the hold.
    pub(crate) fn transfer(
        &mut self,
        owner: &str,
        zone: u32,
        ts: Timestamp,
        version: u64,
    ) -> Vec<Effect> {
        let t = Transfer {
            owner: owner.to_owned(),
            zone,
            ts,
            version,
        };
        let o = self
            .transfers
            .entry((t.owner.clone(), zone))
            .or_insert(Outgoing {
                ts,
                version,
                sent: false,
            });
        o.ts = o.ts.min(ts);
        o.version = o.version.max(version);
        o.sent = false;
        // This space's own watermark must not pass the item either.
        if self.bound(&t) {
            self.effects(&[owner.to_owned()])
        } else {
            Vec::new()
        }
    }

    /// Keeps `t.ts` as a bound on its owner's term until the covering version is seen;
    /// whether the bound went down.
    fn bound(&mut self, t: &Transfer) -> bool {
        if t.owner == self.me {
            // Pinned here before it was acknowledged.
            return false;
        }
        let peer = self.peers.entry(t.owner.clone()).or_default();
        if peer.seen >= t.version {
            return false;
        }
        let b = peer.bounds.entry(t.zone).or_insert((INFINITY, 0));
        b.1 = b.1.max(t.version);
        let lower = t.ts < b.0;
        b.0 = b.0.min(t.ts);
        lower
    }

    /// A message from space `from`; the terms to set, lowered ones first.
    pub(crate) fn received(&mut self, from: &str, msg: &Marks) -> Vec<Effect> {
        if from == self.me {
            return Vec::new();
        }
        let mut touched = BTreeSet::new();
        for t in &msg.transfers {
            if self.bound(t) {
                touched.insert(t.owner.clone());
            }
        }
        let peer = self.peers.entry(from.to_owned()).or_default();
        // An older message (a newcomer's query answered late) only adds its bounds.
        if msg.version > peer.seen {
            peer.seen = msg.version;
            peer.reported = msg.marks.iter().copied().collect();
            peer.bounds.retain(|_, b| b.1 > msg.version);
            touched.insert(from.to_owned());
        }
        let touched: Vec<String> = touched.into_iter().collect();
        self.effects(&touched)
    }

    /// Space `space` left: its terms go, and what this space moved to it.
    pub(crate) fn left(&mut self, space: &str) -> Vec<Effect> {
        self.transfers.retain(|(owner, _), _| owner != space);
        let Some(peer) = self.peers.remove(space) else {
            return Vec::new();
        };
        peer.applied
            .into_keys()
            .map(|z| (space.to_owned(), z, None))
            .collect()
    }

    /// The changed terms of `spaces`, lowered ones first, so no pass between two of them sees
    /// a raise without the bound that goes with it.
    fn effects(&mut self, spaces: &[String]) -> Vec<Effect> {
        let mut out = Vec::new();
        for s in spaces {
            let Some(peer) = self.peers.get_mut(s) else {
                continue;
            };
            let now = peer.terms();
            for (&z, &old) in &peer.applied {
                if !now.contains_key(&z) {
                    out.push((s.clone(), z, None, old));
                }
            }
            for (&z, &ts) in &now {
                let old = peer.applied.get(&z).copied().unwrap_or(INFINITY);
                if old != ts {
                    out.push((s.clone(), z, Some(ts), old));
                }
            }
            peer.applied = now;
        }
        out.sort_by_key(|&(_, _, new, old)| new.unwrap_or(INFINITY) >= old);
        out.into_iter().map(|(s, z, t, _)| (s, z, t)).collect()
    }

    /// The terms currently set for `space`, for tests and explanations.
    #[cfg(test)]
    fn term(&self, space: &str, zone: u32) -> Timestamp {
        self.peers
            .get(space)
            .and_then(|p| p.applied.get(&zone).copied())
            .unwrap_or(INFINITY)
    }
}

#[cfg(test)]
mod tests;
