//! Parallel integer sorting over a Strata group (thesis §4.5). Every member holds some
//! keys; afterwards the members hold the sorted sequence in rank order: every key of
//! member `i` is at most every key of member `i + 1`.
//!
//! - **Radix sort** (LSD, `b`-bit digits, ⌈32/b⌉ passes). Each pass: a local histogram of
//!   the digit; an exclusive vector scan of the histograms across members (where this
//!   member's keys of each digit start among all members') and a vector reduction (the
//!   digit totals); each key's global position follows, so the member's keys, ordered by
//!   digit, split into contiguous runs per destination (member `d` holds positions
//!   `d·N/P ..`); an all-to-all moves them; the receiver concatenates the runs in sender
//!   order and orders them by digit again, stably, which is exactly the global order. The
//!   output is balanced: each member ends with ⌊N/P⌋ or ⌈N/P⌉ keys. The scans grow with
//!   `2^b` and the passes shrink with `b`: the digit size is the parameter to optimise.
//! - **Sample sort**: each member sorts its keys, contributes `P − 1` evenly spaced
//!   samples to everyone, all pick the same `P − 1` splitters from the sorted samples,
//!   send each key to its splitter's bucket in one all-to-all, and sort what they got. One
//!   exchange, but the buckets are only roughly even.

use bytes::Bytes;
use stampede_strata::{Combine, Exchange, Member, Op, StrataError};

/// A sort implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// LSD radix sort with digits of this many bits (1 to 16).
    Radix(u32),
    /// Sample sort with `P − 1` samples per member.
    Sample,
}

impl Algorithm {
    /// The implementations the library chooses among.
    pub const ALL: [Algorithm; 5] = [
        Algorithm::Radix(4),
        Algorithm::Radix(8),
        Algorithm::Radix(11),
        Algorithm::Radix(16),
        Algorithm::Sample,
    ];

    /// A short name, also the model's.
    pub fn name(self) -> String {
        match self {
            Algorithm::Radix(b) => format!("radix{b}"),
            Algorithm::Sample => "sample".into(),
        }
    }
}

/// Sorts the keys held by every member of `m`'s group (every member calls it, with the
/// same algorithm); returns this member's part of the sorted sequence.
pub fn sort(
    m: &Member,
    keys: Vec<u32>,
    algorithm: Algorithm,
    exchange: Exchange,
) -> Result<Vec<u32>, StrataError> {
    match algorithm {
        Algorithm::Radix(bits) if (1..=16).contains(&bits) => radix(m, keys, bits, exchange),
        Algorithm::Radix(bits) => Err(StrataError::InvalidArgument(format!(
            "a radix sort's digits have 1 to 16 bits, not {bits}"
        ))),
        Algorithm::Sample => sample(m, keys, exchange),
    }
}

fn to_bytes(keys: &[u32]) -> Bytes {
    Bytes::copy_from_slice(bytemuck::cast_slice(keys))
}

/// The keys of `blocks`, in order. (One sized extend per block: a flattening iterator
/// would cost more than the local sort pass.)
fn concat(blocks: &[Bytes]) -> Vec<u32> {
    let mut out = Vec::with_capacity(blocks.iter().map(|b| b.len() / 4).sum());
    for b in blocks {
        out.extend(
            b.chunks_exact(4)
                .map(|c| u32::from_ne_bytes(c.try_into().expect("four bytes"))),
        );
    }
    out
}

/// Stable counting sort of `keys` by the `bits`-bit digit at `shift`; returns the sorted
/// keys and the histogram: one local pass of the radix sort (a primitive of its factored
/// model).
pub fn by_digit(keys: &[u32], shift: u32, bits: u32) -> (Vec<u32>, Vec<u64>) {
    let radix = 1usize << bits;
    let mask = (radix - 1) as u32;
    let mut counts = vec![0u64; radix];
    for &k in keys {
        counts[((k >> shift) & mask) as usize] += 1;
    }
    let mut start = vec![0usize; radix];
    let mut acc = 0usize;
    for (d, &c) in counts.iter().enumerate() {
        start[d] = acc;
        acc += c as usize;
    }
    let mut out = vec![0u32; keys.len()];
    for &k in keys {
        let d = ((k >> shift) & mask) as usize;
        out[start[d]] = k;
        start[d] += 1;
    }
    (out, counts)
}

fn radix(
    m: &Member,
    mut keys: Vec<u32>,
    bits: u32,
    exchange: Exchange,
) -> Result<Vec<u32>, StrataError> {
    let p = m.size();
    let mut shift = 0;
    while shift < 32 {
        let (sorted, counts) = by_digit(&keys, shift, bits);
        let before = m.combine(Combine::ExclusiveScan, Op::Add, &counts)?;
        let totals = m.combine(Combine::Reduce, Op::Add, &counts)?;
        let n: u64 = totals.iter().sum();
        // Where member d's part starts: balanced, the first n % p members one key more.
        let part_start = |d: u64| d * (n / p as u64) + d.min(n % p as u64);
        // The global position of this member's first key of each digit.
        let mut base = 0u64;
        let mut first = Vec::with_capacity(counts.len());
        for (d, &t) in totals.iter().enumerate() {
            first.push(base + before[d]);
            base += t;
        }
        let mut local = Vec::with_capacity(counts.len());
        let mut acc = 0u64;
        for &c in &counts {
            local.push(acc);
            acc += c;
        }
        // Positions increase along `sorted`, so each destination takes one run of it.
        let mut blocks = Vec::with_capacity(p);
        let mut i = 0usize;
        for dest in 0..p {
            let end_pos = part_start(dest as u64 + 1);
            let start = i;
            while i < sorted.len() {
                let d = digit(sorted[i], shift, bits);
                let pos = first[d] + (i as u64 - local[d]);
                if pos >= end_pos {
                    break;
                }
                i += 1;
            }
            blocks.push(to_bytes(&sorted[start..i]));
        }
        let got = m.all_to_all(blocks, exchange)?;
        let merged: Vec<u32> = concat(&got);
        keys = by_digit(&merged, shift, bits).0;
        shift += bits;
    }
    Ok(keys)
}

fn digit(k: u32, shift: u32, bits: u32) -> usize {
    ((k >> shift) & ((1u32 << bits) - 1)) as usize
}

fn sample(m: &Member, mut keys: Vec<u32>, exchange: Exchange) -> Result<Vec<u32>, StrataError> {
    let p = m.size();
    keys.sort_unstable();
    if p == 1 {
        return Ok(keys);
    }
    // P − 1 evenly spaced samples; a member with no keys contributes none.
    let samples: Vec<u32> = if keys.is_empty() {
        Vec::new()
    } else {
        (1..p).map(|i| keys[i * keys.len() / p]).collect()
    };
    let all = m.all_to_all(vec![to_bytes(&samples); p], exchange)?;
    let mut pool: Vec<u32> = concat(&all);
    pool.sort_unstable();
    let splitters: Vec<u32> = if pool.is_empty() {
        Vec::new()
    } else {
        (1..p).map(|i| pool[i * pool.len() / p]).collect()
    };
    // Bucket d takes the keys below splitter d (and not below splitter d − 1).
    let mut blocks = Vec::with_capacity(p);
    let mut start = 0;
    for d in 0..p {
        let end = match splitters.get(d) {
            Some(&s) => start + keys[start..].partition_point(|&k| k < s),
            None => keys.len(),
        };
        blocks.push(to_bytes(&keys[start..end]));
        start = end;
    }
    let got = m.all_to_all(blocks, exchange)?;
    let mut out: Vec<u32> = concat(&got);
    out.sort_unstable();
    Ok(out)
}
