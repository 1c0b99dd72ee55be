//! The daemon's gRPC client of the helper, over its end of the socketpair.

use std::io;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use tonic::transport::{Channel, Endpoint, Uri};

/// The generated client over the socketpair channel.
pub type HelperClient = proto::helper_client::HelperClient<Channel>;

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("helper socket: {0}")]
    Socket(#[from] io::Error),
    #[error("HTTP/2 handshake with the helper: {0}")]
    Handshake(#[from] tonic::transport::Error),
}

/// Connects over `stream` (the daemon's end of the socketpair). There is
/// exactly one connection: if it breaks, the channel cannot reconnect and
/// every later call fails; the daemon then exits and is restarted with a
/// new helper.
pub async fn connect(stream: UnixStream) -> Result<HelperClient, ConnectError> {
    stream.set_nonblocking(true)?;
    let stream = tokio::net::UnixStream::from_std(stream)?;
    let slot = Arc::new(Mutex::new(Some(stream)));
    // The URI is never resolved: the connector below hands out the socket.
    let channel = Endpoint::from_static("http://bootc-helper.invalid")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let taken = slot.lock().ok().and_then(|mut s| s.take());
            async move {
                let stream = taken.ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::NotConnected,
                        "the helper connection is gone; restart the daemon",
                    )
                })?;
                Ok::<_, io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
        .await?;
    Ok(proto::helper_client::HelperClient::new(channel)
        .max_decoding_message_size(proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::MAX_MESSAGE_BYTES))
}
