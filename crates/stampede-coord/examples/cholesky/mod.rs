//! Tiled Cholesky factorization A = L Lᵀ as a Concurrent Collections graph: the CnC Cholesky
//! of Chandramowlishwaran, Knobe and Vuduc (IPDPS 2010, Fig. 13) over Buttari et al.'s tiled
//! right-looking algorithm, with faer's kernels on the tiles. Shared by the `cholesky` example
//! and `tests/cholesky.rs`.
//!
//! The matrix of order `n` is cut into `p = ceil(n / b)` block rows and columns of `b` (the last
//! one smaller when `b` does not divide `n`: such sizes are handled, not rejected). Only the lower
//! triangle of tiles (row `j` ≥ column `i`) exists. The sequential algorithm is
//!
//! ```text
//! for k in 0..p
//!     L(k,k) = potrf(A(k,k))                            // A(k,k) = L(k,k) L(k,k)ᵀ
//!     for j in k+1..p
//!         L(j,k) = A(j,k) L(k,k)⁻ᵀ                      // trsm
//!     for j in k+1..p, i in k+1..=j
//!         A(j,i) = A(j,i) − L(j,k) L(i,k)ᵀ              // syrk when i == j, gemm otherwise
//! ```
//!
//! and the graph, in the paper's notation, is (`lkji` is keyed `(k, j, i)`: the tile in block
//! row `j`, block column `i`, as it is at the start of iteration `k`; so `(0, j, i)` is the
//! input and `(k + 1, j, k)` is the finished `L(j,k)`):
//!
//! ```text
//! env                                   -> [lkji: 0, j, i] for i <= j,  <potrf_tags: k> for k < p
//! <potrf_tags: k>      :: (potrf: k)
//! <trsm_tags: k, j>    :: (trsm: k, j)              for k < j
//! <update_tags: k,j,i> :: (update: k, j, i)         for k < i <= j
//! [lkji: k, k, k]                                   -> (potrf: k)     -> [lkji: k+1, k, k], <trsm_tags: k, j> for j > k
//! [lkji: k, j, k], [lkji: k+1, k, k]                -> (trsm: k, j)   -> [lkji: k+1, j, k], <update_tags: k, j, i> for k < i <= j
//! [lkji: k, j, i], [lkji: k+1, j, k], [lkji: k+1, i, k] -> (update: k, j, i) -> [lkji: k+1, j, i]
//! ```
//!
//! Get-counts free every tile after its last get, so memory stays bounded: a tile `(k, j, i)`
//! not yet final (an input at k = 0, or an update's output) has exactly one reader (potrf(k)
//! when i == j == k, trsm(k, j) when i == k < j, update(k, j, i) when i > k); a finished `L(j,k)` at `(k+1, j, k)` is read by `p - k - 1` steps (trsm(k, j')
//! for j' > k when j == k; otherwise update(k, j, i) for k < i < j, update(k, j', j) for j' > j,
//! and update(k, j, j) once). A tile with no reader (`L(p-1,p-1)`) is not put into `lkji` at
//! all. Each finished `L(j,k)` is also put, uncounted, into a second collection `l` keyed
//! `(j, k)` (the same shared item, not a copy): what the environment reads at the end. So at
//! quiescence `lkji` holds no item and `l` holds the `p (p + 1) / 2` tiles of L.
//!
//! potrf and trsm, the critical path, run at [`Priority::High`]. Untuned, a step whose input is
//! not there yet is suspended and run again; tuned ([`Options::tuned`]), each step declares
//! its inputs with `depends` and starts only when they are all there.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use faer::dyn_stack::{GlobalPodBuffer, PodStack};
use faer::linalg::cholesky::llt::compute::{
    cholesky_in_place, cholesky_in_place_req, LltRegularization,
};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Mat, MatMut, MatRef, Parallelism};
use stampede_coord::{
    Executor, Graph, ItemCollection, Priority, StepCollection, StepCtx, StepError, Tag,
    TagCollection,
};
use stampede_core::{Item, NdArray};

/// How to run the factorization.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Tile size `b` (the last block row and column may be smaller).
    pub tile: usize,
    /// Executor workers.
    pub workers: usize,
    /// Dependency tuning (`depends`) instead of suspension.
    pub tuned: bool,
}

