//! The `gpuscope` command: `gpuscope replay`, `gpuscope lint`.

// `gpuscope lint` spends about a third of its time in `malloc` and `free` (building and
// dropping syn's syntax trees): mimalloc cuts its CPU time by about a sixth (BENCHMARKS.md,
// "gpuscope lint").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    gpuscope_cli::main()
}
