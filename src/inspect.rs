//! `simcluster replay FAILURE --until MOMENT`: a recorded execution
//! stopped at a moment, and commands run in its guests there (`--exec`,
//! `--shell`).
//!
//! The replay follows the failure file's decisions up to the moment
//! (`engine::Execution::run_until`), then each command runs on its node
//! through the agent (`engine::Execution::exec`). Lookahead is off, so the
//! execution stops before the first event due after the moment, whatever
//! the node runs ahead of. Going to another moment replays again from the
//! start once a command has run (the cluster the command ran on is no
//! longer the recorded one).

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use engine::{Execution, ExecutionSpec, Lookahead, NodeId, Reached, Until};
use simtime::VirtualTime;

use crate::cluster::parse_duration_ns;
use crate::replay::{load, Loaded};
use crate::run::{scratch_dir, RunOptions};
use crate::BadInput;

/// A moment of a recorded execution, as `--until` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// A virtual time (`12.5s`, `800ms`): before the first event due after it.
    Time(VirtualTime),
    /// After the first N engine steps (`step:N`).
    Steps(u64),
    /// Just before the failure (`failure`): every event before the
    /// failure's virtual time has happened, none at it.
    Failure,
}

impl std::str::FromStr for Moment {
    type Err = String;
    fn from_str(s: &str) -> Result<Moment, String> {
        let s = s.trim();
        if s == "failure" {
            return Ok(Moment::Failure);
        }
        if let Some(n) = s.strip_prefix("step:") {
            return n.parse().map(Moment::Steps).map_err(|_| format!("'{s}': step:N needs a whole number of steps"));
        }
        parse_duration_ns(s)
            .map(|ns| Moment::Time(VirtualTime::from_ns(ns)))
            .ok_or_else(|| format!("'{s}' is not a moment: a virtual time (12.5s, 800ms, 2m), step:N, or failure"))
    }
}

/// What `--until`, `--exec`, `--shell` asked for.
#[derive(Debug, Clone)]
pub struct InspectRequest {
    /// Where to stop.
    pub until: Moment,
    /// (node name, shell command) to run there, in order.
    pub execs: Vec<(String, String)>,
    /// Open an interactive shell on this node afterwards.
    pub shell: Option<String>,
    /// The virtual time a command may take before it is given up.
    pub command_limit: Duration,
}

/// The execution a request stops, and the replay's parts.
struct Session<'a> {
    loaded: &'a Loaded,
    spec: ExecutionSpec,
    quiet: bool,
}

impl Session<'_> {
    /// A fresh replay of the recorded execution, stopped at `until`
    /// (an absolute moment: [`Moment::Failure`] resolved to a time).
    fn stop_at(&self, until: Until) -> Result<Execution<'_>> {
        if !self.quiet {
            eprintln!("replaying to {} ...", describe_until(until));
        }
        let mut ex = Execution::new(&self.spec).context("the replay could not start")?;
        let mut guided = self.loaded.replayer();
        let reached = ex.run_until(&mut guided, until).context("the replay failed")?;
        if !self.quiet {
            let at = seconds(ex.now());
            match reached {
                Reached::Moment => eprintln!("stopped at {at} (step {})", ex.steps()),
                Reached::Verdict => {
                    eprintln!(
                        "the execution had its verdict at {at} (step {}), before that moment: stopped there",
                        ex.steps()
                    )
                }
            }
        }
        Ok(ex)
    }
}

/// `simcluster replay FAILURE --until ...`: returns the exit status (the
/// last command's, 124 when it did not finish, 0 with no command).
pub fn inspect(file: &Path, opts: &RunOptions, req: &InspectRequest) -> Result<u8> {
    let loaded = load(file, opts.quiet)?;
    let mut spec = loaded.spec(opts);
    // Exact moments: a node never runs past the moment inside one step.
    spec.lookahead = Lookahead::Off;
    let scratch = scratch_dir()?.join("inspect");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    spec.scratch = scratch.clone();
    let session = Session { loaded: &loaded, spec, quiet: opts.quiet };
    let until = resolve(req.until, &loaded);
    let names = loaded.cluster.node_names();
    for (node, _) in &req.execs {
        node_id(&names, node, file)?;
    }
    if let Some(node) = &req.shell {
        node_id(&names, node, file)?;
    }
    let mut ex = session.stop_at(until)?;
    let mut status = 0;
    for (node, command) in &req.execs {
        let id = node_id(&names, node, file)?;
        status = run_command(&mut ex, id, node, command, req.command_limit, opts.quiet)?;
    }
    if let Some(node) = &req.shell {
        shell(&session, ex, &names, node_id(&names, node, file)?, req.command_limit)?;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(status)
}

/// Runs one command and prints its output on stdout; returns its exit
/// status (124: it did not finish within `limit`).
fn run_command(
    ex: &mut Execution<'_>,
    id: NodeId,
    node: &str,
    command: &str,
    limit: Duration,
    quiet: bool,
) -> Result<u8> {
    let out = ex.exec(id, command, limit).map_err(|e| BadInput(e.to_string()))?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&out.output)?;
    stdout.flush()?;
    Ok(match out.status {
        Some(s) => {
            if s != 0 && !quiet {
                eprintln!("({node}: exit status {s})");
            }
            u8::try_from(s).unwrap_or(1)
        }
        None => {
            let why = out.unfinished.as_deref().unwrap_or("it did not finish");
            eprintln!("({node}: `{command}` did not finish: {why}; its output is lost)");
            124
        }
    })
}

