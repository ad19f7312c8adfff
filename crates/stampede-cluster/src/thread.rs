//! Spawning, joining and cancelling tasks anywhere in the cluster.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use stampede_core::{StmError, Timestamp};

use crate::error::ClusterError;
use crate::segment;
use crate::shared::{
    cancelled_here, lock, set_cancel, Cluster, ClusterOp, Ended, Placed, Running, Shared, TaskBody,
    TaskContext, ThreadId,
};
use crate::waits::NoAnswer;
use crate::wire::{Msg, Outcome};

/// Where a spawned task runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// In this address space.
    Here,
    /// In the named address space (pinned).
    On(String),
    /// In the cluster's spaces in turn, in the order of their names (as CableS places
    /// threads).
    RoundRobin,
    /// In the space running the fewest tasks, counting this space's own tasks and those it
    /// placed elsewhere and has not heard the end of; ties go in turn.
    LeastLoaded,
}

/// A spawned task: join it for its result, or cancel it. Dropping the handle detaches the
/// task, which runs on.
pub struct JoinHandle {
    sh: Arc<Shared>,
    id: ThreadId,
    space: String,
    task: String,
    joined: bool,
}

/// The virtual time of a spawn that names none: the lowest its space allows.
const ANY_TIME: Timestamp = Timestamp::MIN;

impl Cluster {
    /// Spawns task `task` (registered under that name where it runs) with `args`, placed
    /// by `on`; its Stampede task starts at the lowest virtual time its space allows (0
    /// until the space's collector moved past it).
    pub fn spawn(
        &self,
        task: &str,
        args: impl Into<Bytes>,
        on: Placement,
    ) -> Result<JoinHandle, ClusterError> {
        self.spawn_at(task, args, on, ANY_TIME)
    }

    /// Spawns task `task` whose Stampede task starts at virtual time `vt`.
    pub fn spawn_at(
        &self,
        task: &str,
        args: impl Into<Bytes>,
        on: Placement,
        vt: i64,
    ) -> Result<JoinHandle, ClusterError> {
        let sh = &self.sh;
        let started = std::time::Instant::now();
        let space = self.place(&on)?;
        // The task sees what the spawner wrote before it.
        segment::release_all(sh)?;
        let seq = sh.next_seq();
        sh.ends.open(seq);
        lock(&sh.placed).insert(
            seq,
            Placed {
                space: space.clone(),
            },
        );
        sh.counters.spawned.fetch_add(1, Ordering::Relaxed);
        let args = args.into();
        if space == sh.id {
            run(sh, sh.id.clone(), seq, task.to_owned(), args, vt);
        } else if let Err(e) = sh.send(
            &space,
            &Msg::Run {
                seq,
                task: task.to_owned(),
                args,
                vt,
            },
        ) {
            lock(&sh.placed).remove(&seq);
            sh.ends.close(seq);
            return Err(e);
        }
        // A space that left between the choice and the registration above was handled
        // without this task: it is lost now.
        if space != sh.id && !lock(&sh.members).contains(&space) {
            sh.ended(seq, Ended::Lost(space.clone()));
        }
        sh.counters.timed(ClusterOp::Create, started);
        Ok(JoinHandle {
            sh: sh.clone(),
            id: ThreadId {
                origin: sh.id.clone(),
                seq,
            },
            space,
            task: task.to_owned(),
            joined: false,
        })
    }

    /// The space `on` names for the next task; a round-robin or least-loaded spawn
    /// attaches a space first when every member is full by the attach policy.
    fn place(&self, on: &Placement) -> Result<String, ClusterError> {
        let sh = &self.sh;
        let members = lock(&sh.members).clone();
        if members.is_empty() {
            return Err(ClusterError::NoSpace("this space left the cluster".into()));
        }
        let chosen = match on {
            Placement::Here => return Ok(sh.id.clone()),
            Placement::On(s) => {
                return if members.contains(s) {
                    Ok(s.clone())
                } else {
                    Err(ClusterError::NoSpace(format!(
                        "{s} is not a space of this cluster"
                    )))
                };
            }
            Placement::RoundRobin | Placement::LeastLoaded => {
                let load = self.loads(&members);
                if let Some(p) = &sh.opts.attach {
                    if load.iter().all(|&l| l >= p.task_limit) {
                        return self.attach(&p.command, p.timeout);
                    }
                }
                let start = sh.turn.fetch_add(1, Ordering::Relaxed);
                let n = members.len();
                let i = if *on == Placement::RoundRobin {
                    // In turn, skipping full members when spaces attach on demand.
                    let limit = sh.opts.attach.as_ref().map_or(usize::MAX, |p| p.task_limit);
                    (0..n)
                        .map(|k| (start + k) % n)
                        .find(|&i| load[i] < limit)
                        .unwrap_or(start % n)
                } else {
                    (0..n)
                        .map(|k| (start + k) % n)
                        .min_by_key(|&i| load[i])
                        .expect("the cluster has this space at least")
                };
                members[i].clone()
            }
        };
        if let Some(t) = lock(&sh.attached).get_mut(&chosen) {
            *t = std::time::Instant::now();
        }
        Ok(chosen)
    }

