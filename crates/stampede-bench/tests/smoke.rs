//! Runs the benchmark code path with tiny counts; checks the output, never the timings.

use std::time::Duration;

use stampede_bench::{
    render_table, run, write_json, Config, Record, LATENCY_P50, LATENCY_P99, LATENCY_SIZES,
    THROUGHPUT, THROUGHPUT_SIZE,
};

#[test]
fn quick_run_writes_every_metric() {
    let cfg = Config {
        repeats: 2,
        latency_samples: 20,
        latency_warmup: 2,
        pause_min: Duration::from_micros(20),
        pause_max: Duration::from_micros(40),
        park_timeout: Duration::from_millis(2),
        latency_run_limit: Duration::from_secs(5),
        throughput_run_limit: Duration::from_secs(5),
        throughput_items: 3_000,
        pin: stampede_bench::default_pin(),
        latency: true,
        throughput: true,
    };
    let records = run(&cfg, |_| {});

    let dir = std::env::temp_dir().join(format!("stampede-bench-smoke-{}", std::process::id()));
    let path = dir.join("nested/core.json");
    write_json(&path, &records).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = value.as_array().expect("a JSON array");
    for row in rows {
        let obj = row.as_object().unwrap();
        for key in [
            "metric",
            "payload_bytes",
            "stampede",
            "baseline",
            "baseline_name",
            "unit",
        ] {
            assert!(obj.contains_key(key), "missing {key} in {row}");
        }
    }
    let parsed: Vec<Record> = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed.len(), records.len());
    for (p, r) in parsed.iter().zip(&records) {
        // serde_json parses floats to within an ulp unless `float_roundtrip` is on.
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
        assert_eq!(
            (&p.metric, p.payload_bytes, &p.unit, &p.baseline_name),
            (&r.metric, r.payload_bytes, &r.unit, &r.baseline_name)
        );
        assert!(close(p.stampede, r.stampede) && close(p.baseline, r.baseline));
    }

    let has = |metric: &str, size: usize| {
        parsed
            .iter()
            .any(|r| r.metric == metric && r.payload_bytes == size)
    };
    for size in LATENCY_SIZES {
        assert!(has(LATENCY_P50, size), "p50 at {size}");
        assert!(has(LATENCY_P99, size), "p99 at {size}");
    }
    assert!(has(THROUGHPUT, THROUGHPUT_SIZE));
    assert_eq!(parsed.len(), 2 * LATENCY_SIZES.len() + 1);
    for r in &parsed {
        assert!(r.stampede.is_finite() && r.stampede > 0.0, "{r:?}");
        assert!(r.baseline.is_finite() && r.baseline > 0.0, "{r:?}");
        assert!(r.met().is_some());
    }
    let table = render_table(&parsed);
    assert!(table.contains(THROUGHPUT));
}
