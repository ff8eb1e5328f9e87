#!/usr/bin/perl
# rein's adapter for Perl applications: serves one PSGI app over FastCGI.
#
# rein starts each instance of a `"type": "perl"` application as
#
#     perl rein_adapter.pl --script APP.psgi [--threads N] [--thread-stack-size BYTES] [--check]
#
# with a listening socket (Unix or TCP) as fd 3, systemd style (LISTEN_FDS=1; LISTEN_PID is not checked: a
# parent that execs directly cannot know the pid in advance). The file uses only core Perl (threads and
# Thread::Queue only when --threads is above 1), so that it runs under any perl the user has; Plack is not
# needed (PSGI is a spec), though an app may use it.
#
# Design
# ------
# * The app is loaded as Plack::Util::load_psgi loads it: the file is `do`ne in a package of its own, with $0
#   set to it and @ARGV empty; its last value is the app, a code reference (or an object overloading &{}).
#   --check loads it and exits 0, or 1 with Perl's error on stderr (rein's apply-time check).
# * FastCGI 1.0, responder role, one request at a time per connection (no multiplexing). rein keeps
#   connections alive (FCGI_KEEP_CONN); management records (FCGI_GET_VALUES, rein's readiness probe) are
#   answered whenever they arrive. A request is read exactly to its end (its empty STDIN) before the app runs,
#   so rein may pipeline: send the next request, without a body, while the one before it is being answered.
# * The body is buffered whole before the app is called (psgix.input.buffered): psgi.input is an in-memory
#   handle, or an anonymous temporary file once the body passes 1 MiB; both seek. A chunked body (no
#   CONTENT_LENGTH from rein) gets CONTENT_LENGTH once it has arrived.
# * Responses go out as STDOUT records holding a CGI head (`Status: 200`, headers, blank line) then the body,
#   an empty STDOUT record and END_REQUEST. The head is held back until the first body bytes; an array body
#   goes out with its end records in one write. A filehandle body (anything with getline and close) and a
#   streaming writer (psgi.streaming: the app returns a code reference that calls the responder with
#   [status, headers] and writes through the writer it gets) send each chunk as it comes; between chunks the
#   connection is polled for FCGI_ABORT_REQUEST, after which the writer dies ("request aborted"). END_REQUEST
#   carries appStatus 0 for a complete response, 1 when it was cut short (an error after the head went out,
#   an abort): a hint for rein not to present a cut body as complete. An error before the head is a 500.
#   psgi.nonblocking is false: a delayed response must call the responder before its code reference returns,
#   and a writer still open then is closed for the app.
# * Threads (--threads N): with 1, the main thread does everything from one select loop (rein keeps a
#   connection to each instance per worker thread of its own): a connection whose BEGIN_REQUEST has arrived
#   is served to its end, then the next connection with a request waiting gets its turn. With more, N worker
#   threads (ithreads) each load the app in their own interpreter, as Unit does, before the instance is ready;
#   the main thread watches the idle connections, answers management records, and hands a connection whose
#   request begins to a free worker through a queue (its file descriptor and the bytes read past the
#   BEGIN_REQUEST); the worker serves that request and hands the connection back. N bounds the requests
#   running at once; an idle connection costs nothing.
# * Shutdown (SIGTERM or SIGINT): stop accepting (closing only this process's descriptor of the listening
#   socket, which rein and the other instances share), close idle connections, let requests in flight finish
#   for up to 10 s, exit 0.

use strict;
use warnings;

use Errno qw(EINTR EAGAIN EWOULDBLOCK);
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use File::Spec;
use IO::Handle ();
use POSIX ();
use overload ();
use Scalar::Util qw(blessed);
use Socket qw(IPPROTO_TCP TCP_NODELAY SOL_SOCKET SO_TYPE SOCK_STREAM AF_UNIX sockaddr_family);

# ---------------------------------------------------------------------------------------------- FastCGI

use constant {
    BEGIN_REQUEST     => 1,
    ABORT_REQUEST     => 2,
    END_REQUEST       => 3,
    PARAMS            => 4,
    FCGI_STDIN        => 5,
    FCGI_STDOUT       => 6,
    GET_VALUES        => 9,
    GET_VALUES_RESULT => 10,
    UNKNOWN_TYPE      => 11,
    RESPONDER         => 1,
    KEEP_CONN         => 1,
    REQUEST_COMPLETE  => 0,
    CANT_MPX_CONN     => 1,
    UNKNOWN_ROLE      => 3,
    APP_OK            => 0,
    APP_FAILED        => 1,
    MAX_CONTENT       => 65535,
    RECV_SIZE         => 65536,
    SHUTDOWN_GRACE    => 10,
    BODY_IN_MEMORY    => 1 << 20,    # a request body past this goes to a temporary file
};

