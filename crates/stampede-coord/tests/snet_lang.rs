//! The S-Net network language: the parser's round trips and precedence, a golden file for
//! every diagnostic the parser and checker give, the record types inferred through every
//! combinator, the embedded builder against the text, and the DOT pictures.
//!
//! Golden files live in `tests/snapshots/` (insta); sample programs in `tests/snet/`.

use std::path::Path;

use proptest::prelude::*;
use stampede_coord::snet::{canonical, Diagnostics, Net, Network};

// ---- helpers

/// The sample programs of `tests/snet/`, by file name, in name order.
fn corpus() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snet");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("tests/snet exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "snet"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).expect("readable sample"))
        })
        .collect();
    files.sort();
    files
}

fn sample(name: &str) -> String {
    corpus()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no sample {name}"))
        .1
}

/// A program that must check; its diagnostics otherwise.
fn checked(file: &str, src: &str) -> Network {
    Network::parse(file, src).unwrap_or_else(|d| panic!("{file} should check:\n{d}"))
}

/// A program that must not check.
fn rejected(file: &str, src: &str) -> Diagnostics {
    match Network::parse(file, src) {
        Ok(_) => panic!("{file} should not check:\n{src}"),
        Err(d) => d,
    }
}

fn codes(d: &Diagnostics) -> Vec<&'static str> {
    d.list().iter().map(|d| d.code).collect()
}

/// The canonical form of a program whose body is `expr`.
fn canon_expr(expr: &str) -> String {
    let src = format!("net n connect {expr};\n");
    canonical(&src).unwrap_or_else(|d| panic!("`{expr}` should parse:\n{d}"))
}

/// A network `t` declaring `decls` and connecting `expr`: its input and output types, sorted.
fn types(decls: &str, expr: &str) -> (Vec<String>, Vec<String>) {
    let src = format!("net t {{\n{decls}\n}} connect {expr};\n");
    let n = checked("types.snet", &src);
    let mut i = n.input_type();
    let mut o = n.output_type();
    i.sort();
    o.sort();
    (i, o)
}

