//! `[faults.pause]`, `[faults.clock]` and `[faults.kill]`: the tables, and
//! their checks into the engine's `PauseSpec`, `ClockSpec` and `KillSpec`.
//!
//! Every message starts with `[section] key` (`[faults.pause] max = -1:
//! ...`), so the caller can name cluster.toml and the line.

use std::fmt;
use std::marker::PhantomData;

use engine::{ClockSpec, KillSpec, PauseSpec, StrobeSpec};
use serde::de::{self, value::MapAccessDeserializer, Deserializer, IntoDeserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{parse_duration_ns, parse_node_name, Invalid, KeyPath};

/// A value or a range of values: `"2s"`, or `{ min = "1s", max = "5s" }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range<T> {
    /// The least value drawn; a single value gives `min == max`.
    pub min: T,
    /// The greatest value drawn.
    pub max: T,
}

impl<'de, T: Deserialize<'de> + Clone> Deserialize<'de> for Range<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RangeVisitor(PhantomData))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RangeTable<T> {
    min: T,
    max: T,
}

struct RangeVisitor<T>(PhantomData<T>);

impl<T: Clone> RangeVisitor<T> {
    fn one(v: T) -> Range<T> {
        Range { min: v.clone(), max: v }
    }
}

impl<'de, T: Deserialize<'de> + Clone> Visitor<'de> for RangeVisitor<T> {
    type Value = Range<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a value or a table { min = ..., max = ... }")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Range<T>, E> {
        Ok(Self::one(T::deserialize(v.into_deserializer())?))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Range<T>, E> {
        Ok(Self::one(T::deserialize(v.into_deserializer())?))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Range<T>, A::Error> {
        let t = RangeTable::<T>::deserialize(MapAccessDeserializer::new(map))?;
        Ok(Range { min: t.min, max: t.max })
    }
}

/// `[faults.pause]`: the start command's processes stopped (SIGSTOP) and
/// continued (SIGCONT) by the agent at engine-chosen times.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseSection {
    /// Pauses per execution at most (default 0: none).
    pub max: Option<i64>,
    /// Nodes whose start command may pause; default every node (a pause
    /// stops only the start command, never the workload or a check).
    pub nodes: Option<Vec<String>>,
    /// How long a pause lasts (default { min = "1s", max = "5s" }).
    pub length: Option<Range<String>>,
    /// Pauses become possible at a time drawn from the workload's first
    /// `span` (default "10s"), and again after each pause.
    pub span: Option<String>,
    /// Random walk weight (ordinary events: 100; default 50).
    pub weight: Option<i64>,
    /// Pause only a node whose role (`[roles]`) is this one.
    pub target: Option<String>,
}

/// `[faults.kill]`: the start command's processes killed (SIGKILL) by the
/// agent at engine-chosen times and started again `restart_after` later;
/// the node's kernel, page cache and disk stay.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillSection {
    /// Kills per execution at most (default 0: none).
    pub max: Option<i64>,
    /// Nodes whose start command may be killed; default every node.
    pub nodes: Option<Vec<String>>,
    /// How long until the start command runs again: a duration or a range
    /// ("1s..5s") each kill draws from (default "1s").
    pub restart_after: Option<String>,
    /// Kills become possible at a time drawn from the workload's first
    /// `span` (default "10s"), and again after each kill.
    pub span: Option<String>,
    /// Random walk weight (ordinary events: 100; default 50).
    pub weight: Option<i64>,
}

/// `[faults.clock] strobe`: `true` (the defaults) or a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrobeSetting {
    /// `strobe = false`: no strobes.
    Off,
    /// `strobe = true` (every key at its default) or a table.
    On(StrobeTable),
}

/// A strobe's shape: the wall clock goes `delta` forward and back every
/// `period` for `length` (defaults "200ms", "10ms", "1s").
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StrobeTable {
    /// How far the wall clock jumps, forward then back (default "200ms").
    pub delta: Option<String>,
    /// Time between jumps, at least 1ms (default "10ms").
    pub period: Option<String>,
    /// How long the strobe lasts: at least one `period`, at most 100000 of
    /// them (default "1s").
    pub length: Option<String>,
}

