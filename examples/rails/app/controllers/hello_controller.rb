# The instance that answered is in each answer, so that a reload shows its new pids.
class HelloController < ApplicationController
  def index
    render plain: "hello from rails #{Rails.version}:#{Process.pid}\n"
  end

  def health
    render plain: "ok\n"
  end
end
