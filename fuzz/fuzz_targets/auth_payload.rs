//! A WriteAuth payload: no panic; what passes re-parses as the allow-listed
//! docker config and is what gets written; an error quotes no input.
#![no_main]

use helper::validate::{DockerConfig, auth_payload};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match auth_payload(data) {
        Ok(written) => {
            let config: DockerConfig =
                serde_json::from_slice(&written).expect("written config re-parses");
            assert_eq!(serde_json::to_vec(&config).expect("serialises"), written);
        }
        Err(e) => {
            let text = e.to_string();
            // Any 16-byte run of the input that is printable text must not
            // show up in the message.
            if let Ok(s) = std::str::from_utf8(data) {
                let chars: Vec<char> = s.chars().collect();
                for w in chars.windows(16) {
                    let w: String = w.iter().collect();
                    if w.chars().all(|c| c.is_ascii_alphanumeric()) {
                        assert!(!text.contains(&w), "{text} quotes {w}");
                    }
                }
            }
        }
    }
});
