#![cfg(loom)]
//! Loom models of channel hand-off, collection and the bounded-channel wake-up protocol.

use std::sync::Arc;

use loom::thread;
use stampede_core::{ContainerOptions, GetError, Runtime, Selector, INFINITY};

fn model<F: Fn() + Sync + Send + 'static>(bound: usize, f: F) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(bound);
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n2 = n.clone();
    b.check(move || {
        n2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    eprintln!("iterations: {}", n.load(std::sync::atomic::Ordering::Relaxed));
}

fn runtime() -> Runtime {
    Runtime::builder().gc_interval(None).build()
}

/// A blocked `get(NextUnseen)` is always woken by a racing put and gets the item once.
#[test]
fn put_wakes_blocked_get() {
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
            assert!(matches!(
                input.try_get(Selector::NextUnseen),
                Err(GetError::Unavailable(_))
            ));
            drop(c);
        });
        out.put(0, "a").unwrap();
        getter.join().unwrap();
        let _ = Arc::new(());
    });
}
