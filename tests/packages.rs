//! Debian packages in guest images: dependencies resolved by apt, maintainer
//! scripts run (system users exist), images reproducible and lean, bad
//! package input rejected. These build real images from the Debian archive
//! (about 15 s for etcd, 30 s for PostgreSQL, once per cache).

mod common;
use common::*;
use std::path::Path;

fn image_build(dir: &std::path::Path, cache: Option<&std::path::Path>) -> Run {
    let mut cmd = bin();
    cmd.args(["image", "build", dir.to_str().unwrap()]);
    if let Some(c) = cache {
        cmd.env("SIMCLUSTER_CACHE", c);
    }
    run_command(&mut cmd)
}

const ETCD_ONLY: &str = r#"
[cluster]
nodes = 1
memory_mb = 384
[image]
packages = ["etcd-server"]
[node]
start = "exec /usr/bin/etcd --name n1 --data-dir /tmp/etcd"
[workload]
node = "n1"
# The maintainer script made the etcd system user; etcd (dynamically linked
# against libc6, which nobody listed) serves its version.
command = "id etcd && for i in 1 2 3 4 5 6 7 8 9 10; do wget -q -O - http://127.0.0.1:2379/version | grep etcdserver && exit 0; sleep 1; done; exit 1"
"#;

/// db-cluster's two packages, so that in the test suite this image and
/// db-cluster's (and the gallery's etcd cases') share one configured base
/// (`bases/` in the cache: mmdebstrap runs once, about 40 CPU-s). Neither
/// names libc6 or adduser: apt follows the dependencies.
fn etcd_and_its_client() -> String {
    ETCD_ONLY
        .replace("packages = [\"etcd-server\"]", "packages = [\"etcd-server\", \"etcd-client\"]")
        .replace("id etcd && ", "id etcd && command -v etcdctl && ")
}

#[test]
fn naming_etcd_gives_a_working_etcd_with_its_system_user() {
    let toml = etcd_and_its_client();
    assert!(toml.contains("\"etcd-client\"]") && toml.contains("command -v etcdctl"), "{toml}");
    let d = cluster(&toml, &[]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["failures"], 0, "{r:?}");
}

#[test]
#[ignore = "full tier: a second etcd image from Debian packages; the short tier builds etcd's with its maintainer scripts"]
fn without_maintainer_scripts_dependencies_are_still_followed() {
    let toml = ETCD_ONLY
        .replace("packages = [\"etcd-server\"]", "packages = [\"etcd-server\"]\nmaintainer_scripts = false")
        .replace("id etcd && ", "! id etcd 2>/dev/null && ");
    let d = cluster(&toml, &[]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["failures"], 0, "{r:?}");
}

#[test]
#[ignore = "full tier: two image builds from Debian packages (over a minute)"]
fn a_configured_image_is_the_same_bytes_when_built_again() {
    let d = cluster(ETCD_ONLY, &[]);
    let mut sums = Vec::new();
    let first = tempfile::tempdir().unwrap();
    for build in 0..3 {
        // A fresh cache each time: nothing reused but the downloads. The
        // first build caches its configured packages (`bases`) and copies
        // them into the image; the second configures them in the image's
        // own tree, without the cache of bases; the third copies the
        // first's cached base. The same bytes each time: the copy keeps
        // everything the image holds.
        let fresh = tempfile::tempdir().unwrap();
        let cache = if build == 0 { first.path() } else { fresh.path() };
        share_cache(cache, &["debs", "apt", "kernel", "sources"]);
        if build == 2 {
            std::os::unix::fs::symlink(first.path().join("bases"), cache.join("bases")).unwrap();
        }
        let mut cmd = bin();
        cmd.args(["image", "build", d.path().to_str().unwrap()]).env("SIMCLUSTER_CACHE", cache);
        if build == 1 {
            cmd.env("SIMCLUSTER_CACHE_BASES", "0");
        }
        let r = run_command(&mut cmd);
        assert_eq!(r.code, 0, "{r:?}");
        if build == 1 {
            assert!(!cache.join("bases").exists(), "SIMCLUSTER_CACHE_BASES=0 still cached a base");
        }
        let j = r.json();
        // Above 32 MiB the root is a squashfs image on the root disk, and
        // the initramfs holds the boot init.
        let root = j["root"].as_str().expect("etcd's root is on the root disk").to_string();
        let initrd = j["initrd"].as_str().unwrap().to_string();
        sums.push((sha256(&root), std::fs::metadata(&root).unwrap().len(), sha256(&initrd)));
    }
    assert_eq!(sums[0], sums[1], "an image built through the cache of bases differs from one built without it");
    assert_eq!(sums[0], sums[2], "the image built from a cached base differs from one built from scratch");
    let bases: Vec<_> = std::fs::read_dir(first.path().join("bases"))
        .expect("a configured build (as root) caches its base")
        .flatten()
        .filter(|e| e.path().is_dir())
        .collect();
    assert_eq!(bases.len(), 1, "the third build configured its packages again instead of reusing the base");
    // Lean: the Essential set and etcd, no perl, no documentation.
    assert!(sums[0].1 < 120 << 20, "etcd image is {} bytes", sums[0].1);
}

