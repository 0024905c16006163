//! Failure files as `simcluster replay` and `shrink` read them
//! (`explore::failure_file::decode`). The first input byte picks the form:
//! even, the input is the whole file (header, checksum, payload); odd, the
//! rest is a payload put behind a valid header, so that mutants get past
//! the checksum to the record's fields.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&form, rest)) = input.split_first() else { return };
    let path = Path::new("failure.json");
    if form % 2 == 0 {
        let _ = explore::failure_file::decode::<engine::strategy::Decision>(path, rest);
    } else {
        let header = format!(
            "{{\"simcluster_failure_file\":2,\"crc32\":\"{:08x}\",\"payload_bytes\":{}}}\n",
            crc32fast::hash(rest),
            rest.len()
        );
        let file = [header.as_bytes(), rest].concat();
        let _ = explore::failure_file::decode::<engine::strategy::Decision>(path, &file);
    }
});
