//! A checked network: the program's expression compiled to a tree of nodes over interned
//! labels, with the record types the checker found flowing into and out of every node.

use std::sync::Arc;

use super::ast::{BinOp, Func, Order, Span, UnOp};
use super::diag::Diagnostics;
use super::types::{LabelId, LabelSet, LabelTable};

pub(crate) type NodeId = usize;
pub(crate) type BoxId = usize;

/// A box declaration, shared by every use of its name.
#[derive(Clone, Debug)]
pub(crate) struct BoxInfo {
    pub name: Arc<str>,
    pub input: LabelSet,
    pub outputs: Vec<LabelSet>,
    /// The input's and each output's labels in the order written: a box signature is a tuple
    /// that maps positionally onto the box function's parameters and results.
    pub params: Vec<LabelId>,
    pub results: Vec<Vec<LabelId>>,
    pub span: Span,
}

impl BoxInfo {
    /// The signature as written: `(a, <t>) -> (c) | (d)`.
    pub fn signature(&self, labels: &LabelTable) -> String {
        let tuple = |ids: &[LabelId]| {
            let parts: Vec<String> = ids.iter().map(|id| labels.written(*id)).collect();
            format!("({})", parts.join(", "))
        };
        let outs: Vec<String> = self.results.iter().map(|r| tuple(r)).collect();
        if outs.is_empty() {
            format!("{} ->", tuple(&self.params))
        } else {
            format!("{} -> {}", tuple(&self.params), outs.join(" | "))
        }
    }
}

/// A pattern over interned labels, with its guard.
#[derive(Clone, Debug)]
pub(crate) struct CPattern {
    pub labels: LabelSet,
    pub guard: Option<CExpr>,
    pub span: Span,
}

/// One label of a filter's output record.
#[derive(Clone, Debug)]
pub(crate) enum COut {
    Field { to: LabelId, from: LabelId },
    Tag { to: LabelId, value: CExpr },
}

/// One record a filter emits: its items and the labels they set.
pub(crate) type COutRecord = (Vec<COut>, LabelSet);

#[derive(Clone, Debug)]
pub(crate) struct CFilter {
    pub pattern: CPattern,
    /// Guarded arms in order; the first whose guard holds (or has none) emits its records.
    pub arms: Vec<(Option<CExpr>, Vec<COutRecord>)>,
}

impl CFilter {
    /// Every record type the filter can emit, before flow inheritance.
    pub fn output_sets(&self) -> impl Iterator<Item = LabelSet> + '_ {
        self.arms
            .iter()
            .flat_map(|(_, outs)| outs.iter().map(|(_, set)| *set))
    }
}

#[derive(Clone, Debug)]
pub(crate) enum NodeKind {
    Box(BoxId),
    Serial(NodeId, NodeId),
    Choice {
        order: Order,
        branches: Vec<NodeId>,
    },
    Star {
        order: Order,
        body: NodeId,
        exits: Vec<CPattern>,
    },
    Split {
        order: Order,
        body: NodeId,
        tag: LabelId,
    },
    Feedback {
        body: NodeId,
        back: Vec<CPattern>,
    },
    Filter(Option<CFilter>),
    Sync(Vec<CPattern>),
    /// A use of a named network; its signature, when declared, was checked.
    Net {
        name: Arc<str>,
        body: NodeId,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub kind: NodeKind,
    pub span: Span,
    /// A filter's or synchrocell's canonical text, for pictures and traces.
    pub text: Option<String>,
    /// The record types the node accepts, for best-match routing.
    pub accepts: Vec<LabelSet>,
    /// The record types the checker found reaching this node, and leaving it.
    pub arriving: Vec<LabelSet>,
    pub leaving: Vec<LabelSet>,
}

/// A tag expression over interned labels.
#[derive(Clone, Debug)]
pub(crate) enum CExpr {
    Int(i64),
    Tag(LabelId),
    Unary(UnOp, Box<CExpr>),
    Binary(BinOp, Box<CExpr>, Box<CExpr>),
    Cond(Box<CExpr>, Box<CExpr>, Box<CExpr>),
    Call(Func, Vec<CExpr>),
}

/// Why a tag expression has no value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EvalError {
    DivisionByZero,
    Overflow,
}

