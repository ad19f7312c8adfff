//! The tuning toolkit's readers on any text: model terms (`n^2*log2(n)`) and model files
//! (JSON). They may refuse the input but must not panic; a model file they accept predicts
//! without panicking at any point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stampede_tune::{ModelFile, TermSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = TermSpec::parse(text);
    if let Ok(file) = ModelFile::from_json(text) {
        for m in &file.models {
            let _ = m.formula();
            let n = m.spec.variables.len();
            for x in [0.0, 1.0, -1.0, 1e300, f64::NAN] {
                let _ = m.predict(&vec![x; n]);
            }
        }
    }
});
