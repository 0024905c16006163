//! Every key form the crate reads, and every error it gives.

use std::path::Path;

use crate::*;

/// A cluster directory with an OCI layout `web` (a directory: the crate
/// checks only that it exists) and an archive `app.tar`.
fn dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("web")).unwrap();
    std::fs::write(d.path().join("app.tar"), "").unwrap();
    d
}

fn parse_in(d: &Path, yaml: &str) -> Result<Project, ComposeError> {
    parse(d, &d.join("compose.yaml"), yaml, None)
}

fn ok(yaml: &str) -> Project {
    let d = dir();
    parse_in(d.path(), yaml).unwrap_or_else(|e| panic!("{yaml}\n{e}"))
}

/// The error's message; it must name the compose file.
fn err(yaml: &str) -> String {
    let d = dir();
    let e = parse_in(d.path(), yaml).map(|_| ()).expect_err(yaml).to_string();
    assert!(e.contains("compose.yaml"), "{e}");
    e
}

fn has(e: &str, needles: &[&str]) {
    for n in needles {
        assert!(e.contains(n), "{e}\nlacks {n:?}");
    }
}

#[test]
fn services_become_nodes_in_file_order_with_their_images() {
    let p = ok("services:\n  web:\n    image: oci:web:v1\n  db:\n    image: docker-archive:app.tar\n  \
                cache:\n    image: oci:web:v1\n  plain:\n    image: oci:web\n");
    assert_eq!(p.node_names(), ["web", "db", "cache", "plain"]);
    let web = &p.services[0];
    assert!(matches!(&web.image, ImageRef::Oci { tag: Some(t), .. } if t == "v1"));
    assert!(matches!(&p.services[1].image, ImageRef::DockerArchive { file } if file.ends_with("app.tar")));
    assert!(matches!(&p.services[3].image, ImageRef::Oci { tag: None, .. }));
    // One unpacked copy per distinct image.
    assert_eq!(p.images.len(), 3);
    assert_eq!([0, 1, 0, 2], [0, 1, 2, 3].map(|i| p.services[i].image_index));
    assert!(p.cluster_toml.contains("nodes = 4"), "{}", p.cluster_toml);
    assert!(p.cluster_toml.contains("/sim/compose/start"), "{}", p.cluster_toml);
    // No workload given: the first service runs `true` once all are ready.
    let t: toml::Table = toml::from_str(&p.cluster_toml).unwrap();
    assert_eq!(t["workload"]["node"].as_str(), Some("n1"));
    assert_eq!(t["workload"]["command"].as_str(), Some("true"));
    assert!(t["node"].get("ready").is_none());
    assert!(t.get("disk").is_none());
}

#[test]
fn command_and_entrypoint_in_string_and_list_forms() {
    let p = ok("services:\n  a:\n    image: oci:web\n    command: server --name 'x y' \"a\\\"b\" c\\ d\n    \
                entrypoint: [\"/bin/tini\", \"--\"]\n  b:\n    image: oci:web\n    command: [\"echo\", 1, true]\n    \
                entrypoint: \"\"\n");
    assert_eq!(p.services[0].command.as_deref().unwrap(), ["server", "--name", "x y", "a\"b", "c d"]);
    assert_eq!(p.services[0].entrypoint.as_deref().unwrap(), ["/bin/tini", "--"]);
    assert_eq!(p.services[1].command.as_deref().unwrap(), ["echo", "1", "true"]);
    assert_eq!(p.services[1].entrypoint.as_deref().unwrap(), &[] as &[String]);
    has(&err("services:\n  a:\n    image: oci:web\n    command: \"echo 'x\"\n"), &["services.a.command", "quote"]);
}

