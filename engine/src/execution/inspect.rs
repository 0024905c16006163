//! Inspection: an execution stopped at a moment, and commands run in its
//! guests there (`simcluster replay --until`, `--exec`, `--shell`).
//!
//! [`Execution::run_until`] steps the execution as [`crate::execute`]
//! would and stops before the first event due after a virtual time (or
//! after a number of steps, or at the verdict). Every moment it stops at is
//! a moment of the execution as recorded: nothing is run that the
//! execution would not have run by then.
//!
//! [`Execution::exec`] then has a node's agent run a shell command (the
//! agent's `exec` verb) and steps the cluster on until it answers. The
//! command's output comes back on the control line, so nothing the
//! console shows can mix into it. While it runs, the cluster goes on under
//! the default scheduler: no fault is offered (timeline faults, timers and
//! the network's and disks' own drawn faults still happen), and virtual
//! time moves only as far as the command
//! needs (a guest's CPU time is free under time travel: a command that
//! reads files moves it by microseconds; one that sleeps, by its sleep).
//! Same moment, same commands: same output, byte for byte.
//!
//! After a command the execution is no longer the recorded one (its steps
//! are numbered past the command's), so stepping it on with the recorded
//! decisions would not follow the recording: a caller that wants a later
//! moment replays again from the start ([`Execution::inspected`] says when
//! that is needed).

use std::time::Duration;

use super::Execution;
use crate::agent::AgentCommand;
use crate::outcome::Verdict;
use crate::spec::EngineError;
use crate::strategy::{default_choice, ActionKind, EnabledAction, Strategy, StrategySpec};
use crate::trace::EventKind;
use crate::NodeId;
use simtime::VirtualTime;

/// Where [`Execution::run_until`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// Before the first event due after this virtual time; the clock reads
    /// this time.
    Time(VirtualTime),
    /// After this many engine steps (the execution's first `n`).
    Steps(u64),
}

/// What [`Execution::run_until`] reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reached {
    /// The moment asked for; the execution has no verdict yet.
    Moment,
    /// The execution got its verdict first (it failed, passed or hit its
    /// time limit at or before the moment); its nodes are still up.
    Verdict,
}

/// A command's result from [`Execution::exec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its standard output and error, interleaved as written.
    pub output: Vec<u8>,
    /// Its exit status; `None` when it did not finish.
    pub status: Option<i32>,
    /// Why it did not finish, when it did not.
    pub unfinished: Option<String>,
    /// The virtual time it began at.
    pub began: VirtualTime,
    /// The virtual time its answer arrived (or the limit ran out).
    pub ended: VirtualTime,
}

/// Why [`Execution::exec`] could not run a command.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// No node has that index.
    #[error("there is no node {0} in this cluster")]
    NoSuchNode(String),
    /// The node is powered off, booting, or its agent is not up.
    #[error("node {node} cannot run commands at {:.6} s: {why}", .at.as_ns() as f64 / 1e9)]
    NodeNotUp {
        /// The node's name.
        node: String,
        /// The moment.
        at: VirtualTime,
        /// Powered off, or booting.
        why: &'static str,
    },
    /// The engine failed while the command ran.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// The scheduler's own choice at every choice point: what an execution
/// does when nothing is explored. (While a command runs the enabled set
/// offers no fault: `Inspection::is_running`.)
struct DefaultScheduler;

/// Whether the engine offers `kind` only as a fault to explore: every
/// fault start but a partition (partitions come from the timeline).
pub(super) fn is_fault(kind: ActionKind) -> bool {
    kind.is_fault_start() && kind != ActionKind::Partition
}

impl Strategy for DefaultScheduler {
    fn spec(&self) -> StrategySpec {
        StrategySpec { name: "default".into(), params: Default::default() }
    }
    fn begin_execution(&mut self, _execution: u64) -> bool {
        true
    }
    fn choose(&mut self, _step: u64, enabled: &[EnabledAction]) -> usize {
        default_choice(enabled)
    }
}

