#![cfg(loom)]
//! Loom models of the channel: put/get hand-off, collection racing with put, get and
//! consume, the bounded-channel wake-up protocol (`Zone::nudge`, `blocked_putters`) and
//! reference-counted reclamation.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p stampede-core --release --test loom_channel`.
//!
//! Bookkeeping shared between model threads uses `std` types on purpose: loom runs one thread
//! at a time and switches only at its own sync points, so a `std::sync::Mutex` that is never
//! held across a runtime call can't block, and it adds no branches to explore.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

mod loom_support;

use loom::thread;
use loom_support::{garbage_recorder, model, runtime};
use stampede_core::{
    Channel, ContainerOptions, GetError, PutOptions, Selector, Timestamp, INFINITY,
};

/// Installs a garbage handler that records every reclaimed timestamp.
fn record_garbage(ch: &Channel) -> Arc<Mutex<Vec<Timestamp>>> {
    let (freed, handler) = garbage_recorder();
    ch.on_garbage(handler).unwrap();
    freed
}

fn sorted(v: &Mutex<Vec<Timestamp>>) -> Vec<Timestamp> {
    let mut v = v.lock().unwrap().clone();
    v.sort_unstable();
    v
}

// ---------------------------------------------------------------------------------------
// 1. put racing with a blocked get
// ---------------------------------------------------------------------------------------

/// A consumer blocked in `get(NextUnseen)` is always woken by a racing put and receives the
/// item exactly once.
#[test]
fn put_wakes_blocked_get_next_unseen() {
    model(4, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::default()).unwrap();
        let p = rt.task(0).unwrap();
        let c = rt.task(INFINITY).unwrap();
        let out = p.attach_output(&ch).unwrap();
        let input = c.attach_input(&ch).unwrap();
        let getter = thread::spawn(move || {
            let (ts, item) = input.get(Selector::NextUnseen).unwrap();
            assert_eq!((ts, item.as_str()), (0, Some("a")));
            // Exactly once: nothing more is unseen.
            assert!(matches!(
                input.try_get(Selector::NextUnseen),
                Err(GetError::Unavailable(_))
            ));
            drop(input);
            drop(c);
        });
        out.put(0, "a").unwrap();
        getter.join().unwrap();
        assert_eq!(ch.stats().gets, 1);
        assert_eq!(ch.stats().puts, 1);
    });
}

/// A consumer blocked in `get(Exact(1))` is not confused by a put at another timestamp and is
/// woken by the put at 1; the put at 0 it never asked for stays unseen.
#[test]
fn put_wakes_blocked_get_exact() {
    model(4, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::default()).unwrap();
        let p = rt.task(0).unwrap();
        let c = rt.task(INFINITY).unwrap();
        let out = p.attach_output(&ch).unwrap();
        let input = c.attach_input(&ch).unwrap();
        let getter = thread::spawn(move || {
            let (ts, item) = input.get(Selector::Exact(1)).unwrap();
            assert_eq!((ts, item.as_str()), (1, Some("b")));
            input.consume(1).unwrap();
            assert_eq!(
                input.try_get(Selector::Exact(1)).unwrap_err(),
                GetError::Gone(1)
            );
            // 0 is still there, unconsumed on this connection.
            assert_eq!(input.try_get(Selector::Oldest).unwrap().0, 0);
            (c, input)
        });
        out.put(0, "a").unwrap();
        out.put(1, "b").unwrap();
        let _keep = getter.join().unwrap();
        assert_eq!(ch.stats().gets, 2);
    });
}

/// A consumer blocked in `get` whose task exits from another thread is woken and told
/// `Detached`.
#[test]
fn task_exit_wakes_blocked_get() {
    model(4, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::default()).unwrap();
        let c = rt.task(INFINITY).unwrap();
        let input = c.attach_input(&ch).unwrap();
        let getter = thread::spawn(move || {
            assert_eq!(
                input.get(Selector::NextUnseen).unwrap_err(),
                GetError::Detached
            );
        });
        drop(c);
        getter.join().unwrap();
    });
}

