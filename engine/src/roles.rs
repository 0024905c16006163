//! Node roles (`[roles]`): what each node says it is (`leader`,
//! `primary`, `follower`, ...), and the faults that target a role.
//!
//! A role probe is a shell command run on every node, again and again in
//! the node's virtual time; the first word it prints is the node's role.
//! The agent's runner starts it once per boot ([`ROLE_PROBE`], a script
//! that loops in the background and exits at once, so the commands after
//! it are not held up); the loop says `@sim role WORD` on the control line
//! each time the word changes. The engine keeps the last word per node
//! (forgotten when the node goes down: a node that is down holds no
//! role), traces every change (`EventKind::Role`), and offers the faults
//! that target a role only on a node whose last word is that role.

/// The role probe's command name (`/sim/cmd/role-probe`, written by the
/// image builder from `[roles] probe`).
pub const ROLE_PROBE: &str = "role-probe";

/// `[roles]` and the faults that target a role, checked. All `None` and
/// `probe` false: no roles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoleSpec {
    /// Every node runs the role probe ([`ROLE_PROBE`]).
    pub probe: bool,
    /// `[faults.crash] target`: a crash is offered only on a node whose
    /// role is this, and there at every step from the crash time on
    /// (within the budget), weighted up (`at_risk`).
    pub crash: Option<String>,
    /// `[faults.pause] target`: the same for pauses.
    pub pause: Option<String>,
    /// `[faults.clock] target`: the same for clock bumps and strobes.
    pub clock: Option<String>,
    /// `[faults] partition_target`: every random partition
    /// (`[faults.network] partitions`) is turned, when it starts, so that
    /// the node holding this role is the one it singles out (see
    /// `network::focus`); with no such node it does not start.
    pub partition: Option<String>,
}

impl RoleSpec {
    /// Whether any fault targets a role.
    pub fn targets(&self) -> bool {
        self.crash.is_some() || self.pause.is_some() || self.clock.is_some() || self.partition.is_some()
    }
}

/// Whether `word` can be a role: one word of printable ASCII, at most 64
/// bytes (what the probe's first word is, and what a target names).
pub fn valid_role(word: &str) -> bool {
    !word.is_empty() && word.len() <= 64 && word.bytes().all(|b| b.is_ascii_graphic())
}
