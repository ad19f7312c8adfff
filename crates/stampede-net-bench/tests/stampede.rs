//! Runs the Stampede side between two processes with a few round trips, and turns measured
//! series into the records of `net.json`; checks the output, never the timings.

use std::time::Duration;

use stampede_net_bench::{
    child, records, stm, write_json, zenoh_pubsub, Series, BANDWIDTH_METRIC, LOANED_METRIC,
    PINGPONG_METRIC, RECLAIM_LAG_P99, STAMPEDE_NAME,
};

#[test]
fn stampede_pingpong_between_two_processes() {
    child::use_executable(env!("CARGO_BIN_EXE_stampede-net-bench"));
    for size in [64, 64 << 10] {
        let run = stm::pingpong(size, 5).unwrap();
        assert_eq!(run.one_way_us.len(), 5);
        assert!(run.one_way_us.iter().all(|&us| us > 0.0), "{run:?}");
        assert!(run.note.is_some(), "the channels' occupancy is reported");
    }
}

#[test]
fn loaned_items_stream_between_two_processes() {
    // Every item a producer wrote into lent shared memory arrives (the runs fail otherwise),
    // for Stampede's loans and for the Zenoh baseline's own buffers.
    child::use_executable(env!("CARGO_BIN_EXE_stampede-net-bench"));
    for run in [stm::bandwidth_loaned, zenoh_pubsub::bandwidth_shm] {
        let t = run(64 << 10, Duration::from_millis(200)).unwrap();
        assert!(t.messages > 0, "{t:?}");
    }
    let rows = records(&[
        Series {
            payload_bytes: 64 << 10,
            ..series(LOANED_METRIC, STAMPEDE_NAME, "MB/s", &[700.0])
        },
        Series {
            payload_bytes: 64 << 10,
            ..series(LOANED_METRIC, "zenoh_pubsub", "MB/s", &[1000.0])
        },
        Series {
            payload_bytes: 64 << 10,
            ..series(BANDWIDTH_METRIC, STAMPEDE_NAME, "MB/s", &[700.0])
        },
        Series {
            payload_bytes: 64 << 10,
            ..series(BANDWIDTH_METRIC, "zenoh_pubsub", "MB/s", &[1000.0])
        },
    ]);
    let met: Vec<_> = rows.iter().map(|r| (r.metric.as_str(), r.met())).collect();
    // Lent memory must reach 0.8x Zenoh; ordinary items at 64 KiB 0.5x.
    assert_eq!(
        met,
        [(LOANED_METRIC, Some(false)), (BANDWIDTH_METRIC, Some(true))]
    );
}

fn series(metric: &'static str, system: &'static str, unit: &'static str, raw: &[f64]) -> Series {
    Series {
        metric,
        payload_bytes: 1 << 20,
        system,
        unit,
        raw: raw.to_vec(),
    }
}

#[test]
fn one_record_per_baseline_in_the_shared_format() {
    let measured = [
        series(PINGPONG_METRIC, STAMPEDE_NAME, "us", &[30.0, 10.0, 20.0]),
        series(PINGPONG_METRIC, "tcp", "us", &[40.0, 40.0, 10.0]),
        series(PINGPONG_METRIC, "zenoh_pubsub", "us", &[10.0]),
        series(BANDWIDTH_METRIC, STAMPEDE_NAME, "MB/s", &[800.0]),
        series(BANDWIDTH_METRIC, "zenoh_pubsub", "MB/s", &[1000.0]),
        series(RECLAIM_LAG_P99, STAMPEDE_NAME, "ms", &[25.0]),
        series(RECLAIM_LAG_P99, "local", "ms", &[5.0]),
    ];
    let rows = records(&measured);
    let summary: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.metric.as_str(),
                r.baseline_name.as_str(),
                r.stampede,
                r.baseline,
                r.met(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (PINGPONG_METRIC, "tcp", 20.0, 40.0, Some(true)),
            (PINGPONG_METRIC, "zenoh_pubsub", 20.0, 10.0, Some(false)),
            (BANDWIDTH_METRIC, "zenoh_pubsub", 800.0, 1000.0, Some(true)),
            (RECLAIM_LAG_P99, "local", 25.0, 5.0, Some(false)),
        ]
    );

    let dir = std::env::temp_dir().join(format!("stampede-net-bench-{}", std::process::id()));
    let path = dir.join("nested/net.json");
    write_json(&path, &rows).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    for row in value.as_array().expect("a JSON array") {
        let mut keys: Vec<_> = row.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "baseline",
                "baseline_name",
                "metric",
                "payload_bytes",
                "stampede",
                "unit"
            ]
        );
    }
}
