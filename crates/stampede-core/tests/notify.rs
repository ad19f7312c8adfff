//! Tests for arrival notification: callbacks, async `arrivals()` streams, overflow counting
//! and the end of a stream when its container closes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use futures::executor::block_on;
use futures::{FutureExt, StreamExt};
use stampede_core::{ContainerOptions, Runtime, Selector, INFINITY};

/// Long enough never to expire in a passing test; a bug makes the test fail instead of hang.
const LONG: Duration = Duration::from_secs(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn callback_sees_every_put_on_the_putting_thread() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    ch.on_arrival({
        let seen = seen.clone();
        move |ts| seen.lock().unwrap().push((ts, thread::current().id()))
    })
    .unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let putter = thread::scope(|s| {
        s.spawn(|| {
            for ts in [3, 1, 2] {
                out.put(ts, "x").unwrap();
            }
            // A failed put is no arrival.
            assert!(out.put(3, "dup").is_err());
            thread::current().id()
        })
        .join()
        .unwrap()
    });
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        vec![3, 1, 2],
        "in put order"
    );
    assert!(seen.iter().all(|s| s.1 == putter));
}

#[test]
fn unsubscribe_stops_callbacks() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let id = ch
        .on_arrival({
            let count = count.clone();
            move |_| {
                count.fetch_add(1, Ordering::SeqCst);
            }
        })
        .unwrap();
    let other = ch.on_arrival(|_| {}).unwrap();
    assert_ne!(id, other);
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(0, "a").unwrap();
    assert!(ch.unsubscribe(id));
    assert!(!ch.unsubscribe(id));
    out.put(1, "b").unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn callback_runs_outside_the_channel_lock_and_sees_the_item() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let c = rt.task(INFINITY).unwrap();
    let input = Arc::new(c.attach_input(&ch).unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let id = ch
        .on_arrival({
            let (input, got) = (input.clone(), got.clone());
            move |ts| {
                // Would deadlock if the callback ran under the channel's lock.
                let item = input.try_get(Selector::Exact(ts)).unwrap().1;
                got.lock()
                    .unwrap()
                    .push((ts, item.as_str().unwrap().to_owned()));
            }
        })
        .unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(5, "five").unwrap();
    out.put(6, "six").unwrap();
    assert_eq!(
        *got.lock().unwrap(),
        vec![(5, "five".to_owned()), (6, "six".to_owned())]
    );
    // Break the reference cycle channel -> callback -> connection -> channel.
    assert!(ch.unsubscribe(id));
}

#[test]
fn arrivals_stream_yields_timestamps_in_put_order() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let mut arrivals = ch.arrivals(16).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in [10, 7, 12] {
        out.put(ts, "x").unwrap();
    }
    assert_eq!(block_on(arrivals.next()), Some(10));
    assert_eq!(block_on(arrivals.next()), Some(7));
    assert_eq!(block_on(arrivals.next()), Some(12));
    // Nothing more yet: the stream is pending, not ended.
    assert_eq!(arrivals.next().now_or_never(), None);
    assert_eq!(arrivals.dropped(), 0);
    assert!(format!("{arrivals:?}").contains("dropped"));
}

#[test]
fn arrivals_stream_wakes_on_a_put_from_another_thread() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let mut arrivals = ch.arrivals(4).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let ch = &ch;
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(ms(20));
            out.put(42, "late").unwrap();
        });
        // Watchdog: ends the stream by closing the channel if the wake-up is lost.
        s.spawn(move || {
            if stop_rx.recv_timeout(LONG).is_err() {
                ch.close().unwrap();
            }
        });
        assert_eq!(block_on(arrivals.next()), Some(42));
        stop_tx.send(()).unwrap();
    });
}

