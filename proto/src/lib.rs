//! The helper protocol, `bootc.helper.v1`: exactly four calls (Stage, Apply,
//! Status, WriteAuth), as prost messages, and the one framing rule both ends
//! share ([`frame`]). The helper serves it (`helper/src/server.rs`), the
//! daemon calls it (`daemon/src/helper_client.rs`).
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/bootc.helper.v1.rs"));
}

pub use v1::*;

/// The largest frame body either end sends or reads. Status is the largest
/// message, well under this.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Every method the service has. The proto has exactly these four; a test
/// checks the compiled descriptor against this list.
pub const METHODS: [&str; 4] = ["Stage", "Apply", "Status", "WriteAuth"];

/// A frame: a 4-byte big-endian length, then that many bytes of one message
/// ([`Call`] or [`Reply`]). This is the part of the helper's audit surface
/// that lives outside `helper/src`: the helper and the daemon share it.
pub mod frame {
    use prost::Message;

    /// Bytes of the length that starts every frame.
    pub const HEADER: usize = 4;

    /// A frame announced a body over [`crate::MAX_MESSAGE_BYTES`].
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error(
        "a frame of {len} bytes is over the limit of {} bytes",
        crate::MAX_MESSAGE_BYTES
    )]
    pub struct TooLarge {
        pub len: usize,
    }

    /// The body length a header announces, if within the limit.
    pub fn length(header: [u8; HEADER]) -> Result<usize, TooLarge> {
        let len = u32::from_be_bytes(header) as usize;
        if len > crate::MAX_MESSAGE_BYTES {
            return Err(TooLarge { len });
        }
        Ok(len)
    }

    /// `message` as one frame, if its body is within the limit.
    pub fn encode(message: &impl Message) -> Result<Vec<u8>, TooLarge> {
        let body = message.encode_to_vec();
        let len = body.len();
        let header = u32::try_from(len)
            .ok()
            .filter(|_| len <= crate::MAX_MESSAGE_BYTES)
            .ok_or(TooLarge { len })?;
        Ok([header.to_be_bytes().as_slice(), &body].concat())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use prost::Message;

    fn descriptor() -> prost_types::FileDescriptorProto {
        match protox::compile(
            ["helper.proto"],
            [concat!(env!("CARGO_MANIFEST_DIR"), "/proto")],
        ) {
            Ok(fds) => fds.file.into_iter().next().unwrap(),
            Err(e) => panic!("helper.proto does not compile: {e}"),
        }
    }

    #[test]
    fn proto_has_exactly_four_methods() {
        let file = descriptor();
        assert_eq!(file.service.len(), 1);
        let methods: Vec<&str> = file.service[0].method.iter().map(|m| m.name()).collect();
        assert_eq!(methods, super::METHODS);
        assert!(
            file.service[0]
                .method
                .iter()
                .all(|m| !m.client_streaming() && !m.server_streaming()),
            "every method is unary"
        );
    }

    /// `Call` carries exactly the service's requests and `Reply` exactly its
    /// responses (plus `Failure`), one field per method, in its order.
    #[test]
    fn envelopes_carry_exactly_the_four_methods() {
        let file = descriptor();
        let message = |name: &str| {
            let m = file.message_type.iter().find(|m| m.name() == name);
            let fields = m.unwrap().field.iter();
            fields
                .map(|f| {
                    (
                        f.name().to_owned(),
                        f.type_name().rsplit('.').next().unwrap().to_owned(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let snake = |m: &str| {
            if m == "WriteAuth" {
                "write_auth".to_owned()
            } else {
                m.to_lowercase()
            }
        };
        let methods = &file.service[0].method;
        let want = |of: fn(&prost_types::MethodDescriptorProto) -> &str| {
            methods
                .iter()
                .map(|m| {
                    (
                        snake(m.name()),
                        of(m).rsplit('.').next().unwrap().to_owned(),
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(message("Call"), want(|m| m.input_type()));
        let mut replies = want(|m| m.output_type());
        replies.push(("failure".into(), "Failure".into()));
        assert_eq!(message("Reply"), replies);
    }

    #[test]
    fn frames_are_length_prefixed_and_bounded() {
        let call = super::Call {
            method: Some(super::call::Method::Stage(super::StageRequest {
                image: "x".into(),
            })),
        };
        let frame = super::frame::encode(&call).unwrap();
        let body = &frame[super::frame::HEADER..];
        assert_eq!(
            super::frame::length(frame[..4].try_into().unwrap()),
            Ok(body.len())
        );
        assert_eq!(super::Call::decode(body).unwrap(), call);
        let max = super::MAX_MESSAGE_BYTES;
        assert!(super::frame::length((max as u32).to_be_bytes()).is_ok());
        assert_eq!(
            super::frame::length((max as u32 + 1).to_be_bytes()),
            Err(super::frame::TooLarge { len: max + 1 })
        );
        let big = super::WriteAuthRequest {
            docker_config_json: vec![0; max],
        };
        assert!(super::frame::encode(&big).is_err());
    }
}
