//! The `rein` binary: everything lives in the library; this is the door.

fn main() -> std::process::ExitCode {
    rein::cli::main()
}

/// jemalloc rather than glibc's malloc: on the FastCGI path (many small allocations, buffers freed on
/// another worker thread than the one that made them) glibc spent a fifth of rein's CPU in malloc and free.
/// Measured on 2 cores, 4 alternating rounds: PHP hello 7,727 -> 9,345 RPS and 84 -> 67 us of rein CPU per
/// request; proxy and static files within noise (+2-4 %); idle RSS 8.4 -> 9.2 MB.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