impl<'de> Deserialize<'de> for StrobeSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrobeSetting;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("true, false, or a table { delta = \"200ms\", period = \"10ms\", length = \"1s\" }")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<StrobeSetting, E> {
                Ok(if v { StrobeSetting::On(StrobeTable::default()) } else { StrobeSetting::Off })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<StrobeSetting, A::Error> {
                Ok(StrobeSetting::On(StrobeTable::deserialize(MapAccessDeserializer::new(map))?))
            }
        }
        d.deserialize_any(V)
    }
}

/// `[faults.clock]`: nodes' wall clocks off, drifting, jumping.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClockSection {
    /// Each node's wall clock at boot is off by an offset drawn from this
    /// range ("-3s" is behind).
    pub offset: Option<Range<String>>,
    /// Each node's clocks (wall and monotonic) run fast (or slow, negative)
    /// by this many ppm, drawn per node; at most 100000 either way.
    pub drift_ppm: Option<Range<i64>>,
    /// A bump jumps a node's wall clock by a delta drawn from this range.
    pub bump: Option<Range<String>>,
    /// Strobes: rapid back-and-forth jumps for a while.
    pub strobe: Option<StrobeSetting>,
    /// Bumps and strobes per execution at most (default 1 when either is set).
    pub max: Option<i64>,
    /// Nodes with faulty clocks; default every node.
    pub nodes: Option<Vec<String>>,
    /// Jumps become possible at a time drawn from the workload's first
    /// `span` (default "10s"), and again after each jump.
    pub span: Option<String>,
    /// Random walk weight of a jump (ordinary events: 100; default 50).
    pub weight: Option<i64>,
    /// Jump only the clock of a node whose role (`[roles]`) is this one.
    pub target: Option<String>,
}

impl ClockSection {
    /// Whether the guests need the `/sim/clock` helper (everything but
    /// the offset is done in the guest).
    pub fn needs_helper(&self) -> bool {
        self.drift_ppm.is_some() || self.bump.is_some() || matches!(self.strobe, Some(StrobeSetting::On(_)))
    }
}

/// The most a clock may be off or jump: a year.
const MAX_CLOCK_NS: i64 = 366 * 24 * 3600 * 1_000_000_000;
/// The most a clock may drift: the guest kernel's tick can be set 10% off
/// (`adjtimex` ADJ_TICK at USER_HZ 100), and its frequency 500 ppm more.
const MAX_DRIFT_PPM: i64 = 100_000;

/// "-3s", "+250ms", "1.5s" -> signed ns.
pub fn parse_signed_duration_ns(s: &str) -> Option<i64> {
    let t = s.trim();
    let (sign, rest) = match t.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, t.strip_prefix('+').unwrap_or(t)),
    };
    let ns = i64::try_from(parse_duration_ns(rest)?).ok()?;
    Some(sign * ns)
}

/// The integer at `key` (`default` when absent), within `lo..=hi`.
fn int_in(key: &KeyPath, v: Option<i64>, default: i64, lo: i64, hi: i64) -> Result<i64, Invalid> {
    let v = v.unwrap_or(default);
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(key.invalid(format!(" = {v}: must be between {lo} and {hi}")))
    }
}

/// The duration at `key`, `default` when absent.
fn duration(key: &KeyPath, v: &Option<String>, default: u64) -> Result<u64, Invalid> {
    match v {
        None => Ok(default),
        Some(s) => parse_duration_ns(s)
            .ok_or_else(|| key.invalid(format!(" = {s:?} is not a duration (examples: \"10s\", \"500ms\")"))),
    }
}

