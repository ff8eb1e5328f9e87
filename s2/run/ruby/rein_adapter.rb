#!/usr/bin/env ruby
# frozen_string_literal: true

# rein's adapter for Ruby applications: serves one Rack app over FastCGI.
#
# rein starts each instance of a `"type": "ruby"` application as
#
#     ruby rein_adapter.rb --script config.ru [--threads N] [--hooks hooks.rb] [--check]
#
# with a listening socket (Unix or TCP) as fd 3, systemd style (LISTEN_FDS=1). The file needs only Ruby's
# standard library and the `rack` gem (Debian's ruby-rack), so that it runs under any Ruby the app uses.
#
# Loading
# -------
# In the process's working directory (the app's `working_directory`), where relative paths resolve:
# 1. Bundler: when BUNDLE_GEMFILE is set, or a Gemfile sits next to the rackup file, `bundler/setup` runs
#    first (BUNDLE_GEMFILE pointing at that Gemfile), so the app's locked gems, rack included, are the ones
#    loaded: a Rails app's config.ru runs unchanged.
# 2. The hooks file, if any, is evaluated in a module of its own: its `on_worker_boot`, `on_worker_shutdown`,
#    `on_thread_boot` and `on_thread_shutdown` blocks are kept, and run as NGINX Unit runs them:
#    on_worker_boot once, before the rackup file is loaded; on_thread_boot in each of the `--threads`
#    threads that run requests, before its first (with one thread: once, in the main thread, which runs
#    them); on_thread_shutdown in each as it stops, and on_worker_shutdown last, at a graceful stop. A failing on_worker_boot stops the instance.
# 3. The rackup file: `Rack::Builder.parse_file` (Rack 2 returns [app, options], Rack 3 the app).
# `--check` does 1 to 3 without calling any hook, then exits 0, or 1 with the error on stderr (rein shows it
# to whoever submitted the configuration).
#
# Serving
# -------
# * FastCGI 1.0, responder role, one request at a time per connection (no multiplexing). rein keeps
#   connections alive (FCGI_KEEP_CONN); management records (FCGI_GET_VALUES, rein's readiness probe) are
#   answered whenever they arrive.
# * A request is read whole before the app is called: its params and its body (in memory up to
#   BODY_IN_MEMORY bytes, else in an unlinked temporary file), so that rack.input is rewindable as Rack 2
#   requires. Each request is read exactly to its end (its empty STDIN): a request rein pipelines behind
#   the one in progress stays in the socket until that one is answered.
# * --threads 1: the main thread serves every connection from one loop (ServeLoop), without a thread
#   hand-off: it selects over the listener, a wake pipe (signals) and the connections; a connection whose
#   buffer holds a whole record takes its turn: management records answered, a request read and run to
#   its end inline, then the next connection with a record waiting. Between two chunks of a streamed
#   response the connection is read without waiting: FCGI_ABORT_REQUEST (or rein closing the connection)
#   makes the next write fail; management records are answered; a pipelined request is left for later.
# * --threads N > 1: the main thread accepts. Each connection has a thread that reads its requests and
#   queues them for N app threads (which run the hooks): they bound the requests running the app at once,
#   a slow upload holds no app thread, and an idle keep-alive connection costs a blocked reader thread
#   only (blocked in read(2), outside the GVL). While the app runs, the connection's thread keeps reading:
#   FCGI_ABORT_REQUEST (or rein closing the connection) marks the request aborted, and a streamed response
#   stops at its next chunk.
# * The response goes out as STDOUT records holding a CGI head (`Status: 200 OK`, fields, blank line), then
#   the body, an empty STDOUT record and END_REQUEST. The head is held back until the first body bytes;
#   an Array body goes out with its end records in one write; each chunk of any other body's `each` goes
#   out as it comes; a body that answers `to_path` is read from that file; a Rack 3 body that answers only
#   `call` is given a stream to write to. `close` is called on the body once its end is sent. END_REQUEST
#   carries appStatus 0 for a complete response, 1 when it was cut short (app error after the head was
#   sent, abort): a hint for rein not to present a cut body as complete.
# * Header values holding "\n" become several fields of that name, as do Array values (Rack 3).
# * After the response, the callables the app put in env["rack.after_reply"] run (no arguments), then
#   those in env["rack.response_finished"] (env, status, headers, error), in the thread that ran the
#   request, before it takes another.
# * rack.hijack? is false: rein speaks FastCGI to the adapter and owns the client's connection.
# * Shutdown (SIGTERM or SIGINT): stop accepting (closing only this process's copy of the listening socket,
#   which rein and other instances share), close idle connections, let requests in flight finish for up
#   to SHUTDOWN_GRACE seconds (with one thread, the request running finishes, then the loop ends; a
#   watchdog thread exits the process if it takes longer), run the thread and worker shutdown hooks, exit 0.

