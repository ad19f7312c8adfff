//! Global memory segments: named byte arrays whose home is the address space that first
//! touches them, kept consistent by release consistency (CableS' and GeNIMA's model).
//!
//! Each space works on its own copy. A release sends the byte ranges this space wrote since
//! its last release to the home, which applies them all at once under a new version, so a
//! reader never sees part of a release. An acquire marks the copy stale; the next access
//! asks the home for anything newer (the bytes travel only when the version changed) and
//! keeps this space's unreleased writes over them. Cluster locks do both: a lock, a
//! semaphore wait and a barrier acquire every segment of the space after they are granted,
//! and an unlock, a post and a barrier release every segment before they let go, so writes
//! made while holding a lock are seen by the next holder.

use std::sync::Arc;

use crate::cache::{CacheState, SegmentCache};
use crate::error::ClusterError;
use crate::home::Kind;
use crate::shared::{lock, Cluster, Shared};

/// A global memory segment. Cheap to clone; every handle of one space shares its copy.
#[derive(Clone)]
pub struct Segment {
    cluster: Cluster,
    cache: Arc<SegmentCache>,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("name", &self.cache.name)
            .field("len", &self.cache.len)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// The global memory segment `name` of `len` bytes (zeros at first). Its home is
    /// the first space to touch it (read, write, acquire or release), not the first to
    /// name it.
    pub fn segment(&self, name: &str, len: usize) -> Result<Segment, ClusterError> {
        if name.is_empty() {
            return Err(ClusterError::InvalidArgument(
                "a segment needs a name".into(),
            ));
        }
        let mut all = lock(&self.sh.segments);
        let cache = all
            .entry(name.to_owned())
            .or_insert_with(|| {
                Arc::new(SegmentCache {
                    name: name.to_owned(),
                    len,
                    state: std::sync::Mutex::new(CacheState::default()),
                })
            })
            .clone();
        if cache.len != len {
            return Err(ClusterError::InvalidArgument(format!(
                "segment {name:?} has {} bytes, not {len}",
                cache.len
            )));
        }
        Ok(Segment {
            cluster: self.clone(),
            cache,
        })
    }
}

/// Makes `st` current: finds the home on first touch, and asks it for anything newer when
/// the copy is stale.
fn ensure(sh: &Shared, c: &SegmentCache, st: &mut CacheState) -> Result<(), ClusterError> {
    if let Some(space) = &st.lost {
        return Err(ClusterError::Lost {
            space: space.clone(),
        });
    }
    if st.home.is_none() {
        let home = sh.home(&c.name, Kind::Segment, c.len as u64)?;
        st.home = Some(home);
        st.data = vec![0; c.len];
        st.valid = false;
        // Version 0 is the zeros just made; a home that had releases sends its bytes.
        st.version = 0;
    }
    if st.valid {
        return Ok(());
    }
    let home = st.home.clone().expect("found above");
    let (version, fresh) = sh.fetch_segment(&home, &c.name, st.version)?;
    if let Some(fresh) = fresh {
        if fresh.len() != c.len {
            return Err(ClusterError::InvalidArgument(format!(
                "segment {:?} has {} bytes at its home, not {}",
                c.name,
                fresh.len(),
                c.len
            )));
        }
        st.refresh(&fresh, version);
    }
    st.valid = true;
    Ok(())
}

/// Sends this space's writes to `c` since its last release to the home, applied at once.
fn flush(sh: &Shared, c: &SegmentCache, st: &mut CacheState) -> Result<(), ClusterError> {
    if st.dirty.is_empty() {
        return Ok(());
    }
    let Some(home) = st.home.clone() else {
        return Ok(());
    };
    let ranges = st.merged();
    let writes: Vec<(u64, &[u8])> = ranges
        .iter()
        .map(|r| (r.start as u64, &st.data[r.clone()]))
        .collect();
    let version = sh.store_segment(&home, &c.name, &writes)?;
    st.dirty.clear();
    // Current only if no other release came between this copy's version and this one.
    if version == st.version + 1 {
        st.version = version;
    } else {
        st.valid = false;
    }
    Ok(())
}

