//! `[explore]` and `[run]`: how much freedom the strategy has, and how long
//! an execution may take.

use serde::Deserialize;

use super::values::optional_duration;
use super::{parse_duration_ns, Invalid, KeyPath};

/// `[explore]`: how much freedom the strategy has.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExploreSection {
    /// Timers and deliveries due within this window of the earliest event
    /// compete (the strategy may run a later one first); default "0s":
    /// only simultaneous events compete.
    pub window: Option<String>,
}

/// `[run]`: limits of one execution.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSection {
    /// Virtual-time limit of one execution, e.g. "300s" or "10m"; the
    /// command line's --time-limit overrides it.
    pub time_limit: Option<String>,
}

impl ExploreSection {
    /// `window`, checked (default 0).
    pub(super) fn window_ns(&self) -> Result<u64, Invalid> {
        optional_duration(&KeyPath::table("explore").key("window"), &self.window, 0)
    }
}

impl RunSection {
    /// `time_limit`, checked.
    pub(super) fn time_limit_ns(&self) -> Result<Option<u64>, Invalid> {
        match &self.time_limit {
            None => Ok(None),
            Some(s) => parse_duration_ns(s).map(Some).ok_or_else(|| {
                KeyPath::table("run")
                    .key("time_limit")
                    .invalid(format!(" = {s:?}: not a duration (examples: \"90s\", \"10m\")"))
            }),
        }
    }
}
