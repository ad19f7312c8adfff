//! Samples and their encoding: the one place that speaks `prometheus-client`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};

/// A counter only grows; a gauge goes up and down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// Exported with the `_total` suffix.
    Counter,
    /// A value now.
    Gauge,
}

/// One value of one metric family, with its labels. It travels between address spaces as
/// JSON ([`to_json`], [`from_json`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The family's name (`stampede_...`, counters without `_total`).
    pub name: Cow<'static, str>,
    /// What it measures.
    pub help: Cow<'static, str>,
    /// Counter or gauge.
    pub kind: Kind,
    /// Label names and values.
    pub labels: Vec<(Cow<'static, str>, String)>,
    /// The value (a gauge of a timestamp may be infinite: JSON carries it as null).
    #[serde(with = "value")]
    pub value: f64,
}

/// Infinite and NaN values have no JSON number: they travel as strings.
mod value {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() {
            s.serialize_f64(*v)
        } else {
            s.serialize_str(&v.to_string())
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(f64),
        Text(String),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Number(v) => Ok(v),
            Repr::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// `samples` as JSON.
pub fn to_json(samples: &[Sample]) -> String {
    serde_json::to_string(samples).expect("samples always serialize")
}

/// Samples from [`to_json`]'s text.
pub fn from_json(text: &str) -> Result<Vec<Sample>, String> {
    serde_json::from_str(text).map_err(|e| format!("malformed metrics: {e}"))
}

impl Sample {
    /// A counter.
    pub fn counter(name: impl Into<Cow<'static, str>>, help: &'static str, value: u64) -> Sample {
        Sample {
            name: name.into(),
            help: Cow::Borrowed(help),
            kind: Kind::Counter,
            labels: Vec::new(),
            value: value as f64,
        }
    }

    /// A counter of a continuous quantity (seconds, bytes summed as fractions).
    pub fn counter_f64(
        name: impl Into<Cow<'static, str>>,
        help: &'static str,
        value: f64,
    ) -> Sample {
        Sample {
            value,
            ..Sample::counter(name, help, 0)
        }
    }

    /// A gauge.
    pub fn gauge(name: impl Into<Cow<'static, str>>, help: &'static str, value: f64) -> Sample {
        Sample {
            name: name.into(),
            help: Cow::Borrowed(help),
            kind: Kind::Gauge,
            labels: Vec::new(),
            value,
        }
    }

    /// With one more label.
    pub fn label(mut self, name: &'static str, value: impl Into<String>) -> Sample {
        self.labels.push((Cow::Borrowed(name), value.into()));
        self
    }
}

fn labels(s: &Sample) -> Vec<(&str, &str)> {
    s.labels
        .iter()
        .map(|(k, v)| (k.as_ref(), v.as_str()))
        .collect()
}

/// Samples grouped by family, for one scrape.
#[derive(Debug)]
struct Families(BTreeMap<Cow<'static, str>, Vec<Sample>>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        for (name, samples) in &self.0 {
            let first = &samples[0];
            match first.kind {
                Kind::Counter => {
                    let mut family = encoder.encode_descriptor(
                        name,
                        &first.help,
                        None,
                        ConstCounter::new(0u64).metric_type(),
                    )?;
                    // Counts of events print as whole numbers; a family with a fraction
                    // (seconds) prints as floats.
                    let whole = samples.iter().all(|s| s.value.fract() == 0.0);
                    let one = |s: &Sample, e: prometheus_client::encoding::MetricEncoder| {
                        let v = s.value.max(0.0);
                        if whole {
                            ConstCounter::new(v as u64).encode(e)
                        } else {
                            ConstCounter::new(v).encode(e)
                        }
                    };
                    if let [s] = samples.as_slice() {
                        if s.labels.is_empty() {
                            one(s, family)?;
                            continue;
                        }
                    }
                    for s in samples {
                        one(s, family.encode_family(&labels(s))?)?;
                    }
                }
                Kind::Gauge => {
                    let mut family = encoder.encode_descriptor(
                        name,
                        &first.help,
                        None,
                        ConstGauge::new(0f64).metric_type(),
                    )?;
                    if let [s] = samples.as_slice() {
                        if s.labels.is_empty() {
                            ConstGauge::new(s.value).encode(family)?;
                            continue;
                        }
                    }
                    for s in samples {
                        ConstGauge::new(s.value).encode(family.encode_family(&labels(s))?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The OpenMetrics text of `samples`. A family's first sample gives its kind and help;
/// samples of one family that repeat a label set are summed (two sources may report the
/// same thing, e.g. containers of one name in two runtimes).
pub(crate) fn encode(samples: Vec<Sample>) -> String {
    let mut families: BTreeMap<Cow<'static, str>, Vec<Sample>> = BTreeMap::new();
    for s in samples {
        let family = families.entry(s.name.clone()).or_default();
        if s.kind != family.first().map_or(s.kind, |f| f.kind) {
            tracing::warn!(metric = %s.name, "a sample of another kind than its family: left out");
            continue;
        }
        match family.iter_mut().find(|f| f.labels == s.labels) {
            Some(same) => same.value += s.value,
            None => family.push(s),
        }
    }
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Families(families)));
    let mut text = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
        tracing::warn!("encoding the metrics failed: {e}");
    }
    text
}
