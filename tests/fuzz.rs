//! Fuzzed trust boundaries: what a user's file or a guest's console holds
//! reaches simcluster's parsers as it is. Each target runs its corpus
//! (`tests/fuzz/TARGET/`: seeds, and every input that once crashed it) and
//! then a few thousand deterministic mutants of it (see `testkit::fuzz`),
//! in every tier: regression tests. The coverage-guided search is the
//! cargo-fuzz targets in `fuzz/` (`scripts/fuzz.sh`). A parser may refuse
//! an input; it may not panic.

use std::path::{Path, PathBuf};

use engine::trace::{Event, EventKind};
use simcluster::cluster::Cluster;
use simtime::VirtualTime;
use testkit::fuzz::Target;

fn corpus(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz").join(target)
}

/// cluster.toml: every table, key and check of `Cluster::parse`.
#[test]
fn cluster_toml() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cluster.toml");
    let dictionary: &[&[u8]] = &[
        b"[faults.network]\n",
        b"[[faults.partition]]\n",
        b"[faults.clock]\n",
        b"[workload.host]\n",
        b"[[invariant]]\n",
        b" = \"-1s\"",
        b" = 1e999",
        b" = \"n0\"",
        b" = \"host\"",
        b"nodes = 0\n",
        b"{ min = \"5s\", max = \"1s\" }",
        b"\"n1->n1\"",
        b"[[\"n1\"], [\"n1\"]]",
        b"body_file = \"/dev/zero\"",
        b"\"\\u0000\"",
    ];
    // How far mutants get: past TOML's syntax and serde's shapes into the
    // checks (a fuzzer whose inputs all die in the lexer tests nothing).
    let (mut checked, mut total) = (0u64, 0u64);
    Target::new("cluster_toml", &corpus("cluster_toml")).dictionary(dictionary).run(3_000, |input| {
        total += 1;
        match Cluster::parse(dir.path(), &file, &String::from_utf8_lossy(input)) {
            Ok(_) | Err(simcluster::cluster::ClusterError::Invalid { .. }) => checked += 1,
            Err(_) => {}
        }
    });
    eprintln!("fuzz cluster_toml: {checked} of {total} inputs reached the checks");
    assert!(checked * 20 >= total, "only {checked} of {total} inputs got past the parser into the checks");
}

/// Failure files as `simcluster replay` reads them: the header and its
/// checksum first.
#[test]
fn failure_file() {
    let path = Path::new("failure.json");
    Target::new("failure_file", &corpus("failure_file")).run(3_000, |input| {
        let _ = explore::failure_file::decode::<engine::strategy::Decision>(path, input);
    });
}

/// A failure file's payload behind a valid header, so that mutants get past
/// the checksum to the record's fields.
#[test]
fn failure_payload() {
    let path = Path::new("failure.json");
    let dictionary: &[&[u8]] = &[b"null", b"-1", b"18446744073709551616", b"\"kvm\"", b"{}", b"[]", b"1e400"];
    Target::new("failure_payload", &corpus("failure_payload")).dictionary(dictionary).run(3_000, |payload| {
        let header = format!(
            "{{\"simcluster_failure_file\":2,\"crc32\":\"{:08x}\",\"payload_bytes\":{}}}\n",
            crc32fast::hash(payload),
            payload.len()
        );
        let file = [header.as_bytes(), payload].concat();
        let _ = explore::failure_file::decode::<engine::strategy::Decision>(path, &file);
    });
}

/// A history a guest printed, through every model's check as the engine
/// runs it after an execution.
#[test]
fn history() {
    use checker::history_check::{engine_check, engine_check_txn};
    let dictionary: &[&[u8]] = &[
        b"\"type\":\"invoke\"",
        b"\"type\":\"info\"",
        b"\"f\":\"cas\"",
        b"\"value\":null",
        b"\"process\":-1",
        b":type :ok",
        b"[:append 1 9]",
        b"[:r 1 [1 2 3]]",
        b"9223372036854775807",
        b"\"f\":\"add\"",
        b"\"f\":\"read\",\"value\":[1,1]",
        b"\"f\":\"drain\"",
        b"18446744073709551615",
    ];
    Target::new("history", &corpus("history")).dictionary(dictionary).run(2_000, |input| {
        let text = String::from_utf8_lossy(input);
        let lines = std::iter::once("@history begin").chain(text.lines()).chain(std::iter::once("@history end"));
        let n1 = engine::NodeId::new(1).unwrap();
        let events: Vec<Event> = lines
            .enumerate()
            .map(|(i, l)| Event {
                time: VirtualTime::from_ns(i as u64),
                node: n1.into(),
                kind: EventKind::Console { text: l.to_string() },
            })
            .collect();
        let _ = engine_check(&events, n1);
        for model in [txncheck::Model::ListAppend, txncheck::Model::RwRegister] {
            let _ = engine_check_txn(&events, n1, model, txncheck::Consistency::Serializable);
        }
        for linearizable in [false, true] {
            let r = checker::set_full::engine_check(&events, n1, checker::set_full::SetOptions { linearizable });
            let _ = r.note.len();
        }
        let _ = checker::total_queue::engine_check(&events, n1);
    });
}

