#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The helper's gRPC server against peers that break its rules: a call
//! outside the four, a message or header list over its limit, a second
//! stream at once, a frame over the size limit, a flood of reset streams.
//! Each is refused (the stream reset or the connection closed), bootc never
//! runs for it, and the helper keeps nothing of it: the next call is served
//! as usual, or the helper exits with the connection.

use bytes::Bytes;
use prost::Message;
use std::time::Duration;
use tests::fake_host::{FakeHost, image};
use tests::h2_raw::{self, RawPeer};
use tests::require_root;

/// The helper's end of a socketpair, for a peer written by hand.
async fn raw_helper(
    host: &FakeHost,
) -> (
    daemon::confinement::spawn::HelperProcess,
    tokio::net::UnixStream,
) {
    let (process, socket) =
        daemon::confinement::spawn::start(&daemon::confinement::spawn::HelperOptions {
            path: tests::fake_host::bin("bootc-helper"),
            host_pid: host.pid(),
            apply_window: Duration::from_secs(5),
            ..Default::default()
        })
        .unwrap();
    socket.set_nonblocking(true).unwrap();
    (process, tokio::net::UnixStream::from_std(socket).unwrap())
}

/// The helper exits within 5 s, with `code`.
async fn exits_with(process: daemon::confinement::spawn::HelperProcess, code: i32) {
    let status = tokio::time::timeout(Duration::from_secs(5), process.exited())
        .await
        .expect("the helper went on")
        .unwrap();
    assert_eq!(status.code(), Some(code), "{status:?}");
}

/// What came back from one call: its grpc-status, grpc-message and body.
#[derive(Debug)]
struct Answer {
    code: i32,
    message: String,
    body: Vec<u8>,
}

