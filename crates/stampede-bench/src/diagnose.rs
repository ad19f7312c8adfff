//! Timing breakdowns of the Stampede throughput path (`stampede-bench --diagnose`).
//!
//! Not part of the reported metrics: every operation is bracketed by clock reads, which
//! slows both threads a little. The point is *where* the time goes: per-operation cost,
//! garbage-collection passes and context switches per item, and how the picture changes
//! with API variants that avoid particular costs.

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use stampede::{ContainerOptions, PutOptions, Runtime, Selector, ZoneId, INFINITY};

use crate::{place, Config, Role};

use crate::ctx_switches;

#[derive(Default, Clone, Copy)]
struct Acc {
    total: Duration,
    max: Duration,
}

impl Acc {
    fn add(&mut self, d: Duration) {
        self.total += d;
        self.max = self.max.max(d);
    }
}

#[inline]
fn timed<R>(acc: &mut Acc, f: impl FnOnce() -> R) -> R {
    let t = Instant::now();
    let r = f();
    acc.add(t.elapsed());
    r
}

/// How the consumer releases items, and how the producer puts them.
#[derive(Clone, Copy, Debug)]
pub enum Variant {
    /// As benchmarked: `put` + `set_virtual_time`; `get(NextUnseen)` + `consume(ts)`.
    AsBenchmarked,
    /// `consume_until(ts)` instead of `consume(ts)`.
    ConsumeUntil,
    /// `put_with(consumers(1))`: reclaimed by reference count at consume, no GC pass needed.
    RefCount1,
    /// As benchmarked but with no background collector (`gc_interval(None)`).
    NoBackgroundGc,
}

impl Variant {
    fn describe(self) -> &'static str {
        match self {
            Variant::AsBenchmarked => "as benchmarked (put+set_vt / get NextUnseen+consume)",
            Variant::ConsumeUntil => "consume_until(ts) instead of consume(ts)",
            Variant::RefCount1 => "put_with(consumers(1)) (refcount reclaim)",
            Variant::NoBackgroundGc => "as benchmarked, gc_interval(None)",
        }
    }
}

