//! cluster.toml as `Cluster::parse` reads it: the example, typos, each
//! section's mistakes and the lines errors name.

use std::time::Duration;

use super::*;

/// 0-based indices of a node list, for comparing with literals.
fn ix(nodes: &[engine::NodeId]) -> Vec<usize> {
    nodes.iter().map(|n| n.index()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("app"), "x").unwrap();
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), text)
    }

    const GOOD: &str = r#"
[cluster]
nodes = 3
[image]
packages = ["busybox-static"]
files = { "/usr/local/bin/app" = "app" }
[node]
start = "/usr/local/bin/app"
[workload]
node = "n1"
command = "sleep 30; echo done"
[[invariant]]
node = "n1"
command = "test -f /tmp/ok"
[[invariant]]
name = "everywhere"
node = "all"
command = "true"
"#;

    #[test]
    fn the_documented_example_parses() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.node_count(), 3);
        assert_eq!(c.workload_node, 0);
        assert_eq!(c.invariants.len(), 4);
        assert_eq!(c.invariants[0].0, "invariant-1");
        assert_eq!(c.invariants[3], ("everywhere".into(), 2, "true".into()));
    }

    #[test]
    fn client_only_nodes_are_out_of_the_crash_default_unless_named() {
        let with = |extra: &str| {
            parse(
                &GOOD
                    .replace("nodes = 3", "nodes = 4\nclients = [\"n4\"]")
                    .replace("[node]", &format!("{extra}\n[node]")),
            )
        };
        let c = with("").unwrap();
        assert_eq!(c.clients, vec![3]);
        // n1 runs the workload; n4 is a client.
        assert_eq!(ix(&c.explore.crashable), vec![1, 2]);
        let c = with("[faults.crash]\nnodes = [\"n2\", \"n4\"]").unwrap();
        assert_eq!(ix(&c.explore.crashable), vec![1, 3], "a client named in [faults.crash] nodes may crash");
        let e = parse(&GOOD.replace("nodes = 3", "nodes = 3\nclients = [\"n5\"]")).unwrap_err().to_string();
        assert!(e.contains("clients") && e.contains("\"n5\": no such node"), "{e}");
        let e = parse(&GOOD.replace("nodes = 3", "nodes = 3\nclients = [\"n2\", \"n2\"]")).unwrap_err().to_string();
        assert!(e.contains("named twice"), "{e}");
        let all = "nodes = 3\nclients = [\"n1\", \"n2\", \"n3\"]";
        let e = parse(&GOOD.replace("nodes = 3", all)).unwrap_err().to_string();
        assert!(e.contains("at least one node must be a server"), "{e}");
    }

    #[test]
    fn a_typo_names_the_key_and_line() {
        let e = parse(&GOOD.replace("command = \"sleep", "comand = \"sleep")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("cluster.toml"), "{msg}");
        assert!(msg.contains("comand"), "{msg}");
        assert!(msg.contains("line 11"), "{msg}");
    }

    #[test]
    fn unknown_nodes_and_files_are_rejected() {
        let e =
            parse(&GOOD.replace("node = \"n1\"\ncommand = \"sleep", "node = \"n4\"\ncommand = \"sleep")).unwrap_err();
        assert!(e.to_string().contains("\"n4\": no such node"), "{e}");
        let e = parse(&GOOD.replace("= \"app\"", "= \"missing\"")).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let e = parse(&GOOD.replace("nodes = 3", "nodes = 0")).unwrap_err();
        assert!(e.to_string().contains("nodes = 0"), "{e}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("90s"), Some(90_000_000_000));
        assert_eq!(parse_duration_ns("250ms"), Some(250_000_000));
        assert_eq!(parse_duration_ns("2m"), Some(120_000_000_000));
        assert_eq!(parse_duration_ns("7"), Some(7_000_000_000));
        assert_eq!(parse_duration_ns("7 parsecs"), None);
        assert_eq!(parse_duration_ns("-1s"), None);
    }

    #[test]
    fn node_names() {
        assert_eq!(parse_node_name("n1", 3), Some(0));
        assert_eq!(parse_node_name("n3", 3), Some(2));
        assert_eq!(parse_node_name("n4", 3), None);
        assert_eq!(parse_node_name("n01", 3), None);
        assert_eq!(parse_node_name("x1", 3), None);
    }

    #[test]
    fn cpuid_modes_parse_and_an_unknown_one_is_bad_input() {
        let with = |v: &str| parse(&GOOD.replace("nodes = 3", &format!("nodes = 3\ncpuid = \"{v}\"")));
        assert_eq!(parse(GOOD).unwrap().spec.cluster.cpuid, CpuidMode::Virtual);
        for (v, mode, virtualised) in [
            ("virtual", CpuidMode::Virtual, true),
            ("strict", CpuidMode::Strict, true),
            ("host", CpuidMode::Host, false),
        ] {
            let c = with(v).unwrap();
            assert_eq!(c.spec.cluster.cpuid, mode);
            assert_eq!((mode.name(), mode.virtualised()), (v, virtualised));
        }
        // A ClusterError: the binary's exit 2, naming the file, the value
        // and the choices.
        let e = with("fast").unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, ClusterError::Syntax { .. } | ClusterError::Invalid { .. }), "{e:?}");
        for want in ["cluster.toml", "fast", "virtual", "strict", "host"] {
            assert!(msg.contains(want), "{want:?} missing: {msg}");
        }
    }
}