/// One call made by hand with h2: `body` is the whole request stream
/// (ended there unless `keep_open`).
async fn h2_call(
    send: &h2::client::SendRequest<Bytes>,
    path: &str,
    body: Vec<u8>,
    keep_open: bool,
) -> Answer {
    let request = http::Request::post(format!("http://helper{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut send = send.clone().ready().await.unwrap();
    let (response, mut stream) = send.send_request(request, false).unwrap();
    stream.send_data(Bytes::from(body), !keep_open).unwrap();
    let (parts, mut recv) = response.await.unwrap().into_parts();
    let mut body = Vec::new();
    let mut trailers = parts.headers;
    if !trailers.contains_key("grpc-status") {
        while let Some(chunk) = recv.data().await {
            let chunk = chunk.unwrap();
            recv.flow_control().release_capacity(chunk.len()).unwrap();
            body.extend_from_slice(&chunk);
        }
        trailers = recv.trailers().await.unwrap().unwrap_or_default();
    }
    let text = |name: &str| trailers.get(name).map(|v| v.to_str().unwrap().to_owned());
    Answer {
        code: text("grpc-status")
            .expect("no grpc-status")
            .parse()
            .unwrap(),
        // Percent-encoded on the wire: spaces are enough to read it here.
        message: text("grpc-message").unwrap_or_default().replace("%20", " "),
        body,
    }
}

async fn h2_client(socket: tokio::net::UnixStream) -> h2::client::SendRequest<Bytes> {
    let (send, connection) = h2::client::handshake(socket).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

fn status_of(body: &[u8]) -> proto::StatusResponse {
    assert!(body.len() >= 5, "{body:?}");
    proto::StatusResponse::decode(&body[5..]).unwrap()
}

/// A call that is none of the four (another method, the health and
/// reflection services), a body that is not the call's message, or a
/// message over the size limit (refused from its length, before its body
/// is sent) is refused with its status; bootc never runs for them, and the
/// helper serves the next call.
#[tokio::test]
async fn calls_outside_the_four_are_refused_and_the_helper_serves_on() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let (process, socket) = raw_helper(&host).await;
    let send = h2_client(socket).await;
    let empty = h2_raw::grpc_message(&[]);
    let unimplemented = i32::from(proto::Code::Unimplemented);
    for path in [
        proto::path("Reboot"),
        proto::path("stage"),
        "/grpc.health.v1.Health/Check".to_owned(),
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo".to_owned(),
        "/".to_owned(),
    ] {
        let answer = h2_call(&send, &path, empty.clone(), false).await;
        assert_eq!(answer.code, unimplemented, "{path}: {answer:?}");
    }
    let garbage = h2_raw::grpc_message(&[0xff; 16]);
    let answer = h2_call(&send, &proto::path("Stage"), garbage, false).await;
    assert_eq!(answer.code, i32::from(proto::Code::Internal), "{answer:?}");
    assert!(answer.message.contains("decode"), "{answer:?}");
    let mut compressed = h2_raw::grpc_message(&[]);
    compressed[0] = 1;
    let answer = h2_call(&send, &proto::path("Status"), compressed, false).await;
    assert_ne!(answer.code, 0, "{answer:?}");
    for len in [proto::MAX_MESSAGE_BYTES as u32 + 1, u32::MAX] {
        let announced = [&[0][..], &len.to_be_bytes()].concat();
        let answer = h2_call(&send, &proto::path("WriteAuth"), announced, true).await;
        assert_eq!(
            answer.code,
            i32::from(proto::Code::OutOfRange),
            "{answer:?}"
        );
        assert!(answer.message.contains("too large"), "{answer:?}");
    }
    assert!(host.invocations().is_empty(), "bootc never ran for them");
    let answer = h2_call(&send, &proto::path("Status"), empty, false).await;
    assert_eq!(answer.code, 0, "{answer:?}");
    assert_eq!(status_of(&answer.body).booted.unwrap().image, image('a'));
    drop(send);
    exits_with(process, 0).await;
}

/// A raw peer past the helper's SETTINGS (acknowledged), checking what the
/// helper advertises: one stream at once, 4 KiB of headers, 64 KiB windows.
async fn raw_peer(socket: tokio::net::UnixStream) -> RawPeer {
    let mut peer = RawPeer::start(socket).await.unwrap();
    let settings = peer.next().await.unwrap().expect("no SETTINGS");
    assert_eq!(settings.kind, h2_raw::SETTINGS, "{settings:?}");
    let settings = settings.settings();
    for want in [
        (h2_raw::MAX_CONCURRENT_STREAMS, helper::server::MAX_STREAMS),
        (
            h2_raw::MAX_HEADER_LIST_SIZE,
            helper::server::MAX_HEADER_LIST_BYTES,
        ),
        (h2_raw::INITIAL_WINDOW_SIZE, 64 * 1024),
    ] {
        assert!(settings.contains(&want), "{want:?} not in {settings:?}");
    }
    peer
}

/// A Status call on `stream`, by hand: its response.
async fn raw_status(peer: &mut RawPeer, stream: u32) -> proto::StatusResponse {
    let path = proto::path("Status");
    peer.send(&h2_raw::call_headers(stream, &path, &[], false))
        .await
        .unwrap();
    let body = h2_raw::grpc_message(&[]);
    let data = h2_raw::frame(h2_raw::DATA, h2_raw::END_STREAM, stream, &body);
    peer.send(&data).await.unwrap();
    status_of(&peer.response_body(stream).await.unwrap())
}

/// A second stream while one is open is refused (REFUSED_STREAM); the open
/// one is served, and so is the next.
#[tokio::test]
async fn a_second_stream_at_once_is_refused() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let (process, socket) = raw_helper(&host).await;
    let mut peer = raw_peer(socket).await;
    let path = proto::path("Status");
    peer.send(&h2_raw::call_headers(1, &path, &[], false))
        .await
        .unwrap();
    peer.send(&h2_raw::call_headers(3, &path, &[], true))
        .await
        .unwrap();
    let reset = peer.until(|f| f.stream == 3).await.unwrap();
    let reset = reset.expect("the connection closed");
    assert_eq!(reset.kind, h2_raw::RST_STREAM, "{reset:?}");
    assert_eq!(reset.error_code(), Some(h2_raw::REFUSED_STREAM));
    let body = h2_raw::grpc_message(&[]);
    let data = h2_raw::frame(h2_raw::DATA, h2_raw::END_STREAM, 1, &body);
    peer.send(&data).await.unwrap();
    let first = status_of(&peer.response_body(1).await.unwrap());
    assert_eq!(first.booted.unwrap().image, image('a'));
    let next = raw_status(&mut peer, 5).await;
    assert_eq!(next.booted.unwrap().image, image('a'));
    drop(peer);
    exits_with(process, 0).await;
}

/// A header list over 4 KiB is refused (the stream reset, or answered 431
/// and reset); the connection stays and the next call is served.
#[tokio::test]
async fn a_header_list_over_the_limit_is_refused() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let (process, socket) = raw_helper(&host).await;
    let mut peer = raw_peer(socket).await;
    let pad = "a".repeat(helper::server::MAX_HEADER_LIST_BYTES as usize + 1);
    let path = proto::path("Status");
    let headers = h2_raw::call_headers(1, &path, &[("x-pad", pad.as_str())], true);
    peer.send(&headers).await.unwrap();
    let refused = peer.until(|f| f.stream == 1).await.unwrap();
    let refused = refused.expect("the connection closed");
    assert!(
        refused.kind == h2_raw::RST_STREAM || refused.kind == h2_raw::HEADERS,
        "{refused:?}"
    );
    if refused.kind == h2_raw::HEADERS && refused.flags & h2_raw::END_STREAM == 0 {
        let reset = peer.until(|f| f.stream == 1).await.unwrap();
        assert_eq!(reset.map(|f| f.kind), Some(h2_raw::RST_STREAM));
    }
    assert!(host.invocations().is_empty(), "bootc ran");
    let next = raw_status(&mut peer, 3).await;
    assert_eq!(next.booted.unwrap().image, image('a'));
    drop(peer);
    exits_with(process, 0).await;
}

