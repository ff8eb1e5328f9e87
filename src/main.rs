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

/// jemalloc's options, read when it starts (`_RJEM_MALLOC_CONF` in the environment still overrides them).
/// `background_thread`: freed pages go back to the system from a background thread (one is enough).
/// Without it jemalloc purges only while allocating, so an idle rein kept its peak: 63 MB after a
/// 1,000-connection burst through the proxy, still 63 MB 30 s later; with it, and idle upstream connections
/// closed on time (`upstream::sweep`), 13 MB 15 s later. Proxy throughput unchanged (7 alternating rounds).
#[used]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf =
    MallocConf(c"background_thread:true,max_background_threads:1".as_ptr());

/// A C string's address, as jemalloc declares `malloc_conf` (`const char *`).
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: it points at a string literal, immutable and alive for the whole program.
unsafe impl Sync for MallocConf {}
