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
mod tests {
    use super::*;
    use serde_json::json;

    fn failure() -> Failure {
        Failure::new(
            FailureKind::Invariant,
            Some("n2".into()),
            engine::VirtualTime::from_ns(12_000_000_000),
            "invariant `check-replicas` exited 1: replica 2 lost key k7".into(),
        )
    }

    fn record() -> FailureRecord {
        FailureRecord {
            format_version: FORMAT_VERSION,
            images_hash: "sha256:abc123".into(),
            cluster_dir: PathBuf::from("guest-images/db-cluster"),
            seed: 42,
            strategy: StrategySpec {
                name: "pct".into(),
                params: BTreeMap::from([("depth".to_string(), json!(3)), ("steps".to_string(), json!(10000))]),
            },
            run: RunParams {
                execution_seed: 0x1234_5678,
                window_ns: 2_000_000,
                max_crashes: 1,
                runtime: RuntimeKind::Uml,
                crash_states: BTreeMap::from([(1, 3)]),
                boot_seed: Some(0x77),
                ..RunParams::default()
            },
            execution_index: 17,
            actions: vec![
                json!({"kind": "RunNode", "node": 0, "time": 0}),
                json!({"kind": "DeliverFrame", "node": 1, "from": 0, "time": 1500}),
                json!({"kind": "Crash", "node": 2, "time": 9000}),
            ],
            failure: failure(),
            trace_hash: "d3adb33f".into(),
            shrunk: None,
            host: Some(HostFacts {
                cpu_vendor: "GenuineIntel".into(),
                cpu_model: "Intel(R) Xeon(R)".into(),
                cpuid_faulting: true,
                cpuid_faulting_forced_off: false,
                kernel_release: "6.12.0".into(),
                hardware_virt: true,
                runtime: "uml".into(),
                guest_cpuid: engine::GuestCpuid::Virtual,
            }),
        }
    }

    #[test]
    fn typed_fields_are_in_the_payload() {
        let text = String::from_utf8(encode(&record()).unwrap()).unwrap();
        let payload: serde_json::Value = serde_json::from_str(text.split_once('\n').unwrap().1).unwrap();
        assert_eq!(
            payload["run"],
            json!({"execution_seed": 0x1234_5678, "window_ns": 2_000_000, "max_crashes": 1, "runtime": "uml", "crash_states": {"1": 3}, "boot_seed": 0x77})
        );
        assert_eq!(
            payload["failure"],
            json!({"kind": "invariant", "node": "n2", "time": 12_000_000_000u64,
                   "message": "invariant `check-replicas` exited 1: replica 2 lost key k7"})
        );
        assert!(payload.get("shrunk").is_none());
        assert_eq!(payload["host"]["cpuid_faulting"], json!(true));
        assert_eq!(payload["host"]["guest_cpuid"], json!("virtual"));
        assert!(text.starts_with("{\"simcluster_failure_file\":2,"));
    }

    #[test]
    fn a_file_without_a_host_still_loads() {
        // Written before hosts were recorded: same format version.
        let mut r = record();
        r.host = None;
        let text = String::from_utf8(encode(&r).unwrap()).unwrap();
        assert!(!text.contains("\"host\""), "{text}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("failure.json");
        fs::write(&path, &text).unwrap();
        assert_eq!(load::<serde_json::Value>(&path).unwrap().host, None);
    }

    fn saved() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("failure.json");
        save(&path, &record()).unwrap();
        (dir, path)
    }

    #[test]
    fn round_trip() {
        let (dir, path) = saved();
        let back: FailureRecord = load(&path).unwrap();
        assert_eq!(back, record());
        // Only the file itself is left behind: no temp files.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("failure.json")]);
        // Deterministic bytes.
        assert_eq!(fs::read(&path).unwrap(), encode(&record()).unwrap());
    }

