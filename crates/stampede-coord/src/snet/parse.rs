//! Text to syntax tree, through the PEG grammar in `snet.pest`.

use std::sync::{Arc, Mutex};

use pest::error::{ErrorVariant, InputLocation};
use pest::iterators::Pair;
use pest::Parser as _;
use pest_derive::Parser;

use super::ast::*;
use super::diag::Diagnostic;

#[derive(Parser)]
#[grammar = "snet/snet.pest"]
struct Grammar;

/// Parses a whole program: one top-level `net` definition.
pub(crate) fn program(source: &str) -> Result<NetDef, Box<Diagnostic>> {
    let mut pairs = match Grammar::parse(Rule::program, source) {
        Ok(pairs) => pairs,
        Err(e) => return Err(Box::new(syntax_error(source, e))),
    };
    let program = pairs.next().expect("the program rule always yields a pair");
    check_literals(program.clone())?;
    let net = program
        .into_inner()
        .next()
        .expect("a program holds one net");
    Ok(net_def(net))
}

fn span(pair: &Pair<'_, Rule>) -> Span {
    let s = pair.as_span();
    Span::new(s.start(), s.end())
}

/// Serialises the detailed re-parse of a failed program: pest's switch for tracking the tokens
/// tried is process-wide, and read when a parse starts.
static DETAIL: Mutex<()> = Mutex::new(());

/// A parse error as a diagnostic: where the parse got furthest, the tokens that could have
/// come there, what came instead, and the bracket left open if a closing one was expected.
fn syntax_error(source: &str, e: pest::error::Error<Rule>) -> Diagnostic {
    // The fast parse records only the rules tried, so it misplaces errors after punctuation
    // (`(b);` reports the `b`); parse again tracking every token tried.
    let detailed = {
        let _guard = DETAIL.lock().unwrap_or_else(|p| p.into_inner());
        pest::set_error_detail(true);
        let again = Grammar::parse(Rule::program, source);
        pest::set_error_detail(false);
        again.err().and_then(|e| e.parse_attempts())
    };
    let (at, expected) = match detailed {
        Some(attempts) => {
            let at = attempts.max_position;
            let tokens: Vec<String> = attempts
                .expected_tokens()
                .iter()
                .map(ToString::to_string)
                .collect();
            (at, expected_tokens(source, at, &tokens))
        }
        None => {
            let at = match e.location {
                InputLocation::Pos(p) => p,
                InputLocation::Span((a, _)) => a,
            };
            let names = match &e.variant {
                ErrorVariant::ParsingError { positives, .. } => positives
                    .iter()
                    .filter_map(|r| rule_name(*r))
                    .map(str::to_owned)
                    .collect(),
                ErrorVariant::CustomError { message } => vec![message.clone()],
            };
            (at, names)
        }
    };
    let expected = one_of(expected);
    let found = found_at(source, at);
    let span = if at >= source.trim_end().len() {
        // At the end of the input, point just after the last token rather than past the end.
        let end = source.trim_end().len();
        Span::new(end, end)
    } else {
        // The whole word or token found, else one character.
        let rest = &source[at..];
        let word = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let token = TOKENS
            .iter()
            .find(|t| rest.starts_with(**t))
            .map_or(0, |t| t.len());
        let one = rest.chars().next().map_or(0, char::len_utf8);
        Span::new(at, at + word.max(token).max(one))
    };
    let mut d = Diagnostic::new(
        "S0001",
        format!("syntax error: expected {expected}, found {found}"),
        span,
        format!("expected {expected}"),
    );
    if let Some((open, close)) = unclosed(source, at) {
        if expected.contains(&format!("`{close}`")) {
            d = d.related(
                Span::new(open, open + close.len()),
                format!("this bracket is not closed by a `{close}`"),
            );
        }
    }
    d
}

/// `a`, `a or b`, `a, b or c`.
fn one_of(mut names: Vec<String>) -> String {
    match names.len() {
        0 => "valid syntax".to_owned(),
        1 => names.pop().expect("one name"),
        _ => {
            let last = names.pop().expect("two or more names");
            format!("{} or {last}", names.join(", "))
        }
    }
}

