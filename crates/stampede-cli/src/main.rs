//! The `stampede` command; see the `stampede_cli` library.

fn main() -> std::process::ExitCode {
    stampede_cli::main()
}