/// A frame over the 16 KiB frame size limit closes the connection
/// (GOAWAY FRAME_SIZE_ERROR), read no further than its header; the helper
/// then exits with an error, as it does whenever the connection breaks.
#[tokio::test]
async fn a_frame_over_the_size_limit_closes_the_connection() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    for len in [helper::server::MAX_FRAME_BYTES + 1, 0xff_ffff] {
        let (process, socket) = raw_helper(&host).await;
        let mut peer = raw_peer(socket).await;
        let path = proto::path("Status");
        peer.send(&h2_raw::call_headers(1, &path, &[], false))
            .await
            .unwrap();
        let oversized = h2_raw::frame_with_len(len, h2_raw::DATA, 0, 1, &[0; 64]);
        peer.send(&oversized).await.unwrap();
        let goaway = peer.until(|f| f.kind == h2_raw::GOAWAY).await.unwrap();
        let goaway = goaway.expect("closed without a GOAWAY");
        assert_eq!(goaway.error_code(), Some(h2_raw::FRAME_SIZE_ERROR));
        assert_eq!(peer.until(|_| false).await.unwrap(), None, "still open");
        exits_with(process, 1).await;
    }
    assert!(host.invocations().is_empty(), "bootc ran");
}

/// Streams opened and reset at once, over and over ("rapid reset"): past a
/// handful, the helper closes the connection (GOAWAY ENHANCE_YOUR_CALM)
/// and exits.
#[tokio::test]
async fn a_flood_of_reset_streams_closes_the_connection() {
    require_root!();
    let host = FakeHost::start(Some(&image('a'))).unwrap();
    let (process, socket) = raw_helper(&host).await;
    let mut peer = raw_peer(socket).await;
    let path = proto::path("Status");
    let cancel = 0x8u32.to_be_bytes();
    let mut flood = Vec::new();
    // Ten: more than the helper's 4, fewer than h2's defaults (20, 1024).
    for stream in (1..20).step_by(2) {
        flood.extend(h2_raw::call_headers(stream, &path, &[], false));
        flood.extend(h2_raw::frame(h2_raw::RST_STREAM, 0, stream, &cancel));
    }
    // The helper may close the connection before it has read it all.
    let _ = peer.send(&flood).await;
    let goaway = peer.until(|f| f.kind == h2_raw::GOAWAY).await.unwrap();
    let goaway = goaway.expect("closed without a GOAWAY");
    assert_eq!(goaway.error_code(), Some(h2_raw::ENHANCE_YOUR_CALM));
    exits_with(process, 1).await;
}
