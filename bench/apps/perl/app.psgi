# PSGI hello for bench/run-all: rein's perl application and Starman run this same file (the bytes of the other
# hellos).
use strict;
use warnings;

my $body = "Hello";

sub {
    return [200, ["Content-Type" => "text/plain", "Content-Length" => length $body], [$body]];
};
