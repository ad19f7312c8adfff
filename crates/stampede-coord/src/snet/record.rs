//! Records: the values that travel through a network. The public [`Record`] names its labels;
//! inside a running network a record is a [`Rec`] over the program's interned labels.

use std::fmt;
use std::sync::Arc;

use stampede_core::Item;

use super::ast::LabelKind;
use super::det::{DetRef, Ticketed};
use super::types::{LabelId, LabelSet, LabelTable};

/// A field's or tag's value.
#[derive(Clone)]
pub enum Value {
    /// An opaque field: any Stampede item (bytes, an array, a native value).
    Field(Item),
    /// An integer tag, visible to the network (filters, guards, splits).
    Tag(i64),
}

impl Value {
    /// The field's item, if this is a field.
    pub fn item(&self) -> Option<&Item> {
        match self {
            Value::Field(i) => Some(i),
            Value::Tag(_) => None,
        }
    }

    /// The tag's value, if this is a tag.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Tag(t) => Some(*t),
            Value::Field(_) => None,
        }
    }

    fn kind_matches(&self, kind: LabelKind) -> bool {
        matches!(
            (self, kind),
            (Value::Field(_), LabelKind::Field)
                | (Value::Tag(_), LabelKind::Tag | LabelKind::BindingTag)
        )
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Field(i) => write!(f, "field({:?})", i.tag()),
            Value::Tag(t) => write!(f, "{t}"),
        }
    }
}

/// A record as the environment builds and receives it: named fields, tags and binding tags.
///
/// ```
/// use stampede_coord::snet::Record;
/// use stampede_core::Item;
/// let r = Record::new().field("img", Item::new(bytes::Bytes::from(vec![0u8; 4]))).tag("k", 3);
/// assert_eq!(r.get_tag("k"), Some(3));
/// assert_eq!(r.to_string(), "{img, <k>=3}");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Record {
    entries: Vec<(LabelKind, Arc<str>, Value)>,
}

impl Record {
    pub fn new() -> Self {
        Record::default()
    }

    fn set(mut self, kind: LabelKind, name: &str, value: Value) -> Self {
        match self
            .entries
            .iter_mut()
            .find(|(k, n, _)| *k == kind && n.as_ref() == name)
        {
            Some(e) => e.2 = value,
            None => self.entries.push((kind, Arc::from(name), value)),
        }
        self
    }

    /// Adds (or replaces) a field.
    pub fn field(self, name: &str, value: Item) -> Self {
        self.set(LabelKind::Field, name, Value::Field(value))
    }

    /// Adds (or replaces) a tag.
    pub fn tag(self, name: &str, value: i64) -> Self {
        self.set(LabelKind::Tag, name, Value::Tag(value))
    }

    /// Adds (or replaces) a binding tag.
    pub fn binding_tag(self, name: &str, value: i64) -> Self {
        self.set(LabelKind::BindingTag, name, Value::Tag(value))
    }

    pub fn get_field(&self, name: &str) -> Option<&Item> {
        self.find(LabelKind::Field, name).and_then(Value::item)
    }

    pub fn get_tag(&self, name: &str) -> Option<i64> {
        self.find(LabelKind::Tag, name).and_then(Value::int)
    }

    pub fn get_binding_tag(&self, name: &str) -> Option<i64> {
        self.find(LabelKind::BindingTag, name).and_then(Value::int)
    }

    fn find(&self, kind: LabelKind, name: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, n, _)| *k == kind && n.as_ref() == name)
            .map(|e| &e.2)
    }

    /// The field names, in the order they were added.
    pub fn field_names(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|e| e.0 == LabelKind::Field)
            .map(|e| e.1.as_ref())
    }

    /// The tags (and binding tags, written `#name`) with their values.
    pub fn tags(&self) -> impl Iterator<Item = (String, i64)> + '_ {
        self.entries.iter().filter_map(|(k, n, v)| match (k, v) {
            (LabelKind::Tag, Value::Tag(t)) => Some((n.to_string(), *t)),
            (LabelKind::BindingTag, Value::Tag(t)) => Some((format!("#{n}"), *t)),
            _ => None,
        })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `{img, name, <k>=3, <#b>=1}`: fields by name, tags with their values, sorted.
