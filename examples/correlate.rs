//! Temporal correlation: pairing video frames with audio chunks whose timestamps differ
//! slightly, and exact joins of two streams.
//!
//! `cargo run --example correlate`

use stampede::{ContainerOptions, Correlator, Match, Runtime, StmError, INFINITY};

fn main() -> Result<(), StmError> {
    let rt = Runtime::new();
    let video = rt.channel(ContainerOptions::default().name("video"))?;
    let audio = rt.channel(ContainerOptions::default().name("audio"))?;

    // Attach before anything is put: an input connection made at virtual time INFINITY
    // starts with everything already present marked consumed (rule 3).
    let fusion = rt.task(INFINITY)?;
    let mut corr = Correlator::new(
        vec![fusion.attach_input(&video)?, fusion.attach_input(&audio)?],
        Match::Within(2),
    )?;

    let src = rt.task(0)?;
    let (v, a) = (src.attach_output(&video)?, src.attach_output(&audio)?);
    for ts in (0..100).step_by(10) {
        v.put(ts, format!("frame@{ts}"))
            .map_err(|_| StmError::Closed)?;
        // Audio runs 0-3 ticks off the video clock, and drops every fourth chunk.
        if ts % 40 != 30 {
            a.put(ts + (ts / 10) % 4, format!("audio@{}", ts + (ts / 10) % 4))
                .map_err(|_| StmError::Closed)?;
        }
    }
    video.close()?;
    audio.close()?;

    while let Ok(set) = corr.get() {
        let names: Vec<_> = set
            .items
            .iter()
            .map(|(_, i)| i.as_str().unwrap_or("?"))
            .collect();
        println!("t={:3}: {}", set.ts, names.join(" + "));
        corr.consume_until(&set)?;
    }
    println!(
        "video frames without audio within 2 ticks: {}",
        corr.skipped()
    );
    Ok(())
}
