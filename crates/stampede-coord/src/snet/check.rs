//! The checker: resolves names, compiles the expression to nodes, and infers the record types
//! flowing through every node before anything runs.
//!
//! Inference follows the records: starting from the types the network accepts, each type is
//! pushed through the nodes as the runtime would route a record of that type (best-match
//! choice, flow inheritance through boxes and filters, exit tests of stars, back edges of
//! feedback loops), to a fixed point. A type that reaches a node that cannot take it is an
//! error at that node, with the node that sent it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::ast::*;
use super::diag::Diagnostic;
use super::network::*;
use super::types::{LabelId, LabelSet, LabelTable, MAX_LABELS};

/// Inference gives up past this many record types at one node, rather than run for ever on a
/// loop that keeps adding labels.
const MAX_TYPES_PER_NODE: usize = 4096;

/// Checks a parsed program; `Err` holds every problem found.
pub(crate) fn check(
    def: &NetDef,
    file: Arc<str>,
    source: Arc<str>,
) -> Result<Network, Vec<Diagnostic>> {
    let mut c = Checker::default();
    c.declare_labels(def);
    if !c.diags.is_empty() {
        // Labels past the table's end have no id, so nothing else can be checked.
        return Err(c.diags);
    }
    let root = c.build_net(def, &mut Vec::new(), def.span);
    // Networks declared but never used are still compiled, so that their names resolve and
    // their filters are checked; no records reach them.
    c.build_unused(def, &mut Vec::new());
    if !c.diags.is_empty() {
        return Err(c.diags);
    }
    // Each accepted type once (a star may accept a type as an exit and in its operand).
    let mut input: Vec<LabelSet> = Vec::new();
    for (set, _) in c.accepts(root) {
        if !input.contains(&set) {
            input.push(set);
        }
    }
    // Synchrocells emit merges of what reached them, so inference repeats until no node
    // sees a new type.
    loop {
        let before: usize = c.arriving.iter().map(BTreeSet::len).sum();
        c.memo.clear();
        for v in &input {
            c.flow(root, *v, None);
        }
        let after: usize = c.arriving.iter().map(BTreeSet::len).sum();
        if after == before || !c.diags.is_empty() {
            break;
        }
    }
    c.check_syncs();
    if !c.diags.is_empty() {
        return Err(c.diags);
    }
    let output: BTreeSet<LabelSet> = c.leaving[root].iter().copied().collect();
    let accepts: Vec<Vec<LabelSet>> = (0..c.nodes.len())
        .map(|n| c.accepts(n).into_iter().map(|(set, _)| set).collect())
        .collect();
    let nodes = c
        .nodes
        .into_iter()
        .zip(c.arriving.into_iter().zip(c.leaving))
        .enumerate()
        .map(|(i, ((kind, span), (arriving, leaving)))| Node {
            kind,
            span,
            text: c.texts.remove(&i),
            accepts: accepts[i].clone(),
            arriving: arriving.into_iter().collect(),
            leaving: leaving.into_iter().collect(),
        })
        .collect();
    Ok(Network {
        name: def.name.clone(),
        file,
        source,
        labels: c.labels,
        nodes,
        boxes: c.boxes,
        root,
        input,
        output: output.into_iter().collect(),
    })
}

/// What an exit or back pattern test says about a record type.
enum Exit {
    Always,
    Maybe,
    Never,
}

/// One mapping of a declared signature: input types, output types, where it is written.
type SigMap = (Vec<LabelSet>, Vec<LabelSet>, Span);

#[derive(Default)]
struct Checker {
    labels: LabelTable,
    nodes: Vec<(NodeKind, Span)>,
    texts: HashMap<NodeId, String>,
    /// The span of a node's patterns or tag (a star's exits, a feedback's back patterns, a
    /// split's tag), where diagnostics about them point.
    operand_spans: HashMap<NodeId, Span>,
    /// The network definitions being compiled, outermost first (to find recursion), and every
    /// one compiled so far.
    building: Vec<(*const NetDef, Arc<str>)>,
    built: HashSet<*const NetDef>,
    /// Declared signatures of the networks used, by node.
    sigs: HashMap<NodeId, Vec<SigMap>>,
    boxes: Vec<BoxInfo>,
    box_index: HashMap<Arc<str>, BoxId>,
    arriving: Vec<BTreeSet<LabelSet>>,
    leaving: Vec<BTreeSet<LabelSet>>,
    memo: HashMap<(NodeId, LabelSet), Vec<LabelSet>>,
    accepts_memo: HashMap<NodeId, Vec<(LabelSet, bool)>>,
    diags: Vec<Diagnostic>,
    full: bool,
}

impl Checker {
    fn error(&mut self, d: Diagnostic) {
        if !self
            .diags
            .iter()
            .any(|e| e.code == d.code && e.span == d.span && e.message == d.message)
        {
            self.diags.push(d);
        }
    }

    // ---- labels

    /// Interns every label the program writes, so label sets exist before compiling.
    fn declare_labels(&mut self, def: &NetDef) {
        let mut labels: Vec<Label> = Vec::new();
        collect_net_labels(def, &mut labels);
        for l in labels {
            if self.labels.intern(l.kind, &l.name).is_none() && !self.full {
                self.full = true;
                self.error(Diagnostic::new(
                    "S0002",
                    format!("a program may name at most {MAX_LABELS} distinct labels"),
                    l.span,
                    "one label too many",
                ));
            }
        }
    }

