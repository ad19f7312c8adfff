//! An address space's own counters as metrics.

use std::sync::{Arc, Weak};

use stampede_observe::{Sample, Source};

use crate::space::Shared;
use crate::Space;

/// The named code that answers a space's samples, as JSON.
pub(crate) const SERVICE: &str = "stampede/metrics";

/// Reads a space's [`SpaceStats`](crate::SpaceStats) and membership at each scrape.
pub(crate) struct SpaceSource {
    sh: Weak<Shared>,
}

impl SpaceSource {
    pub(crate) fn new(sh: &Arc<Shared>) -> SpaceSource {
        SpaceSource {
            sh: Arc::downgrade(sh),
        }
    }
}

impl Source for SpaceSource {
    fn collect(&self, out: &mut Vec<Sample>) {
        // A space that left has nothing more to say.
        let Some(sh) = self.sh.upgrade() else { return };
        let space = Space { sh };
        for (name, help, value) in space.stats().counters() {
            out.push(Sample::counter(
                format!("stampede_space_{name}"),
                help,
                value,
            ));
        }
        out.push(Sample::gauge(
            "stampede_space_members",
            "Address spaces of the application this space knows alive, itself included.",
            space.spaces().len() as f64,
        ));
        if let Some(rss) = resident_bytes() {
            out.push(Sample::gauge(
                "stampede_process_resident_bytes",
                "This process's resident set size.",
                rss as f64,
            ));
        }
    }
}

/// This process's resident set size, where `/proc` tells it.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}