/// The range of signed durations at `key`, within `±limit` (`min <= max`).
fn signed_range(key: &KeyPath, r: &Range<String>, limit: i64) -> Result<(i64, i64), Invalid> {
    let one = |end: &str, s: &str| {
        parse_signed_duration_ns(s).filter(|v| v.abs() <= limit).ok_or_else(|| {
            key.key(end)
                .invalid(format!(" = {s:?} is not a duration within a year either way (examples: \"-3s\", \"250ms\")"))
        })
    };
    let (lo, hi) = (one("min", &r.min)?, one("max", &r.max)?);
    if lo > hi {
        return Err(key.key("min").invalid(format!(" = {:?} is above max = {:?}", r.min, r.max)));
    }
    Ok((lo, hi))
}

/// The node names at `key` -> sorted 0-based indices; `None`: every node.
fn node_list(key: &KeyPath, names: &Option<Vec<String>>, n: u16) -> Result<Vec<engine::NodeId>, Invalid> {
    let Some(names) = names else { return Ok((0..usize::from(n)).map(engine::NodeId::at).collect()) };
    let mut v = Vec::new();
    for (k, name) in names.iter().enumerate() {
        let i = parse_node_name(name, n).ok_or_else(|| key.nth(k).invalid(super::values::no_such_node(name, n, "")))?;
        v.push(i);
    }
    v.sort_unstable();
    v.dedup();
    Ok(v.into_iter().map(engine::NodeId::at).collect())
}

/// `[faults.pause]` checked; `has_start`: the nodes have a start command.
pub fn pause_spec(p: &PauseSection, n: u16, has_start: bool) -> Result<PauseSpec, Invalid> {
    let at = KeyPath::table("faults.pause");
    let max = int_in(&at.key("max"), p.max, 0, 0, 10_000)? as u32;
    let length = p.length.clone().unwrap_or(Range { min: "1s".into(), max: "5s".into() });
    let (lo, hi) = signed_range(&at.key("length"), &length, MAX_CLOCK_NS)?;
    if lo < 1_000_000 {
        return Err(at.key("length").key("min").invalid(format!(" = {:?}: a pause lasts at least 1ms", length.min)));
    }
    let spec = PauseSpec {
        max,
        nodes: node_list(&at.key("nodes"), &p.nodes, n)?,
        length: (std::time::Duration::from_nanos(lo as u64), std::time::Duration::from_nanos(hi as u64)),
        span: std::time::Duration::from_nanos(duration(&at.key("span"), &p.span, 10_000_000_000)?),
        weight: int_in(&at.key("weight"), p.weight, 50, 0, 1_000_000)? as u32,
    };
    if max > 0 && !has_start {
        return Err(at
            .key("max")
            .invalid(format!(" = {max}: the nodes have no start command to pause (give [node] start)")));
    }
    if max > 0 && spec.nodes.is_empty() {
        return Err(at
            .key("nodes")
            .invalid(" is empty: no node may pause (leave it out for every node, or set max = 0)"));
    }
    Ok(spec)
}

/// `[faults.kill]` checked; `has_start`: the nodes have a start command.
pub fn kill_spec(k: &KillSection, n: u16, has_start: bool) -> Result<KillSpec, Invalid> {
    let at = KeyPath::table("faults.kill");
    let max = int_in(&at.key("max"), k.max, 0, 0, 10_000)? as u32;
    let (lo, hi) = match &k.restart_after {
        None => (1_000_000_000, 1_000_000_000),
        Some(s) => super::values::duration_range(&at.key("restart_after"), s)?,
    };
    let spec = KillSpec {
        max,
        nodes: node_list(&at.key("nodes"), &k.nodes, n)?,
        restart_after: (std::time::Duration::from_nanos(lo), std::time::Duration::from_nanos(hi)),
        span: std::time::Duration::from_nanos(duration(&at.key("span"), &k.span, 10_000_000_000)?),
        weight: int_in(&at.key("weight"), k.weight, 50, 0, 1_000_000)? as u32,
    };
    if max > 0 && !has_start {
        return Err(at
            .key("max")
            .invalid(format!(" = {max}: the nodes have no start command to kill (give [node] start)")));
    }
    if max > 0 && spec.nodes.is_empty() {
        return Err(at
            .key("nodes")
            .invalid(" is empty: no node may be killed (leave it out for every node, or set max = 0)"));
    }
    Ok(spec)
}