impl fmt::Display for Record {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<(u8, String)> = self
            .entries
            .iter()
            .map(|(k, n, v)| match (k, v) {
                (LabelKind::Field, _) => (0, n.to_string()),
                (LabelKind::Tag, v) => (1, format!("<{n}>={}", v.int().unwrap_or(0))),
                (LabelKind::BindingTag, v) => (2, format!("<#{n}>={}", v.int().unwrap_or(0))),
            })
            .collect();
        parts.sort();
        let parts: Vec<String> = parts.into_iter().map(|p| p.1).collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}

/// A record inside a running network: values by interned label, sorted by label, plus any
/// labels the program never names (they only ride along, by flow inheritance).
#[derive(Clone, Default)]
pub(crate) struct Rec {
    pub labels: LabelSet,
    pub slots: smallvec::SmallVec<[(LabelId, Value); 4]>,
    pub extras: Vec<(LabelKind, Arc<str>, Value)>,
    /// Tickets of the deterministic combinators the record is inside, innermost last.
    pub det: Vec<DetRef<Rec>>,
}

impl Rec {
    /// The record in the program's labels; `Err` names a label whose kind of value is wrong.
    pub fn from_record(r: Record, table: &LabelTable) -> Result<Rec, String> {
        let mut rec = Rec::default();
        for (kind, name, value) in r.entries {
            if !value.kind_matches(kind) {
                return Err(format!("label `{name}` is a {kind:?} but holds {value:?}"));
            }
            match table.id(kind, &name) {
                Some(id) => rec.insert(id, value),
                None => rec.extras.push((kind, name, value)),
            }
        }
        Ok(rec)
    }

    pub fn to_record(&self, table: &LabelTable) -> Record {
        let mut entries: Vec<(LabelKind, Arc<str>, Value)> = self
            .slots
            .iter()
            .map(|(id, v)| (table.kind(*id), table.name(*id).clone(), v.clone()))
            .collect();
        entries.extend(self.extras.iter().cloned());
        Record { entries }
    }

    /// Sets a label, replacing an earlier value.
    pub fn insert(&mut self, id: LabelId, value: Value) {
        match self.slots.binary_search_by_key(&id, |s| s.0) {
            Ok(i) => self.slots[i].1 = value,
            Err(i) => self.slots.insert(i, (id, value)),
        }
        self.labels = self.labels.with(id);
    }

    pub fn get(&self, id: LabelId) -> Option<&Value> {
        self.slots
            .binary_search_by_key(&id, |s| s.0)
            .ok()
            .map(|i| &self.slots[i].1)
    }

    /// A tag's value; 0 when absent (the checker makes sure a read tag is present).
    pub fn tag(&self, id: LabelId) -> i64 {
        self.get(id).and_then(Value::int).unwrap_or(0)
    }

    /// `{img, <k>=3}`, for errors and traces.
    pub fn describe(&self, table: &LabelTable) -> String {
        self.to_record(table).to_string()
    }

    /// The labels of this record outside `consumed`, other than binding tags: what flow
    /// inheritance attaches to every record emitted for it.
    pub fn inherit_into(&self, out: &mut Rec, consumed: LabelSet, binding: LabelSet) {
        for (id, v) in &self.slots {
            if !consumed.contains(*id) && !binding.contains(*id) && !out.labels.contains(*id) {
                out.insert(*id, v.clone());
            }
        }
        for e in &self.extras {
            if e.0 != LabelKind::BindingTag && !out.extras.iter().any(|x| x.0 == e.0 && x.1 == e.1)
            {
                out.extras.push(e.clone());
            }
        }
    }
}

impl Ticketed for Rec {
    fn tickets(&mut self) -> &mut Vec<DetRef<Rec>> {
        &mut self.det
    }
}
