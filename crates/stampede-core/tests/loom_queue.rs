#![cfg(loom)]
//! Loom models of the queue: exactly-once delivery to racing getters, redelivery of an item
//! held by a detaching getter, and the bounded-queue and detach wake-ups.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p stampede-core --release --test loom_queue`.
//!
//! Bookkeeping shared between model threads uses `std` types on purpose: loom runs one thread
//! at a time and switches only at its own sync points, so a `std::sync::Mutex` that is never
//! held across a runtime call can't block, and it adds no branches to explore.

use std::sync::{Arc, Mutex};

mod loom_support;

use loom::thread;
use loom_support::{garbage_recorder, model, runtime};
use stampede_core::{ContainerOptions, GetError, Queue, Timestamp, INFINITY};

/// Installs a garbage handler (run by consume) that records every freed timestamp.
fn record_garbage(q: &Queue) -> Arc<Mutex<Vec<Timestamp>>> {
    let (freed, handler) = garbage_recorder();
    q.on_garbage(handler).unwrap();
    freed
}

/// Two getters blocked in `get` race for two items put concurrently: each item goes to
/// exactly one getter (both getters complete, so neither wake-up is lost), and each is freed
/// once by its consume.
#[test]
fn two_getters_each_item_once() {
    model(3, || {
        let rt = runtime();
        let q = rt.queue(ContainerOptions::default()).unwrap();
        let freed = record_garbage(&q);
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&q).unwrap();
        let getters: Vec<_> = (0..2)
            .map(|_| {
                let g = rt.task(INFINITY).unwrap();
                let input = g.attach_input(&q).unwrap();
                thread::spawn(move || {
                    let got = input.get().unwrap();
                    // A held item holds the getter's visibility.
                    assert_eq!(g.visibility(), got.ts);
                    input.consume(got.ticket).unwrap();
                    assert_eq!(g.visibility(), INFINITY);
                    (got.ts, got.ticket, got.item.as_str().unwrap().to_owned())
                })
            })
            .collect();
        let t0 = out.put(0, "a").unwrap();
        let t1 = out.put(1, "b").unwrap();
        let mut got: Vec<_> = getters.into_iter().map(|h| h.join().unwrap()).collect();
        got.sort();
        assert_eq!(got, vec![(0, t0, "a".into()), (1, t1, "b".into())]);
        let mut f = freed.lock().unwrap().clone();
        f.sort_unstable();
        assert_eq!(f, vec![0, 1]);
        let s = q.stats();
        assert_eq!((s.waiting, s.held, s.gets, s.consumed), (0, 0, 2, 2));
    });
}

/// A getter that takes an item and detaches without consuming it, racing with a second
/// getter that wants both items: the held item is redelivered, so the second getter receives
/// each item exactly once (its second `get` may block until the detach wakes it).
#[test]
fn detach_redelivers_held_item() {
    model(5, || {
        let rt = runtime();
        let q = rt.queue(ContainerOptions::default()).unwrap();
        let freed = record_garbage(&q);
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&q).unwrap();
        let t0 = out.put(0, "a").unwrap();
        let t1 = out.put(1, "b").unwrap();

        let g1 = rt.task(INFINITY).unwrap();
        let in1 = g1.attach_input(&q).unwrap();
        let quitter = thread::spawn(move || {
            let held = in1.try_get().ok().map(|i| i.ticket);
            if held.is_some() {
                assert!(g1.visibility() < INFINITY);
            }
            in1.detach();
            // Detaching closed the held item: it no longer holds the getter's visibility.
            assert_eq!(g1.visibility(), INFINITY);
            held
        });
        let g2 = rt.task(INFINITY).unwrap();
        let in2 = g2.attach_input(&q).unwrap();
        let worker = thread::spawn(move || {
            let mut tickets = Vec::new();
            for _ in 0..2 {
                let i = in2.get().unwrap();
                in2.consume(i.ticket).unwrap();
                tickets.push(i.ticket);
            }
            tickets
        });
        let held = quitter.join().unwrap();
        let mut tickets = worker.join().unwrap();
        tickets.sort_unstable();
        assert_eq!(tickets, vec![t0, t1]);
        let s = q.stats();
        assert_eq!(s.redelivered, u64::from(held.is_some()));
        assert_eq!((s.waiting, s.held, s.consumed), (0, 0, 2));
        let mut f = freed.lock().unwrap().clone();
        f.sort_unstable();
        assert_eq!(f, vec![0, 1]);
    });
}

/// Capacity 1: a producer blocked putting a second item is always woken by the get that
/// takes the first.
#[test]
fn bounded_put_woken_by_get() {
    model(4, || {
        let rt = runtime();
        let q = rt.queue(ContainerOptions::bounded(1)).unwrap();
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&q).unwrap();
        let g = rt.task(INFINITY).unwrap();
        let input = g.attach_input(&q).unwrap();
        out.put(0, "a").unwrap();
        let producer = thread::spawn(move || {
            out.put(1, "b").unwrap();
            (p, out)
        });
        let consumer = thread::spawn(move || {
            let a = input.get().unwrap();
            assert_eq!(a.ts, 0);
            input.consume(a.ticket).unwrap();
            let b = input.get().unwrap();
            assert_eq!(b.ts, 1);
            input.consume(b.ticket).unwrap();
            (g, input)
        });
        let _p = producer.join().unwrap();
        let _g = consumer.join().unwrap();
        assert_eq!(q.stats().consumed, 2);
    });
}

/// A getter blocked in `get` on a queue whose task exits from another thread must return
/// `Detached` (as it does on a channel), not sleep forever.
///
/// FAILS (deadlock): `QueueCore::detach` notifies getters only when it redelivers held
/// items, so a getter parked in `get` on the detached connection is never woken. (With a
/// later put, `notify_one` may then pick that dead getter, which returns `Detached` and
/// swallows the wake-up meant for a live getter.)
#[test]
fn task_exit_wakes_blocked_queue_get() {
    model(3, || {
        let rt = runtime();
        let q = rt.queue(ContainerOptions::default()).unwrap();
        let g = rt.task(INFINITY).unwrap();
        let input = g.attach_input(&q).unwrap();
        let getter = thread::spawn(move || {
            assert_eq!(input.get().unwrap_err(), GetError::Detached);
        });
        drop(g);
        getter.join().unwrap();
    });
}

/// The put-side consequence of the above: one getter's task exits while it is parked, a live
/// getter is parked too, and one item arrives. The item must reach the live getter.
#[test]
fn put_wakes_live_getter_despite_detached_one() {
    model(3, || {
        let rt = runtime();
        let q = rt.queue(ContainerOptions::default()).unwrap();
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&q).unwrap();
        let dead = rt.task(INFINITY).unwrap();
        let dead_in = dead.attach_input(&q).unwrap();
        let live = rt.task(INFINITY).unwrap();
        let live_in = live.attach_input(&q).unwrap();
        let h_dead = thread::spawn(move || {
            let _ = dead_in.get();
        });
        let h_live = thread::spawn(move || {
            let i = live_in.get().unwrap();
            live_in.consume(i.ticket).unwrap();
            live
        });
        drop(dead);
        out.put(0, "a").unwrap();
        let _live = h_live.join().unwrap();
        // Wakes the dead getter in any case, so only the live getter's wake-up is checked.
        q.close().unwrap();
        h_dead.join().unwrap();
    });
}
