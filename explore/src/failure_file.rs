//! Failure files: everything needed to replay a failing execution.
//!
//! Layout (UTF-8 text):
//!
//! ```text
//! {"simcluster_failure_file":2,"crc32":"1a2b3c4d","payload_bytes":1234}
//! { ...pretty-printed FailureRecord JSON, exactly payload_bytes bytes... }
//! ```
//!
//! The header line is small and fixed in shape; its first field is the
//! format version ([`FORMAT_VERSION`]); the CRC-32 (IEEE, crc32fast)
//! covers the exact payload bytes, so a truncated, edited or corrupted file
//! is rejected before anything in it is trusted. The payload stays
//! human-readable. Writing is atomic: a temp file in the same directory,
//! fsync, rename, fsync of the directory; a reader sees the old file or the
//! new one, never half.
//!
//! Versions: 1 kept the run's parameters (`window_ns`, `max_crashes`,
//! `runtime`, `crash_states`, `execution_seed`) in the strategy's string-keyed
//! map and the failure as one `"Kind: message"` string; 2 has them typed
//! ([`RunParams`], [`Failure`]). A file of another version is refused with a
//! message that says what to do.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use engine::RuntimeKind;
pub use engine::{Failure, FailureKind, HostFacts};

/// The payload format this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;

pub use engine::strategy::StrategySpec;

/// The settings of the failing execution that are not in its cluster
/// directory: with the cluster, the images and the decisions, all a replay
/// (and shrink) needs to run it again.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// The execution's seed: `engine::execution_seed(seed, execution_index)`
    /// for most strategies, per round for dfs (`run::dfs_round_seed`).
    pub execution_seed: u64,
    /// `[explore] window` as the run used it (`--window` applied), ns.
    pub window_ns: u64,
    /// `[faults.crash] max` as the run used it (`--max-crashes` applied).
    pub max_crashes: u32,
    /// The node runtime.
    pub runtime: RuntimeKind,
    /// Crash states forced at crash points: crash number (1-based) ->
    /// index of the enumerated disk state (a crash-state sibling execution).
    /// Empty for an execution that forced none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub crash_states: BTreeMap<u32, u64>,
    /// The boot seed of a warm-start run (`--warm-start`): the boot, until
    /// every agent was ready, was drawn from it, and the execution's own
    /// streams began there (`engine::ExecutionSpec::boot_seed`). A replay
    /// runs cold in the same mode and gives the same trace. Absent for an
    /// ordinary run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_seed: Option<u64>,
    /// Written by `simcluster shrink` when it removed faults: the faults
    /// the execution may take (the strategy refuses every other one, see
    /// [`crate::strategy::fault_plan`]). Absent: any the decisions give.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<Vec<crate::strategy::fault_plan::Fault>>,
    /// Written by `simcluster shrink`: partition starts (1-based) the
    /// engine does not start (`ExploreSpec::skip_partitions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_partitions: Vec<u32>,
}

/// Where a shrunk failure came from (`simcluster shrink`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shrunk {
    /// Decisions of the failure it was shrunk from.
    pub original_decisions: u64,
    /// Trace hash of the failure it was shrunk from.
    pub original_trace_hash: String,
}

/// A replayable failing execution. `A` is the engine's action type; the
/// default keeps the checker independent of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(bound(serialize = "A: Serialize", deserialize = "A: DeserializeOwned"))]
pub struct FailureRecord<A = serde_json::Value> {
    /// The payload format version, [`FORMAT_VERSION`] when written; a
    /// record of another version is refused on load.
    pub format_version: u32,
    /// Hash of the built images the execution ran on.
    pub images_hash: String,
    /// The cluster directory of the run (canonicalized by the run that
    /// wrote the file); a replay loads the cluster from it.
    pub cluster_dir: PathBuf,
    /// The run's seed.
    pub seed: u64,
    /// The strategy that found it (for humans; see [`StrategySpec`]).
    pub strategy: StrategySpec,
    /// What a replay needs besides the cluster and the decisions.
    pub run: RunParams,
    /// Which execution of the run (0-based) failed.
    pub execution_index: u64,
    /// The actions of the failing execution, in order.
    pub actions: Vec<A>,
    /// The engine's verdict: kind, node, virtual time, message. A replay
    /// reproduces it when it gets the same failure and trace hash.
    pub failure: Failure,
    /// Hash of the failing execution's trace; a replay must reproduce it.
    pub trace_hash: String,
    /// Set when `simcluster shrink` wrote the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shrunk: Option<Shrunk>,
    /// The host it ran on; a replay compares its class with its own.
    /// Absent in files written before hosts were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFacts>,
}

/// The message of a file of another format version: what it is and what to
/// do.
fn version_advice(found: u32, supported: u32) -> String {
    if found < supported {
        format!(
            "failure file format version {found} was written by an older simcluster; this build reads version \
             {supported} only. Replay it with the simcluster that recorded it, or record it again: run the cluster \
             with the same --seed, --strategy and options, and replay the new failure file"
        )
    } else {
        format!(
            "failure file format version {found} was written by a newer simcluster; this build reads version \
             {supported} only. Replay it with that simcluster (or a newer one)"
        )
    }
}

#[derive(Serialize, Deserialize)]
struct Header {
    #[serde(rename = "simcluster_failure_file")]
    magic: u32,
    crc32: String,
    payload_bytes: u64,
}

