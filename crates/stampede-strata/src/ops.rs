//! The collective operations a member calls: barrier, broadcast and combines, each blocking
//! and split-phase.

use crate::collective::{Dissemination, Engine, Outcome, Pending, TreeOp, Want};
use crate::error::StrataError;
use crate::member::Member;
use crate::op::{self, Combine, Combiner, Elementwise, Number, Op, Segmented, Unit};

/// How a barrier reaches everyone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum BarrierKind {
    /// ⌈log₂ P⌉ rounds of one message per member: the fewest message latencies.
    #[default]
    Dissemination,
    /// Up the combining tree and down again: 2(P − 1) messages in all rather than
    /// P⌈log₂ P⌉, at twice the depth.
    Tree,
}

fn want(kind: Combine) -> Want {
    match kind {
        Combine::Reduce => Want {
            total: true,
            ..Want::default()
        },
        Combine::Scan | Combine::ExclusiveScan => Want {
            prefix: true,
            ..Want::default()
        },
        Combine::BackScan | Combine::ExclusiveBackScan => Want {
            suffix: true,
            ..Want::default()
        },
    }
}

/// This member's result of a combine from the tree's outcome; `identity` stands for a
/// range that covers nobody.
fn result(
    c: &dyn Combiner,
    kind: Combine,
    out: Outcome,
    identity: Vec<u8>,
) -> Result<Vec<u8>, String> {
    Ok(match kind {
        Combine::Reduce => out.total.unwrap_or(identity),
        Combine::Scan => match out.prefix {
            Some(p) => c.combine(&p, &out.own)?,
            None => out.own,
        },
        Combine::ExclusiveScan => out.prefix.unwrap_or(identity),
        Combine::BackScan => match out.suffix {
            Some(s) => c.combine(&out.own, &s)?,
            None => out.own,
        },
        Combine::ExclusiveBackScan => out.suffix.unwrap_or(identity),
    })
}

fn decoded<T: Number>(rank: usize) -> impl Fn(Vec<u8>) -> Result<Vec<T>, StrataError> {
    move |b| op::decode::<T>(&b).map_err(|detail| StrataError::Mismatch { from: rank, detail })
}

impl Member {
    /// Waits until every member has called `barrier`.
    pub fn barrier(&self) -> Result<(), StrataError> {
        self.start_barrier()?.complete()
    }

