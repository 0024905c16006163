//! [`Latency`]: a link's one-way delay distribution, its TOML forms and its checks.

use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::duration::{Dur, DurVisitor};
use super::error::{ConfigError, ConfigKey, ConfigProblem};
use crate::rng;

/// One-way latency of a link, sampled per frame copy.
///
/// The parameters stay whole nanoseconds, as parsed and as the validation
/// messages print them; a [`Latency::sample`] is a `Duration`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Latency {
    /// Always this many ns.
    Fixed(u64),
    /// Uniform in `min..=max` ns.
    Uniform {
        /// The shortest, ns.
        min: u64,
        /// The longest, ns.
        max: u64,
    },
    /// `min + Exp(mean - min)`, truncated at `max`: a floor plus a long tail.
    Exponential {
        /// The floor, ns.
        min: u64,
        /// The mean, ns (between `min` and `max`).
        mean: u64,
        /// The truncation point, ns.
        max: u64,
    },
}

impl Default for Latency {
    /// 100 µs: a LAN round trip of a fifth of a millisecond.
    fn default() -> Self {
        Latency::Fixed(100_000)
    }
}

impl Latency {
    /// One sample. `Fixed` consumes no randomness; the others exactly one
    /// `next_u64` (see [`crate::rng`]). The span is the drawn number of ns,
    /// whole: the draws and their order are those of the `u64` it was.
    pub fn sample(&self, rng: &mut dyn rand_core::RngCore) -> Duration {
        Duration::from_nanos(match *self {
            Latency::Fixed(ns) => ns,
            Latency::Uniform { min, max } => rng::uniform_inclusive(rng, min, max),
            Latency::Exponential { min, mean, max } => rng::shifted_exponential(rng, min, mean, max),
        })
    }

    /// Checks the ranges; `key` is this value's key.
    pub fn validate(&self, key: &ConfigKey) -> Result<(), ConfigError> {
        match *self {
            Latency::Fixed(_) => Ok(()),
            Latency::Uniform { min, max } if min > max => Err(ConfigProblem::LatencyRange { min, max }.at(key)),
            Latency::Uniform { .. } => Ok(()),
            Latency::Exponential { min, max, .. } if min > max => Err(ConfigProblem::LatencyRange { min, max }.at(key)),
            Latency::Exponential { min, mean, max } if mean < min || mean > max => {
                Err(ConfigProblem::LatencyMean { min, mean, max }.at(key))
            }
            Latency::Exponential { .. } => Ok(()),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum DistKind {
    Fixed,
    Uniform,
    Exponential,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LatencyTable {
    distribution: Option<DistKind>,
    value: Option<Dur>,
    min: Option<Dur>,
    max: Option<Dur>,
    mean: Option<Dur>,
}

impl LatencyTable {
    fn into_latency<E: de::Error>(self) -> Result<Latency, E> {
        let kind = match self.distribution {
            Some(k) => k,
            None if self.value.is_some() => DistKind::Fixed,
            None if self.mean.is_some() => DistKind::Exponential,
            None => DistKind::Uniform,
        };
        let need = |v: Option<Dur>, name: &str| {
            v.map(|d| d.0).ok_or_else(|| E::custom(format!("latency table is missing `{name}`")))
        };
        let forbid = |v: &Option<Dur>, name: &str, kind: &str| match v {
            Some(_) => Err(E::custom(format!("`{name}` does not apply to a {kind} latency"))),
            None => Ok(()),
        };
        match kind {
            DistKind::Fixed => {
                forbid(&self.min, "min", "fixed")?;
                forbid(&self.max, "max", "fixed")?;
                forbid(&self.mean, "mean", "fixed")?;
                Ok(Latency::Fixed(need(self.value, "value")?))
            }
            DistKind::Uniform => {
                forbid(&self.value, "value", "uniform")?;
                forbid(&self.mean, "mean", "uniform")?;
                Ok(Latency::Uniform { min: need(self.min, "min")?, max: need(self.max, "max")? })
            }
            DistKind::Exponential => {
                forbid(&self.value, "value", "exponential")?;
                Ok(Latency::Exponential {
                    min: self.min.map_or(0, |d| d.0),
                    mean: need(self.mean, "mean")?,
                    max: self.max.map_or(u64::MAX, |d| d.0),
                })
            }
        }
    }
}

impl<'de> Deserialize<'de> for Latency {
    /// Accepts `100000`, `"100us"`, `{ min = .., max = .. }`,
    /// `{ value = .. }`, `{ distribution = "exponential", min, mean, max }`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Latency;
            fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
                f.write_str("a latency: nanoseconds, a duration string, or a table with min/max/mean/value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Latency, E> {
                DurVisitor.visit_u64(v).map(Latency::Fixed)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Latency, E> {
                DurVisitor.visit_i64(v).map(Latency::Fixed)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Latency, E> {
                DurVisitor.visit_str(v).map(Latency::Fixed)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Latency, A::Error> {
                LatencyTable::deserialize(de::value::MapAccessDeserializer::new(map))?.into_latency()
            }
        }
        d.deserialize_any(V)
    }
}
