//! The selection-accuracy study shared by the libraries (thesis Tables 4-1 to 4-3): every
//! implementation is run for every input, the measured best compared with the pick; a
//! pick more than 3% off is measured again, alternately with the best, before it counts,
//! since this machine is noisy. Also the parameter study's tally (thesis Table 5-1).
//!
//! The candidates are timed in interleaved rounds (each round runs every candidate once,
//! starting at a different one) and each takes its median: this machine's speed drifts
//! over tens of milliseconds, and timing one candidate's runs back to back would hand
//! a slow spell to one candidate alone.

use serde_json::{json, Value};

use crate::median;

/// One run of implementation `i` on input `x`, in seconds.
pub type Run<'a> = &'a mut dyn FnMut(usize, &[f64], u64) -> f64;

/// How much a library's study measures on a platform: calibration points per
/// implementation, for the parameter's model, and parameter cases checked.
#[derive(Clone, Copy, Debug)]
pub struct Effort {
    pub points: usize,
    pub parameter_points: usize,
    pub parameter_cases: usize,
    /// Interleaved rounds per candidate and input.
    pub rounds: usize,
}

impl Effort {
    /// A platform's effort: `cost` is its rough cost per run relative to threads (1), and
    /// calibration points shrink with it, so that slow platforms still finish in minutes.
    pub fn new(full: bool, cost: usize) -> Effort {
        let (points, parameter_points, parameter_cases) =
            if full { (160, 240, 200) } else { (96, 120, 30) };
        Effort {
            points: (points / cost).max(24),
            parameter_points: (parameter_points / cost).max(36),
            parameter_cases: if full {
                (parameter_cases / cost).max(60)
            } else {
                parameter_cases
            },
            // Emulated hosts run for seconds per input: three rounds there.
            rounds: if cost >= 4 { 3 } else { 5 },
        }
    }
}

/// The median of `rounds` interleaved runs of each of `candidates`; `run(k, seed)` runs
/// candidate `k` once.
pub fn interleaved(
    candidates: usize,
    rounds: usize,
    seed: u64,
    run: &mut dyn FnMut(usize, u64) -> f64,
) -> Vec<f64> {
    let mut t = vec![Vec::with_capacity(rounds); candidates];
    for r in 0..rounds {
        for j in 0..candidates {
            let k = (j + r) % candidates;
            t[k].push(run(k, seed + r as u64));
        }
    }
    t.into_iter().map(median).collect()
}

