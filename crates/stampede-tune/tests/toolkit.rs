//! The toolkit against known answers: fitting recovers coefficients from noisy data with
//! outliers, pruning drops useless terms, models are +∞ outside their ranges, model files
//! round-trip and a changed fingerprint is caught, the profiler's medians shrug off outliers,
//! and the optimisers find the minimum and the crossover.

use std::time::Duration;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use stampede_tune::{
    argmin_integer, crossover, fit, sample_points, Fingerprint, Model, ModelFile, ModelSpec,
    Profiler, Sample, Selector, StalePolicy, TermSpec, TuneError,
};

fn sort_like() -> ModelSpec {
    ModelSpec::new("sort")
        .variable("n", 100.0, 1e6, true)
        .term(TermSpec::one())
        .term(TermSpec::var("n"))
        .term(TermSpec::var("n").times_log("n", 1))
        .term(TermSpec::var("n").times("n", 1)) // n², which the data do not have
        .build()
        .unwrap()
}

/// y = 5e-6 + 2e-9·n + 3e-10·n·log2(n), with multiplicative noise of `noise` and, when
/// `outliers`, every 25th sample inflated 3x as an interrupted run would be.
fn synthetic(points: &[Vec<f64>], noise: f64, outliers: bool, seed: u64) -> Vec<Sample> {
    let mut rng = StdRng::seed_from_u64(seed);
    points
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let n = x[0];
            let truth = 5e-6 + 2e-9 * n + 3e-10 * n * n.log2();
            let mut y = truth * (1.0 + noise * (2.0 * rng.gen::<f64>() - 1.0));
            if outliers && i % 25 == 7 {
                y *= 3.0;
            }
            Sample { x: x.clone(), y }
        })
        .collect()
}

#[test]
fn fitting_recovers_known_coefficients_and_drops_the_useless_term() {
    let spec = sort_like();
    let points = sample_points(&spec, 120, 1);
    let model = fit(&spec, &synthetic(&points, 0.02, false, 2), 0.95).unwrap();
    let terms: Vec<String> = model
        .kept
        .iter()
        .map(|t| spec.terms[*t].show(&spec.variables))
        .collect();
    assert!(
        terms.contains(&"n".to_owned()) && terms.contains(&"n·log2(n)".to_owned()),
        "{terms:?}"
    );
    assert!(
        model.dropped.contains(&3),
        "n² is dropped: {}",
        model.formula()
    );
    let coef = |name: &str| model.coefficients[terms.iter().position(|t| t == name).unwrap()];
    assert!((coef("n") / 2e-9 - 1.0).abs() < 0.1, "{}", model.formula());
    assert!(
        (coef("n·log2(n)") / 3e-10 - 1.0).abs() < 0.05,
        "{}",
        model.formula()
    );
    assert!(model.mre < 1.02, "mean relative error {}", model.mre);
    // Verification on points it was not fitted to.
    let fresh = synthetic(&sample_points(&spec, 60, 9), 0.02, false, 3);
    let v = model.verify(&fresh, 3);
    assert!(v.mre < 1.03, "{}", v.mre);
    assert_eq!(v.worst.len(), 3);
    assert!(v.worst[0].2 >= v.worst[2].2);
}

#[test]
fn relative_weighting_keeps_small_inputs_accurate() {
    // Unweighted least squares would fit the large values and let the small ones be off by
    // far more than they measure; the 1/y² weights keep every relative error small.
    let spec = sort_like();
    let points = sample_points(&spec, 120, 4);
    let model = fit(&spec, &synthetic(&points, 0.01, false, 5), 0.95).unwrap();
    let small = model.predict(&[100.0]);
    let truth = 5e-6 + 2e-9 * 100.0 + 3e-10 * 100.0 * 100f64.log2();
    assert!((small / truth - 1.0).abs() < 0.05, "{small} vs {truth}");
}

