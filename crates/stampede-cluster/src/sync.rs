//! Cluster-wide mutexes, conditions and counting semaphores. Each object lives in one
//! address space, its home (the first to make it); the others reach it by message. A
//! request is numbered by its space, queued at the home and granted by message; a request
//! that gives up (a timeout, its task cancelled) withdraws, and a grant that crossed the
//! withdrawal is passed on by the home.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::ClusterError;
use crate::home::{Kind, Waiter, BUSY};
use crate::segment;
use crate::shared::{cancelled_here, lock, Answer, Cluster, ClusterOp, Pending, Shared};
use crate::waits::NoAnswer;
use crate::wire::Msg;

/// A cluster mutex: held by one task of the cluster at a time. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Mutex {
    inner: Arc<MutexInner>,
}

#[derive(Debug)]
struct MutexInner {
    cluster: Cluster,
    name: String,
    home: String,
}

/// A held [`Mutex`]; dropping it unlocks.
#[derive(Debug)]
pub struct MutexGuard {
    mutex: Mutex,
    seq: u64,
    owner_died: bool,
    held: bool,
}

/// Why a lock failed.
#[derive(Debug)]
pub enum LockError {
    /// The lock is held, but the task that held it before died holding it (its address
    /// space left or died): what the mutex protects may be inconsistent. As a robust
    /// mutex's `EOWNERDEAD`.
    OwnerDied(MutexGuard),
    /// Not locked.
    Failed(ClusterError),
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::OwnerDied(g) => write!(
                f,
                "mutex {} was held by a task whose address space died",
                g.mutex.inner.name
            ),
            LockError::Failed(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LockError {}

impl LockError {
    /// The guard, when the lock is held despite the error.
    pub fn into_guard(self) -> Result<MutexGuard, ClusterError> {
        match self {
            LockError::OwnerDied(g) => Ok(g),
            LockError::Failed(e) => Err(e),
        }
    }
}

impl From<ClusterError> for LockError {
    fn from(e: ClusterError) -> Self {
        LockError::Failed(e)
    }
}

/// A request granted by a home: `(sequence number, owner died)`.
type Granted = (u64, bool);

/// Asks the home of `object` for it (a mutex or a semaphore) and waits for the grant until
/// `deadline`, or forever under the cluster's timeout.
fn acquire(
    sh: &Shared,
    object: &str,
    home: &str,
    deadline: Option<Instant>,
    stop: &dyn Fn() -> bool,
) -> Result<Granted, ClusterError> {
    request(sh, object, home, deadline, stop, false)
}

/// Asks for `object` now: `None` when it is held (or has no permit).
fn try_acquire(sh: &Shared, object: &str, home: &str) -> Result<Option<Granted>, ClusterError> {
    match request(sh, object, home, None, &|| false, true) {
        Ok(g) => Ok(Some(g)),
        Err(ClusterError::InvalidArgument(why)) if why == BUSY => Ok(None),
        Err(e) => Err(e),
    }
}

fn request(
    sh: &Shared,
    object: &str,
    home: &str,
    deadline: Option<Instant>,
    stop: &dyn Fn() -> bool,
    now_or_never: bool,
) -> Result<Granted, ClusterError> {
    let seq = sh.next_seq();
    sh.answers.open(seq);
    if home == sh.id {
        let w = Waiter {
            space: sh.id.clone(),
            seq,
        };
        let mut homes = lock(&sh.homes);
        let acts = if now_or_never {
            homes.try_lock(object, w)
        } else {
            homes.lock(object, w)
        };
        drop(homes);
        sh.apply(object, acts);
    } else {
        lock(&sh.pending).insert(
            seq,
            Pending {
                home: home.to_owned(),
            },
        );
        let (object_, seq_) = (object.to_owned(), seq);
        let sent = sh.send(
            home,
            &if now_or_never {
                Msg::TryLock {
                    object: object_,
                    seq: seq_,
                }
            } else {
                Msg::Lock {
                    object: object_,
                    seq: seq_,
                }
            },
        );
        if let Err(e) = sent {
            lock(&sh.pending).remove(&seq);
            sh.answers.close(seq);
            return Err(lost(e, home));
        }
    }
    match await_answer(sh, object, home, seq, deadline, "lock", stop)? {
        Answer::Granted { owner_died } => {
            // Release consistency: what the previous holder released is seen from here.
            segment::acquire_all(sh);
            Ok((seq, owner_died))
        }
        other => Err(unexpected(other)),
    }
}

/// Waits for request `seq`'s answer from `home`; on giving up, withdraws it there.
fn await_answer(
    sh: &Shared,
    object: &str,
    home: &str,
    seq: u64,
    deadline: Option<Instant>,
    operation: &'static str,
    stop: &dyn Fn() -> bool,
) -> Result<Answer, ClusterError> {
    let started = Instant::now();
    let deadline = match (deadline, sh.opts.timeout) {
        (Some(d), _) => Some(d),
        (None, Some(t)) => Some(started + t),
        (None, None) => None,
    };
    match sh.answers.wait(seq, deadline, stop, true) {
        Ok(a) => Ok(a),
        Err(why) => {
            lock(&sh.pending).remove(&seq);
            let w = Waiter {
                space: sh.id.clone(),
                seq,
            };
            if home == sh.id {
                let acts = lock(&sh.homes).withdraw(object, &w);
                sh.apply(object, acts);
            } else {
                let _ = sh.send(
                    home,
                    &Msg::Withdraw {
                        object: object.to_owned(),
                        seq,
                    },
                );
            }
            Err(match why {
                NoAnswer::TimedOut => ClusterError::Timeout {
                    operation,
                    waited: started.elapsed(),
                },
                NoAnswer::Stopped => ClusterError::Cancelled,
            })
        }
    }
}

fn unexpected(a: Answer) -> ClusterError {
    match a {
        Answer::Refused(why) => ClusterError::InvalidArgument(why),
        Answer::Lost(space) => ClusterError::Lost { space },
        other => ClusterError::InvalidArgument(format!("unexpected answer {other:?}")),
    }
}

/// Releases request `seq`'s hold on mutex `object`, after this space's segment writes.
/// The mutex goes even when releasing a segment failed (holding it would block the
/// cluster); that failure is reported.
fn release(sh: &Shared, object: &str, home: &str, seq: u64) -> Result<(), ClusterError> {
    let w = Waiter {
        space: sh.id.clone(),
        seq,
    };
    if home == sh.id && !lock(&sh.homes).holds(object, &w) {
        return Err(ClusterError::NotOwner {
            object: object.to_owned(),
        });
    }
    let released = segment::release_all(sh);
    let unlocked = if home == sh.id {
        let acts = lock(&sh.homes).unlock(object, &w);
        sh.apply(object, acts);
        Ok(())
    } else {
        // A call, not a one-way message: a holder that was dropped while it was stopped or
        // cut off (and whose mutex went to the next waiter) must learn it.
        sh.call(
            home,
            &Msg::Unlock {
                object: object.to_owned(),
                seq,
            },
        )
        .map(drop)
        .map_err(|e| match e {
            ClusterError::Invoke(stampede_net::InvokeError::Failed { .. }) => {
                ClusterError::NotOwner {
                    object: object.to_owned(),
                }
            }
            e => lost(e, home),
        })
    };
    released.and(unlocked)
}

/// A home that cannot be reached is lost with what it held.
fn lost(e: ClusterError, home: &str) -> ClusterError {
    match e {
        ClusterError::Invoke(stampede_net::InvokeError::Unreachable { .. }) => ClusterError::Lost {
            space: home.to_owned(),
        },
        e => e,
    }
}

impl Cluster {
    /// The cluster mutex `name`, made in this space if no space has made it.
    pub fn mutex(&self, name: &str) -> Result<Mutex, ClusterError> {
        let home = self.sh.home(name, Kind::Mutex, 0)?;
        Ok(Mutex {
            inner: Arc::new(MutexInner {
                cluster: self.clone(),
                name: name.to_owned(),
                home,
            }),
        })
    }

    /// The cluster condition variable `name`.
    pub fn condition(&self, name: &str) -> Result<Condition, ClusterError> {
        let home = self.sh.home(name, Kind::Condition, 0)?;
        Ok(Condition {
            cluster: self.clone(),
            name: name.to_owned(),
            home,
        })
    }

    /// The counting semaphore `name`, made with count `initial` if no space has made it.
    pub fn semaphore(&self, name: &str, initial: u64) -> Result<Semaphore, ClusterError> {
        let home = self.sh.home(name, Kind::Semaphore, initial)?;
        Ok(Semaphore {
            cluster: self.clone(),
            name: name.to_owned(),
            home,
        })
    }
}

impl Mutex {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// The address space it lives in.
    pub fn home(&self) -> &str {
        &self.inner.home
    }

    /// Waits until this task holds it (under the cluster's timeout).
    pub fn lock(&self) -> Result<MutexGuard, LockError> {
        self.lock_until(None)
    }

    /// Waits at most `timeout` to hold it.
    pub fn lock_timeout(&self, timeout: Duration) -> Result<MutexGuard, LockError> {
        self.lock_until(Some(Instant::now() + timeout))
    }

    fn lock_until(&self, deadline: Option<Instant>) -> Result<MutexGuard, LockError> {
        let (seq, owner_died) = self.acquire_counted(deadline)?;
        let g = MutexGuard {
            mutex: self.clone(),
            seq,
            owner_died,
            held: true,
        };
        if owner_died {
            Err(LockError::OwnerDied(g))
        } else {
            Ok(g)
        }
    }

    /// Locks without a guard, for faces that unlock elsewhere: returns the hold's number
    /// for [`unlock_raw`](Mutex::unlock_raw) and whether the previous owner died.
    pub fn lock_raw(&self, timeout: Option<Duration>) -> Result<(u64, bool), ClusterError> {
        self.acquire_counted(timeout.map(|t| Instant::now() + t))
    }

    /// As [`lock_raw`](Mutex::lock_raw), giving up with [`ClusterError::Cancelled`] when
    /// `stop` says so (checked every 50 ms) instead of when the calling task is cancelled:
    /// `&|| false` waits through a cancellation, as a pthreads mutex lock does.
    pub fn lock_raw_until(
        &self,
        timeout: Option<Duration>,
        stop: &dyn Fn() -> bool,
    ) -> Result<(u64, bool), ClusterError> {
        let m = &self.inner;
        let started = Instant::now();
        let r = acquire(
            &m.cluster.sh,
            &m.name,
            &m.home,
            timeout.map(|t| started + t),
            stop,
        );
        m.cluster.sh.counters.timed(ClusterOp::Lock, started);
        r
    }

    /// Locks it if it is free now, without queuing: the hold and whether the previous
    /// owner died, or `None` when another task holds it. One round trip to its home.
    pub fn try_lock_raw(&self) -> Result<Option<(u64, bool)>, ClusterError> {
        let m = &self.inner;
        let started = Instant::now();
        let r = try_acquire(&m.cluster.sh, &m.name, &m.home);
        m.cluster.sh.counters.timed(ClusterOp::Lock, started);
        r
    }

    /// Releases the hold numbered `hold` (from [`lock_raw`](Mutex::lock_raw)).
    pub fn unlock_raw(&self, hold: u64) -> Result<(), ClusterError> {
        let m = &self.inner;
        let started = Instant::now();
        let r = release(&m.cluster.sh, &m.name, &m.home, hold);
        m.cluster.sh.counters.timed(ClusterOp::Unlock, started);
        r
    }

    fn acquire_counted(&self, deadline: Option<Instant>) -> Result<(u64, bool), ClusterError> {
        let m = &self.inner;
        let started = Instant::now();
        let r = acquire(&m.cluster.sh, &m.name, &m.home, deadline, &cancelled_here);
        m.cluster.sh.counters.timed(ClusterOp::Lock, started);
        r
    }
}

impl MutexGuard {
    /// Whether the previous holder died holding the mutex.
    pub fn owner_died(&self) -> bool {
        self.owner_died
    }

    /// The mutex held.
    pub fn mutex(&self) -> &Mutex {
        &self.mutex
    }

    /// Unlocks, reporting a failure to tell the home (dropping the guard ignores it).
    pub fn unlock(mut self) -> Result<(), ClusterError> {
        self.held = false;
        self.mutex.unlock_raw(self.seq)
    }
}

impl Drop for MutexGuard {
    fn drop(&mut self) {
        if self.held {
            let _ = self.mutex.unlock_raw(self.seq);
        }
    }
}

/// A cluster condition variable, used with a [`Mutex`].
#[derive(Clone, Debug)]
pub struct Condition {
    cluster: Cluster,
    name: String,
    home: String,
}

impl Condition {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Releases `guard`'s mutex, waits to be signalled and locks the mutex again. As with
    /// any condition variable, wait in a loop that checks the predicate. On an error the
    /// mutex is not held.
    pub fn wait(&self, guard: MutexGuard) -> Result<MutexGuard, LockError> {
        self.wait_until(guard, None).map(|(g, _)| g)
    }

    /// As [`wait`](Condition::wait), for at most `timeout`; also says whether it timed out.
    pub fn wait_timeout(
        &self,
        guard: MutexGuard,
        timeout: Duration,
    ) -> Result<(MutexGuard, bool), LockError> {
        self.wait_until(guard, Some(Instant::now() + timeout))
    }

    fn wait_until(
        &self,
        mut guard: MutexGuard,
        deadline: Option<Instant>,
    ) -> Result<(MutexGuard, bool), LockError> {
        guard.held = false;
        let mutex = guard.mutex.clone();
        let (hold, owner_died, timed_out) =
            self.wait_hold(&mutex, guard.seq, deadline, &cancelled_here)?;
        let g = MutexGuard {
            mutex,
            seq: hold,
            owner_died,
            held: true,
        };
        if owner_died {
            return Err(LockError::OwnerDied(g));
        }
        Ok((g, timed_out))
    }

    /// As [`wait`](Condition::wait) for faces that hold mutexes without guards: `hold`
    /// (from [`Mutex::lock_raw`]) is released; returns the new hold, whether the previous
    /// owner died, and whether the wait timed out. On an error the mutex is not held.
    pub fn wait_raw(
        &self,
        mutex: &Mutex,
        hold: u64,
        timeout: Option<Duration>,
    ) -> Result<(u64, bool, bool), ClusterError> {
        self.wait_hold(
            mutex,
            hold,
            timeout.map(|t| Instant::now() + t),
            &cancelled_here,
        )
    }

    /// As [`wait_raw`](Condition::wait_raw), giving up with [`ClusterError::Cancelled`]
    /// when `stop` says so instead of when the calling task is cancelled (`&|| false`: a
    /// wait that is not a cancellation point).
    pub fn wait_raw_until(
        &self,
        mutex: &Mutex,
        hold: u64,
        timeout: Option<Duration>,
        stop: &dyn Fn() -> bool,
    ) -> Result<(u64, bool, bool), ClusterError> {
        self.wait_hold(mutex, hold, timeout.map(|t| Instant::now() + t), stop)
    }

    fn wait_hold(
        &self,
        mutex: &Mutex,
        hold: u64,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> Result<(u64, bool, bool), ClusterError> {
        let started = Instant::now();
        let r = self.wait_uncounted(mutex, hold, deadline, stop);
        self.cluster.sh.counters.timed(ClusterOp::Wait, started);
        r
    }

    /// The wait, its unlock and relock counted as the wait alone.
    fn wait_uncounted(
        &self,
        mutex: &Mutex,
        hold: u64,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> Result<(u64, bool, bool), ClusterError> {
        let sh = &self.cluster.sh;
        let m = &mutex.inner;
        let seq = sh.next_seq();
        sh.answers.open(seq);
        // Queued at the home before the mutex is released, so no signal made under the
        // mutex after this can miss it.
        let queued = if self.home == sh.id {
            lock(&sh.homes)
                .cond_wait(
                    &self.name,
                    Waiter {
                        space: sh.id.clone(),
                        seq,
                    },
                )
                .map_err(ClusterError::InvalidArgument)
        } else {
            lock(&sh.pending).insert(
                seq,
                Pending {
                    home: self.home.clone(),
                },
            );
            sh.call(
                &self.home,
                &Msg::CondWait {
                    cond: self.name.clone(),
                    seq,
                },
            )
            .map(|_| ())
        };
        if let Err(e) = queued {
            lock(&sh.pending).remove(&seq);
            sh.answers.close(seq);
            // Released on every failure, as after a wait that failed later.
            let _ = release(sh, &m.name, &m.home, hold);
            return Err(e);
        }
        // The mutex goes even when releasing the space's segments failed (`release` lets it
        // go either way); that failure is reported once the wait is over, so the waiter
        // queued above is not left behind to swallow a signal.
        let released = release(sh, &m.name, &m.home, hold);
        let woken = await_answer(
            sh,
            &self.name,
            &self.home,
            seq,
            deadline,
            "condition wait",
            stop,
        );
        let timed_out = match woken {
            Ok(Answer::Woken) => false,
            Ok(other) => return Err(unexpected(other)),
            Err(ClusterError::Timeout { .. }) => true,
            Err(e) => return Err(e),
        };
        // The mutex again, whatever the wait's end (as pthread_cond_timedwait), even for a
        // cancelled task (as pthreads reacquires it before cancellation cleanup runs).
        let (hold, owner_died) = acquire(sh, &m.name, &m.home, None, &|| false)?;
        if let Err(e) = released {
            let _ = release(sh, &m.name, &m.home, hold);
            return Err(e);
        }
        Ok((hold, owner_died, timed_out))
    }

    /// Wakes one waiting task (none waiting: nothing happens).
    pub fn signal(&self) -> Result<(), ClusterError> {
        let started = Instant::now();
        let r = self.cluster.sh.signal(&self.name, &self.home, false);
        self.cluster.sh.counters.timed(ClusterOp::Signal, started);
        r
    }

    /// Wakes every waiting task.
    pub fn broadcast(&self) -> Result<(), ClusterError> {
        let started = Instant::now();
        let r = self.cluster.sh.signal(&self.name, &self.home, true);
        self.cluster
            .sh
            .counters
            .timed(ClusterOp::Broadcast, started);
        r
    }
}

/// A cluster counting semaphore.
#[derive(Clone, Debug)]
pub struct Semaphore {
    cluster: Cluster,
    name: String,
    home: String,
}

impl Semaphore {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits until the count is positive and takes one.
    pub fn wait(&self) -> Result<(), ClusterError> {
        self.wait_until(None)
    }

    /// As [`wait`](Semaphore::wait), for at most `timeout`.
    pub fn wait_timeout(&self, timeout: Duration) -> Result<(), ClusterError> {
        self.wait_until(Some(Instant::now() + timeout))
    }

    fn wait_until(&self, deadline: Option<Instant>) -> Result<(), ClusterError> {
        let sh = &self.cluster.sh;
        let started = Instant::now();
        let r = acquire(sh, &self.name, &self.home, deadline, &cancelled_here).map(|_| ());
        sh.counters.timed(ClusterOp::SemWait, started);
        r
    }

    /// Adds one, waking a waiter if there is one (after this space's segment writes are
    /// released).
    pub fn post(&self) -> Result<(), ClusterError> {
        let sh = &self.cluster.sh;
        let started = Instant::now();
        let r = self.post_uncounted();
        sh.counters.timed(ClusterOp::Post, started);
        r
    }

    fn post_uncounted(&self) -> Result<(), ClusterError> {
        let sh = &self.cluster.sh;
        // Posted even when releasing a segment failed (waiters would starve); reported.
        let released = segment::release_all(sh);
        released.and(self.post_only())
    }

    fn post_only(&self) -> Result<(), ClusterError> {
        let sh = &self.cluster.sh;
        if self.home == sh.id {
            let acts = lock(&sh.homes).post(&self.name);
            sh.apply(&self.name, acts);
            Ok(())
        } else {
            sh.send(
                &self.home,
                &Msg::Post {
                    sem: self.name.clone(),
                },
            )
        }
    }
}
