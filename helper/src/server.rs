//! Serving the helper protocol on the one inherited socket: HTTP/2 over the
//! socketpair, one connection, ended when the daemon goes away.

use crate::service::{Engine, HelperService};
use std::sync::Arc;

/// Header block limit: requests carry no metadata worth more than this.
const MAX_HEADER_LIST: u32 = 16 * 1024;
/// Concurrent streams the daemon may open. Calls still run one at a time
/// (the engine holds a lock); this only bounds queued requests.
const MAX_STREAMS: u32 = 4;

/// Serves until the peer closes the connection. Returns the connection's
/// end state (an error if it broke rather than closed).
pub async fn serve(
    stream: std::os::unix::net::UnixStream,
    engine: Arc<Engine>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    stream.set_nonblocking(true)?;
    let stream = tokio::net::UnixStream::from_std(stream)?;
    let svc = proto::helper_server::HelperServer::new(HelperService(engine))
        .max_decoding_message_size(proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::MAX_MESSAGE_BYTES);
    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST)
        .serve_connection(
            hyper_util::rt::TokioIo::new(stream),
            hyper_util::service::TowerToHyperService::new(svc),
        )
        .await?;
    Ok(())
}
