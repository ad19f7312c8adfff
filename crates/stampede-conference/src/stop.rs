//! When to stop: a signal, the end of standard input, a deadline, or another thread.

use std::io::Read as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::ConferenceError;

#[derive(Debug, Default)]
struct Inner {
    set: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

/// A stop request that every thread of a process can check or wait for.
#[derive(Clone, Debug, Default)]
pub struct Stop {
    inner: Arc<Inner>,
}

impl Stop {
    /// Not requested yet.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Requests the stop and wakes every waiter.
    pub fn trigger(&self) {
        let _g = self.inner.lock.lock();
        self.inner.set.store(true, Ordering::SeqCst);
        self.inner.cv.notify_all();
    }

    /// Whether the stop was requested.
    pub fn is_set(&self) -> bool {
        self.inner.set.load(Ordering::SeqCst)
    }

    /// Waits at most `timeout` for the stop; returns whether it was requested.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self
            .inner
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        while !self.is_set() {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                break;
            };
            g = match self.inner.cv.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        self.is_set()
    }

    /// Stops on SIGINT or SIGTERM. A second signal ends the process at once, for when
    /// leaving itself is stuck. A process can install this once.
    pub fn on_signals(&self) -> Result<(), ConferenceError> {
        let stop = self.clone();
        ctrlc::set_handler(move || {
            if stop.is_set() {
                eprintln!("interrupted again: exiting without leaving");
                std::process::exit(130);
            }
            stop.trigger();
        })
        .map_err(|e| ConferenceError::Setup(format!("cannot handle signals: {e}")))
    }

    /// Stops when standard input reaches its end: a parent that closes the pipe (or dies)
    /// ends the child cleanly.
    pub fn on_stdin_eof(&self) {
        let stop = self.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin().lock();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            stop.trigger();
        });
    }

    /// Stops after `duration`.
    pub fn after(&self, duration: Duration) {
        let stop = self.clone();
        std::thread::spawn(move || {
            if !stop.wait_timeout(duration) {
                stop.trigger();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_wake_when_triggered() {
        let stop = Stop::new();
        assert!(!stop.wait_timeout(Duration::from_millis(10)));
        let s = stop.clone();
        let t = std::thread::spawn(move || s.wait_timeout(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        stop.trigger();
        assert!(t.join().unwrap());
        assert!(stop.is_set());
    }

    #[test]
    fn a_deadline_stops() {
        let stop = Stop::new();
        stop.after(Duration::from_millis(20));
        assert!(stop.wait_timeout(Duration::from_secs(30)));
    }
}
