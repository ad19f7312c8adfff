//! Model-based selection (thesis ch. 4) and parameter optimisation (ch. 5).

use crate::model::Model;

/// Picks among implementations by their models' predictions.
#[derive(Clone, Debug)]
pub struct Selector {
    models: Vec<Model>,
}

/// A selection: the implementation predicted fastest and every model's prediction.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub index: usize,
    pub name: String,
    pub predicted: Vec<f64>,
}

impl Selector {
    /// A selector over `models` (each an implementation of the same operation, over the
    /// same variables).
    pub fn new(models: Vec<Model>) -> Selector {
        Selector { models }
    }

    pub fn models(&self) -> &[Model] {
        &self.models
    }

    /// The index of the model predicting the lowest cost at `x`, without allocating; `None`
    /// when every model is outside its validity there.
    #[inline]
    pub fn best(&self, x: &[f64]) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (i, m) in self.models.iter().enumerate() {
            let p = m.predict(x);
            if p.is_finite() && best.map_or(true, |(_, b)| p < b) {
                best = Some((i, p));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The choice at `x` with every prediction (+∞ where a model is not valid).
    pub fn choose(&self, x: &[f64]) -> Option<Choice> {
        let index = self.best(x)?;
        Some(Choice {
            index,
            name: self.models[index].name().to_owned(),
            predicted: self.models.iter().map(|m| m.predict(x)).collect(),
        })
    }
}

/// The integer value in `lo..=hi` of variable `var` that minimises `model` with the other
/// variables at `x` (e.g. the best radix digit width for a key count). Parameter ranges are
/// small and a prediction costs well under a microsecond, so every value is evaluated: the
/// minimum is exact even where the model is not convex.
pub fn argmin_integer(
    model: &Model,
    x: &[f64],
    var: usize,
    lo: i64,
    hi: i64,
) -> Option<(i64, f64)> {
    let mut at = x.to_vec();
    let mut best: Option<(i64, f64)> = None;
    for v in lo..=hi {
        at[var] = v as f64;
        let p = model.predict(&at);
        if p.is_finite() && best.map_or(true, |(_, b)| p < b) {
            best = Some((v, p));
        }
    }
    best
}

/// Where `f` crosses zero in `[lo, hi]` (it must change sign there), to within `tolerance`,
/// by bisection: e.g. the input size at which two implementations' models cross.
pub fn crossover(
    mut f: impl FnMut(f64) -> f64,
    mut lo: f64,
    mut hi: f64,
    tolerance: f64,
) -> Option<f64> {
    let (mut flo, fhi) = (f(lo), f(hi));
    if !(flo.is_finite() && fhi.is_finite()) || flo.signum() == fhi.signum() {
        return None;
    }
    while hi - lo > tolerance {
        let mid = lo + (hi - lo) / 2.0;
        let fm = f(mid);
        if fm.signum() == flo.signum() {
            lo = mid;
            flo = fm;
        } else {
            hi = mid;
        }
    }
    Some(lo + (hi - lo) / 2.0)
}