#[cfg(test)]
mod fault_tests {
    use super::*;

    fn parse(extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[cluster]\nnodes = 3\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n{extra}");
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text)
    }

    #[test]
    fn network_faults_and_partitions_parse() {
        let c = parse(
            "[faults.network]\nloss = 0.2\nreorder = 0.1\npartitions = true\n\
             [[faults.partition]]\nat = \"5s\"\nheal = \"15s\"\ngroups = [[\"n1\"], [\"n2\", \"n3\"]]\n\
             [[faults.partition]]\nat = \"20s\"\nheal = \"30s\"\nfrom = [\"n1\"]\nto = [\"n2\"]\n",
        )
        .unwrap();
        assert_eq!(c.spec.faults.network.loss, 0.2);
        assert_eq!(c.partitions.len(), 2);
        assert_eq!(c.partitions[0].at.as_ns(), 5_000_000_000);
        assert!(c.partitions[1].partition.blocks(engine::NodeId::new(1).unwrap(), engine::NodeId::new(2).unwrap()));
        assert!(!c.partitions[1].partition.blocks(engine::NodeId::new(2).unwrap(), engine::NodeId::new(1).unwrap()));
    }

    #[test]
    fn bad_fault_settings_are_named() {
        let e = parse("[faults.network]\nloss = 1.5\n").unwrap_err().to_string();
        assert!(e.contains("loss") && e.contains("1.5"), "{e}");
        let e = parse("[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\ngroups = [[\"n1\"], [\"n9\"]]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"n9\": no such node"), "{e}");
        let e =
            parse("[[faults.partition]]\nat = \"3s\"\nheal = \"2s\"\ngroups = [[\"n1\"]]\n").unwrap_err().to_string();
        assert!(e.contains("heal"), "{e}");
    }
}

#[cfg(test)]
mod node_fault_tests {
    use super::*;

