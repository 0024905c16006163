//! `[faults.connection]`: TCP connections reset or stalled by the engine,
//! checked into the engine's `ConnFaultSpec`.

use serde::Deserialize;

use super::values::optional_duration;
use super::{parse_duration_ns, Invalid, KeyPath};

/// `[faults.connection]`: connection faults the strategy may choose, on
/// any established TCP connection between two nodes (or a node and the
/// host client).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionSection {
    /// Connections reset per execution at most: an RST to both ends, the
    /// connection's frames in flight lost (default 0: none).
    pub resets: Option<i64>,
    /// Connections stalled per execution at most: one way or both (drawn),
    /// their frames held while the others flow (default 0: none).
    pub stalls: Option<i64>,
    /// How long a stall holds: `"2s"`, or a range `"500ms..3s"` a length
    /// is drawn from (default "1s..5s").
    pub stall_for: Option<String>,
    /// Connection faults become possible at a time drawn from the
    /// workload's first `span` (default "10s"), and again after each one.
    pub span: Option<String>,
    /// Random walk weight of a reset or a stall (ordinary events: 100;
    /// default 50).
    pub weight: Option<i64>,
}

impl ConnectionSection {
    /// Any connection fault is asked for.
    pub(super) fn on(&self) -> bool {
        self.resets.is_some_and(|n| n > 0) || self.stalls.is_some_and(|n| n > 0)
    }
}

/// The count at `key` (`default` when absent), within `0..=hi`.
fn count(key: &KeyPath, v: Option<i64>, default: i64, hi: i64) -> Result<u32, Invalid> {
    let v = v.unwrap_or(default);
    if (0..=hi).contains(&v) {
        Ok(v as u32)
    } else {
        Err(key.invalid(format!(" = {v}: must be between 0 and {hi}")))
    }
}

/// `"2s"` or `"1s..5s"` at `key`, in ns (min <= max, at least 1 ms).
fn length_range(key: &KeyPath, s: &str) -> Result<(u64, u64), Invalid> {
    let bad = || key.invalid(format!(" = {s:?} is not a duration or a range of them (examples: \"2s\", \"1s..5s\")"));
    let (lo, hi) = match s.split_once("..") {
        None => parse_duration_ns(s).map(|v| (v, v)).ok_or_else(bad)?,
        Some((lo, hi)) => (parse_duration_ns(lo).ok_or_else(bad)?, parse_duration_ns(hi).ok_or_else(bad)?),
    };
    if lo > hi {
        return Err(key.invalid(format!(" = {s:?}: the range's start is after its end")));
    }
    if lo < 1_000_000 {
        return Err(key.invalid(format!(" = {s:?}: a stall lasts at least 1ms")));
    }
    Ok((lo, hi))
}

/// `[faults.connection]` checked.
pub(super) fn conn_spec(c: &ConnectionSection) -> Result<engine::ConnFaultSpec, Invalid> {
    let at = KeyPath::table("faults.connection");
    let ns = std::time::Duration::from_nanos;
    let (lo, hi) = length_range(&at.key("stall_for"), c.stall_for.as_deref().unwrap_or("1s..5s"))?;
    Ok(engine::ConnFaultSpec {
        resets: count(&at.key("resets"), c.resets, 0, 10_000)?,
        stalls: count(&at.key("stalls"), c.stalls, 0, 10_000)?,
        stall_for: (ns(lo), ns(hi)),
        span: ns(optional_duration(&at.key("span"), &c.span, 10_000_000_000)?),
        weight: count(&at.key("weight"), c.weight, 50, 1_000_000)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_ranges_and_bad_values() {
        let on = ConnectionSection { resets: Some(2), stalls: Some(1), ..Default::default() };
        let s = conn_spec(&on).unwrap();
        assert_eq!((s.resets, s.stalls, s.weight), (2, 1, 50));
        assert_eq!(s.stall_for, (std::time::Duration::from_secs(1), std::time::Duration::from_secs(5)));
        assert!(!conn_spec(&ConnectionSection::default()).unwrap().on());
        let fixed = ConnectionSection { stall_for: Some("300ms".into()), ..on.clone() };
        assert_eq!(conn_spec(&fixed).unwrap().stall_for.0, std::time::Duration::from_millis(300));
        let msg = |c: &ConnectionSection| format!("{:?}", conn_spec(c).unwrap_err());
        assert!(msg(&ConnectionSection { resets: Some(-1), ..on.clone() }).contains("between 0 and"));
        assert!(msg(&ConnectionSection { stall_for: Some("5s..1s".into()), ..on.clone() }).contains("after"));
        assert!(msg(&ConnectionSection { stall_for: Some("soon".into()), ..on.clone() }).contains("not a duration"));
    }
}