impl CExpr {
    /// The expression's value, reading tags through `tag`; comparisons and logic give 0 or 1.
    pub fn eval(&self, tag: &impl Fn(LabelId) -> i64) -> Result<i64, EvalError> {
        use EvalError::*;
        Ok(match self {
            CExpr::Int(v) => *v,
            CExpr::Tag(id) => tag(*id),
            CExpr::Unary(UnOp::Neg, e) => e.eval(tag)?.checked_neg().ok_or(Overflow)?,
            CExpr::Unary(UnOp::Not, e) => i64::from(e.eval(tag)? == 0),
            CExpr::Binary(op, a, b) => {
                let a = a.eval(tag)?;
                // `&&` and `||` look at their right side only when they must.
                match op {
                    BinOp::And if a == 0 => return Ok(0),
                    BinOp::Or if a != 0 => return Ok(1),
                    _ => {}
                }
                let b = b.eval(tag)?;
                match op {
                    BinOp::Mul => a.checked_mul(b).ok_or(Overflow)?,
                    BinOp::Div if b == 0 => return Err(DivisionByZero),
                    BinOp::Div => a.checked_div(b).ok_or(Overflow)?,
                    BinOp::Rem if b == 0 => return Err(DivisionByZero),
                    BinOp::Rem => a.checked_rem(b).ok_or(Overflow)?,
                    BinOp::Add => a.checked_add(b).ok_or(Overflow)?,
                    BinOp::Sub => a.checked_sub(b).ok_or(Overflow)?,
                    BinOp::Lt => i64::from(a < b),
                    BinOp::Le => i64::from(a <= b),
                    BinOp::Gt => i64::from(a > b),
                    BinOp::Ge => i64::from(a >= b),
                    BinOp::Eq => i64::from(a == b),
                    BinOp::Ne => i64::from(a != b),
                    BinOp::And | BinOp::Or => i64::from(b != 0),
                }
            }
            CExpr::Cond(c, a, b) => {
                if c.eval(tag)? != 0 {
                    a.eval(tag)?
                } else {
                    b.eval(tag)?
                }
            }
            CExpr::Call(f, args) => {
                let a = args[0].eval(tag)?;
                match f {
                    Func::Abs => a.checked_abs().ok_or(Overflow)?,
                    Func::Min => a.min(args[1].eval(tag)?),
                    Func::Max => a.max(args[1].eval(tag)?),
                }
            }
        })
    }
}

/// A network that parsed and type-checked: its boxes, its structure, and the record types
/// it accepts and emits.
#[derive(Clone, Debug)]
pub struct Network {
    pub(crate) name: Arc<str>,
    pub(crate) file: Arc<str>,
    pub(crate) source: Arc<str>,
    pub(crate) labels: LabelTable,
    pub(crate) nodes: Vec<Node>,
    pub(crate) boxes: Vec<BoxInfo>,
    pub(crate) root: NodeId,
    pub(crate) input: Vec<LabelSet>,
    pub(crate) output: Vec<LabelSet>,
}

impl Network {
    /// The top-level network's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The source text the network was checked from (for a builder's network, the text it
    /// prints).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The record types the network accepts, as written: `{a, <t>}`.
    pub fn input_type(&self) -> Vec<String> {
        self.input
            .iter()
            .map(|s| self.labels.show(*s).to_string())
            .collect()
    }

    /// The record types the network may emit.
    pub fn output_type(&self) -> Vec<String> {
        self.output
            .iter()
            .map(|s| self.labels.show(*s).to_string())
            .collect()
    }

    /// The names of the boxes the network uses, each once, in declaration order.
    pub fn box_names(&self) -> Vec<&str> {
        self.boxes.iter().map(|b| b.name.as_ref()).collect()
    }

    /// A box's signature as written in its declaration: `(a, <t>) -> (c) | (d)`.
    pub fn box_signature(&self, name: &str) -> Option<String> {
        let b = self.boxes.iter().find(|b| b.name.as_ref() == name)?;
        Some(b.signature(&self.labels))
    }

    /// `file:line:col` of a span of the source.
    pub(crate) fn position(&self, span: Span) -> String {
        let (line, col) = Diagnostics::new(self.file.clone(), self.source.clone(), Vec::new())
            .line_col(span.start);
        format!("{}:{line}:{col}", self.file)
    }
}
