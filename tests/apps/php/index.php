<?php
// The front controller: every path that is not a file or a script lands here.
header('Content-Type: text/plain');
echo "front|", $_SERVER['REQUEST_URI'], "|", $_SERVER['SCRIPT_NAME'], "|", $_SERVER['PATH_INFO'] ?? '', "\n";