#[test]
fn the_median_of_three_removes_outliers_before_the_fit() {
    // The profiler times each point three times; a task whose every third run is slowed
    // still gives clean medians.
    let spec = ModelSpec::new("spin")
        .variable("n", 1.0, 64.0, true)
        .term(TermSpec::one())
        .term(TermSpec::var("n"))
        .build()
        .unwrap();
    let points = sample_points(&spec, 24, 6);
    let mut calls = 0u64;
    let mut seen = Vec::new();
    let samples = Profiler {
        warmup: 1,
        repeats: 3,
    }
    .profile(
        &points,
        |_| (),
        |x, _| {
            calls += 1;
            // An outlier far above what a loaded machine adds to a sleep, so the check
            // below tells outliers from scheduling delays.
            let extra = if calls % 3 == 0 {
                Duration::from_millis(40)
            } else {
                Duration::ZERO
            };
            std::thread::sleep(Duration::from_micros(200 + 40 * x[0] as u64) + extra);
        },
        |_, _| (),
        |p| seen.push(p),
    );
    assert_eq!(samples.len(), points.len());
    assert_eq!(seen.last().unwrap().done, points.len());
    assert!(seen.windows(2).all(|w| w[0].done < w[1].done));
    // Every median is one of the two clean runs: well below an outlier's 40 ms.
    assert!(
        samples
            .iter()
            .all(|s| s.y < 0.200e-3 + 40e-6 * s.x[0] + 20e-3),
        "{samples:?}"
    );
    let model = fit(&spec, &samples, 0.95).unwrap();
    assert!(model.predict(&[64.0]) > model.predict(&[1.0]));
}

#[test]
fn sample_points_cover_the_corners_first_and_stay_in_range() {
    let spec = ModelSpec::new("two")
        .variable("n", 10.0, 1e6, true)
        .variable("p", 1.0, 8.0, true)
        .term(TermSpec::one())
        .build()
        .unwrap();
    let points = sample_points(&spec, 50, 7);
    assert_eq!(points.len(), 50);
    for corner in [[10.0, 1.0], [1e6, 1.0], [10.0, 8.0], [1e6, 8.0]] {
        assert!(points[..4].contains(&corner.to_vec()), "{:?}", &points[..4]);
    }
    assert!(points
        .iter()
        .all(|p| spec.valid(p) && p.iter().all(|v| v.fract() == 0.0)));
    assert_eq!(
        points,
        sample_points(&spec, 50, 7),
        "deterministic in the seed"
    );
    // Log-uniform over the wide range: about as many points below 1000 as above.
    let low = points[12..].iter().filter(|p| p[0] < 1e3).count();
    assert!(low >= 6, "{low} of {} below 1e3", points.len() - 12);
}

fn line(name: &str, a: f64, b: f64) -> Model {
    let spec = ModelSpec::new(name)
        .variable("n", 1.0, 1e4, false)
        .term(TermSpec::one())
        .term(TermSpec::var("n"))
        .build()
        .unwrap();
    let samples: Vec<Sample> = (1..=30)
        .map(|i| {
            let n = i as f64 * 300.0;
            Sample {
                x: vec![n],
                y: a + b * n,
            }
        })
        .collect();
    fit(&spec, &samples, 0.95).unwrap()
}

#[test]
fn the_selector_picks_the_cheapest_and_nothing_outside_every_range() {
    let models = vec![line("steep", 1.0, 0.01), line("flat", 30.0, 0.001)];
    let s = Selector::new(models.clone());
    assert_eq!(s.choose(&[10.0]).unwrap().name, "steep");
    let far = s.choose(&[9000.0]).unwrap();
    assert_eq!((far.index, far.name.as_str()), (1, "flat"));
    assert_eq!(far.predicted.len(), 2);
    assert_eq!(models[0].predict(&[2e4]), f64::INFINITY);
    assert_eq!(models[0].predict(&[0.5]), f64::INFINITY);
    assert!(s.best(&[2e4]).is_none());
    assert!(
        s.choose(&[1.0, 2.0]).is_none(),
        "a wrong arity is outside every model"
    );
    // The crossover of 1 + 0.01 n and 30 + 0.001 n is at n = 29 / 0.009.
    let at = crossover(
        |n| models[0].predict(&[n]) - models[1].predict(&[n]),
        1.0,
        1e4,
        1e-6,
    )
    .unwrap();
    assert!((at - 29.0 / 0.009).abs() < 1e-3, "{at}");
    assert!(
        crossover(|n| n + 1.0, 1.0, 2.0, 1e-6).is_none(),
        "no sign change, no root"
    );
}

