//! Every layout and ghost-zone width gives the sequential relaxation bit for bit.

use proptest::prelude::*;
use stampede_core::Runtime;
use stampede_strata::{GroupOptions, Member, StrataError};
use stampede_tuned::stencil::{relax_grid, sequential, Layout};

fn run(
    p: usize,
    grid: &[f64],
    n: usize,
    iters: usize,
    layout: Layout,
    extra: usize,
) -> Result<Vec<f64>, StrataError> {
    let rt = Runtime::new();
    let results: Vec<Result<Option<Vec<f64>>, StrataError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..p)
            .map(|rank| {
                let rt = rt.clone();
                s.spawn(move || {
                    let m = Member::join(&rt, "sor", rank, p, GroupOptions::default())?;
                    relax_grid(
                        &m,
                        if rank == 0 { grid } else { &[] },
                        n,
                        iters,
                        1.5,
                        layout,
                        extra,
                    )
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut it = results.into_iter();
    let first = it.next().unwrap()?.expect("member 0 gets the grid");
    for r in it {
        assert!(r?.is_none());
    }
    Ok(first)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn every_layout_and_width_matches_sequential(
        p in 1usize..7,
        n in 3usize..24,
        iters in 0usize..9,
        extra in 1usize..5,
        seed: u64,
    ) {
        let grid: Vec<f64> = (0..n * n).map(|i| ((seed ^ i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 44) as f64 / 1e3).collect();
        let want = sequential(&grid, n, iters, 1.5);
        for layout in Layout::ALL {
            match layout.shape(p) {
                Some(_) => {
                    let got = run(p, &grid, n, iters, layout, extra).unwrap();
                    prop_assert!(got == want, "{:?} with {} members, {}×{}, {} iterations, {} extra", layout, p, n, n, iters, extra);
                }
                None => prop_assert!(run(p, &grid, n, iters, layout, extra).is_err()),
            }
        }
    }
}

#[test]
fn layouts_divide_as_documented() {
    assert_eq!(Layout::SquareBlocks.shape(4), Some((2, 2)));
    assert_eq!(Layout::SquareBlocks.shape(6), None);
    assert_eq!(Layout::RectangularBlocks.shape(6), Some((2, 3)));
    assert_eq!(Layout::RectangularBlocks.shape(12), Some((3, 4)));
    assert_eq!(Layout::RectangularBlocks.shape(4), None);
    assert_eq!(Layout::RectangularBlocks.shape(5), None);
    assert_eq!(Layout::VerticalStrips.shape(3), Some((1, 3)));
}

#[test]
fn the_library_models_only_the_layouts_that_divide_and_picks_one() {
    use stampede_tuned::{time_stencil_threads, ExtraRowsModel, StencilLibrary, EXTRA};
    let mut measure = |l: Layout, n: usize, t: usize, k: usize, seed: u64| {
        time_stencil_threads(l, 2, n, t, k, seed)
    };
    let lib = StencilLibrary::calibrate(2, 24, 3, 8, 1, &mut measure).unwrap();
    let modelled: Vec<Layout> = lib.models().map(|(l, _)| l).collect();
    // Two members: no square and no rectangular blocks.
    assert_eq!(
        modelled,
        [
            Layout::Uniprocessor,
            Layout::VerticalStrips,
            Layout::HorizontalStrips
        ]
    );
    assert!(modelled.contains(&lib.choose(16, 2).unwrap()));
    assert!(lib.choose(1000, 2).is_none());
    let extra =
        ExtraRowsModel::calibrate(Layout::HorizontalStrips, 24, 4, 10, &mut measure).unwrap();
    let (k, _) = extra.best(20, 4).unwrap();
    assert!(EXTRA.contains(&k));
}
