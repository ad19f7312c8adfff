//! Model specifications (thesis ch. 3.2): the explanatory variables with their ranges, and
//! the candidate basis terms, products of powers and logarithms of the variables.

use std::fmt;

use pest::Parser as _;
use pest_derive::Parser;
use serde::{Deserialize, Serialize};

use crate::error::TuneError;

#[derive(Parser)]
#[grammar = "term.pest"]
struct TermGrammar;

/// An explanatory variable and the range it is calibrated (and valid) over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    pub name: String,
    pub min: f64,
    pub max: f64,
    /// Sampled at integers only (sizes, counts, digit widths).
    pub integer: bool,
}

/// One factor of a basis term: variable `var` to the power `power`, or its base-2
/// logarithm to that power.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Factor {
    pub var: usize,
    pub power: i32,
    pub log: bool,
}

/// A basis term: the product of its factors; no factors is the constant term.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    pub factors: Vec<Factor>,
}

impl Term {
    /// The value of the term at `x` (one value per variable).
    #[inline]
    pub fn eval(&self, x: &[f64]) -> f64 {
        let mut v = 1.0;
        for f in &self.factors {
            let base = if f.log { x[f.var].log2() } else { x[f.var] };
            v *= base.powi(f.power);
        }
        v
    }

    /// `n^2·log2(n)`, with the variables' names.
    pub fn show(&self, vars: &[Variable]) -> String {
        if self.factors.is_empty() {
            return "1".to_owned();
        }
        let parts: Vec<String> = self
            .factors
            .iter()
            .map(|f| {
                let name = &vars[f.var].name;
                let base = if f.log {
                    format!("log2({name})")
                } else {
                    name.clone()
                };
                if f.power == 1 {
                    base
                } else {
                    format!("{base}^{}", f.power)
                }
            })
            .collect();
        parts.join("·")
    }
}

/// How a term is written in a specification: factors by variable name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TermSpec {
    factors: Vec<(String, i32, bool)>,
}

impl TermSpec {
    /// The constant term.
    pub fn one() -> Self {
        TermSpec::default()
    }

    /// `name`.
    pub fn var(name: &str) -> Self {
        TermSpec::one().times(name, 1)
    }

    /// `log2(name)`.
    pub fn log(name: &str) -> Self {
        TermSpec::one().times_log(name, 1)
    }

    /// This term times `name^power`.
    pub fn times(mut self, name: &str, power: i32) -> Self {
        self.factors.push((name.to_owned(), power, false));
        self
    }

    /// This term times `log2(name)^power`.
    pub fn times_log(mut self, name: &str, power: i32) -> Self {
        self.factors.push((name.to_owned(), power, true));
        self
    }

    /// A term in the notation `1`, `n`, `n^2`, `n*log2(n)`, `log2(n)^2*p^-1`.
    ///
    /// ```
    /// use stampede_tune::TermSpec;
    /// let t = TermSpec::parse("n * log2(n)^2").unwrap();
    /// assert_eq!(t, stampede_tune::TermSpec::var("n").times_log("n", 2));
    /// assert!(TermSpec::parse("n +").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<TermSpec, TuneError> {
        let bad = |e: &dyn std::fmt::Display| TuneError::Spec(format!("the term `{text}`: {e}"));
        let term = TermGrammar::parse(Rule::term, text)
            .map_err(|e| bad(&e))?
            .next()
            .expect("a term");
        let mut spec = TermSpec::one();
        for factor in term.into_inner().filter(|p| p.as_rule() == Rule::factor) {
            let mut parts = factor.into_inner();
            let base = parts.next().expect("a factor's base");
            let power = match parts.next() {
                Some(p) => p.as_str().parse::<i32>().map_err(|e| bad(&e))?,
                None => 1,
            };
            spec = match base.as_rule() {
                Rule::log => {
                    spec.times_log(base.into_inner().next().expect("a name").as_str(), power)
                }
                _ => spec.times(base.as_str(), power),
            };
        }
        Ok(spec)
    }
}

