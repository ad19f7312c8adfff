//! Every sort implementation against the standard library's sort, for random keys, group
//! sizes and uneven holdings, with members as threads of one runtime.

use proptest::prelude::*;
use stampede_core::Runtime;
use stampede_strata::{Exchange, GroupOptions, Member};
use stampede_tuned::sort::{sort, Algorithm};

fn run(holdings: &[Vec<u32>], algorithm: Algorithm, exchange: Exchange) -> Vec<Vec<u32>> {
    let rt = Runtime::new();
    let p = holdings.len();
    std::thread::scope(|s| {
        let hs: Vec<_> = holdings
            .iter()
            .enumerate()
            .map(|(rank, keys)| {
                let rt = rt.clone();
                s.spawn(move || {
                    let m = Member::join(&rt, "sort", rank, p, GroupOptions::default()).unwrap();
                    sort(&m, keys.clone(), algorithm, exchange).unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn every_implementation_sorts(
        holdings in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![any::<u32>(), 0u32..8], 0..300), 1..6),
    ) {
        let mut want: Vec<u32> = holdings.iter().flatten().copied().collect();
        want.sort_unstable();
        let n = want.len();
        let p = holdings.len();
        for algorithm in Algorithm::ALL {
            for exchange in [Exchange::Barriers { every: 1 }, Exchange::Interleaved] {
                let got = run(&holdings, algorithm, exchange);
                let flat: Vec<u32> = got.iter().flatten().copied().collect();
                prop_assert_eq!(&flat, &want, "{:?}", algorithm);
                if let Algorithm::Radix(_) = algorithm {
                    for part in &got {
                        prop_assert!(part.len() == n / p || part.len() == n / p + 1, "balanced");
                    }
                }
            }
        }
    }
}

#[test]
fn a_digit_size_out_of_range_is_refused() {
    let rt = Runtime::new();
    let m = Member::join(&rt, "bad", 0, 1, GroupOptions::default()).unwrap();
    assert!(sort(&m, vec![3, 1], Algorithm::Radix(0), Exchange::Interleaved).is_err());
    assert!(sort(&m, vec![3, 1], Algorithm::Radix(17), Exchange::Interleaved).is_err());
    assert_eq!(
        sort(
            &m,
            vec![3, 1, 2],
            Algorithm::Radix(1),
            Exchange::Interleaved
        )
        .unwrap(),
        [1, 2, 3]
    );
}

#[test]
fn the_library_calibrates_on_tiny_ranges_and_picks_within_them() {
    use stampede_tuned::SortLibrary;
    let algorithms = [Algorithm::Radix(8), Algorithm::Sample];
    let lib =
        SortLibrary::calibrate_threads(&algorithms, 2, 256, 6, Exchange::Interleaved).unwrap();
    assert_eq!(lib.models().len(), 2);
    assert!(lib.choose(2, 100).is_some());
    assert!(
        lib.choose(3, 100).is_none(),
        "outside the calibrated group sizes"
    );
    assert!(
        lib.choose(2, 100_000).is_none(),
        "outside the calibrated key counts"
    );
}

#[test]
fn the_digit_model_picks_a_digit_size_within_its_range() {
    use stampede_tuned::{DigitModel, DIGITS};
    let m = DigitModel::calibrate_threads(2, 512, 10, Exchange::Interleaved).unwrap();
    let (bits, t) = m.best(2, 300).unwrap();
    assert!(DIGITS.contains(&bits) && t > 0.0);
    assert!(
        m.best(2, 10_000).is_none(),
        "outside the calibrated key counts"
    );
}
