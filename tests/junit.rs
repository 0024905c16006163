//! `--junit FILE`: the run's result as JUnit XML, read back with a JUnit
//! parser (junit-parser), as a CI system would.

mod common;
use common::*;

fn parse(path: &std::path::Path) -> junit_parser::TestSuites {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    junit_parser::from_reader(std::io::BufReader::new(f))
        .unwrap_or_else(|e| panic!("{}: not JUnit XML: {e}", path.display()))
}

#[test]
fn failing_executions_and_unreached_names_are_failing_test_cases() {
    // Execution 0 fails (the workload exits 3); nothing prints "@reached never".
    let d = simple(
        1,
        None,
        "echo '@reached hello'; exit 3",
        "[[expect]]\nreached = \"hello\"\n[[expect]]\nreached = \"never\"\n",
    );
    let out = tempfile::tempdir().unwrap();
    let xml = out.path().join("junit.xml");
    let r = run_cluster(d.path(), out.path(), &["--executions", "2", "--junit", xml.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
    let suites = parse(&xml);
    assert_eq!(suites.suites.len(), 1);
    let suite = &suites.suites[0];
    let names: Vec<&str> = suite.cases.iter().map(|c| c.original_name.as_str()).collect();
    assert_eq!(names, ["execution 0", "execution 1", "expect reached hello", "expect reached never"], "{suite:?}");
    let failure = |name: &str| match &suite.cases.iter().find(|c| c.original_name == name).unwrap().status {
        junit_parser::TestStatus::Failure(f) => Some(f.clone()),
        junit_parser::TestStatus::Success => None,
        other => panic!("{name}: {other:?}"),
    };
    let f0 = failure("execution 0").expect("execution 0 failed");
    assert!(f0.message.contains("exited with status 3"), "{f0:?}");
    assert!(f0.text.contains("replay with: simcluster replay "), "{f0:?}");
    let file = r.json()["failure_file"].as_str().unwrap().to_string();
    assert!(f0.text.contains(&file), "the replay command names the failure file {file}: {f0:?}");
    // Execution 1 failed too (the same workload), without a file of its own.
    assert!(failure("execution 1").is_some());
    assert!(failure("expect reached hello").is_none());
    let never = failure("expect reached never").expect("an unreached name fails");
    assert!(never.message.contains("@reached never"), "{never:?}");
    assert_eq!(suite.failures, 3, "{suite:?}");
    let prop = |k: &str| suite.properties.hashmap.get(k).cloned();
    assert_eq!(prop("trace_hash").as_deref(), r.json()["trace_hash"].as_str(), "{suite:?}");
}

#[test]
fn a_passing_run_is_all_successes() {
    let d = simple(1, None, "echo '@reached hello'", "[[expect]]\nreached = \"hello\"\n");
    let out = tempfile::tempdir().unwrap();
    let xml = out.path().join("junit.xml");
    let r = run_cluster(d.path(), out.path(), &["--executions", "2", "--junit", xml.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let suite = &parse(&xml).suites[0];
    assert_eq!((suite.tests, suite.failures, suite.errors), (3, 0, 0), "{suite:?}");
    assert!(suite.cases.iter().all(|c| matches!(c.status, junit_parser::TestStatus::Success)));
}

#[test]
fn a_junit_file_that_cannot_be_written_is_bad_input_before_the_run() {
    let d = simple(1, None, "true", "");
    let r = run(&["run", "--quiet", "--images", d.path().to_str().unwrap(), "--junit", "/nonexistent-dir/j.xml"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("/nonexistent-dir"), "{r:?}");
}