    #[test]
    fn typed_actions() {
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        struct Act {
            node: u16,
            t: u64,
        }
        let r = FailureRecord {
            actions: vec![Act { node: 1, t: 5 }, Act { node: 2, t: 9 }],
            format_version: FORMAT_VERSION,
            images_hash: String::new(),
            cluster_dir: PathBuf::new(),
            seed: 0,
            strategy: StrategySpec::default(),
            run: RunParams::default(),
            execution_index: 0,
            failure: failure(),
            trace_hash: String::new(),
            shrunk: Some(Shrunk { original_decisions: 9, original_trace_hash: "ab".into() }),
            host: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        save(&path, &r).unwrap();
        assert_eq!(load::<Act>(&path).unwrap(), r);
    }

    #[test]
    fn overwrite_replaces_whole_file() {
        let (_dir, path) = saved();
        let mut r = record();
        r.actions.truncate(1);
        save(&path, &r).unwrap();
        assert_eq!(load::<serde_json::Value>(&path).unwrap(), r);
    }

    fn expect_err(path: &Path, bytes: &[u8]) -> FailureFileError {
        fs::write(path, bytes).unwrap();
        let err = load::<serde_json::Value>(path).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with(&path.display().to_string()), "message must name the file: {msg}");
        err
    }

    #[test]
    fn truncated_file() {
        let (_dir, path) = saved();
        let bytes = fs::read(&path).unwrap();
        let err = expect_err(&path, &bytes[..bytes.len() - 10]);
        assert!(matches!(err, FailureFileError::Truncated { .. }), "{err}");
        assert!(err.to_string().contains("truncated"));
        // Truncated inside the header line.
        let err = expect_err(&path, &bytes[..20]);
        assert!(matches!(err, FailureFileError::NotAFailureFile { .. }), "{err}");
    }

    #[test]
    fn edited_payload() {
        let (_dir, path) = saved();
        let text = fs::read_to_string(&path).unwrap();
        // Same length, different seed: only the checksum can notice.
        let edited = text.replace("\"seed\": 42", "\"seed\": 43");
        assert_ne!(edited, text);
        let err = expect_err(&path, edited.as_bytes());
        assert!(matches!(err, FailureFileError::Checksum { .. }), "{err}");
        assert!(err.to_string().contains("checksum mismatch"));
    }

    #[test]
    fn single_bit_flip() {
        let (_dir, path) = saved();
        let mut bytes = fs::read(&path).unwrap();
        let i = bytes.len() - 30;
        bytes[i] ^= 0x01;
        let err = expect_err(&path, &bytes);
        assert!(matches!(err, FailureFileError::Checksum { .. }), "{err}");
    }

    #[test]
    fn appended_data() {
        let (_dir, path) = saved();
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(b"junk\n");
        let err = expect_err(&path, &bytes);
        assert!(matches!(err, FailureFileError::TrailingData { extra: 5, .. }), "{err}");
    }

