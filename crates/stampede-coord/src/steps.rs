//! Tag collections, step collections and what a running step sees.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use foldhash::fast::RandomState;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use stampede_core::Item;

use crate::error::StepError;
use crate::executor::Priority;
use crate::graph::Sched;
use crate::items::{ItemCollection, ItemsInner, Slot};
use crate::tag::{Tag, TagPart};

pub(crate) type StepFn = dyn Fn(&mut StepCtx, &Tag) -> Result<(), StepError> + Send + Sync;
pub(crate) type DependsFn = dyn Fn(&Tag) -> Vec<(ItemCollection, Tag)> + Send + Sync;
pub(crate) type PriorityFn = dyn Fn(&Tag) -> Priority + Send + Sync;

/// Aligned so that its reference count, changed for every instance, shares no cache line
/// with what every instance reads.
#[repr(align(128))]
pub(crate) struct StepsInner {
    pub(crate) name: Arc<str>,
    pub(crate) body: Box<StepFn>,
    /// The graph's scheduling state.
    pub(crate) sched: Arc<Sched>,
    /// Whether `depends` is set: read for every instance, so that an untuned collection
    /// takes no lock.
    pub(crate) tuned: AtomicBool,
    pub(crate) depends: RwLock<Option<Box<DependsFn>>>,
    /// Whether `priority` is set, likewise.
    pub(crate) prioritized: AtomicBool,
    pub(crate) priority: RwLock<Option<Box<PriorityFn>>>,
    /// Placement tuning: the rank that runs an instance (see `placement`).
    pub(crate) compute_on: crate::placement::Tuner,
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
        self.inner.tuned.store(true, Ordering::Release);
        self
    }

    /// Back to the untuned mode: suspend on a missing item and run again.
    pub fn untuned(&self) -> &Self {
        self.inner.tuned.store(false, Ordering::Release);
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
        self.inner.prioritized.store(true, Ordering::Release);
        self
    }

    pub(crate) fn priority_of(&self, tag: &Tag) -> Priority {
        if !self.inner.prioritized.load(Ordering::Acquire) {
            return Priority::Normal;
        }
        self.inner
            .priority
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map_or(Priority::Normal, |f| f(tag))
    }

    /// The inputs an instance for `tag` waits for, under dependency tuning.
    pub(crate) fn inputs_of(&self, tag: &Tag) -> Option<Vec<(ItemCollection, Tag)>> {
        if !self.inner.tuned.load(Ordering::Acquire) {
            return None;
        }
        self.inner
            .depends
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|f| f(tag))
    }
}

pub(crate) struct TagsInner {
    pub(crate) name: Arc<str>,
    /// One lock for what a tag put reads: whether the tag is new, and what it prescribes.
    state: Mutex<TagsState>,
    /// Whether to remember tags (see [`TagCollection::memoize`]).
    memoize: AtomicBool,
}

struct TagsState {
    /// Replaced, not changed, when a step collection is added: a tag put prescribing
    /// several clones the list cheaply.
    prescribes: Arc<Vec<StepCollection>>,
    /// Tags put so far: a tag collection is a set, and a tag prescribes its steps once.
    seen: Seen,
}

/// A set of tags. A tag of one to three integers (nearly every tag) is kept as a bit: of a
/// 64-bit word for its last integer's block of 64 values, keyed by its other integers and
/// that block. Tags put in runs of the last integer (loop indices) then share words, and a
/// put of a new tag, which touches one entry of a table of all the words, finds it in cache
/// nearly always, where a table of whole tags (56 bytes an entry) missed nearly always; tags
/// with nothing in common cost a word each (16 to 32 bytes with its key).
#[derive(Default)]
struct Seen {
    one: HashMap<i64, u64, RandomState>,
    two: HashMap<[i64; 2], u64, RandomState>,
    three: HashMap<[i64; 3], u64, RandomState>,
    /// How many tags the words hold.
    ints: usize,
    other: HashSet<Tag, RandomState>,
}

impl Seen {
    /// Adds `tag`; false if it was there.
    fn insert(&mut self, tag: &Tag) -> bool {
        use TagPart::Int;
        let new = match *tag.parts() {
            [Int(a)] => mark(&mut self.one, a >> 6, a),
            [Int(a), Int(b)] => mark(&mut self.two, [a, b >> 6], b),
            [Int(a), Int(b), Int(c)] => mark(&mut self.three, [a, b, c >> 6], c),
            _ => return self.other.insert(tag.clone()),
        };
        self.ints += usize::from(new);
        new
    }

    fn len(&self) -> usize {
        self.ints + self.other.len()
    }
}

