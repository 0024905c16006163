//! Commands run in the guests for inspection (`simcluster replay --exec`,
//! `--shell`; see `crate::execution::inspect`): whether one has run, the
//! one running, and what came back.

use super::ctx::Ctx;
use crate::agent::EXEC;
use crate::trace::EventKind;
use crate::NodeId;

/// Commands run in the guests for inspection: whether one has run, and
/// the one running.
///
/// Invariant: while a command runs the enabled set offers no fault
/// ([`Self::is_running`]).
#[derive(Default)]
pub(in crate::execution) struct Inspection {
    /// A command has run: from then on the execution is no longer the
    /// recorded one.
    used: bool,
    /// The command running, if one is.
    running: Option<Inspecting>,
}

/// The command being run by [`crate::Execution::exec`], and what came back.
#[derive(Debug)]
struct Inspecting {
    /// The node running it.
    node: NodeId,
    /// Its output's base64 lines, as they arrived.
    chunks: String,
    /// Its exit status, once `@sim done exec` arrived.
    status: Option<i32>,
}

impl Inspection {
    /// A command starts on `node`.
    pub fn begin(&mut self, node: NodeId) {
        self.used = true;
        self.running = Some(Inspecting { node, chunks: String::new(), status: None });
    }

    /// Whether a command has run.
    pub fn used(&self) -> bool {
        self.used
    }

    /// Whether the command started is still waiting for its exit status.
    pub fn waiting(&self) -> bool {
        self.running.as_ref().is_some_and(|i| i.status.is_none())
    }

    /// The command is over: its output's base64 lines and its status.
    pub fn end(&mut self) -> (String, Option<i32>) {
        self.running.take().map_or((String::new(), None), |i| (i.chunks, i.status))
    }

    /// Whether a command runs (the enabled set then offers no fault: the
    /// default choice alone would take a crash due now before a node run
    /// due later; timeline faults, `[[faults.partition]]` and scheduled
    /// crashes, still come at their times).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// An `@sim out` line or `@sim done exec` from node `from`: part of
    /// the command running. Anything from another node, or when no command
    /// runs, is a note in the trace.
    pub fn on_message(&mut self, cx: &mut Ctx, from: NodeId, chunk: Option<String>, status: Option<i32>) {
        match self.running.as_mut().filter(|i| i.node == from) {
            Some(i) => {
                if let Some(c) = chunk {
                    i.chunks.push_str(&c);
                }
                if status.is_some() {
                    i.status = status;
                }
            }
            None => {
                let text = format!("agent: {EXEC} output nobody asked for");
                cx.trace.push(cx.now, from, EventKind::Note { text });
            }
        }
    }
}
