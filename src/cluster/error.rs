//! What goes wrong reading a cluster directory.

use std::path::PathBuf;

use super::key_path::Invalid;

/// A problem with the user's input. Always names the file.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}: no such cluster directory")]
    NoDir(PathBuf),
    #[error("{0}: missing (a cluster directory holds a cluster.toml, or a compose file: compose.yaml, docker-compose.yml, ...)")]
    NoFile(PathBuf),
    #[error("{path}: cannot read: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Syntax { path: PathBuf, message: String },
    /// A value the file holds is wrong; `line` is where `problem.at` is,
    /// when the file writes it (see `cluster::locate`).
    #[error("{path}: {}{problem}", line_prefix(*.line))]
    Invalid { path: PathBuf, line: Option<usize>, problem: Invalid },
    /// A compose cluster's file (see the `compose` crate).
    #[error(transparent)]
    Compose(#[from] compose::ComposeError),
    /// A compose cluster's settings: `within` is `"x-simcluster: "` for
    /// the compose file's block, empty for a cluster.toml beside it.
    #[error("{path}: {within}{problem}")]
    Settings { path: PathBuf, within: &'static str, problem: String },
}

fn line_prefix(line: Option<usize>) -> String {
    line.map(|n| format!("line {n}: ")).unwrap_or_default()
}

/// toml's own message already carries line, column and a caret; keep it but
/// make it one readable paragraph.
pub(super) fn describe_toml_error(_text: &str, e: &toml::de::Error) -> String {
    e.to_string().trim_end().replace("TOML parse error at ", "")
}