    fn set_of(&mut self, labels: &[Label], what: &str) -> LabelSet {
        let mut set = LabelSet::EMPTY;
        for l in labels {
            let Some(id) = self.labels.label(l) else {
                continue;
            };
            if set.contains(id) {
                let first = labels
                    .iter()
                    .find(|m| self.labels.label(m) == Some(id))
                    .map_or(l.span, |m| m.span);
                self.error(
                    Diagnostic::new(
                        "S0003",
                        format!(
                            "label `{}` appears twice in this {what}",
                            self.labels.written(id)
                        ),
                        l.span,
                        "repeated here",
                    )
                    .related(first, "first here"),
                );
            }
            set = set.with(id);
        }
        set
    }

    fn pattern(&mut self, p: &Pattern, what: &str) -> CPattern {
        let labels = self.set_of(&p.labels, what);
        let guard = p.guard.as_ref().map(|g| self.tag_expr(g, labels, "guard"));
        CPattern {
            labels,
            guard,
            span: p.span,
        }
    }

    /// Compiles a tag expression whose tags must all be in `visible`.
    fn tag_expr(&mut self, e: &TagExpr, visible: LabelSet, what: &str) -> CExpr {
        match &e.kind {
            TagExprKind::Int(v) => CExpr::Int(*v),
            TagExprKind::Tag(l) => {
                let id = self
                    .labels
                    .label(l)
                    .expect("every written label is interned");
                if !visible.contains(id) {
                    self.error(
                        Diagnostic::new(
                            "S0502",
                            format!(
                                "this {what} reads tag `{}`, which its pattern does not name",
                                self.labels.written(id)
                            ),
                            l.span,
                            format!("not in {}", self.labels.show(visible)),
                        )
                        .note("a filter or guard sees only the labels its pattern names"),
                    );
                }
                CExpr::Tag(id)
            }
            TagExprKind::Unary(op, a) => {
                CExpr::Unary(*op, Box::new(self.tag_expr(a, visible, what)))
            }
            TagExprKind::Binary(op, a, b) => CExpr::Binary(
                *op,
                Box::new(self.tag_expr(a, visible, what)),
                Box::new(self.tag_expr(b, visible, what)),
            ),
            TagExprKind::Cond(c, a, b) => CExpr::Cond(
                Box::new(self.tag_expr(c, visible, what)),
                Box::new(self.tag_expr(a, visible, what)),
                Box::new(self.tag_expr(b, visible, what)),
            ),
            TagExprKind::Call(f, args) => {
                if args.len() != f.arity() {
                    self.error(Diagnostic::new(
                        "S0503",
                        format!(
                            "`{}` takes {} argument{}, not {}",
                            f.name(),
                            f.arity(),
                            if f.arity() == 1 { "" } else { "s" },
                            args.len()
                        ),
                        e.span,
                        "wrong number of arguments",
                    ));
                    return CExpr::Int(0);
                }
                CExpr::Call(
                    *f,
                    args.iter()
                        .map(|a| self.tag_expr(a, visible, what))
                        .collect(),
                )
            }
        }
    }

    // ---- compiling the expression to nodes

    fn node(&mut self, kind: NodeKind, span: Span) -> NodeId {
        self.nodes.push((kind, span));
        self.arriving.push(BTreeSet::new());
        self.leaving.push(BTreeSet::new());
        self.nodes.len() - 1
    }

