//! Placement tuning: where a step instance runs and where an item lives, in a graph spread
//! over several address spaces (`Graph::distribute`, with the `net` feature).
//!
//! The tuners are functions of a tag that give a *rank*, an index into the graph's address
//! spaces. They are read only once a graph is distributed; a local graph never calls them.
//! The graph reaches its distribution through the [`Spread`] hooks, set once: a graph
//! without it pays one atomic load at each hook and nothing else.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use stampede_core::Item;

use crate::error::GraphError;
use crate::graph::{GraphInner, Sched};
use crate::items::{ItemCollection, ItemsInner};
use crate::steps::{PendingPut, StepCollection, TagCollection};
use crate::tag::Tag;

/// A placement tuner: a tag's rank.
pub(crate) type RankFn = dyn Fn(&Tag) -> usize + Send + Sync;

/// A tuner slot, empty until set.
pub(crate) type Tuner = RwLock<Option<Box<RankFn>>>;

#[cfg(feature = "net")]
pub(crate) fn rank_of(tuner: &Tuner, tag: &Tag) -> Option<usize> {
    tuner
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(|f| f(tag))
}

fn set(tuner: &Tuner, f: Box<RankFn>) {
    *tuner.write().unwrap_or_else(PoisonError::into_inner) = Some(f);
}

impl StepCollection {
    /// Placement tuning: the rank of the address space that runs the instance for `tag`,
    /// once the graph is distributed (`Graph::distribute`). Without it an instance runs
    /// where its tag was put. A rank the graph does not have fails it with
    /// [`GraphError::NoSuchRank`].
    pub fn compute_on(&self, rank: impl Fn(&Tag) -> usize + Send + Sync + 'static) -> &Self {
        set(&self.inner.compute_on, Box::new(rank));
        self
    }
}

impl ItemCollection {
    /// Placement tuning: the rank of the address space that is the *home* of the item at
    /// `tag` once the graph is distributed: puts go there, gets elsewhere ask it, and its
    /// get-count is kept there. By default a hash of the tag picks the home; placing an
    /// item with the steps that get it saves a message per get.
    pub fn home(&self, rank: impl Fn(&Tag) -> usize + Send + Sync + 'static) -> &Self {
        set(&self.inner.home, Box::new(rank));
        self
    }
}

/// The default home of a tag among `ranks`: the same in every process (unlike the maps'
/// hasher, which is seeded per process).
#[cfg(feature = "net")]
pub(crate) fn hashed_home(tag: &Tag, ranks: usize) -> usize {
    use crate::tag::TagPart;
    // FNV-1a over the parts, each marked with its kind.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for p in tag.parts() {
        match p {
            TagPart::Int(v) => {
                eat(&[0]);
                eat(&v.to_le_bytes());
            }
            TagPart::Str(s) => {
                eat(&[1]);
                eat(s.as_bytes());
                eat(&[0xff]);
            }
        }
    }
    (h % ranks.max(1) as u64) as usize
}

/// What a distributed graph does at the graph's hooks. Set once per graph.
pub(crate) trait Spread: Send + Sync {
    /// A put (by a step, or the environment): stored here, sent to its home, or both.
    fn put(&self, sched: &Sched, put: PendingPut, by: &str);
    /// A tag prescribes `steps`: whether the instance was placed elsewhere (or ran here
    /// already), so that the graph does not start it here.
    fn place(&self, tags: &TagCollection, steps: &StepCollection, tag: &Tag) -> bool;
    /// An instance here waits for the item at `tag`: ask its home if that is elsewhere.
    fn wanted(&self, items: &Arc<ItemsInner>, tag: &Tag);
    /// `step` completed with these gets, before they count here.
    fn committed(&self, gets: &[(Arc<ItemsInner>, Tag)], step: &str);
    /// The item at `tag` was freed here after its last declared get.
    fn freed(&self, items: &ItemsInner, tag: &Tag);
    /// The graph's first failure here.
    fn failed(&self, e: &GraphError);
    /// No instance is scheduled or running here now.
    fn quiet(&self, sched: &Sched);
    /// Waits until the graph is quiet in every address space, or `deadline`: `Ok(false)`
    /// then.
    fn wait(&self, g: &Arc<GraphInner>, deadline: Option<Instant>) -> Result<bool, GraphError>;
    /// The item at `tag` from its home, when that is elsewhere (`None` when it is here, or
    /// was not put there, or was freed); an error when the home could not be asked.
    fn fetch(&self, items: &ItemsInner, tag: &Tag) -> Result<Option<Item>, GraphError>;
    /// The distribution itself, for its own methods on `Graph`.
    #[cfg(feature = "net")]
    fn as_any(&self) -> &dyn std::any::Any;
}

#[cfg(all(test, feature = "net"))]
mod tests {
    use super::*;
    use crate::tag::TagPart;

    #[test]
    fn hashed_homes_are_fixed_and_spread() {
        // The same in every process: pinned values.
        assert_eq!(hashed_home(&Tag::from(0), 1), 0);
        assert_eq!(hashed_home(&Tag::from(7), 1000), 736);
        assert_eq!(hashed_home(&Tag::from((1, 2, 3)), 1000), 651);
        assert_eq!(hashed_home(&Tag::from("x"), 1000), 873);
        let homes: Vec<usize> = (0..1000).map(|i| hashed_home(&Tag::from(i), 4)).collect();
        for r in 0..4 {
            let n = homes.iter().filter(|&&h| h == r).count();
            assert!((150..350).contains(&n), "rank {r} is home to {n} of 1000");
        }
        assert_ne!(
            hashed_home(&Tag::from("ab"), 1 << 20),
            hashed_home(
                &Tag::new([TagPart::Str("a".into()), TagPart::Str("b".into())]),
                1 << 20
            )
        );
    }
}