/// `[faults.clock] strobe` with its defaults.
fn strobe_spec(t: &StrobeTable) -> Result<StrobeSpec, Invalid> {
    let at = KeyPath::table("faults.clock").key("strobe");
    let delta = t.delta.clone().unwrap_or_else(|| "200ms".into());
    let delta_ns =
        parse_signed_duration_ns(&delta).filter(|d| *d != 0 && d.abs() <= MAX_CLOCK_NS).ok_or_else(|| {
            at.key("delta").invalid(format!(
                " = {delta:?} is not a non-zero duration within a year (examples: \"200ms\", \"-1s\")"
            ))
        })?;
    let period_ns = duration(&at.key("period"), &t.period, 10_000_000)?;
    let length_ns = duration(&at.key("length"), &t.length, 1_000_000_000)?;
    if period_ns < 1_000_000 {
        return Err(at.key("period").invalid(format!(" = {:?}: at least 1ms", t.period.as_deref().unwrap_or(""))));
    }
    if length_ns < period_ns || length_ns / period_ns > 100_000 {
        return Err(at.key("length").invalid(format!(
            " = {:?}: at least one period and at most 100000 of them",
            t.length.as_deref().unwrap_or("1s")
        )));
    }
    Ok(StrobeSpec {
        delta_ns,
        period: std::time::Duration::from_nanos(period_ns),
        length: std::time::Duration::from_nanos(length_ns),
    })
}

/// `[faults.clock]` checked.
pub fn clock_spec(c: &ClockSection, n: u16) -> Result<ClockSpec, Invalid> {
    let at = KeyPath::table("faults.clock");
    let offset_ns = c.offset.as_ref().map(|r| signed_range(&at.key("offset"), r, MAX_CLOCK_NS)).transpose()?;
    let bump_ns = c.bump.as_ref().map(|r| signed_range(&at.key("bump"), r, MAX_CLOCK_NS)).transpose()?;
    let drift_ppm = match &c.drift_ppm {
        None => None,
        Some(r) => {
            let ok = |v: i64| (-MAX_DRIFT_PPM..=MAX_DRIFT_PPM).contains(&v);
            if !ok(r.min) || !ok(r.max) {
                return Err(at.key("drift_ppm").invalid(format!(
                    ": min = {}, max = {}: each within -{MAX_DRIFT_PPM}..{MAX_DRIFT_PPM} (10%)",
                    r.min, r.max
                )));
            }
            if r.min > r.max {
                return Err(at.key("drift_ppm").key("min").invalid(format!(" = {} is above max = {}", r.min, r.max)));
            }
            Some((r.min, r.max))
        }
    };
    let strobe = match &c.strobe {
        Some(StrobeSetting::On(t)) => Some(strobe_spec(t)?),
        _ => None,
    };
    let jumps = bump_ns.is_some() || strobe.is_some();
    let max = int_in(&at.key("max"), c.max, i64::from(jumps), 0, 10_000)? as u32;
    if max > 0 && !jumps {
        return Err(at.key("max").invalid(format!(" = {max}: nothing to jump (give bump or strobe)")));
    }
    let spec = ClockSpec {
        offset_ns,
        drift_ppm,
        bump_ns,
        strobe,
        max,
        nodes: node_list(&at.key("nodes"), &c.nodes, n)?,
        span: std::time::Duration::from_nanos(duration(&at.key("span"), &c.span, 10_000_000_000)?),
        weight: int_in(&at.key("weight"), c.weight, 50, 0, 1_000_000)? as u32,
    };
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_durations() {
        assert_eq!(parse_signed_duration_ns("-3s"), Some(-3_000_000_000));
        assert_eq!(parse_signed_duration_ns("+250ms"), Some(250_000_000));
        assert_eq!(parse_signed_duration_ns("1.5s"), Some(1_500_000_000));
        assert_eq!(parse_signed_duration_ns("--1s"), None);
        assert_eq!(parse_signed_duration_ns("soon"), None);
    }
}
