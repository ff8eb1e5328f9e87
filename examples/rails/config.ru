# The rackup file `rails new` writes: rein's `"type": "ruby"` loads it unchanged in each instance.
require_relative "config/environment"

run Rails.application
Rails.application.load_server