/// Console lines: the agent's messages, reachability, history markers,
/// kernel panics.
#[test]
fn console() {
    use engine::console::{agent_message, history_marker, is_kernel_panic, reached_name};
    let dictionary: &[&[u8]] = &[b"@sim ", b"done ", b"@reached ", b"@history ", b"Kernel panic", b"\r", b"\xc3\x28"];
    Target::new("console", &corpus("console")).dictionary(dictionary).run(5_000, |input| {
        for line in String::from_utf8_lossy(input).lines() {
            let _ = (agent_message(line), reached_name(line), history_marker(line), is_kernel_panic(line));
        }
    });
}

/// An OCI layout holding one image whose configuration blob is `config`,
/// tagged `latest`: what `[image] oci` names.
fn oci_layout(dir: &Path, config: &[u8]) {
    use simcluster::image::cache::sha256_hex;
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let blob = |bytes: &[u8]| {
        let digest = sha256_hex(bytes);
        std::fs::write(blobs.join(&digest), bytes).unwrap();
        format!("sha256:{digest}")
    };
    let config_digest = blob(config);
    let manifest = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":\
         {{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"{config_digest}\",\"size\":{}}},\
         \"layers\":[]}}",
        config.len()
    );
    let manifest_digest = blob(manifest.as_bytes());
    let index = format!(
        "{{\"schemaVersion\":2,\"manifests\":[{{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
         \"digest\":\"{manifest_digest}\",\"size\":{},\"annotations\":{{\"org.opencontainers.image.ref.name\":\
         \"latest\"}}}}]}}",
        manifest.len()
    );
    std::fs::write(dir.join("index.json"), index).unwrap();
    std::fs::write(dir.join("oci-layout"), "{\"imageLayoutVersion\":\"1.0.0\"}").unwrap();
}

/// An OCI layout's index.json (tags, nested indexes, platforms), over a
/// valid manifest and configuration.
#[test]
fn oci_index() {
    let dir = tempfile::tempdir().unwrap();
    oci_layout(dir.path(), &std::fs::read(corpus("oci_config").join("app.json")).unwrap());
    let dictionary: &[&[u8]] = &[b"\"latest\"", b"application/vnd.oci.image.index.v1+json", b"\"arm64\"", b"sha256:"];
    Target::new("oci_index", &corpus("oci_index")).dictionary(dictionary).run(2_000, |input| {
        std::fs::write(dir.path().join("index.json"), input).unwrap();
        for tag in [None, Some("latest"), Some("multi")] {
            let _ = simcluster::image::oci::inspect(dir.path(), tag);
        }
    });
}

/// An OCI image's configuration (Entrypoint, Cmd, Env, WorkingDir, User),
/// which becomes the node's start command.
#[test]
fn oci_config() {
    let dictionary: &[&[u8]] =
        &[b"\"Entrypoint\":", b"\"Env\":[\"", b"null", b"'\"$(reboot)\"'", b"\n", b"\"User\":\"0:0\""];
    let (mut read, mut total) = (0u64, 0u64);
    Target::new("oci_config", &corpus("oci_config")).dictionary(dictionary).run(1_000, |input| {
        total += 1;
        let dir = tempfile::tempdir().unwrap();
        oci_layout(dir.path(), input);
        if let Ok((_, config)) = simcluster::image::oci::inspect(dir.path(), Some("latest")) {
            read += 1;
            let _ = (config.start_command(), config.env_script(), config.non_root_user());
        }
    });
    eprintln!("fuzz oci_config: {read} of {total} configurations were read");
    // Strict JSON with typed fields rejects most byte edits; 1 in 50 still
    // gives tens of configurations.
    assert!(read * 50 >= total, "only {read} of {total} inputs got past the JSON parser");
}

/// docker-compose files: YAML (serde_yaml_ng), every service key's forms,
/// `x-simcluster` as cluster.toml and then `Cluster::parse` on the text the
/// compose crate writes, as `Cluster::load` does.
#[test]
fn compose_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("web")).unwrap();
    let file = dir.path().join("compose.yaml");
    let dictionary: &[&[u8]] = &[
        b"\n    image: oci:web\n",
        b"\n  x:\n    image: docker-archive:/dev/zero\n",
        b"\n    depends_on: [x]\n",
        b"\n    healthcheck:\n      test: [\"CMD\"]\n",
        b"<<: *a",
        b"&a ",
        b"${X:-",
        b"$$",
        b"!!binary ",
        b"nodes: 0",
        b"\"\\u0000\"",
        b"\n    volumes: [\"v:/x:ro\"]\n",
        b"\n    env_file: /dev/zero\n",
    ];
    let (mut checked, mut total) = (0u64, 0u64);
    Target::new("compose_file", &corpus("compose_file")).dictionary(dictionary).run(2_000, |input| {
        total += 1;
        let text = String::from_utf8_lossy(input);
        match compose::parse(dir.path(), &file, &text, None) {
            Ok(project) => {
                checked += 1;
                let _ = Cluster::parse(dir.path(), &file, &project.cluster_toml);
                let _ = project.guest_files(&vec![compose::ImageConfig::default(); project.images.len()]);
            }
            Err(compose::ComposeError::Invalid { .. }) => checked += 1,
            Err(_) => {}
        }
    });
    eprintln!("fuzz compose_file: {checked} of {total} inputs reached the checks");
    assert!(checked * 20 >= total, "only {checked} of {total} inputs got past the YAML parser into the checks");
}
