<?php
// What PHP saw of the request, as JSON.
header('Content-Type: application/json');
$files = [];
foreach ($_FILES as $k => $f) {
    $files[$k] = ['name' => $f['name'], 'size' => $f['size'], 'md5' => md5_file($f['tmp_name'])];
}
echo json_encode([
    'method' => $_SERVER['REQUEST_METHOD'],
    'get' => $_GET,
    'post' => $_POST,
    'cookie' => $_COOKIE,
    'x_test' => $_SERVER['HTTP_X_TEST'] ?? null,
    'script_name' => $_SERVER['SCRIPT_NAME'],
    'script_filename' => $_SERVER['SCRIPT_FILENAME'],
    'path_info' => $_SERVER['PATH_INFO'] ?? '',
    'request_uri' => $_SERVER['REQUEST_URI'],
    'query_string' => $_SERVER['QUERY_STRING'],
    'remote_addr' => $_SERVER['REMOTE_ADDR'] ?? null,
    'document_root' => $_SERVER['DOCUMENT_ROOT'],
    'files' => $files,
    'input_md5' => md5(file_get_contents('php://input')),
    'greeting' => getenv('GREETING'),
    'memory_limit' => ini_get('memory_limit'),
    'extra' => $_SERVER['APP_MODE'] ?? null,
    'https' => $_SERVER['HTTPS'] ?? null,
    'request_scheme' => $_SERVER['REQUEST_SCHEME'] ?? null,
]);