#[test]
fn the_best_integer_parameter_is_found() {
    // Radix sort's cost over the digit width b (thesis ch. 5.3): 32/b passes over the n
    // keys, each clearing and scanning a histogram of 2^b counters.
    let spec = ModelSpec::new("radix")
        .variable("n", 1e3, 1e7, false)
        .variable("b", 1.0, 16.0, true)
        .term(TermSpec::var("n").times("b", -1))
        .term(TermSpec::one().times("b", -1))
        .term(TermSpec::one().times("b", -1).times_log("b", 0))
        .build();
    assert!(
        matches!(spec, Err(TuneError::Spec(_))),
        "a term listed twice is refused"
    );
    let spec = ModelSpec::new("radix")
        .variable("n", 1e3, 1e7, false)
        .variable("b", 1.0, 16.0, true)
        .term(TermSpec::var("n").times("b", -1))
        .term(TermSpec::one().times("b", -1))
        .build()
        .unwrap();
    let samples: Vec<Sample> = (0..160)
        .map(|i| {
            let n = 1e3 * 10f64.powf((i % 20) as f64 / 5.0);
            let b = (1 + i % 16) as f64;
            Sample {
                x: vec![n, b],
                y: (32.0 * n / b + 32.0 * 2e3 / b) * 1e-9,
            }
        })
        .collect();
    let model = fit(&spec, &samples, 0.95).unwrap();
    // Both terms fall as b grows: the widest digit wins within the range, and a range
    // outside the calibration has no answer.
    let (b, cost) = argmin_integer(&model, &[1e6, 1.0], 1, 1, 16).unwrap();
    assert_eq!(b, 16);
    assert!(cost < model.predict(&[1e6, 8.0]));
    assert!(argmin_integer(&model, &[1e6, 1.0], 1, 20, 30).is_none());
}