/// The tokens pest tried at the error, as the user would name them: punctuation quoted,
/// combinators, operators and tag-expression starts in words.
fn expected_tokens(source: &str, at: usize, tokens: &[String]) -> Vec<String> {
    // pest names a character range `a..z`; no literal of the grammar looks like that.
    let mut letters = tokens.iter().any(|t| t == "a..z");
    let mut digits = tokens.iter().any(|t| t == "0..9");
    let mut words: Vec<&str> = tokens
        .iter()
        .map(String::as_str)
        .filter(|t| !matches!(*t, "a..z" | "A..Z" | "0..9"))
        .collect();
    // Whitespace and comments may come anywhere; `_` and the letter ranges right after a name
    // only say that the name could go on.
    let in_word = source[..at]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    words.retain(|w| !matches!(*w, " " | "\t" | "\r" | "\n" | "//" | "/*" | "_"));
    let has = |words: &[&str], w: &str| words.contains(&w);
    let mut out: Vec<String> = Vec::new();
    let mut groups: Vec<&str> = Vec::new();
    if has(&words, "abs") && has(&words, "#") {
        // Where a tag expression may start: `-x`, `!x`, `#b`, `(`, `abs(`, a tag or a number.
        words.retain(|w| !matches!(*w, "abs" | "min" | "max" | "#" | "-" | "!" | "("));
        groups.push("a tag expression");
        letters = false;
        digits = false;
    }
    if has(&words, "&&") || has(&words, "==") || has(&words, "*") && has(&words, "/") {
        // After an operand of a tag expression (`>` also closes the `<...>`, so it stays).
        words.retain(|w| {
            !matches!(
                *w,
                "*" | "/" | "%" | "+" | "-" | "<" | "<=" | ">=" | "==" | "!=" | "&&" | "||" | "?"
            )
        });
        groups.push("an operator");
    }
    if has(&words, "**") && has(&words, "!!") && has(&words, "\\") {
        // After a network operand: `*`, `**`, `!`, `!!`, `\`.
        words.retain(|w| !matches!(*w, "*" | "**" | "!" | "!!" | "\\"));
        groups.push("a combinator (`*`, `!`, `\\`)");
    }
    words.sort_unstable();
    words.dedup();
    out.extend(words.iter().map(|w| format!("`{w}`")));
    if letters && !in_word {
        out.push("a name".to_owned());
    }
    if digits && !in_word && !letters {
        out.push("an integer".to_owned());
    }
    out.extend(groups.iter().map(|g| (*g).to_owned()));
    out
}

/// The grammar's tokens of more than one character, longest first.
const TOKENS: [&str; 14] = [
    "..", "->", "[|", "|]", "||", "&&", "==", "!=", "<=", ">=", "**", "!!", "/*", "//",
];

/// What the source holds at `at`, for "found ...".
fn found_at(source: &str, at: usize) -> String {
    let rest = &source[at..];
    let Some(c) = rest.chars().next() else {
        return "end of input".to_owned();
    };
    if c.is_ascii_alphanumeric() || c == '_' {
        let word: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        format!("`{word}`")
    } else if let Some(t) = TOKENS.iter().find(|t| rest.starts_with(**t)) {
        format!("`{t}`")
    } else {
        format!("`{c}`")
    }
}

/// The innermost bracket opened before `at` and not closed there, with its closing token;
/// comments are skipped.
fn unclosed(source: &str, at: usize) -> Option<(usize, &'static str)> {
    let bytes = source.as_bytes();
    let mut stack: Vec<(usize, &'static str)> = Vec::new();
    let mut i = 0;
    while i < at.min(bytes.len()) {
        let rest = &source[i..];
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
            continue;
        }
        if rest.starts_with("/*") {
            i += rest.find("*/").map_or(rest.len(), |e| e + 2);
            continue;
        }
        let step = if rest.starts_with("[|") {
            stack.push((i, "|]"));
            2
        } else if rest.starts_with("|]") {
            stack.pop();
            2
        } else {
            match bytes[i] {
                b'(' => stack.push((i, ")")),
                b'[' => stack.push((i, "]")),
                b'{' => stack.push((i, "}")),
                b')' | b']' | b'}' => {
                    stack.pop();
                }
                _ => {}
            }
            // Whole characters: the next slice must start on a character boundary.
            rest.chars().next().map_or(1, char::len_utf8)
        };
        i += step;
    }
    stack.pop()
}

/// Rejects integer literals beyond the tag range, which the grammar admits as digit strings.
fn check_literals(program: Pair<'_, Rule>) -> Result<(), Box<Diagnostic>> {
    for p in program.into_inner().flatten() {
        if p.as_rule() == Rule::int && p.as_str().parse::<i64>().is_err() {
            return Err(Box::new(Diagnostic::new(
                "S0001",
                format!("integer `{}` is too large for a tag", p.as_str()),
                span(&p),
                format!("tags hold integers up to {}", i64::MAX),
            )));
        }
    }
    Ok(())
}