/// The factor and what the run left behind.
#[derive(Debug)]
pub struct Outcome {
    /// L, n × n, lower triangular (column-major, as faer keeps it).
    pub l: Mat<f64>,
    /// Items left in `lkji` after quiescence (the design promises 0).
    pub lkji_left: usize,
    /// Tiles in the result collection `l` (the design promises p (p + 1) / 2).
    pub l_tiles: usize,
    /// Block rows and columns.
    pub p: usize,
    /// The time from the first put to quiescence.
    pub elapsed: Duration,
}

/// A tile as an item: an f64 array of shape `[rows, cols]`, row-major.
fn tile_item(rows: usize, cols: usize, data: &[f64]) -> Item {
    Item::from(NdArray::from_slice(&[rows, cols], data).expect("the shape matches the data"))
}

/// A tile item's shape and elements, copied into a new buffer the kernel may overwrite.
fn tile_data(item: &Item) -> Result<(usize, usize, Vec<f64>), StepError> {
    let owned;
    let a = match item.get::<NdArray>() {
        Some(a) => a,
        None => {
            owned = item
                .decode::<NdArray>()
                .map_err(|e| StepError::failed(format!("not a tile: {e}")))?;
            &owned
        }
    };
    let &[rows, cols] = a.shape() else {
        return Err(StepError::failed(format!(
            "a tile has two dimensions, not {:?}",
            a.shape()
        )));
    };
    let data = match a.as_slice::<f64>() {
        Some(s) => s.to_vec(),
        // Data not aligned for f64 (or not f64: then the length check below fails).
        None if a.dtype() == stampede_core::DType::F64 => a
            .data()
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect(),
        None => {
            return Err(StepError::failed(format!(
                "a tile is f64, not {:?}",
                a.dtype()
            )))
        }
    };
    Ok((rows, cols, data))
}

fn view(rows: usize, cols: usize, data: &[f64]) -> MatRef<'_, f64> {
    faer::mat::from_row_major_slice(data, rows, cols)
}

fn view_mut(rows: usize, cols: usize, data: &mut [f64]) -> MatMut<'_, f64> {
    faer::mat::from_row_major_slice_mut(data, rows, cols)
}

/// POTRF: the diagonal tile, in place, to its lower Cholesky factor (upper part zeroed).
fn potrf(b: usize, data: &mut [f64]) -> Result<(), StepError> {
    let req = cholesky_in_place_req::<f64>(b, Parallelism::None, Default::default())
        .map_err(|e| StepError::failed(format!("{e:?}")))?;
    let mut buf = GlobalPodBuffer::new(req);
    cholesky_in_place(
        view_mut(b, b, data),
        LltRegularization::default(),
        Parallelism::None,
        PodStack::new(&mut buf),
        Default::default(),
    )
    .map_err(|e| StepError::failed(format!("the tile is not positive definite: {e:?}")))?;
    for r in 0..b {
        for c in r + 1..b {
            data[r * b + c] = 0.0;
        }
    }
    Ok(())
}

/// TRSM: X = A L⁻ᵀ in place of A (`rows` × `b`), i.e. L Xᵀ = Aᵀ.
fn trsm(lkk: MatRef<'_, f64>, rows: usize, b: usize, a: &mut [f64]) {
    let x = view_mut(rows, b, a);
    solve_lower_triangular_in_place(lkk, x.transpose_mut(), Parallelism::None);
}

/// SYRK (lower half only): A = A − L Lᵀ.
fn syrk(a: MatMut<'_, f64>, l: MatRef<'_, f64>) {
    triangular::matmul(
        a,
        BlockStructure::TriangularLower,
        l,
        BlockStructure::Rectangular,
        l.transpose(),
        BlockStructure::Rectangular,
        Some(1.0),
        -1.0,
        Parallelism::None,
    );
}

/// GEMM: A = A − Lj Liᵀ.
fn gemm(a: MatMut<'_, f64>, lj: MatRef<'_, f64>, li: MatRef<'_, f64>) {
    matmul(a, lj, li.transpose(), Some(1.0), -1.0, Parallelism::None);
}

fn t3(k: usize, j: usize, i: usize) -> Tag {
    Tag::from((k as i64, j as i64, i as i64))
}

fn idx(tag: &Tag, part: usize) -> usize {
    tag.int(part) as usize
}