/// Releases every segment this space has touched (before a lock lets go), all of them
/// even when one fails; the first failure is returned. A lost segment's writes are dropped
/// (its access already reports the loss).
pub(crate) fn release_all(sh: &Shared) -> Result<(), ClusterError> {
    let all: Vec<Arc<SegmentCache>> = lock(&sh.segments).values().cloned().collect();
    #[cfg(target_os = "linux")]
    let mut first = crate::heap::release(sh);
    #[cfg(not(target_os = "linux"))]
    let mut first = Ok(());
    for c in all {
        let mut st = lock(&c.state);
        if st.lost.is_some() {
            st.dirty.clear();
            continue;
        }
        if let Err(e) = flush(sh, &c, &mut st) {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Acquires every segment this space has touched (after a lock is granted).
pub(crate) fn acquire_all(sh: &Shared) {
    #[cfg(target_os = "linux")]
    crate::heap::acquire(sh);
    for c in lock(&sh.segments).values() {
        lock(&c.state).valid = false;
    }
}

impl Segment {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.cache.name
    }
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.cache.len
    }
    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.cache.len == 0
    }
    /// Its home, once some space of this one touched it.
    pub fn home(&self) -> Option<String> {
        lock(&self.cache.state).home.clone()
    }

    fn check(&self, offset: usize, len: usize) -> Result<(), ClusterError> {
        if offset.checked_add(len).is_some_and(|e| e <= self.cache.len) {
            Ok(())
        } else {
            Err(ClusterError::InvalidArgument(format!(
                "{len} bytes at {offset} of segment {:?} of {}",
                self.cache.name, self.cache.len
            )))
        }
    }

    /// Reads its bytes at `offset` into `buf`.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), ClusterError> {
        self.check(offset, buf.len())?;
        self.with(|d| buf.copy_from_slice(&d[offset..offset + buf.len()]))
    }

    /// Writes `data` at `offset` (seen elsewhere after this space releases it).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), ClusterError> {
        self.check(offset, data.len())?;
        let sh = &self.cluster.sh;
        let mut st = lock(&self.cache.state);
        ensure(sh, &self.cache, &mut st)?;
        st.data[offset..offset + data.len()].copy_from_slice(data);
        st.dirty.push(offset..offset + data.len());
        Ok(())
    }

    /// Runs `f` over its bytes.
    pub fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R, ClusterError> {
        let sh = &self.cluster.sh;
        let mut st = lock(&self.cache.state);
        ensure(sh, &self.cache, &mut st)?;
        Ok(f(&st.data))
    }

    /// Runs `f` over its bytes to change them; the bytes it changed count as written (found
    /// by comparing with a copy, so other spaces' releases to other parts are kept).
    pub fn with_mut<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R, ClusterError> {
        let sh = &self.cluster.sh;
        let mut st = lock(&self.cache.state);
        ensure(sh, &self.cache, &mut st)?;
        let before = st.data.clone();
        let r = f(&mut st.data);
        let mut i = 0;
        let n = before.len();
        while i < n {
            if st.data[i] == before[i] {
                i += 1;
                continue;
            }
            let start = i;
            while i < n && st.data[i] != before[i] {
                i += 1;
            }
            st.dirty.push(start..i);
        }
        Ok(r)
    }

    /// Runs `f` over its bytes as elements of `T` (as many as fit; copied, since the
    /// bytes need not be aligned for `T`).
    pub fn with_as<T: bytemuck::Pod, R>(
        &self,
        f: impl FnOnce(&[T]) -> R,
    ) -> Result<R, ClusterError> {
        self.with(|d| f(&typed::<T>(d)))
    }

    /// Runs `f` over its bytes as elements of `T` to change them; as
    /// [`with_mut`](Segment::with_mut), only the bytes it changed count as written.
    pub fn with_mut_as<T: bytemuck::Pod, R>(
        &self,
        f: impl FnOnce(&mut [T]) -> R,
    ) -> Result<R, ClusterError> {
        self.with_mut(|d| {
            let mut v = typed::<T>(d);
            let r = f(&mut v);
            let bytes: &[u8] = bytemuck::cast_slice(&v);
            d[..bytes.len()].copy_from_slice(bytes);
            r
        })
    }

    /// Makes this space's writes since its last release visible to the next acquirer.
    pub fn release(&self) -> Result<(), ClusterError> {
        let sh = &self.cluster.sh;
        let mut st = lock(&self.cache.state);
        ensure(sh, &self.cache, &mut st)?;
        flush(sh, &self.cache, &mut st)
    }

    /// Makes others' releases visible here: the next access asks the home for anything
    /// newer.
    pub fn acquire(&self) -> Result<(), ClusterError> {
        let sh = &self.cluster.sh;
        let mut st = lock(&self.cache.state);
        st.valid = false;
        ensure(sh, &self.cache, &mut st)
    }
}

/// The elements of `T` that fit in `d`.
fn typed<T: bytemuck::Pod>(d: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    if size == 0 {
        return Vec::new();
    }
    let mut v = vec![T::zeroed(); d.len() / size];
    bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(&d[..d.len() / size * size]);
    v
}
