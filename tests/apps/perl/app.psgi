# A PSGI app for rein's Perl adapter tests: one route per part of the PSGI spec. Core Perl only.
#
# Routes:
#   /hello          plain text "Hello, world"
#   /env[/...]      JSON of the environment: every string value, psgi.version, the flags, and what
#                   psgi.input and psgi.errors are
#   /echo           psgi.input read to its end, then again after a seek to 0: the body back if both agree
#   /upload         JSON {"bytes": N, "sha256": hex, "content_length": CONTENT_LENGTH} of psgi.input
#   /stream         a streamed response: [200, headers] to the responder, 100 chunks through the writer
#   /slow_stream    200 chunks 20 ms apart through the writer (for aborts)
#   /gated?file=F   a streamed response: "first" at once, "second" once the file F exists (up to 10 s)
#   /delayed        a delayed response: the responder called with all three elements
#   /file           a filehandle body: a real file, read to its end by the server
#   /object         an object body (getline/close), whose close() writes "object body closed" to stderr
#   /error          dies before answering: the adapter answers 500
#   /error_after_head  writes a chunk, then dies: the body is cut short
#   /errors         writes a line to psgi.errors
#   /cleanup        registers a psgix.cleanup handler that writes a line to STDERR after the response
#   /status/N       answers that status
#   /sleep?ms=N     sleeps N ms ("sleeping N ms" on stderr first), counting the requests running at once
#                   across the process's threads (in the file $CONC_FILE); /maxconc returns and resets the
#                   highest count seen
#   /runtime        JSON {"greeting": $GREETING, "cwd": the working directory, "pid": $$, "tid": the thread's id,
#                   "stack": its stack size (0 without threads)}
#   /wide           a body with a wide character: an error the adapter answers 500

use strict;
use warnings;
use Cwd ();
use Digest::SHA ();
use Fcntl qw(:flock);
use JSON::PP ();
use Time::HiRes ();

my $json = JSON::PP->new->canonical;