    /// Compiles one use of a network definition; `scope` holds the enclosing definitions.
    fn build_net<'a>(
        &mut self,
        def: &'a NetDef,
        scope: &mut Vec<&'a NetDef>,
        use_span: Span,
    ) -> NodeId {
        self.declare_scope(def);
        self.building.push((def, def.name.clone()));
        self.built.insert(def as *const NetDef);
        scope.push(def);
        let body = self.build(&def.body, scope);
        scope.pop();
        self.building.pop();
        let id = self.node(
            NodeKind::Net {
                name: def.name.clone(),
                body,
            },
            use_span,
        );
        if let Some(sig) = &def.sig {
            let mut mappings = Vec::new();
            for m in sig {
                let ins = m
                    .inputs
                    .iter()
                    .map(|p| self.set_of(&p.labels, "record type"))
                    .collect();
                let outs = m
                    .outputs
                    .iter()
                    .map(|p| self.set_of(&p.labels, "record type"))
                    .collect();
                mappings.push((ins, outs, m.span));
            }
            self.sigs.insert(id, mappings);
        }
        id
    }

    /// Compiles the networks nested in `def` that no expression uses.
    fn build_unused<'a>(&mut self, def: &'a NetDef, scope: &mut Vec<&'a NetDef>) {
        scope.push(def);
        for net in &def.nets {
            if !self.built.contains(&(net as *const NetDef)) {
                let mut inner = scope.clone();
                self.build_net(net, &mut inner, net.name_span);
            }
            self.build_unused(net, scope);
        }
        scope.pop();
    }

    /// Registers the boxes a definition declares, and reports clashing names.
    fn declare_scope(&mut self, def: &NetDef) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        let names = def
            .boxes
            .iter()
            .map(|b| (&b.name, b.name_span))
            .chain(def.nets.iter().map(|n| (&n.name, n.name_span)));
        for (name, span) in names {
            if let Some(first) = seen.insert(name, span) {
                self.error(
                    Diagnostic::new(
                        "S0101",
                        format!("`{name}` is declared twice in network `{}`", def.name),
                        span,
                        "declared again here",
                    )
                    .related(first, "first declared here"),
                );
            }
        }
        for b in &def.boxes {
            let input = self.set_of(&b.sig.input.labels, "box type");
            let outputs: Vec<LabelSet> = b
                .sig
                .outputs
                .iter()
                .map(|o| self.set_of(&o.labels, "box type"))
                .collect();
            let ids = |ls: &[Label]| -> Vec<LabelId> {
                ls.iter().filter_map(|l| self.labels.label(l)).collect()
            };
            let params = ids(&b.sig.input.labels);
            let results: Vec<Vec<LabelId>> = b.sig.outputs.iter().map(|o| ids(&o.labels)).collect();
            match self.box_index.get(&b.name) {
                Some(&id) => {
                    let known = &self.boxes[id];
                    // Positional: `(a, b)` and `(b, a)` are different functions.
                    if known.params != params || known.results != results {
                        let first = known.span;
                        self.error(
                            Diagnostic::new(
                                "S0106",
                                format!("box `{}` is declared with two different signatures", b.name),
                                b.span,
                                "this signature",
                            )
                            .related(first, "differs from this one")
                            .note("a box name stands for one function, so all its declarations must agree"),
                        );
                    }
                }
                None => {
                    self.box_index.insert(b.name.clone(), self.boxes.len());
                    self.boxes.push(BoxInfo {
                        name: b.name.clone(),
                        input,
                        outputs,
                        params,
                        results,
                        span: b.span,
                    });
                }
            }
        }
    }

    fn build<'a>(&mut self, e: &'a Expr, scope: &mut Vec<&'a NetDef>) -> NodeId {
        let kind = match &e.kind {
            ExprKind::Ref(name) => return self.resolve(name, e.span, scope),
            ExprKind::Serial(a, b) => {
                let a = self.build(a, scope);
                let b = self.build(b, scope);
                NodeKind::Serial(a, b)
            }
            ExprKind::Choice(order, branches) => {
                let branches = branches.iter().map(|b| self.build(b, scope)).collect();
                NodeKind::Choice {
                    order: *order,
                    branches,
                }
            }
            ExprKind::Star(order, body, exits) => {
                let body = self.build(body, scope);
                let exits = exits
                    .iter()
                    .map(|p| self.pattern(p, "exit pattern"))
                    .collect();
                NodeKind::Star {
                    order: *order,
                    body,
                    exits,
                }
            }
            ExprKind::Split(order, body, tag) => {
                let body = self.build(body, scope);
                let tag = self
                    .labels
                    .label(tag)
                    .expect("every written label is interned");
                NodeKind::Split {
                    order: *order,
                    body,
                    tag,
                }
            }
            ExprKind::Feedback(body, back) => {
                let body = self.build(body, scope);
                let back = back
                    .iter()
                    .map(|p| self.pattern(p, "feedback pattern"))
                    .collect();
                NodeKind::Feedback { body, back }
            }
            ExprKind::Filter(None) => NodeKind::Filter(None),
            ExprKind::Filter(Some(f)) => NodeKind::Filter(Some(self.filter(f))),
            ExprKind::Sync(patterns) => NodeKind::Sync(
                patterns
                    .iter()
                    .map(|p| self.pattern(p, "synchrocell pattern"))
                    .collect(),
            ),
        };
        let id = self.node(kind, e.span);
        match &e.kind {
            ExprKind::Star(_, _, ps) | ExprKind::Feedback(_, ps) => {
                let first = ps.first().map_or(e.span, |p| p.span);
                let last = ps.last().map_or(e.span, |p| p.span);
                self.operand_spans.insert(id, first.to(last));
            }
            ExprKind::Split(_, _, tag) => {
                self.operand_spans.insert(id, tag.span);
            }
            _ => {}
        }
        if matches!(e.kind, ExprKind::Filter(_) | ExprKind::Sync(_)) {
            self.texts.insert(id, super::print::expr(e));
        }
        id
    }

    fn filter(&mut self, f: &Filter) -> CFilter {
        let pattern = self.pattern(&f.pattern, "filter pattern");
        let arms = f
            .arms
            .iter()
            .map(|(guard, outs)| {
                let guard = guard
                    .as_ref()
                    .map(|g| self.tag_expr(g, pattern.labels, "filter guard"));
                let outs = outs
                    .iter()
                    .map(|o| self.out_record(o, &pattern, f.pattern.span))
                    .collect();
                (guard, outs)
            })
            .collect();
        CFilter { pattern, arms }
    }

    fn out_record(
        &mut self,
        out: &OutRecord,
        pattern: &CPattern,
        pattern_span: Span,
    ) -> COutRecord {
        let mut items = Vec::new();
        let mut set = LabelSet::EMPTY;
        for item in &out.items {
            let (name, compiled) = match item {
                OutItem::Field { name, from } => {
                    let to = self.labels.label(name).expect("interned");
                    let src = self.labels.label(from).expect("interned");
                    if !pattern.labels.contains(src) {
                        self.error(
                            Diagnostic::new(
                                "S0501",
                                format!("this filter uses field `{}`, which its pattern does not name", from.name),
                                from.span,
                                format!("not in {}", self.labels.show(pattern.labels)),
                            )
                            .related(pattern_span, "the filter's pattern")
                            .note("a filter sees only the labels its pattern names; add the field to the pattern"),
                        );
                    }
                    (name, COut::Field { to, from: src })
                }
                OutItem::Tag { name, value } => {
                    let to = self.labels.label(name).expect("interned");
                    (
                        name,
                        COut::Tag {
                            to,
                            value: self.tag_expr(value, pattern.labels, "filter"),
                        },
                    )
                }
            };
            let id = self.labels.label(name).expect("interned");
            if set.contains(id) {
                let first = out
                    .items
                    .iter()
                    .map(|i| match i {
                        OutItem::Field { name, .. } | OutItem::Tag { name, .. } => name,
                    })
                    .find(|m| self.labels.label(m) == Some(id))
                    .map_or(name.span, |m| m.span);
                self.error(
                    Diagnostic::new(
                        "S0003",
                        format!(
                            "label `{}` appears twice in this output record",
                            self.labels.written(id)
                        ),
                        name.span,
                        "repeated here",
                    )
                    .related(first, "first here"),
                );
            }
            set = set.with(id);
            items.push(compiled);
        }
        (items, set)
    }

    fn resolve<'a>(&mut self, name: &Arc<str>, span: Span, scope: &mut Vec<&'a NetDef>) -> NodeId {
        for (depth, def) in scope.iter().enumerate().rev() {
            if def.boxes.iter().any(|b| &b.name == name) {
                let id = self.box_index[name];
                return self.node(NodeKind::Box(id), span);
            }
            if let Some(net) = def.nets.iter().find(|n| &n.name == name) {
                if let Some(at) = self.building.iter().position(|d| std::ptr::eq(d.0, net)) {
                    let through: Vec<String> = self.building[at + 1..]
                        .iter()
                        .map(|d| format!("`{}`", d.1))
                        .collect();
                    let message = if through.is_empty() {
                        format!("network `{name}` uses itself")
                    } else {
                        format!(
                            "network `{name}` uses itself through {}",
                            through.join(", ")
                        )
                    };
                    self.error(
                        Diagnostic::new("S0103", message, span, "used here")
                            .related(net.name_span, "defined here")
                            .note("networks may not be recursive; use `*` or `\\` for repetition"),
                    );
                    return self.node(NodeKind::Filter(None), span);
                }
                // Nets declared at this depth see the definitions enclosing it, not deeper ones.
                let mut inner: Vec<&'a NetDef> = scope[..=depth].to_vec();
                return self.build_net(net, &mut inner, span);
            }
        }
        let mut d = Diagnostic::new(
            "S0102",
            format!("no box or network named `{name}` is in scope"),
            span,
            "unknown name",
        );
        if let Some(best) = closest(name, scope) {
            d = d.note(format!("did you mean `{best}`?"));
        }
        self.error(d);
        self.node(NodeKind::Filter(None), span)
    }

    // ---- what each node accepts

    /// The record types a node accepts, and whether acceptance also depends on a guard.
    fn accepts(&mut self, n: NodeId) -> Vec<(LabelSet, bool)> {
        if let Some(a) = self.accepts_memo.get(&n) {
            return a.clone();
        }
        let a = match self.nodes[n].0.clone() {
            NodeKind::Box(b) => vec![(self.boxes[b].input, false)],
            // The identity filter takes anything, so what it passes on must suit the rest.
            NodeKind::Serial(a, b) if self.transparent(a) => self.accepts(b),
            NodeKind::Serial(a, _) => self.accepts(a),
            NodeKind::Choice { branches, .. } => {
                branches.iter().flat_map(|b| self.accepts(*b)).collect()
            }
            NodeKind::Star { body, exits, .. } => {
                let mut a: Vec<_> = exits
                    .iter()
                    .map(|p| (p.labels, p.guard.is_some()))
                    .collect();
                a.extend(self.accepts(body));
                a
            }
            NodeKind::Split { body, tag, .. } => self
                .accepts(body)
                .into_iter()
                .map(|(s, g)| (s.with(tag), g))
                .collect(),
            NodeKind::Feedback { body, .. } => self.accepts(body),
            NodeKind::Filter(None) => vec![(LabelSet::EMPTY, false)],
            NodeKind::Filter(Some(f)) => vec![(f.pattern.labels, f.pattern.guard.is_some())],
            NodeKind::Sync(patterns) => patterns.iter().map(|p| (p.labels, false)).collect(),
            NodeKind::Net { body, .. } => match self.sigs.get(&n) {
                Some(sig) => sig
                    .iter()
                    .flat_map(|(ins, _, _)| ins.iter().map(|s| (*s, false)))
                    .collect(),
                None => self.accepts(body),
            },
        };
        let mut seen = BTreeSet::new();
        let a: Vec<_> = a.into_iter().filter(|x| seen.insert(*x)).collect();
        self.accepts_memo.insert(n, a.clone());
        a
    }

    /// Whether node `n` passes every record on unchanged: the identity filter, and
    /// compositions of it.
    fn transparent(&self, n: NodeId) -> bool {
        match &self.nodes[n].0 {
            NodeKind::Filter(None) => true,
            NodeKind::Serial(a, b) => self.transparent(*a) && self.transparent(*b),
            NodeKind::Net { body, .. } => !self.sigs.contains_key(&n) && self.transparent(*body),
            _ => false,
        }
    }

    /// The best match score of node `n` for records of type `v`: the size of the largest
    /// accepted type that `v` matches.
    fn score(&mut self, n: NodeId, v: LabelSet) -> Option<u32> {
        // Binding tags are a condition of the match, not part of its score.
        let accepts = self.accepts(n);
        let binding = self.labels.binding();
        accepts
            .iter()
            .filter(|(s, _)| self.labels.matches(*s, v))
            .map(|(s, _)| s.minus(binding).len())
            .max()
    }

    // ---- inference

    /// The record types leaving node `n` for records of type `v` entering it. `from` is the
    /// span that sent them, for diagnostics.
    fn flow(&mut self, n: NodeId, v: LabelSet, from: Option<Span>) -> Vec<LabelSet> {
        if let Some(out) = self.memo.get(&(n, v)) {
            return out.clone();
        }
        self.memo.insert((n, v), Vec::new());
        self.arriving[n].insert(v);
        if self.arriving[n].len() > MAX_TYPES_PER_NODE {
            let span = self.nodes[n].1;
            self.error(Diagnostic::new(
                "S0601",
                format!("more than {MAX_TYPES_PER_NODE} record types reach this expression"),
                span,
                "type inference gives up here",
            ).note("records that gain labels on every pass round a loop take ever more types; strip the labels the loop does not need with a filter, or let the records leave sooner"));
            return Vec::new();
        }
        let span = self.nodes[n].1;
        let out: BTreeSet<LabelSet> = match self.nodes[n].0.clone() {
            NodeKind::Box(b) => {
                let info = self.boxes[b].clone();
                if self.labels.matches(info.input, v) {
                    let inherited = v.minus(info.input).minus(self.labels.binding());
                    info.outputs.iter().map(|o| o.union(inherited)).collect()
                } else {
                    let mut d = Diagnostic::new(
                        "S0201",
                        format!(
                            "box `{}` cannot accept records of type {}",
                            info.name,
                            self.labels.show(v)
                        ),
                        span,
                        format!("accepts {}", self.labels.show(info.input)),
                    )
                    .related(info.span, "declared here");
                    d = self.mismatch_note(d, info.input, v, from);
                    self.error(d);
                    BTreeSet::new()
                }
            }
            NodeKind::Serial(a, b) => {
                let a_span = self.nodes[a].1;
                let mids = self.flow(a, v, from);
                mids.into_iter()
                    .flat_map(|w| self.flow(b, w, Some(a_span)))
                    .collect()
            }
            NodeKind::Choice { branches, .. } => {
                let scores: Vec<Option<u32>> = branches.iter().map(|b| self.score(*b, v)).collect();
                match scores.iter().flatten().max().copied() {
                    None => {
                        let accepted: Vec<LabelSet> = branches
                            .iter()
                            .flat_map(|b| self.accepts(*b))
                            .map(|x| x.0)
                            .collect();
                        let mut d = Diagnostic::new(
                            "S0301",
                            format!(
                                "no branch of this choice accepts records of type {}",
                                self.labels.show(v)
                            ),
                            span,
                            format!("branches accept {}", self.labels.show_all(accepted)),
                        );
                        if let Some(f) = from {
                            d = d.related(
                                f,
                                format!("records of type {} come from here", self.labels.show(v)),
                            );
                        }
                        self.error(d);
                        BTreeSet::new()
                    }
                    Some(best) => {
                        let winners: Vec<NodeId> = branches
                            .iter()
                            .zip(&scores)
                            .filter(|(_, s)| **s == Some(best))
                            .map(|(b, _)| *b)
                            .collect();
                        if winners.len() > 1 {
                            let labels = if best == 1 { "label" } else { "labels" };
                            let mut matched: Vec<String> = Vec::new();
                            for w in &winners {
                                let binding = self.labels.binding();
                                let ty = self
                                    .accepts(*w)
                                    .into_iter()
                                    .map(|x| x.0)
                                    .filter(|a| {
                                        self.labels.matches(*a, v) && a.minus(binding).len() == best
                                    })
                                    .map(|a| self.labels.show(a).to_string())
                                    .next()
                                    .unwrap_or_default();
                                matched.push(format!("accepts {ty}, matching {best} {labels}"));
                            }
                            let mut d = Diagnostic::new(
                                "S0302",
                                format!(
                                    "this choice is ambiguous for records of type {}",
                                    self.labels.show(v)
                                ),
                                self.nodes[winners[0]].1,
                                matched[0].clone(),
                            );
                            for (w, m) in winners[1..].iter().zip(&matched[1..]) {
                                d = d.related(self.nodes[*w].1, format!("{m} as well"));
                            }
                            if let Some(f) = from {
                                d = d.related(
                                    f,
                                    format!(
                                        "records of type {} come from here",
                                        self.labels.show(v)
                                    ),
                                );
                            }
                            d = d.note("routing sends a record to the branch whose type matches it best; make one branch's type more specific, or add a filter that tags the records");
                            self.error(d);
                        }
                        self.flow(winners[0], v, from).into_iter().collect()
                    }
                }
            }
            NodeKind::Star { body, exits, .. } => {
                let mut out = BTreeSet::new();
                let mut seen = BTreeSet::new();
                let mut work = vec![(v, from)];
                let body_span = self.nodes[body].1;
                let exits_span = self.operand_spans.get(&n).copied().unwrap_or(span);
                while let Some((w, w_from)) = work.pop() {
                    if !seen.insert(w) {
                        continue;
                    }
                    // A record leaves when it matches an exit pattern whose guard holds; with
                    // only guarded patterns matching, it may leave or go round again.
                    let guarded = match self.exit_test(&exits, w) {
                        Exit::Always => {
                            out.insert(w);
                            continue;
                        }
                        Exit::Maybe => {
                            out.insert(w);
                            true
                        }
                        Exit::Never => false,
                    };
                    if self.score(body, w).is_none() {
                        let exit_text = self.labels.show_all(exits.iter().map(|p| p.labels));
                        let acc: Vec<LabelSet> =
                            self.accepts(body).into_iter().map(|x| x.0).collect();
                        let message = if guarded {
                            format!(
                                "records of type {} that fail this star's exit guard are not accepted by its operand",
                                self.labels.show(w)
                            )
                        } else {
                            format!(
                                "records of type {} neither leave this star nor are accepted by its operand",
                                self.labels.show(w)
                            )
                        };
                        let mut d = Diagnostic::new(
                            "S0203",
                            message,
                            exits_span,
                            format!("records leave on {exit_text}"),
                        );
                        if w_from == Some(body_span) {
                            d = d.related(
                                body_span,
                                format!(
                                    "the operand emits {} but accepts {}",
                                    self.labels.show(w),
                                    self.labels.show_all(acc)
                                ),
                            );
                        } else {
                            d = d.related(
                                body_span,
                                format!("the operand accepts {}", self.labels.show_all(acc)),
                            );
                            if let Some(f) = w_from {
                                d = d.related(
                                    f,
                                    format!(
                                        "records of type {} come from here",
                                        self.labels.show(w)
                                    ),
                                );
                            }
                        }
                        self.error(d);
                        continue;
                    }
                    for x in self.flow(body, w, w_from) {
                        work.push((x, Some(body_span)));
                    }
                }
                out
            }
            NodeKind::Split { body, tag, .. } => {
                if v.contains(tag) {
                    self.flow(body, v, from).into_iter().collect()
                } else {
                    let mut d = Diagnostic::new(
                        "S0204",
                        format!(
                            "records of type {} reach this split but lack its tag `{}`",
                            self.labels.show(v),
                            self.labels.written(tag)
                        ),
                        self.operand_spans.get(&n).copied().unwrap_or(span),
                        "replicas are chosen by this tag",
                    );
                    if let Some(f) = from {
                        d = d.related(
                            f,
                            format!("records of type {} come from here", self.labels.show(v)),
                        );
                    }
                    self.error(d);
                    BTreeSet::new()
                }
            }
            NodeKind::Feedback { body, back } => {
                // Entering records go into the operand first; of its outputs, those matching a
                // back pattern (whose guard may hold) go round again, the others leave.
                let mut out = BTreeSet::new();
                let mut seen = BTreeSet::new();
                let mut work = vec![(v, from)];
                let body_span = self.nodes[body].1;
                while let Some((w, w_from)) = work.pop() {
                    if !seen.insert(w) {
                        continue;
                    }
                    for x in self.flow(body, w, w_from) {
                        match self.exit_test(&back, x) {
                            Exit::Always => work.push((x, Some(body_span))),
                            Exit::Maybe => {
                                out.insert(x);
                                work.push((x, Some(body_span)));
                            }
                            Exit::Never => {
                                out.insert(x);
                            }
                        }
                    }
                }
                out
            }
            NodeKind::Filter(None) => [v].into_iter().collect(),
            NodeKind::Filter(Some(f)) => {
                if self.labels.matches(f.pattern.labels, v) {
                    let inherited = v.minus(f.pattern.labels).minus(self.labels.binding());
                    f.output_sets().map(|set| set.union(inherited)).collect()
                } else {
                    let mut d = Diagnostic::new(
                        "S0205",
                        format!(
                            "this filter cannot accept records of type {}",
                            self.labels.show(v)
                        ),
                        span,
                        format!("its pattern is {}", self.labels.show(f.pattern.labels)),
                    );
                    d = self.mismatch_note(d, f.pattern.labels, v, from);
                    self.error(d);
                    BTreeSet::new()
                }
            }
            NodeKind::Sync(patterns) => {
                if !patterns.iter().any(|p| self.labels.matches(p.labels, v)) {
                    let mut d = Diagnostic::new(
                        "S0402",
                        format!(
                            "this synchrocell cannot accept records of type {}",
                            self.labels.show(v)
                        ),
                        span,
                        format!(
                            "its patterns are {}",
                            self.labels.show_all(patterns.iter().map(|p| p.labels))
                        ),
                    )
                    .note("a synchrocell accepts only records that match one of its patterns");
                    if let Some(f) = from {
                        d = d.related(
                            f,
                            format!("records of type {} come from here", self.labels.show(v)),
                        );
                    }
                    self.error(d);
                    return self.settle(n, v, BTreeSet::new());
                }
                // A record passes unchanged when it matches no empty slot or the cell has
                // fired. The merge is the first pattern's record with the labels the other
                // patterns name copied from theirs.
                let mut out: BTreeSet<LabelSet> = [v].into_iter().collect();
                let rest = patterns[1..]
                    .iter()
                    .fold(LabelSet::EMPTY, |acc, p| acc.union(p.labels));
                let firsts: Vec<LabelSet> = self.arriving[n]
                    .iter()
                    .copied()
                    .filter(|a| self.labels.matches(patterns[0].labels, *a))
                    .collect();
                out.extend(firsts.into_iter().map(|f| f.union(rest)));
                out
            }
            NodeKind::Net { name, body } => match self.sigs.get(&n).cloned() {
                // A declared signature is the network's interface: records it does not map
                // are reported here, not inside the network.
                Some(sig) => match self.signature_map(&sig, v) {
                    Some(map) => {
                        let out: BTreeSet<LabelSet> =
                            self.flow(body, v, from).into_iter().collect();
                        self.check_outputs(&name, map, v, &out, span);
                        out
                    }
                    None => {
                        let all: Vec<LabelSet> =
                            sig.iter().flat_map(|(i, _, _)| i.iter().copied()).collect();
                        let mut d = Diagnostic::new(
                            "S0206",
                            format!(
                                "network `{name}` cannot accept records of type {}",
                                self.labels.show(v)
                            ),
                            span,
                            format!("its signature accepts {}", self.labels.show_all(all)),
                        )
                        .related(sig[0].2, "signature declared here");
                        if let Some(f) = from {
                            d = d.related(
                                f,
                                format!("records of type {} come from here", self.labels.show(v)),
                            );
                        }
                        self.error(d);
                        BTreeSet::new()
                    }
                },
                None => self.flow(body, v, from).into_iter().collect(),
            },
        };
        self.settle(n, v, out)
    }

    /// Whether records of type `v` match one of `patterns`: surely (a matching pattern has no
    /// guard), perhaps (only guarded patterns match), or not at all.
    fn exit_test(&self, patterns: &[CPattern], v: LabelSet) -> Exit {
        let mut any = false;
        for p in patterns.iter().filter(|p| self.labels.matches(p.labels, v)) {
            if p.guard.is_none() {
                return Exit::Always;
            }
            any = true;
        }
        if any {
            Exit::Maybe
        } else {
            Exit::Never
        }
    }

    fn settle(&mut self, n: NodeId, v: LabelSet, out: BTreeSet<LabelSet>) -> Vec<LabelSet> {
        let out: Vec<LabelSet> = out.into_iter().collect();
        self.leaving[n].extend(out.iter().copied());
        self.memo.insert((n, v), out.clone());
        out
    }

    fn mismatch_note(
        &self,
        d: Diagnostic,
        wanted: LabelSet,
        got: LabelSet,
        from: Option<Span>,
    ) -> Diagnostic {
        let missing = wanted.minus(got);
        let extra_binding = got.intersect(self.labels.binding()).minus(wanted);
        let mut d = d;
        if !missing.is_empty() {
            let names: Vec<String> = missing
                .iter()
                .map(|l| format!("`{}`", self.labels.written(l)))
                .collect();
            d = d.note(format!("the records lack {}", names.join(", ")));
        }
        if !extra_binding.is_empty() {
            let names: Vec<String> = extra_binding
                .iter()
                .map(|l| format!("`{}`", self.labels.written(l)))
                .collect();
            d = d.note(format!(
                "the records carry binding tag {}, which only a type naming it accepts",
                names.join(", ")
            ));
        }
        if let Some(f) = from {
            d = d.related(
                f,
                format!("records of type {} come from here", self.labels.show(got)),
            );
        }
        d
    }

    /// The mapping of a declared signature that records of type `v` use: the one with the
    /// input type matching `v` best, and that input type.
    fn signature_map<'s>(&self, sig: &'s [SigMap], v: LabelSet) -> Option<(&'s SigMap, LabelSet)> {
        let binding = self.labels.binding();
        sig.iter()
            .filter_map(|m| {
                let input =
                    m.0.iter()
                        .copied()
                        .filter(|i| self.labels.matches(*i, v))
                        .max_by_key(|i| i.minus(binding).len())?;
                Some((m, input))
            })
            .max_by_key(|(_, input)| input.minus(binding).len())
    }

    /// A network with a declared signature must emit, for the inputs a mapping takes, only
    /// subtypes of that mapping's outputs.
    fn check_outputs(
        &mut self,
        name: &str,
        (map, _input): (&SigMap, LabelSet),
        v: LabelSet,
        out: &BTreeSet<LabelSet>,
        span: Span,
    ) {
        let (_, outs, sig_span) = map;
        for w in out {
            if !outs.iter().any(|o| self.labels.matches(*o, *w)) {
                self.error(
                    Diagnostic::new(
                        "S0207",
                        format!(
                            "network `{name}` emits records of type {}, which its signature does not allow",
                            self.labels.show(*w)
                        ),
                        span,
                        format!(
                            "for input {} the signature allows {}",
                            self.labels.show(v),
                            self.labels.show_all(outs.iter().copied())
                        ),
                    )
                    .related(*sig_span, "signature declared here"),
                );
            }
        }
    }

    /// A synchrocell pattern that nothing reaching the cell matches can never fire.
    fn check_syncs(&mut self) {
        for n in 0..self.nodes.len() {
            let NodeKind::Sync(patterns) = self.nodes[n].0.clone() else {
                continue;
            };
            if self.arriving[n].is_empty() {
                continue;
            }
            for p in &patterns {
                if !self.arriving[n]
                    .iter()
                    .any(|a| self.labels.matches(p.labels, *a))
                {
                    let arriving = self.labels.show_all(self.arriving[n].iter().copied());
                    self.error(
                        Diagnostic::new(
                            "S0401",
                            "this synchrocell can never fire".to_owned(),
                            p.span,
                            format!(
                                "no record reaching the cell matches {}",
                                self.labels.show(p.labels)
                            ),
                        )
                        .note(format!("records reaching it have type {arriving}")),
                    );
                }
            }
        }
    }
}

