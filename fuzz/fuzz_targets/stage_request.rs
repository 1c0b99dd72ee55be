//! A Stage request as the helper receives it: protobuf bytes, then the
//! validation under an allow-list. No panic; what passes is canonical and
//! inside the allow-list.
#![no_main]

use helper::validate::{ImagePolicy, stage_image};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Ok(request) = proto::StageRequest::decode(data) else {
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
