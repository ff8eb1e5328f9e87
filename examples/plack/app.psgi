# A Plack app run by rein's `"type": "perl"`: rein loads this .psgi file in each instance with its own PSGI
# adapter (no Starman), as plackup would. Debian's libplack-perl: Plack::Builder, its middleware, Plack::Request.
use strict;
use warnings;
use Plack::Builder;
use Plack::Request;

# The instance that answered, so that a reload shows its new pids.
my $hello = sub {
    return [200, ['Content-Type' => 'text/plain'], ["hello from plack:$$\n"]];
};

my $greet = sub {
    my $req = Plack::Request->new(shift);
    my $name = $req->param('name') // 'world';
    return [200, ['Content-Type' => 'text/plain'], ["hi $name, from " . $req->script_name . "\n"]];
};

builder {
    # Plack's own middleware: Content-Length on every answer that lacks one, X-Runtime (seconds spent).
    enable 'ContentLength';
    enable 'Runtime';
    # A middleware of the app's own: the header names the instance.
    enable sub {
        my $app = shift;
        sub { my $res = $app->(@_); push @{$res->[1]}, 'X-Served-By' => "plack:$$"; $res };
    };
    mount '/health' => sub { [200, ['Content-Type' => 'text/plain'], ["ok\n"]] };
    mount '/hi' => $greet;
    mount '/' => $hello;
};
