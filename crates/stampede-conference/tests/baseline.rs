//! The TCP baseline as separate processes: the same frames, composites and checks as the
//! Stampede version.

mod common;

use std::time::Duration;

use common::{count, free_port, members_of, Proc};

const T: Duration = Duration::from_secs(30);

fn participant(id: u32, addr: &str) -> Proc {
    let id = id.to_string();
    Proc::spawn(
        &format!("baseline participant {id}"),
        &[
            "baseline-participant",
            "--id",
            &id,
            "--connect",
            addr,
            "--fps",
            "50",
            "--size-kb",
            "8",
            "--report-ms",
            "200",
        ],
    )
}

#[test]
fn baseline_participants_see_each_other_until_one_leaves() {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut mixer = Proc::spawn(
        "baseline mixer",
        &[
            "baseline-mixer",
            "--listen",
            &addr,
            "--size-kb",
            "8",
            "--report-ms",
            "500",
        ],
    );
    mixer.wait_event("ready", T);
    let mut p1 = participant(1, &addr);
    let mut p2 = participant(2, &addr);
    let a = p1.wait_members(&[1, 2], T);
    p2.wait_members(&[1, 2], T);
    let b = p1.wait_members(&[1, 2], T);
    assert!(count(&b, "composites") > count(&a, "composites"));

    let s2 = p2.leave(T);
    assert_eq!(count(&s2, "bad"), 0, "{s2}");
    assert!(count(&s2, "composites") > 0, "{s2}");
    p1.wait_members(&[1], T);
    let s1 = p1.leave(T);
    assert_eq!(count(&s1, "bad"), 0, "{s1}");
    for r in p1.displays().into_iter().chain(p2.displays()) {
        assert_eq!(count(r, "bad"), 0, "{r}");
        assert!(members_of(r).iter().all(|m| [1, 2].contains(m)), "{r}");
    }
    let m = mixer.wait_for(T, |v| v["event"] == "mixer" && members_of(v).is_empty());
    assert!(count(&m, "composites") > 0, "{m}");
}
