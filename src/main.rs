// Chosen when the analysis thread freed the records the parser thread made: glibc's allocator serializes such
// cross-thread frees on the parser's arena, mimalloc does not (docs/performance.md has the figures). Batches now go
// back to the parser to be emptied (ingest/background.rs); what crosses threads still (findings, tables) is small.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    streamtrace::cli::main()
}
