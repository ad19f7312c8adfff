//! This space's requests waiting for an answer from a home (a grant, a wake) and its
//! handles waiting for a task's end: numbered slots a message fills and a thread waits on.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Numbered slots of answers of type `T`.
pub(crate) struct Slots<T> {
    state: Mutex<HashMap<u64, Option<T>>>,
    filled: Condvar,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots {
            state: Mutex::new(HashMap::new()),
            filled: Condvar::new(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a wait ended without an answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NoAnswer {
    TimedOut,
    /// `stop` said to give up.
    Stopped,
}

impl<T> Slots<T> {
    /// Opens slot `seq`.
    pub fn open(&self, seq: u64) {
        lock(&self.state).insert(seq, None);
    }

    /// Fills slot `seq`; false if nobody waits there any more (the answer is returned).
    pub fn fill(&self, seq: u64, answer: T) -> Result<(), T> {
        let mut s = lock(&self.state);
        match s.get_mut(&seq) {
            Some(slot @ None) => {
                *slot = Some(answer);
                drop(s);
                self.filled.notify_all();
                Ok(())
            }
            _ => Err(answer),
        }
    }

    /// Waits for slot `seq` until `deadline` (none: for ever), checking `stop` at least
    /// every 50 ms (without the slots' lock, so `stop` may take other locks). The slot is
    /// closed when its answer is taken; a caller that gives up keeps it open to wait again,
    /// unless `close` says to close it on giving up, which happens under the lock, so an
    /// answer is either taken or refused to its sender, never dropped.
    pub fn wait(
        &self,
        seq: u64,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
        close: bool,
    ) -> Result<T, NoAnswer> {
        let slice = std::time::Duration::from_millis(50);
        loop {
            {
                let mut s = lock(&self.state);
                if let Some(Some(_)) = s.get(&seq) {
                    return Ok(s.remove(&seq).flatten().expect("filled"));
                }
                let wait = match deadline {
                    Some(d) => match d.checked_duration_since(Instant::now()) {
                        Some(left) if !left.is_zero() => left.min(slice),
                        _ => {
                            if close {
                                s.remove(&seq);
                            }
                            return Err(NoAnswer::TimedOut);
                        }
                    },
                    None => slice,
                };
                s = self
                    .filled
                    .wait_timeout(s, wait)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                if let Some(Some(_)) = s.get(&seq) {
                    return Ok(s.remove(&seq).flatten().expect("filled"));
                }
            }
            if stop() {
                let mut s = lock(&self.state);
                if let Some(Some(_)) = s.get(&seq) {
                    return Ok(s.remove(&seq).flatten().expect("filled"));
                }
                if close {
                    s.remove(&seq);
                }
                return Err(NoAnswer::Stopped);
            }
        }
    }

    /// Whether slot `seq` has its answer (without waiting or closing it).
    pub fn ready(&self, seq: u64) -> bool {
        matches!(lock(&self.state).get(&seq), Some(Some(_)))
    }

    /// Closes slot `seq` unanswered.
    pub fn close(&self, seq: u64) {
        lock(&self.state).remove(&seq);
    }
}

/// Whether this space was told to detach, and its waiters.
#[derive(Default)]
pub(crate) struct Detach {
    asked: Mutex<bool>,
    cv: Condvar,
}

impl Detach {
    pub fn ask(&self) {
        *lock(&self.asked) = true;
        self.cv.notify_all();
    }
    pub fn asked(&self) -> bool {
        *lock(&self.asked)
    }
    pub fn wait(&self) {
        let mut g = lock(&self.asked);
        while !*g {
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn an_answer_reaches_its_waiter_and_a_late_one_is_returned() {
        let s = Arc::new(Slots::<u32>::default());
        s.open(1);
        s.open(2);
        let s2 = s.clone();
        let t = std::thread::spawn(move || s2.wait(1, None, &|| false, false));
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(s.fill(1, 7), Ok(()));
        assert_eq!(t.join().unwrap(), Ok(7));
        assert_eq!(s.fill(1, 8), Err(8), "closed once answered");
        let soon = Some(Instant::now() + Duration::from_millis(30));
        assert_eq!(s.wait(2, soon, &|| false, false), Err(NoAnswer::TimedOut));
        assert!(!s.ready(2));
        assert_eq!(s.fill(2, 9), Ok(()), "kept open to wait again");
        assert_eq!(s.wait(2, soon, &|| false, false), Ok(9));
        s.open(3);
        assert_eq!(s.wait(3, None, &|| true, true), Err(NoAnswer::Stopped));
        assert_eq!(s.fill(3, 1), Err(1), "closed on giving up");
    }
}
