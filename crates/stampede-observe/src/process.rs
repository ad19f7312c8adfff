//! What every process reports, whatever runs in it.

use crate::Sample;

/// The process's resident memory (`stampede_process_resident_bytes`), where `/proc` tells
/// it. A closure-shaped source: `metrics.add(stampede_observe::process)`.
pub fn process(out: &mut Vec<Sample>) {
    if let Some(rss) = resident_bytes() {
        out.push(Sample::gauge(
            "stampede_process_resident_bytes",
            "This process's resident set size.",
            rss as f64,
        ));
    }
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}