    fn parse(extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[cluster]\nnodes = 3\n[node]\nstart = \"sleep 100\"\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n{extra}");
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text)
    }

    #[test]
    fn pauses_and_clock_faults_are_off_by_default() {
        let c = parse("").unwrap();
        assert_eq!(c.explore.pause.max, 0);
        assert!(!c.explore.clock.jumps() && c.explore.clock.offset_ns.is_none() && c.explore.clock.drift_ppm.is_none());
        assert!(!c.spec.faults.clock.needs_helper());
        assert_eq!(c.explore.quiet_settle, None, "no fault, no quiet period");
    }

    #[test]
    fn pause_and_clock_tables_parse_with_their_defaults() {
        let c = parse(
            "[faults.pause]\nmax = 2\n[faults.clock]\nbump = { min = \"-3s\", max = \"+250ms\" }\nstrobe = true\n",
        )
        .unwrap();
        let p = &c.explore.pause;
        assert_eq!(
            (p.max, ix(&p.nodes), p.length, p.span, p.weight),
            (2, vec![0, 1, 2], (Duration::from_secs(1), Duration::from_secs(5)), Duration::from_secs(10), 50)
        );
        let k = &c.explore.clock;
        assert_eq!(k.bump_ns, Some((-3_000_000_000, 250_000_000)));
        assert_eq!(
            k.strobe,
            Some(engine::StrobeSpec {
                delta_ns: 200_000_000,
                period: Duration::from_millis(10),
                length: Duration::from_secs(1)
            })
        );
        assert_eq!((k.max, ix(&k.nodes), k.weight), (1, vec![0, 1, 2], 50));
        assert!(c.spec.faults.clock.needs_helper());
        assert!(c.explore.quiet_settle.is_some(), "pauses and jumps calm down before the checks");

        let c = parse(
            "[faults.clock]\noffset = \"-2s\"\ndrift_ppm = { min = -100, max = 100000 }\nnodes = [\"n3\", \"n2\"]\n",
        )
        .unwrap();
        let k = &c.explore.clock;
        assert_eq!(
            (k.offset_ns, k.drift_ppm, k.max, ix(&k.nodes)),
            (Some((-2_000_000_000, -2_000_000_000)), Some((-100, 100_000)), 0, vec![1, 2])
        );
        assert_eq!(c.explore.quiet_settle, None, "offsets and drift never calm");
        let c = parse("[faults.clock]\nstrobe = { delta = \"-1s\", period = \"50ms\", length = \"2s\" }\nmax = 4\n")
            .unwrap();
        assert_eq!(c.explore.clock.strobe.unwrap().delta_ns, -1_000_000_000);
    }

    #[test]
    fn bad_pause_and_clock_values_name_their_key() {
        for (toml, needle) in [
            ("[faults.pause]\nmax = -1\n", "[faults.pause] max = -1"),
            (
                "[faults.pause]\nmax = 1\nlength = { min = \"-1s\", max = \"2s\" }\n",
                "[faults.pause] length.min = \"-1s\"",
            ),
            (
                "[faults.pause]\nmax = 1\nlength = { min = \"3s\", max = \"2s\" }\n",
                "[faults.pause] length.min = \"3s\" is above max",
            ),
            ("[faults.pause]\nmax = 1\nnodes = [\"n7\"]\n", "[faults.pause] nodes #1 = \"n7\": no such node"),
            ("[faults.pause]\nmax = 1\nweight = -5\n", "[faults.pause] weight = -5"),
            ("[faults.pause]\nmax = 1\nspan = \"soon\"\n", "[faults.pause] span = \"soon\""),
            (
                "[faults.clock]\noffset = { min = \"1s\", max = \"-1s\" }\n",
                "[faults.clock] offset.min = \"1s\" is above max",
            ),
            ("[faults.clock]\nbump = \"2 fortnights\"\n", "[faults.clock] bump.min = \"2 fortnights\""),
            ("[faults.clock]\ndrift_ppm = 200000\n", "[faults.clock] drift_ppm"),
            ("[faults.clock]\ndrift_ppm = { min = 5, max = 1 }\n", "[faults.clock] drift_ppm.min = 5 is above max = 1"),
            ("[faults.clock]\nmax = 2\n", "[faults.clock] max = 2: nothing to jump"),
            ("[faults.clock]\nbump = \"1s\"\nnodes = [\"x\"]\n", "[faults.clock] nodes #1 = \"x\""),
            ("[faults.clock]\nstrobe = { delta = \"0s\" }\n", "[faults.clock] strobe.delta"),
            ("[faults.clock]\nstrobe = { period = \"1s\", length = \"10ms\" }\n", "[faults.clock] strobe.length"),
        ] {
            let e = parse(toml).unwrap_err().to_string();
            assert!(e.contains("cluster.toml") && e.contains(needle), "{toml}: {e}");
        }
        for (toml, key) in [
            ("[faults.pause]\nmaxx = 1\n", "maxx"),
            ("[faults.pause]\nlength = { min = \"1s\", mx = \"2s\" }\n", "mx"),
            ("[faults.clock]\nstrobe = { delta = \"1s\", perod = \"1s\" }\n", "perod"),
            ("[faults.clock]\nbumps = \"1s\"\n", "bumps"),
        ] {
            let e = parse(toml).unwrap_err().to_string();
            assert!(e.contains("cluster.toml") && e.contains(key) && e.contains("line"), "{toml}: {e}");
        }
        // Nothing to pause without a start command.
        let dir = tempfile::tempdir().unwrap();
        let text = "[cluster]\nnodes = 2\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n[faults.pause]\nmax = 1\n";
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), text).unwrap_err().to_string();
        assert!(e.contains("[faults.pause] max = 1: the nodes have no start command"), "{e}");
    }
}

