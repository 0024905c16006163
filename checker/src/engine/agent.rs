//! The engine's side of the in-guest agent's control-line protocol.
//!
//! Guest -> engine lines: `@sim ready`, `@sim done NAME STATUS`.
//! Engine -> guest lines: `run NAME` (run /sim/cmd/NAME; commands run one
//! after another, the read loop never waits for them), `settle SECONDS`
//! (the next `run` starts that much later), `pause` / `resume` (SIGSTOP /
//! SIGCONT to the start command's process group), `clock bump NS` /
//! `clock strobe DELTA PERIOD LENGTH` (the `/sim/clock` helper), `halt`.
//! Anything else on the line (echo before the agent set the line raw, say)
//! is ignored.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentMsg {
    Ready,
    Done { command: String, status: i32 },
    Unknown(String),
}

pub fn parse(line: &str) -> Option<AgentMsg> {
    let rest = line.trim().strip_prefix("@sim ")?;
    let mut words = rest.split_whitespace();
    Some(match (words.next(), words.next(), words.next()) {
        (Some("ready"), None, None) => AgentMsg::Ready,
        (Some("done"), Some(name), Some(status)) => match status.parse() {
            Ok(status) => AgentMsg::Done { command: name.to_string(), status },
            Err(_) => AgentMsg::Unknown(rest.to_string()),
        },
        _ => AgentMsg::Unknown(rest.to_string()),
    })
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
    fn parses_agent_lines() {
        assert_eq!(parse("@sim ready"), Some(AgentMsg::Ready));
        assert_eq!(
            parse("@sim done workload 3\r"),
            Some(AgentMsg::Done { command: "workload".into(), status: 3 })
        );
        assert_eq!(parse("@sim done workload x"), Some(AgentMsg::Unknown("done workload x".into())));
        assert_eq!(parse("run workload"), None);
        assert_eq!(parse("hello"), None);
    }
}
