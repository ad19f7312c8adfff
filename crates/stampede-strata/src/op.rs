//! Combine operations (thesis §6.1.1, Table 6-1): the operators, the element types they
//! apply to, and the associative functions over encoded values that the combining tree runs.

use crate::error::StrataError;

/// The associative operator of a combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Sum (wrapping for integers).
    Add,
    /// Bitwise OR; integers only.
    Or,
    /// Bitwise exclusive OR; integers only.
    Xor,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl Op {
    /// Every operator, in the table's order.
    pub const ALL: [Op; 5] = [Op::Add, Op::Or, Op::Xor, Op::Max, Op::Min];
}

/// What a combine returns to each member `i` of a group, given one contribution `x_j` per
/// member (thesis §6.1.1): the operator is applied in rank order, so it need only be
/// associative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Combine {
    /// `x_0 ⊕ … ⊕ x_{P-1}` to every member.
    Reduce,
    /// `x_0 ⊕ … ⊕ x_i` (inclusive scan).
    Scan,
    /// `x_0 ⊕ … ⊕ x_{i-1}`; the operator's identity at member 0.
    ExclusiveScan,
    /// `x_i ⊕ … ⊕ x_{P-1}` (inclusive back-scan, from the right).
    BackScan,
    /// `x_{i+1} ⊕ … ⊕ x_{P-1}`; the identity at the last member.
    ExclusiveBackScan,
}

impl Combine {
    /// Every kind.
    pub const ALL: [Combine; 5] = [
        Combine::Reduce,
        Combine::Scan,
        Combine::ExclusiveScan,
        Combine::BackScan,
        Combine::ExclusiveBackScan,
    ];
}

