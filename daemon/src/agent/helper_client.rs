//! The daemon's client of the helper: tonic's generated client over one
//! HTTP/2 connection on its end of the socketpair (`proto/proto/helper.proto`).
//! One call at a time, and each in a task of its own, so a caller that stops
//! waiting never cancels a call the helper is running (a Stage halfway
//! through its pull, say).

use proto::Code;
use std::io;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use tonic::transport::{Channel, Endpoint, Uri};

type Grpc = proto::helper_client::HelperClient<Channel>;
type Answer<T> = Result<tonic::Response<T>, tonic::Status>;
type Sent<T> = std::pin::Pin<Box<dyn Future<Output = Answer<T>> + Send>>;

/// The URI tonic requires: never resolved, the connector ignores it.
const URI: &str = "http://bootc-helper.invalid";

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("helper socket: {0}")]
    Socket(#[from] io::Error),
    #[error("HTTP/2 connection to the helper: {0}")]
    Http2(#[from] tonic::transport::Error),
}

/// How a call failed: the helper's answer, or no answer at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The helper refused the call or what it ran failed (or the call was
    /// refused before it was sent: over the size limit).
    #[error("{message}")]
    Failed { code: Code, message: String },
    /// The connection is broken: no helper answers any more.
    #[error("the connection to the helper is broken: {0}")]
    Gone(String),
}

impl CallError {
    pub fn failed(code: Code, message: impl Into<String>) -> CallError {
        CallError::Failed {
            code,
            message: message.into(),
        }
    }

    /// The helper's code ([`Code::Unavailable`] when it is gone).
    pub fn code(&self) -> Code {
        match self {
            CallError::Failed { code, .. } => *code,
            CallError::Gone(_) => Code::Unavailable,
        }
    }

    /// The helper's message, or why it is gone.
    pub fn message(&self) -> &str {
        match self {
            CallError::Failed { message, .. } | CallError::Gone(message) => message,
        }
    }

    /// A broken connection (fatal) rather than a refused or failed call
    /// (reported and retried).
    pub fn is_gone(&self) -> bool {
        matches!(self, CallError::Gone(_))
    }
}

impl From<tonic::Status> for CallError {
    /// A status the client made from a transport error carries that error
    /// as its source; one the helper sent carries none.
    fn from(status: tonic::Status) -> Self {
        if std::error::Error::source(&status).is_some() {
            return CallError::Gone(status.to_string());
        }
        CallError::failed(status.code(), status.message())
    }
}

/// The helper's four calls. Clones share the one connection; their calls
/// queue.
#[derive(Debug, Clone)]
pub struct HelperClient {
    grpc: Arc<tokio::sync::Mutex<Grpc>>,
}

/// Connects over `stream` (the daemon's end of the socketpair). There is
/// exactly one connection: the connector hands it out once, so once it
/// breaks every later call fails with [`CallError::Gone`]; the daemon then
/// exits and is restarted with a new helper. No keep-alive pings.
pub async fn connect(stream: UnixStream) -> Result<HelperClient, ConnectError> {
    stream.set_nonblocking(true)?;
    let mut stream = Some(tokio::net::UnixStream::from_std(stream)?);
    let connector = tower::service_fn(move |_: Uri| {
        let once = stream.take().map(hyper_util::rt::TokioIo::new);
        let gone = || io::Error::new(io::ErrorKind::NotConnected, "the helper connection is gone");
        std::future::ready(once.ok_or_else(gone))
    });
    let channel = Endpoint::from_static(URI)
        .connect_with_connector(connector)
        .await?;
    let grpc = Grpc::new(channel)
        .max_decoding_message_size(proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::MAX_MESSAGE_BYTES);
    Ok(HelperClient {
        grpc: Arc::new(tokio::sync::Mutex::new(grpc)),
    })
}

impl HelperClient {
    /// Sends `request` once the calls before it are done, and runs the call
    /// to its end even if this caller stops waiting.
    async fn call<Req, Res>(
        &self,
        request: Req,
        send: fn(Grpc, Req) -> Sent<Res>,
    ) -> Result<Res, CallError>
    where
        Req: prost::Message + 'static,
        Res: Send + 'static,
    {
        let len = request.encoded_len();
        if len > proto::MAX_MESSAGE_BYTES {
            let limit = proto::MAX_MESSAGE_BYTES;
            let message = format!("a message of {len} bytes is over the limit of {limit} bytes");
            return Err(CallError::failed(Code::ResourceExhausted, message));
        }
        let grpc = Arc::clone(&self.grpc);
        let call = tokio::spawn(async move {
            let one_at_a_time = grpc.lock().await;
            send(one_at_a_time.clone(), request).await
        });
        let answer = call.await.map_err(|e| CallError::Gone(e.to_string()))?;
        Ok(answer?.into_inner())
    }

    pub async fn stage(
        &mut self,
        r: proto::StageRequest,
    ) -> Result<proto::StageResponse, CallError> {
        self.call(r, |mut g, r| Box::pin(async move { g.stage(r).await }))
            .await
    }

