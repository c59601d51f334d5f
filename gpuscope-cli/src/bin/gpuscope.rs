//! The `gpuscope` command: `gpuscope replay`, `gpuscope lint`.

fn main() -> std::process::ExitCode {
    gpuscope_cli::main()
}