#[cfg(test)]
mod host_workload_tests {
    use super::*;

    fn parse(workload: &str, extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("want.txt"), "1\n2\n").unwrap();
        let text = format!("[cluster]\nnodes = 2\n{workload}\n{extra}");
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text)
    }

    #[test]
    fn a_host_workload_parses_with_defaults() {
        let c = parse(
            "[workload.host]\nrequests = [ { node = \"n2\", port = 8080, path = \"/data\", body_contains = \"2\" },\n\
             { node = \"n1\", port = 80, method = \"POST\", body = \"x\", expect_status = 201, body_file = \"want.txt\" } ]\n\
             repeat = 3\nconcurrency = 2\nstart_after = \"1s\"\n",
            "",
        )
        .unwrap();
        let w = c.host_workload.as_ref().unwrap();
        assert_eq!(c.workload_node, 2, "the host client is node N+1");
        assert_eq!((w.repeat, w.concurrency), (3, 2));
        assert_eq!((w.start_after, w.timeout), (std::time::Duration::from_secs(1), std::time::Duration::from_secs(30)));
        assert_eq!(
            (w.requests[0].node.number(), w.requests[0].method.as_str(), w.requests[0].expect_status),
            (2, "GET", 200)
        );
        assert_eq!(w.requests[1].body_equals.as_deref(), Some(&b"1\n2\n"[..]));
        assert_eq!(w.requests[1].body, b"x");
        // Crashes may hit every guest: none runs the workload.
        assert_eq!(ix(&c.explore.crashable), vec![0, 1]);
    }

    #[test]
    fn host_workload_mistakes_are_named() {
        let req = |r: &str| format!("[workload.host]\nrequests = [ {{ {r} }} ]\n");
        let e = parse(&req("node = \"n3\", port = 80"), "").unwrap_err().to_string();
        assert!(e.contains("cluster.toml") && e.contains("requests #1") && e.contains("\"n3\": no such node"), "{e}");
        let e = parse(&req("node = \"n1\", port = 0"), "").unwrap_err().to_string();
        assert!(e.contains("port = 0"), "{e}");
        let e = parse(&req("node = \"n1\", port = 80, path = \"data\""), "").unwrap_err().to_string();
        assert!(e.contains("path"), "{e}");
        let e = parse(&req("node = \"n1\", port = 80, body_file = \"nope\""), "").unwrap_err().to_string();
        assert!(e.contains("body_file") && e.contains("nope"), "{e}");
        // A device never ends: only a regular file is read.
        let e = parse(&req("node = \"n1\", port = 80, body_file = \"/dev/zero\""), "").unwrap_err().to_string();
        assert!(e.contains("body_file = \"/dev/zero\"") && e.contains("not a regular file"), "{e}");
        let e = parse(&req("node = \"n1\", prot = 80"), "").unwrap_err().to_string();
        assert!(e.contains("prot"), "{e}");
        let e = parse("[workload.host]\nrequests = []\n", "").unwrap_err().to_string();
        assert!(e.contains("requests is empty"), "{e}");
        let e = parse("[workload]\nnode = \"n1\"\ncommand = \"true\"\n[workload.host]\nrequests = [ { node = \"n1\", port = 80 } ]\n", "")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exclude each other"), "{e}");
        let e = parse("[workload]\n", "").unwrap_err().to_string();
        assert!(e.contains("[workload.host]"), "{e}");
    }

    #[test]
    fn partitions_may_name_the_host_only_with_a_host_workload() {
        let host = "[workload.host]\nrequests = [ { node = \"n1\", port = 80 } ]\n";
        let cut = "[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\ngroups = [[\"n1\", \"host\"], [\"n2\"]]\n";
        let c = parse(host, cut).unwrap();
        let (n1, host_id) = (engine::NodeId::new(1).unwrap(), engine::NodeId::new(3).unwrap());
        assert!(!c.partitions[0].partition.blocks(host_id, n1));
        assert!(c.partitions[0].partition.blocks(host_id, engine::NodeId::new(2).unwrap()));
        let e = parse("[workload]\nnode = \"n1\"\ncommand = \"true\"\n", cut).unwrap_err().to_string();
        assert!(e.contains("\"host\": no such node"), "{e}");
    }
}