/// Every label written anywhere in a definition, nested ones included.
fn collect_net_labels(def: &NetDef, out: &mut Vec<Label>) {
    let pat = |p: &Pattern, out: &mut Vec<Label>| {
        out.extend(p.labels.iter().cloned());
        if let Some(g) = &p.guard {
            collect_expr_labels(g, out);
        }
    };
    if let Some(sig) = &def.sig {
        for m in sig {
            m.inputs.iter().chain(&m.outputs).for_each(|p| pat(p, out));
        }
    }
    for b in &def.boxes {
        pat(&b.sig.input, out);
        b.sig.outputs.iter().for_each(|p| pat(p, out));
    }
    for n in &def.nets {
        collect_net_labels(n, out);
    }
    collect_labels(&def.body, out, &pat);
}

fn collect_labels(e: &Expr, out: &mut Vec<Label>, pat: &dyn Fn(&Pattern, &mut Vec<Label>)) {
    match &e.kind {
        ExprKind::Ref(_) | ExprKind::Filter(None) => {}
        ExprKind::Serial(a, b) => {
            collect_labels(a, out, pat);
            collect_labels(b, out, pat);
        }
        ExprKind::Choice(_, bs) => bs.iter().for_each(|b| collect_labels(b, out, pat)),
        ExprKind::Star(_, a, ps) | ExprKind::Feedback(a, ps) => {
            collect_labels(a, out, pat);
            ps.iter().for_each(|p| pat(p, out));
        }
        ExprKind::Split(_, a, t) => {
            collect_labels(a, out, pat);
            out.push(t.clone());
        }
        ExprKind::Filter(Some(f)) => {
            pat(&f.pattern, out);
            for (guard, outs) in &f.arms {
                if let Some(g) = guard {
                    collect_expr_labels(g, out);
                }
                collect_out_labels(outs, out);
            }
        }
        ExprKind::Sync(ps) => ps.iter().for_each(|p| pat(p, out)),
    }
}