#[test]
fn environment_in_list_and_map_forms_and_env_files() {
    let d = dir();
    std::fs::write(d.path().join("app.env"), "# comment\nFROM_FILE=1\nBOTH=file\nexport Q=\"quoted\"\n").unwrap();
    let p = parse_in(
        d.path(),
        "services:\n  a:\n    image: oci:web\n    env_file: app.env\n    environment:\n      BOTH: map\n      N: 3\n      \
         B: false\n  b:\n    image: oci:web\n    environment:\n      - X=1=2\n      - EMPTY=\n",
    )
    .unwrap();
    let env = |i: usize, k: &str| p.services[i].environment.get(k).cloned();
    assert_eq!(env(0, "FROM_FILE").as_deref(), Some("1"));
    assert_eq!(env(0, "BOTH").as_deref(), Some("map"), "environment wins over env_file");
    assert_eq!(env(0, "Q").as_deref(), Some("quoted"));
    assert_eq!((env(0, "N").as_deref(), env(0, "B").as_deref()), (Some("3"), Some("false")));
    assert_eq!((env(1, "X").as_deref(), env(1, "EMPTY").as_deref()), (Some("1=2"), Some("")));
    // A variable without a value would come from the host's shell.
    has(
        &err("services:\n  a:\n    image: oci:web\n    environment:\n      - HOME\n"),
        &["services.a.environment.HOME", "no value"],
    );
    has(&err("services:\n  a:\n    image: oci:web\n    environment:\n      K:\n"), &["environment.K", "no value"]);
    has(
        &err("services:\n  a:\n    image: oci:web\n    env_file: nowhere.env\n"),
        &["services.a.env_file", "nowhere.env"],
    );
    has(
        &err("services:\n  a:\n    image: oci:web\n    env_file: /dev/zero\n"),
        &["services.a.env_file", "not a regular file"],
    );
}

#[test]
fn interpolation_takes_defaults_and_refuses_host_variables() {
    let p = ok("services:\n  a:\n    image: oci:web\n    command: echo $$HOME ${PORT:-8080} ${X-y}\n");
    assert_eq!(p.services[0].command.as_deref().unwrap(), ["echo", "$HOME", "8080", "y"]);
    has(&err("services:\n  a:\n    image: oci:web\n    command: echo $HOME\n"), &["services.a.command", "$HOME", "$$"]);
    has(&err("services:\n  a:\n    image: oci:web:${TAG}\n"), &["services.a.image", "${TAG}"]);
}

#[test]
fn user_workdir_hostname_aliases_and_addresses() {
    let p = ok("services:\n  a:\n    image: oci:web\n    user: \"1000:1000\"\n    working_dir: /srv\n    hostname: alpha\n    \
                container_name: a-1\n    networks:\n      front:\n        aliases: [api]\n        ipv4_address: 10.0.0.1\n  \
                b:\n    image: oci:web\n    user: 33\n    networks: [front]\n    extra_hosts:\n      - \"gw:10.0.0.254\"\n\
                networks:\n  front:\n    ipam:\n      config:\n        - subnet: 172.20.0.0/16\n");
    let a = &p.services[0];
    assert_eq!(
        (a.user.as_deref(), a.working_dir.as_deref(), a.hostname.as_deref()),
        (Some("1000:1000"), Some("/srv"), Some("alpha"))
    );
    assert_eq!(a.aliases, ["alpha", "a-1", "api"]);
    assert_eq!(p.services[1].user.as_deref(), Some("33"));
    assert_eq!(p.services[1].extra_hosts, [("gw".to_string(), "10.0.0.254".to_string())]);
    assert_eq!(p.hosts_lines(), "10.0.0.1 alpha a-1 api\n");
    assert!(p.warnings.iter().any(|w| w.at == "networks.front"), "{:?}", p.warnings);
    has(
        &err("services:\n  a:\n    image: oci:web\n  b:\n    image: oci:web\n    networks:\n      n:\n        ipv4_address: 172.20.0.5\n"),
        &["services.b.networks.n.ipv4_address", "172.20.0.5", "node 2 at 10.0.0.2"],
    );
    has(&err("services:\n  a:\n    image: oci:web\n    working_dir: srv\n"), &["services.a.working_dir", "absolute"]);
    has(&err("services:\n  a:\n    image: oci:web\n    user: \"a b\"\n"), &["services.a.user"]);
    has(
        &err("services:\n  a:\n    image: oci:web\n  b:\n    image: oci:web\n    hostname: a\n"),
        &["services.b", "\"a\" is already service a's"],
    );
}

