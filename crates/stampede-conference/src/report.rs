//! What participants and mixers print: one JSON object per line on stdout, flushed at once
//! so a parent reading the pipe sees each report when it is made.

use std::io::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::frame::{verify_composite, FrameSize};

/// Prints `value` as one JSON line on stdout and flushes. A closed stdout (the reader went
/// away) is not an error worth stopping for.
pub fn emit<T: Serialize>(value: &T) {
    let Ok(line) = serde_json::to_string(value) else {
        return;
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A display's periodic report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DisplayReport {
    /// Always `"display"`.
    pub event: String,
    /// The participant.
    pub id: u32,
    /// Composites received so far.
    pub composites: u64,
    /// Slot of the last composite, if any arrived.
    pub ts: Option<i64>,
    /// Non-empty tiles of the last composite, in grid order.
    pub members: Vec<u32>,
    /// Composites per second since the previous report.
    pub fps: f64,
    /// Tiles that failed verification so far.
    pub bad: u64,
}

/// A participant's report when it leaves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Always `"summary"`.
    pub event: String,
    /// The participant.
    pub id: u32,
    /// Composites received.
    pub composites: u64,
    /// Mean composites per second from the first composite received to the last.
    pub fps: f64,
    /// Tiles that failed verification.
    pub bad: u64,
    /// Frames the camera put.
    pub frames_put: u64,
}

/// A mixer's periodic report (counts since the start).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MixerReport {
    /// Always `"mixer"`.
    pub event: String,
    /// Slots begun: composed, or given up as dropped.
    pub slots: u64,
    /// Composites delivered to the mix channel (or, for the baseline, written to everyone).
    pub composites: u64,
    /// Tiles left empty because the camera skipped that slot, the frame was gone, or the
    /// member left during the slot.
    pub missing: u64,
    /// Tiles left empty because they had not arrived within the stall limit.
    pub stalled: u64,
    /// Composites that could not be put within the put timeout.
    pub dropped: u64,
    /// Frames that arrived after their slot had been composed without them.
    pub late: u64,
    /// Frames that were not `U8` arrays of shape `[H, W, 3]`.
    pub malformed: u64,
    /// Slots passed over because no participant had frames for them.
    pub idle: u64,
    /// Composites per second since the previous report (in the report at exit, over the
    /// whole run).
    pub fps: f64,
    /// Ids of the participants of the slot composed last (empty while there are none).
    pub members: Vec<u32>,
}

/// Counts events and tells their rate per interval and over the whole run.
#[derive(Debug)]
pub struct FpsMeter {
    count: u64,
    first: Option<Instant>,
    last: Option<Instant>,
    mark: (Instant, u64),
}

impl FpsMeter {
    /// A meter whose first interval starts now.
    pub fn new() -> FpsMeter {
        FpsMeter {
            count: 0,
            first: None,
            last: None,
            mark: (Instant::now(), 0),
        }
    }

    /// Counts one event now.
    pub fn tick(&mut self) {
        self.tick_at(Instant::now());
    }

    /// Counts one event at `at`.
    pub fn tick_at(&mut self, at: Instant) {
        self.count += 1;
        self.first.get_or_insert(at);
        self.last = Some(at);
    }

    /// Events counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Events per second since the previous call (or the start), and starts a new interval.
    pub fn interval_rate(&mut self, now: Instant) -> f64 {
        let (since, before) = std::mem::replace(&mut self.mark, (now, self.count));
        rate(self.count - before, now.saturating_duration_since(since))
    }

    /// Events per second between the first event and the last.
    pub fn mean_rate(&self) -> f64 {
        match (self.first, self.last) {
            (Some(a), Some(b)) if self.count > 1 => {
                rate(self.count - 1, b.saturating_duration_since(a))
            }
            _ => 0.0,
        }
    }
}

impl Default for FpsMeter {
    fn default() -> Self {
        FpsMeter::new()
    }
}

/// `n` events over `over`, per second (0 over no time).
pub(crate) fn rate(n: u64, over: Duration) -> f64 {
    let secs = over.as_secs_f64();
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// What a display has seen, shared between the thread that receives composites and the one
/// that reports.
#[derive(Debug, Default)]
struct Seen {
    meter: FpsMeter,
    last_ts: Option<i64>,
    members: Vec<u32>,
    bad: u64,
}

/// A display's state behind a lock, cheap to clone into threads.
#[derive(Clone, Debug)]
pub struct DisplayStats {
    id: u32,
    tile: FrameSize,
    state: Arc<Mutex<Seen>>,
}

impl DisplayStats {
    /// The display of participant `id`, whose composites are made of `tile`-sized frames.
    pub fn new(id: u32, tile: FrameSize) -> DisplayStats {
        DisplayStats {
            id,
            tile,
            state: Arc::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Seen> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Checks and counts the composite for slot `ts` with pixel data `data` of `shape`.
    pub fn received(&self, ts: i64, data: &[u8], shape: &[usize]) {
        let v = verify_composite(data, shape, self.tile, ts.max(0) as u64);
        let mut s = self.lock();
        s.meter.tick();
        s.last_ts = Some(ts);
        s.members = v.members;
        s.bad += v.bad;
    }

    /// Counts a composite that could not even be read as an array.
    pub fn received_malformed(&self, ts: i64) {
        let mut s = self.lock();
        s.meter.tick();
        s.last_ts = Some(ts);
        s.members.clear();
        s.bad += 1;
    }

    /// The periodic report, starting a new rate interval.
    pub fn report(&self) -> DisplayReport {
        let mut s = self.lock();
        let fps = s.meter.interval_rate(Instant::now());
        DisplayReport {
            event: "display".into(),
            id: self.id,
            composites: s.meter.count(),
            ts: s.last_ts,
            members: s.members.clone(),
            fps,
            bad: s.bad,
        }
    }

    /// The report at the end, with the camera's count of frames put.
    pub fn summary(&self, frames_put: u64) -> Summary {
        let s = self.lock();
        Summary {
            event: "summary".into(),
            id: self.id,
            composites: s.meter.count(),
            fps: s.meter.mean_rate(),
            bad: s.bad,
            frames_put,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{compose, frame_bytes, Tile};

    #[test]
    fn meters_give_interval_and_mean_rates() {
        let mut m = FpsMeter::new();
        let t0 = Instant::now();
        for i in 0..11 {
            m.tick_at(t0 + Duration::from_millis(100 * i));
        }
        assert_eq!(m.count(), 11);
        assert!((m.mean_rate() - 10.0).abs() < 1e-9);
        let r = m.interval_rate(t0 + Duration::from_secs(2));
        assert!(r > 0.0);
        assert_eq!(m.interval_rate(t0 + Duration::from_secs(3)), 0.0);
    }

    #[test]
    fn displays_report_what_they_verified() {
        let size = FrameSize::from_size_kb(2, 16);
        let a = frame_bytes(2, 40, size);
        let b = frame_bytes(5, 40, size);
        let c = compose(
            &[Some(Tile { size, data: &a }), Some(Tile { size, data: &b })],
            size,
        );
        let d = DisplayStats::new(2, size);
        d.received(40, &c.data, &c.shape());
        d.received(41, &c.data, &c.shape());
        let r = d.report();
        assert_eq!(r.composites, 2);
        assert_eq!(r.ts, Some(41));
        assert_eq!(r.members, [2, 5]);
        assert_eq!(r.bad, 2);
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with(r#"{"event":"display","id":2,"composites":2,"ts":41,"#));
        let s = d.summary(9);
        assert_eq!((s.composites, s.frames_put, s.bad), (2, 9, 2));
    }
}
