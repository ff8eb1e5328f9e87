# A Sinatra app run by rein's `"type": "ruby"`: rein loads this rackup file in each instance with its own Rack
# adapter (no Puma, no unicorn), so the file is the one `rackup` would take. Debian's ruby-sinatra and ruby-rack.
require "sinatra/base"

class Hello < Sinatra::Base
  # The instance that answered, so that a reload shows its new pids.
  get "/" do
    content_type :text
    "hello from rack:#{Process.pid}\n"
  end

  get "/health" do
    content_type :text
    "ok\n"
  end

  get "/hi/:name" do
    content_type :text
    "hi #{params['name']}, from thread #{Thread.current.object_id} of #{Process.pid}\n"
  end
end

run Hello