#[test]
fn volumes_named_tmpfs_and_the_disk_they_need() {
    let p = ok("services:\n  a:\n    image: oci:web\n    volumes:\n      - data:/var/lib/data\n      - logs:/logs:ro\n      \
                - type: volume\n        source: data\n        target: /other\n      - type: tmpfs\n        target: /cache\n      \
                - /anonymous\n    tmpfs: /run/x:size=1m\nvolumes:\n  data:\n  logs:\n    labels: {a: b}\n");
    assert_eq!(
        p.services[0].mounts,
        [
            Mount::Volume { name: "data".into(), target: "/var/lib/data".into(), read_only: false },
            Mount::Volume { name: "logs".into(), target: "/logs".into(), read_only: true },
            Mount::Volume { name: "data".into(), target: "/other".into(), read_only: false },
            Mount::Tmpfs { target: "/cache".into() },
            Mount::Tmpfs { target: "/run/x".into() },
        ]
    );
    assert_eq!(p.disk_mount.as_deref(), Some("/volumes"));
    let t: toml::Table = toml::from_str(&p.cluster_toml).unwrap();
    assert_eq!(t["disk"]["mount"].as_str(), Some("/volumes"));
    assert!(p.warnings.iter().any(|w| w.at == "services.a.volumes[4]"), "{:?}", p.warnings);
    let e = err(
        "services:\n  a:\n    image: oci:web\n    volumes:\n      - ./src:/src\n      - nope:/x\n      - data:rel\n\
                 volumes:\n  data:\n    driver: nfs\n",
    );
    has(
        &e,
        &[
            "4 problems",
            "services.a.volumes[0]",
            "binds of host paths",
            "volume \"nope\" is not declared",
            "volumes[2]",
            "volumes.data.driver",
        ],
    );
}

#[test]
fn healthcheck_forms_become_the_readiness_probe() {
    let p = ok("services:\n  a:\n    image: oci:web\n    healthcheck:\n      test: [\"CMD\", \"/bin/check\", \"-q\"]\n      \
                interval: 1m30s\n      timeout: 500ms\n      retries: 2\n      start_period: 10s\n      start_interval: 2s\n  \
                b:\n    image: oci:web\n    healthcheck:\n      test: [\"CMD-SHELL\", \"curl -f localhost || exit 1\"]\n  \
                c:\n    image: oci:web\n    healthcheck:\n      test: pg_isready\n  d:\n    image: oci:web\n    healthcheck:\n      \
                test: [\"NONE\"]\n  e:\n    image: oci:web\n    healthcheck:\n      test: x\n      disable: true\n");
    let a = p.services[0].healthcheck.as_ref().unwrap();
    assert_eq!(a.test, ["/bin/check", "-q"]);
    assert_eq!(
        (a.interval_ns, a.timeout_ns, a.retries, a.start_period_ns, a.start_interval_ns),
        (90_000_000_000, 500_000_000, 2, 10_000_000_000, Some(2_000_000_000))
    );
    let b = p.services[1].healthcheck.as_ref().unwrap();
    assert_eq!(b.test, ["/bin/sh", "-c", "curl -f localhost || exit 1"]);
    assert_eq!((b.interval_ns, b.timeout_ns, b.retries, b.start_period_ns), (30_000_000_000, 30_000_000_000, 3, 0));
    assert_eq!(p.services[2].healthcheck.as_ref().unwrap().test, ["/bin/sh", "-c", "pg_isready"]);
    assert!(p.services[3].healthcheck.is_none() && p.services[4].healthcheck.is_none());
    let t: toml::Table = toml::from_str(&p.cluster_toml).unwrap();
    assert_eq!(t["node"]["ready"].as_str(), Some("/sim/busybox sh /sim/compose/health"));
    // Polled as often as the most eager check; given as long as the slowest may take.
    assert_eq!(t["node"]["ready_every"].as_str(), Some("2000000000ns"));
    assert_eq!(
        t["node"]["ready_within"].as_str(),
        Some(&*format!("{}ns", 10_000_000_000u64 + 3 * 90_000_000_000 + 2 * 500_000_000))
    );
    let e = err("services:\n  a:\n    image: oci:web\n    healthcheck:\n      test: [\"RUN\", \"x\"]\n      interval: soon\n      retries: -1\n      probe: 1\n");
    has(
        &e,
        &[
            "4 problems",
            "healthcheck.test",
            "CMD-SHELL",
            "healthcheck.interval",
            "healthcheck.retries",
            "healthcheck.probe",
        ],
    );
    has(
        &err("services:\n  a:\n    image: oci:web\n    healthcheck:\n      interval: 1s\n"),
        &["healthcheck.test", "missing"],
    );
}