    #[test]
    fn not_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        let err = expect_err(&path, b"this is not json\nat all\n");
        assert!(matches!(err, FailureFileError::NotAFailureFile { .. }), "{err}");
        let err = expect_err(&path, b"");
        assert!(matches!(err, FailureFileError::NotAFailureFile { .. }), "{err}");
        // Valid JSON, but some other document.
        let err = expect_err(&path, b"{\"hello\":1}\n{}\n");
        assert!(matches!(err, FailureFileError::NotAFailureFile { .. }), "{err}");
    }

    /// A file with this header and payload, its checksum right.
    fn with_payload(version: u32, payload: &[u8]) -> Vec<u8> {
        let header = format!(
            "{{\"simcluster_failure_file\":{version},\"crc32\":\"{:08x}\",\"payload_bytes\":{}}}\n",
            crc32fast::hash(payload),
            payload.len()
        );
        let mut bytes = header.into_bytes();
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn valid_checksum_but_wrong_shape() {
        // Someone recomputed the checksum over a payload that is not a record.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        let err = expect_err(&path, &with_payload(FORMAT_VERSION, b"{\"seed\": \"many\"}\n"));
        assert!(matches!(err, FailureFileError::Payload { .. }), "{err}");
    }

    #[test]
    fn future_version() {
        let (_dir, path) = saved();
        let text = fs::read_to_string(&path).unwrap().replacen(
            "\"simcluster_failure_file\":2",
            "\"simcluster_failure_file\":3",
            1,
        );
        let err = expect_err(&path, text.as_bytes());
        assert!(matches!(err, FailureFileError::Version { found: 3, supported: 2, .. }), "{err}");
        assert!(err.to_string().contains("newer simcluster"), "{err}");
    }

    #[test]
    fn version_1_file_says_what_to_do() {
        // What simcluster wrote before the parameters were typed.
        let payload = br#"{
  "format_version": 1,
  "images_hash": "x",
  "cluster_dir": "/c",
  "seed": 5,
  "strategy": {"name": "random", "params": {"window_ns": 0, "max_crashes": 1, "seed": 5}},
  "execution_index": 0,
  "actions": [],
  "failure": "Workload: the workload on n1 exited with status 7",
  "trace_hash": "ab"
}
"#;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("failure.json");
        let err = expect_err(&path, &with_payload(1, payload));
        assert!(matches!(err, FailureFileError::Version { found: 1, supported: 2, .. }), "{err}");
        let msg = err.to_string();
        for want in ["version 1", "older simcluster", "reads version 2", "record it again", "--seed"] {
            assert!(msg.contains(want), "{want:?} missing: {msg}");
        }
    }

    /// A file written while `ActionKind` still had `FireTimer` (the fuzz
    /// corpus keeps one, written by a random walk on KVM): its walk's
    /// weights name the kind, which loads as written and is ignored (see
    /// `StrategySpec::params`), and its decisions replay the same choices.
    #[test]
    fn a_file_whose_weights_name_fire_timer_loads_and_replays() {
        use crate::strategy::Guided;
        use engine::strategy::{ActionKind, Decision, EnabledAction, Strategy};
        let bytes = include_bytes!("../../tests/fuzz/failure_file/random-kvm.json");
        let r: FailureRecord<Decision> = decode(Path::new("random-kvm.json"), bytes).unwrap();
        assert_eq!(r.strategy.params["weights"]["FireTimer"], json!(100), "kept as written");
        assert_eq!(r.strategy.params["weights"]["Crash"], json!(50));
        let steps: Vec<u64> = r.actions.iter().map(|d| d.step).collect();
        assert_eq!(steps, [0, 1, 4, 6]);
        // Nodes 1 and 2 are both ready to run at each step: the default
        // scheduler takes n1, the recorded decisions n2.
        let mut g = Guided::new(&r.actions);
        g.begin_execution(0);
        let picks: Vec<u16> = (0..8u64)
            .map(|step| {
                let t = step * 1_000_000;
                let enabled = [
                    EnabledAction::new(1, ActionKind::RunNode, engine::VirtualTime::from_ns(t)),
                    EnabledAction::new(2, ActionKind::RunNode, engine::VirtualTime::from_ns(t)),
                ];
                enabled[g.choose(step, &enabled)].node
            })
            .collect();
        assert_eq!(picks, [2, 2, 1, 1, 2, 1, 2, 1]);
        assert_eq!(g.skipped, 0);
    }

    #[test]
    fn missing_file_names_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.json");
        let err = load::<serde_json::Value>(&path).unwrap_err();
        assert!(matches!(err, FailureFileError::Read { .. }));
        assert!(err.to_string().starts_with(&path.display().to_string()));
    }

    #[test]
    fn failed_write_leaves_old_file_and_no_temp() {
        let (dir, path) = saved();
        // Writing into a directory that does not exist fails cleanly.
        let bad = dir.path().join("no-such-dir").join("f.json");
        let err = save(&bad, &record()).unwrap_err();
        assert!(matches!(err, FailureFileError::Write { .. }));
        assert!(err.to_string().starts_with(&bad.display().to_string()));
        assert_eq!(load::<serde_json::Value>(&path).unwrap(), record());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
