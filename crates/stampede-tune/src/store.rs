//! Storing models with the fingerprint of the deployment they were calibrated on (thesis ch.
//! 3.6.4: models are per platform), and what to do when the fingerprint no longer matches.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::TuneError;
use crate::model::Model;

/// What a model's figures depend on: the machine, the build, and the deployment (threads in
/// one process, processes on one host, hosts over a network).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub cpu_model: String,
    pub cores: usize,
    pub memory_bytes: u64,
    /// The toolkit's version and build profile.
    pub build: String,
    pub deployment: String,
}

impl Fingerprint {
    /// This machine and build, for `deployment` (a name the application chooses).
    pub fn here(deployment: &str) -> Fingerprint {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .and_then(|r| r.split(':').nth(1))
            })
            .map_or_else(
                || std::env::consts::ARCH.to_owned(),
                |m| m.trim().to_owned(),
            );
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024);
        let profile = if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        };
        Fingerprint {
            cpu_model,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            build: format!("stampede-tune {} {profile}", env!("CARGO_PKG_VERSION")),
            deployment: deployment.to_owned(),
        }
    }

    /// What differs from `other`, as `field: this -> other`.
    pub fn differences(&self, other: &Fingerprint) -> Vec<String> {
        let mut d = Vec::new();
        let mut cmp = |field: &str, a: String, b: String| {
            if a != b {
                d.push(format!("{field}: {a} -> {b}"));
            }
        };
        cmp("cpu_model", self.cpu_model.clone(), other.cpu_model.clone());
        cmp("cores", self.cores.to_string(), other.cores.to_string());
        cmp(
            "memory_bytes",
            self.memory_bytes.to_string(),
            other.memory_bytes.to_string(),
        );
        cmp("build", self.build.clone(), other.build.clone());
        cmp(
            "deployment",
            self.deployment.clone(),
            other.deployment.clone(),
        );
        d
    }
}

/// What [`ModelFile::load`] does when the stored fingerprint differs from the expected one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StalePolicy {
    /// Fail with [`TuneError::Stale`] (the caller recalibrates).
    Refuse,
    /// Use the models anyway; the differences come back as warnings.
    Warn,
}

/// Models calibrated together on one deployment, as a JSON file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelFile {
    pub fingerprint: Fingerprint,
    pub models: Vec<Model>,
}

impl ModelFile {
    /// A model file's text, checked: every model's kept and dropped terms, coefficients,
    /// intervals and factors refer to what the model has (a file edited by hand or damaged
    /// is refused, never a panic when it predicts).
    pub fn from_json(text: &str) -> Result<ModelFile, String> {
        let file: ModelFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for m in &file.models {
            m.check()?;
        }
        Ok(file)
    }

    pub fn save(&self, path: &Path) -> Result<(), TuneError> {
        let text =
            serde_json::to_string_pretty(self).map_err(|e| TuneError::Store(e.to_string()))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| TuneError::Store(format!("{}: {e}", dir.display())))?;
        }
        std::fs::write(path, text + "\n")
            .map_err(|e| TuneError::Store(format!("{}: {e}", path.display())))
    }

    /// Reads a model file calibrated for `expected`; a stale one is refused or comes back
    /// with the differences as warnings, by `policy`.
    pub fn load(
        path: &Path,
        expected: &Fingerprint,
        policy: StalePolicy,
    ) -> Result<(ModelFile, Vec<String>), TuneError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TuneError::Store(format!("{}: {e}", path.display())))?;
        let file = ModelFile::from_json(&text)
            .map_err(|e| TuneError::Store(format!("{}: {e}", path.display())))?;
        let differences = file.fingerprint.differences(expected);
        match (differences.is_empty(), policy) {
            (true, _) => Ok((file, Vec::new())),
            (false, StalePolicy::Warn) => Ok((file, differences)),
            (false, StalePolicy::Refuse) => Err(TuneError::Stale { differences }),
        }
    }

    /// The models of `path` if they were calibrated for `expected`; otherwise (missing,
    /// unreadable or stale) the ones `calibrate` makes, saved to `path` first.
    pub fn load_or_calibrate(
        path: &Path,
        expected: &Fingerprint,
        calibrate: impl FnOnce() -> Result<Vec<Model>, TuneError>,
    ) -> Result<ModelFile, TuneError> {
        match ModelFile::load(path, expected, StalePolicy::Refuse) {
            Ok((file, _)) => Ok(file),
            Err(_) => {
                let file = ModelFile {
                    fingerprint: expected.clone(),
                    models: calibrate()?,
                };
                file.save(path)?;
                Ok(file)
            }
        }
    }
}
