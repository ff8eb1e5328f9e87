# A rackup file whose app fails to boot: rein refuses it with this error.
require "json"
raise ArgumentError, "this app refuses to boot"
run ->(_env) { [200, {}, ["never\n"]] }
