//! The helper protocol, `bootc.helper.v1`: exactly four RPCs (Stage, Apply,
//! Status, WriteAuth). Enable feature `server` for the helper side and
//! `client` for the daemon side.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod v1 {
    tonic::include_proto!("bootc.helper.v1");
}

pub use v1::*;

/// Fully qualified service name, as on the wire.
pub const SERVICE: &str = "bootc.helper.v1.Helper";

/// The helper's request and response size limit (both directions). Status
/// is the largest message, well under this.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// Every method the service has. The proto has exactly these four; a test
/// checks the compiled descriptor against this list.
pub const METHODS: [&str; 4] = ["Stage", "Apply", "Status", "WriteAuth"];

#[cfg(test)]
mod tests {
    #[test]
    fn proto_has_exactly_four_methods() {
        let fds = match protox::compile(
            ["helper.proto"],
            [concat!(env!("CARGO_MANIFEST_DIR"), "/proto")],
        ) {
            Ok(fds) => fds,
            Err(e) => panic!("helper.proto does not compile: {e}"),
        };
        let services: Vec<_> = fds.file.iter().flat_map(|f| f.service.iter()).collect();
        assert_eq!(services.len(), 1);
        let methods: Vec<&str> = services[0].method.iter().map(|m| m.name()).collect();
        assert_eq!(methods, super::METHODS);
        assert!(
            services[0]
                .method
                .iter()
                .all(|m| !m.client_streaming() && !m.server_streaming()),
            "every method is unary"
        );
    }
}