// ---------------------------------------------------------------------------------------
// 2. put / get / consume racing with a collection pass
// ---------------------------------------------------------------------------------------

/// What the model's threads have released, published *before* the runtime call that
/// releases it. The garbage handler checks every reclaimed item against it: if the release
/// has not even been announced, the runtime call has not happened either, so the item was
/// still reachable.
#[derive(Default)]
struct Released {
    /// The producer's virtual time, raised before `set_virtual_time`.
    vt: Timestamp,
    /// Timestamps the consumer announced consumed.
    consumed: BTreeSet<Timestamp>,
    /// Every reclaimed timestamp, in order.
    freed: Vec<Timestamp>,
}

/// Producer (advances its virtual time and puts), consumer (gets and consumes, including a
/// `consume_until`) and a collection pass, all racing. No item that is still unconsumed on the
/// consumer's connection or at or above the producer's virtual time is ever reclaimed; gets of
/// such items never see `Gone`; after a final pass exactly the unreachable items are gone,
/// each reclaimed once.
#[test]
fn collect_races_put_get_consume() {
    model(5, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::default()).unwrap();
        let book = Arc::new(Mutex::new(Released::default()));
        {
            let book = book.clone();
            ch.on_garbage(move |ts, _| {
                let mut b = book.lock().unwrap();
                assert!(
                    ts < b.vt,
                    "reclaimed {ts} at or above the producer's vt {}",
                    b.vt
                );
                assert!(
                    b.consumed.contains(&ts),
                    "reclaimed {ts} still unconsumed on a connection"
                );
                assert!(!b.freed.contains(&ts), "reclaimed {ts} twice");
                b.freed.push(ts);
            })
            .unwrap();
        }
        let p = rt.task(0).unwrap();
        let c = rt.task(INFINITY).unwrap();
        let out = p.attach_output(&ch).unwrap();
        let input = c.attach_input(&ch).unwrap();
        out.put(0, "a").unwrap();
        out.put(1, "b").unwrap();

        let producer = {
            let book = book.clone();
            thread::spawn(move || {
                book.lock().unwrap().vt = 2;
                p.set_virtual_time(2).unwrap();
                out.put(2, "c").unwrap();
                (p, out)
            })
        };
        let consumer = {
            let book = book.clone();
            thread::spawn(move || {
                assert_eq!(input.get(Selector::NextUnseen).unwrap().0, 0);
                book.lock().unwrap().consumed.insert(0);
                input.consume(0).unwrap();
                // 1 was never consumed here: it can't have been reclaimed.
                assert_eq!(input.get(Selector::NextUnseen).unwrap().0, 1);
                book.lock().unwrap().consumed.insert(1);
                input.consume_until(1).unwrap();
                (c, input)
            })
        };
        rt.collect();
        let (p, _out) = producer.join().unwrap();
        let (_c, input) = consumer.join().unwrap();

        // 2 is unconsumed on the consumer's connection: it survives even once the producer
        // no longer holds the watermark.
        book.lock().unwrap().vt = INFINITY;
        p.set_virtual_time(INFINITY).unwrap();
        assert_eq!(rt.collect(), 2);
        assert_eq!(ch.timestamps(), vec![2]);
        let mut freed = book.lock().unwrap().freed.clone();
        freed.sort_unstable();
        assert_eq!(freed, vec![0, 1]);
        assert_eq!(ch.stats().reclaimed, 2);
        assert_eq!(input.try_get(Selector::Exact(2)).unwrap().0, 2);
    });
}

/// A virtual-time raise and a put racing with a pass that raises the floor: the pass never
/// gets past the producer's virtual time, so the put always succeeds (never `BelowVisibility`
/// from the floor) and its item survives; only 0 is reclaimed.
#[test]
fn collect_races_set_vt_and_put() {
    model(5, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::default()).unwrap();
        let freed = record_garbage(&ch);
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&ch).unwrap();
        out.put(0, "a").unwrap();
        let producer = thread::spawn(move || {
            p.set_virtual_time(1).unwrap();
            out.put(1, "b").unwrap();
            (p, out)
        });
        let floor = rt.collect();
        assert!(floor <= 1);
        let (_p, _out) = producer.join().unwrap();
        assert!(sorted(&freed).iter().all(|&t| t == 0));
        assert_eq!(rt.collect(), 1);
        assert_eq!(ch.timestamps(), vec![1]);
        assert_eq!(sorted(&freed), vec![0]);
    });
}

