// The parser thread allocates the records and the analysis thread frees them: glibc's allocator serializes
// such cross-thread frees on the parser's arena, mimalloc does not (docs/performance.md has the figures).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    streamtrace::cli::main()
}
