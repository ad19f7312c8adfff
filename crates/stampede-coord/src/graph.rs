//! A Concurrent Collections graph: its collections, the environment's puts and gets, the
//! scheduling of step instances on the executor, and quiescence.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::{Duration, Instant};

use stampede_core::Item;

use crate::error::{GraphError, StepError};
use crate::executor::{Executor, TraceEvent};
use crate::items::{Awaiting, ItemCollection, Slot, Waiter};
use crate::steps::{PendingPut, StepCollection, StepCtx, StepsInner, TagCollection};
use crate::tag::Tag;

/// One step instance: a step collection and a tag.
struct Instance {
    steps: StepCollection,
    tag: Tag,
    /// Inputs (plus one while they are being registered) not put yet, in dependency mode.
    inputs_left: AtomicUsize,
    graph: Weak<GraphInner>,
}

impl Instance {
    /// One input fewer to wait for; true when this was the last.
    fn input_arrived(&self) -> bool {
        self.inputs_left.fetch_sub(1, Ordering::AcqRel) == 1
    }
}

impl Awaiting for Instance {
    fn arrived(self: Arc<Self>, input: bool) {
        if input && !self.input_arrived() {
            return;
        }
        if let Some(graph) = self.graph.upgrade() {
            graph.schedule(self);
        }
    }

    fn label(&self) -> (String, Tag) {
        (self.steps.name().to_owned(), self.tag.clone())
    }
}

pub(crate) struct GraphInner {
    exec: Executor,
    /// Instances scheduled or running: the graph is quiet when none is.
    outstanding: AtomicUsize,
    /// The first failure; later ones are dropped.
    failure: Mutex<Option<GraphError>>,
    /// Whether `failure` is set (read by every step before it runs).
    has_failed: AtomicBool,
    quiet_lock: Mutex<()>,
    quiet: Condvar,
    items: Mutex<Vec<ItemCollection>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A Concurrent Collections graph on an executor. Declare its collections, prescribe steps,
/// put the initial items and tags (the environment), then [`wait`](Graph::wait) for it to
/// finish and read the results. Cheap to clone.
#[derive(Clone)]
pub struct Graph {
    inner: Arc<GraphInner>,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field(
                "outstanding",
                &self.inner.outstanding.load(Ordering::Relaxed),
            )
            .finish()
    }
}