/// What the user is told was expected, for the rules that can begin at a failure point.
fn rule_name(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::ident | Rule::net_ref | Rule::field => "a name",
        Rule::int => "an integer",
        Rule::net_def => "`net`",
        Rule::net_body => "`{`",
        Rule::box_decl => "`box`",
        Rule::box_sig | Rule::box_type => "a box type `(a, <t>)`",
        Rule::net_sig => "a network signature `({a} -> {b})`",
        Rule::mapping | Rule::map_side | Rule::rec_type | Rule::pattern | Rule::filter_pat => {
            "a record type `{a, <t>}`"
        }
        Rule::tag | Rule::btag | Rule::split_tag => "a tag `<t>`",
        Rule::expr | Rule::det_choice | Rule::serial | Rule::postfix => "a network expression",
        Rule::postfix_op | Rule::star_op | Rule::split_op | Rule::feedback_op => "a combinator",
        Rule::guard => "`if <...>`",
        Rule::filter | Rule::filter_def => "a filter `[...]`",
        Rule::arm => "`if <...> then`",
        Rule::action => "output records",
        Rule::sync => "a synchrocell `[| ... |]`",
        Rule::out_rec => "an output record `{...}`",
        Rule::out_field | Rule::out_tag | Rule::out_btag => "an output label",
        Rule::texpr
        | Rule::ternary
        | Rule::t_or
        | Rule::t_and
        | Rule::t_eq
        | Rule::t_rel
        | Rule::t_add
        | Rule::t_mul
        | Rule::t_unary
        | Rule::call
        | Rule::tag_ref => "a tag expression",
        Rule::or_op | Rule::and_op | Rule::eq_op | Rule::rel_op | Rule::add_op | Rule::mul_op => {
            "an operator"
        }
        Rule::EOI => "end of input",
        Rule::semi => "`;`",
        Rule::dots => "`..`",
        _ => return None,
    })
}

fn name(pair: Pair<'_, Rule>) -> (Arc<str>, Span) {
    (Arc::from(pair.as_str()), span(&pair))
}

fn net_def(pair: Pair<'_, Rule>) -> NetDef {
    let whole = span(&pair);
    let mut inner = pair.into_inner();
    let (name, name_span) = name(inner.next().expect("net name"));
    let mut def = NetDef {
        name,
        name_span,
        sig: None,
        boxes: Vec::new(),
        nets: Vec::new(),
        body: Expr {
            kind: ExprKind::Filter(None),
            span: whole,
        },
        span: whole,
    };
    for p in inner {
        match p.as_rule() {
            Rule::net_sig => def.sig = Some(p.into_inner().map(mapping).collect()),
            Rule::net_body => {
                for d in p.into_inner() {
                    match d.as_rule() {
                        Rule::box_decl => def.boxes.push(box_decl(d)),
                        Rule::net_def => def.nets.push(net_def(d)),
                        r => unreachable!("net body holds {r:?}"),
                    }
                }
            }
            Rule::expr => def.body = expr(p),
            Rule::semi => {}
            r => unreachable!("net definition holds {r:?}"),
        }
    }
    def
}

fn box_decl(pair: Pair<'_, Rule>) -> BoxDecl {
    let whole = span(&pair);
    let mut inner = pair.into_inner();
    let (name, name_span) = name(inner.next().expect("box name"));
    let sig = box_sig(inner.next().expect("box signature"));
    BoxDecl {
        name,
        name_span,
        sig,
        span: whole,
    }
}

pub(crate) fn box_sig(pair: Pair<'_, Rule>) -> BoxSig {
    let mut types = pair.into_inner().map(record_type);
    let input = types.next().expect("box input type");
    BoxSig {
        input,
        outputs: types.collect(),
    }
}

fn mapping(pair: Pair<'_, Rule>) -> Mapping {
    let whole = span(&pair);
    let mut sides = pair
        .into_inner()
        .map(|side| side.into_inner().map(record_type).collect());
    Mapping {
        inputs: sides.next().expect("mapping inputs"),
        outputs: sides.next().expect("mapping outputs"),
        span: whole,
    }
}

/// `{a, <t>}` or `(a, <t>)`, as a pattern without a guard.
fn record_type(pair: Pair<'_, Rule>) -> Pattern {
    let whole = span(&pair);
    Pattern {
        labels: pair.into_inner().map(label).collect(),
        guard: None,
        span: whole,
    }
}

fn label(pair: Pair<'_, Rule>) -> Label {
    let whole = span(&pair);
    let kind = match pair.as_rule() {
        Rule::field => LabelKind::Field,
        Rule::tag => LabelKind::Tag,
        Rule::btag => LabelKind::BindingTag,
        r => unreachable!("label is {r:?}"),
    };
    let ident = pair.into_inner().next().expect("label name");
    Label {
        kind,
        name: Arc::from(ident.as_str()),
        span: whole,
    }
}

