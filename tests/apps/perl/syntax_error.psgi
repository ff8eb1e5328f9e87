# A .psgi that does not compile.
my $app = sub { [200, [], ["never"]] ;
