//! The stencil library on a platform of `p` members: a model per layout, the selection
//! accuracy over random grids and iteration counts (half near the predicted crossovers),
//! and the ghost-zone width as a parameter (thesis §5.2, Table 5-1: predicted and measured
//! benefit over one extra row).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use stampede_strata::StrataError;
use stampede_tune::{sample_points, Sample};
use stampede_tuned::stencil::Layout;
use stampede_tuned::{stencil_spec, ExtraRowsModel, StencilLibrary, EXTRA};

use crate::median;
use crate::study::{interleaved, Effort, Parameter};

const MAX_N: usize = 384;
const MAX_T: usize = 24;

/// Seconds of the slowest member for `(layout, n, t, extra, seed)`.
pub type Measure<'a> = &'a mut dyn FnMut(Layout, usize, usize, usize, u64) -> f64;

fn log_uniform(rng: &mut StdRng, lo: usize, hi: usize) -> usize {
    let u: f64 = rng.gen();
    ((lo as f64).ln() + u * ((hi as f64).ln() - (lo as f64).ln()))
        .exp()
        .round() as usize
}

pub fn run(
    records: &mut Vec<Value>,
    inputs: usize,
    full: bool,
    effort: Effort,
    platform: &str,
    p: usize,
    relax: Measure<'_>,
) {
    let points = effort.points;
    let t0 = std::time::Instant::now();
    let lib = StencilLibrary::calibrate(p, MAX_N, MAX_T, points, 1, &mut |l, n, t, k, seed| {
        Ok::<f64, StrataError>(relax(l, n, t, k, seed))
    })
    .expect("calibration");
    let layouts: Vec<Layout> = lib.models().map(|(l, _)| l).collect();
    let calibration = t0.elapsed().as_secs_f64() / layouts.len() as f64;
    for (l, model) in lib.models() {
        let fresh: Vec<Sample> =
            sample_points(&stencil_spec(l, MAX_N, MAX_T).expect("a spec"), 10, 43)
                .into_iter()
                .map(|x| {
                    let y = median(
                        (0..3)
                            .map(|i| relax(l, x[0] as usize, x[1] as usize, 1, 50 + i))
                            .collect(),
                    );
                    Sample { x, y }
                })
                .collect();
        let mre = model.verify(&fresh, 3).mre;
        println!(
            "stencil {platform}: {:<18} MRE {mre:.3} fresh: {}",
            l.name(),
            model.formula()
        );
        records.push(json!({
            "metric": "stencil_model",
            "implementation": l.name(),
            "platform": platform,
            "members": p,
            "mre_fit": model.mre,
            "mre_fresh": mre,
            "formula": model.formula(),
        }));
    }
    println!(
        "stencil {platform}: {} layouts calibrated, {calibration:.1} s each",
        layouts.len()
    );
    records.push(json!({
        "metric": "stencil_calibration_s",
        "platform": platform,
        "stampede": calibration,
        "unit": "s per layout",
        "points": points,
        "target": "<= 60 s",
        "met": calibration <= 60.0,
    }));

    // Inputs: half uniform, half within 10% of the side where the predicted winner
    // changes (for a random iteration count).
    let mut rng = StdRng::seed_from_u64(2027);
    let mut workload = Vec::with_capacity(inputs);
    for i in 0..inputs {
        let t = rng.gen_range(1..=MAX_T);
        let mut n = log_uniform(&mut rng, 8, MAX_N);
        if i % 2 == 1 {
            let changes: Vec<usize> = (8..MAX_N)
                .filter(|&m| lib.choose(m, t) != lib.choose(m + 1, t))
                .collect();
            if !changes.is_empty() {
                let c = changes[rng.gen_range(0..changes.len())] as f64;
                n = (c * rng.gen_range(0.9..1.1)).round() as usize;
            }
        }
        workload.push(vec![n.clamp(8, MAX_N) as f64, t as f64]);
    }
    let names: Vec<String> = layouts.iter().map(|l| l.name().to_owned()).collect();
    let mut record = crate::study::accuracy(
        "stencil",
        platform,
        full,
        effort.rounds,
        &names,
        &workload,
        |x| {
            let pick = lib.choose(x[0] as usize, x[1] as usize)?;
            layouts.iter().position(|&l| l == pick)
        },
        &mut |k, x, seed| relax(layouts[k], x[0] as usize, x[1] as usize, 1, seed),
    );
    record["members"] = json!(p);
    record["near_crossovers"] = json!(inputs / 2);
    records.push(record);

    // The ghost-zone width, for horizontal strips.
    let layout = Layout::HorizontalStrips;
    let extra = ExtraRowsModel::calibrate(
        layout,
        MAX_N,
        MAX_T,
        effort.parameter_points,
        &mut |l, n, t, k, seed| Ok::<f64, StrataError>(relax(l, n, t, k, seed)),
    )
    .expect("the extra-rows model");
    let cases = effort.parameter_cases;
    let values: Vec<usize> = EXTRA.collect();
    let mut tally = Parameter::new();
    for i in 0..cases {
        let n = log_uniform(&mut rng, 8, MAX_N);
        let t = rng.gen_range(2..=MAX_T);
        let (pick, predicted) = extra.best(n, t).expect("inside the ranges");
        let times = interleaved(
            values.len(),
            effort.rounds,
            700 + 10 * i as u64,
            &mut |k, seed| relax(layout, n, t, values[k], seed),
        );
        let tpick = times[values.iter().position(|&v| v == pick).expect("a width")];
        let predicted_one = extra.model().predict(&[n as f64, t as f64, 1.0]);
        let case = json!({
            "n": n, "t": t,
            "benefit_predicted": predicted_one / predicted - 1.0,
            "benefit_measured": times[0] / tpick - 1.0,
        });
        tally.add(&values, &times, pick, case);
    }
    let mut record = tally.record(
        "stencil_extra_rows",
        platform,
        "stencil extra rows",
        extra.model().formula(),
        extra.model().mre,
    );
    record["layout"] = json!(layout.name());
    records.push(record);
}