#[test]
fn overflow_drops_the_oldest_and_counts_them() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let mut arrivals = ch.arrivals(2).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 1..=5 {
        out.put(ts, "x").unwrap();
    }
    assert_eq!(arrivals.dropped(), 3);
    assert_eq!(block_on(arrivals.next()), Some(4));
    assert_eq!(block_on(arrivals.next()), Some(5));
    out.put(6, "x").unwrap();
    assert_eq!(block_on(arrivals.next()), Some(6));
    assert_eq!(arrivals.dropped(), 3);

    // A zero capacity still keeps one notification.
    let mut tiny = ch.arrivals(0).unwrap();
    out.put(7, "x").unwrap();
    out.put(8, "x").unwrap();
    assert_eq!(block_on(tiny.next()), Some(8));
    assert_eq!(tiny.dropped(), 1);
}

#[test]
fn stream_ends_on_close_after_the_buffered_notifications() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let mut arrivals = ch.arrivals(8).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(1, "x").unwrap();
    out.put(2, "x").unwrap();
    ch.close().unwrap();
    assert_eq!(block_on(arrivals.next()), Some(1));
    assert_eq!(block_on(arrivals.next()), Some(2));
    assert_eq!(arrivals.next().now_or_never(), Some(None));
    let rest: Vec<i64> = block_on(arrivals.collect());
    assert!(rest.is_empty());
}

#[test]
fn close_wakes_a_waiting_stream() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let mut arrivals = ch.arrivals(8).unwrap();
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(ms(20));
            ch.close().unwrap();
        });
        assert_eq!(block_on(arrivals.next()), None);
    });
}

#[test]
fn stream_subscribed_after_close_ends_at_once() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    ch.close().unwrap();
    let mut arrivals = ch.arrivals(8).unwrap();
    assert_eq!(arrivals.next().now_or_never(), Some(None));
}

#[test]
fn dropped_streams_do_not_disturb_puts() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let kept = ch.arrivals(4).unwrap();
    drop(ch.arrivals(1).unwrap());
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    for ts in 0..10 {
        out.put(ts, "x").unwrap();
    }
    assert_eq!(kept.dropped(), 6);
}

#[test]
fn queues_notify_arrivals_too() {
    let rt = Runtime::new();
    let q = rt.queue(ContainerOptions::default()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let id = q
        .on_arrival({
            let seen = seen.clone();
            move |ts| seen.lock().unwrap().push(ts)
        })
        .unwrap();
    let mut arrivals = q.arrivals(8).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&q).unwrap();
    out.put(4, "a").unwrap();
    out.put(4, "b").unwrap();
    out.put(2, "c").unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![4, 4, 2]);
    assert!(q.unsubscribe(id));
    out.put(9, "d").unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3);
    q.close().unwrap();
    let all: Vec<i64> = block_on(arrivals.by_ref().collect());
    assert_eq!(all, vec![4, 4, 2, 9]);
}

#[test]
fn unsubscribing_one_subscriber_keeps_notifying_the_others() {
    let rt = Runtime::new();
    let ch = rt.channel(ContainerOptions::default()).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let gone = ch.on_arrival(|_| {}).unwrap();
    let kept = ch
        .on_arrival({
            let seen = seen.clone();
            move |ts| seen.lock().unwrap().push(ts)
        })
        .unwrap();
    let mut arrivals = ch.arrivals(8).unwrap();
    let p = rt.task(0).unwrap();
    let out = p.attach_output(&ch).unwrap();
    out.put(1, "x").unwrap();
    assert!(ch.unsubscribe(gone));
    // In order and out of order, with and without a reference count.
    out.put(5, "x").unwrap();
    out.put(3, "x").unwrap();
    out.put_with(7, "x", stampede_core::PutOptions::default().consumers(1))
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![1, 5, 3, 7]);
    assert!(ch.unsubscribe(kept));
    out.put(9, "x").unwrap();
    ch.close().unwrap();
    let all: Vec<i64> = block_on(arrivals.by_ref().collect());
    assert_eq!(all, vec![1, 5, 3, 7, 9]);
    assert_eq!(*seen.lock().unwrap(), vec![1, 5, 3, 7]);
}