/// The graph of a factorization of order `n`: its collections and step collections.
pub struct Cholesky {
    pub g: Graph,
    pub n: usize,
    pub p: usize,
    pub lkji: ItemCollection,
    pub lres: ItemCollection,
    pub potrf_tags: TagCollection,
    pub potrf: StepCollection,
    pub trsm: StepCollection,
    pub update: StepCollection,
}

fn check_sizes(n: usize, cols: usize, opts: Options) -> Result<(), String> {
    if cols != n {
        return Err(format!("the matrix is {n} × {cols}, not square"));
    }
    if n == 0 || opts.tile == 0 {
        return Err(format!(
            "need n ≥ 1 and a tile ≥ 1 (n = {n}, tile = {})",
            opts.tile
        ));
    }
    Ok(())
}

/// Factors the symmetric positive definite `a` (only its lower triangle is read) as a CnC
/// graph. Fails on a zero tile size or an empty matrix, and with the graph's error (naming
/// the step) when a tile is not positive definite.
pub fn factor(a: MatRef<'_, f64>, opts: Options) -> Result<Outcome, String> {
    check_sizes(a.nrows(), a.ncols(), opts)?;
    let c = graph(a.nrows(), opts);
    let start = Instant::now();
    environment(&c, a, opts.tile)?;
    let elapsed = start.elapsed();
    let l = assemble(&c, opts.tile)?;
    Ok(Outcome {
        l,
        lkji_left: c.lkji.len(),
        l_tiles: c.lres.len(),
        p: c.p,
        elapsed,
    })
}

