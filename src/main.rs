//! The `simcluster` command line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use simcluster::cluster::{parse_duration_ns, ClusterError};
use simcluster::image::debs::UnknownPackage;
use simcluster::run::{self, RunOptions};
use simcluster::BadInput;

/// Deterministic whole-cluster simulation of unmodified distributed software.
///
/// Every node of a cluster boots as a stock Linux guest; one engine owns
/// virtual time and decides, from a seed, everything the guests see. The same
/// seed and the same images give the same execution, byte for byte, and
/// every run ends with the hash of its trace.
///
/// Exit codes: 0 no property failed, 1 a property failed (details and a
/// replayable failure file under --out), 2 bad input (the message names the
/// file and the problem), 3 simulator or host error.
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
  simcluster replay results/failures/execution-3/failure.json";

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
    /// Exit 0 when the execution reproduced exactly, 1 when it did not.
    Replay {
        /// A failure file written by `simcluster run` (failure.json).
        failure_file: PathBuf,
        #[command(flatten)]
        common: CommonArgs,
    },
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
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// The cluster directory (holds cluster.toml).
    #[arg(long, value_name = "CLUSTER_DIR")]
    images: PathBuf,
    /// Seed of the run; execution i uses a seed derived from it and i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of executions to explore.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    executions: u64,
    /// Exploration strategy.
    #[arg(long, value_enum, default_value_t = Strategy::Random)]
    strategy: Strategy,
    /// Node runtime: auto picks KVM where it can boot the cluster, else user-mode Linux.
    #[arg(long, value_enum, default_value_t = Runtime::Auto)]
    runtime: Runtime,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Strategy {
    /// Seeded random choice among the earliest events.
    Random,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
enum Runtime {
    Auto,
    Kvm,
    Uml,
}

fn parse_limit(s: &str) -> Result<u64, String> {
    parse_duration_ns(s).ok_or_else(|| format!("{s:?} is not a duration (examples: 90s, 10m, 1h)"))
}

fn hardware_virtualization() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.lines().any(|l| l.starts_with("flags") && (l.contains(" vmx") || l.contains(" svm"))))
        .unwrap_or(false)
}

/// Picks the node runtime and says why.
fn choose_runtime(asked: Runtime) -> Result<&'static str, BadInput> {
    let hv = hardware_virtualization();
    match asked {
        Runtime::Uml => Ok("uml (asked for)"),
        Runtime::Kvm => Err(BadInput(format!(
            "--runtime kvm: the KVM runtime does not boot Linux clusters yet{}; use --runtime uml",
            if hv { "" } else { " (and this host has no vmx/svm)" }
        ))),
        Runtime::Auto if hv => Ok("uml (auto: the host has vmx/svm, but the KVM runtime does not boot Linux clusters yet)"),
        Runtime::Auto => Ok("uml (auto: /dev/kvm offers no hardware virtualization, vmx/svm absent)"),
    }
}

fn options(c: &CommonArgs, seed: u64, executions: u64) -> RunOptions {
    RunOptions {
        seed,
        executions,
        time_limit_ns: c.time_limit,
        out: c.out.clone(),
        watchdog: Duration::from_secs(c.watchdog),
        quiet: c.quiet,
        pcap: c.pcap.clone(),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let bad_input = e.downcast_ref::<BadInput>().is_some()
                || e.downcast_ref::<ClusterError>().is_some()
                || e.downcast_ref::<UnknownPackage>().is_some()
                || e.chain().any(|c| c.downcast_ref::<checker::failure_file::FailureFileError>().is_some());
            eprintln!("simcluster: error: {e:#}");
            ExitCode::from(if bad_input { 2 } else { 3 })
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Image { command: ImageCommand::Build { cluster_dir, quiet } } => {
            let cluster = simcluster::cluster::Cluster::load(&cluster_dir)?;
            let images = simcluster::image::build(&cluster, quiet)?;
            println!(
                "{}",
                serde_json::json!({
                    "kernel": images.kernel,
                    "initrd": images.initrd,
                    "images_hash": images.hash,
                    "kernel_cached": images.kernel_cached,
                    "rootfs_cached": images.rootfs_cached,
                    "wall_seconds": images.wall_seconds,
                    "cache": simcluster::image::cache_dir(),
                })
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) => {
            let why = choose_runtime(args.runtime)?;
            let _ = args.strategy;
            if !args.common.quiet {
                eprintln!("runtime: {why}");
            }
            let opts = options(&args.common, args.seed, args.executions);
            let (summary, failed) = run::run(&args.images, &opts)?;
            if failed && !opts.quiet {
                if let Some(f) = &summary.failure {
                    eprintln!("FAILED: {}", f["message"].as_str().unwrap_or(""));
                }
                if let Some(p) = &summary.failure_file {
                    eprintln!("replay with: simcluster replay {}", p.display());
                }
            }
            println!("{}", serde_json::to_string(&summary)?);
            Ok(if failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
        }
        Command::Replay { failure_file, common } => {
            let opts = options(&common, 0, 1);
            let r = run::replay(&failure_file, &opts)?;
            println!("{}", serde_json::to_string(&r)?);
            Ok(if r.reproduced { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
    }
}
