//! A paced vision-style pipeline: a digitizer at 30 frames/s, a tracker that always takes the
//! newest frame it has not seen, and a decision task that joins tracker output with frames by
//! timestamp. Frames are reclaimed by the watermark; the channel never grows.
//!
//! `cargo run --example pipeline -- [seconds]`

use std::time::{Duration, Instant};

use stampede::{
    ContainerOptions, LateAction, NdArray, Runtime, Selector, StmError, Tick, INFINITY,
};

const W: usize = 160;
const H: usize = 120;

/// A synthetic frame: a bright square moving across a dark background.
fn frame(n: i64) -> NdArray {
    let mut px = vec![16u8; W * H];
    let x0 = (n as usize * 3) % (W - 16);
    let y0 = (n as usize * 2) % (H - 16);
    for y in y0..y0 + 16 {
        px[y * W + x0..y * W + x0 + 16].fill(240);
    }
    NdArray::from_slice(&[H, W], &px).expect("shape matches")
}

/// Centroid of the bright pixels.
fn track(f: &NdArray) -> (f64, f64) {
    let px = f.as_slice::<u8>().expect("u8 frame");
    let (mut sx, mut sy, mut n) = (0.0, 0.0, 0.0);
    for (i, &p) in px.iter().enumerate() {
        if p > 128 {
            sx += (i % W) as f64;
            sy += (i / W) as f64;
            n += 1.0;
        }
    }
    (sx / n, sy / n)
}

fn main() -> Result<(), StmError> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let rt = Runtime::new();
    let frames = rt.channel(ContainerOptions::bounded(30).name("video/frames"))?;
    let tracks = rt.channel(ContainerOptions::bounded(30).name("video/tracks"))?;
    let n_frames = 30 * seconds as i64;

    // The decision task attaches before anything runs, so it sees every track and frame.
    let decision = rt.task(INFINITY)?;
    let track_in = decision.attach_input(&tracks)?;
    let frame_in = decision.attach_input(&frames)?;

    let digitizer = rt.task_builder().name("digitizer").virtual_time(0).spawn({
        let frames = frames.clone();
        move |task| -> Result<u64, StmError> {
            let out = task.attach_output(&frames)?;
            let mut pacer = task.pacer(Duration::from_millis(33), Duration::from_millis(5), |_| {
                LateAction::Skip
            });
            let mut n = 0;
            let mut skipped = 0;
            while n < n_frames {
                out.put(n, frame(n)).map_err(|_| StmError::Closed)?;
                n += 1;
                task.set_virtual_time(n)?;
                if let Tick::Skip(to) = pacer.sync(n) {
                    skipped += (to - n) as u64;
                    n = to;
                    task.set_virtual_time(n)?;
                }
            }
            frames.close()?;
            Ok(skipped)
        }
    })?;

    // Virtual time 0 until attached, so no frame is reclaimed before the tracker is there.
    let tracker = rt.task_builder().name("tracker").virtual_time(0).spawn({
        let (frames, tracks) = (frames.clone(), tracks.clone());
        move |task| -> Result<u64, StmError> {
            let input = task.attach_input(&frames)?;
            let out = task.attach_output(&tracks)?;
            task.set_virtual_time(INFINITY)?;
            let mut n = 0;
            while let Ok((ts, f)) = input.get(Selector::NewestUnseen) {
                let (x, y) = track(f.get::<NdArray>().expect("frames are arrays"));
                out.put(ts, format!("{x:.1},{y:.1}"))
                    .map_err(|_| StmError::Closed)?;
                input.consume_until(ts)?;
                n += 1;
            }
            tracks.close()?;
            Ok(n)
        }
    })?;

    let start = Instant::now();
    let mut decided = 0;
    while let Ok((ts, t)) = track_in.get(Selector::NextUnseen) {
        // The frame with the same timestamp is still there: nobody consumed it here yet.
        match frame_in.try_get(Selector::Exact(ts)) {
            Ok((_, f)) => {
                let f = f.get::<NdArray>().expect("array");
                let peak = f.as_slice::<u8>().expect("u8").iter().max().copied();
                if decided % 15 == 0 {
                    println!(
                        "t={ts:4}  target at {}  peak {peak:?}",
                        t.as_str().unwrap_or("?")
                    );
                }
            }
            Err(e) => println!("t={ts:4}  frame unavailable: {e}"),
        }
        decided += 1;
        track_in.consume_until(ts)?;
        frame_in.consume_until(ts)?;
    }
    let skipped = digitizer.join().expect("digitizer")?;
    let tracked = tracker.join().expect("tracker")?;
    let stats = frames.stats();
    println!(
        "{decided} decisions, {tracked} frames tracked of {n_frames} in {:.1?}; \
         digitizer skipped {skipped}, tracker skipped {}, reclaimed {}, frames held now {}",
        start.elapsed(),
        stats.skipped,
        stats.reclaimed,
        stats.items
    );
    Ok(())
}