/// The graph (collections, steps, priorities, tuning) for order `n`.
pub fn graph(n: usize, opts: Options) -> Cholesky {
    let bs = opts.tile;
    let p = n.div_ceil(bs);
    let g = Graph::new(Executor::new(opts.workers));
    let lkji = g.items("lkji");
    let lres = g.items("l");
    let potrf_tags = g.tags("potrf_tags");
    let trsm_tags = g.tags("trsm_tags");
    let update_tags = g.tags("update_tags");

    // The readers of the finished L(j,k) (see the module's comment); none for L(p-1,p-1).
    let l_gets = move |k: usize| (p - k - 1) as u32;
    // Puts a finished L(j,k): counted into lkji at (k+1, j, k) if anyone reads it there, and
    // into the result collection at (j, k).
    let put_l = {
        let (lkji, lres) = (lkji.clone(), lres.clone());
        move |ctx: &mut StepCtx, k: usize, j: usize, item: Item| {
            if l_gets(k) > 0 {
                ctx.put_counted(&lkji, t3(k + 1, j, k), item.clone(), l_gets(k));
            }
            ctx.put(&lres, Tag::from((j as i64, k as i64)), item);
        }
    };

    // (potrf: k): gets [lkji: k, k, k]; puts L(k,k) at [lkji: k+1, k, k] and the trsm tags.
    let potrf_step = {
        let (lkji, trsm_tags, put_l) = (lkji.clone(), trsm_tags.clone(), put_l.clone());
        g.steps("potrf", move |ctx, tag| {
            let k = idx(tag, 0);
            let akk = ctx.get(&lkji, t3(k, k, k))?;
            let (b, _, mut d) = tile_data(&akk)?;
            potrf(b, &mut d)?;
            put_l(ctx, k, k, tile_item(b, b, &d));
            for j in k + 1..p {
                ctx.put_tag(&trsm_tags, (k as i64, j as i64));
            }
            Ok(())
        })
    };

    // (trsm: k, j), j > k: gets [lkji: k, j, k] and L(k,k) at [lkji: k+1, k, k]; puts L(j,k)
    // at [lkji: k+1, j, k] and the update tags of block row j, (k, j, i) for k < i <= j.
    let trsm_step = {
        let (lkji, update_tags, put_l) = (lkji.clone(), update_tags.clone(), put_l.clone());
        g.steps("trsm", move |ctx, tag| {
            let (k, j) = (idx(tag, 0), idx(tag, 1));
            let ajk = ctx.get(&lkji, t3(k, j, k))?;
            let lkk = ctx.get(&lkji, t3(k + 1, k, k))?;
            let (rows, b, mut d) = tile_data(&ajk)?;
            let (_, _, l) = tile_data(&lkk)?;
            trsm(view(b, b, &l), rows, b, &mut d);
            put_l(ctx, k, j, tile_item(rows, b, &d));
            for i in k + 1..=j {
                ctx.put_tag(&update_tags, t3(k, j, i));
            }
            Ok(())
        })
    };

    // (update: k, j, i), k < i <= j: gets [lkji: k, j, i], L(j,k) at [lkji: k+1, j, k] and
    // L(i,k) at [lkji: k+1, i, k] (one get when i == j); puts A(j,i) at [lkji: k+1, j, i],
    // read once, by potrf(k+1), trsm(k+1, j) or update(k+1, j, i).
    let update_step = {
        let lkji = lkji.clone();
        g.steps("update", move |ctx, tag| {
            let (k, j, i) = (idx(tag, 0), idx(tag, 1), idx(tag, 2));
            let aji = ctx.get(&lkji, t3(k, j, i))?;
            let ljk = ctx.get(&lkji, t3(k + 1, j, k))?;
            let (rows, cols, mut d) = tile_data(&aji)?;
            let (_, kb, lj) = tile_data(&ljk)?;
            if i == j {
                syrk(view_mut(rows, cols, &mut d), view(rows, kb, &lj));
            } else {
                let lik = ctx.get(&lkji, t3(k + 1, i, k))?;
                let (_, _, li) = tile_data(&lik)?;
                gemm(
                    view_mut(rows, cols, &mut d),
                    view(rows, kb, &lj),
                    view(cols, kb, &li),
                );
            }
            ctx.put_counted(&lkji, t3(k + 1, j, i), tile_item(rows, cols, &d), 1);
            Ok(())
        })
    };

    potrf_step.priority(|_| Priority::High);
    trsm_step.priority(|_| Priority::High);
    if opts.tuned {
        let l = lkji.clone();
        potrf_step.depends(move |tag| {
            let k = idx(tag, 0);
            vec![(l.clone(), t3(k, k, k))]
        });
        let l = lkji.clone();
        trsm_step.depends(move |tag| {
            let (k, j) = (idx(tag, 0), idx(tag, 1));
            vec![(l.clone(), t3(k, j, k)), (l.clone(), t3(k + 1, k, k))]
        });
        let l = lkji.clone();
        update_step.depends(move |tag| {
            let (k, j, i) = (idx(tag, 0), idx(tag, 1), idx(tag, 2));
            let mut v = vec![(l.clone(), t3(k, j, i)), (l.clone(), t3(k + 1, j, k))];
            if i != j {
                v.push((l.clone(), t3(k + 1, i, k)));
            }
            v
        });
    }
    potrf_tags.prescribes(&potrf_step);
    trsm_tags.prescribes(&trsm_step);
    update_tags.prescribes(&update_step);
    Cholesky {
        g,
        n,
        p,
        lkji,
        lres,
        potrf_tags,
        potrf: potrf_step,
        trsm: trsm_step,
        update: update_step,
    }
}

/// The environment: puts the input tiles of `a` at k = 0, each read once, and the potrf
/// tags, and waits for the graph.
fn environment(c: &Cholesky, a: MatRef<'_, f64>, bs: usize) -> Result<(), String> {
    let (n, p, g) = (c.n, c.p, &c.g);
    // Rows (or columns) of block `j`: `bs`, or what is left for the last one.
    let size = move |j: usize| bs.min(n - j * bs);
    // Tiles are cut out before the clock starts.
    let mut inputs = Vec::with_capacity(p * (p + 1) / 2);
    for j in 0..p {
        for i in 0..=j {
            let (rows, cols) = (size(j), size(i));
            let mut d = Vec::with_capacity(rows * cols);
            for r in 0..rows {
                for c in 0..cols {
                    d.push(a.read(j * bs + r, i * bs + c));
                }
            }
            inputs.push((t3(0, j, i), tile_item(rows, cols, &d)));
        }
    }

    for (tag, item) in inputs {
        g.put_counted(&c.lkji, tag, item, 1);
    }
    for k in 0..p {
        g.put_tag(&c.potrf_tags, k as i64);
    }
    g.wait().map_err(|e| e.to_string())
}