/// Why a failure file could not be written or read. Every message starts
/// with the file path.
#[derive(Debug, thiserror::Error)]
pub enum FailureFileError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be written (or the record not encoded); the old
    /// file, if any, is untouched.
    #[error("{path}: cannot write: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error (an encoding error is wrapped in one).
        #[source]
        source: std::io::Error,
    },
    /// The first line is missing or is not a failure file header.
    #[error("{path}: not a simcluster failure file: {detail}")]
    NotAFailureFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with the header line.
        detail: String,
    },
    /// The payload is shorter than the header says.
    #[error("{path}: truncated: the header promises {expected} payload bytes, only {found} are present")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Payload bytes the header promises.
        expected: u64,
        /// Payload bytes present after the header line.
        found: u64,
    },
    /// There are bytes after the payload the header describes.
    #[error("{path}: {extra} unexpected bytes after the payload (file was edited or appended to)")]
    TrailingData {
        /// The file.
        path: PathBuf,
        /// Bytes beyond the promised payload.
        extra: u64,
    },
    /// The payload's CRC-32 is not the one in the header.
    #[error("{path}: checksum mismatch (header says crc32 {expected}, payload has {actual}): the file was edited or corrupted")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// The CRC-32 in the header, as written there (8 hex digits).
        expected: String,
        /// The CRC-32 of the payload as read, 8 lowercase hex digits.
        actual: String,
    },
    /// The header or the payload has a format version other than
    /// [`FORMAT_VERSION`]; the message says what to do.
    #[error("{path}: {}", version_advice(*found, *supported))]
    Version {
        /// The file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// The version this build reads ([`FORMAT_VERSION`]).
        supported: u32,
    },
    /// The payload passed its checksum but is not a [`FailureRecord`].
    #[error("{path}: payload is not a valid failure record: {source}")]
    Payload {
        /// The file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
}

/// Encodes a record as the bytes of a failure file.
pub fn encode<A: Serialize>(record: &FailureRecord<A>) -> Result<Vec<u8>, serde_json::Error> {
    let mut payload = serde_json::to_vec_pretty(record)?;
    payload.push(b'\n');
    let header = Header {
        magic: FORMAT_VERSION,
        crc32: format!("{:08x}", crc32fast::hash(&payload)),
        payload_bytes: payload.len() as u64,
    };
    let mut out = serde_json::to_vec(&header)?;
    out.push(b'\n');
    out.extend_from_slice(&payload);
    Ok(out)
}

/// Decodes failure file bytes; `path` is only used in error messages.
pub fn decode<A: DeserializeOwned>(path: &Path, bytes: &[u8]) -> Result<FailureRecord<A>, FailureFileError> {
    let p = || path.to_path_buf();
    let not = |detail: String| FailureFileError::NotAFailureFile { path: p(), detail };
    let Some(nl) = bytes.iter().position(|&b| b == b'\n') else {
        return Err(not("no header line".into()));
    };
    let header: Header = serde_json::from_slice(&bytes[..nl]).map_err(|e| not(format!("bad header line: {e}")))?;
    if header.magic != FORMAT_VERSION {
        return Err(FailureFileError::Version { path: p(), found: header.magic, supported: FORMAT_VERSION });
    }
    let payload = &bytes[nl + 1..];
    let found = payload.len() as u64;
    if found < header.payload_bytes {
        return Err(FailureFileError::Truncated { path: p(), expected: header.payload_bytes, found });
    }
    if found > header.payload_bytes {
        return Err(FailureFileError::TrailingData { path: p(), extra: found - header.payload_bytes });
    }
    let actual = format!("{:08x}", crc32fast::hash(payload));
    if !actual.eq_ignore_ascii_case(&header.crc32) {
        return Err(FailureFileError::Checksum { path: p(), expected: header.crc32, actual });
    }
    let record: FailureRecord<A> =
        serde_json::from_slice(payload).map_err(|source| FailureFileError::Payload { path: p(), source })?;
    if record.format_version != FORMAT_VERSION {
        return Err(FailureFileError::Version { path: p(), found: record.format_version, supported: FORMAT_VERSION });
    }
    Ok(record)
}

/// Reads and verifies a failure file.
pub fn load<A: DeserializeOwned>(path: &Path) -> Result<FailureRecord<A>, FailureFileError> {
    let bytes = fs::read(path).map_err(|source| FailureFileError::Read { path: path.to_path_buf(), source })?;
    decode(path, &bytes)
}

/// Writes atomically: temp file beside `path`, fsync, rename over `path`,
/// fsync the directory. On error the temp file is removed and `path` is
/// untouched.
pub fn save<A: Serialize>(path: &Path, record: &FailureRecord<A>) -> Result<(), FailureFileError> {
    let werr = |source: std::io::Error| FailureFileError::Write { path: path.to_path_buf(), source };
    let bytes = encode(record).map_err(|e| werr(std::io::Error::other(e)))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().ok_or_else(|| werr(std::io::Error::other("path has no file name")))?;
    // The pid keeps concurrent writers apart; the name never reaches a guest.
    let tmp = dir.join(format!(".{}.tmp.{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let _ = fs::remove_file(&tmp); // left over by a writer that died
        let mut f = fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        // Make the rename itself durable.
        fs::File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(werr)
}

#[cfg(test)]
#[path = "failure_file_tests.rs"]
mod tests;
