//! Successive over-relaxation on a square grid (thesis §4.4, §5.2), spread over the
//! members of a Strata group by one of five layouts, with ghost zones `k` cells wide so the
//! members exchange boundaries only every `k` iterations (the extra rows and columns, a
//! parameter to optimise: wider zones mean fewer exchanges and more redundant work).
//!
//! Each iteration replaces every interior cell by `(1 − ω)·u + ω·(north + south + west +
//! east)/4` (weighted Jacobi over-relaxation); the outer ring of the grid is fixed. Every
//! layout computes each cell with the same operations in the same order, so every layout
//! and every `k` gives the sequential result bit for bit.

use bytes::Bytes;
use stampede_strata::{Member, StrataError};

/// How the grid is divided among `p` members.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Member 0 computes everything.
    Uniprocessor,
    /// `√p × √p` square blocks (`p` a perfect square).
    SquareBlocks,
    /// `p` strips side by side.
    VerticalStrips,
    /// `p` strips one above the other.
    HorizontalStrips,
    /// `r × c` blocks with `r·c = p`, `1 < r < c`, the most nearly square such (`p` not
    /// prime and not a perfect square).
    RectangularBlocks,
}

impl Layout {
    /// Every layout.
    pub const ALL: [Layout; 5] = [
        Layout::Uniprocessor,
        Layout::SquareBlocks,
        Layout::VerticalStrips,
        Layout::HorizontalStrips,
        Layout::RectangularBlocks,
    ];

    /// A short name, also the model's.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Uniprocessor => "uniprocessor",
            Layout::SquareBlocks => "square_blocks",
            Layout::VerticalStrips => "vertical_strips",
            Layout::HorizontalStrips => "horizontal_strips",
            Layout::RectangularBlocks => "rectangular_blocks",
        }
    }

    /// Rows and columns of members, or `None` when the layout cannot divide among `p`
    /// (the thesis' models return +∞ there).
    pub fn shape(self, p: usize) -> Option<(usize, usize)> {
        match self {
            Layout::Uniprocessor => Some((1, 1)),
            Layout::VerticalStrips => Some((1, p)),
            Layout::HorizontalStrips => Some((p, 1)),
            Layout::SquareBlocks => {
                let r = (p as f64).sqrt().round() as usize;
                (r * r == p).then_some((r, r))
            }
            Layout::RectangularBlocks => (2..p)
                .rev()
                .find(|&r| p % r == 0 && r < p / r)
                .map(|r| (r, p / r)),
        }
    }
}

/// A rectangle of cells: rows `r0..r1`, columns `c0..c1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rect {
    r0: usize,
    r1: usize,
    c0: usize,
    c1: usize,
}

impl Rect {
    fn is_empty(&self) -> bool {
        self.r0 >= self.r1 || self.c0 >= self.c1
    }
    fn meet(&self, o: &Rect) -> Rect {
        Rect {
            r0: self.r0.max(o.r0),
            r1: self.r1.min(o.r1),
            c0: self.c0.max(o.c0),
            c1: self.c1.min(o.c1),
        }
    }
    fn grow(&self, k: usize, n: usize) -> Rect {
        Rect {
            r0: self.r0.saturating_sub(k),
            r1: (self.r1 + k).min(n),
            c0: self.c0.saturating_sub(k),
            c1: (self.c1 + k).min(n),
        }
    }
}

/// The cells member `rank` owns; empty for members the layout leaves out.
fn owned(layout: Layout, p: usize, n: usize, rank: usize) -> Rect {
    let (pr, pc) = layout.shape(p).expect("checked before");
    if rank >= pr * pc {
        return Rect {
            r0: 0,
            r1: 0,
            c0: 0,
            c1: 0,
        };
    }
    let band = |i: usize, parts: usize| (i * n / parts, (i + 1) * n / parts);
    let (r0, r1) = band(rank / pc, pr);
    let (c0, c1) = band(rank % pc, pc);
    Rect { r0, r1, c0, c1 }
}

/// One weighted-Jacobi step of the cells of `region` that are interior to the grid,
/// reading `u` and writing `v` (both `n × n`, row-major).
fn relax(u: &[f64], v: &mut [f64], n: usize, region: Rect, omega: f64) {
    let interior = Rect {
        r0: 1,
        r1: n - 1,
        c0: 1,
        c1: n - 1,
    }
    .meet(&region);
    if interior.is_empty() {
        return;
    }
    for i in interior.r0..interior.r1 {
        for j in interior.c0..interior.c1 {
            let at = i * n + j;
            let around = u[at - n] + u[at + n] + u[at - 1] + u[at + 1];
            v[at] = (1.0 - omega) * u[at] + omega * (around * 0.25);
        }
    }
}