impl Execution<'_> {
    /// Steps the execution with `strategy` until `until`, or until its
    /// verdict if that comes first. At [`Until::Time`] the clock is set to
    /// that time (nothing is due before it).
    pub fn run_until(&mut self, strategy: &mut dyn Strategy, until: Until) -> Result<Reached, EngineError> {
        loop {
            if self.script.is_decided() {
                return Ok(Reached::Verdict);
            }
            match until {
                Until::Steps(n) if self.choices.steps() >= n => return Ok(Reached::Moment),
                Until::Time(t) if !self.branching.holds() && self.next_due().is_none_or(|e| e > t) => {
                    self.cx.now = self.cx.now.max(t);
                    return Ok(Reached::Moment);
                }
                _ => {}
            }
            self.step(strategy)?;
        }
    }

    /// The engine steps taken so far.
    pub fn steps(&self) -> u64 {
        self.choices.steps()
    }

    /// Whether a command has run ([`Self::exec`]): from then on the
    /// execution is no longer the recorded one.
    pub fn inspected(&self) -> bool {
        self.inspection.used()
    }

    /// The nodes' names, by 0-based index.
    pub fn node_names(&self) -> Vec<String> {
        self.cx.nodes.iter().map(|n| n.name.clone()).collect()
    }

    /// Runs `command` (a shell command line) on `node` now,
    /// stepping the cluster on under the default scheduler until it
    /// answers or `limit` of virtual time has passed. The execution's
    /// verdict, if it had one, stays.
    pub fn exec(&mut self, node: NodeId, command: &str, limit: Duration) -> Result<ExecOutput, InspectError> {
        let Some(n) = self.cx.nodes.get(node) else {
            return Err(InspectError::NoSuchNode(format!("#{}", node.number())));
        };
        if !n.is_ready() {
            let why = if n.is_up() { "it is booting (its agent is not up)" } else { "it is powered off" };
            return Err(InspectError::NodeNotUp { node: n.name.clone(), at: self.cx.now, why });
        }
        let began = self.cx.now;
        self.cx.trace.push(began, node, EventKind::Note { text: format!("inspect: exec {command}") });
        self.inspection.begin(node);
        self.cx.control(node, &AgentCommand::Exec(command.to_string()))?;
        let deadline = began + limit;
        let first: Option<Verdict> = self.script.take_verdict();
        let mut later = None;
        let mut scheduler = DefaultScheduler;
        while self.inspection.waiting() && self.cx.now <= deadline {
            if self.cx.nodes.get(node).is_none_or(|n| !n.is_up()) {
                break;
            }
            self.step(&mut scheduler)?;
            // A verdict reached meanwhile (the workload ending, say) does
            // not stop the command: the first one is kept.
            if let Some(v) = self.script.take_verdict() {
                later.get_or_insert(v);
            }
        }
        self.script.restore_verdict(first.or(later));
        let (chunks, status) = self.inspection.end();
        let output = decode_chunks(&chunks);
        let unfinished = status.is_none().then(|| match self.cx.nodes[node].crashed_at() {
            Some(t) => {
                format!("{} lost power at {:.6} s while it ran", self.cx.nodes[node].name, t.as_ns() as f64 / 1e9)
            }
            None if !self.cx.nodes[node].is_up() => format!("{} went down while it ran", self.cx.nodes[node].name),
            None => format!("it had not finished after {:.6} s of virtual time", simtime::span_ns(limit) as f64 / 1e9),
        });
        Ok(ExecOutput { output, status, unfinished, began, ended: self.cx.now })
    }

    /// The earliest time anything is due, as [`Self::step`] would gather it.
    fn next_due(&mut self) -> Option<VirtualTime> {
        let mut pending = self.choices.take_pending();
        self.gather_pending(&mut pending);
        let earliest = pending.earliest();
        self.choices.put_pending(pending);
        earliest
    }
}

/// The bytes of an output's base64 lines (busybox's `base64` wraps at 76
/// columns; the lines arrive in order). Anything that is not base64 (a
/// line cut by a node's power loss) ends the output there.
fn decode_chunks(chunks: &str) -> Vec<u8> {
    use base64::Engine as _;
    let engine = &base64::engine::general_purpose::STANDARD;
    match engine.decode(chunks) {
        Ok(bytes) => bytes,
        Err(_) => {
            // Whole 4-character groups decode on their own.
            let whole = chunks.len() / 4 * 4;
            engine.decode(&chunks[..whole]).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::decode_chunks;

    #[test]
    fn output_lines_join_before_decoding() {
        // "hello world\n" split where busybox might wrap.
        assert_eq!(
            decode_chunks(
                "aGVsbG8g" /* line 1 */
                    .to_string()
                    .as_str()
            ),
            b"hello "
        );
        let joined = ["aGVsbG8gd29y", "bGQK"].concat();
        assert_eq!(decode_chunks(&joined), b"hello world\n");
        assert_eq!(decode_chunks(""), b"");
    }

    #[test]
    fn a_cut_output_keeps_its_whole_groups() {
        assert_eq!(decode_chunks("aGVsbG8gd29y!!"), b"hello wor");
    }
}
