//! A runtime's zones, named containers and tasks.

use stampede_core::{HoldCause, Named, Runtime, TaskReport, Timestamp, INFINITY};

use crate::{Sample, Source};

/// Reads a runtime's counters at each scrape: per zone the collector's floor, watermark,
/// passes and reclaimed items and what holds the watermark; per task its virtual time; per
/// named channel and queue its items, connections and operation counts.
pub struct RuntimeSource {
    rt: Runtime,
}

impl RuntimeSource {
    /// The source of `rt` (it keeps the runtime alive).
    pub fn new(rt: &Runtime) -> RuntimeSource {
        RuntimeSource { rt: rt.clone() }
    }
}

/// A timestamp as a gauge's value: `INFINITY` is `+Inf`, the lowest timestamp (a floor
/// before anything was reclaimed) `-Inf`.
fn ts(t: Timestamp) -> f64 {
    match t {
        INFINITY => f64::INFINITY,
        Timestamp::MIN => f64::NEG_INFINITY,
        t => t as f64,
    }
}

/// What holds a watermark term, as (cause, name) labels.
fn holder(cause: &HoldCause) -> (&'static str, String) {
    match cause {
        HoldCause::VirtualTime { task_name, .. } => ("virtual_time", task_name.clone()),
        HoldCause::PendingPut { task_name, .. } => ("pending_put", task_name.clone()),
        HoldCause::Unconsumed {
            container_name,
            task_name,
            ..
        } => (
            "unconsumed",
            format!("{}@{}", task_name, container_name.as_deref().unwrap_or("?")),
        ),
        HoldCause::Horizon => ("horizon", String::new()),
        HoldCause::NoLiveTask { .. } => ("no_live_task", String::new()),
        HoldCause::Remote { space } => ("remote", space.clone()),
        HoldCause::QueueItem { container_name, .. } => (
            "queue_item",
            container_name.as_deref().unwrap_or("?").to_owned(),
        ),
        _ => ("other", String::new()),
    }
}

/// One container's samples, labelled with its name and kind.
fn container(
    out: &mut Vec<Sample>,
    name: &str,
    kind: &'static str,
    gauges: &[(&'static str, &'static str, usize)],
    counters: &[(&'static str, &'static str, u64)],
) {
    let labelled = |s: Sample| s.label("container", name).label("kind", kind);
    for &(metric, help, v) in gauges {
        out.push(labelled(Sample::gauge(metric, help, v as f64)));
    }
    for &(metric, help, v) in counters {
        out.push(labelled(Sample::counter(metric, help, v)));
    }
}

/// A task's samples: its times and blocked time, and per named container it is connected
/// to, the operations done through that connection (the application graph's edges).
fn tasks(out: &mut Vec<Sample>, t: &TaskReport) {
    let zone = t.zone.0.to_string();
    let labelled = |s: Sample| s.label("zone", zone.clone()).label("task", t.name.clone());
    out.push(labelled(Sample::gauge(
        "stampede_task_virtual_time",
        "A live task's virtual time.",
        ts(t.virtual_time),
    )));
    out.push(labelled(Sample::gauge(
        "stampede_task_visibility",
        "The lowest timestamp a live task may put now.",
        ts(t.visibility),
    )));
    out.push(labelled(Sample::counter_f64(
        "stampede_task_blocked_seconds",
        "Seconds a task has waited for items or space (parked here, or in a waiting remote get).",
        t.blocked.as_secs_f64(),
    )));
    for c in &t.connections {
        // Anonymous containers are private to their code, as in the container samples.
        let Some(name) = &c.container else { continue };
        out.push(
            Sample::counter(
                "stampede_connection_operations",
                "Successful operations through a task's connections to a container.",
                c.operations,
            )
            .label("task", t.name.clone())
            .label("container", name.clone())
            .label("kind", c.kind.name())
            .label("direction", c.direction.name())
            .label("owner", c.owner.clone().unwrap_or_default()),
        );
    }
}

impl Source for RuntimeSource {
    fn collect(&self, out: &mut Vec<Sample>) {
        for zone in self.rt.zones() {
            let z = zone.0.to_string();
            let gc = self.rt.gc_stats(zone);
            let report = self.rt.explain(zone);
            out.push(
                Sample::gauge(
                    "stampede_zone_floor",
                    "The zone's floor: everything below it has been reclaimed.",
                    ts(gc.floor),
                )
                .label("zone", &z),
            );
            out.push(
                Sample::gauge(
                    "stampede_zone_watermark",
                    "The watermark the zone's terms give now (a pass raises the floor to it).",
                    ts(report.watermark),
                )
                .label("zone", &z),
            );
            out.push(
                Sample::counter(
                    "stampede_zone_gc_passes",
                    "Collection passes run.",
                    gc.passes,
                )
                .label("zone", &z),
            );
            out.push(
                Sample::counter(
                    "stampede_zone_reclaimed",
                    "Items reclaimed by the watermark or by reference counts.",
                    gc.reclaimed,
                )
                .label("zone", &z),
            );
            for h in report.holders() {
                let (cause, name) = holder(&h.cause);
                out.push(
                    Sample::gauge(
                        "stampede_zone_watermark_holder",
                        "What holds the zone's watermark (1 per holder at the watermark).",
                        1.0,
                    )
                    .label("zone", &z)
                    .label("cause", cause)
                    .label("name", name),
                );
            }
        }
        for t in self.rt.tasks() {
            tasks(out, &t);
        }
        for name in self.rt.names() {
            match self.rt.lookup(&name) {
                Some(Named::Channel(c)) => {
                    let s = c.stats();
                    let gauges = [
                        ("stampede_container_items", "Items stored now.", s.items),
                        (
                            "stampede_container_connections",
                            "Input connections attached now.",
                            s.connections,
                        ),
                        (
                            "stampede_container_open",
                            "Items gotten and not yet consumed.",
                            s.open,
                        ),
                    ];
                    let counters = [
                        ("stampede_container_puts", "Successful puts.", s.puts),
                        ("stampede_container_gets", "Successful gets.", s.gets),
                        (
                            "stampede_container_reclaimed",
                            "Items reclaimed (watermark or reference count).",
                            s.reclaimed,
                        ),
                        (
                            "stampede_container_skipped",
                            "Items passed over unseen by newest-unseen gets.",
                            s.skipped,
                        ),
                        (
                            "stampede_container_full",
                            "Puts that found the container full.",
                            s.full,
                        ),
                    ];
                    container(out, &name, "channel", &gauges, &counters);
                }
                Some(Named::Queue(q)) => {
                    let s = q.stats();
                    let gauges = [
                        (
                            "stampede_container_items",
                            "Items stored now.",
                            s.waiting + s.held,
                        ),
                        (
                            "stampede_container_open",
                            "Items gotten and not yet consumed.",
                            s.held,
                        ),
                    ];
                    let counters = [
                        ("stampede_container_puts", "Successful puts.", s.puts),
                        ("stampede_container_gets", "Successful gets.", s.gets),
                        (
                            "stampede_container_consumed",
                            "Queue items consumed (and freed).",
                            s.consumed,
                        ),
                        (
                            "stampede_container_redelivered",
                            "Held queue items put back because their connection went away.",
                            s.redelivered,
                        ),
                        (
                            "stampede_container_full",
                            "Puts that found the container full.",
                            s.full,
                        ),
                    ];
                    container(out, &name, "queue", &gauges, &counters);
                }
                // Registers keep no counters; a name gone meanwhile has nothing to say.
                _ => {}
            }
        }
    }
}