    /// The split-phase barrier: tells the others this member arrived; the returned handle
    /// completes once all have.
    pub fn start_barrier(&self) -> Result<Pending<'_, ()>, StrataError> {
        self.start_barrier_with(BarrierKind::default())
    }

    /// A barrier of the given kind (every member must use the same).
    pub fn start_barrier_with(&self, kind: BarrierKind) -> Result<Pending<'_, ()>, StrataError> {
        let engine = match kind {
            BarrierKind::Dissemination => Engine::Dissemination(Dissemination::new(self)),
            BarrierKind::Tree => Engine::Tree(Box::new(TreeOp::new(
                self,
                "barrier",
                "tree barrier",
                0,
                false,
                Box::new(Unit),
                Vec::new(),
                Want::default(),
            ))),
        };
        Pending::start(self, engine, |_| Ok(()))
    }

    /// Member `root`'s `values` to every member (the others' `values` are ignored).
    pub fn broadcast<T: Number>(&self, root: usize, values: &[T]) -> Result<Vec<T>, StrataError> {
        self.start_broadcast(root, values)?.complete()
    }

    /// The split-phase broadcast.
    pub fn start_broadcast<T: Number>(
        &self,
        root: usize,
        values: &[T],
    ) -> Result<Pending<'_, Vec<T>>, StrataError> {
        let rank = self.rank();
        self.broadcast_with(root, op::encode(values), move |b| decoded::<T>(rank)(b))
    }

    /// Member `root`'s bytes to every member.
    pub fn broadcast_bytes(&self, root: usize, bytes: Vec<u8>) -> Result<Vec<u8>, StrataError> {
        self.start_broadcast_bytes(root, bytes)?.complete()
    }

    /// The split-phase broadcast of bytes.
    pub fn start_broadcast_bytes(
        &self,
        root: usize,
        bytes: Vec<u8>,
    ) -> Result<Pending<'_, Vec<u8>>, StrataError> {
        self.broadcast_with(root, bytes, Ok)
    }

    fn broadcast_with<'m, R>(
        &'m self,
        root: usize,
        bytes: Vec<u8>,
        finish: impl FnOnce(Vec<u8>) -> Result<R, StrataError> + 'm,
    ) -> Result<Pending<'m, R>, StrataError> {
        if root >= self.size() {
            return Err(StrataError::InvalidArgument(format!(
                "root {root} in a group of {}",
                self.size()
            )));
        }
        let own = if root == self.rank() {
            bytes
        } else {
            Vec::new()
        };
        let engine = Engine::Tree(Box::new(TreeOp::new(
            self,
            "broadcast",
            &format!("broadcast from {root}"),
            root,
            true,
            Box::new(Unit),
            own,
            Want {
                total: true,
                ..Want::default()
            },
        )));
        Pending::start(self, engine, |out| finish(out.total.unwrap_or_default()))
    }

    /// Combines every member's vector element-wise with `op` (all vectors of one length);
    /// `kind` says which members' values each member gets (thesis §6.1.1).
    pub fn combine<T: Number>(
        &self,
        kind: Combine,
        op: Op,
        values: &[T],
    ) -> Result<Vec<T>, StrataError> {
        self.start_combine(kind, op, values)?.complete()
    }

    /// One number each: the scalar [`combine`](Member::combine).
    pub fn combine_one<T: Number>(&self, kind: Combine, op: Op, x: T) -> Result<T, StrataError> {
        Ok(self.combine(kind, op, &[x])?[0])
    }

    /// The split-phase combine.
    pub fn start_combine<T: Number>(
        &self,
        kind: Combine,
        op: Op,
        values: &[T],
    ) -> Result<Pending<'_, Vec<T>>, StrataError> {
        op::check::<T>(op)?;
        let identity = op::encode(&vec![T::identity(op); values.len()]);
        let description = format!("combine {kind:?} {op:?} of {}", T::NAME);
        let engine = Engine::Tree(Box::new(TreeOp::new(
            self,
            "combine",
            &description,
            0,
            false,
            Box::new(Elementwise::<T>::new(vec![op])),
            op::encode(values),
            want(kind),
        )));
        let rank = self.rank();
        Pending::start(self, engine, move |out| {
            let c = Elementwise::<T>::new(vec![op]);
            let bytes = result(&c, kind, out, identity)
                .map_err(|detail| StrataError::Mismatch { from: rank, detail })?;
            decoded::<T>(rank)(bytes)
        })
    }

    /// A segmented scan or back-scan: the members form runs of consecutive ranks, a run
    /// starting at each member that passes `starts_segment` (and at member 0), and each run
    /// is combined on its own, as if it were a group of its own.
    pub fn combine_segmented<T: Number>(
        &self,
        kind: Combine,
        op: Op,
        values: &[T],
        starts_segment: bool,
    ) -> Result<Vec<T>, StrataError> {
        self.start_combine_segmented(kind, op, values, starts_segment)?
            .complete()
    }

    /// The split-phase segmented combine.
    pub fn start_combine_segmented<T: Number>(
        &self,
        kind: Combine,
        op: Op,
        values: &[T],
        starts_segment: bool,
    ) -> Result<Pending<'_, Vec<T>>, StrataError> {
        op::check::<T>(op)?;
        if kind == Combine::Reduce {
            return Err(StrataError::InvalidArgument(
                "a segmented combine is a scan or a back-scan".into(),
            ));
        }
        let backward = matches!(kind, Combine::BackScan | Combine::ExclusiveBackScan);
        let identity = op::encode(&vec![T::identity(op); values.len()]);
        let description = format!("segmented {kind:?} {op:?} of {}", T::NAME);
        let seg = move || Segmented {
            inner: Elementwise::<T>::new(vec![op]),
            backward,
        };
        let engine = Engine::Tree(Box::new(TreeOp::new(
            self,
            "segmented combine",
            &description,
            0,
            false,
            Box::new(seg()),
            op::segment_value(starts_segment, op::encode(values)),
            want(kind),
        )));
        let rank = self.rank();
        Pending::start(self, engine, move |out| {
            let mismatch = |detail| StrataError::Mismatch { from: rank, detail };
            // A range that crosses into another run contributes nothing: the member's own
            // run starts here (exclusive scan), or the next one starts right after it
            // (exclusive back-scan).
            let cut = match kind {
                Combine::ExclusiveScan => starts_segment,
                Combine::ExclusiveBackScan => out.suffix.as_ref().is_some_and(|s| s[0] != 0),
                _ => false,
            };
            let bytes = result(
                &seg(),
                kind,
                out,
                op::segment_value(false, identity.clone()),
            )
            .map_err(mismatch)?;
            if cut {
                return decoded::<T>(rank)(identity);
            }
            decoded::<T>(rank)(bytes[2..].to_vec())
        })
    }

    /// Several reductions fused into one: element `i` of every member's vector is combined
    /// with `ops[i % ops.len()]`.
    pub(crate) fn reduce_mixed(
        &self,
        ops: Vec<Op>,
        values: &[f64],
    ) -> Result<Vec<f64>, StrataError> {
        let description = format!("reduce {ops:?} of f64");
        let engine = Engine::Tree(Box::new(TreeOp::new(
            self,
            "combine",
            &description,
            0,
            false,
            Box::new(Elementwise::<f64>::new(ops)),
            op::encode(values),
            want(Combine::Reduce),
        )));
        let rank = self.rank();
        Pending::start(self, engine, move |out| {
            decoded::<f64>(rank)(out.total.unwrap_or_default())
        })?
        .complete()
    }
}
