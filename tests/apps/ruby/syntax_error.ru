# A rackup file that does not parse.
run lambda { |env|
  [200, {}, ["unbalanced\n"]]
