use super::*;
use serde_json::json;

fn failure() -> Failure {
    Failure::new(
        FailureKind::Invariant,
        Some("n2".into()),
        simtime::VirtualTime::from_ns(12_000_000_000),
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
                EnabledAction::new(
                    engine::NodeId::new(1).unwrap(),
                    ActionKind::RunNode,
                    simtime::VirtualTime::from_ns(t),
                ),
                EnabledAction::new(
                    engine::NodeId::new(2).unwrap(),
                    ActionKind::RunNode,
                    simtime::VirtualTime::from_ns(t),
                ),
            ];
            enabled[g.choose(step, &enabled)].node.number()
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
