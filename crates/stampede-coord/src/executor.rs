//! The work-stealing executor the coordination layer runs on: one deque per worker
//! (crossbeam-deque), a global queue for work submitted from outside, and a second global
//! queue that workers look at first, for work on the critical path.

use std::cell::Cell;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};
use crossbeam_utils::CachePadded;

use stampede_observe::Sample;

use crate::graph::Instance;

/// How urgent a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Priority {
    /// Run in the usual order: newest local work first, stolen work oldest first.
    #[default]
    Normal,
    /// Run before any normal job, by whichever worker is free first (critical-path steps).
    High,
}

/// One job's run, recorded when tracing is on ([`Executor::set_tracing`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// The worker that ran it.
    pub worker: usize,
    /// What ran (a step collection's name).
    pub name: Arc<str>,
    /// Which instance (a tag, as text).
    pub tag: String,
    /// When it started, since the executor was made.
    pub start: Duration,
    /// When it ended, since the executor was made.
    pub end: Duration,
}

/// One worker's counters: [`Executor::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Jobs (step instances and closures) it has run.
    pub jobs: u64,
    /// Jobs it took from another worker's deque.
    pub steals: u64,
    /// Times it went to sleep for want of work.
    pub sleeps: u64,
    /// Jobs in its deque now.
    pub queued: usize,
}

/// An executor's counters and queue depths, read without stopping it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExecutorStats {
    /// Per worker.
    pub workers: Vec<WorkerStats>,
    /// Jobs in the global queue (work submitted from outside the workers).
    pub global_queue: usize,
    /// Jobs in the critical-path queue.
    pub urgent_queue: usize,
}

/// Written only by its worker, each on its own cache line: counting costs a relaxed add.
#[derive(Default)]
struct Counters {
    jobs: AtomicU64,
    steals: AtomicU64,
    sleeps: AtomicU64,
}

impl Counters {
    fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// A queued job. A step instance travels as it is: scheduling one allocates nothing, and
/// the worker that runs it frees nothing (unless it is suspended, when it is shared with the
/// items it waits for).
pub(crate) enum Job {
    Closure(Box<dyn FnOnce() + Send>),
    Instance(Instance),
    /// An instance that waited for items, which may still refer to it.
    Shared(Arc<Instance>),
}

impl Job {
    fn run(self) {
        match self {
            Job::Closure(f) => {
                // A closure may wait for a graph: what earlier instances held back is due.
                crate::graph::settle();
                f()
            }
            Job::Instance(i) => i.run(),
            Job::Shared(i) => Instance::run_shared(i),
        }
    }
}

/// Idle workers. A worker goes to sleep only after announcing itself in `sleeping` and then
/// finding every queue empty; a spawn pushes its job and then reads `sleeping`. A fence on
/// each side between the two steps means either the spawn sees the sleeper and wakes it, or
/// the sleeper sees the job and stays up: a worker never sleeps while a job is queued.
struct Sleep {
    /// Workers asleep (or about to be) that no spawn has woken yet; mirrors
    /// `state.sleepers` for spawns to read without the lock.
    sleeping: AtomicUsize,
    state: Mutex<SleepState>,
    wake: Condvar,
}

/// Every worker waiting on the condition variable is counted once, in `sleepers` until a
/// spawn hands it a wake-up, then in `wakeups` until it takes one (any waiter may take it).
#[derive(Default)]
struct SleepState {
    sleepers: usize,
    wakeups: usize,
}

pub(crate) struct Pool {
    injector: Injector<Job>,
    urgent: Injector<Job>,
    stealers: Vec<Stealer<Job>>,
    sleep: Sleep,
    /// How long a sleeping worker waits before looking again by itself, if ever.
    nap: Option<Duration>,
    stop: AtomicBool,
    tracing: AtomicBool,
    traces: Vec<Mutex<Vec<TraceEvent>>>,
    counters: Vec<CachePadded<Counters>>,
    epoch: Instant,
    /// Tells this pool's workers apart from other pools' (a worker's local deque is
    /// used only for its own pool's jobs).
    id: usize,
}

struct Shared {
    pool: Arc<Pool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.pool.stop.store(true, Ordering::SeqCst);
        {
            let _g = lock(&self.pool.sleep.state);
            self.pool.sleep.wake.notify_all();
        }
        let me = std::thread::current().id();
        for t in lock(&self.threads).drain(..) {
            // The last handle may be dropped by a job on a worker: that thread ends by itself.
            if t.thread().id() != me {
                let _ = t.join();
            }
        }
    }
}