/// Sets the bit of `last` in the word at `key`; false if it was set.
fn mark<K: Hash + Eq>(words: &mut HashMap<K, u64, RandomState>, key: K, last: i64) -> bool {
    let bit = 1 << (last & 63);
    let word = words.entry(key).or_insert(0);
    let new = *word & bit == 0;
    *word |= bit;
    new
}

/// What a tag put runs an instance of.
pub(crate) enum Prescribed {
    /// Nothing: the tag was put before, or the collection prescribes nothing.
    Nothing,
    One(StepCollection),
    Many(Arc<Vec<StepCollection>>),
}

impl TagsInner {
    fn state(&self) -> MutexGuard<'_, TagsState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the collection is a set of tags (see [`TagCollection::memoize`]).
    #[cfg(feature = "net")]
    pub(crate) fn memoizes(&self) -> bool {
        self.memoize.load(Ordering::Relaxed)
    }

    /// A put of `tag`: what to run an instance of.
    pub(crate) fn admit(&self, tag: &Tag) -> Prescribed {
        let memoize = self.memoize.load(Ordering::Relaxed);
        let mut st = self.state();
        if memoize && !st.seen.insert(tag) {
            return Prescribed::Nothing;
        }
        match st.prescribes.as_slice() {
            [] => Prescribed::Nothing,
            [one] => Prescribed::One(one.clone()),
            _ => Prescribed::Many(st.prescribes.clone()),
        }
    }
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
                state: Mutex::new(TagsState {
                    prescribes: Arc::new(Vec::new()),
                    seen: Seen::default(),
                }),
                memoize: AtomicBool::new(true),
            }),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Every tag put from now on also runs an instance of `steps`.
    pub fn prescribes(&self, steps: &StepCollection) -> &Self {
        let mut st = self.inner.state();
        let mut next = Vec::clone(&st.prescribes);
        next.push(steps.clone());
        st.prescribes = Arc::new(next);
        drop(st);
        self
    }

    /// Whether the collection remembers its tags, so that a tag put again prescribes nothing
    /// (the default). A program whose tags are all distinct can turn it off: each put then
    /// prescribes, and the collection keeps no set of every tag.
    pub fn memoize(&self, on: bool) -> &Self {
        self.inner.memoize.store(on, Ordering::Relaxed);
        self
    }

    /// How many distinct tags were put (while memoizing).
    pub fn len(&self) -> usize {
        self.inner.state().seen.len()
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
    pub(crate) tag: Tag,
    pub(crate) puts: Vec<PendingPut>,
    pub(crate) tag_puts: Vec<(TagCollection, Tag)>,
    pub(crate) gets: Vec<(Arc<ItemsInner>, Tag)>,
    /// Gets that found nothing: the instance waits for these when it ends.
    pub(crate) missing: Vec<(Arc<ItemsInner>, Tag)>,
    /// A get of a freed item: the graph fails with it when the step ends.
    pub(crate) freed: Option<(Arc<ItemsInner>, Tag)>,
}

impl StepCtx {
    pub(crate) fn new(tag: Tag) -> Self {
        StepCtx {
            tag,
            puts: Vec::new(),
            tag_puts: Vec::new(),
            gets: Vec::new(),
            missing: Vec::new(),
            freed: None,
        }
    }

    /// The item at `tag`, or [`StepError::Missing`] (return it with `?`): the step is then
    /// suspended and run again once the item is put.
    pub fn get(&mut self, items: &ItemCollection, tag: impl Into<Tag>) -> Result<Item, StepError> {
        let tag = tag.into();
        let slots = items.inner.slots();
        match slots.get(&tag) {
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
            Some(Slot::Waiting(_)) | None => {
                drop(slots);
                self.missing.push((items.inner.clone(), tag));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_holds_each_tag_once_and_counts_them() {
        let mut seen = Seen::default();
        let mut reference = HashSet::new();
        let mut tags = Vec::new();
        for a in [
            -130i64,
            -65,
            -64,
            -63,
            -1,
            0,
            1,
            63,
            64,
            65,
            127,
            128,
            i64::MIN,
            i64::MAX,
        ] {
            tags.push(Tag::from(a));
            tags.push(Tag::from((a, a.wrapping_neg())));
            tags.push(Tag::from((a, 1)));
            tags.push(Tag::from((a, a, a)));
            tags.push(Tag::from((1, 2, a)));
        }
        tags.push(Tag::from("a"));
        tags.push(Tag::ints(&[1, 2, 3, 4]));
        tags.push(Tag::new([TagPart::Int(1), TagPart::Str("x".into())]));
        tags.push(Tag::default());
        for round in 0..2 {
            for t in &tags {
                let new = reference.insert(t.clone());
                assert_eq!(seen.insert(t), new, "{t} in round {round}");
                assert_eq!(seen.len(), reference.len());
            }
        }
    }
}
