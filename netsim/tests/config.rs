//! `[faults.network]` parsing and validation.

use std::time::Duration;

use netsim::config::{parse_duration, ConfigError, ConfigProblem, Latency, NetConfig};
use netsim::NodeId;

fn parse(s: &str) -> Result<NetConfig, toml::de::Error> {
    toml::from_str(s)
}

#[test]
fn empty_table_is_default() {
    assert_eq!(parse("").unwrap(), NetConfig::default());
    NetConfig::default().validate(3).unwrap();
}

#[test]
fn full_table() {
    let c = parse(
        r#"
        latency = { min = "50us", max = "0.2ms" }
        loss = 0.01
        duplicate = 0.001
        reorder = 0.02
        reorder_delay = "1ms"
        bandwidth = 12_500_000
        partitions = true
        [links."1-2"]
        loss = 0.5
        [links."n2->n3"]
        latency = { distribution = "exponential", min = 1000, mean = 5000, max = 100000 }
        bandwidth = 1000
        "#,
    )
    .unwrap();
    assert_eq!(c.latency, Latency::Uniform { min: 50_000, max: 200_000 });
    assert_eq!(c.reorder_delay, Latency::Fixed(1_000_000));
    assert_eq!(c.bandwidth, Some(12_500_000));
    assert!(c.partitions);
    c.validate(3).unwrap();
    let t = c.link_params(3).unwrap();
    let n = |i| NodeId::new(i).unwrap();
    let at = |a: NodeId, b: NodeId| &t[a.index() * 3 + b.index()];
    assert_eq!(at(n(1), n(2)).loss, 0.5);
    assert_eq!(at(n(2), n(1)).loss, 0.5, "two-way key applies both ways");
    assert_eq!(at(n(1), n(3)).loss, 0.01);
    assert_eq!(at(n(2), n(3)).bandwidth, Some(1000));
    assert_eq!(at(n(3), n(2)).bandwidth, Some(12_500_000), "one-way key applies one way");
    assert_eq!(at(n(2), n(3)).latency, Latency::Exponential { min: 1000, mean: 5000, max: 100_000 });
}

#[test]
fn latency_forms() {
    let l = |s: &str| parse(&format!("latency = {s}")).map(|c| c.latency);
    assert_eq!(l("250").unwrap(), Latency::Fixed(250));
    assert_eq!(l("\"1.5us\"").unwrap(), Latency::Fixed(1500));
    assert_eq!(l("{ value = \"2ms\" }").unwrap(), Latency::Fixed(2_000_000));
    assert_eq!(l("{ distribution = \"uniform\", min = 1, max = 9 }").unwrap(), Latency::Uniform { min: 1, max: 9 });
    assert_eq!(l("{ mean = 10 }").unwrap(), Latency::Exponential { min: 0, mean: 10, max: u64::MAX });
    assert!(l("-5").is_err());
    assert!(l("{ min = 1 }").unwrap_err().to_string().contains("max"));
    assert!(l("{ value = 1, min = 2 }").is_err());
    assert!(l("{ min = 1, max = 2, jitter = 3 }").unwrap_err().to_string().contains("jitter"));
    assert!(l("\"5 parsecs\"").is_err());
}

#[test]
fn durations() {
    assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
    assert_eq!(parse_duration("10µs"), Ok(Duration::from_micros(10)));
    assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
    assert_eq!(parse_duration("0.000000001s"), Ok(Duration::from_nanos(1)));
    assert!(parse_duration("1.5ns").is_err());
    assert!(parse_duration("ms").is_err());
    assert!(parse_duration("99999999999s").is_err());
    // A fraction long enough to overflow the arithmetic is an error, not a panic.
    assert_eq!(
        parse_duration("0.99999999999999999999999999999999999999s"),
        Err(netsim::config::DurationError::Malformed("0.99999999999999999999999999999999999999s".into()))
    );
    assert_eq!(
        parse_duration("3fortnights"),
        Err(netsim::config::DurationError::UnknownUnit { unit: "fortnights".into(), text: "3fortnights".into() })
    );
}

#[test]
fn unknown_fields_are_denied() {
    let e = parse("los = 0.1").unwrap_err().to_string();
    assert!(e.contains("los"), "{e}");
    let e = parse("[links.\"1-2\"]\nlosss = 0.1").unwrap_err().to_string();
    assert!(e.contains("losss"), "{e}");
}

fn err(s: &str, nodes: u16) -> ConfigError {
    parse(s).unwrap().validate(nodes).unwrap_err()
}

#[test]
fn validation_names_the_key() {
    let cases: &[(&str, &str)] = &[
        ("loss = 1.5", "faults.network.loss"),
        ("duplicate = -0.1", "faults.network.duplicate"),
        ("reorder = nan", "faults.network.reorder"),
        ("latency = { min = 10, max = 5 }", "faults.network.latency"),
        ("reorder_delay = { min = 10, max = 5 }", "faults.network.reorder_delay"),
        ("latency = { min = 10, mean = 5, max = 50 }", "faults.network.latency"),
        ("bandwidth = 0", "faults.network.bandwidth"),
        ("[links.\"1-9\"]\nloss = 0.1", "faults.network.links.\"1-9\""),
        ("[links.\"2-2\"]\nloss = 0.1", "faults.network.links.\"2-2\""),
        ("[links.\"a-b\"]\nloss = 0.1", "faults.network.links.\"a-b\""),
        ("[links.\"12\"]\nloss = 0.1", "faults.network.links.\"12\""),
        ("[links.\"1-2\"]\nloss = 2.0", "faults.network.links.\"1-2\".loss"),
        ("[links.\"1-2\"]\nlatency = { min = 3, max = 1 }", "faults.network.links.\"1-2\".latency"),
        ("[links.\"1-2\"]\nbandwidth = 0", "faults.network.links.\"1-2\".bandwidth"),
        ("[links.\"1-2\"]\n[links.\"n2-n1\"]", "faults.network.links.\"n2-n1\""),
    ];
    for (toml, key) in cases {
        let e = err(toml, 3);
        assert_eq!(e.key.to_string(), *key, "{toml}: {e}");
        assert!(e.to_string().starts_with(key), "message names the key: {e}");
    }
    assert!(matches!(err("[links.\"1-4\"]", 3).problem, ConfigProblem::UnknownNode { node: 4, node_count: 3 }));
    assert!(matches!(err("loss = 1.5", 3).problem, ConfigProblem::Probability { value } if value == 1.5));
    assert!(matches!(err("", 0).problem, ConfigProblem::NodeCount { node_count: 0 }));
    // The key's segments are below [faults.network]; a link's name is one.
    assert_eq!(err("[links.\"1-2\"]\nloss = 2.0", 3).key.segments(), ["links", "1-2", "loss"]);
    // One two-way and one one-way key on the same pair are fine.
    parse("[links.\"1-2\"]\n[links.\"1->2\"]\n[links.\"2->1\"]").unwrap().validate(2).unwrap();
}

#[test]
fn nested_in_cluster_toml() {
    #[derive(serde::Deserialize)]
    struct Faults {
        network: NetConfig,
    }
    #[derive(serde::Deserialize)]
    struct Cluster {
        faults: Faults,
    }
    let c: Cluster = toml::from_str("[faults.network]\nloss = 0.25\npartitions = true\n").unwrap();
    assert_eq!(c.faults.network.loss, 0.25);
    assert!(c.faults.network.partitions);
}
