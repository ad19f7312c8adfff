//! Cost models of the collectives (thesis §6.3), calibrated with the tuning toolkit on the
//! deployment they run on. Every operation has its own specification; the samples come
//! from the group itself (the time of the slowest member, per operation), which is the
//! thesis' custom data collection for operations a wrapper cannot time.

use std::time::Instant;

use bytes::Bytes;
use stampede_core::Runtime;
use stampede_tune::{
    fit, sample_points, Model, ModelSpec, Profiler, Progress, TermSpec, TuneError,
};

use crate::error::StrataError;
use crate::member::{GroupOptions, Member};
use crate::op::{Combine, Op};
use crate::ops::BarrierKind;
use crate::xfer::Exchange;

/// An operation with a model of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A barrier; variable `p`.
    Barrier(BarrierKind),
    /// A reduction of `n` 64-bit numbers to every member; variables `p`, `n`.
    Reduce,
    /// A broadcast of `n` bytes; variables `p`, `n`.
    Broadcast,
    /// An all-to-all of `n`-byte blocks; variables `p`, `n`.
    AllToAll(Exchange),
}

impl Operation {
    /// Every operation modelled, with the all-to-all's barriers every round.
    pub const ALL: [Operation; 7] = [
        Operation::Barrier(BarrierKind::Dissemination),
        Operation::Barrier(BarrierKind::Tree),
        Operation::Reduce,
        Operation::Broadcast,
        Operation::AllToAll(Exchange::Barriers { every: 1 }),
        Operation::AllToAll(Exchange::Interleaved),
        Operation::AllToAll(Exchange::Direct),
    ];

    /// The model's name.
    pub fn name(self) -> String {
        match self {
            Operation::Barrier(BarrierKind::Dissemination) => "barrier_dissemination".into(),
            Operation::Barrier(BarrierKind::Tree) => "barrier_tree".into(),
            Operation::Reduce => "reduce".into(),
            Operation::Broadcast => "broadcast".into(),
            Operation::AllToAll(Exchange::Barriers { every }) => {
                format!("all_to_all_barriers_every_{every}")
            }
            Operation::AllToAll(Exchange::Interleaved) => "all_to_all_interleaved".into(),
            Operation::AllToAll(Exchange::Direct) => "all_to_all_direct".into(),
        }
    }

    /// The specification over group sizes `2..=max_p` and sizes up to `max_n`: start-up,
    /// per-level (log p) and per-element terms as in the thesis' CombineVector model, and
    /// for the all-to-all the p − 1 rounds and their bytes.
    pub fn spec(self, max_p: usize, max_n: f64) -> Result<ModelSpec, TuneError> {
        let b = ModelSpec::new(&self.name()).variable("p", 2.0, max_p.max(2) as f64, true);
        // With one group size the group's terms repeat the others: leave them out.
        let (terms, sized): (&[&str], bool) = match (self, max_p > 2) {
            (Operation::Barrier(_), true) => (&["1", "log2(p)", "p"], false),
            (Operation::Barrier(_), false) => (&["1"], false),
            (Operation::Reduce | Operation::Broadcast, true) => {
                (&["1", "log2(p)", "n", "n*log2(p)"], true)
            }
            (Operation::Reduce | Operation::Broadcast, false) => (&["1", "n"], true),
            (Operation::AllToAll(_), true) => (&["1", "p", "p*n", "n"], true),
            (Operation::AllToAll(_), false) => (&["1", "n"], true),
        };
        let mut b = if sized {
            b.variable("n", 1.0, max_n, true)
        } else {
            b
        };
        for term in terms {
            b = b.term(TermSpec::parse(term)?);
        }
        b.build()
    }

    /// The variables of one run.
    fn explain(self, x: &[f64]) -> (usize, usize) {
        (x[0] as usize, x.get(1).map_or(0, |&n| n as usize))
    }
}

