//! The embedded builder: networks composed with methods instead of text. A built network
//! prints as program text and is checked from it, so the builder and the language share one
//! checker, and diagnostics quote the printed program.

use std::sync::Arc;

use super::diag::Diagnostics;
use super::network::Network;

/// A network expression under construction.
///
/// ```
/// use stampede_coord::snet::Net;
/// let double = Net::boxed("double", "(x) -> (x)");
/// let net = double.clone().then(double).star("{x, <done>}");
/// let checked = net.check("twice", None).unwrap();
/// assert_eq!(checked.output_type(), vec!["{x, <done>}"]);
/// ```
#[derive(Clone, Debug)]
pub struct Net {
    part: Part,
    boxes: Vec<(Arc<str>, String)>,
    nets: Vec<SubNet>,
}

#[derive(Clone, Debug)]
struct SubNet {
    name: Arc<str>,
    signature: Option<String>,
    body: Net,
}

#[derive(Clone, Debug)]
enum Part {
    Ref(Arc<str>),
    /// A filter or synchrocell as written.
    Text(String),
    Serial(Box<Part>, Box<Part>),
    Choice(bool, Vec<Part>),
    Star(bool, Box<Part>, String),
    Split(bool, Box<Part>, String),
    Feedback(Box<Part>, String),
}

impl Net {
    fn leaf(part: Part) -> Net {
        Net {
            part,
            boxes: Vec::new(),
            nets: Vec::new(),
        }
    }

    /// A box with its signature, `"(a, <t>) -> (c) | (d)"`.
    pub fn boxed(name: &str, signature: &str) -> Net {
        let mut n = Net::leaf(Part::Ref(Arc::from(name)));
        n.boxes.push((Arc::from(name), signature.to_owned()));
        n
    }

    /// A filter, written as in the language: `"[{a, <t>} -> {b = a, <t = t + 1>}]"`.
    pub fn filter(text: &str) -> Net {
        Net::leaf(Part::Text(text.to_owned()))
    }

    /// The identity filter `[]`.
    pub fn identity() -> Net {
        Net::filter("[]")
    }

    /// A synchrocell over the given patterns, each `"{a, <t>}"` with an optional guard.
    pub fn sync(patterns: &[&str]) -> Net {
        Net::leaf(Part::Text(format!("[| {} |]", patterns.join(", "))))
    }

    /// A named network with an optional declared signature, `"{a} -> {b} | {c}"`.
    pub fn named(name: &str, signature: Option<&str>, body: Net) -> Net {
        let mut n = Net::leaf(Part::Ref(Arc::from(name)));
        n.nets.push(SubNet {
            name: Arc::from(name),
            signature: signature.map(str::to_owned),
            body,
        });
        n
    }

    fn join(mut self, other: Net, part: impl FnOnce(Part, Part) -> Part) -> Net {
        self.boxes.extend(other.boxes);
        self.nets.extend(other.nets);
        self.part = part(self.part, other.part);
        self
    }

    fn wrap(mut self, part: impl FnOnce(Part) -> Part) -> Net {
        self.part = part(self.part);
        self
    }

    /// `self .. next`
    pub fn then(self, next: Net) -> Net {
        self.join(next, |a, b| Part::Serial(Box::new(a), Box::new(b)))
    }

    /// `self | other`: each record goes to the branch whose type matches it best.
    pub fn or(self, other: Net) -> Net {
        self.choice(other, false)
    }

    /// `self || other`: as [`Net::or`], keeping input order at the merge.
    pub fn or_ordered(self, other: Net) -> Net {
        self.choice(other, true)
    }

    fn choice(self, other: Net, ordered: bool) -> Net {
        self.join(other, |a, b| match a {
            Part::Choice(o, mut branches) if o == ordered => {
                branches.push(b);
                Part::Choice(o, branches)
            }
            a => Part::Choice(ordered, vec![a, b]),
        })
    }

    /// `self * exits`: serial replication until a record matches an exit pattern, given as
    /// `"{a}"` or `"{a}, {b} if <t == 0>"`.
    pub fn star(self, exits: &str) -> Net {
        self.wrap(|a| Part::Star(false, Box::new(a), exits.to_owned()))
    }

