//! A Concurrent Collections graph: its collections, the environment's puts and gets, the
//! scheduling of step instances on the executor, and quiescence.
//!
//! A step instance travels through the executor's queues as it is, behind an `Arc` only while
//! it waits for items, and it reaches what scheduling needs (the executor's queues, the count
//! of instances in flight, the first failure: [`Sched`]) through its step collection, so
//! scheduling and running one allocates nothing and counts no reference to the graph. The
//! workers are kept running while instances are in flight by the graph's handles, and once
//! the last handle is gone by [`Sched`]'s `keepalive` until the graph is quiet. Workers hold
//! back their finished instances' bookkeeping for a while (see [`Settle`]).

use std::borrow::Borrow;
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use stampede_core::Item;

use crate::error::{GraphError, StepError};
use crate::executor::{Executor, Job, Pool, TraceEvent};
use crate::items::{Awaiting, ItemCollection, ItemsInner, Slot, Waiter};
use crate::placement::Spread;
use crate::steps::{PendingPut, Prescribed, StepCollection, StepCtx, StepsInner, TagCollection};
use crate::tag::Tag;

/// One step instance: a step collection and a tag.
pub(crate) struct Instance {
    steps: StepCollection,
    tag: Tag,
    /// Inputs (plus one while they are being registered) not put yet, in dependency mode.
    inputs_left: AtomicUsize,
}

impl Instance {
    /// One input fewer to wait for; true when this was the last.
    fn input_arrived(&self) -> bool {
        self.inputs_left.fetch_sub(1, Ordering::AcqRel) == 1
    }

    fn sched(&self) -> &Sched {
        &self.steps.inner.sched
    }

    /// Runs it on this worker, queued as it is.
    pub(crate) fn run(self) {
        let sched = self.sched();
        Settle::enter(sched);
        let missing = sched.run(&self);
        if missing.is_empty() {
            Settle::finished(self.steps);
        } else {
            let shared = Arc::new(self);
            shared.sched().suspend(&shared, missing);
            Settle::finished_shared(shared);
        }
    }

    /// Runs it on this worker, shared with the items it waited for.
    pub(crate) fn run_shared(self: Arc<Self>) {
        let sched = self.sched();
        Settle::enter(sched);
        let missing = sched.run(&self);
        sched.suspend(&self, missing);
        Settle::finished_shared(self);
    }
}

impl Awaiting for Instance {
    fn arrived(self: Arc<Self>, input: bool, via: &Pool) {
        if input && !self.input_arrived() {
            return;
        }
        schedule(via, self, Job::Shared);
    }

    fn label(&self) -> (String, Tag) {
        (self.steps.name().to_owned(), self.tag.clone())
    }
}

/// How many step collections a worker holds back from releasing at most.
const RELEASE_BATCH: usize = 64;

/// What a worker holds back from its finished instances: the graph's count of instances in
/// flight and the step collections' reference counts are touched by whoever schedules an
/// instance too, so touching them once per instance moves their cache lines between the
/// scheduling thread and the worker every time. The worker keeps the decrements and releases
/// them together when it runs out of work, runs an instance of another graph or a job that
/// is not an instance, or has held back [`RELEASE_BATCH`] releases.
///
/// Holding back a finished instance's count only keeps its graph from looking quiet a little
/// longer: the count is never below the instances truly in flight. A worker scheduling an
/// instance of the graph whose finishes it holds back takes one of them instead of counting
/// the new one (the sum is the same).
#[derive(Default)]
struct Settle {
    sched: Option<Arc<Sched>>,
    /// Finished instances of `sched` not yet taken off its count.
    finished: usize,
    released: Vec<StepCollection>,
}

thread_local! {
    static SETTLE: RefCell<Settle> = const {
        RefCell::new(Settle {
            sched: None,
            finished: 0,
            released: Vec::new(),
        })
    };
}