/// The accuracy record over `workload`, for a library whose implementations are `names`
/// and whose choice for an input is `choose`, each timed in `rounds` interleaved rounds.
#[allow(clippy::too_many_arguments)]
pub fn accuracy(
    library: &str,
    platform: &str,
    full: bool,
    rounds: usize,
    names: &[String],
    workload: &[Vec<f64>],
    choose: impl Fn(&[f64]) -> Option<usize>,
    run: Run<'_>,
) -> Value {
    let (mut strict, mut within, mut wrong, mut penalty_sum) = (0usize, 0usize, 0usize, 0.0);
    let mut totals = vec![0.0; names.len()];
    let (mut picked_total, mut best_total) = (0.0, 0.0);
    let mut counted = 0usize;
    let mut misses = Vec::new();
    for (i, x) in workload.iter().enumerate() {
        let Some(pick) = choose(x) else { continue };
        counted += 1;
        let seed = 1000 + 10 * i as u64;
        let mut t = interleaved(names.len(), rounds, seed, &mut |k, seed| run(k, x, seed));
        let argmin = |t: &[f64]| {
            (0..t.len())
                .filter(|&k| t[k].is_finite())
                .min_by(|&a, &b| t[a].total_cmp(&t[b]))
                .expect("an implementation ran")
        };
        let mut best = argmin(&t);
        if best != pick && t[pick] > t[best] * 1.03 {
            let (mut tp, mut tb) = (Vec::new(), Vec::new());
            for k in 0..2 * rounds as u64 {
                tp.push(run(pick, x, seed + 100 + k));
                tb.push(run(best, x, seed + 100 + k));
            }
            t[pick] = median(tp);
            t[best] = median(tb);
            best = argmin(&t);
        }
        for (k, v) in t.iter().enumerate() {
            totals[k] += v;
        }
        picked_total += t[pick];
        best_total += t[best];
        let penalty = t[pick] / t[best] - 1.0;
        if best == pick {
            strict += 1;
        } else {
            wrong += 1;
            penalty_sum += penalty;
            misses.push(json!({"x": x, "pick": names[pick], "measured_best": names[best], "penalty": penalty, "measured_s": t}));
        }
        if penalty <= 0.03 {
            within += 1;
        }
    }
    let (avg_best, avg_time) = totals
        .iter()
        .enumerate()
        .filter(|(_, t)| t.is_finite())
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, &t)| (names[k].clone(), t))
        .expect("an implementation ran");
    let n = counted.max(1) as f64;
    let mean_penalty = if wrong == 0 {
        0.0
    } else {
        penalty_sum / wrong as f64
    };
    println!(
        "{library} {platform}: accuracy over {counted} inputs: strict {:.1}%, within 3% {:.1}%, mean penalty when wrong {:.2}%; the picks take {:.3} of always {avg_best}",
        100.0 * strict as f64 / n,
        100.0 * within as f64 / n,
        100.0 * mean_penalty,
        picked_total / avg_time
    );
    json!({
        "metric": format!("{library}_selection_accuracy"),
        "platform": platform,
        "inputs": counted,
        "full": full,
        "strict": strict as f64 / n,
        "within_3pct": within as f64 / n,
        "wrong": wrong,
        "mean_penalty_when_wrong": mean_penalty,
        "expected_penalty": penalty_sum / n,
        "gain": {"picks_s": picked_total, "best_on_average": avg_best, "best_on_average_s": avg_time, "ratio": picked_total / avg_time, "best_possible_s": best_total},
        "misses": misses,
        "targets": {"within_3pct": ">= 0.995 (from --full only)", "strict": "at least the thesis' (0.9942 stencils, 0.9984 sorting)", "mean_penalty_when_wrong": "<= 0.01"},
    })
}

/// The tally of a parameter study: per input, the predicted best value against every
/// value's measured time.
pub struct Parameter {
    exact: usize,
    penalties: Vec<f64>,
    cases: Vec<Value>,
}

impl Parameter {
    pub fn new() -> Parameter {
        Parameter {
            exact: 0,
            penalties: Vec::new(),
            cases: Vec::new(),
        }
    }

    /// One input: `times[i]` is the measured time of `values[i]`, of which `pick` was
    /// predicted best; `case` describes the input. Returns the measured best and the
    /// pick's time.
    pub fn add(
        &mut self,
        values: &[usize],
        times: &[f64],
        pick: usize,
        mut case: Value,
    ) -> (usize, f64) {
        let best = (0..times.len())
            .min_by(|&a, &b| times[a].total_cmp(&times[b]))
            .expect("some values");
        let at = values
            .iter()
            .position(|&v| v == pick)
            .expect("the pick is a value");
        let penalty = times[at] / times[best] - 1.0;
        if at == best {
            self.exact += 1;
        }
        self.penalties.push(penalty);
        case["predicted_best"] = json!(pick);
        case["measured_best"] = json!(values[best]);
        case["penalty"] = json!(penalty);
        self.cases.push(case);
        (values[best], times[at])
    }

    /// The record, also printed.
    pub fn record(
        mut self,
        metric: &str,
        platform: &str,
        what: &str,
        formula: String,
        mre: f64,
    ) -> Value {
        let n = self.penalties.len();
        self.penalties.sort_by(f64::total_cmp);
        let p99 = self.penalties[((n as f64 * 0.99).ceil() as usize).saturating_sub(1)];
        let exact = self.exact as f64 / n as f64;
        println!(
            "{platform}: {what} over {n} inputs: the measured best {:.1}% of the time, penalty at the 99th percentile {:.2}%: {formula}",
            100.0 * exact,
            100.0 * p99,
        );
        json!({
            "metric": metric,
            "platform": platform,
            "inputs": n,
            "exact": exact,
            "penalty_p99": p99,
            "formula": formula,
            "mre_fit": mre,
            "targets": {"exact": ">= 0.95", "penalty_p99": "<= 0.02"},
            "cases": self.cases,
        })
    }
}
