//! bootc's status output, as the helper parses it: no panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(host) = helper::status::parse(data) {
        let _ = helper::status::response(&host);
        let _ = helper::status::staged_image(&host);
    }
});
