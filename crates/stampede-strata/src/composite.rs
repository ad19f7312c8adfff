//! The composite reductions Strata added for statistical modelling (thesis Table 6-1,
//! Fig. 6-2): one number per member in, one aggregate out to every member.

use crate::error::StrataError;
use crate::member::Member;
use crate::op::{Combine, Op};

impl Member {
    /// Whether any member passed `true`.
    pub fn global_or(&self, flag: bool) -> Result<bool, StrataError> {
        Ok(self.combine_one(Combine::Reduce, Op::Or, flag as u32)? != 0)
    }

    /// The smallest of the members' numbers.
    pub fn min(&self, x: f64) -> Result<f64, StrataError> {
        self.combine_one(Combine::Reduce, Op::Min, x)
    }

    /// The largest of the members' numbers.
    pub fn max(&self, x: f64) -> Result<f64, StrataError> {
        self.combine_one(Combine::Reduce, Op::Max, x)
    }

    /// The mean of the members' numbers: a global sum, divided here.
    pub fn average(&self, x: f64) -> Result<f64, StrataError> {
        Ok(self.combine_one(Combine::Reduce, Op::Add, x)? / self.size() as f64)
    }

    /// The sample variance of the members' numbers (divided by P − 1; thesis eq. 45), from
    /// the sums of `x` and `x²` in one vector reduction. Zero for a group of one.
    pub fn variance(&self, x: f64) -> Result<f64, StrataError> {
        let s = self.combine(Combine::Reduce, Op::Add, &[x, x * x])?;
        let n = self.size() as f64;
        if self.size() < 2 {
            return Ok(0.0);
        }
        Ok(((s[1] - s[0] * s[0] / n) / (n - 1.0)).max(0.0))
    }

    /// The lower median of the members' numbers (the ⌈P/2⌉-th smallest), by the thesis'
    /// walk from the average (Fig. 6-2): start at the smallest number not below the
    /// average, then step to the next smaller or larger number until the count of numbers
    /// below and at the candidate brackets the middle. Each step is one fused reduction
    /// (two counts, the nearest number below, the nearest above), and the walk is usually
    /// short because the median is usually near the average. NaN is refused.
    pub fn median(&self, x: f64) -> Result<f64, StrataError> {
        // Every member checks every member's number: a NaN anywhere fails everywhere.
        let bad = self.global_or(x.is_nan())?;
        if bad {
            return Err(StrataError::InvalidArgument(
                "the median of numbers that include NaN".into(),
            ));
        }
        let k = (self.size() as f64 - 1.0) / 2.0;
        let k = k.floor(); // zero-based position of the lower median
        let avg = self.average(x)?;
        let mut p = self.min(if x >= avg { x } else { f64::INFINITY })?;
        if p.is_infinite() && p > 0.0 {
            // Rounding put the average above every number: start at the largest.
            p = self.max(x)?;
        }
        loop {
            let below = if x < p { x } else { f64::NEG_INFINITY };
            let above = if x > p { x } else { f64::INFINITY };
            let r = self.reduce_mixed(
                vec![Op::Add, Op::Add, Op::Max, Op::Min],
                &[(x < p) as u8 as f64, (x <= p) as u8 as f64, below, above],
            )?;
            let (lt, le) = (r[0], r[1]);
            if lt <= k && k < le {
                return Ok(p);
            }
            p = if le <= k { r[3] } else { r[2] };
        }
    }
}
