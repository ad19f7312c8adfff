//! Declared publishers, made on a key's first use: a put through one skips resolving its
//! key expression and routes, which an undeclared `Session::put` does every time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use zenoh::pubsub::Publisher;
use zenoh::qos::CongestionControl;
use zenoh::{Session, Wait as _};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Publishers by key, all with one congestion control: by default back-pressure (`Block`),
/// for what must not be dropped.
pub(crate) struct Publishers {
    by_key: Mutex<HashMap<String, Arc<Publisher<'static>>>>,
    congestion: CongestionControl,
}

impl Default for Publishers {
    fn default() -> Self {
        Publishers::new(CongestionControl::Block)
    }
}

impl Publishers {
    /// Publishers that send with `congestion`.
    pub(crate) fn new(congestion: CongestionControl) -> Publishers {
        Publishers {
            by_key: Mutex::default(),
            congestion,
        }
    }

    /// The publisher of `key`, declared on `session` if it is new.
    pub(crate) fn get(
        &self,
        session: &Session,
        key: String,
    ) -> Result<Arc<Publisher<'static>>, String> {
        if let Some(p) = lock(&self.by_key).get(&key) {
            return Ok(p.clone());
        }
        let p = session
            .declare_publisher(key.clone())
            .congestion_control(self.congestion)
            .wait()
            .map_err(|e| crate::error::zenoh_text(&e))?;
        let p = Arc::new(p);
        lock(&self.by_key).insert(key, p.clone());
        Ok(p)
    }

    /// `space` left: its publishers go (a key names it as one of its parts).
    pub(crate) fn forget(&self, space: &str) {
        lock(&self.by_key).retain(|k, _| !k.split('/').any(|part| part == space));
    }
}
