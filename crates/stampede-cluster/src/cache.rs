//! An address space's copy of a global memory segment: its bytes as last fetched from the
//! home plus this space's writes since its last release, which byte ranges those writes
//! cover, and whether the copy may be stale (after an acquire).

use std::ops::Range;
use std::sync::Mutex;

pub(crate) struct SegmentCache {
    pub name: String,
    pub len: usize,
    pub state: Mutex<CacheState>,
}

#[derive(Default)]
pub(crate) struct CacheState {
    /// The home, once the segment was first touched.
    pub home: Option<String>,
    pub data: Vec<u8>,
    /// The home's version the bytes come from.
    pub version: u64,
    /// Whether the bytes are known current enough (since the last acquire).
    pub valid: bool,
    /// Ranges written since the last release, in writing order.
    pub dirty: Vec<Range<usize>>,
    /// The home left or died: the segment is gone (there are no replicas).
    pub lost: Option<String>,
}

impl CacheState {
    /// The dirty ranges, sorted and merged.
    pub fn merged(&self) -> Vec<Range<usize>> {
        let mut r = self.dirty.clone();
        r.sort_by_key(|x| x.start);
        let mut out: Vec<Range<usize>> = Vec::with_capacity(r.len());
        for x in r {
            match out.last_mut() {
                Some(last) if x.start <= last.end => last.end = last.end.max(x.end),
                _ => out.push(x),
            }
        }
        out
    }

    /// Takes `fresh` bytes from the home at `version`, keeping this space's unreleased
    /// writes over them.
    pub fn refresh(&mut self, fresh: &[u8], version: u64) {
        let mine: Vec<(Range<usize>, Vec<u8>)> = self
            .merged()
            .into_iter()
            .map(|r| (r.clone(), self.data[r].to_vec()))
            .collect();
        self.data.clear();
        self.data.extend_from_slice(fresh);
        for (r, b) in mine {
            self.data[r].copy_from_slice(&b);
        }
        self.version = version;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_ranges_merge_and_survive_a_refresh() {
        let mut s = CacheState {
            data: vec![1; 10],
            dirty: vec![6..8, 0..2, 1..3, 7..9],
            ..Default::default()
        };
        assert_eq!(s.merged(), vec![0..3, 6..9]);
        s.data[0..3].copy_from_slice(&[7, 7, 7]);
        s.refresh(&[5; 10], 4);
        assert_eq!(s.data, vec![7, 7, 7, 5, 5, 5, 1, 1, 1, 5]);
        assert_eq!(s.version, 4);
    }
}
