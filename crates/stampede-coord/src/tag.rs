//! Tags: the keys of item collections and the identities of step instances.
//!
//! A tag of up to [`INLINE`] parts (every tag of the usual kinds: an index, a tile's
//! `(k, j, i)`) is held in place, so that making, cloning and dropping one allocates
//! nothing and touches no shared reference count; a longer one shares its parts.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// One part of a tag.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TagPart {
    /// An integer.
    Int(i64),
    /// A string.
    Str(Arc<str>),
}

/// The most parts a tag holds in place.
const INLINE: usize = 3;

#[derive(Clone)]
enum Repr {
    /// `parts[..len]`; the rest are `Int(0)`.
    Inline { len: u8, parts: [TagPart; INLINE] },
    /// More than [`INLINE`] parts.
    Shared(Arc<[TagPart]>),
}

/// A tag: a tuple of integers and strings, such as `(k, j, i)` for a Cholesky tile.
///
/// Tags compare, order and hash by their parts.
#[derive(Clone)]
pub struct Tag(Repr);

impl Default for Tag {
    fn default() -> Self {
        Tag::inline(0, [TagPart::Int(0), TagPart::Int(0), TagPart::Int(0)])
    }
}

impl Tag {
    fn inline(len: usize, parts: [TagPart; INLINE]) -> Self {
        debug_assert!(len <= INLINE);
        Tag(Repr::Inline {
            len: len as u8,
            parts,
        })
    }

    /// A tag of these parts.
    pub fn new(parts: impl IntoIterator<Item = TagPart>) -> Self {
        let mut it = parts.into_iter();
        let mut inline = [TagPart::Int(0), TagPart::Int(0), TagPart::Int(0)];
        for (len, slot) in inline.iter_mut().enumerate() {
            match it.next() {
                Some(p) => *slot = p,
                None => return Tag::inline(len, inline),
            }
        }
        match it.next() {
            None => Tag::inline(INLINE, inline),
            Some(p) => Tag(Repr::Shared(
                inline.into_iter().chain([p]).chain(it).collect(),
            )),
        }
    }

    /// A tag of integers.
    pub fn ints(parts: &[i64]) -> Self {
        match *parts {
            [] => Tag::default(),
            [a] => Tag::inline(1, [TagPart::Int(a), TagPart::Int(0), TagPart::Int(0)]),
            [a, b] => Tag::inline(2, [TagPart::Int(a), TagPart::Int(b), TagPart::Int(0)]),
            [a, b, c] => Tag::inline(3, [TagPart::Int(a), TagPart::Int(b), TagPart::Int(c)]),
            _ => Tag(Repr::Shared(
                parts.iter().map(|&i| TagPart::Int(i)).collect(),
            )),
        }
    }

    /// The parts.
    pub fn parts(&self) -> &[TagPart] {
        match &self.0 {
            Repr::Inline { len, parts } => &parts[..usize::from(*len)],
            Repr::Shared(parts) => parts,
        }
    }
    /// Part `i` as an integer.
    ///
    /// # Panics
    /// If the tag has no part `i` or it is a string: a step asked its tag for what its tag
    /// collection never holds.
    pub fn int(&self, i: usize) -> i64 {
        match self.parts().get(i) {
            Some(TagPart::Int(v)) => *v,
            other => panic!("tag {self}: part {i} is {other:?}, not an integer"),
        }
    }

    /// Part `i` as a string.
    ///
    /// # Panics
    /// If the tag has no part `i` or it is an integer.
    pub fn str(&self, i: usize) -> &str {
        match self.parts().get(i) {
            Some(TagPart::Str(s)) => s,
            other => panic!("tag {self}: part {i} is {other:?}, not a string"),
        }
    }
}

impl PartialEq for Tag {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for Tag {}

impl Hash for Tag {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialOrd for Tag {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Tag {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(other.parts())
    }
}

impl fmt::Debug for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Tag").field(&self.parts()).finish()
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, p) in self.parts().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match p {
                TagPart::Int(v) => write!(f, "{v}")?,
                TagPart::Str(s) => write!(f, "{s:?}")?,
            }
        }
        f.write_str(")")
    }
}

impl From<i64> for Tag {
    fn from(v: i64) -> Self {
        Tag::ints(&[v])
    }
}

impl From<(i64, i64)> for Tag {
    fn from((a, b): (i64, i64)) -> Self {
        Tag::ints(&[a, b])
    }
}

impl From<(i64, i64, i64)> for Tag {
    fn from((a, b, c): (i64, i64, i64)) -> Self {
        Tag::ints(&[a, b, c])
    }
}

impl From<&str> for Tag {
    fn from(s: &str) -> Self {
        Tag::new([TagPart::Str(s.into())])
    }
}

impl From<&[i64]> for Tag {
    fn from(v: &[i64]) -> Self {
        Tag::ints(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn short_and_long_tags_behave_alike() {
        for n in 0..7 {
            let ints: Vec<i64> = (0..n).collect();
            let a = Tag::ints(&ints);
            let b = Tag::new(ints.iter().map(|&i| TagPart::Int(i)));
            assert_eq!(a, b);
            assert_eq!(a.parts().len(), n as usize);
            assert_eq!(a.to_string(), b.clone().to_string());
            let hash = |t: &[TagPart]| foldhash::fast::FixedState::with_seed(7).hash_one(t);
            let parts: Vec<TagPart> = ints.iter().map(|&i| TagPart::Int(i)).collect();
            let hash_tag = |t: &Tag| foldhash::fast::FixedState::with_seed(7).hash_one(t);
            assert_eq!(hash_tag(&a), hash(&parts));
            assert_eq!(hash_tag(&b), hash(&parts));
        }
        let mixed = Tag::new([TagPart::Str("a".into()), TagPart::Int(1)]);
        assert_eq!(mixed.str(0), "a");
        assert_eq!(mixed.int(1), 1);
        assert!(Tag::ints(&[1, 2]) < Tag::ints(&[1, 2, 0]));
        assert!(Tag::ints(&[1, 2, 3, 4]) < Tag::ints(&[1, 3]));
        assert_eq!(format!("{:?}", Tag::from(5)), "Tag([Int(5)])");
        assert_eq!(Tag::default().parts(), &[]);
    }
}
