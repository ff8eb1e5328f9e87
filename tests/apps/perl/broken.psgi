# A .psgi that dies while it loads: rein refuses it with this error.
use strict;
use warnings;

die "cannot connect to the database at startup\n";
