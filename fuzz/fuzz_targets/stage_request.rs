//! A Stage call as the helper receives it (a gRPC request stream, decoded
//! by tonic's generated server), then the validation under an allow-list.
//! No panic; what passes is canonical and inside the allow-list.
#![no_main]

use bootc_operator_fuzz::{Seen, serve_one};
use helper::validate::{ImagePolicy, stage_image};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(Seen::Stage(request)) = serve_one(&proto::path("Stage"), data).1 else {
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