#[test]
fn model_files_round_trip_and_a_changed_fingerprint_is_caught() {
    let dir = std::env::temp_dir().join(format!("stampede-tune-{}", std::process::id()));
    let path = dir.join("models.json");
    let here = Fingerprint::here("threads");
    let file = ModelFile {
        fingerprint: here.clone(),
        models: vec![line("steep", 1.0, 0.01), line("flat", 30.0, 0.001)],
    };
    file.save(&path).unwrap();
    let (back, warnings) = ModelFile::load(&path, &here, StalePolicy::Refuse).unwrap();
    assert_eq!(back, file);
    assert!(warnings.is_empty());
    assert_eq!(
        back.models[1].predict(&[500.0]),
        file.models[1].predict(&[500.0])
    );

    let elsewhere = Fingerprint {
        deployment: "processes".into(),
        cores: here.cores + 2,
        ..here.clone()
    };
    match ModelFile::load(&path, &elsewhere, StalePolicy::Refuse) {
        Err(TuneError::Stale { differences }) => {
            assert_eq!(differences.len(), 2, "{differences:?}");
            assert!(differences
                .iter()
                .any(|d| d.starts_with("deployment: threads -> processes")));
        }
        other => panic!("{other:?}"),
    }
    let (_, warnings) = ModelFile::load(&path, &elsewhere, StalePolicy::Warn).unwrap();
    assert_eq!(warnings.len(), 2);

    // A stale file is replaced by a fresh calibration; a current one is used as it is.
    let mut calibrated = 0;
    let fresh = ModelFile::load_or_calibrate(&path, &elsewhere, || {
        calibrated += 1;
        Ok(vec![line("only", 2.0, 0.02)])
    })
    .unwrap();
    assert_eq!((calibrated, fresh.models.len()), (1, 1));
    let again =
        ModelFile::load_or_calibrate(&path, &elsewhere, || panic!("no recalibration")).unwrap();
    assert_eq!(again, fresh);
    std::fs::write(&path, "{ not json").unwrap();
    assert!(matches!(
        ModelFile::load(&path, &here, StalePolicy::Warn),
        Err(TuneError::Store(_))
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_specifications_and_samples_are_typed_errors() {
    let unknown = ModelSpec::new("m")
        .variable("n", 1.0, 2.0, false)
        .term(TermSpec::var("k"))
        .build();
    assert!(matches!(unknown, Err(TuneError::Spec(m)) if m.contains("`k`")));
    let twice = ModelSpec::new("m")
        .variable("n", 1.0, 2.0, false)
        .variable("n", 1.0, 2.0, false)
        .term(TermSpec::one())
        .build();
    assert!(matches!(twice, Err(TuneError::Spec(_))));
    let empty = ModelSpec::new("m")
        .variable("n", 3.0, 2.0, false)
        .term(TermSpec::one())
        .build();
    assert!(matches!(empty, Err(TuneError::Spec(_))));
    let log0 = ModelSpec::new("m")
        .variable("n", 0.0, 2.0, false)
        .term(TermSpec::log("n"))
        .build();
    assert!(matches!(log0, Err(TuneError::Spec(_))));
    let spec = sort_like();
    let few: Vec<Sample> = (1..4)
        .map(|i| Sample {
            x: vec![i as f64 * 100.0],
            y: 1.0,
        })
        .collect();
    assert!(matches!(fit(&spec, &few, 0.95), Err(TuneError::Fit(_))));
    let negative = vec![
        Sample {
            x: vec![100.0],
            y: -1.0
        };
        10
    ];
    assert!(matches!(
        fit(&spec, &negative, 0.95),
        Err(TuneError::Fit(_))
    ));
    let arity = vec![
        Sample {
            x: vec![100.0, 2.0],
            y: 1.0
        };
        10
    ];
    assert!(matches!(fit(&spec, &arity, 0.95), Err(TuneError::Input(_))));
    // Two terms that the samples cannot tell apart (m is always n).
    let collinear = ModelSpec::new("m")
        .variable("n", 1.0, 100.0, false)
        .variable("m", 1.0, 100.0, false)
        .term(TermSpec::var("n"))
        .term(TermSpec::var("m"))
        .build()
        .unwrap();
    let samples: Vec<Sample> = (1..20)
        .map(|i| Sample {
            x: vec![i as f64, i as f64],
            y: i as f64,
        })
        .collect();
    assert!(matches!(
        fit(&collinear, &samples, 0.95),
        Err(TuneError::Fit(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Any positive coefficients of a + b·n + c·n², sampled without noise, come back.
    #[test]
    fn exact_data_give_back_their_coefficients(a in 1e-6f64..1e-3, b in 1e-9f64..1e-6, c in 1e-13f64..1e-10) {
        let spec = ModelSpec::new("q")
            .variable("n", 1.0, 1e4, false)
            .term(TermSpec::one())
            .term(TermSpec::var("n"))
            .term(TermSpec::var("n").times("n", 1))
            .build()
            .unwrap();
        let samples: Vec<Sample> = sample_points(&spec, 40, 11)
            .into_iter()
            .map(|x| { let n = x[0]; Sample { y: a + b * n + c * n * n, x } })
            .collect();
        let m = fit(&spec, &samples, 0.95).unwrap();
        for x in [1.0, 10.0, 500.0, 1e4] {
            let truth = a + b * x + c * x * x;
            prop_assert!((m.predict(&[x]) / truth - 1.0).abs() < 1e-6, "{} at {x}", m.formula());
        }
        prop_assert!(m.mre < 1.0 + 1e-9);
    }
}

/// A damaged model file is refused when read, with the model named, instead of panicking
/// when it predicts: a kept term past the end, a coefficient missing, a variable that does
/// not exist.
#[test]
fn a_damaged_model_file_is_refused() {
    let file = ModelFile {
        fingerprint: Fingerprint::here("threads"),
        models: vec![line("steep", 1.0, 0.01)],
    };
    let good = serde_json::to_value(&file).unwrap();
    assert!(ModelFile::from_json(&good.to_string()).is_ok());
    let damaged = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        edit(&mut v["models"][0]);
        ModelFile::from_json(&v.to_string()).unwrap_err()
    };
    let e = damaged(&|m| m["kept"][0] = 99.into());
    assert!(e.contains("steep") && e.contains("does not exist"), "{e}");
    let e = damaged(&|m| m["coefficients"] = serde_json::json!([]));
    assert!(e.contains("one coefficient"), "{e}");
    let e = damaged(&|m| {
        m["spec"]["terms"][0]["factors"] = serde_json::json!([{"var": 7, "power": 1, "log": false}])
    });
    assert!(e.contains("variable"), "{e}");
}
