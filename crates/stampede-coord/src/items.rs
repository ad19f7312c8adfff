//! Item collections: tag → value, each tag written once, with the step instances waiting for
//! tags not put yet.

use std::collections::HashMap;

use foldhash::fast::RandomState;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use stampede_core::Item;

use crate::error::Unmet;
use crate::executor::Pool;
use crate::tag::Tag;

/// A step instance waiting for an item, as the item collection sees it (the graph's
/// instances; a trait, so that items know nothing of steps).
pub(crate) trait Awaiting: Send + Sync {
    /// The item it waits for was put: run again (`input` false), or one input fewer to wait
    /// for under dependency tuning. `via` is the executor of the graph that put it.
    fn arrived(self: Arc<Self>, input: bool, via: &Pool);
    /// `(step collection, tag)`, for a deadlock report.
    fn label(&self) -> (String, Tag);
}

/// Who waits for an item.
pub(crate) enum Waiter {
    /// A suspended instance: run it again.
    Rerun(Arc<dyn Awaiting>),
    /// An instance held back by dependency tuning: one input fewer to wait for.
    Input(Arc<dyn Awaiting>),
}

pub(crate) enum Slot {
    /// Put, with how many more gets it will receive if declared.
    Present { value: Item, gets_left: Option<u32> },
    /// Freed after its last declared get.
    Freed,
    /// Not put yet; these wait for it.
    Waiting(Vec<Waiter>),
}

pub(crate) struct ItemsInner {
    pub(crate) name: Arc<str>,
    pub(crate) slots: Mutex<HashMap<Tag, Slot, RandomState>>,
    /// Placement tuning: the rank of an item's home (see `placement`).
    pub(crate) home: crate::placement::Tuner,
}

impl ItemsInner {
    pub(crate) fn slots(&self) -> MutexGuard<'_, HashMap<Tag, Slot, RandomState>> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The gets nothing has answered, for a deadlock report.
    pub(crate) fn unmet(&self) -> Vec<Unmet> {
        let mut out: Vec<Unmet> = self
            .slots()
            .iter()
            .filter_map(|(tag, slot)| match slot {
                Slot::Waiting(w) if !w.is_empty() => Some(Unmet {
                    collection: self.name.to_string(),
                    tag: tag.clone(),
                    waiting: w
                        .iter()
                        .map(|w| {
                            let (Waiter::Rerun(i) | Waiter::Input(i)) = w;
                            i.label()
                        })
                        .collect(),
                }),
                _ => None,
            })
            .collect();
        out.sort_by(|a, b| a.tag.cmp(&b.tag));
        out
    }
}

/// A collection of items keyed by tag, each tag put once. Cheap to clone: clones are the same
/// collection (steps capture clones).
#[derive(Clone)]
pub struct ItemCollection {
    pub(crate) inner: Arc<ItemsInner>,
}

impl std::fmt::Debug for ItemCollection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ItemCollection")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl ItemCollection {
    pub(crate) fn new(name: &str) -> Self {
        ItemCollection {
            inner: Arc::new(ItemsInner {
                name: name.into(),
                slots: Mutex::new(HashMap::default()),
                home: Default::default(),
            }),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// How many items it holds now (put and not freed).
    pub fn len(&self) -> usize {
        self.inner
            .slots()
            .values()
            .filter(|s| matches!(s, Slot::Present { .. }))
            .count()
    }

    /// Whether it holds no item now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
