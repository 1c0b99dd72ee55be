//! Serving the helper protocol on the one inherited socket: gRPC (tonic's
//! generated server for `helper.proto`) over one HTTP/2 connection, served
//! by hyper directly. There is no listener and no accept(): the socketpair
//! is the only connection there will ever be, and the helper's work is over
//! when it ends. The limits below are for one trusted peer making one call
//! at a time; a peer that exceeds one has its stream reset or its
//! connection closed (then the helper exits).

use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use proto::helper_server::{Helper, HelperServer};
use std::os::unix::net::UnixStream;
use tonic::codegen::Service;

/// Streams open at once: the daemon makes one call at a time.
pub const MAX_STREAMS: u32 = 1;
/// A call's header block (tonic's client sends about 200 bytes).
pub const MAX_HEADER_LIST_BYTES: u32 = 4 * 1024;
/// HTTP/2's smallest allowed frame size limit (its default), set anyway.
pub const MAX_FRAME_BYTES: u32 = 16 * 1024;
/// Flow-control windows and the send buffer per stream (hyper's default
/// is 400 KiB): what the peer can make the helper hold beyond the one
/// message being read or written.
const WINDOW_BYTES: u32 = 64 * 1024;
/// Streams the peer may reset, or the helper refuse, before the connection
/// is closed (HTTP/2 "rapid reset" floods).
const MAX_RESETS: usize = 4;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("helper socket: {0}")]
    Socket(#[from] std::io::Error),
    #[error("the HTTP/2 connection with the daemon failed: {0}")]
    Http2(#[from] hyper::Error),
}

/// Serves the four calls until the peer closes the connection: the
/// [`crate::service::Engine`]'s, or a test's stand-in.
pub async fn serve<T: Helper>(stream: UnixStream, engine: T) -> Result<(), ServeError> {
    stream.set_nonblocking(true)?;
    let io = TokioIo::new(tokio::net::UnixStream::from_std(stream)?);
    let grpc = HelperServer::new(engine)
        .max_decoding_message_size(proto::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(proto::MAX_MESSAGE_BYTES);
    let service = hyper::service::service_fn(move |request| grpc.clone().call(request));
    // No keep-alive ping and no timer: nothing but the peer keeps the
    // connection (and so the helper) alive.
    let served = http2::Builder::new(TokioExecutor::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .max_frame_size(MAX_FRAME_BYTES)
        .initial_stream_window_size(WINDOW_BYTES)
        .initial_connection_window_size(WINDOW_BYTES)
        .max_send_buf_size(WINDOW_BYTES as usize)
        .max_pending_accept_reset_streams(MAX_RESETS)
        .max_local_error_reset_streams(MAX_RESETS)
        .keep_alive_interval(None)
        .auto_date_header(false)
        .serve_connection(io, service)
        .await;
    match served {
        Err(e) if !closed_by_peer(&e) => Err(e.into()),
        _ => Ok(()),
    }
}

/// The daemon closing its end ends the connection as EOF does, or as a
/// reset when it left bytes unread (its exit, for one): not an error.
fn closed_by_peer(e: &hyper::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionReset, UnexpectedEof};
    let causes = std::iter::successors(std::error::Error::source(e), |c| c.source());
    let mut kinds = causes.filter_map(|c| Some(c.downcast_ref::<std::io::Error>()?.kind()));
    kinds.any(|k| matches!(k, BrokenPipe | ConnectionReset | UnexpectedEof))
}
