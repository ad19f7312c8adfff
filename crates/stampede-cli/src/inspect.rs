//! One-shot commands that look at an application from outside: its names, its address
//! spaces, its watermark. Each joins as an address space without tasks (so it holds
//! nothing back), asks, leaves, and leaves itself out of what it prints.

use std::io::Write as _;
use std::time::Duration;

use serde_json::{json, Value};
use stampede_core::{Timestamp, ZoneId, INFINITY};
use stampede_net::{Kind, NameEvent, NameRecord, SpaceWatermark};

use crate::args::{NamesArgs, SpacesArgs, WatermarkArgs};
use crate::host::Interrupt;
use crate::Failure;

/// Writes `text` to stdout; `false` once nobody reads it (a closed pipe ends a watch).
fn emit(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_ok()
}

fn emit_json(v: &Value) {
    let text = serde_json::to_string_pretty(v).expect("JSON values always serialise");
    emit(&format!("{text}\n"));
}

/// Left-aligned columns two spaces apart; no line ends in spaces.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for r in std::iter::once(&header).chain(rows) {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn ts(t: Timestamp) -> String {
    match t {
        INFINITY => "INFINITY".to_owned(),
        Timestamp::MIN => "-INFINITY".to_owned(),
        t => t.to_string(),
    }
}

/// INFINITY (nothing holds) as null: it does not survive JSON readers that use doubles.
fn ts_json(t: Timestamp) -> Value {
    if t == INFINITY {
        Value::Null
    } else {
        json!(t)
    }
}

/// Capacity means something only for channels and queues; 0 there is unbounded.
fn capacity(r: &NameRecord) -> Option<u64> {
    (r.capacity > 0).then_some(r.capacity)
}

fn capacity_text(r: &NameRecord) -> String {
    match (r.kind, capacity(r)) {
        (_, Some(c)) => c.to_string(),
        (Kind::Channel | Kind::Queue, None) => "unbounded".to_owned(),
        _ => "-".to_owned(),
    }
}

fn name_json(r: &NameRecord) -> Value {
    json!({
        "name": r.name,
        "kind": r.kind.to_string(),
        "owner": r.space,
        "container": r.container,
        "zone": r.zone,
        "capacity": capacity(r),
        "meta": r.meta,
    })
}

/// `stampede names`.
pub(crate) fn names(a: NamesArgs) -> Result<(), Failure> {
    if a.watch {
        return watch_names(a);
    }
    let space = a.observer.join()?;
    let names = space.records();
    space.leave();
    if a.json {
        emit_json(&Value::Array(names.iter().map(name_json).collect()));
    } else if names.is_empty() {
        eprintln!("no names registered in {}", a.observer.conn.app);
    } else {
        let rows: Vec<_> = names
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    r.kind.to_string(),
                    r.space.clone(),
                    r.zone.to_string(),
                    capacity_text(r),
                    r.meta.clone(),
                ]
            })
            .collect();
        let header = ["NAME", "KIND", "OWNER", "ZONE", "CAPACITY", "META"];
        emit(&table(&header, &rows));
    }
    Ok(())
}

fn watch_names(a: NamesArgs) -> Result<(), Failure> {
    let interrupt = Interrupt::install()?;
    let space = a.observer.join()?;
    let watch = space.watch()?;
    crate::init_logging("warn");
    while !interrupt.arrived_within(Duration::ZERO) {
        let Some(event) = watch.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let line = match (&event, a.json) {
            (NameEvent::Added(r), true) => {
                let mut v = name_json(r);
                v["event"] = json!("added");
                v.to_string()
            }
            (NameEvent::Removed { name, space }, true) => {
                json!({ "event": "removed", "name": name, "owner": space }).to_string()
            }
            (NameEvent::Added(r), false) => format!(
                "added {} kind={} owner={} zone={} capacity={} meta={:?}",
                r.name,
                r.kind,
                r.space,
                r.zone,
                capacity_text(r),
                r.meta
            ),
            (NameEvent::Removed { name, space }, false) => {
                format!("removed {name} owner={space}")
            }
        };
        if !emit(&format!("{line}\n")) {
            break;
        }
    }
    drop(watch);
    space.leave();
    Ok(())
}