#[test]
fn depends_on_forms_conditions_and_cycles() {
    let p = ok("services:\n  db:\n    image: oci:web\n    healthcheck:\n      test: x\n  init:\n    image: oci:web\n  \
                app:\n    image: oci:web\n    depends_on:\n      db:\n        condition: service_healthy\n        restart: true\n      \
                init:\n        condition: service_completed_successfully\n  web:\n    image: oci:web\n    depends_on: [app]\n");
    assert_eq!(p.services[2].depends_on, [("db".into(), Condition::Healthy), ("init".into(), Condition::Completed)]);
    assert_eq!(p.services[3].depends_on, [("app".into(), Condition::Started)]);
    has(
        &err(
            "services:\n  a:\n    image: oci:web\n    depends_on: [b]\n  b:\n    image: oci:web\n    depends_on: [a]\n",
        ),
        &["depends_on", "cycle"],
    );
    has(
        &err("services:\n  a:\n    image: oci:web\n    depends_on: [zz]\n"),
        &["services.a.depends_on", "\"zz\" is not a service"],
    );
    has(
        &err("services:\n  a:\n    image: oci:web\n  b:\n    image: oci:web\n    depends_on:\n      a:\n        condition: service_healthy\n"),
        &["services.b.depends_on.a", "no healthcheck"],
    );
    has(
        &err("services:\n  a:\n    image: oci:web\n  b:\n    image: oci:web\n    depends_on:\n      a:\n        condition: up\n"),
        &["services.b.depends_on.a.condition"],
    );
}

#[test]
fn ignored_keys_warn_and_unsupported_keys_are_listed_together() {
    let p =
        ok("version: \"3.8\"\nx-common: &c\n  restart: always\nservices:\n  a:\n    <<: *c\n    image: oci:web\n    \
                labels: [x]\n    ports: [\"80:80\"]\n    logging: {driver: none}\n    x-note: hi\n");
    let mut at: Vec<&str> = p.warnings.iter().map(|w| w.at.as_str()).collect();
    at.sort_unstable();
    assert_eq!(at, ["services.a.labels", "services.a.logging", "services.a.ports", "services.a.restart"]);
    assert!(p.warnings.iter().any(|w| w.to_string().contains("compose.yaml: services.a.restart is ignored")));
    let e = err("services:\n  a:\n    image: oci:web\n    build: .\n    frobnicate: 1\n    profiles: [x]\nsecrets:\n  s: {}\nwhat: 1\n");
    has(
        &e,
        &[
            "5 problems",
            "services.a.build",
            "docker-archive",
            "services.a.frobnicate",
            "services.a.profiles",
            "secrets",
            "what",
        ],
    );
}