    pub async fn apply(
        &mut self,
        r: proto::ApplyRequest,
    ) -> Result<proto::ApplyResponse, CallError> {
        self.call(r, |mut g, r| Box::pin(async move { g.apply(r).await }))
            .await
    }

    pub async fn status(
        &mut self,
        r: proto::StatusRequest,
    ) -> Result<proto::StatusResponse, CallError> {
        self.call(r, |mut g, r| Box::pin(async move { g.status(r).await }))
            .await
    }

    pub async fn write_auth(
        &mut self,
        r: proto::WriteAuthRequest,
    ) -> Result<proto::WriteAuthResponse, CallError> {
        self.call(r, |mut g, r| Box::pin(async move { g.write_auth(r).await }))
            .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proto::helper_server::Helper;
    use tokio::sync::{Mutex, Notify, oneshot};
    use tonic::{Request, Response, Status};

    /// The helper's end, played by a stand-in served by the helper's own
    /// server: Apply is refused; Status answers in turn "first", "second",
    /// the first only once `gate` opens.
    #[derive(Default, Clone)]
    struct Fake {
        started: Arc<Notify>,
        gate: Arc<Mutex<Option<oneshot::Receiver<()>>>>,
        answered: Arc<std::sync::Mutex<Vec<String>>>,
    }

    #[tonic::async_trait]
    impl Helper for Fake {
        async fn stage(
            &self,
            _: Request<proto::StageRequest>,
        ) -> Result<Response<proto::StageResponse>, Status> {
            Err(Status::unimplemented("not in this test"))
        }
        async fn apply(
            &self,
            _: Request<proto::ApplyRequest>,
        ) -> Result<Response<proto::ApplyResponse>, Status> {
            Err(Status::failed_precondition("bootc is busy"))
        }
        async fn status(
            &self,
            _: Request<proto::StatusRequest>,
        ) -> Result<Response<proto::StatusResponse>, Status> {
            self.started.notify_one();
            if let Some(gate) = self.gate.lock().await.take() {
                gate.await.unwrap();
            }
            let mut answered = self.answered.lock().unwrap();
            let boot_id = ["first", "second"][answered.len()].to_owned();
            answered.push(boot_id.clone());
            Ok(Response::new(proto::StatusResponse {
                boot_id,
                ..Default::default()
            }))
        }
        async fn write_auth(
            &self,
            _: Request<proto::WriteAuthRequest>,
        ) -> Result<Response<proto::WriteAuthResponse>, Status> {
            Ok(Response::new(proto::WriteAuthResponse {}))
        }
    }

    async fn pair(fake: Fake) -> (HelperClient, tokio::task::JoinHandle<()>) {
        let (mine, theirs) = UnixStream::pair().unwrap();
        let helper = tokio::spawn(async move {
            helper::server::serve(theirs, fake).await.unwrap();
        });
        (connect(mine).await.unwrap(), helper)
    }

    /// A refusal (whatever its code or message) is the helper's answer; a
    /// closed connection is "gone", for that call and every later one.
    #[tokio::test]
    async fn a_refusal_is_an_answer_and_a_closed_connection_is_gone() {
        let (mut client, helper) = pair(Fake::default()).await;
        let err = client
            .apply(proto::ApplyRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert_eq!(err.message(), "bootc is busy");
        assert!(!err.is_gone());
        helper.abort();
        assert!(helper.await.unwrap_err().is_cancelled());
        for _ in 0..2 {
            let err = client.status(proto::StatusRequest {}).await.unwrap_err();
            assert!(err.is_gone(), "{err:?}");
        }
        // Over the limit: refused here, nothing sent, not "gone".
        let big = proto::WriteAuthRequest {
            docker_config_json: vec![0; proto::MAX_MESSAGE_BYTES],
        };
        let (mut client, _helper) = pair(Fake::default()).await;
        let err = client.write_auth(big).await.unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted);
        assert!(!err.is_gone());
    }

    /// A caller that gives up on a call does not cancel it: the helper runs
    /// it to its end, and the next call is answered after it.
    #[tokio::test]
    async fn a_call_given_up_on_still_runs_to_its_end() {
        let (open, gate) = oneshot::channel();
        let fake = Fake {
            gate: Arc::new(Mutex::new(Some(gate))),
            ..Default::default()
        };
        let (mut client, _helper) = pair(fake.clone()).await;
        let mut first = client.clone();
        let first = tokio::spawn(async move { first.status(proto::StatusRequest {}).await });
        fake.started.notified().await;
        first.abort();
        assert!(first.await.unwrap_err().is_cancelled());
        let second = client.status(proto::StatusRequest {});
        open.send(()).unwrap();
        assert_eq!(second.await.unwrap().boot_id, "second");
        assert_eq!(*fake.answered.lock().unwrap(), ["first", "second"]);
    }
}
