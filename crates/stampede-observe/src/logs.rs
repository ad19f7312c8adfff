//! The log switch every face shares: `STAMPEDE_LOG` (or `RUST_LOG`) picks what is logged,
//! as `tracing` filter directives (`info`, `stampede_net=debug,warn`); `STAMPEDE_LOG_FORMAT=json`
//! writes one JSON object per line instead of text. Logs go to stderr. With neither
//! variable set nothing is installed, so a program pays nothing for logging it did not ask
//! for.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

/// The filter variables, first found wins.
const FILTER_VARS: [&str; 2] = ["STAMPEDE_LOG", "RUST_LOG"];
/// `json` for JSON lines.
pub const FORMAT_VAR: &str = "STAMPEDE_LOG_FORMAT";

/// The filter the environment asks for, if any.
fn asked() -> Option<String> {
    FILTER_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
}

/// Installs the process's log subscriber from the environment, or with `default` as the
/// filter when the environment names none (`None`: install nothing then). The first
/// subscriber of a process stays; later calls do nothing. Returns whether one was installed
/// by this call.
pub fn init_logging(default: Option<&str>) -> bool {
    let Some(directives) = asked().or_else(|| default.map(str::to_owned)) else {
        return false;
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|e| {
        eprintln!("STAMPEDE_LOG: {e}; logging warnings only");
        EnvFilter::new("warn")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let json = std::env::var(FORMAT_VAR).is_ok_and(|f| f.eq_ignore_ascii_case("json"));
    if json {
        builder.json().with_current_span(false).try_init().is_ok()
    } else {
        builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_target(false)
            .try_init()
            .is_ok()
    }
}
