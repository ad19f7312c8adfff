//! Syntax tree to canonical text: what the builder's networks are checked from, and what the
//! parser's round-trip tests compare.

use std::fmt::Write;

use super::ast::*;

pub(crate) fn net_def(def: &NetDef) -> String {
    let mut out = String::new();
    write_net(&mut out, def, 0);
    out
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("    ");
    }
}

fn write_net(out: &mut String, def: &NetDef, depth: usize) {
    indent(out, depth);
    let _ = write!(out, "net {}", def.name);
    if let Some(sig) = &def.sig {
        let maps: Vec<String> = sig.iter().map(mapping).collect();
        let _ = write!(out, " ({})", maps.join(", "));
    }
    if !def.boxes.is_empty() || !def.nets.is_empty() {
        out.push_str(" {\n");
        for b in &def.boxes {
            indent(out, depth + 1);
            let _ = writeln!(out, "box {} ({});", b.name, box_sig(&b.sig));
        }
        for n in &def.nets {
            write_net(out, n, depth + 1);
        }
        indent(out, depth);
        out.push('}');
    }
    let _ = writeln!(out, " connect {};", expr(&def.body));
}

pub(crate) fn box_sig(sig: &BoxSig) -> String {
    let outs: Vec<String> = sig
        .outputs
        .iter()
        .map(|p| labels(&p.labels, "(", ")"))
        .collect();
    let input = labels(&sig.input.labels, "(", ")");
    if outs.is_empty() {
        format!("{input} ->")
    } else {
        format!("{input} -> {}", outs.join(" | "))
    }
}

fn mapping(m: &Mapping) -> String {
    let side = |ps: &[Pattern]| {
        ps.iter()
            .map(|p| labels(&p.labels, "{", "}"))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    format!("{} -> {}", side(&m.inputs), side(&m.outputs))
}

fn label(l: &Label) -> String {
    match l.kind {
        LabelKind::Field => l.name.to_string(),
        LabelKind::Tag => format!("<{}>", l.name),
        LabelKind::BindingTag => format!("<#{}>", l.name),
    }
}

fn labels(ls: &[Label], open: &str, close: &str) -> String {
    let parts: Vec<String> = ls.iter().map(label).collect();
    format!("{open}{}{close}", parts.join(", "))
}

pub(crate) fn pattern(p: &Pattern) -> String {
    let mut s = labels(&p.labels, "{", "}");
    if let Some(g) = &p.guard {
        let _ = write!(s, " if <{}>", tag_expr(g, 0));
    }
    s
}

fn patterns(ps: &[Pattern]) -> String {
    ps.iter().map(pattern).collect::<Vec<_>>().join(", ")
}

/// Binding strength: a child printed below its parent's level is parenthesised.
fn level(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Choice(Order::Any, _) => 0,
        ExprKind::Choice(Order::Kept, _) => 1,
        ExprKind::Serial(..) => 2,
        ExprKind::Star(..) | ExprKind::Split(..) | ExprKind::Feedback(..) => 3,
        _ => 4,
    }
}

fn operand(e: &Expr, min: u8) -> String {
    if level(e) < min {
        format!("({})", expr(e))
    } else {
        expr(e)
    }
}

pub(crate) fn expr(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Ref(name) => name.to_string(),
        ExprKind::Serial(a, b) => format!("{} .. {}", operand(a, 2), operand(b, 3)),
        ExprKind::Choice(order, branches) => {
            let (op, min) = match order {
                Order::Any => (" | ", 1),
                Order::Kept => (" || ", 2),
            };
            branches
                .iter()
                .map(|b| operand(b, min))
                .collect::<Vec<_>>()
                .join(op)
        }
        ExprKind::Star(order, a, exits) => {
            let op = if *order == Order::Kept { "**" } else { "*" };
            format!("{} {op} {}", operand(a, 3), patterns(exits))
        }
        ExprKind::Split(order, a, tag) => {
            let op = if *order == Order::Kept { "!!" } else { "!" };
            format!("{} {op} {}", operand(a, 3), label(tag))
        }
        ExprKind::Feedback(a, back) => format!("{} \\ {}", operand(a, 3), patterns(back)),
        ExprKind::Filter(None) => "[]".to_owned(),
        ExprKind::Filter(Some(f)) => {
            let mut s = format!("[{} -> ", pattern(&f.pattern));
            for (i, (guard, outs)) in f.arms.iter().enumerate() {
                if i > 0 {
                    s.push_str(" else ");
                }
                let action = outs.iter().map(out_record).collect::<Vec<_>>().join("; ");
                match guard {
                    // An empty action emits nothing: `if <c> then else ...`.
                    Some(g) if action.is_empty() => {
                        let _ = write!(s, "if <{}> then", tag_expr(g, 0));
                    }
                    Some(g) => {
                        let _ = write!(s, "if <{}> then {action}", tag_expr(g, 0));
                    }
                    None => s.push_str(&action),
                }
            }
            s.push(']');
            s
        }
        ExprKind::Sync(ps) => format!("[| {} |]", patterns(ps)),
    }
}

fn out_record(o: &OutRecord) -> String {
    let items: Vec<String> = o
        .items
        .iter()
        .map(|item| match item {
            OutItem::Field { name, from } if name.name == from.name => name.name.to_string(),
            OutItem::Field { name, from } => format!("{} = {}", name.name, from.name),
            OutItem::Tag { name, value } => {
                let hash = if name.kind == LabelKind::BindingTag {
                    "#"
                } else {
                    ""
                };
                match &value.kind {
                    TagExprKind::Tag(l) if l.name == name.name && l.kind == name.kind => {
                        format!("<{hash}{}>", name.name)
                    }
                    _ => format!("<{hash}{} = {}>", name.name, tag_expr(value, 0)),
                }
            }
        })
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// Precedence of a tag expression, loosest first, as the grammar climbs.
fn prec(e: &TagExpr) -> u8 {
    match &e.kind {
        TagExprKind::Cond(..) => 0,
        TagExprKind::Binary(op, ..) => match op {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq | BinOp::Ne => 3,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
        },
        TagExprKind::Unary(..) => 7,
        _ => 8,
    }
}

pub(crate) fn tag_expr(e: &TagExpr, min: u8) -> String {
    let s = match &e.kind {
        TagExprKind::Int(v) => v.to_string(),
        TagExprKind::Tag(l) if l.kind == LabelKind::BindingTag => format!("#{}", l.name),
        TagExprKind::Tag(l) => l.name.to_string(),
        TagExprKind::Unary(op, a) => {
            let sym = if *op == UnOp::Neg { "-" } else { "!" };
            format!("{sym}{}", tag_expr(a, 7))
        }
        TagExprKind::Binary(op, a, b) => {
            let p = prec(e);
            // Left-associative: the right operand needs strictly tighter binding.
            format!("{} {} {}", tag_expr(a, p), op.symbol(), tag_expr(b, p + 1))
        }
        TagExprKind::Cond(c, a, b) => format!(
            "{} ? {} : {}",
            tag_expr(c, 1),
            tag_expr(a, 0),
            tag_expr(b, 0)
        ),
        TagExprKind::Call(f, args) => {
            let args: Vec<String> = args.iter().map(|a| tag_expr(a, 0)).collect();
            format!("{}({})", f.name(), args.join(", "))
        }
    };
    if prec(e) < min {
        format!("({s})")
    } else {
        s
    }
}
