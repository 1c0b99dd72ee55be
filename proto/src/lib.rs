//! The helper protocol, `bootc.helper.v1`: exactly four unary gRPC calls
//! (Stage, Apply, Status, WriteAuth) as prost messages, tonic's generated
//! server ([`helper_server`]) and client ([`helper_client`]), the one size
//! limit both ends share, and the apply window the daemon passes on. The helper serves it (`helper/src/server.rs`),
//! the daemon calls it (`daemon/src/agent/helper_client.rs`).
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/bootc.helper.v1.rs"));
}

pub use v1::*;

/// gRPC's status codes: a refusal's code is what the daemon decides on.
pub use tonic::Code;

/// The largest message either end sends or reads (gRPC's length prefix
/// excluded). Status is the largest message, well under this.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// How long Apply waits for bootc to fail before answering that the reboot
/// is under way: the helper's default, and the daemon's `--apply-window-ms`
/// default, which it passes to the helper.
pub const APPLY_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);

/// Every method the service has. The proto has exactly these four; a test
/// checks the compiled descriptor against this list.
pub const METHODS: [&str; 4] = ["Stage", "Apply", "Status", "WriteAuth"];

/// The gRPC path of `method` (`/bootc.helper.v1.Helper/<method>`).
pub fn path(method: &str) -> String {
    format!("/{}/{method}", helper_server::SERVICE_NAME)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

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

    /// The generated server answers on exactly the four paths.
    #[test]
    fn paths_name_the_service() {
        assert_eq!(super::path("Stage"), "/bootc.helper.v1.Helper/Stage");
    }
}
