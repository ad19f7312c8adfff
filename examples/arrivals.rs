//! Arrival notification: a callback on every put, and an async stream of timestamps.
//!
//! `cargo run --example arrivals`

use futures::StreamExt;
use stampede::{ContainerOptions, Runtime, Selector, StmError, INFINITY};

fn main() -> Result<(), StmError> {
    let rt = Runtime::new();
    let events = rt.channel(ContainerOptions::default().name("sensor/events"))?;
    events.on_arrival(|ts| println!("callback: item {ts} arrived"))?;
    let mut stream = events.arrivals(64)?;

    let sensor = rt.spawn(0, {
        let events = events.clone();
        move |task| -> Result<(), StmError> {
            let out = task.attach_output(&events)?;
            for ts in 0..5 {
                out.put(ts, format!("reading {ts}"))
                    .map_err(|_| StmError::Closed)?;
                task.set_virtual_time(ts + 1)?;
            }
            events.close()?;
            Ok(())
        }
    })?;

    let reader = rt.task(INFINITY)?;
    let input = reader.attach_input(&events)?;
    futures::executor::block_on(async {
        while let Some(ts) = stream.next().await {
            let (_, item) = input
                .get(Selector::Exact(ts))
                .expect("announced item is present");
            println!("async: {ts} -> {}", item.as_str().unwrap_or("?"));
            input.consume(ts).expect("attached");
        }
    });
    println!("stream ended; notifications dropped: {}", stream.dropped());
    sensor.join().expect("sensor")
}