#[test]
#[ignore = "full tier: a PostgreSQL image from Debian packages (over a minute); etcd_server is built in the short tier"]
fn postgresql_alone_builds_and_serves_queries() {
    let toml = r#"
[cluster]
nodes = 1
memory_mb = 768
[image]
packages = ["postgresql"]
exclude = ["/usr/lib/x86_64-linux-gnu/libLLVM*", "/usr/lib/x86_64-linux-gnu/libz3*", "/usr/lib/postgresql/15/lib/bitcode", "/usr/share/i18n"]
customize = ["pg_dropcluster 15 main", "rm -f /etc/ssl/certs/ssl-cert-snakeoil.pem /etc/ssl/private/ssl-cert-snakeoil.key"]
[node]
start = "mkdir -p /tmp/pg && chown postgres:postgres /tmp/pg && runuser -u postgres -- /usr/lib/postgresql/15/bin/initdb -D /tmp/pg/data -A trust >/dev/null && exec runuser -u postgres -- /usr/lib/postgresql/15/bin/postgres -D /tmp/pg/data -k /tmp/pg -c listen_addresses=''"
[workload]
node = "n1"
command = "for i in $(seq 30); do runuser -u postgres -- psql -h /tmp/pg -At -c 'select 40 + 2' 2>/dev/null | grep -x 42 && exit 0; sleep 1; done; exit 1"
[run]
time_limit = "2m"
"#;
    let d = cluster(toml, &[]);
    let out = tempfile::tempdir().unwrap();
    let r = run_cluster(d.path(), out.path(), &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["failures"], 0, "{r:?}");
}

#[test]
fn unknown_unsatisfiable_and_bad_package_input_exit_2_writing_nothing() {
    let cases: &[(&str, &[&str])] = &[
        (
            "packages = [\"no-such-package-simcluster\"]",
            &["cluster.toml", "no-such-package-simcluster", "no Debian package"],
        ),
        // busybox-static Conflicts with busybox.
        ("packages = [\"busybox\"]", &["cluster.toml", "cannot be installed together", "busybox"]),
        ("packages = [\"etcd-server\"]\nsuite = \"no-such-suite\"", &["cluster.toml", "no-such-suite"]),
        ("packages = [\"etcd-server\"]\nexclude = [\"/../etc\"]", &["cluster.toml", "exclude"]),
        ("customize = [\"true\"]", &["cluster.toml", "maintainer_scripts"]),
    ];
    for (keys, needles) in cases {
        let d = cluster(
            &format!("[cluster]\nnodes = 1\n[image]\n{keys}\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n"),
            &[],
        );
        let cache = tempfile::tempdir().unwrap();
        share_cache(cache.path(), &["apt", "kernel", "sources"]);
        let r = image_build(d.path(), Some(cache.path()));
        assert_eq!(r.code, 2, "{keys}: {r:?}");
        for n in *needles {
            assert!(r.stderr.contains(n), "{keys}: stderr lacks {n:?}: {r:?}");
        }
        assert_no_image(cache.path(), keys);
    }
}

/// Links the parts of the user's cache a test does not examine into a fresh
/// one (a kernel takes minutes to build).
fn share_cache(fresh: &std::path::Path, parts: &[&str]) {
    for part in parts {
        let shared = home_cache().join(part);
        if shared.is_dir() {
            std::os::unix::fs::symlink(&shared, fresh.join(part)).unwrap();
        }
    }
}

fn home_cache() -> std::path::PathBuf {
    std::env::var_os("SIMCLUSTER_CACHE")
        .map(Into::into)
        .unwrap_or_else(|| std::path::PathBuf::from(std::env::var("HOME").unwrap()).join(".cache/simcluster"))
}

/// Nothing but build locks under the cache's images: no image, no
/// half-built directory.
fn assert_no_image(cache: &Path, what: &str) {
    let Ok(entries) = std::fs::read_dir(cache.join("images")) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(name.ends_with(".lock"), "{what}: {name} was written under images/");
    }
}
