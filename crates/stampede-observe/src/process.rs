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
    Some(pages * page_size()?)
}

fn page_size() -> Option<u64> {
    // SAFETY: sysconf reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn pages_have_a_size() {
        let page = super::page_size().expect("a page size");
        assert!(page.is_power_of_two() && page >= 4096, "{page}");
    }

    /// Linux tells the resident size, in whole pages.
    #[cfg(target_os = "linux")]
    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc, which Miri's isolation hides
    fn the_resident_size_is_a_number_of_pages() {
        let mut out = Vec::new();
        super::process(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, "stampede_process_resident_bytes");
        let rss = out[0].value;
        let page = super::page_size().expect("a page size") as f64;
        assert!(rss > 0.0 && rss % page == 0.0, "{rss}");
    }
}
