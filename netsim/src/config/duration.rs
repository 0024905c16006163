//! Durations as `cluster.toml` writes them: `"250ns"`, `"1.5ms"`, or integer ns.

use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A duration string that is not one (each variant carries the string).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A unit other than ns, us/µs, ms or s.
    #[error("unknown duration unit {unit:?} in {text:?} (use ns, us, ms or s)")]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole string.
        text: String,
    },
    /// No digits, two decimal points, or digits that do not parse.
    #[error("bad duration {0:?}")]
    Malformed(String),
    /// More than `u64::MAX` nanoseconds.
    #[error("duration {0:?} too large")]
    TooLarge(String),
    /// A fraction of a nanosecond (`"1.5ns"`).
    #[error("duration {0:?} is not a whole number of nanoseconds")]
    FractionalNanoseconds(String),
}

/// Parses `"250ns"`, `"10us"`/`"10µs"`, `"1.5ms"`, `"2s"` or a bare integer
/// (nanoseconds) into a span of whole nanoseconds, at most `u64::MAX` of
/// them. Fractions are exact decimal arithmetic; a result that is not a
/// whole number of nanoseconds is an error.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    parse_duration_ns(s).map(Duration::from_nanos)
}

/// [`parse_duration`] in ns, the unit the config's values are kept in.
fn parse_duration_ns(s: &str) -> Result<u64, DurationError> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_')).unwrap_or(s.len());
    let (num, unit) = (s[..split].replace('_', ""), s[split..].trim());
    let scale: u128 = match unit {
        "" | "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(DurationError::UnknownUnit { unit: unit.to_string(), text: s.to_string() }),
    };
    let malformed = || DurationError::Malformed(s.to_string());
    let too_large = || DurationError::TooLarge(s.to_string());
    let (int, frac) = num.split_once('.').unwrap_or((&num, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(malformed());
    }
    let parse = |d: &str| -> Result<u128, DurationError> {
        if d.is_empty() {
            Ok(0)
        } else {
            d.parse::<u128>().map_err(|_| malformed())
        }
    };
    let mut total = parse(int)?.checked_mul(scale).ok_or_else(too_large)?;
    if !frac.is_empty() {
        let den = 10u128.checked_pow(frac.len() as u32).ok_or_else(malformed)?;
        // 38 fraction digits fit a u128, but not times 10^9.
        let f = parse(frac)?.checked_mul(scale).ok_or_else(malformed)?;
        let (whole, rest) = (f / den, f % den);
        if rest > 0 {
            return Err(DurationError::FractionalNanoseconds(s.to_string()));
        }
        total += whole;
    }
    u64::try_from(total).map_err(|_| too_large())
}

/// A duration in nanoseconds as written in TOML: integer ns or a string with unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Dur(pub(super) u64);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DurVisitor).map(Dur)
    }
}

pub(super) struct DurVisitor;

impl<'de> Visitor<'de> for DurVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        f.write_str("a duration: integer nanoseconds or a string such as \"100us\"")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("negative duration {v}")))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        parse_duration_ns(v).map_err(E::custom)
    }
}
