//! The `simcluster` command line: parses it ([`cli`]), runs the
//! subcommand ([`commands`], [`check_cmd`]) and turns its error into an
//! exit code.

mod check_cmd;
mod cli;
mod commands;

use std::process::ExitCode;
use std::time::Duration;

use cli::{Cli, Command, ImageCommand};
use simcluster::cluster::ClusterError;
use simcluster::image::debs::PackageError;
use simcluster::replay;
use simcluster::run;
use simcluster::BadInput;

fn main() -> ExitCode {
    use clap::FromArgMatches;
    let cli = Cli::from_arg_matches(&cli::command().get_matches()).unwrap_or_else(|e| e.exit());
    // Ctrl-C, SIGTERM or SIGHUP: take the nodes down with us (their helper
    // processes would otherwise outlive simcluster) and say so; outputs
    // are written whole or not at all, so nothing is left half-written.
    // A second signal while this runs is ignored by the handler thread.
    let _ = ctrlc::set_handler(|| {
        simcluster::run::mark_exiting();
        engine::kill_all_nodes();
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
                    use explore::failure_file::FailureFileError;
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
        Command::Image { command: ImageCommand::Build { cluster_dir, quiet } } => {
            commands::image_build(&cluster_dir, quiet)
        }
        Command::Image { command: ImageCommand::Kernel { runtime, quiet } } => commands::image_kernel(runtime, quiet),
        Command::Run(args) => commands::run_command(&args),
        Command::Merge { shards, out, junit } => commands::merge(&shards, out, junit.as_deref()),
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
                Some(until) => commands::inspect_command(&file, until, &inspect, &common),
                None => commands::replay_command(&file, &common),
            }
        }
        Command::Shrink { failure_file, max_executions, time_budget, common } => {
            let limits = replay::ShrinkLimits { max_executions, time_budget: time_budget.map(Duration::from_nanos) };
            commands::shrink(&failure_file, limits, &common)
        }
        Command::Check { history, model, consistency, max_steps } => {
            check_cmd::check_history(&history, model, consistency, max_steps)
        }
    }
}
