//! What the fuzz targets share: a request stream through the helper's
//! gRPC decoding path (tonic's generated server, with the helper's message
//! limit), behind a stand-in service that records what it was called with
//! and runs nothing.

use prost::Message;
use std::sync::{Arc, Mutex};
use tonic::{Request, Response, Status};

/// The request each call decoded to, if the server got that far.
#[derive(Debug, Default)]
pub struct Probe(Mutex<Option<Seen>>);

#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Stage(proto::StageRequest),
    Apply(proto::ApplyRequest),
    Status(proto::StatusRequest),
    WriteAuth(proto::WriteAuthRequest),
}

type Answer<T> = Result<Response<T>, Status>;

impl Probe {
    fn saw<T: Default>(&self, seen: Seen) -> Answer<T> {
        *self.0.lock().expect("probe lock") = Some(seen);
        Ok(Response::new(T::default()))
    }
}

#[tonic::async_trait]
impl proto::helper_server::Helper for Probe {
    async fn stage(&self, r: Request<proto::StageRequest>) -> Answer<proto::StageResponse> {
        self.saw(Seen::Stage(r.into_inner()))
    }
    async fn apply(&self, r: Request<proto::ApplyRequest>) -> Answer<proto::ApplyResponse> {
        self.saw(Seen::Apply(r.into_inner()))
    }
    async fn status(&self, r: Request<proto::StatusRequest>) -> Answer<proto::StatusResponse> {
        self.saw(Seen::Status(r.into_inner()))
    }
    async fn write_auth(
        &self,
        r: Request<proto::WriteAuthRequest>,
    ) -> Answer<proto::WriteAuthResponse> {
        self.saw(Seen::WriteAuth(r.into_inner()))
    }
}

/// `stream` as the request body of a call to `path`: the grpc-status and
/// what the service was called with.
pub fn serve_one(path: &str, stream: &[u8]) -> (i32, Option<Seen>) {
    use http_body_util::BodyExt;
    use tonic::codegen::Service;
    let probe = Arc::new(Probe::default());
    let mut server = proto::helper_server::HelperServer::from_arc(probe.clone())
        .max_decoding_message_size(proto::MAX_MESSAGE_BYTES);
    let body = http_body_util::Full::new(bytes::Bytes::copy_from_slice(stream));
    let request = http::Request::post(path)
        .header("content-type", "application/grpc")
        .body(body)
        .expect("a request");
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let code = rt.block_on(async {
        let response = server.call(request).await.expect("infallible");
        let (parts, body) = response.into_parts();
        let trailers = body.collect().await.expect("a body").trailers().cloned();
        let status = parts.headers.get("grpc-status").cloned();
        let status = status.or_else(|| trailers?.get("grpc-status").cloned());
        let status = status.expect("every answer has a grpc-status");
        status.to_str().expect("ascii").parse().expect("a number")
    });
    let seen = probe.0.lock().expect("probe lock").take();
    (code, seen)
}

/// The message bytes of `stream`, if it starts with an uncompressed message
/// of at most the limit, whole.
pub fn first_message(stream: &[u8]) -> Option<&[u8]> {
    let (&[flag, a, b, c, d], rest) = stream.split_first_chunk::<5>()?;
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    (flag == 0 && len <= proto::MAX_MESSAGE_BYTES).then_some(rest.get(..len)?)
}

/// What `seen` encodes to: it must be what the stream's message decodes to.
pub fn encoded(seen: &Seen) -> Vec<u8> {
    match seen {
        Seen::Stage(m) => m.encode_to_vec(),
        Seen::Apply(m) => m.encode_to_vec(),
        Seen::Status(m) => m.encode_to_vec(),
        Seen::WriteAuth(m) => m.encode_to_vec(),
    }
}
