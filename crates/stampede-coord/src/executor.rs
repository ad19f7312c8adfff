//! The work-stealing executor the coordination layer runs on: one deque per worker
//! (crossbeam-deque), a global queue for work submitted from outside, and a second global
//! queue that workers look at first, for work on the critical path.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

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

type Job = Box<dyn FnOnce() + Send>;

struct Pool {
    injector: Injector<Job>,
    urgent: Injector<Job>,
    stealers: Vec<Stealer<Job>>,
    /// Jobs queued and not yet taken: a worker sleeps only when it is zero.
    queued: AtomicUsize,
    /// Workers asleep (or about to be): a spawn takes the lock to wake one only then.
    sleeping: AtomicUsize,
    sleepers: Mutex<usize>,
    wake: Condvar,
    stop: AtomicBool,
    tracing: AtomicBool,
    traces: Vec<Mutex<Vec<TraceEvent>>>,
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
            let _g = lock(&self.pool.sleepers);
            self.pool.wake.notify_all();
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

impl Executor {
    /// A pool of `workers` threads (at least one).
    pub fn new(workers: usize) -> Self {
        let workers = workers.max(1);
        let locals: Vec<Worker<Job>> = (0..workers).map(|_| Worker::new_lifo()).collect();
        let pool = Arc::new(Pool {
            injector: Injector::new(),
            urgent: Injector::new(),
            stealers: locals.iter().map(Worker::stealer).collect(),
            queued: AtomicUsize::new(0),
            sleeping: AtomicUsize::new(0),
            sleepers: Mutex::new(0),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            tracing: AtomicBool::new(false),
            traces: (0..workers).map(|_| Mutex::new(Vec::new())).collect(),
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

    /// How many workers it has.
    pub fn workers(&self) -> usize {
        self.shared.pool.stealers.len()
    }

    /// The index of the worker running the caller, if it is one of this executor's.
    pub fn current_worker(&self) -> Option<usize> {
        LOCAL
            .with(Cell::get)
            .and_then(|(id, i, _)| (id == self.shared.pool.id).then_some(i))
    }

    /// Runs `job` on a worker. From one of this executor's workers a normal job goes to that
    /// worker's own deque (others steal it when idle); from elsewhere, to the global queue.
    pub fn spawn(&self, priority: Priority, job: impl FnOnce() + Send + 'static) {
        let pool = &self.shared.pool;
        let job: Job = Box::new(job);
        pool.queued.fetch_add(1, Ordering::SeqCst);
        match priority {
            Priority::High => pool.urgent.push(job),
            Priority::Normal => match LOCAL.with(Cell::get) {
                // SAFETY: the pointer is the running worker's own deque, alive for as long as
                // that worker's loop runs, which is while this thread runs a job of it.
                Some((id, _, local)) if id == pool.id => unsafe { (*local).push(job) },
                _ => pool.injector.push(job),
            },
        }
        if pool.sleeping.load(Ordering::SeqCst) > 0 {
            let _g = lock(&pool.sleepers);
            pool.wake.notify_one();
        }
    }

    /// Switches the execution trace on or off.
    pub fn set_tracing(&self, on: bool) {
        self.shared.pool.tracing.store(on, Ordering::Relaxed);
    }

    /// Whether the trace is on.
    pub fn tracing(&self) -> bool {
        self.shared.pool.tracing.load(Ordering::Relaxed)
    }

    /// Records a run of `name` for `tag` from `start` to now on the calling worker (nothing
    /// when tracing is off or the caller is not a worker).
    pub fn record(&self, name: &Arc<str>, tag: impl FnOnce() -> String, start: Instant) {
        let pool = &self.shared.pool;
        if !self.tracing() {
            return;
        }
        if let Some(worker) = self.current_worker() {
            let event = TraceEvent {
                worker,
                name: name.clone(),
                tag: tag(),
                start: start.saturating_duration_since(pool.epoch),
                end: pool.epoch.elapsed(),
            };
            lock(&pool.traces[worker]).push(event);
        }
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

fn find(pool: &Pool, me: usize, local: &Worker<Job>) -> Option<Job> {
    // Critical-path work first, then this worker's own, then the global queue, then others'.
    // A `Retry` (a race with another thief) steals again.
    loop {
        match pool.urgent.steal() {
            Steal::Success(j) => return Some(j),
            Steal::Retry => continue,
            Steal::Empty => break,
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
                Steal::Success(j) => return Some(j),
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
            pool.queued.fetch_sub(1, Ordering::SeqCst);
            job();
            idle = 0;
            continue;
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
        let mut sleepers = lock(&pool.sleepers);
        if pool.queued.load(Ordering::SeqCst) > 0 || pool.stop.load(Ordering::SeqCst) {
            continue;
        }
        *sleepers += 1;
        pool.sleeping.fetch_add(1, Ordering::SeqCst);
        // Queued since the check above, before `sleeping` was raised: such a spawn did not
        // look for sleepers.
        if pool.queued.load(Ordering::SeqCst) > 0 {
            pool.sleeping.fetch_sub(1, Ordering::SeqCst);
            *sleepers -= 1;
            continue;
        }
        // A bounded sleep: a wake-up that races with going to sleep costs at most this.
        let (mut s, _) = pool
            .wake
            .wait_timeout(sleepers, Duration::from_millis(10))
            .unwrap_or_else(PoisonError::into_inner);
        *s -= 1;
        pool.sleeping.fetch_sub(1, Ordering::SeqCst);
    }
    LOCAL.with(|l| l.set(None));
}
