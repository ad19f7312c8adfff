//! Synchronisation primitives, swapped for loom's models under `cfg(loom)` so the
//! concurrent core can be model-checked unchanged.

#[cfg(loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard,
};
#[cfg(not(loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering},
    Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard,
};

use std::sync::PoisonError;
use std::time::{Duration, Instant};

/// Locks `m`, ignoring poisoning: every critical section leaves state consistent before
/// calling user code, so a panic elsewhere never leaves a half-updated container.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cv`, up to `deadline` if one is given. Returns the guard and whether the
/// deadline has passed.
pub(crate) fn wait<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    deadline: Option<Instant>,
) -> (MutexGuard<'a, T>, bool) {
    match deadline {
        None => (
            cv.wait(guard).unwrap_or_else(PoisonError::into_inner),
            false,
        ),
        Some(d) => {
            let now = Instant::now();
            if now >= d {
                return (guard, true);
            }
            let (g, _) = cv
                .wait_timeout(guard, d - now)
                .unwrap_or_else(PoisonError::into_inner);
            (g, Instant::now() >= d)
        }
    }
}

/// Converts a relative timeout into a deadline, saturating on overflow.
pub(crate) fn deadline(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(60 * 60 * 24 * 365))
}

/// How often a waiting call asks its caller's interrupt check.
pub(crate) const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// A caller's interrupt check (such as a language binding's pending-signal test), asked at
/// most every [`INTERRUPT_POLL`] while a call waits, never with a lock held.
pub(crate) struct InterruptPoll<'a> {
    check: Option<&'a dyn Fn() -> bool>,
    /// When the check is due again; none before the first ask (no clock read on paths
    /// that never wait).
    next: Option<Instant>,
}

impl<'a> InterruptPoll<'a> {
    pub(crate) fn new(check: Option<&'a dyn Fn() -> bool>) -> Self {
        InterruptPoll { check, next: None }
    }

    /// Whether the check, if due, asks the call to stop.
    pub(crate) fn interrupted(&mut self) -> bool {
        let Some(check) = self.check else {
            return false;
        };
        let now = Instant::now();
        if self.next.is_some_and(|n| now < n) {
            return false;
        }
        self.next = Some(now + INTERRUPT_POLL);
        check()
    }

    /// `deadline`, shortened so that a wait ends when the check is due again.
    pub(crate) fn bound(&self, deadline: Option<Instant>) -> Option<Instant> {
        if self.check.is_none() {
            return deadline;
        }
        let next = self.next.unwrap_or_else(|| Instant::now() + INTERRUPT_POLL);
        Some(deadline.map_or(next, |d| d.min(next)))
    }
}