/// A pool of worker threads that steal work from each other. Cheap to clone; the workers stop
/// when the last clone is dropped.
#[derive(Clone)]
pub struct Executor {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("workers", &self.workers())
            .finish()
    }
}

thread_local! {
    /// The pool id and worker index of this thread, and its local deque.
    static LOCAL: Cell<Option<(usize, usize, *const Worker<Job>)>> = const { Cell::new(None) };
}

static POOLS: AtomicUsize = AtomicUsize::new(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for Executor {
    /// One worker per processor.
    fn default() -> Self {
        Executor::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// How long a sleeping worker waits before looking for work by itself. Nothing relies on it
/// (spawns wake sleepers); it bounds the cost of a wake-up lost to a fault.
const NAP: Duration = Duration::from_millis(100);

impl Executor {
    /// A pool of `workers` threads (at least one).
    pub fn new(workers: usize) -> Self {
        Executor::with_nap(workers, Some(NAP))
    }

    /// A pool whose sleeping workers look for work by themselves every `nap`, or only when
    /// woken (`None`).
    pub(crate) fn with_nap(workers: usize, nap: Option<Duration>) -> Self {
        let workers = workers.max(1);
        let locals: Vec<Worker<Job>> = (0..workers).map(|_| Worker::new_lifo()).collect();
        let pool = Arc::new(Pool {
            injector: Injector::new(),
            urgent: Injector::new(),
            stealers: locals.iter().map(Worker::stealer).collect(),
            sleep: Sleep {
                sleeping: AtomicUsize::new(0),
                state: Mutex::new(SleepState::default()),
                wake: Condvar::new(),
            },
            nap,
            stop: AtomicBool::new(false),
            tracing: AtomicBool::new(false),
            traces: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
            counters: (0..workers).map(|_| CachePadded::default()).collect(),
            epoch: Instant::now(),
            id: POOLS.fetch_add(1, Ordering::Relaxed),
        });
        let threads = locals
            .into_iter()
            .enumerate()
            .map(|(i, local)| {
                let pool = pool.clone();
                std::thread::Builder::new()
                    .name(format!("stampede-coord-{i}"))
                    .spawn(move || run(&pool, i, local))
                    .expect("cannot start an executor thread")
            })
            .collect();
        Executor {
            shared: Arc::new(Shared {
                pool,
                threads: Mutex::new(threads),
            }),
        }
    }

    /// The queues and workers' state, without keeping the workers running.
    pub(crate) fn pool(&self) -> &Arc<Pool> {
        &self.shared.pool
    }

    /// How many workers it has.
    pub fn workers(&self) -> usize {
        self.shared.pool.stealers.len()
    }

    /// The index of the worker running the caller, if it is one of this executor's.
    pub fn current_worker(&self) -> Option<usize> {
        self.shared.pool.current_worker()
    }

    /// Runs `job` on a worker. From one of this executor's workers a normal job goes to that
    /// worker's own deque (others steal it when idle); from elsewhere, to the global queue.
    pub fn spawn(&self, priority: Priority, job: impl FnOnce() + Send + 'static) {
        self.shared
            .pool
            .submit(priority, Job::Closure(Box::new(job)));
    }

    /// Runs `job` after the work queued on the calling worker: it goes to the global queue,
    /// which a worker looks at once its own deque is empty.
    pub(crate) fn spawn_later(&self, job: impl FnOnce() + Send + 'static) {
        let pool = &self.shared.pool;
        pool.injector.push(Job::Closure(Box::new(job)));
        fence(Ordering::SeqCst);
        if pool.sleep.sleeping.load(Ordering::Relaxed) > 0 {
            pool.wake_one();
        }
    }

    /// Every worker's counters and queue depth, and the global queues' depths.
    ///
    /// ```
    /// use stampede_coord::{Executor, Priority};
    /// let ex = Executor::new(2);
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// for _ in 0..10 {
    ///     let tx = tx.clone();
    ///     ex.spawn(Priority::Normal, move || tx.send(()).unwrap());
    /// }
    /// for _ in 0..10 {
    ///     rx.recv().unwrap();
    /// }
    /// assert_eq!(ex.stats().workers.len(), 2);
    /// // Each job is counted just after it returns.
    /// let jobs = || ex.stats().workers.iter().map(|w| w.jobs).sum::<u64>();
    /// while jobs() < 10 {
    ///     std::thread::yield_now();
    /// }
    /// ```
    pub fn stats(&self) -> ExecutorStats {
        let pool = &self.shared.pool;
        ExecutorStats {
            workers: pool
                .counters
                .iter()
                .zip(&pool.stealers)
                .map(|(c, s)| WorkerStats {
                    jobs: c.jobs.load(Ordering::Relaxed),
                    steals: c.steals.load(Ordering::Relaxed),
                    sleeps: c.sleeps.load(Ordering::Relaxed),
                    queued: s.len(),
                })
                .collect(),
            global_queue: pool.injector.len(),
            urgent_queue: pool.urgent.len(),
        }
    }

    /// A metrics source for this executor, its samples labelled `executor=name`: per worker
    /// jobs run, steals, sleeps and deque depth; the global and critical-path queue depths.
    /// Add it to an address space's metrics (`space.metrics().add(...)`).
    pub fn metrics_source(&self, name: &str) -> impl stampede_observe::Source {
        let pool = Arc::downgrade(&self.shared);
        let name = name.to_owned();
        move |out: &mut Vec<Sample>| {
            // A source outliving its executor reports nothing.
            let Some(shared) = pool.upgrade() else { return };
            let stats = Executor { shared }.stats();
            let ex = |s: Sample| s.label("executor", name.clone());
            for (i, w) in stats.workers.iter().enumerate() {
                let worker = |s: Sample| ex(s).label("worker", i.to_string());
                let counters = [
                    (
                        "stampede_executor_jobs",
                        "Jobs (step instances, closures) a worker has run.",
                        w.jobs,
                    ),
                    (
                        "stampede_executor_steals",
                        "Jobs a worker took from another worker's deque.",
                        w.steals,
                    ),
                    (
                        "stampede_executor_sleeps",
                        "Times a worker slept for want of work.",
                        w.sleeps,
                    ),
                ];
                for (metric, help, v) in counters {
                    out.push(worker(Sample::counter(metric, help, v)));
                }
                out.push(worker(Sample::gauge(
                    "stampede_executor_queued",
                    "Jobs in a worker's deque now.",
                    w.queued as f64,
                )));
            }
            out.push(ex(Sample::gauge(
                "stampede_executor_global_queued",
                "Jobs in the executor's global queue now.",
                stats.global_queue as f64,
            )));
            out.push(ex(Sample::gauge(
                "stampede_executor_urgent_queued",
                "Jobs in the executor's critical-path queue now.",
                stats.urgent_queue as f64,
            )));
        }
    }

    /// Switches the execution trace on or off.
    pub fn set_tracing(&self, on: bool) {
        self.shared.pool.tracing.store(on, Ordering::Relaxed);
    }

    /// Whether the trace is on.
    pub fn tracing(&self) -> bool {
        self.shared.pool.tracing()
    }

    /// Records a run of `name` for `tag` from `start` to now on the calling worker (nothing
    /// when tracing is off or the caller is not a worker).
    pub fn record(&self, name: &Arc<str>, tag: impl FnOnce() -> String, start: Instant) {
        self.shared.pool.record(name, tag, start);
    }

    /// The trace recorded so far, every worker's, by start time; the trace is emptied.
    pub fn take_trace(&self) -> Vec<TraceEvent> {
        let mut all: Vec<TraceEvent> = self
            .shared
            .pool
            .traces
            .iter()
            .flat_map(|t| std::mem::take(&mut *lock(t)))
            .collect();
        all.sort_by_key(|e| (e.start, e.worker));
        all
    }
}

impl Pool {
    fn current_worker(&self) -> Option<usize> {
        LOCAL
            .with(Cell::get)
            .and_then(|(id, i, _)| (id == self.id).then_some(i))
    }

    /// Queues `job`: see [`Executor::spawn`].
    pub(crate) fn submit(&self, priority: Priority, job: Job) {
        match priority {
            Priority::High => self.urgent.push(job),
            Priority::Normal => match LOCAL.with(Cell::get) {
                // SAFETY: the pointer is the running worker's own deque, alive for as long as
                // that worker's loop runs, which is while this thread runs a job of it.
                Some((id, _, local)) if id == self.id => unsafe { (*local).push(job) },
                _ => self.injector.push(job),
            },
        }
        // Pairs with the fence of a worker going to sleep (see `Sleep`).
        fence(Ordering::SeqCst);
        if self.sleep.sleeping.load(Ordering::Relaxed) > 0 {
            self.wake_one();
        }
    }

    /// Hands a wake-up to one sleeping worker, if one is still unwoken.
    fn wake_one(&self) {
        let mut st = lock(&self.sleep.state);
        if st.sleepers > 0 {
            st.sleepers -= 1;
            st.wakeups += 1;
            self.sleep.sleeping.fetch_sub(1, Ordering::Relaxed);
            self.sleep.wake.notify_one();
        }
    }

    /// Whether any queue holds a job.
    fn has_work(&self) -> bool {
        !self.urgent.is_empty()
            || !self.injector.is_empty()
            || self.stealers.iter().any(|s| !s.is_empty())
    }

    pub(crate) fn tracing(&self) -> bool {
        self.tracing.load(Ordering::Relaxed)
    }

    /// See [`Executor::record`].
    pub(crate) fn record(&self, name: &Arc<str>, tag: impl FnOnce() -> String, start: Instant) {
        if !self.tracing() {
            return;
        }
        if let Some(worker) = self.current_worker() {
            let event = TraceEvent {
                worker,
                name: name.clone(),
                tag: tag(),
                start: start.saturating_duration_since(self.epoch),
                end: self.epoch.elapsed(),
            };
            lock(&self.traces[worker]).push(event);
        }
    }

    /// Sleeps until woken, unless a job is queued or the pool stops.
    fn sleep(&self) {
        // Tests widen the window in which a spawn races with going to sleep.
        #[cfg(test)]
        tests::dawdle();
        let sleep = &self.sleep;
        let mut st = lock(&sleep.state);
        st.sleepers += 1;
        sleep.sleeping.fetch_add(1, Ordering::Relaxed);
        // Pairs with the fence of a spawn (see `Sleep`).
        fence(Ordering::SeqCst);
        if self.has_work() || self.stop.load(Ordering::SeqCst) {
            // Nobody woke this worker: only wakers and sleepers change the counts, under the
            // lock held since the announcement.
            st.sleepers -= 1;
            sleep.sleeping.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        loop {
            let timed_out = match self.nap {
                Some(nap) => {
                    let (g, t) = sleep
                        .wake
                        .wait_timeout(st, nap)
                        .unwrap_or_else(PoisonError::into_inner);
                    st = g;
                    t.timed_out()
                }
                None => {
                    st = sleep.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                    false
                }
            };
            if st.wakeups > 0 {
                st.wakeups -= 1;
                return;
            }
            if timed_out || self.stop.load(Ordering::SeqCst) {
                st.sleepers -= 1;
                sleep.sleeping.fetch_sub(1, Ordering::Relaxed);
                return;
            }
        }
    }
}

fn find(pool: &Pool, me: usize, local: &Worker<Job>) -> Option<Job> {
    // Critical-path work first, then this worker's own, then the global queue, then others'.
    // A `Retry` (a race with another thief) steals again. A glance at the critical-path
    // queue first spares the fence of a steal from it when it is empty (almost always).
    if !pool.urgent.is_empty() {
        loop {
            match pool.urgent.steal() {
                Steal::Success(j) => return Some(j),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }
    if let Some(j) = local.pop() {
        return Some(j);
    }
    loop {
        match pool.injector.steal_batch_and_pop(local) {
            Steal::Success(j) => return Some(j),
            Steal::Retry => continue,
            Steal::Empty => break,
        }
    }
    let n = pool.stealers.len();
    for k in 1..n {
        let other = &pool.stealers[(me + k) % n];
        loop {
            match other.steal() {
                Steal::Success(j) => {
                    Counters::bump(&pool.counters[me].steals);
                    return Some(j);
                }
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }
    None
}

/// Rounds an idle worker looks for work before it sleeps: the first half spinning, the rest
/// yielding. A hand-off often arrives within them, saving a sleep and a wake-up (two system
/// calls and two context switches).
const IDLE_ROUNDS: u32 = 64;

fn run(pool: &Arc<Pool>, me: usize, local: Worker<Job>) {
    LOCAL.with(|l| l.set(Some((pool.id, me, &local as *const Worker<Job>))));
    let mut idle = 0;
    while !pool.stop.load(Ordering::SeqCst) {
        if let Some(job) = find(pool, me, &local) {
            job.run();
            Counters::bump(&pool.counters[me].jobs);
            idle = 0;
            continue;
        }
        if idle == IDLE_ROUNDS / 4 {
            // Out of work for a moment: what finished instances held back is due (a graph
            // may be waited for). Not at once, as more work often follows within a few
            // rounds, and settling each time would touch the shared counts once per job.
            crate::graph::settle();
        }
        if idle < IDLE_ROUNDS {
            if idle < IDLE_ROUNDS / 2 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
            idle += 1;
            continue;
        }
        idle = 0;
        Counters::bump(&pool.counters[me].sleeps);
        pool.sleep();
    }
    crate::graph::settle();
    LOCAL.with(|l| l.set(None));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    const PATIENCE: Duration = Duration::from_secs(20);

    /// `n` rounds, or a few under Miri, which checks the deque pointer a worker's spawn uses
    /// but runs each round some thousand times slower.
    fn rounds(n: u32) -> u32 {
        if cfg!(miri) {
            n / 500
        } else {
            n
        }
    }

    /// Between a worker's last look for work and its going to sleep.
    pub(super) fn dawdle() {
        let until = Instant::now() + Duration::from_micros(20);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Lets the workers reach a different point of going to sleep each round: the pauses
    /// sweep the idle rounds in steps of a few tens of nanoseconds, and some outlast them.
    fn pause(round: u32) {
        if round % 16 == 0 {
            std::thread::sleep(Duration::from_micros(200));
            return;
        }
        let until = Instant::now() + Duration::from_nanos(u64::from(round) * 37 % 150_000);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }

    /// Without naps to fall back on, a lost wake-up leaves a job queued while every worker
    /// sleeps, and its round never ends.
    #[test]
    fn a_spawn_from_outside_wakes_a_sleeping_worker() {
        for workers in [1, 2] {
            let exec = Executor::with_nap(workers, None);
            let (tx, rx) = mpsc::channel();
            for round in 0..rounds(12_000) {
                let tx = tx.clone();
                let priority = if round % 3 == 0 {
                    Priority::High
                } else {
                    Priority::Normal
                };
                exec.spawn(priority, move || tx.send(round).unwrap());
                assert_eq!(rx.recv_timeout(PATIENCE), Ok(round), "{workers} workers");
                pause(round);
            }
        }
    }

    /// A job on one worker pushes another to its own deque and waits for it: only the other
    /// worker, asleep, can run it.
    #[test]
    fn a_spawn_from_a_worker_wakes_another() {
        let exec = Executor::with_nap(2, None);
        let (tx, rx) = mpsc::channel();
        for round in 0..rounds(6000) {
            let (tx, inner) = (tx.clone(), exec.clone());
            exec.spawn(Priority::Normal, move || {
                let (ran, wait) = mpsc::channel();
                inner.spawn(Priority::Normal, move || ran.send(()).unwrap());
                wait.recv_timeout(PATIENCE).unwrap();
                tx.send(round).unwrap();
            });
            assert_eq!(rx.recv_timeout(PATIENCE), Ok(round));
            pause(round);
        }
    }
}