fn pattern(pair: Pair<'_, Rule>) -> Pattern {
    let whole = span(&pair);
    let mut inner = pair.into_inner();
    let mut p = record_type(inner.next().expect("pattern type"));
    p.guard = inner
        .next()
        .map(|g| texpr(g.into_inner().next().expect("guard expression")));
    p.span = whole;
    p
}

fn expr(pair: Pair<'_, Rule>) -> Expr {
    let order = if pair.as_rule() == Rule::expr {
        Order::Any
    } else {
        Order::Kept
    };
    let whole = span(&pair);
    let operand = |p: Pair<'_, Rule>| {
        if order == Order::Any {
            expr(p)
        } else {
            serial(p)
        }
    };
    let mut branches: Vec<Expr> = pair.into_inner().map(operand).collect();
    if branches.len() == 1 {
        branches.pop().expect("one operand")
    } else {
        Expr {
            kind: ExprKind::Choice(order, branches),
            span: whole,
        }
    }
}

fn serial(pair: Pair<'_, Rule>) -> Expr {
    let mut parts = pair
        .into_inner()
        .filter(|p| p.as_rule() != Rule::dots)
        .map(postfix);
    let mut acc = parts.next().expect("serial operand");
    for next in parts {
        let span = acc.span.to(next.span);
        acc = Expr {
            kind: ExprKind::Serial(Box::new(acc), Box::new(next)),
            span,
        };
    }
    acc
}

fn postfix(pair: Pair<'_, Rule>) -> Expr {
    let mut inner = pair.into_inner();
    let mut acc = primary(inner.next().expect("postfix operand"));
    for op in inner {
        let op_span = span(&op);
        let mut parts = op.into_inner();
        let which = parts.next().expect("postfix operator");
        let arg = parts.next().expect("postfix argument");
        let kind = match which.as_rule() {
            Rule::star_op => {
                let order = if which.as_str() == "**" {
                    Order::Kept
                } else {
                    Order::Any
                };
                ExprKind::Star(order, Box::new(acc), exits(arg))
            }
            Rule::split_op => {
                let order = if which.as_str() == "!!" {
                    Order::Kept
                } else {
                    Order::Any
                };
                let tag = label(arg.into_inner().next().expect("split tag"));
                ExprKind::Split(order, Box::new(acc), tag)
            }
            Rule::feedback_op => ExprKind::Feedback(Box::new(acc), exits(arg)),
            r => unreachable!("postfix operator {r:?}"),
        };
        let start = match &kind {
            ExprKind::Star(_, a, _) | ExprKind::Split(_, a, _) | ExprKind::Feedback(a, _) => {
                a.span.start
            }
            _ => unreachable!(),
        };
        acc = Expr {
            kind,
            span: Span::new(start, op_span.end),
        };
    }
    acc
}

fn exits(pair: Pair<'_, Rule>) -> Vec<Pattern> {
    pair.into_inner().map(pattern).collect()
}

fn primary(pair: Pair<'_, Rule>) -> Expr {
    let whole = span(&pair);
    let kind = match pair.as_rule() {
        Rule::net_ref => ExprKind::Ref(Arc::from(pair.as_str())),
        Rule::expr => return expr(pair),
        Rule::filter => ExprKind::Filter(pair.into_inner().next().map(filter_def)),
        Rule::sync => ExprKind::Sync(pair.into_inner().map(pattern).collect()),
        r => unreachable!("primary is {r:?}"),
    };
    Expr { kind, span: whole }
}

fn filter_def(pair: Pair<'_, Rule>) -> Filter {
    let mut inner = pair.into_inner();
    let pattern = pattern(inner.next().expect("filter pattern"));
    let arms = inner
        .map(|p| match p.as_rule() {
            Rule::arm => {
                let mut parts = p.into_inner();
                let guard = texpr(parts.next().expect("arm guard"));
                (Some(guard), action(parts.next().expect("arm action")))
            }
            _ => (None, action(p)),
        })
        .collect();
    Filter { pattern, arms }
}

fn action(pair: Pair<'_, Rule>) -> Vec<OutRecord> {
    pair.into_inner().map(out_record).collect()
}

fn out_record(pair: Pair<'_, Rule>) -> OutRecord {
    let whole = span(&pair);
    OutRecord {
        items: pair.into_inner().map(out_item).collect(),
        span: whole,
    }
}