my $ERROR_500 = "Internal Server Error\n";
my %VALUES = (FCGI_MAX_CONNS => 1024, FCGI_MAX_REQS => 1, FCGI_MPXS_CONNS => 0);

sub log_line {
    my ($message) = @_;
    print STDERR "rein_adapter: $message\n";
}

sub header { pack 'CCnnCx', 1, $_[0], $_[1], $_[2], 0 }

sub end_request {
    my ($rid, $app_status, $protocol_status) = @_;
    return header(END_REQUEST, $rid, 8) . pack('NCx3', $app_status // APP_OK, $protocol_status // REQUEST_COMPLETE);
}

# STDOUT records carrying $data (split at 64 KiB), then, if $end, an empty STDOUT and END_REQUEST.
sub stdout_records {
    my ($rid, $data, $end, $app_status) = @_;
    my $out = '';
    my $n = length $data;
    for (my $i = 0; $i < $n; $i += MAX_CONTENT) {
        my $chunk = substr $data, $i, MAX_CONTENT;
        $out .= header(FCGI_STDOUT, $rid, length $chunk) . $chunk;
    }
    $out .= header(FCGI_STDOUT, $rid, 0) . end_request($rid, $app_status) if $end;
    return $out;
}

# FastCGI name-value pairs -> {name => value} (bytes). Lengths are one byte below 128, else four.
sub decode_pairs {
    my ($data) = @_;
    my ($pos, $end, %pairs) = (0, length $data);
    while ($pos < $end) {
        my $nlen = ord substr $data, $pos++, 1;
        if ($nlen > 127) {
            $nlen = unpack('N', substr $data, $pos - 1, 4) & 0x7FFFFFFF;
            $pos += 3;
        }
        my $vlen = ord substr $data, $pos++, 1;
        if ($vlen > 127) {
            $vlen = unpack('N', substr $data, $pos - 1, 4) & 0x7FFFFFFF;
            $pos += 3;
        }
        last if $pos + $nlen + $vlen > $end;
        $pairs{substr $data, $pos, $nlen} = substr $data, $pos + $nlen, $vlen;
        $pos += $nlen + $vlen;
    }
    die "truncated FastCGI name-value pairs\n" unless $pos == $end;
    return \%pairs;
}

sub encode_pairs {
    my $out = '';
    while (my ($name, $value) = splice @_, 0, 2) {
        for my $n (length $name, length $value) {
            $out .= $n < 128 ? chr $n : pack 'N', $n | 0x80000000;
        }
        $out .= $name . $value;
    }
    return $out;
}

# The answer to a management record (request id 0): GET_VALUES_RESULT or UNKNOWN_TYPE.
sub management_reply {
    my ($type, $content) = @_;
    if ($type == GET_VALUES) {
        my $asked = eval { decode_pairs($content) } || {};
        my $body = encode_pairs(map { ($_, $VALUES{$_}) } grep { exists $VALUES{$_} } sort keys %$asked);
        return header(GET_VALUES_RESULT, 0, length $body) . $body;
    }
    return header(UNKNOWN_TYPE, 0, 8) . pack('Cx7', $type);
}

# ---------------------------------------------------------------------------------------------- connections
#
# A connection is a hash: fd (a raw descriptor: worker threads read and write it with POSIX calls, while the
# main thread's handle keeps it open), buf and pos (received bytes not yet parsed), alive.

sub new_conn {
    my ($fd, $buf) = @_;
    return {fd => $fd, buf => $buf // '', pos => 0, alive => 1};
}

# Writes all of $data; a failure marks the connection dead and dies.
sub send_all {
    my ($conn, $data) = @_;
    die "connection closed by rein\n" unless $conn->{alive};
    my ($off, $len) = (0, length $data);
    while ($off < $len) {
        my $n = POSIX::write($conn->{fd}, $off ? substr($data, $off) : $data, $len - $off);
        if (!defined $n) {
            next if $! == EINTR;
            $conn->{alive} = 0;
            die "connection closed by rein: $!\n";
        }
        $off += $n;
    }
}

# Reads once from the socket into the buffer (blocking unless select said it is readable): false at EOF.
sub fill {
    my ($conn) = @_;
    while (1) {
        my $n = POSIX::read($conn->{fd}, my $chunk, RECV_SIZE);
        if (!defined $n) {
            next if $! == EINTR;
            return 0;
        }
        return 0 if $n == 0;    # POSIX::read says "0 but true" at the end: true, but numerically 0
        if ($conn->{pos}) {
            substr($conn->{buf}, 0, $conn->{pos}) = '';
            $conn->{pos} = 0;
        }
        $conn->{buf} .= $chunk;
        return 1;
    }
}

# Whether a whole record is buffered.
sub complete {
    my ($conn) = @_;
    my $avail = length($conn->{buf}) - $conn->{pos};
    return 0 if $avail < 8;
    my (undef, undef, undef, $clen, $plen) = unpack 'CCnnC', substr $conn->{buf}, $conn->{pos}, 7;
    return $avail >= 8 + $clen + $plen;
}

# The type of the record at the head of the buffer (which must hold one whole).
sub peek_type { ord substr $_[0]{buf}, $_[0]{pos} + 1, 1 }

# The next record as (type, request id, content), blocking; an empty list at a clean EOF between records.
sub read_record {
    my ($conn) = @_;
    until (complete($conn)) {
        my $had = length($conn->{buf}) - $conn->{pos};
        if (!fill($conn)) {
            $conn->{alive} = 0;
            return () unless $had;
            die "connection closed inside a FastCGI record\n";
        }
    }
    my (undef, $type, $rid, $clen, $plen) = unpack 'CCnnC', substr $conn->{buf}, $conn->{pos}, 7;
    my $content = substr $conn->{buf}, $conn->{pos} + 8, $clen;
    $conn->{pos} += 8 + $clen + $plen;
    if ($conn->{pos} == length $conn->{buf}) {
        $conn->{buf} = '';
        $conn->{pos} = 0;
    }
    return ($type, $rid, $content);
}

# Whether the socket has bytes to read now.
sub readable_now {
    my ($fd) = @_;
    my $rin = '';
    vec($rin, $fd, 1) = 1;
    my $n = select(my $rout = $rin, undef, undef, 0);
    return $n > 0;
}

# What is left unparsed, to hand the connection on.
sub rest { substr $_[0]{buf}, $_[0]{pos} }

# ---------------------------------------------------------------------------------------------- requests

# A request: conn, rid, keep, head (encoded, once the app gave status and headers), head_sent, ended (its
# END_REQUEST is out), aborted.

# Reads a request's params and body (to its empty STDIN). Returns (params, body handle, body length), or an
# empty list when rein aborted it (END_REQUEST sent) or the connection closed.
sub read_request {
    my ($req) = @_;
    my ($conn, $rid) = @{$req}{qw(conn rid)};
    my ($params, $got_params, $body, $spill, $length) = ('', 0, '', undef, 0);
    while (1) {
        my ($type, $rrid, $content) = read_record($conn);
        if (!defined $type) {
            return;
        }
        if ($rrid == $rid) {
            if ($type == PARAMS && !$got_params) {
                if (length $content) {
                    $params .= $content;
                } else {
                    $got_params = 1;
                }
            } elsif ($type == FCGI_STDIN) {
                last unless length $content;
                $length += length $content;
                if ($spill) {
                    print {$spill} $content or die "cannot write the request body to a temporary file: $!\n";
                } elsif ($length > BODY_IN_MEMORY) {
                    open $spill, '+>', undef or die "cannot create a temporary file for the request body: $!\n";
                    binmode $spill;
                    print {$spill} $body, $content or die "cannot write the request body to a temporary file: $!\n";
                    $body = '';
                } else {
                    $body .= $content;
                }
            } elsif ($type == ABORT_REQUEST) {
                send_all($conn, end_request($rid, APP_FAILED));
                return;
            }
        } elsif ($rrid == 0) {
            send_all($conn, management_reply($type, $content));
        } elsif ($type == BEGIN_REQUEST) {
            send_all($conn, end_request($rrid, APP_OK, CANT_MPX_CONN));
        }
    }
    my $input;
    if ($spill) {
        seek $spill, 0, 0 or die "cannot rewind the request body: $!\n";
        $input = $spill;
    } else {
        open $input, '<', \$body or die "cannot open the request body: $!\n";
        binmode $input;
    }
    return (decode_pairs($params), $input, $length);
}

# The PSGI environment of a request.
sub psgi_env {
    my ($params, $input, $length) = @_;
    my %env = %$params;
    delete @env{qw(HTTP_CONTENT_LENGTH HTTP_CONTENT_TYPE)};
    $env{CONTENT_LENGTH} = "$length" if $length && !defined $env{CONTENT_LENGTH};
    $env{REQUEST_METHOD} //= 'GET';
    $env{SCRIPT_NAME} = '' if !defined $env{SCRIPT_NAME} || $env{SCRIPT_NAME} eq '/';
    $env{PATH_INFO} //= '';
    $env{QUERY_STRING} //= '';
    if (!defined $env{REQUEST_URI}) {
        $env{REQUEST_URI} = $env{SCRIPT_NAME} . $env{PATH_INFO};
        $env{REQUEST_URI} .= "?$env{QUERY_STRING}" if length $env{QUERY_STRING};
    }
    $env{SERVER_NAME} = 'localhost' unless length($env{SERVER_NAME} // '');
    $env{SERVER_PORT} = 80 unless length($env{SERVER_PORT} // '');
    $env{SERVER_PROTOCOL} //= 'HTTP/1.1';
    my $https = lc($env{HTTPS} // '');
    @env{
        qw(psgi.version psgi.url_scheme psgi.input psgi.errors psgi.multithread psgi.multiprocess psgi.run_once
          psgi.nonblocking psgi.streaming psgix.input.buffered psgix.cleanup psgix.cleanup.handlers)
      }
      = (
        [1, 1], ($https eq 'on' || $https eq '1') ? 'https' : 'http',
        $input, \*STDERR, $VALUES{FCGI_MAX_REQS} > 1 ? 1 : '', 1, '', '', 1, 1, 1, []
      );
    return \%env;
}

# Runs one request whose BEGIN_REQUEST was read; whether the connection takes another.
sub serve_request {
    my ($conn, $app, $rid, $keep) = @_;
    my $req = {conn => $conn, rid => $rid, keep => $keep};
    my ($params, $input, $length) = read_request($req);
    return $conn->{alive} && $keep unless $params;    # aborted before the app ran
    my $env = psgi_env($params, $input, $length);
    $req->{env} = $env;
    my $ok = eval {
        respond($req, $app->($env));
        1;
    };
    failed($req, $@) unless $ok;
    end($req, APP_FAILED) unless $req->{ended};
    for my $handler (@{$env->{'psgix.cleanup.handlers'}}) {
        eval { $handler->($env); 1 } or log_line("error in a psgix.cleanup handler: $@");
    }
    return $conn->{alive} && $keep;
}

sub respond {
    my ($req, $res) = @_;
    if (ref $res eq 'ARRAY') {
        respond_whole($req, $res);
    } elsif (ref $res eq 'CODE') {
        $res->(sub { responder($req, @_) });
        return if $req->{ended} || $req->{aborted};
        die "the delayed response's code reference returned without calling the responder\n"
          unless defined $req->{head};
        finish($req, '');    # a writer the app did not close
    } else {
        die sprintf "the PSGI app returned %s, not an array or code reference\n", defined $res ? "'$res'" : 'undef';
    }
}

# The responder given to a delayed response: [status, headers, body] answers; [status, headers] returns a
# writer.
sub responder {
    my ($req, $res) = @_;
    die "the responder takes an array reference\n" unless ref $res eq 'ARRAY';
    die "the responder was called a second time\n" if defined $req->{head};
    if (@$res >= 3) {
        respond_whole($req, $res);
        return;
    }
    $req->{head} = cgi_head(@$res);
    return bless {req => $req}, 'ReinAdapter::Writer';
}

# A response with its body: an array of strings, or a filehandle(-like object) read to its end.
sub respond_whole {
    my ($req, $res) = @_;
    die sprintf "a PSGI response has 3 elements, not %d\n", scalar @$res unless @$res == 3;
    my ($status, $headers, $body) = @$res;
    $req->{head} = cgi_head($status, $headers);
    if (ref $body eq 'ARRAY') {
        finish($req, join '', map { defined $_ ? $_ : () } @$body);
        return;
    }
    die "a PSGI response body is an array reference or a filehandle, not '$body'\n"
      unless ref $body && (ref $body eq 'GLOB' || blessed $body);
    my $done = eval {
        local $/ = \RECV_SIZE;
        my $last;
        while (defined(my $chunk = $body->getline)) {
            next unless length $chunk;
            if (defined $last) {
                send_body($req, $last);
                return 1 if $req->{aborted} || poll_aborted($req);
            }
            $last = $chunk;
        }
        finish($req, $last // '');
        1;
    };
    my $error = $@;
    eval { $body->close; 1 } or log_line("error in close() of the response body: $@");
    die $error unless $done;
}

# The CGI head for a PSGI status and headers, validated.
sub cgi_head {
    my ($status, $headers) = @_;
    die sprintf "a PSGI status is a number from 100 to 999, not '%s'\n", $status // 'undef'
      unless defined $status && $status =~ /\A[1-9][0-9][0-9]\z/;
    die "PSGI headers are an array reference\n" unless ref $headers eq 'ARRAY';
    die "PSGI headers are an even-sized list of names and values\n" if @$headers % 2;
    my $head = "Status: $status\r\n";
    for (my $i = 0; $i < @$headers; $i += 2) {
        my ($name, $value) = @$headers[$i, $i + 1];
        die sprintf "invalid PSGI header name '%s'\n", $name // 'undef'
          unless defined $name && $name =~ /\A[!#\$%&'*+.^_`|~0-9A-Za-z-]+\z/;
        $value //= '';
        die "CR, LF or NUL in the value of PSGI header '$name'\n" if $value =~ /[\r\n\0]/;
        if (lc $name eq 'content-length' && $value !~ /\A[ \t]*[0-9]+[ \t]*\z/) {
            # rein frames the body itself rather than refuse the response.
            log_line(sprintf "ignored the app's invalid Content-Length '%s'", substr $value, 0, 64);
            next;
        }
        $head .= "$name: $value\r\n";
    }
    utf8::downgrade($head, 1) or die "a PSGI header holds a wide character\n";
    return "$head\r\n";
}

sub bytes_of {
    my ($data) = @_;
    utf8::downgrade($data, 1) or die "a PSGI body holds a wide character (encode it first)\n";
    return $data;
}

sub send_body {
    my ($req, $data) = @_;
    die "request aborted by rein\n" if $req->{aborted};
    $data = bytes_of($data);
    if (!$req->{head_sent}) {
        $req->{head_sent} = 1;
        $data = $req->{head} . $data;
    }
    send_all($req->{conn}, stdout_records($req->{rid}, $data));
}

# The last body bytes and the end of the request, in one write.
sub finish {
    my ($req, $data) = @_;
    return if $req->{aborted};
    $data = bytes_of($data);
    if (!$req->{head_sent}) {
        $req->{head_sent} = 1;
        $data = $req->{head} . $data;
    }
    $req->{ended} = 1;
    send_all($req->{conn}, stdout_records($req->{rid}, $data, 1));
}

sub end {
    my ($req, $app_status) = @_;
    $req->{ended} = 1;
    eval { send_all($req->{conn}, stdout_records($req->{rid}, '', 1, $app_status)) } if $req->{conn}{alive};
}

# An error in the app: 500 if nothing was sent yet, else the request ends short.
sub failed {
    my ($req, $error) = @_;
    my $conn = $req->{conn};
    if (!$conn->{alive} || $req->{aborted}) {
        end($req, APP_FAILED) unless $req->{ended};
        return;
    }
    my $env = $req->{env};
    chomp $error;
    log_line("error in PSGI app ($env->{REQUEST_METHOD} $env->{REQUEST_URI}): $error");
    return if $req->{ended};
    if ($req->{head_sent}) {
        end($req, APP_FAILED);
        return;
    }
    $req->{ended} = 1;
    my $head = sprintf "Status: 500\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n", length $ERROR_500;
    eval { send_all($conn, stdout_records($req->{rid}, $head . $ERROR_500, 1)) };
}

# Between two chunks of a streamed response: has rein aborted the request, or gone away? A pipelined
# BEGIN_REQUEST is left where it is, for after this request.
sub poll_aborted {
    my ($req) = @_;
    my $conn = $req->{conn};
    return 0 unless $conn->{alive};
    if (!complete($conn) && readable_now($conn->{fd})) {
        if (!fill($conn)) {
            $conn->{alive} = 0;
            $req->{aborted} = 1;
            return 1;
        }
    }
    while (complete($conn) && peek_type($conn) != BEGIN_REQUEST) {
        my ($type, $rid, $content) = read_record($conn);
        if ($rid == $req->{rid} && $type == ABORT_REQUEST) {
            $req->{aborted} = 1;
            return 1;
        }
        send_all($conn, management_reply($type, $content)) if $rid == 0;
    }
    return 0;
}

package ReinAdapter::Writer;

# The writer of a streamed response (psgi.streaming): write() sends a chunk at once, close() ends the
# response. Both die once rein has aborted the request.

sub write {
    my ($self, $data) = @_;
    my $req = $self->{req};
    die "write() on a closed PSGI writer\n" if $req->{ended};
    return 1 unless defined $data && length $data;
    die "request aborted by rein\n" if $req->{head_sent} && main::poll_aborted($req);
    main::send_body($req, $data);
    return 1;
}

sub close {
    my ($self) = @_;
    my $req = $self->{req};
    main::finish($req, '') unless $req->{ended} || $req->{aborted};
    return 1;
}

sub poll_cb {
    my ($self, $cb) = @_;
    $cb->($self) until $self->{req}{ended} || $self->{req}{aborted};
}

package main;

# ---------------------------------------------------------------------------------------------- the app

# The PSGI app in $file, loaded as Plack::Util::load_psgi does.
sub load_app {
    my ($file) = @_;
    my $path = File::Spec->rel2abs($file);
    die "cannot read $path: $!\n" unless -r $path && -f _;
    my $app = sandbox($path);
    return $app if ref $app eq 'CODE' || (blessed $app && overload::Method($app, '&{}'));
    die sprintf "%s does not return a PSGI app (a code reference): its last value is %s\n", $path,
      defined $app ? "'$app'" : 'undef';
}

# `do`es the file in a package of its own, so that its subs and globals stay apart from the adapter's.
sub sandbox {
    my ($_path) = @_;
    (my $package = $_path) =~ s/([^A-Za-z0-9_])/sprintf('_%02x', ord $1)/eg;
    local $0 = $_path;
    local @ARGV = ();
    local ($@, $!);
    my $app = eval sprintf <<'END_EVAL', $package;
package ReinAdapter::Sandbox::%s;
{
    my $app = do $_path;
    if (!$app && (my $error = $@ || $!)) { die $error; }
    $app;
}
END_EVAL
    die $@ if $@;
    return $app;
}

# ---------------------------------------------------------------------------------------------- the server

my $stopping = 0;

sub parse_args {
    my @argv = @_;
    my %args = (threads => 1, stack => 0, check => 0);
    while (@argv) {
        my $arg = shift @argv;
        if ($arg eq '--check') {
            $args{check} = 1;
        } elsif ($arg =~ /\A--(script|threads|thread-stack-size)\z/ && @argv) {
            $args{$1 eq 'thread-stack-size' ? 'stack' : $1} = shift @argv;
        } else {
            die "usage: rein_adapter.pl --script FILE.psgi [--threads N] [--thread-stack-size BYTES] [--check]\n";
        }
    }
    die "rein_adapter.pl: --script is required\n" unless defined $args{script};
    die "rein_adapter.pl: --threads must be a number from 1\n" unless $args{threads} =~ /\A[1-9][0-9]*\z/;
    die "rein_adapter.pl: --thread-stack-size must be a number\n" unless $args{stack} =~ /\A[0-9]+\z/;
    return \%args;
}

# The listening socket rein passed as fd 3.
sub inherited_listener {
    open my $listener, '+<&=', 3 or die "no fd 3: $!\n";
    my $type = getsockopt $listener, SOL_SOCKET, SO_TYPE;
    die "fd 3 is not a socket\n" unless defined $type;
    die "fd 3 is not a stream socket\n" unless unpack('i', $type) == SOCK_STREAM;
    my $flags = fcntl $listener, F_GETFL, 0 or die "fcntl on fd 3: $!\n";
    # Instances share the socket: a connection another one took must not leave this one blocked in accept().
    fcntl $listener, F_SETFL, $flags | O_NONBLOCK or die "fcntl on fd 3: $!\n";
    my $local = getsockname $listener;
    my $unix = defined $local && sockaddr_family($local) == AF_UNIX;
    return ($listener, $unix);
}

# Connections: fd => {sock (the handle keeping it open), conn, busy (a worker has it)}.
my %conns;
my ($listener, $unix_listener);

sub accept_all {
    while (1) {
        my $sock;
        if (!accept $sock, $listener) {
            return if $! == EAGAIN || $! == EWOULDBLOCK || $! == EINTR;
            log_line("accept failed: $!");    # EMFILE and the like: let it breathe
            select undef, undef, undef, 0.05;
            return;
        }
        setsockopt $sock, IPPROTO_TCP, TCP_NODELAY, 1 unless $unix_listener;
        my $fd = fileno $sock;
        $conns{$fd} = {sock => $sock, conn => new_conn($fd), busy => 0};
    }
}

sub close_conn {
    my ($fd) = @_;
    my $entry = delete $conns{$fd} or return;
    close $entry->{sock};
}

# The records an idle connection holds, up to the request they begin: management records are answered,
# leftovers of an earlier request dropped. (rid, keep) of the request, or an empty list.
sub next_begin {
    my ($conn) = @_;
    while (complete($conn)) {
        my ($type, $rid, $content) = read_record($conn);
        if ($rid == 0) {
            send_all($conn, management_reply($type, $content));
            next;
        }
        next unless $type == BEGIN_REQUEST;
        die "short FCGI_BEGIN_REQUEST record\n" if length $content < 8;
        my ($role, $flags) = unpack 'nC', $content;
        if ($role != RESPONDER) {
            send_all($conn, end_request($rid, APP_OK, UNKNOWN_ROLE));
            next;
        }
        return ($rid, $flags & KEEP_CONN);
    }
    return;
}

# Serves what an idle connection's buffer holds: one request (inline, or handed to a worker). Whether the
# connection stays open.
sub step {
    my ($fd, $app, $jobs) = @_;
    my $entry = $conns{$fd};
    my $conn = $entry->{conn};
    my $keep = eval {
        my ($rid, $keep) = next_begin($conn);
        return 1 unless defined $rid;
        return 0 if $stopping;
        if ($jobs) {
            $entry->{busy} = 1;
            $jobs->enqueue([$fd, $rid, $keep, rest($conn)]);
            return 1;
        }
        serve_request($conn, $app, $rid, $keep);
    };
    if (!defined $keep) {
        log_line("connection dropped: $@") unless $stopping || !$conn->{alive};
        $keep = 0;
    }
    return $keep && !$stopping;
}

# The main loop: accepts, watches idle connections, serves (or hands out) the requests they carry.
sub serve {
    my ($app, $jobs, $done, $wake) = @_;
    my @ready;    # connections with a whole record buffered, in turn
    while (!$stopping) {
        if (@ready) {
            my @round = @ready;
            @ready = ();
            for my $fd (@round) {
                my $entry = $conns{$fd} or next;
                if (!step($fd, $app, $jobs)) {
                    close_conn($fd);
                } elsif (!$entry->{busy} && complete($entry->{conn})) {
                    push @ready, $fd;
                }
            }
            next;
        }
        my $rin = '';
        vec($rin, fileno $listener, 1) = 1;
        vec($rin, fileno $wake, 1) = 1 if $wake;
        vec($rin, $_, 1) = 1 for grep { !$conns{$_}{busy} } keys %conns;
        my $n = select(my $rout = $rin, undef, undef, 1);
        next if $n <= 0;
        if ($wake && vec $rout, fileno $wake, 1) {
            sysread $wake, my $junk, 512;
            push @ready, took_back($done);
        }
        accept_all() if vec $rout, fileno $listener, 1;
        for my $fd (keys %conns) {
            next if $conns{$fd}{busy} || !vec $rout, $fd, 1;
            if (!fill($conns{$fd}{conn})) {
                close_conn($fd);
            } elsif (complete($conns{$fd}{conn})) {
                push @ready, $fd;
            }
        }
    }
}

# Connections the workers handed back: the ones with a whole record buffered.
sub took_back {
    my ($done) = @_;
    my @ready;
    while (defined(my $item = $done->dequeue_nb)) {
        my ($fd, $rest, $keep) = @$item;
        my $entry = $conns{$fd} or next;
        $entry->{busy} = 0;
        if (!$keep || $stopping) {
            close_conn($fd);
            next;
        }
        $entry->{conn} = new_conn($fd, $rest);
        push @ready, $fd if complete($entry->{conn});
    }
    return @ready;
}

# ---------------------------------------------------------------------------------------------- threads

sub worker {
    my ($script, $jobs, $done, $boot, $wake_fd) = @_;
    my $app = eval { load_app($script) };
    $boot->enqueue($app ? '' : ($@ || "the app did not load\n"));
    return unless $app;
    while (defined(my $job = $jobs->dequeue)) {
        my ($fd, $rid, $keep, $rest) = @$job;
        my $conn = new_conn($fd, $rest);
        my $again = eval { serve_request($conn, $app, $rid, $keep) };
        log_line("connection dropped: $@") if !defined $again && $conn->{alive};
        $done->enqueue([$fd, $conn->{alive} ? rest($conn) : '', $again ? 1 : 0]);
        POSIX::write($wake_fd, 'x', 1);
    }
}

# Starts the workers, each loading the app; dies with the first error if one could not.
sub start_workers {
    my ($args) = @_;
    require threads;
    require Thread::Queue;
    my ($jobs, $done, $boot) = map { Thread::Queue->new } 1 .. 3;
    pipe my $wake, my $wake_w or die "pipe: $!\n";
    for my $h ($wake, $wake_w) {
        my $flags = fcntl $h, F_GETFL, 0;
        fcntl $h, F_SETFL, $flags | O_NONBLOCK;
    }
    # Signals go to the main thread: the workers start with them blocked.
    my $blocked = POSIX::SigSet->new(POSIX::SIGTERM(), POSIX::SIGINT());
    my $old = POSIX::SigSet->new;
    POSIX::sigprocmask(POSIX::SIG_BLOCK(), $blocked, $old);
    my %opts = $args->{stack} ? (stack_size => $args->{stack}) : ();
    my @workers = map {
        threads->create(\%opts, \&worker, $args->{script}, $jobs, $done, $boot, fileno $wake_w)
          or die "cannot start a thread: $!\n"
    } 1 .. $args->{threads};
    POSIX::sigprocmask(POSIX::SIG_SETMASK(), $old);
    my @errors = grep { length } map { $boot->dequeue } @workers;
    die $errors[0] if @errors;
    return ($jobs, $done, $wake, $wake_w, \@workers);
}

# ---------------------------------------------------------------------------------------------- main

sub give_up {
    my ($what) = @_;
    log_line("$what still running after ${\SHUTDOWN_GRACE} s; exiting anyway");
    POSIX::_exit(0);
}

sub main {
    my $args = eval { parse_args(@ARGV) };
    if (!$args) {
        print STDERR $@;
        return 2;
    }
    $VALUES{FCGI_MAX_REQS} = $args->{threads};
    delete @ENV{qw(LISTEN_FDS LISTEN_PID LISTEN_FDNAMES)};    # not for the app's own children
    STDOUT->autoflush(1);    # the app's print reaches rein's log at once
    STDERR->autoflush(1);
    $SIG{PIPE} = 'IGNORE';
    my $threaded = $args->{threads} > 1 && !$args->{check};
    my $app;
    if (!$threaded) {
        $app = eval { load_app($args->{script}) };
        if (!$app) {
            print STDERR $@;
            return 1;
        }
        return 0 if $args->{check};
    }
    my ($jobs, $done, $wake, $wake_w, $workers);
    if ($threaded) {    # before the listener is opened: a thread's copy of a handle is a dup of its descriptor
        ($jobs, $done, $wake, $wake_w, $workers) = eval { start_workers($args) };
        if (!$jobs) {
            print STDERR $@;
            POSIX::_exit(1);    # the workers that did load are not waited for
        }
    }
    ($listener, $unix_listener) = eval { inherited_listener() };
    if (!$listener) {
        log_line("no listening socket on fd 3 (rein passes one with LISTEN_FDS=1): $@");
        POSIX::_exit(1);
    }
    $SIG{TERM} = $SIG{INT} = sub {
        return if $stopping;
        $stopping = 1;
        # Single-threaded, the request in progress runs on this thread: the loop stops after it, or this does.
        if (!$threaded) {
            $SIG{ALRM} = sub { give_up('a request') };
            alarm SHUTDOWN_GRACE;
        }
    };
    log_line(sprintf 'serving PSGI %s on fd 3 (%s), %d thread(s)', $args->{script}, $unix_listener ? 'unix' : 'tcp',
        $args->{threads});
    serve($app, $jobs, $done, $wake);
    close $listener;    # only this descriptor: rein and the other instances keep theirs
    close_conn($_) for grep { !$conns{$_}{busy} } keys %conns;
    return 0 unless $threaded;
    my $deadline = time + SHUTDOWN_GRACE;
    while (%conns) {
        my $left = $deadline - time;
        give_up(scalar(keys %conns) . ' connection(s)') if $left <= 0;
        my $rin = '';
        vec($rin, fileno $wake, 1) = 1;
        select(my $rout = $rin, undef, undef, $left);
        sysread $wake, my $junk, 512;
        took_back($done);
    }
    $jobs->enqueue((undef) x @$workers);
    $_->join for @$workers;
    return 0;
}

exit main();
