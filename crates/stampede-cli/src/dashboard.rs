//! `stampede dashboard`: the application's live web page, served on loopback by default
//! until interrupted.

use stampede_observe::{Dashboard, Metrics, Sample};

use crate::args::DashboardArgs;
use crate::host::Interrupt;
use crate::Failure;

/// Joins, serves the page of every other address space's metrics, prints its address and
/// `ready`, and serves until SIGINT or SIGTERM.
pub(crate) fn dashboard(a: DashboardArgs) -> Result<(), Failure> {
    let interrupt = Interrupt::install()?;
    let space = a.observer.join()?;
    crate::init_logging("warn");
    let me = space.id().to_owned();
    let timeout = a.observer.conn.timeout;
    let metrics = Metrics::new();
    let asking = space.clone();
    metrics.add(move |out: &mut Vec<Sample>| {
        // This space only watches: its own samples would add a space nobody runs.
        out.extend(
            asking
                .application_metrics(timeout)
                .into_iter()
                .filter(|s| !s.labels.iter().any(|(k, v)| k == "space" && *v == me)),
        );
    });
    let dashboard = Dashboard::start_with(
        &a.serve,
        &a.observer.conn.app,
        metrics,
        &space.http_access(),
    )
    .map_err(|e| Failure::runtime(format!("cannot serve the dashboard on {}: {e}", a.serve)))?;
    println!("id       {}", space.id());
    println!("url      {}", dashboard.url());
    println!("ready");
    interrupt.wait();
    drop(dashboard);
    space.leave();
    Ok(())
}
