//! A hand-made HTTP/2 peer for the helper's limit tests: it writes what a
//! well-behaved client (h2, tonic) never would, such as a stream over the
//! helper's concurrency limit or a frame over its size limit, and reads the
//! helper's frames without decoding their header blocks.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const GOAWAY: u8 = 7;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;

/// HTTP/2 error codes (RFC 9113 section 7).
pub const REFUSED_STREAM: u32 = 0x7;
pub const FRAME_SIZE_ERROR: u32 = 0x6;
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// SETTINGS identifiers.
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let bytes = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes(bytes.try_into().ok()?))
    }

    /// The (identifier, value) pairs of a SETTINGS frame.
    pub fn settings(&self) -> Vec<(u16, u32)> {
        self.payload
            .chunks_exact(6)
            .map(|c| {
                let id = u16::from_be_bytes([c[0], c[1]]);
                (id, u32::from_be_bytes([c[2], c[3], c[4], c[5]]))
            })
            .collect()
    }
}

/// One frame's bytes; `len` is what the header announces (a lie when it is
/// not `payload.len()`).
pub fn frame_with_len(len: u32, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend((stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    frame_with_len(payload.len() as u32, kind, flags, stream, payload)
}

/// The client preface and an empty SETTINGS frame.
pub fn preface() -> Vec<u8> {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(SETTINGS, 0, 0, &[]));
    out
}

/// An HPACK integer with an `n`-bit prefix, `flags` in the bits above it.
fn integer(out: &mut Vec<u8>, n: u32, flags: u8, mut value: usize) {
    let max = (1usize << n) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// A header block of literals (never indexed, no Huffman).
pub fn header_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0x00);
        integer(&mut out, 7, 0, name.len());
        out.extend_from_slice(name.as_bytes());
        integer(&mut out, 7, 0, value.len());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

/// The request headers of a gRPC call to `path`, plus `extra`.
pub fn call_headers(stream: u32, path: &str, extra: &[(&str, &str)], end_stream: bool) -> Vec<u8> {
    let mut fields = vec![
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "helper"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];
    fields.extend_from_slice(extra);
    let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
    frame(HEADERS, flags, stream, &header_block(&fields))
}

/// A gRPC message: uncompressed, its length, its bytes.
pub fn grpc_message(body: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend((body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The peer's end of one connection.
pub struct RawPeer {
    pub io: tokio::net::UnixStream,
}

impl RawPeer {
    /// Sends the preface; the helper's SETTINGS are then the first frame.
    pub async fn start(io: tokio::net::UnixStream) -> std::io::Result<RawPeer> {
        let mut peer = RawPeer { io };
        peer.send(&preface()).await?;
        Ok(peer)
    }

    pub async fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.io.write_all(bytes).await
    }

    /// The next frame, or `None` once the helper closed the connection.
    /// SETTINGS are acknowledged as they come.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        let mut head = [0; 9];
        match self.io.read_exact(&mut head).await {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(None),
            read => read?,
        };
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        self.io.read_exact(&mut payload).await?;
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let frame = Frame {
            kind: head[3],
            flags: head[4],
            stream,
            payload,
        };
        if frame.kind == SETTINGS && frame.flags & ACK == 0 {
            self.send(&self::frame(SETTINGS, ACK, 0, &[])).await?;
        }
        Ok(Some(frame))
    }

    /// Frames until one matches `want` (returned), or the connection ends.
    pub async fn until(&mut self, want: impl Fn(&Frame) -> bool) -> std::io::Result<Option<Frame>> {
        while let Some(frame) = self.next().await? {
            if want(&frame) {
                return Ok(Some(frame));
            }
        }
        Ok(None)
    }

    /// The gRPC message bytes the helper sends on `stream`, until it ends.
    pub async fn response_body(&mut self, stream: u32) -> std::io::Result<Vec<u8>> {
        let mut body = Vec::new();
        while let Some(frame) = self.next().await? {
            if frame.stream != stream {
                continue;
            }
            if frame.kind == DATA {
                body.extend_from_slice(&frame.payload);
            }
            // On a stream, flag 0x1 is END_STREAM (on DATA or trailers).
            if frame.kind == RST_STREAM || frame.flags & END_STREAM != 0 {
                break;
            }
        }
        Ok(body)
    }
}
