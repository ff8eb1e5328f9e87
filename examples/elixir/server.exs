# An Elixir HTTP/1.1 app run by rein, with nothing beyond Erlang/OTP: it accepts on the listening socket rein
# passes as fd 3 (`:gen_tcp.listen(0, [{:fd, 3}, ...])`), answers with keep-alive, and on SIGTERM stops
# accepting, lets the requests in flight finish, closes its idle connections and exits.
# Run outside rein (no LISTEN_FDS for this process), it listens on $PORT (default 8080) instead.

defmodule Hello.Listener do
  @moduledoc "The listening socket: the one passed as fd 3 (systemd's protocol), or one of its own."

  @opts [:binary, active: false, packet: :http_bin, backlog: 1024]

  def open do
    if passed?() do
      # A Unix socket must be opened as `:local`, a TCP one as `:inet` (or `:inet6`): rein names its Unix
      # socket in REIN_SOCKET.
      families = if System.get_env("REIN_SOCKET"), do: [:local], else: [:inet, :inet6]

      Enum.reduce_while(families, {:error, :einval}, fn family, _ ->
        case :gen_tcp.listen(0, [{:fd, 3}, family | @opts]) do
          {:ok, socket} -> {:halt, {:ok, socket}}
          error -> {:cont, error}
        end
      end)
    else
      port = String.to_integer(System.get_env("PORT", "8080"))
      :gen_tcp.listen(port, [ip: {127, 0, 0, 1}, reuseaddr: true] ++ @opts)
    end
  end

  defp passed? do
    System.get_env("LISTEN_PID") == System.pid() and
      String.to_integer(System.get_env("LISTEN_FDS", "0")) >= 1
  end
end

defmodule Hello.Server do
  @moduledoc """
  Owns the listening socket and the connections: acceptors hand each connection to a process of its own, which
  the server monitors, so that a stop can wait for them.
  """

  @acceptors 4
  @drain_ms 9_000

  def run(listen) do
    server = self()
    for _ <- 1..@acceptors, do: spawn_link(fn -> accept(listen, server) end)
    loop(listen, %{})
  end

  defp accept(listen, server) do
    case :gen_tcp.accept(listen) do
      {:ok, socket} ->
        conn = spawn(fn -> receive(do: (:go -> Hello.Conn.serve(socket))) end)
        :ok = :gen_tcp.controlling_process(socket, conn)
        send(server, {:conn, conn})
        send(conn, :go)
        accept(listen, server)

      {:error, :closed} ->
        :ok

      {:error, reason} ->
        # Out of descriptors, or the like: the connection waits in the kernel; try again shortly.
        IO.puts(:stderr, "accept: #{inspect(reason)}")
        Process.sleep(100)
        accept(listen, server)
    end
  end

  defp loop(listen, conns) do
    receive do
      {:conn, pid} ->
        loop(listen, Map.put(conns, Process.monitor(pid), pid))

      {:DOWN, ref, :process, _, _} ->
        loop(listen, Map.delete(conns, ref))

      {:stop, from} ->
        # Closing our copy of the socket never refuses a connection: rein keeps it open for the other
        # instances, and the kernel queues what comes meanwhile.
        :gen_tcp.close(listen)
        Enum.each(conns, fn {_, pid} -> send(pid, :stop) end)
        drain(conns, System.monotonic_time(:millisecond) + @drain_ms)
        send(from, :stopped)
    end
  end

  defp drain(conns, _deadline) when map_size(conns) == 0, do: :ok

  defp drain(conns, deadline) do
    left = max(deadline - System.monotonic_time(:millisecond), 0)

    receive do
      {:DOWN, ref, :process, _, _} ->
        drain(Map.delete(conns, ref), deadline)

      {:conn, pid} ->
        send(pid, :stop)
        drain(Map.put(conns, Process.monitor(pid), pid), deadline)
    after
      left -> :ok
    end
  end
end