fn set(types: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = types.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

// ---- 1. the parser: round trips and precedence

#[test]
fn every_sample_checks_and_prints_to_a_fixed_point() {
    let files = corpus();
    assert!(files.len() >= 3, "the samples are missing");
    for (name, src) in files {
        let net = checked(&name, &src);
        let once = canonical(&src).unwrap_or_else(|d| panic!("{name}:\n{d}"));
        let twice = canonical(&once).unwrap_or_else(|d| panic!("{name} printed:\n{d}\n{once}"));
        assert_eq!(
            once, twice,
            "{name}: the canonical form is not a fixed point"
        );
        // The printed program is the same network: same types, same picture.
        let again = checked(&name, &once);
        assert_eq!(net.input_type(), again.input_type(), "{name}");
        assert_eq!(net.output_type(), again.output_type(), "{name}");
        assert_eq!(net.dot(), again.dot(), "{name}");
        assert!(
            !once.contains("//") && !once.contains("/*"),
            "comments are dropped"
        );
    }
}

#[test]
fn the_canonical_form_of_every_construct() {
    insta::assert_snapshot!(
        "canonical_everything",
        canonical(&sample("everything.snet")).unwrap()
    );
}

#[test]
fn combinators_bind_as_the_grammar_says() {
    let same = [
        // `|` < `||` < `..` < postfix
        ("A | B .. C", "A | (B .. C)"),
        ("A .. B | C", "(A .. B) | C"),
        ("A | B || C", "A | (B || C)"),
        ("A || B | C", "(A || B) | C"),
        ("A || B .. C", "A || (B .. C)"),
        ("A .. B * {x}", "A .. (B * {x})"),
        ("A * {x} .. B", "(A * {x}) .. B"),
        ("A .. B ! <t>", "A .. (B ! <t>)"),
        ("A .. B \\ {x}", "A .. (B \\ {x})"),
        ("A | B ** {x}", "A | (B ** {x})"),
        // `..` is left-associative; postfix operators apply left to right
        ("A .. B .. C", "(A .. B) .. C"),
        ("A * {x} ! <t>", "(A * {x}) ! <t>"),
        ("A \\ {x} * {y}", "(A \\ {x}) * {y}"),
        ("A !! <#b> ** {x}", "(A !! <#b>) ** {x}"),
        // exit patterns are comma-separated and end at the next combinator
        (
            "A * {a}, {b} if <t == 0> .. B",
            "(A * {a}, {b} if <t == 0>) .. B",
        ),
        ("A * {a} if <t > 0> | B", "(A * {a} if <t > 0>) | B"),
        // redundant brackets vanish
        ("((A)) .. ([])", "A .. []"),
    ];
    for (a, b) in same {
        assert_eq!(canon_expr(a), canon_expr(b), "`{a}` should mean `{b}`");
    }
    let different = [
        ("A .. B .. C", "A .. (B .. C)"),
        ("A | B | C", "(A | B) | C"),
        ("A || B || C", "A || (B || C)"),
        ("A | B", "A || B"),
        ("A * {x}", "A ** {x}"),
        ("A ! <t>", "A !! <t>"),
        ("A ! <t>", "A ! <#t>"),
    ];
    for (a, b) in different {
        assert_ne!(
            canon_expr(a),
            canon_expr(b),
            "`{a}` and `{b}` should differ"
        );
    }
    // The printer keeps exactly the brackets the grammar needs.
    assert_eq!(canon_expr("(A .. B) .. C"), "net n connect A .. B .. C;\n");
    assert_eq!(
        canon_expr("A .. (B .. C)"),
        "net n connect A .. (B .. C);\n"
    );
    assert_eq!(canon_expr("(A | B) | C"), "net n connect (A | B) | C;\n");
    assert_eq!(canon_expr("(A | B) .. C"), "net n connect (A | B) .. C;\n");
    assert_eq!(
        canon_expr("(A .. B) * {x}"),
        "net n connect (A .. B) * {x};\n"
    );
}

#[test]
fn tag_expressions_bind_as_in_c() {
    let guard = |e: &str| canon_expr(&format!("A * {{}} if <{e}>"));
    let same = [
        ("a + b * c", "a + (b * c)"),
        ("a - b - c", "(a - b) - c"),
        ("a / b % c", "(a / b) % c"),
        ("a < b == c < d", "(a < b) == (c < d)"),
        ("a || b && c", "a || (b && c)"),
        ("a && b || c", "(a && b) || c"),
        ("a == b != c", "(a == b) != c"),
        ("c ? a : b ? d : e", "c ? a : (b ? d : e)"),
        ("a || b ? c : d", "(a || b) ? c : d"),
        ("-a * b", "(-a) * b"),
        ("!a == b", "(!a) == b"),
        ("- -a", "-(-a)"),
        ("a > b > c", "(a > b) > c"),
        ("min(a, b) + abs(#k)", "(min(a, b)) + (abs(#k))"),
        ("a >= -1", "a >= (-1)"),
    ];
    for (a, b) in same {
        assert_eq!(guard(a), guard(b), "`{a}` should mean `{b}`");
    }
    let different = [
        ("a - b - c", "a - (b - c)"),
        ("a * b + c", "a * (b + c)"),
        ("c ? a : b", "(c ? a : b) + 0"),
        ("k", "#k"),
    ];
    for (a, b) in different {
        assert_ne!(guard(a), guard(b), "`{a}` and `{b}` should differ");
    }
    assert_eq!(
        guard("(a - (b - c)) * ((d)) + -(e)"),
        "net n connect A * {} if <(a - (b - c)) * d + -e>;\n"
    );
}

#[test]
fn declarations_print_canonically() {
    let src = "net top({a}|{c}->{b},{d}->{e}|{f}){box f((a,<t>)->(b)|(c,<#u>));box sink((a)->);\
               net inner{box g(()->(x));}connect g;}connect[{a}->{x=a,<t=1>};{}]..[]..[|{a},{b}if<t>|];";
    assert_eq!(
        canonical(src).unwrap(),
        "net top ({a} | {c} -> {b}, {d} -> {e} | {f}) {\n    box f ((a, <t>) -> (b) | (c, <#u>));\n    \
         box sink ((a) ->);\n    net inner {\n        box g (() -> (x));\n    } connect g;\n} \
         connect [{a} -> {x = a, <t = 1>}; {}] .. [] .. [| {a}, {b} if <t> |];\n"
    );
    // The arrow of a mapping is the grammar's, not the first `->` of the text.
    assert_eq!(
        canonical("net t ({a /* -> */} | {b} -> {c}) connect [];").unwrap(),
        "net t ({a} | {b} -> {c}) connect [];\n"
    );
}

/// Random network expressions, printed two ways: as the canonical printer should (the fewest
/// brackets, one space around operators), and with every bracket, redundant ones, and
/// arbitrary whitespace and comments between the tokens.
mod gen {
    use proptest::collection::vec;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    pub enum Lab {
        Field(usize),
        Tag(usize),
        BTag(usize),
    }

    #[derive(Clone, Debug)]
    pub enum T {
        Int(u32),
        /// A tag (`t0`) or, when true, a binding tag (`#b0`).
        Tag(bool, usize),
        Un(bool, Box<T>),
        Bin(usize, Box<T>, Box<T>),
        Cond(Box<T>, Box<T>, Box<T>),
        Call(usize, Vec<T>),
    }

    #[derive(Clone, Debug)]
    pub struct Pat(pub Vec<Lab>, pub Option<T>);

    #[derive(Clone, Debug)]
    pub enum Out {
        /// `f1 = f2`, or `f1` alone when the indices agree.
        Field(usize, usize),
        /// `<t1 = e>` or `<#b1 = e>`; `<t1>` copies when `e` is absent.
        Tag(bool, usize, Option<T>),
    }

    #[derive(Clone, Debug)]
    pub struct Filter {
        pub pattern: Vec<Lab>,
        pub arms: Vec<(T, Vec<Vec<Out>>)>,
        pub last: Vec<Vec<Out>>,
    }

    #[derive(Clone, Debug)]
    pub enum E {
        Ref(usize),
        Identity,
        Filter(Filter),
        Sync(Vec<Pat>),
        Serial(Box<E>, Box<E>),
        Choice(bool, Vec<E>),
        Star(bool, Box<E>, Vec<Pat>),
        Split(bool, Box<E>, bool, usize),
        Feedback(Box<E>, Vec<Pat>),
    }

    /// Binary operators by precedence level: (symbol, level), loosest level 1.
    const OPS: [(&str, u8); 13] = [
        ("||", 1),
        ("&&", 2),
        ("==", 3),
        ("!=", 3),
        ("<", 4),
        ("<=", 4),
        (">", 4),
        (">=", 4),
        ("+", 5),
        ("-", 5),
        ("*", 6),
        ("/", 6),
        ("%", 6),
    ];
    const FUNCS: [&str; 3] = ["abs", "min", "max"];

    fn lab() -> impl Strategy<Value = Lab> {
        prop_oneof![
            (0..3usize).prop_map(Lab::Field),
            (0..3usize).prop_map(Lab::Tag),
            (0..2usize).prop_map(Lab::BTag),
        ]
    }

    fn texpr() -> impl Strategy<Value = T> {
        let leaf = prop_oneof![
            (0..1000u32).prop_map(T::Int),
            (any::<bool>(), 0..2usize).prop_map(|(b, i)| T::Tag(b, i)),
        ];
        leaf.prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                (any::<bool>(), inner.clone()).prop_map(|(n, a)| T::Un(n, Box::new(a))),
                (0..OPS.len(), inner.clone(), inner.clone()).prop_map(|(o, a, b)| T::Bin(
                    o,
                    Box::new(a),
                    Box::new(b)
                )),
                (inner.clone(), inner.clone(), inner.clone()).prop_map(|(c, a, b)| T::Cond(
                    Box::new(c),
                    Box::new(a),
                    Box::new(b)
                )),
                (0..FUNCS.len(), vec(inner, 1..3)).prop_map(|(f, args)| T::Call(f, args)),
            ]
        })
    }

    fn pat() -> impl Strategy<Value = Pat> {
        (vec(lab(), 0..3), proptest::option::of(texpr())).prop_map(|(l, g)| Pat(l, g))
    }

    fn out() -> impl Strategy<Value = Vec<Out>> {
        vec(
            prop_oneof![
                (0..3usize, 0..3usize).prop_map(|(a, b)| Out::Field(a, b)),
                (any::<bool>(), 0..2usize, proptest::option::of(texpr()))
                    .prop_map(|(b, i, e)| Out::Tag(b, i, e)),
            ],
            0..3,
        )
    }

    fn filter() -> impl Strategy<Value = Filter> {
        (
            vec(lab(), 0..3),
            vec((texpr(), vec(out(), 0..3)), 0..3),
            vec(out(), 0..3),
        )
            .prop_map(|(pattern, arms, last)| Filter {
                pattern,
                arms,
                last,
            })
    }

    pub fn expr() -> impl Strategy<Value = E> {
        let leaf = prop_oneof![
            3 => (0..4usize).prop_map(E::Ref),
            1 => Just(E::Identity),
            1 => filter().prop_map(E::Filter),
            1 => vec(pat(), 2..4).prop_map(E::Sync),
        ];
        leaf.prop_recursive(5, 40, 4, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone())
                    .prop_map(|(a, b)| E::Serial(Box::new(a), Box::new(b))),
                (any::<bool>(), vec(inner.clone(), 2..4)).prop_map(|(k, bs)| E::Choice(k, bs)),
                (any::<bool>(), inner.clone(), vec(pat(), 1..3)).prop_map(|(k, a, ps)| E::Star(
                    k,
                    Box::new(a),
                    ps
                )),
                (any::<bool>(), inner.clone(), any::<bool>(), 0..2usize)
                    .prop_map(|(k, a, b, i)| E::Split(k, Box::new(a), b, i)),
                (inner, vec(pat(), 1..3)).prop_map(|(a, ps)| E::Feedback(Box::new(a), ps)),
            ]
        })
    }

    // -- the canonical printing

    fn lab_text(l: &Lab) -> String {
        match l {
            Lab::Field(i) => format!("f{i}"),
            Lab::Tag(i) => format!("<t{i}>"),
            Lab::BTag(i) => format!("<#b{i}>"),
        }
    }

    fn rec(ls: &[Lab]) -> String {
        let parts: Vec<String> = ls.iter().map(lab_text).collect();
        format!("{{{}}}", parts.join(", "))
    }

    fn tag_name(binding: bool, i: usize) -> String {
        if binding {
            format!("#b{i}")
        } else {
            format!("t{i}")
        }
    }

    fn t_prec(t: &T) -> u8 {
        match t {
            T::Cond(..) => 0,
            T::Bin(o, ..) => OPS[*o].1,
            T::Un(..) => 7,
            _ => 8,
        }
    }

    pub fn t_canon(t: &T, min: u8) -> String {
        let s = match t {
            T::Int(v) => v.to_string(),
            T::Tag(b, i) => tag_name(*b, *i),
            T::Un(neg, a) => format!("{}{}", if *neg { "-" } else { "!" }, t_canon(a, 7)),
            T::Bin(o, a, b) => {
                let (sym, p) = OPS[*o];
                format!("{} {sym} {}", t_canon(a, p), t_canon(b, p + 1))
            }
            T::Cond(c, a, b) => {
                format!("{} ? {} : {}", t_canon(c, 1), t_canon(a, 0), t_canon(b, 0))
            }
            T::Call(f, args) => {
                let args: Vec<String> = args.iter().map(|a| t_canon(a, 0)).collect();
                format!("{}({})", FUNCS[*f], args.join(", "))
            }
        };
        if t_prec(t) < min {
            format!("({s})")
        } else {
            s
        }
    }

    fn pat_canon(p: &Pat) -> String {
        match &p.1 {
            Some(g) => format!("{} if <{}>", rec(&p.0), t_canon(g, 0)),
            None => rec(&p.0),
        }
    }

    fn pats_canon(ps: &[Pat]) -> String {
        ps.iter().map(pat_canon).collect::<Vec<_>>().join(", ")
    }

    fn out_canon(o: &[Out]) -> String {
        let items: Vec<String> = o
            .iter()
            .map(|item| match item {
                Out::Field(a, b) if a == b => format!("f{a}"),
                Out::Field(a, b) => format!("f{a} = f{b}"),
                Out::Tag(b, i, None) => format!("<{}>", tag_name(*b, *i)),
                // `<t0 = t0>` is the copy `<t0>`.
                Out::Tag(b, i, Some(T::Tag(b2, i2))) if b == b2 && i == i2 => {
                    format!("<{}>", tag_name(*b, *i))
                }
                Out::Tag(b, i, Some(e)) => format!("<{} = {}>", tag_name(*b, *i), t_canon(e, 0)),
            })
            .collect();
        format!("{{{}}}", items.join(", "))
    }

    fn action_canon(a: &[Vec<Out>]) -> String {
        a.iter()
            .map(|o| out_canon(o))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn level(e: &E) -> u8 {
        match e {
            E::Choice(false, _) => 0,
            E::Choice(true, _) => 1,
            E::Serial(..) => 2,
            E::Star(..) | E::Split(..) | E::Feedback(..) => 3,
            _ => 4,
        }
    }

    fn operand(e: &E, min: u8) -> String {
        if level(e) < min {
            format!("({})", canon(e))
        } else {
            canon(e)
        }
    }

    pub fn canon(e: &E) -> String {
        match e {
            E::Ref(i) => format!("A{i}"),
            E::Identity => "[]".to_owned(),
            E::Filter(f) => {
                let mut s = format!("[{} -> ", rec(&f.pattern));
                for (g, a) in &f.arms {
                    let a = action_canon(a);
                    if a.is_empty() {
                        s.push_str(&format!("if <{}> then else ", t_canon(g, 0)));
                    } else {
                        s.push_str(&format!("if <{}> then {a} else ", t_canon(g, 0)));
                    }
                }
                s.push_str(&action_canon(&f.last));
                s.push(']');
                s
            }
            E::Sync(ps) => format!("[| {} |]", pats_canon(ps)),
            E::Serial(a, b) => format!("{} .. {}", operand(a, 2), operand(b, 3)),
            E::Choice(kept, bs) => {
                let (op, min) = if *kept { (" || ", 2) } else { (" | ", 1) };
                bs.iter()
                    .map(|b| operand(b, min))
                    .collect::<Vec<_>>()
                    .join(op)
            }
            E::Star(kept, a, ps) => format!(
                "{} {} {}",
                operand(a, 3),
                if *kept { "**" } else { "*" },
                pats_canon(ps)
            ),
            E::Split(kept, a, b, i) => {
                let tag = if *b {
                    format!("<#b{i}>")
                } else {
                    format!("<t{i}>")
                };
                format!("{} {} {tag}", operand(a, 3), if *kept { "!!" } else { "!" })
            }
            E::Feedback(a, ps) => format!("{} \\ {}", operand(a, 3), pats_canon(ps)),
        }
    }

    // -- the noisy printing: tokens with every bracket, joined by arbitrary separators

    pub struct Noise<'a> {
        pub choices: &'a [u8],
        pub at: usize,
        pub out: Vec<String>,
    }

    impl Noise<'_> {
        fn next(&mut self) -> u8 {
            let c = self.choices[self.at % self.choices.len()];
            self.at += 1;
            c
        }

        fn tok(&mut self, t: &str) {
            self.out.push(t.to_owned());
        }

        /// Sometimes a redundant pair of brackets.
        fn open(&mut self) -> bool {
            let extra = self.next() % 4 == 0;
            if extra {
                self.tok("(");
            }
            extra
        }

        fn close(&mut self, extra: bool) {
            if extra {
                self.tok(")");
            }
        }

        pub fn text(&mut self) -> String {
            const SEPS: [&str; 8] = [
                " ",
                "  ",
                "\n",
                "\t",
                " /* a comment */ ",
                " // to the end of the line\n",
                "\n        ",
                " /**/ ",
            ];
            let toks = std::mem::take(&mut self.out);
            let mut s = String::new();
            for t in toks {
                s.push_str(&t);
                let sep = SEPS[self.next() as usize % SEPS.len()];
                s.push_str(sep);
            }
            s
        }

        fn labs(&mut self, ls: &[Lab]) {
            self.tok("{");
            for (i, l) in ls.iter().enumerate() {
                if i > 0 {
                    self.tok(",");
                }
                match l {
                    Lab::Field(i) => self.tok(&format!("f{i}")),
                    Lab::Tag(i) => {
                        self.tok("<");
                        self.tok(&format!("t{i}"));
                        self.tok(">");
                    }
                    Lab::BTag(i) => {
                        self.tok("<");
                        self.tok("#");
                        self.tok(&format!("b{i}"));
                        self.tok(">");
                    }
                }
            }
            self.tok("}");
        }

        fn tag_ref(&mut self, binding: bool, i: usize) {
            if binding {
                self.tok("#");
                self.tok(&format!("b{i}"));
            } else {
                self.tok(&format!("t{i}"));
            }
        }

        fn t(&mut self, t: &T) {
            let extra = self.open();
            match t {
                T::Int(v) => self.tok(&v.to_string()),
                T::Tag(b, i) => self.tag_ref(*b, *i),
                T::Un(neg, a) => {
                    self.tok("(");
                    self.tok(if *neg { "-" } else { "!" });
                    self.t(a);
                    self.tok(")");
                }
                T::Bin(o, a, b) => {
                    self.tok("(");
                    self.t(a);
                    self.tok(OPS[*o].0);
                    self.t(b);
                    self.tok(")");
                }
                T::Cond(c, a, b) => {
                    self.tok("(");
                    self.t(c);
                    self.tok("?");
                    self.t(a);
                    self.tok(":");
                    self.t(b);
                    self.tok(")");
                }
                T::Call(f, args) => {
                    self.tok(FUNCS[*f]);
                    self.tok("(");
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            self.tok(",");
                        }
                        self.t(a);
                    }
                    self.tok(")");
                }
            }
            self.close(extra);
        }

        fn pats(&mut self, ps: &[Pat]) {
            for (i, p) in ps.iter().enumerate() {
                if i > 0 {
                    self.tok(",");
                }
                self.labs(&p.0);
                if let Some(g) = &p.1 {
                    self.tok("if");
                    self.tok("<");
                    self.t(g);
                    self.tok(">");
                }
            }
        }

        fn action(&mut self, a: &[Vec<Out>]) {
            for (i, o) in a.iter().enumerate() {
                if i > 0 {
                    self.tok(";");
                }
                self.tok("{");
                for (j, item) in o.iter().enumerate() {
                    if j > 0 {
                        self.tok(",");
                    }
                    match item {
                        Out::Field(a, b) => {
                            self.tok(&format!("f{a}"));
                            // Write the source even when it is the field itself.
                            if a != b || self.next() % 2 == 0 {
                                self.tok("=");
                                self.tok(&format!("f{b}"));
                            }
                        }
                        Out::Tag(b, i, e) => {
                            self.tok("<");
                            if *b {
                                self.tok("#");
                            }
                            self.tok(&format!("{}{i}", if *b { "b" } else { "t" }));
                            if let Some(e) = e {
                                self.tok("=");
                                self.t(e);
                            }
                            self.tok(">");
                        }
                    }
                }
                self.tok("}");
            }
        }

        pub fn e(&mut self, e: &E) {
            let extra = self.open();
            match e {
                E::Ref(i) => self.tok(&format!("A{i}")),
                E::Identity => {
                    self.tok("[");
                    self.tok("]");
                }
                E::Filter(f) => {
                    self.tok("[");
                    self.labs(&f.pattern);
                    self.tok("->");
                    for (g, a) in &f.arms {
                        self.tok("if");
                        self.tok("<");
                        self.t(g);
                        self.tok(">");
                        self.tok("then");
                        self.action(a);
                        self.tok("else");
                    }
                    self.action(&f.last);
                    self.tok("]");
                }
                E::Sync(ps) => {
                    self.tok("[|");
                    self.pats(ps);
                    self.tok("|]");
                }
                E::Serial(a, b) => {
                    self.tok("(");
                    self.e(a);
                    self.tok("..");
                    self.e(b);
                    self.tok(")");
                }
                E::Choice(kept, bs) => {
                    self.tok("(");
                    for (i, b) in bs.iter().enumerate() {
                        if i > 0 {
                            self.tok(if *kept { "||" } else { "|" });
                        }
                        // A branch that is itself a choice keeps its brackets.
                        self.e(b);
                    }
                    self.tok(")");
                }
                E::Star(kept, a, ps) => {
                    self.tok("(");
                    self.e(a);
                    self.tok(if *kept { "**" } else { "*" });
                    self.pats(ps);
                    self.tok(")");
                }
                E::Split(kept, a, b, i) => {
                    self.tok("(");
                    self.e(a);
                    self.tok(if *kept { "!!" } else { "!" });
                    self.tok("<");
                    self.tag_ref(*b, *i);
                    self.tok(">");
                    self.tok(")");
                }
                E::Feedback(a, ps) => {
                    self.tok("(");
                    self.e(a);
                    self.tok("\\");
                    self.pats(ps);
                    self.tok(")");
                }
            }
            self.close(extra);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Print, parse, print is stable, and a program written with every bracket and arbitrary
    /// spacing and comments parses to the tree the canonical printer writes with the fewest
    /// brackets: so precedence and associativity are what the grammar says.
    #[test]
    fn random_expressions_round_trip(e in gen::expr(), noise in proptest::collection::vec(any::<u8>(), 1..64)) {
        let expected = format!("net n connect {};\n", gen::canon(&e));
        let mut n = gen::Noise { choices: &noise, at: 0, out: Vec::new() };
        n.e(&e);
        let noisy = format!("net n connect {} ;", n.text());
        let once = canonical(&noisy).map_err(|d| TestCaseError::fail(format!("{d}\n{noisy}")))?;
        prop_assert_eq!(&once, &expected, "noisy source:\n{}", noisy);
        let twice = canonical(&once).map_err(|d| TestCaseError::fail(format!("{d}\n{once}")))?;
        prop_assert_eq!(&twice, &once);
    }
}

