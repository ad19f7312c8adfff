/// The Zenoh configuration both processes use: a peer that listens on `listen` and/or connects
/// to `connect`, and finds nobody else. Shared memory is on, with a 64 MiB pool for implicit
/// transport optimisation so that 1 MiB messages (and a queue of them) fit.
pub fn zenoh_config(listen: Option<&str>, connect: Option<&str>) -> zenoh::Config {
    let endpoints = |endpoint: Option<&str>| match endpoint {
        Some(e) => format!("[\"{e}\"]"),
        None => "[]".to_owned(),
    };
    let settings = [
        ("mode", "\"peer\"".to_owned()),
        // Explicit endpoints only: no discovery traffic, no links to strangers.
        ("scouting/multicast/enabled", "false".to_owned()),
        ("scouting/gossip/enabled", "false".to_owned()),
        ("listen/endpoints", endpoints(listen)),
        ("connect/endpoints", endpoints(connect)),
        // A peer retries an unreachable endpoint forever by default; fail instead.
        ("connect/timeout_ms", "10000".to_owned()),
        ("connect/exit_on_failure", "true".to_owned()),
        ("transport/shared_memory/enabled", "true".to_owned()),
        (
            "transport/shared_memory/transport_optimization/pool_size",
            (64 << 20).to_string(),
        ),
    ];
    let mut config = zenoh::Config::default();
    for (key, value) in settings {
        config
            .insert_json5(key, &value)
            .unwrap_or_else(|e| panic!("invalid Zenoh setting {key} = {value}: {e}"));
    }
    config
}
