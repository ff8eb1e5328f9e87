<?php
http_response_code(418);
header('X-Custom: yes');
header('Set-Cookie: a=1');
header('Set-Cookie: b=2', false);
echo "teapot";
