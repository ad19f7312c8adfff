//! Tags: the keys of item collections and the identities of step instances.

use std::fmt;
use std::sync::Arc;

/// One part of a tag.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TagPart {
    /// An integer.
    Int(i64),
    /// A string.
    Str(Arc<str>),
}

/// A tag: a tuple of integers and strings, such as `(k, j, i)` for a Cholesky tile.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Tag(Arc<[TagPart]>);

impl Tag {
    /// A tag of these parts.
    pub fn new(parts: impl IntoIterator<Item = TagPart>) -> Self {
        Tag(parts.into_iter().collect())
    }

    /// A tag of integers.
    pub fn ints(parts: &[i64]) -> Self {
        Tag::new(parts.iter().map(|&i| TagPart::Int(i)))
    }

    /// The parts.
    pub fn parts(&self) -> &[TagPart] {
        &self.0
    }

    /// Part `i` as an integer.
    ///
    /// # Panics
    /// If the tag has no part `i` or it is a string: a step asked its tag for what its tag
    /// collection never holds.
    pub fn int(&self, i: usize) -> i64 {
        match self.0.get(i) {
            Some(TagPart::Int(v)) => *v,
            other => panic!("tag {self}: part {i} is {other:?}, not an integer"),
        }
    }

    /// Part `i` as a string.
    ///
    /// # Panics
    /// If the tag has no part `i` or it is an integer.
    pub fn str(&self, i: usize) -> &str {
        match self.0.get(i) {
            Some(TagPart::Str(s)) => s,
            other => panic!("tag {self}: part {i} is {other:?}, not a string"),
        }
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, p) in self.0.iter().enumerate() {
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
