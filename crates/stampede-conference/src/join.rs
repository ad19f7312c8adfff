//! How the conference's address spaces join: the mixer as a Zenoh router that participants
//! connect to as clients, the paper's cluster server and end devices.

use std::time::Duration;

use stampede_core::Task;
use stampede_core::{Timestamp, ZoneId};
use stampede_net::{Config, Space};

use crate::error::ConferenceError;
use crate::protocol::{DEFAULT_APP, DEFAULT_ENDPOINT};

/// Timed operations wait in slices no longer than this, so every loop notices a stop request
/// soon; it is below the network layer's wait slice, so a timed-out get still reports the
/// neighbouring timestamps.
pub(crate) const SLICE: Duration = Duration::from_millis(200);

/// The application, the endpoint and the failure timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinOptions {
    /// The application name.
    pub app: String,
    /// Where the mixer listens and participants connect, such as `tcp/127.0.0.1:7447`.
    pub endpoint: String,
    /// How long a silent link stays up: how soon a killed process is noticed. A loaded host
    /// can starve a process's keep-alives for a second or more, so the default is 5 s.
    pub lease: Duration,
    /// How long an operation waits for an answer from a live owner.
    pub op_timeout: Duration,
    /// How long to wait for the other side's names (and, for a participant, the router).
    pub wait: Duration,
}

impl Default for JoinOptions {
    fn default() -> Self {
        JoinOptions {
            app: DEFAULT_APP.into(),
            endpoint: DEFAULT_ENDPOINT.into(),
            lease: Duration::from_secs(5),
            op_timeout: Duration::from_secs(5),
            wait: Duration::from_secs(30),
        }
    }
}

impl JoinOptions {
    fn tune(&self, mut cfg: Config) -> Config {
        cfg.lease = self.lease;
        cfg.op_timeout = self.op_timeout;
        cfg
    }

    /// The mixer's configuration: a router listening on the endpoint.
    pub fn mixer_config(&self) -> Config {
        self.tune(Config::router(self.endpoint.clone()))
    }

    /// A participant's configuration: a client of the router at the endpoint.
    pub fn participant_config(&self) -> Config {
        let mut cfg = self.tune(Config::client(self.endpoint.clone()));
        cfg.connect_timeout = self.wait;
        cfg
    }
}

/// A root task at `vt`, or at the zone's floor if that is higher (a running application's
/// floor has moved past 0, and a root task may not start below it).
pub(crate) fn task_at_least(space: &Space, vt: Timestamp) -> Result<Task, ConferenceError> {
    task_at_least_in(space, vt, ZoneId::DEFAULT)
}

/// [`task_at_least`] in `zone`.
pub(crate) fn task_at_least_in(
    space: &Space,
    vt: Timestamp,
    zone: ZoneId,
) -> Result<Task, ConferenceError> {
    let task = |vt| space.task_builder().virtual_time(vt).zone(zone).create();
    match task(vt) {
        Err(stampede_core::StmError::BelowVisibility { visibility, .. }) => {
            Ok(task(visibility.max(vt))?)
        }
        r => Ok(r?),
    }
}
