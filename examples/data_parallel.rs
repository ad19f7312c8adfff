//! Data parallelism with a queue: a splitter cuts each frame into chunks, K workers process
//! chunks in any order, and a joiner reassembles results per timestamp.
//!
//! `cargo run --example data_parallel -- [workers]`

use std::collections::HashMap;

use stampede::{ContainerOptions, Item, Runtime, Selector, StmError, INFINITY};

const FRAMES: i64 = 200;
const CHUNKS: usize = 4;

fn main() -> Result<(), StmError> {
    let workers: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let rt = Runtime::new();
    let work = rt.queue(ContainerOptions::bounded(16).name("work"))?;
    let partial = rt.queue(ContainerOptions::default().name("partial"))?;
    let results = rt.channel(ContainerOptions::default().name("results"))?;

    let splitter = rt.spawn(0, {
        let work = work.clone();
        move |task| -> Result<(), StmError> {
            let out = task.attach_output(&work)?;
            for ts in 0..FRAMES {
                for chunk in 0..CHUNKS {
                    let data: Vec<u8> =
                        (0..1024).map(|i| (i * chunk + ts as usize) as u8).collect();
                    let mut payload = vec![chunk as u8];
                    payload.extend(data);
                    out.put(ts, payload).map_err(|_| StmError::Closed)?;
                }
                task.set_virtual_time(ts + 1)?;
            }
            Ok(())
        }
    })?;

    let pool: Vec<_> = (0..workers)
        .map(|w| {
            let (work, partial) = (work.clone(), partial.clone());
            rt.task_builder().name(format!("worker-{w}")).spawn(
                move |task| -> Result<u64, StmError> {
                    let input = task.attach_input(&work)?;
                    let out = task.attach_output(&partial)?;
                    let mut done = 0;
                    while let Ok(q) = input.get() {
                        let b = q.item.as_bytes().expect("bytes");
                        let sum: u64 = b[1..].iter().map(|&x| x as u64).sum();
                        // The output inherits the input's timestamp, allowed because the held
                        // item keeps this task's visibility at q.ts.
                        out.put(q.ts, format!("{} {sum}", b[0]))
                            .map_err(|_| StmError::Closed)?;
                        input.consume(q.ticket)?;
                        done += 1;
                    }
                    Ok(done)
                },
            )
        })
        .collect::<Result<_, _>>()?;

    let joiner = rt.spawn(INFINITY, {
        let (partial, results) = (partial.clone(), results.clone());
        move |task| -> Result<(), StmError> {
            let input = task.attach_input(&partial)?;
            let out = task.attach_output(&results)?;
            let mut pending: HashMap<i64, Vec<(i64, u64)>> = HashMap::new();
            let mut held: HashMap<i64, Vec<u64>> = HashMap::new();
            let mut finished = 0;
            while finished < FRAMES {
                let q = input.get().map_err(|_| StmError::Closed)?;
                let text = q.item.as_str().expect("utf8").to_owned();
                let (chunk, sum) = text.split_once(' ').expect("two fields");
                let parts = pending.entry(q.ts).or_default();
                parts.push((chunk.parse().unwrap_or(-1), sum.parse().unwrap_or(0)));
                held.entry(q.ts).or_default().push(q.ticket);
                if parts.len() == CHUNKS {
                    let mut parts = pending.remove(&q.ts).expect("present");
                    parts.sort();
                    let total: u64 = parts.iter().map(|p| p.1).sum();
                    out.put(q.ts, Item::from(total.to_string()))
                        .map_err(|_| StmError::Closed)?;
                    for t in held.remove(&q.ts).expect("tickets") {
                        input.consume(t)?;
                    }
                    finished += 1;
                }
            }
            Ok(())
        }
    })?;

    let reader = rt.task(INFINITY)?;
    let res = reader.attach_input(&results)?;
    for _ in 0..FRAMES {
        let (ts, total) = res
            .get(Selector::NextUnseen)
            .map_err(|_| StmError::Closed)?;
        if ts % 50 == 0 {
            println!("frame {ts}: checksum {}", total.as_str().unwrap_or("?"));
        }
        res.consume_until(ts)?;
    }
    splitter.join().expect("splitter")?;
    joiner.join().expect("joiner")?;
    work.close()?;
    for (w, h) in pool.into_iter().enumerate() {
        println!("worker {w} processed {} chunks", h.join().expect("worker")?);
    }
    Ok(())
}