sub text {
    my ($body, $status) = @_;
    return [$status // 200, ['Content-Type' => 'text/plain', 'Content-Length' => length $body], [$body]];
}

sub as_json { [200, ['Content-Type' => 'application/json'], [$json->encode($_[0])]] }

sub slurp {
    my ($fh) = @_;
    my ($all, $buf) = ('');
    while (my $n = $fh->read($buf, 8192)) {
        $all .= $buf;
    }
    return $all;
}

# The count of requests running at once, kept in a file so that every thread (its own interpreter) sees it.
sub concurrency {
    my ($delta, $reset) = @_;
    my $path = $ENV{CONC_FILE} // '/tmp/rein-perl-conc';
    open my $fh, '+>>', $path or die "$path: $!";
    flock $fh, LOCK_EX;
    seek $fh, 0, 0;
    my ($now, $max) = split ' ', (<$fh> // '0 0');
    $now //= 0;
    $max //= 0;
    my $seen = $max;
    $now += $delta;
    $max = $now if $now > $max;
    $max = 0 if $reset;
    truncate $fh, 0;
    print {$fh} "$now $max\n";
    close $fh;
    return $seen;
}

{
    package Counted;
    sub new { my ($class, @lines) = @_; bless {lines => \@lines}, $class }
    sub getline { shift @{$_[0]{lines}} }
    sub close { print STDERR "object body closed\n" }
}

my %routes = (
    '/hello' => sub { text("Hello, world") },
    '/env' => sub {
        my ($env) = @_;
        my %out;
        for my $key (keys %$env) {
            my $v = $env->{$key};
            $out{$key} = ref $v ? ref $v : $v;
        }
        $out{'psgi.version'} = $env->{'psgi.version'};
        $out{'psgi.input.seekable'} = $env->{'psgi.input'}->seek(0, 0) ? 1 : 0;
        $out{'psgi.errors.is_stderr'} = fileno($env->{'psgi.errors'}) == fileno(STDERR) ? 1 : 0;
        return as_json(\%out);
    },
    '/echo' => sub {
        my ($env) = @_;
        my $input = $env->{'psgi.input'};
        my $first = slurp($input);
        $input->seek(0, 0) or die "psgi.input does not seek";
        my $again = slurp($input);
        return text("psgi.input read differently after a seek", 500) unless $first eq $again;
        return [200, ['Content-Type' => 'application/octet-stream'], [$first]];
    },
    '/upload' => sub {
        my ($env) = @_;
        my $body = slurp($env->{'psgi.input'});
        return as_json({bytes => length $body, sha256 => Digest::SHA::sha256_hex($body),
            content_length => $env->{CONTENT_LENGTH}});
    },
    '/stream' => sub {
        return sub {
            my ($respond) = @_;
            my $writer = $respond->([200, ['Content-Type' => 'text/plain']]);
            $writer->write(sprintf "chunk %03d\n", $_) for 0 .. 99;
            $writer->close;
        };
    },
    '/slow_stream' => sub {
        return sub {
            my ($respond) = @_;
            my $writer = $respond->([200, ['Content-Type' => 'text/plain']]);
            for my $i (0 .. 199) {
                $writer->write(sprintf "slow %03d\n", $i);
                Time::HiRes::sleep(0.02);
            }
            $writer->close;
        };
    },
    '/gated' => sub {
        my ($env) = @_;
        my ($file) = $env->{QUERY_STRING} =~ /file=([^&]+)/;
        return sub {
            my $writer = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $writer->write("first\n");
            my $deadline = time + 10;
            Time::HiRes::sleep(0.01) until -e $file || time > $deadline;
            $writer->write(-e $file ? "second\n" : "timed out\n");
            $writer->close;
        };
    },
    '/delayed' => sub {
        return sub {
            my ($respond) = @_;
            $respond->([202, ['Content-Type' => 'text/plain', 'X-Delayed' => 'yes'], ["delayed ", "answer\n"]]);
        };
    },
    '/file' => sub {
        open my $fh, '<', __FILE__ or die "cannot open myself: $!";
        return [200, ['Content-Type' => 'text/plain'], $fh];
    },
    '/object' => sub { [200, ['Content-Type' => 'text/plain'], Counted->new("one\n", "two\n", "three\n")] },
    '/error' => sub { die "this app fails on purpose\n" },
    '/error_after_head' => sub {
        return sub {
            my $writer = $_[0]->([200, ['Content-Type' => 'text/plain']]);
            $writer->write("partial\n");
            die "this app fails after its head\n";
        };
    },
    '/errors' => sub {
        $_[0]{'psgi.errors'}->print("a line on psgi.errors\n");
        text("logged");
    },
    '/cleanup' => sub {
        push @{$_[0]{'psgix.cleanup.handlers'}}, sub { print STDERR "cleanup ran for $_[0]{PATH_INFO}\n" };
        text("cleanup registered");
    },
    '/sleep' => sub {
        my ($env) = @_;
        my ($ms) = ($env->{QUERY_STRING} =~ /ms=(\d+)/);
        $ms //= 100;
        concurrency(1);
        print STDERR "sleeping $ms ms\n";
        Time::HiRes::sleep($ms / 1000);
        concurrency(-1);
        text("slept $ms ms");
    },
    '/maxconc' => sub { text(concurrency(0, 1)) },
    '/runtime' => sub {
        as_json({greeting => $ENV{GREETING}, cwd => Cwd::getcwd(), pid => $$,
            tid => $INC{'threads.pm'} ? threads->tid : 0,
            stack => $INC{'threads.pm'} ? threads->self->get_stack_size : 0});
    },
    '/wide' => sub { [200, ['Content-Type' => 'text/plain'], ["caf\x{e9} \x{263a}"]] },
);

my $app = sub {
    my ($env) = @_;
    my $path = $env->{PATH_INFO};
    return text("status $1", $1) if $path =~ m{\A/status/(\d+)\z};
    my ($first) = $path =~ m{\A(/[^/]*)};
    my $route = $routes{$first // ''} or return text("not found: $path", 404);
    return $route->($env);
};