#[test]
fn images_in_skopeo_syntax_and_registries_refused() {
    has(
        &err("services:\n  a:\n    image: postgres:16\n"),
        &["services.a.image", "postgres:16", "registry", "skopeo copy docker://postgres:16"],
    );
    has(&err("services:\n  a:\n    image: docker://redis\n"), &["registry", "docker://redis"]);
    has(&err("services:\n  a:\n    image: oci-archive:x.tar\n"), &["oci-archive: transport is not supported"]);
    has(&err("services:\n  a:\n    image: oci:missing:v1\n"), &["services.a.image", "missing", "does not exist"]);
    has(&err("services:\n  a:\n    image: docker-archive:gone.tar\n"), &["gone.tar", "does not exist"]);
    has(&err("services:\n  a:\n    command: x\n"), &["services.a.image", "missing"]);
    // docker-archive:PATH:REFERENCE picks the path.
    let p = ok("services:\n  a:\n    image: docker-archive:app.tar:app:v1\n");
    assert!(matches!(&p.services[0].image, ImageRef::DockerArchive { file } if file.ends_with("app.tar")));
}

#[test]
fn bad_yaml_and_bad_shapes_name_file_line_and_problem() {
    has(&err("services:\n  a:\n    image: [oci:web\n"), &["compose.yaml: line 4", "column"]);
    has(&err("services:\n  a:\n  image: x\n   b: 1\n"), &["line 4"]);
    has(&err("- just\n- a list\n"), &["a mapping with a services key"]);
    has(&err("services: {}\n"), &["services", "at least one service"]);
    has(&err("services:\n  host:\n    image: oci:web\n"), &["services.host", "\"host\""]);
    has(&err("services:\n  a: 3\n"), &["services.a", "mapping"]);
    has(&err("services:\n  n2:\n    image: oci:web\n"), &["services.n2", "node 1 (n1)"]);
    ok("services:\n  n1:\n    image: oci:web\n  n2:\n    image: oci:web\n");
}

#[test]
fn two_compose_files_are_refused() {
    let d = dir();
    assert!(find(d.path()).unwrap().is_none());
    std::fs::write(d.path().join("docker-compose.yml"), "").unwrap();
    assert!(find(d.path()).unwrap().unwrap().ends_with("docker-compose.yml"));
    std::fs::write(d.path().join("compose.yaml"), "").unwrap();
    has(&find(d.path()).unwrap_err().to_string(), &["compose.yaml", "docker-compose.yml", "keep one"]);
}

#[test]
fn settings_from_x_simcluster_name_nodes_by_service_and_run_commands_in_the_container() {
    let p = ok("services:\n  db:\n    image: oci:web\n  client:\n    image: oci:web\n    hostname: cli\n\
                x-simcluster:\n  cluster:\n    memory_mb: 96\n  workload:\n    node: client\n    command: ./run.sh 'x'\n  \
                invariant:\n    - name: up\n      node: all\n      command: pidof db\n  faults:\n    crash:\n      max: 1\n      \
                nodes: [db]\n      restart_after_by_node:\n        db: 2s\n  check:\n    history: cli\n");
    let t: toml::Table = toml::from_str(&p.cluster_toml).unwrap();
    assert_eq!(t["cluster"]["memory_mb"].as_integer(), Some(96));
    assert_eq!(t["cluster"]["nodes"].as_integer(), Some(2));
    assert_eq!(t["workload"]["node"].as_str(), Some("n2"));
    assert_eq!(
        t["workload"]["command"].as_str(),
        Some("/sim/busybox sh /sim/compose/enter --shell './run.sh '\\''x'\\'''")
    );
    assert_eq!(t["invariant"][0]["node"].as_str(), Some("all"));
    assert!(t["invariant"][0]["command"].as_str().unwrap().contains("--shell 'pidof db'"));
    assert_eq!(t["faults"]["crash"]["nodes"][0].as_str(), Some("n1"));
    assert!(t["faults"]["crash"]["restart_after_by_node"].get("n1").is_some());
    assert_eq!(t["check"]["history"].as_str(), Some("n2"));
    assert_eq!(p.origins.get("faults").map(|f| f.ends_with("compose.yaml")), Some(true));
    has(&err("services:\n  a:\n    image: oci:web\nx-simcluster:\n  cluster:\n    nodes: 3\n  image:\n    packages: [x]\n"), &["x-simcluster.cluster.nodes", "x-simcluster.image"]);
    has(
        &err("services:\n  a:\n    image: oci:web\nx-simcluster:\n  faults:\n    crash: ~\n"),
        &["x-simcluster.faults.crash", "no value"],
    );
}