fn out_item(pair: Pair<'_, Rule>) -> OutItem {
    let whole = span(&pair);
    let rule = pair.as_rule();
    let mut inner = pair.into_inner();
    let ident = inner.next().expect("output label name");
    let (n, n_span) = name(ident);
    match rule {
        Rule::out_field => {
            let target = Label {
                kind: LabelKind::Field,
                name: n.clone(),
                span: whole,
            };
            let from = match inner.next() {
                Some(src) => Label {
                    kind: LabelKind::Field,
                    name: Arc::from(src.as_str()),
                    span: span(&src),
                },
                None => Label {
                    kind: LabelKind::Field,
                    name: n,
                    span: n_span,
                },
            };
            OutItem::Field { name: target, from }
        }
        Rule::out_tag | Rule::out_btag => {
            let kind = if rule == Rule::out_tag {
                LabelKind::Tag
            } else {
                LabelKind::BindingTag
            };
            let target = Label {
                kind,
                name: n.clone(),
                span: whole,
            };
            let value = match inner.next() {
                Some(e) => texpr(e),
                None => TagExpr {
                    kind: TagExprKind::Tag(Label {
                        kind,
                        name: n,
                        span: n_span,
                    }),
                    span: n_span,
                },
            };
            OutItem::Tag {
                name: target,
                value,
            }
        }
        r => unreachable!("output item {r:?}"),
    }
}

fn texpr(pair: Pair<'_, Rule>) -> TagExpr {
    let whole = span(&pair);
    match pair.as_rule() {
        Rule::texpr => texpr(pair.into_inner().next().expect("expression")),
        Rule::ternary => {
            let mut inner = pair.into_inner();
            let cond = texpr(inner.next().expect("condition"));
            match (inner.next(), inner.next()) {
                (Some(a), Some(b)) => TagExpr {
                    kind: TagExprKind::Cond(Box::new(cond), Box::new(texpr(a)), Box::new(texpr(b))),
                    span: whole,
                },
                _ => cond,
            }
        }
        Rule::t_or | Rule::t_and | Rule::t_eq | Rule::t_rel | Rule::t_add | Rule::t_mul => {
            let mut inner = pair.into_inner();
            let mut acc = texpr(inner.next().expect("operand"));
            while let Some(op) = inner.next() {
                let rhs = texpr(inner.next().expect("operand after operator"));
                let op = binop(op.as_str());
                let span = acc.span.to(rhs.span);
                acc = TagExpr {
                    kind: TagExprKind::Binary(op, Box::new(acc), Box::new(rhs)),
                    span,
                };
            }
            acc
        }
        Rule::t_unary => {
            let parts: Vec<_> = pair.into_inner().collect();
            let (ops, atom) = parts.split_at(parts.len() - 1);
            let mut acc = texpr(atom[0].clone());
            for op in ops.iter().rev() {
                let u = if op.as_str() == "-" {
                    UnOp::Neg
                } else {
                    UnOp::Not
                };
                let span = span(op).to(acc.span);
                acc = TagExpr {
                    kind: TagExprKind::Unary(u, Box::new(acc)),
                    span,
                };
            }
            acc
        }
        Rule::int => {
            // The grammar admits digits only, and `check_literals` rejected overflows.
            let v = pair.as_str().parse::<i64>().unwrap_or(i64::MAX);
            TagExpr {
                kind: TagExprKind::Int(v),
                span: whole,
            }
        }
        Rule::tag_ref => {
            let text = pair.as_str();
            let kind = if text.starts_with('#') {
                LabelKind::BindingTag
            } else {
                LabelKind::Tag
            };
            let ident = pair.into_inner().next().expect("tag name");
            let label = Label {
                kind,
                name: Arc::from(ident.as_str()),
                span: whole,
            };
            TagExpr {
                kind: TagExprKind::Tag(label),
                span: whole,
            }
        }
        Rule::call => {
            let mut inner = pair.into_inner();
            let f = match inner.next().expect("function").as_str() {
                "abs" => Func::Abs,
                "min" => Func::Min,
                _ => Func::Max,
            };
            TagExpr {
                kind: TagExprKind::Call(f, inner.map(texpr).collect()),
                span: whole,
            }
        }
        r => unreachable!("tag expression {r:?}"),
    }
}

fn binop(s: &str) -> BinOp {
    match s {
        "*" => BinOp::Mul,
        "/" => BinOp::Div,
        "%" => BinOp::Rem,
        "+" => BinOp::Add,
        "-" => BinOp::Sub,
        "<" => BinOp::Lt,
        "<=" => BinOp::Le,
        ">" => BinOp::Gt,
        ">=" => BinOp::Ge,
        "==" => BinOp::Eq,
        "!=" => BinOp::Ne,
        "&&" => BinOp::And,
        _ => BinOp::Or,
    }
}
