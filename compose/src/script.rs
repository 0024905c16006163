//! The shell scripts a node runs its service with: `enter` runs a command
//! in the service's container (a chroot of its image with the node's
//! `/proc`, `/sys`, `/dev`, `/tmp` and `/etc/hosts` bound in, its volumes
//! mounted, Docker's environment, user and working directory), `start`
//! waits for `depends_on` and runs the service's command, `health` runs
//! its healthcheck. All run on simcluster's own busybox (`/sim/busybox`);
//! each image gets a copy at `/.simcluster/busybox`, so the chroot needs
//! no tool of its own.

use std::collections::BTreeMap;

use crate::{shell_quote, ComposeError, Condition, Mount, Problem, Project, Service, BEACON_PORT, GUEST_DIR};

/// What an image's configuration says about running it (Docker's
/// `Entrypoint`, `Cmd`, `Env`, `WorkingDir`, `User`), and its account files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    /// `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    pub cmd: Vec<String>,
    /// `Env`, `KEY=VALUE` strings.
    pub env: Vec<String>,
    /// `WorkingDir`.
    pub working_dir: Option<String>,
    /// `User`.
    pub user: Option<String>,
    /// The image's /etc/passwd, if it has one.
    pub passwd: Option<String>,
    /// The image's /etc/group, if it has one.
    pub group: Option<String>,
    /// Whether the image has a /bin/sh (a `CMD-SHELL` healthcheck and the
    /// settings' commands use it; busybox's otherwise).
    pub has_sh: bool,
}

/// A service's scripts, by guest path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceScripts {
    /// (guest path, contents) of every file.
    pub files: Vec<(String, String)>,
}

/// Docker's PATH when the image sets none.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The dispatchers every node has: they run the node's own service's
/// script (`NODE_NAME` is the service name).
pub(crate) fn common(_project: &Project) -> Vec<(String, String)> {
    let d = GUEST_DIR;
    vec![
        (format!("{d}/start"), format!("exec /sim/busybox sh \"{d}/svc/$NODE_NAME/start\"\n")),
        (format!("{d}/enter"), format!("exec /sim/busybox sh \"{d}/svc/$NODE_NAME/enter\" \"$@\"\n")),
        (
            format!("{d}/health"),
            format!(
                "[ -f \"{d}/svc/$NODE_NAME/health\" ] || exit 0\nexec /sim/busybox sh \"{d}/svc/$NODE_NAME/health\"\n"
            ),
        ),
    ]
}

impl Project {
    /// Every compose script of every node, by guest path: the dispatchers
    /// and each service's; `images[k]` is the configuration of
    /// [`Project::images`]`[k]`.
    pub fn guest_files(&self, images: &[ImageConfig]) -> Result<Vec<(String, String)>, ComposeError> {
        let mut files = common(self);
        let mut problems = Vec::new();
        for s in &self.services {
            match s.scripts(self, &images[s.image_index]) {
                Ok(f) => files.extend(f.files),
                Err(p) => problems.push(p),
            }
        }
        if problems.is_empty() {
            Ok(files)
        } else {
            Err(ComposeError::Invalid { path: self.file.clone(), problems })
        }
    }
}

/// The account `user` (name or uid, optionally `:group`) names in
/// `passwd`: (name, home); `Err` says why there is none.
fn account(user: &str, passwd: Option<&str>, group: Option<&str>) -> Result<(String, String), String> {
    let (who, grp) = match user.split_once(':') {
        Some((w, g)) => (w, Some(g)),
        None => (user, None),
    };
    let Some(passwd) = passwd else { return Err(" names an account, but the image has no /etc/passwd".into()) };
    let entry =
        passwd.lines().map(|l| l.split(':').collect::<Vec<_>>()).find(|f| f.len() > 5 && (f[0] == who || f[2] == who));
    let Some(f) = entry else { return Err(format!(": the image's /etc/passwd has no account {who:?}")) };
    if let Some(g) = grp {
        let gid_of_name = group.and_then(|text| {
            text.lines()
                .map(|l| l.split(':').collect::<Vec<_>>())
                .find(|e| e.len() > 2 && e[0] == g)
                .map(|e| e[2].to_string())
        });
        if g != f[3] && gid_of_name.as_deref() != Some(f[3]) {
            return Err(format!(
                ": group {g:?} is not account {}'s own group (gid {}); simcluster runs a service with its account's group",
                f[0], f[3]
            ));
        }
    }
    Ok((f[0].to_string(), f[5].to_string()))
}

fn is_root(user: &str) -> bool {
    matches!(user, "" | "root" | "0" | "0:0" | "root:root" | "root:0" | "0:root")
}