#[test]
fn settings_from_a_cluster_toml_beside_and_contradictions() {
    let d = dir();
    let yaml = "services:\n  a:\n    image: oci:web\nx-simcluster:\n  run:\n    time_limit: 5s\n";
    let beside = d.path().join("cluster.toml");
    let p =
        parse(d.path(), &d.path().join("compose.yaml"), yaml, Some((&beside, "[faults.crash]\nmax = 1\n"))).unwrap();
    let t: toml::Table = toml::from_str(&p.cluster_toml).unwrap();
    assert_eq!(t["faults"]["crash"]["max"].as_integer(), Some(1));
    assert_eq!(t["run"]["time_limit"].as_str(), Some("5s"));
    assert_eq!(p.origins["faults"], beside);
    let e = parse(d.path(), &d.path().join("compose.yaml"), yaml, Some((&beside, "[run]\nseed = 1\n")))
        .unwrap_err()
        .to_string();
    has(&e, &["cluster.toml: [run]", "also given in", "x-simcluster"]);
    let e = parse(d.path(), &d.path().join("compose.yaml"), yaml, Some((&beside, "[node]\nstart = \"x\"\n")))
        .unwrap_err()
        .to_string();
    has(&e, &["cluster.toml: [node]", "remove it"]);
    let e = parse(d.path(), &d.path().join("compose.yaml"), yaml, Some((&beside, "[run\n"))).unwrap_err().to_string();
    has(&e, &["cluster.toml: ", "line 1"]);
}

fn image() -> ImageConfig {
    ImageConfig {
        entrypoint: vec!["/entry".into()],
        cmd: vec!["serve".into(), "--port=80".into()],
        env: vec!["PATH=/opt/bin:/bin".into(), "FROM=image".into()],
        working_dir: Some("/app".into()),
        user: Some("app".into()),
        passwd: Some("root:x:0:0::/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n".into()),
        group: Some("root:x:0:\napp:x:1000:\n".into()),
        has_sh: true,
    }
}

fn file<'a>(files: &'a [(String, String)], path: &str) -> &'a str {
    &files.iter().find(|(p, _)| p == path).unwrap_or_else(|| panic!("no {path}: {files:?}")).1
}