/// L from the result collection `l`.
fn assemble(c: &Cholesky, bs: usize) -> Result<Mat<f64>, String> {
    let (n, p) = (c.n, c.p);
    let mut l = Mat::<f64>::zeros(n, n);
    for j in 0..p {
        for k in 0..=j {
            let item =
                c.g.get(&c.lres, Tag::from((j as i64, k as i64)))
                    .map_err(|e| e.to_string())?
                    .ok_or_else(|| format!("L({j},{k}) is missing"))?;
            let (rows, cols, d) = tile_data(&item).map_err(|e| e.to_string())?;
            for r in 0..rows {
                for c in 0..cols {
                    l.write(j * bs + r, k * bs + c, d[r * cols + c]);
                }
            }
        }
    }
    Ok(l)
}

/// The factorization spread over `ranks` address spaces by tile column: every step runs in
/// the space of the column of the tile it writes, `i mod ranks` (potrf and trsm in column
/// k), and every tile is homed there, so a tile moves only to the later steps of other
/// columns that read it. This process is `rank` of graph `name` (one name per run); rank 0
/// is the environment and gives `a` (the others pass `None`, serve until released and
/// return `None`).
#[cfg(feature = "net")]
pub fn factor_across(
    space: &stampede_net::Space,
    name: &str,
    rank: usize,
    ranks: usize,
    n: usize,
    a: Option<MatRef<'_, f64>>,
    opts: Options,
) -> Result<Option<Outcome>, String> {
    if let Some(a) = a {
        check_sizes(a.nrows(), a.ncols(), opts)?;
    }
    let c = graph(n, opts);
    let column = move |part: usize| move |tag: &Tag| idx(tag, part) % ranks;
    c.potrf.compute_on(column(0));
    c.trsm.compute_on(column(0));
    c.update.compute_on(column(2));
    c.lkji.home(column(2));
    c.lres.home(column(1));
    c.g.distribute(space, name, rank, ranks)
        .map_err(|e| e.to_string())?;
    let Some(a) = a else {
        c.g.serve().map_err(|e| e.to_string())?;
        return Ok(None);
    };
    let start = Instant::now();
    let ran = environment(&c, a, opts.tile);
    let elapsed = start.elapsed();
    let l = ran.and_then(|()| assemble(&c, opts.tile));
    c.g.release().map_err(|e| e.to_string())?;
    Ok(Some(Outcome {
        l: l?,
        lkji_left: c.lkji.len(),
        l_tiles: c.p * (c.p + 1) / 2,
        p: c.p,
        elapsed,
    }))
}

/// ‖L Lᵀ − A‖_F / ‖A‖_F.
pub fn residual(a: MatRef<'_, f64>, l: MatRef<'_, f64>) -> f64 {
    let mut r = a.to_owned();
    matmul(
        r.as_mut(),
        l,
        l.transpose(),
        Some(1.0),
        -1.0,
        Parallelism::None,
    );
    r.norm_l2() / a.norm_l2()
}

/// A small seeded generator (splitmix64), uniform in [-1, 1).
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    /// The next value in [-1, 1).
    pub fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// A random symmetric positive definite matrix A = B Bᵀ + n I, B uniform in [-1, 1).
pub fn random_spd(n: usize, seed: u64, par: Parallelism) -> Mat<f64> {
    let mut rng = SplitMix::new(seed);
    let b = Mat::<f64>::from_fn(n, n, |_, _| rng.next_f64());
    let mut a = Mat::<f64>::zeros(n, n);
    matmul(a.as_mut(), b.as_ref(), b.transpose(), None, 1.0, par);
    for i in 0..n {
        a.write(i, i, a.read(i, i) + n as f64);
    }
    a
}

/// faer's own Cholesky of the whole matrix (for comparison): the factor and the time it took.
pub fn faer_cholesky(a: MatRef<'_, f64>, par: Parallelism) -> (Mat<f64>, Duration) {
    let n = a.nrows();
    let mut l = a.to_owned();
    let req = cholesky_in_place_req::<f64>(n, par, Default::default()).expect("stack size");
    let mut buf = GlobalPodBuffer::new(req);
    let start = Instant::now();
    cholesky_in_place(
        l.as_mut(),
        LltRegularization::default(),
        par,
        PodStack::new(&mut buf),
        Default::default(),
    )
    .expect("positive definite");
    let elapsed = start.elapsed();
    for c in 1..n {
        for r in 0..c {
            l.write(r, c, 0.0);
        }
    }
    (l, elapsed)
}