// ---- 2. golden diagnostics

/// Renders the diagnostics of a program that must be rejected with exactly `expected` codes,
/// and compares them with the golden file `name`.
fn golden(name: &str, file: &str, src: &str, expected: &[&str]) {
    let d = rejected(file, src);
    assert_eq!(codes(&d), expected, "{name}:\n{d}");
    let text = d.to_string();
    // Every report names the place, quotes the line and marks the span.
    assert!(
        text.contains(&format!("┌─ {file}:")),
        "{name}: no file:line:col\n{text}"
    );
    assert!(text.contains('^'), "{name}: no carets\n{text}");
    for diag in d.list() {
        let (line, col) = d.line_col(diag.span.start);
        assert!(
            text.contains(&format!("{file}:{line}:{col}")),
            "{name}: {file}:{line}:{col} missing\n{text}"
        );
    }
    insta::with_settings!({ description => src, omit_expression => true }, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn s0001_syntax_errors() {
    golden(
        "s0001_missing_semicolon",
        "pipeline.snet",
        "net pipeline {\n    box f ((a) -> (b));\n    box g ((b) -> (c))\n} connect f .. g;\n",
        &["S0001"],
    );
    golden(
        "s0001_missing_final_semicolon",
        "pipeline.snet",
        "net pipeline {\n    box f ((a) -> (b));\n} connect f .. f\n",
        &["S0001"],
    );
    golden(
        "s0001_bad_token",
        "pipeline.snet",
        "net pipeline {\n    box f ((a) -> (b));\n} connect f .. $g;\n",
        &["S0001"],
    );
    golden(
        "s0001_unclosed_bracket",
        "pipeline.snet",
        "net pipeline {\n    box f ((a) -> (b));\n} connect (f .. [{b} -> {c = b}]\n    | f;\n",
        &["S0001"],
    );
    golden(
        "s0001_unclosed_filter",
        "filter.snet",
        "net filter connect [{a} -> {b = a}\n    .. [];\n",
        &["S0001"],
    );
    golden(
        "s0001_unclosed_synchrocell",
        "sync.snet",
        "net sync connect [| {a}, {b} ;\n",
        &["S0001"],
    );
    golden(
        "s0001_incomplete_tag_expression",
        "tags.snet",
        "net tags connect\n    [{<a>} -> {<b = a + >}];\n",
        &["S0001"],
    );
    golden(
        "s0001_guard_on_a_filter_pattern",
        "tags.snet",
        "net tags connect\n    [{<a>} if <a > 0> -> {<a>}];\n",
        &["S0001"],
    );
    golden(
        "s0001_integer_too_large",
        "tags.snet",
        "net tags connect\n    [{<a>} -> {<b = a * 99999999999999999999>}];\n",
        &["S0001"],
    );
}

#[test]
fn s0002_too_many_labels() {
    let mut src = String::from("net wide connect [{} -> {\n");
    for row in 0..13 {
        let cells: Vec<String> = (0..10).map(|i| format!("<l{}>", row * 10 + i)).collect();
        src.push_str(&format!("    {},\n", cells.join(", ")));
    }
    src.push_str("    <last>}];\n");
    golden("s0002_too_many_labels", "wide.snet", &src, &["S0002"]);
}

#[test]
fn s0003_duplicate_labels() {
    golden(
        "s0003_duplicate_label_in_box_type",
        "boxes.snet",
        "net boxes {\n    box f ((a, <t>, a) -> (b));\n} connect f;\n",
        &["S0003"],
    );
    golden(
        "s0003_duplicate_label_in_output",
        "filter.snet",
        "net filter connect\n    [{a, <t>} -> {b = a, <t>, b = a}];\n",
        &["S0003"],
    );
}

#[test]
fn s01xx_names() {
    golden(
        "s0101_duplicate_declaration",
        "names.snet",
        "net names {\n    box f ((a) -> (b));\n    net f connect [];\n} connect f;\n",
        &["S0101"],
    );
    golden(
        "s0102_unknown_name",
        "names.snet",
        "net names {\n    box detect ((image) -> (faces));\n} connect detcet;\n",
        &["S0102"],
    );
    golden(
        "s0102_unknown_name_in_an_unused_network",
        "names.snet",
        "net names {\n    box detect ((image) -> (faces));\n    net spare connect detector;\n} connect detect;\n",
        &["S0102"],
    );
    golden(
        "s0103_recursive_network",
        "names.snet",
        "net names {\n    box f ((a) -> (a));\n    net again connect f .. again;\n} connect again;\n",
        &["S0103"],
    );
    golden(
        "s0103_mutually_recursive_networks",
        "names.snet",
        "net names {\n    net ping connect pong;\n    net pong connect ping;\n} connect ping;\n",
        &["S0103"],
    );
    golden(
        "s0106_conflicting_box_signatures",
        "names.snet",
        "net names {\n    box f ((a, b) -> (c));\n    net inner {\n        box f ((b, a) -> (c));\n    } connect f;\n} connect f | inner;\n",
        &["S0106"],
    );
}

#[test]
fn s02xx_records_that_do_not_fit() {
    golden(
        "s0201_box_cannot_accept",
        "boxes.snet",
        "net boxes {\n    box load ((path) -> (image));\n    box detect ((image, <scale>) -> (faces));\n} connect load .. detect;\n",
        &["S0201"],
    );
    golden(
        "s0201_binding_tag_not_matched_by_subtyping",
        "boxes.snet",
        "net boxes {\n    box f ((a) -> (b));\n} connect [{a} -> {a, <#k = 1>}]\n    .. f;\n",
        &["S0201"],
    );
    golden(
        "s0203_star_loop_type_error",
        "star.snet",
        "net star {\n    box step ((x) -> (x) | (y));\n} connect step * {done};\n",
        &["S0203"],
    );
    golden(
        "s0203_star_entry_type_error",
        "star.snet",
        "net star {\n    box step ((x) -> (x, <done>));\n} connect [{y} -> {y, <k = 0>}]\n    .. step * {x, <done>};\n",
        &["S0203"],
    );
    golden(
        "s0203_star_guard_type_error",
        "star.snet",
        "net star {\n    box step ((x, <n>) -> (y, <n>));\n} connect step * {y, <n>} if <n > 9>;\n",
        &["S0203"],
    );
    golden(
        "s0204_split_without_tag",
        "split.snet",
        "net split {\n    box work ((a, <t>) -> (b));\n} connect [{a} -> {a}] .. work ! <t>;\n",
        &["S0204"],
    );
    golden(
        "s0205_filter_pattern_mismatch",
        "filter.snet",
        "net filter {\n    box f ((a) -> (b) | (c));\n} connect f\n    .. [{b} -> {d = b}];\n",
        &["S0205"],
    );
    golden(
        "s0206_network_signature_rejects_input",
        "sig.snet",
        "net sig {\n    box f ((a) -> (b));\n    net g ({c} -> {d}) connect [{c} -> {d = c}];\n} connect f .. g;\n",
        &["S0206"],
    );
    golden(
        "s0207_network_emits_beyond_signature",
        "sig.snet",
        "net sig {\n    box f ((a) -> (b) | (c));\n    net g ({a} -> {b}) connect f;\n} connect g;\n",
        &["S0207"],
    );
}

#[test]
fn s03xx_choices() {
    golden(
        "s0301_no_branch_accepts",
        "choice.snet",
        "net choice {\n    box f ((a) -> (b) | (c));\n    box g ((b) -> (d));\n} connect f .. (g | [{e} -> {d = e}]);\n",
        &["S0301"],
    );
    golden(
        "s0302_ambiguous_choice",
        "choice.snet",
        "net choice {\n    box f ((a) -> (b, c));\n    box g ((b) -> (d));\n    box h ((c) -> (d));\n} connect f\n    .. (g | h);\n",
        &["S0302"],
    );
}

#[test]
fn s04xx_synchrocells() {
    golden(
        "s0401_synchrocell_can_never_fire",
        "sync.snet",
        "net sync {\n    box f ((a) -> (b) | (c));\n} connect f .. [| {b}, {c}, {d} |];\n",
        &["S0401"],
    );
    golden(
        "s0402_synchrocell_cannot_accept",
        "sync.snet",
        "net sync {\n    box f ((a) -> (b) | (c) | (e));\n} connect f .. [| {b}, {c} |];\n",
        &["S0402"],
    );
}

#[test]
fn s05xx_filters_and_tag_expressions() {
    golden(
        "s0501_filter_uses_missing_field",
        "filter.snet",
        "net filter connect\n    [{a, <t>} -> {b = a, c, <t>}];\n",
        &["S0501"],
    );
    golden(
        "s0502_filter_reads_missing_tag",
        "filter.snet",
        "net filter connect\n    [{a, <t>} -> if <u > 0> then {a} else {a, <t = t + v>}];\n",
        &["S0502", "S0502"],
    );
    golden(
        "s0502_guard_reads_missing_tag",
        "star.snet",
        "net star connect\n    [{<n>} -> {<n = n - 1>}] * {<n>} if <n == 0>, {} if <m == 0>;\n",
        &["S0502"],
    );
    golden(
        "s0503_wrong_arity",
        "tags.snet",
        "net tags connect\n    [{<a>, <b>} -> {<c = min(a) + abs(a, b)>}];\n",
        &["S0503", "S0503"],
    );
}

#[test]
fn s0601_inference_gives_up() {
    // Every pass adds one of thirteen tags, so 2^13 record types would reach the filter.
    let outs: Vec<String> = (0..13).map(|i| format!("        {{<l{i} = 1>}}")).collect();
    let src = format!(
        "net growing connect\n    [{{}} ->\n{}]\n    * {{never}};\n",
        outs.join(";\n")
    );
    golden("s0601_inference_gives_up", "growing.snet", &src, &["S0601"]);
}

#[test]
fn diagnostics_carry_their_place() {
    let src = "net p {\n    box f ((a) -> (b));\n} connect f\n    .. f;\n";
    let d = rejected("p.snet", src);
    assert_eq!(d.file(), "p.snet");
    assert_eq!(d.source(), src);
    let [diag] = d.list() else {
        panic!("one diagnostic: {d}")
    };
    assert_eq!(diag.code, "S0201");
    assert_eq!(&src[diag.span.start..diag.span.end], "f");
    assert_eq!(d.line_col(diag.span.start), (4, 8));
    assert!(diag.message.contains("{b}"), "{}", diag.message);
}

// ---- 3. type inference through every combinator

const F_AB: &str = "box f ((a) -> (b));";

#[test]
fn serial_composes() {
    let t = types("box f ((a) -> (b));\nbox g ((b) -> (c, <t>));", "f .. g");
    assert_eq!(t, (set(&["{a}"]), set(&["{c, <t>}"])));
}

#[test]
fn choice_routes_to_the_best_match() {
    // {a, b} matches both branches; g names more of it, so it goes to g (else {x, b} would
    // come out of f with b inherited).
    let decls = "box f ((a) -> (x));\nbox g ((a, b) -> (y));";
    let t = types(decls, "[{s} -> {a = s}; {a = s, b = s}] .. (f | g)");
    assert_eq!(t, (set(&["{s}"]), set(&["{x}", "{y}"])));
    // The choice's own input type is the union of its branches'.
    let t = types(decls, "f | g");
    assert_eq!(t, (set(&["{a}", "{a, b}"]), set(&["{x}", "{y}"])));
    // A record with more labels than either branch names still goes to the best one.
    let t = types(decls, "[{s} -> {a = s, b = s, c = s}] .. (g | f)");
    assert_eq!(t, (set(&["{s}"]), set(&["{c, y}"])));
}

#[test]
fn boxes_pass_on_the_labels_they_do_not_take() {
    // The extra labels of the input appear on every output variant; a label the box
    // outputs itself is its own.
    let t = types(
        "box h ((b) -> (c) | (d, <t>));",
        "[{s} -> {b = s, e = s, <t = 1>}] .. h",
    );
    assert_eq!(t, (set(&["{s}"]), set(&["{c, e, <t>}", "{d, e, <t>}"])));
    let t = types(
        "box g ((a) -> (b, x));\nbox f ((b) -> (c) | (d, x));",
        "g .. f",
    );
    assert_eq!(t, (set(&["{a}"]), set(&["{c, x}", "{d, x}"])));
}

#[test]
fn filters_drop_what_their_pattern_takes_and_pass_on_the_rest() {
    let t = types(
        "",
        "[{s} -> {a = s, b = s, z = s, <t = 0>}] .. [{a, b, <t>} -> {c = a, <u = t + 1>}]",
    );
    assert_eq!(t, (set(&["{s}"]), set(&["{c, z, <u>}"])));
    // Multi-output and guarded arms: every record any arm can emit, each with the rest.
    let t = types(
        "",
        "[{s} -> {a = s, z = s, <t = 0>}] .. [{a, <t>} -> if <t > 0> then {a}; {b = a} else if <t < 0> then else {<u = -t>}]",
    );
    assert_eq!(t, (set(&["{s}"]), set(&["{a, z}", "{b, z}", "{z, <u>}"])));
    // `[{<t>} -> {}]` strips a tag; `[]` passes everything.
    let t = types("", "[{s} -> {a = s, <t = 0>}] .. [{<t>} -> {}] .. []");
    assert_eq!(t, (set(&["{s}"]), set(&["{a}"])));
}

#[test]
fn binding_tags_match_only_patterns_naming_them_and_are_never_inherited() {
    // {a, <#k>} is not a subtype of {a}: it goes to the branch naming <#k>.
    let t = types(
        "",
        "[{s} -> {a = s}; {a = s, <#k = 1>}] .. ([{a} -> {x = a}] | [{a, <#k>} -> {y = a}])",
    );
    assert_eq!(t, (set(&["{s}"]), set(&["{x}", "{y}"])));
    // A box taking <#k> consumes it; the rest flows on, the binding tag does not.
    let t = types(
        "box g ((a, <#k>) -> (b));",
        "[{s} -> {a = s, z = s, <#k = 7>}] .. g",
    );
    assert_eq!(t, (set(&["{s}"]), set(&["{b, z}"])));
    // A filter reads it with `#k`; it is not passed on unless written.
    let t = types("", "[{a, <#k>} -> {a, <t = #k + 1>}; {a, <#k>}]");
    assert_eq!(t, (set(&["{a, <#k>}"]), set(&["{a, <t>}", "{a, <#k>}"])));
    // A record carrying a binding tag no branch names matches nothing.
    let d = rejected(
        "btag.snet",
        "net t connect [{s} -> {a = s, <#k = 1>}] .. ([{a} -> {x = a}] | [{a, b} -> {y = a}]);",
    );
    assert_eq!(codes(&d), ["S0301"]);
}

#[test]
fn a_star_may_iterate_zero_times_and_emits_only_exit_types() {
    let t = types("box f ((a) -> (a) | (b));", "f * {b}");
    // {b} leaves at once; {a} goes round until it is a {b}.
    assert_eq!(t, (set(&["{a}", "{b}"]), set(&["{b}"])));
    // Exit patterns are tested before the first replica: {b, <k>} never reaches f.
    let t = types(F_AB, "[{s} -> {b = s, <k = 0>}] .. f * {b}");
    assert_eq!(t, (set(&["{s}"]), set(&["{b, <k>}"])));
}

#[test]
fn a_guarded_exit_both_leaves_and_loops() {
    // Unguarded: {<n>} always leaves at once, the body never runs.
    let t = types("", "[{<n>} -> {<n = n + 1>, <m = 0>}] * {<n>}");
    assert_eq!(t, (set(&["{<n>}"]), set(&["{<n>}"])));
    // Guarded: {<n>} may leave or go round, and come back as {<m>, <n>}, which may leave.
    let t = types("", "[{<n>} -> {<n = n + 1>, <m = 0>}] * {<n>} if <n > 5>");
    assert_eq!(t, (set(&["{<n>}"]), set(&["{<n>}", "{<m>, <n>}"])));
    // A guarded pattern does not hide an unguarded one after it: {<m>, <n>} matches both,
    // so it always leaves (were it to go round, {<n>, <z>} would come out).
    let t = types(
        "",
        "([{<n>, <m>} -> {<n>, <z = 0>}] | [{<n>} -> {<n>, <m = 0>}]) * {<n>} if <n > 5>, {<m>}",
    );
    assert_eq!(
        t,
        (
            set(&["{<m>}", "{<n>}", "{<m>, <n>}"]),
            set(&["{<m>}", "{<n>}", "{<m>, <n>}"])
        )
    );
}

#[test]
fn a_split_requires_its_tag_and_passes_it_on() {
    let t = types(F_AB, "f ! <t>");
    assert_eq!(t, (set(&["{a, <t>}"]), set(&["{b, <t>}"])));
    // On a binding tag the operand must take it, and then consumes it.
    let t = types("box g ((a, <#k>) -> (b));", "g !! <#k>");
    assert_eq!(t, (set(&["{a, <#k>}"]), set(&["{b}"])));
}

#[test]
fn feedback_loops_to_a_fixed_point_and_lets_only_non_matching_records_out() {
    let t = types("box f ((a) -> (a) | (b));", "f \\ {a}");
    assert_eq!(t, (set(&["{a}"]), set(&["{b}"])));
    // Guarded: matching records both leave and go round.
    let t = types(
        "",
        "[{a, <n>} -> {a, <n = n - 1>}; {b = a}] \\ {a, <n>} if <n > 0>",
    );
    assert_eq!(t, (set(&["{a, <n>}"]), set(&["{b}", "{a, <n>}"])));
    // Entering records go into the operand first (do-while): {a} itself never leaves.
    let t = types("", "[{a} -> {a, <p = 1>}] \\ {a, <p>} if <p < 3>");
    assert_eq!(t, (set(&["{a}"]), set(&["{a, <p>}"])));
}

#[test]
fn a_synchrocell_emits_its_merge_and_passes_records_through() {
    let t = types("", "[| {a, <t>}, {b} |]");
    assert_eq!(
        t,
        (
            set(&["{a, <t>}", "{b}"]),
            set(&["{a, <t>}", "{b}", "{a, b, <t>}"])
        )
    );
    // The merge is the first pattern's record (with its extra labels) plus the labels the
    // other patterns name; the other records' extra labels are lost.
    let t = types(
        "",
        "[{s} -> {a = s, x = s, <t = 0>}; {b = s, y = s}] .. [| {a, <t>}, {b} |]",
    );
    assert_eq!(
        t,
        (
            set(&["{s}"]),
            set(&["{a, x, <t>}", "{b, y}", "{a, b, x, <t>}"])
        )
    );
}

#[test]
fn deterministic_combinators_have_the_same_types() {
    let decls = "box f ((a) -> (a, <t>) | (b));\nbox g ((a, c) -> (b));";
    for (any, kept) in [
        ("f | g", "f || g"),
        ("f * {b}", "f ** {b}"),
        ("f ! <t>", "f !! <t>"),
        ("(f | g) * {b} ! <k>", "(f || g) ** {b} !! <k>"),
    ] {
        assert_eq!(types(decls, any), types(decls, kept), "{any} / {kept}");
    }
}

#[test]
fn declared_signatures_are_the_interface() {
    let src = "net t ({a} | {c} -> {b}, {d} -> {e}) {\n    box f ((a) -> (b));\n    box g ((c) -> (b));\n    box h ((d) -> (e));\n} connect f | g | h;\n";
    let n = checked("sig.snet", src);
    assert_eq!(n.input_type(), ["{a}", "{c}", "{d}"]);
    let mut out = n.output_type();
    out.sort();
    assert_eq!(out, ["{b}", "{e}"]);
    // A nested network is routed by its signature, and inherits around it.
    let t = types(
        "box f ((a, x) -> (b));\nnet inner ({a, x} -> {b}) connect f;\nbox g ((a) -> (c));",
        "[{s} -> {a = s, x = s, z = s}] .. (inner | g)",
    );
    assert_eq!(t, (set(&["{s}"]), set(&["{b, z}"])));
}

#[test]
fn boxes_keep_their_signatures_in_order() {
    let n = checked(
        "boxes.snet",
        "net t {\n    box detect ((image, <scale>, <#id>) -> (faces, <count>) | ());\n    box sink ((x) ->);\n} connect detect | sink;\n",
    );
    assert_eq!(n.box_names(), ["detect", "sink"]);
    assert_eq!(
        n.box_signature("detect").as_deref(),
        Some("(image, <scale>, <#id>) -> (faces, <count>) | ()")
    );
    assert_eq!(n.box_signature("sink").as_deref(), Some("(x) ->"));
    assert_eq!(n.box_signature("nothing"), None);
}

// ---- 4. the builder against the text

fn face_detect_built() -> Net {
    let load = Net::boxed("load", "(path) -> (image, <id>)");
    let scan = Net::boxed("scan", "(image) -> (window, <x>) | (faces, <n>)");
    let stage = Net::boxed(
        "stage",
        "(window, <level>) -> (window, <level>) | (face) | (reject)",
    );
    let add = Net::boxed("add", "(faces, face) -> (faces)");
    let save = Net::boxed("save", "(faces, <id>) -> (saved)");
    let cascade = Net::named(
        "cascade",
        None,
        Net::filter("[{window} -> {window, <level = 0>}]").then(
            stage
                .then(
                    Net::filter("[{window, <level>} -> {window, <level = level + 1>}]")
                        .or(Net::identity()),
                )
                .star("{face}, {reject}"),
        ),
    );
    let collect = Net::named(
        "collect",
        None,
        Net::sync(&["{faces, <n>}", "{face}"])
            .then(
                add.then(Net::filter("[{<n>} -> {<n = n - 1>}]"))
                    .or(Net::identity()),
            )
            .star("{faces, <n>} if <n == 0>"),
    );
    load.then(scan)
        .then(
            cascade
                .then(Net::filter("[{reject} -> ]").or(Net::identity()))
                .or(Net::filter("[{faces, <n>} -> {faces, <n>}]")),
        )
        .then(collect)
        .then(save)
}

fn cholesky_built() -> Net {
    let factor = Net::boxed("factor", "(a, <k>, <n>) -> (l, <k>, <n>)");
    let panel = Net::boxed("panel", "(l, <k>) -> (p, <k>) | (l, <k>)");
    let update = Net::boxed(
        "update",
        "(l, p, <k>, <n>) -> (a, <k>, <n>) | (result, <n>)",
    );
    let step = Net::named(
        "step",
        None,
        factor
            .then(panel)
            .then(
                Net::sync(&["{l, <k>}", "{p}"]).then(
                    update
                        .or(Net::filter("[{l} -> ]"))
                        .or(Net::filter("[{p} -> ]")),
                ),
            )
            .then(Net::filter("[{a, <k>} -> {a, <k = k + 1>}]").or(Net::identity())),
    );
    step.feedback("{a, <k>, <n>} if <k < n>")
}

fn same_network(built: &Network, text: &Network) {
    assert_eq!(built.name(), text.name());
    assert_eq!(built.input_type(), text.input_type());
    assert_eq!(built.output_type(), text.output_type());
    assert_eq!(built.dot(), text.dot());
    let mut a = built.box_names();
    let mut b = text.box_names();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    for name in a {
        assert_eq!(
            built.box_signature(name),
            text.box_signature(name),
            "{name}"
        );
    }
}

#[test]
fn the_builder_and_the_text_give_the_same_face_detection() {
    let built = face_detect_built()
        .check("face_detect", Some("{path} -> {saved, <n>}"))
        .unwrap_or_else(|d| panic!("{d}"));
    let text = checked("face_detect.snet", &sample("face_detect.snet"));
    same_network(&built, &text);
    assert_eq!(built.input_type(), ["{path}"]);
    assert_eq!(built.output_type(), ["{saved, <n>}"]);
    assert!(built
        .source()
        .starts_with("net face_detect ({path} -> {saved, <n>}) {"));
}

#[test]
fn the_builder_and_the_text_give_the_same_cholesky() {
    let built = cholesky_built()
        .check("cholesky", None)
        .unwrap_or_else(|d| panic!("{d}"));
    let text = checked("cholesky.snet", &sample("cholesky.snet"));
    same_network(&built, &text);
    let mut out = built.output_type();
    out.sort();
    assert_eq!(out, ["{a, <k>, <n>}", "{result, <n>}"]);
}

#[test]
fn the_builder_and_the_text_agree_on_every_combinator() {
    let f = || Net::boxed("f", "(a) -> (a, <t>) | (b)");
    let g = || Net::boxed("g", "(a, c) -> (b)");
    let cases: Vec<(Net, &str)> = vec![
        (f().then(Net::identity()), "f .. []"),
        (f().or(g()), "f | g"),
        (f().or_ordered(g()), "f || g"),
        (
            f().or(g()).or(Net::filter("[{b} -> {b}]")),
            "f | g | [{b} -> {b}]",
        ),
        (f().star("{b}"), "f * {b}"),
        (
            f().star_ordered("{b}, {a, <t>} if <t > 3>"),
            "f ** {b}, {a, <t>} if <t > 3>",
        ),
        (f().split("t"), "f ! <t>"),
        (f().split_ordered("t"), "f !! <t>"),
        (f().feedback("{a, <t>}"), "f \\ {a, <t>}"),
        (
            f().or(g()).star("{b}").split_ordered("k"),
            "(f | g) * {b} !! <k>",
        ),
        (
            f().then(Net::sync(&["{a, <t>}", "{b}"])),
            "f .. [| {a, <t>}, {b} |]",
        ),
    ];
    for (built, expr) in cases {
        let built = built
            .check("t", None)
            .unwrap_or_else(|d| panic!("{expr}: {d}"));
        let src = format!(
            "net t {{\n    box f ((a) -> (a, <t>) | (b));\n    box g ((a, c) -> (b));\n}} connect {expr};\n"
        );
        let text = Network::parse("t.snet", &src);
        // A box the expression does not use is still declared in the text.
        let text = text.unwrap_or_else(|d| panic!("{expr}: {d}"));
        assert_eq!(built.input_type(), text.input_type(), "{expr}");
        assert_eq!(built.output_type(), text.output_type(), "{expr}");
        assert_eq!(built.dot(), text.dot(), "{expr}");
    }
}

#[test]
fn builder_diagnostics_quote_the_printed_program() {
    let load = Net::boxed("load", "(path) -> (image)");
    let detect = Net::boxed("detect", "(image, <scale>) -> (faces)");
    let d = load
        .then(detect)
        .check("pipeline", None)
        .expect_err("detect needs a scale");
    assert_eq!(d.file(), "<builder:pipeline>");
    assert_eq!(codes(&d), ["S0201"]);
    let text = d.to_string();
    assert!(text.contains("┌─ <builder:pipeline>:"), "{text}");
    insta::assert_snapshot!("builder_diagnostic", text);
}

// ---- 5. DOT pictures

/// Structural checks of DOT text: one digraph, balanced braces, every edge between declared
/// nodes; and Graphviz's own check when `dot` is installed.
fn valid_dot(name: &str, dot: &str) {
    assert!(dot.starts_with("digraph \""), "{name}");
    assert!(dot.ends_with("}\n"), "{name}");
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    for c in dot.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            '{' if !in_string => depth += 1,
            '}' if !in_string => {
                depth -= 1;
                assert!(depth >= 0, "{name}: unbalanced braces");
            }
            _ => {}
        }
    }
    assert_eq!(depth, 0, "{name}: unbalanced braces");
    assert!(!in_string, "{name}: unterminated string");
    let declared: Vec<&str> = dot
        .lines()
        .map(str::trim)
        .filter(|l| l.contains(" [shape="))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    for line in dot
        .lines()
        .map(str::trim)
        .filter(|l| l.contains(" -> ") && l.contains("[label="))
    {
        let mut ends = line.split(" [label=").next().unwrap().split(" -> ");
        for end in [ends.next().unwrap(), ends.next().unwrap()] {
            assert!(
                declared.contains(&end),
                "{name}: edge to undeclared `{end}`: {line}"
            );
        }
    }
    match std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(dot.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{name}: graphviz rejects the DOT text: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(_) => {
            eprintln!("note: graphviz `dot` is not installed; {name} checked structurally only")
        }
    }
}

#[test]
fn dot_pictures() {
    for (name, file) in [
        ("dot_face_detect", "face_detect.snet"),
        ("dot_cholesky", "cholesky.snet"),
    ] {
        let dot = checked(file, &sample(file)).dot();
        valid_dot(name, &dot);
        insta::assert_snapshot!(name, dot);
    }
    for (file, src) in corpus() {
        valid_dot(&file, &checked(&file, &src).dot());
    }
}

/// Found by fuzzing: a syntax error after a character of several bytes made the search for
/// the unclosed bracket slice the source inside that character, and panic.
#[test]
fn a_syntax_error_after_a_multibyte_character_is_reported() {
    let src =
        "/*// Til\t\n\t{i\t\tkov\u{7da}t al.t n\u{4}\0\0\0f Zaichenkov\u{7da}t al., Fig./* ig.";
    let d = rejected("fuzzed.snet", src);
    assert_eq!(codes(&d), ["S0001"]);
    let src = "net n connect (f .. \u{e9}\u{e9} {";
    assert_eq!(codes(&rejected("accent.snet", src)), ["S0001"]);
}
