//! Real-time pacing: loose synchrony between virtual time and real time.

use std::fmt;
use std::time::{Duration, Instant};

use crate::sync::InterruptPoll;
use crate::time::Timestamp;

/// How late a task reached a tick, given to its late handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lateness {
    /// The virtual time whose tick was due.
    pub vt: Timestamp,
    /// How long after the tick's due time `sync` was called.
    pub late: Duration,
    /// Whole periods missed.
    pub ticks_behind: u64,
}

/// What a late handler decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LateAction {
    /// Go on; later ticks keep their original schedule.
    Continue,
    /// Skip the missed ticks: `sync` returns the first virtual time still in the future.
    Skip,
    /// Rebase the schedule so this tick is due now.
    Resync,
}

/// The outcome of [`Pacer::sync`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tick {
    /// On time (slept until due, or late within tolerance).
    OnTime,
    /// Late beyond tolerance; the handler chose to go on.
    Late(Duration),
    /// Late; the handler chose to skip to this virtual time (set the task's virtual time to
    /// it and carry on from there).
    Skip(Timestamp),
    /// Late; the schedule now treats this tick as due now.
    Resynced,
}

/// Counters of a pacer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PacerStats {
    /// Ticks reached on time.
    pub on_time: u64,
    /// Ticks reached late beyond tolerance.
    pub late: u64,
    /// Virtual times skipped by `Skip` decisions.
    pub skipped: u64,
    /// Schedule rebases.
    pub resyncs: u64,
}

/// Paces a task to real time: tick `vt` is due `vt` periods after the schedule's origin.
///
/// The first `sync` fixes the origin so that its tick is due now. An early `sync` sleeps until
/// the tick is due; a `sync` later than the tolerance calls the late handler.
///
/// ```
/// use std::time::{Duration, Instant};
/// use stampede_core::{LateAction, Pacer, Tick};
/// let mut pacer = Pacer::new(Duration::from_millis(5), Duration::from_millis(50), |_| LateAction::Skip);
/// let start = Instant::now();
/// for vt in 0..4 {
///     assert_eq!(pacer.sync(vt), Tick::OnTime);
/// }
/// assert!(start.elapsed() >= Duration::from_millis(15)); // three periods after the first tick
/// ```
pub struct Pacer {
    period: Duration,
    tolerance: Duration,
    origin: Option<(Instant, Timestamp)>,
    on_late: Box<dyn FnMut(Lateness) -> LateAction + Send>,
    stats: PacerStats,
}

impl fmt::Debug for Pacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pacer")
            .field("period", &self.period)
            .field("tolerance", &self.tolerance)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Pacer {
    /// A pacer with a tick `period`, a lateness `tolerance` and a late handler.
    pub fn new(
        period: Duration,
        tolerance: Duration,
        on_late: impl FnMut(Lateness) -> LateAction + Send + 'static,
    ) -> Pacer {
        Pacer {
            period,
            tolerance,
            origin: None,
            on_late: Box::new(on_late),
            stats: PacerStats::default(),
        }
    }

    /// The tick period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Counters.
    pub fn stats(&self) -> PacerStats {
        self.stats
    }

    fn due(&self, vt: Timestamp) -> Instant {
        let (origin, base) = self.origin.expect("origin is set by the first sync");
        let ticks = vt.saturating_sub(base).max(0) as u128;
        let nanos = self.period.as_nanos().saturating_mul(ticks);
        origin + Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Waits until tick `vt` is due, or reports lateness through the handler.
    pub fn sync(&mut self, vt: Timestamp) -> Tick {
        self.sync_with(vt, None)
            .expect("only an interrupt check stops the wait")
    }

    /// Like [`sync`](Self::sync), but asks `interrupted` every 50 ms or so while it sleeps;
    /// when that returns true it stops at once and returns `None`, counting no tick.
    /// Language bindings pass their pending-signal check (Python's Ctrl-C).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use stampede_core::{LateAction, Pacer, Tick};
    /// let mut pacer = Pacer::new(Duration::from_secs(3600), Duration::ZERO, |_| LateAction::Skip);
    /// assert_eq!(pacer.sync_interruptible(0, &|| false), Some(Tick::OnTime));
    /// let start = Instant::now();
    /// assert_eq!(pacer.sync_interruptible(1, &|| start.elapsed() > Duration::from_millis(20)), None);
    /// assert!(start.elapsed() < Duration::from_secs(60));
    /// ```
    pub fn sync_interruptible(
        &mut self,
        vt: Timestamp,
        interrupted: &dyn Fn() -> bool,
    ) -> Option<Tick> {
        self.sync_with(vt, Some(interrupted))
    }

    fn sync_with(&mut self, vt: Timestamp, check: Option<&dyn Fn() -> bool>) -> Option<Tick> {
        let now = Instant::now();
        if self.origin.is_none() {
            self.origin = Some((now, vt));
        }
        let due = self.due(vt);
        if now < due {
            let mut poll = InterruptPoll::new(check);
            loop {
                if poll.interrupted() {
                    return None;
                }
                let now = Instant::now();
                if now >= due {
                    break;
                }
                let until = poll.bound(Some(due)).unwrap_or(due);
                std::thread::sleep(until.saturating_duration_since(now));
            }
            self.stats.on_time += 1;
            return Some(Tick::OnTime);
        }
        let late = now - due;
        if late <= self.tolerance {
            self.stats.on_time += 1;
            return Some(Tick::OnTime);
        }
        self.stats.late += 1;
        let period = self.period.as_nanos().max(1);
        let ticks_behind = u64::try_from(late.as_nanos() / period).unwrap_or(u64::MAX);
        Some(
            match (self.on_late)(Lateness {
                vt,
                late,
                ticks_behind,
            }) {
                LateAction::Continue => Tick::Late(late),
                LateAction::Skip => {
                    let to = vt.saturating_add(ticks_behind as i64 + 1);
                    self.stats.skipped += ticks_behind + 1;
                    Tick::Skip(to)
                }
                LateAction::Resync => {
                    self.origin = Some((now, vt));
                    self.stats.resyncs += 1;
                    Tick::Resynced
                }
            },
        )
    }
}
