//! Tests for real-time pacing: on-time sleeps and the late handler's three decisions.
//!
//! Timing is only checked from below (a pacer never returns before a tick is due) or with
//! tolerances far larger than any scheduling delay, so the tests do not flake on a busy
//! machine.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use stampede_core::{LateAction, Lateness, Pacer, Runtime, Tick};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A late handler that records what it saw and answers `action`.
fn recording(
    action: LateAction,
) -> (
    Arc<Mutex<Vec<Lateness>>>,
    impl FnMut(Lateness) -> LateAction,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    (seen, move |l| {
        s.lock().unwrap().push(l);
        action
    })
}

#[test]
fn on_time_ticks_sleep_until_due() {
    let mut pacer = Pacer::new(ms(20), Duration::from_secs(5), |l| {
        panic!("unexpectedly late: {l:?}")
    });
    assert_eq!(pacer.period(), ms(20));
    let start = Instant::now();
    // The first sync fixes the schedule: its tick is due now.
    assert_eq!(pacer.sync(0), Tick::OnTime);
    for vt in 1..=3 {
        assert_eq!(pacer.sync(vt), Tick::OnTime);
        assert!(
            start.elapsed() >= ms(20) * vt as u32,
            "tick {vt} came early"
        );
    }
    // Virtual time may jump: tick 10 is due ten periods after tick 0.
    assert_eq!(pacer.sync(10), Tick::OnTime);
    assert!(start.elapsed() >= ms(200));
    let stats = pacer.stats();
    assert_eq!(
        (stats.on_time, stats.late, stats.skipped, stats.resyncs),
        (5, 0, 0, 0)
    );
}

#[test]
fn the_schedule_starts_at_the_first_synced_virtual_time() {
    let mut pacer = Pacer::new(ms(25), Duration::from_secs(5), |_| LateAction::Continue);
    let start = Instant::now();
    assert_eq!(pacer.sync(1000), Tick::OnTime);
    assert_eq!(pacer.sync(1002), Tick::OnTime);
    assert!(start.elapsed() >= ms(50));
    // A tick before the origin is already due.
    assert_eq!(pacer.sync(999), Tick::OnTime);
}

#[test]
fn lateness_within_tolerance_is_on_time() {
    let (seen, handler) = recording(LateAction::Continue);
    let mut pacer = Pacer::new(ms(10), Duration::from_secs(5), handler);
    pacer.sync(0);
    thread::sleep(ms(60));
    assert_eq!(pacer.sync(1), Tick::OnTime);
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(pacer.stats().late, 0);
}

#[test]
fn late_with_continue_keeps_the_original_schedule() {
    let period = ms(10);
    let (seen, handler) = recording(LateAction::Continue);
    let mut pacer = Pacer::new(period, ms(5), handler);
    pacer.sync(0);
    thread::sleep(ms(150));
    let Tick::Late(late) = pacer.sync(1) else {
        panic!("expected a late tick")
    };
    // Tick 1 was due one period after tick 0, which was at least 150 ms ago.
    assert!(late >= ms(140), "{late:?}");
    // The schedule did not move, so the next tick is late too.
    assert!(matches!(pacer.sync(2), Tick::Late(l) if l >= ms(130)));

    let seen = seen.lock().unwrap();
    assert_eq!(seen.iter().map(|l| l.vt).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(seen[0].late, late);
    for l in seen.iter() {
        assert_eq!(
            u128::from(l.ticks_behind),
            l.late.as_nanos() / period.as_nanos(),
            "ticks_behind counts whole periods"
        );
    }
    assert!(seen[0].ticks_behind >= 14);
    let stats = pacer.stats();
    assert_eq!((stats.on_time, stats.late), (1, 2));
}

#[test]
fn late_with_skip_jumps_to_the_first_future_tick() {
    let period = ms(50);
    let (seen, handler) = recording(LateAction::Skip);
    let mut pacer = Pacer::new(period, ms(200), handler);
    pacer.sync(0);
    thread::sleep(ms(600));
    let Tick::Skip(to) = pacer.sync(1) else {
        panic!("expected a skip")
    };
    let behind = seen.lock().unwrap()[0].ticks_behind;
    assert!(behind >= 11, "at least 550 ms late: {behind}");
    assert_eq!(
        to,
        1 + behind as i64 + 1,
        "the first tick still in the future"
    );
    assert_eq!(pacer.stats().skipped, behind + 1);
    // Carrying on from the skipped-to tick is on time again (it was not due yet).
    let before = Instant::now();
    assert_eq!(pacer.sync(to), Tick::OnTime);
    assert_eq!(pacer.sync(to + 1), Tick::OnTime);
    assert!(before.elapsed() >= period, "tick {} came early", to + 1);
    let stats = pacer.stats();
    assert_eq!((stats.late, stats.on_time), (1, 3));
}

#[test]
fn late_with_resync_rebases_the_schedule() {
    let period = ms(100);
    let (seen, handler) = recording(LateAction::Resync);
    let mut pacer = Pacer::new(period, ms(100), handler);
    pacer.sync(0);
    thread::sleep(ms(500));
    let before = Instant::now();
    assert_eq!(pacer.sync(1), Tick::Resynced);
    assert_eq!(seen.lock().unwrap().len(), 1);
    // Tick 1 is now due "now", so tick 2 is due a full period later.
    assert_eq!(pacer.sync(2), Tick::OnTime);
    assert!(before.elapsed() >= period);
    let stats = pacer.stats();
    assert_eq!((stats.late, stats.resyncs, stats.on_time), (1, 1, 2));
}

#[test]
fn a_task_makes_pacers() {
    let rt = Runtime::new();
    let t = rt.task(0).unwrap();
    let mut pacer = t.pacer(ms(5), Duration::from_secs(5), |_| LateAction::Skip);
    assert_eq!(pacer.period(), ms(5));
    let start = Instant::now();
    for vt in 0..3 {
        assert_eq!(pacer.sync(vt), Tick::OnTime);
        t.set_virtual_time(vt + 1).unwrap();
    }
    assert!(start.elapsed() >= ms(10));
    assert!(format!("{pacer:?}").contains("period"));
}

/// An interrupted sync returns at once and counts no tick; the schedule is unchanged.
#[test]
fn an_interrupted_sync_stops_sleeping_and_counts_nothing() {
    let mut pacer = Pacer::new(Duration::from_secs(3600), ms(500), |_| LateAction::Continue);
    assert_eq!(pacer.sync_interruptible(0, &|| false), Some(Tick::OnTime));
    let start = Instant::now();
    let stop_at = start + ms(30);
    assert_eq!(
        pacer.sync_interruptible(1, &|| Instant::now() >= stop_at),
        None
    );
    assert!(start.elapsed() >= ms(30));
    assert!(
        start.elapsed() < Duration::from_secs(600),
        "it did not sleep to the tick"
    );
    assert_eq!(pacer.stats().on_time, 1);
    assert_eq!(
        pacer.sync(0),
        Tick::OnTime,
        "tick 0 is still within tolerance"
    );
}
