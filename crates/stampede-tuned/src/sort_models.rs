//! Cost models of the sort implementations, calibrated on a deployment, and the selector
//! that picks one for an input (thesis §4.5).

use stampede_core::Runtime;
use stampede_strata::{Combine, Exchange, GroupOptions, Member, Op, StrataError};
use stampede_tune::{sample_points, Model, ModelSpec, Selector, TermSpec, TuneError};

use crate::calibrate::{bad, measured_fit, time_repeated};
use crate::sort::{sort, Algorithm};

/// The model specification of `algorithm` over group sizes `2..=max_p` and `16..=max_n`
/// keys per member: a start-up, per-key work, the collectives' growth with the group, and
/// for sample sort the local sort's `n log n`. The group's terms are left out when only
/// groups of two are calibrated.
pub fn spec(algorithm: Algorithm, max_p: usize, max_n: usize) -> Result<ModelSpec, TuneError> {
    let t = TermSpec::parse;
    let mut b = ModelSpec::new(&algorithm.name())
        .variable("p", 2.0, max_p.max(2) as f64, true)
        .variable("n", 16.0, max_n as f64, true)
        .term(t("1")?)
        .term(t("n")?);
    // With one group size, the group's terms are the start-up's and the keys' again.
    if max_p > 2 {
        b = b.term(t("p")?).term(t("n*log2(p)")?);
    }
    match algorithm {
        Algorithm::Radix(_) => b,
        Algorithm::Sample => b.term(t("n*log2(n)")?),
    }
    .build()
}

/// Pseudo-random keys, reproducible from `seed`.
pub fn keys(n: usize, seed: u64) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u32
        })
        .collect()
}

/// Seconds per sort for this member: each member sorts `n` keys, repeated when the sort is
/// short (see the crate's timing of samples: a warm-up run, then enough runs for 2 ms).
/// Every member calls it with the same arguments; the slowest member's time is the sort's.
pub fn time_sort_member(
    m: &Member,
    algorithm: Algorithm,
    n: usize,
    exchange: Exchange,
    seed: u64,
) -> Result<f64, StrataError> {
    time_repeated(
        m,
        |r| keys(n, seed ^ m.rank() as u64 ^ ((r as u64) << 32)),
        |mine| {
            std::hint::black_box(sort(m, mine, algorithm, exchange)?);
            Ok(())
        },
    )
}

/// Seconds for the slowest of `p` threads in one process, each bound to a core
/// ([`stampede_strata::models::pin_member`]), to sort `n` keys each
/// ([`time_sort_member`]).
pub fn time_threads(
    algorithm: Algorithm,
    p: usize,
    n: usize,
    exchange: Exchange,
    seed: u64,
) -> Result<f64, StrataError> {
    let rt = Runtime::new();
    let times: Vec<Result<f64, StrataError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..p)
            .map(|rank| {
                let rt = rt.clone();
                s.spawn(move || {
                    stampede_strata::models::pin_member(rank);
                    let m = Member::join(&rt, "sort", rank, p, GroupOptions::default())?;
                    let t = time_sort_member(&m, algorithm, n, exchange, seed)?;
                    m.combine_one(Combine::Reduce, Op::Max, t)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("a sorting thread panicked"))
            .collect()
    });
    times.into_iter().next().expect("one member at least")
}

/// The sort library: a model per implementation and the selector over them.
#[derive(Clone, Debug)]
pub struct SortLibrary {
    selector: Selector,
    algorithms: Vec<Algorithm>,
}

impl SortLibrary {
    /// Calibrates every implementation on threads in one process: `points` samples each
    /// over `2..=max_p` members and up to `max_n` keys per member.
    pub fn calibrate_threads(
        algorithms: &[Algorithm],
        max_p: usize,
        max_n: usize,
        points: usize,
        exchange: Exchange,
    ) -> Result<SortLibrary, StrataError> {
        Self::calibrate(algorithms, max_p, max_n, points, |a, p, n, seed| {
            time_threads(a, p, n, exchange, seed)
        })
    }

    /// Calibrates on any platform: `measure(algorithm, p, n, seed)` returns the seconds of
    /// the slowest of `p` members sorting `n` keys each (processes over a network, say).
    pub fn calibrate(
        algorithms: &[Algorithm],
        max_p: usize,
        max_n: usize,
        points: usize,
        mut measure: impl FnMut(Algorithm, usize, usize, u64) -> Result<f64, StrataError>,
    ) -> Result<SortLibrary, StrataError> {
        let mut models = Vec::new();
        for &a in algorithms {
            let spec = spec(a, max_p, max_n).map_err(bad)?;
            let points = sample_points(&spec, points, 3);
            models.push(measured_fit(&spec, &points, |x| {
                measure(a, x[0] as usize, x[1] as usize, 11)
            })?);
        }
        Ok(SortLibrary::from_models(algorithms.to_vec(), models))
    }

