//! The command line's definition: `simcluster`'s subcommands, their flags
//! and --help texts (clap), each subcommand's help closing with its exit
//! codes.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use engine::RuntimeKind;
use simcluster::cluster::parse_duration_ns;
use simcluster::run::{self, StrategyKind};

/// Deterministic whole-cluster simulation of unmodified distributed software.
///
/// Every node of a cluster boots as a stock Linux guest; one engine owns
/// virtual time and decides, from a seed, everything the guests see. The same
/// seed and the same images give the same execution, byte for byte, and
/// every run ends with the hash of its trace.
///
/// Exit codes, the same in every subcommand: 0 yes (no property failed,
/// reproduced, valid), 1 no (a property failed: details and a replayable
/// failure file under --out), 2 bad input (the message names the file and
/// the problem), 3 simulator or host error, 4 no verdict, 130 interrupted.
/// Each subcommand's --help lists its own.
#[derive(Parser, Debug)]
#[command(name = "simcluster", version, about, long_about, after_help = EXAMPLES)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

const EXAMPLES: &str = "Examples:
  simcluster image build guest-images/hello-cluster
  simcluster run --images guest-images/hello-cluster --seed 7
  simcluster run --images guest-images/db-cluster --executions 20 --out results
  simcluster run --images guest-images/examples/crash-primary --strategy pct --executions 50
  simcluster run --images guest-images/db-cluster --time-budget 1h --strategy dfs
  simcluster run --images guest-images/db-cluster --executions 40 --jobs 4
  simcluster run --images guest-images/db-cluster --executions 40 --shard 1/2 --out s1
  simcluster merge s1 s2
  simcluster replay results/failures/execution-3/failure.json
  simcluster shrink results/failures/execution-3/failure.json
  simcluster check results/failures/execution-3/history.jsonl";

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Build or update a cluster's images (kernel, root filesystem) in the cache.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Explore executions of a cluster and check its properties.
    ///
    /// Boots every node, runs `[node] start` on each, runs the workload, then
    /// checks every invariant. Prints one JSON line at the end.
    Run(RunArgs),
    /// Re-run a recorded failure and confirm the same trace hash and failure.
    ///
    /// With --until, stop the replay at a moment of the execution instead
    /// and look around there: --exec runs a command on a node and prints
    /// its output, --shell opens an interactive shell on a node. The same
    /// moment and commands give the same output, every time.
    ///
    ///   simcluster replay F --until 4.2s --exec n2 "cat /data/log"
    ///   simcluster replay F --until failure --shell n2
    Replay {
        /// A failure file written by `simcluster run` (failure.json), or a
        /// run's --out directory with --execution.
        failure_file: PathBuf,
        /// Replay this failing execution (0-based) of the run whose --out
        /// directory is given.
        #[arg(long, value_name = "I")]
        execution: Option<u64>,
        /// With --execution: its crash-state sibling that applied disk
        /// crash state K.
        #[arg(long, value_name = "K", requires = "execution")]
        crash_state: Option<u64>,
        #[command(flatten)]
        inspect: InspectArgs,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Combine the results of `run --shard K/N` (every shard, 1..N) into one
    /// JSON line, as if one machine had run them all.
    ///
    /// Checks that the shards are of one run (same images hash, seed,
    /// strategy and options; each shard once; none missing) and exits 2
    /// naming the one that is not. Exit 0 when no execution failed, 1
    /// otherwise; the line lists every failure and its failure file, which
    /// replays alone on any machine with the cluster directory.
    Merge {
        /// The --out directories of the shards (or their shard.json files).
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Also write the merged line to DIR/summary.json.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Also write the result as JUnit XML (see `run --junit`).
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
    /// Make a recorded failure smaller: remove whole faults, then drop the
    /// strategy's decisions (delta debugging), while the execution still
    /// fails the same way.
    ///
    /// Faults go first, each with its interval (a crash and its restart, a
    /// partition and its heal, a pause and its resume; every fault of a
    /// kind at once, then one by one); the JSON line lists the faults
    /// left, the smallest set found that still fails. Progress on stderr,
    /// a line per replay. Writes the smaller execution (failure file,
    /// trace, report, pcaps) under OUT/shrunk/. Its event trace is never
    /// longer than the original's; "shorter" means it has fewer faults or
    /// decisions (the replayable trace).
    Shrink {
        /// A failure file written by `simcluster run` (failure.json).
        failure_file: PathBuf,
        /// Replays to spend at most.
        #[arg(long, default_value_t = 40)]
        max_executions: u64,
        /// Stop after this much wall time (e.g. 10m) with the smallest
        /// failing execution found so far (the JSON line's "stopped" says so).
        #[arg(long, value_parser = parse_limit, value_name = "DURATION")]
        time_budget: Option<u64>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Check a recorded history alone: registers for linearizability, or
    /// transactions for a consistency model.
    ///
    /// The same check `[check] history` runs after each execution (with
    /// `[check] model` and `consistency`). Use it on a failure's
    /// history.jsonl, or on a history your own clients (or Jepsen) wrote.
    ///
    /// --model register (the default): one key-value register per key, ops
    /// read, write and cas; `ok` ops happened between invoke and completion,
    /// `fail` ops never happened, `info` ops may have. A `fail` cas whose
    /// completion carries "error":"compare-failed" did not happen either,
    /// but its compare saw the register hold something other than `from`
    /// between invoke and completion, and is checked as such a read. Prints
    /// one JSON line, and the explanation of a violation on stderr.
    ///
    /// --model list-append or rw-register: transactions of micro-ops,
    /// checked as Jepsen's Elle does, with Elle's names (dependency cycles
    /// G0, G1c, G-single-item, G-nonadjacent-item, G2-item and their
    /// -process and -realtime kinds; aborted and intermediate reads G1a,
    /// G1b; lost-update, future-read, internal, incompatible-order, ...;
    /// docs/reference.md has the table of which model forbids what) against
    /// --consistency, one of
    /// strict-serializable, strong-session-serializable, serializable (the
    /// default), strong-session-snapshot-isolation, snapshot-isolation,
    /// repeatable-read, read-committed, read-uncommitted. The file is JSON
    /// lines, a JSON array of events (elle-cli's .json), or Jepsen's
    /// history.edn (a file named *.edn, or one that starts with `{:`, `#`
    /// or a `;` comment); what Jepsen writes reads as it is (no :f, :time or
    /// :process needed, completions without invokes, [:r k] reads, vector
    /// keys, string values). Prints one JSON line
    /// (history, model, consistency, valid, anomalies: name -> count of
    /// those the consistency model forbids, also_found: of those it allows,
    /// ruled_out: the consistency models the anomalies rule out, txns:
    /// counts by outcome) and on stderr the explanation: each anomaly with
    /// its cycle and the reason for each edge.
    ///
    /// --model set: add and read operations, checked as Jepsen's set-full:
    /// each element is stable, lost (acknowledged or seen, then missing
    /// from every read that began later) or never read, stale when a read
    /// that began after it was known missed it; latencies in ms.
    /// Lost, unexpected (read, never added) and duplicated (twice in one
    /// read) elements fail; stale ones too with --consistency
    /// linearizable; no stable element at all is no verdict (exit 4).
    /// --model queue: enqueue, dequeue and drain, checked as Jepsen's
    /// total-queue: lost (acknowledged, never dequeued) and unexpected
    /// (dequeued, never enqueued) elements fail; duplicated and recovered
    /// (an enqueue that ended info, dequeued) ones are reported. Prints
    /// one JSON line (valid, counts, the elements of each kind) and on
    /// stderr each element found with the operations that show it.
    ///
    /// An unreadable file, or one with an op that is not of the model (an
    /// append in an rw-register history, ...), is bad input, exit 2 (the
    /// message names the file and the line); nothing is printed on stdout.
    #[command(after_help = CHECK_FORMATS)]
    Check {
        /// The history file (see the line formats below).
        history: PathBuf,
        /// What the history's ops are: read/write/cas registers,
        /// transactions of append and r (list-append) or w and r
        /// (rw-register) micro-ops, a set (add, read) or a queue (enqueue,
        /// dequeue, drain).
        #[arg(long, value_enum, default_value_t = CheckModel::Register)]
        model: CheckModel,
        /// The consistency model a transactional history is checked against
        /// (default serializable); not for --model register. With --model
        /// set, `linearizable`: stale reads fail too.
        #[arg(long, value_parser = parse_consistency)]
        consistency: Option<ConsistencyArg>,
        /// Search steps allowed per key before giving up (--model register).
        #[arg(long, default_value_t = checker::linearizability::CheckOptions::default().max_steps_per_key)]
        max_steps: u64,
    },
}

/// `simcluster check --help`'s line formats.
const CHECK_FORMATS: &str = r#"History lines (JSON lines; one event per line, an invoke then its completion
per process; times in any monotonic unit, nanoseconds in simcluster):
  register:
    {"process":1,"type":"invoke","time":100,"f":"write","key":"x","value":3}
    {"process":1,"type":"ok","time":250,"f":"write","key":"x","value":3}
    {"process":2,"type":"invoke","time":120,"f":"read","key":"x","value":null}
    {"process":2,"type":"ok","time":300,"f":"read","key":"x","value":3}
    {"process":3,"type":"invoke","time":310,"f":"cas","key":"x","from":1,"to":4}
    {"process":3,"type":"fail","time":400,"f":"cas","key":"x","from":1,"to":4,"error":"compare-failed"}
  list-append / rw-register ("type" is invoke, ok, fail or info; reads are
  null on the invoke, filled in on the ok; w instead of append for rw-register):
    {"type":"invoke","process":0,"time":10,"f":"txn","value":[["append","x",1],["r","y",null]]}
    {"type":"ok","process":0,"time":25,"f":"txn","value":[["append","x",1],["r","y",[1,2]]]}
  or Jepsen's history.edn:
    {:type :invoke, :f :txn, :value [[:append :x 1] [:r :y nil]], :time 10, :process 0, :index 0}
  set (a read's ok carries the whole set):
    {"process":0,"type":"invoke","time":10,"f":"add","value":3}
    {"process":0,"type":"ok","time":20,"f":"add","value":3}
    {"process":1,"type":"invoke","time":30,"f":"read","value":null}
    {"process":1,"type":"ok","time":40,"f":"read","value":[1,2,3]}
  queue (an ok dequeue with null found the queue empty; a drain takes all):
    {"process":0,"type":"invoke","time":10,"f":"enqueue","value":3}
    {"process":1,"type":"ok","time":40,"f":"dequeue","value":3}
    {"process":1,"type":"ok","time":60,"f":"drain","value":[4,5]}
  or, for either, Jepsen's history.edn:
    {:type :ok, :f :read, :value #{1 2 3}, :time 40, :process 1, :index 3}

Examples:
  simcluster check simcluster-out/failures/execution-3/history.jsonl
  simcluster check history.edn --model list-append --consistency snapshot-isolation
  simcluster check history.jsonl --model set"#;

/// `--model` of `simcluster check`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub(crate) enum CheckModel {
    /// Read/write/cas registers, for linearizability.
    Register,
    /// Transactions of append and list reads.
    ListAppend,
    /// Transactions of register writes and reads.
    RwRegister,
    /// A set: adds and whole-set reads (Jepsen's set-full).
    Set,
    /// A queue: enqueues, dequeues, drains (Jepsen's total-queue).
    Queue,
}

/// `--consistency`: a transactional consistency model, or `linearizable`
/// (for --model set).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ConsistencyArg {
    Txn(txncheck::Consistency),
    Linearizable,
}

/// `--consistency`: a consistency model's name.
fn parse_consistency(s: &str) -> Result<ConsistencyArg, String> {
    if s == "linearizable" {
        return Ok(ConsistencyArg::Linearizable);
    }
    s.parse().map(ConsistencyArg::Txn).map_err(|e: txncheck::UnknownName| format!("{e}, or linearizable (--model set)"))
}

#[derive(Subcommand, Debug)]
pub(crate) enum ImageCommand {
    /// Build the kernel and root filesystem that CLUSTER_DIR's cluster.toml asks for.
    ///
    /// Idempotent: inputs are hashed and reused from the cache
    /// ($SIMCLUSTER_CACHE, default ~/.cache/simcluster). The first build
    /// compiles a user-mode Linux kernel (minutes); later ones take seconds.
    Build {
        cluster_dir: PathBuf,
        /// No progress output.
        #[arg(long)]
        quiet: bool,
    },
    /// Build one guest kernel into the cache and print its path as a JSON line.
    ///
    /// `--runtime kvm` builds the KVM runtime's microVM kernel (an x86-64
    /// bzImage from linux-source-7.2 and guest-images/kernel/kvm-microvm.config,
    /// minutes once), which `image build` never builds: a KVM run builds it
    /// on first use unless $SIMCLUSTER_KVM_KERNEL names another one.
    /// `--runtime uml` builds the default user-mode Linux kernel (7.2).
    Kernel {
        /// The runtime whose kernel to build.
        #[arg(long, value_enum)]
        runtime: KernelFor,
        /// No progress output.
        #[arg(long)]
        quiet: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub(crate) enum KernelFor {
    Kvm,
    Uml,
}

/// `replay --until`: a moment of the execution to look around at.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct InspectArgs {
    /// Stop the replay at MOMENT: a virtual time (12.5s, 800ms, 2m: before
    /// the first event due after it), step:N (after the first N engine
    /// steps), or failure (just before the failure's virtual time). The
    /// cluster stays up there for --exec and --shell; with neither, the
    /// replay only prints where it stopped.
    #[arg(long, value_name = "MOMENT", value_parser = parse_moment)]
    pub(crate) until: Option<simcluster::inspect::Moment>,
    /// Run CMD (a line for the guest's /bin/sh, run in /) on NODE at the
    /// moment and print its output (stdout and stderr). Repeat for more
    /// commands, run in order; the exit status is the last one's (124: it
    /// had not finished within --command-limit). The cluster goes on under
    /// the default scheduler while a command runs: virtual time moves only
    /// as far as the command needs (microseconds for reading files).
    #[arg(long, num_args = 2, value_names = ["NODE", "CMD"], requires = "until")]
    pub(crate) exec: Vec<String>,
    /// Then open an interactive shell on NODE: each line is run there as
    /// with --exec; :advance SPAN, :goto MOMENT, :node NAME, :where, :quit.
    #[arg(long, value_name = "NODE", requires = "until")]
    pub(crate) shell: Option<String>,
    /// The virtual time one command may take.
    #[arg(long, value_name = "SPAN", default_value = "10s", value_parser = parse_limit)]
    pub(crate) command_limit: u64,
}

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CommonArgs {
    /// Where traces, console logs and failure files go.
    #[arg(long, default_value = "simcluster-out")]
    pub(crate) out: PathBuf,
    /// Virtual-time limit of one execution (e.g. 90s, 10m); overrides [run] time_limit.
    #[arg(long, value_parser = parse_limit)]
    pub(crate) time_limit: Option<u64>,
    /// Wall seconds a node may compute without letting virtual time advance
    /// before it is reported as hung.
    #[arg(long, default_value_t = 30)]
    pub(crate) watchdog: u64,
    /// No progress output on stderr.
    #[arg(long)]
    pub(crate) quiet: bool,
    /// Keep every execution's traffic as pcap files (per node and whole
    /// network) under DIR/execution-I/. The last execution's and every
    /// failure's are always kept under --out.
    #[arg(long, value_name = "DIR")]
    pub(crate) pcap: Option<PathBuf>,
    /// Host CPU that simcluster and its nodes share: auto (the one it starts
    /// on), off (the host scheduler spreads them), or a CPU number. Only one
    /// node runs at a time, and on one CPU the hand-offs between simcluster,
    /// a node's kernel and its guest programs are direct switches (1.8x
    /// faster fork+exec measured here). Never changes the trace.
    #[arg(long, default_value_t = simcluster::pin::Pin::Auto, value_name = "auto|off|CPU")]
    pub(crate) pin: simcluster::pin::Pin,
    /// Lookahead: a node takes its own timer wake-ups and clock reads
    /// without a round trip to simcluster each, up to the earliest time
    /// anything else in the cluster could happen, and stops at anything
    /// simcluster must see. Every trace is the same either way (the JSON
    /// line's `round_trips` against `grants` shows the saving); off is for
    /// comparisons. User-mode Linux 7.2 nodes only; others ignore it.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pub(crate) lookahead: OnOff,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub(crate) enum OnOff {
    On,
    Off,
}

/// `--lookahead`, or its debug mode (`SIMCLUSTER_DEBUG_LOOKAHEAD_PAST_FRAMES=1`:
/// nodes may run past frames on their way to them, which the engine then
/// reports; see `engine::Lookahead::IgnoringFrames`).
pub(crate) fn lookahead(flag: OnOff) -> engine::Lookahead {
    match flag {
        OnOff::Off => engine::Lookahead::Off,
        OnOff::On if std::env::var_os("SIMCLUSTER_DEBUG_LOOKAHEAD_PAST_FRAMES").is_some_and(|v| v == "1") => {
            engine::Lookahead::IgnoringFrames
        }
        OnOff::On => engine::Lookahead::On,
    }
}

#[derive(clap::Args, Debug)]
pub(crate) struct RunArgs {
    /// The cluster directory (holds cluster.toml, or a docker-compose file).
    #[arg(long, value_name = "CLUSTER_DIR")]
    pub(crate) images: PathBuf,
    /// Seed of the run; execution i uses a seed derived from it and i.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Number of executions to explore (default 1, or unlimited with --time-budget).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) executions: Option<u64>,
    /// Stop at the first failing execution (the default explores every
    /// execution and reports the first failure).
    #[arg(long)]
    pub(crate) until_failure: bool,
    /// Stop starting new executions after this much wall time (e.g. 10m, 2h).
    #[arg(long, value_parser = parse_limit, value_name = "DURATION")]
    pub(crate) time_budget: Option<u64>,
    /// Exploration strategy: how the engine picks among enabled actions.
    #[arg(long, value_enum, default_value_t = StrategyKind::Random)]
    pub(crate) strategy: StrategyKind,
    /// The strategy's bound: PCT's bug depth d (default 3), the number of
    /// delays (default 2), the choice points DFS explores exhaustively
    /// (default 4).
    #[arg(long)]
    pub(crate) depth: Option<u32>,
    /// Choice points over which PCT change points, delays and DFS prefixes
    /// are placed (about the number of choice points of one execution;
    /// default 2000). delay and delay-all count only races, the choice
    /// points a guest can tell apart (two deliveries to one node, or a
    /// delivery and the node's own timers), and without --horizon measure
    /// it: execution 0 is the default schedule, and its races are the horizon.
    #[arg(long)]
    pub(crate) horizon: Option<u64>,
    /// Virtual-clock choice: frame deliveries, disk completions and faults
    /// due within this window of the earliest event compete (e.g. 2ms), so
    /// the strategy may postpone one past another; node timers always fire
    /// on time. Overrides [explore] window.
    #[arg(long, value_parser = parse_limit, value_name = "DURATION")]
    pub(crate) window: Option<u64>,
    /// Node crashes per execution at most; overrides [faults.crash] max.
    #[arg(long)]
    pub(crate) max_crashes: Option<u32>,
    /// Random walks per probe when searching a liveness failure's critical
    /// transition (0: do not search).
    #[arg(long, default_value_t = 2)]
    pub(crate) critical_walks: u32,
    /// Executions run side by side, each with its own nodes (default: one
    /// per CPU, fewer when their guest memory would not fit). Results do not
    /// depend on it: execution i is the same execution whatever N, and
    /// failures are reported in execution order.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..1025))]
    pub(crate) jobs: Option<u64>,
    /// Run one shard of the run's executions: those whose index is K-1
    /// modulo N (the same ones on any machine). Each shard writes
    /// OUT/shard.json; `simcluster merge` combines the N shards' results.
    #[arg(long, value_name = "K/N")]
    pub(crate) shard: Option<simcluster::run::Shard>,
    /// Node runtime: auto picks KVM when /dev/kvm opens and the CPU has vmx/svm
    /// (its nodes boot the image builder's KVM kernel, built on first use, or
    /// $SIMCLUSTER_KVM_KERNEL), else user-mode Linux; prints which and why.
    #[arg(long, value_enum, default_value_t = RuntimeChoice::Auto)]
    pub(crate) runtime: RuntimeChoice,
    /// Boot the cluster once per job and fork every execution from the
    /// moment all agents are ready, instead of booting it for each one
    /// (KVM runtime; strategies random, pct and delay). The boot is then
    /// drawn from a seed of the run's, without faults, and each execution's
    /// own streams begin when it ends, so the executions differ from a run
    /// without it; a failure file records the boot seed and replays cold.
    /// Crash-state siblings fork from the crash point (the same strategy
    /// goes on, the state forced). `--warm-start cold` runs the same
    /// executions and siblings, each booted for itself (any runtime): to
    /// check a warm run, or to compare.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "fork", value_name = "fork|cold")]
    pub(crate) warm_start: Option<WarmStart>,
    /// Also write the result as JUnit XML for a CI system: one test case
    /// per execution (a failure carries its message and the replay
    /// command) and one per [[expect]] reached name. Written whole at the
    /// end, or not at all.
    #[arg(long, value_name = "FILE")]
    pub(crate) junit: Option<PathBuf>,
    /// MiB of failure files the run writes at most (default 64; a gallery
    /// failure's is 1.1 to 2.8 MB). Every
    /// failing execution and crash-state sibling gets a failure file
    /// (`simcluster replay OUT --execution I` replays it), the first with
    /// its trace, logs and reports; beyond the budget a failing execution
    /// gets none, and the JSON line counts it (failure_files.over_budget).
    #[arg(long, value_name = "MIB", default_value_t = run::DEFAULT_FAILURE_BUDGET_MIB)]
    pub(crate) failure_budget: u64,
    #[command(flatten)]
    pub(crate) common: CommonArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum WarmStart {
    /// Executions fork from one boot per job.
    Fork,
    /// The same executions, each booted for itself.
    Cold,
}

/// `--runtime`: a runtime, or `auto` (vmm's `RuntimeKind` plus "let the
/// host decide", which is why this is not that enum).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub(crate) enum RuntimeChoice {
    Auto,
    Kvm,
    Uml,
}

/// A command-line duration that is not one.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a duration (examples: 90s, 10m, 1h)")]
struct NotADuration(String);

/// `--time-limit` and the like: a duration, in ns.
fn parse_limit(s: &str) -> Result<u64, NotADuration> {
    parse_duration_ns(s).ok_or_else(|| NotADuration(s.to_string()))
}

impl RuntimeChoice {
    /// `None`: let [`run::choose_runtime`] decide.
    pub(crate) fn asked(self) -> Option<RuntimeKind> {
        match self {
            RuntimeChoice::Auto => None,
            RuntimeChoice::Kvm => Some(RuntimeKind::Kvm),
            RuntimeChoice::Uml => Some(RuntimeKind::Uml),
        }
    }
}

fn parse_moment(s: &str) -> Result<simcluster::inspect::Moment, String> {
    s.parse()
}

/// The command line, each subcommand's --help closing with its exit codes
/// (`simcluster::exit_codes`, which docs/reference.md is checked against).
pub(crate) fn command() -> clap::Command {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    for (sub, _) in simcluster::exit_codes::TABLE {
        let help = simcluster::exit_codes::help(sub);
        cmd = match sub.split_once(' ') {
            None => cmd.mut_subcommand(sub, |c| append_help(c, help)),
            Some((outer, inner)) => cmd.mut_subcommand(outer, |c| c.mut_subcommand(inner, |c| append_help(c, help))),
        };
    }
    cmd
}

/// `c` with `text` after its own after-help.
fn append_help(c: clap::Command, text: String) -> clap::Command {
    let before = c.get_after_help().map(|h| format!("{h}\n\n")).unwrap_or_default();
    c.after_help(format!("{before}{text}"))
}

#[cfg(test)]
mod tests;