    /// The tasks each of `members` runs by this space's count: those it placed there and
    /// has not heard the end of, and, for itself, those it runs for others.
    fn loads(&self, members: &[String]) -> Vec<usize> {
        let sh = &self.sh;
        let mut load = vec![0usize; members.len()];
        for p in lock(&sh.placed).values() {
            if let Ok(i) = members.binary_search(&p.space) {
                load[i] += 1;
            }
        }
        if let Ok(i) = members.binary_search(&sh.id) {
            load[i] += lock(&sh.running)
                .keys()
                .filter(|id| id.origin != sh.id)
                .count();
        }
        load
    }

    /// The cluster's spaces, sorted by name (this one included).
    pub fn spaces(&self) -> Vec<String> {
        lock(&self.sh.members).clone()
    }
}

impl std::fmt::Debug for JoinHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id)
            .field("space", &self.space)
            .field("task", &self.task)
            .finish()
    }
}

impl JoinHandle {
    /// The task's identity.
    pub fn id(&self) -> &ThreadId {
        &self.id
    }
    /// The space it runs in.
    pub fn space(&self) -> &str {
        &self.space
    }
    /// Whether it has ended (joining would not wait).
    pub fn is_finished(&self) -> bool {
        self.sh.ends.ready(self.id.seq)
    }

    /// Waits for the task to end: its result, or how it failed ([`ClusterError::Failed`],
    /// [`Panicked`](ClusterError::Panicked), [`Cancelled`](ClusterError::Cancelled),
    /// [`UnknownTask`](ClusterError::UnknownTask), or [`Lost`](ClusterError::Lost) when its
    /// space left or died). A task joining another gives up when it is cancelled itself.
    pub fn join(mut self) -> Result<Bytes, ClusterError> {
        self.wait(None)
    }

    /// As [`join`](JoinHandle::join), but gives up after `timeout`
    /// ([`ClusterError::Timeout`]) and may be joined again.
    pub fn join_timeout(&mut self, timeout: Duration) -> Result<Bytes, ClusterError> {
        self.wait(Some(Instant::now() + timeout))
    }

    /// As [`join_timeout`](JoinHandle::join_timeout) (`None`: no limit), also giving up
    /// with [`ClusterError::Cancelled`] once `stop` says so (checked every 50 ms): for
    /// faces that watch for interrupts while they wait.
    pub fn join_until(
        &mut self,
        timeout: Option<Duration>,
        stop: &dyn Fn() -> bool,
    ) -> Result<Bytes, ClusterError> {
        self.wait_with(timeout.map(|t| Instant::now() + t), stop)
    }

    fn wait(&mut self, deadline: Option<Instant>) -> Result<Bytes, ClusterError> {
        self.wait_with(deadline, &cancelled_here)
    }

