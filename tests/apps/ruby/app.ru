# A Rack app for rein's tests of `"type": "ruby"`, checked by Rack::Lint on every request.
#   /env          the environment as JSON (strings, booleans, numbers and rack.version; others by class)
#   /echo         the request body back, with its length and whether rack.input rewinds
#   /stream?n=N&gate=F   N chunks from `each`, the last one once the file F exists (or after 5 s)
#   /file         a body answering to_path (this file)
#   /call         a Rack 3 streaming body (answers `call` only)
#   /headers      a header value holding "\n" (two Set-Cookie fields) and an Array value
#   /after_reply?path=P   writes "done" to P after the response is sent
#   /sleep?ms=N   sleeps ("sleeping N ms" on stderr first), then answers the pid, the thread and how many requests ran at once at most
#   /thread       what the hooks left in this thread and process
#   /raise        an exception in the app
#   /pid          the process id
require "json"
require "uri" # Rack::Lint 2.2 checks SERVER_NAME with URI without loading it

$running = 0
$most = 0
$lock = Mutex.new

class StreamBody
  def initialize(n, gate)
    @n = n
    @gate = gate
  end

  def each
    (@n - 1).times { |i| yield "chunk #{i}\n" }
    deadline = Time.now + 5
    sleep 0.01 until @gate.nil? || File.exist?(@gate) || Time.now > deadline
    yield "last\n"
  end
end

class FileBody
  def to_path = __FILE__
  def each
    File.open(to_path, "rb") { |f| yield f.read }
  end
end

def query(env) = Rack::Utils.parse_query(env["QUERY_STRING"])

def json(value) = [200, { "Content-Type" => "application/json" }, [JSON.generate(value)]]

def env_json(env)
  env.to_h do |k, v|
    [k, case v
        when String then v.dup.force_encoding(Encoding::UTF_8).scrub
        when true, false, nil, Integer then v
        when Array then v.all?(Integer) ? v : v.map(&:class).map(&:to_s)
        else "#<#{v.class}>"
        end]
  end
end


app = lambda do |env|
  case env["PATH_INFO"]
  when "/env"
    json(env_json(env))
  when "/echo"
    input = env["rack.input"]
    body = input.read
    input.rewind
    again = input.read
    [200, { "Content-Type" => "application/octet-stream", "X-Length" => body.bytesize.to_s,
            "X-Rewound" => (again == body).to_s, "X-Input" => env["test.input_class"] }, [body]]
  when "/stream"
    [200, { "Content-Type" => "text/plain" }, StreamBody.new(query(env).fetch("n", "3").to_i, query(env)["gate"])]
  when "/file"
    [200, { "Content-Type" => "text/plain" }, FileBody.new]
  when "/call"
    [200, { "Content-Type" => "text/plain" }, ->(stream) { stream.write("called\n"); stream << "twice\n"; stream.close }]
  when "/headers"
    [200, { "Content-Type" => "text/plain", "Set-Cookie" => "a=1\nb=2" }, ["ok\n"]]
  when "/after_reply"
    path = query(env)["path"]
    env["rack.after_reply"] << -> { File.write(path, "done") }
    [200, { "Content-Type" => "text/plain" }, ["replied\n"]]
  when "/sleep"
    $lock.synchronize { $running += 1; $most = [$most, $running].max }
    ms = query(env).fetch("ms", "100").to_i
    $stderr.puts "sleeping #{ms} ms"
    sleep(ms / 1000.0)
    most = $lock.synchronize { $running -= 1; $most }
    json("pid" => Process.pid, "thread" => Thread.current.object_id, "most" => most)
  when "/thread"
    json("pid" => Process.pid, "thread_booted" => Thread.current[:booted] || false,
         "worker_booted" => $worker_booted || false)
  when "/raise"
    raise "the app failed on purpose"
  when "/pid"
    [200, { "Content-Type" => "text/plain" }, ["#{Process.pid}\n"]]
  else
    [404, { "Content-Type" => "text/plain" }, ["not found: #{env['PATH_INFO']}\n"]]
  end
end

# Rack::Lint (Rack 2) knows no body answering `call` only (Rack 3): /call goes around it.
lint = Rack::Lint.new(app)
run(lambda do |env|
  env["test.input_class"] = env["rack.input"].class.to_s # before Lint wraps it
  env["test.input_encoding"] = env["rack.input"].external_encoding.to_s
  env["PATH_INFO"] == "/call" ? app.call(env) : lint.call(env)
end)
