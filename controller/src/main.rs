//! `bootc-controller`: rolls bootc images across the nodes of each
//! BootcNodePool. Connects with `KUBECONFIG` (or the in-cluster config);
//! its flags are `controller::cli`'s.

/// jemalloc, not glibc's malloc (why: the crate's Cargo.toml).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    controller::cli::main(std::env::args_os(), None)
}
