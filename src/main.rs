//! The `rein` binary: everything lives in the library; this is the door.

fn main() -> std::process::ExitCode {
    rein::cli::main()
}
