Rails.application.routes.draw do
  root "hello#index"
  get "health", to: "hello#health"
end
