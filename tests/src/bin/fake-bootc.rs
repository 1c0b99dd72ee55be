//! The fake `bootc` of the test hosts (see tests/src/fake_bootc.rs).

fn main() {
    std::process::exit(tests::fake_bootc::main_with(
        std::env::args().skip(1).collect(),
    ));
}