impl Settle {
    /// This worker starts an instance of `sched`'s graph: what it holds back for another
    /// graph is due, as the instance may wait for that graph.
    fn enter(sched: &Sched) {
        let other = SETTLE.with(|s| {
            let mut s = s.borrow_mut();
            match &s.sched {
                Some(held) if !std::ptr::eq(&**held, sched) => Some(s.take()),
                _ => None,
            }
        });
        if let Some(other) = other {
            other.apply();
        }
    }

    /// An instance of `steps` finished on this worker; `steps` is its reference.
    fn finished(steps: StepCollection) {
        let due = SETTLE.with(|s| {
            let mut s = s.borrow_mut();
            let sched = &steps.inner.sched;
            let due = match &s.sched {
                Some(held) if Arc::ptr_eq(held, sched) => None,
                // Another graph's: not expected, as `enter` settled those.
                Some(_) => Some(s.take()),
                None => None,
            };
            if s.sched.is_none() {
                s.sched = Some(sched.clone());
            }
            s.finished += 1;
            s.released.push(steps);
            due.or_else(|| (s.released.len() >= RELEASE_BATCH).then(|| s.take_released()))
        });
        // Outside the borrow: releasing a step collection may drop what its body captured.
        if let Some(due) = due {
            due.apply();
        }
    }

    /// A shared instance finished on this worker; items may still refer to it.
    fn finished_shared(instance: Arc<Instance>) {
        match Arc::try_unwrap(instance) {
            Ok(instance) => Settle::finished(instance.steps),
            Err(shared) => {
                // Counted as finished now; released with its last reference.
                Settle::finished(shared.steps.clone());
            }
        }
    }

    /// Takes one held-back finish of `sched`, if this worker holds any.
    fn take_finish(sched: &Sched) -> bool {
        SETTLE.with(|s| {
            let mut s = s.borrow_mut();
            let held = s
                .sched
                .as_ref()
                .is_some_and(|held| std::ptr::eq(&**held, sched));
            if held && s.finished > 0 {
                s.finished -= 1;
                true
            } else {
                false
            }
        })
    }

    fn take(&mut self) -> Settle {
        std::mem::take(self)
    }

    fn take_released(&mut self) -> Settle {
        Settle {
            sched: None,
            finished: 0,
            released: std::mem::take(&mut self.released),
        }
    }

    fn apply(self) {
        let mut released = self.released;
        released.clear();
        if released.capacity() > 0 {
            // Back for the next batch, unless one was started meanwhile.
            SETTLE.with(|s| {
                let mut s = s.borrow_mut();
                if s.released.capacity() == 0 {
                    s.released = released;
                }
            });
        }
        if let Some(sched) = self.sched {
            if self.finished > 0 {
                sched.finished(self.finished);
            }
        }
    }
}

/// Applies what this worker held back from its finished instances (see [`Settle`]).
pub(crate) fn settle() {
    let held = SETTLE.with(|s| s.borrow_mut().take());
    held.apply();
}

/// What scheduling and running a graph's instances needs; every step collection of the graph
/// holds it.
///
/// Aligned so that its reference count, changed when a worker switches graphs, shares no
/// cache line with what every instance reads; `outstanding`, changed by every scheduling,
/// has a line of its own.
#[repr(align(128))]
pub(crate) struct Sched {
    pub(crate) pool: Arc<Pool>,
    /// Instances scheduled or running (or held back, see [`Settle`]): the graph is quiet
    /// when none is.
    pub(crate) outstanding: CacheLine<AtomicUsize>,
    /// Threads in [`Graph::wait`]: an instance that leaves the graph quiet takes the lock to
    /// wake them only when there are some.
    waiting: AtomicUsize,
    /// Whether every [`Graph`] handle is gone.
    orphaned: AtomicBool,
    /// The executor, held from when the last handle goes while instances are in flight until
    /// they are done, so that the workers run them.
    keepalive: Mutex<Option<Executor>>,
    /// The first failure; later ones are dropped.
    pub(crate) failure: Mutex<Option<GraphError>>,
    /// Whether `failure` is set (read by every step before it runs).
    has_failed: AtomicBool,
    quiet_lock: Mutex<()>,
    quiet: Condvar,
    /// The graph's distribution, once it has one (see `placement`).
    pub(crate) spread: OnceLock<Arc<dyn Spread>>,
}

