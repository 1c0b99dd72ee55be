#![allow(clippy::unwrap_used)]
//! Properties of what the root helper parses from the daemon and from bootc
//! (the same functions the fuzz targets drive; these run in every
//! `./dev test`): the frames it reads, Stage requests, WriteAuth payloads,
//! bootc's status, its own command line.

use helper::validate::{DockerConfig, ImagePolicy, ValidationError, auth_payload, stage_image};
use proptest::prelude::*;

fn policy() -> impl Strategy<Value = ImagePolicy> {
    (
        proptest::collection::vec("[a-z0-9.:/]{0,12}", 0..3),
        any::<bool>(),
    )
        .prop_map(|(allowed_repositories, enforce_sigpolicy)| ImagePolicy {
            allowed_repositories,
            enforce_sigpolicy,
        })
}

/// JSON-ish text: braces, quotes, keys the docker config knows, noise.
fn jsonish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("{".to_owned()),
            Just("}".to_owned()),
            Just("\"auths\"".to_owned()),
            Just("\"credHelpers\"".to_owned()),
            Just("\"auth\"".to_owned()),
            Just(":".to_owned()),
            Just(",".to_owned()),
            Just("[".to_owned()),
            Just("]".to_owned()),
            "\"[a-z0-9.: ]{0,8}\"",
            "[0-9]{1,4}",
            Just("null".to_owned()),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

/// A call frame: noise, or a real call (of any method) with its bytes
/// overwritten here and there.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    use proto::call::Method;
    let method = prop_oneof![
        any::<String>().prop_map(|image| Method::Stage(proto::StageRequest { image })),
        any::<bool>().prop_map(|soft_reboot| Method::Apply(proto::ApplyRequest { soft_reboot })),
        Just(Method::Status(proto::StatusRequest {})),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(|docker_config_json| {
            Method::WriteAuth(proto::WriteAuthRequest { docker_config_json })
        }),
    ];
    let call = (
        proptest::option::of(method),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
    )
        .prop_map(|(method, flips)| {
            let mut frame = proto::frame::encode(&proto::Call { method }).unwrap();
            for (at, byte) in flips {
                let len = frame.len();
                frame[at % len] = byte;
            }
            frame
        });
    prop_oneof![proptest::collection::vec(any::<u8>(), 0..64), call]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A frame as the helper reads it (the length, then the body as a
    /// `Call`): no panic; a body over the limit is never read, and what
    /// decodes encodes back to a frame that decodes to the same call.
    #[test]
    fn call_frames_never_panic(frame in frame()) {
        use prost::Message;
        let Some((header, body)) = frame.split_first_chunk::<{ proto::frame::HEADER }>() else {
            return Ok(());
        };
        let Ok(len) = proto::frame::length(*header) else {
            prop_assert!(u32::from_be_bytes(*header) as usize > proto::MAX_MESSAGE_BYTES);
            return Ok(());
        };
        if let Ok(call) = proto::Call::decode(&body[..len.min(body.len())]) {
            let again = proto::frame::encode(&call).unwrap();
            prop_assert_eq!(proto::Call::decode(&again[proto::frame::HEADER..]).unwrap(), call);
        }
    }

    /// A Stage request: no panic; what passes is canonical and allowed.
    #[test]
    fn stage_requests_never_panic(input in any::<String>(), policy in policy()) {
        if let Ok(image) = stage_image(&input, &policy) {
            prop_assert_eq!(&image, &input);
            let repository = image.split('@').next().unwrap();
            prop_assert!(policy.allows(repository));
        }
    }

    /// A WriteAuth payload: no panic; what passes re-parses as the
    /// allow-listed shape and is what gets written.
    #[test]
    fn auth_payloads_never_panic(payload in prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        jsonish().prop_map(String::into_bytes),
    ]) {
        if let Ok(written) = auth_payload(&payload) {
            let config: DockerConfig = serde_json::from_slice(&written).unwrap();
            prop_assert_eq!(serde_json::to_vec(&config).unwrap(), written);
        }
    }

    /// A WriteAuth error never carries the credential it refused.
    #[test]
    fn auth_errors_never_carry_the_secret(secret in "[A-Za-z0-9+/=]{12,40}", shape in 0usize..5) {
        let payload = [
            format!(r#"{{"auths":{{"r":"{secret}"}}}}"#),
            format!(r#"{{"auths":{{"r":{{"{secret}":"x"}}}}}}"#),
            format!(r#"{{"auths":{{"r":{{"auth":{secret}}}}}}}"#),
            format!(r#"{{"{secret}":1}}"#),
            format!(r#"{{"auths":{{"r":{{"auth":"{secret}"#),
        ][shape].clone();
        match auth_payload(payload.as_bytes()) {
            Err(e @ ValidationError::AuthNotDockerConfig(_)) => {
                prop_assert!(!e.to_string().contains(&secret), "{}", e);
            }
            other => prop_assert!(false, "{payload}: {other:?}"),
        }
    }

    /// bootc's status output: no panic, whatever it prints.
    #[test]
    fn status_parser_never_panics(out in prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        jsonish().prop_map(String::into_bytes),
    ]) {
        if let Ok(host) = helper::status::parse(&out) {
            let _ = helper::status::response(&host);
            let _ = helper::status::staged_image(&host);
        }
    }

    /// The helper's own command line: no panic.
    #[test]
    fn args_never_panic(args in proptest::collection::vec(
        prop_oneof![
            Just("--parent-pid".to_owned()),
            Just("--allowed-repository".to_owned()),
            Just("--enforce-container-sigpolicy".to_owned()),
            any::<String>(),
        ],
        0..6,
    )) {
        let _ = helper::Args::parse(args);
    }
}
