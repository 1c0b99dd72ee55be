#![allow(clippy::unwrap_used)]
//! Properties of what the root helper parses from the daemon and from bootc
//! (the same functions the fuzz targets drive; these run in every
//! `./dev test`): the gRPC requests it decodes (through tonic's generated
//! server, as served), Stage requests, WriteAuth payloads, bootc's status,
//! its own command line.

use helper::validate::{DockerConfig, ImagePolicy, ValidationError, auth_payload, stage_image};
use proptest::prelude::*;
use prost::Message;

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

/// The service behind the generated server: records the request it was
/// called with (encoded), runs nothing, answers an empty response.
#[derive(Default)]
struct Probe(std::sync::Mutex<Option<Vec<u8>>>);

type Answer<T> = Result<tonic::Response<T>, tonic::Status>;

impl Probe {
    fn saw<T: Default>(&self, message: &impl Message) -> Answer<T> {
        *self.0.lock().unwrap() = Some(message.encode_to_vec());
        Ok(tonic::Response::new(T::default()))
    }
}

#[tonic::async_trait]
impl proto::helper_server::Helper for Probe {
    async fn stage(&self, r: tonic::Request<proto::StageRequest>) -> Answer<proto::StageResponse> {
        self.saw(r.get_ref())
    }
    async fn apply(&self, r: tonic::Request<proto::ApplyRequest>) -> Answer<proto::ApplyResponse> {
        self.saw(r.get_ref())
    }
    async fn status(
        &self,
        r: tonic::Request<proto::StatusRequest>,
    ) -> Answer<proto::StatusResponse> {
        self.saw(r.get_ref())
    }
    async fn write_auth(
        &self,
        r: tonic::Request<proto::WriteAuthRequest>,
    ) -> Answer<proto::WriteAuthResponse> {
        self.saw(r.get_ref())
    }
}

/// `body` as the request stream of a call to `path`, through the generated
/// server with the helper's limits: the grpc-status, and the request the
/// service got (encoded), if it got one.
fn serve_one(path: &str, body: Vec<u8>) -> (i32, Option<Vec<u8>>) {
    use http_body_util::BodyExt;
    use tonic::codegen::Service;
    let probe = std::sync::Arc::new(Probe::default());
    let mut server = proto::helper_server::HelperServer::from_arc(probe.clone())
        .max_decoding_message_size(proto::MAX_MESSAGE_BYTES);
    let request = http::Request::post(path)
        .header("content-type", "application/grpc")
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    thread_local! {
        static RT: tokio::runtime::Runtime =
            tokio::runtime::Builder::new_current_thread().build().unwrap();
    }
    let code = RT.with(|rt| {
        rt.block_on(async {
            let response = server.call(request).await.unwrap();
            let (parts, body) = response.into_parts();
            let trailers = body.collect().await.unwrap().trailers().cloned();
            let status = parts.headers.get("grpc-status").cloned();
            let status = status.or_else(|| trailers?.get("grpc-status").cloned());
            status.unwrap().to_str().unwrap().parse().unwrap()
        })
    });
    let seen = probe.0.lock().unwrap().take();
    (code, seen)
}

/// A request stream: noise, or one real message of the method with its
/// bytes (prefix included) overwritten here and there.
fn request() -> impl Strategy<Value = (usize, Vec<u8>)> {
    let message = prop_oneof![
        (any::<String>(), any::<u32>(), any::<u32>()).prop_map(|(image, io_weight, cpu_weight)| {
            let request = proto::StageRequest {
                image,
                io_weight,
                cpu_weight,
            };
            (0, request.encode_to_vec())
        }),
        any::<bool>()
            .prop_map(|soft_reboot| (1, proto::ApplyRequest { soft_reboot }.encode_to_vec())),
        Just((2, Vec::new())),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(|json| (
            3,
            proto::WriteAuthRequest {
                docker_config_json: json
            }
            .encode_to_vec()
        )),
    ];
    let call = (
        message,
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
    )
        .prop_map(|((method, body), flips)| {
            let mut stream = vec![0];
            stream.extend((body.len() as u32).to_be_bytes());
            stream.extend(body);
            for (at, byte) in flips {
                let len = stream.len();
                stream[at % len] = byte;
            }
            (method, stream)
        });
    let noise = (0..5usize, proptest::collection::vec(any::<u8>(), 0..64));
    prop_oneof![noise, call]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A request as the helper's gRPC server decodes it: no panic, always
    /// a status; a message over the limit never reaches the service, and
    /// what reaches it is exactly what the stream carried; a path that is
    /// none of the four is UNIMPLEMENTED.
    #[test]
    fn grpc_requests_never_panic((method, stream) in request()) {
        let path = match proto::METHODS.get(method) {
            Some(m) => proto::path(m),
            None => proto::path("Other"),
        };
        let (code, seen) = serve_one(&path, stream.clone());
        if method >= proto::METHODS.len() {
            prop_assert_eq!(code, proto::Code::Unimplemented as i32);
        }
        let announced = stream.get(1..5).map(|b| u32::from_be_bytes(b.try_into().unwrap()) as usize);
        if announced.is_some_and(|len| len > proto::MAX_MESSAGE_BYTES) {
            prop_assert!(seen.is_none());
            // Refused for its size unless its flag byte was refused first.
            if stream[0] == 0 && method < proto::METHODS.len() {
                prop_assert_eq!(code, proto::Code::OutOfRange as i32);
            }
        }
        if let Some(seen) = seen {
            prop_assert_eq!(code, 0);
            let len = announced.unwrap();
            let body = &stream[5..5 + len];
            // The re-encoding of what was decoded: the same bytes, or (for
            // unknown fields dropped, fields repeated) its canonical form.
            let again = match method {
                0 => proto::StageRequest::decode(body).unwrap().encode_to_vec(),
                1 => proto::ApplyRequest::decode(body).unwrap().encode_to_vec(),
                2 => proto::StatusRequest::decode(body).unwrap().encode_to_vec(),
                _ => proto::WriteAuthRequest::decode(body).unwrap().encode_to_vec(),
            };
            prop_assert_eq!(seen, again);
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
