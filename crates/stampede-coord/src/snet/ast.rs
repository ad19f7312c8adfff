//! The syntax tree of an S-Net program, as written (text or builder), with source spans.

use std::sync::Arc;

/// A byte range in a program's source text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// What a record label names: an opaque field, an integer tag, or a binding tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelKind {
    Field,
    Tag,
    BindingTag,
}

/// One label as written, e.g. `img`, `<k>` or `<#b>`.
#[derive(Clone, Debug)]
pub struct Label {
    pub kind: LabelKind,
    pub name: Arc<str>,
    pub span: Span,
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.name == other.name
    }
}

/// A record type or pattern as written: `{a, <t>}` (or `(a, <t>)` in a box signature), with an
/// optional guard over its tags.
#[derive(Clone, Debug, PartialEq)]
pub struct Pattern {
    pub labels: Vec<Label>,
    pub guard: Option<TagExpr>,
    pub span: Span,
}

/// A box's signature: one input record type and one or more output record types.
#[derive(Clone, Debug, PartialEq)]
pub struct BoxSig {
    pub input: Pattern,
    pub outputs: Vec<Pattern>,
}

/// One mapping of a network's declared signature: inputs to outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Mapping {
    pub inputs: Vec<Pattern>,
    pub outputs: Vec<Pattern>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct BoxDecl {
    pub name: Arc<str>,
    pub name_span: Span,
    pub sig: BoxSig,
    pub span: Span,
}

impl PartialEq for BoxDecl {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.sig == other.sig
    }
}

/// `net name (signature) { declarations } connect expression;`
#[derive(Clone, Debug)]
pub struct NetDef {
    pub name: Arc<str>,
    pub name_span: Span,
    pub sig: Option<Vec<Mapping>>,
    pub boxes: Vec<BoxDecl>,
    pub nets: Vec<NetDef>,
    pub body: Expr,
    pub span: Span,
}

impl PartialEq for NetDef {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.sig == other.sig
            && self.boxes == other.boxes
            && self.nets == other.nets
            && self.body == other.body
    }
}

/// Whether a combinator keeps the order of its input stream (`||`, `**`, `!!`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Any,
    Kept,
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A box or network by name.
    Ref(Arc<str>),
    /// `A .. B`
    Serial(Box<Expr>, Box<Expr>),
    /// `A | B` or `A || B`: each record goes to the branch whose input type matches it best.
    Choice(Order, Vec<Expr>),
    /// `A * {p}` or `A ** {p}`: records leave once they match one of the exit patterns.
    Star(Order, Box<Expr>, Vec<Pattern>),
    /// `A ! <t>` or `A !! <t>`: one replica of `A` per value of tag `t`.
    Split(Order, Box<Expr>, Label),
    /// `A \ {p}`: outputs of `A` that match a pattern go back to its input.
    Feedback(Box<Expr>, Vec<Pattern>),
    /// `[ {p} -> {out}; {out} ]`, or `[]` for the identity.
    Filter(Option<Filter>),
    /// `[| {p}, {q} |]`
    Sync(Vec<Pattern>),
}

/// `[ {p} -> if <c> then {..} else {..}; {..} ]`: the first arm whose guard holds emits its
/// records; an empty last action emits nothing.
#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    pub pattern: Pattern,
    pub arms: Vec<(Option<TagExpr>, Vec<OutRecord>)>,
}

/// One record a filter emits: `{b = a, <t = t + 1>}`.
#[derive(Clone, Debug, PartialEq)]
pub struct OutRecord {
    pub items: Vec<OutItem>,
    pub span: Span,
}

/// One label of a filter's output record.
#[derive(Clone, Debug, PartialEq)]
pub enum OutItem {
    /// `b` or `b = a`: field `b` takes the value of field `a` (itself when alone).
    Field { name: Label, from: Label },
    /// `<t>` or `<t = e>` (and `<#t ...>`): a tag set from an expression over the pattern's tags.
    Tag { name: Label, value: TagExpr },
}

/// An integer expression over a record's tags.
#[derive(Clone, Debug)]
pub struct TagExpr {
    pub kind: TagExprKind,
    pub span: Span,
}

impl PartialEq for TagExpr {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum TagExprKind {
    Int(i64),
    /// A tag or binding tag of the matched record.
    Tag(Label),
    Unary(UnOp, Box<TagExpr>),
    Binary(BinOp, Box<TagExpr>, Box<TagExpr>),
    /// `c ? a : b`
    Cond(Box<TagExpr>, Box<TagExpr>, Box<TagExpr>),
    /// `abs(e)`, `min(a, b)`, `max(a, b)`
    Call(Func, Vec<TagExpr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Not,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Mul,
    Div,
    Rem,
    Add,
    Sub,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Abs,
    Min,
    Max,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

impl Func {
    pub fn name(self) -> &'static str {
        match self {
            Func::Abs => "abs",
            Func::Min => "min",
            Func::Max => "max",
        }
    }

    pub fn arity(self) -> usize {
        match self {
            Func::Abs => 1,
            Func::Min | Func::Max => 2,
        }
    }
}
