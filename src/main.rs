fn main() -> std::process::ExitCode {
    streamtrace::cli::main()
}