#[cfg(test)]
mod line_tests {
    use super::*;

    const HEAD: &str = "[cluster]\nnodes = 3\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n";

    /// The error for HEAD + `extra`, and the 1-based line of the first line of
    /// `extra` that contains `needle`.
    fn error_at(extra: &str, needle: &str) -> (String, usize) {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{HEAD}{extra}");
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text).unwrap_err();
        assert!(matches!(e, ClusterError::Invalid { .. }), "{e}");
        let line = 1 + text.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle:?} in {text}"));
        (e.to_string(), line)
    }

    #[test]
    fn a_bad_value_names_file_line_and_key() {
        let (e, line) =
            error_at("[disk]\nsize_mb = 16\nmount = \"/data\"\n[faults.disk]\n\nlost_flush = 1.5\n", "lost_flush");
        assert_eq!(line, 11);
        assert!(
            e.ends_with("cluster.toml: line 11: [faults.disk] lost_flush = 1.5: a probability is within [0, 1]"),
            "{e}"
        );
        let (e, line) = error_at("[faults.disk]\nmisdirect = 0.5\n", "misdirect");
        assert!(
            e.contains(&format!("cluster.toml: line {line}: [faults.disk] misdirect = 0.5: the nodes have no disk")),
            "{e}"
        );
        // The key wherever the table is written: dotted keys, inline tables.
        let dir = tempfile::tempdir().unwrap();
        let text = format!("faults.disk.write_error = -1\n{HEAD}");
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text).unwrap_err().to_string();
        assert!(e.contains("line 1: [faults.disk] write_error = -1"), "{e}");
        let (e, line) = error_at("[faults]\ndisk = { corrupt_read = 2 }\n", "corrupt_read");
        assert!(e.contains(&format!("line {line}: [faults.disk] corrupt_read = 2")), "{e}");
        let (e, line) = error_at("[disk]\nsize_mb = 8\nmount = \"/data\"\n", "size_mb");
        assert!(e.contains(&format!("line {line}: [disk] size_mb = 8")), "{e}");
        let (e, line) = error_at("[run]\ntime_limit = \"soon\"\n", "time_limit");
        assert!(e.contains(&format!("line {line}: [run] time_limit")), "{e}");
    }

    #[test]
    fn array_elements_are_found_by_number_name_or_value() {
        let parts = "[[faults.partition]]\nat = \"1s\"\nheal = \"2s\"\ngroups = [[\"n1\"], [\"n2\"]]\n\
                     [[faults.partition]]\nat = \"5s\"\nheal = \"4s\"\ngroups = [[\"n1\"], [\"n2\"]]\n";
        let (e, line) = error_at(parts, "heal = \"4s\"");
        assert!(e.contains(&format!("line {line}: [[faults.partition]] #2: heal")), "{e}");
        let live = "[[liveness]]\nname = \"a\"\nnode = \"n1\"\ncommand = \"true\"\nwithin = \"1s\"\n\
                    [[liveness]]\nname = \"b\"\nnode = \"n1\"\ncommand = \"true\"\nwithin = \"never\"\n";
        let (e, line) = error_at(live, "never");
        assert!(e.contains(&format!("line {line}: [[liveness]] b: within")), "{e}");
        // A name used twice: its second use.
        let inv = "[[invariant]]\nname = \"x\"\nnode = \"n1\"\ncommand = \"true\"\n\
                   [[invariant]]\nname = \"y\"\nnode = \"n1\"\ncommand = \"true\"\n\
                   [[invariant]]\nname = \"x\"\nnode = \"n2\"\ncommand = \"true\"\n";
        let (e, _) = error_at(inv, "name = \"x\"");
        assert!(e.contains("line 15: [[invariant]] x: name is used twice"), "{e}");
        // An unnamed invariant goes by its default name.
        let inv =
            "[[invariant]]\nnode = \"n1\"\ncommand = \"true\"\n[[invariant]]\nnode = \"n7\"\ncommand = \"true\"\n";
        let (e, line) = error_at(inv, "n7");
        assert!(e.contains(&format!("line {line}: [[invariant]] invariant-2: node = \"n7\"")), "{e}");
    }

    #[test]
    fn key_paths_and_elements_of_array_values() {
        let (e, line) = error_at("[faults.network.links.\"n1-n2\"]\nloss = 1.5\n", "loss");
        assert!(e.contains(&format!("line {line}: [faults.network] links.\"n1-n2\".loss: probability 1.5")), "{e}");
        let host =
            "[workload.host]\nrequests = [\n  { node = \"n1\", port = 80 },\n  { node = \"n9\", port = 80 },\n]\n";
        let dir = tempfile::tempdir().unwrap();
        let text = format!("[cluster]\nnodes = 2\n{host}");
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &text).unwrap_err().to_string();
        assert!(e.contains("line 6: [workload.host] requests #2: node = \"n9\""), "{e}");
    }

    #[test]
    fn the_header_or_nothing_when_no_key_is_found() {
        // About the table as a whole: its header.
        let dir = tempfile::tempdir().unwrap();
        let text = "[cluster]\nnodes = 2\n\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n[workload.host]\nrequests = [ { node = \"n1\", port = 80 } ]\n";
        let e = Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), text).unwrap_err().to_string();
        assert!(e.contains("cluster.toml: line 4: [workload]: node + command"), "{e}");
        // The array as a whole: its first header.
        let two = format!(
            "{HEAD}[[invariant]]\nnode = \"n1\"\ncommand = \"a\"\n[[invariant]]\nnode = \"n1\"\ncommand = \"b\"\n"
        );
        assert_eq!(locate_line(&two, &KeyPath::array("invariant")), Some(6));
        // The element named, its key when written, else its header.
        assert_eq!(locate_line(&two, &KeyPath::array("invariant").nth(1).key("command")), Some(11));
        assert_eq!(locate_line(&two, &KeyPath::array("invariant").nth(1).key("name")), Some(9));
        assert_eq!(locate_line(&two, &KeyPath::array("invariant").nth(2)), Some(6));
        // A table the file does not write: no line.
        assert_eq!(locate_line(HEAD, &KeyPath::table("nosuch").key("key")), None);
        assert_eq!(locate_line(HEAD, &KeyPath::table("disk").key("size_mb")), None);
        let problem = KeyPath::table("x").key("y").invalid(": z");
        let e = ClusterError::Invalid { path: "c/cluster.toml".into(), line: None, problem };
        assert_eq!(e.to_string(), "c/cluster.toml: [x] y: z");
    }
}