// ---------------------------------------------------------------------------------------
// 3. bounded-channel wake-up protocol
// ---------------------------------------------------------------------------------------

/// Capacity 1: the producer blocks putting 1 while 0 fills the channel; the consumer gets and
/// consumes 0, which only the watermark can then reclaim (the consume's `nudge` or the
/// producer's own pass). The producer always completes and the consumer then gets 1.
#[test]
fn bounded_put_woken_by_consume() {
    bounded_put_woken_by_consume_of(false);
}

/// Capacity 1, the item put with one consumer: the consume reclaims it by its count, and
/// must wake the blocked producer even though the watermark (held at 0 by the producer's
/// own virtual time) frees nothing.
#[test]
fn bounded_put_woken_by_refcount_consume() {
    bounded_put_woken_by_consume_of(true);
}

/// Capacity 1, the watermark held at 0 by an unrelated task: its `set_virtual_time` raise
/// must run a pass (`Zone::nudge`) that frees 0 and wakes the blocked producer.
#[test]
fn bounded_put_woken_by_vt_raise() {
    model(5, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
        let freed = record_garbage(&ch);
        let holder = rt.task(0).unwrap();
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&ch).unwrap();
        out.put(0, "a").unwrap();
        p.set_virtual_time(1).unwrap();
        let producer = thread::spawn(move || {
            out.put(1, "b").unwrap();
            (p, out)
        });
        let raiser = thread::spawn(move || {
            holder.set_virtual_time(5).unwrap();
            holder
        });
        let _p = producer.join().unwrap();
        let _holder = raiser.join().unwrap();
        assert_eq!(ch.timestamps(), vec![1]);
        assert_eq!(sorted(&freed), vec![0]);
    });
}

/// Capacity 1, the watermark held at 0 by an unrelated task: its exit (drop) must run a pass
/// that frees 0 and wakes the blocked producer.
#[test]
fn bounded_put_woken_by_task_exit() {
    model(5, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
        let holder = rt.task(0).unwrap();
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&ch).unwrap();
        out.put(0, "a").unwrap();
        p.set_virtual_time(1).unwrap();
        let producer = thread::spawn(move || {
            out.put(1, "b").unwrap();
            (p, out)
        });
        let exiter = thread::spawn(move || holder.exit());
        let _p = producer.join().unwrap();
        exiter.join().unwrap();
        assert_eq!(ch.timestamps(), vec![1]);
    });
}

/// Capacity 1, item 0 held unconsumed by a consumer connection: detaching it must run a pass
/// that frees 0 and wakes the blocked producer.
#[test]
fn bounded_put_woken_by_detach() {
    model(5, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
        let freed = record_garbage(&ch);
        let p = rt.task(0).unwrap();
        let c = rt.task(INFINITY).unwrap();
        let out = p.attach_output(&ch).unwrap();
        let input = c.attach_input(&ch).unwrap();
        out.put(0, "a").unwrap();
        p.set_virtual_time(1).unwrap();
        let producer = thread::spawn(move || {
            out.put(1, "b").unwrap();
            (p, out)
        });
        let leaver = thread::spawn(move || {
            assert_eq!(input.get(Selector::NextUnseen).unwrap().0, 0);
            input.detach();
            c
        });
        let _p = producer.join().unwrap();
        let _c = leaver.join().unwrap();
        assert_eq!(ch.timestamps(), vec![1]);
        assert_eq!(sorted(&freed), vec![0]);
    });
}

