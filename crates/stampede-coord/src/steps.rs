//! Tag collections, step collections and what a running step sees.

use std::collections::HashSet;

use foldhash::fast::RandomState;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use stampede_core::Item;

use crate::error::StepError;
use crate::executor::Priority;
use crate::items::{Awaiting, ItemCollection, ItemsInner, Slot, Waiter};
use crate::tag::Tag;

pub(crate) type StepFn = dyn Fn(&mut StepCtx, &Tag) -> Result<(), StepError> + Send + Sync;
pub(crate) type DependsFn = dyn Fn(&Tag) -> Vec<(ItemCollection, Tag)> + Send + Sync;
pub(crate) type PriorityFn = dyn Fn(&Tag) -> Priority + Send + Sync;

pub(crate) struct StepsInner {
    pub(crate) name: Arc<str>,
    pub(crate) body: Box<StepFn>,
    /// Read for every instance, set rarely: a read lock, not a mutex.
    pub(crate) depends: RwLock<Option<Box<DependsFn>>>,
    pub(crate) priority: RwLock<Option<Box<PriorityFn>>>,
}

/// A step collection: one function of a tag, run once for every tag put into the tag
/// collections that prescribe it. Cheap to clone.
#[derive(Clone)]
pub struct StepCollection {
    pub(crate) inner: Arc<StepsInner>,
}

impl std::fmt::Debug for StepCollection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepCollection")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl StepCollection {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Dependency tuning: an instance for `tag` starts only once every item `inputs(tag)`
    /// lists has been put, so it never runs twice. Without it an instance whose get finds
    /// nothing is suspended and run again when the item arrives (its puts are kept only
    /// from the run that completes).
    pub fn depends(
        &self,
        inputs: impl Fn(&Tag) -> Vec<(ItemCollection, Tag)> + Send + Sync + 'static,
    ) -> &Self {
        *self
            .inner
            .depends
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(inputs));
        self
    }

    /// Back to the untuned mode: suspend on a missing item and run again.
    pub fn untuned(&self) -> &Self {
        *self
            .inner
            .depends
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self
    }

    /// How urgent each instance is: [`Priority::High`] for critical-path work.
    pub fn priority(&self, of: impl Fn(&Tag) -> Priority + Send + Sync + 'static) -> &Self {
        *self
            .inner
            .priority
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Box::new(of));
        self
    }

    pub(crate) fn priority_of(&self, tag: &Tag) -> Priority {
        self.inner
            .priority
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(Priority::Normal, |f| f(tag))
    }
}

pub(crate) struct TagsInner {
    pub(crate) name: Arc<str>,
    /// Replaced, not changed, when a step collection is added: a tag put clones the list
    /// cheaply.
    pub(crate) prescribes: Mutex<Arc<Vec<StepCollection>>>,
    /// Tags put so far: a tag collection is a set, and a tag prescribes its steps once.
    pub(crate) seen: Mutex<HashSet<Tag, RandomState>>,
    /// Whether to remember tags (see [`TagCollection::memoize`]).
    pub(crate) memoize: std::sync::atomic::AtomicBool,
}

/// A tag collection: putting a tag into it runs an instance of every step collection it
/// prescribes. Cheap to clone.
#[derive(Clone)]
pub struct TagCollection {
    pub(crate) inner: Arc<TagsInner>,
}

impl std::fmt::Debug for TagCollection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagCollection")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl TagCollection {
    pub(crate) fn new(name: &str) -> Self {
        TagCollection {
            inner: Arc::new(TagsInner {
                name: name.into(),
                prescribes: Mutex::new(Arc::new(Vec::new())),
                seen: Mutex::new(HashSet::default()),
                memoize: std::sync::atomic::AtomicBool::new(true),
            }),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Every tag put from now on also runs an instance of `steps`.
    pub fn prescribes(&self, steps: &StepCollection) -> &Self {
        let mut list = self
            .inner
            .prescribes
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut next = Vec::clone(&list);
        next.push(steps.clone());
        *list = Arc::new(next);
        drop(list);
        self
    }

    /// Whether the collection remembers its tags, so that a tag put again prescribes nothing
    /// (the default). A program whose tags are all distinct can turn it off: each put then
    /// prescribes, and the collection keeps no set of every tag.
    pub fn memoize(&self, on: bool) -> &Self {
        self.inner
            .memoize
            .store(on, std::sync::atomic::Ordering::Relaxed);
        self
    }

    /// How many distinct tags were put (while memoizing).
    pub fn len(&self) -> usize {
        self.inner
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no tag was put.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub(crate) struct PendingPut {
    pub(crate) items: Arc<ItemsInner>,
    pub(crate) tag: Tag,
    pub(crate) value: Item,
    pub(crate) gets: Option<u32>,
}

/// What a running step sees: gets answer now or suspend it; puts and tag puts take effect
/// when it completes, so a step run again after a missing item never puts twice.
pub struct StepCtx {
    /// The running instance, to wait for a missing item.
    pub(crate) waiter: Arc<dyn Awaiting>,
    pub(crate) tag: Tag,
    pub(crate) puts: Vec<PendingPut>,
    pub(crate) tag_puts: Vec<(TagCollection, Tag)>,
    pub(crate) gets: Vec<(Arc<ItemsInner>, Tag)>,
    /// A get of a freed item: the graph fails with it when the step ends.
    pub(crate) freed: Option<(Arc<ItemsInner>, Tag)>,
}

impl StepCtx {
    /// The item at `tag`, or [`StepError::Missing`] (return it with `?`): the step is then
    /// suspended and run again once the item is put.
    pub fn get(&mut self, items: &ItemCollection, tag: impl Into<Tag>) -> Result<Item, StepError> {
        let tag = tag.into();
        let mut slots = items.inner.slots();
        match slots.get_mut(&tag) {
            Some(Slot::Present { value, .. }) => {
                let v = value.clone();
                drop(slots);
                self.gets.push((items.inner.clone(), tag));
                Ok(v)
            }
            Some(Slot::Freed) => {
                drop(slots);
                self.freed = Some((items.inner.clone(), tag));
                Err(StepError::failed(
                    "an item freed after its last declared get",
                ))
            }
            Some(Slot::Waiting(w)) => {
                w.push(Waiter::Rerun(self.waiter.clone()));
                Err(StepError::Missing)
            }
            None => {
                slots.insert(tag, Slot::Waiting(vec![Waiter::Rerun(self.waiter.clone())]));
                Err(StepError::Missing)
            }
        }
    }

    /// Puts `value` at `tag` when the step completes.
    pub fn put(&mut self, items: &ItemCollection, tag: impl Into<Tag>, value: impl Into<Item>) {
        self.puts.push(PendingPut {
            items: items.inner.clone(),
            tag: tag.into(),
            value: value.into(),
            gets: None,
        });
    }

    /// Puts `value` at `tag`, to be freed after its `gets`-th get (by completed steps).
    pub fn put_counted(
        &mut self,
        items: &ItemCollection,
        tag: impl Into<Tag>,
        value: impl Into<Item>,
        gets: u32,
    ) {
        self.puts.push(PendingPut {
            items: items.inner.clone(),
            tag: tag.into(),
            value: value.into(),
            gets: Some(gets),
        });
    }

    /// Puts `tag` into `tags` when the step completes.
    pub fn put_tag(&mut self, tags: &TagCollection, tag: impl Into<Tag>) {
        self.tag_puts.push((tags.clone(), tag.into()));
    }

    /// The instance's tag.
    pub fn tag(&self) -> &Tag {
        &self.tag
    }
}