require "optparse"
require "socket"
require "stringio"
require "tempfile"

module ReinAdapter
  BINARY = Encoding::BINARY

  FCGI_VERSION = 1
  BEGIN_REQUEST = 1
  ABORT_REQUEST = 2
  END_REQUEST = 3
  PARAMS = 4
  STDIN = 5
  STDOUT = 6
  GET_VALUES = 9
  GET_VALUES_RESULT = 10
  UNKNOWN_TYPE = 11
  RESPONDER = 1
  KEEP_CONN = 1
  REQUEST_COMPLETE = 0
  CANT_MPX_CONN = 1
  UNKNOWN_ROLE = 3
  APP_OK = 0 # END_REQUEST appStatus: complete response
  APP_FAILED = 1 # ... cut short

  HEADER = "CCnnCC" # version, type, request id, content length, padding length, reserved
  MAX_CONTENT = 65_535
  RECV_SIZE = 65_536
  BODY_IN_MEMORY = 128 * 1024 # request bodies larger than this go to a temporary file
  SHUTDOWN_GRACE = 10.0 # seconds given to requests in flight at a graceful stop
  ERROR_500 = "Internal Server Error\n"

  # A malformed FastCGI stream: the connection is dropped.
  class ProtocolError < StandardError; end

  # The request was aborted by rein, or its connection is gone: the client will not read the response.
  class Aborted < IOError; end

  def self.log(message)
    $stderr.write("rein_adapter: #{message}\n")
  end

  # The frames of an exception's backtrace that are the app's: without this file's and Rack's loader's.
  def self.app_backtrace(exc)
    (exc.backtrace || []).reject { |f| f.start_with?(__FILE__) || f.include?("/rack/builder.rb:") }
  end

  # An exception as Ruby reports an uncaught one ("where: message (Class)", then "\tfrom" lines), with the
  # app's frames only.
  def self.describe(exc)
    frames = app_backtrace(exc)
    where = frames.empty? ? "" : "#{frames.first}: "
    lines = ["#{where}#{exc.message} (#{exc.class})"] + frames.drop(1).map { |f| "\tfrom #{f}" }
    lines.join("\n") << "\n"
  end

  # ------------------------------------------------------------------------- FastCGI records

  def self.record(type, rid, content = "".b)
    [FCGI_VERSION, type, rid, content.bytesize, 0, 0].pack(HEADER) << content
  end

  def self.end_request(rid, app_status = APP_OK, protocol_status = REQUEST_COMPLETE)
    record(END_REQUEST, rid, [app_status, protocol_status, 0, 0, 0].pack("NCCCC"))
  end

  # STDOUT records carrying data (split at 64 KiB), then, with last, an empty STDOUT and END_REQUEST.
  def self.stdout_records(rid, data, last: false, app_status: APP_OK)
    n = data.bytesize
    out = String.new(capacity: n + 8 * (n / MAX_CONTENT + 3) + 8, encoding: BINARY)
    pos = 0
    while pos < n
      len = [n - pos, MAX_CONTENT].min
      out << [FCGI_VERSION, STDOUT, rid, len, 0, 0].pack(HEADER) << data.byteslice(pos, len)
      pos += len
    end
    out << [FCGI_VERSION, STDOUT, rid, 0, 0, 0].pack(HEADER) << end_request(rid, app_status) if last
    out
  end

  # FastCGI name-value pairs -> { name => value }, both binary strings.
  def self.decode_pairs(data)
    pairs = {}
    pos = 0
    size = data.bytesize
    while pos < size
      nlen, pos = pair_length(data, pos)
      vlen, pos = pair_length(data, pos)
      raise ProtocolError, "truncated FastCGI name-value pairs" if pos + nlen + vlen > size

      # Names are ASCII (CGI variables): UTF-8, as the app's own string literals; values stay bytes.
      pairs[data.byteslice(pos, nlen).force_encoding(Encoding::UTF_8)] = data.byteslice(pos + nlen, vlen)
      pos += nlen + vlen
    end
    pairs
  end

  def self.pair_length(data, pos)
    first = data.getbyte(pos) or raise ProtocolError, "truncated FastCGI name-value pairs"
    return [first, pos + 1] if first < 128

    raise ProtocolError, "truncated FastCGI name-value pairs" if pos + 4 > data.bytesize

    [data.byteslice(pos, 4).unpack1("N") & 0x7FFF_FFFF, pos + 4]
  end

  def self.encode_pairs(pairs)
    out = String.new(encoding: BINARY)
    pairs.each do |name, value|
      [name.bytesize, value.bytesize].each { |n| out << (n < 128 ? [n].pack("C") : [n | 0x8000_0000].pack("N")) }
      out << name.b << value.b
    end
    out
  end

  # The answer to a management record (request id 0): GET_VALUES_RESULT or UNKNOWN_TYPE.
  def self.management_reply(type, content, values)
    return record(UNKNOWN_TYPE, 0, [type, 0, 0, 0, 0, 0, 0, 0].pack("C8")) unless type == GET_VALUES

    asked = decode_pairs(content).keys
    record(GET_VALUES_RESULT, 0, encode_pairs(asked.filter_map { |n| values[n] && [n, values[n]] }))
  end

  # Reads FastCGI records from a socket through one buffer (several records per read).
  class RecordReader
    def initialize(sock)
      @sock = sock
      @buf = String.new(encoding: BINARY)
      @pos = 0
    end

    # The next record as [type, request id, content]; nil on a clean end of stream between records.
    def read
      return nil unless fill(8, at_boundary: true)

      _, type, rid, clen, plen = @buf.byteslice(@pos, 8).unpack(HEADER)
      fill(8 + clen + plen, at_boundary: false)
      content = @buf.byteslice(@pos + 8, clen)
      @pos += 8 + clen + plen
      [type, rid, content]
    end

    # Whether a whole record is buffered: read returns it without waiting.
    def record_buffered?
      avail = @buf.bytesize - @pos
      return false if avail < 8

      _, _, _, clen, plen = @buf.byteslice(@pos, 8).unpack(HEADER)
      avail >= 8 + clen + plen
    end

    # The type of the buffered record (record_buffered? is true).
    def peek_type = @buf.getbyte(@pos + 1)

    # Adds what the socket holds now to the buffer, without waiting: false at the end of the stream.
    def fill_now
      data = @sock.read_nonblock(RECV_SIZE, exception: false)
      return false if data.nil?
      return true if data == :wait_readable

      compact
      @buf << data
      true
    end

    private

    def compact
      return unless @pos.positive?

      @buf = @buf.byteslice(@pos, @buf.bytesize - @pos)
      @pos = 0
    end

    def fill(need, at_boundary:)
      while @buf.bytesize - @pos < need
        compact
        begin
          @buf << @sock.readpartial(RECV_SIZE)
        rescue EOFError
          return false if at_boundary && @buf.empty?

          raise ProtocolError, "connection closed inside a FastCGI record"
        end
      end
      true
    end
  end

  # ------------------------------------------------------------------------- hooks

  # Unit's hooks: blocks registered by the hooks file, run at the worker's and its threads' start and stop.
  class Hooks
    NAMES = %i[on_worker_boot on_worker_shutdown on_thread_boot on_thread_shutdown].freeze

    def initialize(path = nil)
      @blocks = {}
      return if path.nil?

      blocks = @blocks
      scope = Module.new
      NAMES.each do |name|
        scope.define_singleton_method(name) do |&block|
          raise ArgumentError, "#{name} needs a block" if block.nil?

          blocks[name] = block
        end
      end
      scope.extend(scope) # a method the file defines is callable from its blocks
      scope.module_eval(File.read(path), path, 1)
    end

    def call(name)
      @blocks[name]&.call
    end

    # A thread hook: its error is logged, as Unit does, and the thread goes on.
    def call_logged(name)
      call(name)
    rescue Exception => e # rubocop:disable Lint/RescueException -- the app's code: anything may come
      ReinAdapter.log("#{name} failed: #{ReinAdapter.describe(e)}")
    end
  end

  # ------------------------------------------------------------------------- loading

  def self.bundler_setup(script)
    gemfile = File.join(File.dirname(File.expand_path(script)), "Gemfile")
    return unless ENV["BUNDLE_GEMFILE"] || File.file?(gemfile)

    ENV["BUNDLE_GEMFILE"] ||= gemfile
    require "bundler/setup"
  end

  def self.load_rackup(script)
    require "rack"
    built = Rack::Builder.parse_file(script)
    app = built.is_a?(Array) ? built.first : built # Rack 2: [app, options]; Rack 3: app
    raise TypeError, "#{script}: the rackup file's app (#{app.class}) does not respond to call" \
      unless app.respond_to?(:call)

    app
  end

  # ------------------------------------------------------------------------- requests

  # A Rack 3 streaming body's stream (a body that answers `call` only): what the app writes goes out at once.
  class Stream
    def initialize(request)
      @request = request
      @closed = false
    end

    def write(data)
      @request.write_chunk(data.to_s)
      data.to_s.bytesize
    end

    def <<(data)
      write(data)
      self
    end

    def read(*) = nil
    def flush = self
    def close_read = nil
    def close_write = (@closed = true)
    def close = (@closed = true)
    def closed? = @closed
  end

  # One request: its environment, the app's call, its response.
  class Request
    attr_reader :rid, :keep
    attr_accessor :aborted

    def initialize(conn, rid, keep, params, input)
      @conn = conn
      @rid = rid
      @keep = keep
      @params = params
      @input = input
      @aborted = false
      @head = nil
      @head_sent = false
      @ended = false
    end

    # Runs the app and sends its response, in an app thread.
    def run(server)
      if @aborted
        finish_connection(APP_FAILED)
        return
      end
      env = server.env_for(@params, @input)
      status = headers = body = error = nil
      begin
        status, headers, body = server.app.call(env)
        respond(status, headers, body)
      rescue Exception => e # rubocop:disable Lint/RescueException -- the app's code: anything may come
        error = e
        failed(e, env)
      ensure
        close_body(body, env)
        finish_connection(APP_FAILED)
      end
      after_response(env, status, headers, error)
    end

    # The body's next bytes: sent with the head if it is still held back.
    def write_chunk(data)
      @conn.poll(self)
      raise Aborted, "request aborted by rein" if @aborted
      return if data.empty?

      @conn.send_data(ReinAdapter.stdout_records(@rid, head_and(data)))
    end

    private

    def head_and(data)
      data = data.b unless data.encoding == BINARY
      return data if @head_sent

      @head_sent = true
      @head + data
    end

    def respond(status, headers, body)
      @head = ReinAdapter.cgi_head(status, headers)
      if body.respond_to?(:to_path) && (file = open_body_file(body))
        stream_file(file)
      elsif body.is_a?(Array)
        finish(body.each_with_object(String.new(encoding: BINARY)) { |chunk, all| all << chunk.to_s.b })
      elsif body.respond_to?(:each)
        stream_each(body)
      elsif body.respond_to?(:call)
        body.call(Stream.new(self))
        finish("".b)
      else
        raise TypeError, "the Rack body (#{body.class}) answers neither each nor call"
      end
    end

    def open_body_file(body)
      File.open(body.to_path.to_s, "rb")
    rescue SystemCallError, IOError
      nil # read through each instead
    end

    def stream_file(file)
      while (chunk = file.read(RECV_SIZE))
        break if @aborted

        write_chunk(chunk)
      end
      finish("".b)
    ensure
      file.close
    end

    def stream_each(body)
      body.each do |chunk|
        break if @aborted

        write_chunk(chunk.to_s)
      end
      finish("".b)
    end

    # The last bytes and the end records, in one write.
    def finish(data)
      return if @aborted

      data = head_and(data)
      @ended = true
      @conn.send_data(ReinAdapter.stdout_records(@rid, data, last: true))
    end

    # Ends the request if the response did not (aborted, or cut short by an error), then frees the connection
    # for its next request.
    def finish_connection(app_status)
      unless @ended
        @ended = true
        begin
          @conn.send_data(ReinAdapter.stdout_records(@rid, "".b, last: true, app_status: app_status))
        rescue IOError, SystemCallError
          nil # the connection is gone: nothing to tell
        end
      end
      @input.close if @input.respond_to?(:close)
      @conn.request_done(self)
    end

    def failed(exc, env)
      return if @aborted || exc.is_a?(Aborted)

      ReinAdapter.log("error in the Rack app (#{env['REQUEST_METHOD']} #{env['REQUEST_URI']}): " \
                      "#{ReinAdapter.describe(exc)}")
      return if @ended || @head_sent # cut short: finish_connection says so

      @ended = true
      head = "Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n" \
             "Content-Length: #{ERROR_500.bytesize}\r\n\r\n"
      @conn.send_data(ReinAdapter.stdout_records(@rid, (head + ERROR_500).b, last: true))
    rescue IOError, SystemCallError
      nil
    end

    def close_body(body, env)
      body.close if body.respond_to?(:close)
    rescue Exception => e # rubocop:disable Lint/RescueException -- the app's code: anything may come
      ReinAdapter.log("error in close() of the Rack body (#{env['REQUEST_URI']}): #{ReinAdapter.describe(e)}")
    end

    def after_response(env, status, headers, error)
      Array(env["rack.after_reply"]).each { |c| run_callback("rack.after_reply") { c.call } }
      Array(env["rack.response_finished"]).each do |c|
        run_callback("rack.response_finished") { c.call(env, status, headers, error) }
      end
    end

    def run_callback(what)
      yield
    rescue Exception => e # rubocop:disable Lint/RescueException -- the app's code: anything may come
      ReinAdapter.log("error in #{what}: #{ReinAdapter.describe(e)}")
    end
  end

  # The CGI head for a Rack status and headers; raises TypeError/ArgumentError on what cannot be sent.
  def self.cgi_head(status, headers)
    code = Integer(status.to_s, 10)
    raise ArgumentError, "Rack status must be 100 to 999, not #{status.inspect}" unless (100..999).cover?(code)

    reason = Rack::Utils::HTTP_STATUS_CODES[code]
    head = String.new("Status: #{code}#{reason ? " #{reason}" : ''}\r\n", encoding: BINARY)
    headers&.each { |name, value| add_fields(head, name.to_s, value) }
    head << "\r\n"
  rescue TypeError, ArgumentError => e
    raise e.class, "invalid Rack response status #{status.inspect}: #{e.message}" unless head

    raise
  end

  FIELD_NAME = /\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+\z/.freeze

  def self.add_fields(head, name, value)
    lower = name.downcase
    return if lower == "status" || lower.start_with?("rack.") # the Rack SPEC's: not sent to the client
    raise ArgumentError, "invalid Rack header name #{name.inspect}" unless FIELD_NAME.match?(name)

    values = value.is_a?(Array) ? value.map(&:to_s) : value.to_s.split("\n")
    values.each do |v|
      raise ArgumentError, "CR, LF or NUL in the Rack header #{name}: #{v.inspect}" if v.match?(/[\r\n\0]/)

      if lower == "content-length" && !v.strip.match?(/\A\d+\z/)
        # rein frames the body itself rather than pass on a length nobody can parse.
        log("ignored the app's invalid Content-Length #{v[0, 64].inspect}")
        next
      end
      head << name.b << ": " << v.b << "\r\n"
    end
  end

  # ------------------------------------------------------------------------- connections

  # A connection from rein: its records, read into requests (params and whole body), and its writes. How the
  # requests are served is its subclass's: ThreadedConnection or LoopConnection.
  class Connection
    attr_reader :sock

    def initialize(server, sock)
      @server = server
      @sock = sock
      @reader = RecordReader.new(sock)
      @write_lock = Mutex.new
      @current = nil # the request in progress
    end

    def send_data(data)
      @write_lock.synchronize { @sock.write(data) }
    rescue IOError, SystemCallError => e
      @current&.aborted = true
      raise Aborted, "connection to rein lost: #{e.message}"
    end

    # Between two chunks of a streamed response: marks the request aborted if rein said so. Nothing to do
    # here: a ThreadedConnection's own thread keeps reading while the request runs.
    def poll(_request) = nil

    private

    # Reads a request's params and body into a Request; nil when it was answered already (a role other than
    # responder, an abort while it came).
    def read_request(rid, content)
      raise ProtocolError, "short FCGI_BEGIN_REQUEST record" if content.bytesize < 8

      role, flags = content.unpack("nC")
      if role != RESPONDER
        send_data(ReinAdapter.end_request(rid, APP_OK, UNKNOWN_ROLE))
        return nil
      end
      params = read_params(rid) or return nil
      input = read_body(rid, params) or return nil
      Request.new(self, rid, flags.anybits?(KEEP_CONN), params, input)
    end

    def read_params(rid)
      data = String.new(encoding: BINARY)
      each_record_of(rid) do |type, content|
        next unless type == PARAMS
        return ReinAdapter.decode_pairs(data) if content.empty?

        data << content
      end
    end

    # The whole body, rewound: a StringIO, or an unlinked temporary file past BODY_IN_MEMORY bytes.
    def read_body(rid, params)
      length = params["CONTENT_LENGTH"]
      known = length&.match?(/\A\d+\z/) ? length.to_i : nil
      input = known && known > BODY_IN_MEMORY ? temporary_file : StringIO.new(String.new(encoding: BINARY))
      size = 0
      each_record_of(rid, input) do |type, content|
        next unless type == STDIN

        if content.empty?
          # A chunked body came without a length: it is known now.
          params["CONTENT_LENGTH"] = size.to_s if known.nil? && size.positive?
          input.rewind
          return input
        end
        input = spill(input) if input.is_a?(StringIO) && size + content.bytesize > BODY_IN_MEMORY
        input.write(content)
        size += content.bytesize
      end
    end

    # Yields the records of request rid (type, content) until the block returns; answers the others. An
    # abort ends the request at once: nil.
    def each_record_of(rid, input = nil)
      loop do
        rec = @reader.read or raise ProtocolError, "connection closed inside a request"
        type, rrid, content = rec
        if rrid == rid
          if type == ABORT_REQUEST
            input&.close
            send_data(ReinAdapter.end_request(rid, APP_FAILED))
            return nil
          end
          yield type, content
        elsif rrid.zero?
          send_data(ReinAdapter.management_reply(type, content, @server.values))
        elsif type == BEGIN_REQUEST
          send_data(ReinAdapter.end_request(rrid, APP_OK, CANT_MPX_CONN))
        end
      end
    end

    def temporary_file
      file = Tempfile.new("rein-body")
      file.binmode
      file.unlink # gone when closed, or if the process dies
      file
    end

    def spill(memory)
      file = temporary_file
      file.write(memory.string)
      file
    end
  end

  # With --threads > 1: the connection's thread reads records and hands each request to the app threads.
  class ThreadedConnection < Connection
    def initialize(server, sock)
      super
      @idle = ConditionVariable.new # @current is guarded by server.lock
    end

    def busy? = !@current.nil?

    # The connection's thread: records in, requests out, until rein closes it or the server stops.
    def serve
      while (rec = @reader.read)
        type, rid, content = rec
        if rid.zero?
          send_data(ReinAdapter.management_reply(type, content, @server.values))
        elsif type == BEGIN_REQUEST
          wait_idle # pipelined behind the request in progress
          break unless begin_request(rid, content)
        elsif type == ABORT_REQUEST
          @server.lock.synchronize { @current.aborted = true if @current&.rid == rid }
        end # else the rest of an earlier request: dropped
      end
    rescue IOError, SystemCallError, ProtocolError => e
      ReinAdapter.log("connection dropped: #{e.message}") unless @server.stopping || e.is_a?(Aborted)
    ensure
      @server.lock.synchronize { @current&.aborted = true }
      wait_idle
      close
    end

    # Called by the app thread once the request is answered: the next one may come; the connection closes
    # now if the request asked for it or the server is stopping (its thread, blocked reading, sees the end).
    def request_done(request)
      @server.lock.synchronize do
        @current = nil
        @idle.broadcast
        shutdown if !request.keep || @server.stopping
      end
    end

    # Wakes the connection's thread (reading) with an end of stream; the server's lock is held.
    def shutdown
      @sock.shutdown(Socket::SHUT_RDWR)
    rescue IOError, SystemCallError
      nil
    end

    private

    def wait_idle
      @server.lock.synchronize { @idle.wait(@server.lock) while @current }
    end

    def close
      @server.forget(self)
      @sock.close
    rescue IOError, SystemCallError
      nil
    end

    # Reads a request, then queues it; false when the connection is to close.
    def begin_request(rid, content)
      request = read_request(rid, content) or return true
      @server.lock.synchronize do
        return false if @server.stopping

        @current = request
      end
      @server.jobs << request
      true
    end
  end

  # With --threads 1: served by the main thread's loop (ServeLoop), its requests run inline, one at a time.
  class LoopConnection < Connection
    def initialize(server, sock)
      super
      @keep = true
    end

    def record_buffered? = @reader.record_buffered?

    # Adds what the socket holds now to the connection's buffer: false when rein closed it.
    def fill_now = @reader.fill_now

    # Answers the management records the buffer holds, up to a request: that one is read to its end and
    # served. Whether the connection stays open.
    def step
      while @reader.record_buffered?
        type, rid, content = @reader.read
        if rid.zero?
          send_data(ReinAdapter.management_reply(type, content, @server.values))
        elsif type == BEGIN_REQUEST
          return false if @server.stopping

          request = read_request(rid, content) or next
          return run(request)
        end # else the rest of an earlier request: dropped
      end
      true
    rescue IOError, SystemCallError, ProtocolError => e
      ReinAdapter.log("connection dropped: #{e.message}") unless @server.stopping || e.is_a?(Aborted)
      false
    end

    # Reads the records that came while the request runs, without waiting, up to a pipelined request (left
    # for after this one): an abort, or the end of the connection, marks the request aborted.
    def poll(request)
      request.aborted = true unless @reader.record_buffered? || @reader.fill_now
      while !request.aborted && @reader.record_buffered? && @reader.peek_type != BEGIN_REQUEST
        type, rid, content = @reader.read
        if rid.zero?
          send_data(ReinAdapter.management_reply(type, content, @server.values))
        elsif rid == request.rid && type == ABORT_REQUEST
          request.aborted = true
        end
      end
    rescue IOError, SystemCallError, ProtocolError
      request.aborted = true # the connection is gone, or broken: nobody reads the response
    end

    def request_done(request)
      @current = nil
      @keep = request.keep
    end

    def close
      @sock.close
    rescue IOError, SystemCallError
      nil
    end

    private

    def run(request)
      @current = request
      request.run(@server)
      @keep && !@server.stopping
    rescue StandardError => e # not the app's errors (Request#run answers those): this adapter's
      ReinAdapter.log("request failed: #{ReinAdapter.describe(e)}")
      false
    end
  end

  # ------------------------------------------------------------------------- the server

  # --threads 1: the main thread serves every connection from one loop. It selects over the listener, the
  # wake pipe and the connections; a connection whose buffer holds a whole record takes its turn (Perl's and
  # the Python adapter's WSGI design). rein pipelines requests and keeps a connection per worker thread of
  # its own: the next request is often in the socket when one ends.
  class ServeLoop
    def initialize(server, listener, wake)
      @server = server
      @listener = listener
      @wake = wake
      @conns = {} # socket => LoopConnection
      @ready = [] # connections with a whole record buffered, in turn
    end

    def run
      until @server.stopping
        @ready.empty? ? watch : take_turns
      end
    end

    # At the end: the listener (only this process's descriptor) and the idle connections closed.
    def close
      @listener.close
      @conns.each_value(&:close)
      @conns.clear
    end

    private

    def take_turns
      round = @ready
      @ready = []
      round.each do |conn|
        if !conn.step
          drop(conn)
        elsif conn.record_buffered?
          @ready << conn
        end
      end
    end

    def watch
      readable, = IO.select([@listener, @wake, *@conns.keys])
      readable.each do |io|
        if io.equal?(@wake)
          @wake.read_nonblock(512, exception: false)
        elsif io.equal?(@listener)
          @server.accept { |sock| @conns[sock] = LoopConnection.new(@server, sock) }
        elsif (conn = @conns[io])
          if !conn.fill_now
            drop(conn)
          elsif conn.record_buffered?
            @ready << conn
          end
        end
      end
    end

    def drop(conn)
      @conns.delete(conn.sock)
      conn.close
    end
  end

  class Server
    attr_reader :app, :lock, :jobs, :values, :stopping

    def initialize(app, hooks, listener, threads)
      @app = app
      @hooks = hooks
      @listener = listener
      @threads = threads
      @lock = Mutex.new
      @changed = ConditionVariable.new # a connection went away
      @conns = {}
      @jobs = Queue.new
      @stopping = false
      @values = { "FCGI_MAX_CONNS" => "1024", "FCGI_MAX_REQS" => threads.to_s, "FCGI_MPXS_CONNS" => "0" }
      @base_env = base_env(threads)
    end

    def serve
      wake_r, wake_w = IO.pipe
      stop = false
      %w[TERM INT].each do |sig|
        trap(sig) do
          if @threads == 1 && !stop
            # The request in progress runs on this thread: the loop stops after it, or the watchdog does.
            @stopping = true
            Thread.new { watchdog }
          end
          stop = true
          wake_w.write_nonblock("x", exception: false)
        end
      end
      @threads == 1 ? serve_loop(wake_r) : serve_threads(wake_r) { stop }
    end

    def env_for(params, input)
      env = @base_env.dup
      env.merge!(params)
      env.delete("HTTP_CONTENT_TYPE") # the Rack SPEC's: CONTENT_TYPE and CONTENT_LENGTH only
      env.delete("HTTP_CONTENT_LENGTH")
      env["SCRIPT_NAME"] = "" if env["SCRIPT_NAME"] == "/"
      env["rack.url_scheme"] = "https" if https?(params)
      env["rack.input"] = input
      env["rack.after_reply"] = []
      env["rack.response_finished"] = []
      env
    end

    def forget(conn)
      @lock.synchronize do
        @conns.delete(conn)
        @changed.broadcast
      end
    end

    # Accepts the connections waiting, yielding each socket.
    def accept
      loop do
        sock, = @listener.accept_nonblock(exception: false)
        return if sock == :wait_readable

        sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1) if sock.local_address.ip?
        yield sock
      end
    rescue IOError, SystemCallError => e # EMFILE and the like: let it breathe
      ReinAdapter.log("accept failed: #{e.message}")
      sleep 0.05
    end

    private

    # One thread: the hooks run once, in this thread (the one that serves), around the loop.
    def serve_loop(wake)
      @hooks.call_logged(:on_thread_boot)
      serving = ServeLoop.new(self, @listener, wake)
      begin
        serving.run
      ensure
        serving.close
        @hooks.call_logged(:on_thread_shutdown)
      end
      @hooks.call_logged(:on_worker_shutdown)
      0
    end

    def watchdog
      sleep SHUTDOWN_GRACE
      ReinAdapter.log("a request still running after #{SHUTDOWN_GRACE.to_i} s; exiting anyway")
      exit!(0)
    end

    def serve_threads(wake)
      workers = Array.new(@threads) { Thread.new { work } }
      until yield
        ready, = IO.select([@listener, wake])
        next unless ready.include?(@listener) && !yield

        accept do |sock|
          conn = ThreadedConnection.new(self, sock)
          @lock.synchronize { @conns[conn] = true }
          Thread.new { conn.serve }
        end
      end
      shutdown(workers)
    end

    def https?(params)
      params["HTTPS"]&.downcase == "on" || params["HTTPS"] == "1" || params["REQUEST_SCHEME"] == "https"
    end

    def base_env(threads)
      version = defined?(Rack::VERSION) && Rack::VERSION.is_a?(Array) ? Rack::VERSION : [1, 3]
      {
        "SERVER_SOFTWARE" => "rein",
        "REQUEST_METHOD" => "GET",
        "SCRIPT_NAME" => "",
        "PATH_INFO" => "",
        "QUERY_STRING" => "",
        "SERVER_NAME" => "localhost",
        "SERVER_PORT" => "80",
        "SERVER_PROTOCOL" => "HTTP/1.1",
        "rack.version" => version,
        "rack.url_scheme" => "http",
        "rack.errors" => $stderr,
        "rack.multithread" => threads > 1,
        "rack.multiprocess" => true,
        "rack.run_once" => false,
        "rack.hijack?" => false
      }.freeze
    end

    # An app thread: runs the hooks, then requests from the queue until told to stop.
    def work
      @hooks.call_logged(:on_thread_boot)
      while (request = @jobs.pop) != :stop
        begin
          request.run(self)
        rescue Exception => e # rubocop:disable Lint/RescueException -- keep the thread whatever happened
          ReinAdapter.log("request failed: #{ReinAdapter.describe(e)}")
        end
      end
    ensure
      @hooks.call_logged(:on_thread_shutdown)
    end

    def shutdown(workers)
      @listener.close # only this process's descriptor: rein and other instances keep theirs
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + SHUTDOWN_GRACE
      pending = @lock.synchronize do
        @stopping = true
        @conns.each_key { |conn| conn.shutdown unless conn.busy? }
        until @conns.empty?
          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          break if left <= 0

          @changed.wait(@lock, left)
        end
        @conns.size
      end
      if pending.positive?
        ReinAdapter.log("#{pending} connection(s) still busy after #{SHUTDOWN_GRACE.to_i} s; exiting anyway")
        exit!(0)
      end
      workers.size.times { @jobs << :stop }
      workers.each(&:join)
      @hooks.call_logged(:on_worker_shutdown)
      0
    end
  end

  # ------------------------------------------------------------------------- main

  def self.parse_args(argv)
    opts = { threads: 1, hooks: nil, check: false, script: nil }
    OptionParser.new do |o|
      o.on("--script PATH") { |v| opts[:script] = v }
      o.on("--threads N", Integer) { |v| opts[:threads] = v }
      o.on("--hooks PATH") { |v| opts[:hooks] = v }
      o.on("--check") { opts[:check] = true }
    end.parse!(argv)
    raise OptionParser::MissingArgument, "--script" if opts[:script].nil?
    raise OptionParser::InvalidArgument, "--threads must be at least 1" if opts[:threads] < 1

    opts
  end

  # The listening socket rein passed as fd 3.
  def self.inherited_socket
    %w[LISTEN_FDS LISTEN_PID LISTEN_FDNAMES].each { |name| ENV.delete(name) } # not for the app's children
    sock = Socket.for_fd(3)
    sock.close_on_exec = true
    unless sock.getsockopt(Socket::SOL_SOCKET, Socket::SO_ACCEPTCONN).bool
      sock.autoclose = false
      raise IOError, "fd 3 is not a listening socket"
    end
    sock
  end

  def self.main(argv)
    opts = parse_args(argv)
    $stdout.sync = true # the app's puts reaches rein's log at once
    $stderr.sync = true
    begin
      bundler_setup(opts[:script])
      hooks = Hooks.new(opts[:hooks])
      hooks.call(:on_worker_boot) unless opts[:check]
      app = load_rackup(opts[:script])
    rescue Exception => e # rubocop:disable Lint/RescueException -- the app's code: anything may come
      raise if e.is_a?(SignalException)

      $stderr.write(describe(e))
      return 1
    end
    return 0 if opts[:check]

    begin
      listener = inherited_socket
    rescue IOError, SystemCallError => e
      log("no listening socket on fd 3 (rein passes one with LISTEN_FDS=1): #{e.message}")
      return 1
    end
    log("serving #{opts[:script]} on fd 3, #{opts[:threads]} thread(s)")
    Server.new(app, hooks, listener, opts[:threads]).serve
  rescue OptionParser::ParseError => e
    log(e.message)
    2
  end
end

exit(ReinAdapter.main(ARGV.dup)) if $PROGRAM_NAME == __FILE__
