# A minimal Rails 6.1 application: Action Controller only (no database, no assets, no mailers), on Debian's
# ruby-rails gems. With no Gemfile beside config.ru, the gems come from Ruby's own load path; an app with a
# Gemfile has it honoured by rein (`bundler/setup` runs first).
require "rails"
require "action_controller/railtie"

module Hello
  class Application < Rails::Application
    config.load_defaults 6.1
    config.root = File.expand_path("..", __dir__)
    # Production behaviour: code loaded once at boot, before the instance is ready for traffic.
    config.eager_load = true
    config.cache_classes = true
    config.consider_all_requests_local = false
    # The log on stdout: rein writes it to the app's log (STATE/logs/rails.log), each line with its instance.
    config.logger = ActiveSupport::TaggedLogging.new(ActiveSupport::Logger.new($stdout))
    config.log_level = :info
    config.log_tags = [:request_id]
  end
end
