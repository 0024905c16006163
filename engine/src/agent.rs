//! The engine's side of the in-guest agent's control-line protocol.
//!
//! Guest -> engine lines (`@sim ready`, `@sim done NAME STATUS`) are read
//! with the rest of the console protocol in [`crate::console`].
//! Engine -> guest lines: `run NAME` (run /sim/cmd/NAME; commands run one
//! after another, the read loop never waits for them), `settle SECONDS`
//! (the next `run` starts that much later), `pause` / `resume` (SIGSTOP /
//! SIGCONT to the start command's process group), `clock bump NS` /
//! `clock strobe DELTA PERIOD LENGTH` (the `/sim/clock` helper), `kill` /
//! `start` (SIGKILL to the start command's process group, and the start
//! command run again: `[faults.kill]`), `halt`.
//! Anything else on the line (echo before the agent set the line raw, say)
//! is ignored.

/// The readiness probe's command name (`/sim/cmd/ready`, written by the
/// image builder from `[node] ready`): it exits 0 once the node is ready,
/// or 1 when it gave up (see [`crate::ExecutionSpec::ready_probe`]).
pub const READY_PROBE: &str = "ready";

/// The name `@sim done` gives an [`AgentCommand::Exec`]'s command.
pub const EXEC: &str = "exec";

/// A line the engine sends to a node's agent. [`AgentCommand::encode`]
/// gives its exact bytes on the control line (the agent also understands
/// `halt`, which the engine never sends).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentCommand {
    /// `run NAME`: run `/sim/cmd/NAME` after the commands before it.
    Run(String),
    /// `settle S.NNNNNNNNN`: the next `run` starts `ns` later (virtual time).
    Settle { ns: u64 },
    /// `pause`: SIGSTOP to the start command's process group.
    Pause,
    /// `resume`: SIGCONT to it.
    Resume,
    /// `clock bump NS`: the wall clock jumps by `delta_ns`.
    ClockBump { delta_ns: i64 },
    /// `clock strobe DELTA PERIOD LENGTH`: the wall clock jumps forward by
    /// `delta_ns` and back every `period_ns`, for `length_ns`.
    ClockStrobe { delta_ns: i64, period_ns: u64, length_ns: u64 },
    /// `kill`: SIGKILL to the start command's process group (an agent
    /// built for `[faults.kill]` only).
    Kill,
    /// `start`: run the start command again, as at boot (after a kill).
    Start,
    /// `exec BASE64`: run this shell command at once and answer its output
    /// (inspection: `simcluster replay --exec`).
    Exec(String),
}

impl std::fmt::Display for AgentCommand {
    /// The line without its newline.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentCommand::Run(name) => write!(f, "run {name}"),
            AgentCommand::Settle { ns } => write!(f, "settle {}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000),
            AgentCommand::Pause => f.write_str("pause"),
            AgentCommand::Resume => f.write_str("resume"),
            AgentCommand::Kill => f.write_str("kill"),
            AgentCommand::Start => f.write_str("start"),
            AgentCommand::Exec(command) => {
                use base64::Engine as _;
                write!(f, "exec {}", base64::engine::general_purpose::STANDARD.encode(command))
            }
            AgentCommand::ClockBump { delta_ns } => write!(f, "clock bump {delta_ns}"),
            AgentCommand::ClockStrobe { delta_ns, period_ns, length_ns } => {
                write!(f, "clock strobe {delta_ns} {period_ns} {length_ns}")
            }
        }
    }
}

impl AgentCommand {
    /// The bytes on the control line: the line and its newline.
    pub fn encode(&self) -> Vec<u8> {
        format!("{self}\n").into_bytes()
    }
}

/// What a shell exit status usually means, for failure messages.
pub fn status_hint(status: i32) -> &'static str {
    match status {
        126 => " (command found but not executable)",
        127 => " (command not found)",
        s if s > 128 && s < 160 => " (killed by a signal)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_encode_as_the_agent_reads_them() {
        let lines: Vec<String> = [
            AgentCommand::Run("workload".into()),
            AgentCommand::Settle { ns: 2_000_000_001 },
            AgentCommand::Settle { ns: 500_000_000 },
            AgentCommand::Pause,
            AgentCommand::Resume,
            AgentCommand::ClockBump { delta_ns: -1_500_000_000 },
            AgentCommand::ClockStrobe { delta_ns: 200_000_000, period_ns: 10_000_000, length_ns: 1_000_000_000 },
            AgentCommand::Kill,
            AgentCommand::Start,
            AgentCommand::Exec("cat /data/log\n".into()),
        ]
        .iter()
        .map(|c| String::from_utf8(c.encode()).unwrap())
        .collect();
        assert_eq!(
            lines,
            [
                "run workload\n",
                "settle 2.000000001\n",
                "settle 0.500000000\n",
                "pause\n",
                "resume\n",
                "clock bump -1500000000\n",
                "clock strobe 200000000 10000000 1000000000\n",
                "kill\n",
                "start\n",
                "exec Y2F0IC9kYXRhL2xvZwo=\n",
            ]
        );
    }
}
