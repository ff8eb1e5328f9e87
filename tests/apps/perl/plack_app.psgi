# A Plack app (Debian's libplack-perl): Plack::Builder with middleware, mounts and Plack::Request.
use strict;
use warnings;
use Plack::Builder;
use Plack::Request;

my $hello = sub {
    my $req = Plack::Request->new(shift);
    my $name = $req->param('name') // 'world';
    return [200, ['Content-Type' => 'text/plain'], ["Hello, $name, from " . $req->script_name . "\n"]];
};

my $echo = sub {
    my $req = Plack::Request->new(shift);
    return [200, ['Content-Type' => 'text/plain'], ['posted: ' . $req->content]];
};

builder {
    enable 'ContentLength';
    enable sub {
        my $app = shift;
        sub { my $res = $app->(@_); push @{$res->[1]}, 'X-Plack' => 'builder'; $res };
    };
    mount '/hello' => $hello;
    mount '/echo' => $echo;
    mount '/' => sub { [404, ['Content-Type' => 'text/plain'], ["no such page\n"]] };
};