/// `stampede spaces`.
pub(crate) fn metrics(a: SpacesArgs) -> Result<(), Failure> {
    let space = a.observer.join()?;
    let me = space.id().to_owned();
    let samples: Vec<_> = space
        .application_metrics(a.observer.conn.timeout)
        .into_iter()
        .filter(|s| !s.labels.iter().any(|(k, v)| k == "space" && *v == me))
        .collect();
    space.leave();
    if a.json {
        println!("{}", stampede_observe::to_json(&samples));
    } else {
        print!("{}", stampede_observe::encode(samples));
    }
    Ok(())
}

pub(crate) fn spaces(a: SpacesArgs) -> Result<(), Failure> {
    let space = a.observer.join()?;
    let me = space.id().to_owned();
    let ids: Vec<String> = space.spaces().into_iter().filter(|s| *s != me).collect();
    let names = space.records();
    space.leave();
    let owned = |id: &str| -> Vec<&str> {
        names
            .iter()
            .filter(|r| r.space == id)
            .map(|r| r.name.as_str())
            .collect()
    };
    if a.json {
        let v: Vec<Value> = ids
            .iter()
            .map(|id| json!({ "id": id, "names": owned(id) }))
            .collect();
        emit_json(&Value::Array(v));
    } else if ids.is_empty() {
        eprintln!("no address spaces in {}", a.observer.conn.app);
    } else {
        let rows: Vec<_> = ids
            .iter()
            .map(|id| {
                let n = owned(id);
                let n = if n.is_empty() {
                    "-".to_owned()
                } else {
                    n.join(",")
                };
                vec![id.clone(), n]
            })
            .collect();
        emit(&table(&["SPACE", "NAMES"], &rows));
    }
    Ok(())
}

/// The cluster tasks of every member space: one row per task, or per member running none.
pub(crate) fn threads(a: SpacesArgs) -> Result<(), Failure> {
    let space = a.observer.join()?;
    let members = stampede_cluster::list_tasks(&space);
    space.leave();
    if a.json {
        let v: Vec<Value> = members
            .iter()
            .map(|m| {
                let tasks: Vec<Value> = m
                    .tasks
                    .iter()
                    .map(|t| {
                        json!({
                            "id": t.id.to_string(),
                            "task": t.task,
                            "state": if t.cancelling { "cancelling" } else { "running" },
                            "running_s": t.running.as_secs_f64(),
                        })
                    })
                    .collect();
                json!({ "space": m.space, "error": m.error, "tasks": tasks })
            })
            .collect();
        emit_json(&Value::Array(v));
    } else if members.is_empty() {
        eprintln!("no cluster members in {}", a.observer.conn.app);
    } else {
        let mut rows = Vec::new();
        for m in &members {
            if let Some(e) = &m.error {
                rows.push(vec![
                    m.space.clone(),
                    "-".into(),
                    "-".into(),
                    format!("no answer: {e}"),
                    "-".into(),
                ]);
            } else if m.tasks.is_empty() {
                rows.push(vec![
                    m.space.clone(),
                    "-".into(),
                    "-".into(),
                    "idle".into(),
                    "-".into(),
                ]);
            }
            for t in &m.tasks {
                rows.push(vec![
                    m.space.clone(),
                    t.id.to_string(),
                    t.task.clone(),
                    if t.cancelling {
                        "cancelling"
                    } else {
                        "running"
                    }
                    .into(),
                    humantime::format_duration(Duration::from_millis(t.running.as_millis() as u64))
                        .to_string(),
                ]);
            }
        }
        emit(&table(
            &["SPACE", "TASK ID", "TASK", "STATE", "RUNNING"],
            &rows,
        ));
    }
    Ok(())
}