fn collect_out_labels(outs: &[OutRecord], out: &mut Vec<Label>) {
    for item in outs.iter().flat_map(|o| &o.items) {
        match item {
            OutItem::Field { name, from } => {
                out.push(name.clone());
                out.push(from.clone());
            }
            OutItem::Tag { name, value } => {
                out.push(name.clone());
                collect_expr_labels(value, out);
            }
        }
    }
}

fn collect_expr_labels(e: &TagExpr, out: &mut Vec<Label>) {
    match &e.kind {
        TagExprKind::Int(_) => {}
        TagExprKind::Tag(l) => out.push(l.clone()),
        TagExprKind::Unary(_, a) => collect_expr_labels(a, out),
        TagExprKind::Binary(_, a, b) => {
            collect_expr_labels(a, out);
            collect_expr_labels(b, out);
        }
        TagExprKind::Cond(a, b, c) => {
            collect_expr_labels(a, out);
            collect_expr_labels(b, out);
            collect_expr_labels(c, out);
        }
        TagExprKind::Call(_, args) => args.iter().for_each(|a| collect_expr_labels(a, out)),
    }
}

/// The in-scope name nearest to `name` by edit distance, if near enough to suggest.
fn closest(name: &str, scope: &[&NetDef]) -> Option<Arc<str>> {
    let candidates = scope.iter().flat_map(|d| {
        d.boxes
            .iter()
            .map(|b| &b.name)
            .chain(d.nets.iter().map(|n| &n.name))
    });
    candidates
        .map(|c| (edit_distance(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.clone())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for j in 0..b.len() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != b[j]))
                .min(row[j] + 1)
                .min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}