/// Times `op` with `n` (elements or bytes) on every member of `m`'s group: every member
/// calls it; each returns the per-operation seconds of the slowest member over `reps`
/// runs, after a barrier lines them up.
pub fn time_member(m: &Member, op: Operation, n: usize, reps: usize) -> Result<f64, StrataError> {
    let reps = reps.max(1);
    let values = vec![1u64; n.max(1)];
    let bytes = Bytes::from(vec![7u8; n]);
    m.barrier()?;
    let t0 = Instant::now();
    for _ in 0..reps {
        match op {
            Operation::Barrier(kind) => m.start_barrier_with(kind)?.complete()?,
            Operation::Reduce => {
                m.combine(Combine::Reduce, Op::Add, &values)?;
            }
            Operation::Broadcast => {
                m.broadcast_bytes(0, bytes.to_vec())?;
            }
            Operation::AllToAll(how) => {
                m.all_to_all(vec![bytes.clone(); m.size()], how)?;
            }
        }
    }
    let mine = t0.elapsed().as_secs_f64() / reps as f64;
    m.combine_one(Combine::Reduce, Op::Max, mine)
}

/// Binds the calling thread to core `rank` modulo the cores there are, as parallel
/// launchers bind ranks. The threads platform's harnesses bind every member: left to the
/// scheduler, two members of a group on a 2-core virtual machine sometimes shared a core
/// while the other idled, which doubled a 57,000-key radix sort's time in about a third of
/// runs; bound, its slowest quarter was within 10% of its fastest run. Returns whether the
/// thread was bound.
pub fn pin_member(rank: usize) -> bool {
    match core_affinity::get_core_ids() {
        Some(cores) if !cores.is_empty() => {
            core_affinity::set_for_current(cores[rank % cores.len()])
        }
        _ => false,
    }
}

/// Times `op` in a fresh group of `p` threads in one process (the threads platform), each
/// bound to a core ([`pin_member`]).
pub fn time_in_threads(
    op: Operation,
    p: usize,
    n: usize,
    reps: usize,
    opts: &GroupOptions,
) -> Result<f64, StrataError> {
    let rt = Runtime::new();
    let results: Vec<Result<f64, StrataError>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..p)
            .map(|rank| {
                let (rt, opts) = (rt.clone(), opts.clone());
                s.spawn(move || {
                    pin_member(rank);
                    let m = Member::join(&rt, "calibration", rank, p, opts)?;
                    time_member(&m, op, n, reps)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("a calibration thread panicked"))
            .collect()
    });
    results.into_iter().next().expect("at least one member")
}

/// Repetitions per sample: enough operations that one sample is well above the clock's
/// resolution, few enough that big transfers stay quick.
fn reps_for(op: Operation, p: usize, n: usize) -> usize {
    let bytes = match op {
        Operation::Barrier(_) => 0,
        Operation::Reduce => n * 8,
        Operation::Broadcast => n,
        Operation::AllToAll(_) => n * p,
    };
    (2_000_000 / (bytes + 20_000)).clamp(3, 100)
}

/// Calibrates `op` on the threads platform over `points` sample points (median of three
/// each) and returns the fitted model with the calibration's seconds.
pub fn calibrate_threads(
    op: Operation,
    max_p: usize,
    max_n: f64,
    points: usize,
    opts: &GroupOptions,
    progress: impl FnMut(Progress),
) -> Result<(Model, f64), StrataError> {
    calibrate(
        op,
        max_p,
        max_n,
        points,
        |op, p, n, reps| time_in_threads(op, p, n, reps, opts),
        progress,
    )
}

/// Calibrates `op` on any platform: `measure(op, p, n, reps)` returns the slowest
/// member's seconds per operation in a group of `p` (see [`time_member`]).
pub fn calibrate(
    op: Operation,
    max_p: usize,
    max_n: f64,
    points: usize,
    mut measure: impl FnMut(Operation, usize, usize, usize) -> Result<f64, StrataError>,
    progress: impl FnMut(Progress),
) -> Result<(Model, f64), StrataError> {
    let spec = op
        .spec(max_p, max_n)
        .map_err(|e| StrataError::InvalidArgument(e.to_string()))?;
    let t0 = Instant::now();
    let mut failed = None;
    let samples = Profiler::default().profile_measured(
        &sample_points(&spec, points, 1),
        |x| {
            let (p, n) = op.explain(x);
            match measure(op, p, n, reps_for(op, p, n)) {
                Ok(t) => t,
                Err(e) => {
                    failed.get_or_insert(e);
                    f64::NAN
                }
            }
        },
        progress,
    );
    if let Some(e) = failed {
        return Err(e);
    }
    let model =
        fit(&spec, &samples, 0.95).map_err(|e| StrataError::InvalidArgument(e.to_string()))?;
    Ok((model, t0.elapsed().as_secs_f64()))
}