impl Service {
    /// The scripts of this service, given its image's configuration.
    pub fn scripts(&self, project: &Project, image: &ImageConfig) -> Result<ServiceScripts, Problem> {
        let at = |k: &str| format!("services.{}.{k}", self.name);
        let argv: Vec<String> = match &self.entrypoint {
            Some(ep) => ep.iter().chain(self.command.iter().flatten()).cloned().collect(),
            None => image.entrypoint.iter().chain(self.command.as_ref().unwrap_or(&image.cmd)).cloned().collect(),
        };
        if argv.is_empty() {
            return Err(Problem {
                at: at("command"),
                detail: ": missing, and the image names no Entrypoint or Cmd: say what the service runs".into(),
            });
        }
        let hostname = self.hostname.clone().unwrap_or_else(|| self.name.clone());
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        for kv in &image.env {
            if let Some((k, v)) = kv.split_once('=') {
                env.insert(k.into(), v.into());
            }
        }
        env.insert("HOSTNAME".into(), hostname.clone());
        env.extend(self.environment.clone());
        env.entry("PATH".into()).or_insert_with(|| DEFAULT_PATH.into());
        let user = self.user.clone().or_else(|| image.user.clone()).unwrap_or_default();
        let su = if is_root(&user) {
            env.entry("HOME".into()).or_insert_with(|| "/root".into());
            String::new()
        } else {
            let (name, home) =
                account(&user, image.passwd.as_deref(), image.group.as_deref()).map_err(|detail| Problem {
                    at: if self.user.is_some() { at("user") } else { at("image") },
                    detail: if self.user.is_some() {
                        format!(" = {user:?}{detail}")
                    } else {
                        format!(": its User {user:?}{detail}")
                    },
                })?;
            env.entry("HOME".into()).or_insert(home);
            format!("/.simcluster/busybox su -p -s /.simcluster/bin/sh {} -c 'exec \"$@\"' sh ", shell_quote(&name))
        };
        let workdir = self
            .working_dir
            .clone()
            .or_else(|| image.working_dir.clone().filter(|d| d.starts_with('/')))
            .unwrap_or_else(|| "/".into());
        let root = crate::image_dir(self.image_index);
        let dir = format!("{GUEST_DIR}/svc/{}", self.name);
        let q = shell_quote;
        // enter: the container, set up once per boot, then the command.
        let mut e = String::new();
        e.push_str(&format!(
            "# simcluster: runs \"$@\" in service {}'s container (generated; do not edit).\nBB=/sim/busybox\nR={}\n",
            self.name,
            q(&root)
        ));
        e.push_str("if $BB mkdir /run/sim-compose 2>/dev/null; then\n");
        e.push_str(
            "  for d in proc sys dev tmp; do $BB mkdir -p \"$R/$d\" && $BB mount --bind \"/$d\" \"$R/$d\"; done\n",
        );
        e.push_str(&format!("  $BB cat {} >> /etc/hosts\n", q(&format!("{dir}/hosts"))));
        e.push_str("  $BB mkdir -p \"$R/etc\"\n");
        e.push_str("  $BB rm -f \"$R/etc/hosts\" && $BB touch \"$R/etc/hosts\" && $BB mount --bind /etc/hosts \"$R/etc/hosts\"\n");
        e.push_str(
            "  [ -e \"$R/etc/resolv.conf\" ] || { $BB rm -f \"$R/etc/resolv.conf\"; : > \"$R/etc/resolv.conf\"; }\n",
        );
        e.push_str(&format!("  $BB rm -f \"$R/etc/hostname\"; echo {} > \"$R/etc/hostname\"\n", q(&hostname)));
        // The Antithesis SDK's output ([antithesis]): the agent's FIFO.
        e.push_str(
            "  [ -d /run/antithesis ] && $BB mkdir -p \"$R/run/antithesis\" && $BB mount --bind /run/antithesis \"$R/run/antithesis\"\n",
        );
        e.push_str(&format!("  $BB hostname {}\n", q(&hostname)));
        for m in &self.mounts {
            match m {
                Mount::Volume { name, target, read_only } => {
                    let disk = project.disk_mount.as_deref().unwrap_or(crate::settings::DEFAULT_DISK_MOUNT);
                    let vol = q(&format!("{disk}/volumes/{name}"));
                    let seeded = q(&format!("{disk}/volumes/.{name}.seeded"));
                    let t = format!("\"$R\"{}", q(target));
                    e.push_str(&format!("  $BB mkdir -p {vol} {t}\n"));
                    // Docker fills a new volume with what the image has there.
                    e.push_str(&format!(
                        "  [ -e {seeded} ] || {{ $BB cp -a {t}/. {vol}/ && : > {seeded}; }}\n  $BB mount --bind {vol} {t}\n"
                    ));
                    if *read_only {
                        e.push_str(&format!("  $BB mount -o remount,bind,ro {t}\n"));
                    }
                }
                Mount::Tmpfs { target } => {
                    let t = format!("\"$R\"{}", q(target));
                    e.push_str(&format!("  $BB mkdir -p {t} && $BB mount -t tmpfs tmpfs {t}\n"));
                }
            }
        }
        e.push_str(
            "  : > /run/sim-compose/done\nelse\n  while [ ! -e /run/sim-compose/done ]; do $BB sleep 0.01; done\nfi\n",
        );
        e.push_str("if [ \"$1\" = --shell ]; then\n");
        let sh = if image.has_sh { "/bin/sh" } else { "/.simcluster/bin/sh" };
        e.push_str(&format!("  set -- {sh} -c \"$2\"\nfi\n"));
        e.push_str("exec $BB chroot \"$R\" /.simcluster/busybox env -i");
        for (k, v) in &env {
            e.push_str(&format!(" \\\n  {}", q(&format!("{k}={v}"))));
        }
        e.push_str(" \\\n  NODE_ID=\"$NODE_ID\" NODE_NAME=\"$NODE_NAME\" PEERS=\"$PEERS\"");
        for k in ["ANTITHESIS_OUTPUT_DIR", "ANTITHESIS_SDK_LOCAL_OUTPUT"] {
            e.push_str(&format!(" ${{{k}+\"{k}=${k}\"}}"));
        }
        e.push_str(&format!(
            " \\\n  /.simcluster/bin/sh -c '/.simcluster/busybox mkdir -p \"$0\" && cd \"$0\" && exec \"$@\"' {} {su}\"$@\"\n",
            q(&workdir)
        ));
        // hosts: every service's aliases, and this one's extra_hosts.
        let mut hosts = project.hosts_lines();
        for (n, a) in &self.extra_hosts {
            hosts.push_str(&format!("{a} {n}\n"));
        }
        let args: Vec<String> = argv.iter().map(|a| q(a)).collect();
        let args = args.join(" ");
        // start: the beacon others wait for, the dependencies, the command.
        let waited: Vec<Condition> = project
            .services
            .iter()
            .flat_map(|o| o.depends_on.iter())
            .filter(|(d, _)| *d == self.name)
            .map(|(_, c)| *c)
            .collect();
        let mut st = format!(
            "# simcluster: starts service {} (generated; do not edit).\nBB=/sim/busybox\nD={}\n",
            self.name,
            q(&dir)
        );
        if !waited.is_empty() {
            st.push_str(&format!(
                "$BB mkdir -p /run/sim-beacon && : > /run/sim-beacon/started\n$BB httpd -p {BEACON_PORT} -h /run/sim-beacon 2>/dev/null\n"
            ));
        }
        for (dep, c) in &self.depends_on {
            // By address, and with nc: simcluster's root has no name
            // service (static busybox's wget needs one even for an address).
            let n = project.services.iter().position(|o| o.name == *dep).unwrap_or(0) + 1;
            st.push_str(&format!(
                "until printf 'GET /{f} HTTP/1.0\\r\\n\\r\\n' | $BB nc -w 2 10.0.0.{n} {BEACON_PORT} 2>/dev/null | $BB head -n 1 | $BB grep -q ' 200 '; do $BB sleep 1; done # {dep}\n",
                f = c.beacon_file()
            ));
        }
        let mut files = Vec::new();
        if let Some(h) = &self.healthcheck {
            if waited.contains(&Condition::Healthy) {
                let every = h.start_interval_ns.unwrap_or(h.interval_ns) as f64 / 1e9;
                st.push_str(&format!(
                    "( until $BB sh \"$D/health\"; do $BB sleep {every}; done; : > /run/sim-beacon/healthy ) </dev/null >/dev/null 2>&1 &\n"
                ));
            }
            let secs = h.timeout_ns.div_ceil(1_000_000_000).max(1);
            let test: Vec<String> = h.test.iter().map(|a| q(a)).collect();
            files.push((
                format!("{dir}/health"),
                format!(
                    "exec /sim/busybox timeout -s KILL {secs} /sim/busybox sh {} {} >/dev/null 2>&1 </dev/null\n",
                    q(&format!("{dir}/enter")),
                    test.join(" ")
                ),
            ));
        }
        if waited.contains(&Condition::Completed) {
            st.push_str(&format!(
                "$BB sh \"$D/enter\" {args}\ns=$?\n[ \"$s\" = 0 ] && : > /run/sim-beacon/completed\nexit \"$s\"\n"
            ));
        } else {
            st.push_str(&format!("exec $BB sh \"$D/enter\" {args}\n"));
        }
        files.push((format!("{dir}/enter"), e));
        files.push((format!("{dir}/start"), st));
        files.push((format!("{dir}/hosts"), hosts));
        Ok(ServiceScripts { files })
    }
}
