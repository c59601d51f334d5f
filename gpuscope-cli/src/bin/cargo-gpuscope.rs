//! `cargo gpuscope lint` / `cargo gpuscope replay`: the `gpuscope` command as a cargo
//! subcommand (install with `cargo install --path gpuscope-cli`).

// `gpuscope lint` spends about a third of its time in `malloc` and `free` (building and
// dropping syn's syntax trees): mimalloc cuts its CPU time by about a sixth (BENCHMARKS.md,
// "gpuscope lint").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    gpuscope_cli::main()
}
