//! The image-reference grammar (api::image_ref): no panic, and whatever
//! parse_pinned accepts is spelled exactly as it prints.
#![no_main]

use api::image_ref::ImageRef;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &str| {
    let _ = ImageRef::parse(input);
    if let Ok(r) = ImageRef::parse_pinned(input) {
        assert_eq!(r.to_string(), input);
        assert!(r.tag.is_none() && r.digest.is_some());
    }
});
