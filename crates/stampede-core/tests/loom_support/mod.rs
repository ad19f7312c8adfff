//! Helpers shared by the loom models.

use std::sync::{Arc, Mutex};

use stampede_core::{Item, Runtime, Timestamp};

/// Runs `f` under loom with a preemption bound (unless `LOOM_MAX_PREEMPTIONS` sets one), so
/// each model stays in the seconds range.
pub fn model<F: Fn() + Sync + Send + 'static>(bound: usize, f: F) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(bound);
    }
    b.check(f);
}

/// A runtime without the background collector thread (it is never started under loom).
pub fn runtime() -> Runtime {
    Runtime::builder().gc_interval(None).build()
}

/// Timestamps a garbage handler saw, in the order it saw them.
pub type Freed = Arc<Mutex<Vec<Timestamp>>>;

/// A garbage handler that records every reclaimed timestamp, and the record.
pub fn garbage_recorder() -> (Freed, impl Fn(Timestamp, &Item) + Send + Sync + 'static) {
    let freed = Arc::new(Mutex::new(Vec::new()));
    let f = freed.clone();
    (freed, move |ts, _: &Item| f.lock().unwrap().push(ts))
}