    fn wait_with(
        &mut self,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> Result<Bytes, ClusterError> {
        let started = Instant::now();
        let ended = self.sh.ends.wait(self.id.seq, deadline, stop, false);
        self.sh.counters.timed(ClusterOp::Join, started);
        match ended {
            Ok(ended) => {
                self.joined = true;
                segment::acquire_all(&self.sh);
                self.outcome(ended)
            }
            Err(NoAnswer::TimedOut) => Err(ClusterError::Timeout {
                operation: "join",
                waited: started.elapsed(),
            }),
            Err(NoAnswer::Stopped) => Err(ClusterError::Cancelled),
        }
    }

    fn outcome(&self, ended: Ended) -> Result<Bytes, ClusterError> {
        let task = || self.task.clone();
        match ended {
            Ended::Outcome(Outcome::Returned(b)) => Ok(b),
            Ended::Outcome(Outcome::Failed(message)) => Err(ClusterError::Failed {
                task: task(),
                message,
            }),
            Ended::Outcome(Outcome::Panicked(message)) => Err(ClusterError::Panicked {
                task: task(),
                message,
            }),
            Ended::Outcome(Outcome::Cancelled) => Err(ClusterError::Cancelled),
            Ended::Outcome(Outcome::Unknown) => Err(ClusterError::UnknownTask {
                space: self.space.clone(),
                task: task(),
            }),
            Ended::Lost(space) => Err(ClusterError::Lost { space }),
        }
    }

    /// Asks the task to stop: it sees [`TaskContext::is_cancelled`](crate::TaskContext)
    /// and its cluster waits give up; if it then returns an error, its joiner gets
    /// [`ClusterError::Cancelled`].
    pub fn cancel(&self) -> Result<(), ClusterError> {
        let sh = &self.sh;
        if self.space == sh.id {
            if let Some(r) = lock(&sh.running).get(&self.id) {
                r.cancel.store(true, Ordering::Release);
            }
            Ok(())
        } else {
            sh.send(&self.space, &Msg::Cancel { seq: self.id.seq })
        }
    }
}

impl Drop for JoinHandle {
    fn drop(&mut self) {
        if !self.joined {
            self.sh.ends.close(self.id.seq);
        }
    }
}

/// Runs task `task` for `origin`'s handle `seq` on a thread of its own and reports its end
/// to `origin`.
pub(crate) fn run(sh: &Arc<Shared>, origin: String, seq: u64, task: String, args: Bytes, vt: i64) {
    let id = ThreadId {
        origin: origin.clone(),
        seq,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    lock(&sh.running).insert(
        id.clone(),
        Running {
            task: task.clone(),
            cancel: cancel.clone(),
            started: Instant::now(),
        },
    );
    sh.counters.ran.fetch_add(1, Ordering::Relaxed);
    let on_thread = sh.clone();
    let started = std::thread::Builder::new()
        .name(format!("cluster {task}"))
        .spawn(move || {
            let sh = on_thread;
            // Found on the task's own thread: a face's resolver (a Python import) may take
            // long or call the cluster, which the serving thread must not wait for.
            let outcome = match sh.registry.get(&task) {
                Some(b) => body(&sh, &*b, id.clone(), task, cancel, args, vt),
                None => Outcome::Unknown,
            };
            lock(&sh.running).remove(&id);
            end(&sh, &id.origin, id.seq, outcome);
        });
    if let Err(e) = started {
        lock(&sh.running).remove(&ThreadId {
            origin: origin.clone(),
            seq,
        });
        end(sh, &origin, seq, Outcome::Failed(format!("no thread: {e}")));
    }
}

fn body(
    sh: &Arc<Shared>,
    body: &TaskBody,
    id: ThreadId,
    name: String,
    cancel: Arc<AtomicBool>,
    args: Bytes,
    vt: Timestamp,
) -> Outcome {
    let create = |vt| {
        sh.space
            .runtime()
            .task_builder()
            .name(name.clone())
            .virtual_time(vt)
            .create()
    };
    let made = match create(if vt == ANY_TIME { 0 } else { vt }) {
        Err(StmError::BelowVisibility { visibility, .. }) if vt == ANY_TIME => create(visibility),
        made => made,
    };
    let task = match made {
        Ok(t) => t,
        Err(e) => return Outcome::Failed(format!("no Stampede task: {e}")),
    };
    let ctx = TaskContext {
        cluster: Cluster { sh: sh.clone() },
        id,
        name,
        cancel: cancel.clone(),
        task,
    };
    // A spawn is a release by the spawner and an acquire by the task; the task's end is a
    // release, acquired by its joiner.
    segment::acquire_all(sh);
    set_cancel(Some(cancel.clone()));
    let result = catch_unwind(AssertUnwindSafe(|| body(&ctx, args)));
    set_cancel(None);
    let released = segment::release_all(sh);
    match result {
        Ok(Ok(b)) => match released {
            Ok(()) => Outcome::Returned(b),
            Err(e) => Outcome::Failed(format!("releasing its writes: {e}")),
        },
        Ok(Err(_)) if cancel.load(Ordering::Acquire) => Outcome::Cancelled,
        Ok(Err(e)) => Outcome::Failed(e.to_string()),
        Err(p) => Outcome::Panicked(
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into()),
        ),
    }
}

/// Reports the end of `origin`'s task `seq`.
fn end(sh: &Shared, origin: &str, seq: u64, outcome: Outcome) {
    if origin == sh.id {
        sh.ended(seq, Ended::Outcome(outcome));
    } else {
        // An origin that is gone has nobody to tell.
        let _ = sh.send(origin, &Msg::Exit { seq, outcome });
    }
}
