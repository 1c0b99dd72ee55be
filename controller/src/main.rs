//! `bootc-controller`: rolls bootc images across the nodes of each
//! BootcNodePool. Connects with `KUBECONFIG` (or the in-cluster config);
//! its flags are `controller::cli`'s.

/// jemalloc, not glibc's malloc: the controller allocates and frees many
/// small objects per watch event and per plan, and jemalloc holds them in
/// less memory (see the crate's Cargo.toml).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    controller::cli::main(std::env::args_os(), None)
}
