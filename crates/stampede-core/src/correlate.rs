//! Temporal correlation of several channels.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::channel::{Channel, Selector};
use crate::connection::InputConnection;
use crate::error::{GetError, Neighbors, StmError};
use crate::item::Item;
use crate::notify::SubscriptionId;
use crate::sync::{lock, wait, Condvar, Mutex};
use crate::time::Timestamp;
use crate::wait::Wait;

/// How items of different channels match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// Every channel has an item with the same timestamp.
    Exact,
    /// Every other channel has an item within this distance of the first channel's item
    /// (the nearest one; the older on a tie).
    Within(Timestamp),
}

/// One correlated set: an item from every input, in input order.
#[derive(Clone, Debug)]
pub struct Correlated {
    /// The timestamp of the first input's item.
    pub ts: Timestamp,
    /// `(timestamp, item)` per input.
    pub items: Vec<(Timestamp, Item)>,
}

#[derive(Default)]
struct Signal {
    seq: u64,
    waiters: usize,
}

/// Delivers sets of items, one per input channel, that belong to the same moment.
///
/// Sets come in increasing timestamp order. A first-channel item that can no longer be
/// matched (every other channel has moved past its window) is skipped and counted. Skipped
/// items stay unconsumed until [`consume_until`](Correlator::consume_until) passes them, so
/// prefer it to [`consume`](Correlator::consume) unless they are still wanted.
///
/// ```
/// use stampede_core::{ContainerOptions, Correlator, Match, Runtime, INFINITY};
/// let rt = Runtime::new();
/// let video = rt.channel(ContainerOptions::default()).unwrap();
/// let audio = rt.channel(ContainerOptions::default()).unwrap();
/// let src = rt.task(0).unwrap();
/// let (v, a) = (src.attach_output(&video).unwrap(), src.attach_output(&audio).unwrap());
/// let fusion = rt.task(INFINITY).unwrap();
/// let mut corr = Correlator::new(
///     vec![fusion.attach_input(&video).unwrap(), fusion.attach_input(&audio).unwrap()],
///     Match::Within(2),
/// )
/// .unwrap();
/// v.put(10, "frame").unwrap();
/// a.put(11, "chunk").unwrap();
/// let set = corr.get().unwrap();
/// assert_eq!((set.ts, set.items[1].0), (10, 11));
/// corr.consume(&set).unwrap();
/// ```
pub struct Correlator {
    inputs: Vec<InputConnection<Channel>>,
    mode: Match,
    last: Vec<Option<Timestamp>>,
    signal: Arc<(Mutex<Signal>, Condvar)>,
    subscriptions: Vec<SubscriptionId>,
    skipped: u64,
}

impl fmt::Debug for Correlator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Correlator")
            .field("inputs", &self.inputs.len())
            .field("mode", &self.mode)
            .field("skipped", &self.skipped)
            .finish()
    }
}

/// How often a waiting correlator re-checks for closed inputs.
const CLOSE_POLL: Duration = Duration::from_millis(50);

enum Attempt {
    Matched(Vec<Timestamp>),
    Wait,
    Closed,
    Failed(GetError),
}

impl Correlator {
    /// Correlates `inputs` (at least one) by `mode`. Channels may live here or in other
    /// address spaces; the correlator subscribes to their arrivals, so this fails only when
    /// a channel's owner cannot be reached.
    pub fn new(inputs: Vec<InputConnection<Channel>>, mode: Match) -> Result<Correlator, StmError> {
        let signal: Arc<(Mutex<Signal>, Condvar)> = Arc::default();
        let mut subscriptions = Vec::with_capacity(inputs.len());
        for i in &inputs {
            let s = signal.clone();
            let subscribed = i.container().on_arrival(move |_| {
                let mut g = lock(&s.0);
                g.seq += 1;
                if g.waiters > 0 {
                    s.1.notify_all();
                }
            });
            match subscribed {
                Ok(id) => subscriptions.push(id),
                Err(e) => {
                    // Leave no callback behind on the inputs already subscribed.
                    for (i, id) in inputs.iter().zip(subscriptions) {
                        i.container().unsubscribe(id);
                    }
                    return Err(e);
                }
            }
        }
        Ok(Correlator {
            last: vec![None; inputs.len()],
            inputs,
            mode,
            signal,
            subscriptions,
            skipped: 0,
        })
    }

    /// The input connections, in order.
    pub fn inputs(&self) -> &[InputConnection<Channel>] {
        &self.inputs
    }