pub(crate) struct GraphInner {
    exec: Executor,
    pub(crate) sched: Arc<Sched>,
    pub(crate) items: Mutex<Vec<ItemCollection>>,
    /// Step collections, by which other address spaces name them.
    pub(crate) steps: Mutex<Vec<StepCollection>>,
}

impl Drop for GraphInner {
    fn drop(&mut self) {
        let sched = &self.sched;
        sched.orphaned.store(true, Ordering::SeqCst);
        let _g = lock(&sched.quiet_lock);
        // Pairs with the orphan check in `finished`: either that instance sees the flag, or
        // this sees it done.
        if sched.outstanding.load(Ordering::SeqCst) > 0 {
            *lock(&sched.keepalive) = Some(self.exec.clone());
        }
    }
}

/// A value alone on its cache lines (two, as adjacent lines are fetched together).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct CacheLine<T>(T);

impl<T> std::ops::Deref for CacheLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A Concurrent Collections graph on an executor. Declare its collections, prescribe steps,
/// put the initial items and tags (the environment), then [`wait`](Graph::wait) for it to
/// finish and read the results. Cheap to clone.
#[derive(Clone)]
pub struct Graph {
    pub(crate) inner: Arc<GraphInner>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field(
                "outstanding",
                &self.inner.sched.outstanding.load(Ordering::Relaxed),
            )
            .finish()
    }
}

