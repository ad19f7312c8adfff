//! The checked-in header must be what cbindgen generates from the source.
//! Regenerate with `STAMPEDE_BLESS=1 cargo test -p stampede-c --test header`.

use std::path::Path;

#[test]
fn header_matches_the_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = dir.join("include/stampede.h");
    if std::env::var_os("STAMPEDE_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/stampede.h");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "include/stampede.h is out of date; regenerate it with \
         `STAMPEDE_BLESS=1 cargo test -p stampede-c --test header`"
    );
}
