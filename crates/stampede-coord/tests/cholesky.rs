//! The tiled CnC Cholesky of the `cholesky` example: correct at several sizes and tile sizes
//! (tiles that do not divide n included: the last block row and column are smaller), in both
//! scheduling modes, on one and two workers; every intermediate tile freed after its last get,
//! with only the p (p + 1) / 2 tiles of L left, in the result collection.

#[path = "../examples/cholesky/mod.rs"]
mod tiled;

use faer::{Mat, Parallelism};
use tiled::Options;

fn check(n: usize, tile: usize, workers: usize, tuned: bool) {
    let a = tiled::random_spd(n, 7 + n as u64, Parallelism::None);
    let out = tiled::factor(
        a.as_ref(),
        Options {
            tile,
            workers,
            tuned,
        },
    )
    .unwrap_or_else(|e| panic!("n={n} tile={tile} workers={workers} tuned={tuned}: {e}"));
    let p = n.div_ceil(tile);
    let what = format!("n={n} tile={tile} workers={workers} tuned={tuned}");
    assert_eq!(out.p, p, "{what}");
    let res = tiled::residual(a.as_ref(), out.l.as_ref());
    assert!(res < 1e-10, "{what}: residual {res:e}");
    // L is lower triangular.
    for c in 1..n {
        for r in 0..c {
            assert_eq!(out.l.read(r, c), 0.0, "{what}: L({r},{c})");
        }
    }
    assert_eq!(out.lkji_left, 0, "{what}: tiles not freed");
    assert_eq!(out.l_tiles, p * (p + 1) / 2, "{what}: tiles of L");
}

/// Every tile size in {16, 32, 64}, one and two workers, untuned and tuned.
fn all_modes(n: usize) {
    for tile in [16, 32, 64] {
        for workers in [1, 2] {
            for tuned in [false, true] {
                check(n, tile, workers, tuned);
            }
        }
    }
}

#[test]
fn factors_n64() {
    all_modes(64);
}

#[test]
fn factors_n96_where_tile_64_does_not_divide() {
    all_modes(96);
}

#[test]
fn factors_n200_where_no_tile_divides() {
    all_modes(200);
}

#[test]
fn one_tile_and_tiny_tiles() {
    // A tile larger than the matrix: one potrf. Tiles of one element: the scalar algorithm.
    check(10, 64, 2, false);
    check(10, 1, 2, true);
    check(1, 1, 1, false);
}

#[test]
fn matches_faer_on_the_whole_matrix() {
    let a = tiled::random_spd(100, 3, Parallelism::None);
    let (whole, _) = tiled::faer_cholesky(a.as_ref(), Parallelism::None);
    let out = tiled::factor(
        a.as_ref(),
        Options {
            tile: 24,
            workers: 2,
            tuned: true,
        },
    )
    .unwrap();
    let diff = (&out.l - &whole).norm_l2() / whole.norm_l2();
    assert!(diff < 1e-12, "{diff:e}");
}

#[test]
fn rejects_empty_sizes_and_reports_an_indefinite_tile() {
    let opts = Options {
        tile: 0,
        workers: 1,
        tuned: false,
    };
    let a = tiled::random_spd(8, 1, Parallelism::None);
    assert!(tiled::factor(a.as_ref(), opts)
        .unwrap_err()
        .contains("tile"));
    let opts = Options { tile: 4, ..opts };
    let empty = Mat::<f64>::zeros(0, 0);
    assert!(tiled::factor(empty.as_ref(), opts).is_err());
    // Symmetric, not positive definite: its second diagonal tile fails.
    let mut bad = Mat::<f64>::identity(8, 8);
    bad.write(6, 6, -1.0);
    for tuned in [false, true] {
        let e = tiled::factor(bad.as_ref(), Options { tuned, ..opts }).unwrap_err();
        assert!(e.contains("potrf(1)"), "{e}");
        assert!(e.contains("not positive definite"), "{e}");
    }
}
