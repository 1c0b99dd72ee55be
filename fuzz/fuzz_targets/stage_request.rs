//! A call frame as the helper receives it (the length, then a `Call`), and
//! for a Stage, the validation under an allow-list. No panic; what passes
//! is canonical and inside the allow-list.
#![no_main]

use helper::validate::{ImagePolicy, stage_image};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Some((header, body)) = data.split_first_chunk::<{ proto::frame::HEADER }>() else {
        return;
    };
    let Ok(len) = proto::frame::length(*header) else {
        return;
    };
    let Ok(call) = proto::Call::decode(&body[..len.min(body.len())]) else {
        return;
    };
    let Some(proto::call::Method::Stage(request)) = call.method else {
        return;
    };
    let policy = ImagePolicy {
        allowed_repositories: vec!["quay.io/acme/os".into(), "localhost:5000/".into()],
        enforce_sigpolicy: true,
    };
    for policy in [ImagePolicy::default(), policy] {
        if let Ok(image) = stage_image(&request.image, &policy) {
            assert_eq!(image, request.image);
            assert!(policy.allows(image.split('@').next().unwrap_or_default()));
        }
    }
});
