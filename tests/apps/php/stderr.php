<?php
// What a script writes to its standard error (php://stderr, as Monolog's stderr handler and containerised
// apps do) and what it logs with error_log().
file_put_contents('php://stderr', "stderr-line-for-the-test\n");
error_log('error-log-line-for-the-test');
echo 'logged';
