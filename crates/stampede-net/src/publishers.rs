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

type ByKey = HashMap<String, Arc<Publisher<'static>>>;

/// Publishers by key, each sending with back-pressure (`Block`): what goes through them
/// must not be dropped. `None` once the space is leaving.
pub(crate) struct Publishers(Mutex<Option<ByKey>>);

impl Default for Publishers {
    fn default() -> Self {
        Publishers(Mutex::new(Some(HashMap::new())))
    }
}

const LEFT: &str = "this address space is leaving";

impl Publishers {
    /// The publisher of `key`, declared on `session` if it is new.
    pub(crate) fn get(
        &self,
        session: &Session,
        key: String,
    ) -> Result<Arc<Publisher<'static>>, String> {
        if let Some(p) = lock(&self.0).as_ref().ok_or(LEFT)?.get(&key) {
            return Ok(p.clone());
        }
        let p = session
            .declare_publisher(key.clone())
            .congestion_control(CongestionControl::Block)
            .wait()
            .map_err(|e| crate::error::zenoh_text(&e))?;
        let p = Arc::new(p);
        lock(&self.0).as_mut().ok_or(LEFT)?.insert(key, p.clone());
        Ok(p)
    }

    /// `space` left: its publishers go (a key names it as one of its parts).
    pub(crate) fn forget(&self, space: &str) {
        if let Some(m) = lock(&self.0).as_mut() {
            m.retain(|k, _| !k.split('/').any(|part| part == space));
        }
    }

    /// This space is leaving: every publisher goes now, while the session is open to
    /// undeclare it, and none is made after.
    pub(crate) fn close(&self) {
        let gone = lock(&self.0).take();
        drop(gone);
    }
}
