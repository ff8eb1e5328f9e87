# A .psgi whose last value is not a code reference.
my $config = {port => 5000};
42;