struct Side {
    ops: Vec<(&'static str, Acc)>,
    ctx: (u64, u64),
}

/// Runs one instrumented Stampede throughput run and describes it.
pub fn stampede_breakdown(variant: Variant, items: u64, capacity: usize) -> String {
    let rt = match variant {
        Variant::NoBackgroundGc => Runtime::builder().gc_interval(None).build(),
        _ => Runtime::new(),
    };
    let ch = rt
        .channel(ContainerOptions::bounded(capacity))
        .expect("channel");
    let ptask = rt.task(0).expect("task");
    let out = ptask.attach_output(&ch).expect("output");
    let ctask = rt.task(INFINITY).expect("task");
    let input = ctask.attach_input(&ch).expect("input");
    let payload = Bytes::from(vec![7u8; 64]);
    let passes0 = rt.gc_stats(ZoneId::DEFAULT).passes;
    let start = Barrier::new(2);

    let (t0, t1, prod, cons) = thread::scope(|s| {
        let start = &start;
        let c = s.spawn(move || {
            place(&Config::full(), Role::Consumer);
            let (mut get, mut rel) = (Acc::default(), Acc::default());
            let ctx0 = ctx_switches();
            start.wait();
            for _ in 0..items {
                let (ts, item) = timed(&mut get, || input.get(Selector::NextUnseen).unwrap());
                black_box(&item);
                drop(item);
                timed(&mut rel, || match variant {
                    Variant::ConsumeUntil => input.consume_until(ts).unwrap(),
                    _ => input.consume(ts).unwrap(),
                });
            }
            let t1 = Instant::now();
            let ctx1 = ctx_switches();
            let name = match variant {
                Variant::ConsumeUntil => "consume_until",
                _ => "consume",
            };
            (
                t1,
                Side {
                    ops: vec![("get", get), (name, rel)],
                    ctx: (ctx1.0 - ctx0.0, ctx1.1 - ctx0.1),
                },
                input,
                ctask,
            )
        });
        let p = s.spawn(move || {
            place(&Config::full(), Role::Producer);
            let (mut put, mut vt) = (Acc::default(), Acc::default());
            let ctx0 = ctx_switches();
            start.wait();
            let t0 = Instant::now();
            for n in 0..items as i64 {
                let item = payload.clone();
                timed(&mut put, || match variant {
                    Variant::RefCount1 => out
                        .put_with(n, item, PutOptions::default().consumers(1))
                        .unwrap(),
                    _ => out.put(n, item).unwrap(),
                });
                timed(&mut vt, || ptask.set_virtual_time(n + 1).unwrap());
            }
            let ctx1 = ctx_switches();
            (
                t0,
                Side {
                    ops: vec![("put", put), ("set_virtual_time", vt)],
                    ctx: (ctx1.0 - ctx0.0, ctx1.1 - ctx0.1),
                },
                out,
                ptask,
            )
        });
        let (t1, cons, input, ctask) = c.join().unwrap();
        let (t0, prod, out, ptask) = p.join().unwrap();
        drop((input, out, ctask, ptask));
        (t0, t1, prod, cons)
    });
    let elapsed = t1 - t0;
    let passes = rt.gc_stats(ZoneId::DEFAULT).passes - passes0;
    let st = ch.stats();
    let per = |d: Duration| d.as_nanos() as f64 / items as f64;
    let mut s = String::new();
    let _ = writeln!(s, "stampede: {}", variant.describe());
    let _ = writeln!(
        s,
        "  {:.0} items/s ({:.0} ns/item wall), GC passes {} ({:.3}/item), reclaimed {}",
        items as f64 / elapsed.as_secs_f64(),
        per(elapsed),
        passes,
        passes as f64 / items as f64,
        st.reclaimed
    );
    for (who, side) in [("producer", &prod), ("consumer", &cons)] {
        let _ = write!(
            s,
            "  {who}: ctx switches vol {} ({:.3}/item) invol {}",
            side.ctx.0,
            side.ctx.0 as f64 / items as f64,
            side.ctx.1
        );
        for (name, acc) in &side.ops {
            let _ = write!(
                s,
                "; {name} {:.0} ns/item (max {:.0} us)",
                per(acc.total),
                acc.max.as_secs_f64() * 1e6
            );
        }
        let _ = writeln!(s);
    }
    s
}

/// The same instrumented run over crossbeam, for reference.
pub fn crossbeam_breakdown(items: u64, capacity: usize) -> String {
    let (tx, rx) = crossbeam_channel::bounded::<Arc<[u8]>>(capacity);
    let payload: Arc<[u8]> = Arc::from(vec![7u8; 64]);
    let start = Barrier::new(2);
    let (t0, t1, pc, cc, send, recv) = thread::scope(|s| {
        let start = &start;
        let c = s.spawn(move || {
            place(&Config::full(), Role::Consumer);
            let mut recv = Acc::default();
            let ctx0 = ctx_switches();
            start.wait();
            for _ in 0..items {
                let v = timed(&mut recv, || rx.recv().unwrap());
                black_box(&v);
            }
            let t1 = Instant::now();
            let ctx1 = ctx_switches();
            (t1, (ctx1.0 - ctx0.0, ctx1.1 - ctx0.1), recv)
        });
        let p = s.spawn(move || {
            place(&Config::full(), Role::Producer);
            let mut send = Acc::default();
            let ctx0 = ctx_switches();
            start.wait();
            let t0 = Instant::now();
            for _ in 0..items {
                let v = payload.clone();
                timed(&mut send, || tx.send(v).unwrap());
            }
            let ctx1 = ctx_switches();
            (t0, (ctx1.0 - ctx0.0, ctx1.1 - ctx0.1), send)
        });
        let (t1, cc, recv) = c.join().unwrap();
        let (t0, pc, send) = p.join().unwrap();
        (t0, t1, pc, cc, send, recv)
    });
    let elapsed = t1 - t0;
    let per = |d: Duration| d.as_nanos() as f64 / items as f64;
    format!(
        "crossbeam bounded({capacity}):\n  {:.0} items/s ({:.0} ns/item wall)\n  producer: ctx switches vol {} ({:.3}/item); send {:.0} ns/item\n  consumer: ctx switches vol {} ({:.3}/item); recv {:.0} ns/item\n",
        items as f64 / elapsed.as_secs_f64(),
        per(elapsed),
        pc.0,
        pc.0 as f64 / items as f64,
        per(send.total),
        cc.0,
        cc.0 as f64 / items as f64,
        per(recv.total),
    )
}

/// Uncontended costs on one thread: put + set_virtual_time, get + consume, and a GC pass.
pub fn single_thread_costs(items: u64) -> String {
    let rt = Runtime::builder().gc_interval(None).build();
    let ch = rt.channel(ContainerOptions::unbounded()).expect("channel");
    let p = rt.task(0).expect("task");
    let out = p.attach_output(&ch).expect("output");
    let c = rt.task(INFINITY).expect("task");
    let input = c.attach_input(&ch).expect("input");
    let payload = Bytes::from(vec![7u8; 64]);
    let batch = 64i64;
    let (mut put, mut get, mut pass_full, mut pass_one) = (
        Acc::default(),
        Acc::default(),
        Acc::default(),
        Acc::default(),
    );
    let mut n = 0i64;
    while (n as u64) < items {
        for k in n..n + batch {
            timed(&mut put, || {
                out.put(k, payload.clone()).unwrap();
                p.set_virtual_time(k + 1).unwrap();
            });
        }
        for _ in 0..batch {
            timed(&mut get, || {
                let (ts, item) = input.get(Selector::NextUnseen).unwrap();
                black_box(item);
                input.consume(ts).unwrap();
            });
        }
        // A pass that reclaims `batch` items, then one that reclaims nothing.
        timed(&mut pass_full, || rt.collect());
        timed(&mut pass_one, || rt.collect());
        n += batch;
    }
    let per = |a: Acc, k: u64| a.total.as_nanos() as f64 / k as f64;
    let passes = (items / batch as u64).max(1);
    format!(
        "stampede, one thread, no contention ({items} items):\n  put+set_virtual_time {:.0} ns; get(NextUnseen)+consume {:.0} ns; GC pass reclaiming {batch} items {:.0} ns; empty GC pass {:.0} ns\n",
        per(put, items),
        per(get, items),
        per(pass_full, passes),
        per(pass_one, passes),
    )
}

/// Every breakdown, as text.
pub fn report(items: u64, capacity: usize, mut log: impl FnMut(&str)) {
    log(&format!(
        "# throughput breakdown, {items} items of 64 B, capacity {capacity} (instrumented: absolute numbers are slower than the benchmark)"
    ));
    log(&single_thread_costs(items));
    log(&crossbeam_breakdown(items, capacity));
    for v in [
        Variant::AsBenchmarked,
        Variant::NoBackgroundGc,
        Variant::ConsumeUntil,
        Variant::RefCount1,
    ] {
        log(&stampede_breakdown(v, items, capacity));
    }
}
