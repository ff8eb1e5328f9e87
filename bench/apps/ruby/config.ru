# Rack hello for bench/run-all: rein's ruby application and Puma run this same file (the bytes of the other hellos).
BODY = "Hello".freeze

run ->(_env) { [200, { "content-type" => "text/plain", "content-length" => BODY.bytesize.to_s }, [BODY]] }