/// What one address space said about its watermark.
struct Explained {
    space: String,
    answer: Result<(Timestamp, Timestamp, Timestamp, String), String>,
}

fn explained(w: SpaceWatermark) -> Explained {
    let answer = match w.report {
        Ok(r) => Ok((r.local, r.floor, r.watermark, r.text)),
        Err(e) => Err(e.to_string()),
    };
    Explained {
        space: w.space,
        answer,
    }
}

/// `stampede watermark`.
pub(crate) fn watermark(a: WatermarkArgs) -> Result<(), Failure> {
    let space = a.observer.join()?;
    let me = space.id().to_owned();
    let all: Vec<Explained> = space
        .explain_cluster(ZoneId(a.zone))
        .into_iter()
        .filter(|w| w.space != me)
        .map(explained)
        .collect();
    space.leave();
    // The cluster-wide watermark is the lowest of the spaces' own (local) terms.
    let cluster = all
        .iter()
        .filter_map(|e| e.answer.as_ref().ok().map(|a| a.0))
        .min()
        .unwrap_or(INFINITY);
    let held_by: Vec<&str> = all
        .iter()
        .filter(|e| cluster != INFINITY && matches!(&e.answer, Ok(a) if a.0 == cluster))
        .map(|e| e.space.as_str())
        .collect();
    if a.json {
        let spaces: Vec<Value> = all
            .iter()
            .map(|e| match &e.answer {
                Ok((local, floor, watermark, text)) => json!({
                    "space": e.space,
                    "reachable": true,
                    "local": ts_json(*local),
                    "floor": ts_json(*floor),
                    "watermark": ts_json(*watermark),
                    "explanation": text.trim_end(),
                }),
                Err(why) => json!({ "space": e.space, "reachable": false, "error": why }),
            })
            .collect();
        emit_json(&json!({
            "app": a.observer.conn.app,
            "zone": a.zone,
            "watermark": ts_json(cluster),
            "held_by": held_by,
            "spaces": spaces,
        }));
        return Ok(());
    }
    if all.is_empty() {
        eprintln!("no address spaces in {}", a.observer.conn.app);
        return Ok(());
    }
    let mut out = if held_by.is_empty() {
        format!(
            "zone {}: watermark {}: no address space holds it\n\n",
            a.zone,
            ts(cluster)
        )
    } else {
        format!(
            "zone {}: watermark {}, held by {}\n\n",
            a.zone,
            ts(cluster),
            held_by.join(", ")
        )
    };
    let rows: Vec<_> = all
        .iter()
        .map(|e| match &e.answer {
            Ok((local, floor, watermark, _)) => {
                vec![e.space.clone(), ts(*local), ts(*floor), ts(*watermark)]
            }
            Err(_) => vec![e.space.clone(), "?".into(), "?".into(), "?".into()],
        })
        .collect();
    out.push_str(&table(&["SPACE", "LOCAL", "FLOOR", "WATERMARK"], &rows));
    for e in &all {
        out.push('\n');
        match &e.answer {
            Ok((.., text)) => {
                out.push_str(&format!("{}:\n", e.space));
                for line in text.lines() {
                    out.push_str(&format!("  {line}\n"));
                }
            }
            Err(why) => out.push_str(&format!("{}: {why}\n", e.space)),
        }
    }
    emit(&out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let rows = vec![
            vec!["frames".into(), "channel".into(), "4".into()],
            vec!["j".into(), "queue".into(), "unbounded".into()],
        ];
        assert_eq!(
            table(&["NAME", "KIND", "CAPACITY"], &rows),
            "NAME    KIND     CAPACITY\n\
             frames  channel  4\n\
             j       queue    unbounded\n"
        );
    }

    #[test]
    fn infinity_is_spelled_out() {
        assert_eq!(ts(INFINITY), "INFINITY");
        assert_eq!(ts(41), "41");
        assert_eq!(ts_json(INFINITY), Value::Null);
        assert_eq!(ts_json(-3), json!(-3));
    }
}
