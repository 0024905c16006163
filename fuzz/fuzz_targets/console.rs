//! Console lines as a guest prints them: the agent's `@sim` messages,
//! `@reached`, the `@history` markers and the kernel's panic line
//! (`engine::console`). A line may mean nothing; it may not panic.
#![no_main]

use engine::console::{agent_message, history_marker, is_kernel_panic, reached_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    for line in String::from_utf8_lossy(input).lines() {
        let _ = (agent_message(line), reached_name(line), history_marker(line), is_kernel_panic(line));
    }
});