impl Graph {
    /// An empty graph whose steps run on `exec`.
    pub fn new(exec: Executor) -> Self {
        Graph {
            inner: Arc::new(GraphInner {
                exec,
                outstanding: AtomicUsize::new(0),
                failure: Mutex::new(None),
                has_failed: AtomicBool::new(false),
                quiet_lock: Mutex::new(()),
                quiet: Condvar::new(),
                items: Mutex::new(Vec::new()),
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
        StepCollection {
            inner: Arc::new(StepsInner {
                name: name.into(),
                body: Box::new(body),
                depends: RwLock::new(None),
                priority: RwLock::new(None),
            }),
        }
    }

    /// The environment puts `value` at `tag`.
    pub fn put(&self, items: &ItemCollection, tag: impl Into<Tag>, value: impl Into<Item>) {
        let put = PendingPut {
            items: items.inner.clone(),
            tag: tag.into(),
            value: value.into(),
            gets: None,
        };
        self.inner.store(put, "environment");
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
        self.inner.store(put, "environment");
    }

    /// The environment puts `tag` into `tags`, running the steps it prescribes.
    pub fn put_tag(&self, tags: &TagCollection, tag: impl Into<Tag>) {
        self.inner.prescribe(tags, tag.into());
    }

    /// The item at `tag` now, if put (and not freed): for reading results. Does not count as
    /// a get.
    pub fn get(&self, items: &ItemCollection, tag: impl Into<Tag>) -> Option<Item> {
        match items.inner.slots().get(&tag.into()) {
            Some(Slot::Present { value, .. }) => Some(value.clone()),
            _ => None,
        }
    }

    /// Waits until no step instance is scheduled or running. Fails with the first step that
    /// failed, a second put of an item, a get past an item's declared count, or, when
    /// instances still wait for items nobody put, [`GraphError::Deadlock`] listing them.
    pub fn wait(&self) -> Result<(), GraphError> {
        let inner = &self.inner;
        let mut g = lock(&inner.quiet_lock);
        while inner.outstanding.load(Ordering::SeqCst) > 0 {
            g = inner.quiet.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
        drop(g);
        self.outcome()
    }

    /// [`wait`](Graph::wait) for at most `timeout`: `Ok(false)` when step instances are
    /// still scheduled or running then (the graph goes on; wait again).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<bool, GraphError> {
        let inner = &self.inner;
        let deadline = Instant::now() + timeout;
        let mut g = lock(&inner.quiet_lock);
        while inner.outstanding.load(Ordering::SeqCst) > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            g = inner
                .quiet
                .wait_timeout(g, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        drop(g);
        self.outcome().map(|()| true)
    }

    /// Whether the graph now running nothing ended cleanly.
    fn outcome(&self) -> Result<(), GraphError> {
        let inner = &self.inner;
        if let Some(e) = lock(&inner.failure).clone() {
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

impl GraphInner {
    fn fail(&self, e: GraphError) {
        let mut f = lock(&self.failure);
        if f.is_none() {
            *f = Some(e);
            self.has_failed.store(true, Ordering::SeqCst);
        }
    }

    fn failed(&self) -> bool {
        self.has_failed.load(Ordering::SeqCst)
    }

    /// Stores a put and wakes what waits for it.
    fn store(self: &Arc<Self>, put: PendingPut, by: &str) {
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
                return;
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
                Waiter::Rerun(i) => i.arrived(false),
                Waiter::Input(i) => i.arrived(true),
            }
        }
    }

    /// A tag put: an instance of every step collection the tag collection prescribes.
    fn prescribe(self: &Arc<Self>, tags: &TagCollection, tag: Tag) {
        if tags.inner.memoize.load(Ordering::Relaxed) && !lock(&tags.inner.seen).insert(tag.clone())
        {
            return;
        }
        let steps = lock(&tags.inner.prescribes).clone();
        for s in steps.iter() {
            let instance = Arc::new(Instance {
                steps: s.clone(),
                tag: tag.clone(),
                inputs_left: AtomicUsize::new(1),
                graph: Arc::downgrade(self),
            });
            let inputs = s
                .inner
                .depends
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .as_ref()
                .map(|f| f(&tag));
            match inputs {
                None => self.schedule(instance),
                Some(inputs) => self.await_inputs(instance, &inputs),
            }
        }
    }

    /// Dependency tuning: schedules `instance` once every input is there.
    fn await_inputs(self: &Arc<Self>, instance: Arc<Instance>, inputs: &[(ItemCollection, Tag)]) {
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
        // The registration's own count.
        if instance.input_arrived() {
            self.schedule(instance);
        }
    }

    fn schedule(self: &Arc<Self>, instance: Arc<Instance>) {
        self.outstanding.fetch_add(1, Ordering::SeqCst);
        let graph = self.clone();
        let priority = instance.steps.priority_of(&instance.tag);
        self.exec.spawn(priority, move || {
            graph.run(instance);
            graph.finished();
        });
    }

    fn finished(&self) {
        if self.outstanding.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _g = lock(&self.quiet_lock);
            self.quiet.notify_all();
        }
    }

    /// Runs one instance and applies what it did.
    fn run(self: &Arc<Self>, instance: Arc<Instance>) {
        if self.failed() {
            return;
        }
        let steps = instance.steps.inner.clone();
        let mut ctx = StepCtx {
            waiter: instance.clone(),
            tag: instance.tag.clone(),
            puts: Vec::new(),
            tag_puts: Vec::new(),
            gets: Vec::new(),
            freed: None,
        };
        let start = self.exec.tracing().then(Instant::now);
        let tag = instance.tag.clone();
        let outcome = catch_unwind(AssertUnwindSafe(|| (steps.body)(&mut ctx, &tag)));
        if let Some(start) = start {
            self.exec.record(&steps.name, || tag.to_string(), start);
        }
        if let Some((items, t)) = ctx.freed.take() {
            self.fail(GraphError::Freed {
                collection: items.name.to_string(),
                tag: t,
                step: steps.name.to_string(),
            });
            return;
        }
        let failed = |message: String| GraphError::StepFailed {
            step: steps.name.to_string(),
            tag: tag.clone(),
            message,
        };
        match outcome {
            // Suspended: registered as a waiter by the get; runs again when the item arrives.
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
            Ok(Ok(())) => self.commit(ctx, &steps.name),
        }
    }

    /// A completed step's effects: its gets count, then its puts and tag puts happen.
    fn commit(self: &Arc<Self>, ctx: StepCtx, step: &str) {
        for (items, tag) in ctx.gets {
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
                slots.insert(tag, Slot::Freed);
            }
        }
        for put in ctx.puts {
            self.store(put, step);
        }
        for (tags, tag) in ctx.tag_puts {
            self.prescribe(&tags, tag);
        }
    }
}
