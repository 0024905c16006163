//! The guest console protocol: every line form a node prints that the
//! engine or the checker reads, in one place. Lines are read as the node
//! printed them; leading and trailing blanks (a `\r` from a tty) are
//! ignored, and a form counts only at the start of a line.
//!
//! | line | who prints it | who reads it |
//! |---|---|---|
//! | `@sim ready`, `@sim done NAME STATUS` | the in-guest agent, on its control line | the engine's script ([`agent_message`]) |
//! | `@sim role WORD` | the role probe's loop (`[roles]`), on the control line | the engine's roles ([`agent_message`]) |
//! | `@sim out CHUNK` | the agent, an inspection command's output in base64 (`exec`) | the engine's inspection (`execution/inspect.rs`) |
//! | `@reached NAME`, `@sometimes NAME` | the user's programs | `[faults] start_after`, `[[expect]] reached`, coverage ([`reached_name`]) |
//! | `@history begin`, one JSON object per line, `@history end` | the workload | `[check] history` ([`history_marker`]) |
//! | `Kernel panic - not syncing: ...` | the guest kernel | the engine: the node failed ([`is_kernel_panic`]) |
//!
//! The engine's lines to the agent (`run NAME`, `settle S`, ...) are
//! `AgentCommand` (in the private `agent` module).

/// A line a node's agent sent the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentMsg {
    /// `@sim ready`: the agent is up and reads commands.
    Ready,
    /// `@sim done NAME STATUS`: `/sim/cmd/NAME` exited with `status`.
    Done {
        /// The command's name.
        command: String,
        /// Its exit status.
        status: i32,
    },
    /// Any other `@sim` line (the words after `@sim`).
    Unknown(String),
    /// `@sim role WORD`: the node's role probe printed `WORD` first (see
    /// `crate::roles`).
    Role(String),
    /// `@sim out CHUNK`: one base64 line of an inspection command's output
    /// (`exec`, see `crate::agent`).
    Output(String),
}

/// The agent's message on `line`, if it is an `@sim` line.
pub fn agent_message(line: &str) -> Option<AgentMsg> {
    let rest = line.trim().strip_prefix("@sim ")?;
    let mut words = rest.split_whitespace();
    Some(match (words.next(), words.next(), words.next()) {
        (Some("ready"), None, None) => AgentMsg::Ready,
        (Some("done"), Some(name), Some(status)) => match status.parse() {
            Ok(status) => AgentMsg::Done { command: name.to_string(), status },
            Err(_) => AgentMsg::Unknown(rest.to_string()),
        },
        (Some("role"), Some(role), None) => AgentMsg::Role(role.to_string()),
        (Some("out"), Some(chunk), None) => AgentMsg::Output(chunk.to_string()),
        _ => AgentMsg::Unknown(rest.to_string()),
    })
}

/// The name a reachability line reports: its first word after `@reached`
/// or `@sometimes`.
pub fn reached_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("@reached ").or_else(|| rest.strip_prefix("@sometimes "))?;
    rest.split_whitespace().next()
}

/// The two lines around a history block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryMarker {
    /// `@history begin`: a block starts (a later block replaces an earlier).
    Begin,
    /// `@history end`: the block is complete.
    End,
}

/// Whether `line` opens or closes a history block.
pub fn history_marker(line: &str) -> Option<HistoryMarker> {
    let l = line.trim();
    if l.starts_with("@history begin") {
        Some(HistoryMarker::Begin)
    } else if l.starts_with("@history end") {
        Some(HistoryMarker::End)
    } else {
        None
    }
}

/// Whether `line` is the guest kernel's panic message: the node is dead
/// (reported as a node failure, never as simcluster's).
pub fn is_kernel_panic(line: &str) -> bool {
    line.contains("Kernel panic")
}

/// Splits a byte stream into lines, keeping an unfinished line until its
/// newline arrives. A line is stamped with the time its newline was seen,
/// which is deterministic because the chunks themselves are.
#[derive(Debug, Clone, Default)]
pub struct LineSplitter {
    partial: Vec<u8>,
}

impl LineSplitter {
    /// Feeds bytes; returns the completed lines (lossy UTF-8, `\r` and
    /// terminal escape noise removed).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for &b in bytes {
            if b == b'\n' {
                lines.push(clean(&std::mem::take(&mut self.partial)));
            } else {
                self.partial.push(b);
            }
        }
        lines
    }

    /// The unfinished line, if any (at the end of an execution).
    pub fn finish(&mut self) -> Option<String> {
        if self.partial.is_empty() {
            None
        } else {
            Some(clean(&std::mem::take(&mut self.partial)))
        }
    }
}

fn clean(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().filter(|&c| c != '\r').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_lines_parse() {
        assert_eq!(agent_message("@sim ready"), Some(AgentMsg::Ready));
        assert_eq!(
            agent_message("@sim done workload 3\r"),
            Some(AgentMsg::Done { command: "workload".into(), status: 3 })
        );
        assert_eq!(agent_message("@sim done workload x"), Some(AgentMsg::Unknown("done workload x".into())));
        assert_eq!(agent_message("log: @sim ready"), None);
        assert_eq!(agent_message("run workload"), None);
        assert_eq!(agent_message("hello"), None);
        assert_eq!(agent_message("@sim role leader\r"), Some(AgentMsg::Role("leader".into())));
        assert_eq!(agent_message("@sim role a b"), Some(AgentMsg::Unknown("role a b".into())));
        assert_eq!(agent_message("@sim out aGkK\r"), Some(AgentMsg::Output("aGkK".into())));
    }

    #[test]
    fn reachability_lines_name_their_first_word() {
        assert_eq!(reached_name("@reached leader-elected"), Some("leader-elected"));
        assert_eq!(reached_name("  @sometimes split-brain now\r"), Some("split-brain"));
        assert_eq!(reached_name("@reached"), None);
        assert_eq!(reached_name("log: @reached x"), None, "only at the start of a line");
        assert_eq!(reached_name("@reachedx y"), None);
    }

    #[test]
    fn history_markers_and_panics() {
        assert_eq!(history_marker(" @history begin\r"), Some(HistoryMarker::Begin));
        assert_eq!(history_marker("@history end"), Some(HistoryMarker::End));
        assert_eq!(history_marker("{\"type\": \"invoke\"}"), None);
        assert_eq!(history_marker("log: @history begin"), None);
        assert!(is_kernel_panic("[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs"));
        assert!(!is_kernel_panic("kernel: all is well"));
    }
}
