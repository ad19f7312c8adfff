/// The Zenoh settings of [`zenoh_config`] as `(path, JSON5 value)`. One list for the pub/sub
/// baseline and for Stampede ([`space_config`]), so the two differ only in what runs on top
/// of the session.
pub(crate) fn zenoh_settings(
    listen: Option<&str>,
    connect: Option<&str>,
) -> Vec<(&'static str, String)> {
    let endpoints = |endpoint: Option<&str>| match endpoint {
        Some(e) => format!("[\"{e}\"]"),
        None => "[]".to_owned(),
    };
    vec![
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
    ]
}

/// The Zenoh configuration of both processes of the pub/sub baseline: a peer that listens
/// on `listen` and/or connects to `connect`, and finds nobody else. Shared memory is on, with
/// a 64 MiB pool for implicit transport optimisation so that 1 MiB messages (and a queue of
/// them) fit.
pub fn zenoh_config(listen: Option<&str>, connect: Option<&str>) -> zenoh::Config {
    let mut config = zenoh::Config::default();
    for (key, value) in zenoh_settings(listen, connect) {
        config
            .insert_json5(key, &value)
            .unwrap_or_else(|e| panic!("invalid Zenoh setting {key} = {value}: {e}"));
    }
    config
}

/// An address space's configuration with the same Zenoh settings as [`zenoh_config`]; only
/// the link lease and keep-alive stay Stampede's own (they drive its failure detection).
pub fn space_config(listen: Option<&str>, connect: Option<&str>) -> stampede_net::Config {
    let mut config = stampede_net::Config::peer();
    config.listen.extend(listen.map(str::to_owned));
    config.connect.extend(connect.map(str::to_owned));
    config.shm_pool = 64 << 20;
    config.zenoh = zenoh_settings(listen, connect)
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    config
}
