//! A Stage call as the helper receives it (a gRPC request stream, decoded
//! by tonic's generated server), then the validation under an allow-list.
//! No panic; what passes is canonical and inside the allow-list, and
//! weights pass only inside systemd's range.
#![no_main]

use bootc_operator_fuzz::{Seen, serve_one};
use helper::validate::{ImagePolicy, stage_image, stage_weights};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(Seen::Stage(request)) = serve_one(&proto::path("Stage"), data).1 else {
        return;
    };
    let policy = ImagePolicy {
        allowed_repositories: vec!["quay.io/acme/os".into(), "localhost:5000/".into()],
        enforce_sigpolicy: true,
    };
    let (io, cpu) = (request.io_weight, request.cpu_weight);
    if stage_weights(io, cpu).is_ok() {
        assert!((1..=10_000).contains(&io) && (1..=10_000).contains(&cpu));
    }
    for policy in [ImagePolicy::default(), policy] {
        if let Ok(image) = stage_image(&request.image, &policy) {
            assert_eq!(image, request.image);
            assert!(policy.allows(image.split('@').next().unwrap_or_default()));
        }
    }
});
