//! Record types: sets of labels, interned per program so that matching a record against a
//! pattern is a few bit operations.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::ast::{Label, LabelKind};

/// The most labels one program may name.
pub const MAX_LABELS: usize = 128;

/// A set of labels of one program: a record type, a pattern, or the labels a record carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSet(u128);

impl LabelSet {
    pub const EMPTY: LabelSet = LabelSet(0);

    pub fn with(self, id: LabelId) -> Self {
        LabelSet(self.0 | 1 << id.0)
    }

    pub fn contains(self, id: LabelId) -> bool {
        self.0 & (1 << id.0) != 0
    }

    pub fn union(self, other: LabelSet) -> Self {
        LabelSet(self.0 | other.0)
    }

    pub fn minus(self, other: LabelSet) -> Self {
        LabelSet(self.0 & !other.0)
    }

    pub fn intersect(self, other: LabelSet) -> Self {
        LabelSet(self.0 & other.0)
    }

    pub fn is_subset(self, other: LabelSet) -> bool {
        self.0 & !other.0 == 0
    }

    pub fn len(self) -> u32 {
        self.0.count_ones()
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = LabelId> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            if bits == 0 {
                return None;
            }
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            Some(LabelId(i as u8))
        })
    }
}

/// A label's index in its program's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelId(pub(crate) u8);

/// Every label a program names, each once.
#[derive(Clone, Debug, Default)]
pub struct LabelTable {
    names: Vec<(LabelKind, Arc<str>)>,
    index: HashMap<(LabelKind, Arc<str>), LabelId>,
    binding: LabelSet,
}

impl LabelTable {
    /// The label's id, adding it if new; `None` once the table is full.
    pub fn intern(&mut self, kind: LabelKind, name: &Arc<str>) -> Option<LabelId> {
        if let Some(id) = self.index.get(&(kind, name.clone())) {
            return Some(*id);
        }
        if self.names.len() == MAX_LABELS {
            return None;
        }
        let id = LabelId(self.names.len() as u8);
        self.names.push((kind, name.clone()));
        self.index.insert((kind, name.clone()), id);
        match kind {
            LabelKind::BindingTag => self.binding = self.binding.with(id),
            LabelKind::Tag | LabelKind::Field => {}
        }
        Some(id)
    }

    /// The id of a label by kind and name, if the program names it.
    pub fn id(&self, kind: LabelKind, name: &str) -> Option<LabelId> {
        self.names
            .iter()
            .position(|(k, n)| *k == kind && n.as_ref() == name)
            .map(|i| LabelId(i as u8))
    }

    pub fn label(&self, l: &Label) -> Option<LabelId> {
        self.index.get(&(l.kind, l.name.clone())).copied()
    }

    pub fn kind(&self, id: LabelId) -> LabelKind {
        self.names[id.0 as usize].0
    }

    pub fn name(&self, id: LabelId) -> &Arc<str> {
        &self.names[id.0 as usize].1
    }

    /// The binding tags among all labels.
    pub fn binding(&self) -> LabelSet {
        self.binding
    }

    /// Whether a record with labels `record` matches `pattern`: it has every label of the
    /// pattern, and every binding tag it carries is named by the pattern (binding tags are
    /// exempt from subtyping).
    pub fn matches(&self, pattern: LabelSet, record: LabelSet) -> bool {
        pattern.is_subset(record) && record.intersect(self.binding).is_subset(pattern)
    }

    /// `{a, <t>, <#b>}`, fields first, then tags, then binding tags, each in name order.
    pub fn show(&self, set: LabelSet) -> ShowSet<'_> {
        ShowSet {
            table: self,
            set,
            open: "{",
            close: "}",
        }
    }

    /// `{a} | {b, <t>}`.
    pub fn show_all(&self, sets: impl IntoIterator<Item = LabelSet>) -> String {
        let parts: Vec<String> = sets.into_iter().map(|s| self.show(s).to_string()).collect();
        if parts.is_empty() {
            "nothing".to_owned()
        } else {
            parts.join(" | ")
        }
    }

    /// The label's written form: `a`, `<t>` or `<#b>`.
    pub fn written(&self, id: LabelId) -> String {
        let (kind, name) = &self.names[id.0 as usize];
        match kind {
            LabelKind::Field => name.to_string(),
            LabelKind::Tag => format!("<{name}>"),
            LabelKind::BindingTag => format!("<#{name}>"),
        }
    }
}

pub struct ShowSet<'a> {
    table: &'a LabelTable,
    set: LabelSet,
    open: &'static str,
    close: &'static str,
}

impl fmt::Display for ShowSet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids: Vec<LabelId> = self.set.iter().collect();
        ids.sort_by(|a, b| {
            let (ka, na) = &self.table.names[a.0 as usize];
            let (kb, nb) = &self.table.names[b.0 as usize];
            (ka, na).cmp(&(kb, nb))
        });
        f.write_str(self.open)?;
        for (i, id) in ids.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(&self.table.written(*id))?;
        }
        f.write_str(self.close)
    }
}