/// A model to calibrate: a name (the implementation it describes), its variables, and its
/// candidate terms. The fit keeps the terms that matter and drops the others.
///
/// ```
/// use stampede_tune::{ModelSpec, TermSpec};
/// let spec = ModelSpec::new("radix-8")
///     .variable("n", 1e3, 1e6, true)
///     .term(TermSpec::one())
///     .term(TermSpec::var("n"))
///     .term(TermSpec::var("n").times_log("n", 1))
///     .build()
///     .unwrap();
/// assert_eq!(spec.show_terms(), vec!["1", "n", "n·log2(n)"]);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub name: String,
    pub variables: Vec<Variable>,
    pub terms: Vec<Term>,
}

/// Builds a [`ModelSpec`], checking names and ranges at [`SpecBuilder::build`].
#[derive(Clone, Debug)]
pub struct SpecBuilder {
    name: String,
    variables: Vec<Variable>,
    terms: Vec<TermSpec>,
}

impl ModelSpec {
    #[allow(clippy::new_ret_no_self)] // the builder is the way in
    pub fn new(name: &str) -> SpecBuilder {
        SpecBuilder {
            name: name.to_owned(),
            variables: Vec::new(),
            terms: Vec::new(),
        }
    }

    /// The terms as written, with the variables' names.
    pub fn show_terms(&self) -> Vec<String> {
        self.terms.iter().map(|t| t.show(&self.variables)).collect()
    }

    /// Whether `x` lies in every variable's range: outside, a model of this specification
    /// predicts +∞, since it was never calibrated there (thesis ch. 4).
    pub fn valid(&self, x: &[f64]) -> bool {
        x.len() == self.variables.len()
            && self
                .variables
                .iter()
                .zip(x)
                .all(|(v, x)| *x >= v.min && *x <= v.max)
    }
}

impl SpecBuilder {
    /// An explanatory variable with its range (`integer`: sampled at integers).
    pub fn variable(mut self, name: &str, min: f64, max: f64, integer: bool) -> Self {
        self.variables.push(Variable {
            name: name.to_owned(),
            min,
            max,
            integer,
        });
        self
    }

    /// A candidate basis term.
    pub fn term(mut self, term: TermSpec) -> Self {
        self.terms.push(term);
        self
    }

    pub fn build(self) -> Result<ModelSpec, TuneError> {
        let mut variables: Vec<Variable> = Vec::new();
        for v in self.variables {
            if variables.iter().any(|w| w.name == v.name) {
                return Err(TuneError::Spec(format!(
                    "variable `{}` is declared twice",
                    v.name
                )));
            }
            if !(v.min.is_finite() && v.max.is_finite() && v.min <= v.max) {
                return Err(TuneError::Spec(format!(
                    "variable `{}` has the range [{}, {}]",
                    v.name, v.min, v.max
                )));
            }
            variables.push(v);
        }
        if self.terms.is_empty() {
            return Err(TuneError::Spec(format!(
                "model `{}` has no terms",
                self.name
            )));
        }
        let mut terms: Vec<Term> = Vec::new();
        for t in self.terms {
            let mut factors = Vec::new();
            for (name, power, log) in t.factors {
                let Some(var) = variables.iter().position(|v| v.name == name) else {
                    return Err(TuneError::Spec(format!(
                        "a term of `{}` names the unknown variable `{name}`",
                        self.name
                    )));
                };
                if log && variables[var].min <= 0.0 {
                    return Err(TuneError::Spec(format!(
                        "log2({name}) needs `{name}` above 0 over its range"
                    )));
                }
                factors.push(Factor { var, power, log });
            }
            // One factor per (variable, log), powers summed, zero powers gone, in order: two
            // ways of writing one term are one term.
            let mut merged: Vec<Factor> = Vec::new();
            for f in factors {
                match merged.iter_mut().find(|m| m.var == f.var && m.log == f.log) {
                    Some(m) => m.power += f.power,
                    None => merged.push(f),
                }
            }
            merged.retain(|f| f.power != 0);
            merged.sort_by_key(|f| (f.var, f.log));
            let term = Term { factors: merged };
            if terms.contains(&term) {
                return Err(TuneError::Spec(format!(
                    "model `{}` lists a term twice",
                    self.name
                )));
            }
            terms.push(term);
        }
        Ok(ModelSpec {
            name: self.name,
            variables,
            terms,
        })
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vars: Vec<String> = self
            .variables
            .iter()
            .map(|v| format!("{} in [{}, {}]", v.name, v.min, v.max))
            .collect();
        write!(
            f,
            "{}({}) ~ {}",
            self.name,
            vars.join(", "),
            self.show_terms().join(" + ")
        )
    }
}
