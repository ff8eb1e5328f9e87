// Answers after `ms` milliseconds (default 300): keeps an instance busy for the scaling test.
require('http').createServer((req, res) => {
    const ms = Number(new URL(req.url, 'http://x').searchParams.get('ms') || 300);
    setTimeout(() => res.end(`slow:${process.pid}\n`), ms);
}).listen(3000);