#[cfg(test)]
mod history_tests {
    use super::*;
    use checker::history_check::HistoryModel;

    const HEAD: &str = "[cluster]\nnodes = 2\n[workload]\nnode = \"n1\"\ncommand = \"true\"\n";

    fn parse(extra: &str) -> Result<Cluster, ClusterError> {
        let dir = tempfile::tempdir().unwrap();
        Cluster::parse(dir.path(), &dir.path().join("cluster.toml"), &format!("{HEAD}{extra}"))
    }

    #[test]
    fn the_history_model_defaults_to_register_and_txn_models_to_serializable() {
        let c = parse("[check]\nhistory = \"n2\"\n").unwrap();
        assert_eq!((c.history_node, c.history_model), (Some(1), HistoryModel::Register));
        let hc = c.history_check().unwrap();
        assert_eq!((hc.node.index(), hc.invariant.as_str()), (1, "history-linearizable"));
        let c = parse("[check]\nhistory = \"n1\"\nmodel = \"list-append\"\n").unwrap();
        let want =
            HistoryModel::Txn { model: txncheck::Model::ListAppend, consistency: txncheck::Consistency::Serializable };
        assert_eq!(c.history_model, want);
        assert_eq!(c.history_check().unwrap().kind, engine::FailureKind::Anomaly);
        let c = parse("[check]\nhistory = \"n1\"\nmodel = \"rw-register\"\nconsistency = \"snapshot-isolation\"\n");
        assert_eq!(c.unwrap().history_check().unwrap().invariant, "history-snapshot-isolation");
        assert!(parse("").unwrap().history_check().is_none());
    }

