//! The fake `bootc` of the test hosts (see tests/src/fake_bootc.rs).
// No production function over 100 lines (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

fn main() {
    std::process::exit(tests::fake_bootc::main_with(
        std::env::args().skip(1).collect(),
    ));
}
