# Unit's hooks for tests/apps/ruby/app.ru: each appends a line to $HOOKS_LOG ("EVENT PID [THREAD]").
def note(event, thread = nil)
  File.open(ENV.fetch("HOOKS_LOG"), "a") { |f| f.puts([event, Process.pid, thread].compact.join(" ")) }
end

on_worker_boot do
  $worker_booted = true
  note("worker_boot")
end

on_thread_boot do
  Thread.current[:booted] = true
  note("thread_boot", Thread.current.object_id)
end

on_thread_shutdown do
  note("thread_shutdown", Thread.current.object_id)
end

on_worker_shutdown do
  note("worker_shutdown")
end
