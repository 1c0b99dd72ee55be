//! A request as the helper's gRPC server decodes it, for each of the four
//! calls and a path that is none of them (the first byte picks which, the
//! rest is the request stream). No panic, always a status; a message over
//! the limit never reaches the service; what reaches it is what the
//! stream's first message decodes to; any other path is UNIMPLEMENTED.
#![no_main]

use bootc_operator_fuzz::{encoded, first_message, serve_one};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, stream)) = data.split_first() else {
        return;
    };
    let method = proto::METHODS.get(usize::from(pick) % 5);
    let path = proto::path(method.copied().unwrap_or("Other"));
    let (code, seen) = serve_one(&path, stream);
    if method.is_none() {
        assert_eq!(code, proto::Code::Unimplemented as i32);
    }
    let Some(seen) = seen else {
        return;
    };
    assert_eq!(code, 0);
    let message = first_message(stream).expect("the service got a message");
    let again = match method {
        Some(&"Stage") => proto::StageRequest::decode(message).map(|m| m.encode_to_vec()),
        Some(&"Apply") => proto::ApplyRequest::decode(message).map(|m| m.encode_to_vec()),
        Some(&"Status") => proto::StatusRequest::decode(message).map(|m| m.encode_to_vec()),
        _ => proto::WriteAuthRequest::decode(message).map(|m| m.encode_to_vec()),
    };
    assert_eq!(again.expect("it decodes"), encoded(&seen));
});
