//! The daemon's client of the helper, over its end of the socketpair: one
//! frame out and one frame back per call (`proto/proto/helper.proto`), one
//! call at a time. A task owns the socket and runs each call to its end, so
//! a caller that stops waiting never leaves half a frame on the wire.

use proto::{Code, call::Method, reply::Outcome};
use std::io;
use std::os::unix::net::UnixStream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("helper socket: {0}")]
    Socket(#[from] io::Error),
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

    /// The helper's code ([`Code::Unspecified`] when it is gone).
    pub fn code(&self) -> Code {
        match self {
            CallError::Failed { code, .. } => *code,
            CallError::Gone(_) => Code::Unspecified,
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

type Pending = (Method, oneshot::Sender<Result<Outcome, CallError>>);

/// The helper's four calls, one at a time per handle (as with a generated
/// gRPC client). Clones share the one connection; their calls queue.
#[derive(Debug, Clone)]
pub struct HelperClient {
    calls: mpsc::Sender<Pending>,
}

/// Connects over `stream` (the daemon's end of the socketpair). There is
/// exactly one connection: once it breaks, every later call fails with
/// [`CallError::Gone`]; the daemon then exits and is restarted with a new
/// helper. Dropping every clone of the client closes the socket.
pub async fn connect(stream: UnixStream) -> Result<HelperClient, ConnectError> {
    stream.set_nonblocking(true)?;
    let stream = tokio::net::UnixStream::from_std(stream)?;
    let (calls, queue) = mpsc::channel(4);
    tokio::spawn(run(stream, queue));
    Ok(HelperClient { calls })
}

/// Runs the queued calls in order until every client is dropped or the
/// connection breaks.
async fn run(mut stream: tokio::net::UnixStream, mut queue: mpsc::Receiver<Pending>) {
    while let Some((method, answer)) = queue.recv().await {
        let result = exchange(&mut stream, method).await;
        let broken = result.as_ref().is_err_and(CallError::is_gone);
        let _ = answer.send(result);
        if broken {
            return;
        }
    }
}

fn gone(e: impl std::fmt::Display) -> CallError {
    CallError::Gone(e.to_string())
}

/// One frame out, one frame back.
async fn exchange(
    stream: &mut tokio::net::UnixStream,
    method: Method,
) -> Result<Outcome, CallError> {
    use prost::Message;
    let call = proto::Call {
        method: Some(method),
    };
    let frame = proto::frame::encode(&call)
        .map_err(|e| CallError::failed(Code::ResourceExhausted, e.to_string()))?;
    stream.write_all(&frame).await.map_err(gone)?;
    let mut header = [0; proto::frame::HEADER];
    stream.read_exact(&mut header).await.map_err(gone)?;
    let mut body = vec![0; proto::frame::length(header).map_err(gone)?];
    stream.read_exact(&mut body).await.map_err(gone)?;
    match proto::Reply::decode(body.as_slice()).map_err(gone)?.outcome {
        Some(Outcome::Failure(f)) => Err(CallError::failed(f.code(), f.message)),
        Some(outcome) => Ok(outcome),
        None => Err(gone("the helper's reply carries no outcome")),
    }
}

impl HelperClient {
    async fn call<T>(
        &self,
        method: Method,
        want: fn(Outcome) -> Option<T>,
    ) -> Result<T, CallError> {
        let (answer, answered) = oneshot::channel();
        let closed = || gone("the helper connection is closed");
        self.calls
            .send((method, answer))
            .await
            .map_err(|_| closed())?;
        let outcome = answered.await.map_err(|_| closed())??;
        want(outcome).ok_or_else(|| gone("the helper answered another call"))
    }

    pub async fn stage(
        &mut self,
        r: proto::StageRequest,
    ) -> Result<proto::StageResponse, CallError> {
        let want = |o| match o {
            Outcome::Stage(v) => Some(v),
            _ => None,
        };
        self.call(Method::Stage(r), want).await
    }

    pub async fn apply(
        &mut self,
        r: proto::ApplyRequest,
    ) -> Result<proto::ApplyResponse, CallError> {
        let want = |o| match o {
            Outcome::Apply(v) => Some(v),
            _ => None,
        };
        self.call(Method::Apply(r), want).await
    }

    pub async fn status(
        &mut self,
        r: proto::StatusRequest,
    ) -> Result<proto::StatusResponse, CallError> {
        let want = |o| match o {
            Outcome::Status(v) => Some(v),
            _ => None,
        };
        self.call(Method::Status(r), want).await
    }

    pub async fn write_auth(
        &mut self,
        r: proto::WriteAuthRequest,
    ) -> Result<proto::WriteAuthResponse, CallError> {
        let want = |o| match o {
            Outcome::WriteAuth(v) => Some(v),
            _ => None,
        };
        self.call(Method::WriteAuth(r), want).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use prost::Message;
    use std::time::Duration;

    /// The helper's end, played by hand: reads a call, answers `reply`.
    async fn answer(peer: &mut tokio::net::UnixStream, reply: Outcome) {
        let mut header = [0; proto::frame::HEADER];
        peer.read_exact(&mut header).await.unwrap();
        let mut body = vec![0; proto::frame::length(header).unwrap()];
        peer.read_exact(&mut body).await.unwrap();
        proto::Call::decode(body.as_slice()).unwrap();
        let reply = proto::Reply {
            outcome: Some(reply),
        };
        peer.write_all(&proto::frame::encode(&reply).unwrap())
            .await
            .unwrap();
    }

    fn status(boot_id: &str) -> Outcome {
        Outcome::Status(proto::StatusResponse {
            boot_id: boot_id.into(),
            ..Default::default()
        })
    }

    async fn pair() -> (HelperClient, tokio::net::UnixStream) {
        let (mine, theirs) = UnixStream::pair().unwrap();
        theirs.set_nonblocking(true).unwrap();
        let peer = tokio::net::UnixStream::from_std(theirs).unwrap();
        (connect(mine).await.unwrap(), peer)
    }

    /// A refusal (whatever its code or message) is the helper's answer; a
    /// closed connection is "gone", for that call and every later one.
    #[tokio::test]
    async fn a_refusal_is_an_answer_and_a_closed_connection_is_gone() {
        let (mut client, mut peer) = pair().await;
        let refusal = proto::Failure {
            code: Code::FailedPrecondition.into(),
            message: "bootc is busy".into(),
        };
        let helper = tokio::spawn(async move {
            answer(&mut peer, Outcome::Failure(refusal)).await;
        });
        let err = client
            .apply(proto::ApplyRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition);
        assert_eq!(err.message(), "bootc is busy");
        assert!(!err.is_gone());
        helper.await.unwrap();
        for _ in 0..2 {
            let err = client.status(proto::StatusRequest {}).await.unwrap_err();
            assert!(err.is_gone(), "{err:?}");
        }
        // Over the limit: refused here, nothing sent, not "gone".
        let big = proto::WriteAuthRequest {
            docker_config_json: vec![0; proto::MAX_MESSAGE_BYTES],
        };
        let (mut client, _peer) = pair().await;
        let err = client.write_auth(big).await.unwrap_err();
        assert_eq!(err.code(), Code::ResourceExhausted);
        assert!(!err.is_gone());
    }

    /// A caller that gives up on a call does not leave its reply to be
    /// taken for the next call's.
    #[tokio::test]
    async fn a_call_given_up_on_leaves_the_connection_in_step() {
        let (mut client, mut peer) = pair().await;
        let helper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            answer(&mut peer, status("first")).await;
            answer(&mut peer, status("second")).await;
        });
        let first = client.status(proto::StatusRequest {});
        assert!(
            tokio::time::timeout(Duration::from_millis(50), first)
                .await
                .is_err()
        );
        let second = client.status(proto::StatusRequest {}).await.unwrap();
        assert_eq!(second.boot_id, "second");
        helper.await.unwrap();
    }
}
