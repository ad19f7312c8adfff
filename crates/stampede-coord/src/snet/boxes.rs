//! What a box function sees: its input values in signature order, and a way to emit records
//! of its output types.

use std::fmt;
use std::sync::Arc;

use stampede_core::Item;

use super::ast::LabelKind;
use super::network::BoxInfo;
use super::record::Value;
use super::types::LabelTable;

/// A box function: called once per record, with no state kept between calls.
pub type BoxFn = dyn Fn(&mut BoxCall<'_>) -> Result<(), BoxError> + Send + Sync;

/// Why a box could not process a record. The run reports it with the record
/// ([`SnetError::BoxFailed`](crate::SnetError::BoxFailed)) and goes on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoxError(pub String);

impl BoxError {
    pub fn new(message: impl Into<String>) -> Self {
        BoxError(message.into())
    }
}

impl fmt::Display for BoxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BoxError {}

impl From<String> for BoxError {
    fn from(s: String) -> Self {
        BoxError(s)
    }
}

impl From<&str> for BoxError {
    fn from(s: &str) -> Self {
        BoxError(s.to_owned())
    }
}

/// One call of a box function.
///
/// Inputs are the labels of the box's input type, in the order its signature writes them;
/// [`BoxCall::emit`] takes the values of one output type in its signature's order.
pub struct BoxCall<'a> {
    pub(crate) info: &'a BoxInfo,
    pub(crate) labels: &'a LabelTable,
    pub(crate) inputs: Vec<Value>,
    pub(crate) emitted: Vec<(usize, Vec<Value>)>,
    /// The first emit that broke the signature: the call fails even if the function
    /// ignored the error.
    pub(crate) broken: Option<String>,
}

impl BoxCall<'_> {
    /// The box's name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The input values, in signature order.
    pub fn inputs(&self) -> &[Value] {
        &self.inputs
    }

    /// The labels of output type `variant` as written (`img`, `<t>`, `<#b>`), in the order
    /// [`BoxCall::emit`] takes their values.
    pub fn output_labels(&self, variant: usize) -> Option<Vec<String>> {
        let order = self.info.results.get(variant)?;
        Some(order.iter().map(|id| self.labels.written(*id)).collect())
    }

    /// Takes the input values, leaving the call without them (to move items into outputs).
    pub fn take_inputs(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.inputs)
    }

    fn position(&self, kind: LabelKind, name: &str) -> Option<usize> {
        self.info
            .params
            .iter()
            .position(|id| self.labels.kind(*id) == kind && self.labels.name(*id).as_ref() == name)
    }

    /// An input field by name.
    pub fn field(&self, name: &str) -> Result<&Item, BoxError> {
        self.position(LabelKind::Field, name)
            .and_then(|i| self.inputs.get(i))
            .and_then(Value::item)
            .ok_or_else(|| {
                BoxError(format!(
                    "box {} has no input field `{name}`",
                    self.info.name
                ))
            })
    }

    /// An input tag (or, written `#name`, binding tag) by name.
    pub fn tag(&self, name: &str) -> Result<i64, BoxError> {
        let (kind, bare) = match name.strip_prefix('#') {
            Some(b) => (LabelKind::BindingTag, b),
            None => (LabelKind::Tag, name),
        };
        self.position(kind, bare)
            .and_then(|i| self.inputs.get(i))
            .and_then(Value::int)
            .ok_or_else(|| BoxError(format!("box {} has no input tag `{name}`", self.info.name)))
    }

    /// Emits a record of output type `variant` (0 for the first type after `->`), its values
    /// in that type's signature order. Checked here: a wrong count or kind is an error, and
    /// fails the call (with nothing emitted) even if the function goes on.
    pub fn emit(&mut self, variant: usize, values: Vec<Value>) -> Result<(), BoxError> {
        let checked = self.check(variant, &values);
        match checked {
            Ok(()) => self.emitted.push((variant, values)),
            Err(ref e) => {
                self.broken.get_or_insert_with(|| e.0.clone());
            }
        }
        checked
    }

    fn check(&self, variant: usize, values: &[Value]) -> Result<(), BoxError> {
        let Some(order) = self.info.results.get(variant) else {
            return Err(BoxError(format!(
                "box {} has {} output type(s); it emitted type {variant}",
                self.info.name,
                self.info.results.len()
            )));
        };
        if order.len() != values.len() {
            return Err(BoxError(format!(
                "output type {variant} of box {} has {} label(s); {} value(s) were emitted",
                self.info.name,
                order.len(),
                values.len()
            )));
        }
        for (id, v) in order.iter().zip(values) {
            let ok = match v {
                Value::Field(_) => self.labels.kind(*id) == LabelKind::Field,
                Value::Tag(_) => self.labels.kind(*id) != LabelKind::Field,
            };
            if !ok {
                return Err(BoxError(format!(
                    "output `{}` of box {} got a {}",
                    self.labels.written(*id),
                    self.info.name,
                    if matches!(v, Value::Field(_)) {
                        "field"
                    } else {
                        "tag"
                    }
                )));
            }
        }
        Ok(())
    }

    /// Emits the input record unchanged as output type `variant`, when that type has the same
    /// labels as the input type (a pass-through).
    pub fn forward(&mut self, variant: usize) -> Result<(), BoxError> {
        let order = self.info.results.get(variant).cloned().unwrap_or_default();
        let values: Option<Vec<Value>> = order
            .iter()
            .map(|id| {
                self.info
                    .params
                    .iter()
                    .position(|i| i == id)
                    .map(|p| self.inputs[p].clone())
            })
            .collect();
        match values {
            Some(v) => self.emit(variant, v),
            None => Err(BoxError(format!(
                "output type {variant} of box {} has labels its input lacks",
                self.info.name
            ))),
        }
    }
}

pub(crate) type SharedBoxFn = Arc<BoxFn>;