    /// A library from models already calibrated (for example loaded from a model file),
    /// one per algorithm, in the same order.
    pub fn from_models(algorithms: Vec<Algorithm>, models: Vec<Model>) -> SortLibrary {
        SortLibrary {
            selector: Selector::new(models),
            algorithms,
        }
    }

    /// The models, in the order of the algorithms.
    pub fn models(&self) -> &[Model] {
        self.selector.models()
    }

    /// The implementation predicted fastest for `p` members with `n` keys each; `None`
    /// outside every model's calibrated range.
    pub fn choose(&self, p: usize, n: usize) -> Option<Algorithm> {
        self.selector
            .best(&[p as f64, n as f64])
            .map(|i| self.algorithms[i])
    }
}

/// The radix sort's digit size as a parameter (thesis §5.3): one model of the radix sort
/// over `p`, `n`, the number of passes `q = ⌈32/b⌉` and the radix `r = 2^b`, whose terms
/// are per pass (`q`), per key and pass (`q·n`), per digit value and pass (`q·r`, the
/// histograms and their scans) and the scans' depth (`q·r·log2 p`). Minimising it over
/// `b` gives the best digit size for an input.
#[derive(Clone, Debug)]
pub struct DigitModel {
    model: Model,
}

/// The digit sizes the parameter ranges over.
pub const DIGITS: std::ops::RangeInclusive<u32> = 2..=16;

fn digit_x(p: usize, n: usize, bits: u32) -> [f64; 4] {
    [
        p as f64,
        n as f64,
        32u32.div_ceil(bits) as f64,
        (1u64 << bits) as f64,
    ]
}

impl DigitModel {
    /// The specification over `2..=max_p` members and `16..=max_n` keys each.
    pub fn spec(max_p: usize, max_n: usize) -> Result<ModelSpec, TuneError> {
        let t = TermSpec::parse;
        let mut b = ModelSpec::new("radix_digits")
            .variable("p", 2.0, max_p.max(2) as f64, true)
            .variable("n", 16.0, max_n as f64, true)
            .variable("q", 2.0, 16.0, true)
            .variable("r", 4.0, 65_536.0, true)
            .term(t("1")?)
            .term(t("q")?)
            .term(t("q*n")?)
            .term(t("q*r")?);
        if max_p > 2 {
            b = b.term(t("q*r*log2(p)")?).term(t("q*log2(p)")?);
        }
        b.build()
    }

    /// Calibrates on threads in one process over every digit size in [`DIGITS`].
    pub fn calibrate_threads(
        max_p: usize,
        max_n: usize,
        points: usize,
        exchange: Exchange,
    ) -> Result<DigitModel, StrataError> {
        Self::calibrate(max_p, max_n, points, |a, p, n, seed| {
            time_threads(a, p, n, exchange, seed)
        })
    }

    /// Calibrates on any platform (see [`SortLibrary::calibrate`]).
    pub fn calibrate(
        max_p: usize,
        max_n: usize,
        points: usize,
        mut measure: impl FnMut(Algorithm, usize, usize, u64) -> Result<f64, StrataError>,
    ) -> Result<DigitModel, StrataError> {
        let spec = Self::spec(max_p, max_n).map_err(bad)?;
        // Sample placement over (p, n, b); the model's variables follow from b.
        let placement = ModelSpec::new("radix_digits_placement")
            .variable("p", 2.0, max_p.max(2) as f64, true)
            .variable("n", 16.0, max_n as f64, true)
            .variable("b", *DIGITS.start() as f64, *DIGITS.end() as f64, true)
            .term(TermSpec::one())
            .build()
            .map_err(bad)?;
        let points: Vec<Vec<f64>> = sample_points(&placement, points, 5)
            .into_iter()
            .map(|x| digit_x(x[0] as usize, x[1] as usize, x[2] as u32).to_vec())
            .collect();
        let model = measured_fit(&spec, &points, |x| {
            let bits = (x[3] as u64).trailing_zeros();
            measure(Algorithm::Radix(bits), x[0] as usize, x[1] as usize, 13)
        })?;
        Ok(DigitModel { model })
    }

    /// The fitted model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The predicted seconds of a radix sort with `bits`-bit digits.
    pub fn predict(&self, p: usize, n: usize, bits: u32) -> f64 {
        self.model.predict(&digit_x(p, n, bits))
    }

    /// The digit size predicted fastest, with its predicted seconds; `None` outside the
    /// calibrated ranges.
    pub fn best(&self, p: usize, n: usize) -> Option<(u32, f64)> {
        DIGITS
            .map(|b| (b, self.predict(p, n, b)))
            .filter(|(_, t)| t.is_finite())
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }
}