/// The sequential reference: `iterations` steps over the whole grid.
pub fn sequential(grid: &[f64], n: usize, iterations: usize, omega: f64) -> Vec<f64> {
    let mut u = grid.to_vec();
    let mut v = grid.to_vec();
    let all = Rect {
        r0: 0,
        r1: n,
        c0: 0,
        c1: n,
    };
    for _ in 0..iterations {
        relax(&u, &mut v, n, all, omega);
        std::mem::swap(&mut u, &mut v);
    }
    u
}

fn pack(u: &[f64], n: usize, r: Rect) -> Bytes {
    let mut out = Vec::with_capacity((r.r1 - r.r0) * (r.c1 - r.c0) * 8);
    for i in r.r0..r.r1 {
        for x in &u[i * n + r.c0..i * n + r.c1] {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    Bytes::from(out)
}

fn unpack(u: &mut [f64], n: usize, r: Rect, b: &[u8]) -> Result<(), String> {
    if b.len() != (r.r1 - r.r0) * (r.c1 - r.c0) * 8 {
        return Err(format!(
            "{} bytes for a {}×{} region",
            b.len(),
            r.r1 - r.r0,
            r.c1 - r.c0
        ));
    }
    let mut words = b.chunks_exact(8);
    for i in r.r0..r.r1 {
        for x in &mut u[i * n + r.c0..i * n + r.c1] {
            *x = f64::from_le_bytes(
                words
                    .next()
                    .expect("sized above")
                    .try_into()
                    .expect("eight"),
            );
        }
    }
    Ok(())
}

/// Relaxes the `n × n` grid for `iterations` steps over every member of `m`'s group (every
/// member calls it with the same arguments; only member 0's `grid` is read, the others may
/// pass an empty slice), exchanging ghost zones `extra` cells wide every `extra` steps.
/// Member 0 gets the whole result; the others `None`.
pub fn relax_grid(
    m: &Member,
    grid: &[f64],
    n: usize,
    iterations: usize,
    omega: f64,
    layout: Layout,
    extra: usize,
) -> Result<Option<Vec<f64>>, StrataError> {
    let (rank, p) = (m.rank(), m.size());
    if layout.shape(p).is_none() {
        return Err(StrataError::InvalidArgument(format!(
            "the {} layout cannot divide among {p} members",
            layout.name()
        )));
    }
    if extra == 0 || n < 3 {
        return Err(StrataError::InvalidArgument(
            "a grid of at least 3 × 3 and ghost zones at least one cell wide".into(),
        ));
    }
    if rank == 0 && grid.len() != n * n {
        return Err(StrataError::InvalidArgument(format!(
            "{} cells for a {n} × {n} grid",
            grid.len()
        )));
    }
    // The initial grid reaches every member (each keeps its zone of it).
    let bytes: Vec<u8> = if rank == 0 {
        grid.iter().flat_map(|x| x.to_le_bytes()).collect()
    } else {
        Vec::new()
    };
    let all = m.broadcast_bytes(0, bytes)?;
    let mut u: Vec<f64> = all
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("eight bytes")))
        .collect();
    let mut v = u.clone();
    let me = owned(layout, p, n, rank);
    let members: Vec<Rect> = (0..p).map(|q| owned(layout, p, n, q)).collect();
    let bad = |from: usize| move |detail: String| StrataError::BadTransfer { from, detail };
    let mut done = 0;
    let mut phase = 0u64;
    while done < iterations {
        let steps = extra.min(iterations - done);
        if phase > 0 {
            // Exchange: each member sends what the others' ghost zones hold of its cells.
            for (q, theirs) in members.iter().enumerate() {
                let part = theirs.grow(extra, n).meet(&me);
                if q != rank && !me.is_empty() && !theirs.is_empty() && !part.is_empty() {
                    m.send_block(q, phase, pack(&u, n, part))?;
                }
            }
            m.service_all()?;
            for (q, theirs) in members.iter().enumerate() {
                let part = me.grow(extra, n).meet(theirs);
                if q != rank && !me.is_empty() && !part.is_empty() {
                    let b = m.recv_block(q, phase)?;
                    unpack(&mut u, n, part, &b).map_err(bad(q))?;
                }
            }
        }
        if !me.is_empty() {
            for s in 0..steps {
                // The region still valid after this step shrinks by one cell a step.
                let region = me.grow(extra - 1 - s, n);
                // Cells outside it are stale in one buffer, and not read until the next
                // exchange overwrites them.
                relax(&u, &mut v, n, region, omega);
                std::mem::swap(&mut u, &mut v);
            }
        }
        done += steps;
        phase += 1;
    }
    // Gather at member 0.
    let gather_tag = phase + 1;
    if rank != 0 && !me.is_empty() {
        m.send_block(0, gather_tag, pack(&u, n, me))?;
        m.service_all()?;
    }
    if rank != 0 {
        return Ok(None);
    }
    for (q, theirs) in members.iter().enumerate().skip(1) {
        if !theirs.is_empty() {
            let b = m.recv_block(q, gather_tag)?;
            unpack(&mut u, n, *theirs, &b).map_err(bad(q))?;
        }
    }
    Ok(Some(u))
}
