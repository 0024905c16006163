//! `sdk-rust MODE`: assertions of every kind through the Antithesis Rust
//! SDK, unchanged. `setup` reports setup_complete; `good` holds every
//! property; `bad` makes an always false.

use antithesis_sdk::prelude::*;
use serde_json::json;

fn main() {
    antithesis_init();
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "setup" {
        antithesis_sdk::lifecycle::setup_complete(&json!({"program": "sdk-rust"}));
        return;
    }
    let pid = u64::from(std::process::id());
    assert_reachable!("rust program ran", &json!({"mode": mode}));
    assert_always!(mode != "bad", "rust mode is not bad", &json!({"mode": mode}));
    assert_sometimes!(pid > 1, "rust pid above 1", &json!({"pid": pid}));
    assert_always_greater_than!(pid, 0u64, "rust pid positive", &json!({}));
    if mode == "never" {
        assert_unreachable!("rust never here", &json!({"mode": mode}));
    }
    println!("sdk-rust {mode}: done");
}
