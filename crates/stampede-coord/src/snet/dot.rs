//! A checked network as a Graphviz DOT picture, with the inferred record types on the edges.

use std::fmt::Write;

use super::network::{Network, NodeId, NodeKind};
use super::types::LabelSet;

impl Network {
    /// The network as Graphviz DOT text: boxes, filters and synchrocells as nodes, combinators
    /// as clusters and routing points, each edge labelled with the record types it carries.
    pub fn dot(&self) -> String {
        let mut d = Dot {
            net: self,
            out: String::new(),
            edges: String::new(),
        };
        let _ = writeln!(d.out, "digraph \"{}\" {{", esc(&self.name));
        d.out
            .push_str("  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=11];\n");
        d.out
            .push_str("  edge [fontname=\"Helvetica\", fontsize=9];\n");
        d.out.push_str("  input [shape=circle, label=\"in\"];\n  output [shape=doublecircle, label=\"out\"];\n");
        let (entry, exit) = d.node(self.root, 1);
        let in_types = self.input.clone();
        d.edge("input", &entry, &in_types, "");
        let out_types = self.output.clone();
        d.edge(&exit, "output", &out_types, "");
        let Dot { mut out, edges, .. } = d;
        out.push_str(&edges);
        out.push_str("}\n");
        out
    }
}

struct Dot<'a> {
    net: &'a Network,
    out: String,
    edges: String,
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Dot<'_> {
    fn types(&self, sets: &[LabelSet]) -> String {
        sets.iter()
            .map(|s| self.net.labels.show(*s).to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn edge(&mut self, from: &str, to: &str, types: &[LabelSet], style: &str) {
        let label = esc(&self.types(types));
        let _ = writeln!(self.edges, "  {from} -> {to} [label=\"{label}\"{style}];");
    }

    fn text(&self, n: NodeId) -> String {
        self.net.nodes[n].text.clone().unwrap_or_default()
    }

    fn leaf(&mut self, n: NodeId, depth: usize, shape: &str, label: &str) -> (String, String) {
        let id = format!("n{n}");
        let pad = "  ".repeat(depth);
        let _ = writeln!(
            self.out,
            "{pad}{id} [shape={shape}, label=\"{}\"];",
            esc(label)
        );
        (id.clone(), id)
    }

    fn point(&mut self, id: &str, depth: usize, shape: &str, label: &str) {
        let pad = "  ".repeat(depth);
        let _ = writeln!(
            self.out,
            "{pad}{id} [shape={shape}, label=\"{}\"];",
            esc(label)
        );
    }

    fn cluster_open(&mut self, n: NodeId, depth: usize, label: &str, style: &str) {
        let pad = "  ".repeat(depth);
        let _ = writeln!(self.out, "{pad}subgraph cluster_n{n} {{");
        let _ = writeln!(self.out, "{pad}  label=\"{}\"; style={style};", esc(label));
    }

    fn cluster_close(&mut self, depth: usize) {
        let _ = writeln!(self.out, "{}}}", "  ".repeat(depth));
    }

    /// Draws node `n`, returning the ids where records enter and leave it.
    fn node(&mut self, n: NodeId, depth: usize) -> (String, String) {
        let node = &self.net.nodes[n];
        match node.kind.clone() {
            NodeKind::Box(b) => {
                let info = &self.net.boxes[b];
                let label = format!("{}\n{}", info.name, info.signature(&self.net.labels));
                self.leaf(n, depth, "box", &label)
            }
            NodeKind::Filter(_) => {
                let label = self.text(n);
                self.leaf(n, depth, "parallelogram", &label)
            }
            NodeKind::Sync(_) => {
                let label = self.text(n);
                self.leaf(n, depth, "hexagon", &label)
            }
            NodeKind::Serial(a, b) => {
                let (a_in, a_out) = self.node(a, depth);
                let (b_in, b_out) = self.node(b, depth);
                let types = self.net.nodes[b].arriving.clone();
                self.edge(&a_out, &b_in, &types, "");
                (a_in, b_out)
            }
            NodeKind::Choice { order, branches } => {
                let (split, merge) = (format!("n{n}_route"), format!("n{n}_merge"));
                let sym = if order == super::ast::Order::Kept {
                    "||"
                } else {
                    "|"
                };
                self.point(&split, depth, "diamond", sym);
                self.point(&merge, depth, "point", "");
                for b in branches {
                    let (b_in, b_out) = self.node(b, depth);
                    let arriving = self.net.nodes[b].arriving.clone();
                    let leaving = self.net.nodes[b].leaving.clone();
                    self.edge(&split, &b_in, &arriving, "");
                    self.edge(&b_out, &merge, &leaving, "");
                }
                (split, merge)
            }
            NodeKind::Star { order, body, exits } => {
                let op = if order == super::ast::Order::Kept {
                    "**"
                } else {
                    "*"
                };
                let exits: Vec<String> = exits
                    .iter()
                    .map(|p| self.net.labels.show(p.labels).to_string())
                    .collect();
                self.cluster_open(n, depth, &format!("{op} {}", exits.join(", ")), "dashed");
                let test = format!("n{n}_exit");
                self.point(&test, depth + 1, "diamond", "exit?");
                let (b_in, b_out) = self.node(body, depth + 1);
                self.cluster_close(depth);
                let arriving = self.net.nodes[body].arriving.clone();
                let back = self.net.nodes[body].leaving.clone();
                self.edge(&test, &b_in, &arriving, "");
                self.edge(&b_out, &test, &back, ", style=dashed, constraint=false");
                (test.clone(), test)
            }
            NodeKind::Split { order, body, tag } => {
                let op = if order == super::ast::Order::Kept {
                    "!!"
                } else {
                    "!"
                };
                self.cluster_open(
                    n,
                    depth,
                    &format!(
                        "{op} {} (one replica per value)",
                        self.net.labels.written(tag)
                    ),
                    "dashed",
                );
                let ends = self.node(body, depth + 1);
                self.cluster_close(depth);
                ends
            }
            NodeKind::Feedback { body, back } => {
                let pats: Vec<String> = back
                    .iter()
                    .map(|p| self.net.labels.show(p.labels).to_string())
                    .collect();
                self.cluster_open(n, depth, &format!("\\ {}", pats.join(", ")), "dashed");
                let entry = format!("n{n}_entry");
                let test = format!("n{n}_back");
                self.point(&entry, depth + 1, "point", "");
                self.point(&test, depth + 1, "diamond", "back?");
                let (b_in, b_out) = self.node(body, depth + 1);
                self.cluster_close(depth);
                let arriving = self.net.nodes[body].arriving.clone();
                let leaving = self.net.nodes[body].leaving.clone();
                self.edge(&entry, &b_in, &arriving, "");
                self.edge(&b_out, &test, &leaving, "");
                let fed: Vec<LabelSet> = leaving
                    .iter()
                    .copied()
                    .filter(|w| back.iter().any(|p| self.net.labels.matches(p.labels, *w)))
                    .collect();
                self.edge(&test, &entry, &fed, ", style=dashed, constraint=false");
                (entry, test)
            }
            NodeKind::Net { name, body } => {
                self.cluster_open(n, depth, &format!("net {name}"), "rounded");
                let ends = self.node(body, depth + 1);
                self.cluster_close(depth);
                ends
            }
        }
    }
}