impl Graph {
    /// An empty graph whose steps run on `exec`.
    pub fn new(exec: Executor) -> Self {
        let sched = Arc::new(Sched {
            pool: exec.pool().clone(),
            outstanding: CacheLine::default(),
            waiting: AtomicUsize::new(0),
            orphaned: AtomicBool::new(false),
            keepalive: Mutex::new(None),
            failure: Mutex::new(None),
            has_failed: AtomicBool::new(false),
            quiet_lock: Mutex::new(()),
            quiet: Condvar::new(),
            spread: OnceLock::new(),
        });
        Graph {
            inner: Arc::new(GraphInner {
                exec,
                sched,
                items: Mutex::new(Vec::new()),
                steps: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The executor it runs on.
    pub fn executor(&self) -> &Executor {
        &self.inner.exec
    }

    /// A new item collection.
    pub fn items(&self, name: &str) -> ItemCollection {
        let c = ItemCollection::new(name);
        lock(&self.inner.items).push(c.clone());
        c
    }

    /// A new tag collection.
    pub fn tags(&self, name: &str) -> TagCollection {
        TagCollection::new(name)
    }

    /// A new step collection running `body` for each prescribed tag. The body gets its inputs
    /// with [`StepCtx::get`] (returning its [`StepError::Missing`] with `?`), and puts items
    /// and tags through the context.
    pub fn steps(
        &self,
        name: &str,
        body: impl Fn(&mut StepCtx, &Tag) -> Result<(), StepError> + Send + Sync + 'static,
    ) -> StepCollection {
        let steps = StepCollection {
            inner: Arc::new(StepsInner {
                name: name.into(),
                body: Box::new(body),
                sched: self.inner.sched.clone(),
                tuned: AtomicBool::new(false),
                depends: RwLock::new(None),
                prioritized: AtomicBool::new(false),
                priority: RwLock::new(None),
                compute_on: RwLock::new(None),
            }),
        };
        lock(&self.inner.steps).push(steps.clone());
        steps
    }

    /// The environment puts `value` at `tag`.
    pub fn put(&self, items: &ItemCollection, tag: impl Into<Tag>, value: impl Into<Item>) {
        let put = PendingPut {
            items: items.inner.clone(),
            tag: tag.into(),
            value: value.into(),
            gets: None,
        };
        self.inner.sched.store(put, "environment");
    }

    /// The environment puts `value` at `tag`, freed after `gets` gets.
    pub fn put_counted(
        &self,
        items: &ItemCollection,
        tag: impl Into<Tag>,
        value: impl Into<Item>,
        gets: u32,
    ) {
        let put = PendingPut {
            items: items.inner.clone(),
            tag: tag.into(),
            value: value.into(),
            gets: Some(gets),
        };
        self.inner.sched.store(put, "environment");
    }

    /// The environment puts `tag` into `tags`, running the steps it prescribes.
    pub fn put_tag(&self, tags: &TagCollection, tag: impl Into<Tag>) {
        prescribe(&self.inner.sched.pool, tags, tag.into());
    }

    /// The item at `tag` now, `None` if not put (or freed): for reading results. Does not
    /// count as a get.
    ///
    /// In a distributed graph an item whose home is another address space is fetched from
    /// there when it is not here, and a home that cannot be asked is an error
    /// ([`GraphError::SpaceLost`], [`GraphError::Network`]), never an absent item. A graph
    /// in one process never fails here.
    pub fn get(
        &self,
        items: &ItemCollection,
        tag: impl Into<Tag>,
    ) -> Result<Option<Item>, GraphError> {
        let tag = tag.into();
        match items.inner.slots().get(&tag) {
            Some(Slot::Present { value, .. }) => return Ok(Some(value.clone())),
            Some(Slot::Freed) => return Ok(None),
            _ => {}
        }
        match self.inner.sched.spread.get() {
            Some(spread) => spread.fetch(&items.inner, &tag),
            None => Ok(None),
        }
    }

    /// Waits until no step instance is scheduled or running. Fails with the first step that
    /// failed, a second put of an item, a get past an item's declared count, or, when
    /// instances still wait for items nobody put, [`GraphError::Deadlock`] listing them.
    ///
    /// In a distributed graph, the environment's `wait` returns once no address space has
    /// an instance scheduled or running and no message between them is on its way, and
    /// fails also when another space fails or is lost (see `Graph::distribute`).
    pub fn wait(&self) -> Result<(), GraphError> {
        if let Some(s) = self.inner.sched.spread.get() {
            return s.wait(&self.inner, None).map(|_| ());
        }
        let inner = &self.inner;
        inner.sched.wait_quiet(None);
        self.outcome()
    }

    /// [`wait`](Graph::wait) for at most `timeout`: `Ok(false)` when step instances are
    /// still scheduled or running then (the graph goes on; wait again).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool, GraphError> {
        if let Some(s) = self.inner.sched.spread.get() {
            return s.wait(&self.inner, Some(Instant::now() + timeout));
        }
        if !self.inner.sched.wait_quiet(Some(Instant::now() + timeout)) {
            return Ok(false);
        }
        self.outcome().map(|()| true)
    }

    /// Whether the graph, now running nothing, ended cleanly.
    fn outcome(&self) -> Result<(), GraphError> {
        let inner = &self.inner;
        if let Some(e) = lock(&inner.sched.failure).clone() {
            return Err(e);
        }
        let unmet: Vec<_> = lock(&inner.items)
            .iter()
            .flat_map(|c| c.inner.unmet())
            .collect();
        if unmet.is_empty() {
            Ok(())
        } else {
            Err(GraphError::Deadlock(unmet))
        }
    }

    /// The executor's trace so far (see [`Executor::set_tracing`]).
    pub fn take_trace(&self) -> Vec<TraceEvent> {
        self.inner.exec.take_trace()
    }
}

/// A tag put: an instance of every step collection the tag collection prescribes. `via` is
/// the executor of the graph putting it.
fn prescribe(via: &Pool, tags: &TagCollection, tag: Tag) {
    match tags.inner.admit(&tag) {
        Prescribed::Nothing => {}
        Prescribed::One(steps) => {
            if !placed(tags, &steps, &tag) {
                start(via, steps, tag);
            }
        }
        Prescribed::Many(list) => {
            for steps in list.iter() {
                if !placed(tags, steps, &tag) {
                    start(via, steps.clone(), tag.clone());
                }
            }
        }
    }
}

/// Whether a distributed graph ran the instance elsewhere (or here already).
fn placed(tags: &TagCollection, steps: &StepCollection, tag: &Tag) -> bool {
    match steps.inner.sched.spread.get() {
        Some(s) => s.place(tags, steps, tag),
        None => false,
    }
}

/// A new instance of `steps` for `tag`: scheduled now, or once its inputs are there.
pub(crate) fn start(via: &Pool, steps: StepCollection, tag: Tag) {
    let inputs = steps.inputs_of(&tag);
    let instance = Instance {
        steps,
        tag,
        inputs_left: AtomicUsize::new(1),
    };
    match inputs {
        None => schedule(via, instance, Job::Instance),
        Some(inputs) => await_inputs(via, Arc::new(instance), &inputs),
    }
}

/// Dependency tuning: schedules `instance` once every input is there.
fn await_inputs(via: &Pool, instance: Arc<Instance>, inputs: &[(ItemCollection, Tag)]) {
    instance
        .inputs_left
        .fetch_add(inputs.len(), Ordering::AcqRel);
    for (items, tag) in inputs {
        let mut slots = items.inner.slots();
        match slots
            .entry(tag.clone())
            .or_insert(Slot::Waiting(Vec::new()))
        {
            Slot::Waiting(w) => w.push(Waiter::Input(instance.clone())),
            // Present, or freed (the step's get then reports it).
            _ => {
                drop(slots);
                instance.input_arrived();
            }
        }
    }
    if let Some(s) = instance.sched().spread.get() {
        for (items, tag) in inputs {
            s.wanted(&items.inner, tag);
        }
    }
    // The registration's own count.
    if instance.input_arrived() {
        schedule(via, instance, Job::Shared);
    }
}

/// Queues `instance` (an [`Instance`] or an `Arc` of one, made a job by `job`) on its
/// graph's executor; `via` is the executor of the graph that scheduled it, the same but for
/// a tag collection prescribing another graph's steps.
fn schedule<I: Borrow<Instance>>(via: &Pool, instance: I, job: fn(I) -> Job) {
    let it = instance.borrow();
    let sched = it.sched();
    if !Settle::take_finish(sched) {
        sched.outstanding.fetch_add(1, Ordering::SeqCst);
    }
    let priority = it.steps.priority_of(&it.tag);
    if std::ptr::eq(&*sched.pool, via) {
        via.submit(priority, job(instance));
    } else {
        let pool = sched.pool.clone();
        pool.submit(priority, job(instance));
    }
}

impl Sched {
    pub(crate) fn fail(&self, e: GraphError) {
        let mut f = lock(&self.failure);
        if f.is_none() {
            let spread = self.spread.get().map(|s| (s, e.clone()));
            *f = Some(e);
            self.has_failed.store(true, Ordering::SeqCst);
            drop(f);
            if let Some((s, e)) = spread {
                s.failed(&e);
            }
        }
    }

    fn failed(&self) -> bool {
        self.has_failed.load(Ordering::SeqCst)
    }

    /// Waits until no instance is scheduled or running, or until `deadline`; true when quiet.
    pub(crate) fn wait_quiet(&self, deadline: Option<Instant>) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut g = lock(&self.quiet_lock);
        let mut quiet = true;
        while self.outstanding.load(Ordering::SeqCst) > 0 {
            g = match deadline {
                None => self.quiet.wait(g).unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        quiet = false;
                        break;
                    }
                    self.quiet
                        .wait_timeout(g, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
        drop(g);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        quiet
    }

    /// `n` instances are done.
    fn finished(&self, n: usize) {
        if self.outstanding.fetch_sub(n, Ordering::SeqCst) != n {
            return;
        }
        // Both pair with the increment and then the load of a waiter or a dropped graph:
        // either that sees the graph quiet, or this sees it.
        if self.waiting.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.quiet_lock);
            self.quiet.notify_all();
        }
        if let Some(s) = self.spread.get() {
            s.quiet(self);
        }
        if self.orphaned.load(Ordering::SeqCst) {
            let exec = {
                let _g = lock(&self.quiet_lock);
                if self.outstanding.load(Ordering::SeqCst) > 0 {
                    return;
                }
                lock(&self.keepalive).take()
            };
            // Possibly the last handle: the workers stop (this one once this job returns).
            drop(exec);
        }
    }

    /// Stores a put (a distributed graph sends it to its home) and wakes what waits for it.
    fn store(&self, put: PendingPut, by: &str) {
        match self.spread.get() {
            Some(s) => s.put(self, put, by),
            None => {
                self.store_here(put, by);
            }
        }
    }

    /// Stores a put in this address space and wakes what waits for it; false for a second
    /// put of the tag (the graph fails).
    pub(crate) fn store_here(&self, put: PendingPut, by: &str) -> bool {
        let waiters = {
            let mut slots = put.items.slots();
            let slot = slots
                .entry(put.tag.clone())
                .or_insert(Slot::Waiting(Vec::new()));
            if !matches!(slot, Slot::Waiting(_)) {
                drop(slots);
                self.fail(GraphError::DuplicatePut {
                    collection: put.items.name.to_string(),
                    tag: put.tag,
                    by: by.to_owned(),
                });
                return false;
            }
            let Slot::Waiting(w) = std::mem::replace(
                slot,
                Slot::Present {
                    value: put.value,
                    gets_left: put.gets,
                },
            ) else {
                unreachable!("checked above")
            };
            w
        };
        for w in waiters {
            match w {
                Waiter::Rerun(i) => i.arrived(false, &self.pool),
                Waiter::Input(i) => i.arrived(true, &self.pool),
            }
        }
        true
    }

    /// Runs one instance and applies what it did; returns the gets that found nothing, for
    /// the instance to wait for.
    fn run(&self, instance: &Instance) -> Vec<(Arc<ItemsInner>, Tag)> {
        if self.failed() {
            return Vec::new();
        }
        let steps: &StepsInner = &instance.steps.inner;
        let tag = &instance.tag;
        let mut ctx = StepCtx::new(tag.clone());
        let start = self.pool.tracing().then(Instant::now);
        let outcome = catch_unwind(AssertUnwindSafe(|| (steps.body)(&mut ctx, tag)));
        if let Some(start) = start {
            self.pool.record(&steps.name, || tag.to_string(), start);
        }
        let StepCtx {
            puts,
            tag_puts,
            gets,
            missing,
            freed,
            ..
        } = ctx;
        if let Some((items, t)) = freed {
            self.fail(GraphError::Freed {
                collection: items.name.to_string(),
                tag: t,
                step: steps.name.to_string(),
            });
            return missing;
        }
        let failed = |message: String| GraphError::StepFailed {
            step: steps.name.to_string(),
            tag: tag.clone(),
            message,
        };
        match outcome {
            // Suspended: waits for its missing items (see `suspend`).
            Ok(Err(StepError::Missing)) => {}
            Ok(Err(StepError::Failed(m))) => self.fail(failed(m)),
            Err(panic) => {
                let m = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                self.fail(failed(format!("panicked: {m}")));
            }
            Ok(Ok(())) => {
                self.count_gets(gets, &steps.name);
                for put in puts {
                    self.store(put, &steps.name);
                }
                for (tags, tag) in tag_puts {
                    prescribe(&self.pool, &tags, tag);
                }
            }
        }
        missing
    }

    /// `instance` found these items missing: it runs again once each is there, or now for
    /// one that arrived while it ran.
    fn suspend(&self, instance: &Arc<Instance>, missing: Vec<(Arc<ItemsInner>, Tag)>) {
        for (items, tag) in missing {
            // A distributed graph asks the home of an item that is not here.
            let wanted = self.spread.get().map(|s| (s, tag.clone()));
            let mut slots = items.slots();
            match slots.entry(tag).or_insert(Slot::Waiting(Vec::new())) {
                Slot::Waiting(w) => w.push(Waiter::Rerun(instance.clone())),
                _ => {
                    drop(slots);
                    schedule(&self.pool, instance.clone(), Job::Shared);
                    continue;
                }
            }
            drop(slots);
            if let Some((s, tag)) = wanted {
                s.wanted(&items, &tag);
            }
        }
    }

    /// A completed step's gets count towards freeing their items.
    fn count_gets(&self, gets: Vec<(Arc<ItemsInner>, Tag)>, step: &str) {
        // A distributed graph reports gets of copies to their homes once they counted here:
        // the home's answer may free a copy at once.
        let report = self.spread.get().map(|s| (s, gets.clone()));
        for (items, tag) in gets {
            let mut slots = items.slots();
            let freed = match slots.get_mut(&tag) {
                Some(Slot::Present {
                    gets_left: Some(n), ..
                }) => {
                    *n = n.saturating_sub(1);
                    *n == 0
                }
                Some(Slot::Freed) => {
                    drop(slots);
                    self.fail(GraphError::Freed {
                        collection: items.name.to_string(),
                        tag,
                        step: step.to_owned(),
                    });
                    continue;
                }
                _ => false,
            };
            if freed {
                match self.spread.get() {
                    None => {
                        slots.insert(tag, Slot::Freed);
                    }
                    Some(s) => {
                        slots.insert(tag.clone(), Slot::Freed);
                        drop(slots);
                        s.freed(&items, &tag);
                    }
                }
            }
        }
        if let Some((s, gets)) = report {
            s.committed(&gets, step);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Runs `f` on a thread of its own and fails if it does not end in time: a wait that
    /// never sees its graph quiet blocks for ever.
    fn within(f: impl FnOnce() + Send + 'static) {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            f();
            tx.send(()).unwrap();
        });
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a wait did not end");
    }

    /// Workers hold back their finished instances until they run out of work; the workers
    /// never nap, so only that keeps a wait from blocking for ever.
    #[test]
    fn a_wait_ends_once_the_last_instance_ends() {
        within(|| {
            let g = Graph::new(Executor::with_nap(2, None));
            let t = g.tags("t");
            let s = g.steps("s", |_, _| Ok(()));
            t.prescribes(&s);
            for round in 0..3000 {
                for i in 0..round % 4 {
                    g.put_tag(&t, (round, i));
                }
                g.wait().unwrap();
            }
        });
    }

    /// The only worker runs an instance of `a`, holding back its finish, then a step of `b`
    /// that waits for `a`.
    #[test]
    fn a_step_may_wait_for_a_graph_whose_instance_its_worker_just_ran() {
        within(|| {
            let exec = Executor::with_nap(1, None);
            let (first, a, b) = (
                Graph::new(exec.clone()),
                Graph::new(exec.clone()),
                Graph::new(exec),
            );
            let gate = Arc::new(Mutex::new(()));
            let held = lock(&gate);
            let started = Arc::new(AtomicBool::new(false));
            let (g, st) = (gate.clone(), started.clone());
            // Holds the worker until both instances are queued, so that it runs them in a row.
            let hold = first.steps("hold", move |_, _| {
                st.store(true, Ordering::SeqCst);
                drop(lock(&g));
                Ok(())
            });
            let empty = a.steps("empty", |_, _| Ok(()));
            let a2 = a.clone();
            let waits = b.steps("waits", move |_, _| {
                a2.wait().map_err(|e| StepError::failed(e.to_string()))
            });
            let (t0, t1, t2) = (first.tags("t"), a.tags("t"), b.tags("t"));
            t0.prescribes(&hold);
            t1.prescribes(&empty);
            t2.prescribes(&waits);
            first.put_tag(&t0, 0);
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            a.put_tag(&t1, 0);
            b.put_tag(&t2, 0);
            drop(held);
            b.wait().unwrap();
            first.wait().unwrap();
        });
    }
}
