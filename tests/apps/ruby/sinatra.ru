# A Sinatra app (Debian's ruby-sinatra), run as its users run it: a classic config.ru.
require "sinatra/base"

class Greeter < Sinatra::Base
  get "/hi/:name" do
    content_type :text
    "hi #{params['name']} from #{request.script_name}#{request.path_info}\n"
  end

  post "/form" do
    content_type :text
    "got #{params['a']} and #{params['b']}\n"
  end
end

run Greeter