defmodule Hello.Conn do
  @moduledoc "One keep-alive connection: requests one after the other until either side closes or a stop."

  @idle_ms 60_000
  @read_ms 10_000

  def serve(socket) do
    # The request line is read as a message, so that a stop arriving while the connection is idle is seen.
    :ok = :inet.setopts(socket, active: :once, packet: :http_bin)

    receive do
      {:http, ^socket, {:http_request, method, target, version}} ->
        :ok = :inet.setopts(socket, active: false)
        request(socket, method, target, version)

      {:http, ^socket, _malformed} ->
        reply(socket, 400, "bad request\n", false, true)

      {:tcp_closed, ^socket} ->
        :ok

      {:tcp_error, ^socket, _} ->
        :gen_tcp.close(socket)

      :stop ->
        :gen_tcp.close(socket)
    after
      @idle_ms -> :gen_tcp.close(socket)
    end
  end

  defp request(socket, method, target, version) do
    with {:ok, headers} <- headers(socket, %{}),
         :ok <- :inet.setopts(socket, packet: :raw),
         {:ok, _body} <- body(socket, headers) do
      # A stop asked during the request closes the connection after this answer, and says so.
      close = not keep_alive?(version, headers) or stopping?()
      {status, text} = route(target)
      reply(socket, status, text, method == :HEAD, close)
      if close, do: :gen_tcp.close(socket), else: serve(socket)
    else
      _ -> :gen_tcp.close(socket)
    end
  end

  defp route({:abs_path, "/health" <> _}), do: {200, "ok\n"}
  defp route({:abs_path, _}), do: {200, "hello from elixir:#{System.pid()}\n"}
  defp route(_), do: {400, "bad request\n"}

  defp headers(socket, acc) do
    case :gen_tcp.recv(socket, 0, @read_ms) do
      {:ok, {:http_header, _, name, _, value}} ->
        headers(socket, Map.put(acc, lower(name), value))

      {:ok, :http_eoh} ->
        {:ok, acc}

      other ->
        {:error, other}
    end
  end

  defp lower(name) when is_atom(name), do: name |> Atom.to_string() |> String.downcase()
  defp lower(name), do: String.downcase(name)

  defp body(socket, headers) do
    chunked = String.downcase(Map.get(headers, "transfer-encoding", "")) =~ "chunked"

    case Integer.parse(Map.get(headers, "content-length", "0")) do
      _ when chunked -> chunks(socket, [])
      {0, ""} -> {:ok, ""}
      {n, ""} when n > 0 -> :gen_tcp.recv(socket, n, @read_ms)
      _ -> {:error, :bad_length}
    end
  end

  defp chunks(socket, acc) do
    :ok = :inet.setopts(socket, packet: :line)

    with {:ok, line} <- :gen_tcp.recv(socket, 0, @read_ms),
         {size, _} <- line |> String.trim() |> String.split(";") |> hd() |> Integer.parse(16) do
      if size == 0 do
        trailers(socket, acc)
      else
        :ok = :inet.setopts(socket, packet: :raw)

        with {:ok, <<data::binary-size(size), "\r\n">>} <-
               :gen_tcp.recv(socket, size + 2, @read_ms) do
          chunks(socket, [acc, data])
        end
      end
    else
      _ -> {:error, :bad_chunk}
    end
  end

  defp trailers(socket, acc) do
    case :gen_tcp.recv(socket, 0, @read_ms) do
      {:ok, "\r\n"} -> :inet.setopts(socket, packet: :raw) && {:ok, IO.iodata_to_binary(acc)}
      {:ok, _trailer} -> trailers(socket, acc)
      error -> error
    end
  end

  defp keep_alive?(version, headers) do
    connection = String.downcase(Map.get(headers, "connection", ""))

    case version do
      {1, 1} -> not (connection =~ "close")
      _ -> connection =~ "keep-alive"
    end
  end

  defp stopping? do
    receive do
      :stop -> true
    after
      0 -> false
    end
  end

  defp reply(socket, status, text, head_only, close) do
    reason = %{200 => "OK", 400 => "Bad Request"}[status]

    head = [
      "HTTP/1.1 #{status} #{reason}\r\n",
      "Content-Type: text/plain\r\n",
      "Content-Length: #{byte_size(text)}\r\n",
      if(close, do: "Connection: close\r\n", else: ""),
      "\r\n"
    ]

    :gen_tcp.send(socket, if(head_only, do: head, else: [head, text]))
  end
end

case Hello.Listener.open() do
  {:ok, listen} ->
    server = self()

    # The trap runs before the VM's own SIGTERM handling (`System.stop/0`, which would end the connections
    # with the VM's processes): it holds it back until the drain is done and the VM halts.
    {:ok, _} =
      System.trap_signal(:sigterm, fn ->
        send(server, {:stop, self()})

        receive do
          :stopped -> :ok
        after
          10_000 -> :ok
        end
      end)

    IO.puts("serving on #{inspect(:inet.sockname(listen))}")
    Hello.Server.run(listen)
    IO.puts("stopped")

    # Every connection is closed: halt now rather than return, which would leave the script's end (Elixir's
    # checks of the modules above) racing the VM's stop.
    System.halt(0)

  {:error, reason} ->
    IO.puts(:stderr, "no listening socket: #{inspect(reason)}")
    System.halt(1)
end
