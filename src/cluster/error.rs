//! What goes wrong reading a cluster directory.

use std::path::PathBuf;

use super::key_path::Invalid;

/// A problem with the user's input. Always names the file.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The path given is not a directory.
    #[error("{0}: no such cluster directory")]
    NoDir(PathBuf),
    /// The directory has neither a cluster.toml nor a compose file; the
    /// path is where cluster.toml was looked for.
    #[error("{0}: missing (a cluster directory holds a cluster.toml, or a compose file: compose.yaml, docker-compose.yml, ...)")]
    NoFile(PathBuf),
    /// The file exists but reading it failed.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file that could not be read.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML, or its tables and keys do not fit
    /// `ClusterFile` (an unknown key, a wrong type, a missing required key).
    #[error("{path}: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// toml's message, with its line, column and caret, as one paragraph.
        message: String,
    },
    /// A value the file holds is wrong; `line` is where `problem.at` is,
    /// when the file writes it (see `cluster::locate`).
    #[error("{path}: {}{problem}", line_prefix(*.line))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the key `problem.at` names; `None` where the
        /// file does not write it.
        line: Option<usize>,
        /// The key and what is wrong with its value.
        problem: Invalid,
    },
    /// A compose cluster's file (see the `compose` crate).
    #[error(transparent)]
    Compose(#[from] compose::ComposeError),
    /// A compose cluster's settings: `within` is `"x-simcluster: "` for
    /// the compose file's block, empty for a cluster.toml beside it.
    #[error("{path}: {within}{problem}")]
    Settings {
        /// The file the settings came from: the compose file, or the
        /// cluster.toml beside it.
        path: PathBuf,
        /// `"x-simcluster: "` or empty, put before `problem`.
        within: &'static str,
        /// What is wrong, naming the table and key.
        problem: String,
    },
}

fn line_prefix(line: Option<usize>) -> String {
    line.map(|n| format!("line {n}: ")).unwrap_or_default()
}

/// toml's own message already carries line, column and a caret; keep it but
/// make it one readable paragraph.
pub(super) fn describe_toml_error(_text: &str, e: &toml::de::Error) -> String {
    e.to_string().trim_end().replace("TOML parse error at ", "")
}