#[test]
fn scripts_run_the_service_as_docker_would() {
    // The image's Entrypoint, Cmd, Env, WorkingDir and User.
    let p = ok("services:\n  a:\n    image: oci:web\n");
    let f = p.guest_files(&[image()]).unwrap();
    let enter = file(&f, "/sim/compose/svc/a/enter");
    has(enter, &["R='/sim/compose/img/0'", "'FROM=image'", "'PATH=/opt/bin:/bin'", "'HOSTNAME=a'", "'HOME=/home/app'"]);
    has(enter, &["su -p -s /.simcluster/bin/sh 'app'", "cd \"$0\"", "'/app'", "mount --bind /etc/hosts"]);
    has(file(&f, "/sim/compose/svc/a/start"), &["exec $BB sh \"$D/enter\" '/entry' 'serve' '--port=80'"]);
    has(file(&f, "/sim/compose/start"), &["svc/$NODE_NAME/start"]);
    // The compose file's keys win; entrypoint drops the image's Cmd.
    let p = ok("services:\n  a:\n    image: oci:web\n    entrypoint: [/bin/run]\n    user: root\n    working_dir: /w\n    \
                hostname: h\n    environment: {FROM: compose}\n    volumes: [\"v:/data:ro\"]\n    \
                healthcheck:\n      test: [\"CMD-SHELL\", \"true\"]\n      timeout: 1500ms\n  \
                b:\n    image: oci:web\n    command: [x]\n    depends_on:\n      a:\n        condition: service_healthy\n\
                volumes:\n  v:\n");
    let f = p.guest_files(&[image()]).unwrap();
    let enter = file(&f, "/sim/compose/svc/a/enter");
    has(
        enter,
        &[
            "'FROM=compose'",
            "'HOSTNAME=h'",
            "'HOME=/root'",
            "'/w'",
            "hostname 'h'",
            "'/volumes/volumes/v'",
            "remount,bind,ro",
        ],
    );
    assert!(!enter.contains("su -p"), "{enter}");
    let start = file(&f, "/sim/compose/svc/a/start");
    has(start, &["exec $BB sh \"$D/enter\" '/bin/run'\n", "httpd -p 61999", "/run/sim-beacon/healthy"]);
    has(file(&f, "/sim/compose/svc/a/health"), &["timeout -s KILL 2 ", "'/bin/sh' '-c' 'true'"]);
    let b = file(&f, "/sim/compose/svc/b/start");
    has(b, &["GET /healthy", "nc -w 2 10.0.0.1 61999", "'/entry' 'x'"]);
    assert!(!f.iter().any(|(p, _)| p == "/sim/compose/svc/b/health"));
}

#[test]
fn scripts_refuse_unknown_users_and_missing_commands() {
    let p =
        ok("services:\n  a:\n    image: oci:web\n    user: nobody\n  b:\n    image: oci:web\n    user: \"1000:5\"\n");
    let e = p.guest_files(&[image()]).unwrap_err().to_string();
    has(
        &e,
        &[
            "compose.yaml: 2 problems",
            "services.a.user = \"nobody\"",
            "no account \"nobody\"",
            "services.b.user",
            "group \"5\"",
        ],
    );
    let p = ok("services:\n  a:\n    image: oci:web\n    user: \"1000:app\"\n");
    assert!(p.guest_files(&[image()]).is_ok());
    let p = ok("services:\n  a:\n    image: oci:web\n");
    let bare = ImageConfig { has_sh: false, ..Default::default() };
    has(&p.guest_files(&[bare]).unwrap_err().to_string(), &["services.a.command", "no Entrypoint or Cmd"]);
    let nopasswd = ImageConfig { passwd: None, ..image() };
    has(&p.guest_files(&[nopasswd]).unwrap_err().to_string(), &["services.a.image", "User \"app\"", "no /etc/passwd"]);
}

#[test]
fn durations_and_words() {
    assert_eq!(parse_duration("1m30s"), Some(90_000_000_000));
    assert_eq!(parse_duration("500ms"), Some(500_000_000));
    assert_eq!(parse_duration("1.5s"), Some(1_500_000_000));
    assert_eq!(parse_duration("1h"), Some(3_600_000_000_000));
    assert_eq!(parse_duration("10"), None);
    assert_eq!(parse_duration("soon"), None);
    assert_eq!(split_words("  a  'b c'd \"e\\\\f\" "), Some(vec!["a".into(), "b cd".into(), "e\\f".into()]));
    assert_eq!(split_words("a 'b"), None);
    assert_eq!(shell_quote("a b"), "'a b'");
    assert_eq!(shell_quote("it's"), "'it'\\''s'");
}
