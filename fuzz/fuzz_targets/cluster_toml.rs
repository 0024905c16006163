//! cluster.toml as `Cluster::parse` reads it: TOML syntax, serde's shapes,
//! then every table's checks. A bad file is an error naming the file, never
//! a panic.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// A directory of its own for the file (paths in it, such as `body_file`,
/// are relative to it); kept for the process's life.
fn dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("simcluster-fuzz-cluster-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    })
}

fuzz_target!(|input: &[u8]| {
    let dir = dir();
    let _ = simcluster::cluster::Cluster::parse(dir, &dir.join("cluster.toml"), &String::from_utf8_lossy(input));
});
