//! A Stampede participant: a camera that puts time-stamped frames into the participant's own
//! channel, and a display that takes the newest composite from the mixer's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use stampede_core::{Channel, InputConnection, Task};
use stampede_core::{
    ContainerOptions, DType, GetError, LateAction, NdArray, Pacer, Selector, StmError, Timestamp,
    INFINITY,
};
use stampede_net::Space;

use crate::error::{joined, ConferenceError};
use crate::frame::{frame_item, FrameSize};
use crate::join::{task_at_least, JoinOptions, SLICE};
use crate::protocol::{cam_name, decode_clock, lead, CAM_CAPACITY, CLOCK_REGISTER, MIX_CHANNEL};
use crate::report::{emit, DisplayStats, Summary};
use crate::stop::Stop;

/// What a participant is told.
#[derive(Clone, Debug)]
pub struct ParticipantOptions {
    /// Application, router endpoint, timeouts.
    pub join: JoinOptions,
    /// The participant's id, at least 1.
    pub id: u32,
    /// The camera's frame size; every participant of a conference uses the same.
    pub frame: FrameSize,
    /// Frames per second (0: as fast as the conference takes them).
    pub fps: f64,
    /// How often to print a display report.
    pub report_every: Duration,
}

impl ParticipantOptions {
    /// Checks what would only fail later.
    pub fn validate(&self) -> Result<(), ConferenceError> {
        if self.id == 0 {
            return Err(ConferenceError::Setup(
                "participant ids start at 1 (0 marks an empty tile)".into(),
            ));
        }
        if !self.frame.holds_header() {
            return Err(ConferenceError::Setup(format!(
                "a frame {} pixels wide cannot hold the 12-byte header in its first row",
                self.frame.width
            )));
        }
        if !self.fps.is_finite() || self.fps < 0.0 {
            return Err(ConferenceError::Setup("fps must be 0 or positive".into()));
        }
        Ok(())
    }
}

/// Joins the conference, runs camera and display until `stop`, leaves; returns the summary
/// (also printed). An error after joining still prints the summary first.
pub fn run_participant(opts: &ParticipantOptions, stop: &Stop) -> Result<Summary, ConferenceError> {
    opts.validate()?;
    let space = Space::join(&opts.join.app, opts.join.participant_config())?;
    let result = participate(&space, opts, stop);
    // Leaving withdraws the camera's name at once, so the mixer drops this participant
    // from the next slot instead of stalling until the lease expires.
    space.leave();
    result
}

fn participate(
    space: &Space,
    opts: &ParticipantOptions,
    stop: &Stop,
) -> Result<Summary, ConferenceError> {
    let id = opts.id;
    let cam = space
        .channel(ContainerOptions::bounded(CAM_CAPACITY).name(cam_name(id)))
        .map_err(|e| match e {
            StmError::NameTaken(_) => {
                ConferenceError::Setup(format!("participant {id} is already in the conference"))
            }
            e => e.into(),
        })?;
    let clock = read_clock(space, opts.join.wait)?;
    let camera_task = task_at_least(space, clock + lead(opts.fps))?;
    let t0 = camera_task.virtual_time();
    let mix = space.lookup_channel(MIX_CHANNEL, opts.join.wait)?;
    let display_task = space.task(INFINITY)?;
    let input = display_task.attach_input(&mix)?;
    emit(&serde_json::json!({"event": "joined", "id": id, "clock": clock, "t0": t0}));

    let display = DisplayStats::new(id, opts.frame);
    let frames_put = AtomicU64::new(0);
    let (cam_result, display_result) = std::thread::scope(|s| {
        let camera = s.spawn(|| {
            let r = camera(camera_task, &cam, opts, t0, stop, &frames_put);
            stop.trigger();
            r
        });
        let shown = s.spawn(|| {
            let r = show(space, &display_task, input, &display, opts, stop);
            stop.trigger();
            r
        });
        while !stop.wait_timeout(opts.report_every) {
            emit(&display.report());
        }
        (joined(camera), joined(shown))
    });
    let summary = display.summary(frames_put.load(Ordering::Relaxed));
    emit(&summary);
    cam_result?;
    display_result?;
    Ok(summary)
}

