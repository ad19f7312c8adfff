//! Real-time pacing: a task synchronises virtual time with real time, and its late handler
//! decides what to do when it falls behind.
//!
//! `cargo run --example pacing`

use std::time::{Duration, Instant};

use stampede::{LateAction, Runtime, StmError, Tick};

fn main() -> Result<(), StmError> {
    let rt = Runtime::new();
    let task = rt.task(0)?;
    let mut pacer = task.pacer(
        Duration::from_millis(20),
        Duration::from_millis(5),
        |late| {
            println!(
                "  late by {:?} at vt {} ({} ticks behind)",
                late.late, late.vt, late.ticks_behind
            );
            LateAction::Skip
        },
    );
    let start = Instant::now();
    let mut vt = 0;
    while vt < 20 {
        if vt == 8 {
            std::thread::sleep(Duration::from_millis(70)); // a slow frame
        }
        vt += 1;
        task.set_virtual_time(vt)?;
        match pacer.sync(vt) {
            Tick::Skip(to) => {
                println!("skipping to vt {to}");
                vt = to;
                task.set_virtual_time(vt)?;
            }
            Tick::OnTime | Tick::Late(_) | Tick::Resynced => {}
        }
    }
    println!("{:?} in {:.0?}", pacer.stats(), start.elapsed());
    Ok(())
}