/// Capacity 1, item 0 put with one consumer, the watermark held at 0 by an unrelated task.
/// A task attaching an input connection with visibility 5 marks 0 consumed (rule 3) without
/// counting it; when the holder leaves, the pass its exit runs reclaims 0 and must wake the
/// producer blocked putting 1, whatever the interleaving with the attach.
#[test]
fn bounded_put_woken_by_attach_refcount() {
    model(3, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
        let holder = rt.task(0).unwrap();
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&ch).unwrap();
        out.put_with(0, "a", PutOptions::default().consumers(1))
            .unwrap();
        p.set_virtual_time(1).unwrap();
        let producer = thread::spawn(move || {
            out.put(1, "b").unwrap();
            (p, out)
        });
        let attacher = thread::spawn({
            let (rt, ch) = (rt.clone(), ch.clone());
            move || {
                let late = rt.task(5).unwrap();
                let input = late.attach_input(&ch).unwrap();
                drop(holder);
                (late, input)
            }
        });
        let _p = producer.join().unwrap();
        let _late = attacher.join().unwrap();
        assert_eq!(ch.timestamps(), vec![1]);
    });
}

// ---------------------------------------------------------------------------------------
// 5. reference-counted put consumed concurrently
// ---------------------------------------------------------------------------------------

/// An item put with `consumers(2)` and consumed concurrently on two connections, racing with
/// a pass that could also reclaim it by the watermark: it is reclaimed exactly once, the
/// garbage handler runs once, and neither consumer's get ever sees it gone early.
#[test]
fn refcount_consumed_concurrently() {
    model(5, || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::default()).unwrap();
        let runs = Arc::new(AtomicUsize::new(0));
        {
            let runs = runs.clone();
            ch.on_garbage(move |ts, _| {
                assert_eq!(ts, 0);
                runs.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
        }
        let p = rt.task(0).unwrap();
        let out = p.attach_output(&ch).unwrap();
        let consumers: Vec<_> = (0..2)
            .map(|_| {
                let c = rt.task(INFINITY).unwrap();
                let input = c.attach_input(&ch).unwrap();
                (c, input)
            })
            .collect();
        out.put_with(0, "once", PutOptions::default().consumers(2))
            .unwrap();
        // The producer no longer holds 0: only the two connections do.
        p.set_virtual_time(1).unwrap();
        let handles: Vec<_> = consumers
            .into_iter()
            .map(|(c, input)| {
                thread::spawn(move || {
                    let (ts, item) = input.get(Selector::Exact(0)).unwrap();
                    assert_eq!((ts, item.as_str()), (0, Some("once")));
                    input.consume(0).unwrap();
                    (c, input)
                })
            })
            .collect();
        rt.collect();
        let _keep: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert!(ch.is_empty());
        assert_eq!(ch.stats().reclaimed, 1);
        rt.collect();
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    });
}

/// Capacity 1 holding item 0, a producer blocked putting 1 and a consumer that gets and
/// consumes 0. With `counted`, 0 was put with one consumer and the producer's virtual time
/// stays 0, so only the reference count can free the slot; otherwise the watermark does.
fn bounded_put_woken_by_consume_of(counted: bool) {
    model(5, move || {
        let rt = runtime();
        let ch = rt.channel(ContainerOptions::bounded(1)).unwrap();
        let freed = record_garbage(&ch);
        let p = rt.task(0).unwrap();
        let c = rt.task(INFINITY).unwrap();
        let out = p.attach_output(&ch).unwrap();
        let input = c.attach_input(&ch).unwrap();
        if counted {
            out.put_with(0, "a", PutOptions::default().consumers(1))
                .unwrap();
        } else {
            out.put(0, "a").unwrap();
            p.set_virtual_time(1).unwrap();
        }
        let producer = thread::spawn(move || {
            out.put(1, "b").unwrap();
            (p, out)
        });
        let consumer = thread::spawn(move || {
            assert_eq!(input.get(Selector::NextUnseen).unwrap().0, 0);
            input.consume(0).unwrap();
            (c, input)
        });
        let _p = producer.join().unwrap();
        let (_c, input) = consumer.join().unwrap();
        assert_eq!(input.try_get(Selector::NextUnseen).unwrap().0, 1);
        assert_eq!(ch.timestamps(), vec![1]);
        assert_eq!(sorted(&freed), vec![0]);
    });
}
