# Unit's hooks, run by rein in each instance (`"hooks"` in rein.json). Each instance is a process of its own that
# loads the app itself (nothing is forked after boot), so a database connection needs no reconnecting here; the
# blocks are where per-process or per-thread resources would be opened and closed.
on_worker_boot do
  $stdout.puts "worker #{Process.pid} booting"
end

on_thread_boot do
  # Per-thread state, e.g. a client of a cache or a queue.
  Thread.current[:hello_started] = Time.now
end

on_worker_shutdown do
  $stdout.puts "worker #{Process.pid} stopping"
end
