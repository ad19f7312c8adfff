//! Garbage collection: the watermark, what holds it back, reference-counted puts and
//! garbage handlers.
//!
//! `cargo run --example watermark`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use stampede::{ContainerOptions, PutOptions, Runtime, Selector, StmError, INFINITY};

fn main() -> Result<(), StmError> {
    // Passes on demand only, so the example shows each step.
    let rt = Runtime::builder().gc_interval(None).build();
    let frames = rt.channel(ContainerOptions::default().name("frames"))?;
    let freed = Arc::new(AtomicUsize::new(0));
    frames.on_garbage({
        let freed = freed.clone();
        move |_, _| {
            freed.fetch_add(1, Ordering::Relaxed);
        }
    })?;

    let camera = rt.task_builder().name("camera").virtual_time(0).create()?;
    let viewer = rt.task_builder().name("viewer").create()?; // vt = INFINITY
    let out = camera.attach_output(&frames)?;
    let input = viewer.attach_input(&frames)?;

    for ts in 0..10 {
        out.put(ts, format!("frame {ts}"))
            .map_err(|_| StmError::Closed)?;
    }
    camera.set_virtual_time(10)?;
    let (ts, _) = input
        .get(Selector::Exact(3))
        .map_err(|_| StmError::Closed)?;
    input.consume_until(ts - 1)?;

    println!(
        "after consuming 0..=2 with frame 3 open:\n{}",
        rt.explain(Default::default())
    );
    println!("collect -> floor {}", rt.collect());
    println!(
        "stored: {:?}, freed so far: {}",
        frames.timestamps(),
        freed.load(Ordering::Relaxed)
    );

    input.consume_until(9)?;
    camera.set_virtual_time(INFINITY)?;
    println!("everything consumed, camera done -> floor {}", rt.collect());
    println!(
        "stored: {:?}, freed so far: {}",
        frames.timestamps(),
        freed.load(Ordering::Relaxed)
    );

    // A put with a known number of consumers is freed without waiting for the watermark.
    let counted = rt.channel(ContainerOptions::default())?;
    let producer = rt.task(100)?;
    let c_out = producer.attach_output(&counted)?;
    let c_in = viewer.attach_input(&counted)?;
    c_out
        .put_with(100, "one consumer", PutOptions::default().consumers(1))
        .map_err(|_| StmError::Closed)?;
    c_in.get(Selector::Oldest).map_err(|_| StmError::Closed)?;
    c_in.consume(100)?;
    println!(
        "counted item reclaimed at once: stored {:?}",
        counted.timestamps()
    );
    Ok(())
}
