//! `cargo gpuscope lint` / `cargo gpuscope replay`: the `gpuscope` command as a cargo
//! subcommand (install with `cargo install --path gpuscope-cli`).

fn main() -> std::process::ExitCode {
    gpuscope_cli::main()
}