/// The interactive shell: each line a command on the current node, or one
/// of the `:` commands.
fn shell<'a>(
    session: &'a Session<'_>,
    mut ex: Execution<'a>,
    names: &[String],
    mut node: NodeId,
    limit: Duration,
) -> Result<()> {
    let help =
        "  any line       run it with the guest's /bin/sh in / on the current node (each line a shell of its own)\n\
                \x20 :node NAME     run the next lines on node NAME\n\
                \x20 :advance SPAN  go on along the recorded execution (2s, 500ms); replays from the start if a\n\
                \x20                command has run since the last stop\n\
                \x20 :goto MOMENT   go to another moment (12.5s, step:N); replays from the start\n\
                \x20 :where         the node, the virtual time and the step\n\
                \x20 :quit          leave (or end of input)";
    eprintln!(
        "simcluster shell on {} at {}: virtual time stands still between commands. :help lists the commands.",
        names[node.index()],
        seconds(ex.now())
    );
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    loop {
        eprint!("{} @ {} $ ", names[node.index()], seconds(ex.now()));
        std::io::stderr().flush()?;
        let Some(line) = lines.next() else { break };
        let line = line?;
        let line = line.trim();
        let (word, arg) = line.split_once(' ').map_or((line, ""), |(w, a)| (w, a.trim()));
        match word {
            "" => {}
            ":quit" | ":q" | ":exit" => break,
            ":help" | ":h" => eprintln!("{help}"),
            ":where" => eprintln!("{} at {}, step {}", names[node.index()], seconds(ex.now()), ex.steps()),
            ":node" => match names.iter().position(|n| n == arg) {
                Some(i) => node = NodeId::at(i),
                None => eprintln!("no node '{arg}' (nodes: {})", names.join(", ")),
            },
            ":advance" => match parse_duration_ns(arg) {
                Some(ns) if ns > 0 => {
                    let until = Until::Time(ex.now() + Duration::from_nanos(ns));
                    ex = go_to(session, ex, until)?;
                }
                _ => eprintln!("':advance {arg}': give a span of virtual time (2s, 500ms)"),
            },
            ":goto" => match arg.parse::<Moment>() {
                Ok(m) => {
                    drop(ex);
                    ex = session.stop_at(resolve(m, session.loaded))?;
                }
                Err(e) => eprintln!("{e}"),
            },
            w if w.starts_with(':') => eprintln!("unknown command {w}; :help lists them"),
            _ => match run_command(&mut ex, node, &names[node.index()], line, limit, false) {
                Ok(_) => {}
                Err(e) => eprintln!("{e:#}"),
            },
        }
    }
    Ok(())
}

/// `ex` moved on to `until`: along the recording when no command has run
/// in it, otherwise by a new replay from the start.
fn go_to<'a>(session: &'a Session<'_>, mut ex: Execution<'a>, until: Until) -> Result<Execution<'a>> {
    if ex.inspected() {
        drop(ex);
        return session.stop_at(until);
    }
    let mut guided = session.loaded.replayer();
    match ex.run_until(&mut guided, until).context("the replay failed")? {
        Reached::Moment => eprintln!("now at {} (step {})", seconds(ex.now()), ex.steps()),
        Reached::Verdict => eprintln!("the execution had its verdict at {}: stopped there", seconds(ex.now())),
    }
    Ok(ex)
}

/// `m` as the engine stops at it: the failure is just before its time.
fn resolve(m: Moment, loaded: &Loaded) -> Until {
    match m {
        Moment::Time(t) => Until::Time(t),
        Moment::Steps(n) => Until::Steps(n),
        Moment::Failure => {
            let at = loaded.record.failure.time.as_ns();
            Until::Time(VirtualTime::from_ns(at.saturating_sub(1)))
        }
    }
}

fn describe_until(until: Until) -> String {
    match until {
        Until::Time(t) => seconds(t),
        Until::Steps(n) => format!("step {n}"),
    }
}

fn seconds(t: VirtualTime) -> String {
    format!("{:.6} s", t.as_ns() as f64 / 1e9)
}

/// The node named `name`, or a clear error.
fn node_id(names: &[String], name: &str, file: &Path) -> Result<NodeId> {
    names.iter().position(|n| n == name).map(NodeId::at).ok_or_else(|| {
        BadInput(format!("{}: the cluster has no node '{name}' (its nodes: {})", file.display(), names.join(", ")))
            .into()
    })
}
