# Loads the application and runs its initializers, as in every Rails app.
require_relative "application"

Rails.application.initialize!
