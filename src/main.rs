//! The `simcluster` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use engine::RuntimeKind;
use simcluster::cluster::{parse_duration_ns, ClusterError};
use simcluster::image::debs::PackageError;
use simcluster::replay;
use simcluster::run::{self, RunOptions, StrategyKind, StrategyOptions};
use simcluster::BadInput;

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
struct Cli {
    #[command(subcommand)]
    command: Command,
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
enum Command {
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
enum CheckModel {
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
enum ConsistencyArg {
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
enum ImageCommand {
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
enum KernelFor {
    Kvm,
    Uml,
}

/// `replay --until`: a moment of the execution to look around at.
#[derive(clap::Args, Debug, Clone)]
struct InspectArgs {
    /// Stop the replay at MOMENT: a virtual time (12.5s, 800ms, 2m: before
    /// the first event due after it), step:N (after the first N engine
    /// steps), or failure (just before the failure's virtual time). The
    /// cluster stays up there for --exec and --shell; with neither, the
    /// replay only prints where it stopped.
    #[arg(long, value_name = "MOMENT", value_parser = parse_moment)]
    until: Option<simcluster::inspect::Moment>,
    /// Run CMD (a line for the guest's /bin/sh, run in /) on NODE at the
    /// moment and print its output (stdout and stderr). Repeat for more
    /// commands, run in order; the exit status is the last one's (124: it
    /// had not finished within --command-limit). The cluster goes on under
    /// the default scheduler while a command runs: virtual time moves only
    /// as far as the command needs (microseconds for reading files).
    #[arg(long, num_args = 2, value_names = ["NODE", "CMD"], requires = "until")]
    exec: Vec<String>,
    /// Then open an interactive shell on NODE: each line is run there as
    /// with --exec; :advance SPAN, :goto MOMENT, :node NAME, :where, :quit.
    #[arg(long, value_name = "NODE", requires = "until")]
    shell: Option<String>,
    /// The virtual time one command may take.
    #[arg(long, value_name = "SPAN", default_value = "10s", value_parser = parse_limit)]
    command_limit: u64,
}

#[derive(clap::Args, Debug, Clone)]
struct CommonArgs {
    /// Where traces, console logs and failure files go.
    #[arg(long, default_value = "simcluster-out")]
    out: PathBuf,
    /// Virtual-time limit of one execution (e.g. 90s, 10m); overrides [run] time_limit.
    #[arg(long, value_parser = parse_limit)]
    time_limit: Option<u64>,
    /// Wall seconds a node may compute without letting virtual time advance
    /// before it is reported as hung.
    #[arg(long, default_value_t = 30)]
    watchdog: u64,
    /// No progress output on stderr.
    #[arg(long)]
    quiet: bool,
    /// Keep every execution's traffic as pcap files (per node and whole
    /// network) under DIR/execution-I/. The last execution's and every
    /// failure's are always kept under --out.
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,
    /// Host CPU that simcluster and its nodes share: auto (the one it starts
    /// on), off (the host scheduler spreads them), or a CPU number. Only one
    /// node runs at a time, and on one CPU the hand-offs between simcluster,
    /// a node's kernel and its guest programs are direct switches (1.8x
    /// faster fork+exec measured here). Never changes the trace.
    #[arg(long, default_value_t = simcluster::pin::Pin::Auto, value_name = "auto|off|CPU")]
    pin: simcluster::pin::Pin,
    /// Lookahead: a node takes its own timer wake-ups and clock reads
    /// without a round trip to simcluster each, up to the earliest time
    /// anything else in the cluster could happen, and stops at anything
    /// simcluster must see. Every trace is the same either way (the JSON
    /// line's `round_trips` against `grants` shows the saving); off is for
    /// comparisons. User-mode Linux 7.2 nodes only; others ignore it.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    lookahead: OnOff,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum OnOff {
    On,
    Off,
}

/// `--lookahead`, or its debug mode (`SIMCLUSTER_DEBUG_LOOKAHEAD_PAST_FRAMES=1`:
/// nodes may run past frames on their way to them, which the engine then
/// reports; see `engine::Lookahead::IgnoringFrames`).
fn lookahead(flag: OnOff) -> engine::Lookahead {
    match flag {
        OnOff::Off => engine::Lookahead::Off,
        OnOff::On if std::env::var_os("SIMCLUSTER_DEBUG_LOOKAHEAD_PAST_FRAMES").is_some_and(|v| v == "1") => {
            engine::Lookahead::IgnoringFrames
        }
        OnOff::On => engine::Lookahead::On,
    }
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The cluster directory (holds cluster.toml, or a docker-compose file).
    #[arg(long, value_name = "CLUSTER_DIR")]
    images: PathBuf,
    /// Seed of the run; execution i uses a seed derived from it and i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of executions to explore (default 1, or unlimited with --time-budget).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    executions: Option<u64>,
    /// Stop at the first failing execution (the default explores every
    /// execution and reports the first failure).
    #[arg(long)]
    until_failure: bool,
    /// Stop starting new executions after this much wall time (e.g. 10m, 2h).
    #[arg(long, value_parser = parse_limit, value_name = "DURATION")]
    time_budget: Option<u64>,
    /// Exploration strategy: how the engine picks among enabled actions.
    #[arg(long, value_enum, default_value_t = StrategyKind::Random)]
    strategy: StrategyKind,
    /// The strategy's bound: PCT's bug depth d (default 3), the number of
    /// delays (default 2), the choice points DFS explores exhaustively
    /// (default 4).
    #[arg(long)]
    depth: Option<u32>,
    /// Choice points over which PCT change points, delays and DFS prefixes
    /// are placed (about the number of choice points of one execution;
    /// default 2000). delay and delay-all count only races, the choice
    /// points a guest can tell apart (two deliveries to one node, or a
    /// delivery and the node's own timers), and without --horizon measure
    /// it: execution 0 is the default schedule, and its races are the horizon.
    #[arg(long)]
    horizon: Option<u64>,
    /// Virtual-clock choice: frame deliveries, disk completions and faults
    /// due within this window of the earliest event compete (e.g. 2ms), so
    /// the strategy may postpone one past another; node timers always fire
    /// on time. Overrides [explore] window.
    #[arg(long, value_parser = parse_limit, value_name = "DURATION")]
    window: Option<u64>,
    /// Node crashes per execution at most; overrides [faults.crash] max.
    #[arg(long)]
    max_crashes: Option<u32>,
    /// Random walks per probe when searching a liveness failure's critical
    /// transition (0: do not search).
    #[arg(long, default_value_t = 2)]
    critical_walks: u32,
    /// Executions run side by side, each with its own nodes (default: one
    /// per CPU, fewer when their guest memory would not fit). Results do not
    /// depend on it: execution i is the same execution whatever N, and
    /// failures are reported in execution order.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..1025))]
    jobs: Option<u64>,
    /// Run one shard of the run's executions: those whose index is K-1
    /// modulo N (the same ones on any machine). Each shard writes
    /// OUT/shard.json; `simcluster merge` combines the N shards' results.
    #[arg(long, value_name = "K/N")]
    shard: Option<simcluster::run::Shard>,
    /// Node runtime: auto picks KVM when /dev/kvm opens and the CPU has vmx/svm
    /// (its nodes boot the image builder's KVM kernel, built on first use, or
    /// $SIMCLUSTER_KVM_KERNEL), else user-mode Linux; prints which and why.
    #[arg(long, value_enum, default_value_t = RuntimeChoice::Auto)]
    runtime: RuntimeChoice,
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
    warm_start: Option<WarmStart>,
    /// Also write the result as JUnit XML for a CI system: one test case
    /// per execution (a failure carries its message and the replay
    /// command) and one per [[expect]] reached name. Written whole at the
    /// end, or not at all.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// MiB of failure files the run writes at most (default 64; a gallery
    /// failure's is 1.1 to 2.8 MB). Every
    /// failing execution and crash-state sibling gets a failure file
    /// (`simcluster replay OUT --execution I` replays it), the first with
    /// its trace, logs and reports; beyond the budget a failing execution
    /// gets none, and the JSON line counts it (failure_files.over_budget).
    #[arg(long, value_name = "MIB", default_value_t = run::DEFAULT_FAILURE_BUDGET_MIB)]
    failure_budget: u64,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum WarmStart {
    /// Executions fork from one boot per job.
    Fork,
    /// The same executions, each booted for itself.
    Cold,
}

/// `--runtime`: a runtime, or `auto` (vmm's `RuntimeKind` plus "let the
/// host decide", which is why this is not that enum).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum RuntimeChoice {
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
    fn asked(self) -> Option<RuntimeKind> {
        match self {
            RuntimeChoice::Auto => None,
            RuntimeChoice::Kvm => Some(RuntimeKind::Kvm),
            RuntimeChoice::Uml => Some(RuntimeKind::Uml),
        }
    }
}

fn options(c: &CommonArgs) -> RunOptions {
    RunOptions {
        seed: 1,
        executions: Some(1),
        time_budget: None,
        time_limit_ns: c.time_limit,
        out: c.out.clone(),
        watchdog: Duration::from_secs(c.watchdog),
        quiet: c.quiet,
        pcap: c.pcap.clone(),
        strategy: StrategyOptions {
            kind: StrategyKind::Random,
            depth: 0,
            horizon: run::DEFAULT_HORIZON,
            measure_horizon: false,
        },
        until_failure: false,
        warm_start: None,
        window_ns: None,
        max_crashes: None,
        critical_walks: 0,
        // Replays and shrinks take the runtime from the failure file.
        runtime: RuntimeKind::Uml,
        pin: c.pin,
        lookahead: lookahead(c.lookahead),
        jobs: Some(1),
        shard: simcluster::run::Shard::ALL,
        failure_budget_bytes: run::DEFAULT_FAILURE_BUDGET_MIB << 20,
    }
}

/// Applies `--pin` to this thread, so to every node started from it; a CPU
/// this process may not use is bad input.
fn pin(c: &CommonArgs) -> anyhow::Result<Option<usize>> {
    let cpu = simcluster::pin::apply(c.pin).map_err(|e| BadInput(e.to_string()))?;
    if !c.quiet {
        if let Some(cpu) = cpu {
            eprintln!("pinned to host CPU {cpu} with its nodes (--pin off to spread them)");
        }
    }
    Ok(cpu)
}

/// Says which `[[expect]] reached` names no execution reached, and lists
/// the Antithesis SDK's assertions with their counts and verdicts.
fn report_unreached(summary: &simcluster::run::Summary) {
    if !summary.antithesis.is_empty() {
        eprintln!("Antithesis SDK assertions over {} executions:", summary.executions);
    }
    for p in summary.antithesis.values() {
        let c = &p.count;
        let verdict = match p.why {
            None => "passed".to_string(),
            Some(why) => format!("FAILED: {why}"),
        };
        let at = if c.location.is_empty() { String::new() } else { format!(" at {}", c.location) };
        let nodes = if c.nodes.is_empty() { String::new() } else { format!(" on {}", c.nodes.join(",")) };
        let first = c.first_failure.as_deref().map(|f| format!("; first failure {f}")).unwrap_or_default();
        eprintln!(
            "  {verdict}: {}{at}: {} passing, {} failing lines in {} executions{nodes}{first}",
            c.title(),
            c.passes,
            c.fails,
            c.executions
        );
    }
    if !summary.test_composer.is_empty() {
        eprintln!("Test Composer commands over {} executions:", summary.executions);
    }
    for (name, c) in &summary.test_composer {
        let failed = match c.first_failed_status {
            Some(s) => format!(", {} with a non-zero status (first {s})", c.failed),
            None => String::new(),
        };
        eprintln!("  {name}: {} runs{failed}", c.runs);
    }
    for id in &summary.antithesis_unmet {
        let p = &summary.antithesis[id];
        eprintln!(
            "NOT SATISFIED: Antithesis assertion {} {} in {} executions",
            p.count.title(),
            p.why.unwrap_or("failed"),
            summary.executions
        );
    }
    for name in &summary.unreached {
        eprintln!(
            "NOT REACHED: no execution of {} printed \"@reached {name}\" (cluster.toml [[expect]] reached = {name:?}); \
             explore more executions, another strategy, or check that the program prints it",
            summary.executions
        );
    }
}

/// The command line, each subcommand's --help closing with its exit codes
/// (`simcluster::exit_codes`, which docs/reference.md is checked against).
fn command() -> clap::Command {
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

fn main() -> ExitCode {
    use clap::FromArgMatches;
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    // Ctrl-C, SIGTERM or SIGHUP: take the nodes down with us (their helper
    // processes would otherwise outlive simcluster) and say so; outputs
    // are written whole or not at all, so nothing is left half-written.
    // A second signal while this runs is ignored by the handler thread.
    let _ = ctrlc::set_handler(|| {
        simcluster::run::mark_exiting();
        vmm::uml::node::kill_all_nodes();
        simcluster::run::remove_scratch_now();
        eprintln!("simcluster: interrupted; the nodes are stopped");
        std::process::exit(130);
    });
    let result = dispatch(cli);
    if simcluster::run::exiting() {
        // The signal handler is taking the nodes down and will exit 130;
        // whatever the run met on the way down is not its result.
        loop {
            std::thread::park();
        }
    }
    simcluster::run::remove_scratch();
    match result {
        Ok(code) => code,
        Err(e) => {
            let bad_input = e.downcast_ref::<BadInput>().is_some()
                || e.downcast_ref::<ClusterError>().is_some()
                || e.downcast_ref::<PackageError>().is_some()
                || e.downcast_ref::<simcluster::image::oci::ImageError>().is_some()
                || e.chain().any(|c| {
                    // A failure file that cannot be read is bad input; one
                    // that cannot be written (a full disk) is the host's.
                    use checker::failure_file::FailureFileError;
                    c.downcast_ref::<FailureFileError>().is_some_and(|f| !matches!(f, FailureFileError::Write { .. }))
                });
            eprintln!("simcluster: error: {e:#}");
            use simcluster::exit_codes::{BAD_INPUT, HOST_ERROR};
            ExitCode::from(if bad_input { BAD_INPUT } else { HOST_ERROR })
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Image { command: ImageCommand::Build { cluster_dir, quiet } } => image_build(&cluster_dir, quiet),
        Command::Image { command: ImageCommand::Kernel { runtime, quiet } } => image_kernel(runtime, quiet),
        Command::Run(args) => run_command(&args),
        Command::Merge { shards, out, junit } => merge(&shards, out, junit.as_deref()),
        Command::Replay { failure_file, execution, crash_state, inspect, common } => {
            let file = match execution {
                Some(i) => run::shard::failure_file_of(&failure_file, i, crash_state)?,
                None if failure_file.is_dir() => {
                    return Err(BadInput(format!(
                        "{}: a directory; pass a failure file, or a run's --out directory with --execution I",
                        failure_file.display()
                    ))
                    .into())
                }
                None => failure_file,
            };
            match inspect.until {
                Some(until) => inspect_command(&file, until, &inspect, &common),
                None => replay_command(&file, &common),
            }
        }
        Command::Shrink { failure_file, max_executions, time_budget, common } => {
            let limits = replay::ShrinkLimits { max_executions, time_budget: time_budget.map(Duration::from_nanos) };
            shrink(&failure_file, limits, &common)
        }
        Command::Check { history, model, consistency, max_steps } => {
            check_history(&history, model, consistency, max_steps)
        }
    }
}

/// `simcluster check`: one history file's verdict as one JSON line.
fn check_history(
    path: &Path,
    model: CheckModel,
    consistency: Option<ConsistencyArg>,
    max_steps: u64,
) -> anyhow::Result<ExitCode> {
    use checker::history::History;
    use checker::linearizability::{check, CheckOptions, CheckResult};
    let text = std::fs::read_to_string(path).map_err(|e| BadInput(format!("{}: cannot read: {e}", path.display())))?;
    let edn = path.extension().is_some_and(|e| e == "edn") || checker::history_check::looks_like_edn(&text);
    if matches!(model, CheckModel::Set | CheckModel::Queue) {
        return check_collection_history(path, &text, model, consistency);
    }
    let consistency = match consistency {
        Some(ConsistencyArg::Linearizable) => {
            let e = "linearizable".parse::<txncheck::Consistency>().expect_err("not a transactional model");
            return Err(BadInput(format!(
                "--consistency: {e}; linearizable applies to --model set (stale reads fail)"
            ))
            .into());
        }
        Some(ConsistencyArg::Txn(c)) => Some(c),
        None => None,
    };
    let txn_model = match model {
        CheckModel::Register | CheckModel::Set | CheckModel::Queue => None,
        CheckModel::ListAppend => Some(txncheck::Model::ListAppend),
        CheckModel::RwRegister => Some(txncheck::Model::RwRegister),
    };
    if let Some(m) = txn_model {
        let c = consistency.unwrap_or(checker::history_check::HistoryModel::DEFAULT_CONSISTENCY);
        return check_txn_history(path, &text, edn, m, c);
    }
    if consistency.is_some() {
        return Err(BadInput(
            "--consistency applies to --model list-append and rw-register; the register model is checked for \
             linearizability"
                .into(),
        )
        .into());
    }
    if edn {
        return Err(BadInput(format!(
            "{}: an EDN history (Jepsen's history.edn) is read with --model list-append or rw-register; the \
             register model reads JSON lines",
            path.display()
        ))
        .into());
    }
    let hint = if text.contains("\"txn\"") {
        " (a transactional history? add --model list-append or rw-register)"
    } else if text.contains("\"add\"") {
        " (a set history? add --model set)"
    } else if text.contains("\"enqueue\"") || text.contains("\"dequeue\"") {
        " (a queue history? add --model queue)"
    } else {
        ""
    };
    let bad = |e: checker::history::HistoryError| BadInput(format!("{}: {e}{hint}", path.display()));
    let history = History::from_json_lines(&text).map_err(bad)?;
    let verdict = check(&history, &CheckOptions { max_steps_per_key: max_steps }).map_err(bad)?;
    let (line, code) = match &verdict {
        CheckResult::Ok { keys, ops } => {
            (serde_json::json!({"history": path, "linearizable": true, "keys": keys, "ops": ops}), 0)
        }
        CheckResult::Violation(v) => {
            eprint!("{v}");
            let line = serde_json::json!({
                "history": path, "linearizable": false, "key": v.key, "key_ops": v.key_ops,
                "prefix": v.linearized.len(), "stuck": v.stuck.len(),
            });
            (line, 1)
        }
        CheckResult::Unknown { key, steps } => {
            eprintln!("key {key:?}: no verdict after {steps} search steps (raise --max-steps)");
            (
                serde_json::json!({"history": path, "linearizable": null, "key": key, "steps": steps}),
                simcluster::exit_codes::NO_VERDICT,
            )
        }
    };
    println!("{line}");
    Ok(ExitCode::from(code))
}

/// `simcluster check --model set|queue`: the verdict as one JSON line, the
/// elements found with their operations on stderr.
fn check_collection_history(
    path: &Path,
    text: &str,
    model: CheckModel,
    consistency: Option<ConsistencyArg>,
) -> anyhow::Result<ExitCode> {
    let name = if model == CheckModel::Set { "set" } else { "queue" };
    let linearizable = match (model, consistency) {
        (_, None) => false,
        (CheckModel::Set, Some(ConsistencyArg::Linearizable)) => true,
        _ => {
            return Err(BadInput(format!(
                "--model {name} takes {}",
                if model == CheckModel::Set {
                    "--consistency linearizable (stale reads fail) or none"
                } else {
                    "no --consistency"
                }
            ))
            .into())
        }
    };
    let bad = |e: checker::collection_history::CollectionHistoryError| BadInput(format!("{}: {e}", path.display()));
    let (mut line, explanation, code) = if model == CheckModel::Set {
        let options = checker::set_full::SetOptions { linearizable };
        let r = checker::set_full::check_text(text, options).map_err(bad)?;
        let code = match r.valid {
            Some(true) => 0,
            Some(false) => 1,
            None => simcluster::exit_codes::NO_VERDICT,
        };
        (r.to_json(), r.to_string(), code)
    } else {
        let r = checker::total_queue::check_text(text).map_err(bad)?;
        (r.to_json(), r.to_string(), if r.valid { 0 } else { 1 })
    };
    line["history"] = serde_json::json!(path);
    line["model"] = serde_json::json!(name);
    eprint!("{explanation}");
    println!("{line}");
    Ok(ExitCode::from(code))
}

/// `simcluster check --model list-append|rw-register`: the verdict as one
/// JSON line, txncheck's explanation on stderr.
fn check_txn_history(
    path: &Path,
    text: &str,
    edn: bool,
    model: txncheck::Model,
    consistency: txncheck::Consistency,
) -> anyhow::Result<ExitCode> {
    let parsed = if edn { txncheck::parse_edn(text) } else { checker::history_check::parse_txn_history(text) };
    let history = parsed.map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    txncheck::check_model(&history, model).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let report = txncheck::check(&history, model, consistency);
    let line = serde_json::json!({
        "history": path,
        "model": model,
        "consistency": consistency,
        "valid": report.valid,
        "anomalies": report.counts_of(&report.anomaly_types),
        "also_found": report.counts_of(&report.also_found),
        "ruled_out": report.ruled_out,
        "txns": report.txns,
    });
    eprint!("{report}");
    println!("{line}");
    Ok(ExitCode::from(if report.valid { 0 } else { 1 }))
}

/// `simcluster image kernel`: the kernel's path and cache key as one JSON line.
fn image_kernel(runtime: KernelFor, quiet: bool) -> anyhow::Result<ExitCode> {
    use simcluster::image::kernel;
    let began = std::time::Instant::now();
    let k = match runtime {
        KernelFor::Kvm => kernel::ensure_kvm_kernel(quiet)?,
        KernelFor::Uml => kernel::ensure_kernel(kernel::KernelSeries::default(), quiet)?,
    };
    println!(
        "{}",
        serde_json::json!({
            "kernel": k.path,
            "key": k.key,
            "cached": k.cached,
            "source_series": k.series.name(),
            "wall_seconds": began.elapsed().as_secs_f64(),
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// `simcluster image build`: the images' paths and hash as one JSON line.
fn image_build(cluster_dir: &Path, quiet: bool) -> anyhow::Result<ExitCode> {
    let cluster = simcluster::cluster::Cluster::load(cluster_dir)?;
    let images = simcluster::image::build(&cluster, quiet)?;
    println!(
        "{}",
        serde_json::json!({
            "kernel": images.kernel,
            "initrd": images.initrd,
            "root": images.root,
            "images_hash": images.hash,
            "kernel_cached": images.kernel_cached,
            "rootfs_cached": images.rootfs_cached,
            "wall_seconds": images.wall_seconds,
            "cache": simcluster::image::cache_dir(),
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// `simcluster run`: the summary as one JSON line; exit 1 when a property failed.
fn run_command(args: &RunArgs) -> anyhow::Result<ExitCode> {
    let (runtime, why) = run::choose_runtime(args.runtime.asked(), &run::HostVirt::detect())?;
    if !args.common.quiet {
        eprintln!("runtime: {why}");
    }
    let kind = args.strategy;
    let opts = RunOptions {
        seed: args.seed,
        executions: args.executions,
        time_budget: args.time_budget.map(Duration::from_nanos),
        strategy: StrategyOptions {
            kind,
            depth: args.depth.unwrap_or(kind.default_depth()),
            horizon: args.horizon.unwrap_or(run::DEFAULT_HORIZON).max(1),
            measure_horizon: args.horizon.is_none(),
        },
        until_failure: args.until_failure,
        warm_start: args.warm_start.map(|w| match w {
            WarmStart::Fork => run::WarmStartMode::Fork,
            WarmStart::Cold => run::WarmStartMode::Cold,
        }),
        window_ns: args.window,
        max_crashes: args.max_crashes,
        critical_walks: args.critical_walks,
        runtime,
        jobs: args.jobs.map(|j| j as usize),
        shard: args.shard.unwrap_or(simcluster::run::Shard::ALL),
        failure_budget_bytes: args.failure_budget.saturating_mul(1 << 20),
        ..options(&args.common)
    };
    // Checked before the run: a JUnit file that cannot be written is bad
    // input now, not an error after hours of exploring; and the cluster's
    // name and [[expect]] names are those the run starts with, not those
    // of a cluster.toml edited meanwhile.
    let junit = match &args.junit {
        None => None,
        Some(p) => {
            check_writable(p)?;
            Some((p, simcluster::cluster::Cluster::load(&args.images)?))
        }
    };
    let (summary, failed) = run::run(&args.images, &opts)?;
    if let Some((p, cluster)) = junit {
        simcluster::junit::write(p, &summary, &cluster.name, &cluster.expect_reached)?;
    }
    if failed && !opts.quiet {
        if let Some(f) = &summary.figures.failure {
            eprintln!("FAILED: {}", f.message);
        }
        if let Some(p) = &summary.failure_file {
            eprintln!("replay with: simcluster replay {}", p.display());
        }
        let others: Vec<String> = summary
            .failing_executions
            .iter()
            .skip(1)
            .filter(|f| f.failure_file.is_some())
            .map(|f| match f.crash_state {
                None => f.execution.to_string(),
                Some(k) => format!("{} --crash-state {k}", f.execution),
            })
            .collect();
        if !others.is_empty() {
            let more = if others.len() > 8 { ", ..." } else { "" };
            eprintln!(
                "the other failing executions replay with: simcluster replay {} --execution I, I = {}{more}",
                opts.out.display(),
                others[..others.len().min(8)].join(", ")
            );
        }
    }
    report_unreached(&summary);
    println!("{}", serde_json::to_string(&summary)?);
    Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// `simcluster merge`: the shards' summaries as one (written to `out` too).
fn merge(shards: &[PathBuf], out: Option<PathBuf>, junit: Option<&Path>) -> anyhow::Result<ExitCode> {
    if let Some(p) = junit {
        check_writable(p)?;
    }
    let summary = simcluster::run::shard::merge(shards, out.clone().unwrap_or_default())?;
    let line = serde_json::to_string(&summary)?;
    if let Some(p) = junit {
        // No cluster file here: the [[expect]] names known are those unreached.
        simcluster::junit::write(p, &summary, "simcluster", &summary.unreached)?;
    }
    if let Some(dir) = &out {
        std::fs::create_dir_all(dir)?;
        simcluster::outputs::write_atomic(&dir.join("summary.json"), format!("{line}\n").as_bytes())?;
    }
    if let Some(f) = summary.failing_executions.first() {
        eprintln!("FAILED: execution {} of {} failed first: {}", f.execution, summary.executions, f.message);
        if let Some(p) = &f.failure_file {
            eprintln!("replay with: simcluster replay {}", p.display());
        }
    }
    report_unreached(&summary);
    println!("{line}");
    Ok(if summary.failed() { ExitCode::from(1) } else { ExitCode::SUCCESS })
}

/// A file the run will write at its end: its directory must exist, and it
/// must not be a directory.
fn check_writable(path: &Path) -> anyhow::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(BadInput(format!("{}: its directory {} does not exist", path.display(), dir.display())).into());
    }
    if path.is_dir() {
        return Err(BadInput(format!("{}: is a directory, not a file to write", path.display())).into());
    }
    Ok(())
}

/// `simcluster replay`: exit 1, with the first differing trace line, when
/// the execution did not reproduce.
fn replay_command(failure_file: &Path, common: &CommonArgs) -> anyhow::Result<ExitCode> {
    pin(common)?;
    let opts = options(common);
    let r = replay::replay(failure_file, &opts)?;
    if !r.reproduced && !opts.quiet {
        eprintln!("NOT REPRODUCED: trace hash {} (recorded {})", r.trace_hash, r.expected_trace_hash);
        if let Some(d) = &r.divergence {
            eprintln!("first difference at trace line {}:", d.line);
            eprintln!("  recorded: {}", d.expected.as_deref().unwrap_or("(end of trace)"));
            eprintln!("  replayed: {}", d.actual.as_deref().unwrap_or("(end of trace)"));
        }
        if let Some(cause) = &r.likely_cause {
            eprintln!("likely cause: {cause}");
        }
    }
    println!("{}", serde_json::to_string(&r)?);
    Ok(if r.reproduced { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// `simcluster replay --until`: exit status the last command's.
fn inspect_command(
    failure_file: &Path,
    until: simcluster::inspect::Moment,
    args: &InspectArgs,
    common: &CommonArgs,
) -> anyhow::Result<ExitCode> {
    pin(common)?;
    let req = simcluster::inspect::InspectRequest {
        until,
        execs: args.exec.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect(),
        shell: args.shell.clone(),
        command_limit: Duration::from_nanos(args.command_limit),
    };
    let status = simcluster::inspect::inspect(failure_file, &options(common), &req)?;
    Ok(ExitCode::from(status))
}

fn parse_moment(s: &str) -> Result<simcluster::inspect::Moment, String> {
    s.parse()
}

/// `simcluster shrink`: exit 1 when nothing could be dropped.
fn shrink(failure_file: &Path, limits: replay::ShrinkLimits, common: &CommonArgs) -> anyhow::Result<ExitCode> {
    pin(common)?;
    let r = replay::shrink(failure_file, &options(common), limits)?;
    if !common.quiet {
        eprintln!(
            "shrunk: {} -> {} faults, {} -> {} decisions, {} -> {} trace events{}; written to {}",
            r.original_faults.len(),
            r.faults.len(),
            r.original_decisions,
            r.decisions,
            r.original_events,
            r.events,
            r.stopped.as_deref().map(|s| format!(" (stopped: {s})")).unwrap_or_default(),
            r.failure_file.display()
        );
        for f in &r.faults {
            eprintln!("  needed: {f}");
        }
    }
    println!("{}", serde_json::to_string(&r)?);
    Ok(if r.shorter { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

#[cfg(test)]
mod tests {
    use super::command;

    /// docs/reference.md's section `### simcluster SUB`: its lines.
    fn section(doc: &str, sub: &str) -> Vec<String> {
        let heading = format!("### simcluster {sub}");
        let mut lines = doc.lines().skip_while(|l| l.trim_end() != heading);
        assert!(lines.next().is_some(), "docs/reference.md has no section {heading:?}");
        lines.take_while(|l| !l.starts_with("## ") && !l.starts_with("### ")).map(str::to_string).collect()
    }

    fn reference() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference.md");
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// The clap command of `sub` (`run`, `image build`).
    fn subcommand(sub: &str) -> clap::Command {
        let mut c = command();
        for word in sub.split(' ') {
            c = c.find_subcommand(word).unwrap_or_else(|| panic!("no subcommand {sub}")).clone();
        }
        c
    }

    #[test]
    fn the_reference_documents_every_flag_and_no_other() {
        let doc = reference();
        for (sub, _) in simcluster::exit_codes::TABLE {
            let lines = section(&doc, sub);
            let documented: Vec<String> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("| `--"))
                .map(|l| format!("--{}", l.split([' ', '`']).next().unwrap_or("")))
                .collect();
            let cmd = subcommand(sub);
            let flags: Vec<String> = cmd
                .get_arguments()
                .filter_map(|a| a.get_long())
                .filter(|l| !matches!(*l, "help" | "version"))
                .map(|l| format!("--{l}"))
                .collect();
            let missing: Vec<&String> = flags.iter().filter(|f| !documented.contains(f)).collect();
            assert!(missing.is_empty(), "docs/reference.md, simcluster {sub}: undocumented {missing:?}");
            let unknown: Vec<&String> = documented.iter().filter(|f| !flags.contains(f)).collect();
            assert!(unknown.is_empty(), "docs/reference.md, simcluster {sub}: no such flag {unknown:?}");
        }
    }

    #[test]
    fn every_subcommand_has_its_exit_codes_in_help_and_in_the_reference() {
        let doc = reference();
        let top: Vec<String> = command().get_subcommands().map(|c| c.get_name().to_string()).collect();
        for (sub, rows) in simcluster::exit_codes::TABLE {
            let lines = section(&doc, sub);
            for (code, meaning) in *rows {
                let row = format!("| {code} | {meaning} |");
                assert!(lines.iter().any(|l| l.trim_end() == row), "docs/reference.md, simcluster {sub}: no row {row}");
            }
            // (--help wraps its lines to the terminal: compare words.)
            let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
            let help = subcommand(sub).render_long_help().to_string();
            let want = words(&simcluster::exit_codes::help(sub));
            assert!(words(&help).contains(&want), "simcluster {sub} --help lacks {want:?}: {help}");
        }
        // Every subcommand (and image's) is in the table.
        for name in top {
            let listed = simcluster::exit_codes::TABLE.iter().any(|(s, _)| s.split(' ').next() == Some(name.as_str()));
            assert!(listed || name == "help", "simcluster {name} has no exit codes in exit_codes::TABLE");
        }
    }
}