    /// `self ** exits`: as [`Net::star`], keeping input order.
    pub fn star_ordered(self, exits: &str) -> Net {
        self.wrap(|a| Part::Star(true, Box::new(a), exits.to_owned()))
    }

    /// `self ! <tag>`: one replica per value of the tag (`"t"`, or `"#t"` for a binding tag).
    pub fn split(self, tag: &str) -> Net {
        self.wrap(|a| Part::Split(false, Box::new(a), tag.to_owned()))
    }

    /// `self !! <tag>`: as [`Net::split`], keeping input order.
    pub fn split_ordered(self, tag: &str) -> Net {
        self.wrap(|a| Part::Split(true, Box::new(a), tag.to_owned()))
    }

    /// `self \ patterns`: outputs matching a pattern go back to the input.
    pub fn feedback(self, patterns: &str) -> Net {
        self.wrap(|a| Part::Feedback(Box::new(a), patterns.to_owned()))
    }

    /// The program text of this network as the top-level network `name`.
    pub fn to_source(&self, name: &str, signature: Option<&str>) -> String {
        let mut out = format!("net {name}");
        if let Some(sig) = signature {
            out.push_str(&format!(" ({sig})"));
        }
        let mut boxes: Vec<(Arc<str>, String)> = Vec::new();
        let mut nets: Vec<&SubNet> = Vec::new();
        self.collect(&mut boxes, &mut nets);
        if !boxes.is_empty() || !nets.is_empty() {
            out.push_str(" {\n");
            for (b, sig) in &boxes {
                out.push_str(&format!("    box {b} ({sig});\n"));
            }
            for n in nets {
                out.push_str(&format!("    net {}", n.name));
                if let Some(sig) = &n.signature {
                    out.push_str(&format!(" ({sig})"));
                }
                out.push_str(&format!(" connect {};\n", print(&n.body.part, 0)));
            }
            out.push('}');
        }
        out.push_str(&format!(" connect {};\n", print(&self.part, 0)));
        out
    }

    /// Every box and named network used, each once (a name used with two different
    /// definitions is declared twice, which the checker reports).
    fn collect<'a>(&'a self, boxes: &mut Vec<(Arc<str>, String)>, nets: &mut Vec<&'a SubNet>) {
        for b in &self.boxes {
            if !boxes.contains(b) {
                boxes.push(b.clone());
            }
        }
        for n in &self.nets {
            n.body.collect(boxes, nets);
            let same = |m: &&SubNet| {
                m.name == n.name
                    && m.signature == n.signature
                    && print(&m.body.part, 0) == print(&n.body.part, 0)
            };
            if !nets.iter().any(same) {
                nets.push(n);
            }
        }
    }

    /// Checks the network as the top-level network `name`; diagnostics quote the printed
    /// program under the file name `<builder:name>`.
    pub fn check(&self, name: &str, signature: Option<&str>) -> Result<Network, Diagnostics> {
        Network::parse(
            &format!("<builder:{name}>"),
            &self.to_source(name, signature),
        )
    }
}

/// Prints a part, parenthesised when it binds looser than `min` (0 `|`, 1 `||`, 2 `..`,
/// 3 postfix, 4 atoms).
fn print(p: &Part, min: u8) -> String {
    let (level, s) = match p {
        Part::Ref(n) => (4, n.to_string()),
        Part::Text(t) => (4, t.clone()),
        Part::Serial(a, b) => (2, format!("{} .. {}", print(a, 2), print(b, 3))),
        Part::Choice(ordered, bs) => {
            let (lvl, op) = if *ordered { (1, " || ") } else { (0, " | ") };
            (
                lvl,
                bs.iter()
                    .map(|b| print(b, lvl + 1))
                    .collect::<Vec<_>>()
                    .join(op),
            )
        }
        Part::Star(ordered, a, exits) => (
            3,
            format!(
                "{} {} {exits}",
                print(a, 3),
                if *ordered { "**" } else { "*" }
            ),
        ),
        Part::Split(ordered, a, tag) => (
            3,
            format!(
                "{} {} <{tag}>",
                print(a, 3),
                if *ordered { "!!" } else { "!" }
            ),
        ),
        Part::Feedback(a, pats) => (3, format!("{} \\ {pats}", print(a, 3))),
    };
    if level < min {
        format!("({s})")
    } else {
        s
    }
}
