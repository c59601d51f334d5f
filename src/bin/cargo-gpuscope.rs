//! `cargo gpuscope lint` / `cargo gpuscope replay`: the `gpuscope` command as a cargo
//! subcommand (install with `cargo install --path . --bin cargo-gpuscope`).

#[path = "gpuscope/main.rs"]
mod gpuscope_command;

fn main() -> std::process::ExitCode {
    gpuscope_command::main()
}