    #[test]
    fn set_and_queue_models_check_lost_elements() {
        let c = parse("[check]\nhistory = \"n1\"\nmodel = \"set\"\n").unwrap();
        assert_eq!(c.history_model, HistoryModel::Set { linearizable: false });
        let hc = c.history_check().unwrap();
        assert_eq!((hc.invariant.as_str(), hc.kind), ("history-set-full", engine::FailureKind::Anomaly));
        let c = parse("[check]\nhistory = \"n1\"\nmodel = \"set\"\nconsistency = \"linearizable\"\n").unwrap();
        assert_eq!(c.history_model, HistoryModel::Set { linearizable: true });
        let c = parse("[check]\nhistory = \"n2\"\nmodel = \"queue\"\n").unwrap();
        assert_eq!(c.history_check().unwrap().invariant, "history-total-queue");
    }

    #[test]
    fn bad_models_and_consistencies_name_file_line_and_key() {
        for (extra, line, needles) in [
            ("[check]\nhistory = \"n1\"\nmodel = \"bank\"\n", 8, &["[check] model = \"bank\": unknown model"][..]),
            (
                "[check]\nhistory = \"n1\"\nmodel = \"list-append\"\nconsistency = \"linearizable\"\n",
                9,
                &["[check] consistency = \"linearizable\"", "read-committed"],
            ),
            (
                "[check]\nhistory = \"n1\"\nconsistency = \"serializable\"\n",
                8,
                &["[check] consistency = \"serializable\"", "applies to the transactional models"],
            ),
            ("[check]\nmodel = \"list-append\"\n", 7, &["[check] model: there is no history to check"]),
            (
                "[check]\nhistory = \"n1\"\nmodel = \"set\"\nconsistency = \"serializable\"\n",
                9,
                &["[check] consistency = \"serializable\"", "the set model takes consistency \"linearizable\""],
            ),
            (
                "[check]\nhistory = \"n1\"\nmodel = \"queue\"\nconsistency = \"linearizable\"\n",
                9,
                &["[check] consistency = \"linearizable\"", "the queue model takes none"],
            ),
        ] {
            let e = parse(extra).unwrap_err();
            assert!(matches!(e, ClusterError::Invalid { .. }), "{e}");
            let e = e.to_string();
            assert!(e.contains(&format!("cluster.toml: line {line}: ")), "{extra}: {e}");
            for n in needles {
                assert!(e.contains(n), "{extra}: {e} lacks {n}");
            }
        }
    }
}