/// The slot the mixer will compose next.
fn read_clock(space: &Space, wait: Duration) -> Result<Timestamp, ConferenceError> {
    let reg = space.lookup_register(CLOCK_REGISTER, wait)?;
    let task = space.task(INFINITY)?;
    let input = task.attach_input(&reg)?;
    let (_, item) = input.read_timeout(wait)?;
    decode_clock(&item).ok_or_else(|| {
        ConferenceError::Protocol(format!("{CLOCK_REGISTER} does not hold a u64 slot"))
    })
}

/// Puts frames `t0, t0 + 1, ...` paced at the frame rate; none is skipped, so a camera held
/// back by a full channel catches up afterwards.
fn camera(
    task: Task,
    cam: &Channel,
    opts: &ParticipantOptions,
    t0: Timestamp,
    stop: &Stop,
    frames_put: &AtomicU64,
) -> Result<(), ConferenceError> {
    let out = task.attach_output(cam)?;
    let mut pacer = (opts.fps > 0.0).then(|| {
        let period = Duration::from_secs_f64(1.0 / opts.fps);
        Pacer::new(period, period, |_| LateAction::Continue)
    });
    let mut ts = t0;
    while !stop.is_set() {
        if let Some(p) = &mut pacer {
            p.sync(ts);
        }
        let mut item = frame_item(opts.id, ts as u64, opts.frame);
        loop {
            match out.put_timeout(ts, item, SLICE) {
                Ok(()) => break,
                Err(e) if e.is_full() => {
                    if stop.is_set() {
                        return Ok(());
                    }
                    item = e.into_item();
                }
                Err(e) => return Err(e.into()),
            }
        }
        frames_put.fetch_add(1, Ordering::Relaxed);
        ts += 1;
        task.set_virtual_time(ts)?;
    }
    Ok(())
}

/// Takes the newest composite not seen yet, consumes everything up to it (older ones are
/// stale for a display), and checks it.
fn show(
    space: &Space,
    task: &Task,
    mut input: InputConnection<Channel>,
    display: &DisplayStats,
    opts: &ParticipantOptions,
    stop: &Stop,
) -> Result<(), ConferenceError> {
    while !stop.is_set() {
        match input.get_timeout(Selector::NewestUnseen, SLICE) {
            Ok((ts, item)) => {
                // Consumed at once: until then this composite holds the mix channel's
                // garbage collection, and a full mix channel stops the mixer.
                if let Err(e) = input.consume_until(ts) {
                    eprintln!("participant {}: consume failed: {e}", opts.id);
                }
                match item.decode::<NdArray>() {
                    Ok(a) if a.dtype() == DType::U8 => display.received(ts, a.data(), a.shape()),
                    _ => display.received_malformed(ts),
                }
            }
            Err(GetError::Timeout(_) | GetError::Unavailable(_) | GetError::Gone(_)) => {}
            Err(e) => {
                eprintln!(
                    "participant {}: lost the mix channel ({e}); looking for it again",
                    opts.id
                );
                match reattach(space, task, opts, stop)? {
                    Some(i) => input = i,
                    None => return Ok(()),
                }
            }
        }
    }
    Ok(())
}

/// Finds the mix channel again (a restarted mixer) and attaches to it; `None` on stop.
fn reattach(
    space: &Space,
    task: &Task,
    opts: &ParticipantOptions,
    stop: &Stop,
) -> Result<Option<InputConnection<Channel>>, ConferenceError> {
    let deadline = std::time::Instant::now() + opts.join.wait;
    loop {
        if stop.is_set() {
            return Ok(None);
        }
        let attached = space
            .lookup_channel(MIX_CHANNEL, SLICE)
            .map_err(ConferenceError::from)
            .and_then(|mix| Ok(task.attach_input(&mix)?));
        match attached {
            Ok(i) => return Ok(Some(i)),
            Err(e) if std::time::Instant::now() >= deadline => return Err(e),
            Err(_) => {
                stop.wait_timeout(SLICE);
            }
        }
    }
}
