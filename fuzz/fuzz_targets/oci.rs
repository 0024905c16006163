//! OCI image layouts as `[image] oci` names them (`image::oci::inspect`):
//! the first input byte picks what is fuzzed. Even: the rest is the
//! layout's index.json (tags, nested indexes, platforms) over a valid
//! manifest and configuration. Odd: the rest is the image's configuration
//! (Entrypoint, Cmd, Env, WorkingDir, User), which becomes the node's start
//! command, behind a valid index and manifest. A bad layout is an error
//! naming what is wrong, never a panic.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use simcluster::image::cache::sha256_hex;

/// The configuration under a fuzzed index.json: the one tests/fuzz.rs
/// uses, so that the seed indexes' digests name its manifest.
const CONFIG: &[u8] = include_bytes!("../../tests/fuzz/oci_config/app.json");

/// A directory of this process's own for the layout.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("simcluster-fuzz-oci-{}", std::process::id()));
        std::fs::create_dir_all(d.join("blobs/sha256")).unwrap();
        std::fs::write(d.join("oci-layout"), "{\"imageLayoutVersion\":\"1.0.0\"}").unwrap();
        d
    })
}

/// Writes `bytes` as a blob; returns its digest.
fn blob(dir: &Path, bytes: &[u8]) -> String {
    let digest = sha256_hex(bytes);
    std::fs::write(dir.join("blobs/sha256").join(&digest), bytes).unwrap();
    format!("sha256:{digest}")
}

/// A manifest of the configuration `config`, as a blob, and the index that
/// tags it `latest`; and the two blobs' paths.
fn layout_of(dir: &Path, config: &[u8]) -> (String, [PathBuf; 2]) {
    let config_digest = blob(dir, config);
    let manifest = format!(
        "{{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"config\":\
         {{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"{config_digest}\",\"size\":{}}},\
         \"layers\":[]}}",
        config.len()
    );
    let manifest_digest = blob(dir, manifest.as_bytes());
    let path = |digest: &str| dir.join("blobs/sha256").join(digest.trim_start_matches("sha256:"));
    let blobs = [path(&config_digest), path(&manifest_digest)];
    let index = format!(
        "{{\"schemaVersion\":2,\"manifests\":[{{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
         \"digest\":\"{manifest_digest}\",\"size\":{},\"annotations\":{{\"org.opencontainers.image.ref.name\":\
         \"latest\"}}}}]}}",
        manifest.len()
    );
    (index, blobs)
}

fuzz_target!(|input: &[u8]| {
    let Some((&form, rest)) = input.split_first() else { return };
    let dir = dir();
    if form % 2 == 0 {
        let _ = layout_of(dir, CONFIG);
        std::fs::write(dir.join("index.json"), rest).unwrap();
        for tag in [None, Some("latest"), Some("multi")] {
            let _ = simcluster::image::oci::inspect(dir, tag);
        }
    } else {
        let (index, blobs) = layout_of(dir, rest);
        std::fs::write(dir.join("index.json"), index).unwrap();
        if let Ok((_, config)) = simcluster::image::oci::inspect(dir, Some("latest")) {
            let _ = (config.start_command(), config.env_script(), config.non_root_user());
        }
        // Each configuration's blobs are new: they would pile up.
        for b in blobs {
            let _ = std::fs::remove_file(b);
        }
    }
});
