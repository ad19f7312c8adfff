//! The Stampede mixer and participants as separate processes: participants come and go,
//! and every display keeps receiving correct composites of exactly the participants present.

mod common;

use std::time::Duration;

use common::{app, count, free_port, members_of, Proc};
use serde_json::Value;

/// Generous for a loaded two-core machine; a healthy run takes a fraction of it.
const T: Duration = Duration::from_secs(30);

fn participant(id: u32, app: &str, endpoint: &str) -> Proc {
    let id = id.to_string();
    Proc::spawn(
        &format!("participant {id}"),
        &[
            "participant",
            "--id",
            &id,
            "--app",
            app,
            "--connect",
            endpoint,
            "--fps",
            "20",
            "--size-kb",
            "8",
            "--report-ms",
            "200",
        ],
    )
}

/// The display keeps receiving composites of `members`: twice more, a report with more
/// composites than before and exactly those members. (A loaded host may pause a process
/// between two reports, so each step may take a while.)
fn keeps_receiving(p: &mut Proc, members: &[u64]) {
    let mut last = count(p.displays().last().unwrap(), "composites");
    for _ in 0..2 {
        let v = p.wait_for(T, |v| {
            v["event"] == "display" && count(v, "composites") > last && members_of(v) == members
        });
        last = count(&v, "composites");
    }
}

fn all_good(p: &Proc, summary: &Value) {
    assert_eq!(count(summary, "bad"), 0, "{}: {summary}", p.name);
    assert!(count(summary, "composites") > 0, "{}: {summary}", p.name);
    assert!(count(summary, "frames_put") > 0, "{}: {summary}", p.name);
    for r in p.displays() {
        assert_eq!(count(r, "bad"), 0, "{}: {r}", p.name);
    }
}

fn mixer(app: &str, endpoint: &str, threads: &str) -> Proc {
    let mut mixer = Proc::spawn(
        "mixer",
        &[
            "mixer",
            "--app",
            app,
            "--listen",
            endpoint,
            "--threads",
            threads,
            "--size-kb",
            "8",
            "--report-ms",
            "500",
        ],
    );
    mixer.wait_event("ready", T);
    mixer
}

#[test]
fn participants_come_and_go() {
    come_and_go("multi");
}

#[test]
fn participants_come_and_go_single_threaded() {
    come_and_go("single");
}

fn come_and_go(threads: &str) {
    let app = app(&format!("come-and-go-{threads}"));
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let mut mixer = mixer(&app, &endpoint, threads);

    let mut p1 = participant(1, &app, &endpoint);
    let mut p2 = participant(2, &app, &endpoint);
    p1.wait_members(&[1, 2], T);
    p2.wait_members(&[1, 2], T);
    keeps_receiving(&mut p1, &[1, 2]);
    keeps_receiving(&mut p2, &[1, 2]);

    // Participant 2 leaves; participant 1 sees itself alone, and keeps receiving.
    let s2 = p2.leave(T);
    all_good(&p2, &s2);
    p1.wait_members(&[1], T);
    keeps_receiving(&mut p1, &[1]);

    // Participant 3 joins a conference in progress.
    let mut p3 = participant(3, &app, &endpoint);
    p1.wait_members(&[1, 3], T);
    p3.wait_members(&[1, 3], T);
    keeps_receiving(&mut p1, &[1, 3]);
    keeps_receiving(&mut p3, &[1, 3]);

    let s1 = p1.leave(T);
    let s3 = p3.leave(T);
    all_good(&p1, &s1);
    all_good(&p3, &s3);
    // A report of an empty conference that made composites: the mixer's first reports,
    // before anyone joined (a slow start on a loaded machine), are empty too.
    let m = mixer.wait_for(T, |v| {
        v["event"] == "mixer" && members_of(v).is_empty() && count(v, "composites") > 0
    });
    assert_eq!(count(&m, "dropped"), 0, "{m}");
}

#[test]
fn a_second_participant_with_the_same_id_is_refused() {
    let app = app("same-id");
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let _mixer = mixer(&app, &endpoint, "multi");
    let mut p1 = participant(1, &app, &endpoint);
    p1.wait_members(&[1], T);
    let mut twin = participant(1, &app, &endpoint);
    let status = twin.wait_exit(T);
    assert!(!status.success());
    keeps_receiving(&mut p1, &[1]);
}

#[test]
fn a_killed_participant_is_dropped() {
    let app = app("killed");
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let _mixer = mixer(&app, &endpoint, "multi");
    let mut p1 = participant(1, &app, &endpoint);
    let mut p2 = participant(2, &app, &endpoint);
    p1.wait_members(&[1, 2], T);
    p2.wait_members(&[1, 2], T);
    p2.kill();
    p1.wait_members(&[1], T);
    keeps_receiving(&mut p1, &[1]);
    let s1 = p1.leave(T);
    all_good(&p1, &s1);
}
