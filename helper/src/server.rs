//! Serving the helper protocol on the one inherited socket: one frame in,
//! one frame out per call (see `proto/proto/helper.proto`), one call at a
//! time, until the daemon closes its end.

use crate::service::{Engine, HelperError, reply};
use prost::Message;
use std::io;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Serves until the peer closes the connection. A frame that is not a call
/// gets a [`proto::Failure`] and the next frame is served; a frame over the
/// size limit gets one too, then ends the connection (where it ends, and so
/// where the next one starts, is unknown).
pub async fn serve(stream: std::os::unix::net::UnixStream, engine: &Engine) -> io::Result<()> {
    stream.set_nonblocking(true)?;
    let mut stream = UnixStream::from_std(stream)?;
    loop {
        let mut header = [0; proto::frame::HEADER];
        match stream.read_exact(&mut header).await {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            read => read?,
        };
        let len = match proto::frame::length(header) {
            Ok(len) => len,
            Err(e) => {
                send(&mut stream, reply(Err(HelperError::TooLarge(e.clone())))).await?;
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        let mut body = vec![0; len];
        stream.read_exact(&mut body).await?;
        let answer = match proto::Call::decode(body.as_slice()) {
            Ok(call) => engine.answer(call.method).await,
            Err(e) => reply(Err(HelperError::Malformed(e))),
        };
        send(&mut stream, answer).await?;
    }
}

async fn send(stream: &mut UnixStream, reply: proto::Reply) -> io::Result<()> {
    let frame = proto::frame::encode(&reply).map_err(io::Error::other)?;
    stream.write_all(&frame).await
}
