//! Cost models of the stencil layouts on a deployment with a fixed number of members
//! (thesis §4.4), the selector over the layouts that can divide among them, and the
//! ghost-zone width as a parameter (thesis §5.2).

use stampede_core::Runtime;
use stampede_strata::{Combine, GroupOptions, Member, Op, StrataError};
use stampede_tune::{sample_points, Model, ModelSpec, TermSpec, TuneError};

use crate::calibrate::{bad, measured_fit, time_repeated};

use crate::stencil::{relax_grid, Layout};

/// Over-relaxation factor of the library's runs.
pub const OMEGA: f64 = 1.5;

/// The widths the ghost-zone parameter ranges over.
pub const EXTRA: std::ops::RangeInclusive<usize> = 1..=8;

/// The specification of `layout` over grids of `8..=max_n` cells a side and `1..=max_t`
/// iterations: a start-up, a cost per iteration (the exchanges), per boundary cell and
/// iteration, and per cell and iteration.
pub fn stencil_spec(layout: Layout, max_n: usize, max_t: usize) -> Result<ModelSpec, TuneError> {
    let t = TermSpec::parse;
    ModelSpec::new(layout.name())
        .variable("n", 8.0, max_n as f64, true)
        .variable("t", 1.0, max_t as f64, true)
        .term(t("1")?)
        .term(t("t")?)
        .term(t("n")?)
        .term(t("n*t")?)
        .term(t("n^2")?)
        .term(t("n^2*t")?)
        .build()
}

/// A grid with a hot edge and pseudo-random interior, reproducible from `seed`.
pub fn grid(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n * n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i < n {
                100.0
            } else {
                (x >> 40) as f64 / 1e5
            }
        })
        .collect()
}

/// Seconds per relaxation for this member: member 0 holds the `n × n` grid (`grid(n,
/// seed)`, made here), which every layout spreads and gathers; the run is repeated when it
/// is short (a warm-up run, then enough runs for 2 ms). Every member calls it with the same
/// arguments; the slowest member's time is the run's.
pub fn time_stencil_member(
    m: &Member,
    layout: Layout,
    n: usize,
    t: usize,
    extra: usize,
    seed: u64,
) -> Result<f64, StrataError> {
    let g = if m.rank() == 0 {
        grid(n, seed)
    } else {
        Vec::new()
    };
    time_repeated(
        m,
        |_| (),
        |()| {
            std::hint::black_box(relax_grid(m, &g, n, t, OMEGA, layout, extra)?);
            Ok(())
        },
    )
}

/// Seconds for the slowest of `p` threads, each bound to a core, to relax an `n × n` grid
/// `t` times ([`time_stencil_member`]).
pub fn time_threads(
    layout: Layout,
    p: usize,
    n: usize,
    t: usize,
    extra: usize,
    seed: u64,
) -> Result<f64, StrataError> {
    let rt = Runtime::new();
    let times: Vec<Result<f64, StrataError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..p)
            .map(|rank| {
                let rt = rt.clone();
                s.spawn(move || {
                    stampede_strata::models::pin_member(rank);
                    let m = Member::join(&rt, "stencil", rank, p, GroupOptions::default())?;
                    let took = time_stencil_member(&m, layout, n, t, extra, seed)?;
                    m.combine_one(Combine::Reduce, Op::Max, took)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("a stencil thread panicked"))
            .collect()
    });
    times.into_iter().next().expect("one member at least")
}

/// A measuring function: seconds of the slowest member for `(layout, n, t, extra, seed)`.
pub type StencilMeasure<'a> =
    dyn FnMut(Layout, usize, usize, usize, u64) -> Result<f64, StrataError> + 'a;

/// The stencil library on a deployment of `p` members: a model per layout that can divide
/// among them.
#[derive(Clone, Debug)]
pub struct StencilLibrary {
    p: usize,
    layouts: Vec<Layout>,
    models: Vec<Model>,
}

impl StencilLibrary {
    /// Calibrates every layout that divides among `p` members, with ghost zones `extra`
    /// wide, `points` samples each.
    pub fn calibrate(
        p: usize,
        max_n: usize,
        max_t: usize,
        points: usize,
        extra: usize,
        measure: &mut StencilMeasure<'_>,
    ) -> Result<StencilLibrary, StrataError> {
        let layouts: Vec<Layout> = Layout::ALL
            .into_iter()
            .filter(|l| l.shape(p).is_some())
            .collect();
        let mut models = Vec::new();
        for &l in &layouts {
            let spec = stencil_spec(l, max_n, max_t).map_err(bad)?;
            let at = sample_points(&spec, points, 17);
            models.push(measured_fit(&spec, &at, |x| {
                measure(l, x[0] as usize, x[1] as usize, extra, 3)
            })?);
        }
        Ok(StencilLibrary { p, layouts, models })
    }

    /// The members this library was calibrated for.
    pub fn members(&self) -> usize {
        self.p
    }

    /// The layouts modelled, with their models.
    pub fn models(&self) -> impl Iterator<Item = (Layout, &Model)> {
        self.layouts.iter().copied().zip(&self.models)
    }

    /// The layout predicted fastest for an `n × n` grid and `t` iterations; `None` outside
    /// the calibrated ranges.
    pub fn choose(&self, n: usize, t: usize) -> Option<Layout> {
        let x = [n as f64, t as f64];
        self.models()
            .map(|(l, m)| (l, m.predict(&x)))
            .filter(|(_, y)| y.is_finite())
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(l, _)| l)
    }
}

/// The ghost-zone width of one layout as a parameter: a model over `n`, `t` and `k` whose
/// terms are the exchanges (`t/k`), the boundary sent each exchange (`n·t`, as `k` rows
/// every `k` iterations), the redundant work in the ghost zones (`k·n·t`), and the cells.
#[derive(Clone, Debug)]
pub struct ExtraRowsModel {
    layout: Layout,
    model: Model,
}

impl ExtraRowsModel {
    pub fn spec(layout: Layout, max_n: usize, max_t: usize) -> Result<ModelSpec, TuneError> {
        let t = TermSpec::parse;
        ModelSpec::new(&format!("{}_extra_rows", layout.name()))
            .variable("n", 8.0, max_n as f64, true)
            .variable("t", 1.0, max_t as f64, true)
            .variable("k", *EXTRA.start() as f64, *EXTRA.end() as f64, true)
            .term(t("1")?)
            .term(t("t*k^-1")?)
            .term(t("n*t")?)
            .term(t("k*n*t")?)
            .term(t("n^2*t")?)
            .term(t("n")?)
            .build()
    }

    /// Calibrates `layout`'s model over every width in [`EXTRA`].
    pub fn calibrate(
        layout: Layout,
        max_n: usize,
        max_t: usize,
        points: usize,
        measure: &mut StencilMeasure<'_>,
    ) -> Result<ExtraRowsModel, StrataError> {
        let spec = Self::spec(layout, max_n, max_t).map_err(bad)?;
        let at = sample_points(&spec, points, 19);
        let model = measured_fit(&spec, &at, |x| {
            measure(layout, x[0] as usize, x[1] as usize, x[2] as usize, 5)
        })?;
        Ok(ExtraRowsModel { layout, model })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The width predicted fastest, with its predicted seconds.
    pub fn best(&self, n: usize, t: usize) -> Option<(usize, f64)> {
        stampede_tune::argmin_integer(
            &self.model,
            &[n as f64, t as f64, 1.0],
            2,
            *EXTRA.start() as i64,
            *EXTRA.end() as i64,
        )
        .map(|(k, y)| (k as usize, y))
    }
}