    /// First-channel items skipped because they could not be matched.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn attempt(&mut self) -> Attempt {
        if self.inputs.is_empty() {
            return Attempt::Closed;
        }
        let mut views = Vec::with_capacity(self.inputs.len());
        for (i, l) in self.inputs.iter().zip(&self.last) {
            match i.visible_after(*l) {
                Ok(v) => views.push(v),
                Err(StmError::Detached) => return Attempt::Failed(GetError::Detached),
                Err(_) => return Attempt::Failed(GetError::Unreachable),
            }
        }
        let (refs, ref_closed) = &views[0];
        for &r in refs {
            let mut picks = vec![r];
            let mut unmatched = false;
            let mut pending = false;
            for (ts, closed) in &views[1..] {
                let (lo, hi) = match self.mode {
                    Match::Exact => (r, r),
                    Match::Within(d) => (r.saturating_sub(d), r.saturating_add(d)),
                };
                let best = ts
                    .iter()
                    .copied()
                    .filter(|&t| t >= lo && t <= hi)
                    .min_by_key(|&t| ((t as i128 - r as i128).abs(), t));
                match best {
                    Some(t) => picks.push(t),
                    None if *closed || ts.iter().any(|&t| t > hi) => unmatched = true,
                    None => pending = true,
                }
            }
            if unmatched {
                self.skipped += 1;
                self.last[0] = Some(r);
                continue;
            }
            if pending {
                return Attempt::Wait;
            }
            return Attempt::Matched(picks);
        }
        if *ref_closed {
            Attempt::Closed
        } else {
            Attempt::Wait
        }
    }

    /// Gets the next correlated set with an explicit wait mode.
    pub fn get_with(&mut self, wait_mode: Wait) -> Result<Correlated, GetError> {
        let (may_wait, deadline) = wait_mode.deadline();
        loop {
            let seq = lock(&self.signal.0).seq;
            match self.attempt() {
                Attempt::Matched(picks) => {
                    let mut items = Vec::with_capacity(picks.len());
                    let mut raced = false;
                    for (input, &t) in self.inputs.iter().zip(&picks) {
                        match input.try_get(Selector::Exact(t)) {
                            Ok(got) => items.push(got),
                            Err(GetError::Detached) => return Err(GetError::Detached),
                            // Consumed or reclaimed since we looked: look again.
                            Err(_) => raced = true,
                        }
                    }
                    if raced {
                        continue;
                    }
                    for (l, &t) in self.last.iter_mut().zip(&picks) {
                        *l = Some(t);
                    }
                    return Ok(Correlated {
                        ts: picks[0],
                        items,
                    });
                }
                Attempt::Closed => return Err(GetError::Closed),
                Attempt::Failed(e) => return Err(e),
                Attempt::Wait => {}
            }
            if !may_wait {
                return Err(GetError::Unavailable(Neighbors::default()));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(GetError::Timeout(Neighbors::default()));
            }
            let poll = now + CLOSE_POLL;
            let until = deadline.map_or(poll, |d| d.min(poll));
            let (m, cv) = &*self.signal;
            let mut g = lock(m);
            if g.seq == seq {
                g.waiters += 1;
                let (mut g2, _) = wait(cv, g, Some(until));
                g2.waiters -= 1;
            }
        }
    }

    /// Blocks until the next correlated set.
    pub fn get(&mut self) -> Result<Correlated, GetError> {
        self.get_with(Wait::Forever)
    }
    /// The next set if it is complete now.
    pub fn try_get(&mut self) -> Result<Correlated, GetError> {
        self.get_with(Wait::Never)
    }
    /// Waits at most `timeout` for the next set.
    pub fn get_timeout(&mut self, timeout: Duration) -> Result<Correlated, GetError> {
        self.get_with(Wait::For(timeout))
    }

    /// Consumes exactly the items of `set`.
    pub fn consume(&self, set: &Correlated) -> Result<(), StmError> {
        for (input, (ts, _)) in self.inputs.iter().zip(&set.items) {
            input.consume(*ts)?;
        }
        Ok(())
    }

    /// Consumes, on every input, everything up to that input's item of `set`.
    pub fn consume_until(&self, set: &Correlated) -> Result<(), StmError> {
        for (input, (ts, _)) in self.inputs.iter().zip(&set.items) {
            input.consume_until(*ts)?;
        }
        Ok(())
    }
}

impl Drop for Correlator {
    fn drop(&mut self) {
        for (input, id) in self.inputs.iter().zip(&self.subscriptions) {
            input.container().unsubscribe(*id);
        }
    }
}