/// A number a combine applies to: the signed and unsigned integers of 32 and 64 bits and
/// both floating-point types.
pub trait Number: bytemuck::Pod + PartialOrd + Send + Sync + std::fmt::Debug + 'static {
    /// Whether OR and XOR apply.
    const BITWISE: bool;
    /// A short name for error messages.
    const NAME: &'static str;
    /// `a ⊕ b`; OR and XOR only when [`Number::BITWISE`].
    fn apply(op: Op, a: Self, b: Self) -> Self;
    /// The identity of `op`.
    fn identity(op: Op) -> Self;
    /// The value as a float (for the composite operations).
    fn to_f64(self) -> f64;
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Number for $t {
            const BITWISE: bool = true;
            const NAME: &'static str = stringify!($t);
            fn apply(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Add => a.wrapping_add(b),
                    Op::Or => a | b,
                    Op::Xor => a ^ b,
                    Op::Max => a.max(b),
                    Op::Min => a.min(b),
                }
            }
            fn identity(op: Op) -> Self {
                match op {
                    Op::Add | Op::Or | Op::Xor => 0,
                    Op::Max => <$t>::MIN,
                    Op::Min => <$t>::MAX,
                }
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
integer!(i32, i64, u32, u64);

macro_rules! float {
    ($($t:ty),*) => {$(
        impl Number for $t {
            const BITWISE: bool = false;
            const NAME: &'static str = stringify!($t);
            fn apply(op: Op, a: Self, b: Self) -> Self {
                match op {
                    Op::Add => a + b,
                    Op::Max => a.max(b),
                    Op::Min => a.min(b),
                    Op::Or | Op::Xor => unreachable!("refused before the combine starts"),
                }
            }
            fn identity(op: Op) -> Self {
                match op {
                    Op::Add | Op::Or | Op::Xor => 0.0,
                    Op::Max => <$t>::NEG_INFINITY,
                    Op::Min => <$t>::INFINITY,
                }
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    )*};
}
float!(f32, f64);

/// Checks that `op` applies to `T`.
pub(crate) fn check<T: Number>(op: Op) -> Result<(), StrataError> {
    if matches!(op, Op::Or | Op::Xor) && !T::BITWISE {
        return Err(StrataError::InvalidArgument(format!(
            "{op:?} applies to integers, not {}",
            T::NAME
        )));
    }
    Ok(())
}

/// An associative function over encoded values: what the combining tree runs at each node.
pub(crate) trait Combiner {
    /// `left ⊕ right`, where `left` covers lower ranks than `right`.
    fn combine(&self, left: &[u8], right: &[u8]) -> Result<Vec<u8>, String>;
}

/// No value at all: barriers.
pub(crate) struct Unit;

impl Combiner for Unit {
    fn combine(&self, _: &[u8], _: &[u8]) -> Result<Vec<u8>, String> {
        Ok(Vec::new())
    }
}

/// Element-wise over vectors of `T` with one operator per element position, cycling (one
/// operator for a plain vector combine; several for the composites that fuse reductions).
pub(crate) struct Elementwise<T> {
    pub ops: Vec<Op>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Number> Elementwise<T> {
    pub fn new(ops: Vec<Op>) -> Self {
        Elementwise {
            ops,
            _t: std::marker::PhantomData,
        }
    }
}

impl<T: Number> Combiner for Elementwise<T> {
    fn combine(&self, left: &[u8], right: &[u8]) -> Result<Vec<u8>, String> {
        if left.len() != right.len() {
            return Err(format!(
                "vectors of {} and {} elements",
                left.len() / size_of::<T>(),
                right.len() / size_of::<T>()
            ));
        }
        let n = std::mem::size_of::<T>();
        let mut out = Vec::with_capacity(left.len());
        for (i, (a, b)) in left.chunks_exact(n).zip(right.chunks_exact(n)).enumerate() {
            let a: T = bytemuck::pod_read_unaligned(a);
            let b: T = bytemuck::pod_read_unaligned(b);
            let op = self.ops[i % self.ops.len()];
            out.extend_from_slice(bytemuck::bytes_of(&T::apply(op, a, b)));
        }
        Ok(out)
    }
}

/// A segmented combine (thesis §6.1.1): the members are split into runs of consecutive
/// ranks, each starting where a member says so, and each run is combined on its own. A
/// value covering ranks `a..=b` is two flag bytes, then the inner value: `first` (member
/// `a` starts a run), `inner` (some member after `a` does), and the combine of the run
/// part this direction keeps: the last run's (forward, for scans) or the first run's
/// (backward, for back-scans). Both rules are associative, so the tree needs nothing else.
pub(crate) struct Segmented<C> {
    pub inner: C,
    pub backward: bool,
}

impl<C: Combiner> Combiner for Segmented<C> {
    fn combine(&self, left: &[u8], right: &[u8]) -> Result<Vec<u8>, String> {
        if left.len() < 2 || right.len() < 2 {
            return Err("a segmented value without its flags".into());
        }
        let (lf, li, lv) = (left[0], left[1], &left[2..]);
        let (rf, ri, rv) = (right[0], right[1], &right[2..]);
        let mut out = vec![lf, li | rf | ri];
        if self.backward {
            if li != 0 || rf != 0 {
                out.extend_from_slice(lv);
            } else {
                out.extend(self.inner.combine(lv, rv)?);
            }
        } else if rf != 0 || ri != 0 {
            out.extend_from_slice(rv);
        } else {
            out.extend(self.inner.combine(lv, rv)?);
        }
        Ok(out)
    }
}

/// One member's segmented value.
pub(crate) fn segment_value(starts: bool, value: Vec<u8>) -> Vec<u8> {
    let mut out = vec![starts as u8, 0];
    out.extend(value);
    out
}

/// The bytes of a vector of numbers.
pub(crate) fn encode<T: Number>(values: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

/// A vector of numbers from bytes of any alignment.
pub(crate) fn decode<T: Number>(bytes: &[u8]) -> Result<Vec<T>, String> {
    let n = std::mem::size_of::<T>();
    if bytes.len() % n != 0 {
        return Err(format!(
            "{} bytes are not a vector of {}",
            bytes.len(),
            T::NAME
        ));
    }
    Ok(bytes
        .chunks_exact(n)
        .map(|c| {
            let mut v = <T as bytemuck::Zeroable>::zeroed();
            bytemuck::bytes_of_mut(&mut v).copy_from_slice(c);
            v
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;

    /// Folds a run of members in rank order with the segmented rule.
    fn fold(backward: bool, xs: &[(bool, i64)]) -> Vec<u8> {
        let seg = Segmented {
            inner: Elementwise::<i64>::new(vec![Op::Add]),
            backward,
        };
        xs.iter()
            .map(|&(s, x)| segment_value(s, encode(&[x])))
            .reduce(|a, b| seg.combine(&a, &b).unwrap())
            .unwrap()
    }

    proptest! {
        /// The rule is associative (any bracketing gives the same value), and a range's
        /// value is the sum of its last run (forward) or its first run (backward).
        #[test]
        fn segmented_rules_are_associative_and_keep_the_right_run(
            xs in proptest::collection::vec((any::<bool>(), -50i64..50), 1..12),
            cut in 0usize..12,
        ) {
            for backward in [false, true] {
                let whole = fold(backward, &xs);
                let cut = cut % xs.len();
                if cut > 0 {
                    let seg = Segmented { inner: Elementwise::<i64>::new(vec![Op::Add]), backward };
                    let split = seg.combine(&fold(backward, &xs[..cut]), &fold(backward, &xs[cut..])).unwrap();
                    prop_assert_eq!(&split, &whole);
                }
                let starts: Vec<usize> = (1..xs.len()).filter(|&i| xs[i].0).collect();
                let run = if backward {
                    &xs[..starts.first().copied().unwrap_or(xs.len())]
                } else {
                    &xs[starts.last().copied().unwrap_or(0)..]
                };
                let sum: i64 = run.iter().map(|p| p.1).sum();
                prop_assert_eq!(decode::<i64>(&whole[2..]).unwrap(), vec![sum]);
            }
        }
    }

    #[test]
    fn bitwise_on_floats_is_refused() {
        assert!(check::<f64>(Op::Xor).is_err());
        assert!(check::<u32>(Op::Xor).is_ok());
    }
}
